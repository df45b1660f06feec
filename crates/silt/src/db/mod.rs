//! [`Db`]: the engine's handle and its shared state ([`DbInner`]), and the write path's
//! invariants, stated here once (docs/design.md links to them).
//!
//! One file per concern, each an `impl Db` / `impl DbInner` block of its own: `open.rs`
//! (open, replay, background threads), `dir.rs` (what open does with the directory:
//! invariants O1–O3), `cf.rs` (column families), `write.rs` (the commit path, stalls,
//! rotation), `flush.rs` (memtable to level-0 table, `flush`, `compact_range`), `read.rs`
//! (point reads, the read methods shared with [`Snapshot`] and the [`Read`] trait),
//! `stats.rs`. Below this module: `version` (what tables exist, and the table search for a
//! key), `compaction` (the picker and the merge), `read` at the crate root (the user's
//! iterators), `iter` (internal merging iterators), `memtable`, `sstable`, `manifest`.
//!
//! ## Write path and its invariants
//!
//! A write (one [`WriteBatch`], or a transaction's commit) goes:
//!
//! 1. *register*: under the `inflight` mutex it records the log's reservation watermark
//!    `r0` (its LSN will be `>= r0`) in a [`Writer`] slot;
//! 2. *reserve*: `Wal::reserve` gives the record's LSN, which is the seqno of every entry,
//!    and the writer publishes it in its slot at once;
//! 3. (a transaction only) *validate* at that seqno, after every writer with a smaller LSN
//!    has applied its entries ([`DbInner::wait_applied_below`]); a failed validation
//!    abandons the reservation (a Void record) and stops here;
//! 4. *log*: the record is written into the reserved place (not yet acknowledged);
//! 5. *apply*: it inserts the entries into the memtable that owns that seqno (memtable
//!    invariant 1), under the super-version read lock, and marks its slot applied;
//! 6. *acknowledge*: it waits for the log as an append would (in the OS under `None`,
//!    durable under `Full`);
//! 7. *complete*: it leaves `inflight`; the `visible` watermark becomes the smallest `r0`
//!    still registered (or the log's reservation watermark if none is). A commit in parts
//!    (invariant T4 of `txn/mod.rs`) reserves its part records without a slot: it moves
//!    `visible` the same way after each part is written, since no completion may follow
//!    soon enough for a flush waiting past the part (M1);
//! 8. it returns once `visible > lsn`.
//!
//! Invariants:
//!
//! * **W1** seqno order = log order (seqno = LSN), so recovery's log prefix is a seqno prefix.
//! * **W2** A reader reads at `visible`: every batch with a seqno below it is completely in
//!   a memtable or table, so a reader never sees half a batch, nor commit k+1 without k.
//!   A batch is applied before it is acknowledged, but completes (lets `visible` pass it)
//!   only after: under `Full` no reader sees a commit a machine crash could take back. A
//!   writer whose acknowledgement fails (the log is then poisoned) never completes, so
//!   `visible` never passes what it applied.
//! * **W5** A writer's slot holds its LSN from the moment it reserved it, and is marked
//!   applied once its entries are in the memtable (or it wrote nothing). So a transaction
//!   validating at seqno `c` can wait until every entry below `c` is applied without waiting
//!   on a writer above `c` (which waits on it): no cycle, and the check sees every commit
//!   ordered before it.
//! * **W3** `log_start` (in the manifest) only moves to a memtable boundary `b` once every
//!   batch below `b` is in a table whose addition the manifest made durable, and the log
//!   is synced to `b` (else a crash could cut the log below `b` and new writes would reuse
//!   seqnos below data in tables).
//! * **W4** After any failed fdatasync (log, table, manifest) or failed background job the
//!   database is poisoned: no more writes, ever, until reopened. The first failure is kept
//!   with its kind (`close` returns it).
//! * **M1** Memtables own disjoint seqno ranges `[boundary, next boundary)`: a writer
//!   inserts into the memtable owning its LSN even if a newer one is active. Rotation takes
//!   the super-version write lock and reads the log's reservation watermark as the new
//!   boundary: every writer holding the read lock got its LSN before, every later one gets
//!   a larger LSN. A frozen memtable is flushed only once `visible` reaches the next
//!   boundary.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, RwLock};
use silt_vfs::{FileLock, FileSystem, OsFs};
use silt_wal::{AppendOptions, Wal};

