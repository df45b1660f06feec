//! TPC-C on redb: one redb table (`&[u8]` → `&[u8]`) per keyspace of [`super::kv`], the
//! cache budget and durability of the key-value adapter (`engine/peer_redb.rs`). redb's
//! write transactions run one at a time (`begin_write` waits for the writer before it),
//! so the writing transactions are serial and never conflict; read-only ones are
//! `begin_read` snapshots beside the writer. Serializable, with no aborts.

use std::ops::Bound;

use redb::{
    Durability, ReadTransaction, ReadableDatabase, ReadableTable, TableDefinition, WriteTransaction,
};

use super::kv::{KvStore, KvTxn, Table};
use super::*;

fn def(t: Table) -> TableDefinition<'static, &'static [u8], &'static [u8]> {
    TableDefinition::new(t.name())
}

fn rx(e: impl std::fmt::Display) -> TxError {
    TxError::Fatal(format!("redb: {e}"))
}

pub struct RedbStore {
    db: redb::Database,
    durability: Durability,
}

impl RedbStore {
    /// redb with the tables `tables` (the file is `tpcc.redb` whatever they are).
    pub fn open(cfg: &crate::engine::EngineConfig, tables: &[Table]) -> Result<RedbStore, String> {
        let e = |e: &dyn std::fmt::Display| format!("redb: {e}");
        std::fs::create_dir_all(&cfg.dir)
            .map_err(|x| format!("redb: create {}: {x}", cfg.dir.display()))?;
        let db = redb::Builder::new()
            .set_cache_size(usize::try_from(cfg.cache_bytes).unwrap_or(usize::MAX))
            .create(cfg.dir.join("tpcc.redb"))
            .map_err(|x| e(&x))?;
        let tx = db.begin_write().map_err(|x| e(&x))?;
        for &t in tables {
            tx.open_table(def(t)).map_err(|x| e(&x))?;
        }
        tx.commit().map_err(|x| e(&x))?;
        Ok(RedbStore {
            db,
            durability: if cfg.sync_full {
                Durability::Immediate
            } else {
                Durability::None
            },
        })
    }
}

pub enum RedbTxn {
    Write(Box<WriteTransaction>),
    Read(ReadTransaction),
}

/// `$body` with `$tbl` the open table of keyspace `$t`, in either kind of transaction.
macro_rules! with_table {
    ($self:expr, $t:expr, $tbl:ident => $body:expr) => {
        match $self {
            RedbTxn::Write(x) => {
                let $tbl = x.open_table(def($t)).map_err(rx)?;
                $body
            }
            RedbTxn::Read(x) => {
                let $tbl = x.open_table(def($t)).map_err(rx)?;
                $body
            }
        }
    };
}

impl KvTxn for RedbTxn {
    fn get(&mut self, t: Table, k: &[u8]) -> TxResult<Option<Vec<u8>>> {
        with_table!(self, t, tbl => {
            let v = tbl.get(k).map_err(rx)?.map(|v| v.value().to_vec());
            Ok(v)
        })
    }
    fn get_for_update(&mut self, t: Table, k: &[u8]) -> TxResult<Option<Vec<u8>>> {
        self.get(t, k) // the only writer
    }
    fn put(&mut self, t: Table, k: &[u8], v: &[u8]) -> TxResult<()> {
        match self {
            RedbTxn::Write(x) => {
                x.open_table(def(t)).map_err(rx)?.insert(k, v).map_err(rx)?;
                Ok(())
            }
            RedbTxn::Read(_) => Err(TxError::Fatal("redb: a write in a read transaction".into())),
        }
    }
    fn delete(&mut self, t: Table, k: &[u8]) -> TxResult<()> {
        match self {
            RedbTxn::Write(x) => {
                x.open_table(def(t)).map_err(rx)?.remove(k).map_err(rx)?;
                Ok(())
            }
            RedbTxn::Read(_) => Err(TxError::Fatal("redb: a write in a read transaction".into())),
        }
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
        with_table!(self, t, tbl => {
            let mut it = tbl
                .range::<&[u8]>((Bound::Included(lo), Bound::Excluded(hi)))
                .map_err(rx)?;
            let mut n = 0;
            while n < limit {
                let kv = if reverse { it.next_back() } else { it.next() };
                let Some(kv) = kv else { break };
                let (k, v) = kv.map_err(rx)?;
                each(k.value(), v.value());
                n += 1;
            }
            Ok(n)
        })
    }
    fn commit(self) -> TxResult<()> {
        match self {
            RedbTxn::Write(x) => x.commit().map_err(rx),
            RedbTxn::Read(_) => Ok(()),
        }
    }
}

impl KvStore for RedbStore {
    type Txn<'a> = RedbTxn;

    fn begin(&self, read_only: bool) -> TxResult<RedbTxn> {
        if read_only {
            return Ok(RedbTxn::Read(self.db.begin_read().map_err(rx)?));
        }
        let mut tx = self.db.begin_write().map_err(rx)?;
        tx.set_durability(self.durability).map_err(rx)?;
        Ok(RedbTxn::Write(Box::new(tx)))
    }

    fn load(&self, kvs: &[(Table, Vec<u8>, Vec<u8>)]) -> Result<(), String> {
        let mut tx = self.begin(false).map_err(|e| format!("{e:?}"))?;
        for (t, k, v) in kvs {
            tx.put(*t, k, v).map_err(|e| format!("{e:?}"))?;
        }
        tx.commit().map_err(|e| format!("{e:?}"))
    }

    fn mode(&self) -> String {
        "redb (one write transaction at a time; read-only ones at a snapshot)".into()
    }

    /// An empty durable commit: redb keeps `Durability::None` commits in memory until one.
    fn settle(&self) -> Result<(), String> {
        let e = |e: &dyn std::fmt::Display| format!("redb: {e}");
        let mut tx = self.db.begin_write().map_err(|x| e(&x))?;
        tx.set_durability(Durability::Immediate)
            .map_err(|x| e(&x))?;
        tx.commit().map_err(|x| e(&x))
    }
}
