//! TidesDB (an LSM-tree in C, through the `tidesdb` crate, which builds the bundled C source
//! with CMake): one database with one column family `kv`.
//!
//! * Sync `none`: the database's `SyncMode::None` (the log write is in the OS on commit, no
//!   fsync). Sync `full`: `SyncMode::Full`, an fsync of the log on every commit. TidesDB
//!   sets durability per database, not per commit, which is all the benchmark needs.
//! * Every write, delete and read is a transaction at TidesDB's default isolation (read
//!   committed), as its own benchtool does: begin, operations, commit (writes) or drop
//!   (reads). Deletes use `delete`; the queue workload's deletes use TidesDB's own
//!   `single_delete`.
//! * Cache: `--cache-bytes` as the database's block cache (`block_cache_size`).
//! * Like silt's defaults: no compression (an empty encoding pipeline, TidesDB's default),
//!   bloom filters on (TidesDB's default, 1% false positives, about silt's 10 bits per key),
//!   64 MiB memtable and 4 KiB key-log blocks (TidesDB's defaults). Key-value separation
//!   stays at TidesDB's default (values of 1 KiB and more go to its value log): it is part
//!   of the engine's design, so the 4 KiB large-value workload uses it.
//! * Logging: warnings and errors only, to stderr.
//! * The seek cursor is one read transaction with one iterator, kept for the thread's whole
//!   run and re-positioned with `seek` (as db_bench reuses its iterator).
//! * `flush` is `flush_memtable` (it waits for the immutable queue to drain); `wait_idle`
//!   polls until no flush or compaction runs and the process is quiet.

use std::time::Duration;

use serde_json::{json, Value};
use tidesdb::{ColumnFamily, ColumnFamilyConfig, Config, LogLevel, SyncMode, TidesDB};

use super::{EResult, Engine, EngineConfig, Seeker};

fn err(e: tidesdb::Error) -> String {
    format!("tidesdb: {e}")
}

const CF: &str = "kv";

pub struct TidesEngine {
    /// Borrows `*db`; dropped before it (see `Drop`).
    cf: Option<ColumnFamily<'static>>,
    /// Leaked in `open` so the column family handle can borrow it for `'static`; freed (and
    /// so closed) in `Drop`, after `cf`.
    db: &'static TidesDB,
}

impl TidesEngine {
    pub fn open(cfg: &EngineConfig) -> EResult<TidesEngine> {
        let sync = if cfg.sync_full {
            SyncMode::Full
        } else {
            SyncMode::None
        };
        let config = Config::new(&cfg.dir)
            .block_cache_size(cfg.cache_bytes as usize)
            .memtable_sync_mode(sync)
            .log_level(LogLevel::Warn);
        let db = TidesDB::open(config)
            .map_err(|e| format!("tidesdb: open {}: {e}", cfg.dir.display()))?;
        let db: &'static TidesDB = Box::leak(Box::new(db));
        let cf = match db.get_column_family(CF) {
            Ok(cf) => cf,
            Err(e) if e.is_not_found() => {
                let cf_cfg = ColumnFamilyConfig::new().enable_bloom_filter(true);
                db.create_column_family(CF, cf_cfg).map_err(err)?;
                db.get_column_family(CF).map_err(err)?
            }
            Err(e) => return Err(err(e)),
        };
        Ok(TidesEngine { cf: Some(cf), db })
    }

    fn cf(&self) -> &ColumnFamily<'static> {
        self.cf.as_ref().expect("column family open until drop")
    }
}

impl Drop for TidesEngine {
    fn drop(&mut self) {
        self.cf = None;
        // SAFETY: `db` came from `Box::leak` in `open`, and the only borrow of it left, the
        // column family handle, was dropped above; seekers borrow `self`, so none is alive.
        unsafe { drop(Box::from_raw(self.db as *const TidesDB as *mut TidesDB)) };
    }
}

/// A read transaction and an iterator over it, kept across seeks.
struct TidesSeeker {
    /// Borrows `*txn`: declared first so it is dropped first.
    iter: tidesdb::Iterator<'static>,
    _txn: Box<tidesdb::Transaction<'static>>,
}

/// Positions `it` at the first key `>= key` (TidesDB refuses an empty seek key, which is
/// the first key).
fn seek(it: &mut tidesdb::Iterator<'_>, key: &[u8]) -> EResult<()> {
    if key.is_empty() {
        it.seek_to_first().map_err(err)
    } else {
        it.seek(key).map_err(err)
    }
}

impl Seeker for TidesSeeker {
    fn seek(&mut self, key: &[u8]) -> EResult<bool> {
        seek(&mut self.iter, key)?;
        if !self.iter.is_valid() {
            return Ok(false);
        }
        self.iter.key_value().map_err(err)?;
        Ok(true)
    }
}

