//! TPC-C on RocksDB's transactions (the `rocksdb` crate): `TransactionDB` (pessimistic:
//! `get_for_update` and writes lock the key, deadlock detection on, lock timeout 1 s as
//! silt's) or `OptimisticTransactionDB` (keys read for update and written are checked at
//! commit). One column family per keyspace of [`super::kv`], configured as the key-value
//! adapter configures the default one (`engine/peer_rocksdb.rs`: no compression, 10-bit
//! Bloom filters, 4 KiB blocks, one shared LRU cache, 64 MiB memtables).
//!
//! RocksDB has no isolation levels: a plain `get` in a transaction reads the latest
//! committed value (read committed), `get_for_update` protects a key (a lock, or a check
//! at commit against writes after the read), and nothing protects a scanned range. The
//! writing transactions run like that (every read-modify-write of TPC-C is a
//! `get_for_update`, so no update is lost, and Delivery re-reads the new-order it claims
//! with `get_for_update`); the read-only ones (Order-Status, Stock-Level, the final
//! check) take the transaction's snapshot (`set_snapshot`) and read at it, a consistent
//! view. Conflicts (`Busy`), deadlocks (`Busy`) and lock timeouts (`TimedOut`) are
//! retried.

use rocksdb::{
    BlockBasedOptions, Cache, ColumnFamilyDescriptor, DBCompressionType, ErrorKind,
    OptimisticTransactionDB, OptimisticTransactionOptions, Options, ReadOptions, SingleThreaded,
    Transaction, TransactionDB, TransactionDBOptions, TransactionOptions,
    WriteBatchWithTransaction, WriteOptions,
};

use super::kv::{KvStore, KvTxn, Table};
use super::*;

type Pess = TransactionDB<SingleThreaded>;
type Occ = OptimisticTransactionDB<SingleThreaded>;

enum Db {
    Pess(Pess),
    Occ(Occ),
}

pub struct RocksStore {
    db: Db,
    tables: Vec<Table>,
    wo: WriteOptions,
    _cache: Cache,
}

fn rx(e: rocksdb::Error) -> TxError {
    match e.kind() {
        ErrorKind::Busy | ErrorKind::TimedOut | ErrorKind::TryAgain => {
            TxError::Retry(format!("rocksdb: {e}"))
        }
        _ => TxError::Fatal(format!("rocksdb: {e}")),
    }
}

impl RocksStore {
    /// RocksDB with the column families `tables`: `TransactionDB`, or
    /// `OptimisticTransactionDB` if `optimistic`.
    pub fn open(
        cfg: &crate::engine::EngineConfig,
        tables: &[Table],
        optimistic: bool,
    ) -> Result<RocksStore, String> {
        let cache = Cache::new_lru_cache(cfg.cache_bytes as usize);
        let mut table = BlockBasedOptions::default();
        table.set_block_cache(&cache);
        table.set_bloom_filter(10.0, false);
        table.set_block_size(4096);
        let mut cf_opts = Options::default();
        cf_opts.set_compression_type(DBCompressionType::None);
        cf_opts.set_write_buffer_size(64 << 20);
        cf_opts.set_level_compaction_dynamic_level_bytes(true);
        cf_opts.set_block_based_table_factory(&table);
        let mut opts = cf_opts.clone();
        opts.create_if_missing(true);
        opts.create_missing_column_families(true);
        opts.set_wal_compression_type(DBCompressionType::None);
        let cfs: Vec<ColumnFamilyDescriptor> = tables
            .iter()
            .map(|t| ColumnFamilyDescriptor::new(t.name(), cf_opts.clone()))
            .collect();
        let e = |e: rocksdb::Error| format!("rocksdb: open {}: {e}", cfg.dir.display());
        let db = if optimistic {
            Db::Occ(Occ::open_cf_descriptors(&opts, &cfg.dir, cfs).map_err(e)?)
        } else {
            let mut t = TransactionDBOptions::default();
            t.set_default_lock_timeout(1000);
            t.set_txn_lock_timeout(1000);
            Db::Pess(Pess::open_cf_descriptors(&opts, &t, &cfg.dir, cfs).map_err(e)?)
        };
        let mut wo = WriteOptions::default();
        wo.set_sync(cfg.sync_full);
        Ok(RocksStore {
            db,
            tables: tables.to_vec(),
            wo,
            _cache: cache,
        })
    }

    fn cf(&self, t: Table) -> TxResult<&rocksdb::ColumnFamily> {
        match &self.db {
            Db::Pess(db) => db.cf_handle(t.name()),
            Db::Occ(db) => db.cf_handle(t.name()),
        }
        .ok_or_else(|| TxError::Fatal(format!("rocksdb: column family {} is not open", t.name())))
    }

    /// A RocksDB integer property (`None` for the single-threaded `TransactionDB`, which
    /// the crate gives no property getter: its settle relies on the process going quiet).
    fn int_property(&self, name: &str) -> Option<u64> {
        match &self.db {
            Db::Pess(_) => None,
            Db::Occ(db) => db.property_int_value(name).ok().flatten(),
        }
    }
}

enum Txn<'a> {
    Pess(Transaction<'a, Pess>),
    Occ(Transaction<'a, Occ>),
}

pub struct RocksTxn<'a> {
    t: Txn<'a>,
    store: &'a RocksStore,
    /// Read at the transaction's snapshot (read-only transactions).
    snapshot: bool,
}

