//! Transactions: [`Db::begin`] gives a [`Txn`] that buffers its writes, reads through the
//! same paths as the database (its own writes first), and commits as one log record through
//! the commit path of batches (`db/write.rs`), checked at its own seqno.
//!
//! Two kinds of concurrency control ([`Concurrency`]) and five isolation levels
//! ([`IsolationLevel`]); `docs/design.md` ("Transactions") has the table of which anomalies
//! each level prevents, which `tests/hermitage.rs` proves cell by cell.
//!
//! - **Optimistic**: no locks; at commit, the keys (and, under `Serializable`, the ranges)
//!   the level protects must have no entry newer than the transaction saw them, or the commit
//!   fails with [`Error::Conflict`].
//! - **Pessimistic**: writes and `get_for_update` take exclusive row locks, reads under
//!   `RepeatableRead` and `Serializable` shared ones, scans under `Serializable` shared range
//!   locks (`lock_table.rs`), held until the end (strict two-phase locking); a lock on a key
//!   that changed after the snapshot is refused with `Conflict` (first updater wins). Plain
//!   writes (`Db::put`, batches) take no locks; the same commit check catches them.
//!
//! Invariants:
//! - **T1** A transaction's snapshot `s` is registered from `begin` to its end, below every
//!   seqno its checks start from, so compaction keeps the newest entry of every key above
//!   it: a check can always see a write that happened after `s`.
//! - **T2** A commit's checks cover `since..c`, `c` its own seqno: `since..r1` before it
//!   reserves its place (phase 1, outside the reservation, after a large commit's part
//!   records, after every writer below `r1` applied), then `r1..c` at `c` (phase 2,
//!   inside the reservation, after every writer below `c` applied: invariant W5 of
//!   `db/mod.rs`). A failed phase 1 holds no reservation; a failed phase 2 abandons it (a
//!   Void record). Either way no commit record is written: the part records of a large
//!   commit, if any, are dropped by replay, and nothing of the transaction is applied.
//! - **T3** A committed transaction is one record (or parts and one commit record), applied
//!   at one seqno: visible all at once, in commit order, and replayed all or nothing.
//! - **T4** The log start never passes the first part record of a transaction whose commit
//!   record is not yet in a table (`DbInner::log_pins`, `docs/format/batch.md`).

use std::collections::HashMap;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use smallvec::SmallVec;

use crate::batch::{self, WriteBatch, MAX_VALUE_BYTES};
use crate::cf::ColumnFamily;
use crate::db::{Db, DbInner};
use crate::error::{ConflictKind, Error, Result};
use crate::key::{Seqno, MAX_KEY_BYTES, MAX_SEQNO};
use crate::lock_table::{LockError, Mode, Owner};
use crate::read::{Bounds, Cursor, Iter, Read, ScanLog, ScanRange, Source};
use crate::version::SuperVersion;

mod buffer;
mod validate;

use buffer::{Op, WriteBuffer};

/// How isolated a transaction is from concurrent ones. `docs/design.md` ("Transactions")
/// has the table of the anomalies each level prevents, for both kinds of concurrency
/// control.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IsolationLevel {
    /// Reads see the latest committed data at each read. silt never exposes uncommitted
    /// writes (a transaction's writes are private until its commit), so this level gives
    /// exactly what `ReadCommitted` gives, as in PostgreSQL.
    ReadUncommitted,
    /// Reads see the latest committed data at each read (each iterator a consistent view as
    /// of its creation). No validation: a blind write wins over a concurrent one.
    ReadCommitted,
    /// Reads come from the transaction's snapshot; the keys it reads and writes must not
    /// change before it commits (optimistic: validated at commit; pessimistic: shared and
    /// exclusive row locks). Scans are not protected: phantoms are possible.
    RepeatableRead,
    /// Snapshot isolation: reads from the snapshot taken at `begin`; a write to a key that
    /// changed after it fails (first committer, or first updater, wins). Write skew is
    /// possible.
    Snapshot,
    /// Serializable: as `RepeatableRead`, and the ranges the transaction scanned must not
    /// change either (predicate validation or range locks), so every committed transaction
    /// behaves as if it ran alone, in commit order.
    Serializable,
}

impl IsolationLevel {
    /// Whether reads come from the transaction's snapshot (else from the latest state).
    fn snapshot_reads(self) -> bool {
        matches!(
            self,
            IsolationLevel::RepeatableRead
                | IsolationLevel::Snapshot
                | IsolationLevel::Serializable
        )
    }

    /// Whether point reads are protected until commit.
    fn protects_reads(self) -> bool {
        matches!(
            self,
            IsolationLevel::RepeatableRead | IsolationLevel::Serializable
        )
    }
}

