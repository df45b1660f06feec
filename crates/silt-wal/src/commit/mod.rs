//! The commit path: how an append becomes a record in the OS (reservation, copy, the
//! filled watermark) and then durable (the sync stream), and how committers wait.
//!
//! Files: this one (the log's shared state, [`Inner`], and the path itself), `fill_ring.rs`
//! (the contiguous filled watermark), `sync_stream.rs` (the durable watermark and the one
//! running sync), `wait.rs` (spin, yield, park), and the seeds' designs for the benchmark,
//! behind the feature `strategies`: `direct.rs` (TidesDB's `pwrite` per commit) and
//! `timed.rs` (MuopDB's timed write groups). The handle, [`crate::Wal`], is `wal.rs`.
//!
//! ## Invariants
//!
//! 1. LSN = byte position in the log; reservation order = LSN order.
//! 2. `durable <= filled <= reserved`, all three monotonic. `filled` is contiguous
//!    ([`FillRing`]); `durable` only ever takes a value `filled` had before a sync started.
//! 3. An append is acknowledged only below `filled` (mode `None`/`Interval`) or below
//!    `durable` (`Full`), so an acknowledged commit never has an unwritten predecessor.
//! 4. One sync stream: at most one thread runs the shared `fdatasync` (the `syncing` flag);
//!    a committer needing durability either finds `durable` past its record, or becomes the
//!    syncer and syncs everything filled, or waits for the running sync and retries. There is
//!    no timer anywhere on this path.
//! 5. After any failed write or sync the log is poisoned: no more writes or syncs, ever.
//!    Reopening recovers the durable prefix.
//! 6. Every record carries the `durable` value seen when it was encoded; recovery uses it to
//!    tell a torn tail (truncate) from lost durable data (`Corruption`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result};
use crate::format::{
    max_payload_bytes, record_bytes, RecordHeader, RecordType, RECORD_HEADER_BYTES,
    SEGMENT_HEADER_BYTES,
};
use crate::options::{AppendOptions, Options, Strategy, SyncMode};
use crate::segment::Segments;
use crate::wal::WalStats;
use crate::Lsn;

mod fill_ring;
mod sync_stream;
// The seeds' designs, for the benchmark (feature `strategies`).
#[cfg(feature = "strategies")]
mod direct;
#[cfg(feature = "strategies")]
mod timed;
mod wait;

pub(crate) use fill_ring::FillRing;
use sync_stream::{SyncEnv, SyncStream};
use wait::{contended, timed_yield, Backoff, Event};

/// Bounds of the yield phase of a committer waiting for a sync.
const YIELD_MIN_NS: u64 = 30_000;
const YIELD_MAX_NS: u64 = 2_000_000;

/// Durable commits go through the shared mapping when the last sync covered at least
/// this many commits (see `Inner::via`).
const MAPPED_BATCH_MIN: u64 = 64;

/// Records of at least this many bytes are written with `pwrite`, never through the
/// mapping (see `Inner::via`).
const PWRITE_MIN_BYTES: usize = 64 << 10;

/// The mapped pages of the segment being written are released in steps of this many
/// bytes, a step behind the newest record (see `Inner::release_behind`).
const RELEASE_STEP: u64 = 1 << 20;

/// While gathering a sync batch, wait at most this fraction of one `fdatasync`...
const GATHER_FRACTION: u64 = 8;
/// ...and never longer than this.
const GATHER_MAX_NS: u64 = 250_000;
/// Then at most this many `sched_yield`s while new reservations keep arriving.
const GATHER_YIELDS_MAX: usize = 4;

