//! TPC-C on fjall's optimistic transactions (`OptimisticTxDatabase`): one keyspace per
//! keyspace of [`super::kv`], configured as the key-value adapter configures its one
//! (`engine/peer_fjall.rs`: no compression, 10-bit Bloom filters, the cache budget).
//! A write transaction reads from its snapshot and records every key it reads and every
//! range it scans; its commit fails with `Conflict` if any of them changed since
//! (serializable snapshot isolation), and is retried. Read-only transactions are
//! `read_tx` snapshots. The load is one write transaction per chunk of rows.

use std::ops::Bound;

use fjall::config::{BloomConstructionPolicy, CompressionPolicy, FilterPolicy, FilterPolicyEntry};
use fjall::{
    CompressionType, KeyspaceCreateOptions, OptimisticTxDatabase, OptimisticTxKeyspace,
    OptimisticWriteTx, PersistMode, Readable, Snapshot,
};

use super::kv::{handle, open_handles, KvStore, KvTxn, Table};
use super::*;

pub struct FjallStore {
    db: OptimisticTxDatabase,
    ks: Vec<Option<OptimisticTxKeyspace>>,
    sync_full: bool,
}

fn fx(e: fjall::Error) -> TxError {
    TxError::Fatal(format!("fjall: {e}"))
}

impl FjallStore {
    /// fjall with the keyspaces `tables`.
    pub fn open(cfg: &crate::engine::EngineConfig, tables: &[Table]) -> Result<FjallStore, String> {
        let db = OptimisticTxDatabase::builder(&cfg.dir)
            .cache_size(cfg.cache_bytes)
            .journal_compression(CompressionType::None)
            .open()
            .map_err(|e| format!("fjall: open {}: {e}", cfg.dir.display()))?;
        let ks = open_handles(tables, |t| {
            db.keyspace(t.name(), || {
                KeyspaceCreateOptions::default()
                    .data_block_compression_policy(CompressionPolicy::all(CompressionType::None))
                    .filter_policy(FilterPolicy::all(FilterPolicyEntry::Bloom(
                        BloomConstructionPolicy::BitsPerKey(10.0),
                    )))
            })
        })
        .map_err(|e| format!("fjall: keyspace: {e}"))?;
        Ok(FjallStore {
            db,
            ks,
            sync_full: cfg.sync_full,
        })
    }

    fn persist(&self) -> Option<PersistMode> {
        Some(if self.sync_full {
            PersistMode::SyncData
        } else {
            PersistMode::Buffer
        })
    }
}

enum Tx {
    Write(OptimisticWriteTx),
    Read(Snapshot),
}

pub struct FjallTxn<'a> {
    t: Tx,
    ks: &'a [Option<OptimisticTxKeyspace>],
}

impl KvTxn for FjallTxn<'_> {
    fn get(&mut self, t: Table, k: &[u8]) -> TxResult<Option<Vec<u8>>> {
        let ks = handle(self.ks, t)?;
        match &self.t {
            Tx::Write(x) => x.get(ks, k),
            Tx::Read(x) => x.get(ks, k),
        }
        .map(|v| v.map(|v| v.to_vec()))
        .map_err(fx)
    }
    fn get_for_update(&mut self, t: Table, k: &[u8]) -> TxResult<Option<Vec<u8>>> {
        // Every read of a write transaction is checked at commit.
        self.get(t, k)
    }
    fn put(&mut self, t: Table, k: &[u8], v: &[u8]) -> TxResult<()> {
        match &mut self.t {
            Tx::Write(x) => {
                x.insert(handle(self.ks, t)?, k, v);
                Ok(())
            }
            Tx::Read(_) => Err(TxError::Fatal(
                "fjall: a write in a read transaction".into(),
            )),
        }
    }
    fn delete(&mut self, t: Table, k: &[u8]) -> TxResult<()> {
        match &mut self.t {
            Tx::Write(x) => {
                x.remove(handle(self.ks, t)?, k);
                Ok(())
            }
            Tx::Read(_) => Err(TxError::Fatal(
                "fjall: a write in a read transaction".into(),
            )),
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
        let ks = handle(self.ks, t)?;
        let r = (Bound::Included(lo), Bound::Excluded(hi));
        let mut it = match &self.t {
            Tx::Write(x) => x.range::<&[u8], _>(ks, r),
            Tx::Read(x) => x.range::<&[u8], _>(ks, r),
        };
        let mut n = 0;
        while n < limit {
            let g = if reverse { it.next_back() } else { it.next() };
            let Some(g) = g else { break };
            let (k, v) = g.into_inner().map_err(fx)?;
            each(&k, &v);
            n += 1;
        }
        Ok(n)
    }
    fn commit(self) -> TxResult<()> {
        match self.t {
            Tx::Write(x) => match x.commit().map_err(fx)? {
                Ok(()) => Ok(()),
                Err(fjall::Conflict) => Err(TxError::Retry("fjall: conflict".into())),
            },
            Tx::Read(_) => Ok(()),
        }
    }
}

impl KvStore for FjallStore {
    type Txn<'a> = FjallTxn<'a>;

    fn begin(&self, read_only: bool) -> TxResult<FjallTxn<'_>> {
        let t = if read_only {
            Tx::Read(self.db.read_tx())
        } else {
            Tx::Write(self.db.write_tx().map_err(fx)?.durability(self.persist()))
        };
        Ok(FjallTxn { t, ks: &self.ks })
    }

    fn load(&self, kvs: &[(Table, Vec<u8>, Vec<u8>)]) -> Result<(), String> {
        let mut tx = self
            .db
            .write_tx()
            .map_err(|e| format!("fjall: {e}"))?
            .durability(self.persist());
        for (t, k, v) in kvs {
            let ks = handle(&self.ks, *t).map_err(|e| format!("fjall: load: {e:?}"))?;
            tx.insert(ks, k.as_slice(), v.as_slice());
        }
        match tx.commit().map_err(|e| format!("fjall: load: {e}"))? {
            Ok(()) => Ok(()),
            Err(_) => Err("fjall: load: conflict".into()),
        }
    }

    fn mode(&self) -> String {
        "fjall OptimisticTxDatabase (serializable snapshot: reads and scans checked at commit)"
            .into()
    }

    fn settle(&self) -> Result<(), String> {
        for ks in self.ks.iter().flatten() {
            ks.inner()
                .rotate_memtable_and_wait()
                .map_err(|e| format!("fjall: flush: {e}"))?;
        }
        let db = self.db.inner();
        crate::engine::settle(std::time::Duration::from_secs(120), &|| {
            (
                0,
                db.outstanding_flushes() > 0 || db.active_compactions() > 0,
            )
        });
        Ok(())
    }
}
