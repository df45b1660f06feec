//! TPC-C on TidesDB's transactions: one column family per keyspace of [`super::kv`]
//! (Bloom filters on, the cache budget and sync mode of the key-value adapter,
//! `engine/peer_tidesdb.rs`). Writing transactions run at TidesDB's `Serializable` (a
//! frozen snapshot; at commit every key read must be unchanged, no key may have appeared
//! in a scanned range, and written keys are first-committer-wins); a conflict is retried.
//! Read-only transactions run at `Snapshot` (a frozen snapshot; nothing to validate).
//! Range scans use `new_range_iterator` over the scan's bounds.

use tidesdb::{
    ColumnFamily, ColumnFamilyConfig, Config, IsolationLevel, LogLevel, SyncMode, TidesDB,
    Transaction,
};

use super::kv::{handle, open_handles, KvStore, KvTxn, Table};
use super::*;

fn tx(e: tidesdb::Error) -> TxError {
    if e.is_conflict() || e.is_locked() {
        TxError::Retry(format!("tidesdb: {e}"))
    } else {
        TxError::Fatal(format!("tidesdb: {e}"))
    }
}

pub struct TidesStore {
    /// Borrow `*db`; dropped before it (see `Drop`).
    cfs: Vec<Option<ColumnFamily<'static>>>,
    /// Leaked in `open` so the column family handles can borrow it for `'static`; freed
    /// (and so closed) in `Drop`, after them.
    db: &'static TidesDB,
}

impl TidesStore {
    /// TidesDB with the column families `tables`.
    pub fn open(cfg: &crate::engine::EngineConfig, tables: &[Table]) -> Result<TidesStore, String> {
        let e = |e: tidesdb::Error| format!("tidesdb: {e}");
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
            .map_err(|x| format!("tidesdb: open {}: {x}", cfg.dir.display()))?;
        let db: &'static TidesDB = Box::leak(Box::new(db));
        let cfs = open_handles(tables, |t| match db.get_column_family(t.name()) {
            Ok(cf) => Ok(cf),
            Err(x) if x.is_not_found() => {
                db.create_column_family(
                    t.name(),
                    ColumnFamilyConfig::new().enable_bloom_filter(true),
                )
                .map_err(e)?;
                db.get_column_family(t.name()).map_err(e)
            }
            Err(x) => Err(e(x)),
        });
        match cfs {
            Ok(cfs) => Ok(TidesStore { cfs, db }),
            Err(x) => {
                // SAFETY: as in `Drop`: leaked above, and no handle of it is left.
                unsafe { drop(Box::from_raw(db as *const TidesDB as *mut TidesDB)) };
                Err(x)
            }
        }
    }
}

impl Drop for TidesStore {
    fn drop(&mut self) {
        self.cfs.clear();
        // SAFETY: `db` came from `Box::leak` in `open`, and the only borrows of it left,
        // the column family handles, were dropped above; transactions borrow `self`.
        unsafe { drop(Box::from_raw(self.db as *const TidesDB as *mut TidesDB)) };
    }
}

pub struct TidesTxn<'a> {
    t: Transaction<'static>,
    cfs: &'a [Option<ColumnFamily<'static>>],
}

impl KvTxn for TidesTxn<'_> {
    fn get(&mut self, t: Table, k: &[u8]) -> TxResult<Option<Vec<u8>>> {
        match self.t.get(handle(self.cfs, t)?, k) {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(tx(e)),
        }
    }
    fn get_for_update(&mut self, t: Table, k: &[u8]) -> TxResult<Option<Vec<u8>>> {
        // Serializable: every key read is validated at commit.
        self.get(t, k)
    }
    fn put(&mut self, t: Table, k: &[u8], v: &[u8]) -> TxResult<()> {
        self.t.put(handle(self.cfs, t)?, k, v).map_err(tx)
    }
    fn delete(&mut self, t: Table, k: &[u8]) -> TxResult<()> {
        self.t.delete(handle(self.cfs, t)?, k).map_err(tx)
    }
    fn single_delete(&mut self, t: Table, k: &[u8]) -> TxResult<()> {
        self.t.single_delete(handle(self.cfs, t)?, k).map_err(tx)
    }
    fn scan(
        &mut self,
        t: Table,
        lo: &[u8],
        hi: &[u8],
        limit: usize,
        reverse: bool,
        each: &mut dyn FnMut(&[u8], &[u8]),
    ) -> TxResult<usize> {
        let cf = handle(self.cfs, t)?;
        let mut it = self.t.new_range_iterator(cf, lo, hi).map_err(tx)?;
        if reverse {
            it.seek_for_prev(hi).map_err(tx)?;
        } else if lo.is_empty() {
            it.seek_to_first().map_err(tx)?;
        } else {
            it.seek(lo).map_err(tx)?;
        }
        let mut n = 0;
        while n < limit && it.is_valid() {
            let (k, v) = it.key_value().map_err(tx)?;
            let inside = k.as_slice() >= lo && k.as_slice() < hi;
            if inside {
                each(&k, &v);
                n += 1;
            } else if (reverse && k.as_slice() < lo) || (!reverse && k.as_slice() >= hi) {
                break;
            }
            if reverse {
                it.prev().map_err(tx)?;
            } else {
                it.next().map_err(tx)?;
            }
        }
        Ok(n)
    }
    fn commit(mut self) -> TxResult<()> {
        self.t.commit().map_err(tx)
    }
}

impl KvStore for TidesStore {
    type Txn<'a> = TidesTxn<'a>;

    fn begin(&self, read_only: bool) -> TxResult<TidesTxn<'_>> {
        let level = if read_only {
            IsolationLevel::Snapshot
        } else {
            IsolationLevel::Serializable
        };
        let t = self
            .db
            .begin_transaction_with_isolation(level)
            .map_err(tx)?;
        Ok(TidesTxn { t, cfs: &self.cfs })
    }

    fn load(&self, kvs: &[(Table, Vec<u8>, Vec<u8>)]) -> Result<(), String> {
        let e = |e: tidesdb::Error| format!("tidesdb: load: {e}");
        let mut t = self.db.begin_transaction().map_err(e)?;
        for (table, k, v) in kvs {
            let cf = handle(&self.cfs, *table).map_err(|x| format!("tidesdb: load: {x:?}"))?;
            t.put(cf, k, v).map_err(e)?;
        }
        t.commit().map_err(e)
    }

    fn mode(&self) -> String {
        "tidesdb Serializable (read-only at Snapshot)".into()
    }

    fn has_single_delete(&self) -> bool {
        true
    }

    fn settle(&self) -> Result<(), String> {
        self.db
            .flush_memtable()
            .map_err(|e| format!("tidesdb: flush: {e}"))?;
        while self.db.is_flushing() {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        crate::engine::settle(std::time::Duration::from_secs(120), &|| {
            (
                0,
                self.db.is_flushing() || self.cfs.iter().flatten().any(|c| c.is_compacting()),
            )
        });
        Ok(())
    }
}
