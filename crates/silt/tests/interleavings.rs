//! Rare interleavings made to happen every time through the kill points' test hook
//! (`silt::kill_point::set_hook`, feature `kill-points`), which runs at each kill point the
//! engine reaches: a test pauses a background job there, or acts between two steps the
//! engine otherwise runs back to back. The hook is process-wide, so the tests of this
//! binary take turns (`HOOK`), and no other test binary sets one.

#![cfg(feature = "kill-points")]

use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use silt::vfs::{CrashMode, FailOp, SimFs};
use silt::{Db, Error, SyncMode, TxnOptions};

const PART_POINT: &str = "commit: a part record written, more to come";
const FLUSH_POINT: &str = "flush: tables written and log synced, before the manifest edit";
const COMPACTION_POINT: &str = "compaction: outputs written, before the manifest edit";

/// How long a hook waits for the other side of its interleaving before it fails the test
/// (rather than hang it).
const LIMIT: Duration = Duration::from_secs(60);

/// Held by each test for its whole run: one hook at a time.
static HOOK: Mutex<()> = Mutex::new(());

fn hook_turn() -> MutexGuard<'static, ()> {
    HOOK.lock().unwrap_or_else(|p| p.into_inner())
}

/// Scenario (seen once in CI as "part 10 of transaction X, after 0 of its parts" at reopen):
/// 1. a large transaction writes its first parts (pinned in the log, T4 of `txn/mod.rs`);
/// 2. a flush rotates the memtable there: its boundary lies between the parts;
/// 3. the transaction writes its other parts, fails its check and drops its pin;
/// 4. the flush, slow to finish, only now picks the log start: the boundary, as no pin
///    holds it back.
///
/// Replay then starts between the dead transaction's parts and must skip them.
#[test]
fn a_log_start_between_the_parts_of_a_failed_transaction_reopens() {
    let _turn = hook_turn();
    let fs = SimFs::new();
    let open = |fs: Arc<SimFs>| {
        Db::builder("/db")
            .file_system(fs)
            .wal_segment_bytes(64 << 10)
            .sync_mode(SyncMode::Full)
            .open()
            .unwrap()
    };
    let db = open(fs.clone());
    db.put(b"conflict", b"0").unwrap();
    let mut loser = db.begin(TxnOptions::default());
    for i in 0..1000u32 {
        loser
            .put(format!("lost{i:06}").as_bytes(), &[7u8; 300])
            .unwrap();
    }
    loser.put(b"conflict", b"loser").unwrap();
    db.put(b"conflict", b"winner").unwrap();

    // The hook's state: which part the committing thread is at, the flush thread's signal
    // that it reached its point, and the test's signal that the transaction failed.
    let parts = Arc::new(AtomicU32::new(0));
    let (at_flush_tx, at_flush_rx) = mpsc::channel::<()>();
    let (failed_tx, failed_rx) = mpsc::channel::<()>();
    let failed_rx = Mutex::new(failed_rx);
    let at_flush_tx = Mutex::new(at_flush_tx);
    let at_flush_rx = Mutex::new(at_flush_rx);
    let flusher: Arc<Mutex<Option<std::thread::JoinHandle<()>>>> = Default::default();
    let hook = {
        let (db, parts, flusher) = (db.clone(), parts.clone(), flusher.clone());
        move |name: &'static str| {
            if name == PART_POINT && parts.fetch_add(1, SeqCst) == 1 {
                // Between parts 1 and 2: something for the memtable to hold, then a
                // flush, held at its point until the transaction has failed.
                db.put(b"between", b"parts").unwrap();
                let db = db.clone();
                *flusher.lock().unwrap() = Some(std::thread::spawn(move || db.flush().unwrap()));
                at_flush_rx
                    .lock()
                    .unwrap()
                    .recv_timeout(LIMIT)
                    .expect("the flush reached its point");
            } else if name == FLUSH_POINT {
                at_flush_tx.lock().unwrap().send(()).unwrap();
                failed_rx
                    .lock()
                    .unwrap()
                    .recv_timeout(LIMIT)
                    .expect("the transaction failed");
            }
        }
    };
    silt::kill_point::set_hook(Some(Arc::new(hook)));
    let r = loser.commit();
    failed_tx.send(()).unwrap();
    let flusher = flusher
        .lock()
        .unwrap()
        .take()
        .expect("the transaction wrote parts");
    flusher.join().unwrap();
    silt::kill_point::set_hook(None);
    assert!(matches!(r, Err(Error::Conflict { .. })), "{r:?}");
    assert!(
        parts.load(SeqCst) > 2,
        "the transaction wrote more parts after the flush"
    );

    db.put(b"after", b"flush").unwrap();
    let check = |db: &Db| {
        assert_eq!(db.prefix(b"lost").count(), 0);
        assert_eq!(
            db.get(b"conflict").unwrap().as_deref(),
            Some(&b"winner"[..])
        );
        assert_eq!(db.get(b"between").unwrap().as_deref(), Some(&b"parts"[..]));
        assert_eq!(db.get(b"after").unwrap().as_deref(), Some(&b"flush"[..]));
    };
    check(&db);
    // A process crash: the log's records from the log start on are replayed, the dead
    // transaction's later parts among them.
    let crashed = fs.crash(CrashMode::KeepAll, 1);
    drop(db);
    let db = open(crashed);
    check(&db);
}