/// The shared state of one log: what [`crate::Wal`] holds in an `Arc` and its threads
/// share. Its fields are the commit path's; the handle goes through the methods below.
pub(crate) struct Inner {
    pub(crate) sync: SyncMode,
    pub(crate) strategy: Strategy,
    pub(crate) segments: Arc<Segments>,
    pub(crate) seg_bytes: u64,
    pub(crate) max_payload: usize,
    reserved: AtomicU64,
    /// The highest segment id the background preparer was asked for.
    prepared_up_to: AtomicU64,
    /// The log position below which the current segment's mapped pages were released
    /// (`Inner::release_behind`).
    released_to: AtomicU64,
    pub(crate) ring: FillRing,
    pub(crate) stream: SyncStream,
    poisoned: AtomicBool,
    closed: AtomicBool,
    pub(crate) filled_ev: Event,
    pub(crate) backoff: Backoff,
    appends: AtomicU64,
    /// `appends` when the last shared sync started, and how many commits it covered.
    appends_at_sync: AtomicU64,
    last_batch: AtomicU64,
    /// Committers inside `sync_to` now, and the most seen at once since the last sync
    /// started (see `Inner::gather`).
    durable_waiting: AtomicU64,
    durable_peak: AtomicU64,
    bytes: AtomicU64,
    fsyncs: AtomicU64,
    /// Moving average of one commit `fdatasync`, in nanoseconds (sizes the yield phase).
    fsync_ewma_ns: AtomicU64,
    /// Background threads sleep here; `true` asks them to stop.
    stop: Mutex<bool>,
    stop_cv: Condvar,
    #[cfg(feature = "strategies")]
    pub(crate) timed: timed::Groups,
    pub(crate) waiters: crate::async_api::Waiters,
}

impl Inner {
    /// A log whose next record starts at `tail` (recovery found everything below it).
    pub(crate) fn new(opts: &Options, segments: Segments, tail: u64) -> Inner {
        let seg_bytes = segments.segment_bytes;
        Inner {
            sync: opts.sync,
            strategy: opts.strategy,
            max_payload: max_payload_bytes(seg_bytes),
            seg_bytes,
            segments: Arc::new(segments),
            reserved: AtomicU64::new(tail),
            prepared_up_to: AtomicU64::new(tail / seg_bytes),
            released_to: AtomicU64::new(tail - tail % seg_bytes),
            ring: FillRing::new(tail),
            stream: SyncStream::new(tail),
            poisoned: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            filled_ev: Event::new(),
            backoff: Backoff::default(),
            appends: AtomicU64::new(0),
            appends_at_sync: AtomicU64::new(0),
            last_batch: AtomicU64::new(0),
            durable_waiting: AtomicU64::new(0),
            durable_peak: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            fsyncs: AtomicU64::new(0),
            fsync_ewma_ns: AtomicU64::new(50_000),
            stop: Mutex::new(false),
            stop_cv: Condvar::new(),
            #[cfg(feature = "strategies")]
            timed: timed::Groups::default(),
            waiters: Default::default(),
        }
    }

    /// The reservation watermark (see [`crate::Wal::reserved_lsn`]).
    pub(crate) fn reserved_lsn(&self) -> u64 {
        self.reserved.load(SeqCst)
    }

    /// Counters since the log was opened.
    pub(crate) fn stats(&self) -> WalStats {
        WalStats {
            appends: self.appends.load(SeqCst),
            bytes: self.bytes.load(SeqCst),
            fsyncs: self.fsyncs.load(SeqCst),
            durable_lsn: self.stream.durable(),
            filled_lsn: self.ring.filled(),
        }
    }

    /// Refuses further appends and asks every background thread to stop.
    pub(crate) fn begin_shutdown(&self) {
        self.closed.store(true, SeqCst);
        *self.stop.lock() = true;
        self.stop_cv.notify_all();
        self.segments.shutdown();
        self.waiters.shutdown();
    }
}

/// How a record's bytes reach the file.
#[derive(Clone, Copy)]
pub(crate) enum WriteVia {
    /// `memcpy` into the shared mapping (no system call).
    Mapped,
    /// One `pwritev`.
    Pwrite,
}

impl WriteVia {
    pub(crate) fn write(
        self,
        file: &dyn silt_vfs::File,
        bufs: &[&[u8]],
        offset: u64,
    ) -> std::io::Result<()> {
        match self {
            WriteVia::Mapped => file.write_mapped(bufs, offset),
            WriteVia::Pwrite => file.write_at(bufs, offset),
        }
    }
}