/// Optimistic or pessimistic concurrency control.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Concurrency {
    /// No locks; conflicts are found at commit ([`Error::Conflict`]).
    Optimistic,
    /// Row and range locks taken as the transaction goes, held to its end; a lock waits at
    /// most `lock_timeout` ([`Error::LockTimeout`]), and a wait that would deadlock is
    /// refused at once ([`Error::Deadlock`]).
    Pessimistic,
}

/// Options of one transaction ([`Db::begin`]).
#[derive(Clone, Debug)]
pub struct TxnOptions {
    /// Default: [`IsolationLevel::Snapshot`].
    pub isolation: IsolationLevel,
    /// Default: [`Concurrency::Optimistic`].
    pub concurrency: Concurrency,
    /// Durability of the commit: `Some(true)` durable before `commit` returns, `Some(false)`
    /// in the OS, `None` (default) the database's sync mode.
    pub sync: Option<bool>,
    /// How long a pessimistic lock request waits. Default: 1 s (RocksDB's default).
    pub lock_timeout: Duration,
    /// The most a transaction may buffer, in bytes (keys, values, and 64 bytes of
    /// bookkeeping per key); a write past it fails with [`Error::TransactionTooLarge`].
    /// Default: 1 GiB. A transaction holds its writes in memory until it commits; this
    /// bounds that buffer, not the process: allocator overhead, the read set, the commit's
    /// encoded copy and the memtables the commit fills come on top (measured: a
    /// 4M-write transaction counted at 448 MB peaked the process at 1.6 GiB; `docs/design.md`,
    /// "Memory"). Past one log record (32 MiB) it is written as several records and
    /// committed by the last one (`docs/format/batch.md`).
    pub max_bytes: u64,
    /// How many times [`Db::transact`] runs the closure again after a retryable error.
    /// Default: 16.
    pub max_retries: u32,
}

impl Default for TxnOptions {
    fn default() -> Self {
        TxnOptions {
            isolation: IsolationLevel::Snapshot,
            concurrency: Concurrency::Optimistic,
            sync: None,
            lock_timeout: Duration::from_secs(1),
            max_bytes: 1 << 30,
            max_retries: 16,
        }
    }
}

impl TxnOptions {
    /// Options with this isolation level and concurrency control, the rest default.
    pub fn new(isolation: IsolationLevel, concurrency: Concurrency) -> TxnOptions {
        TxnOptions {
            isolation,
            concurrency,
            ..TxnOptions::default()
        }
    }
}

/// A key a commit checks: column family, key, the seqno from which a change is a conflict,
/// and what kind.
type KeyCheck<'a> = (u32, &'a [u8], Seqno, ConflictKind);

/// A checked key, inline up to 32 bytes as the write buffer's: a read adds one per key.
type CheckKey = SmallVec<[u8; 32]>;

/// What a commit must check: per key, the seqno from which a change is a conflict, and what
/// kind of conflict it would be.
#[derive(Default)]
struct Checks {
    keys: HashMap<(u32, CheckKey), (Seqno, ConflictKind)>,
}

impl Checks {
    fn add(&mut self, cf: u32, key: &[u8], since: Seqno, kind: ConflictKind) {
        let e = self
            .keys
            .entry((cf, SmallVec::from_slice(key)))
            .or_insert((since, kind));
        e.0 = e.0.min(since);
        if kind == ConflictKind::WriteWrite {
            e.1 = kind;
        }
    }
}

/// A transaction. Reads see its own writes first; nothing it writes is visible to anyone
/// else until [`Txn::commit`], and then all at once. Dropped without `commit`, it rolls
/// back.
///
/// # Examples
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// use silt::{Db, IsolationLevel, Concurrency, TxnOptions};
/// let db = Db::open(dir.path()).unwrap();
/// db.put(b"alice", b"10").unwrap();
/// let mut t = db.begin(TxnOptions::new(IsolationLevel::Serializable, Concurrency::Optimistic));
/// let balance: u32 = std::str::from_utf8(&t.get(b"alice").unwrap().unwrap()).unwrap().parse().unwrap();
/// t.put(b"alice", (balance - 3).to_string().as_bytes()).unwrap();
/// t.put(b"bob", b"3").unwrap();
/// assert_eq!(t.get(b"bob").unwrap().as_deref(), Some(&b"3"[..])); // its own write
/// assert_eq!(db.get(b"bob").unwrap(), None); // not visible before commit
/// t.commit().unwrap();
/// assert_eq!(db.get(b"alice").unwrap().as_deref(), Some(&b"7"[..]));
/// ```
pub struct Txn {
    db: Db,
    id: Owner,
    opts: TxnOptions,
    /// The registered snapshot (T1).
    snapshot: Seqno,
    buf: WriteBuffer,
    checks: Mutex<Checks>,
    scans: ScanLog,
    savepoints: Vec<usize>,
    done: bool,
}

impl std::fmt::Debug for Txn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Txn")
            .field("id", &self.id)
            .field("isolation", &self.opts.isolation)
            .field("concurrency", &self.opts.concurrency)
            .field("snapshot", &self.snapshot)
            .field("writes", &self.buf.len())
            .finish()
    }
}