/// A database whose next flush makes a compaction due: level 0 reaches its trigger of two
/// tables (overlapping keys, so the job merges).
fn with_compaction_due(fs: Arc<SimFs>) -> Db {
    let db = Db::builder("/db")
        .file_system(fs)
        .l0_compaction_trigger(2)
        .open()
        .unwrap();
    for i in 0..100u32 {
        db.put(format!("k{i:04}").as_bytes(), b"first").unwrap();
    }
    db.flush().unwrap();
    for i in 0..100u32 {
        db.put(format!("k{i:04}").as_bytes(), b"second").unwrap();
    }
    db
}

/// `wait_for_compactions` while the compaction it waits for fails (its manifest edit, on
/// an I/O error injected while the job is held at its point): the waiter gets `Poisoned`,
/// at once rather than at its timeout, and never `true` ("settled").
#[test]
fn waiting_for_compactions_reports_a_job_that_fails_meanwhile() {
    let _turn = hook_turn();
    let fs = SimFs::new();
    let db = with_compaction_due(fs.clone());
    let (at_point_tx, at_point_rx) = mpsc::channel::<()>();
    let (waiting_tx, waiting_rx) = mpsc::channel::<()>();
    let (at_point_tx, waiting_rx) = (Mutex::new(at_point_tx), Mutex::new(waiting_rx));
    let hook = {
        let fs = fs.clone();
        move |name: &'static str| {
            if name == COMPACTION_POINT {
                at_point_tx.lock().unwrap().send(()).unwrap();
                // Once the waiter waits: every later write fails (the flush before is done
                // writing; its log purge only removes files).
                waiting_rx
                    .lock()
                    .unwrap()
                    .recv_timeout(LIMIT)
                    .expect("the waiter started");
                fs.fail_nth(FailOp::Write, 1, true);
            }
        }
    };
    silt::kill_point::set_hook(Some(Arc::new(hook)));
    db.flush().unwrap();
    at_point_rx
        .recv_timeout(LIMIT)
        .expect("the compaction reached its point");
    // The job is held at its point, so the waiter cannot find the database settled.
    let waiter = {
        let db = db.clone();
        std::thread::spawn(move || {
            waiting_tx.send(()).unwrap();
            let start = Instant::now();
            let r = db.wait_for_compactions(Duration::from_secs(60));
            (r, start.elapsed())
        })
    };
    let (r, took) = waiter.join().unwrap();
    silt::kill_point::set_hook(None);
    assert!(matches!(r, Err(Error::Poisoned)), "{r:?}");
    assert!(took < Duration::from_secs(30), "waited {took:?}");
    assert!(
        db.put(b"after", b"x").is_err(),
        "no write after a failed compaction"
    );
    assert!(db.close().is_err(), "close reports the failure");
}

