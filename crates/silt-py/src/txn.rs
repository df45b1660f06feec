//! `silt.Transaction`: the engine's transaction (`silt::Txn`) behind a Python object, from
//! `Db.transaction()`; and `Db.transact`'s retry loop ([`transact`]).
//!
//! Ownership across the boundary: a `silt::Txn` is `Send` but takes `&mut self` for
//! writes, while a Python object can be reached from any thread. So it lives in a
//! [`TxnState`] behind a mutex, and calls from several threads on one transaction run one
//! at a time (each waits for the previous with the GIL released) rather than failing:
//! the outcome never depends on timing, as it would if a busy transaction raised. The
//! state is shared (`Arc`) by the `Transaction` object only; its iterators hold it
//! weakly (`View::Transaction`), so when the object is garbage-collected without
//! `commit()`, the transaction rolls back at once, as the engine's does on drop.
//!
//! Invariants:
//! * the slot's mutex is only taken with the GIL released, and nothing holding it calls
//!   into Python, so it cannot deadlock with the GIL; it is taken after the database's
//!   read lock (`Shared::with_db`), never before, so `Db.close()` waits for a call in
//!   flight and the two locks are always taken in one order;
//! * the transaction has ended exactly when the slot is empty; `end` says how, and is
//!   set under the mutex before it is released, so a call that finds the slot empty
//!   always reads why;
//! * every call on an ended transaction (and its iterators) raises `silt.ClosedError`
//!   naming how it ended, except `rollback()`, which does nothing then (so a cleanup
//!   path after a failed commit cannot mask the commit's error);
//! * `commit` holds the mutex for the whole engine commit (its checks and the log
//!   write, with its fdatasync): a call from another thread meanwhile waits for it, then
//!   finds the transaction ended.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyType};

use crate::convert;
use crate::errors;
use crate::iter::{Iter, Mode, Spec};
use crate::ops;
use crate::shared::Shared;
use crate::view::{Target, View};

/// `TxnState::end` values.
const ACTIVE: u8 = 0;
const COMMITTED: u8 = 1;
const ROLLED_BACK: u8 = 2;
const COMMIT_FAILED: u8 = 3;

/// Why a transaction's call did not reach the engine, or what the engine said.
enum Failure {
    Engine(silt::Error),
    Ended(u8),
}

/// The engine's transaction and how it ended.
pub(crate) struct TxnState {
    /// `None` once it has ended.
    slot: Mutex<Option<silt::Txn>>,
    /// `ACTIVE`, or how it ended; written under `slot`'s mutex, read without it.
    end: AtomicU8,
    id: u64,
    snapshot_seqno: u64,
    isolation: &'static str,
    mode: &'static str,
}

impl TxnState {
    fn new(txn: silt::Txn) -> TxnState {
        let opts = txn.options();
        TxnState {
            id: txn.id(),
            snapshot_seqno: txn.snapshot_seqno(),
            isolation: isolation_name(opts.isolation),
            mode: mode_name(opts.concurrency),
            end: AtomicU8::new(ACTIVE),
            slot: Mutex::new(Some(txn)),
        }
    }

    fn end(&self) -> u8 {
        self.end.load(Ordering::Acquire)
    }

    /// Whether it has not ended yet.
    pub(crate) fn is_active(&self) -> bool {
        self.end() == ACTIVE
    }

    /// `silt.ClosedError` if it has ended.
    pub(crate) fn check_active(&self, py: Python<'_>) -> PyResult<()> {
        match self.end() {
            ACTIVE => Ok(()),
            end => Err(ended(py, end)),
        }
    }

    /// `silt.ClosedError` for an iterator whose transaction object was collected.
    pub(crate) fn gone(py: Python<'_>) -> PyErr {
        errors::closed_msg(
            py,
            "the transaction is gone: it rolled back when its Transaction object was \
             garbage-collected"
                .into(),
        )
    }

