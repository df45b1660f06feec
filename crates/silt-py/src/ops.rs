//! The point operations shared by `Db`, `ColumnFamily` and `Snapshot`: get, put, delete,
//! and their mapping forms (`db[k]`, `db[k] = v`, `del db[k]`, `k in db`), written once
//! here so the classes cannot drift apart.
//!
//! Invariants: arguments are converted (which may run Python code) before the GIL is
//! released; the engine call runs with it released (`View::read`, `Shared::call`); a
//! write is one engine batch, so it is atomic and acknowledged per the sync mode.

use std::sync::Arc;

use pyo3::exceptions::PyKeyError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::convert;
use crate::shared::Shared;
use crate::view::{write_options, Target, View};

/// The value of `key`, or `None`.
pub(crate) fn get<'py>(
    py: Python<'py>,
    shared: &Arc<Shared>,
    view: &View,
    target: Target,
    key: &Bound<'py, PyAny>,
) -> PyResult<Option<Bound<'py, PyBytes>>> {
    let k = convert::key(key, shared.str_keys)?;
    let v = view.read(py, shared, |db, reader| {
        let cf = target.resolve(db)?;
        reader.get(&cf, &k)
    })?;
    Ok(v.map(|v| convert::out(py, &v)))
}

/// `view[key]`: the value, or `KeyError(key)`.
pub(crate) fn get_item<'py>(
    py: Python<'py>,
    shared: &Arc<Shared>,
    view: &View,
    target: Target,
    key: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    get(py, shared, view, target, key)?.ok_or_else(|| PyKeyError::new_err(key.clone().unbind()))
}

/// `key in view`.
pub(crate) fn contains(
    py: Python<'_>,
    shared: &Arc<Shared>,
    view: &View,
    target: Target,
    key: &Bound<'_, PyAny>,
) -> PyResult<bool> {
    Ok(get(py, shared, view, target, key)?.is_some())
}

/// Writes `value` under `key`.
pub(crate) fn put(
    py: Python<'_>,
    shared: &Arc<Shared>,
    target: Target,
    key: &Bound<'_, PyAny>,
    value: &Bound<'_, PyAny>,
    sync: Option<bool>,
) -> PyResult<()> {
    let k = convert::key(key, shared.str_keys)?;
    let v = convert::value(value)?;
    shared.call(py, |db| {
        let cf = target.resolve(db)?;
        let mut b = silt::WriteBatch::new();
        b.put_cf(&cf, &k, &v);
        db.write(b, write_options(sync))
    })
}

/// Deletes `key` (a no-op for a missing key: no read is made to tell).
pub(crate) fn delete(
    py: Python<'_>,
    shared: &Arc<Shared>,
    target: Target,
    key: &Bound<'_, PyAny>,
    sync: Option<bool>,
) -> PyResult<()> {
    let k = convert::key(key, shared.str_keys)?;
    shared.call(py, |db| {
        let cf = target.resolve(db)?;
        let mut b = silt::WriteBatch::new();
        b.delete_cf(&cf, &k);
        db.write(b, write_options(sync))
    })
}