impl Db {
    /// Starts a transaction. It takes its snapshot now (every level registers one, T1).
    pub fn begin(&self, opts: TxnOptions) -> Txn {
        let inner = &self.inner;
        let snapshot = {
            let mut s = inner.snapshots.lock();
            let seqno = inner.visible();
            *s.entry(seqno).or_insert(0) += 1;
            seqno
        };
        Txn {
            db: self.clone(),
            id: inner
                .next_txn_id
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst),
            opts,
            snapshot,
            buf: WriteBuffer::default(),
            checks: Mutex::new(Checks::default()),
            scans: ScanLog::default(),
            savepoints: Vec::new(),
            done: false,
        }
    }

    /// Runs `f` in a transaction and commits it; if `f` or the commit fails with a
    /// retryable error ([`Error::is_retryable`]: a conflict, a lock timeout, a deadlock),
    /// rolls back and runs `f` again in a new transaction, up to `opts.max_retries` times,
    /// with an exponential backoff (100 µs doubling to 10 ms, with jitter). Returns what
    /// `f` returned with the commit that succeeded.
    ///
    /// # Errors
    ///
    /// The first error that is not retryable, or the last retryable one when the retries
    /// run out.
    ///
    /// # Examples
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = silt::Db::open(dir.path()).unwrap();
    /// let n = db.transact(silt::TxnOptions::default(), |t| {
    ///     let n = t.get(b"counter")?.map_or(0, |v| v[0]) + 1;
    ///     t.put(b"counter", &[n])?;
    ///     Ok(n)
    /// }).unwrap();
    /// assert_eq!(n, 1);
    /// ```
    pub fn transact<T>(
        &self,
        opts: TxnOptions,
        mut f: impl FnMut(&mut Txn) -> Result<T>,
    ) -> Result<T> {
        let mut attempt = 0u32;
        loop {
            let mut t = self.begin(opts.clone());
            let r = f(&mut t).and_then(|v| t.commit().map(|()| v));
            match r {
                Err(e) if e.is_retryable() && attempt < opts.max_retries => {
                    let base = 100u64 << attempt.min(7);
                    attempt += 1;
                    let jitter = (std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.subsec_nanos() as u64))
                        % base.max(1);
                    std::thread::sleep(Duration::from_micros((base + jitter).min(10_000)));
                }
                r => return r,
            }
        }
    }
}

impl Db {
    /// The pessimistic transactions waiting for a lock now, by [`Txn::id`], each with the
    /// ids of the transactions it waits for: a view of the wait-for graph, for diagnosing
    /// lock contention (and for tests that step transactions one operation at a time).
    pub fn lock_waits(&self) -> Vec<(u64, Vec<u64>)> {
        self.inner.locks.waiting()
    }
}

impl Txn {
    /// The transaction's id, unique in this open of the database (as [`Db::lock_waits`]
    /// reports it).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The seqno of the transaction's snapshot: reads at `RepeatableRead` and above see
    /// every commit with a smaller one.
    pub fn snapshot_seqno(&self) -> u64 {
        self.snapshot
    }

    /// Its options.
    pub fn options(&self) -> &TxnOptions {
        &self.opts
    }

    /// How many keys it has written, and the bytes its buffer holds (counted against
    /// `max_bytes`).
    pub fn pending(&self) -> (usize, u64) {
        (self.buf.len(), self.buf.bytes())
    }

    fn inner(&self) -> &Arc<DbInner> {
        &self.db.inner
    }

    fn check_active(&self) -> Result<()> {
        if self.done {
            return Err(Error::invalid("the transaction has ended"));
        }
        Ok(())
    }

    /// The read view: the snapshot for the snapshot levels, else the latest state.
    fn view(&self) -> (Arc<SuperVersion>, Seqno) {
        if self.opts.isolation.snapshot_reads() {
            (self.inner().super_version(), self.snapshot)
        } else {
            self.inner().read_view()
        }
    }

    fn lock(&self, cf: u32, key: &[u8], mode: Mode) -> Result<()> {
        let k = (cf, key.to_vec());
        self.inner()
            .locks
            .lock(self.id, &k, mode, self.opts.lock_timeout)
            .map_err(|e| self.lock_error(cf, key, e))
    }

    fn lock_error(&self, cf: u32, key: &[u8], e: LockError) -> Error {
        let cf = self.inner().cf_name(cf);
        match e {
            LockError::Timeout { waited } => Error::LockTimeout {
                cf,
                key: key.to_vec(),
                waited_ms: waited.as_millis() as u64,
            },
            LockError::Deadlock => Error::Deadlock {
                cf,
                key: key.to_vec(),
            },
        }
    }

    fn conflict(&self, cf: u32, key: &[u8], kind: ConflictKind) -> Error {
        Error::Conflict {
            cf: self.inner().cf_name(cf),
            key: key.to_vec(),
            kind,
        }
    }