use crate::batch::{self, WriteBatch};
use crate::cf::{ColumnFamily, DEFAULT_CF};
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{self, Seqno, MAX_SEQNO};
use crate::manifest::{Edit, Manifest, LEVELS};
use crate::memtable::{ChunkPool, Memtable, Splice};
use crate::options::{DbBuilder, WriteOptions, STALL_WAIT};
use crate::read::{Bounds, Iter};
use crate::sstable::BlockCache;
use crate::sstable::{TableBuilder, TableOptions};
use crate::table_meta::table_file_name;
use crate::version::{SuperVersion, TableCache, VersionBuilder};
use crate::vlog::{Finished, Output, Separation};

mod backup;
mod cf;
mod checkpoint;
mod compact;
mod dir;
mod flush;
mod log_blob;
mod open;
mod read;
mod read_only;
mod repair;
mod stats;
mod throttle;
mod write;

pub use backup::{BackupInfo, BackupStore};
pub use checkpoint::CheckpointInfo;
pub(crate) use dir::check_tables;
pub use dir::RecoveryReport;
pub(crate) use flush::NewTables;
pub use read::Snapshot;
pub use repair::RepairReport;
pub(crate) use stats::STATS_FILE as STATS_FILE_NAME;
pub use stats::{LevelStats, Stats, StatsFile};

/// How long a flush or compaction that failed for want of space waits before it retries.
pub(crate) const NO_SPACE_RETRY: Duration = Duration::from_millis(100);

/// How many table ids [`DbInner::alloc_table_id`] reserves in one manifest record.
const TABLE_ID_RESERVE: u64 = 64;

/// An open database. Cheap to clone; share it between threads.
///
/// # Examples
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let db = silt::Db::open(dir.path()).unwrap();
/// db.put(b"hello", b"world").unwrap();
/// assert_eq!(db.get(b"hello").unwrap().as_deref(), Some(&b"world"[..]));
/// let all: Vec<_> = db.iter().collect::<Result<_, _>>().unwrap();
/// assert_eq!(all, vec![(b"hello".to_vec(), b"world".to_vec())]);
/// ```
pub struct Db {
    pub(crate) inner: Arc<DbInner>,
}

impl Clone for Db {
    fn clone(&self) -> Db {
        self.inner.handles.fetch_add(1, SeqCst);
        Db {
            inner: self.inner.clone(),
        }
    }
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("dir", &self.inner.dir).finish()
    }
}

pub(crate) struct State {
    pub(crate) manifest: Manifest,
    pub(crate) builder: VersionBuilder,
}

/// The writers between registration and completion (W2), each with its slot (W5).
#[derive(Default)]
struct Inflight {
    writers: BTreeMap<(u64, u64), Arc<Writer>>,
    next_ticket: u64,
    /// Finished slots no one else holds, for reuse.
    spare: Vec<Arc<Writer>>,
}

/// A writer's slot: its registration key, and what a validating transaction waits on
/// (invariant W5).
pub(crate) struct Writer {
    key: std::sync::atomic::AtomicU64,
    ticket: AtomicU64,
    /// The record's LSN, [`NO_LSN`] until reserved.
    lsn: AtomicU64,
    applied: AtomicBool,
}

/// A writer slot's LSN before its reservation.
const NO_LSN: u64 = u64::MAX;

