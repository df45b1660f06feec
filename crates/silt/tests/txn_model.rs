//! The model test of transactions: random interleavings of several open transactions
//! (reads, scans, writes, deletes, savepoints, commits, rollbacks), plain writes beside them,
//! flushes and simulated power losses, checked against a serial model.
//!
//! - `Serializable`: a transaction that commits must have read exactly what the model held
//!   at its commit (its own writes aside): every committed transaction behaves as if it ran
//!   alone at its commit point, so the history is serializable in commit order.
//! - `Snapshot`: a transaction reads the model as of its begin; it commits if and only if no
//!   key it writes was committed by another since its begin (first committer wins) — for
//!   optimistic transactions, both directions are checked.
//! - A transaction that did not commit leaves nothing; after a power loss (`SyncMode::Full`,
//!   so every commit was durable) the database is exactly the model.
//!
//! Knobs: `SILT_TXN_MODEL_CASES` (default 24), `SILT_TXN_MODEL_OPS` (default 400),
//! `SILT_TXN_MODEL_SEED` (one case).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use silt::vfs::{CrashMode, SimFs};
use silt::{Concurrency, Db, Error, IsolationLevel, SyncMode, Txn, TxnOptions};

type Map = BTreeMap<Vec<u8>, Vec<u8>>;
/// A transaction's own writes (`None`: deleted).
type Own = BTreeMap<Vec<u8>, Option<Vec<u8>>>;
/// A scan: its range, its own writes at the time, and what it returned.
type Scan = (Vec<u8>, Vec<u8>, Own, Vec<(Vec<u8>, Vec<u8>)>);

/// What the test knows of one open transaction.
struct Open {
    t: Txn,
    level: IsolationLevel,
    mode: Concurrency,
    /// The model when it began (its snapshot).
    begin: Map,
    /// Commits (by count) when it began.
    begin_commits: u64,
    /// Its own writes (`None`: deleted), and the savepoint marks (copies).
    own: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    saves: Vec<BTreeMap<Vec<u8>, Option<Vec<u8>>>>,
    /// Reads from the database: key -> what it returned.
    reads: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    /// Scans from the database: (lo, hi, own writes at the time, what it returned).
    scans: Vec<Scan>,
}

struct World {
    fs: Arc<SimFs>,
    db: Db,
    model: Map,
    /// For each key, the commit count of its last change.
    changed: BTreeMap<Vec<u8>, u64>,
    commits: u64,
    open: Vec<Open>,
    stats: [u64; 4],
}

fn key(rng: &mut ChaCha8Rng) -> Vec<u8> {
    format!("k{:02}", rng.random_range(0..24u32)).into_bytes()
}

fn open_db(fs: Arc<SimFs>) -> Db {
    Db::builder("/db")
        .file_system(fs)
        .sync_mode(SyncMode::Full)
        // Small segments: every power loss reopens, and a reopen reads the last segment.
        .wal_segment_bytes(256 << 10)
        .memtable_bytes(4 << 10)
        // The memtable filter (off by default) is what commit-time checks ask first.
        .memtable_bloom_ratio(0.25)
        .table_target_bytes(4 << 10)
        .level_base_bytes(16 << 10)
        .l0_compaction_trigger(2)
        .open()
        .unwrap()
}

fn merged(
    base: &Map,
    own: &BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    lo: &[u8],
    hi: &[u8],
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut m: Map = base
        .range(lo.to_vec()..hi.to_vec())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (k, v) in own.range(lo.to_vec()..hi.to_vec()) {
        match v {
            Some(v) => {
                m.insert(k.clone(), v.clone());
            }
            None => {
                m.remove(k);
            }
        }
    }
    m.into_iter().collect()
}

impl World {
    fn check_db(&self, ctx: &str) {
        let got: Map = self.db.iter().map(|kv| kv.unwrap()).collect();
        assert_eq!(
            got, self.model,
            "{ctx}: the database differs from the model"
        );
    }

