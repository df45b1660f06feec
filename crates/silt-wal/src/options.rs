//! Options of a log: sync mode, commit strategy, segment size and preallocation.

use std::sync::Arc;
use std::time::Duration;

use silt_vfs::{FileSystem, OsFs};

/// When an append is acknowledged relative to `fdatasync`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncMode {
    /// Acknowledged once the record is in the OS: a process crash loses nothing, a machine
    /// crash may lose a suffix of recent commits (what survives is a prefix).
    None,
    /// As `None`, plus a background sync every `Duration`: a machine crash loses at most the
    /// commits of the last interval, and what survives is a prefix.
    Interval(Duration),
    /// Acknowledged only after an `fdatasync` that covers the record returned.
    Full,
}

impl SyncMode {
    /// The default interval of [`SyncMode::Interval`]. 10 ms: a sync costs ~50 µs here, so a
    /// syncer busy for 0.5% of its time bounds the loss window to what an application
    /// can usually replay; shorter intervals gain little on a loaded log.
    pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(10);
}

/// How commits reach the file. `Pipelined` is silt's design; the others (feature
/// `strategies`) reproduce the seeds' designs so they can be measured beside it on the same
/// disk. They are for benchmarks, not for use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// Lock-free reservation, encoding outside any lock straight into a shared mapping of the
    /// segment (no system call per commit), a contiguous filled watermark, and one sync
    /// stream without timers: whoever needs durability syncs everything filled so far.
    Pipelined,
    /// TidesDB v7: an atomic offset reservation and one `pwrite` per commit; under
    /// [`SyncMode::Full`] every commit issues its own `fdatasync`.
    #[cfg(feature = "strategies")]
    DirectPwrite,
    /// MuopDB: leader/follower write groups closed when `max_entries` joined or `max_wait`
    /// passed since the group opened; one write and one `fdatasync` per group.
    #[cfg(feature = "strategies")]
    TimedGroups {
        /// A group closes when this many commits have joined.
        max_entries: usize,
        /// A group closes this long after it opened.
        max_wait: Duration,
    },
}

/// How a new segment file gets its blocks before records go into it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preallocate {
    /// Write zeroes over the whole segment and sync it.
    ZeroFill,
    /// Reuse a purged segment (rename it, rewrite its header); zero-fill when none is left.
    Recycle,
    /// As `Recycle`, except that while purged segments go to another name (a hard link,
    /// which the pool cannot take back: the engine's log blobs; judged by the last segment
    /// purged), new segments are allocated with `fallocate` instead of zero-filled, so a
    /// load whose segments all become log blobs does not write its bytes twice (values,
    /// then zeros). An allocated
    /// segment costs more per write through the mapping and per `fdatasync` (the file
    /// system records each first write into a reserved block): choose it when most commits
    /// are not synced. A reused segment's old bytes after its first 4 KiB are forgotten
    /// (`File::forget`: they read as zeros, and are never read from the device again), so
    /// a write into a page of them that left the page cache does not wait for a read.
    RecycleElseAllocate,
}

/// Options for [`crate::Wal::open`]. `Options::default()` gives `SyncMode::Full`,
/// `Strategy::Pipelined`, 64 MiB segments, recycling, and the real file system.
#[derive(Clone, Debug)]
pub struct Options {
    /// When appends are acknowledged.
    pub sync: SyncMode,
    /// How commits reach the file.
    pub strategy: Strategy,
    /// Size of each segment file for a new log (a multiple of 4096, at least 64 KiB). An
    /// existing log keeps the size it was created with.
    pub segment_bytes: u64,
    /// How new segments are preallocated.
    pub preallocate: Preallocate,
    /// Purged segments kept for reuse, at most (with [`Preallocate::Recycle`] and
    /// [`Preallocate::RecycleElseAllocate`]). Each one reused is a segment not zero-filled
    /// (its bytes not written twice); each one kept holds `segment_bytes` of disk while
    /// writers are ahead of the purges (a purge that reaches the log's end empties the
    /// pool). Default 2.
    pub recycle_segments: usize,
    /// The file layer: [`OsFs`] for real use, `silt_vfs::SimFs` (feature `sim`) in tests.
    pub fs: Arc<dyn FileSystem>,
    /// The LSN of the first record the caller needs (see [`Options::required_from`]).
    pub required_from: crate::Lsn,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            sync: SyncMode::Full,
            strategy: Strategy::Pipelined,
            segment_bytes: 64 << 20,
            preallocate: Preallocate::Recycle,
            recycle_segments: 2,
            fs: OsFs::new(),
            required_from: 0,
        }
    }
}

impl Options {
    /// Records below `lsn` are kept elsewhere (an engine's tables): recovery needs only the
    /// records from `lsn` on. Damage lying wholly below it is skipped, not an error, and
    /// reported in [`crate::RecoveryInfo::skipped`]; damage that may hide a record at or
    /// above it is `Corruption` as usual. Default 0: every record is needed.
    pub fn required_from(mut self, lsn: crate::Lsn) -> Self {
        self.required_from = lsn;
        self
    }

    /// Sets the sync mode.
    pub fn sync(mut self, sync: SyncMode) -> Self {
        self.sync = sync;
        self
    }
    /// Sets the commit strategy.
    pub fn strategy(mut self, strategy: Strategy) -> Self {
        self.strategy = strategy;
        self
    }
    /// Sets the segment size for a new log.
    pub fn segment_bytes(mut self, bytes: u64) -> Self {
        self.segment_bytes = bytes;
        self
    }
    /// Sets how segments are preallocated.
    pub fn preallocate(mut self, p: Preallocate) -> Self {
        self.preallocate = p;
        self
    }
    /// Sets how many purged segments are kept for reuse, at most.
    pub fn recycle_segments(mut self, n: usize) -> Self {
        self.recycle_segments = n;
        self
    }
    /// Sets the file layer.
    pub fn fs(mut self, fs: Arc<dyn FileSystem>) -> Self {
        self.fs = fs;
        self
    }
}

/// Per-append choices, for [`crate::Wal::append_with`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AppendOptions {
    /// `Some(true)`: make this commit durable before returning even if the log's mode is
    /// `None` or `Interval`. `Some(false)`: do not wait for durability even under `Full`
    /// (the caller holds the LSN as a ticket for [`crate::Wal::wait_durable`]). `None`: the
    /// log's mode decides.
    pub sync: Option<bool>,
}
