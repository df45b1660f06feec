//! What a read or write is aimed at: the view it reads ([`View`]: the latest state, a
//! snapshot or a transaction) and the column family ([`Target`]), shared by `Db`,
//! `ColumnFamily`, `Snapshot`, `Transaction` and `WriteBatch` so that each operation is
//! written once.
//!
//! Invariants:
//! * a column family named by a string is looked up inside the same engine call as the
//!   operation (one GIL release, and no window in which a cached handle goes stale); a
//!   `ColumnFamily` object is used as it is, and must come from the same database;
//! * a read through a snapshot or a transaction runs under the database's read lock
//!   (`Shared::call`), so `Db.close()` waits for it; after `Snapshot.close()`, or once
//!   the transaction has ended, it raises `ClosedError`;
//! * a transaction's view holds it weakly: an iterator does not keep a transaction (its
//!   snapshot, a pessimistic one's locks) alive after its `Transaction` object is gone.

use std::ops::Bound as RangeBound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::RwLock;
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::cf::ColumnFamily;
use crate::errors;
use crate::shared::Shared;
use crate::txn::TxnState;

/// A snapshot's engine handle; `None` once released.
pub(crate) struct SnapshotState {
    pub(crate) snap: RwLock<Option<silt::Snapshot>>,
    pub(crate) closed: AtomicBool,
}

impl SnapshotState {
    pub(crate) fn new(snap: silt::Snapshot) -> SnapshotState {
        SnapshotState {
            snap: RwLock::new(Some(snap)),
            closed: AtomicBool::new(false),
        }
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

/// The state a read sees.
#[derive(Clone)]
pub(crate) enum View {
    /// The latest state: each read sees every write acknowledged before it started.
    Latest,
    /// A snapshot's state.
    Snapshot(Arc<SnapshotState>),
    /// A transaction's reads: its own writes over what its isolation level reads.
    Transaction(Weak<TxnState>),
}

/// The engine object a read runs on.
pub(crate) enum Reader<'a> {
    Db(&'a silt::Db),
    Snapshot(&'a silt::Snapshot),
    Txn(&'a silt::Txn),
}

impl Reader<'_> {
    pub(crate) fn get(&self, cf: &silt::ColumnFamily, key: &[u8]) -> silt::Result<Option<Vec<u8>>> {
        match self {
            Reader::Db(db) => db.get_cf(cf, key),
            Reader::Snapshot(s) => s.get_cf(cf, key),
            Reader::Txn(t) => t.get_cf(cf, key),
        }
    }

    pub(crate) fn range(
        &self,
        cf: &silt::ColumnFamily,
        lo: RangeBound<Vec<u8>>,
        hi: RangeBound<Vec<u8>>,
    ) -> silt::Iter {
        match self {
            Reader::Db(db) => db.range_cf(cf, (lo, hi)),
            Reader::Snapshot(s) => s.range_cf(cf, (lo, hi)),
            Reader::Txn(t) => t.range_cf(cf, (lo, hi)),
        }
    }

    pub(crate) fn prefix(&self, cf: &silt::ColumnFamily, prefix: &[u8]) -> silt::Iter {
        match self {
            Reader::Db(db) => db.prefix_cf(cf, prefix),
            Reader::Snapshot(s) => s.prefix_cf(cf, prefix),
            Reader::Txn(t) => t.prefix_cf(cf, prefix),
        }
    }
}

impl View {
    /// `ClosedError` if this view cannot be read any more.
    pub(crate) fn check_open(&self, py: Python<'_>, shared: &Shared) -> PyResult<()> {
        shared.check_open(py)?;
        match self {
            View::Latest => Ok(()),
            View::Snapshot(s) if s.is_closed() => Err(errors::closed(py, "the snapshot")),
            View::Snapshot(_) => Ok(()),
            View::Transaction(t) => match t.upgrade() {
                Some(t) => t.check_active(py),
                None => Err(TxnState::gone(py)),
            },
        }
    }

    /// Runs `f` on this view's engine object with the GIL released.
    pub(crate) fn read<T, F>(&self, py: Python<'_>, shared: &Shared, f: F) -> PyResult<T>
    where
        T: Send,
        F: FnOnce(&silt::Db, Reader<'_>) -> silt::Result<T> + Send,
    {
        self.check_open(py, shared)?;
        match self {
            View::Latest => shared.call(py, |db| f(db, Reader::Db(db))),
            View::Snapshot(s) => shared.call(py, |db| match s.snap.read().as_ref() {
                Some(snap) => f(db, Reader::Snapshot(snap)),
                // Released by another thread after the check above.
                None => Err(silt::Error::Closed),
            }),
            View::Transaction(t) => match t.upgrade() {
                Some(t) => t.run(py, shared, |db, txn| f(db, Reader::Txn(txn))),
                None => Err(TxnState::gone(py)),
            },
        }
    }
}

/// A column family as an argument names it: a handle, or a name looked up at the call.
pub(crate) enum Target {
    Handle(silt::ColumnFamily),
    Name(String),
}

impl Target {
    /// The `cf=` argument of a call: `None` (the default column family), a
    /// `silt.ColumnFamily` of this database, or a name.
    pub(crate) fn from_arg(
        py: Python<'_>,
        shared: &Arc<Shared>,
        cf: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Target> {
        let Some(cf) = cf.filter(|c| !c.is_none()) else {
            return Ok(Target::Handle(shared.default_cf.clone()));
        };
        if let Ok(handle) = cf.cast::<ColumnFamily>() {
            let handle = handle.get();
            if !Arc::ptr_eq(&handle.shared, shared) {
                return Err(errors::invalid(
                    py,
                    format!(
                        "column family {:?} belongs to another database ({})",
                        handle.cf.name(),
                        handle.shared.path.display()
                    ),
                ));
            }
            return Ok(Target::Handle(handle.cf.clone()));
        }
        if let Ok(name) = cf.cast::<PyString>() {
            return Ok(Target::Name(name.to_cow()?.into_owned()));
        }
        Err(errors::type_error(format!(
            "cf must be a silt.ColumnFamily, a str or None, not {}",
            cf.get_type().name()?
        )))
    }

    /// The handle, looking a name up in `db`.
    pub(crate) fn resolve(self, db: &silt::Db) -> silt::Result<silt::ColumnFamily> {
        match self {
            Target::Handle(cf) => Ok(cf),
            Target::Name(name) => db.cf(&name),
        }
    }
}

/// `WriteOptions` with `sync`: `None` is the database's sync mode.
pub(crate) fn write_options(sync: Option<bool>) -> silt::WriteOptions {
    let mut o = silt::WriteOptions::default();
    o.sync = sync;
    o
}