/// `wait_for_compactions` on one handle while another closes the database, with a
/// compaction running: the waiter gets `Closed` at once; the close then waits for the job.
#[test]
fn waiting_for_compactions_ends_when_the_database_closes() {
    let _turn = hook_turn();
    let fs = SimFs::new();
    let db = with_compaction_due(fs.clone());
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let (at_point_tx, at_point_rx) = mpsc::channel::<()>();
    let release_rx = Mutex::new(release_rx);
    let at_point_tx = Mutex::new(at_point_tx);
    let hook = move |name: &'static str| {
        if name == COMPACTION_POINT {
            at_point_tx.lock().unwrap().send(()).unwrap();
            // Held here until the waiter has its answer.
            release_rx
                .lock()
                .unwrap()
                .recv_timeout(LIMIT)
                .expect("the waiter answered");
        }
    };
    silt::kill_point::set_hook(Some(Arc::new(hook)));
    db.flush().unwrap();
    at_point_rx
        .recv_timeout(LIMIT)
        .expect("the compaction reached its point");
    let waiter = {
        let db = db.clone();
        std::thread::spawn(move || {
            let start = Instant::now();
            let r = db.wait_for_compactions(Duration::from_secs(60));
            let took = start.elapsed();
            release_tx.send(()).unwrap();
            (r, took)
        })
    };
    // The waiter is waiting: the job is held at its point.
    std::thread::sleep(Duration::from_millis(50));
    assert!(!waiter.is_finished(), "returned while a compaction ran");
    db.close().unwrap();
    let (r, took) = waiter.join().unwrap();
    silt::kill_point::set_hook(None);
    assert!(matches!(r, Err(Error::Closed)), "{r:?}");
    assert!(took < Duration::from_secs(30), "waited {took:?}");
    // What the job wrote is there after a reopen, whichever way it ended.
    let db = Db::builder("/db").file_system(fs).open().unwrap();
    assert_eq!(db.get(b"k0042").unwrap().as_deref(), Some(&b"second"[..]));
}

const PIN_POINT: &str = "commit: log start pinned, before the first part";

