//! Transactions through the public API: read-your-own-writes in every read (point, range
//! both ways, prefix, cursor), savepoints, column families, durability and reopen, the
//! typed errors, `transact`'s retries, and transactions too large for one log record.

use std::sync::Arc;
use std::time::{Duration, Instant};

use silt::vfs::{CrashMode, SimFs};
use silt::{
    Concurrency, ConflictKind, Db, Error, IsolationLevel, Read, SyncMode, TxnOptions, WriteOptions,
};

use IsolationLevel::*;

const LEVELS: [IsolationLevel; 5] = [
    ReadUncommitted,
    ReadCommitted,
    RepeatableRead,
    Snapshot,
    Serializable,
];
const MODES: [Concurrency; 2] = [Concurrency::Optimistic, Concurrency::Pessimistic];

fn kv(k: &str, v: &str) -> (Vec<u8>, Vec<u8>) {
    (k.as_bytes().to_vec(), v.as_bytes().to_vec())
}

fn collect(it: impl Iterator<Item = silt::Result<(Vec<u8>, Vec<u8>)>>) -> Vec<(Vec<u8>, Vec<u8>)> {
    it.collect::<Result<_, _>>().unwrap()
}

/// Own writes (puts over stored keys, new keys, deletes of stored keys) show in every read,
/// at every level and in both modes, and no one else sees them before the commit.
#[test]
fn own_writes_are_merged_into_every_read_in_both_directions() {
    for l in LEVELS {
        for m in MODES {
            let dir = tempfile::tempdir().unwrap();
            let db = Db::open(dir.path()).unwrap();
            for k in ["a", "c", "e", "g"] {
                db.put(k.as_bytes(), b"db").unwrap();
            }
            // Some of it in a table, some in the memtable.
            db.flush().unwrap();
            db.put(b"i", b"db").unwrap();
            let mut t = db.begin(TxnOptions::new(l, m));
            t.put(b"b", b"t").unwrap();
            t.put(b"c", b"t").unwrap();
            t.delete(b"e").unwrap();
            t.put(b"h", b"t").unwrap();
            t.single_delete(b"i").unwrap();
            let want = vec![
                kv("a", "db"),
                kv("b", "t"),
                kv("c", "t"),
                kv("g", "db"),
                kv("h", "t"),
            ];
            assert_eq!(collect(t.iter()), want, "{l:?} {m:?}");
            let mut rev = collect(t.iter().rev());
            rev.reverse();
            assert_eq!(rev, want);
            assert_eq!(
                collect(t.range::<&[u8], _>(&b"b"[..]..&b"h"[..])),
                want[1..4].to_vec()
            );
            assert_eq!(collect(t.prefix(b"h")), vec![kv("h", "t")]);
            assert_eq!(t.get(b"e").unwrap(), None);
            assert_eq!(t.get(b"c").unwrap().as_deref(), Some(&b"t"[..]));
            // Both ends of one iterator meet in the middle.
            let mut it = t.iter();
            assert_eq!(it.next().unwrap().unwrap(), kv("a", "db"));
            assert_eq!(it.next_back().unwrap().unwrap(), kv("h", "t"));
            assert_eq!(it.next_back().unwrap().unwrap(), kv("g", "db"));
            assert_eq!(it.next().unwrap().unwrap(), kv("b", "t"));
            assert_eq!(it.next().unwrap().unwrap(), kv("c", "t"));
            assert!(it.next().is_none());
            // A cursor, seeking onto own writes and across own deletes, both ways.
            let mut c = t.cursor();
            assert_eq!(c.seek(b"d").unwrap(), Some(kv("g", "db")));
            assert_eq!(c.prev().unwrap(), Some(kv("c", "t")));
            assert_eq!(c.prev().unwrap(), Some(kv("b", "t")));
            assert_eq!(c.seek_for_prev(b"e").unwrap(), Some(kv("c", "t")));
            assert_eq!(c.next().unwrap(), Some(kv("g", "db")));
            assert_eq!(c.next().unwrap(), Some(kv("h", "t")));
            assert_eq!(c.next().unwrap(), None);
            assert_eq!(c.seek_to_last().unwrap(), Some(kv("h", "t")));
            // The Read trait is the same reads.
            fn first<R: Read>(r: &R) -> Option<(Vec<u8>, Vec<u8>)> {
                r.iter().next().map(|x| x.unwrap())
            }
            assert_eq!(first(&t), Some(kv("a", "db")));
            // Nobody else sees any of it.
            assert_eq!(db.get(b"b").unwrap(), None);
            assert_eq!(db.get(b"e").unwrap().as_deref(), Some(&b"db"[..]));
            t.commit().unwrap();
            assert_eq!(collect(db.iter()), want);
        }
    }
}

