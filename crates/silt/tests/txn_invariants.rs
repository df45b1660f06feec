//! Transactions under concurrency, checked by invariants: bank transfers among accounts
//! from 8 threads at the isolation levels where a transfer is safe (the total never changes,
//! at any snapshot, after a reopen, and after kill -9 of a process transferring); write skew
//! (two on-call doctors) allowed at `Snapshot` and refused at `Serializable`; and a
//! count-then-insert predicate (one booking per slot) that `Serializable` keeps.
//!
//! Knobs: `SILT_BANK_KILLS` (kill -9 cycles, default 12), `SILT_TXN_SEED`.

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use silt::{Concurrency, Db, Error, IsolationLevel, Read, SyncMode, Txn, TxnOptions};

use Concurrency::*;
use IsolationLevel::*;

const ACCOUNTS: u64 = 50;
const INITIAL: u64 = 1_000;

fn account(i: u64) -> Vec<u8> {
    format!("acct/{i:03}").into_bytes()
}

fn balance(v: Option<Vec<u8>>) -> u64 {
    u64::from_le_bytes(v.expect("every account exists").try_into().unwrap())
}

/// The ways to run a transfer that keep the total: read-modify-write protected by the
/// level, or by `get_for_update` at `ReadCommitted`.
const SAFE: [(IsolationLevel, Concurrency, bool); 8] = [
    (Snapshot, Optimistic, false),
    (Snapshot, Pessimistic, false),
    (RepeatableRead, Optimistic, false),
    (RepeatableRead, Pessimistic, false),
    (Serializable, Optimistic, false),
    (Serializable, Pessimistic, false),
    (ReadCommitted, Optimistic, true),
    (ReadCommitted, Pessimistic, true),
];

/// Moves a random amount from one random account to another, in one transaction.
fn transfer(db: &Db, rng: &mut ChaCha8Rng) -> silt::Result<()> {
    let (level, mode, for_update) = SAFE[rng.random_range(0..SAFE.len())];
    let from = rng.random_range(0..ACCOUNTS);
    let to = (from + rng.random_range(1..ACCOUNTS)) % ACCOUNTS;
    let amount = rng.random_range(1..50u64);
    let opts = TxnOptions {
        lock_timeout: Duration::from_secs(5),
        max_retries: 1000,
        ..TxnOptions::new(level, mode)
    };
    db.transact(opts, |t: &mut Txn| {
        let read = |t: &Txn, k: &[u8]| {
            if for_update {
                t.get_for_update(k)
            } else {
                t.get(k)
            }
        };
        let a = balance(read(t, &account(from))?);
        let b = balance(read(t, &account(to))?);
        let amount = amount.min(a);
        t.put(&account(from), &(a - amount).to_le_bytes())?;
        t.put(&account(to), &(b + amount).to_le_bytes())?;
        Ok(())
    })
}

/// The sum of every account as one view sees it.
fn total<R: Read>(r: &R) -> u64 {
    let mut n = 0;
    let mut sum = 0;
    for kv in r.prefix(b"acct/") {
        let (_, v) = kv.unwrap();
        sum += u64::from_le_bytes(v.try_into().unwrap());
        n += 1;
    }
    assert_eq!(n, ACCOUNTS, "an account vanished");
    sum
}

/// A database with small log segments: a new one zero-fills its first segment, and every
/// reopen reads the last one.
fn open_small(path: &std::path::Path) -> silt::Result<Db> {
    Db::builder(path).wal_segment_bytes(1 << 20).open()
}