/// Two commits in parts pin the log start at the same LSN (both read the reservation mark
/// before either reserved its first part). One, a transaction, fails its check and drops
/// its pin; a flush then moves the log start. The other, a batch held between its parts
/// meanwhile, must still hold the start at its first part: after a crash its commit record
/// needs every part. (Found by `silt-stress`'s batches in parts, two threads at once: pins
/// were keyed by LSN alone, so the first to end dropped both.)
#[test]
fn a_commit_in_parts_keeps_its_pin_when_another_at_the_same_lsn_ends() {
    let _turn = hook_turn();
    let fs = SimFs::new();
    let open = |fs: Arc<SimFs>| {
        Db::builder("/db")
            .file_system(fs)
            .wal_segment_bytes(64 << 10)
            .open()
            .unwrap()
    };
    let db = open(fs.clone());
    db.put(b"conflict", b"0").unwrap();
    let mut loser = db.begin(TxnOptions::default());
    for i in 0..600u32 {
        loser
            .put(format!("lost{i:06}").as_bytes(), &[7u8; 300])
            .unwrap();
    }
    loser.put(b"conflict", b"loser").unwrap();
    db.put(b"conflict", b"winner").unwrap();
    let mut batch = silt::WriteBatch::new();
    for i in 0..600u32 {
        batch.put(format!("kept{i:06}").as_bytes(), &[(i % 251) as u8; 300]);
    }

    let pinned = Arc::new(std::sync::Barrier::new(2));
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let go_rx = Mutex::new(go_rx);
    let held = Arc::new(AtomicU32::new(0));
    let hook = {
        let (pinned, held) = (pinned.clone(), held.clone());
        move |name: &'static str| {
            let me = std::thread::current().name().map(str::to_owned);
            match (name, me.as_deref()) {
                // Both pin before either reserves its first part: the same LSN.
                (PIN_POINT, Some("txn" | "batch")) => {
                    pinned.wait();
                }
                // The batch waits after its first part until the flush below is done.
                (PART_POINT, Some("batch")) if held.fetch_add(1, SeqCst) == 0 => {
                    go_rx
                        .lock()
                        .unwrap()
                        .recv_timeout(LIMIT)
                        .expect("the flush happened");
                }
                _ => {}
            }
        }
    };
    silt::kill_point::set_hook(Some(Arc::new(hook)));
    let txn = std::thread::Builder::new()
        .name("txn".into())
        .spawn(move || loser.commit())
        .unwrap();
    let writer = {
        let db = db.clone();
        std::thread::Builder::new()
            .name("batch".into())
            .spawn(move || db.write(batch, silt::WriteOptions::default()))
            .unwrap()
    };
    let r = txn.join().unwrap();
    assert!(matches!(r, Err(Error::Conflict { .. })), "{r:?}");
    // The batch is held between its parts; a flush moves the log start now.
    let deadline = Instant::now() + LIMIT;
    while held.load(SeqCst) == 0 {
        assert!(Instant::now() < deadline, "the batch never wrote a part");
        std::thread::sleep(Duration::from_millis(1));
    }
    db.put(b"between", b"parts").unwrap();
    db.flush().unwrap();
    go_tx.send(()).unwrap();
    writer.join().unwrap().unwrap();
    silt::kill_point::set_hook(None);

    let check = |db: &Db| {
        assert_eq!(db.prefix(b"lost").count(), 0);
        let kept: Vec<_> = db.prefix(b"kept").collect::<Result<_, _>>().unwrap();
        assert_eq!(kept.len(), 600);
        for (i, (k, v)) in kept.iter().enumerate() {
            assert_eq!(k, format!("kept{i:06}").as_bytes());
            assert_eq!(v, &vec![(i % 251) as u8; 300]);
        }
        assert_eq!(db.get(b"between").unwrap().as_deref(), Some(&b"parts"[..]));
    };
    check(&db);
    let crashed = fs.crash(CrashMode::KeepAll, 2);
    drop(db);
    let db = open(crashed);
    check(&db);
}

