//! `silt.Snapshot`: a consistent read view of a database, from `Db.snapshot()`.
//!
//! Invariants: reads through it see exactly the writes acknowledged before it was taken;
//! it holds the engine's snapshot (which keeps compaction from dropping what it sees)
//! until `close()` or the end of its `with` block; else until it and every iterator made
//! from it are garbage-collected (so `db.snapshot().items()` works). After `close()` its
//! reads and its iterators raise `ClosedError`. The engine's
//! snapshot is released with the GIL released (it takes the engine's snapshot lock).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyType;

use crate::iter::{Iter, Mode, Spec};
use crate::ops;
use crate::shared::Shared;
use crate::view::{SnapshotState, Target, View};

/// A consistent read view of a database, from Db.snapshot(): reads see exactly the
/// writes acknowledged before it was taken, whatever is written after.
///
///     with db.snapshot() as snap:
///         before = snap[b"k"]
///         db[b"k"] = b"new"
///         assert snap[b"k"] == before
///
/// Read-only: `snap[k]`, `k in snap`, get, iter(snap), range/prefix/keys/values/items,
/// each with `cf=` like the database's. It keeps what it sees from compaction until
/// closed: close it (or use `with`) when done.
#[pyclass(frozen, mapping, module = "silt", name = "Snapshot")]
pub struct Snapshot {
    pub(crate) shared: Arc<Shared>,
    pub(crate) state: Arc<SnapshotState>,
}

impl Snapshot {
    fn view(&self) -> View {
        View::Snapshot(self.state.clone())
    }

    fn target(&self, py: Python<'_>, cf: Option<&Bound<'_, PyAny>>) -> PyResult<Target> {
        Target::from_arg(py, &self.shared, cf)
    }

    #[allow(clippy::too_many_arguments)]
    fn iter(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        cf: Option<&Bound<'_, PyAny>>,
        mode: Mode,
    ) -> PyResult<Iter> {
        let spec = Spec::from_args(py, &self.shared, start, end, prefix)?;
        let target = self.target(py, cf)?;
        Iter::new(py, &self.shared, self.view(), target, spec, reverse, mode)
    }
}

#[pymethods]
impl Snapshot {
    /// The value of `key` as of the snapshot, or `default` if it was absent.
    #[pyo3(signature = (key, default=None, *, cf=None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
        cf: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let target = self.target(py, cf)?;
        Ok(ops::get(py, &self.shared, &self.view(), target, key)?
            .map(Bound::into_any)
            .or(default))
    }

    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let target = self.target(py, None)?;
        Ok(ops::get_item(py, &self.shared, &self.view(), target, key)?.into_any())
    }

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let target = self.target(py, None)?;
        ops::contains(py, &self.shared, &self.view(), target, key)
    }

    /// The keys of the default column family as of the snapshot, in order.
    fn __iter__(&self, py: Python<'_>) -> PyResult<Iter> {
        self.iter(py, None, None, None, false, None, Mode::Keys)
    }

    /// The (key, value) pairs with start <= key < end as of the snapshot.
    #[pyo3(signature = (start=None, end=None, *, reverse=false, cf=None))]
    fn range(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        cf: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Iter> {
        self.iter(py, start, end, None, reverse, cf, Mode::Items)
    }

    /// The (key, value) pairs whose key starts with `prefix`, as of the snapshot.
    #[pyo3(signature = (prefix, *, reverse=false, cf=None))]
    fn prefix(
        &self,
        py: Python<'_>,
        prefix: &Bound<'_, PyAny>,
        reverse: bool,
        cf: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Iter> {
        self.iter(py, None, None, Some(prefix), reverse, cf, Mode::Items)
    }

    /// The keys with start <= key < end, or with `prefix`, as of the snapshot.
    #[pyo3(signature = (start=None, end=None, *, prefix=None, reverse=false, cf=None))]
    fn keys(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        cf: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Iter> {
        self.iter(py, start, end, prefix, reverse, cf, Mode::Keys)
    }

    /// The values of the keys with start <= key < end, or with `prefix`, as of the
    /// snapshot.
    #[pyo3(signature = (start=None, end=None, *, prefix=None, reverse=false, cf=None))]
    fn values(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        cf: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Iter> {
        self.iter(py, start, end, prefix, reverse, cf, Mode::Values)
    }

    /// The (key, value) pairs with start <= key < end, or with `prefix`, as of the
    /// snapshot.
    #[pyo3(signature = (start=None, end=None, *, prefix=None, reverse=false, cf=None))]
    fn items(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        cf: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Iter> {
        self.iter(py, start, end, prefix, reverse, cf, Mode::Items)
    }

    /// The engine's sequence number this view reads at.
    #[getter]
    fn seqno(&self, py: Python<'_>) -> PyResult<u64> {
        View::Snapshot(self.state.clone()).check_open(py, &self.shared)?;
        // The lock without the GIL: a thread reading through the snapshot holds it so.
        let s = py.detach(|| self.state.snap.read().as_ref().map(|s| s.seqno()));
        s.ok_or_else(|| crate::errors::closed(py, "the snapshot"))
    }

    /// Releases the snapshot (compaction may then drop what only it could see). Its
    /// reads and iterators raise ClosedError afterwards. Closing twice does nothing.
    fn close(&self, py: Python<'_>) {
        self.state.closed.store(true, Ordering::Release);
        py.detach(|| drop(self.state.snap.write().take()));
    }

    /// Whether close() ran (or the database was closed).
    #[getter]
    fn closed(&self) -> bool {
        self.state.is_closed() || self.shared.is_closed()
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    /// Closes the snapshot.
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyType>>,
        exc_value: Option<&Bound<'_, PyAny>>,
        traceback: Option<&Bound<'_, PyAny>>,
    ) -> bool {
        let _ = (exc_type, exc_value, traceback);
        self.close(py);
        false
    }

    fn __repr__(&self) -> String {
        let state = if self.closed() { "closed" } else { "open" };
        format!(
            "<silt.Snapshot of {:?} {state}>",
            self.shared.path.display().to_string()
        )
    }
}
