//! Dead runs (`read/dead_runs.rs`, `DbBuilder::dead_runs`): an iterator that walked a range
//! of deleted keys records it, and a later one starting there seeks past it. These tests
//! check that a read never differs from one that walks (invariant D1): a value written into
//! a run, a transaction's own write, an older snapshot and a merge operand are all seen;
//! and, from concurrent writers, that every iterator agrees with a cursor (which never uses
//! runs) at the same snapshot.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use silt::{Db, Read, TxnOptions, WriteBatch, WriteOptions};

fn open(dir: &std::path::Path) -> Db {
    Db::builder(dir)
        // Keep the walks in the memtable, as a queue's are between flushes.
        .memtable_scan_flush_trigger(0)
        .stats_dump_period(None)
        .open()
        .unwrap()
}

fn key(i: u32) -> Vec<u8> {
    format!("q{i:06}").into_bytes()
}

/// The first pair of the range from `key(from)`, by an iterator.
fn head(r: &impl Read, from: u32) -> Option<Vec<u8>> {
    r.range(key(from)..).next().map(|p| p.unwrap().0)
}

/// The same by a cursor, which never seeks past a run.
fn head_by_cursor(r: &impl Read, from: u32) -> Option<Vec<u8>> {
    let mut c = r.cursor();
    c.seek(&key(from)).unwrap();
    c.key().map(<[u8]>::to_vec)
}

/// `n` rows, the first `dead` of them deleted.
fn queue(db: &Db, n: u32, dead: u32) {
    for i in 0..n {
        db.put(&key(i), b"row").unwrap();
    }
    for i in 0..dead {
        db.delete(&key(i)).unwrap();
    }
}

#[test]
fn a_second_read_of_a_queue_head_seeks_past_the_deletes_the_first_walked() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    queue(&db, 1000, 500);
    // The first read arms the family, the second records, the third seeks past.
    for _ in 0..3 {
        assert_eq!(head(&db, 0), Some(key(500)));
    }
    let s = db.stats();
    assert!(s.dead_run_records >= 1, "{s:?}");
    assert!(s.dead_run_jumps >= 1, "{s:?}");
    // The head moves on: the read seeks past the run, walks the new deletes, and extends it.
    for i in 500..510 {
        db.delete(&key(i)).unwrap();
        assert_eq!(head(&db, 0), Some(key(i + 1)));
    }
    // A read starting inside the run, and one past it, are the same as a walk.
    assert_eq!(head(&db, 250), Some(key(510)));
    assert_eq!(head(&db, 700), Some(key(700)));
    assert_eq!(head_by_cursor(&db, 0), Some(key(510)));
}

#[test]
fn a_value_written_into_a_run_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    queue(&db, 1000, 500);
    for _ in 0..3 {
        assert_eq!(head(&db, 0), Some(key(500)));
    }
    assert!(db.stats().dead_run_records >= 1);
    db.put(&key(123), b"back").unwrap();
    assert_eq!(head(&db, 0), Some(key(123)));
    assert_eq!(head(&db, 124), Some(key(500)));
    // Deleted again: dead again, and found dead.
    db.delete(&key(123)).unwrap();
    for _ in 0..3 {
        assert_eq!(head(&db, 0), Some(key(500)));
    }
    // A batch, a transaction and a value with a time to live are writes like any other.
    let mut b = silt::WriteBatch::new();
    b.put(&key(7), b"batch");
    db.write(b, silt::WriteOptions::default()).unwrap();
    assert_eq!(head(&db, 0), Some(key(7)));
    db.delete(&key(7)).unwrap();
    for _ in 0..3 {
        assert_eq!(head(&db, 0), Some(key(500)));
    }
    let mut t = db.begin(TxnOptions::default());
    t.put(&key(9), b"txn").unwrap();
    t.commit().unwrap();
    assert_eq!(head(&db, 0), Some(key(9)));
    db.delete(&key(9)).unwrap();
    for _ in 0..3 {
        assert_eq!(head(&db, 0), Some(key(500)));
    }
    let mut b = silt::WriteBatch::new();
    b.put_with_ttl(&key(11), b"ttl", Duration::from_secs(3600));
    db.write(b, silt::WriteOptions::default()).unwrap();
    assert_eq!(head(&db, 0), Some(key(11)));
}

