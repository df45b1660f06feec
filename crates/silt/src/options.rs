//! [`DbBuilder`]: every knob of a database, with its default and why.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use silt_vfs::FileSystem;
pub use silt_wal::SyncMode;

use crate::clock::{Clock, SystemClock};
use crate::filter::CompactionFilter;
use crate::merge_op::MergeOperator;
use crate::sstable::Compression;

/// How a database is opened. Create it with [`Db::builder`](crate::Db::builder); open
/// with [`DbBuilder::open`] (in `db/open.rs`, where the opening is).
///
/// # Examples
///
/// ```
/// use silt::{Db, SyncMode};
/// # let dir = tempfile::tempdir().unwrap();
/// let db = Db::builder(dir.path())
///     .sync_mode(SyncMode::Full)
///     .memtable_bytes(8 << 20)
///     .block_cache_bytes(64 << 20)
///     .open()
///     .unwrap();
/// db.put(b"k", b"v").unwrap();
/// ```
#[derive(Clone, Debug)]
pub struct DbBuilder {
    pub(crate) path: PathBuf,
    pub(crate) sync: SyncMode,
    pub(crate) memtable_bytes: u64,
    pub(crate) immutable_memtables_max: usize,
    pub(crate) memtable_scan_flush_trigger: u64,
    pub(crate) l0_scan_compaction_ratio: f64,
    pub(crate) dead_runs: bool,
    pub(crate) memtable_bloom_ratio: f64,
    pub(crate) block_cache_bytes: u64,
    pub(crate) table_cache_tables: usize,
    pub(crate) block_size_bytes: usize,
    pub(crate) bloom_bits_per_key: u32,
    pub(crate) compression: Compression,
    pub(crate) level_size_ratio: u64,
    pub(crate) level_base_bytes: u64,
    pub(crate) table_target_bytes: u64,
    pub(crate) l0_compaction_trigger: usize,
    pub(crate) l0_stall_tables: usize,
    pub(crate) l0_slowdown_tables: usize,
    pub(crate) background_threads: usize,
    pub(crate) subcompactions: usize,
    /// `None`: derived from `memtable_bytes` ([`DbBuilder::log_segment_bytes`]).
    pub(crate) wal_segment_bytes: Option<u64>,
    pub(crate) create_if_missing: bool,
    pub(crate) paranoid_checks: bool,
    /// `None` until set: then 10 s on the operating system's file system and off on one
    /// passed to [`DbBuilder::file_system`] (see [`DbBuilder::stats_dump_every`]).
    pub(crate) stats_dump_period: Option<Option<std::time::Duration>>,
    pub(crate) read_only: bool,
    pub(crate) blob_threshold_bytes: Option<usize>,
    pub(crate) cf_blob_threshold_bytes: std::collections::BTreeMap<String, Option<usize>>,
    pub(crate) blob_gc_garbage_ratio: f64,
    pub(crate) blob_from_log: bool,
    pub(crate) memtable_values_in_log: bool,
    pub(crate) flush_below_l0: bool,
    pub(crate) fs: Option<Arc<dyn FileSystem>>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) ttl: Option<Duration>,
    pub(crate) cf_ttl: BTreeMap<String, Option<Duration>>,
    pub(crate) compaction_filter: Option<Arc<dyn CompactionFilter>>,
    pub(crate) cf_compaction_filter: BTreeMap<String, Option<Arc<dyn CompactionFilter>>>,
    pub(crate) merge_operator: Option<Arc<dyn MergeOperator>>,
    pub(crate) cf_merge_operator: BTreeMap<String, Option<Arc<dyn MergeOperator>>>,
}