    /// A pessimistic lock on a key whose snapshot read could be stale: refused with
    /// `Conflict` if the key changed after the snapshot (first updater wins).
    fn lock_checked(&self, cf: u32, key: &[u8], mode: Mode, kind: ConflictKind) -> Result<()> {
        self.lock(cf, key, mode)?;
        if self.opts.isolation.snapshot_reads() {
            let sv = self.inner().super_version();
            if validate::key_changed(&sv, cf, key, self.snapshot, MAX_SEQNO)? {
                return Err(self.conflict(cf, key, kind));
            }
        }
        Ok(())
    }

    fn cf_exists(&self, cf: u32) -> Result<()> {
        if self.inner().super_version().version.cfs.contains_key(&cf) {
            Ok(())
        } else {
            Err(self.inner().cf_not_found(cf))
        }
    }

    // ---------------------------------------------------------------- reads

    fn read(&self, cf: u32, key: &[u8], for_update: bool) -> Result<Option<Vec<u8>>> {
        self.check_active()?;
        let iso = self.opts.isolation;
        let pessimistic = self.opts.concurrency == Concurrency::Pessimistic;
        if for_update {
            if pessimistic {
                self.lock_checked(cf, key, Mode::Exclusive, ConflictKind::WriteWrite)?;
            }
        } else if iso.protects_reads() && pessimistic && self.buf.get(cf, key).is_none() {
            self.lock_checked(cf, key, Mode::Shared, ConflictKind::ReadValidation)?;
        }
        if let Some(op) = self.buf.get(cf, key) {
            return Ok(match op {
                Op::Put(v) => Some(v.clone()),
                _ => None,
            });
        }
        let (sv, seqno) = self.view();
        if for_update {
            self.checks
                .lock()
                .add(cf, key, seqno, ConflictKind::WriteWrite);
        } else if iso.protects_reads() {
            self.checks
                .lock()
                .add(cf, key, seqno, ConflictKind::ReadValidation);
        }
        self.inner().get_in(&sv, cf, key, seqno)
    }