#[test]
fn an_older_snapshot_and_a_transactions_own_writes_are_read_through_a_run() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    queue(&db, 1000, 400);
    let old = db.snapshot();
    for i in 400..500 {
        db.delete(&key(i)).unwrap();
    }
    for _ in 0..3 {
        assert_eq!(head(&db, 0), Some(key(500)));
    }
    assert!(db.stats().dead_run_jumps >= 1);
    // Recorded after the snapshot: the snapshot still sees the rows deleted since.
    assert_eq!(head(&old, 0), Some(key(400)));
    // A transaction's own write inside the run, and its own delete of the head.
    let mut t = db.begin(TxnOptions::default());
    t.put(&key(42), b"mine").unwrap();
    assert_eq!(
        t.range(key(0)..).next().map(|p| p.unwrap().0),
        Some(key(42))
    );
    t.delete(&key(42)).unwrap();
    t.delete(&key(500)).unwrap();
    assert_eq!(
        t.range(key(0)..).next().map(|p| p.unwrap().0),
        Some(key(501))
    );
    t.rollback();
    // Nothing the transaction did is in the runs.
    assert_eq!(head(&db, 0), Some(key(500)));
}

#[test]
fn a_walk_at_a_snapshot_records_nothing_over_a_value_written_since() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    queue(&db, 1000, 500);
    // Armed: the next walks register, and may record.
    assert_eq!(head(&db, 0), Some(key(500)));
    let snap = db.snapshot();
    db.put(&key(123), b"back").unwrap();
    // The walk at the snapshot passes over the new value (invisible to it): all it saw was
    // dead, but the range is not dead for later reads.
    assert_eq!(head(&snap, 0), Some(key(500)));
    assert_eq!(head(&db, 0), Some(key(123)));
    assert_eq!(head(&db, 0), Some(key(123)));
}

/// A put and its delete that a flush dropped together (no snapshot between them) are gone
/// from later super-versions, but an iterator that pinned an earlier one still reads the
/// put; a run recorded on a later super-version must not hide it from that iterator.
#[test]
fn an_iterator_on_an_earlier_super_version_reads_what_a_flush_dropped_since() {
    for single in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        queue(&db, 1000, 500);
        assert_eq!(head(&db, 0), Some(key(500)), "arms the family");
        let snap = db.snapshot();
        let back = [key(250), b"x".to_vec()].concat();
        db.put(&back, b"back").unwrap();
        let mut pinned = db.range(key(0)..);
        if single {
            db.single_delete(&back).unwrap();
        } else {
            db.delete(&back).unwrap();
        }
        db.flush().unwrap();
        // Records [q000000, q000500) at the snapshot, on the flushed super-version.
        assert_eq!(head(&snap, 0), Some(key(500)));
        assert_eq!(head(&snap, 0), Some(key(500)));
        assert_eq!(
            pinned.next().map(|p| p.unwrap().0),
            Some(back.clone()),
            "single delete: {single}"
        );
    }
}

#[test]
fn a_merge_operand_written_into_a_run_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::builder(dir.path())
        .memtable_scan_flush_trigger(0)
        .stats_dump_period(None)
        .merge_operator(Arc::new(silt::Append::default()))
        .open()
        .unwrap();
    queue(&db, 1000, 500);
    for _ in 0..3 {
        assert_eq!(head(&db, 0), Some(key(500)));
    }
    assert!(db.stats().dead_run_records >= 1);
    db.merge(&key(77), b"m").unwrap();
    assert_eq!(head(&db, 0), Some(key(77)));
}