#[test]
fn savepoints_nest_and_roll_back_writes_only_after_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path()).unwrap();
    db.put(b"k", b"0").unwrap();
    let mut t = db.begin(TxnOptions::default());
    t.put(b"k", b"1").unwrap();
    t.savepoint();
    t.put(b"k", b"2").unwrap();
    t.put(b"new", b"x").unwrap();
    t.savepoint();
    t.delete(b"k").unwrap();
    assert_eq!(t.get(b"k").unwrap(), None);
    t.rollback_to_savepoint().unwrap();
    assert_eq!(t.get(b"k").unwrap().as_deref(), Some(&b"2"[..]));
    t.rollback_to_savepoint().unwrap();
    assert_eq!(t.get(b"k").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(t.get(b"new").unwrap(), None);
    assert!(matches!(
        t.rollback_to_savepoint(),
        Err(Error::InvalidArgument(_))
    ));
    t.savepoint();
    t.put(b"kept", b"y").unwrap();
    t.pop_savepoint().unwrap();
    assert!(matches!(t.pop_savepoint(), Err(Error::InvalidArgument(_))));
    assert_eq!(t.pending().0, 2);
    t.commit().unwrap();
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(db.get(b"kept").unwrap().as_deref(), Some(&b"y"[..]));
    assert_eq!(db.get(b"new").unwrap(), None);
    // Rollback discards everything; so does a drop.
    let mut t = db.begin(TxnOptions::default());
    t.put(b"gone", b"1").unwrap();
    t.rollback();
    let mut t = db.begin(TxnOptions::default());
    t.put(b"gone", b"2").unwrap();
    drop(t);
    assert_eq!(db.get(b"gone").unwrap(), None);
}

/// One transaction spans column families atomically, survives a reopen once committed,
/// and leaves no trace if it never committed — also after a power loss under `Full`.
#[test]
fn column_families_commit_together_and_uncommitted_work_leaves_no_trace() {
    let fs = SimFs::new();
    let open = |fs: Arc<SimFs>| {
        Db::builder("/db")
            .file_system(fs)
            .sync_mode(SyncMode::Full)
            .open()
            .unwrap()
    };
    let db = open(fs.clone());
    let users = db.create_cf("users").unwrap();
    let mut t = db.begin(TxnOptions::default());
    t.put_cf(&users, b"u1", b"ada").unwrap();
    t.put(b"count", b"1").unwrap();
    assert_eq!(
        t.get_cf(&users, b"u1").unwrap().as_deref(),
        Some(&b"ada"[..])
    );
    t.commit().unwrap();
    let mut open_txn = db.begin(TxnOptions::default());
    open_txn.put_cf(&users, b"u2", b"grace").unwrap();
    open_txn.put(b"count", b"2").unwrap();
    let crashed = fs.crash(CrashMode::DropAll, 7);
    drop(open_txn);
    drop(db);
    let db = open(crashed);
    let users = db.cf("users").unwrap();
    assert_eq!(
        db.get_cf(&users, b"u1").unwrap().as_deref(),
        Some(&b"ada"[..])
    );
    assert_eq!(db.get_cf(&users, b"u2").unwrap(), None);
    assert_eq!(db.get(b"count").unwrap().as_deref(), Some(&b"1"[..]));
}

