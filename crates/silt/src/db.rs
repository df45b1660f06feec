//! [`Db`]: the engine — write path, read path, flush and recovery. Compaction is in
//! `compaction.rs`, the user-facing iterators in `read.rs`.
//!
//! ## Write path and its invariants
//!
//! A write (one [`WriteBatch`]) goes:
//!
//! 1. *register*: under the `inflight` mutex it records the log's reservation watermark
//!    `r0` (its LSN will be `>= r0`);
//! 2. *log*: `Wal::append_with` gives the batch's LSN, which is the seqno of every entry
//!    (acknowledged per sync mode: durable first under `Full`);
//! 3. *apply*: it inserts the entries into the memtable that owns that seqno (memtable
//!    invariant 1), under the super-version read lock;
//! 4. *complete*: it leaves `inflight`; the `visible` watermark becomes the smallest `r0`
//!    still registered (or the log's reservation watermark if none is);
//! 5. it returns once `visible > lsn`.
//!
//! Invariants:
//!
//! * **W1** seqno order = log order (seqno = LSN), so recovery's log prefix is a seqno prefix.
//! * **W2** A reader reads at `visible`: every batch with a seqno below it is completely in
//!   a memtable or table, so a reader never sees half a batch, nor commit k+1 without k.
//!   Under `Full`, a batch is applied only after it is durable, so no reader sees a commit
//!   a machine crash could take back.
//! * **W3** `log_start` (in the manifest) only moves to a memtable boundary `b` once every
//!   batch below `b` is in a table whose addition the manifest made durable.
//! * **W4** After any failed fdatasync (log, table, manifest) or failed background job the
//!   database is poisoned: no more writes, ever, until reopened.

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
use crate::cache::BlockCache;
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{self, Kind, Seqno, MAX_SEQNO};
use crate::manifest::{Edit, Manifest, LEVELS};
use crate::memtable::Memtable;
use crate::open::{self, RecoveryReport};
use crate::options::{DbBuilder, WriteOptions, STALL_WAIT};
use crate::read::{Bounds, Iter};
use crate::sstable::{TableBuilder, TableOptions};
use crate::table_meta::{table_file_name, TableMeta};
use crate::version::{TableCache, Version, VersionBuilder};

/// The name of the column family every database has.
pub const DEFAULT_CF: &str = "default";

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

/// A handle on one column family, from [`Db::cf`] or [`Db::create_cf`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnFamily {
    pub(crate) id: u32,
    pub(crate) name: Arc<str>,
}

impl ColumnFamily {
    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// What readers see: the memtables (newest first, the active one at index 0) and the
/// tables.
#[derive(Debug)]
pub(crate) struct SuperVersion {
    pub(crate) mems: Vec<Arc<Memtable>>,
    pub(crate) version: Arc<Version>,
}

pub(crate) struct State {
    pub(crate) manifest: Manifest,
    pub(crate) builder: VersionBuilder,
}

#[derive(Default)]
struct Inflight {
    writers: BTreeMap<(u64, u64), ()>,
    next_ticket: u64,
}

#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) user_bytes: AtomicU64,
    pub(crate) flush_bytes: AtomicU64,
    pub(crate) flushes: AtomicU64,
    pub(crate) compaction_read_bytes: AtomicU64,
    pub(crate) compaction_write_bytes: AtomicU64,
    pub(crate) compactions: AtomicU64,
    pub(crate) stalls: AtomicU64,
    pub(crate) stall_micros: AtomicU64,
}

pub(crate) struct DbInner {
    pub(crate) opts: DbBuilder,
    pub(crate) fs: Arc<dyn FileSystem>,
    pub(crate) dir: PathBuf,
    pub(crate) tables_dir: PathBuf,
    pub(crate) wal: Wal,
    pub(crate) sv: RwLock<Arc<SuperVersion>>,
    pub(crate) state: Mutex<State>,
    inflight: Mutex<Inflight>,
    visible: AtomicU64,
    pub(crate) snapshots: Mutex<BTreeMap<Seqno, usize>>,
    pub(crate) tables: Arc<TableCache>,
    pub(crate) table_opts: TableOptions,
    pub(crate) next_table_id: AtomicU64,
    /// Table ids below this are durably reserved in the manifest (invariant O1 of
    /// `open.rs`): a fast path for [`DbInner::alloc_table_id`].
    table_ids_reserved: AtomicU64,
    /// What open found and did.
    report: Mutex<RecoveryReport>,
    /// The name of every column family this handle has known, dropped ones included: for
    /// error messages about a handle whose family is gone.
    cf_names: Mutex<HashMap<u32, Arc<str>>>,
    /// The directory lock, held until shutdown.
    dir_lock: Mutex<Option<Box<dyn FileLock>>>,
    rotating: Mutex<()>,
    /// Signals background threads (new immutable memtable, new tables, shutdown) and
    /// stalled writers (a flush or compaction finished).
    pub(crate) bg_lock: Mutex<()>,
    pub(crate) bg_cv: Condvar,
    pub(crate) busy: Mutex<HashSet<u64>>,
    pub(crate) compact_pointer: Mutex<BTreeMap<(u32, usize), Vec<u8>>>,
    pub(crate) poisoned: AtomicBool,
    /// Why the last flush or compaction failed for want of space, until one succeeds.
    no_space: Mutex<Option<String>>,
    pub(crate) bg_error: Mutex<Option<String>>,
    pub(crate) closing: AtomicBool,
    pub(crate) counters: Counters,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Live `Db` handles.
    handles: std::sync::atomic::AtomicUsize,
}

impl Db {
    /// Options for opening the database at `path`; see [`DbBuilder`] for the defaults.
    pub fn builder(path: impl AsRef<Path>) -> DbBuilder {
        DbBuilder::new(path.as_ref().to_path_buf())
    }

    /// Opens (or creates) the database at `path` with default options.
    ///
    /// # Errors
    ///
    /// As [`DbBuilder::open`].
    pub fn open(path: impl AsRef<Path>) -> Result<Db> {
        Db::builder(path).open()
    }

