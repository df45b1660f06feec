//! The engines `silt-bench run` can drive: one [`Engine`] trait, one adapter per engine.
//!
//! silt is always compiled in. The peers are adapters behind cargo features of their own
//! names: `sqlite` (rusqlite, bundled SQLite, WAL mode), `fjall` and `redb` are default
//! features; `rocksdb` (C++, built from source) and `tidesdb` (C, built with CMake) are not,
//! because of their native builds (`scripts/bench-deps.sh` installs what they need). An engine
//! not compiled in is reported as unavailable (with the cargo command that enables it),
//! never a panic. How each peer is configured, and what it cannot do, is in
//! `docs/bench.md`. To add one: implement [`Engine`] (and [`Seeker`]) for it in a module of
//! `engine/`, add a `#[cfg(feature = "...")]` arm to [`open`] and to [`compiled`], and list
//! it in [`KNOWN`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub type EResult<T> = Result<T, String>;

/// Every engine name the tool knows, with the cargo feature that compiles its adapter
/// (`None`: always compiled).
pub const KNOWN: &[(&str, Option<&str>)] = &[
    ("silt", None),
    // silt with key-value separation off (`blob_threshold_bytes(None)`): its A/B.
    ("silt-inline", None),
    // silt's transaction modes for `tpcc` (docs/bench.md, "tpcc"); plain silt elsewhere.
    ("silt-si", None),
    ("silt-pess", None),
    ("silt-pess-si", None),
    ("rocksdb", Some("rocksdb")),
    // RocksDB's OptimisticTransactionDB for `tpcc`; plain RocksDB elsewhere.
    ("rocksdb-occ", Some("rocksdb")),
    ("sqlite", Some("sqlite")),
    ("fjall", Some("fjall")),
    ("redb", Some("redb")),
    ("tidesdb", Some("tidesdb")),
];

/// How a cell opens its engine. Every adapter maps these to its closest settings and
/// documents what it could not honour.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// A fresh directory the engine owns.
    pub dir: PathBuf,
    /// Acknowledge writes after an fdatasync (`full`) or once in the OS (`none`).
    pub sync_full: bool,
    /// Block (or page) cache budget in bytes.
    pub cache_bytes: u64,
    /// Emulated extra device-flush latency per fdatasync, µs (0: none); only where the
    /// engine's file layer can be wrapped.
    pub fsync_delay_us: u64,
    /// `merged` or `serial` (see `silt_vfs::DelayFs`).
    pub fsync_delay_model: String,
    /// Worker threads that will share the engine (engines with a cache per connection,
    /// SQLite, split `cache_bytes` among them).
    #[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
    pub threads: usize,
}

#[cfg(test)]
impl EngineConfig {
    /// A small configuration for the tests of adapters and workloads: sync `none`, an 8 MiB
    /// cache, no fsync delay.
    pub fn for_test(dir: &std::path::Path, threads: usize) -> EngineConfig {
        EngineConfig {
            dir: dir.to_path_buf(),
            sync_full: false,
            cache_bytes: 8 << 20,
            fsync_delay_us: 0,
            fsync_delay_model: "merged".into(),
            threads,
        }
    }
}