/// Where the commit path's waiters for other writers (`wait_applied_below`,
/// `wait_visible`) sleep once a short spin and a few yields did not see their condition.
///
/// A yielding waiter keeps its CPU busy: on two CPUs with the flush thread runnable, the
/// writer it waits for could sit behind the flush thread on the other CPU's queue for a
/// whole tick, while each yield handed the waiter's own CPU to the flush thread for a tick
/// too (`queue_indexed`, 2026-11-28: a delete and an insert each yielding to the flush
/// for 4 ms at a time, 10-23 ms operations). A sleeping waiter leaves its CPU idle, and
/// the scheduler moves the runnable writer there.
///
/// Not silt-wal's `Event`, on purpose and measured: `docs/design.md`, "Waiting for other
/// writers".
///
/// No lost wake-up: a waiter counts itself in `parked` before it checks its condition under
/// the lock, and a writer changes a condition before it reads `parked` (all `SeqCst`), so
/// either the waiter sees the change or the writer sees the waiter and notifies under the
/// lock. A bounded sleep covers the rest (poisoning).
pub(crate) struct Parking {
    parked: std::sync::atomic::AtomicUsize,
    lock: Mutex<()>,
    cv: parking_lot::Condvar,
    /// The longest sleep before a waiter looks again (for a condition no one notifies:
    /// poisoning).
    nap: std::time::Duration,
    /// Sleeps that ended by `nap` rather than by a notification.
    naps_out: AtomicU64,
}

impl Default for Parking {
    fn default() -> Self {
        Parking::with_nap(std::time::Duration::from_millis(1))
    }
}

impl Parking {
    pub(crate) fn with_nap(nap: std::time::Duration) -> Parking {
        Parking {
            parked: std::sync::atomic::AtomicUsize::new(0),
            lock: Mutex::new(()),
            cv: parking_lot::Condvar::new(),
            nap,
            naps_out: AtomicU64::new(0),
        }
    }

    /// Spins, yields, then sleeps until `ready()`, and says so; `stop()` ends the wait
    /// early (poisoning), and then `false` says the condition may not hold.
    #[must_use]
    pub(crate) fn wait(&self, ready: impl Fn() -> bool, stop: impl Fn() -> bool) -> bool {
        let mut spins = 0u32;
        while !ready() {
            if stop() {
                return ready();
            }
            if spins < 64 {
                std::hint::spin_loop();
            } else if spins < 64 + 16 {
                std::thread::yield_now();
            } else {
                self.parked.fetch_add(1, SeqCst);
                let mut g = self.lock.lock();
                if !ready() && self.cv.wait_for(&mut g, self.nap).timed_out() {
                    self.naps_out.fetch_add(1, SeqCst);
                }
                drop(g);
                self.parked.fetch_sub(1, SeqCst);
            }
            spins = spins.saturating_add(1);
        }
        true
    }

    /// Wakes the sleeping waiters; call after changing what they wait on.
    pub(crate) fn notify(&self) {
        if self.parked.load(SeqCst) > 0 {
            drop(self.lock.lock());
            self.cv.notify_all();
        }
    }
}

impl Writer {
    fn new() -> Writer {
        Writer {
            key: AtomicU64::new(0),
            ticket: AtomicU64::new(0),
            lsn: AtomicU64::new(NO_LSN),
            applied: AtomicBool::new(false),
        }
    }

    fn reg_key(&self) -> (u64, u64) {
        (self.key.load(SeqCst), self.ticket.load(SeqCst))
    }

    pub(crate) fn set_lsn(&self, lsn: u64) {
        self.lsn.store(lsn, SeqCst);
    }

    pub(crate) fn set_applied(&self) {
        self.applied.store(true, SeqCst);
    }
}

#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) user_bytes: AtomicU64,
    pub(crate) flush_bytes: AtomicU64,
    pub(crate) flushes: AtomicU64,
    pub(crate) compaction_read_bytes: AtomicU64,
    pub(crate) compaction_write_bytes: AtomicU64,
    pub(crate) compactions: AtomicU64,
    /// Compactions split into sub-compactions (`DbBuilder::subcompactions`).
    pub(crate) split_compactions: AtomicU64,
    /// Compactions run for a tombstone-heavy table (`compaction/mod.rs`).
    pub(crate) tombstone_compactions: AtomicU64,
    /// Level-0 compactions run early for reads (`compaction::picker`, `scan_compaction`).
    pub(crate) scan_compactions: AtomicU64,
    pub(crate) scan_flushes: AtomicU64,
    pub(crate) flush_dropped_entries: AtomicU64,
    /// Tables flushes placed at the base level (`compaction::flush_level`).
    pub(crate) flush_tables_below_l0: AtomicU64,
    /// Memtable entries whose value is read in the log (`DbBuilder::memtable_values_in_log`).
    pub(crate) memtable_values_in_log: AtomicU64,
    pub(crate) stalls: AtomicU64,
    pub(crate) stall_micros: AtomicU64,
    /// Writes slowed down before a stall (`db/throttle.rs`), and their waits in total.
    pub(crate) delayed_writes: AtomicU64,
    pub(crate) delay_micros: AtomicU64,
    /// Bytes written to blob files (flush and compaction).
    pub(crate) blob_write_bytes: AtomicU64,
}