    /// Runs `f` on the engine's transaction with the GIL released, after the database's
    /// read lock (`Shared::with_db`). `ClosedError` if the database is closed or the
    /// transaction has ended.
    pub(crate) fn run<T, F>(&self, py: Python<'_>, shared: &Shared, f: F) -> PyResult<T>
    where
        T: Send,
        F: FnOnce(&silt::Db, &mut silt::Txn) -> silt::Result<T> + Send,
    {
        shared.check_open(py)?;
        self.check_active(py)?;
        let r = shared.with_db(py, |db| match self.slot.lock().as_mut() {
            Some(t) => f(db, t).map_err(Failure::Engine),
            None => Err(Failure::Ended(self.end())),
        });
        finish(py, r)
    }

    /// Commits (the engine's checks, then one log record, durable per the transaction's
    /// `sync`); the transaction has ended afterwards, whatever the outcome.
    fn commit(&self, py: Python<'_>, shared: &Shared) -> PyResult<()> {
        shared.check_open(py)?;
        self.check_active(py)?;
        let r = shared.with_db(py, |_db| {
            let mut slot = self.slot.lock();
            let Some(t) = slot.take() else {
                return Err(Failure::Ended(self.end()));
            };
            let r = t.commit();
            let end = if r.is_ok() { COMMITTED } else { COMMIT_FAILED };
            self.end.store(end, Ordering::Release);
            r.map_err(Failure::Engine)
        });
        finish(py, r)
    }

    /// Discards its writes and releases its locks and snapshot; nothing if it has ended.
    /// Needs no open database: it only drops what the transaction holds.
    fn rollback(&self, py: Python<'_>) {
        py.detach(|| {
            let mut slot = self.slot.lock();
            if let Some(t) = slot.take() {
                self.end.store(ROLLED_BACK, Ordering::Release);
                t.rollback();
            }
        });
    }
}

/// The Python result of a transaction's engine call.
fn finish<T>(py: Python<'_>, r: Option<Result<T, Failure>>) -> PyResult<T> {
    match r {
        None => Err(errors::closed(py, "the database")),
        Some(Ok(v)) => Ok(v),
        Some(Err(Failure::Engine(e))) => Err(errors::to_py(py, e)),
        Some(Err(Failure::Ended(end))) => Err(ended(py, end)),
    }
}

/// `silt.ClosedError` for a call on a transaction that ended as `end` says.
fn ended(py: Python<'_>, end: u8) -> PyErr {
    let how = match end {
        COMMITTED => "was committed",
        ROLLED_BACK => "was rolled back",
        _ => "failed to commit (and was rolled back)",
    };
    errors::closed_msg(
        py,
        format!("the transaction {how}: it takes no more calls; begin a new one"),
    )
}

fn isolation_name(level: silt::IsolationLevel) -> &'static str {
    match level {
        silt::IsolationLevel::ReadUncommitted => "read_uncommitted",
        silt::IsolationLevel::ReadCommitted => "read_committed",
        silt::IsolationLevel::RepeatableRead => "repeatable_read",
        silt::IsolationLevel::Snapshot => "snapshot",
        silt::IsolationLevel::Serializable => "serializable",
    }
}

fn mode_name(c: silt::Concurrency) -> &'static str {
    match c {
        silt::Concurrency::Optimistic => "optimistic",
        silt::Concurrency::Pessimistic => "pessimistic",
    }
}

/// The options of `Db.transaction()` and `Db.transact()` (which adds `max_retries`), as
/// Python passes them.
pub(crate) struct TxnArgs<'a, 'py> {
    pub(crate) isolation: &'a str,
    pub(crate) mode: &'a str,
    pub(crate) sync: Option<bool>,
    pub(crate) lock_timeout: f64,
    pub(crate) max_bytes: Option<&'a Bound<'py, PyAny>>,
}

