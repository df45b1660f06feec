//! A read that passes over many dead entries of the active memtable asks for it to be
//! flushed (`DbBuilder::memtable_scan_flush_trigger`), and a flush leaves out what no reader
//! can see (a single delete with its put, overwritten versions): the queue pattern of seed
//! 002 (insert at the tail, delete at the head, find the head by scanning from the start)
//! then stops walking every delete since the last flush.

use std::time::{Duration, Instant};

use silt::{Db, Read, Stats, TxnOptions};

mod common;

fn open(dir: &std::path::Path, trigger: u64) -> Db {
    Db::builder(dir)
        .memtable_scan_flush_trigger(trigger)
        // These reads must walk what they walk: a dead run would let them seek past it
        // (`tests/dead_runs.rs`).
        .dead_runs(false)
        .stats_dump_period(None)
        .open()
        .unwrap()
}

fn key(i: u32) -> Vec<u8> {
    format!("q{i:05}").into_bytes()
}

/// Puts `n` rows, then single-deletes the first `dead` of them: the head of a queue.
fn queue(db: &Db, n: u32, dead: u32) {
    for i in 0..n {
        db.put(&key(i), b"row").unwrap();
    }
    for i in 0..dead {
        db.single_delete(&key(i)).unwrap();
    }
}

fn wait_for(db: &Db, what: &str, ok: impl Fn(&Stats) -> bool) -> Stats {
    let start = Instant::now();
    loop {
        let s = db.stats();
        if ok(&s) {
            return s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "waited 10 s for {what}: {s:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn head(db: &Db) -> Vec<u8> {
    db.iter().next().unwrap().unwrap().0
}

#[test]
fn a_scan_over_deleted_rows_flushes_the_memtable_and_the_flush_drops_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), 100);
    queue(&db, 1000, 500);
    // Writes alone never ask.
    assert_eq!(db.stats().scan_flushes, 0);
    assert_eq!(db.stats().flushes, 0);

    // Finding the head passes over 500 single deletes and their puts.
    assert_eq!(head(&db), key(500));
    // The next write freezes the memtable, and the flush leaves the 500 pairs out.
    db.put(&key(1000), b"row").unwrap();
    assert_eq!(db.stats().scan_flushes, 1);
    let s = wait_for(&db, "the flush", |s| s.flushes == 1);
    assert_eq!(s.flush_dropped_entries, 1000);
    assert_eq!(s.levels[0].tables, 1);

    // Nothing is lost or brought back.
    let all: Vec<Vec<u8>> = db.iter().map(|r| r.unwrap().0).collect();
    assert_eq!(all, (500..=1000).map(key).collect::<Vec<_>>());
    assert_eq!(db.get(&key(0)).unwrap(), None);
    assert_eq!(db.get(&key(499)).unwrap(), None);
    assert_eq!(db.get(&key(500)).unwrap().as_deref(), Some(&b"row"[..]));

    // The head is now found without passing over anything: no second flush.
    assert_eq!(head(&db), key(500));
    db.put(&key(1001), b"row").unwrap();
    assert_eq!(db.stats().scan_flushes, 1);

    // And the same after a reopen (the dropped pairs are not replayed back).
    drop(db);
    let db = open(dir.path(), 100);
    assert_eq!(head(&db), key(500));
    assert_eq!(db.get(&key(499)).unwrap(), None);
    assert_eq!(db.iter().count(), 502);
}

#[test]
fn a_backward_scan_and_a_cursor_seek_ask_too() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), 100);
    for i in 0..1000 {
        db.put(&key(i), b"row").unwrap();
    }
    for i in 500..1000 {
        db.single_delete(&key(i)).unwrap();
    }
    // From the end backwards: the tail's 500 pairs are passed over.
    assert_eq!(db.iter().next_back().unwrap().unwrap().0, key(499));
    db.put(b"a", b"row").unwrap();
    assert_eq!(db.stats().scan_flushes, 1);
    wait_for(&db, "the flush", |s| s.flushes == 1);

    // A cursor's seek into the middle of deleted rows.
    for i in 2000..2300 {
        db.put(&key(i), b"row").unwrap();
        db.single_delete(&key(i)).unwrap();
    }
    let mut c = db.cursor();
    assert_eq!(
        c.seek(&key(2000)).unwrap(),
        None,
        "every row from 2000 on is deleted"
    );
    db.put(b"b", b"row").unwrap();
    assert_eq!(db.stats().scan_flushes, 2);
    let s = wait_for(&db, "the second flush", |s| s.flushes == 2);
    assert_eq!(s.flush_dropped_entries, 1000 + 600);
    assert_eq!(db.iter().count(), 502);
}