pub(crate) struct DbInner {
    pub(crate) opts: DbBuilder,
    /// The memory of flushed memtables, kept for the next ones (`memtable::ChunkPool`).
    pub(crate) memtable_chunks: Arc<ChunkPool>,
    /// The `STATS` file's schedule (`db/stats.rs`).
    stats_dump: Mutex<stats::StatsDump>,
    pub(crate) fs: Arc<dyn FileSystem>,
    pub(crate) dir: PathBuf,
    pub(crate) tables_dir: PathBuf,
    pub(crate) wal: Wal,
    pub(crate) sv: RwLock<Arc<SuperVersion>>,
    pub(crate) state: Mutex<State>,
    inflight: Mutex<Inflight>,
    visible: AtomicU64,
    /// Where waiters for other writers sleep (`Parking`).
    parking: Parking,
    pub(crate) snapshots: Mutex<BTreeMap<Seqno, usize>>,
    pub(crate) tables: Arc<TableCache>,
    /// The open blob files (key-value separation, `docs/format/vlog.md`).
    pub(crate) blob_files: Arc<crate::vlog::BlobFiles>,
    pub(crate) table_opts: TableOptions,
    pub(crate) next_table_id: AtomicU64,
    /// Table ids below this are durably reserved in the manifest (invariant O1 of
    /// `db/dir.rs`): a fast path for [`DbInner::alloc_table_id`].
    table_ids_reserved: AtomicU64,
    /// What open found and did.
    report: Mutex<RecoveryReport>,
    /// The name of every column family this handle has known, dropped ones included: for
    /// error messages about a handle whose family is gone.
    cf_names: Mutex<HashMap<u32, Arc<str>>>,
    /// The directory lock, held until shutdown.
    /// Shared with memtables that read values in the log (memtable invariant 3): a reader
    /// of one that outlives this handle keeps the directory locked, so no other handle
    /// recycles the segments it reads.
    pub(crate) dir_lock: Mutex<Option<Arc<dyn FileLock>>>,
    /// A log start a flush's purge stopped short of, because a reader still held a memtable
    /// that reads values in the log (its purge hold, memtable invariant 3); 0: none. The
    /// flush thread purges up to it once the hold is gone (`DbInner::purge_if_owed`).
    pub(crate) purge_owed: AtomicU64,
    rotating: Mutex<()>,
    /// Signals background threads (new immutable memtable, new tables, shutdown) and
    /// stalled writers (a flush or compaction finished).
    pub(crate) bg_lock: Mutex<()>,
    pub(crate) bg_cv: Condvar,
    /// The running compactions' tables and reach (`compaction::Busy`); taken after `state`
    /// where both are held.
    pub(crate) busy: Mutex<crate::compaction::Busy>,
    /// Set while the flush thread runs a flush, up to and including its log purge (which
    /// follows the version swap that `Db::flush` waits for).
    pub(crate) flush_running: AtomicBool,
    pub(crate) compact_pointer: Mutex<crate::compaction::Pointers>,
    pub(crate) poisoned: AtomicBool,
    /// Why the last flush or compaction failed for want of space, until one succeeds.
    no_space: Mutex<Option<String>>,
    /// The failure that poisoned the database, if one did (invariant W4), with its kind.
    bg_error: Mutex<Option<PoisonCause>>,
    pub(crate) closing: AtomicBool,
    pub(crate) counters: Counters,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Live `Db` handles.
    handles: std::sync::atomic::AtomicUsize,
    /// The delayed write rate (`db/throttle.rs`).
    pub(crate) throttle: throttle::Throttle,
    /// The row and range locks of pessimistic transactions.
    pub(crate) locks: crate::lock_table::LockTable,
    /// Transaction ids, for the lock table (in memory only).
    pub(crate) next_txn_id: AtomicU64,
    /// Invariant T4 (`txn/mod.rs`): the first part record of each transaction written in
    /// parts, with its commit seqno once it has one; the log start never passes a part whose
    /// commit is not yet in a table. Keyed by an LSN at or below the first part and a number
    /// of its own (`next_pin`; 0 for pins made by replay, whose LSN is the first part's):
    /// two commits in parts may pin at the same LSN, and one's end must not drop the other's
    /// pin.
    pub(crate) log_pins: Mutex<BTreeMap<(u64, u64), Option<Seqno>>>,
    /// The number of the next live pin in `log_pins` (from 1).
    pub(crate) next_pin: std::sync::atomic::AtomicU64,
    /// Key ranges reads found dead, to seek past (`read/dead_runs.rs`); commits touch it
    /// (invariant D1).
    pub(crate) dead_runs: Arc<crate::read::DeadRunTable>,
}