    /// Opens the database: see `docs/design.md`, "What open does with the directory", for
    /// the order of the steps and why nothing is changed on disk before every check passed.
    pub(crate) fn open_with(opts: DbBuilder) -> Result<Db> {
        let fs: Arc<dyn FileSystem> = opts.fs.clone().unwrap_or_else(|| OsFs::new());
        let dir = opts.path.clone();
        let tables_dir = dir.join("tables");
        let wal_dir = dir.join("wal");
        open::make_dir(&*fs, &dir)?;
        let lock = open::lock(&*fs, &dir)?;
        let recovered = if Manifest::exists(&*fs, &dir)? {
            Some(Manifest::recover(fs.clone(), &dir)?)
        } else if let Some(f) = database_files(&*fs, &tables_dir, &wal_dir) {
            // `create` installs `CURRENT` before any table or log segment exists, so these
            // belong to a database whose `CURRENT` was lost: creating a new one would delete
            // them.
            return Err(Error::corruption(
                dir.join("CURRENT"),
                0,
                format!(
                    "CURRENT is missing, but {} belongs to a database; restore CURRENT \
                     (it names the newest MANIFEST-* file)",
                    f.display()
                ),
            ));
        } else if opts.create_if_missing {
            None
        } else {
            return Err(Error::invalid(format!(
                "no database at {}; use create_if_missing(true) to create one",
                dir.display()
            )));
        };

        // Checks, before anything on disk changes: every table the recovered version names
        // is whole, and no table file is newer than the manifest (invariant O1 of open.rs).
        let mut tables_checked = 0;
        let mut garbage = Vec::new();
        if let Some(r) = &recovered {
            tables_checked =
                open::check_tables(&*fs, &tables_dir, r.state(), opts.paranoid_checks)?;
            let u = open::unreferenced_tables(&*fs, &tables_dir, r.state())?;
            if !u.newer.is_empty() {
                return Err(open::newer_tables_error(r.path(), r.state(), &u.newer));
            }
            garbage = u.garbage;
        }
        let log_start = recovered.as_ref().map_or(0, |r| r.state().log_start);
        // A new database gets its manifest before any log segment exists, so that a crash
        // never leaves segments without `CURRENT` (which open refuses, above).
        let created = match recovered {
            Some(_) => None,
            None => {
                for d in [&tables_dir, &wal_dir] {
                    fs.create_dir_all(d)
                        .map_err(|e| Error::io("create directory", Some(d.clone()), e))?;
                }
                Some(Manifest::create(fs.clone(), &dir)?)
            }
        };
        let wal = Wal::open(
            &wal_dir,
            silt_wal::Options::default()
                .sync(opts.sync)
                .strategy(opts.strategy)
                .segment_bytes(opts.wal_segment_bytes)
                // Records below log start are in tables: damage there loses nothing.
                .required_from(log_start)
                .fs(fs.clone()),
        )?;
        let first = wal.recovery().first_lsn;
        if first / wal.segment_bytes() > log_start / wal.segment_bytes() {
            // Flushes never purge the segment holding `log_start` (W3): records from
            // `log_start` on are gone, so replay would silently skip acknowledged writes.
            return Err(Error::corruption(
                wal_dir.clone(),
                log_start,
                format!(
                    "the manifest says replay starts at LSN {log_start}, but the log's oldest \
                     record is at LSN {first}: the manifest is older than the log"
                ),
            ));
        }
        if wal.reserved_lsn() < log_start {
            // The manifest says the log was durable up to `log_start` (invariant W3); a log
            // ending before it lost durable records, and new writes would reuse seqnos
            // below data already in tables.
            return Err(Error::corruption(
                wal_dir.clone(),
                wal.reserved_lsn(),
                format!(
                    "the log ends at LSN {} but the manifest has tables up to LSN {log_start}",
                    wal.reserved_lsn(),
                ),
            ));
        }

        // Every check passed: make the recovered state the live manifest (a new, durable
        // file), and only then dispose of what it makes garbage (invariant O3).
        let manifest_path = recovered.as_ref().map(|r| r.path().to_path_buf());
        let manifest_torn_tail = recovered
            .as_ref()
            .and_then(|r| r.torn_tail())
            .map(|(at, n, why)| (at, n, why.to_string()));
        let (manifest, mut disposal) = match (recovered, created) {
            (Some(r), _) => r.commit()?,
            (None, Some(m)) => (m, Default::default()),
            (None, None) => unreachable!("a database is either recovered or created"),
        };
        fs.create_dir_all(&tables_dir)
            .map_err(|e| Error::io("create directory", Some(tables_dir.clone()), e))?;
        crate::kill_point::hit("open: new manifest durable, before removing garbage tables");
        for f in garbage {
            // After a torn manifest tail, the torn record may have named these tables (a
            // crash mid-append, or a cut that looks like one): their data is also in named
            // tables or in the log replayed below (see open.rs), but keep them as evidence.
            if manifest_torn_tail.is_some() {
                let to = crate::lost::set_aside(&*fs, &dir, &f)?;
                disposal.set_aside.push((f, to));
                continue;
            }
            match fs.remove(&f) {
                Ok(()) => disposal.removed.push(f),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io("remove garbage table", Some(f), e)),
            }
        }
        let report = RecoveryReport {
            created: manifest_path.is_none(),
            manifest: manifest_path,
            manifest_torn_tail,
            tables_checked,
            wal: wal.recovery().clone(),
            records_replayed: 0,
            removed: disposal.removed,
            set_aside: disposal.set_aside,
        };

