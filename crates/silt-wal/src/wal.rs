//! [`Wal`]: the handle on one log — open (recovery, then the commit path's state and its
//! threads), the public API, and close. The commit path itself, with the log's invariants,
//! is `commit/`.

use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::commit::Inner;
use crate::error::{Error, Result};
#[cfg(feature = "strategies")]
use crate::options::Strategy;
use crate::options::{AppendOptions, Options, SyncMode};
use crate::recovery::{self, Recovered, RecoveryInfo};
use crate::Lsn;

/// Counters of a log since it was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WalStats {
    /// Records appended.
    pub appends: u64,
    /// Payload bytes appended.
    pub bytes: u64,
    /// `fdatasync` calls on segment files for commits (preallocation not counted).
    pub fsyncs: u64,
    /// The durable watermark.
    pub durable_lsn: Lsn,
    /// Everything below this LSN is in the OS.
    pub filled_lsn: Lsn,
}

/// A write-ahead log. Share it between threads by reference or in an `Arc`.
///
/// # Examples
///
/// ```
/// use silt_wal::{Options, SyncMode, Wal};
/// # let dir = tempfile::tempdir().unwrap();
/// let wal = Wal::open(dir.path(), Options::default().sync(SyncMode::Full)).unwrap();
/// let lsn = wal.append(b"one batch").unwrap();
/// let records: Vec<_> = wal.read_from(0).unwrap().collect::<Result<_, _>>().unwrap();
/// assert_eq!(records[0].lsn, lsn);
/// assert_eq!(records[0].payload, b"one batch");
/// ```
pub struct Wal {
    pub(crate) inner: Arc<Inner>,
    threads: Vec<JoinHandle<()>>,
    recovery: RecoveryInfo,
    /// LSNs below which [`Wal::purge_up_to`] must not purge (see [`Wal::hold_purge`]).
    pub(crate) holds: Arc<parking_lot::Mutex<std::collections::BTreeMap<Lsn, usize>>>,
}

impl std::fmt::Debug for Wal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wal")
            .field("dir", &self.inner.segments.dir)
            .field("sync", &self.inner.sync)
            .field("strategy", &self.inner.strategy)
            .field("stats", &self.stats())
            .finish()
    }
}

impl Wal {
    /// Opens the log in `dir`, creating it if needed, and recovers it: a torn tail is cut off
    /// and appends continue after the last valid record.
    ///
    /// # Errors
    ///
    /// `Corruption` if a record below the durable point is damaged (acknowledged data was
    /// lost), `InvalidArgument` for bad options, `Io` when the OS fails.
    pub fn open(dir: impl AsRef<Path>, opts: Options) -> Result<Wal> {
        validate(&opts)?;
        let Recovered {
            segments,
            tail,
            info,
        } = recovery::recover(dir.as_ref(), &opts)?;
        let inner = Arc::new(Inner::new(&opts, segments, tail));
        let mut threads = Vec::new();
        let segs = inner.segments.clone();
        threads.push(spawn("silt-wal-prep", move || segs.run_preparer())?);
        inner.prepare_next_if_due(tail);
        if let SyncMode::Interval(every) = opts.sync {
            let i = inner.clone();
            threads.push(spawn("silt-wal-interval", move || i.run_interval(every))?);
        }
        crate::async_api::start_sync_service(&inner, &mut threads)?;
        Ok(Wal {
            inner,
            threads,
            recovery: info,
            holds: Default::default(),
        })
    }

    /// Opens the log in `dir` for reading only, changing nothing on disk: no recovery
    /// writes (a torn tail is not cut, nothing is kept in `lost/`, nothing is synced or
    /// removed), no segment created, no background thread. The records it can read end at
    /// the first invalid one; [`Wal::recovery`] says where and why, in `cut` (with
    /// [`crate::DamageKind::DurableLost`] for damage [`Wal::open`] would refuse as
    /// `Corruption`). Appends return `Closed`. A missing `dir` reads as an empty log.
    ///
    /// Safe beside a live writer in another process: records are read whole and checked,
    /// and a record being filled is read again before it is reported as damage
    /// (`scan.rs`). What it returns is a prefix of the log as it was during the call.
    ///
    /// # Errors
    ///
    /// `Corruption` if a segment header is damaged or a segment in the middle is missing;
    /// `Io` when the OS fails (a segment removed by a writer's purge while it was being
    /// opened is `Io` of kind `NotFound`).
    pub fn open_read_only(dir: impl AsRef<Path>, opts: Options) -> Result<Wal> {
        validate(&opts)?;
        let Recovered {
            segments,
            tail,
            info,
        } = crate::scan::scan(dir.as_ref(), &opts)?;
        let inner = Arc::new(Inner::new(&opts, segments, tail));
        inner.begin_shutdown();
        Ok(Wal {
            inner,
            threads: Vec::new(),
            recovery: info,
            holds: Default::default(),
        })
    }

    /// What opening the log found.
    pub fn recovery(&self) -> &RecoveryInfo {
        &self.recovery
    }

