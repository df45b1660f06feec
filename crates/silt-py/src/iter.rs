//! `silt.Iter`: the Python iterator over a key range of a database, snapshot or
//! transaction (`range`, `prefix`, `keys`, `values`, `items`, and `iter(db)`).
//!
//! Ownership across the boundary: the engine's `silt::Iter` owns what it reads (it pins
//! the super-version it started on: memtables and tables, not the database), and this
//! object owns the engine iterator and an `Arc` of the database's [`Shared`] state. So an
//! iterator is safe however long Python keeps it, and keeps the database open while it
//! lives (`for k in silt.Db(p).keys()` works). It sees one consistent state: the writes
//! acknowledged before it was created (or the snapshot's; or, in a transaction, what the
//! transaction reads with its own writes as of the iterator's creation merged in).
//!
//! Invariants:
//! * after `Db.close()` (or `Snapshot.close()` for a snapshot's iterator, or the end of
//!   a transaction for its iterators) `__next__` raises `silt.ClosedError`, also for
//!   pairs already buffered: a transaction's reads after its end were never validated;
//! * pairs are read ahead in chunks, with the GIL released once per chunk rather than once
//!   per pair. A chunk starts at 8 pairs and doubles up to 1024 (or 1 MiB of keys and
//!   values), so a short scan or `next(it)` reads little and a long scan pays little per
//!   pair. An engine error met while reading ahead is raised after the pairs before it,
//!   exactly where a pair-by-pair walk would have met it; the iterator then ends;
//! * the state's mutex is taken blocking only with the GIL released, and only `try_lock`
//!   while holding it, so two threads sharing one iterator cannot deadlock on the GIL.

use std::collections::VecDeque;
use std::ops::Bound as RangeBound;
use std::sync::Arc;

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::convert;
use crate::errors;
use crate::shared::Shared;
use crate::view::{Target, View};

/// What the iterator yields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// `(key, value)` tuples.
    Items,
    /// Keys.
    Keys,
    /// Values.
    Values,
}

/// Which pairs: a range, or the keys with a prefix.
pub(crate) enum Spec {
    Range {
        lo: RangeBound<Vec<u8>>,
        hi: RangeBound<Vec<u8>>,
    },
    Prefix(Vec<u8>),
}

impl Spec {
    /// From the arguments `start` (inclusive), `end` (exclusive) and `prefix`.
    pub(crate) fn from_args(
        py: Python<'_>,
        shared: &Shared,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Spec> {
        match prefix.filter(|p| !p.is_none()) {
            Some(p) => {
                let given = |o: Option<&Bound<'_, PyAny>>| o.is_some_and(|o| !o.is_none());
                if given(start) || given(end) {
                    return Err(errors::invalid(
                        py,
                        "give either prefix or start/end, not both",
                    ));
                }
                Ok(Spec::Prefix(convert::key(p, shared.str_keys)?.into_owned()))
            }
            None => Ok(Spec::Range {
                lo: convert::bound(start, shared.str_keys, true)?,
                hi: convert::bound(end, shared.str_keys, false)?,
            }),
        }
    }
}

/// Pairs read ahead per chunk: the first, and the most.
const CHUNK_FIRST: usize = 8;
const CHUNK_MAX: usize = 1024;
/// Key and value bytes read ahead per chunk at most (a chunk holds at least one pair).
const CHUNK_BYTES_MAX: usize = 1 << 20;

struct State {
    /// `None` once exhausted or closed: dropping it unpins what it read.
    it: Option<silt::Iter>,
    reverse: bool,
    /// The pairs read ahead, key then value, back to back: one buffer reused from chunk to
    /// chunk, filled through the engine's lending iterator, so reading ahead allocates
    /// nothing per pair (the `bytes` objects made from it are the only copies).
    bytes: Vec<u8>,
    /// Per buffered pair, in order: where its key starts in `bytes`, the key's and the
    /// value's lengths.
    pairs: VecDeque<(usize, usize, usize)>,
    /// An error met while reading ahead, raised once `pairs` is drained.
    error: Option<silt::Error>,
    chunk: usize,
}

impl State {
    /// The first buffered pair, lent from the buffer.
    fn front(&self) -> Option<(&[u8], &[u8])> {
        let &(at, k, v) = self.pairs.front()?;
        Some((&self.bytes[at..at + k], &self.bytes[at + k..at + k + v]))
    }