impl Inner {
    pub(crate) fn check_open(&self) -> Result<()> {
        if self.is_poisoned() {
            return Err(Error::Poisoned);
        }
        if self.closed.load(SeqCst) {
            return Err(Error::Closed);
        }
        Ok(())
    }

    pub(crate) fn check_payload(&self, payload: &[u8]) -> Result<()> {
        if payload.len() > self.max_payload {
            return Err(Error::InvalidArgument(format!(
                "payload of {} bytes is over this log's limit of {} bytes",
                payload.len(),
                self.max_payload
            )));
        }
        Ok(())
    }

    pub(crate) fn needs_sync(&self, opts: AppendOptions) -> bool {
        opts.sync.unwrap_or(self.sync == SyncMode::Full)
    }

    pub(crate) fn append(&self, payload: &[u8], opts: AppendOptions) -> Result<Lsn> {
        self.check_payload(payload)?;
        self.check_open()?;
        let want_sync = self.needs_sync(opts);
        match self.strategy {
            Strategy::Pipelined => {
                let (lsn, end) = self.write_record(payload, self.via(want_sync, payload.len()))?;
                self.acknowledge(end, want_sync)?;
                Ok(lsn)
            }
            #[cfg(feature = "strategies")]
            Strategy::DirectPwrite => self.append_direct(payload, want_sync),
            #[cfg(feature = "strategies")]
            Strategy::TimedGroups {
                max_entries,
                max_wait,
            } => timed::append(self, payload, want_sync, max_entries, max_wait),
        }
    }

    /// How `Pipelined` writes a record. The shared mapping saves the system call when no
    /// sync follows, but `fdatasync` of pages dirtied through a mapping costs ~2.5x more
    /// here (the kernel must write-protect them and take a fault on the next store; see
    /// `docs/design.md`), so records that are about to be synced go through `pwrite`.
    ///
    /// The mapping's extra cost is per sync (~150 µs here), the system call's per commit
    /// (~3 µs), so when syncs cover many commits (the last batch was at least
    /// `MAPPED_BATCH_MIN`, well past the ~50-commit break-even) the mapping is used again.
    ///
    /// A record of at least [`PWRITE_MIN_BYTES`] always goes through `pwrite`: the call is
    /// amortised over its bytes, and pages never touched through the mapping are not in
    /// this process's page tables, so a later `fdatasync` (the engine's flush syncs the log
    /// even under `SyncMode::None`) has no mapped page to write-protect — that took one
    /// TLB-shootdown IPI per page, 10–17% of all CPU of a batch-1000 load here.
    pub(crate) fn via(&self, want_sync: bool, len: usize) -> WriteVia {
        if len >= PWRITE_MIN_BYTES {
            return WriteVia::Pwrite;
        }
        let syncing_soon = want_sync || self.sync == SyncMode::Full;
        if !syncing_soon || self.last_batch.load(SeqCst) >= MAPPED_BATCH_MIN {
            WriteVia::Mapped
        } else {
            WriteVia::Pwrite
        }
    }

    /// Waits until the record ending at `end` may be acknowledged.
    pub(crate) fn acknowledge(&self, end: u64, want_sync: bool) -> Result<()> {
        if want_sync {
            self.sync_to(end)
        } else {
            self.wait_filled(end)
        }
    }

    /// Reserves `total` bytes. Returns `(cursor, start)`: the record goes at `start`; if
    /// `start != cursor` the record did not fit in the segment of `cursor`, and
    /// `cursor..segment end` is padding that this committer writes.
    pub(crate) fn reserve(&self, total: u64) -> (u64, u64) {
        let s = self.seg_bytes;
        let mut cur = self.reserved.load(SeqCst);
        loop {
            let off = cur % s;
            let start = if off == 0 {
                cur + SEGMENT_HEADER_BYTES
            } else if off + total <= s {
                cur
            } else {
                (cur / s + 1) * s + SEGMENT_HEADER_BYTES
            };
            match self
                .reserved
                .compare_exchange_weak(cur, start + total, SeqCst, SeqCst)
            {
                Ok(_) => return (cur, start),
                Err(now) => cur = now,
            }
        }
    }