    fn step(&mut self, rng: &mut ChaCha8Rng, ctx: &str) {
        let n = self.open.len();
        match rng.random_range(0..100) {
            0..=11 if n < 4 => {
                let level = if rng.random_bool(0.5) {
                    IsolationLevel::Serializable
                } else {
                    IsolationLevel::Snapshot
                };
                let mode = if rng.random_bool(0.5) {
                    Concurrency::Optimistic
                } else {
                    Concurrency::Pessimistic
                };
                let opts = TxnOptions {
                    lock_timeout: Duration::from_millis(1),
                    ..TxnOptions::new(level, mode)
                };
                let t = self.db.begin(opts);
                self.open.push(Open {
                    t,
                    level,
                    mode,
                    begin: self.model.clone(),
                    begin_commits: self.commits,
                    own: BTreeMap::new(),
                    saves: Vec::new(),
                    reads: Vec::new(),
                    scans: Vec::new(),
                });
            }
            0..=11 => {}
            12..=29 if n > 0 => {
                let i = rng.random_range(0..n);
                let k = key(rng);
                let o = &mut self.open[i];
                match o.t.get(&k) {
                    Ok(v) => {
                        if let Some(own) = o.own.get(&k) {
                            assert_eq!(&v, own, "{ctx}: a transaction's read of its own write");
                        } else {
                            // Both levels read from the snapshot (a pessimistic lock on a key
                            // changed since is refused, never read stale).
                            assert_eq!(v, o.begin.get(&k).cloned(), "{ctx}: a snapshot read");
                            o.reads.push((k, v));
                        }
                    }
                    Err(e) => self.fail(i, e, ctx),
                }
            }
            30..=39 if n > 0 => {
                let i = rng.random_range(0..n);
                let a = key(rng);
                let b = key(rng);
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                let o = &mut self.open[i];
                let got: Result<Vec<_>, _> = o.t.range(lo.clone()..hi.clone()).collect();
                match got {
                    Ok(got) => {
                        assert_eq!(
                            got,
                            merged(&o.begin, &o.own, &lo, &hi),
                            "{ctx}: a snapshot scan"
                        );
                        // Backwards must agree.
                        let mut back: Vec<_> =
                            o.t.range(lo.clone()..hi.clone())
                                .rev()
                                .map(|x| x.unwrap())
                                .collect();
                        back.reverse();
                        assert_eq!(got, back, "{ctx}: a scan backwards");
                        let own = o.own.clone();
                        o.scans.push((lo, hi, own, got));
                    }
                    Err(e) => self.fail(i, e, ctx),
                }
            }
            40..=59 if n > 0 => {
                let i = rng.random_range(0..n);
                let k = key(rng);
                let v = if rng.random_ratio(1, 5) {
                    None
                } else {
                    Some(format!("v{}", rng.random::<u16>()).into_bytes())
                };
                let o = &mut self.open[i];
                let r = match &v {
                    Some(v) => o.t.put(&k, v),
                    None => o.t.delete(&k),
                };
                match r {
                    Ok(()) => {
                        o.own.insert(k, v);
                    }
                    Err(e) => self.fail(i, e, ctx),
                }
            }
            60..=63 if n > 0 => {
                let i = rng.random_range(0..n);
                let o = &mut self.open[i];
                o.t.savepoint();
                o.saves.push(o.own.clone());
            }
            64..=67 if n > 0 => {
                let i = rng.random_range(0..n);
                let o = &mut self.open[i];
                if let Some(own) = o.saves.pop() {
                    o.t.rollback_to_savepoint().unwrap();
                    o.own = own;
                } else {
                    assert!(o.t.rollback_to_savepoint().is_err());
                }
            }
            68..=79 if n > 0 => {
                let i = rng.random_range(0..n);
                self.commit(i, ctx);
            }
            80..=83 if n > 0 => {
                let i = rng.random_range(0..n);
                let o = self.open.remove(i);
                o.t.rollback();
            }
            84..=93 => {
                // A plain write beside the transactions.
                let k = key(rng);
                let v = format!("p{}", rng.random::<u16>()).into_bytes();
                self.db.put(&k, &v).unwrap();
                self.model.insert(k.clone(), v);
                self.commits += 1;
                self.changed.insert(k, self.commits);
            }
            94..=96 => {
                self.db.flush().unwrap();
            }
            97..=99 => {
                // Power loss: open transactions are gone; every commit was durable.
                let mode = [CrashMode::DropAll, CrashMode::Prefix, CrashMode::Tear]
                    [rng.random_range(0..3)];
                let crashed = self.fs.crash(mode, rng.random());
                self.open.clear();
                let db = std::mem::replace(&mut self.db, open_db(crashed.clone()));
                drop(db);
                self.fs = crashed;
                self.stats[3] += 1;
                self.check_db(ctx);
            }
            _ => {}
        }
    }