#[test]
fn the_trigger_off_never_flushes_early() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), 0);
    queue(&db, 1000, 500);
    assert_eq!(head(&db), key(500));
    db.put(&key(1000), b"row").unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let s = db.stats();
    assert_eq!((s.scan_flushes, s.flushes), (0, 0));
    // An explicit flush still drops the pairs.
    db.flush().unwrap();
    assert_eq!(db.stats().flush_dropped_entries, 1000);
    assert_eq!(head(&db), key(500));
}

#[test]
fn a_snapshot_keeps_what_it_sees_through_a_flush() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), 0);
    db.put(b"a", b"1").unwrap();
    db.put(b"b", b"old").unwrap();
    let snap = db.snapshot();
    db.single_delete(b"a").unwrap();
    db.put(b"b", b"new").unwrap();
    db.put(b"c", b"1").unwrap();
    db.single_delete(b"c").unwrap();
    db.put(b"d", b"1").unwrap();
    db.put(b"d", b"2").unwrap();
    db.flush().unwrap();
    // Only c's pair (both after the snapshot) and d's first version are invisible to
    // every reader.
    assert_eq!(db.stats().flush_dropped_entries, 3);
    assert_eq!(snap.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(snap.get(b"b").unwrap().as_deref(), Some(&b"old"[..]));
    assert_eq!(snap.get(b"c").unwrap(), None);
    assert_eq!(db.get(b"a").unwrap(), None);
    assert_eq!(db.get(b"b").unwrap().as_deref(), Some(&b"new"[..]));
    assert_eq!(db.get(b"c").unwrap(), None);
    assert_eq!(db.get(b"d").unwrap().as_deref(), Some(&b"2"[..]));
    // With the snapshot gone, compaction may drop the rest; reads agree before and after.
    drop(snap);
    db.compact_range::<&[u8], _>(..).unwrap();
    let all: Vec<(Vec<u8>, Vec<u8>)> = db.iter().map(|r| r.unwrap()).collect();
    assert_eq!(
        all,
        vec![
            (b"b".to_vec(), b"new".to_vec()),
            (b"d".to_vec(), b"2".to_vec())
        ]
    );
}

/// Opens with the memtable's trigger off and level 0's scan ratio at `ratio`, with level
/// 0's own count trigger out of reach: only reads can start a compaction.
fn open_l0(dir: &std::path::Path, ratio: f64) -> Db {
    Db::builder(dir)
        .memtable_scan_flush_trigger(0)
        .dead_runs(false)
        .l0_scan_compaction_ratio(ratio)
        .l0_compaction_trigger(16)
        .l0_slowdown_tables(32)
        .l0_stall_tables(48)
        .stats_dump_period(None)
        .open()
        .unwrap()
}

/// Level 0 as a queue leaves it: one table of 1000 rows, one of 500 deletes of its head
/// (`forward`) or of its tail; nothing below. Returns the bytes of the table of rows.
fn queue_in_l0(db: &Db, forward: bool) -> u64 {
    for i in 0..1000 {
        db.put(&key(i), b"row").unwrap();
    }
    db.flush().unwrap();
    let rows = db.stats().levels[0].bytes;
    let dead: Vec<u32> = if forward {
        (0..500).collect()
    } else {
        (500..1000).collect()
    };
    for i in dead {
        db.delete(&key(i)).unwrap();
    }
    db.flush().unwrap();
    let s = db.stats();
    assert_eq!(s.levels[0].tables, 2, "{s:?}");
    assert_eq!(s.compactions, 0, "{s:?}");
    rows
}

/// The first live key from the head (`forward`) or the tail: one step over the 500
/// deletes and the 500 rows they hide, 1000 of level 0's 1500 entries.
fn first_live(r: &impl Read, forward: bool) -> Vec<u8> {
    if forward {
        r.iter().next().unwrap().unwrap().0
    } else {
        r.iter().next_back().unwrap().unwrap().0
    }
}

#[test]
fn a_scan_over_deletes_in_level_0_compacts_it_early_in_both_directions() {
    for forward in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        // Early once reads passed over half of the 1500 entries the job would read.
        let db = open_l0(dir.path(), 0.5);
        let rows = queue_in_l0(&db, forward);
        // Point reads and writes never count.
        for i in 0..1000 {
            assert_eq!(db.get(&key(i)).unwrap().is_some(), (i >= 500) == forward);
        }
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(db.stats().scan_compactions, 0);
        let want = key(if forward { 500 } else { 499 });
        assert_eq!(first_live(&db, forward), want);
        let s = wait_for(&db, "the scan compaction", |s| {
            s.scan_compactions == 1 && s.levels[0].tables == 0
        });
        // The deletes met their rows on the way down, where nothing is older: neither is
        // kept, so what is left is smaller than the table of all the rows.
        let below: u64 = s.levels.iter().map(|l| l.bytes).sum();
        assert!(below > 0 && below < rows, "{rows} {s:?}");
        assert_eq!(db.iter().count(), 500);
        assert_eq!(first_live(&db, forward), want);
    }
}