    /// The value of `key` in the default column family: its own write if it made one,
    /// else as its isolation level reads.
    ///
    /// # Errors
    ///
    /// As [`Db::get`]; pessimistic `RepeatableRead`/`Serializable`: `LockTimeout`,
    /// `Deadlock`, `Conflict` (the key changed after the snapshot).
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.read(0, key, false)
    }

    /// [`Txn::get`] in column family `cf`.
    ///
    /// # Errors
    ///
    /// As [`Txn::get`].
    pub fn get_cf(&self, cf: &ColumnFamily, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.read(cf.id, key, false)
    }

    /// Reads `key` and protects it as if it were written: at commit (optimistic), or by an
    /// exclusive lock now (pessimistic), no one else may have changed it since this read —
    /// at every isolation level. Use it for read-modify-write.
    ///
    /// # Errors
    ///
    /// As [`Txn::get`]; pessimistic: `LockTimeout`, `Deadlock`, and at the snapshot levels
    /// `Conflict` if the key changed after the snapshot.
    pub fn get_for_update(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.read(0, key, true)
    }

    /// [`Txn::get_for_update`] in column family `cf`.
    ///
    /// # Errors
    ///
    /// As [`Txn::get_for_update`].
    pub fn get_for_update_cf(&self, cf: &ColumnFamily, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.read(cf.id, key, true)
    }

    /// The source of an iterator or cursor over `bounds` of `cf`: the read view, the
    /// transaction's own writes in range, and (`Serializable`) the record of what it
    /// covers, after a pessimistic range lock.
    fn source(&self, cf: u32, bounds: &Bounds, iter: bool) -> Source {
        // Registered before the super-version is taken (invariant D1, rule 2).
        let dead = iter
            .then(|| self.inner().dead_source(cf, &bounds.lo, None))
            .flatten();
        let (sv, seqno) = self.view();
        let inner = self.inner().clone();
        let now = Arc::new(crate::clock::ReadTime::new(inner.opts.clock.clone()));
        let merge = inner.merge_operator_if_any(cf);
        let l0_scan = inner.opts.l0_scan_compaction_ratio > 0.0;
        let src = Source::new(sv, cf, seqno, now, move || inner.cf_not_found(cf))
            .with_merge(merge)
            .with_l0_scan(l0_scan)
            .with_dead_runs(dead);
        if let Err(e) = self.check_active() {
            return src.failing(e);
        }
        let serializable = self.opts.isolation == IsolationLevel::Serializable;
        if serializable && self.opts.concurrency == Concurrency::Pessimistic {
            if let Err(e) = self.lock_range(cf, bounds) {
                return src.failing(e);
            }
        }
        let overlay = Arc::new(self.buf.overlay(cf, &bounds.lo, &bounds.hi));
        src.for_txn(Some(overlay), serializable.then(|| self.scans.clone()))
    }

    fn lock_range(&self, cf: u32, b: &Bounds) -> Result<()> {
        self.inner()
            .locks
            .lock_range(self.id, cf, &b.lo, &b.hi, self.opts.lock_timeout)
            .map_err(|e| self.lock_error(cf, b.lo_key().unwrap_or(&[]), e))?;
        let sv = self.inner().super_version();
        if let Some(k) = validate::range_changed(&sv, cf, &b.lo, &b.hi, self.snapshot, MAX_SEQNO)? {
            return Err(self.conflict(cf, &k, ConflictKind::Phantom));
        }
        Ok(())
    }

    fn iter_in(&self, cf: u32, bounds: Bounds) -> Iter {
        Iter::new(self.source(cf, &bounds, true), bounds)
    }

    fn cursor_in(&self, cf: u32) -> Cursor {
        let all = Bounds::from_range::<&[u8], _>(..);
        Cursor::new(self.source(cf, &all, false))
    }

    /// Every pair of the default column family with its own writes merged in, in key
    /// order; `.rev()` walks backwards.
    pub fn iter(&self) -> Iter {
        self.iter_in(0, Bounds::from_range::<&[u8], _>(..))
    }

    /// The pairs of the default column family in `range`, its own writes merged in.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Iter {
        self.iter_in(0, Bounds::from_range(range))
    }

    /// The pairs of column family `cf` in `range`, its own writes merged in.
    pub fn range_cf<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, cf: &ColumnFamily, range: R) -> Iter {
        self.iter_in(cf.id, Bounds::from_range(range))
    }

    /// The pairs of the default column family whose key starts with `prefix`.
    pub fn prefix(&self, prefix: &[u8]) -> Iter {
        self.iter_in(0, Bounds::prefix(prefix))
    }

    /// The pairs of column family `cf` whose key starts with `prefix`.
    pub fn prefix_cf(&self, cf: &ColumnFamily, prefix: &[u8]) -> Iter {
        self.iter_in(cf.id, Bounds::prefix(prefix))
    }

    /// A cursor over the default column family, its own writes merged in (as of the
    /// cursor's creation).
    pub fn cursor(&self) -> Cursor {
        self.cursor_in(0)
    }

    /// A cursor over column family `cf`.
    pub fn cursor_cf(&self, cf: &ColumnFamily) -> Cursor {
        self.cursor_in(cf.id)
    }

    // ---------------------------------------------------------------- writes

    fn write(&mut self, cf: u32, key: &[u8], op: Op) -> Result<()> {
        self.check_active()?;
        // A read-only, poisoned or closed database would refuse the commit: say so now.
        self.inner().check_writable()?;
        if key.len() > MAX_KEY_BYTES {
            return Err(Error::invalid(format!(
                "a key of {} bytes is over the limit of {MAX_KEY_BYTES} bytes",
                key.len()
            )));
        }
        if let Op::Put(v) = &op {
            if v.len() > MAX_VALUE_BYTES {
                return Err(Error::invalid(format!(
                    "a value of {} bytes is over the limit of {MAX_VALUE_BYTES} bytes",
                    v.len()
                )));
            }
        }
        if let Err(after) = self.buf.fits(cf, key, &op, self.opts.max_bytes) {
            return Err(Error::TransactionTooLarge {
                bytes: after,
                limit: self.opts.max_bytes,
            });
        }
        if self.opts.concurrency == Concurrency::Pessimistic {
            self.lock_checked(cf, key, Mode::Exclusive, ConflictKind::WriteWrite)?;
        }
        self.buf.write(cf, key, op);
        Ok(())
    }

    /// Writes `value` under `key` in the default column family, at commit.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for an oversized key or value; `TransactionTooLarge`; pessimistic:
    /// `LockTimeout`, `Deadlock`, and at the snapshot levels `Conflict` if the key changed
    /// after the snapshot.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.write(0, key, Op::Put(value.to_vec()))
    }

    /// [`Txn::put`] in column family `cf`.
    ///
    /// # Errors
    ///
    /// As [`Txn::put`].
    pub fn put_cf(&mut self, cf: &ColumnFamily, key: &[u8], value: &[u8]) -> Result<()> {
        self.write(cf.id, key, Op::Put(value.to_vec()))
    }

    /// Deletes `key` from the default column family, at commit.
    ///
    /// # Errors
    ///
    /// As [`Txn::put`].
    pub fn delete(&mut self, key: &[u8]) -> Result<()> {
        self.write(0, key, Op::Delete)
    }

    /// [`Txn::delete`] in column family `cf`.
    ///
    /// # Errors
    ///
    /// As [`Txn::put`].
    pub fn delete_cf(&mut self, cf: &ColumnFamily, key: &[u8]) -> Result<()> {
        self.write(cf.id, key, Op::Delete)
    }

    /// Deletes a write-once key (see [`WriteBatch::single_delete`]), at commit.
    ///
    /// # Errors
    ///
    /// As [`Txn::put`].
    pub fn single_delete(&mut self, key: &[u8]) -> Result<()> {
        self.write(0, key, Op::SingleDelete)
    }

    /// [`Txn::single_delete`] in column family `cf`.
    ///
    /// # Errors
    ///
    /// As [`Txn::put`].
    pub fn single_delete_cf(&mut self, cf: &ColumnFamily, key: &[u8]) -> Result<()> {
        self.write(cf.id, key, Op::SingleDelete)
    }

    // ---------------------------------------------------------------- savepoints

    /// Marks a savepoint: [`Txn::rollback_to_savepoint`] undoes every write made after it.
    /// Savepoints nest.
    pub fn savepoint(&mut self) {
        self.savepoints.push(self.buf.mark());
    }

    /// Undoes every write made since the most recent savepoint, and removes it. Locks taken
    /// since are kept (released at the end, as in RocksDB), and reads stay protected.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` if there is no savepoint or the transaction has ended.
    pub fn rollback_to_savepoint(&mut self) -> Result<()> {
        self.check_active()?;
        let mark = self
            .savepoints
            .pop()
            .ok_or_else(|| Error::invalid("no savepoint to roll back to"))?;
        self.buf.undo_to(mark);
        Ok(())
    }

    /// Removes the most recent savepoint without undoing anything.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` if there is no savepoint.
    pub fn pop_savepoint(&mut self) -> Result<()> {
        self.check_active()?;
        self.savepoints
            .pop()
            .map(|_| self.buf.release())
            .ok_or_else(|| Error::invalid("no savepoint to pop"))
    }

    // ---------------------------------------------------------------- end

    /// Discards every write and releases every lock.
    pub fn rollback(mut self) {
        self.finish();
    }

    fn finish(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        let inner = self.db.inner.clone();
        if self.opts.concurrency == Concurrency::Pessimistic {
            inner.locks.release_all(self.id);
        }
        let mut s = inner.snapshots.lock();
        if let Some(n) = s.get_mut(&self.snapshot) {
            *n -= 1;
            if *n == 0 {
                s.remove(&self.snapshot);
            }
        }
    }

    /// Commits: checks what its isolation level protects (T2), then writes every buffered
    /// write as one log record through the commit path of batches (T3), durable per
    /// `sync`; visible to every later read at once. A transaction that wrote nothing
    /// commits without a check (its reads came from one snapshot, or from committed state).
    ///
    /// # Errors
    ///
    /// `Conflict` (nothing was written; retryable); `ColumnFamilyNotFound` if a family it
    /// wrote was dropped; as [`Db::write`] (`Io`, `Poisoned`, `NoSpace`, `Closed`).
    pub fn commit(mut self) -> Result<()> {
        let r = self.commit_inner();
        self.finish();
        r
    }

    /// The keys and ranges a commit checks, each with the seqno from which a change is a
    /// conflict: `checks` (taken from the transaction) and, at the snapshot levels, every
    /// buffered key. Borrowed, not copied: a bulk transaction has a check per key it wrote.
    fn commit_checks<'a>(&'a self, checks: &'a Checks) -> (Vec<KeyCheck<'a>>, Vec<ScanRange>) {
        let iso = self.opts.isolation;
        let mut keys: Vec<KeyCheck<'a>> = Vec::new();
        // Writes: first committer wins at the snapshot levels (optimistic), and the
        // pessimistic snapshot levels re-check their locked keys against plain writes.
        let writes = iso.snapshot_reads();
        if writes {
            keys.reserve(self.buf.len() + checks.keys.len());
            keys.extend(
                self.buf
                    .keys()
                    .map(|(cf, k)| (cf, k, self.snapshot, ConflictKind::WriteWrite)),
            );
        }
        for (ck, &(since, kind)) in &checks.keys {
            if writes && self.buf.contains(ck.0, &ck.1) {
                // Also written: checked as a write from the snapshot on; a read check
                // from earlier still counts, as a write-write conflict.
                if since < self.snapshot {
                    keys.push((ck.0, &ck.1, since, ConflictKind::WriteWrite));
                }
            } else {
                keys.push((ck.0, &ck.1, since, kind));
            }
        }
        let ranges = if iso == IsolationLevel::Serializable {
            self.scans.ranges()
        } else {
            Vec::new()
        };
        (keys, ranges)
    }

    fn commit_inner(&mut self) -> Result<()> {
        self.commit_with(|| {}, || {})
    }

    /// [`Txn::commit`]'s work; `after_parts` runs between a large transaction's part
    /// records and its commit record (a test's window for flushes, invariant T4), and
    /// `after_check` between the two phases of its check (T2; not run without checks).
    pub(crate) fn commit_with(
        &mut self,
        after_parts: impl FnOnce(),
        after_check: impl FnOnce(),
    ) -> Result<()> {
        self.check_active()?;
        if self.buf.is_empty() {
            return Ok(());
        }
        // One sorted part for the walks below (a savepoint may still be open: then they
        // merge the two parts as they go).
        self.buf.settle();
        let inner = self.db.inner.clone();
        let mut cfs: Vec<u32> = self.buf.keys().map(|(cf, _)| cf).collect();
        cfs.dedup();
        for cf in cfs {
            self.cf_exists(cf)?;
        }
        let checks = std::mem::take(&mut *self.checks.lock());
        let (keys, ranges) = self.commit_checks(&checks);
        let chunk = inner.wal.max_payload_bytes() - batch::TXN_HEADER_BYTES;
        let batches = self.buf.batches(chunk);
        inner.maybe_stall(self.buf.bytes())?;
        self.commit_checked(&inner, &batches, &keys, &ranges, after_parts, after_check)
            .map(|_| ())
    }

    /// T2: checks `since..r1` once a large commit's parts are in the log, then commits with
    /// the check of `r1..c` at its seqno `c`. Each phase looks only below its own bound: a
    /// commit that nobody else's write preceded since its snapshot (`r1` at the snapshot)
    /// or since its first check (`c` at `r1`) has nothing to look up.
    fn commit_checked(
        &self,
        inner: &Arc<DbInner>,
        batches: &[WriteBatch],
        keys: &[KeyCheck],
        ranges: &[ScanRange],
        after_parts: impl FnOnce(),
        after_check: impl FnOnce(),
    ) -> Result<Seqno> {
        if keys.is_empty() && ranges.is_empty() {
            return inner.commit_chunks(batches, self.opts.sync, None, || {
                after_parts();
                Ok(())
            });
        }
        let r1 = std::cell::Cell::new(0);
        // Phase 1, outside the reservation.
        let phase1 = || -> Result<()> {
            after_parts();
            let r = inner.wal.reserved_lsn();
            inner.wait_applied_below(r, None)?;
            self.check(&inner.super_version(), keys, ranges, 0, r)?;
            r1.set(r);
            after_check();
            Ok(())
        };
        // Phase 2, at the commit's own seqno `c`.
        let mut at_commit = |c: Seqno, me: &Arc<crate::db::Writer>| -> Result<()> {
            inner.wait_applied_below(c, Some(me))?;
            self.check(&inner.super_version(), keys, ranges, r1.get(), c)
        };
        inner.commit_chunks(batches, self.opts.sync, Some(&mut at_commit), phase1)
    }

    /// Whether any checked key or range changed in `max(since, floor)..below`.
    fn check(
        &self,
        sv: &SuperVersion,
        keys: &[KeyCheck],
        ranges: &[ScanRange],
        floor: Seqno,
        below: Seqno,
    ) -> Result<()> {
        for (cf, key, since, kind) in keys {
            if validate::key_changed(sv, *cf, key, (*since).max(floor), below)? {
                return Err(self.conflict(*cf, key, *kind));
            }
        }
        for r in ranges {
            let since = self.snapshot.max(floor);
            // A dead run from the range's start, recorded at or below the snapshot and
            // still there, is a part of it that read as empty then and reads as empty now
            // (invariant D1: every commit below `below` has applied, and so touched): only
            // what follows it is checked, without walking its deletes again.
            let lo = match self.dead_run_from(sv, r.cf, &r.lo) {
                Some(end) => Bound::Included(end),
                None => r.lo.clone(),
            };
            if let Some(k) = validate::range_changed(sv, r.cf, &lo, &r.hi, since, below)? {
                return Err(self.conflict(r.cf, &k, ConflictKind::Phantom));
            }
        }
        Ok(())
    }

    /// The end of the dead run holding the start of a range this transaction scanned, if
    /// one is recorded at or below its snapshot on `sv` or an earlier super-version
    /// (`read/dead_runs.rs`).
    fn dead_run_from(&self, sv: &SuperVersion, cf: u32, lo: &Bound<Vec<u8>>) -> Option<Vec<u8>> {
        let start = match lo {
            Bound::Included(k) | Bound::Excluded(k) => k.as_slice(),
            Bound::Unbounded => &[],
        };
        let runs = self.inner().dead_runs.get(cf)?;
        let j = runs.lookup(start, self.snapshot, sv.generation)?;
        Some(j.end().to_vec())
    }
}