    /// Reserves space for one record, writes it, waits for the window, and publishes it to
    /// the filled watermark. Returns `(lsn, end)`. Does not wait for predecessors.
    pub(crate) fn write_record(&self, payload: &[u8], via: WriteVia) -> Result<(Lsn, u64)> {
        let (cur, start) = self.reserve(record_bytes(payload.len()));
        self.finish_record(cur, start, Some(payload), payload.len(), via)
    }

    /// Writes the record reserved at `(cur, start)` — `payload`, or a Void record of a
    /// `len`-byte payload's span when `None` (an abandoned reservation) — and publishes it
    /// once it is within the fill ring's window. Returns `(lsn, end)`.
    pub(crate) fn finish_record(
        &self,
        cur: u64,
        start: u64,
        payload: Option<&[u8]>,
        len: usize,
        via: WriteVia,
    ) -> Result<(Lsn, u64)> {
        let end = start + record_bytes(len);
        let written = match payload {
            Some(p) => self.write_at_position(cur, start, p, via),
            None => self.write_void_at_position(cur, start, len, via),
        };
        if let Err(e) = written {
            self.poison();
            return Err(e);
        }
        if payload.is_some() {
            self.count_append(len);
        }
        // The window bounds publishing, not copying: a record reserved behind a large one
        // (a batch of megabytes) is copied while its predecessor is, and waits only to
        // publish (fill ring invariant 1).
        if !self.ring.in_window(cur) {
            self.filled_ev.wait(self.backoff, || {
                self.ring.in_window(cur) || self.is_poisoned()
            });
            self.check_open()?;
        }
        if self.ring.publish(cur, end) {
            self.on_filled();
        }
        // After publishing, so no later committer waits on the `madvise`.
        self.release_behind(start, end);
        Ok((start, end))
    }

    /// As [`Inner::write_at_position`], for a Void record standing in for a `len`-byte
    /// payload (`docs/format/wal.md`, "Void"): only its header is written.
    fn write_void_at_position(
        &self,
        cur: u64,
        start: u64,
        len: usize,
        via: WriteVia,
    ) -> Result<()> {
        let s = self.seg_bytes;
        let durable = self.stream.durable();
        if cur != start && cur % s != 0 {
            self.write_padding(cur, durable, via)?;
        }
        let seg = start / s;
        let file = self.segments.get(seg)?;
        self.prepare_next_if_due(start);
        let header = RecordHeader {
            len: len as u32,
            kind: RecordType::Void,
            segment_id: seg,
            lsn: start,
            durable,
        }
        .encode(&[]);
        via.write(&*file, &[&header], start % s)
            .map_err(|e| Error::io("write", Some(self.segments.path(seg)), e))
    }

    /// Writes padding at `cur` (if the record moved to the next segment) and the record at
    /// `start`.
    pub(crate) fn write_at_position(
        &self,
        cur: u64,
        start: u64,
        payload: &[u8],
        via: WriteVia,
    ) -> Result<()> {
        let s = self.seg_bytes;
        let durable = self.stream.durable();
        if cur != start && cur % s != 0 {
            self.write_padding(cur, durable, via)?;
        }
        let seg = start / s;
        let file = self.segments.get(seg)?;
        self.prepare_next_if_due(start);
        let header = RecordHeader::data(payload, start, s, durable);
        via.write(&*file, &[&header, payload], start % s)
            .map_err(|e| Error::io("write", Some(self.segments.path(seg)), e))
    }