/// `sync: Some(true)` makes a commit durable under `SyncMode::None`; the default does not.
#[test]
fn the_commit_sync_override_makes_a_commit_durable() {
    let fs = SimFs::new();
    let db = Db::builder("/db")
        .file_system(fs.clone())
        .sync_mode(SyncMode::None)
        .open()
        .unwrap();
    let mut t = db.begin(TxnOptions {
        sync: Some(true),
        ..TxnOptions::default()
    });
    t.put(b"durable", b"1").unwrap();
    t.commit().unwrap();
    let mut t = db.begin(TxnOptions::default());
    t.put(b"lost", b"1").unwrap();
    t.commit().unwrap();
    let crashed = fs.crash(CrashMode::DropAll, 1);
    drop(db);
    let db = Db::builder("/db").file_system(crashed).open().unwrap();
    assert_eq!(db.get(b"durable").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(
        db.get(b"lost").unwrap(),
        None,
        "the simulator must drop unsynced writes"
    );
}

#[test]
fn conflicts_are_typed_with_the_key_the_family_and_the_kind() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path()).unwrap();
    let cf = db.create_cf("accounts").unwrap();
    db.put_cf(&cf, b"x", b"1").unwrap();
    // Write-write: first committer wins.
    let mut a = db.begin(TxnOptions::default());
    let mut b = db.begin(TxnOptions::default());
    a.put_cf(&cf, b"x", b"a").unwrap();
    b.put_cf(&cf, b"x", b"b").unwrap();
    a.commit().unwrap();
    match b.commit() {
        Err(Error::Conflict { cf, key, kind }) => {
            assert_eq!(
                (cf.as_str(), key.as_slice(), kind),
                ("accounts", &b"x"[..], ConflictKind::WriteWrite)
            );
        }
        other => panic!("{other:?}"),
    }
    // Read validation (Serializable): a key read changed.
    let t = db.begin(TxnOptions::new(Serializable, Concurrency::Optimistic));
    let mut t = t;
    t.get_cf(&cf, b"x").unwrap();
    t.put(b"elsewhere", b"1").unwrap();
    db.put_cf(&cf, b"x", b"plain write").unwrap();
    let e = t.commit().unwrap_err();
    assert!(
        matches!(
            e,
            Error::Conflict {
                kind: ConflictKind::ReadValidation,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.is_retryable());
    // Phantom: a key appeared in a scanned range.
    let mut t = db.begin(TxnOptions::new(Serializable, Concurrency::Optimistic));
    assert_eq!(collect(t.range_cf(&cf, &b"m"[..]..&b"p"[..])), vec![]);
    t.put(b"elsewhere", b"2").unwrap();
    db.put_cf(&cf, b"n", b"new").unwrap();
    match t.commit() {
        Err(Error::Conflict {
            key,
            kind: ConflictKind::Phantom,
            ..
        }) => assert_eq!(key, b"n"),
        other => panic!("{other:?}"),
    }
    // A key outside the scanned range does not conflict.
    let mut t = db.begin(TxnOptions::new(Serializable, Concurrency::Optimistic));
    assert_eq!(collect(t.range_cf(&cf, &b"m"[..]..&b"p"[..])).len(), 1);
    t.put(b"elsewhere", b"3").unwrap();
    db.put_cf(&cf, b"z", b"outside").unwrap();
    t.commit().unwrap();
}

/// A scan records only what it covered: a key written past where an iterator stopped is
/// not a phantom.
#[test]
fn a_partial_scan_protects_only_what_it_read() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path()).unwrap();
    for k in ["q/1", "q/2", "q/3", "q/4"] {
        db.put(k.as_bytes(), b"").unwrap();
    }
    let mut t = db.begin(TxnOptions::new(Serializable, Concurrency::Optimistic));
    let first = t.prefix(b"q/").next().unwrap().unwrap();
    assert_eq!(first.0, b"q/1");
    t.delete(&first.0).unwrap();
    db.put(b"q/9", b"").unwrap(); // past what the scan read
    t.commit().unwrap();
    let mut t = db.begin(TxnOptions::new(Serializable, Concurrency::Optimistic));
    let first = t.prefix(b"q/").next().unwrap().unwrap();
    t.delete(&first.0).unwrap();
    db.delete(b"q/2").unwrap(); // the key the scan returned: a conflict
    assert!(matches!(t.commit(), Err(Error::Conflict { .. })));
}