/// A key-value engine under test. Shared by every worker thread of a cell (so `Sync`).
pub trait Engine: Send + Sync {
    /// Writes the pairs as one atomic batch, acknowledged per the configured sync mode.
    fn write(&self, kvs: &[(&[u8], &[u8])]) -> EResult<()>;
    /// Deletes the keys as one atomic batch (one key: a single delete), acknowledged per the
    /// configured sync mode. Deleting an absent key is not an error.
    fn delete(&self, keys: &[&[u8]]) -> EResult<()>;
    /// As [`Engine::delete`], for keys put exactly once since they were last deleted (the
    /// queue pattern): RocksDB's `SingleDelete`, where the engine has one (silt); a plain
    /// delete elsewhere.
    fn single_delete(&self, keys: &[&[u8]]) -> EResult<()> {
        self.delete(keys)
    }
    /// The length of `key`'s value, or `None` if it is absent.
    fn get(&self, key: &[u8]) -> EResult<Option<usize>>;
    /// A per-thread cursor for `seekrandom`, reused across seeks (as db_bench reuses its
    /// iterator).
    fn seeker(&self) -> EResult<Box<dyn Seeker + '_>>;
    /// Reads up to `n` pairs from the first key `>= start`, through the engine's range
    /// iterator; returns how many it read.
    fn scan(&self, start: &[u8], n: usize) -> EResult<usize>;
    /// Calls `each` for every pair with `lo <= key < hi` (unbounded where `None`), in order.
    fn for_each(
        &self,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
        each: &mut dyn FnMut(&[u8], &[u8]),
    ) -> EResult<u64>;
    /// Writes buffered writes (memtable) to the engine's tables and waits for it.
    fn flush(&self) -> EResult<()>;
    /// Waits (at most `max`) until background work (compaction) looks finished.
    fn wait_idle(&self, max: Duration);
    /// Engine-specific counters for the JSON line (`engine_stats`), if any.
    fn stats(&self) -> Option<Value> {
        None
    }
    /// Closes the engine cleanly.
    fn close(self: Box<Self>) -> EResult<()>;
}

/// A reusable seek cursor.
pub trait Seeker {
    /// Positions at the first key `>= key` and reads that one pair; whether there was one.
    fn seek(&mut self, key: &[u8]) -> EResult<bool>;
}

/// Whether the adapter behind cargo feature `feature` is compiled into this build.
pub fn compiled(feature: &str) -> bool {
    const COMPILED: &[(&str, bool)] = &[
        ("sqlite", cfg!(feature = "sqlite")),
        ("fjall", cfg!(feature = "fjall")),
        ("redb", cfg!(feature = "redb")),
        ("rocksdb", cfg!(feature = "rocksdb")),
        ("tidesdb", cfg!(feature = "tidesdb")),
    ];
    COMPILED.iter().any(|&(f, on)| f == feature && on)
}

/// Whether `name` can be opened in this build; `Err` says why not.
pub fn availability(name: &str) -> Result<(), String> {
    match KNOWN.iter().find(|(n, _)| *n == name) {
        None => Err(format!(
            "unknown engine {name:?} (known: {})",
            KNOWN.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
        )),
        Some((_, None)) => Ok(()),
        Some((_, Some(feature))) if compiled(feature) => Ok(()),
        Some((_, Some(feature))) => Err(format!(
            "engine {name:?} is not compiled into this build; enable it with \
             `cargo build --release -p silt-bench --features {feature}`"
        )),
    }
}

/// Opens engine `name` in `cfg.dir`.
pub fn open(name: &str, cfg: &EngineConfig) -> EResult<Box<dyn Engine>> {
    availability(name)?;
    match name {
        "silt" | "silt-si" | "silt-pess" | "silt-pess-si" => {
            Ok(Box::new(SiltEngine::open(cfg, true)?))
        }
        "silt-inline" => Ok(Box::new(SiltEngine::open(cfg, false)?)),
        #[cfg(feature = "sqlite")]
        "sqlite" => Ok(Box::new(peer_sqlite::SqliteEngine::open(cfg)?)),
        #[cfg(feature = "fjall")]
        "fjall" => Ok(Box::new(peer_fjall::FjallEngine::open(cfg)?)),
        #[cfg(feature = "redb")]
        "redb" => Ok(Box::new(peer_redb::RedbEngine::open(cfg)?)),
        #[cfg(feature = "rocksdb")]
        "rocksdb" | "rocksdb-occ" => Ok(Box::new(peer_rocksdb::RocksEngine::open(cfg)?)),
        #[cfg(feature = "tidesdb")]
        "tidesdb" => Ok(Box::new(peer_tidesdb::TidesEngine::open(cfg)?)),
        other => Err(format!("engine {other:?} has no adapter")),
    }
}