    /// Once a record lands past the first quarter of segment `k`, asks the background
    /// thread to prepare segment `k + 1`: three quarters of a segment of lead time (half a
    /// segment was too little for a load of 4 KiB values, whose writers waited for the
    /// next segment while a flush's sync held the device), and no preallocation work
    /// competing with commits right after open (zero-filling 64 MiB on open measurably
    /// slowed a lone durable writer during its first second).
    ///
    /// It also drops the mapping of segment `k - 1`, which writers left a while ago:
    /// a mapped segment's written pages count in the process's resident memory until the
    /// segment is purged, which is up to three memtables of log (192 MiB at the defaults).
    /// A straggler still copying into it is waited for, and a later write would map it
    /// again (`File::release_mapping`), so this is a hint, never a hazard.
    /// The segments after `current` were removed (a quiet purge): the next writer past the
    /// first quarter of `current` asks for `current + 1` again.
    pub(crate) fn forget_prepared(&self, current: u64) {
        self.prepared_up_to.fetch_min(current, SeqCst);
    }

    /// After the record `start..end` was written: if it crossed a `RELEASE_STEP` boundary
    /// of its segment, releases the segment's mapped pages that lie whole steps behind the
    /// step before the one it ends in. Records are written in log order, so those pages are written
    /// again only by a straggler (a reservation held across a transaction's checks, say);
    /// without this a segment written through the mapping (small records) held up to its
    /// whole size (64 MiB then), plus a quarter of the next, in resident memory; the first
    /// release in a segment also releases what the segments before kept mapped. Only
    /// the record crossing a boundary looks at `released_to`, and one writer at a time
    /// releases (whoever moves it); a missed step is released with the next.
    ///
    /// A hint, never a hazard, on Linux: on a shared file mapping `MADV_DONTNEED` drops
    /// page-table entries only, and a straggler's store maps the same page-cache page
    /// again (that page then stays resident until the whole mapping is dropped).
    fn release_behind(&self, start: u64, end: u64) {
        let s = self.seg_bytes;
        let seg_start = start - start % s;
        if (start - seg_start) / RELEASE_STEP == (end - 1 - seg_start) / RELEASE_STEP {
            return;
        }
        // The step the record ends in and the one before it stay mapped.
        let upto = seg_start + ((end - seg_start) / RELEASE_STEP).saturating_sub(1) * RELEASE_STEP;
        let prev = self.released_to.load(SeqCst);
        let from = prev.max(seg_start);
        if upto <= from
            || self
                .released_to
                .compare_exchange(prev, upto, SeqCst, SeqCst)
                .is_err()
        {
            return;
        }
        // The last steps of the segments before, left mapped when writers moved on:
        // released with this segment's first release (a record ending two steps in), not
        // a quarter in, when `prepare_next_if_due` drops the previous one's whole mapping.
        let mut behind = prev;
        while behind < seg_start {
            let id = behind / s;
            if let Some(old) = self.segments.existing(id) {
                old.release_mapped_range(behind % s, s - behind % s);
            }
            behind = (id + 1) * s;
        }
        if let Some(file) = self.segments.existing(start / s) {
            file.release_mapped_range(from - seg_start, upto - from);
        }
    }

    pub(crate) fn prepare_next_if_due(&self, start: u64) {
        let s = self.seg_bytes;
        let next = start / s + 1;
        if start % s >= s / 4 && self.prepared_up_to.load(SeqCst) < next {
            self.prepared_up_to.fetch_max(next, SeqCst);
            self.segments.prepare_ahead(next);
            if let Some(old) = next.checked_sub(2).and_then(|k| self.segments.existing(k)) {
                old.release_mapping();
            }
        }
    }

    pub(crate) fn write_padding(&self, cur: u64, durable: u64, via: WriteVia) -> Result<()> {
        let s = self.seg_bytes;
        let room = s - cur % s;
        if room < RECORD_HEADER_BYTES as u64 {
            return Ok(()); // too short for a header; readers skip it by arithmetic
        }
        let seg = cur / s;
        let header = RecordHeader {
            len: (room - RECORD_HEADER_BYTES as u64) as u32,
            kind: RecordType::Padding,
            segment_id: seg,
            lsn: cur,
            durable,
        }
        .encode(&[]);
        let file = self.segments.get(seg)?;
        via.write(&*file, &[&header], cur % s)
            .map_err(|e| Error::io("write", Some(self.segments.path(seg)), e))
    }