impl Db {
    /// Options for opening the database at `path`; see [`DbBuilder`] for the defaults.
    pub fn builder(path: impl AsRef<Path>) -> DbBuilder {
        DbBuilder::new(path.as_ref().to_path_buf())
    }

    /// Why the database is poisoned, if it is: the first failure that poisoned it (a failed
    /// write or fdatasync of the log, a failed manifest write, a failed background flush or
    /// compaction).
    pub fn background_error(&self) -> Option<String> {
        self.inner
            .bg_error
            .lock()
            .as_ref()
            .map(|c| format!("{}: {}", c.context, c.error))
            .or_else(|| self.inner.wal.poison_cause())
    }

    /// Stops background work and waits for it. Everything acknowledged stays recoverable:
    /// under `Interval` the log is synced first. Other handles to this database get
    /// `Closed` afterwards.
    ///
    /// # Errors
    ///
    /// The failure that poisoned the database, if one did, with its own kind (`Io` for a
    /// failed write or fdatasync, `Corruption` for damage a flush or compaction found, ...;
    /// [`Db::background_error`] says what the engine was doing): what was acknowledged
    /// before it is recoverable, but later writes were refused. `Io` from the final sync.
    pub fn close(self) -> Result<()> {
        let r = if matches!(self.inner.opts.sync, silt_wal::SyncMode::Interval(_)) {
            self.inner
                .wal
                .sync()
                .map_err(|e| self.inner.on_wal_error(e))
        } else {
            Ok(())
        };
        self.inner.shutdown();
        if let Some(cause) = self.inner.bg_error.lock().as_ref() {
            return Err(cause.error.duplicate());
        }
        r
    }

    /// What open found in the directory and did about it: the manifest and log recovered,
    /// tables checked, records replayed, a torn tail cut, damage found, files removed as
    /// garbage or moved into `lost/`. See [`RecoveryReport`].
    pub fn recovery_report(&self) -> RecoveryReport {
        self.inner.report.lock().clone()
    }
}

/// Why a database is poisoned: the first failure, with what the engine was doing, keeping
/// the error's kind (a corruption found by a compaction stays `Corruption`).
struct PoisonCause {
    /// What failed: `"flush failed"`, `"compaction failed"`, `"manifest write failed"`, ...
    context: String,
    error: Error,
}

impl DbInner {
    pub(crate) fn super_version(&self) -> Arc<SuperVersion> {
        self.sv.read().clone()
    }

    pub(crate) fn visible(&self) -> Seqno {
        self.visible.load(SeqCst)
    }

    /// Records that background work failed for want of space (`Some`), or succeeded.
    pub(crate) fn set_no_space(&self, why: Option<String>) {
        let mut g = self.no_space.lock();
        if g.is_some() || why.is_some() {
            *g = why;
        }
    }