impl TxnArgs<'_, '_> {
    /// The engine's options; `InvalidArgumentError` naming a bad one.
    pub(crate) fn parse(&self, py: Python<'_>) -> PyResult<silt::TxnOptions> {
        let isolation = match self.isolation {
            "read_uncommitted" => silt::IsolationLevel::ReadUncommitted,
            "read_committed" => silt::IsolationLevel::ReadCommitted,
            "repeatable_read" => silt::IsolationLevel::RepeatableRead,
            "snapshot" => silt::IsolationLevel::Snapshot,
            "serializable" => silt::IsolationLevel::Serializable,
            other => {
                return Err(errors::invalid(
                    py,
                    format!(
                        "isolation: expected \"read_uncommitted\", \"read_committed\", \
                         \"repeatable_read\", \"snapshot\" or \"serializable\", got {other:?}"
                    ),
                ))
            }
        };
        let concurrency = match self.mode {
            "optimistic" => silt::Concurrency::Optimistic,
            "pessimistic" => silt::Concurrency::Pessimistic,
            other => {
                return Err(errors::invalid(
                    py,
                    format!("mode: expected \"optimistic\" or \"pessimistic\", got {other:?}"),
                ))
            }
        };
        let mut o = silt::TxnOptions::new(isolation, concurrency);
        o.sync = self.sync;
        o.lock_timeout = Duration::try_from_secs_f64(self.lock_timeout).map_err(|_| {
            errors::invalid(
                py,
                format!(
                    "lock_timeout: expected seconds >= 0, got {}",
                    self.lock_timeout
                ),
            )
        })?;
        if let Some(v) = self.max_bytes.filter(|v| !v.is_none()) {
            o.max_bytes = non_negative(py, "max_bytes", v)?;
        }
        Ok(o)
    }
}

/// A non-negative int option (a bool is refused: `max_bytes=True` is a bug).
fn non_negative(py: Python<'_>, name: &str, v: &Bound<'_, PyAny>) -> PyResult<u64> {
    if v.is_instance_of::<PyBool>() {
        return Err(errors::invalid(
            py,
            format!("{name}: expected an int, got a bool"),
        ));
    }
    v.extract::<u64>()
        .map_err(|_| errors::invalid(py, format!("{name}: expected a non-negative int")))
}

/// `Db.transact(fn, **options)`: runs `func(txn)` in a new transaction and commits it;
/// on a `silt.RetryableError` (from `func` or the commit) rolls back and runs it again,
/// up to `max_retries` times, after the engine's backoff (`Db::transact`'s: 100 µs
/// doubling to 10 ms, with jitter), slept with the GIL released. Returns what `func`
/// returned. `func` may end the transaction itself (`commit()` or `rollback()`); it is
/// then not committed again.
pub(crate) fn transact<'py>(
    py: Python<'py>,
    shared: &Arc<Shared>,
    func: &Bound<'py, PyAny>,
    opts: silt::TxnOptions,
) -> PyResult<Bound<'py, PyAny>> {
    let mut attempt = 0u32;
    loop {
        let t = Bound::new(py, Transaction::begin(py, shared, opts.clone())?)?;
        let r = func.call1((t.clone(),)).and_then(|v| {
            let txn = t.get();
            if txn.state.is_active() {
                txn.state.commit(py, &txn.shared)?;
            }
            Ok(v)
        });
        match r {
            Ok(v) => return Ok(v),
            Err(e) => {
                t.get().state.rollback(py);
                if !(errors::is_retryable(py, &e) && attempt < opts.max_retries) {
                    return Err(e);
                }
                attempt += 1;
                let pause = backoff(attempt);
                py.detach(|| std::thread::sleep(pause));
            }
        }
    }
}

/// The pause before retry number `attempt` (from 1), as `Db::transact` pauses: 100 µs
/// doubled per attempt (up to 2^7), plus jitter below that, capped at 10 ms.
fn backoff(attempt: u32) -> Duration {
    let base = 100u64 << attempt.min(7);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::from(d.subsec_nanos()));
    Duration::from_micros((base + nanos % base).min(10_000))
}

/// A transaction, from Db.transaction(): its writes are private until it commits, then
/// visible all at once (one log record); its reads see its own writes first.
///
///     with db.transaction() as txn:          # commits when the block ends cleanly,
///         n = int(txn.get_for_update(b"n") or b"0")
///         txn[b"n"] = b"%d" % (n + 1)        # rolls back if it raises
///
/// Dict-like and with the methods of Db: `txn[k]`, `txn[k] = v`, `del txn[k]`,
/// `k in txn`, get, put, delete, single_delete, get_for_update, each with `cf=`;
/// range/prefix/keys/values/items see its own writes (as of the iterator's creation),
/// in both directions. savepoint(), rollback_to_savepoint() and pop_savepoint() undo
/// part of it. commit() and rollback() end it; then every call raises silt.ClosedError
/// (rollback() of an ended transaction does nothing). Dropped without commit, it rolls
/// back.
///
/// commit() raises silt.ConflictError if another write got there first (optimistic,
/// or a plain write under a pessimistic lock); a pessimistic transaction's calls may
/// raise silt.LockTimeoutError or silt.DeadlockError. All three are
/// silt.RetryableError: run the transaction again, which Db.transact does for you.
///
/// It may be used from several threads; their calls run one at a time. Every call
/// that can wait (for a lock, the disk, the commit's fdatasync) releases the GIL.
#[pyclass(frozen, mapping, module = "silt", name = "Transaction")]
pub struct Transaction {
    pub(crate) shared: Arc<Shared>,
    pub(crate) state: Arc<TxnState>,
}

