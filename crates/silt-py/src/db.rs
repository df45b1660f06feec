//! `silt.Db`: an open database, dict-like, with column families, batches, snapshots and
//! iterators. Each method converts its arguments, then calls the engine with the GIL
//! released (`Shared::call`); the operations it shares with `ColumnFamily` and
//! `Snapshot` are in `ops.rs` and `iter.rs`.

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyType};

use crate::batch::WriteBatch;
use crate::cf::ColumnFamily;
use crate::iter::{Iter, Mode, Spec};
use crate::ops;
use crate::options;
use crate::shared::Shared;
use crate::snapshot::Snapshot;
use crate::txn::{Transaction, TxnArgs};
use crate::view::{SnapshotState, Target, View};

/// An open silt database: an embedded, durable key-value store (an LSM tree).
///
///     with silt.Db("/var/lib/app/db", sync="full") as db:
///         db[b"user/1"] = b"ada"
///         assert db[b"user/1"] == b"ada"
///         for key, value in db.prefix(b"user/"):
///             ...
///
/// Keys and values are bytes (bytearray and memoryview are accepted too); reads return
/// bytes. With `str_keys=True` a str key is accepted and encoded as UTF-8.
///
/// Dict-like: `db[k]` (KeyError if absent), `db[k] = v`, `del db[k]` (a no-op for an
/// absent key: telling would cost a read), `k in db`, `db.get(k, default)`, `iter(db)`
/// (the keys, in order). There is no `len(db)`: the engine keeps no count of live keys
/// (a delete is a blind tombstone), so it would be a full scan; count with
/// `sum(1 for _ in db.keys())` when you mean to.
///
/// Atomic writes: db.batch() (a WriteBatch); consistent reads: db.snapshot();
/// both, with isolation levels and conflict checks: db.transaction() (a Transaction,
/// committed at the end of its `with` block) and db.transact(fn), which runs fn(txn)
/// again when it conflicts.
///
/// Every method that can wait on the disk or a lock releases the GIL, so threads run in
/// parallel and concurrent durable writes share one fdatasync (group commit).
///
/// Options (keyword arguments; defaults are the engine's):
///   sync="none"            when a write is acknowledged: "none" (in the OS: a process
///                          crash loses nothing, a machine crash may lose the last
///                          writes), "interval" (plus a background fdatasync every
///                          sync_interval seconds, default 0.01), or "full" (after an
///                          fdatasync shared by concurrent writers). Per write:
///                          sync=True/False.
///   sync_interval=0.01     seconds between background syncs, with sync="interval".
///   str_keys=False         accept str keys, encoded as UTF-8.
///   read_only=False        open read-only, for tools and for a second process reading
///                          a database another process writes: no lock is taken and
///                          nothing is written; it reads the state as of the open (reopen
///                          to see later writes); writes raise silt.ReadOnlyError. A
///                          missing database is not created.
///   create_if_missing=True, paranoid_checks=True,
///   memtable_bytes=64 MiB, immutable_memtables_max=2, memtable_scan_flush_trigger=4096
///   (0: off), memtable_bloom_ratio=0 (off; 0.02 filters
///   point reads of keys a memtable lacks), block_cache_bytes=64 MiB,
///   table_cache_tables=4096, block_size_bytes=4096, bloom_bits_per_key=10,
///   compression="none" ("lz4", "zstd", "zstd:LEVEL"), level_size_ratio=10,
///   level_base_bytes=256 MiB, table_target_bytes=64 MiB, l0_compaction_trigger=4,
///   l0_stall_tables=20, l0_slowdown_tables=12, background_threads=2,
///   wal_segment_bytes=a quarter of memtable_bytes (17 to 64 MiB; 17 MiB at the defaults),
///   blob_threshold_bytes=1024 (None keeps every value in the tables),
///   blob_gc_garbage_ratio=0.5.
///   stats_dump_period=10.0  seconds between writes of the STATS file that `silt stats`
///                          reads from another process (None: never).
///
/// Raises silt.LockedError if another handle (another process, or another open Db of
/// this process) holds the directory (unless read_only), silt.IoError / silt.CorruptionError if it cannot
/// be opened. Close it with close() or a `with` block: that waits for background work,
/// and everything acknowledged stays recoverable.
#[pyclass(frozen, mapping, module = "silt", name = "Db")]
pub struct Db {
    pub(crate) shared: Arc<Shared>,
}