impl Drop for Txn {
    fn drop(&mut self) {
        self.finish();
    }
}

impl Read for Txn {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Txn::get(self, key)
    }
    fn get_cf(&self, cf: &ColumnFamily, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Txn::get_cf(self, cf, key)
    }
    fn iter(&self) -> Iter {
        Txn::iter(self)
    }
    fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Iter {
        Txn::range(self, range)
    }
    fn range_cf<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, cf: &ColumnFamily, range: R) -> Iter {
        Txn::range_cf(self, cf, range)
    }
    fn prefix(&self, prefix: &[u8]) -> Iter {
        Txn::prefix(self, prefix)
    }
    fn prefix_cf(&self, cf: &ColumnFamily, prefix: &[u8]) -> Iter {
        Txn::prefix_cf(self, cf, prefix)
    }
    fn cursor(&self) -> Cursor {
        Txn::cursor(self)
    }
    fn cursor_cf(&self, cf: &ColumnFamily) -> Cursor {
        Txn::cursor_cf(self, cf)
    }
}

#[allow(dead_code)]
fn _assert_send() {
    fn f<T: Send>() {}
    f::<Txn>();
}

#[cfg(test)]
mod tests {
    use super::*;
    use silt_vfs::{CrashMode, SimFs};

    /// T4: flushes between a large transaction's parts and its commit record move the
    /// memtable boundary past the parts; the log start must stay at them until the commit
    /// is in a table, or a crash right after the commit leaves a commit record whose parts
    /// replay cannot find.
    #[test]
    fn flushes_between_parts_and_commit_keep_the_parts_replayable() {
        let fs = SimFs::new();
        let open = |fs: Arc<SimFs>| {
            Db::builder("/db")
                .file_system(fs)
                .wal_segment_bytes(64 << 10)
                // Large enough that the commit does not fill it: only the test flushes.
                .memtable_bytes(4 << 20)
                .sync_mode(silt_wal::SyncMode::Full)
                .open()
                .unwrap()
        };
        let db = open(fs.clone());
        let mut t = db.begin(TxnOptions::default());
        for i in 0..2000u32 {
            t.put(format!("big{i:05}").as_bytes(), &[i as u8; 200])
                .unwrap();
        }
        let db2 = db.clone();
        t.commit_with(
            || {
                for round in 0..4u32 {
                    for i in 0..100u32 {
                        db2.put(format!("mid{round}-{i:03}").as_bytes(), &[1u8; 200])
                            .unwrap();
                    }
                    db2.flush().unwrap();
                }
            },
            || {},
        )
        .unwrap();
        t.finish();
        // The commit's memtable is not flushed: crash now (everything was synced).
        let crashed = fs.crash(CrashMode::DropAll, 5);
        drop(db);
        let db = open(crashed);
        assert_eq!(db.prefix(b"big").count(), 2000);
        assert_eq!(db.prefix(b"mid").count(), 400);
    }

