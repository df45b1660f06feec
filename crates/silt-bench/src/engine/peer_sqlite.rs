//! SQLite through `rusqlite` (SQLite itself compiled from the bundled amalgamation), as a
//! key-value store: one table `kv(k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID` (a B-tree
//! keyed by `k`, the value stored in the key's row), in WAL mode.
//!
//! * Sync `none` → `synchronous=NORMAL`: a commit returns once its WAL frames are written to
//!   the OS, with no fsync; the WAL is fsynced only before a checkpoint copies it into the
//!   database. A process crash loses nothing, a machine crash may lose a suffix of recent
//!   commits and leaves a consistent database: exactly silt's (and RocksDB's) `none`.
//!   (`synchronous=OFF` would also skip the checkpoint's fsyncs, so a machine crash could
//!   corrupt the database; that is weaker than `none`, so it is not used.)
//! * Sync `full` → `synchronous=FULL`: every commit fsyncs the WAL before it returns.
//! * A batch is one `BEGIN IMMEDIATE … COMMIT` transaction of prepared `INSERT OR REPLACE`s;
//!   a single put is one autocommit statement. Deletes likewise, with prepared
//!   `DELETE FROM kv WHERE k = ?` (SQLite has no single delete).
//! * Threads: each SQLite connection is single-threaded, so the adapter keeps a pool of
//!   connections and a thread takes one for the length of an operation; with N workers at
//!   most N connections exist (each opened on first need). WAL mode lets readers run beside
//!   the one writer; writers serialize on the database's write lock and wait for it
//!   (`busy_timeout`, 60 s) rather than fail.
//! * Cache: SQLite's page cache is per connection, so each gets `--cache-bytes / threads`
//!   (`PRAGMA cache_size = -KiB`); memory-mapped I/O stays off (the default).
//! * SQLite has no bloom filters and no compression (nothing to turn off or on).
//! * Statements are prepared once per connection (`prepare_cached`). A seek is
//!   `SELECT k, v … WHERE k >= ? ORDER BY k LIMIT 1` (SQLite has no cursor that outlives
//!   its statement's reset, so every seek is a new B-tree descent, as `seekrandom` intends);
//!   a scan is the same with `LIMIT n`.
//! * `flush` runs `PRAGMA wal_checkpoint(TRUNCATE)`: the WAL is copied into the database
//!   file and emptied, the closest thing to writing a memtable out. SQLite has no
//!   background work, so `wait_idle` returns at once.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior};
use serde_json::{json, Value};

use super::{EResult, Engine, EngineConfig, Seeker};

const PUT: &str = "INSERT OR REPLACE INTO kv (k, v) VALUES (?1, ?2)";
const DELETE: &str = "DELETE FROM kv WHERE k = ?1";
const GET: &str = "SELECT v FROM kv WHERE k = ?1";
const SEEK: &str = "SELECT k, v FROM kv WHERE k >= ?1 ORDER BY k LIMIT 1";
const SCAN: &str = "SELECT k, v FROM kv WHERE k >= ?1 ORDER BY k LIMIT ?2";

fn err(e: rusqlite::Error) -> String {
    format!("sqlite: {e}")
}

pub struct SqliteEngine {
    path: PathBuf,
    sync_full: bool,
    cache_kib: i64,
    pool: Mutex<Vec<Connection>>,
    opened: std::sync::atomic::AtomicUsize,
}

impl SqliteEngine {
    pub fn open(cfg: &EngineConfig) -> EResult<SqliteEngine> {
        std::fs::create_dir_all(&cfg.dir)
            .map_err(|e| format!("sqlite: create {}: {e}", cfg.dir.display()))?;
        let per_conn = cfg.cache_bytes / cfg.threads.max(1) as u64;
        let e = SqliteEngine {
            path: cfg.dir.join("kv.sqlite"),
            sync_full: cfg.sync_full,
            cache_kib: (per_conn / 1024).max(64) as i64,
            pool: Mutex::new(Vec::new()),
            opened: Default::default(),
        };
        let c = e.connect()?;
        c.execute_batch("CREATE TABLE IF NOT EXISTS kv (k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID")
            .map_err(err)?;
        e.pool.lock().expect("pool lock").push(c);
        Ok(e)
    }

    fn connect(&self) -> EResult<Connection> {
        let c = Connection::open(&self.path).map_err(err)?;
        c.busy_timeout(Duration::from_secs(60)).map_err(err)?;
        let mode: String = c
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(err)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(format!("sqlite: journal_mode is {mode}, not wal"));
        }
        let sync = if self.sync_full { "FULL" } else { "NORMAL" };
        c.execute_batch(&format!(
            "PRAGMA synchronous = {sync}; PRAGMA cache_size = -{};",
            self.cache_kib
        ))
        .map_err(err)?;
        c.set_prepared_statement_cache_capacity(16);
        self.opened
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(c)
    }

    /// A connection of the pool (or a new one) for this thread, until it is given back.
    fn take(&self) -> EResult<Connection> {
        let c = self.pool.lock().expect("pool lock").pop();
        match c {
            Some(c) => Ok(c),
            None => self.connect(),
        }
    }

    fn give(&self, c: Connection) {
        self.pool.lock().expect("pool lock").push(c);
    }

    fn with<T>(&self, f: impl FnOnce(&mut Connection) -> rusqlite::Result<T>) -> EResult<T> {
        let mut c = self.take()?;
        let r = f(&mut c);
        self.give(c);
        r.map_err(err)
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
    engine: &'a SqliteEngine,
    conn: Option<Connection>,
}

impl Seeker for SqliteSeeker<'_> {
    fn seek(&mut self, key: &[u8]) -> EResult<bool> {
        let c = self.conn.as_ref().expect("held until drop");
        let mut st = c.prepare_cached(SEEK).map_err(err)?;
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

impl Drop for SqliteSeeker<'_> {
    fn drop(&mut self) {
        if let Some(c) = self.conn.take() {
            self.engine.give(c);
        }
    }
}

impl Engine for SqliteEngine {
    fn write(&self, kvs: &[(&[u8], &[u8])]) -> EResult<()> {
        self.with(|c| {
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
        self.with(|c| {
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
        self.with(|c| {
            c.prepare_cached(GET)?
                .query_row([key], |r| Ok(r.get_ref(0)?.as_blob()?.len()))
                .optional()
        })
    }

    fn seeker(&self) -> EResult<Box<dyn Seeker + '_>> {
        Ok(Box::new(SqliteSeeker {
            engine: self,
            conn: Some(self.take()?),
        }))
    }

    fn scan(&self, start: &[u8], n: usize) -> EResult<usize> {
        self.with(|c| {
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
        self.with(|c| {
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
        self.with(|c| c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())))
    }

    fn wait_idle(&self, _max: Duration) {}

    fn stats(&self) -> Option<Value> {
        let pragmas = self
            .with(|c| {
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
            "synchronous": if self.sync_full { "FULL" } else { "NORMAL" },
            "cache_kib_per_connection": self.cache_kib,
            "connections": self.opened.load(std::sync::atomic::Ordering::Relaxed),
            "page_count": pragmas.0,
            "page_size": pragmas.1,
            "freelist_count": pragmas.2,
        }))
    }

    fn close(self: Box<Self>) -> EResult<()> {
        let conns = std::mem::take(&mut *self.pool.lock().expect("pool lock"));
        for c in conns {
            c.close().map_err(|(_, e)| err(e))?;
        }
        Ok(())
    }
}