fn seed() -> u64 {
    std::env::var("SILT_TXN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        })
}

fn setup(db: &Db) {
    let mut b = silt::WriteBatch::new();
    for i in 0..ACCOUNTS {
        b.put(&account(i), &INITIAL.to_le_bytes());
    }
    db.write(b, silt::WriteOptions::default()).unwrap();
}

#[test]
fn bank_transfers_from_eight_threads_keep_the_total_at_every_snapshot() {
    let seed = seed();
    println!("SILT_TXN_SEED={seed}");
    let dir = tempfile::tempdir().unwrap();
    let open = || {
        Db::builder(dir.path())
            .wal_segment_bytes(1 << 20)
            .memtable_bytes(64 << 10)
            .table_target_bytes(32 << 10)
            .level_base_bytes(128 << 10)
            .open()
            .unwrap()
    };
    let db = open();
    setup(&db);
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let writers: Vec<_> = (0..8u64)
        .map(|t| {
            let (db, stop, done) = (db.clone(), stop.clone(), done.clone());
            std::thread::spawn(move || {
                let mut rng = ChaCha8Rng::seed_from_u64(seed ^ t);
                for _ in 0..150 {
                    transfer(&db, &mut rng).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                    done.fetch_add(1, SeqCst);
                    if stop.load(SeqCst) {
                        break;
                    }
                }
            })
        })
        .collect();
    // Readers: database snapshots and read-only transactions, while the transfers run
    // (and flushes and compactions with the small memtable).
    let start = Instant::now();
    let mut checks = 0;
    while writers.iter().any(|w| !w.is_finished()) {
        assert_eq!(
            total(&db.snapshot()),
            ACCOUNTS * INITIAL,
            "seed {seed}: a snapshot"
        );
        let t = db.begin(TxnOptions::new(Serializable, Optimistic));
        assert_eq!(
            total(&t),
            ACCOUNTS * INITIAL,
            "seed {seed}: a transaction's view"
        );
        t.commit().unwrap();
        checks += 1;
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "seed {seed}: too slow"
        );
    }
    stop.store(true, SeqCst);
    for w in writers {
        w.join().unwrap();
    }
    println!("{} transfers, {checks} total checks", done.load(SeqCst));
    assert!(checks > 0);
    assert_eq!(total(&db), ACCOUNTS * INITIAL);
    db.close().unwrap();
    let db = open();
    assert_eq!(
        total(&db),
        ACCOUNTS * INITIAL,
        "seed {seed}: after a reopen"
    );
}

const CHILD_ENV: &str = "SILT_BANK_CHILD";

