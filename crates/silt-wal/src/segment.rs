//! Segment files: naming, preallocation, the table of open segments, preparing the next
//! segment ahead of need, and purging.
//!
//! A log is a sequence of fixed-size segment files `{id:020}.wal`. Segment `id` covers LSNs
//! `id * S .. (id + 1) * S` (S = segment size), so an LSN names its file and offset with one
//! division. Every segment exists at its full size before a record is written into it, and
//! its size and header are synced (and the directory synced) before it is used: an
//! `fdatasync` of a record then never has to update file metadata.
//!
//! Preallocation is by zero-fill (or `fallocate`, [`crate::Preallocate::RecycleElseAllocate`]),
//! or, with [`crate::Preallocate::Recycle`], by renaming a purged segment (records carry their
//! segment id and LSN, so stale bytes of a recycled file never read as records). A purged
//! segment that has another name (a hard link) is removed, never recycled. A background thread prepares segment `k + 1` once writers pass
//! the first quarter of segment `k`, so rotation does not wait for preallocation.
//!
//! Invariant: segments are created in id order ([`Segments::create_locked`] creates any
//! missing ones below the one asked for first), so the directory never shows a gap in
//! segment ids, which recovery refuses.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex, RwLock};
use silt_vfs::{File, FileSystem, ReadMap};

use crate::error::{Error, Result};
use crate::format::{SegmentHeader, SEGMENT_HEADER_BYTES};

/// Where a recycled segment's old bytes start to be forgotten (`File::forget`): the 4 KiB
/// holding the header stay whole.
const FORGET_FROM: u64 = 4096;
use crate::Preallocate;

pub(crate) fn segment_path(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("{id:020}.wal"))
}

/// Parses a file name written by [`segment_path`].
pub(crate) fn parse_segment_name(path: &Path) -> Option<u64> {
    let name = path.file_name()?.to_str()?;
    let id = name.strip_suffix(".wal")?;
    if id.len() != 20 || !id.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    id.parse().ok()
}

pub(crate) struct Segments {
    pub(crate) fs: Arc<dyn FileSystem>,
    pub(crate) dir: PathBuf,
    pub(crate) segment_bytes: u64,
    prealloc: Preallocate,
    /// Purged segments kept for recycling, at most (`Options::recycle_segments`,
    /// `Wal::set_recycle_segments`).
    pool_max: AtomicUsize,
    files: RwLock<BTreeMap<u64, Arc<dyn File>>>,
    /// Held while a segment is created, purged or removed.
    prep: Mutex<Prep>,
    /// The id the background preparer should create next (`u64::MAX`: none yet), and its
    /// wake-up; kept apart from `prep` so asking never waits behind a running zero-fill.
    wanted: Mutex<Wanted>,
    wanted_cv: Condvar,
    /// Set when the log is poisoned: no file is created (and synced) after that.
    poisoned: AtomicBool,
    /// What poisoned the segments, for [`crate::Wal::poison_cause`].
    cause: Mutex<Option<String>>,
    /// The highest LSN a purge was asked to reach: only segments wholly below it may have
    /// left the table while records were being synced (`Inner::sync_range` asserts it).
    purged_to: AtomicU64,
    /// Read-only mappings of segments made for [`Segments::read_map`], shared by its
    /// callers; dropped here when the segment leaves the table (holders keep theirs).
    read_maps: Mutex<BTreeMap<u64, Arc<ReadMap>>>,
}

struct Wanted {
    id: Option<u64>,
    shutdown: bool,
}

struct Prep {
    /// Purged files waiting to be reused (Recycle mode).
    pool: Vec<PathBuf>,
    /// Serial number for pool file names.
    pool_serial: u64,
    /// Whether the last segment purged went to another name instead of the pool: under
    /// `RecycleElseAllocate`, new segments are then allocated, not zero-filled (a load whose
    /// segments become log blobs; the next segment is made before the one it replaces is
    /// purged, so a count of replacements owed would come too late).
    links_seen: bool,
}