/// A commit in parts flushed while another commit in parts, begun after its first part,
/// holds the log start back: the start lies before the first's commit record but after its
/// first part. Replay after a crash must take the first as flushed (its parts and its
/// commit record are skipped; its writes are in a table), not as a commit with its parts
/// missing. (Found by `silt-stress crash --mode blackbox` with batches in parts.)
///
/// The second reserves its first part only after the first has completed, so no later
/// completion moves `visible` past that part: the flush, whose boundary lies past it, must
/// not wait for the second's commit (CI hung here for 60 s when the second happened to
/// reserve late; the second's own part now moves `visible`).
#[test]
fn a_flushed_commit_in_parts_behind_another_pin_reopens() {
    let _turn = hook_turn();
    let fs = SimFs::new();
    let open = |fs: Arc<SimFs>| {
        Db::builder("/db")
            .file_system(fs)
            .wal_segment_bytes(64 << 10)
            .open()
            .unwrap()
    };
    let db = open(fs.clone());
    let batch_of = |prefix: &str| {
        let mut b = silt::WriteBatch::new();
        for i in 0..600u32 {
            b.put(
                format!("{prefix}{i:06}").as_bytes(),
                &[(i % 251) as u8; 300],
            );
        }
        b
    };
    let (one_tx, one_rx) = mpsc::channel::<()>();
    let (two_tx, two_rx) = mpsc::channel::<()>();
    let (free_tx, free_rx) = mpsc::channel::<()>();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let (parted_tx, parted_rx) = mpsc::channel::<()>();
    let (one_tx, two_tx) = (Mutex::new(one_tx), Mutex::new(two_tx));
    let (two_rx, free_rx) = (Mutex::new(two_rx), Mutex::new(free_rx));
    let (done_rx, parted_tx) = (Mutex::new(done_rx), Mutex::new(parted_tx));
    let seen = Arc::new(AtomicU32::new(0));
    let hook = {
        let seen = seen.clone();
        move |name: &'static str| {
            let me = std::thread::current().name().map(str::to_owned);
            match (name, me.as_deref()) {
                // The first batch, after its first part: the second pins now, after it.
                (PART_POINT, Some("one")) if seen.fetch_add(1, SeqCst) == 0 => {
                    one_tx.lock().unwrap().send(()).unwrap();
                    two_rx
                        .lock()
                        .unwrap()
                        .recv_timeout(LIMIT)
                        .expect("the second pinned");
                }
                // Pinned; its first part is reserved once the first has completed.
                (PIN_POINT, Some("two")) => {
                    two_tx.lock().unwrap().send(()).unwrap();
                    done_rx
                        .lock()
                        .unwrap()
                        .recv_timeout(LIMIT)
                        .expect("the first completed");
                }
                // The second stays between its parts until the crash image is taken.
                (PART_POINT, Some("two")) => {
                    parted_tx.lock().unwrap().send(()).unwrap();
                    let _ = free_rx.lock().unwrap().recv_timeout(LIMIT);
                }
                _ => {}
            }
        }
    };
    silt::kill_point::set_hook(Some(Arc::new(hook)));
    let one = {
        let (db, b) = (db.clone(), batch_of("one"));
        std::thread::Builder::new()
            .name("one".into())
            .spawn(move || db.write(b, silt::WriteOptions::default()))
            .unwrap()
    };
    one_rx.recv_timeout(LIMIT).expect("the first wrote a part");
    let two = {
        let (db, b) = (db.clone(), batch_of("two"));
        std::thread::Builder::new()
            .name("two".into())
            .spawn(move || db.write(b, silt::WriteOptions::default()))
            .unwrap()
    };
    one.join().unwrap().unwrap();
    done_tx.send(()).unwrap();
    parted_rx
        .recv_timeout(LIMIT)
        .expect("the second wrote its first part");
    // The first's commit goes to a table; the second's pin keeps the log start behind it.
    db.flush().unwrap();
    let crashed = fs.crash(CrashMode::KeepAll, 3);
    free_tx.send(()).unwrap();
    two.join().unwrap().unwrap();
    silt::kill_point::set_hook(None);
    drop(db);
    let db = open(crashed);
    let one: Vec<_> = db.prefix(b"one").collect::<Result<_, _>>().unwrap();
    assert_eq!(one.len(), 600);
    for (i, (k, v)) in one.iter().enumerate() {
        assert_eq!(k, format!("one{i:06}").as_bytes());
        assert_eq!(v, &vec![(i % 251) as u8; 300]);
    }
    assert_eq!(db.prefix(b"two").count(), 0, "the second never committed");
}