#[cfg(feature = "fjall")]
mod peer_fjall;
#[cfg(feature = "redb")]
mod peer_redb;
#[cfg(feature = "rocksdb")]
mod peer_rocksdb;
#[cfg(feature = "sqlite")]
mod peer_sqlite;
#[cfg(feature = "tidesdb")]
mod peer_tidesdb;
#[cfg(feature = "sqlite")]
pub(crate) mod sqlite_pool;

/// Polls `sample` (a progress counter, and whether the engine says it is busy) every 50 ms
/// until, over two consecutive polls, the engine was not busy, the counter did not move and
/// the process used under 10% of a core; at most `max`.
pub(crate) fn settle(max: Duration, sample: &dyn Fn() -> (u64, bool)) {
    let start = Instant::now();
    let mut last = (sample(), crate::sysstat::cpu_seconds());
    let mut quiet = 0;
    while start.elapsed() < max {
        std::thread::sleep(Duration::from_millis(50));
        let now = (sample(), crate::sysstat::cpu_seconds());
        let cpu = match (now.1, last.1) {
            (Some(a), Some(b)) => a - b,
            _ => 0.0,
        };
        if !now.0 .1 && now.0 .0 == last.0 .0 && cpu < 0.005 {
            quiet += 1;
            if quiet >= 2 {
                return;
            }
        } else {
            quiet = 0;
        }
        last = now;
    }
}

// ------------------------------------------------------------------------------ silt

/// `silt::Db` with its defaults except: sync mode, block cache budget, and (for
/// `--fsync-delay-us`) a `DelayFs` around the OS file layer, which delays the log's, the
/// tables' and the manifest's fdatasyncs alike. `separate: false` is engine `silt-inline`:
/// key-value separation off.
pub struct SiltEngine {
    pub(crate) db: silt::Db,
}

impl SiltEngine {
    pub fn open(cfg: &EngineConfig, separate: bool) -> EResult<SiltEngine> {
        let mut b = silt::Db::builder(&cfg.dir)
            .sync_mode(if cfg.sync_full {
                silt::SyncMode::Full
            } else {
                silt::SyncMode::None
            })
            .block_cache_bytes(cfg.cache_bytes);
        if !separate {
            b = b.blob_threshold_bytes(None);
        }
        if cfg.fsync_delay_us > 0 {
            use silt_vfs::{DelayFs, FileSystem, OsFs};
            let os: Arc<dyn FileSystem> = OsFs::new();
            let extra = Duration::from_micros(cfg.fsync_delay_us);
            let fs: Arc<dyn FileSystem> = if cfg.fsync_delay_model == "serial" {
                DelayFs::serial(os, extra)
            } else {
                DelayFs::new(os, extra)
            };
            b = b.file_system(fs);
        }
        let db = b
            .open()
            .map_err(|e| format!("silt: open {}: {e}", cfg.dir.display()))?;
        Ok(SiltEngine { db })
    }
}

fn silt_err(e: silt::Error) -> String {
    format!("silt: {e}")
}

/// [`silt_err`], and for `Poisoned` what poisoned the database (`cause`: the engine's
/// `Db::background_error`), which the error itself does not carry, so that a cell failing
/// on a poisoned database says why in its one line.
fn silt_err_with_cause(e: silt::Error, cause: impl FnOnce() -> Option<String>) -> String {
    match e {
        silt::Error::Poisoned => {
            let cause = cause().unwrap_or_else(|| "not recorded".to_string());
            format!("silt: {e} (cause: {cause})")
        }
        e => silt_err(e),
    }
}

impl SiltEngine {
    /// A write's error, with the cause if the database is poisoned.
    fn write_err(&self, e: silt::Error) -> String {
        silt_err_with_cause(e, || self.db.background_error())
    }
}

struct SiltSeeker {
    cursor: silt::Cursor,
}

