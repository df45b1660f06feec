//! [`Shared`]: the state one `silt.Db` shares with every object made from it (column
//! family handles, snapshots, batches, iterators), and the one way to call the engine
//! ([`Shared::call`]).
//!
//! Invariants:
//! * every object made from a database holds an `Arc<Shared>`, so the engine's `Db` lives
//!   as long as any of them (an iterator over a database the program no longer names
//!   keeps reading safely); it is closed by `Db.close()` (or the end of a `with` block),
//!   or, for a database never closed, when the last of them is garbage-collected;
//! * after `close`, every call through any of them raises `silt.ClosedError`: the handle
//!   is gone from `db` and `closed` is set before `close` returns;
//! * the GIL is never held while waiting for the engine: [`Shared::call`] releases it
//!   before taking the `db` lock and calling in, so a thread blocked on I/O, an fdatasync,
//!   a write stall or a lock never blocks the other Python threads;
//! * no Rust lock is held across a call into Python, so the GIL and these locks cannot
//!   deadlock (a thread holding one of them and waiting for the GIL while another holds
//!   the GIL and waits for it).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::RwLock;
use pyo3::prelude::*;

use crate::errors;

/// What a database and the objects made from it share.
pub(crate) struct Shared {
    /// The engine's handle; `None` once closed. Calls hold the read lock while they run;
    /// `close` takes the write lock, so it waits for calls in flight.
    db: RwLock<Option<silt::Db>>,
    /// Set by `close`; read without the lock by iterators and snapshots.
    closed: AtomicBool,
    /// The directory, for `repr` and `Db.path`.
    pub(crate) path: PathBuf,
    /// Whether `str` keys are accepted (as UTF-8).
    pub(crate) str_keys: bool,
    /// Whether the database was opened read-only.
    pub(crate) read_only: bool,
    /// The default column family's handle.
    pub(crate) default_cf: silt::ColumnFamily,
}

impl Shared {
    pub(crate) fn new(db: silt::Db, path: PathBuf, str_keys: bool, read_only: bool) -> Shared {
        let default_cf = db.default_cf();
        Shared {
            db: RwLock::new(Some(db)),
            closed: AtomicBool::new(false),
            path,
            str_keys,
            read_only,
            default_cf,
        }
    }

    /// Runs `f` on the engine with the GIL released, mapping an engine error to its
    /// Python exception. `silt.ClosedError` if the database is closed.
    pub(crate) fn call<T, F>(&self, py: Python<'_>, f: F) -> PyResult<T>
    where
        T: Send,
        F: FnOnce(&silt::Db) -> silt::Result<T> + Send,
    {
        let r = self.with_db(py, f).unwrap_or(Err(silt::Error::Closed));
        r.map_err(|e| errors::to_py(py, e))
    }

    /// Runs `f` on the engine with the GIL released, as [`Shared::call`], for a caller
    /// that maps its own errors (a transaction's, which can also have ended); `None` if
    /// the database is closed.
    pub(crate) fn with_db<T, F>(&self, py: Python<'_>, f: F) -> Option<T>
    where
        T: Send,
        F: FnOnce(&silt::Db) -> T + Send,
    {
        py.detach(|| self.db.read().as_ref().map(f))
    }

    /// Whether `close` ran.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// `silt.ClosedError` if the database is closed.
    pub(crate) fn check_open(&self, py: Python<'_>) -> PyResult<()> {
        if self.is_closed() {
            return Err(errors::closed(py, "the database"));
        }
        Ok(())
    }

    /// Closes the database: waits for calls in flight, then the engine's `close` (which
    /// stops background work; everything acknowledged stays recoverable). Closing twice
    /// is a no-op. The GIL is released throughout.
    pub(crate) fn close(&self, py: Python<'_>) -> PyResult<()> {
        let r = py.detach(|| {
            let db = self.db.write().take();
            self.closed.store(true, Ordering::Release);
            match db {
                Some(db) => db.close(),
                None => Ok(()),
            }
        });
        r.map_err(|e| errors::to_py(py, e))
    }
}