    pub(crate) fn count_append(&self, payload_bytes: usize) {
        self.appends.fetch_add(1, SeqCst);
        self.bytes.fetch_add(payload_bytes as u64, SeqCst);
    }

    pub(crate) fn on_filled(&self) {
        self.filled_ev.notify();
        self.waiters.wake_filled(self.ring.filled());
    }

    /// Poisoned by a failed write or sync here, or by the background preparer's failure.
    pub(crate) fn is_poisoned(&self) -> bool {
        self.poisoned.load(SeqCst) || self.segments.is_poisoned()
    }

    /// Waits until everything below `end` is in the OS.
    pub(crate) fn wait_filled(&self, end: u64) -> Result<()> {
        if self.ring.filled() < end {
            self.filled_ev.wait(self.backoff, || {
                self.ring.filled() >= end || self.is_poisoned()
            });
        }
        if self.ring.filled() >= end {
            Ok(())
        } else {
            Err(Error::Poisoned)
        }
    }

    /// The shared sync stream: returns once `durable >= need`.
    pub(crate) fn sync_to(&self, need: u64) -> Result<()> {
        if self.stream.durable() >= need {
            return Ok(());
        }
        if need > self.reserved.load(SeqCst) {
            return Err(Error::InvalidArgument(format!(
                "LSN {} has not been appended yet",
                need - 1
            )));
        }
        let waiting = self.durable_waiting.fetch_add(1, SeqCst) + 1;
        self.durable_peak.fetch_max(waiting, SeqCst);
        let r = self.stream.sync_to(need, self.durable_backoff(), self);
        self.durable_waiting.fetch_sub(1, SeqCst);
        r
    }

    /// How a committer waits for a sync: it yields (instead of parking) for about two
    /// `fdatasync`s. Waking a parked thread costs tens of µs on a VM, as much as a fast
    /// sync; a waiter that parks comes back too late to join the next batch, so batches
    /// alternate between 1 and n-1 (measured: 0.22 fsyncs per commit with 8 threads when
    /// parking after 30 µs, 0.13 when yielding through the sync).
    fn durable_backoff(&self) -> Backoff {
        let ewma = self.fsync_ewma_ns.load(SeqCst);
        let yield_ns = (2 * ewma).clamp(YIELD_MIN_NS, YIELD_MAX_NS);
        Backoff {
            spin: self.backoff.spin,
            yield_for: Duration::from_nanos(yield_ns),
        }
    }

    /// `fdatasync`s every segment holding bytes of `from..target`, oldest first. Poisons the
    /// log on failure.
    fn sync_range(&self, from: u64, target: u64) -> Result<()> {
        let s = self.seg_bytes;
        for seg in from / s..=(target - 1) / s {
            let Some(file) = self.segments.existing(seg) else {
                // Purged: skipping it is right only because a purge takes no segment but
                // one wholly below where it was asked to reach, whose records the caller
                // keeps elsewhere (the engine's tables). Any other missing segment is a
                // hole: records written into a file no sync covers, so the sync fails and
                // the log takes no more writes, as after a failed `fdatasync` (an error,
                // not a panic: a panic here would leave the sync stream held).
                if (seg + 1) * s <= self.segments.purged_to() {
                    continue;
                }
                self.poison();
                return Err(Error::io(
                    "fdatasync",
                    Some(self.segments.path(seg)),
                    std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        format!(
                            "log segment {seg} holds records to sync but is gone, above the \
                             purge point {}",
                            self.segments.purged_to()
                        ),
                    ),
                ));
            };
            self.fsyncs.fetch_add(1, SeqCst);
            let t = Instant::now();
            if let Err(e) = file.sync_data() {
                self.poison();
                return Err(Error::io("fdatasync", Some(self.segments.path(seg)), e));
            }
            let ns = t.elapsed().as_nanos().min(u64::MAX as u128) as u64;
            let old = self.fsync_ewma_ns.load(SeqCst);
            self.fsync_ewma_ns.store((old * 7 + ns) / 8, SeqCst);
        }
        Ok(())
    }

    /// Records a failed write or sync: nothing is accepted after this.
    pub(crate) fn poison(&self) {
        self.poisoned.store(true, SeqCst);
        self.segments.poison();
        self.filled_ev.notify();
        self.stream.ev.notify();
        #[cfg(feature = "strategies")]
        self.timed.poison();
        self.waiters.wake_all();
    }

    /// Syncs everything filled now, waiting for a running sync to end first.
    pub(crate) fn sync_all_filled(&self) -> Result<()> {
        self.stream.sync_all(self.backoff, self)
    }

    /// Background sync of `SyncMode::Interval`.
    pub(crate) fn run_interval(&self, every: Duration) {
        let mut stop = self.stop.lock();
        loop {
            if *stop || self.is_poisoned() {
                return;
            }
            self.stop_cv.wait_for(&mut stop, every);
            if *stop {
                return;
            }
            if self.ring.filled() > self.stream.durable() {
                drop(stop);
                let _ = self.sync_all_filled();
                stop = self.stop.lock();
            }
        }
    }
}