/// Each step of a scan widens what it protects, from either end: a key written inside
/// what two steps covered is a phantom, one past the second step is not.
#[test]
fn each_step_of_a_scan_widens_what_it_protects_from_either_end() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path()).unwrap();
    for k in ["q/1", "q/2", "q/3", "q/4"] {
        db.put(k.as_bytes(), b"").unwrap();
    }
    // (direction, key written by another writer, whether the commit conflicts)
    let cases: [(bool, &[u8], bool); 4] = [
        (true, b"q/15", true),
        (true, b"q/25", false),
        (false, b"q/35", true),
        (false, b"q/25", false),
    ];
    for (forward, other, conflicts) in cases {
        let mut t = db.begin(TxnOptions::new(Serializable, Concurrency::Optimistic));
        let mut it = t.prefix(b"q/");
        let two: Vec<Vec<u8>> = (0..2)
            .map(|_| {
                let p = if forward { it.next() } else { it.next_back() };
                p.unwrap().unwrap().0
            })
            .collect();
        drop(it);
        let want: [&[u8]; 2] = if forward {
            [b"q/1", b"q/2"]
        } else {
            [b"q/4", b"q/3"]
        };
        assert_eq!(two, want);
        t.put(b"mark", b"").unwrap();
        db.put(other, b"").unwrap();
        let r = t.commit();
        assert_eq!(
            matches!(r, Err(Error::Conflict { .. })),
            conflicts,
            "forward {forward}, {:?}: {r:?}",
            String::from_utf8_lossy(other)
        );
        db.delete(other).unwrap();
    }
    // A scan that ran out covers up to its bound: a key written after its last pair, still
    // inside the bound, is a phantom, from either end.
    for forward in [true, false] {
        let mut t = db.begin(TxnOptions::new(Serializable, Concurrency::Optimistic));
        let n = if forward {
            t.prefix(b"q/").count()
        } else {
            t.prefix(b"q/").rev().count()
        };
        assert_eq!(n, 4);
        t.put(b"mark", b"").unwrap();
        let other: &[u8] = if forward { b"q/5" } else { b"q/0" };
        db.put(other, b"").unwrap();
        let r = t.commit();
        assert!(
            matches!(r, Err(Error::Conflict { .. })),
            "forward {forward}: {r:?}"
        );
        db.delete(other).unwrap();
    }
}

#[test]
fn pessimistic_locks_time_out_and_deadlocks_pick_a_victim_with_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path()).unwrap();
    let opts = TxnOptions {
        lock_timeout: Duration::from_millis(50),
        ..TxnOptions::new(ReadCommitted, Concurrency::Pessimistic)
    };
    let mut a = db.begin(opts.clone());
    let mut b = db.begin(opts.clone());
    a.put(b"x", b"a").unwrap();
    let start = Instant::now();
    match b.put(b"x", b"b") {
        Err(Error::LockTimeout { key, waited_ms, .. }) => {
            assert_eq!(key, b"x");
            assert!(waited_ms >= 40, "{waited_ms}");
        }
        other => panic!("{other:?}"),
    }
    assert!(start.elapsed() >= Duration::from_millis(45));
    // The timed-out transaction is still usable.
    b.put(b"y", b"b").unwrap();
    // Deadlock: a waits for y (held by b) on another thread; b asks for x (held by a).
    let long = TxnOptions {
        lock_timeout: Duration::from_secs(30),
        ..opts
    };
    let mut a2 = db.begin(long.clone());
    let mut b2 = db.begin(long);
    drop(a);
    drop(b);
    a2.put(b"x", b"a").unwrap();
    b2.put(b"y", b"b").unwrap();
    let db2 = db.clone();
    let waiter = std::thread::spawn(move || {
        let r = a2.put(b"y", b"a");
        (r.map(|_| a2.commit()), db2)
    });
    while db.lock_waits().is_empty() {
        std::thread::yield_now();
    }
    let start = Instant::now();
    match b2.put(b"x", b"b") {
        Err(Error::Deadlock { key, .. }) => assert_eq!(key, b"x"),
        other => panic!("{other:?}"),
    }
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "found at once, not by a timeout"
    );
    b2.rollback();
    let (r, _) = waiter.join().unwrap();
    r.unwrap().unwrap();
    assert_eq!(db.get(b"y").unwrap().as_deref(), Some(&b"a"[..]));
}