impl TidesSeeker {
    fn new(engine: &TidesEngine) -> EResult<TidesSeeker> {
        let txn = Box::new(engine.db.begin_transaction().map_err(err)?);
        // SAFETY: the transaction lives in a Box that is never moved out of or touched
        // mutably while the iterator lives, and `iter` is dropped before `txn` (field order).
        let txn_ref: &'static tidesdb::Transaction<'static> =
            unsafe { &*(txn.as_ref() as *const tidesdb::Transaction<'static>) };
        let iter = txn_ref.new_iterator(engine.cf()).map_err(err)?;
        Ok(TidesSeeker { iter, _txn: txn })
    }
}

impl Engine for TidesEngine {
    fn write(&self, kvs: &[(&[u8], &[u8])]) -> EResult<()> {
        let mut txn = self.db.begin_transaction().map_err(err)?;
        for (k, v) in kvs {
            txn.put(self.cf(), k, v).map_err(err)?;
        }
        txn.commit().map_err(err)
    }

    fn delete(&self, keys: &[&[u8]]) -> EResult<()> {
        let mut txn = self.db.begin_transaction().map_err(err)?;
        for k in keys {
            txn.delete(self.cf(), k).map_err(err)?;
        }
        txn.commit().map_err(err)
    }

    fn single_delete(&self, keys: &[&[u8]]) -> EResult<()> {
        let mut txn = self.db.begin_transaction().map_err(err)?;
        for k in keys {
            txn.single_delete(self.cf(), k).map_err(err)?;
        }
        txn.commit().map_err(err)
    }

    fn get(&self, key: &[u8]) -> EResult<Option<usize>> {
        let txn = self.db.begin_transaction().map_err(err)?;
        match txn.get(self.cf(), key) {
            Ok(v) => Ok(Some(v.len())),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(err(e)),
        }
    }

    fn seeker(&self) -> EResult<Box<dyn Seeker + '_>> {
        Ok(Box::new(TidesSeeker::new(self)?))
    }

    fn scan(&self, start: &[u8], n: usize) -> EResult<usize> {
        let txn = self.db.begin_transaction().map_err(err)?;
        let mut it = txn.new_iterator(self.cf()).map_err(err)?;
        seek(&mut it, start)?;
        let mut read = 0;
        while read < n && it.is_valid() {
            it.key_value().map_err(err)?;
            read += 1;
            it.next().map_err(err)?;
        }
        Ok(read)
    }

    fn for_each(
        &self,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
        each: &mut dyn FnMut(&[u8], &[u8]),
    ) -> EResult<u64> {
        let txn = self.db.begin_transaction().map_err(err)?;
        let mut it = txn.new_iterator(self.cf()).map_err(err)?;
        match lo {
            Some(lo) => seek(&mut it, lo)?,
            None => it.seek_to_first().map_err(err)?,
        }
        let mut n = 0;
        while it.is_valid() {
            let (k, v) = it.key_value().map_err(err)?;
            if hi.is_some_and(|hi| k.as_slice() >= hi) {
                break;
            }
            each(&k, &v);
            n += 1;
            it.next().map_err(err)?;
        }
        Ok(n)
    }

    fn flush(&self) -> EResult<()> {
        self.db.flush_memtable().map_err(err)?;
        // flush_memtable returns once the queue is handed over; wait for it to be written.
        while self.db.is_flushing() {
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    }

    fn wait_idle(&self, max: Duration) {
        let sample = || {
            // Table bytes move while a flush or a compaction writes.
            let table_bytes = self
                .cf()
                .get_stats()
                .map(|s| s.total_data_size)
                .unwrap_or_default();
            (
                table_bytes,
                self.db.is_flushing() || self.cf().is_compacting(),
            )
        };
        super::settle(max, &sample);
    }

    fn stats(&self) -> Option<Value> {
        let cf = self.cf().get_stats().ok()?;
        let cache = self.db.get_cache_stats().ok();
        Some(json!({
            "level_tables": cf.level_num_sstables,
            "level_bytes": cf.level_sizes,
            "total_data_size": cf.total_data_size,
            "read_amp": cf.read_amp,
            "cache_hits": cache.as_ref().map(|c| c.hits),
            "cache_misses": cache.as_ref().map(|c| c.misses),
        }))
    }

    fn close(self: Box<Self>) -> EResult<()> {
        // TidesDB closes in its handle's Drop (tidesdb_close), which flushes and joins its
        // threads; it reports no error.
        drop(self);
        Ok(())
    }
}