    pub(crate) fn check_writable(&self) -> Result<()> {
        if self.opts.read_only {
            return Err(Error::ReadOnly);
        }
        if self.poisoned.load(SeqCst) {
            return Err(Error::Poisoned);
        }
        if self.closing.load(SeqCst) {
            return Err(Error::Closed);
        }
        Ok(())
    }

    /// Poisons the database (invariant W4), keeping the first failure: `context` says what
    /// the engine was doing, `error` is what failed (its kind is kept for `close`).
    pub(crate) fn poison(&self, context: impl Into<String>, error: &Error) {
        self.poisoned.store(true, SeqCst);
        let mut e = self.bg_error.lock();
        if e.is_none() {
            *e = Some(PoisonCause {
                context: context.into(),
                error: error.duplicate(),
            });
        }
        drop(e);
        self.notify_bg();
    }

    /// Converts a log error, poisoning the database (with the cause, for
    /// [`Db::background_error`] and [`Db::close`]) if the log is poisoned or failed an I/O.
    pub(crate) fn on_wal_error(&self, e: silt_wal::Error) -> Error {
        let e = Error::from(e);
        match &e {
            Error::Poisoned => {
                self.poison(
                    "the log is poisoned",
                    &Error::Io {
                        op: "log write or fdatasync",
                        path: None,
                        source: std::io::Error::other(self.wal.poison_cause().unwrap_or_else(
                            || "an earlier write or fdatasync of it failed".into(),
                        )),
                    },
                )
            }
            Error::Io { .. } => self.poison("log write or sync failed", &e),
            _ => {}
        }
        e
    }

    pub(crate) fn notify_bg(&self) {
        let _g = self.bg_lock.lock();
        self.bg_cv.notify_all();
    }

    pub(crate) fn shutdown(&self) {
        self.closing.store(true, SeqCst);
        self.notify_bg();
        let threads: Vec<_> = self.threads.lock().drain(..).collect();
        for t in threads {
            let _ = t.join();
        }
        self.remove_stats_file();
        // The removals of obsolete files this instance queued are made (`unlink.rs`).
        self.tables.unlinker.close();
        // No job of this handle runs any more: another handle may open the directory.
        self.dir_lock.lock().take();
    }
}

impl Drop for DbInner {
    fn drop(&mut self) {
        // Threads hold only weak references, so they are gone or exiting here.
        self.closing.store(true, SeqCst);
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        // The last handle: stop and join the background threads, so that a reopen of the
        // same directory never races a job of this instance. (Iterators may outlive it;
        // they only read.)
        if self.inner.handles.fetch_sub(1, SeqCst) == 1 {
            self.inner.shutdown();
        }
    }
}

#[allow(dead_code)]
fn _assert_send_sync() {
    fn f<T: Send + Sync>() {}
    f::<Db>();
    f::<key::ParsedKey<'static>>();
}

#[cfg(test)]
mod parking_tests {
    use super::Parking;
    use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
    use std::sync::Arc;
    use std::time::Duration;