#[test]
fn a_transaction_past_its_limit_is_refused_and_left_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path()).unwrap();
    let mut t = db.begin(TxnOptions {
        max_bytes: 10_000,
        ..TxnOptions::default()
    });
    let mut n = 0;
    let err = loop {
        match t.put(format!("key{n}").as_bytes(), &[0u8; 100]) {
            Ok(()) => n += 1,
            Err(e) => break e,
        }
    };
    assert!(
        matches!(err, Error::TransactionTooLarge { limit: 10_000, .. }),
        "{err}"
    );
    assert!(!err.is_retryable());
    assert!(t.pending().1 <= 10_000);
    assert_eq!(t.pending().0, n);
    t.commit().unwrap();
    assert_eq!(db.iter().count(), n);
}

#[test]
fn transact_retries_conflicts_until_the_closure_commits() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path()).unwrap();
    db.put(b"n", &0u64.to_le_bytes()).unwrap();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let db = db.clone();
            std::thread::spawn(move || {
                for _ in 0..50 {
                    db.transact(TxnOptions::new(Snapshot, Concurrency::Optimistic), |t| {
                        let n = u64::from_le_bytes(t.get(b"n")?.unwrap().try_into().unwrap());
                        t.put(b"n", &(n + 1).to_le_bytes())?;
                        Ok(())
                    })
                    .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(db.get(b"n").unwrap().unwrap(), 200u64.to_le_bytes());
    // A closure's own non-retryable error is returned at once.
    let mut calls = 0;
    let r: silt::Result<()> = db.transact(TxnOptions::default(), |_| {
        calls += 1;
        Err(Error::InvalidArgument("no".into()))
    });
    assert!(matches!(r, Err(Error::InvalidArgument(_))));
    assert_eq!(calls, 1);
}

/// A transaction larger than one log record (64 KiB segments here) is written as parts
/// and a commit record: it commits atomically, survives flushes that run meanwhile and a
/// reopen; one that fails its check after writing its parts leaves nothing.
/// A transaction in parts whose commit fails its first check has put its part records in
/// the log, and no writer completes after them. A flush forced right then must still
/// return: its boundary lies past those parts, and `visible` has to reach it without a
/// later writer (it waited forever, once in `a_transaction_too_large_…` below).
#[test]
fn a_flush_right_after_a_failed_commit_in_parts_returns() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::builder(dir.path())
        .wal_segment_bytes(64 << 10)
        .open()
        .unwrap();
    db.put(b"conflict", b"0").unwrap();
    let mut loser = db.begin(TxnOptions::default());
    for i in 0..1000u32 {
        loser
            .put(format!("lost{i:06}").as_bytes(), &[7u8; 300])
            .unwrap();
    }
    loser.put(b"conflict", b"loser").unwrap();
    db.put(b"conflict", b"winner").unwrap();
    assert!(matches!(loser.commit(), Err(Error::Conflict { .. })));
    let (tx, rx) = std::sync::mpsc::channel();
    let flusher = {
        let db = db.clone();
        std::thread::spawn(move || tx.send(db.flush()).unwrap())
    };
    let r = rx.recv_timeout(std::time::Duration::from_secs(30));
    assert!(matches!(r, Ok(Ok(()))), "the flush did not return: {r:?}");
    flusher.join().unwrap();
    assert_eq!(
        db.get(b"conflict").unwrap().as_deref(),
        Some(&b"winner"[..])
    );
    assert_eq!(db.prefix(b"lost").count(), 0);
}

#[test]
fn a_transaction_too_large_for_one_record_commits_in_parts() {
    let fs = SimFs::new();
    let open = |fs: Arc<SimFs>| {
        Db::builder("/db")
            .file_system(fs)
            .wal_segment_bytes(64 << 10)
            .memtable_bytes(32 << 10)
            .sync_mode(SyncMode::Full)
            .open()
            .unwrap()
    };
    let db = open(fs.clone());
    db.put(b"conflict", b"0").unwrap();
    // Keep flushing from another thread while the transaction writes its parts.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flusher = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0u32;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                db.put(format!("bg{i:06}").as_bytes(), &[1u8; 200]).unwrap();
                i += 1;
                if i % 50 == 0 {
                    db.flush().unwrap();
                }
            }
            i
        })
    };
    let mut t = db.begin(TxnOptions::default());
    for i in 0..3000u32 {
        t.put(format!("big{i:06}").as_bytes(), &[(i % 251) as u8; 300])
            .unwrap();
    }
    assert!(t.pending().1 > 900_000);
    t.commit().unwrap();
    // A large one that conflicts after its parts are in the log.
    let mut loser = db.begin(TxnOptions::default());
    for i in 0..3000u32 {
        loser
            .put(format!("lost{i:06}").as_bytes(), &[7u8; 300])
            .unwrap();
    }
    loser.put(b"conflict", b"loser").unwrap();
    db.put(b"conflict", b"winner").unwrap();
    assert!(matches!(loser.commit(), Err(Error::Conflict { .. })));
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let bg = flusher.join().unwrap();
    let check = |db: &Db| {
        let big: Vec<_> = collect(db.prefix(b"big"));
        assert_eq!(big.len(), 3000);
        for (i, (k, v)) in big.iter().enumerate() {
            assert_eq!(k, format!("big{i:06}").as_bytes());
            assert_eq!(v, &vec![(i % 251) as u8; 300]);
        }
        assert_eq!(db.prefix(b"lost").count(), 0);
        assert_eq!(
            db.get(b"conflict").unwrap().as_deref(),
            Some(&b"winner"[..])
        );
        assert_eq!(db.prefix(b"bg").count() as u32, bg);
    };
    check(&db);
    // A power loss (everything was committed under Full), then more flushes after reopen.
    let crashed = fs.crash(CrashMode::DropAll, 3);
    drop(db);
    let db = open(crashed.clone());
    check(&db);
    db.flush().unwrap();
    db.compact_range::<&[u8], _>(..).unwrap();
    drop(db);
    let db = open(crashed);
    check(&db);
}