        let blocks = Arc::new(BlockCache::new(opts.block_cache_bytes));
        let tables = Arc::new(TableCache::new(
            fs.clone(),
            tables_dir.clone(),
            opts.table_cache_tables,
            blocks,
        ));
        let mut builder = VersionBuilder::new(tables.clone());
        let version = Arc::new(builder.build(manifest.state()));
        let log_start = manifest.state().log_start;
        let next_table_id = manifest.state().next_table_id;
        let table_opts = TableOptions {
            block_size_bytes: opts.block_size_bytes,
            bloom_bits_per_key: opts.bloom_bits_per_key,
            compression: opts.compression,
            ..TableOptions::default()
        };
        let cf_names = manifest
            .state()
            .cfs
            .values()
            .map(|c| (c.id, Arc::from(c.name.as_str())))
            .collect();
        let first = Arc::new(Memtable::new(log_start));
        let inner = Arc::new(DbInner {
            fs,
            dir,
            tables_dir,
            wal,
            sv: RwLock::new(Arc::new(SuperVersion {
                mems: vec![first],
                version,
            })),
            state: Mutex::new(State { manifest, builder }),
            inflight: Mutex::new(Inflight::default()),
            visible: AtomicU64::new(log_start),
            snapshots: Mutex::new(BTreeMap::new()),
            tables,
            table_opts,
            next_table_id: AtomicU64::new(next_table_id),
            table_ids_reserved: AtomicU64::new(next_table_id),
            report: Mutex::new(report.clone()),
            cf_names: Mutex::new(cf_names),
            dir_lock: Mutex::new(Some(lock)),
            rotating: Mutex::new(()),
            bg_lock: Mutex::new(()),
            bg_cv: Condvar::new(),
            busy: Mutex::new(HashSet::new()),
            compact_pointer: Mutex::new(BTreeMap::new()),
            poisoned: AtomicBool::new(false),
            no_space: Mutex::new(None),
            bg_error: Mutex::new(None),
            closing: AtomicBool::new(false),
            counters: Counters::default(),
            threads: Mutex::new(Vec::new()),
            handles: std::sync::atomic::AtomicUsize::new(1),
            opts,
        });
        let records_replayed = inner.replay(log_start)?;
        *inner.report.lock() = RecoveryReport {
            records_replayed,
            ..report
        };
        inner.visible.store(inner.wal.reserved_lsn(), SeqCst);
        DbInner::start_threads(&inner)?;
        Ok(Db { inner })
    }

    // ---------------------------------------------------------------- column families

    /// The default column family.
    pub fn default_cf(&self) -> ColumnFamily {
        ColumnFamily {
            id: 0,
            name: DEFAULT_CF.into(),
        }
    }

    /// The column family named `name`.
    ///
    /// # Errors
    ///
    /// `ColumnFamilyNotFound` if there is none.
    pub fn cf(&self, name: &str) -> Result<ColumnFamily> {
        let sv = self.inner.super_version();
        sv.version
            .cfs
            .values()
            .find(|c| c.name == name)
            .map(|c| ColumnFamily {
                id: c.id,
                name: name.into(),
            })
            .ok_or_else(|| Error::ColumnFamilyNotFound(name.into()))
    }

    /// The names of every column family, in creation order.
    pub fn list_cfs(&self) -> Vec<String> {
        let sv = self.inner.super_version();
        sv.version.cfs.values().map(|c| c.name.clone()).collect()
    }

    /// Creates a column family (durably) and returns its handle; returns the existing one
    /// if `name` exists.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for an empty name; `Io`/`Poisoned` if the manifest write failed.
    pub fn create_cf(&self, name: &str) -> Result<ColumnFamily> {
        if name.is_empty() || name.len() > 255 {
            return Err(Error::invalid("a column family name has 1 to 255 bytes"));
        }
        self.inner.check_writable()?;
        self.inner.sync_before_ddl()?;
        let mut st = self.inner.state.lock();
        if let Some(c) = st.manifest.state().cfs.values().find(|c| c.name == name) {
            return Ok(ColumnFamily {
                id: c.id,
                name: name.into(),
            });
        }
        let id = st.manifest.state().next_cf_id;
        let r = st.manifest.log_and_apply(vec![Edit::CreateCf {
            id,
            name: name.to_string(),
        }]);
        if r.is_ok() {
            self.inner.cf_names.lock().insert(id, name.into());
        }
        self.inner.after_manifest(&mut st, r)?;
        Ok(ColumnFamily {
            id,
            name: name.into(),
        })
    }

    /// Drops a column family: its data is unreachable at once and its files are deleted
    /// when no reader uses them. The default column family cannot be dropped.
    ///
    /// # Errors
    ///
    /// `ColumnFamilyNotFound`; `InvalidArgument` for the default one; `Io`/`Poisoned`.
    pub fn drop_cf(&self, name: &str) -> Result<()> {
        if name == DEFAULT_CF {
            return Err(Error::invalid(
                "the default column family cannot be dropped",
            ));
        }
        self.inner.check_writable()?;
        self.inner.sync_before_ddl()?;
        let mut st = self.inner.state.lock();
        let id = st
            .manifest
            .state()
            .cfs
            .values()
            .find(|c| c.name == name)
            .map(|c| c.id)
            .ok_or_else(|| Error::ColumnFamilyNotFound(name.into()))?;
        let r = st.manifest.log_and_apply(vec![Edit::DropCf { id }]);
        self.inner.after_manifest(&mut st, r)
    }

    // ---------------------------------------------------------------- writes

    /// Writes `value` under `key` in the default column family.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for a key over 64 KiB or a value over 16 MiB; `Poisoned` after a
    /// failed fdatasync; `Io` if this write's log write or sync failed; `Closed`.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.put(key, value);
        self.write(b, WriteOptions::default())
    }

    /// Deletes `key` from the default column family.
    ///
    /// # Errors
    ///
    /// As [`Db::put`].
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete(key);
        self.write(b, WriteOptions::default())
    }

    /// Deletes `key`, which was put at most once since it was last deleted (see
    /// [`WriteBatch::single_delete`]).
    ///
    /// # Errors
    ///
    /// As [`Db::put`].
    pub fn single_delete(&self, key: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.single_delete(key);
        self.write(b, WriteOptions::default())
    }

    /// [`Db::put`] in column family `cf`.
    ///
    /// # Errors
    ///
    /// As [`Db::put`], and `ColumnFamilyNotFound` if `cf` was dropped.
    pub fn put_cf(&self, cf: &ColumnFamily, key: &[u8], value: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.put_cf(cf, key, value);
        self.write(b, WriteOptions::default())
    }

    /// [`Db::delete`] in column family `cf`.
    ///
    /// # Errors
    ///
    /// As [`Db::put_cf`].
    pub fn delete_cf(&self, cf: &ColumnFamily, key: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete_cf(cf, key);
        self.write(b, WriteOptions::default())
    }

    /// Applies a batch atomically: after a crash, either all of it or none of it is there,
    /// and no reader ever sees part of it.
    ///
    /// # Errors
    ///
    /// As [`Db::put_cf`]. On error nothing of the batch is visible (until a reopen replays
    /// the log, if the record reached it: an `Io` error on sync does not mean the batch is
    /// absent after a crash).
    pub fn write(&self, batch: WriteBatch, opts: WriteOptions) -> Result<()> {
        self.inner.write(&batch, opts)
    }

    /// Makes every acknowledged write durable (one shared fdatasync).
    ///
    /// # Errors
    ///
    /// `Io`/`Poisoned` if the sync failed.
    pub fn sync(&self) -> Result<()> {
        self.inner
            .wal
            .sync()
            .map_err(|e| self.inner.on_wal_error(e))
    }

    // ---------------------------------------------------------------- reads

    /// The value of `key` in the default column family.
    ///
    /// # Errors
    ///
    /// `Io` or `Corruption` (naming the table) if a table could not be read.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let (sv, seqno) = self.inner.read_view();
        self.inner.get_in(&sv, 0, key, seqno)
    }

    /// The value of `key` in column family `cf`.
    ///
    /// # Errors
    ///
    /// As [`Db::get`], and `ColumnFamilyNotFound`.
    pub fn get_cf(&self, cf: &ColumnFamily, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let (sv, seqno) = self.inner.read_view();
        self.inner.get_in(&sv, cf.id, key, seqno)
    }

    /// Every key-value pair of the default column family, in key order; `.rev()` walks
    /// backwards. Shorthand for `range::<&[u8], _>(..)`.
    pub fn iter(&self) -> Iter {
        self.range::<&[u8], _>(..)
    }

    /// The key-value pairs of the default column family in `range`, in key order; `.rev()`
    /// walks backwards. The iterator reads a consistent view as of its creation.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Iter {
        let (sv, seqno) = self.inner.read_view();
        self.inner
            .iter(0, Bounds::from_range(range), seqno, Some(sv))
    }

    /// [`Db::range`] in column family `cf`.
    pub fn range_cf<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, cf: &ColumnFamily, range: R) -> Iter {
        let (sv, seqno) = self.inner.read_view();
        self.inner
            .iter(cf.id, Bounds::from_range(range), seqno, Some(sv))
    }

    /// The pairs of the default column family whose key starts with `prefix`.
    pub fn prefix(&self, prefix: &[u8]) -> Iter {
        let (sv, seqno) = self.inner.read_view();
        self.inner.iter(0, Bounds::prefix(prefix), seqno, Some(sv))
    }

    /// [`Db::prefix`] in column family `cf`.
    pub fn prefix_cf(&self, cf: &ColumnFamily, prefix: &[u8]) -> Iter {
        let (sv, seqno) = self.inner.read_view();
        self.inner
            .iter(cf.id, Bounds::prefix(prefix), seqno, Some(sv))
    }

    /// A cursor over the default column family that can seek anywhere, as of now.
    pub fn cursor(&self) -> crate::read::Cursor {
        self.cursor_cf(&self.default_cf())
    }

    /// A cursor over column family `cf`.
    pub fn cursor_cf(&self, cf: &ColumnFamily) -> crate::read::Cursor {
        let (sv, seqno) = self.inner.read_view();
        crate::read::Cursor::new(self.inner.clone(), cf.id, seqno, Some(sv))
    }

    /// A consistent read view: reads through it see exactly the writes acknowledged before
    /// it was taken (and compaction keeps what it needs while it lives).
    pub fn snapshot(&self) -> Snapshot {
        let mut s = self.inner.snapshots.lock();
        let seqno = self.inner.visible();
        *s.entry(seqno).or_insert(0) += 1;
        Snapshot {
            db: self.clone(),
            seqno,
        }
    }

    // ---------------------------------------------------------------- maintenance

    /// Writes the memtable to a table and waits for it (and any older frozen memtable).
    ///
    /// # Errors
    ///
    /// `Io`/`Corruption`/`Poisoned` from the flush.
    pub fn flush(&self) -> Result<()> {
        self.inner.check_writable()?;
        self.inner.rotate(true);
        // Wait for the memtables frozen until now, not for ones frozen later by writers.
        let upto = self.inner.sv.read().mems[0].first_seqno();
        self.inner.wait_flushed(upto)
    }

    /// Compacts every table of the default column family overlapping `range` down to the
    /// last level, dropping overwritten values and tombstones no snapshot needs. Flushes
    /// first, so what was written before the call is compacted too.
    ///
    /// # Errors
    ///
    /// As [`Db::flush`].
    pub fn compact_range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<()> {
        self.compact_range_cf(&self.default_cf(), range)
    }

    /// [`Db::compact_range`] in column family `cf`.
    ///
    /// # Errors
    ///
    /// As [`Db::flush`].
    pub fn compact_range_cf<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        cf: &ColumnFamily,
        range: R,
    ) -> Result<()> {
        self.flush()?;
        let b = Bounds::from_range(range);
        crate::compaction::compact_range(&self.inner, cf.id, &b)
    }

    /// Every stored entry of `key` in `cf`, per source (memtables, then tables by level),
    /// for diagnostics: `"L{level} t{id}: seqno kind"`. Feature `testing`; not a stable
    /// interface.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub fn debug_entries(&self, cf: &ColumnFamily, key: &[u8]) -> Vec<String> {
        let sv = self.inner.super_version();
        let mut out = Vec::new();
        let mut dump = |name: String, it: &mut dyn crate::iter::InternalIterator| {
            it.seek(&key::seek_key(key, MAX_SEQNO + 1));
            while it.valid() {
                match key::parse(it.key()) {
                    Some(p) if p.user_key == key => out.push(format!(
                        "{name}: {} {:?} len {}",
                        p.seqno,
                        p.kind,
                        it.value().len()
                    )),
                    _ => break,
                }
                it.next();
            }
        };
        for (i, m) in sv.mems.iter().enumerate() {
            dump(
                format!("mem{i} (from {})", m.first_seqno()),
                &mut m.iter(cf.id),
            );
        }
        if let Some(cfv) = sv.version.cfs.get(&cf.id) {
            for (l, tables) in cfv.levels.iter().enumerate() {
                for t in tables {
                    if let Ok(table) = t.table() {
                        let mut it = crate::sstable::TableIter::new_with(&table, false);
                        dump(
                            format!(
                                "L{l} t{} [{}..{}]",
                                t.meta.id, t.meta.smallest_seqno, t.meta.largest_seqno
                            ),
                            &mut it,
                        );
                    }
                }
            }
        }
        out
    }

    /// Why the database is poisoned, if it is: the first failure that poisoned it (a failed
    /// write or fdatasync of the log, a failed manifest write, a failed background flush or
    /// compaction).
    pub fn background_error(&self) -> Option<String> {
        self.inner
            .bg_error
            .lock()
            .clone()
            .or_else(|| self.inner.wal.poison_cause())
    }

    /// Counters and sizes; see [`Stats`].
    pub fn stats(&self) -> Stats {
        self.inner.stats()
    }

    /// Stops background work and waits for it. Everything acknowledged stays recoverable:
    /// under `Interval` the log is synced first. Other handles to this database get
    /// `Closed` afterwards.
    ///
    /// # Errors
    ///
    /// `Io` naming the failure that poisoned the database, if one did (what
    /// [`Db::background_error`] says): what was acknowledged before it is recoverable, but
    /// later writes were refused. `Io` from the final sync.
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
        if let Some(e) = self.background_error() {
            return Err(Error::Io {
                op: "background work",
                path: None,
                source: std::io::Error::other(format!("the database was poisoned: {e}")),
            });
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

/// A consistent read view; see [`Db::snapshot`]. Released when dropped.
pub struct Snapshot {
    db: Db,
    seqno: Seqno,
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("seqno", &self.seqno)
            .finish()
    }
}

