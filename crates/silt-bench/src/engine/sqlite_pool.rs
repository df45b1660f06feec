//! The SQLite connections of the three SQLite adapters (key-value `engine/peer_sqlite.rs`,
//! `tpcc/sql.rs`, `iib/sql.rs`): one database file in WAL mode, a pool of connections (a
//! SQLite connection is single-threaded, so a thread leases one for an operation; with N
//! workers at most N exist), the same pragmas for all, and **one writer at a time in the
//! process**.
//!
//! * Sync `none` → `synchronous=NORMAL`: a commit returns once its WAL frames are in the OS;
//!   the WAL is fsynced only before a checkpoint copies it into the database. A process
//!   crash loses nothing, a machine crash may lose a suffix of commits and leaves a
//!   consistent database: silt's (and RocksDB's) `none`. (`synchronous=OFF` would skip the
//!   checkpoint's fsyncs too, so a machine crash could corrupt the database: weaker than
//!   `none`, not used.) Sync `full` → `synchronous=FULL`: every commit fsyncs the WAL.
//! * Cache: SQLite's page cache is per connection, so each gets `--cache-bytes / threads`
//!   (`PRAGMA cache_size = -KiB`); memory-mapped I/O stays off (the default).
//! * **Writers take an in-process lock** ([`SqlitePool::writer`]) for their transaction,
//!   through its commit. SQLite runs one writer at a time anyway; without the lock a
//!   waiting connection polls: `BEGIN IMMEDIATE` gets `SQLITE_BUSY`, and the busy handler
//!   sleeps 1, 2, 5, 10 … ms (bundled SQLite is built with `HAVE_USLEEP`) before it tries
//!   again, while the lock was free again after a fraction of a millisecond.
//! * **Checkpoints: SQLite's automatic one, and a bound on the WAL.** The pool replaces
//!   SQLite's automatic checkpoint (a WAL hook that checkpoints after any commit that
//!   leaves 1,000 or more frames in the WAL) with a checkpoint every 1,000 frames added,
//!   run by the writer just after it lets go of the write lock, so the next writer's
//!   transaction overlaps the checkpoint as it does in SQLite by default. That overlap also means the WAL may never
//!   restart ("checkpoint starvation" in SQLite's WAL documentation: the log restarts from
//!   its start only when a writer begins after a checkpoint that copied all of it, and the
//!   other writer has always appended by then). At 5M random keys in batches of 1,000 the
//!   WAL passed 12 GB within a minute and the disk filled (`database or disk is full`). So
//!   a writer whose commit leaves [`RESTART_FRAMES`] or more frames (64 MiB) runs a
//!   `RESTART` checkpoint while it still holds the lock, which SQLite's documentation gives
//!   as the remedy: every frame is copied and the next writer starts the log over. The
//!   pool's checkpoints run one at a time, so that `RESTART` waits for another writer's
//!   `PASSIVE` one to end instead of failing busy beside it.
//!   (Holding the lock through every checkpoint also bounds the log, but cost SQLite 12%
//!   on seq_write and 39% on zipf_write at 5M keys in batches of 1,000, where this way is
//!   level with no lock at all: BENCHMARKS.md, 2026-11-26.)
//!   Readers (deferred `BEGIN`, WAL snapshots) take no lock and run beside the writer.
//! * `busy_timeout` (60 s) stays, for readers against a checkpoint's brief locks and for a
//!   second process.
//! * `journal_size_limit` is 64 MiB: after a restart the WAL file is cut back to that, so a
//!   one-off large transaction does not leave a large file (and a large space amplification)
//!   behind.

use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::Connection;

use super::EngineConfig;

/// The WAL file's size after a restart, at most (`PRAGMA journal_size_limit`).
pub const JOURNAL_SIZE_LIMIT: u64 = 64 << 20;
/// WAL frames after a commit from which its writer checkpoints (`PASSIVE`, after letting
/// go of the write lock): SQLite's automatic checkpoint threshold (`wal_autocheckpoint`).
pub const CHECKPOINT_FRAMES: i64 = 1000;
/// WAL frames after a commit from which its writer checkpoints with `RESTART` before
/// letting go of the write lock: 64 MiB of 4 KiB pages.
pub const RESTART_FRAMES: i64 = (JOURNAL_SIZE_LIMIT / 4096) as i64;