/// A transaction's read has its own writes as the merged cursor's first child, before
/// the memtables: the level-0 tables' entries are still the ones counted.
#[test]
fn a_transaction_scan_over_deletes_in_level_0_counts_them_too() {
    for forward in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let db = open_l0(dir.path(), 0.5);
        queue_in_l0(&db, forward);
        // The active memtable holds an entry too, so every kind of child is there.
        db.put(b"z", b"unrelated").unwrap();
        let mut t = db.begin(TxnOptions::default());
        t.put(b"a", b"own write").unwrap();
        let want = key(if forward { 500 } else { 499 });
        let first = if forward {
            t.iter().nth(1).unwrap().unwrap().0
        } else {
            t.iter().rev().nth(1).unwrap().unwrap().0
        };
        assert_eq!(first, want);
        wait_for(&db, "the scan compaction", |s| {
            s.scan_compactions == 1 && s.levels[0].tables == 0
        });
        assert_eq!(
            first_live(&t, forward),
            if forward {
                b"a".to_vec()
            } else {
                b"z".to_vec()
            }
        );
        drop(t);
        assert_eq!(db.iter().count(), 501);
    }
}

/// What a read returns is not passed over: scanning a level 0 of live keys, again and
/// again in both directions, never compacts it early.
#[test]
fn scans_of_live_keys_never_compact_level_0_early() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_l0(dir.path(), 0.5);
    for half in 0..2u32 {
        for i in 0..1000 {
            db.put(&key(half * 1000 + i), b"row").unwrap();
        }
        db.flush().unwrap();
    }
    for _ in 0..20 {
        assert_eq!(db.iter().count(), 2000);
        assert_eq!(db.iter().rev().count(), 2000);
    }
    std::thread::sleep(Duration::from_millis(300));
    let s = db.stats();
    assert_eq!(
        (s.scan_compactions, s.compactions, s.levels[0].tables),
        (0, 0, 2),
        "{s:?}"
    );
}

/// A level 0 of deletes alone, with nothing below: the scan compaction rewrites it (and,
/// at the bottom, drops them), where a move would have kept every delete in the reads'
/// way.
#[test]
fn a_scan_compaction_of_deletes_alone_drops_them_instead_of_moving_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_l0(dir.path(), 0.5);
    for i in 0..1000 {
        db.delete(&key(i)).unwrap();
    }
    db.put(&key(5000), b"row").unwrap();
    db.flush().unwrap();
    assert_eq!(head(&db), key(5000));
    let s = wait_for(&db, "the scan compaction", |s| {
        s.scan_compactions == 1 && s.levels[0].tables == 0
    });
    let tables: u64 = s.levels.iter().map(|l| l.tables).sum();
    let bytes: u64 = s.levels.iter().map(|l| l.bytes).sum();
    assert_eq!(tables, 1, "{s:?}");
    assert!(bytes < s.compaction_read_bytes, "{s:?}");
    assert_eq!(db.iter().count(), 1);
}

#[test]
fn reads_add_up_until_walking_would_cost_more_than_the_compaction() {
    let dir = tempfile::tempdir().unwrap();
    // Twice the 1500 entries: three walks of 1000, not two.
    let db = open_l0(dir.path(), 2.0);
    queue_in_l0(&db, true);
    for _ in 0..2 {
        assert_eq!(head(&db), key(500));
    }
    std::thread::sleep(Duration::from_millis(300));
    let s = db.stats();
    assert_eq!((s.scan_compactions, s.levels[0].tables), (0, 2), "{s:?}");
    assert_eq!(head(&db), key(500));
    wait_for(&db, "the scan compaction", |s| {
        s.scan_compactions == 1 && s.levels[0].tables == 0
    });
    assert_eq!(head(&db), key(500));
}

#[test]
fn the_level_0_scan_ratio_off_never_compacts_early() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_l0(dir.path(), 0.0);
    queue_in_l0(&db, true);
    for _ in 0..20 {
        assert_eq!(head(&db), key(500));
    }
    std::thread::sleep(Duration::from_millis(300));
    let s = db.stats();
    assert_eq!(
        (s.scan_compactions, s.compactions, s.levels[0].tables),
        (0, 0, 2)
    );
}