/// Plain writes and transactions mix: a plain write to a key a pessimistic transaction
/// locked is found at its commit.
#[test]
fn a_plain_write_under_a_pessimistic_lock_is_a_conflict() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path()).unwrap();
    let mut t = db.begin(TxnOptions::new(Snapshot, Concurrency::Pessimistic));
    t.get_for_update(b"k").unwrap();
    t.put(b"k", b"txn").unwrap();
    db.write(
        {
            let mut b = silt::WriteBatch::new();
            b.put(b"k", b"plain");
            b
        },
        WriteOptions::default(),
    )
    .unwrap();
    assert!(matches!(
        t.commit(),
        Err(Error::Conflict {
            kind: ConflictKind::WriteWrite,
            ..
        })
    ));
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"plain"[..]));
}

/// Repair (a lost manifest) and the log dump know transactions written in parts: repair
/// applies a committed one whole and drops the parts of one that never committed.
#[test]
fn repair_rebuilds_a_transaction_written_in_parts() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::builder(dir.path())
            .wal_segment_bytes(64 << 10)
            .memtable_bytes(8 << 20)
            .open()
            .unwrap();
        let mut t = db.begin(TxnOptions::default());
        for i in 0..1000u32 {
            t.put(format!("k{i:05}").as_bytes(), &[3u8; 300]).unwrap();
        }
        t.commit().unwrap();
        db.close().unwrap();
    }
    let dump = silt::inspect::wal(dir.path()).unwrap();
    assert!(dump.records.iter().filter(|r| r.txn.is_some()).count() >= 5);
    for f in std::fs::read_dir(dir.path()).unwrap() {
        let p = f.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if name.starts_with("MANIFEST") || name == "CURRENT" {
            std::fs::remove_file(p).unwrap();
        }
    }
    Db::repair(dir.path()).unwrap();
    let db = Db::open(dir.path()).unwrap();
    assert_eq!(db.iter().count(), 1000);
}