impl Snapshot {
    /// The seqno this view reads at: it sees every batch with a smaller one.
    pub fn seqno(&self) -> u64 {
        self.seqno
    }

    /// [`Db::get`] as of the snapshot.
    ///
    /// # Errors
    ///
    /// As [`Db::get`].
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.db.inner.get(0, key, self.seqno)
    }

    /// [`Db::get_cf`] as of the snapshot.
    ///
    /// # Errors
    ///
    /// As [`Db::get_cf`].
    pub fn get_cf(&self, cf: &ColumnFamily, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.db.inner.get(cf.id, key, self.seqno)
    }

    /// [`Db::iter`] as of the snapshot.
    pub fn iter(&self) -> Iter {
        self.range::<&[u8], _>(..)
    }

    /// [`Db::range`] as of the snapshot.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Iter {
        self.db
            .inner
            .iter(0, Bounds::from_range(range), self.seqno, None)
    }

    /// [`Db::range_cf`] as of the snapshot.
    pub fn range_cf<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, cf: &ColumnFamily, range: R) -> Iter {
        self.db
            .inner
            .iter(cf.id, Bounds::from_range(range), self.seqno, None)
    }

    /// [`Db::prefix`] as of the snapshot.
    pub fn prefix(&self, prefix: &[u8]) -> Iter {
        self.db
            .inner
            .iter(0, Bounds::prefix(prefix), self.seqno, None)
    }

    /// [`Db::cursor_cf`] as of the snapshot.
    pub fn cursor_cf(&self, cf: &ColumnFamily) -> crate::read::Cursor {
        crate::read::Cursor::new(self.db.inner.clone(), cf.id, self.seqno, None)
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        let mut s = self.db.inner.snapshots.lock();
        if let Some(n) = s.get_mut(&self.seqno) {
            *n -= 1;
            if *n == 0 {
                s.remove(&self.seqno);
            }
        }
    }
}