    /// T2: a write committed after the first phase of the check (so at or above `r1`,
    /// which that phase no longer looks at) and before the commit is caught by the second,
    /// for a commit of one record and for one of parts; the transaction leaves no trace.
    #[test]
    fn a_write_between_the_check_phases_is_a_conflict() {
        for (rows, iso) in [
            (10u32, IsolationLevel::Snapshot),
            (10, IsolationLevel::Serializable),
            (3000, IsolationLevel::Snapshot),
            (3000, IsolationLevel::Serializable),
        ] {
            let fs = SimFs::new();
            let open = || {
                Db::builder("/db")
                    .file_system(fs.clone())
                    .wal_segment_bytes(64 << 10)
                    .open()
                    .unwrap()
            };
            let db = open();
            db.put(b"read", b"0").unwrap();
            for (target, kind) in [
                (&b"row00001"[..], ConflictKind::WriteWrite),
                (b"read", ConflictKind::ReadValidation),
            ] {
                if kind == ConflictKind::ReadValidation && iso != IsolationLevel::Serializable {
                    continue;
                }
                let mut t = db.begin(TxnOptions::new(iso, Concurrency::Optimistic));
                assert_eq!(t.get(b"read").unwrap().as_deref(), Some(&b"0"[..]));
                for i in 0..rows {
                    t.put(format!("row{i:05}").as_bytes(), &[7u8; 200]).unwrap();
                }
                let db2 = db.clone();
                let mut ran = false;
                let r = t.commit_with(
                    || {},
                    || {
                        db2.put(target, b"other").unwrap();
                        ran = true;
                    },
                );
                t.finish();
                assert!(ran, "{rows} rows, {iso:?}: the hook ran");
                match r {
                    Err(Error::Conflict { kind: k, key, .. }) => {
                        assert_eq!(k, kind, "{rows} rows, {iso:?}");
                        assert_eq!(key, target.to_vec());
                    }
                    other => panic!("{rows} rows, {iso:?}, {kind:?}: {other:?}"),
                }
                assert_eq!(db.get(target).unwrap().as_deref(), Some(&b"other"[..]));
                assert_eq!(db.prefix(b"row").count(), usize::from(target != b"read"));
                db.delete(target).unwrap();
                db.put(b"read", b"0").unwrap();
            }
            // Replay finds the refused commits' part records, if any, and no commit record.
            drop(db);
            let db = open();
            assert_eq!(db.prefix(b"row").count(), 0, "{rows} rows, {iso:?}");
            assert_eq!(db.get(b"read").unwrap().as_deref(), Some(&b"0"[..]));
        }
    }
}