/// Seed 002's cliff: one transaction of a million writes (`SILT_TXN_OPS`, default
/// 1,000,000) commits, in parts, with one copy of its writes held (no undo log without a
/// savepoint: overwriting a key does not grow it), and every write is there after a
/// reopen. Time and memory are measured by `silt-bench`, not asserted here.
#[test]
fn a_million_write_transaction_commits_and_holds_one_copy_of_its_writes() {
    let n: u32 = std::env::var("SILT_TXN_OPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let dir = tempfile::tempdir().unwrap();
    let db = Db::builder(dir.path())
        .memtable_bytes(8 << 20)
        .open()
        .unwrap();
    let mut t = db.begin(TxnOptions::default());
    let mut k = [0u8; 16];
    for i in 0..n {
        k[..4].copy_from_slice(&i.to_be_bytes());
        t.put(&k, &i.to_le_bytes()).unwrap();
    }
    let (keys, bytes) = t.pending();
    assert_eq!(keys, n as usize);
    // Per key: 16 + 4 bytes and 64 of bookkeeping, nothing else.
    assert_eq!(bytes, n as u64 * 84);
    // Overwriting a key many times holds one copy of it.
    for i in 0..1000u32 {
        t.put(b"hot", &i.to_le_bytes()).unwrap();
    }
    assert_eq!(t.pending().1, n as u64 * 84 + 3 + 4 + 64);
    t.commit().unwrap();
    db.close().unwrap();
    let db = Db::builder(dir.path()).open().unwrap();
    assert_eq!(db.iter().count(), n as usize + 1);
    k[..4].copy_from_slice(&(n - 1).to_be_bytes());
    assert_eq!(db.get(&k).unwrap(), Some((n - 1).to_le_bytes().to_vec()));
}

/// `txn/validate.rs`'s one exception, end to end: a put and the single delete that deletes
/// it, both committed after a Serializable transaction read their key, are both dropped by
/// a flush (no snapshot lies between them). The key then reads as it did at the
/// transaction's snapshot, so the commit goes through: the read is still true of every
/// serial order that puts the transaction after both. Kept in a memtable, the same history
/// is a conflict; so is a plain delete, flushed or not, because a tombstone above a
/// snapshot is kept.
#[test]
fn a_put_and_its_single_delete_dropped_by_a_flush_leave_a_read_valid() {
    for (single, flush) in [(true, false), (true, true), (false, false), (false, true)] {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path()).unwrap();
        db.put(b"other", b"x").unwrap();
        let mut t = db.begin(TxnOptions::new(Serializable, Concurrency::Optimistic));
        assert_eq!(t.get(b"k").unwrap(), None);
        t.put(b"mine", b"1").unwrap();
        db.put(b"k", b"v").unwrap();
        if single {
            db.single_delete(b"k").unwrap();
        } else {
            db.delete(b"k").unwrap();
        }
        if flush {
            db.flush().unwrap();
        }
        let r = t.commit();
        if single && flush {
            r.unwrap_or_else(|e| panic!("single {single} flush {flush}: {e}"));
            assert_eq!(db.get(b"mine").unwrap().as_deref(), Some(&b"1"[..]));
        } else {
            match r {
                Err(Error::Conflict {
                    key,
                    kind: ConflictKind::ReadValidation,
                    ..
                }) => assert_eq!(key, b"k"),
                other => panic!("single {single} flush {flush}: {other:?}"),
            }
            assert_eq!(db.get(b"mine").unwrap(), None);
        }
        assert_eq!(db.get(b"k").unwrap(), None);
    }
}
