//! `silt.WriteBatch`: writes applied all or nothing, from `Db.batch()`.
//!
//! Invariants:
//! * a batch belongs to the database that made it (it resolves `cf=` names there, and
//!   `Db.write` of another database's batch is an `InvalidArgumentError`);
//! * nothing reaches the engine before `write()` (or a clean exit of its `with` block);
//!   the engine validates sizes then, so a bad key fails the whole batch, not one entry;
//!   a `cf=` name is looked up when the write is added (`ColumnFamilyNotFoundError`
//!   there), so the batch holds only handles;
//! * the batch's mutex guards only Rust code: arguments are converted before it is taken,
//!   and the engine write runs after it is released, with the GIL released;
//! * a write takes the batch's contents, so concurrent `put`s land in the next write; a
//!   failed write puts its contents back (if the batch is still empty), to retry.

use std::sync::Arc;

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::PyType;

use crate::convert;
use crate::errors;
use crate::shared::Shared;
use crate::view::{write_options, Target};

/// Writes applied all or nothing, across column families, from Db.batch().
///
///     with db.batch(sync=True) as b:      # written when the block ends cleanly
///         b[b"user/1"] = b"ada"
///         b.put(b"n", b"1", cf="counters")
///         del b[b"user/0"]
///
/// Or explicitly: `b = db.batch(); b.put(k, v); b.write()` (or `db.write(b)`). Within a
/// batch a later write of the same key wins. `len(b)` is the number of writes. If the
/// block raises, nothing is written.
#[pyclass(frozen, module = "silt", name = "WriteBatch")]
pub struct WriteBatch {
    shared: Arc<Shared>,
    /// The sync mode of `write()` and of the `with` block's write.
    sync: Option<bool>,
    batch: Mutex<silt::WriteBatch>,
}

impl WriteBatch {
    pub(crate) fn new(shared: Arc<Shared>, sync: Option<bool>) -> WriteBatch {
        WriteBatch {
            shared,
            sync,
            batch: Mutex::new(silt::WriteBatch::new()),
        }
    }

    /// Writes the batch to `shared`'s database (which must be its own).
    pub(crate) fn write_to(
        &self,
        py: Python<'_>,
        shared: &Arc<Shared>,
        sync: Option<bool>,
    ) -> PyResult<()> {
        if !Arc::ptr_eq(&self.shared, shared) {
            return Err(errors::invalid(
                py,
                format!(
                    "this batch belongs to another database ({})",
                    self.shared.path.display()
                ),
            ));
        }
        let sync = sync.or(self.sync);
        let taken = std::mem::replace(&mut *self.batch.lock(), silt::WriteBatch::new());
        // The engine's write takes the batch by value; a copy is kept to put back if the
        // write fails (a memcpy, next to a log write).
        let r = shared.call(py, |db| db.write(taken.clone(), write_options(sync)));
        if r.is_err() {
            let mut cur = self.batch.lock();
            if cur.is_empty() {
                *cur = taken;
            }
        }
        r
    }

    /// The handle of the `cf=` argument: a name is looked up now (with the GIL released),
    /// so a batch holds only handles and its writes go straight into the engine's batch.
    fn handle(
        &self,
        py: Python<'_>,
        cf: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<silt::ColumnFamily> {
        match Target::from_arg(py, &self.shared, cf)? {
            Target::Handle(h) => Ok(h),
            Target::Name(n) => self.shared.call(py, |db| db.cf(&n)),
        }
    }
}

#[pymethods]
impl WriteBatch {
    /// Adds a write of `value` under `key` (in column family `cf`).
    #[pyo3(signature = (key, value, *, cf=None))]
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        cf: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let cf = self.handle(py, cf)?;
        let k = convert::key(key, self.shared.str_keys)?;
        let v = convert::value(value)?;
        self.batch.lock().put_cf(&cf, &k, &v);
        Ok(())
    }

    /// Adds a delete of `key` (in column family `cf`).
    #[pyo3(signature = (key, *, cf=None))]
    fn delete(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        cf: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let cf = self.handle(py, cf)?;
        let k = convert::key(key, self.shared.str_keys)?;
        self.batch.lock().delete_cf(&cf, &k);
        Ok(())
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

    /// The number of writes in the batch.
    fn __len__(&self) -> usize {
        self.batch.lock().len()
    }

    /// Removes every write from the batch.
    fn clear(&self) {
        self.batch.lock().clear();
    }

    /// Writes the batch atomically to its database; then it is empty (if the write fails
    /// it keeps its writes, to retry). `sync` as for Db.put; None uses the batch's own
    /// (from Db.batch(sync=...)), then the database's.
    #[pyo3(signature = (*, sync=None))]
    fn write(&self, py: Python<'_>, sync: Option<bool>) -> PyResult<()> {
        let shared = self.shared.clone();
        self.write_to(py, &shared, sync)
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    /// Writes the batch if the block ended without an exception; else discards it.
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyType>>,
        exc_value: Option<&Bound<'_, PyAny>>,
        traceback: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let _ = (exc_value, traceback);
        if exc_type.is_some() {
            self.clear();
        } else {
            self.write(py, None)?;
        }
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!(
            "<silt.WriteBatch of {} writes for {:?}>",
            self.__len__(),
            self.shared.path.display().to_string()
        )
    }
}