    /// No lost wake-up: with a nap far longer than the test, every sleeping waiter is woken
    /// by a notification, never by its nap running out.
    #[test]
    fn every_sleeper_is_woken_by_a_notification() {
        let p = Arc::new(Parking::with_nap(Duration::from_secs(5)));
        let n = Arc::new(AtomicU64::new(0));
        let waiters: Vec<_> = (0..3u64)
            .map(|w| {
                let (p, n) = (p.clone(), n.clone());
                std::thread::spawn(move || {
                    for k in (w..4000).step_by(3) {
                        assert!(p.wait(|| n.load(SeqCst) > k, || false));
                    }
                })
            })
            .collect();
        for i in 0..4000u64 {
            n.store(i + 1, SeqCst);
            p.notify();
            if i % 64 == 0 {
                // Let the waiters fall asleep now and then.
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        for w in waiters {
            w.join().unwrap();
        }
        assert_eq!(p.naps_out.load(SeqCst), 0);
    }

    #[test]
    fn a_stop_ends_the_wait() {
        let p = Parking::with_nap(Duration::from_millis(1));
        let stop = AtomicU64::new(0);
        let t = std::thread::scope(|s| {
            let h = s.spawn(|| p.wait(|| false, || stop.load(SeqCst) == 1));
            std::thread::sleep(Duration::from_millis(20));
            stop.store(1, SeqCst);
            h.join()
        });
        assert_eq!(
            t.ok(),
            Some(false),
            "a stopped wait says its condition may not hold"
        );
    }
}

#[cfg(test)]
mod poison_tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn until(what: &str, cond: impl Fn() -> bool) {
        let start = Instant::now();
        while !cond() {
            assert!(start.elapsed() < Duration::from_secs(30), "never: {what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// A flush waits for the writers below its boundary to finish inserting; poisoned while
    /// one has not, it must stop, not flush without that writer's entries (and move the log
    /// start past its record). The writer's commit, which then waits to become visible,
    /// returns `Poisoned`, not an LSN.
    #[test]
    fn a_flush_waiting_for_a_writer_stops_when_the_database_is_poisoned() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::builder(dir.path())
            .stats_dump_period(None)
            .open()
            .unwrap();
        db.put(b"a", b"1").unwrap();
        let inner = db.inner.clone();
        // A writer registered and not applied, as one still inserting.
        let w = inner.register();
        let r0 = inner.wal.reserved_lsn();
        std::thread::scope(|s| {
            // A commit after it: it applies, then waits for `w` to become visible.
            let put = s.spawn(|| db.put(b"b", b"2"));
            until("the put reserves", || inner.wal.reserved_lsn() > r0);
            assert!(inner.rotate(true));
            until("the flush waits", || inner.flush_running.load(SeqCst));
            inner.poison("a test", &Error::invalid("poisoned by a test"));
            until("the flush thread leaves", || {
                !inner.flush_running.load(SeqCst)
            });
            assert_eq!(
                inner.counters.flushes.load(SeqCst),
                0,
                "flushed past a writer"
            );
            // Before `w` completes (which would make the put visible after all).
            until("the put returns", || put.is_finished());
            assert!(matches!(put.join().unwrap(), Err(Error::Poisoned)));
            inner.complete(w);
        });
    }

    /// A transaction's check first waits for every writer below its bound to apply (W5);
    /// poisoned while one has not, the commit must return `Poisoned` without checking: a
    /// check of a half-applied state would miss that writer's conflicts.
    #[test]
    fn a_check_waiting_for_a_writer_stops_when_the_database_is_poisoned() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::builder(dir.path())
            .stats_dump_period(None)
            .open()
            .unwrap();
        db.put(b"k", b"0").unwrap();
        let mut txn = db.begin(crate::TxnOptions::new(
            crate::IsolationLevel::Serializable,
            crate::Concurrency::Optimistic,
        ));
        assert_eq!(txn.get(b"k").unwrap().as_deref(), Some(&b"0"[..]));
        txn.put(b"k", b"1").unwrap();
        let inner = db.inner.clone();
        // A writer registered and not applied, as one still inserting.
        let w = inner.register();
        let r0 = inner.wal.reserved_lsn();
        let checked = AtomicBool::new(false);
        std::thread::scope(|s| {
            // A commit after it, so the transaction's bound lies past `w`'s slot.
            let put = s.spawn(|| db.put(b"other", b"2"));
            until("the put reserves", || inner.wal.reserved_lsn() > r0);
            let commit = s.spawn(|| txn.commit_with(|| {}, || checked.store(true, SeqCst)));
            // Long enough for the commit to be waiting for `w` (it waits for ever without
            // the poison, so a shorter wait only weakens the test, never fails it).
            std::thread::sleep(Duration::from_millis(200));
            assert!(
                !commit.is_finished(),
                "the commit waits for the writer below it"
            );
            inner.poison("a test", &Error::invalid("poisoned by a test"));
            until("the commit returns", || commit.is_finished());
            assert!(matches!(commit.join().unwrap(), Err(Error::Poisoned)));
            assert!(!checked.load(SeqCst), "checked a half-applied state");
            until("the put returns", || put.is_finished());
            assert!(matches!(put.join().unwrap(), Err(Error::Poisoned)));
            inner.complete(w);
        });
    }
}