impl Seeker for SiltSeeker {
    fn seek(&mut self, key: &[u8]) -> EResult<bool> {
        // The lending form, as RocksDB's raw iterator lends key() and value().
        Ok(self.cursor.seek_ref(key).map_err(silt_err)?.is_some())
    }
}

impl Engine for SiltEngine {
    fn write(&self, kvs: &[(&[u8], &[u8])]) -> EResult<()> {
        if let [(k, v)] = kvs {
            return self.db.put(k, v).map_err(|e| self.write_err(e));
        }
        let mut b = silt::WriteBatch::new();
        for (k, v) in kvs {
            b.put(k, v);
        }
        self.db
            .write(b, silt::WriteOptions::default())
            .map_err(|e| self.write_err(e))
    }

    fn delete(&self, keys: &[&[u8]]) -> EResult<()> {
        if let [k] = keys {
            return self.db.delete(k).map_err(|e| self.write_err(e));
        }
        let mut b = silt::WriteBatch::new();
        for k in keys {
            b.delete(k);
        }
        self.db
            .write(b, silt::WriteOptions::default())
            .map_err(|e| self.write_err(e))
    }

    fn single_delete(&self, keys: &[&[u8]]) -> EResult<()> {
        if let [k] = keys {
            return self.db.single_delete(k).map_err(|e| self.write_err(e));
        }
        let mut b = silt::WriteBatch::new();
        for k in keys {
            b.single_delete(k);
        }
        self.db
            .write(b, silt::WriteOptions::default())
            .map_err(|e| self.write_err(e))
    }

    fn get(&self, key: &[u8]) -> EResult<Option<usize>> {
        Ok(self.db.get(key).map_err(silt_err)?.map(|v| v.len()))
    }