#[test]
fn runs_survive_flushes_and_compactions_and_reads_agree_with_a_walk() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    queue(&db, 3000, 1000);
    for _ in 0..3 {
        assert_eq!(head(&db, 0), Some(key(1000)));
    }
    db.flush().unwrap();
    assert_eq!(head(&db, 0), Some(key(1000)));
    for i in 1000..2000 {
        db.delete(&key(i)).unwrap();
    }
    db.compact_range::<&[u8], _>(..).unwrap();
    for _ in 0..3 {
        assert_eq!(head(&db, 0), Some(key(2000)));
        assert_eq!(head(&db, 1500), Some(key(2000)));
    }
    db.put(&key(1999), b"back").unwrap();
    assert_eq!(head(&db, 0), Some(key(1999)));
    assert_eq!(head_by_cursor(&db, 0), Some(key(1999)));
}

#[test]
fn turned_off_nothing_is_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::builder(dir.path())
        .memtable_scan_flush_trigger(0)
        .dead_runs(false)
        .stats_dump_period(None)
        .open()
        .unwrap();
    queue(&db, 1000, 500);
    for _ in 0..5 {
        assert_eq!(head(&db, 0), Some(key(500)));
    }
    let s = db.stats();
    assert_eq!((s.dead_run_records, s.dead_run_jumps), (0, 0));
}