impl Transaction {
    /// Begins a transaction on `shared`'s database.
    pub(crate) fn begin(
        py: Python<'_>,
        shared: &Arc<Shared>,
        opts: silt::TxnOptions,
    ) -> PyResult<Transaction> {
        let txn = shared.call(py, |db| Ok(db.begin(opts)))?;
        Ok(Transaction {
            shared: shared.clone(),
            state: Arc::new(TxnState::new(txn)),
        })
    }

    fn view(&self) -> View {
        View::Transaction(Arc::downgrade(&self.state))
    }

    fn target(&self, py: Python<'_>, cf: Option<&Bound<'_, PyAny>>) -> PyResult<Target> {
        Target::from_arg(py, &self.shared, cf)
    }

    /// Runs `f` on the engine's transaction with the GIL released.
    fn run<T, F>(&self, py: Python<'_>, f: F) -> PyResult<T>
    where
        T: Send,
        F: FnOnce(&silt::Db, &mut silt::Txn) -> silt::Result<T> + Send,
    {
        self.state.run(py, &self.shared, f)
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
impl Transaction {
    /// The value of `key` (its own write if it made one), or `default` if it is absent.
    /// At "repeatable_read" and "serializable" the key is protected until commit
    /// (validated, or a shared lock when pessimistic).
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

    /// Reads `key` and protects it as if it were written, at every isolation level: no
    /// one else may change it before this transaction commits (checked at commit when
    /// optimistic; an exclusive lock now when pessimistic). For read-modify-write.
    #[pyo3(signature = (key, default=None, *, cf=None))]
    fn get_for_update<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
        cf: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let target = self.target(py, cf)?;
        let k = convert::key(key, self.shared.str_keys)?;
        let v = self.run(py, |db, t| {
            let cf = target.resolve(db)?;
            t.get_for_update_cf(&cf, &k)
        })?;
        Ok(v.map(|v| convert::out(py, &v).into_any()).or(default))
    }

    /// Writes `value` under `key` when the transaction commits (pessimistic: takes the
    /// key's lock now).
    #[pyo3(signature = (key, value, *, cf=None))]
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        cf: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let target = self.target(py, cf)?;
        let k = convert::key(key, self.shared.str_keys)?;
        let v = convert::value(value)?;
        self.run(py, |db, t| {
            let cf = target.resolve(db)?;
            t.put_cf(&cf, &k, &v)
        })
    }

    /// Deletes `key` when the transaction commits (a no-op for an absent key).
    #[pyo3(signature = (key, *, cf=None))]
    fn delete(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        cf: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let target = self.target(py, cf)?;
        let k = convert::key(key, self.shared.str_keys)?;
        self.run(py, |db, t| {
            let cf = target.resolve(db)?;
            t.delete_cf(&cf, &k)
        })
    }

    /// Deletes a key written once and never overwritten (a cheaper tombstone, which
    /// compaction drops with the one write it meets), when the transaction commits. On a
    /// key written more than once, older values may show again: use delete() then.
    #[pyo3(signature = (key, *, cf=None))]
    fn single_delete(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        cf: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let target = self.target(py, cf)?;
        let k = convert::key(key, self.shared.str_keys)?;
        self.run(py, |db, t| {
            let cf = target.resolve(db)?;
            t.single_delete_cf(&cf, &k)
        })
    }

    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let target = self.target(py, None)?;
        Ok(ops::get_item(py, &self.shared, &self.view(), target, key)?.into_any())
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
        let target = self.target(py, None)?;
        ops::contains(py, &self.shared, &self.view(), target, key)
    }