    fn seeker(&self) -> EResult<Box<dyn Seeker + '_>> {
        Ok(Box::new(SiltSeeker {
            cursor: self.db.cursor(),
        }))
    }

    fn scan(&self, start: &[u8], n: usize) -> EResult<usize> {
        let mut read = 0;
        let mut it = self.db.range(start..);
        while read < n {
            match it.next_ref() {
                Some(kv) => {
                    let _ = kv.map_err(silt_err)?;
                    read += 1;
                }
                None => break,
            }
        }
        Ok(read)
    }

    fn for_each(
        &self,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
        each: &mut dyn FnMut(&[u8], &[u8]),
    ) -> EResult<u64> {
        use std::ops::Bound;
        let lo = lo.map_or(Bound::Unbounded, Bound::Included);
        let hi = hi.map_or(Bound::Unbounded, Bound::Excluded);
        let mut n = 0;
        let mut it = self.db.range::<&[u8], _>((lo, hi));
        while let Some(kv) = it.next_ref() {
            let (k, v) = kv.map_err(silt_err)?;
            each(k, v);
            n += 1;
        }
        Ok(n)
    }

    fn flush(&self) -> EResult<()> {
        self.db.flush().map_err(|e| self.write_err(e))
    }

    /// silt's own signal, `Db::wait_for_compactions` (as RocksDB's adapter uses
    /// `WaitForCompact`): no flush or compaction running or due. An earlier form polled
    /// counters and the process's CPU, and took a compaction waiting on its `fdatasync`
    /// (no CPU, no counter moving) for idleness: load images were saved mid-compaction.
    fn wait_idle(&self, max: Duration) {
        // A poisoned or closing database has nothing more to wait for; the cell's next
        // operation reports the error.
        let _ = self.db.wait_for_compactions(max);
    }

    fn stats(&self) -> Option<Value> {
        let s = self.db.stats();
        let levels: Vec<Value> = s
            .levels
            .iter()
            .map(|l| json!({"tables": l.tables, "bytes": l.bytes}))
            .collect();
        Some(json!({
            "levels": levels,
            "table_bytes": s.levels.iter().map(|l| l.bytes).sum::<u64>(),
            "memtable_bytes": s.memtable_bytes,
            "immutable_memtables": s.immutable_memtables,
            "cache_hits": s.cache_hits,
            "cache_misses": s.cache_misses,
            "user_bytes": s.user_bytes,
            "wal_bytes": s.wal_bytes,
            "wal_fsyncs": s.wal_fsyncs,
            "flush_bytes": s.flush_bytes,
            "compaction_read_bytes": s.compaction_read_bytes,
            "compaction_write_bytes": s.compaction_write_bytes,
            "flushes": s.flushes,
            "compactions": s.compactions,
            "tombstone_compactions": s.tombstone_compactions,
            "scan_compactions": s.scan_compactions,
            "scan_flushes": s.scan_flushes,
            "dead_run_records": s.dead_run_records,
            "dead_run_jumps": s.dead_run_jumps,
            "flush_dropped_entries": s.flush_dropped_entries,
            "flush_tables_below_l0": s.flush_tables_below_l0,
            "memtable_values_in_log": s.memtable_values_in_log,
            "delayed_writes": s.delayed_writes,
            "delay_micros": s.delay_micros,
            "write_amp": s.write_amp,
            "stalls": s.stalls,
            "stall_micros": s.stall_micros,
            "blob_files": s.blob_files,
            "blob_file_bytes": s.blob_file_bytes,
            "blob_live_bytes": s.blob_live_bytes,
            "blob_write_bytes": s.blob_write_bytes,
            "background_error": self.db.background_error(),
        }))
    }

    fn close(self: Box<Self>) -> EResult<()> {
        self.db.close().map_err(silt_err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_and_uncompiled_engines_are_unavailable() {
        assert!(availability("silt").is_ok());
        for (name, feature) in KNOWN {
            if let Some(f) = feature {
                match availability(name) {
                    Ok(()) => assert!(compiled(f)),
                    Err(e) => {
                        assert!(!compiled(f));
                        assert!(e.contains(&format!("--features {f}")), "{e}");
                    }
                }
            }
        }
        let e = availability("nosuch").unwrap_err();
        assert!(e.contains("unknown"), "{e}");
    }

    /// A cell on a poisoned silt database says what poisoned it; other errors read as
    /// before, and a poisoning with no recorded cause says so.
    #[test]
    fn a_poisoned_silt_write_names_its_cause() {
        let e = silt_err_with_cause(silt::Error::Poisoned, || {
            Some("log: fdatasync: Input/output error (os error 5)".into())
        });
        assert!(e.starts_with("silt: "), "{e}");
        assert!(
            e.ends_with("(cause: log: fdatasync: Input/output error (os error 5))"),
            "{e}"
        );
        let e = silt_err_with_cause(silt::Error::Poisoned, || None);
        assert!(e.ends_with("(cause: not recorded)"), "{e}");
        let closed = silt_err_with_cause(silt::Error::Closed, || panic!("not asked"));
        assert_eq!(closed, silt_err(silt::Error::Closed));
    }

    /// Every adapter: batches and single puts, gets, scans, bounded iteration, seeks, and
    /// a flush, a settle and a clean close; with sync none and full.
    fn round_trip(name: &str, sync_full: bool) {
        let dir = tempfile::tempdir().unwrap();
        let cfg = EngineConfig {
            dir: dir.path().join("db"),
            sync_full,
            cache_bytes: 1 << 20,
            fsync_delay_us: 0,
            fsync_delay_model: "merged".into(),
            threads: 2,
        };
        let e = open(name, &cfg).unwrap();
        e.write(&[(b"a", b"1"), (b"b", b"22"), (b"c", b"333")])
            .unwrap();
        e.write(&[(b"d", b"4444")]).unwrap();
        e.write(&[(b"b", b"55555")]).unwrap();
        assert_eq!(e.get(b"b").unwrap(), Some(5), "{name}");
        assert_eq!(e.get(b"x").unwrap(), None, "{name}");
        e.flush().unwrap();
        assert_eq!(e.scan(b"b", 2).unwrap(), 2, "{name}");
        assert_eq!(e.scan(b"c", 10).unwrap(), 2, "{name}");
        assert_eq!(e.scan(b"bb", 10).unwrap(), 2, "{name}");
        assert_eq!(e.scan(b"e", 10).unwrap(), 0, "{name}");
        let mut seen = Vec::new();
        let n = e
            .for_each(Some(b"b"), Some(b"d"), &mut |k, v| {
                seen.push((k.to_vec(), v.len()))
            })
            .unwrap();
        assert_eq!(n, 2, "{name}");
        assert_eq!(seen, vec![(b"b".to_vec(), 5), (b"c".to_vec(), 3)], "{name}");
        assert_eq!(e.for_each(None, None, &mut |_, _| ()).unwrap(), 4, "{name}");
        assert_eq!(e.for_each(None, Some(b"c"), &mut |_, _| ()).unwrap(), 2);
        assert_eq!(e.for_each(Some(b"c"), None, &mut |_, _| ()).unwrap(), 2);
        {
            let mut s = e.seeker().unwrap();
            assert!(s.seek(b"bb").unwrap(), "{name}");
            assert!(s.seek(b"").unwrap(), "{name}");
            assert!(!s.seek(b"e").unwrap(), "{name}");
        }
        // Two threads share the engine.
        std::thread::scope(|s| {
            for t in 0..2u8 {
                let e = &e;
                s.spawn(move || {
                    for i in 0..50u8 {
                        e.write(&[(&[b'z', t, i], b"v")]).unwrap();
                        assert_eq!(e.get(&[b'z', t, i]).unwrap(), Some(1));
                    }
                });
            }
        });
        assert_eq!(e.scan(b"z", 1000).unwrap(), 100, "{name}");
        // Deletes: batched, single, single_delete of a key put once, and an absent key.
        e.write(&[(b"y1", b"1"), (b"y2", b"2"), (b"y3", b"3"), (b"y4", b"4")])
            .unwrap();
        e.delete(&[b"y1", b"y2"]).unwrap();
        e.delete(&[b"y3"]).unwrap();
        e.single_delete(&[b"y4"]).unwrap();
        e.delete(&[b"nosuch"]).unwrap();
        e.single_delete(&[b"nosuch1", b"nosuch2"]).unwrap();
        for k in [b"y1", b"y2", b"y3", b"y4"] {
            assert_eq!(e.get(k).unwrap(), None, "{name}");
        }
        assert_eq!(e.scan(b"y", 1000).unwrap(), 100, "{name}");
        e.wait_idle(Duration::from_secs(5));
        if name.starts_with("silt") {
            assert!(e.stats().is_some());
        }
        e.close().unwrap();
        // What was written is there after a reopen.
        let e = open(name, &cfg).unwrap();
        assert_eq!(e.get(b"d").unwrap(), Some(4), "{name}");
        assert_eq!(e.for_each(None, None, &mut |_, _| ()).unwrap(), 104);
        e.close().unwrap();
    }

    #[test]
    fn silt_adapter_round_trips() {
        round_trip("silt", false);
        round_trip("silt", true);
        round_trip("silt-inline", false);
    }

    #[cfg(feature = "sqlite")]
    #[test]
    fn sqlite_adapter_round_trips() {
        round_trip("sqlite", false);
        round_trip("sqlite", true);
    }

    #[cfg(feature = "fjall")]
    #[test]
    fn fjall_adapter_round_trips() {
        round_trip("fjall", false);
        round_trip("fjall", true);
    }

    #[cfg(feature = "redb")]
    #[test]
    fn redb_adapter_round_trips() {
        round_trip("redb", false);
        round_trip("redb", true);
    }

    #[cfg(feature = "rocksdb")]
    #[test]
    fn rocksdb_adapter_round_trips() {
        round_trip("rocksdb", false);
        round_trip("rocksdb", true);
    }

    #[cfg(feature = "tidesdb")]
    #[test]
    fn tidesdb_adapter_round_trips() {
        round_trip("tidesdb", false);
        round_trip("tidesdb", true);
    }
}