/// A queue written from two threads — rows appended at the tail, deleted at the head one at
/// a time and in batches (so that reads walk new deletes past a run and extend it), and
/// deleted rows written again (each written value could break invariant D1 if a run missed
/// it) — while two readers take snapshots and compare an iterator's head (which seeks past
/// runs) with a cursor's (which walks) at the same snapshot. The tail writer keeps the queue
/// a few thousand rows long, as a queue is, so that compaction keeps up on a slow machine.
#[test]
fn from_concurrent_writers_every_iterator_agrees_with_a_walk() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(
        Db::builder(dir.path())
            .memtable_scan_flush_trigger(0)
            .memtable_bytes(256 << 10)
            .stats_dump_period(None)
            .open()
            .unwrap(),
    );
    queue(&db, 2000, 200);
    let stop = Arc::new(AtomicBool::new(false));
    let tail = Arc::new(AtomicU32::new(2000));
    let head_at = Arc::new(AtomicU32::new(200));
    let mut threads = Vec::new();
    // The queue: a tail writer, a head deleter.
    {
        let (db, stop, tail, head_at) = (db.clone(), stop.clone(), tail.clone(), head_at.clone());
        threads.push(std::thread::spawn(move || {
            while !stop.load(SeqCst) {
                let i = tail.load(SeqCst);
                if i - head_at.load(SeqCst) >= 4000 {
                    std::thread::yield_now();
                    continue;
                }
                db.put(&key(i), b"row").unwrap();
                tail.store(i + 1, SeqCst);
            }
        }));
    }
    {
        let (db, stop, tail, head_at) = (db.clone(), stop.clone(), tail.clone(), head_at.clone());
        threads.push(std::thread::spawn(move || {
            let mut head = 200u32;
            let mut revived = 0u32;
            let mut step = 0u32;
            while !stop.load(SeqCst) {
                // One row, or a batch of more rows than a read walks before it records.
                let n = if step % 2 == 0 { 1 } else { 24 };
                step += 1;
                if tail.load(SeqCst) - head < n + 100 {
                    std::thread::yield_now();
                    continue;
                }
                let mut b = WriteBatch::new();
                for i in head..head + n {
                    b.delete(&key(i));
                }
                db.write(b, WriteOptions::default()).unwrap();
                head += n;
                head_at.store(head, SeqCst);
                // Now and then a deleted row comes back for a moment, deep in the dead
                // range where runs are.
                if step % 4 == 0 {
                    let k = key(head / 3 + revived % 50);
                    revived += 1;
                    db.put(&k, b"again").unwrap();
                    std::thread::yield_now();
                    db.delete(&k).unwrap();
                }
            }
        }));
    }
    let mut readers = Vec::new();
    let done = Arc::new(AtomicU64::new(0));
    for r in 0..2u32 {
        let (db, stop, done) = (db.clone(), stop.clone(), done.clone());
        readers.push(std::thread::spawn(move || {
            let mut checks = 0u64;
            while !stop.load(SeqCst) {
                let snap = db.snapshot();
                let from = if checks % 3 == 0 { 0 } else { r * 17 };
                let by_iter = head(&snap, from);
                let by_cursor = head_by_cursor(&snap, from);
                assert_eq!(by_iter, by_cursor, "check {checks}");
                checks += 1;
                done.fetch_add(1, SeqCst);
            }
            checks
        }));
    }
    // Until the readers made enough checks with the runs in use (else this test checks
    // nothing), however slow the machine.
    let start = Instant::now();
    let used = loop {
        let s = db.stats();
        if done.load(SeqCst) >= 20_000 && s.dead_run_jumps >= 1000 && s.dead_run_records >= 1000 {
            break true;
        }
        if start.elapsed() > Duration::from_secs(120) || readers.iter().any(|t| t.is_finished()) {
            break false;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    stop.store(true, SeqCst);
    for t in threads {
        t.join().unwrap();
    }
    let checks: u64 = readers.into_iter().map(|t| t.join().unwrap()).sum();
    let s = db.stats();
    eprintln!(
        "{checks} checks, {} records, {} jumps",
        s.dead_run_records, s.dead_run_jumps
    );
    assert!(used, "{checks} checks; {s:?}");
}

/// Random queue operations against a model: rows put at the tail and deleted from the head,
/// deleted rows written again, reads from random starts through the database, through
/// snapshots and through iterators pinned long before they are read, flushes, compactions
/// and transactions with writes of their own — every read is the model's.
#[test]
fn random_queue_operations_read_as_the_model_says() {
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;
    type Model = BTreeMap<u32, Vec<u8>>;
    let first_at = |m: &Model, from: u32| m.range(from..).next().map(|(k, _)| key(*k));
    for seed in 0..3u64 {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let dir = tempfile::tempdir().unwrap();
        let db = Db::builder(dir.path())
            .memtable_scan_flush_trigger(0)
            .memtable_bytes(64 << 10)
            .stats_dump_period(None)
            .open()
            .unwrap();
        let mut m: Model = BTreeMap::new();
        let mut tail = 0u32;
        for _ in 0..600 {
            db.put(&key(tail), b"row").unwrap();
            m.insert(tail, b"row".to_vec());
            tail += 1;
        }
        let mut snaps: Vec<(silt::Snapshot, Model)> = Vec::new();
        let mut pinned: Vec<(silt::Iter, Option<Vec<u8>>)> = Vec::new();
        for step in 0..20_000u32 {
            let what = rng.random_range(0..1000);
            match what {
                0..=299 => {
                    if let Some((&k, _)) = m.iter().next() {
                        db.delete(&key(k)).unwrap();
                        m.remove(&k);
                    }
                }
                300..=549 => {
                    let v = format!("v{step}").into_bytes();
                    db.put(&key(tail), &v).unwrap();
                    m.insert(tail, v);
                    tail += 1;
                }
                550..=599 => {
                    let k = rng.random_range(0..tail);
                    let v = format!("again{step}").into_bytes();
                    db.put(&key(k), &v).unwrap();
                    m.insert(k, v);
                }
                600..=649 => {
                    let k = rng.random_range(0..tail);
                    db.delete(&key(k)).unwrap();
                    m.remove(&k);
                }
                650..=849 => {
                    let from = match rng.random_range(0..3) {
                        0 => 0,
                        1 => rng.random_range(0..tail),
                        _ => m.keys().next().map_or(0, |k| k / 2),
                    };
                    assert_eq!(
                        head(&db, from),
                        first_at(&m, from),
                        "seed {seed} step {step}"
                    );
                }
                850..=889 => {
                    if snaps.len() < 3 {
                        snaps.push((db.snapshot(), m.clone()));
                    } else {
                        let i = rng.random_range(0..snaps.len());
                        let (s, sm) = &snaps[i];
                        let from = rng.random_range(0..tail);
                        assert_eq!(head(s, from), first_at(sm, from), "seed {seed} step {step}");
                        assert_eq!(head(s, 0), first_at(sm, 0), "seed {seed} step {step}");
                        if rng.random_bool(0.3) {
                            snaps.swap_remove(i);
                        }
                    }
                }
                890..=939 => {
                    if pinned.len() < 4 {
                        pinned.push((db.range(key(0)..), first_at(&m, 0)));
                    } else {
                        let (mut it, want) = pinned.swap_remove(rng.random_range(0..4));
                        assert_eq!(
                            it.next().map(|p| p.unwrap().0),
                            want,
                            "seed {seed} step {step}"
                        );
                    }
                }
                940..=959 => db.flush().unwrap(),
                960..=964 => db.compact_range::<&[u8], _>(..).unwrap(),
                _ => {
                    let mut t = db.begin(TxnOptions::default());
                    let k = rng.random_range(0..tail);
                    let mut tm = m.clone();
                    if rng.random_bool(0.5) {
                        t.put(&key(k), b"mine").unwrap();
                        tm.insert(k, b"mine".to_vec());
                    } else {
                        t.delete(&key(k)).unwrap();
                        tm.remove(&k);
                    }
                    let got = t.range(key(0)..).next().map(|p| p.unwrap().0);
                    assert_eq!(got, first_at(&tm, 0), "seed {seed} step {step}");
                    if rng.random_bool(0.5) {
                        t.commit().unwrap();
                        m = tm;
                    } else {
                        t.rollback();
                    }
                }
            }
        }
        let s = db.stats();
        assert!(s.dead_run_jumps > 100 && s.dead_run_records > 100, "{s:?}");
    }
}

/// A serializable transaction's commit checks the ranges it scanned for writes since its
/// snapshot; a dead run from the range's start (recorded at or below the snapshot) is
/// skipped, as it read empty then and reads empty now. A value written into it is still a
/// phantom, and so is a change to the row the scan found.
#[test]
fn a_serializable_commit_skips_a_dead_run_of_its_scan_but_not_a_phantom_in_it() {
    use silt::{Concurrency, Error, IsolationLevel};
    let opts = TxnOptions::new(IsolationLevel::Serializable, Concurrency::Optimistic);
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    queue(&db, 1000, 500);
    for _ in 0..3 {
        assert_eq!(head(&db, 0), Some(key(500)));
    }
    // Scans the head, deletes it, and commits after `between` ran.
    let deliver = |between: &dyn Fn()| -> silt::Result<()> {
        let mut t = db.begin(opts.clone());
        let k = t.range(key(0)..).next().unwrap().unwrap().0;
        t.delete(&k).unwrap();
        between();
        t.commit()
    };
    // Another delete of a key already dead: the scan's result stands.
    deliver(&|| db.delete(&key(100)).unwrap()).unwrap();
    assert_eq!(head(&db, 0), Some(key(501)));
    for _ in 0..2 {
        assert_eq!(head(&db, 0), Some(key(501)));
    }
    // A row written into the dead part: a phantom.
    let e = deliver(&|| db.put(&key(100), b"back").unwrap()).unwrap_err();
    assert!(matches!(e, Error::Conflict { .. }), "{e:?}");
    db.delete(&key(100)).unwrap();
    for _ in 0..2 {
        assert_eq!(head(&db, 0), Some(key(501)));
    }
    // The row the scan found, deleted meanwhile by someone else.
    let e = deliver(&|| db.delete(&key(501)).unwrap()).unwrap_err();
    assert!(matches!(e, Error::Conflict { .. }), "{e:?}");
}
