//! SQLite through `rusqlite` (SQLite itself compiled from the bundled amalgamation), as a
//! key-value store: one table `kv(k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID` (a B-tree
//! keyed by `k`, the value stored in the key's row), in WAL mode.
//!
//! * Connections, pragmas, sync modes and the one-writer-at-a-time lock are
//!   `engine/sqlite_pool.rs`'s, shared with the TPC-C and iibench adapters: sync `none` is
//!   `synchronous=NORMAL`, `full` is `synchronous=FULL`, each connection's page cache is
//!   `--cache-bytes / threads`.
//! * A batch is one `BEGIN IMMEDIATE … COMMIT` transaction of prepared `INSERT OR REPLACE`s;
//!   a single put is one autocommit statement. Deletes likewise, with prepared
//!   `DELETE FROM kv WHERE k = ?` (SQLite has no single delete). Both hold the pool's write
//!   lock; reads do not.
//! * SQLite has no bloom filters and no compression (nothing to turn off or on).
//! * Statements are prepared once per connection (`prepare_cached`). A seek is
//!   `SELECT k, v … WHERE k >= ? ORDER BY k LIMIT 1` (SQLite has no cursor that outlives
//!   its statement's reset, so every seek is a new B-tree descent, as `seekrandom` intends);
//!   a scan is the same with `LIMIT n`.
//! * `flush` runs `PRAGMA wal_checkpoint(TRUNCATE)`: the WAL is copied into the database
//!   file and emptied, the closest thing to writing a memtable out. SQLite has no
//!   background work, so `wait_idle` returns at once.

use std::time::Duration;

use rusqlite::{OptionalExtension, TransactionBehavior};
use serde_json::{json, Value};

use super::sqlite_pool::{err, Lease, SqlitePool};
use super::{EResult, Engine, EngineConfig, Seeker};

const PUT: &str = "INSERT OR REPLACE INTO kv (k, v) VALUES (?1, ?2)";
const DELETE: &str = "DELETE FROM kv WHERE k = ?1";
const GET: &str = "SELECT v FROM kv WHERE k = ?1";
const SEEK: &str = "SELECT k, v FROM kv WHERE k >= ?1 ORDER BY k LIMIT 1";
const SCAN: &str = "SELECT k, v FROM kv WHERE k >= ?1 ORDER BY k LIMIT ?2";

pub struct SqliteEngine {
    pool: SqlitePool,
}

impl SqliteEngine {
    pub fn open(cfg: &EngineConfig) -> EResult<SqliteEngine> {
        Ok(SqliteEngine {
            pool: SqlitePool::open(
                cfg,
                "kv.sqlite",
                16,
                "CREATE TABLE IF NOT EXISTS kv (k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID",
            )?,
        })
    }

    /// Runs `f` on a leased connection, holding the write lock if `write`.
    fn with<T>(
        &self,
        write: bool,
        f: impl FnOnce(&mut rusqlite::Connection) -> rusqlite::Result<T>,
    ) -> EResult<T> {
        let mut c = self.pool.lease_for(write)?;
        f(&mut c).map_err(err)
    }
}

/// Reads a row's key and value (as borrowed blobs), as an engine's iterator would hand
/// them out.
fn touch(row: &rusqlite::Row<'_>) -> rusqlite::Result<usize> {
    let k = row.get_ref(0)?.as_blob()?;
    let v = row.get_ref(1)?.as_blob()?;
    Ok(std::hint::black_box(k.len() + v.len()))
}

struct SqliteSeeker<'a> {
    conn: Lease<'a>,
}

