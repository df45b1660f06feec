//! `silt.ColumnFamily`: a handle on one column family, usable like the database itself
//! (`users[k] = v`, `users.prefix(...)`) and as the `cf=` argument of any call.
//!
//! Invariant: a handle belongs to one database (it holds its `Arc<Shared>`); passing it to
//! another database's call is an `InvalidArgumentError`, never a write into the family
//! with the same id there. After `drop_cf` the handle raises `ColumnFamilyNotFoundError`.

use std::sync::Arc;

use pyo3::prelude::*;

use crate::iter::{Iter, Mode, Spec};
use crate::ops;
use crate::shared::Shared;
use crate::view::{Target, View};

/// A column family of a database: a separate key space sharing the database's log, so a
/// WriteBatch is atomic across families. From Db.create_cf(name) or Db.cf(name).
///
/// It has the database's dict-like surface (`cf[k]`, `cf[k] = v`, `del cf[k]`,
/// `k in cf`, `iter(cf)`, get/put/delete, range/prefix/keys/values/items), and can be
/// passed as `cf=` to the database's, a snapshot's or a batch's methods.
#[pyclass(frozen, mapping, module = "silt", name = "ColumnFamily")]
pub struct ColumnFamily {
    pub(crate) shared: Arc<Shared>,
    pub(crate) cf: silt::ColumnFamily,
}

impl ColumnFamily {
    fn target(&self) -> Target {
        Target::Handle(self.cf.clone())
    }

    fn iter(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        mode: Mode,
    ) -> PyResult<Iter> {
        let spec = Spec::from_args(py, &self.shared, start, end, prefix)?;
        Iter::new(
            py,
            &self.shared,
            View::Latest,
            self.target(),
            spec,
            reverse,
            mode,
        )
    }
}

#[pymethods]
impl ColumnFamily {
    /// The column family's name.
    #[getter]
    fn name(&self) -> &str {
        self.cf.name()
    }

    /// The value of `key`, or `default` if it is absent.
    #[pyo3(signature = (key, default=None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        Ok(
            ops::get(py, &self.shared, &View::Latest, self.target(), key)?
                .map(Bound::into_any)
                .or(default),
        )
    }

    /// Writes `value` under `key`; `sync` as for Db.put.
    #[pyo3(signature = (key, value, *, sync=None))]
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        sync: Option<bool>,
    ) -> PyResult<()> {
        ops::put(py, &self.shared, self.target(), key, value, sync)
    }

    /// Deletes `key` (a no-op if it is absent); `sync` as for Db.put.
    #[pyo3(signature = (key, *, sync=None))]
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>, sync: Option<bool>) -> PyResult<()> {
        ops::delete(py, &self.shared, self.target(), key, sync)
    }

    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        Ok(ops::get_item(py, &self.shared, &View::Latest, self.target(), key)?.into_any())
    }

    fn __setitem__(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.put(py, key, value, None)
    }

    fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        self.delete(py, key, None)
    }

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        ops::contains(py, &self.shared, &View::Latest, self.target(), key)
    }

    /// The keys, in order.
    fn __iter__(&self, py: Python<'_>) -> PyResult<Iter> {
        self.iter(py, None, None, None, false, Mode::Keys)
    }

    /// The (key, value) pairs with start <= key < end, in key order (or reverse).
    #[pyo3(signature = (start=None, end=None, *, reverse=false))]
    fn range(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        reverse: bool,
    ) -> PyResult<Iter> {
        self.iter(py, start, end, None, reverse, Mode::Items)
    }

    /// The (key, value) pairs whose key starts with `prefix`.
    #[pyo3(signature = (prefix, *, reverse=false))]
    fn prefix(&self, py: Python<'_>, prefix: &Bound<'_, PyAny>, reverse: bool) -> PyResult<Iter> {
        self.iter(py, None, None, Some(prefix), reverse, Mode::Items)
    }

    /// The keys with start <= key < end, or with `prefix`, in order.
    #[pyo3(signature = (start=None, end=None, *, prefix=None, reverse=false))]
    fn keys(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
    ) -> PyResult<Iter> {
        self.iter(py, start, end, prefix, reverse, Mode::Keys)
    }

    /// The values of the keys with start <= key < end, or with `prefix`, in key order.
    #[pyo3(signature = (start=None, end=None, *, prefix=None, reverse=false))]
    fn values(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
    ) -> PyResult<Iter> {
        self.iter(py, start, end, prefix, reverse, Mode::Values)
    }

    /// The (key, value) pairs with start <= key < end, or with `prefix`, in key order.
    #[pyo3(signature = (start=None, end=None, *, prefix=None, reverse=false))]
    fn items(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
    ) -> PyResult<Iter> {
        self.iter(py, start, end, prefix, reverse, Mode::Items)
    }

    fn __repr__(&self) -> String {
        format!(
            "<silt.ColumnFamily {:?} of {:?}>",
            self.cf.name(),
            self.shared.path.display().to_string()
        )
    }
}