impl DbBuilder {
    pub(crate) fn new(path: PathBuf) -> DbBuilder {
        DbBuilder {
            path,
            sync: SyncMode::None,
            memtable_bytes: 64 << 20,
            immutable_memtables_max: 2,
            memtable_scan_flush_trigger: 4096,
            l0_scan_compaction_ratio: 16.0,
            dead_runs: true,
            memtable_bloom_ratio: 0.0,
            block_cache_bytes: 64 << 20,
            table_cache_tables: 4096,
            block_size_bytes: 4096,
            bloom_bits_per_key: 10,
            compression: Compression::None,
            level_size_ratio: 10,
            level_base_bytes: 256 << 20,
            table_target_bytes: 64 << 20,
            l0_compaction_trigger: 4,
            l0_stall_tables: 20,
            l0_slowdown_tables: 12,
            background_threads: 2,
            subcompactions: 2,
            wal_segment_bytes: None,
            create_if_missing: true,
            paranoid_checks: true,
            stats_dump_period: None,
            read_only: false,
            blob_threshold_bytes: Some(1024),
            cf_blob_threshold_bytes: std::collections::BTreeMap::new(),
            blob_gc_garbage_ratio: 0.5,
            blob_from_log: true,
            memtable_values_in_log: true,
            flush_below_l0: true,
            fs: None,
            clock: Arc::new(SystemClock),
            ttl: None,
            cf_ttl: BTreeMap::new(),
            compaction_filter: None,
            cf_compaction_filter: BTreeMap::new(),
            merge_operator: None,
            cf_merge_operator: BTreeMap::new(),
        }
    }

    /// The merge operator of every column family without its own
    /// ([`DbBuilder::cf_merge_operator`]): what [`crate::WriteBatch::merge`] operands are
    /// folded with (see [`MergeOperator`]; [`crate::Counter`] and [`crate::Append`] are
    /// built in). Default none: merges are refused. Not stored: pass the same operator at
    /// every open; a family holding operands refuses reads of them without one.
    pub fn merge_operator(mut self, op: Arc<dyn MergeOperator>) -> Self {
        self.merge_operator = Some(op);
        self
    }

    /// The merge operator of the column family named `cf` only (`None`: merges refused
    /// there, whatever the default).
    pub fn cf_merge_operator(mut self, cf: &str, op: Option<Arc<dyn MergeOperator>>) -> Self {
        self.cf_merge_operator.insert(cf.to_string(), op);
        self
    }

    /// The merge operator of the column family named `cf`.
    pub(crate) fn merge_operator_for(&self, cf: &str) -> Option<Arc<dyn MergeOperator>> {
        for_cf(&self.cf_merge_operator, &self.merge_operator, cf)
    }

    /// A time to live for every write to a column family without its own
    /// ([`DbBuilder::cf_ttl`]): a put made at time `t` reads as deleted from `t + ttl` on,
    /// and compaction drops it. The expiry is fixed when the write commits (it is in the
    /// log), so changing the TTL at a later open changes only later writes; a write's own
    /// TTL ([`crate::WriteBatch::put_with_ttl`]) wins over the family's. Default `None`:
    /// values do not expire. Time comes from [`DbBuilder::clock`]. Not stored: pass it at
    /// every open.
    pub fn ttl(mut self, ttl: Option<Duration>) -> Self {
        self.ttl = ttl;
        self
    }

    /// [`DbBuilder::ttl`] for the column family named `cf` only (`None`: its values do not
    /// expire, whatever the default).
    pub fn cf_ttl(mut self, cf: &str, ttl: Option<Duration>) -> Self {
        self.cf_ttl.insert(cf.to_string(), ttl);
        self
    }

    /// The clock expiring values are judged by. Default [`SystemClock`]; tests pass a
    /// [`crate::ManualClock`].
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// A compaction filter for every column family without its own
    /// ([`DbBuilder::cf_compaction_filter`]); see [`CompactionFilter`] for when it runs.
    /// Default none. Not stored: pass it at every open.
    pub fn compaction_filter(mut self, filter: Arc<dyn CompactionFilter>) -> Self {
        self.compaction_filter = Some(filter);
        self
    }

    /// The compaction filter of the column family named `cf` only (`None`: no filter there,
    /// whatever the default).
    pub fn cf_compaction_filter(
        mut self,
        cf: &str,
        filter: Option<Arc<dyn CompactionFilter>>,
    ) -> Self {
        self.cf_compaction_filter.insert(cf.to_string(), filter);
        self
    }