/// Connections to one SQLite database, shared by a cell's threads.
pub struct SqlitePool {
    path: PathBuf,
    sync_full: bool,
    cache_kib: i64,
    statements: usize,
    idle: Mutex<Vec<Connection>>,
    writer: Mutex<()>,
    /// Held through every checkpoint the pool's writers run, so that a `RESTART` never
    /// finds another of them running (it would fail busy, and the WAL grow on).
    checkpointing: Mutex<()>,
    opened: AtomicUsize,
    /// Frames in the WAL after the latest commit (every connection's WAL hook sets it).
    wal_frames: Arc<AtomicI64>,
    /// `wal_frames` when a writer last started a checkpoint.
    checkpointed_at: AtomicI64,
    /// `RESTART` checkpoints run so far.
    restarts: AtomicUsize,
}

/// A leased connection, given back to the pool when dropped; a writer's lease also holds
/// the pool's write lock until then.
pub struct Lease<'a> {
    pool: &'a SqlitePool,
    conn: Option<Connection>,
    /// A writer's hold on the pool's write lock (`Drop` lets go of it, checkpointing before
    /// or after as the WAL needs).
    writer: Option<MutexGuard<'a, ()>>,
}

impl SqlitePool {
    /// Opens (creating) `file` in `cfg.dir`, runs `schema` on it, and keeps that first
    /// connection. `statements` is each connection's prepared-statement cache.
    pub fn open(
        cfg: &EngineConfig,
        file: &str,
        statements: usize,
        schema: &str,
    ) -> Result<SqlitePool, String> {
        std::fs::create_dir_all(&cfg.dir)
            .map_err(|e| format!("sqlite: create {}: {e}", cfg.dir.display()))?;
        let per_conn = cfg.cache_bytes / cfg.threads.max(1) as u64;
        let pool = SqlitePool {
            path: cfg.dir.join(file),
            sync_full: cfg.sync_full,
            cache_kib: (per_conn / 1024).max(64) as i64,
            statements,
            idle: Mutex::new(Vec::new()),
            writer: Mutex::new(()),
            opened: AtomicUsize::new(0),
            wal_frames: Arc::new(AtomicI64::new(0)),
            checkpointed_at: AtomicI64::new(0),
            restarts: AtomicUsize::new(0),
            checkpointing: Mutex::new(()),
        };
        let c = pool.connect()?;
        c.execute_batch(schema).map_err(err)?;
        pool.idle().push(c);
        Ok(pool)
    }

    pub fn sync_full(&self) -> bool {
        self.sync_full
    }

    /// Each connection's page cache, KiB.
    pub fn cache_kib(&self) -> i64 {
        self.cache_kib
    }

    /// Connections opened so far.
    pub fn opened(&self) -> usize {
        self.opened.load(Ordering::Relaxed)
    }

    /// `RESTART` checkpoints the pool's writers ran to bound the WAL.
    pub fn restarts(&self) -> usize {
        self.restarts.load(Ordering::Relaxed)
    }