/// The child of the kill -9 test: transfers from 8 threads until it is killed.
#[test]
fn bank_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let seed: u64 = std::env::var("SILT_TXN_SEED").unwrap().parse().unwrap();
    let db = Db::builder(&dir)
        .wal_segment_bytes(1 << 20)
        .memtable_bytes(64 << 10)
        .sync_mode(SyncMode::None)
        .open()
        .unwrap();
    if db.get(&account(0)).unwrap().is_none() {
        setup(&db);
    }
    println!("ready");
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (t << 32));
                let start = Instant::now();
                while start.elapsed() < Duration::from_secs(20) {
                    transfer(&db, &mut rng).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

/// kill -9 in the middle of transfers, then reopen: the total is intact every time (no
/// transaction half applied), and the database keeps working.
#[test]
fn bank_total_survives_kill_9_and_reopen() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let seed = seed();
    let cycles: u64 = std::env::var("SILT_BANK_KILLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12);
    println!("SILT_TXN_SEED={seed}");
    let dir = tempfile::tempdir().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    for cycle in 0..cycles {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "bank_child", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, dir.path())
            .env("SILT_TXN_SEED", (seed ^ cycle).to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Wait for "ready", then let it transfer for a while.
        {
            use std::io::BufRead;
            let out = child.stdout.take().unwrap();
            let mut lines = std::io::BufReader::new(out).lines();
            loop {
                match lines.next() {
                    Some(Ok(l)) if l.contains("ready") => break,
                    Some(_) => continue,
                    None => {
                        panic!("seed {seed} cycle {cycle}: the child exited before it was ready")
                    }
                }
            }
            std::mem::forget(lines);
        }
        std::thread::sleep(Duration::from_millis(rng.random_range(20..300)));
        child.kill().unwrap();
        child.wait().unwrap();
        let db =
            open_small(dir.path()).unwrap_or_else(|e| panic!("seed {seed} cycle {cycle}: {e}"));
        assert_eq!(total(&db), ACCOUNTS * INITIAL, "seed {seed} cycle {cycle}");
        let t = db.begin(TxnOptions::new(Snapshot, Optimistic));
        assert_eq!(total(&t), ACCOUNTS * INITIAL);
        drop(t);
        db.close().unwrap();
    }
}

/// Write skew: two doctors on call, each goes off call if the other is on. Both read, then
/// both write (a barrier between): `Snapshot` lets both commit (no one on call), every level
/// that protects what it read refuses one of them, in both modes.
#[test]
fn write_skew_on_call_doctors_is_allowed_at_snapshot_and_refused_at_serializable() {
    for (level, mode, expect_skew) in [
        (Snapshot, Optimistic, true),
        (Snapshot, Pessimistic, true),
        (Serializable, Optimistic, false),
        (Serializable, Pessimistic, false),
        (RepeatableRead, Optimistic, false),
        (RepeatableRead, Pessimistic, false),
    ] {
        for round in 0..10 {
            let dir = tempfile::tempdir().unwrap();
            let db = open_small(dir.path()).unwrap();
            db.put(b"doctor/alice", b"on").unwrap();
            db.put(b"doctor/bob", b"on").unwrap();
            let barrier = Arc::new(Barrier::new(2));
            let outcomes: Vec<bool> = ["alice", "bob"]
                .into_iter()
                .map(|me| {
                    let (db, barrier) = (db.clone(), barrier.clone());
                    std::thread::spawn(move || {
                        let opts = TxnOptions {
                            lock_timeout: Duration::from_secs(10),
                            ..TxnOptions::new(level, mode)
                        };
                        let mut t = db.begin(opts);
                        let on = ["alice", "bob"]
                            .iter()
                            .filter(|d| {
                                t.get(format!("doctor/{d}").as_bytes()).unwrap().as_deref()
                                    == Some(&b"on"[..])
                            })
                            .count();
                        barrier.wait();
                        assert_eq!(on, 2);
                        let r = t
                            .put(format!("doctor/{me}").as_bytes(), b"off")
                            .and_then(|()| t.commit());
                        match r {
                            Ok(()) => true,
                            Err(e) if e.is_retryable() => false,
                            Err(e) => panic!("{e}"),
                        }
                    })
                })
                .collect::<Vec<_>>()
                .into_iter()
                .map(|h| h.join().unwrap())
                .collect();
            let on_call = ["alice", "bob"]
                .iter()
                .filter(|d| {
                    db.get(format!("doctor/{d}").as_bytes()).unwrap().as_deref() == Some(&b"on"[..])
                })
                .count();
            let skew = on_call == 0;
            assert_eq!(
                skew, expect_skew,
                "{level:?} {mode:?} round {round}: {outcomes:?}"
            );
            if !expect_skew {
                assert!(outcomes.iter().filter(|o| **o).count() <= 1);
            }
        }
    }
}

/// Count-then-insert: a slot takes at most one booking. At `Serializable` that holds under
/// 8 threads racing for random slots, in both modes; at `Snapshot` the same race does
/// double-book (shown with a barrier, so it is certain).
#[test]
fn count_then_insert_keeps_one_booking_per_slot_at_serializable() {
    fn book(
        db: &Db,
        level: IsolationLevel,
        mode: Concurrency,
        slot: u32,
        who: u64,
        barrier: Option<&Barrier>,
    ) -> silt::Result<bool> {
        let opts = TxnOptions {
            lock_timeout: Duration::from_secs(10),
            ..TxnOptions::new(level, mode)
        };
        let mut t = db.begin(opts);
        let prefix = format!("slot/{slot:03}/");
        let taken = t.prefix(prefix.as_bytes()).count();
        if let Some(b) = barrier {
            b.wait();
        }
        if taken > 0 {
            return Ok(false);
        }
        t.put(format!("{prefix}{who}").as_bytes(), b"booked")?;
        t.commit()?;
        Ok(true)
    }
    for mode in [Optimistic, Pessimistic] {
        let dir = tempfile::tempdir().unwrap();
        let db = open_small(dir.path()).unwrap();
        let threads: Vec<_> = (0..8u64)
            .map(|who| {
                let db = db.clone();
                std::thread::spawn(move || {
                    let mut rng = ChaCha8Rng::seed_from_u64(who);
                    let mut booked = 0;
                    for _ in 0..100 {
                        let slot = rng.random_range(0..40);
                        match book(&db, Serializable, mode, slot, who, None) {
                            Ok(true) => booked += 1,
                            Ok(false) => {}
                            Err(e) if e.is_retryable() => {}
                            Err(e) => panic!("{e}"),
                        }
                    }
                    booked
                })
            })
            .collect();
        let booked: u32 = threads.into_iter().map(|t| t.join().unwrap()).sum();
        for slot in 0..40 {
            let n = db.prefix(format!("slot/{slot:03}/").as_bytes()).count();
            assert!(n <= 1, "{mode:?}: slot {slot} booked {n} times");
        }
        assert_eq!(db.prefix(b"slot/").count() as u32, booked);
        assert!(booked > 0);
    }
    // The same race at Snapshot, made certain by a barrier: both book.
    let dir = tempfile::tempdir().unwrap();
    let db = open_small(dir.path()).unwrap();
    let barrier = Arc::new(Barrier::new(2));
    let hs: Vec<_> = (0..2u64)
        .map(|who| {
            let (db, barrier) = (db.clone(), barrier.clone());
            std::thread::spawn(move || book(&db, Snapshot, Optimistic, 7, who, Some(&barrier)))
        })
        .collect();
    for h in hs {
        assert!(h.join().unwrap().unwrap());
    }
    assert_eq!(db.prefix(b"slot/007/").count(), 2);
    let _ = Error::Closed;
}