impl Segments {
    pub(crate) fn new(
        fs: Arc<dyn FileSystem>,
        dir: PathBuf,
        segment_bytes: u64,
        prealloc: Preallocate,
        pool_max: usize,
        files: BTreeMap<u64, Arc<dyn File>>,
        pool: Vec<PathBuf>,
    ) -> Self {
        // Continue after the highest serial found, not from the pool's size: after purges
        // and reopens the survivors can be, say, 2 and 3 only, and numbering from 2 would
        // rename a purged segment onto a file still in the pool.
        let pool_serial = pool
            .iter()
            .filter_map(|p| p.file_stem()?.to_str()?.parse::<u64>().ok())
            .max()
            .unwrap_or(0);
        Segments {
            fs,
            dir,
            segment_bytes,
            prealloc,
            pool_max: AtomicUsize::new(pool_max),
            files: RwLock::new(files),
            prep: Mutex::new(Prep {
                pool,
                pool_serial,
                links_seen: false,
            }),
            wanted: Mutex::new(Wanted {
                id: None,
                shutdown: false,
            }),
            wanted_cv: Condvar::new(),
            poisoned: AtomicBool::new(false),
            cause: Mutex::new(None),
            purged_to: AtomicU64::new(0),
            read_maps: Mutex::new(BTreeMap::new()),
        }
    }

    pub(crate) fn path(&self, id: u64) -> PathBuf {
        segment_path(&self.dir, id)
    }

    /// The open segment `id`, creating it if it does not exist yet.
    pub(crate) fn get(&self, id: u64) -> Result<Arc<dyn File>> {
        if let Some(f) = self.files.read().get(&id) {
            return Ok(f.clone());
        }
        let mut prep = self.prep.lock();
        self.create_locked(&mut prep, id)
    }

    /// The open segment `id` if it exists.
    pub(crate) fn existing(&self, id: u64) -> Option<Arc<dyn File>> {
        self.files.read().get(&id).cloned()
    }

    /// A read-only mapping of the whole of segment `id` (made once and shared), if the
    /// segment is open and the file system maps files; `None` otherwise, and if mapping
    /// failed (the caller reads another way).
    pub(crate) fn read_map(&self, id: u64) -> Option<Arc<ReadMap>> {
        if let Some(m) = self.read_maps.lock().get(&id) {
            return Some(m.clone());
        }
        let file = self.existing(id)?;
        let made = file.map_read(self.segment_bytes).ok()??;
        let mut maps = self.read_maps.lock();
        // Not cached for a segment that left the table meanwhile (a purge or removal
        // drops its entry first): the caller's copy still reads the bytes it wrote.
        if self.files.read().contains_key(&id) {
            return Some(maps.entry(id).or_insert(made).clone());
        }
        Some(made)
    }

    /// Forgets the mappings of segments that left the table.
    fn forget_maps(&self, ids: &[u64]) {
        let mut maps = self.read_maps.lock();
        for id in ids {
            maps.remove(id);
        }
    }

    /// Whether segment `id` lies below the oldest segment: it held records a purge removed
    /// (or ones gone before the log was opened), and a file made under its name again would
    /// be an orphan below the log, most often with a purged segment missing after it — a
    /// log that recovery refuses to open. A purge always keeps a segment, so the table is
    /// empty only before a new log's first segment is made. Callers hold `prep`, as purges
    /// do.
    fn below_the_log(&self, id: u64) -> bool {
        self.files
            .read()
            .keys()
            .next()
            .is_some_and(|&oldest| id < oldest)
    }

    /// The ids of the segments, oldest first.
    pub(crate) fn ids(&self) -> Vec<u64> {
        self.files.read().keys().copied().collect()
    }

    fn create_locked(&self, prep: &mut Prep, id: u64) -> Result<Arc<dyn File>> {
        if let Some(f) = self.files.read().get(&id) {
            return Ok(f.clone());
        }
        if self.poisoned.load(SeqCst) {
            return Err(Error::Poisoned);
        }
        if self.below_the_log(id) {
            // No writer asks for a purged segment (a purge removes only segments below the
            // filled watermark); the preparer skips stale requests before coming here.
            debug_assert!(false, "segment {id} is below the log's oldest segment");
            return Err(Error::InvalidArgument(format!(
                "log segment {id} was purged; it is not created again"
            )));
        }
        // Segments are created in id order. A writer whose record lies in segment `id` may
        // get here before any writer of `id - 1` has (reservations are lock-free, and the
        // preparer may be behind): the ones between are created first, so the directory
        // never shows a gap in segment ids, which recovery refuses. (Found by `silt-stress
        // power-loss`, 2026-11-27: a power loss right after such a creation left a log that
        // would not open.)
        let highest = self.files.read().keys().next_back().copied();
        if let Some(h) = highest.filter(|&h| h + 1 < id) {
            for between in h + 1..id {
                self.create_locked(prep, between)?;
            }
        }
        // A failure here may be a failed fdatasync: after it, no file is synced again.
        self.create_file(prep, id).inspect_err(|e| {
            self.cause
                .lock()
                .get_or_insert_with(|| format!("preparing log segment {id} failed: {e}"));
            self.poisoned.store(true, SeqCst);
        })
    }