    fn idle(&self) -> MutexGuard<'_, Vec<Connection>> {
        // A panic while the list was held cannot leave it half-changed (push and pop).
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn connect(&self) -> Result<Connection, String> {
        let mut c = Connection::open(&self.path).map_err(err)?;
        c.busy_timeout(Duration::from_secs(60)).map_err(err)?;
        let mode: String = c
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(err)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(format!("sqlite: journal_mode is {mode}, not wal"));
        }
        let sync = if self.sync_full { "FULL" } else { "NORMAL" };
        c.execute_batch(&format!(
            "PRAGMA synchronous = {sync}; PRAGMA cache_size = -{}; \
             PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT};",
            self.cache_kib
        ))
        .map_err(err)?;
        // Replaces SQLite's automatic checkpoint (itself a WAL hook): the writer's lease
        // checkpoints when it is dropped ([`Lease`]'s `Drop`).
        let frames = Arc::clone(&self.wal_frames);
        c.wal_hook(Some(
            move |_: &mut rusqlite::hooks::Wal, pages: std::ffi::c_int| {
                frames.store(i64::from(pages), Ordering::Relaxed);
                Ok(())
            },
        ))
        .map_err(err)?;
        c.set_prepared_statement_cache_capacity(self.statements);
        self.opened.fetch_add(1, Ordering::Relaxed);
        Ok(c)
    }

    /// A connection for reading (or for a statement that needs no write lock).
    pub fn lease(&self) -> Result<Lease<'_>, String> {
        self.lease_with(None)
    }

    /// A connection and the pool's write lock, for a writing transaction (commit included).
    pub fn writer(&self) -> Result<Lease<'_>, String> {
        // The lock guards no data, so a holder's panic leaves nothing to repair.
        let guard = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        self.lease_with(Some(guard))
    }

    /// [`SqlitePool::writer`] if `write`, else [`SqlitePool::lease`].
    pub fn lease_for(&self, write: bool) -> Result<Lease<'_>, String> {
        if write {
            self.writer()
        } else {
            self.lease()
        }
    }

    fn lease_with<'a>(&'a self, writer: Option<MutexGuard<'a, ()>>) -> Result<Lease<'a>, String> {
        let conn = match self.idle().pop() {
            Some(c) => c,
            None => self.connect()?,
        };
        Ok(Lease {
            pool: self,
            conn: Some(conn),
            writer,
        })
    }

    /// Closes every idle connection (all are idle once the cell's threads are done).
    pub fn close(&self) -> Result<(), String> {
        let conns = std::mem::take(&mut *self.idle());
        for c in conns {
            c.close().map_err(|(_, e)| err(e))?;
        }
        Ok(())
    }
}

impl std::ops::Deref for Lease<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        self.conn.as_ref().expect("held until drop")
    }
}

impl std::ops::DerefMut for Lease<'_> {
    fn deref_mut(&mut self) -> &mut Connection {
        self.conn.as_mut().expect("held until drop")
    }
}

impl Drop for Lease<'_> {
    /// A writer's lease checkpoints after its commit: with `RESTART` while it still holds
    /// the write lock if the WAL has reached [`RESTART_FRAMES`]; else with `PASSIVE`, just
    /// after letting go of it, once [`CHECKPOINT_FRAMES`] frames were added since the last
    /// checkpoint began (since the log restarted, if it did). SQLite's own rule is "the WAL
    /// holds 1,000 frames", which with one writer is the same thing; with writers that
    /// overlap the checkpoint the log seldom restarts, and that rule would checkpoint (two
    /// fsyncs) after every later commit. A checkpoint that fails (busy) leaves the WAL as
    /// it was, for a later commit to try again, as SQLite's own does.
    fn drop(&mut self) {
        let Some(c) = self.conn.take() else {
            return;
        };
        if let Some(lock) = self.writer.take() {
            let pool = self.pool;
            let frames = pool.wal_frames.load(Ordering::Relaxed);
            if frames >= RESTART_FRAMES {
                // After the other writer's checkpoint, if one is running: the log's bound
                // must not depend on how the two threads are scheduled.
                let _ckpt = pool.checkpointing.lock().unwrap_or_else(|p| p.into_inner());
                if c.query_row("PRAGMA wal_checkpoint(RESTART)", [], |r| r.get::<_, i64>(0))
                    == Ok(0)
                {
                    pool.restarts.fetch_add(1, Ordering::Relaxed);
                    pool.wal_frames.store(0, Ordering::Relaxed);
                }
                pool.checkpointed_at.store(0, Ordering::Relaxed);
                drop(lock);
            } else {
                let last = pool.checkpointed_at.load(Ordering::Relaxed);
                // Fewer frames than at the last checkpoint: the log restarted since.
                let added = if frames >= last {
                    frames - last
                } else {
                    frames
                };
                let due = added >= CHECKPOINT_FRAMES;
                if due {
                    pool.checkpointed_at.store(frames, Ordering::Relaxed);
                }
                drop(lock);
                if due {
                    let _ckpt = pool.checkpointing.lock().unwrap_or_else(|p| p.into_inner());
                    let _ = c.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
                }
            }
        }
        self.pool.idle().push(c);
    }
}