impl SyncEnv for Inner {
    type Error = Error;

    fn filled(&self) -> u64 {
        self.ring.filled()
    }

    fn wait_filled(&self, need: u64) {
        self.filled_ev.wait(self.backoff, || {
            self.ring.filled() >= need || self.is_poisoned()
        });
    }

    fn check(&self) -> Result<()> {
        if self.is_poisoned() {
            Err(Error::Poisoned)
        } else {
            Ok(())
        }
    }

    fn sync(&self, from: u64, to: u64) -> Result<()> {
        self.sync_range(from, to)
    }

    fn gather(&self) {
        // Concurrency feedback instead of a timer. `durable_peak` is the most committers
        // seen waiting for durability at once since the last sync started. If that is more
        // than are waiting now, the others are on their way back with their next commit (on
        // 2 cores they need a moment of CPU after the last sync woke them): wait for them,
        // a bounded fraction of one fdatasync, so one sync covers them all instead of
        // alternating batches of 1 and n-1. A lone writer's peak is 1: it never waits.
        let peak = self
            .durable_peak
            .swap(self.durable_waiting.load(SeqCst), SeqCst);
        if peak > 1 {
            let limit = Duration::from_nanos(
                (self.fsync_ewma_ns.load(SeqCst) / GATHER_FRACTION).min(GATHER_MAX_NS),
            );
            // Every yield is timed: one that overran (`wait::YIELD_OVERRUN`) means
            // other processes hold the CPU, and gathering would cost each commit a time
            // slice; while that lasts (`wait::contended`), the syncer does not gather.
            let mut busy = contended();
            let start = Instant::now();
            while !busy && self.durable_waiting.load(SeqCst) < peak && start.elapsed() < limit {
                busy = timed_yield();
            }
            // Then, while new reservations keep arriving, let them in too.
            for _ in 0..GATHER_YIELDS_MAX {
                if busy {
                    break;
                }
                let before = self.reserved.load(SeqCst);
                busy = timed_yield();
                if self.reserved.load(SeqCst) == before {
                    break;
                }
            }
            // And let the copies in flight land, for at most as long again: a committer
            // preempted between its reservation and its copy must not hold up this sync (it
            // joins the next one); the sync covers whatever is filled when it starts.
            let reserved = self.reserved.load(SeqCst);
            let landing = Instant::now();
            while !busy
                && self.ring.filled() < reserved
                && !self.is_poisoned()
                && landing.elapsed() < limit
            {
                busy = timed_yield();
            }
        }
        let now = self.appends.load(SeqCst);
        let then = self.appends_at_sync.swap(now, SeqCst);
        self.last_batch.store(now - then, SeqCst);
    }

    fn synced(&self, to: u64) {
        self.waiters.wake_durable(to);
    }
}