/// Sizes of one level, summed over column families.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LevelStats {
    /// Tables in the level.
    pub tables: u64,
    /// Bytes of those tables.
    pub bytes: u64,
}

/// What [`Db::stats`] reports.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Stats {
    /// Per level (0 to 6), over every column family.
    pub levels: Vec<LevelStats>,
    /// Bytes in memtables (active and frozen).
    pub memtable_bytes: u64,
    /// Frozen memtables waiting for flush.
    pub immutable_memtables: u64,
    /// Block cache hits and misses.
    pub cache_hits: u64,
    /// Block cache misses.
    pub cache_misses: u64,
    /// Key and value bytes written by users since open.
    pub user_bytes: u64,
    /// Bytes appended to the log since open.
    pub wal_bytes: u64,
    /// fdatasync calls of the log since open.
    pub wal_fsyncs: u64,
    /// Bytes of tables written by flushes since open.
    pub flush_bytes: u64,
    /// Bytes of tables read and written by compactions since open.
    pub compaction_read_bytes: u64,
    /// Bytes of tables written by compactions since open.
    pub compaction_write_bytes: u64,
    /// Flushes and compactions since open.
    pub flushes: u64,
    /// Compactions since open.
    pub compactions: u64,
    /// `(log + flush + compaction bytes) / user bytes` since open.
    pub write_amp: f64,
    /// Writes that had to wait for flush or compaction, and how long in total.
    pub stalls: u64,
    /// Microseconds writers spent stalled.
    pub stall_micros: u64,
}

impl DbInner {
    pub(crate) fn super_version(&self) -> Arc<SuperVersion> {
        self.sv.read().clone()
    }

    pub(crate) fn visible(&self) -> Seqno {
        self.visible.load(SeqCst)
    }

    /// `ColumnFamilyNotFound` for family `cf`, by its name where this handle knew it.
    pub(crate) fn cf_not_found(&self, cf: u32) -> Error {
        match self.cf_names.lock().get(&cf) {
            Some(name) => Error::ColumnFamilyNotFound(name.to_string()),
            None => Error::ColumnFamilyNotFound(format!("(id {cf})")),
        }
    }

    /// Makes every write acknowledged so far durable before a column family is created or
    /// dropped: the manifest edit is durable at once, and must not survive a power loss
    /// that takes back writes acknowledged before it (what survives is a prefix of commit
    /// order, in every sync mode). Found by `silt-stress power-loss`.
    fn sync_before_ddl(&self) -> Result<()> {
        self.wal.sync().map_err(|e| self.on_wal_error(e))
    }

    /// Records that background work failed for want of space (`Some`), or succeeded.
    pub(crate) fn set_no_space(&self, why: Option<String>) {
        let mut g = self.no_space.lock();
        if g.is_some() || why.is_some() {
            *g = why;
        }
    }

    pub(crate) fn check_writable(&self) -> Result<()> {
        if self.poisoned.load(SeqCst) {
            return Err(Error::Poisoned);
        }
        if self.closing.load(SeqCst) {
            return Err(Error::Closed);
        }
        Ok(())
    }

    pub(crate) fn poison(&self, why: String) {
        self.poisoned.store(true, SeqCst);
        let mut e = self.bg_error.lock();
        if e.is_none() {
            *e = Some(why);
        }
        drop(e);
        self.notify_bg();
    }

    /// Converts a log error, poisoning the database (with the cause, for
    /// [`Db::background_error`] and [`Db::close`]) if the log is poisoned or failed an I/O.
    fn on_wal_error(&self, e: silt_wal::Error) -> Error {
        let e = Error::from(e);
        match &e {
            Error::Poisoned => self.poison(format!(
                "the log is poisoned: {}",
                self.wal
                    .poison_cause()
                    .unwrap_or_else(|| "an earlier write or fdatasync of it failed".into())
            )),
            Error::Io { .. } => self.poison(format!("log write or sync failed: {e}")),
            _ => {}
        }
        e
    }

    pub(crate) fn notify_bg(&self) {
        let _g = self.bg_lock.lock();
        self.bg_cv.notify_all();
    }

    /// Handles the result of a manifest write: on success installs the new version; on
    /// failure poisons the database (the manifest is poisoned too).
    pub(crate) fn after_manifest(&self, st: &mut State, r: Result<()>) -> Result<()> {
        match r {
            Ok(()) => {
                let v = Arc::new(st.builder.build(st.manifest.state()));
                let mut sv = self.sv.write();
                *sv = Arc::new(SuperVersion {
                    mems: sv.mems.clone(),
                    version: v,
                });
                Ok(())
            }
            Err(e) if e.is_no_space() => Err(e),
            Err(e) => {
                self.poison(format!("manifest write failed: {e}"));
                Err(e)
            }
        }
    }