    /// A failed operation: the error must be retryable; the transaction is rolled back.
    fn fail(&mut self, i: usize, e: Error, ctx: &str) {
        assert!(e.is_retryable(), "{ctx}: {e}");
        let o = self.open.remove(i);
        o.t.rollback();
        self.stats[2] += 1;
    }

    fn commit(&mut self, i: usize, ctx: &str) {
        let o = self.open.remove(i);
        let written: Vec<Vec<u8>> = o.own.keys().cloned().collect();
        let ww = written
            .iter()
            .any(|k| self.changed.get(k).is_some_and(|&c| c > o.begin_commits));
        let alone = self.commits == o.begin_commits;
        match o.t.commit() {
            Ok(()) => {
                if !o.own.is_empty() {
                    assert!(!ww, "{ctx}: committed over a newer write (lost update)");
                    if o.level == IsolationLevel::Serializable {
                        // Serializable in commit order: every read is what the model holds
                        // now (its own writes aside).
                        for (k, v) in &o.reads {
                            assert_eq!(
                                &self.model.get(k).cloned(),
                                v,
                                "{ctx}: a serializable read of {k:?} is stale at commit"
                            );
                        }
                        for (lo, hi, own, got) in &o.scans {
                            assert_eq!(
                                &merged(&self.model, own, lo, hi),
                                got,
                                "{ctx}: a serializable scan is stale at commit"
                            );
                        }
                    }
                    self.commits += 1;
                    for (k, v) in &o.own {
                        match v {
                            Some(v) => {
                                self.model.insert(k.clone(), v.clone());
                            }
                            None => {
                                self.model.remove(k);
                            }
                        }
                        self.changed.insert(k.clone(), self.commits);
                    }
                }
                self.stats[0] += 1;
            }
            Err(e) => {
                assert!(e.is_retryable(), "{ctx}: {e}");
                assert!(
                    !alone,
                    "{ctx}: a transaction alone since its begin failed: {e}"
                );
                if o.level == IsolationLevel::Snapshot && o.mode == Concurrency::Optimistic {
                    assert!(
                        ww,
                        "{ctx}: a snapshot commit failed with no write-write conflict: {e}"
                    );
                }
                self.stats[1] += 1;
            }
        }
    }
}

fn run(seed: u64, ops: usize) -> [u64; 4] {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let fs = SimFs::new();
    let mut w = World {
        db: open_db(fs.clone()),
        fs,
        model: Map::new(),
        changed: BTreeMap::new(),
        commits: 0,
        open: Vec::new(),
        stats: [0; 4],
    };
    for op in 0..ops {
        let ctx = format!("seed {seed} op {op} (SILT_TXN_MODEL_SEED={seed})");
        w.step(&mut rng, &ctx);
        if op % 50 == 49 && w.open.is_empty() {
            w.check_db(&ctx);
        }
    }
    w.open.clear();
    w.check_db(&format!("seed {seed} at the end"));
    let seen: HashSet<_> = w.model.keys().collect();
    assert!(seen.len() <= 24);
    w.stats
}

#[test]
fn random_transactions_match_a_serial_model() {
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let ops = env("SILT_TXN_MODEL_OPS").unwrap_or(400) as usize;
    let seeds: Vec<u64> = match env("SILT_TXN_MODEL_SEED") {
        Some(s) => vec![s],
        None => {
            let base = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs();
            (0..env("SILT_TXN_MODEL_CASES").unwrap_or(24))
                .map(|i| base * 1000 + i)
                .collect()
        }
    };
    let mut totals = [0u64; 4];
    for seed in seeds {
        let s = run(seed, ops);
        for i in 0..4 {
            totals[i] += s[i];
        }
    }
    println!(
        "committed {}, conflicts at commit {}, failed operations {}, power losses {}",
        totals[0], totals[1], totals[2], totals[3]
    );
    assert!(
        totals[0] > 0 && totals[1] + totals[2] > 0,
        "the interleavings must both commit and conflict"
    );
}