impl Db {
    fn target(&self, py: Python<'_>, cf: Option<&Bound<'_, PyAny>>) -> PyResult<Target> {
        Target::from_arg(py, &self.shared, cf)
    }

    fn iter(
        &self,
        py: Python<'_>,
        spec: Spec,
        reverse: bool,
        cf: Option<&Bound<'_, PyAny>>,
        mode: Mode,
    ) -> PyResult<Iter> {
        let target = self.target(py, cf)?;
        Iter::new(py, &self.shared, View::Latest, target, spec, reverse, mode)
    }

    #[allow(clippy::too_many_arguments)]
    fn iter_args(
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
        self.iter(py, spec, reverse, cf, mode)
    }
}

#[pymethods]
impl Db {
    #[new]
    #[pyo3(signature = (path, **options))]
    fn new(py: Python<'_>, path: PathBuf, options: Option<&Bound<'_, PyDict>>) -> PyResult<Db> {
        let parsed = options::parse(py, path.clone(), options)?;
        let db = py
            .detach(|| parsed.builder.open())
            .map_err(|e| crate::errors::to_py(py, e))?;
        Ok(Db {
            shared: Arc::new(Shared::new(db, path, parsed.str_keys, parsed.read_only)),
        })
    }

    /// The value of `key`, or `default` if it is absent. `cf` names the column family
    /// (a ColumnFamily or its name; the default one if None).
    #[pyo3(signature = (key, default=None, *, cf=None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
        cf: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let target = self.target(py, cf)?;
        Ok(ops::get(py, &self.shared, &View::Latest, target, key)?
            .map(Bound::into_any)
            .or(default))
    }

    /// Writes `value` under `key`. `sync=True` acknowledges only once durable (an
    /// fdatasync shared with concurrent writers), `sync=False` once in the OS, None as
    /// the database's sync mode.
    #[pyo3(signature = (key, value, *, cf=None, sync=None))]
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        cf: Option<&Bound<'_, PyAny>>,
        sync: Option<bool>,
    ) -> PyResult<()> {
        let target = self.target(py, cf)?;
        ops::put(py, &self.shared, target, key, value, sync)
    }

    /// Deletes `key` (a no-op if it is absent). `sync` as for put.
    #[pyo3(signature = (key, *, cf=None, sync=None))]
    fn delete(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        cf: Option<&Bound<'_, PyAny>>,
        sync: Option<bool>,
    ) -> PyResult<()> {
        let target = self.target(py, cf)?;
        ops::delete(py, &self.shared, target, key, sync)
    }

    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let target = self.target(py, None)?;
        Ok(ops::get_item(py, &self.shared, &View::Latest, target, key)?.into_any())
    }

    fn __setitem__(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.put(py, key, value, None, None)
    }

    fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        self.delete(py, key, None, None)
    }

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let target = self.target(py, None)?;
        ops::contains(py, &self.shared, &View::Latest, target, key)
    }

    /// The keys of the default column family, in order.
    fn __iter__(&self, py: Python<'_>) -> PyResult<Iter> {
        self.iter_args(py, None, None, None, false, None, Mode::Keys)
    }

    /// The (key, value) pairs with start <= key < end (None: unbounded), in key order,
    /// or descending with reverse=True. One consistent view, as of the call.
    #[pyo3(signature = (start=None, end=None, *, reverse=false, cf=None))]
    fn range(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        cf: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Iter> {
        self.iter_args(py, start, end, None, reverse, cf, Mode::Items)
    }

    /// The (key, value) pairs whose key starts with `prefix`, in key order (or reverse).
    #[pyo3(signature = (prefix, *, reverse=false, cf=None))]
    fn prefix(
        &self,
        py: Python<'_>,
        prefix: &Bound<'_, PyAny>,
        reverse: bool,
        cf: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Iter> {
        self.iter_args(py, None, None, Some(prefix), reverse, cf, Mode::Items)
    }

    /// The keys with start <= key < end, or with `prefix` (not both), in order.
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
        self.iter_args(py, start, end, prefix, reverse, cf, Mode::Keys)
    }

    /// The values of the keys with start <= key < end, or with `prefix`, in key order.
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
        self.iter_args(py, start, end, prefix, reverse, cf, Mode::Values)
    }

    /// The (key, value) pairs with start <= key < end, or with `prefix`, in key order.
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
        self.iter_args(py, start, end, prefix, reverse, cf, Mode::Items)
    }

    /// A new, empty WriteBatch for this database: its writes are applied all or nothing,
    /// across column families. Used as a context manager, it is written when the block
    /// ends without an exception (and discarded if one is raised):
    ///
    ///     with db.batch(sync=True) as b:
    ///         b[b"a"] = b"1"
    ///         b.delete(b"b", cf="users")
    #[pyo3(signature = (*, sync=None))]
    fn batch(&self, py: Python<'_>, sync: Option<bool>) -> PyResult<WriteBatch> {
        self.shared.check_open(py)?;
        Ok(WriteBatch::new(self.shared.clone(), sync))
    }

    /// Writes `batch` atomically; then it is empty (if the write fails it keeps its
    /// writes, to retry). `sync` as for put; None uses the batch's own, then the
    /// database's.
    #[pyo3(signature = (batch, *, sync=None))]
    fn write(
        &self,
        py: Python<'_>,
        batch: &Bound<'_, WriteBatch>,
        sync: Option<bool>,
    ) -> PyResult<()> {
        batch.get().write_to(py, &self.shared, sync)
    }

    /// A consistent read view: it sees exactly the writes acknowledged before it was
    /// taken, and keeps what it sees from compaction until closed (use it in a `with`
    /// block, or call close()).
    fn snapshot(&self, py: Python<'_>) -> PyResult<Snapshot> {
        let snap = self.shared.call(py, |db| Ok(db.snapshot()))?;
        Ok(Snapshot {
            shared: self.shared.clone(),
            state: Arc::new(SnapshotState::new(snap)),
        })
    }

    /// A new transaction (see help(silt.Transaction)). Used as a context manager it
    /// commits when the block ends cleanly and rolls back if it raises:
    ///
    ///     with db.transaction(isolation="serializable") as txn:
    ///         txn[b"a"] = txn[b"b"]
    ///
    /// isolation: "snapshot" (reads from the snapshot taken now; a write to a key
    ///   someone else changed since fails at commit: first committer wins),
    ///   "serializable" (also the keys and ranges it read must not change),
    ///   "repeatable_read" (the keys it reads and writes must not change; ranges are not
    ///   protected), "read_committed" / "read_uncommitted" (each read sees the latest
    ///   committed state; no checks). docs/design.md has the table of anomalies.
    /// mode: "optimistic" (no locks; conflicts found at commit: ConflictError) or
    ///   "pessimistic" (locks taken as it goes and held to the end: LockTimeoutError
    ///   after lock_timeout seconds, DeadlockError at once for a wait that would
    ///   deadlock).
    /// sync: the commit's durability, as for put (None: the database's sync mode).
    /// max_bytes: the most it may buffer (keys, values, 64 bytes per key; default
    ///   1 GiB); a write past it raises TransactionTooLargeError.
    #[pyo3(signature = (
        *, isolation="snapshot", mode="optimistic", sync=None, lock_timeout=1.0, max_bytes=None
    ))]
    fn transaction(
        &self,
        py: Python<'_>,
        isolation: &str,
        mode: &str,
        sync: Option<bool>,
        lock_timeout: f64,
        max_bytes: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Transaction> {
        let opts = TxnArgs {
            isolation,
            mode,
            sync,
            lock_timeout,
            max_bytes,
        }
        .parse(py)?;
        Transaction::begin(py, &self.shared, opts)
    }

    /// Runs `func(txn)` in a new transaction and commits it, retrying on
    /// silt.RetryableError (ConflictError, LockTimeoutError, DeadlockError, raised by
    /// `func` or the commit): it rolls back, waits a little (100 us doubling to 10 ms,
    /// with jitter) and calls `func` again in a new transaction, up to max_retries
    /// times. Returns what `func` returned; any other exception rolls back and
    /// propagates at once. `func` must be safe to run more than once (no side effects
    /// outside the transaction). Options as for transaction().
    ///
    ///     def deposit(txn):
    ///         n = int(txn.get(b"balance", b"0"))
    ///         txn[b"balance"] = b"%d" % (n + 10)
    ///         return n + 10
    ///     new_balance = db.transact(deposit)
    #[pyo3(signature = (
        func, *, isolation="snapshot", mode="optimistic", sync=None, lock_timeout=1.0,
        max_bytes=None, max_retries=16
    ))]
    #[allow(clippy::too_many_arguments)]
    fn transact<'py>(
        &self,
        py: Python<'py>,
        func: &Bound<'py, PyAny>,
        isolation: &str,
        mode: &str,
        sync: Option<bool>,
        lock_timeout: f64,
        max_bytes: Option<&Bound<'py, PyAny>>,
        max_retries: i64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let mut opts = TxnArgs {
            isolation,
            mode,
            sync,
            lock_timeout,
            max_bytes,
        }
        .parse(py)?;
        opts.max_retries = u32::try_from(max_retries).map_err(|_| {
            crate::errors::invalid(
                py,
                format!("max_retries: expected an int in [0, 2**32), got {max_retries}"),
            )
        })?;
        crate::txn::transact(py, &self.shared, func, opts)
    }

    /// The pessimistic transactions waiting for a lock now, each as (its id, [the ids of
    /// the transactions it waits for]): the wait-for graph, to diagnose contention.
    fn lock_waits(&self, py: Python<'_>) -> PyResult<Vec<(u64, Vec<u64>)>> {
        self.shared.call(py, |db| Ok(db.lock_waits()))
    }

    /// Creates the column family `name` (durably), or returns it if it exists.
    fn create_cf(&self, py: Python<'_>, name: &str) -> PyResult<ColumnFamily> {
        let cf = self.shared.call(py, |db| db.create_cf(name))?;
        Ok(ColumnFamily {
            shared: self.shared.clone(),
            cf,
        })
    }

    /// The column family `name`; ColumnFamilyNotFoundError if there is none.
    fn cf(&self, py: Python<'_>, name: &str) -> PyResult<ColumnFamily> {
        let cf = self.shared.call(py, |db| db.cf(name))?;
        Ok(ColumnFamily {
            shared: self.shared.clone(),
            cf,
        })
    }

    /// Drops a column family (a ColumnFamily or its name): its data is unreachable at
    /// once, its files are deleted when no reader uses them. The default one cannot be
    /// dropped.
    fn drop_cf(&self, py: Python<'_>, cf: &Bound<'_, PyAny>) -> PyResult<()> {
        let target = self.target(py, Some(cf))?;
        self.shared.call(py, |db| {
            let name = match target {
                Target::Handle(h) => h.name().to_string(),
                Target::Name(n) => n,
            };
            db.drop_cf(&name)
        })
    }

    /// The names of every column family, in creation order ("default" first).
    fn list_cfs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let names = self.shared.call(py, |db| Ok(db.list_cfs()))?;
        PyList::new(py, names)
    }

    /// Makes every acknowledged write durable (one fdatasync, shared).
    fn sync(&self, py: Python<'_>) -> PyResult<()> {
        self.shared.call(py, |db| db.sync())
    }

    /// Writes the memtable to a table now (also done in the background).
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.shared.call(py, |db| db.flush())
    }

    /// Waits at most `timeout` seconds until no flush or compaction is running or due
    /// (RocksDB's WaitForCompact); True once settled, False if the timeout passed first.
    /// Does not flush the memtable: call flush() first for that.
    #[pyo3(signature = (timeout=60.0))]
    fn wait_for_compactions(&self, py: Python<'_>, timeout: f64) -> PyResult<bool> {
        let t = std::time::Duration::try_from_secs_f64(timeout).map_err(|_| {
            pyo3::exceptions::PyValueError::new_err(format!(
                "timeout must be a finite number of seconds >= 0, not {timeout}"
            ))
        })?;
        // In slices, so Ctrl-C is seen and close() (which needs the handle) is not held
        // off for the whole timeout.
        let start = std::time::Instant::now();
        loop {
            let slice = t
                .saturating_sub(start.elapsed())
                .min(std::time::Duration::from_millis(100));
            if self.shared.call(py, |db| db.wait_for_compactions(slice))? {
                return Ok(true);
            }
            if start.elapsed() >= t {
                return Ok(false);
            }
            py.check_signals()?;
        }
    }

    /// Compacts the keys with start <= key <= end (None: unbounded) of a column family
    /// down the levels, and waits for it.
    #[pyo3(signature = (start=None, end=None, *, cf=None))]
    fn compact_range(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        cf: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let target = self.target(py, cf)?;
        let lo = crate::convert::bound(start, self.shared.str_keys, true)?;
        let hi = crate::convert::bound(end, self.shared.str_keys, true)?;
        self.shared.call(py, |db| {
            let cf = target.resolve(db)?;
            db.compact_range_cf(&cf, (lo, hi))
        })
    }

    /// Makes a checkpoint in `dir` (which must not exist): a directory that opens as a
    /// database (silt.Db(dir)) holding this one's state at one seqno, which includes
    /// every write acknowledged before the call, while writes go on. Tables are hard
    /// links (copied across file systems); the directory appears whole or not at all.
    /// Returns a dict: dir, seqno (every write below it is in the checkpoint, and no
    /// other), files_linked, files_copied, bytes_copied, log_segments.
    fn checkpoint<'py>(&self, py: Python<'py>, dir: PathBuf) -> PyResult<Bound<'py, PyDict>> {
        let info = self.shared.call(py, |db| db.checkpoint(&dir))?;
        crate::backup::checkpoint_dict(py, &info)
    }

    /// Counters and sizes, as a dict: per level tables and bytes, memtable bytes, cache
    /// hits and misses, bytes written by users, the log, flushes and compactions, the
    /// log's fdatasync count (`wal_fsyncs`), write amplification, stalls, blob files.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.shared.call(py, |db| Ok(db.stats()))?;
        crate::stats::to_dict(py, &s)
    }

    /// Why the database is poisoned (no longer accepts writes), if it is; else None.
    fn background_error(&self, py: Python<'_>) -> PyResult<Option<String>> {
        self.shared.call(py, |db| Ok(db.background_error()))
    }

    /// Closes the database: waits for calls in flight and background work; everything
    /// acknowledged stays recoverable. Every later call through it, its column
    /// families, snapshots, batches and iterators raises ClosedError. Closing twice does
    /// nothing. Raises the failure that poisoned the database, if one did.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.shared.close(py)
    }

    /// Whether close() ran.
    #[getter]
    fn closed(&self) -> bool {
        self.shared.is_closed()
    }

    /// The database directory.
    #[getter]
    fn path(&self) -> PathBuf {
        self.shared.path.clone()
    }

    /// Whether str keys are accepted (the option str_keys).
    #[getter]
    fn str_keys(&self) -> bool {
        self.shared.str_keys
    }

    /// Whether the database was opened with read_only=True.
    #[getter]
    fn read_only(&self) -> bool {
        self.shared.read_only
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    /// Closes the database (whether the block raised or not).
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyType>>,
        exc_value: Option<&Bound<'_, PyAny>>,
        traceback: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let _ = (exc_type, exc_value, traceback);
        self.shared.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        let state = if self.shared.is_closed() {
            "closed"
        } else {
            "open"
        };
        format!(
            "<silt.Db {:?} {state}>",
            self.shared.path.display().to_string()
        )
    }
}