    /// The keys of the default column family with its own writes merged in, in order.
    fn __iter__(&self, py: Python<'_>) -> PyResult<Iter> {
        self.iter(py, None, None, None, false, None, Mode::Keys)
    }

    /// The (key, value) pairs with start <= key < end, its own writes merged in (as
    /// of this call), in key order or reversed. At "serializable" what it reads is
    /// protected until commit (read ahead in chunks, so a little past what you consume).
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

    /// The (key, value) pairs whose key starts with `prefix`, its own writes merged in.
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

    /// The keys with start <= key < end, or with `prefix`, its own writes merged in.
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

    /// The values of the keys with start <= key < end, or with `prefix`, its own
    /// writes merged in.
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

    /// The (key, value) pairs with start <= key < end, or with `prefix`, its own writes
    /// merged in.
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

    /// Marks a savepoint: rollback_to_savepoint() undoes every write made after it.
    /// Savepoints nest.
    fn savepoint(&self, py: Python<'_>) -> PyResult<()> {
        self.run(py, |_, t| {
            t.savepoint();
            Ok(())
        })
    }

    /// Undoes every write made since the most recent savepoint, and removes it. Locks
    /// taken since are kept until the end, and reads stay protected.
    /// InvalidArgumentError if there is no savepoint.
    fn rollback_to_savepoint(&self, py: Python<'_>) -> PyResult<()> {
        self.run(py, |_, t| t.rollback_to_savepoint())
    }

    /// Removes the most recent savepoint without undoing anything.
    /// InvalidArgumentError if there is no savepoint.
    fn pop_savepoint(&self, py: Python<'_>) -> PyResult<()> {
        self.run(py, |_, t| t.pop_savepoint())
    }

    /// Commits: checks what its isolation level protects, then writes every buffered
    /// write as one log record (durable per its `sync`), visible to every later read at
    /// once. The transaction has ended afterwards, also when this raises:
    /// silt.ConflictError (nothing was written: run it again), or as Db.write does.
    fn commit(&self, py: Python<'_>) -> PyResult<()> {
        self.state.commit(py, &self.shared)
    }

    /// Discards every write and releases its locks; the transaction has ended. Does
    /// nothing if it has already ended.
    fn rollback(&self, py: Python<'_>) {
        self.state.rollback(py);
    }

    /// The number of keys it has written and the bytes its buffer holds (counted
    /// against max_bytes).
    #[getter]
    fn pending(&self, py: Python<'_>) -> PyResult<(usize, u64)> {
        self.run(py, |_, t| Ok(t.pending()))
    }

    /// Its id, unique in this open of the database (as Db.lock_waits() reports it).
    #[getter]
    fn id(&self) -> u64 {
        self.state.id
    }

    /// The seqno of its snapshot: at "repeatable_read", "snapshot" and "serializable" it
    /// reads every commit with a smaller one.
    #[getter]
    fn snapshot_seqno(&self) -> u64 {
        self.state.snapshot_seqno
    }

    /// Its isolation level, as passed to Db.transaction().
    #[getter]
    fn isolation(&self) -> &'static str {
        self.state.isolation
    }

    /// "optimistic" or "pessimistic".
    #[getter]
    fn mode(&self) -> &'static str {
        self.state.mode
    }

    /// "active", "committed", "rolled_back", or "failed" (its commit raised; nothing
    /// was written).
    #[getter]
    fn state(&self) -> &'static str {
        match self.state.end() {
            ACTIVE => "active",
            COMMITTED => "committed",
            ROLLED_BACK => "rolled_back",
            _ => "failed",
        }
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    /// Commits if the block ended without an exception (and the transaction is still
    /// active); rolls back if it raised, and lets the exception propagate.
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyType>>,
        exc_value: Option<&Bound<'_, PyAny>>,
        traceback: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let _ = (exc_value, traceback);
        if exc_type.is_some() {
            self.state.rollback(py);
        } else if self.state.is_active() {
            self.state.commit(py, &self.shared)?;
        }
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!(
            "<silt.Transaction {} {}/{} {} on {:?}>",
            self.state.id,
            self.state.isolation,
            self.state.mode,
            self.state(),
            self.shared.path.display().to_string()
        )
    }
}