/// A flush places a table below level 0 only where no running compaction may write
/// (`compaction/flush_split.rs`, `JobSpan`). Scenario:
/// 1. one flush of two ranges far apart, [0, 99] and [1,000,000, 1,000,099], is cut in two,
///    and both tables go to the last level;
/// 2. newer copies of both ranges, one flush each (not cut, and overlapping those tables),
///    go to level 0, whose trigger of two starts a job whose output spans
///    [0, 1,000,099], the gap included;
/// 3. held at its point, the job has written that output; a flush of [500, 599],
///    [700,000, 700,099] and [2,000,000, 2,000,099] is cut in three, and no table overlaps
///    any table;
/// 4. the third goes to the last level, the first two must go to level 0: at the last level
///    they would overlap the job's output, and the job's manifest edit would fail and poison
///    the database;
/// 5. those two are one run of level 0 (one flush's key-disjoint tables), so with a trigger
///    of two they start no compaction once the job is done.
#[test]
fn a_flush_places_no_table_where_a_running_compaction_writes() {
    let _turn = hook_turn();
    let fs = SimFs::new();
    let open = |fs: Arc<SimFs>| {
        Db::builder("/db")
            .file_system(fs)
            .l0_compaction_trigger(2)
            // Tables of 1 KiB may be cut (a 64th of this).
            .table_target_bytes(64 << 10)
            .open()
            .unwrap()
    };
    let db = open(fs.clone());
    let key = |i: u64| i.to_be_bytes();
    let value = |tag: u8| [tag; 32];
    // Ranges as (first, end): [first, end) of equal lengths, written round robin, as
    // writers at once would (so a flush's tables hold interleaved seqnos).
    let put_ranges = |db: &Db, ranges: &[(u64, u64)], tag: u8| {
        for i in 0..ranges[0].1 - ranges[0].0 {
            for &(first, _) in ranges {
                db.put(&key(first + i), &value(tag)).unwrap();
            }
        }
        db.flush().unwrap();
    };
    put_ranges(&db, &[(0, 100), (1_000_000, 1_000_100)], 1);
    let s = db.stats();
    assert_eq!(s.flush_tables_below_l0, 2, "{s:?}");
    assert_eq!(s.levels[0].tables, 0, "{s:?}");

    let (at_point_tx, at_point_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (at_point_tx, go_rx) = (Mutex::new(at_point_tx), Mutex::new(go_rx));
    let held = std::sync::atomic::AtomicBool::new(false);
    let hook = move |name: &'static str| {
        if name == COMPACTION_POINT && !held.swap(true, SeqCst) {
            at_point_tx.lock().unwrap().send(()).unwrap();
            go_rx
                .lock()
                .unwrap()
                .recv_timeout(LIMIT)
                .expect("the test let the job go on");
        }
    };
    silt::kill_point::set_hook(Some(Arc::new(hook)));
    put_ranges(&db, &[(0, 100)], 2);
    put_ranges(&db, &[(1_000_000, 1_000_100)], 2);
    at_point_rx
        .recv_timeout(LIMIT)
        .expect("the level-0 compaction reached its point");
    put_ranges(
        &db,
        &[(500, 600), (700_000, 700_100), (2_000_000, 2_000_100)],
        3,
    );
    let s = db.stats();
    assert_eq!(
        s.flush_tables_below_l0, 3,
        "of the cut flush's three tables, the two in the job's span went to level 0: {s:?}"
    );
    go_tx.send(()).unwrap();
    let settled = db.wait_for_compactions(LIMIT);
    silt::kill_point::set_hook(None);
    assert!(matches!(settled, Ok(true)), "{settled:?}");
    let s = db.stats();
    assert_eq!(s.levels[0].tables, 2, "{s:?}");
    assert_eq!(
        s.compactions, 1,
        "two tables of one flush are one run: {s:?}"
    );
    let check = |db: &Db| {
        for (r, tag) in [
            (0..100, 2),
            (1_000_000..1_000_100, 2),
            (500..600, 3),
            (700_000..700_100, 3),
            (2_000_000..2_000_100, 3),
        ] {
            for i in r {
                assert_eq!(db.get(&key(i)).unwrap(), Some(value(tag).to_vec()), "{i}");
            }
        }
        assert_eq!(db.range(&key(0)[..]..&key(3_000_000)[..]).count(), 500);
    };
    check(&db);
    db.put(b"after", b"x").unwrap();
    db.close().unwrap();
    let db = open(fs);
    check(&db);
    assert_eq!(db.get(b"after").unwrap().as_deref(), Some(&b"x"[..]));
}