    /// Reads a chunk ahead if nothing is buffered (and the engine iterator has not ended).
    fn fill(&mut self) {
        if !self.pairs.is_empty() {
            return;
        }
        self.bytes.clear();
        let Some(it) = self.it.as_mut() else {
            return;
        };
        let mut ended = false;
        while self.pairs.len() < self.chunk && self.bytes.len() < CHUNK_BYTES_MAX {
            let step = if self.reverse {
                it.next_back_ref()
            } else {
                it.next_ref()
            };
            match step {
                Some(Ok((k, v))) => {
                    let at = self.bytes.len();
                    self.bytes.extend_from_slice(k);
                    self.bytes.extend_from_slice(v);
                    self.pairs.push_back((at, k.len(), v.len()));
                }
                Some(Err(e)) => {
                    self.error = Some(e);
                    ended = true;
                    break;
                }
                None => {
                    ended = true;
                    break;
                }
            }
        }
        if ended {
            self.it = None;
        }
        self.chunk = (self.chunk * 2).min(CHUNK_MAX);
    }
}

/// An iterator over a key range of a database, snapshot or transaction, in key order (or
/// reverse key order). Made by `Db.range`, `Db.prefix`, `Db.keys`, `Db.values`,
/// `Db.items` and `iter(db)`, and the same methods of `ColumnFamily`, `Snapshot` and
/// `Transaction`.
///
/// It sees one consistent state, the writes acknowledged before it was made (a
/// snapshot's iterator sees the snapshot; a transaction's, its own writes as of its
/// creation over what the transaction reads), however long it lives, and it keeps the
/// database open while it lives. `close()` releases what it holds before it is
/// garbage-collected. After the database is closed (or the snapshot closed, or the
/// transaction ended) it raises `silt.ClosedError`.
#[pyclass(frozen, module = "silt", name = "Iter")]
pub struct Iter {
    shared: Arc<Shared>,
    view: View,
    mode: Mode,
    state: Mutex<State>,
}

impl Iter {
    /// An iterator over `spec` of column family `target` in `view`.
    pub(crate) fn new(
        py: Python<'_>,
        shared: &Arc<Shared>,
        view: View,
        target: Target,
        spec: Spec,
        reverse: bool,
        mode: Mode,
    ) -> PyResult<Iter> {
        let it = view.read(py, shared, |db, reader| {
            let cf = target.resolve(db)?;
            Ok(match spec {
                Spec::Range { lo, hi } => reader.range(&cf, lo, hi),
                Spec::Prefix(p) => reader.prefix(&cf, &p),
            })
        })?;
        Ok(Iter {
            shared: shared.clone(),
            view,
            mode,
            state: Mutex::new(State {
                it: Some(it),
                reverse,
                bytes: Vec::new(),
                pairs: VecDeque::new(),
                error: None,
                chunk: CHUNK_FIRST,
            }),
        })
    }

    fn convert<'py>(&self, py: Python<'py>, k: &[u8], v: &[u8]) -> PyResult<Bound<'py, PyAny>> {
        Ok(match self.mode {
            Mode::Items => PyTuple::new(py, [convert::out(py, k), convert::out(py, v)])?.into_any(),
            Mode::Keys => convert::out(py, k).into_any(),
            Mode::Values => convert::out(py, v).into_any(),
        })
    }
}

#[pymethods]
impl Iter {
    // Python's iterator protocol, not a constructor of `Iter`.
    #[allow(clippy::self_named_constructors)]
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.view.check_open(py, &self.shared)?;
        loop {
            // A buffered pair, converted under the lock without releasing the GIL (never
            // block on the lock while holding the GIL: only `try_lock` here).
            if let Some(mut st) = self.state.try_lock() {
                if let Some((k, v)) = st.front() {
                    let out = self.convert(py, k, v)?;
                    st.pairs.pop_front();
                    return Ok(Some(out));
                }
                if st.it.is_none() {
                    return match st.error.take() {
                        Some(e) => Err(errors::to_py(py, e)),
                        None => Ok(None),
                    };
                }
            }
            // Nothing buffered (or another thread holds the state): read ahead with the GIL
            // released, then take a pair as above.
            py.detach(|| self.state.lock().fill());
        }
    }

    /// Releases the iterator's pinned state now; it then yields nothing more.
    fn close(&self, py: Python<'_>) {
        // With the GIL released: dropping the engine iterator may drop the last reference
        // to tables and close their files.
        py.detach(|| {
            let mut st = self.state.lock();
            st.pairs.clear();
            st.bytes = Vec::new();
            st.error = None;
            st.it = None;
        });
    }

    fn __repr__(&self) -> String {
        let what = match self.mode {
            Mode::Items => "items",
            Mode::Keys => "keys",
            Mode::Values => "values",
        };
        format!("<silt.Iter of {what} in {}>", self.shared.path.display())
    }
}