impl Seeker for SqliteSeeker<'_> {
    fn seek(&mut self, key: &[u8]) -> EResult<bool> {
        let mut st = self.conn.prepare_cached(SEEK).map_err(err)?;
        let mut rows = st.query([key]).map_err(err)?;
        match rows.next().map_err(err)? {
            Some(row) => {
                touch(row).map_err(err)?;
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

impl Engine for SqliteEngine {
    fn write(&self, kvs: &[(&[u8], &[u8])]) -> EResult<()> {
        self.with(true, |c| {
            if let [(k, v)] = kvs {
                c.prepare_cached(PUT)?.execute((k, v))?;
                return Ok(());
            }
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            {
                let mut st = tx.prepare_cached(PUT)?;
                for (k, v) in kvs {
                    st.execute((k, v))?;
                }
            }
            tx.commit()
        })
    }

    fn delete(&self, keys: &[&[u8]]) -> EResult<()> {
        self.with(true, |c| {
            if let [k] = keys {
                c.prepare_cached(DELETE)?.execute([k])?;
                return Ok(());
            }
            let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
            {
                let mut st = tx.prepare_cached(DELETE)?;
                for k in keys {
                    st.execute([k])?;
                }
            }
            tx.commit()
        })
    }

    fn get(&self, key: &[u8]) -> EResult<Option<usize>> {
        self.with(false, |c| {
            c.prepare_cached(GET)?
                .query_row([key], |r| Ok(r.get_ref(0)?.as_blob()?.len()))
                .optional()
        })
    }

    fn seeker(&self) -> EResult<Box<dyn Seeker + '_>> {
        Ok(Box::new(SqliteSeeker {
            conn: self.pool.lease()?,
        }))
    }

    fn scan(&self, start: &[u8], n: usize) -> EResult<usize> {
        self.with(false, |c| {
            let mut st = c.prepare_cached(SCAN)?;
            let mut rows = st.query((start, n as i64))?;
            let mut read = 0;
            while let Some(row) = rows.next()? {
                touch(row)?;
                read += 1;
            }
            Ok(read)
        })
    }

    fn for_each(
        &self,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
        each: &mut dyn FnMut(&[u8], &[u8]),
    ) -> EResult<u64> {
        let sql = match (lo, hi) {
            (None, None) => "SELECT k, v FROM kv ORDER BY k",
            (Some(_), None) => "SELECT k, v FROM kv WHERE k >= ?1 ORDER BY k",
            (None, Some(_)) => "SELECT k, v FROM kv WHERE k < ?1 ORDER BY k",
            (Some(_), Some(_)) => "SELECT k, v FROM kv WHERE k >= ?1 AND k < ?2 ORDER BY k",
        };
        let bounds: Vec<&[u8]> = lo.into_iter().chain(hi).collect();
        self.with(false, |c| {
            let mut st = c.prepare_cached(sql)?;
            let mut rows = st.query(rusqlite::params_from_iter(bounds))?;
            let mut n = 0;
            while let Some(row) = rows.next()? {
                each(row.get_ref(0)?.as_blob()?, row.get_ref(1)?.as_blob()?);
                n += 1;
            }
            Ok(n)
        })
    }

    fn flush(&self) -> EResult<()> {
        self.with(true, |c| {
            c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        })
    }

    fn wait_idle(&self, _max: Duration) {}

    fn stats(&self) -> Option<Value> {
        let pragmas = self
            .with(false, |c| {
                let get = |p: &str| c.query_row(&format!("PRAGMA {p}"), [], |r| r.get::<_, i64>(0));
                Ok((
                    get("page_count")?,
                    get("page_size")?,
                    get("freelist_count")?,
                ))
            })
            .ok()?;
        Some(json!({
            "journal_mode": "wal",
            "synchronous": if self.pool.sync_full() { "FULL" } else { "NORMAL" },
            "cache_kib_per_connection": self.pool.cache_kib(),
            "connections": self.pool.opened(),
            "one_writer_lock": true,
            "wal_restart_checkpoints": self.pool.restarts(),
            "journal_size_limit": super::sqlite_pool::JOURNAL_SIZE_LIMIT,
            "page_count": pragmas.0,
            "page_size": pragmas.1,
            "freelist_count": pragmas.2,
        }))
    }

    fn close(self: Box<Self>) -> EResult<()> {
        self.pool.close()
    }
}