    /// Appends one record and returns its LSN, acknowledged per the log's [`SyncMode`].
    ///
    /// # Errors
    ///
    /// `InvalidArgument` if the payload is over [`Wal::max_payload_bytes`]; `Poisoned` after
    /// an earlier failed sync; `Io` if this commit's write or sync failed (the log is then
    /// poisoned); `Closed` after [`Wal::close`].
    pub fn append(&self, payload: &[u8]) -> Result<Lsn> {
        self.append_with(payload, AppendOptions::default())
    }

    /// Appends one record with per-commit options (see [`AppendOptions`]).
    ///
    /// # Errors
    ///
    /// As [`Wal::append`].
    pub fn append_with(&self, payload: &[u8], opts: AppendOptions) -> Result<Lsn> {
        self.inner.append(payload, opts)
    }

    /// Reserves the place of a record of `len` payload bytes and returns it unwritten, so
    /// the caller learns the record's LSN before deciding what to do: write it
    /// ([`Reservation::write`], then [`crate::Appended::wait`] for the acknowledgement) or
    /// abandon it ([`Reservation::abandon`]: a Void record of the same size, which readers
    /// skip). Until the reservation is finished no later record is acknowledged, so decide
    /// quickly (see `reservation.rs`). Only the `Pipelined` strategy (the default) has
    /// reservations.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` if `len` is over [`Wal::max_payload_bytes`] or the strategy is not
    /// `Pipelined`; `Poisoned`; `Closed`.
    pub fn reserve(&self, len: usize, opts: AppendOptions) -> Result<crate::Reservation<'_>> {
        self.inner.reserve_record(len, opts)
    }

    /// Blocks until the record at `lsn` (and everything before it) is durable, syncing if no
    /// one else is.
    ///
    /// # Errors
    ///
    /// `Poisoned` if a sync failed; `Io` if the sync this call ran failed.
    pub fn wait_durable(&self, lsn: Lsn) -> Result<()> {
        self.inner.sync_to(lsn + 1)
    }

    /// Makes every record appended before this call durable.
    ///
    /// # Errors
    ///
    /// As [`Wal::wait_durable`].
    pub fn sync(&self) -> Result<()> {
        self.inner.check_open()?;
        let r = self.inner.reserved_lsn();
        self.inner.sync_to(r)
    }

    /// The durable watermark: every record whose LSN is below it survives a machine crash.
    pub fn durable_lsn(&self) -> Lsn {
        self.inner.stream.durable()
    }

    /// The reservation watermark: every record already appended, or being appended by a
    /// call that has started reserving space, has an LSN below it; every later append gets
    /// an LSN at or above it.
    pub fn reserved_lsn(&self) -> Lsn {
        self.inner.reserved_lsn()
    }

    /// Why the log is poisoned when a segment could not be prepared — by the background
    /// thread, whose error has nobody else to go to, or by an append that prepared it
    /// itself. `None` otherwise: a failed write or sync returned its error to the append
    /// that ran it.
    pub fn poison_cause(&self) -> Option<String> {
        self.inner.segments.poison_cause()
    }

    /// The largest payload this log accepts.
    pub fn max_payload_bytes(&self) -> usize {
        self.inner.max_payload
    }

    /// The segment size of this log.
    pub fn segment_bytes(&self) -> u64 {
        self.inner.seg_bytes
    }

    /// Sets how many purged segments are kept for reuse, at most, from the next purge on
    /// ([`crate::Options::recycle_segments`]; here once the segment size is known, as an
    /// existing log keeps its own).
    pub fn set_recycle_segments(&self, n: usize) {
        self.inner.segments.set_pool_max(n);
    }

    /// Counters since the log was opened.
    pub fn stats(&self) -> WalStats {
        self.inner.stats()
    }

    /// Where the payload of the record at `lsn` lies in memory, readable in place: a
    /// read-only mapping of its segment (shared by every caller) and the payload's offset in
    /// it. `None` if the file system maps nothing, mapping failed, or `lsn` is not in an
    /// open segment: read the record another way.
    ///
    /// Only for a record this log wrote (its payload is in the file once `Reservation::write`
    /// returned) and read only within its payload: the mapping covers the whole segment,
    /// and bytes past what was written may not be backed. The mapping stays valid while
    /// held, but the segment's *bytes* change if it is purged and recycled: a caller that
    /// reads after the record could have been purged holds [`Wal::hold_purge`] at or below
    /// `lsn` for as long as it reads.
    pub fn payload_in_place(&self, lsn: Lsn) -> Option<(Arc<silt_vfs::ReadMap>, usize)> {
        let s = self.inner.seg_bytes;
        let map = self.inner.segments.read_map(lsn / s)?;
        let at = usize::try_from(lsn % s + crate::format::RECORD_HEADER_BYTES as u64).ok()?;
        (at <= map.len()).then_some((map, at))
    }

    /// The path of segment `id`'s file (which may not exist). A caller may give the file a
    /// second name (a hard link) below the filled watermark: the log then never recycles it
    /// (`docs/format/wal.md`, "Other names").
    pub fn segment_path(&self, id: u64) -> std::path::PathBuf {
        self.inner.segments.path(id)
    }

    /// Reads the records with an LSN at or after `from` that were appended before this call,
    /// oldest first. Records in purged segments are not returned.
    ///
    /// # Errors
    ///
    /// The iterator yields `Corruption` (and then stops) if a record is damaged.
    pub fn read_from(&self, from: Lsn) -> Result<crate::Reader> {
        let end = self.inner.ring.filled();
        Ok(crate::Reader::new(self.inner.segments.clone(), from, end))
    }

    /// Whether a [`Wal::hold_purge`] below `lsn` lives: [`Wal::purge_up_to`]`(lsn)` would
    /// stop short of `lsn` (a caller may try again once it is gone).
    pub fn purge_held_below(&self, lsn: Lsn) -> bool {
        self.holds
            .lock()
            .keys()
            .next()
            .is_some_and(|&held| held < lsn)
    }

    /// Deletes (or keeps for recycling) every segment that holds only records below `lsn`:
    /// call it once a checkpoint no longer needs them. The segment being written is kept.
    ///
    /// When `lsn` reaches the end of the log (nothing appended is still needed: a database
    /// whose memtables are all flushed), the segments kept for recycling are deleted too: a
    /// quiet log holds no more disk than its current segment, instead of up to
    /// [`crate::Options::recycle_segments`] more segments of garbage. The next burst of appends zero-fills
    /// its first new segments.
    ///
    /// # Errors
    ///
    /// `Io` if a file could not be removed.
    pub fn purge_up_to(&self, lsn: Lsn) -> Result<usize> {
        // A checkpoint or backup copying segments holds them (`Wal::hold_purge`).
        let lsn = match self.holds.lock().keys().next() {
            Some(&held) => lsn.min(held),
            None => lsn,
        };
        // Segments below the filled watermark have no writer in flight.
        let keep_from = self.inner.ring.filled() / self.inner.seg_bytes;
        let quiet = lsn >= self.inner.reserved_lsn();
        let n = self.inner.segments.purge_below(lsn, keep_from, quiet)?;
        if quiet {
            // Everything is purged up to the end: drop the segments prepared ahead too, so
            // a quiet log holds one segment, not two (space amplification of a small
            // database). The next writer past the first quarter of the segment prepares one again.
            let s = self.inner.seg_bytes;
            let current = self.inner.reserved_lsn() / s;
            let dropped = self
                .inner
                .segments
                .drop_ahead(current, || self.inner.reserved_lsn() / s == current)?;
            if dropped > 0 {
                self.inner.forget_prepared(current);
            }
        }
        Ok(n)
    }

    /// Stops background threads. Under `Interval` it syncs first, so what was appended is
    /// durable; under `None` it does not (the data is in the OS).
    ///
    /// # Errors
    ///
    /// `Io`/`Poisoned` from the final sync.
    pub fn close(mut self) -> Result<()> {
        let r = if matches!(self.inner.sync, SyncMode::Interval(_)) {
            self.sync()
        } else {
            Ok(())
        };
        self.shutdown();
        r
    }

    fn shutdown(&mut self) {
        self.inner.begin_shutdown();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Wal {
    fn drop(&mut self) {
        self.shutdown();
    }
}

pub(crate) fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .map_err(|e| Error::io("spawn thread", None, e))
}