    fn write(&self, batch: &WriteBatch, opts: WriteOptions) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        batch.validate()?;
        self.check_writable()?;
        {
            let sv = self.super_version();
            for cf in batch.cf_ids() {
                if !sv.version.cfs.contains_key(&cf) {
                    return Err(self.cf_not_found(cf));
                }
            }
        }
        self.maybe_stall()?;
        let ticket = self.register();
        let lsn = match self
            .wal
            .append_with(batch.payload(), AppendOptions { sync: opts.sync })
        {
            Ok(lsn) => lsn,
            Err(e) => {
                self.complete(ticket);
                return Err(self.on_wal_error(e));
            }
        };
        if lsn > MAX_SEQNO {
            self.complete(ticket);
            self.poison("the log outgrew the 56-bit seqno space".into());
            return Err(Error::Poisoned);
        }
        let entries = batch::decode(batch.payload()).map_err(|e| Error::invalid(e.0))?;
        {
            let sv = self.sv.read();
            let mem = mem_for(&sv.mems, lsn);
            apply(mem, lsn, &entries, |_| true);
        }
        self.complete(ticket);
        self.counters
            .user_bytes
            .fetch_add(batch.encoded_bytes() as u64, SeqCst);
        self.wait_visible(lsn + 1);
        self.maybe_rotate();
        Ok(())
    }

    fn register(&self) -> (u64, u64) {
        let mut f = self.inflight.lock();
        let r0 = self.wal.reserved_lsn();
        let t = f.next_ticket;
        f.next_ticket += 1;
        f.writers.insert((r0, t), ());
        (r0, t)
    }

    fn complete(&self, ticket: (u64, u64)) {
        let mut f = self.inflight.lock();
        f.writers.remove(&ticket);
        let v = match f.writers.keys().next() {
            Some((r0, _)) => *r0,
            None => self.wal.reserved_lsn(),
        };
        self.visible.fetch_max(v, SeqCst);
    }

    /// Waits until `visible >= v`: writers registered before us finish in microseconds
    /// (they only insert into a memtable), so spin briefly, then yield.
    fn wait_visible(&self, v: Seqno) {
        let mut spins = 0u32;
        while self.visible() < v {
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
            spins = spins.saturating_add(1);
            if spins > 1_000_000 && self.poisoned.load(SeqCst) {
                return;
            }
        }
    }

    fn maybe_stall(&self) -> Result<()> {
        let mut started: Option<Instant> = None;
        loop {
            self.check_writable()?;
            let sv = self.super_version();
            let frozen = sv.mems.len() - 1;
            let active_full = sv.mems[0].approx_bytes() >= self.opts.memtable_bytes;
            let l0 = sv
                .version
                .cfs
                .values()
                .map(|c| c.levels[0].len())
                .max()
                .unwrap_or(0);
            let stall = (frozen >= self.opts.immutable_memtables_max && active_full)
                || l0 >= self.opts.l0_stall_tables;
            if !stall {
                break;
            }
            if let Some(why) = self.no_space.lock().clone() {
                // The flush or compaction this write waits for cannot write: fail now rather
                // than stall until space frees. Nothing of this write was applied.
                return Err(Error::NoSpace {
                    op: "write (stalled: background work cannot write)",
                    path: None,
                    source: std::io::Error::new(std::io::ErrorKind::StorageFull, why),
                });
            }
            if started.is_none() {
                started = Some(Instant::now());
                self.counters.stalls.fetch_add(1, SeqCst);
            }
            self.notify_bg();
            let mut g = self.bg_lock.lock();
            self.bg_cv.wait_for(&mut g, STALL_WAIT);
        }
        if let Some(s) = started {
            self.counters
                .stall_micros
                .fetch_add(s.elapsed().as_micros() as u64, SeqCst);
        }
        Ok(())
    }

    fn maybe_rotate(&self) {
        let full = self.sv.read().mems[0].approx_bytes() >= self.opts.memtable_bytes;
        if full {
            self.rotate(false);
        }
    }

    /// Freezes the active memtable (if it is full, or `force` and it is not empty) and
    /// starts a new one at the log's reservation watermark. Returns whether it did.
    pub(crate) fn rotate(&self, force: bool) -> bool {
        let _r = self.rotating.lock();
        {
            let mut sv = self.sv.write();
            let active = &sv.mems[0];
            let full = active.approx_bytes() >= self.opts.memtable_bytes;
            if !(full || (force && !active.is_empty())) {
                return false;
            }
            if !force && sv.mems.len() > self.opts.immutable_memtables_max {
                return false;
            }
            // Every writer holding the read lock got its LSN before we got the write lock,
            // so below this; every later writer gets one at or above it.
            let boundary = self.wal.reserved_lsn();
            let mut mems = Vec::with_capacity(sv.mems.len() + 1);
            mems.push(Arc::new(Memtable::new(boundary)));
            mems.extend(sv.mems.iter().cloned());
            *sv = Arc::new(SuperVersion {
                mems,
                version: sv.version.clone(),
            });
        }
        self.notify_bg();
        true
    }

    /// Waits until every frozen memtable holding seqnos below `upto` is flushed.
    fn wait_flushed(&self, upto: Seqno) -> Result<()> {
        loop {
            if self.poisoned.load(SeqCst) {
                return Err(Error::Poisoned);
            }
            if self.sv.read().mems[1..]
                .iter()
                .all(|m| m.first_seqno() >= upto)
            {
                return Ok(());
            }
            self.notify_bg();
            let mut g = self.bg_lock.lock();
            self.bg_cv.wait_for(&mut g, Duration::from_millis(2));
        }
    }

    /// A new table id, durably reserved in the manifest before it is handed out
    /// (invariant O1 of `open.rs`): ids are reserved [`TABLE_ID_RESERVE`] at a time.
    ///
    /// # Errors
    ///
    /// `Io`/`Poisoned` if the reservation could not be made durable (the database is then
    /// poisoned).
    pub(crate) fn alloc_table_id(&self) -> Result<u64> {
        let id = self.next_table_id.fetch_add(1, SeqCst);
        if id < self.table_ids_reserved.load(SeqCst) {
            return Ok(id);
        }
        let mut st = self.state.lock();
        if id >= st.manifest.state().next_table_id {
            let r = st
                .manifest
                .log_and_apply(vec![Edit::NextTableId(id.saturating_add(TABLE_ID_RESERVE))]);
            if let Err(e) = r {
                if !e.is_no_space() {
                    self.poison(format!("manifest write failed: {e}"));
                }
                return Err(e);
            }
        }
        self.table_ids_reserved
            .fetch_max(st.manifest.state().next_table_id, SeqCst);
        Ok(id)
    }

    /// Writes one table per column family from `mem` (entries with seqno below
    /// `boundary`), then records them and `log_start = boundary` in the manifest.
    fn flush_memtable(&self, mem: &Arc<Memtable>, boundary: Seqno) -> Result<()> {
        let live_cfs: Vec<u32> = {
            let st = self.state.lock();
            st.manifest.state().cfs.keys().copied().collect()
        };
        let mut edits = Vec::new();
        let mut bytes = 0;
        let mut new = NewTables::new(self);
        for cf in mem.cfs() {
            if !live_cfs.contains(&cf) {
                continue; // dropped
            }
            let mut it = mem.iter(cf);
            it.seek_to_first();
            let (meta, n) = self.write_table(&mut it, &mut new)?;
            if let Some(m) = meta {
                debug_assert!(n > 0);
                bytes += m.size_bytes;
                edits.push(Edit::AddTable {
                    cf,
                    level: 0,
                    meta: m,
                });
            }
        }
        if !edits.is_empty() {
            self.sync_tables_dir()?;
        }
        // The log must be durable up to the boundary before the manifest says replay starts
        // there: otherwise a crash could cut the log below the boundary, and new writes
        // would get seqnos (LSNs) below data already in tables, and be skipped by replay.
        self.wal.sync().map_err(|e| self.on_wal_error(e))?;
        edits.push(Edit::LogStart(boundary));
        edits.push(Edit::NextTableId(self.next_table_id.load(SeqCst)));
        let mut st = self.state.lock();
        // A column family dropped while we wrote: leave its table out (deleted below).
        let mut orphans = Vec::new();
        edits.retain(|e| match e {
            Edit::AddTable { cf, meta, .. } if !st.manifest.state().cfs.contains_key(cf) => {
                orphans.push(meta.id);
                false
            }
            _ => true,
        });
        crate::kill_point::hit("flush: tables written and log synced, before the manifest edit");
        let r = st.manifest.log_and_apply(edits);
        let r = match r {
            Ok(()) => {
                let s = &mut *st;
                let v = Arc::new(s.builder.build(s.manifest.state()));
                let mut sv = self.sv.write();
                let mut mems = sv.mems.clone();
                mems.retain(|m| !Arc::ptr_eq(m, mem));
                *sv = Arc::new(SuperVersion { mems, version: v });
                Ok(())
            }
            Err(e) if Self::manifest_edit_surely_lost(&e) => Err(e),
            Err(e) => {
                self.poison(format!("manifest write failed: {e}"));
                new.keep();
                Err(e)
            }
        };
        drop(st);
        if r.is_ok() {
            new.keep();
        }
        for id in orphans {
            let _ = self.fs.remove(&self.tables_dir.join(table_file_name(id)));
        }
        r?;
        self.counters.flush_bytes.fetch_add(bytes, SeqCst);
        self.counters.flushes.fetch_add(1, SeqCst);
        crate::kill_point::hit("flush: manifest edit durable, before purging the log");
        self.wal.purge_up_to(boundary)?;
        self.notify_bg();
        Ok(())
    }

    /// Creates the file of a new table, registered in `new` (so it is removed if the job
    /// fails before recording it).
    pub(crate) fn create_table(
        &self,
        new: &mut NewTables<'_>,
    ) -> Result<(u64, PathBuf, Arc<dyn silt_vfs::File>)> {
        let id = self.alloc_table_id()?;
        let path = self.tables_dir.join(table_file_name(id));
        let file = self
            .fs
            .create(&path)
            .map_err(|e| Error::io("create table", Some(path.clone()), e))?;
        new.ids.push(id);
        Ok((id, path, file))
    }

    /// Whether a failed manifest write leaves its edits not durable for sure: only a write
    /// that failed for want of space (see `Manifest::log_and_apply`). After any other
    /// failure the edits may be durable, so the tables they name must stay.
    fn manifest_edit_surely_lost(e: &Error) -> bool {
        e.is_no_space()
    }

    pub(crate) fn sync_tables_dir(&self) -> Result<()> {
        self.fs
            .sync_dir(&self.tables_dir)
            .map_err(|e| Error::io("fsync directory", Some(self.tables_dir.clone()), e))
    }

    /// Writes every entry of `it` (from its position) into one new table. Returns its meta
    /// (`None` if there were no entries) and the entry count.
    pub(crate) fn write_table(
        &self,
        it: &mut dyn crate::iter::InternalIterator,
        new: &mut NewTables<'_>,
    ) -> Result<(Option<TableMeta>, u64)> {
        if !it.valid() {
            if let Some(e) = it.take_error() {
                return Err(e);
            }
            return Ok((None, 0));
        }
        let (id, path, file) = self.create_table(new)?;
        let mut b = TableBuilder::new(id, path, file, &self.table_opts);
        let mut n = 0;
        while it.valid() {
            b.add(it.key(), it.value())?;
            n += 1;
            it.next();
        }
        if let Some(e) = it.take_error() {
            return Err(e);
        }
        let meta = b.finish()?;
        Ok((Some(meta), n))
    }

    /// Replays the log from `log_start` into memtables, flushing when one fills. Returns
    /// the number of records replayed.
    fn replay(&self, log_start: Seqno) -> Result<u64> {
        let mut replayed = 0;
        let (live, next_cf_id): (HashSet<u32>, u32) = {
            let st = self.state.lock();
            let s = st.manifest.state();
            (s.cfs.keys().copied().collect(), s.next_cf_id)
        };
        let reader = self.wal.read_from(log_start)?;
        for rec in reader {
            let rec = rec?;
            let entries = batch::decode(&rec.payload).map_err(|e| Error::Corruption {
                file: self.dir.join("wal"),
                offset: rec.lsn,
                reason: format!("log record at LSN {} holds a bad batch: {}", rec.lsn, e.0),
            })?;
            // A dropped column family's writes are skipped; one the manifest never created
            // (an id at or above `next_cf_id`) means the manifest lost its creation.
            if let Some(e) = entries.iter().find(|e| e.cf >= next_cf_id) {
                return Err(Error::Corruption {
                    file: self.dir.join("wal"),
                    offset: rec.lsn,
                    reason: format!(
                        "log record at LSN {} writes to column family {}, which the manifest \
                         never created (next id {next_cf_id}): the manifest is older than \
                         the log",
                        rec.lsn, e.cf
                    ),
                });
            }
            let mem = self.sv.read().mems[0].clone();
            apply(&mem, rec.lsn, &entries, |cf| live.contains(&cf));
            replayed += 1;
            if mem.approx_bytes() >= self.opts.memtable_bytes {
                let boundary = rec.lsn + 1;
                {
                    let mut sv = self.sv.write();
                    let mut mems = vec![Arc::new(Memtable::new(boundary))];
                    mems.extend(sv.mems.iter().cloned());
                    *sv = Arc::new(SuperVersion {
                        mems,
                        version: sv.version.clone(),
                    });
                }
                self.flush_memtable(&mem, boundary)?;
            }
        }
        Ok(replayed)
    }

    fn start_threads(inner: &Arc<DbInner>) -> Result<()> {
        let mut threads = inner.threads.lock();
        let w = Arc::downgrade(inner);
        threads.push(spawn("silt-flush", move || flush_loop(w))?);
        for i in 1..inner.opts.background_threads {
            let w = Arc::downgrade(inner);
            threads.push(spawn(&format!("silt-compact-{i}"), move || {
                crate::compaction::compaction_loop(w)
            })?);
        }
        Ok(())
    }

    pub(crate) fn shutdown(&self) {
        self.closing.store(true, SeqCst);
        self.notify_bg();
        let threads: Vec<_> = self.threads.lock().drain(..).collect();
        for t in threads {
            let _ = t.join();
        }
        // No job of this handle runs any more: another handle may open the directory.
        self.dir_lock.lock().take();
    }

    /// The super-version and the seqno of a read that is not through a snapshot: the
    /// super-version first, so that no compaction installed after the seqno was taken can
    /// have dropped a version the read must see.
    pub(crate) fn read_view(&self) -> (Arc<SuperVersion>, Seqno) {
        let sv = self.super_version();
        let seqno = self.visible();
        (sv, seqno)
    }

    pub(crate) fn get(&self, cf: u32, key: &[u8], snapshot: Seqno) -> Result<Option<Vec<u8>>> {
        let sv = self.super_version();
        self.get_in(&sv, cf, key, snapshot)
    }

    pub(crate) fn get_in(
        &self,
        sv: &SuperVersion,
        cf: u32,
        key: &[u8],
        snapshot: Seqno,
    ) -> Result<Option<Vec<u8>>> {
        let Some(cfv) = sv.version.cfs.get(&cf) else {
            return Err(self.cf_not_found(cf));
        };
        let found = |kind: Kind, v: Vec<u8>| match kind {
            Kind::Put => Some(v),
            _ => None,
        };
        for m in &sv.mems {
            if let Some((kind, _, v)) = m.get(cf, key, snapshot) {
                return Ok(found(kind, v));
            }
        }
        for t in &cfv.levels[0] {
            if t.user_smallest() <= key && key <= t.user_largest() {
                if let Some((kind, _, v)) = t.table()?.get(key, snapshot)? {
                    return Ok(found(kind, v));
                }
            }
        }
        for level in 1..LEVELS {
            if let Some(t) = cfv.find_in_level(level, key) {
                if let Some((kind, _, v)) = t.table()?.get(key, snapshot)? {
                    return Ok(found(kind, v));
                }
            }
        }
        Ok(None)
    }

    pub(crate) fn iter(
        self: &Arc<Self>,
        cf: u32,
        bounds: Bounds,
        snapshot: Seqno,
        sv: Option<Arc<SuperVersion>>,
    ) -> Iter {
        Iter::new(self.clone(), cf, bounds, snapshot, sv)
    }

    /// Live snapshots, ascending.
    pub(crate) fn snapshot_list(&self) -> Vec<Seqno> {
        self.snapshots.lock().keys().copied().collect()
    }

    fn stats(&self) -> Stats {
        let sv = self.super_version();
        let mut levels = vec![LevelStats::default(); LEVELS];
        for cf in sv.version.cfs.values() {
            for (l, tables) in cf.levels.iter().enumerate() {
                levels[l].tables += tables.len() as u64;
                levels[l].bytes += tables.iter().map(|t| t.meta.size_bytes).sum::<u64>();
            }
        }
        let w = self.wal.stats();
        let c = &self.counters;
        let user = c.user_bytes.load(SeqCst);
        let flush = c.flush_bytes.load(SeqCst);
        let cw = c.compaction_write_bytes.load(SeqCst);
        Stats {
            levels,
            memtable_bytes: sv.mems.iter().map(|m| m.approx_bytes()).sum(),
            immutable_memtables: sv.mems.len() as u64 - 1,
            cache_hits: self.tables.blocks.hits(),
            cache_misses: self.tables.blocks.misses(),
            user_bytes: user,
            wal_bytes: w.bytes,
            wal_fsyncs: w.fsyncs,
            flush_bytes: flush,
            compaction_read_bytes: c.compaction_read_bytes.load(SeqCst),
            compaction_write_bytes: cw,
            flushes: c.flushes.load(SeqCst),
            compactions: c.compactions.load(SeqCst),
            write_amp: if user == 0 {
                0.0
            } else {
                (w.bytes + flush + cw) as f64 / user as f64
            },
            stalls: c.stalls.load(SeqCst),
            stall_micros: c.stall_micros.load(SeqCst),
        }
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

/// The memtable owning `seqno`: the newest whose first seqno is at or below it.
fn mem_for(mems: &[Arc<Memtable>], seqno: Seqno) -> &Arc<Memtable> {
    mems.iter()
        .find(|m| m.first_seqno() <= seqno)
        .unwrap_or_else(|| &mems[mems.len() - 1])
}

/// Inserts a batch's entries at `seqno`; within a batch the last write to a key wins, so
/// each (cf, key) gets one entry.
fn apply(
    mem: &Memtable,
    seqno: Seqno,
    entries: &[batch::BatchEntry<'_>],
    keep: impl Fn(u32) -> bool,
) {
    if entries.len() == 1 {
        let e = &entries[0];
        if keep(e.cf) {
            mem.insert(e.cf, e.key, seqno, e.kind, e.value);
        }
        return;
    }
    let mut seen = HashSet::with_capacity(entries.len());
    for e in entries.iter().rev() {
        if keep(e.cf) && seen.insert((e.cf, e.key)) {
            mem.insert(e.cf, e.key, seqno, e.kind, e.value);
        }
    }
}

fn flush_loop(w: std::sync::Weak<DbInner>) {
    loop {
        let Some(db) = w.upgrade() else { return };
        if db.poisoned.load(SeqCst) {
            return;
        }
        let job = {
            let sv = db.sv.read();
            if sv.mems.len() > 1 {
                let n = sv.mems.len();
                Some((sv.mems[n - 1].clone(), sv.mems[n - 2].first_seqno()))
            } else {
                None
            }
        };
        match job {
            Some((mem, boundary)) => {
                // Writers owning seqnos below the boundary may still be inserting.
                db.wait_visible(boundary);
                match db.flush_memtable(&mem, boundary) {
                    Ok(()) => db.set_no_space(None),
                    Err(e) if e.is_no_space() => {
                        // Nothing changed (the tables written are removed): retry after a
                        // pause, as space may free. Writers that would stall meanwhile get
                        // `NoSpace`.
                        db.set_no_space(Some(format!("flush: {e}")));
                        let mut g = db.bg_lock.lock();
                        db.bg_cv.wait_for(&mut g, NO_SPACE_RETRY);
                    }
                    Err(e) => {
                        db.poison(format!("flush failed: {e}"));
                        return;
                    }
                }
            }
            None => {
                if db.closing.load(SeqCst) {
                    return;
                }
                let mut g = db.bg_lock.lock();
                db.bg_cv.wait_for(&mut g, Duration::from_millis(50));
            }
        }
    }
}

/// Table files a flush or compaction created and has not recorded in the manifest yet.
/// Dropped without [`NewTables::keep`], it removes them: a failed job must not leave them
/// to fill the disk, least of all when it failed for want of space. (Open would remove them
/// too: their ids are below the reserved mark, O2 of `open.rs`.)
pub(crate) struct NewTables<'a> {
    db: &'a DbInner,
    pub(crate) ids: Vec<u64>,
}

impl<'a> NewTables<'a> {
    pub(crate) fn new(db: &'a DbInner) -> NewTables<'a> {
        NewTables {
            db,
            ids: Vec::new(),
        }
    }

    /// Keeps the files: the manifest names them, or may (after an ambiguous failure).
    pub(crate) fn keep(&mut self) {
        self.ids.clear();
    }
}

impl Drop for NewTables<'_> {
    fn drop(&mut self) {
        for id in self.ids.drain(..) {
            self.db.tables.evict(id);
            let _ = self
                .db
                .fs
                .remove(&self.db.tables_dir.join(table_file_name(id)));
        }
    }
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .map_err(|e| Error::io("spawn thread", None, e))
}

/// A table file or log segment in the directories of a database, if there is one.
fn database_files(fs: &dyn FileSystem, tables_dir: &Path, wal_dir: &Path) -> Option<PathBuf> {
    [(tables_dir, ".sst"), (wal_dir, ".wal")]
        .into_iter()
        .filter_map(|(d, ext)| fs.list(d).ok().map(|files| (files, ext)))
        .find_map(|(files, ext)| {
            files
                .into_iter()
                .find(|f| f.to_str().is_some_and(|n| n.ends_with(ext)))
        })
}

#[allow(dead_code)]
fn _assert_send_sync() {
    fn f<T: Send + Sync>() {}
    f::<Db>();
    f::<key::ParsedKey<'static>>();
}
