//! redb (a copy-on-write B-tree in Rust): one file `kv.redb`, one table `kv` of byte
//! strings.
//!
//! * Sync `full` → `Durability::Immediate`: every commit is durable when `commit` returns
//!   (one fsync per commit; redb does not share an fsync among concurrent committers, whose
//!   write transactions run one at a time).
//! * Sync `none` → `Durability::None`, the nearest redb has, and **weaker** than silt's
//!   `none`: the commit is visible to readers but held in the process's memory until a later
//!   durable commit, so a process crash (not only a machine crash) loses it. redb has no
//!   "write to the OS, skip the fsync" mode. The adapter's `flush` makes it durable with an
//!   empty `Immediate` commit.
//! * A delete (batch) is one write transaction of `remove`s (redb has no single delete).
//! * Cache: `--cache-bytes` as redb's page cache (`Builder::set_cache_size`), shared by
//!   all threads.
//! * A B-tree has no bloom filters and redb has no compression (nothing to configure).
//! * Reads: a point get or a scan opens a read transaction of its own (what a caller
//!   reading the latest committed state does). A seeker opens one read transaction and table
//!   for its whole run and calls `range(key..)` per seek (redb's iterators cannot be
//!   re-positioned, so each seek is a new range from the root, over a fixed snapshot).
//! * redb has no background work: `wait_idle` returns at once.

use std::ops::Bound;
use std::time::Duration;

use redb::{Durability, ReadOnlyTable, ReadableDatabase, TableDefinition};
use serde_json::{json, Value};

use super::{EResult, Engine, EngineConfig, Seeker};

const TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("kv");

fn err(e: impl std::fmt::Display) -> String {
    format!("redb: {e}")
}

pub struct RedbEngine {
    db: redb::Database,
    durability: Durability,
}

impl RedbEngine {
    pub fn open(cfg: &EngineConfig) -> EResult<RedbEngine> {
        std::fs::create_dir_all(&cfg.dir)
            .map_err(|e| format!("redb: create {}: {e}", cfg.dir.display()))?;
        let db = redb::Builder::new()
            .set_cache_size(usize::try_from(cfg.cache_bytes).unwrap_or(usize::MAX))
            .create(cfg.dir.join("kv.redb"))
            .map_err(err)?;
        let tx = db.begin_write().map_err(err)?;
        tx.open_table(TABLE).map_err(err)?;
        tx.commit().map_err(err)?;
        Ok(RedbEngine {
            db,
            durability: if cfg.sync_full {
                Durability::Immediate
            } else {
                Durability::None
            },
        })
    }

    fn read_table(&self) -> EResult<ReadOnlyTable<&'static [u8], &'static [u8]>> {
        self.db
            .begin_read()
            .map_err(err)?
            .open_table(TABLE)
            .map_err(err)
    }
}

struct RedbSeeker {
    table: ReadOnlyTable<&'static [u8], &'static [u8]>,
}

impl Seeker for RedbSeeker {
    fn seek(&mut self, key: &[u8]) -> EResult<bool> {
        match self.table.range(key..).map_err(err)?.next() {
            Some(kv) => {
                let (k, v) = kv.map_err(err)?;
                std::hint::black_box((k.value().len(), v.value().len()));
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

impl Engine for RedbEngine {
    fn write(&self, kvs: &[(&[u8], &[u8])]) -> EResult<()> {
        let mut tx = self.db.begin_write().map_err(err)?;
        tx.set_durability(self.durability).map_err(err)?;
        {
            let mut t = tx.open_table(TABLE).map_err(err)?;
            for (k, v) in kvs {
                t.insert(*k, *v).map_err(err)?;
            }
        }
        tx.commit().map_err(err)
    }

    fn delete(&self, keys: &[&[u8]]) -> EResult<()> {
        let mut tx = self.db.begin_write().map_err(err)?;
        tx.set_durability(self.durability).map_err(err)?;
        {
            let mut t = tx.open_table(TABLE).map_err(err)?;
            for k in keys {
                t.remove(*k).map_err(err)?;
            }
        }
        tx.commit().map_err(err)
    }

    fn get(&self, key: &[u8]) -> EResult<Option<usize>> {
        let t = self.read_table()?;
        let v = t.get(key).map_err(err)?;
        Ok(v.map(|v| v.value().len()))
    }

    fn seeker(&self) -> EResult<Box<dyn Seeker + '_>> {
        Ok(Box::new(RedbSeeker {
            table: self.read_table()?,
        }))
    }

    fn scan(&self, start: &[u8], n: usize) -> EResult<usize> {
        let t = self.read_table()?;
        let mut read = 0;
        for kv in t.range(start..).map_err(err)?.take(n) {
            let (k, v) = kv.map_err(err)?;
            std::hint::black_box((k.value().len(), v.value().len()));
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
        let t = self.read_table()?;
        let mut n = 0;
        for kv in t.range::<&[u8]>((lo, hi)).map_err(err)? {
            let (k, v) = kv.map_err(err)?;
            each(k.value(), v.value());
            n += 1;
        }
        Ok(n)
    }

    /// An empty `Immediate` commit: earlier `Durability::None` commits become durable (and
    /// the pages they freed reusable).
    fn flush(&self) -> EResult<()> {
        let mut tx = self.db.begin_write().map_err(err)?;
        tx.set_durability(Durability::Immediate).map_err(err)?;
        tx.commit().map_err(err)
    }

    fn wait_idle(&self, _max: Duration) {}

    fn stats(&self) -> Option<Value> {
        let immediate = matches!(self.durability, Durability::Immediate);
        Some(json!({
            "durability": if immediate { "immediate" } else { "none" },
        }))
    }

    fn close(self: Box<Self>) -> EResult<()> {
        drop(self);
        Ok(())
    }
}