/// `$body` with `$t` bound to the transaction, whichever kind it is.
macro_rules! on {
    ($self:expr, $t:ident => $body:expr) => {
        match &$self.t {
            Txn::Pess($t) => $body,
            Txn::Occ($t) => $body,
        }
    };
}

impl RocksTxn<'_> {
    fn read_opts(&self) -> ReadOptions {
        let mut ro = ReadOptions::default();
        if self.snapshot {
            on!(self, t => ro.set_snapshot(&t.snapshot()));
        }
        ro
    }
}

impl KvTxn for RocksTxn<'_> {
    fn get(&mut self, t: Table, k: &[u8]) -> TxResult<Option<Vec<u8>>> {
        let cf = self.store.cf(t)?;
        let ro = self.read_opts();
        on!(self, x => x.get_cf_opt(cf, k, &ro)).map_err(rx)
    }
    fn get_for_update(&mut self, t: Table, k: &[u8]) -> TxResult<Option<Vec<u8>>> {
        let cf = self.store.cf(t)?;
        on!(self, x => x.get_for_update_cf(cf, k, true)).map_err(rx)
    }
    fn put(&mut self, t: Table, k: &[u8], v: &[u8]) -> TxResult<()> {
        let cf = self.store.cf(t)?;
        on!(self, x => x.put_cf(cf, k, v)).map_err(rx)
    }
    fn delete(&mut self, t: Table, k: &[u8]) -> TxResult<()> {
        let cf = self.store.cf(t)?;
        on!(self, x => x.delete_cf(cf, k)).map_err(rx)
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
        let cf = self.store.cf(t)?;
        let mut ro = self.read_opts();
        ro.set_iterate_lower_bound(lo);
        ro.set_iterate_upper_bound(hi);
        on!(self, x => {
            let mut it = x.raw_iterator_cf_opt(cf, ro);
            if reverse {
                it.seek_to_last();
            } else {
                it.seek_to_first();
            }
            let mut n = 0;
            while n < limit && it.valid() {
                each(it.key().expect("valid"), it.value().expect("valid"));
                n += 1;
                if reverse {
                    it.prev();
                } else {
                    it.next();
                }
            }
            it.status().map_err(rx)?;
            Ok(n)
        })
    }
    fn commit(self) -> TxResult<()> {
        match self.t {
            Txn::Pess(t) => t.commit(),
            Txn::Occ(t) => t.commit(),
        }
        .map_err(rx)
    }
}

impl KvStore for RocksStore {
    type Txn<'a> = RocksTxn<'a>;

    fn begin(&self, read_only: bool) -> TxResult<RocksTxn<'_>> {
        let t = match &self.db {
            Db::Pess(db) => {
                let mut o = TransactionOptions::default();
                o.set_deadlock_detect(true);
                o.set_lock_timeout(1000);
                o.set_snapshot(read_only);
                Txn::Pess(db.transaction_opt(&self.wo, &o))
            }
            Db::Occ(db) => {
                let mut o = OptimisticTransactionOptions::default();
                o.set_snapshot(read_only);
                Txn::Occ(db.transaction_opt(&self.wo, &o))
            }
        };
        Ok(RocksTxn {
            t,
            store: self,
            snapshot: read_only,
        })
    }

    fn load(&self, kvs: &[(Table, Vec<u8>, Vec<u8>)]) -> Result<(), String> {
        let mut b = WriteBatchWithTransaction::<true>::default();
        for (t, k, v) in kvs {
            b.put_cf(
                self.cf(*t).map_err(|e| format!("rocksdb: load: {e:?}"))?,
                k,
                v,
            );
        }
        match &self.db {
            Db::Pess(db) => db.write_opt(b, &self.wo),
            Db::Occ(db) => db.write_opt(b, &self.wo),
        }
        .map_err(|e| format!("rocksdb: load: {e}"))
    }

    fn mode(&self) -> String {
        match &self.db {
            Db::Pess(_) => "rocksdb TransactionDB (pessimistic; get_for_update locks, reads read committed, read-only at a snapshot)".into(),
            Db::Occ(_) => "rocksdb OptimisticTransactionDB (get_for_update checked at commit, reads read committed, read-only at a snapshot)".into(),
        }
    }

    /// Flushes every column family, then waits until no compaction is pending or running.
    fn settle(&self) -> Result<(), String> {
        for &t in &self.tables {
            let cf = self.cf(t).map_err(|e| format!("rocksdb: flush: {e:?}"))?;
            match &self.db {
                Db::Pess(db) => db.flush_cf(cf),
                Db::Occ(db) => db.flush_cf(cf),
            }
            .map_err(|e| format!("rocksdb: flush: {e}"))?;
        }
        crate::engine::settle(std::time::Duration::from_secs(120), &|| {
            let busy = self.int_property("rocksdb.compaction-pending").unwrap_or(0) > 0
                || self
                    .int_property("rocksdb.num-running-compactions")
                    .unwrap_or(0)
                    > 0
                || self
                    .int_property("rocksdb.num-running-flushes")
                    .unwrap_or(0)
                    > 0;
            (0, busy)
        });
        Ok(())
    }
}