    /// The TTL of the column family named `cf`, in milliseconds.
    pub(crate) fn ttl_ms_for(&self, cf: &str) -> Option<u64> {
        for_cf(&self.cf_ttl, &self.ttl, cf)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    /// Whether some column family may have a TTL.
    pub(crate) fn any_ttl(&self) -> bool {
        self.ttl.is_some() || self.cf_ttl.values().any(|t| t.is_some())
    }

    /// The compaction filter of the column family named `cf`.
    pub(crate) fn compaction_filter_for(&self, cf: &str) -> Option<Arc<dyn CompactionFilter>> {
        for_cf(&self.cf_compaction_filter, &self.compaction_filter, cf)
    }

    /// Key-value separation: a value of at least this many bytes is moved, when its
    /// memtable is flushed, to a blob file beside the table, which keeps a 20-byte pointer
    /// (`docs/format/vlog.md`), so compaction moves pointers instead of large values.
    /// `None` keeps every value in the tables. Default `Some(1024)` (1 KiB), as TidesDB's
    /// vlog; for every column family without its own setting
    /// ([`DbBuilder::cf_blob_threshold_bytes`]). Not stored: pass it at every open (values
    /// already separated stay where they are).
    pub fn blob_threshold_bytes(mut self, bytes: Option<usize>) -> Self {
        self.blob_threshold_bytes = bytes;
        self
    }

    /// Whether a flush may point at a separated value where the log already holds it,
    /// instead of copying it to a blob file: it hard-links the log segment into `tables/`
    /// as a *log blob* (`docs/format/vlog.md`, "Log blobs"), so the value reaches the
    /// device once, not twice. A segment is linked only when most of the span the flush
    /// covers is such values; otherwise, on a file system without hard links, for a
    /// transaction written in several records, and when the default sync mode is
    /// [`SyncMode::Full`] (whose log zero-fills the segment that replaces a linked one, so
    /// a link would save no byte), values are copied. Default `true`.
    pub fn blob_from_log(mut self, on: bool) -> Self {
        self.blob_from_log = on;
        self
    }

    /// Whether the memtable leaves a value that a flush would point at in the log
    /// ([`DbBuilder::blob_from_log`]) where the log holds it, instead of copying it: its
    /// entry holds the value's address in a read-only mapping of the log segment, and reads
    /// of it read the log's page-cache pages in place. A 4 KiB-value load then copies each
    /// value once into the log only, not also into the memtable, whose memory holds keys
    /// and small values. The memtable keeps the segments it reads from until it is dropped:
    /// a reader still holding a flushed memtable holds the log's purge back (the flush
    /// thread purges once it lets go), and one that outlives the database keeps its
    /// directory locked. Only where the log can be mapped (the operating system's file
    /// system). The memtable still counts such a value's bytes
    /// toward `memtable_bytes`, so flushes come as often. Default `true`.
    pub fn memtable_values_in_log(mut self, on: bool) -> Self {
        self.memtable_values_in_log = on;
        self
    }

    /// [`DbBuilder::blob_threshold_bytes`] for the column family named `cf` only.
    pub fn cf_blob_threshold_bytes(mut self, cf: &str, bytes: Option<usize>) -> Self {
        self.cf_blob_threshold_bytes.insert(cf.to_string(), bytes);
        self
    }

    /// When the share of blob files' value bytes that no table points at any more
    /// (overwritten or deleted values) reaches this ratio over all blob files, they are
    /// collected, the files with the most garbage first: compactions copy the live values
    /// of files at or above the ratio to new blob files, and when nothing else needs
    /// compacting the tables pointing into the file with the most garbage are compacted for
    /// that alone, until the share is below the ratio again. Bounds the blob files' space
    /// amplification to `1 / (1 - ratio)` overall (one file may hold more garbage while
    /// others hold less: collecting the emptiest files first copies the fewest live values).
    /// Default 0.5 (2×); clamped to 0.05..=1.0 (1.0: never collect).
    pub fn blob_gc_garbage_ratio(mut self, ratio: f64) -> Self {
        self.blob_gc_garbage_ratio = if ratio.is_nan() {
            0.5
        } else {
            ratio.clamp(0.05, 1.0)
        };
        self
    }

    /// The smallest blob threshold any column family has (`None`: none separates values).
    pub(crate) fn smallest_blob_threshold(&self) -> Option<usize> {
        self.cf_blob_threshold_bytes
            .values()
            .chain(std::iter::once(&self.blob_threshold_bytes))
            .flatten()
            .copied()
            .min()
    }

    /// The blob threshold of the column family named `cf`.
    pub(crate) fn blob_threshold_for(&self, cf: &str) -> Option<usize> {
        for_cf(
            &self.cf_blob_threshold_bytes,
            &self.blob_threshold_bytes,
            cf,
        )
    }

    /// When a write is acknowledged. Default [`SyncMode::None`]: in the OS on return (a
    /// process crash loses nothing; a machine crash may lose the last writes). Use
    /// [`SyncMode::Full`] for fdatasync before every acknowledgement (shared by concurrent
    /// writers), or per write with [`crate::WriteOptions::sync`].
    pub fn sync_mode(mut self, sync: SyncMode) -> Self {
        self.sync = sync;
        self
    }

    /// Size at which the memtable is frozen and flushed. Default 64 MiB.
    pub fn memtable_bytes(mut self, bytes: u64) -> Self {
        self.memtable_bytes = bytes.max(4096);
        self
    }

    /// Frozen memtables allowed to wait for flush before writes stall. Default 2.
    ///
    /// Memory: each may hold up to [`DbBuilder::memtable_bytes`], so memtables take up to
    /// `memtable_bytes * (1 + n)` at the peak (192 MiB at the defaults). 1 is RocksDB's
    /// default budget (`max_write_buffer_number` 2): about 100 MiB less at the peak of a
    /// load that outruns its flushes, at the cost of earlier stalls (BENCHMARKS.md, issue
    /// 12, "peak RSS").
    pub fn immutable_memtables_max(mut self, n: usize) -> Self {
        self.immutable_memtables_max = n.max(1);
        self
    }

    /// Flush the active memtable early, before it is full, once one read step (a `next`,
    /// `prev` or seek of an iterator or cursor) passes over `n` of its entries to find a
    /// visible pair: tombstones, the puts they delete, overwritten versions (RocksDB's
    /// `memtable_op_scan_flush_trigger`). The flush leaves out what no reader can see (a
    /// single delete with its put; versions overwritten with no snapshot between them), so
    /// the reads after it stop paying for them: a queue that deletes at its head and scans
    /// from there otherwise walks every delete since the last flush. The memtable is frozen
    /// by the next write. Default 4096; 0 turns it off. Counted in `Stats::scan_flushes`.
    pub fn memtable_scan_flush_trigger(mut self, n: u64) -> Self {
        self.memtable_scan_flush_trigger = n;
        self
    }

    /// Compact a column family's level 0 early, before it has
    /// [`DbBuilder::l0_compaction_trigger`] tables, once reads have passed over `ratio` times
    /// as many of its level-0 entries as the compaction would read (level 0 and the tables
    /// below it overlaps). Passed over: tombstones, the puts they delete, overwritten
    /// versions, met by iterators and cursors on their way to a visible pair. The compaction
    /// takes the deletes down to where they meet what they delete, so the reads after it
    /// stop passing over them: walking them again would soon cost more than rewriting them
    /// once. The memtable's counterpart is [`DbBuilder::memtable_scan_flush_trigger`];
    /// LevelDB's seek compactions and Pebble's read-triggered compactions weigh reads
    /// against a compaction the same way. A queue that deletes at its head and scans from
    /// there otherwise walks every delete of up to four flushes. It runs when no level is
    /// over its target. Default 16 (passing over an entry costs, by estimate, a tenth to a
    /// twentieth of compacting one); 0 turns it off. Counted in `Stats::scan_compactions`.
    pub fn l0_scan_compaction_ratio(mut self, ratio: f64) -> Self {
        self.l0_scan_compaction_ratio = if ratio.is_nan() { 0.0 } else { ratio.max(0.0) };
        self
    }

    /// Remember the key ranges that iterators found to hold no live key, and let later
    /// iterators that start inside one seek past it instead of walking its tombstones again
    /// (`docs/design.md`, "Dead runs"). A queue that deletes at its head and reads from
    /// there walks, without it, every delete a compaction has not yet dropped; with it, only
    /// those since the last read. A family starts remembering once a read passed over 64
    /// entries in one step; from then on each iterator over it registers its start (a
    /// lock) and each commit writing a value into it checks the runs (a lock per commit).
    /// Counted in `Stats::dead_run_records` and `Stats::dead_run_jumps`. Default on.
    pub fn dead_runs(mut self, on: bool) -> Self {
        self.dead_runs = on;
        self
    }

    /// Size of each memtable's bloom filter over its user keys, as a fraction of
    /// [`DbBuilder::memtable_bytes`] (RocksDB's `memtable_prefix_bloom_size_ratio` with
    /// whole-key filtering): a point read, or a transaction's commit-time check of a key it
    /// read, skips the search of a memtable that does not hold the key. Each write sets its
    /// key's bits (one cache line). Default 0 (off), as in RocksDB: measured here (2 vCPU,
    /// 512 KiB of L2 per core; BENCHMARKS.md, "A filter over each memtable's keys"), 0.02
    /// made reads mixed with writes 1.44× faster and writes 0.78–0.86× slower, because the
    /// filter's lines push the skip list's out of the cache. Try 0.01–0.05 for workloads
    /// that read keys missing from a large memtable. Clamped to 0..=0.25.
    pub fn memtable_bloom_ratio(mut self, ratio: f64) -> Self {
        self.memtable_bloom_ratio = if ratio.is_nan() {
            0.0
        } else {
            ratio.clamp(0.0, 0.25)
        };
        self
    }

    /// The bytes of each memtable's filter (`memtable_bloom_ratio` of the memtable size).
    pub(crate) fn memtable_bloom_bytes(&self) -> u64 {
        (self.memtable_bytes as f64 * self.memtable_bloom_ratio) as u64
    }

    /// Bytes of decoded blocks kept in the block cache. Default 64 MiB; 0 disables it.
    pub fn block_cache_bytes(mut self, bytes: u64) -> Self {
        self.block_cache_bytes = bytes;
        self
    }

    /// Table files kept open. Default 4096.
    pub fn table_cache_tables(mut self, n: usize) -> Self {
        self.table_cache_tables = n.max(16);
        self
    }

    /// Target size of an uncompressed data block. Default 4 KiB.
    pub fn block_size_bytes(mut self, bytes: usize) -> Self {
        self.block_size_bytes = bytes.clamp(256, 4 << 20);
        self
    }

    /// Bloom filter bits per key (about 1% false positives at 10). Default 10; 0 disables.
    pub fn bloom_bits_per_key(mut self, bits: u32) -> Self {
        self.bloom_bits_per_key = bits.min(64);
        self
    }

    /// Block compression. Default none.
    pub fn compression(mut self, c: Compression) -> Self {
        self.compression = c;
        self
    }

    /// Size ratio between adjacent levels. Default 10.
    pub fn level_size_ratio(mut self, ratio: u64) -> Self {
        self.level_size_ratio = ratio.max(2);
        self
    }

    /// The smallest target size of the first non-empty level below level 0 (dynamic level
    /// targets are derived from the last level's size down to this). Default 256 MiB.
    pub fn level_base_bytes(mut self, bytes: u64) -> Self {
        self.level_base_bytes = bytes.max(4096);
        self
    }

    /// Target size of a table written by compaction. Default 64 MiB.
    pub fn table_target_bytes(mut self, bytes: u64) -> Self {
        self.table_target_bytes = bytes.max(4096);
        self
    }

    /// Whether a flush may cut a family's entries into several tables at gaps in the key
    /// space (two writers each loading their own range) and write each such table that
    /// overlaps no table at any level, nor where a running compaction may write, straight to
    /// the base level (the level level 0 compacts into). Off, every flushed table goes to level 0 and reaches the levels below by
    /// compaction. `docs/design.md`, "Flush". Default `true`.
    pub fn flush_below_level0(mut self, on: bool) -> Self {
        self.flush_below_l0 = on;
        self
    }

    /// Level-0 tables that trigger a compaction into the level below. Default 4. The tables
    /// one flush cut a family into (`DbBuilder::flush_below_level0`) count once.
    pub fn l0_compaction_trigger(mut self, n: usize) -> Self {
        self.l0_compaction_trigger = n.max(1);
        self
    }

    /// Level-0 tables at which writes stall until compaction catches up. Default 20. The
    /// tables one flush cut a family into count once here, as for
    /// [`DbBuilder::l0_compaction_trigger`] and the slowdown: a read checks one of them.
    pub fn l0_stall_tables(mut self, n: usize) -> Self {
        self.l0_stall_tables = n.max(2);
        self
    }

    /// Level-0 tables at which writes start to slow down, smoothly, before the stall:
    /// between this and [`DbBuilder::l0_stall_tables`] each write waits in proportion to
    /// its bytes, at a rate that falls from the measured flush rate to zero at the stall
    /// (RocksDB's delayed write rate). Default 12.
    pub fn l0_slowdown_tables(mut self, n: usize) -> Self {
        self.l0_slowdown_tables = n.max(1);
        self
    }

    /// How many threads one large compaction may split into, each merging a share of its
    /// key range (sub-compactions). Default 2, so a compaction can use both cores of a
    /// small machine; 1 turns it off. Only jobs of at least four output tables' worth
    /// are split.
    pub fn subcompactions(mut self, n: usize) -> Self {
        self.subcompactions = n.clamp(1, 16);
        self
    }

    /// Background threads for flush and compaction. Default 2 (at least one flush thread
    /// and one compaction thread are always run).
    pub fn background_threads(mut self, n: usize) -> Self {
        self.background_threads = n.max(2);
        self
    }

    /// Size of a log segment file (a multiple of 4096, at least 64 KiB). Default: a quarter
    /// of [`DbBuilder::memtable_bytes`] rounded up to whole MiB, at least 17 MiB and at most
    /// 64 MiB (17 MiB at the defaults).
    ///
    /// Space: segments are files of their full size from the start, and the log holds the
    /// segments of the memtables not yet flushed, the one being filled, the next one
    /// (prepared ahead) and, while writers are ahead of the flushes, up to a memtable's
    /// worth of purged ones kept for reuse (so they are not zero-filled again); so the log
    /// takes about `memtable_bytes * (2 + immutable_memtables_max)` at its peak plus two
    /// segments, and one segment once everything is flushed. Smaller segments make a small database smaller on disk (BENCHMARKS.md,
    /// issue 12, "space"), larger ones rotate less often. A record never spans segments:
    /// below 17 MiB, a key and value near the largest allowed ([`crate::MAX_VALUE_BYTES`])
    /// are refused with `InvalidArgument`. Applies to a new log only: an existing log keeps
    /// the size its segments were made with.
    pub fn wal_segment_bytes(mut self, bytes: u64) -> Self {
        self.wal_segment_bytes = Some(bytes);
        self
    }

    /// The log segment size in effect: [`DbBuilder::wal_segment_bytes`] if set, else the
    /// default derived from `memtable_bytes`.
    pub(crate) fn log_segment_bytes(&self) -> u64 {
        // One record must hold the largest key and value with their headers.
        let floor = (crate::key::MAX_KEY_BYTES + crate::batch::MAX_VALUE_BYTES + (64 << 10))
            .next_multiple_of(1 << 20) as u64;
        self.wal_segment_bytes.unwrap_or_else(|| {
            (self.memtable_bytes / 4)
                .next_multiple_of(1 << 20)
                .clamp(floor, 64 << 20)
        })
    }

    /// Whether `open` creates a missing database. Default true.
    pub fn create_if_missing(mut self, yes: bool) -> Self {
        self.create_if_missing = yes;
        self
    }

    /// Whether `open` reads the footer of every table the manifest names (magic and
    /// checksum, one small read per table), as RocksDB's `paranoid_checks`. Default true.
    /// Off, open still checks that each table exists with the size the manifest records.
    pub fn paranoid_checks(mut self, yes: bool) -> Self {
        self.paranoid_checks = yes;
        self
    }

    /// How often a writable handle writes its [`crate::Stats`] to the file `STATS` in the
    /// database directory, for `silt stats` run from another process while this one holds
    /// the database (`docs/format/stats.md`); `None` (or zero): never. The file is never
    /// synced, a failed write is only counted (`Stats::stats_dump_failures`), and close
    /// removes it.
    ///
    /// Default: every 10 s on the operating system's file system; off on a file system
    /// passed to [`DbBuilder::file_system`] unless set here (another process cannot read a
    /// simulated one, and a periodic write would shift the operation counts fault-injection
    /// tests arm their faults by).
    pub fn stats_dump_period(mut self, period: Option<std::time::Duration>) -> Self {
        self.stats_dump_period = Some(period.filter(|p| !p.is_zero()));
        self
    }

    /// The dump period in effect (see [`DbBuilder::stats_dump_period`]).
    pub(crate) fn stats_dump_every(&self) -> Option<std::time::Duration> {
        match self.stats_dump_period {
            Some(p) => p,
            None if self.fs.is_some() => None,
            None => Some(std::time::Duration::from_secs(10)),
        }
    }

    /// Opens the database read-only, as RocksDB's `OpenForReadOnly`: for tools, and for a
    /// second process reading a database another process writes. Default false.
    ///
    /// A read-only handle takes no lock (a writer may hold the database, and it may open
    /// beside one) and writes nothing, anywhere under the directory: it does not cut a torn
    /// log tail, move anything into `lost/`, commit a manifest, or flush what it replays
    /// (the log from the manifest's log start goes into memory only). It reads a fixed
    /// state: the manifest and the log as they were while it opened; it never sees later
    /// writes (reopen to see them). Writes, flushes, compactions and column-family changes
    /// return [`crate::Error::ReadOnly`]. It does not create a missing database. The rules
    /// and the races with a live writer are in `docs/design.md`, "Read-only open".
    ///
    /// # Examples
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = silt::Db::open(dir.path()).unwrap();
    /// db.put(b"k", b"v").unwrap();
    /// // Beside the writer, with no lock taken:
    /// let reader = silt::Db::builder(dir.path()).read_only(true).open().unwrap();
    /// assert_eq!(reader.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    /// assert!(matches!(reader.put(b"k", b"w"), Err(silt::Error::ReadOnly)));
    /// ```
    pub fn read_only(mut self, yes: bool) -> Self {
        self.read_only = yes;
        self
    }

    /// The file layer every file of the database (log segments, tables, manifest, `CURRENT`,
    /// `LOCK`) goes through, as Pebble's `Options.FS` or LevelDB's `Env`. Default
    /// [`crate::vfs::OsFs`]. Tests pass `silt_vfs::SimFs` (feature `sim`) to simulate power
    /// loss and I/O errors; the benchmarks pass `silt_vfs::DelayFs` (feature `delay`) to
    /// model a slower device.
    ///
    /// ```
    /// use silt::vfs::{FileSystem, OsFs};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let fs: std::sync::Arc<dyn FileSystem> = OsFs::new();
    /// let db = silt::Db::builder(dir.path()).file_system(fs).open().unwrap();
    /// # drop(db);
    /// ```
    pub fn file_system(mut self, fs: Arc<dyn FileSystem>) -> Self {
        self.fs = Some(fs);
        self
    }
}

/// A per-family setting: the family's own if it has one (`None` included: "none here"),
/// else the default for every family.
fn for_cf<T: Clone>(own: &BTreeMap<String, Option<T>>, default: &Option<T>, cf: &str) -> Option<T> {
    own.get(cf).cloned().unwrap_or_else(|| default.clone())
}

/// Options of one write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WriteOptions {
    /// `Some(true)`: acknowledge only once durable (fdatasync shared with concurrent
    /// writers); `Some(false)`: once in the OS; `None`: the database's [`SyncMode`].
    pub sync: Option<bool>,
}

impl WriteOptions {
    /// A durable write regardless of the database's sync mode.
    pub fn durable() -> WriteOptions {
        WriteOptions { sync: Some(true) }
    }
}

/// How long a stalled writer sleeps between checks.
pub(crate) const STALL_WAIT: Duration = Duration::from_millis(5);
