//! fjall (an LSM-tree in Rust): one `Database` with one keyspace `kv`.
//!
//! * Sync `none`: a write is in the journal's OS buffers on return (`PersistMode::Buffer`,
//!   fjall's default), with no fsync. Sync `full`: every write is a `WriteBatch` with
//!   durability `PersistMode::SyncData` (an fdatasync of the journal, under the journal
//!   lock, before the commit returns). fjall does not share one fsync among concurrent
//!   committers.
//! * Deletes: `remove` (sync none, one key) or a batch of `remove`s; fjall's
//!   `remove_weak` (its single delete) is hidden and experimental, so it is not used.
//! * Cache: `--cache-bytes` as the database's block cache (`cache_size`).
//! * Like silt's defaults: no compression (data blocks and journal), a bloom filter of 10
//!   bits per key on every level (fjall's default is a 0.01% false-positive rate on L0 and
//!   10 bits per key below), 64 MiB memtable and 4 KiB blocks (fjall's defaults).
//! * fjall has no reusable cursor: every seek is a new range iterator (`range(key..)`),
//!   read up to its first pair.
//! * `flush` rotates the memtable and waits for it to be written; `wait_idle` polls until
//!   no flush is outstanding, no compaction runs and the process is quiet.

use std::ops::Bound;
use std::time::Duration;

use fjall::config::{BloomConstructionPolicy, CompressionPolicy, FilterPolicy, FilterPolicyEntry};
use fjall::{CompressionType, Database, Keyspace, KeyspaceCreateOptions, PersistMode};
use serde_json::{json, Value};

use super::{EResult, Engine, EngineConfig, Seeker};

fn err(e: fjall::Error) -> String {
    format!("fjall: {e}")
}

pub struct FjallEngine {
    db: Database,
    ks: Keyspace,
    sync_full: bool,
}

impl FjallEngine {
    pub fn open(cfg: &EngineConfig) -> EResult<FjallEngine> {
        let db = Database::builder(&cfg.dir)
            .cache_size(cfg.cache_bytes)
            .journal_compression(CompressionType::None)
            .open()
            .map_err(|e| format!("fjall: open {}: {e}", cfg.dir.display()))?;
        let ks = db
            .keyspace("kv", || {
                KeyspaceCreateOptions::default()
                    .data_block_compression_policy(CompressionPolicy::all(CompressionType::None))
                    .filter_policy(FilterPolicy::all(FilterPolicyEntry::Bloom(
                        BloomConstructionPolicy::BitsPerKey(10.0),
                    )))
            })
            .map_err(err)?;
        Ok(FjallEngine {
            db,
            ks,
            sync_full: cfg.sync_full,
        })
    }
}

struct FjallSeeker<'a> {
    ks: &'a Keyspace,
}

impl Seeker for FjallSeeker<'_> {
    fn seek(&mut self, key: &[u8]) -> EResult<bool> {
        match self.ks.range(key..).next() {
            Some(g) => {
                g.into_inner().map_err(err)?;
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

impl Engine for FjallEngine {
    fn write(&self, kvs: &[(&[u8], &[u8])]) -> EResult<()> {
        if let ([(k, v)], false) = (kvs, self.sync_full) {
            return self.ks.insert(*k, *v).map_err(err);
        }
        let mode = if self.sync_full {
            PersistMode::SyncData
        } else {
            PersistMode::Buffer
        };
        let mut b = self.db.batch().durability(Some(mode));
        for (k, v) in kvs {
            b.insert(&self.ks, *k, *v);
        }
        b.commit().map_err(err)
    }

    fn delete(&self, keys: &[&[u8]]) -> EResult<()> {
        if let ([k], false) = (keys, self.sync_full) {
            return self.ks.remove(*k).map_err(err);
        }
        let mode = if self.sync_full {
            PersistMode::SyncData
        } else {
            PersistMode::Buffer
        };
        let mut b = self.db.batch().durability(Some(mode));
        for k in keys {
            b.remove(&self.ks, *k);
        }
        b.commit().map_err(err)
    }

    fn get(&self, key: &[u8]) -> EResult<Option<usize>> {
        Ok(self.ks.get(key).map_err(err)?.map(|v| v.len()))
    }

    fn seeker(&self) -> EResult<Box<dyn Seeker + '_>> {
        Ok(Box::new(FjallSeeker { ks: &self.ks }))
    }

    fn scan(&self, start: &[u8], n: usize) -> EResult<usize> {
        let mut read = 0;
        for g in self.ks.range(start..).take(n) {
            g.into_inner().map_err(err)?;
            read += 1;
        }
        Ok(read)
    }

    fn for_each(
        &self,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
        each: &mut dyn FnMut(&[u8], &[u8]),
    ) -> EResult<u64> {
        let lo = lo.map_or(Bound::Unbounded, Bound::Included);
        let hi = hi.map_or(Bound::Unbounded, Bound::Excluded);
        let mut n = 0;
        for g in self.ks.range::<&[u8], _>((lo, hi)) {
            let (k, v) = g.into_inner().map_err(err)?;
            each(&k, &v);
            n += 1;
        }
        Ok(n)
    }

    fn flush(&self) -> EResult<()> {
        self.ks.rotate_memtable_and_wait().map_err(err)
    }

    fn wait_idle(&self, max: Duration) {
        super::settle(max, &|| {
            (
                self.db.compactions_completed() as u64,
                self.db.outstanding_flushes() > 0 || self.db.active_compactions() > 0,
            )
        });
    }

    fn stats(&self) -> Option<Value> {
        Some(json!({
            "tables": self.ks.table_count(),
            "l0_tables": self.ks.l0_table_count(),
            "disk_space": self.db.disk_space().ok(),
            "journal_count": self.db.journal_count(),
            "compactions_completed": self.db.compactions_completed(),
            "time_compacting_s": self.db.time_compacting().as_secs_f64(),
            "cache_capacity": self.db.cache_capacity(),
            "cache_size": self.db.cache_size(),
            "write_buffer_size": self.db.write_buffer_size(),
        }))
    }

    fn close(self: Box<Self>) -> EResult<()> {
        let FjallEngine { db, ks, .. } = *self;
        db.persist(PersistMode::SyncAll).map_err(err)?;
        drop(ks);
        drop(db);
        Ok(())
    }
}
