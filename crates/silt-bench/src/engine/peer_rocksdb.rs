//! RocksDB (through the `rocksdb` crate, which builds RocksDB's C++ source; its bindgen step
//! needs Debian's `libclang-dev`): one database, the default column family.
//!
//! * Sync `none`: `WriteOptions::set_sync(false)` (the log write is in the OS on return,
//!   RocksDB's default). Sync `full`: `set_sync(true)`, an fdatasync of the log before the
//!   commit returns; RocksDB's own write groups share one sync among concurrent writers.
//! * Deletes: `delete` (one key) or a `WriteBatch` of deletes; the queue workload's deletes
//!   use RocksDB's `SingleDelete`, which silt copies.
//! * Cache: `--cache-bytes` as one LRU block cache.
//! * Like silt's defaults: no compression (the crate is built without compression
//!   libraries, and the type is set to none explicitly), a full bloom filter of 10 bits per
//!   key, 4 KiB blocks, a 64 MiB memtable (RocksDB's defaults), leveled compaction with
//!   dynamic level sizes (RocksDB's default), two background jobs (RocksDB's default).
//! * The seek cursor is one raw iterator kept for the thread's whole run, as every adapter
//!   keeps its cursor. (db_bench's `seekrandom` makes a new iterator per seek unless
//!   `--use_tailing_iterator`; `scan --range-size 1` is that loop here: new iterator, one
//!   seek, one pair. `scripts/rocksdb_check.py` compares both with db_bench.)
//! * `flush` is `flush()` (it waits); `wait_idle` is `wait_for_compact` with a timeout.

use std::time::Duration;

use rocksdb::{
    BlockBasedOptions, Cache, DBCompressionType, DBRawIterator, Options, ReadOptions,
    WaitForCompactOptions, WriteBatch, WriteOptions, DB,
};
use serde_json::{json, Value};

use super::{EResult, Engine, EngineConfig, Seeker};

fn err(e: rocksdb::Error) -> String {
    format!("rocksdb: {e}")
}

pub struct RocksEngine {
    db: DB,
    wo: WriteOptions,
    /// Kept alive for as long as the table factory that refers to it.
    _cache: Cache,
}

impl RocksEngine {
    pub fn open(cfg: &EngineConfig) -> EResult<RocksEngine> {
        let cache = Cache::new_lru_cache(cfg.cache_bytes as usize);
        let mut table = BlockBasedOptions::default();
        table.set_block_cache(&cache);
        table.set_bloom_filter(10.0, false);
        table.set_block_size(4096);
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.set_compression_type(DBCompressionType::None);
        opts.set_wal_compression_type(DBCompressionType::None);
        opts.set_write_buffer_size(64 << 20);
        opts.set_level_compaction_dynamic_level_bytes(true);
        opts.set_block_based_table_factory(&table);
        let db = DB::open(&opts, &cfg.dir)
            .map_err(|e| format!("rocksdb: open {}: {e}", cfg.dir.display()))?;
        let mut wo = WriteOptions::default();
        wo.set_sync(cfg.sync_full);
        Ok(RocksEngine {
            db,
            wo,
            _cache: cache,
        })
    }

    fn int_property(&self, name: &str) -> Option<u64> {
        self.db.property_int_value(name).ok().flatten()
    }
}

struct RocksSeeker<'a> {
    it: DBRawIterator<'a>,
}

impl Seeker for RocksSeeker<'_> {
    fn seek(&mut self, key: &[u8]) -> EResult<bool> {
        self.it.seek(key);
        if self.it.valid() {
            // Read the pair, as every adapter does.
            let _ = (self.it.key(), self.it.value());
            return Ok(true);
        }
        self.it.status().map_err(err)?;
        Ok(false)
    }
}

impl Engine for RocksEngine {
    fn write(&self, kvs: &[(&[u8], &[u8])]) -> EResult<()> {
        if let [(k, v)] = kvs {
            return self.db.put_opt(k, v, &self.wo).map_err(err);
        }
        let mut b = WriteBatch::default();
        for (k, v) in kvs {
            b.put(k, v);
        }
        self.db.write_opt(b, &self.wo).map_err(err)
    }

    fn delete(&self, keys: &[&[u8]]) -> EResult<()> {
        if let [k] = keys {
            return self.db.delete_opt(k, &self.wo).map_err(err);
        }
        let mut b = WriteBatch::default();
        for k in keys {
            b.delete(k);
        }
        self.db.write_opt(b, &self.wo).map_err(err)
    }

    fn single_delete(&self, keys: &[&[u8]]) -> EResult<()> {
        let mut b = WriteBatch::default();
        for k in keys {
            b.single_delete(k);
        }
        self.db.write_opt(b, &self.wo).map_err(err)
    }

    fn get(&self, key: &[u8]) -> EResult<Option<usize>> {
        Ok(self.db.get_pinned(key).map_err(err)?.map(|v| v.len()))
    }

    fn seeker(&self) -> EResult<Box<dyn Seeker + '_>> {
        Ok(Box::new(RocksSeeker {
            it: self.db.raw_iterator(),
        }))
    }

    fn scan(&self, start: &[u8], n: usize) -> EResult<usize> {
        let mut it = self.db.raw_iterator();
        it.seek(start);
        let mut read = 0;
        while read < n && it.valid() {
            let _ = (it.key(), it.value());
            read += 1;
            it.next();
        }
        it.status().map_err(err)?;
        Ok(read)
    }

    fn for_each(
        &self,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
        each: &mut dyn FnMut(&[u8], &[u8]),
    ) -> EResult<u64> {
        let mut ro = ReadOptions::default();
        if let Some(hi) = hi {
            ro.set_iterate_upper_bound(hi);
        }
        let mut it = self.db.raw_iterator_opt(ro);
        match lo {
            Some(lo) => it.seek(lo),
            None => it.seek_to_first(),
        }
        let mut n = 0;
        while it.valid() {
            if let (Some(k), Some(v)) = (it.key(), it.value()) {
                each(k, v);
                n += 1;
            }
            it.next();
        }
        it.status().map_err(err)?;
        Ok(n)
    }

    fn flush(&self) -> EResult<()> {
        self.db.flush().map_err(err)
    }

    fn wait_idle(&self, max: Duration) {
        let mut o = WaitForCompactOptions::default();
        o.set_timeout(max.as_micros() as u64);
        // A timeout is reported as an error; either way the wait is over.
        let _ = self.db.wait_for_compact(&o);
    }

    fn stats(&self) -> Option<Value> {
        let levels: Vec<Option<u64>> = (0..7)
            .map(|l| self.int_property(&format!("rocksdb.num-files-at-level{l}")))
            .collect();
        Some(json!({
            "level_files": levels,
            "live_sst_bytes": self.int_property("rocksdb.live-sst-files-size"),
            "estimate_live_data_bytes": self.int_property("rocksdb.estimate-live-data-size"),
            "block_cache_usage": self.int_property("rocksdb.block-cache-usage"),
            "num_immutable_memtables": self.int_property("rocksdb.num-immutable-mem-table"),
        }))
    }

    fn close(self: Box<Self>) -> EResult<()> {
        self.db.flush_wal(true).map_err(err)?;
        drop(self);
        Ok(())
    }
}