pub(crate) fn validate(opts: &Options) -> Result<()> {
    use crate::format::MIN_SEGMENT_BYTES;
    if opts.segment_bytes < MIN_SEGMENT_BYTES || opts.segment_bytes % 4096 != 0 {
        return Err(Error::InvalidArgument(format!(
            "segment_bytes must be a multiple of 4096 and at least {MIN_SEGMENT_BYTES}, got {}",
            opts.segment_bytes
        )));
    }
    if let SyncMode::Interval(d) = opts.sync {
        if d.is_zero() {
            return Err(Error::InvalidArgument(
                "the sync interval must be positive".into(),
            ));
        }
    }
    #[cfg(feature = "strategies")]
    if let Strategy::TimedGroups { max_entries, .. } = opts.strategy {
        if max_entries == 0 {
            return Err(Error::InvalidArgument(
                "TimedGroups max_entries must be at least 1".into(),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SyncMode;

    /// A segment that leaves the table with records in it, other than by a purge, makes
    /// the next sync fail and the log refuse writes: its records would otherwise be
    /// acknowledged as synced with no sync covering them.
    #[test]
    fn a_sync_over_a_segment_gone_without_a_purge_fails_and_poisons() {
        let dir = tempfile::tempdir().unwrap();
        let seg = crate::format::MIN_SEGMENT_BYTES;
        let wal = Wal::open(
            dir.path(),
            Options::default().sync(SyncMode::None).segment_bytes(seg),
        )
        .unwrap();
        while wal.reserved_lsn() < seg + seg / 2 {
            wal.append(&[7u8; 1000]).unwrap();
        }
        // Segment 1 holds records; take it out of the table as no purge would.
        let current = 0;
        assert!(wal.inner.segments.drop_ahead(current, || true).unwrap() >= 1);
        let e = wal.sync().unwrap_err();
        assert!(e.to_string().contains("purge point"), "{e}");
        assert!(
            wal.append(b"more").is_err(),
            "the log took a write after the hole"
        );
    }
}