    fn create_file(&self, prep: &mut Prep, id: u64) -> Result<Arc<dyn File>> {
        let path = self.path(id);
        let io = |op: &'static str, p: &Path| {
            let p = p.to_path_buf();
            move |e| Error::io(op, Some(p), e)
        };
        let header = SegmentHeader {
            segment_bytes: self.segment_bytes,
            segment_id: id,
        }
        .encode();
        let file = match (self.prealloc, prep.pool.pop()) {
            (Preallocate::Recycle | Preallocate::RecycleElseAllocate, Some(old)) => {
                // The new header first, under the pool name, then the rename: a crash at
                // any moment leaves a pool file or a segment whose header matches its name,
                // never a segment file that still names its old segment.
                let f = self.fs.open(&old).map_err(io("open", &old))?;
                f.write_at(&[&header], 0).map_err(io("pwrite", &old))?;
                if self.prealloc == Preallocate::RecycleElseAllocate {
                    // Most commits are not synced: a store into a page of the old bytes
                    // that left the cache would wait for the device to read it, in the
                    // commit path, so the old bytes after the header's page are forgotten
                    // (their blocks stay, unwritten; the first page keeps the header).
                    // Synced commits keep them (`Recycle`): a sync after the first write
                    // into an unwritten block also commits the file system's journal.
                    // Zeros or the old bytes alike end recovery's scan of the segment.
                    // A hint: stale bytes are as valid as zeros, so a failure (zeroing a
                    // range may need space to split an extent) only leaves them.
                    let keep = FORGET_FROM.min(self.segment_bytes);
                    let _ = f.forget(keep, self.segment_bytes - keep);
                }
                f.sync_data().map_err(io("fdatasync", &old))?;
                crate::kill_point::hit("log: recycled segment's new header synced, before rename");
                self.fs.rename(&old, &path).map_err(io("rename", &old))?;
                crate::kill_point::hit("log: recycled segment renamed, before directory sync");
                f
            }
            (_, old) => {
                if let Some(old) = old {
                    prep.pool.push(old);
                }
                let tmp = path.with_extension("tmp");
                let _ = self.fs.remove(&tmp);
                let f = self.fs.create(&tmp).map_err(io("create", &tmp))?;
                if self.prealloc == Preallocate::RecycleElseAllocate && prep.links_seen {
                    f.allocate(self.segment_bytes)
                        .map_err(io("fallocate", &tmp))?;
                } else {
                    f.write_zeros(0, self.segment_bytes)
                        .map_err(io("pwrite", &tmp))?;
                }
                f.write_at(&[&header], 0).map_err(io("pwrite", &tmp))?;
                f.sync_data().map_err(io("fdatasync", &tmp))?;
                crate::kill_point::hit("log: new segment zero-filled, before rename");
                self.fs.rename(&tmp, &path).map_err(io("rename", &tmp))?;
                f
            }
        };
        // Writers copy small records into the segment through its mapping, and a store
        // into a page that is not cached waits for the device to read it: a recycled
        // segment's pages may have left the cache while it sat in the pool (reclaim of
        // cold pages), and on a device busy with a flush's sync such a read held a commit
        // — and every writer behind it — for 200 ms (`queue_indexed`, 2026-11-28: 77
        // major faults a minute, all on recycled segments). Read here instead, off the
        // commit path, while the directory is synced. Forgotten or allocated bytes get
        // their zeroed pages the same way, without a read; a zero-filled segment already
        // has its pages. (A page reclaimed again before writers reach it is read then.)
        // An allocated segment (standing in for a log blob: large values fill it with
        // `pwrite`s of whole pages) was tried without it, since its read-ahead only zeroes
        // pages those writes overwrite: the writers' copies into pages the write itself
        // allocates took 6× longer (37–39% of a 4 KiB-value load's CPU against 7%), and the
        // load ran 15% slower at 2 threads (BENCHMARKS.md, session 41).
        file.prefetch(
            SEGMENT_HEADER_BYTES,
            self.segment_bytes - SEGMENT_HEADER_BYTES,
        );
        self.fs
            .sync_dir(&self.dir)
            .map_err(io("fsync directory", &self.dir))?;
        debug_assert_eq!(SEGMENT_HEADER_BYTES as usize, header.len());
        self.files.write().insert(id, file.clone());
        Ok(file)
    }

    /// Sets the pool's bound; a pool above it shrinks as segments are taken back.
    pub(crate) fn set_pool_max(&self, n: usize) {
        self.pool_max.store(n, SeqCst);
    }

    /// Asks the background thread to prepare segment `id` if it does not exist.
    pub(crate) fn prepare_ahead(&self, id: u64) {
        if self.files.read().contains_key(&id) {
            return;
        }
        let mut wanted = self.wanted.lock();
        if wanted.id.is_none_or(|w| w < id) {
            wanted.id = Some(id);
            self.wanted_cv.notify_one();
        }
    }

    /// The background preparer's loop; returns at shutdown. Errors are left for the
    /// foreground `get`, which retries the creation and reports them.
    pub(crate) fn run_preparer(&self) {
        let mut wanted = self.wanted.lock();
        loop {
            if wanted.shutdown {
                return;
            }
            match wanted.id.take() {
                Some(id) => {
                    drop(wanted);
                    crate::kill_point::hit("log: preparer took a request, before creating");
                    let mut prep = self.prep.lock();
                    // A request made before a purge passed its segment is stale: the
                    // segment's records are gone, and the file would be an orphan below
                    // the log (found by `silt-stress power-loss`, 2026-11-27).
                    if !self.below_the_log(id) {
                        let _ = self.create_locked(&mut prep, id);
                    }
                    drop(prep);
                    wanted = self.wanted.lock();
                }
                None => self.wanted_cv.wait(&mut wanted),
            }
        }
    }

    /// Whether a segment could not be created (for example its `fdatasync` failed).
    pub(crate) fn is_poisoned(&self) -> bool {
        self.poisoned.load(SeqCst)
    }

    /// Why segment preparation failed, if it did.
    pub(crate) fn poison_cause(&self) -> Option<String> {
        self.cause.lock().clone()
    }

    /// No more files are created (the log is poisoned). Waits for a creation in progress,
    /// so no `fdatasync` of segment preparation happens after this returns.
    pub(crate) fn poison(&self) {
        let _prep = self.prep.lock();
        self.poisoned.store(true, SeqCst);
    }

    pub(crate) fn shutdown(&self) {
        self.wanted.lock().shutdown = true;
        self.wanted_cv.notify_all();
    }

    /// Removes (or keeps for recycling) every segment whose whole LSN range lies below
    /// `lsn`, never `keep_from` or later. `empty_pool`: keep none for recycling, and delete
    /// the ones kept before.
    /// At a quiet purge: removes the segments prepared ahead of `current` (the segment
    /// the reservation watermark is in), which hold no record, if `still_current()` says
    /// no writer has reserved past `current` meanwhile (checked under the preparation
    /// lock, which creation takes too). A writer that crosses into the next segment later
    /// creates it then (`get`). Returns how many it removed.
    pub(crate) fn drop_ahead(
        &self,
        current: u64,
        still_current: impl Fn() -> bool,
    ) -> Result<usize> {
        let _prep = self.prep.lock();
        let ahead: Vec<u64> = {
            // Checked and removed under the table's write lock. A writer reserves its LSN
            // before it looks its segment up here (`get`), so one that reserved past
            // `current` before the check makes the check fail, and one that reserves after
            // it finds no entry and creates a fresh file once we let go of `prep`. Checked
            // before taking this lock (as it once was), a writer could reserve and take the
            // doomed file's handle in between, and write a record into a removed file that
            // no sync would cover again (`Inner::sync_range` skips a segment not in the
            // table): a record acknowledged as synced, lost. (What `silt-stress
            // power-loss` once found, 2026-11-26: the first record of a segment invalid
            // under a later record's durable watermark.)
            let mut files = self.files.write();
            if !still_current() {
                return Ok(0);
            }
            // Between the check and the removal, under the lock (`tests/drop_ahead.rs`
            // holds the purge here): keep it next to the check.
            crate::kill_point::hit("log: quiet purge checked, before dropping the segments ahead");
            let ids: Vec<u64> = files.keys().copied().filter(|&id| id > current).collect();
            for id in &ids {
                files.remove(id);
            }
            ids
        };
        self.forget_maps(&ahead);
        for &id in &ahead {
            let path = self.path(id);
            self.fs
                .remove(&path)
                .map_err(|e| Error::io("remove", Some(path.clone()), e))?;
        }
        if !ahead.is_empty() {
            self.fs
                .sync_dir(&self.dir)
                .map_err(|e| Error::io("fsync directory", Some(self.dir.clone()), e))?;
        }
        Ok(ahead.len())
    }

    /// How far purges have reached (see `purged_to`).
    pub(crate) fn purged_to(&self) -> u64 {
        self.purged_to.load(SeqCst)
    }

    pub(crate) fn purge_below(&self, lsn: u64, keep_from: u64, empty_pool: bool) -> Result<usize> {
        let mut prep = self.prep.lock();
        self.purged_to.fetch_max(lsn, SeqCst);
        let victims: Vec<u64> = {
            let files = self.files.read();
            let mut v: Vec<u64> = files
                .keys()
                .copied()
                .filter(|&id| (id + 1) * self.segment_bytes <= lsn && id < keep_from)
                .collect();
            // The log keeps a segment: with none on disk, a power loss before the next is
            // created would leave a log that tells recovery nothing of where it ended (it
            // would start again at segment 0). That happens when the filled watermark
            // sits exactly on a segment boundary and the next segment is not made yet.
            if v.len() == files.len() {
                v.pop();
            }
            v
        };
        for &id in &victims {
            let path = self.path(id);
            self.files.write().remove(&id);
            // After the table lost it (`read_map` caches only what the table holds).
            self.forget_maps(&[id]);
            // A segment with another name (a database's log blob, `wal.md`) is never
            // reused: its bytes belong to that name now.
            let linked = self
                .fs
                .link_count(&path)
                .map_err(|e| Error::io("stat", Some(path.clone()), e))?
                > 1;
            prep.links_seen = linked;
            let recycle = self.prealloc != Preallocate::ZeroFill
                && !empty_pool
                && prep.pool.len() < self.pool_max.load(SeqCst)
                && !linked;
            if recycle {
                prep.pool_serial += 1;
                let to = self.dir.join(format!("{:020}.recycle", prep.pool_serial));
                self.fs
                    .rename(&path, &to)
                    .map_err(|e| Error::io("rename", Some(path.clone()), e))?;
                crate::kill_point::hit("log: purged segment moved to the pool");
                prep.pool.push(to);
            } else {
                self.fs
                    .remove(&path)
                    .map_err(|e| Error::io("remove", Some(path.clone()), e))?;
            }
        }
        let mut dropped = 0;
        if empty_pool {
            while let Some(p) = prep.pool.pop() {
                self.fs
                    .remove(&p)
                    .map_err(|e| Error::io("remove", Some(p.clone()), e))?;
                dropped += 1;
            }
        }
        if !victims.is_empty() || dropped > 0 {
            self.fs
                .sync_dir(&self.dir)
                .map_err(|e| Error::io("fsync directory", Some(self.dir.clone()), e))?;
        }
        Ok(victims.len())
    }

    /// Removes segments after `id` (recovery found the log's end before them).
    pub(crate) fn remove_after(&self, id: u64) -> Result<()> {
        let _prep = self.prep.lock();
        let later: Vec<u64> = self.files.read().range(id + 1..).map(|(k, _)| *k).collect();
        for k in &later {
            let path = self.path(*k);
            self.files.write().remove(k);
            self.forget_maps(&[*k]);
            self.fs
                .remove(&path)
                .map_err(|e| Error::io("remove", Some(path.clone()), e))?;
        }
        if !later.is_empty() {
            self.fs
                .sync_dir(&self.dir)
                .map_err(|e| Error::io("fsync directory", Some(self.dir.clone()), e))?;
        }
        Ok(())
    }
}