pub fn err(e: rusqlite::Error) -> String {
    format!("sqlite: {e}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    /// Two threads writing large transactions back to back: the WAL is bounded. Its file
    /// grows past the checkpoint threshold while checkpoints overlap the next writer, until
    /// a commit leaves [`RESTART_FRAMES`] (64 MiB) and its writer restarts the log, after
    /// the other thread's checkpoint if one is running. (Before it waited, such a restart
    /// failed busy and was left to the next commit: on a loaded machine, repeatedly, and
    /// the WAL reached 154 MB.) Without the restart the WAL grew by about 2 MB a
    /// transaction, past 100 MB in 50 of them, in each of three runs.
    #[test]
    fn back_to_back_writers_let_the_wal_restart() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pool = SqlitePool::open(
            &EngineConfig::for_test(dir.path(), 2),
            "t.sqlite",
            4,
            "CREATE TABLE kv (k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID",
        )
        .expect("open");
        let txns = 50u64;
        let peak = std::sync::atomic::AtomicU64::new(0);
        std::thread::scope(|s| {
            for t in 0..2u64 {
                let (pool, peak, dir) = (&pool, &peak, &dir);
                s.spawn(move || {
                    let mut x = t.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                    for _ in 0..txns {
                        let mut c = pool.writer().expect("lease");
                        let tx = c.transaction().expect("begin");
                        {
                            let mut st = tx
                                .prepare_cached("INSERT OR REPLACE INTO kv VALUES (?1, ?2)")
                                .expect("prepare");
                            for _ in 0..1000 {
                                x ^= x << 13;
                                x ^= x >> 7;
                                x ^= x << 17;
                                st.execute((x.to_be_bytes(), [7u8; 100])).expect("insert");
                            }
                        }
                        tx.commit().expect("commit");
                        let wal = std::fs::metadata(dir.path().join("t.sqlite-wal"))
                            .map_or(0, |m| m.len());
                        peak.fetch_max(wal, Ordering::Relaxed);
                    }
                });
            }
        });
        let peak = peak.into_inner();
        assert!(
            peak <= 2 * JOURNAL_SIZE_LIMIT,
            "the WAL reached {peak} bytes in {} transactions of about 4 MB: it did not restart",
            2 * txns
        );
        // A WAL that reached the bound was restarted by its writer. (Writers that never
        // overlap a checkpoint, as a loaded machine may schedule them, let the log restart
        // on its own and never reach it.)
        assert!(
            pool.restarts() > 0 || peak < JOURNAL_SIZE_LIMIT,
            "no RESTART checkpoint in a {peak}-byte WAL"
        );
        pool.close().expect("close");
    }

    /// A writer's lease excludes every other writer until it is dropped, and readers are
    /// not held back by it.
    #[test]
    fn one_writer_at_a_time_readers_beside_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pool = SqlitePool::open(
            &EngineConfig::for_test(dir.path(), 3),
            "t.sqlite",
            4,
            "CREATE TABLE t (x)",
        )
        .expect("open");
        let inside = AtomicBool::new(false);
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    for _ in 0..200 {
                        let c = pool.writer().expect("lease");
                        assert!(!inside.swap(true, Ordering::SeqCst), "two writers at once");
                        c.execute("INSERT INTO t VALUES (1)", []).expect("insert");
                        inside.store(false, Ordering::SeqCst);
                    }
                });
            }
            let w = pool.writer().expect("lease");
            let r = pool
                .lease()
                .expect("a reader while a writer holds the lock");
            let n: i64 = r
                .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
                .expect("count");
            assert!(n >= 0);
            drop((r, w));
        });
        let c = pool.lease().expect("lease");
        let n: i64 = c
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .expect("count");
        assert_eq!(n, 400);
        assert!(
            pool.opened() <= 4,
            "{} connections for 3 threads",
            pool.opened()
        );
    }
}
