//! The shape of compaction work: what is rewritten and what only moves.
//!
//! A sequential load's level-0 tables hold disjoint key ranges with nothing below them:
//! they move down by a manifest edit (write amplification 2: log + flush), where merging
//! them would rewrite every byte once more. Tables that share keys must still be merged.

use silt::{Db, SyncMode, WriteBatch, WriteOptions};

fn open(path: &std::path::Path) -> Db {
    Db::builder(path)
        .sync_mode(SyncMode::None)
        .memtable_bytes(1 << 20)
        // Flushed tables to level 0, as the tests of level 0's compactions need.
        .flush_below_level0(false)
        // No automatic level-0 compaction: the test compacts by hand.
        .l0_compaction_trigger(1000)
        .l0_stall_tables(2000)
        .open()
        .unwrap()
}

fn key(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

/// Writes `keys` in batches of 100 and flushes after each `per_table` keys.
fn load(db: &Db, keys: &[u64], per_table: usize) {
    for table in keys.chunks(per_table) {
        for batch in table.chunks(100) {
            let mut b = WriteBatch::new();
            for &k in batch {
                b.put(&key(k), &[k as u8; 100]);
            }
            db.write(b, WriteOptions::default()).unwrap();
        }
        db.flush().unwrap();
    }
}

fn check_all(db: &Db, keys: &[u64]) {
    for &k in keys {
        assert_eq!(
            db.get(&key(k)).unwrap(),
            Some(vec![k as u8; 100]),
            "key {k}"
        );
    }
}

#[test]
fn disjoint_level0_tables_move_down_without_a_rewrite() {
    let tmp = tempfile::tempdir().unwrap();
    let keys: Vec<u64> = (0..8_000).collect();
    {
        let db = open(tmp.path());
        load(&db, &keys, 2_000);
        let s = db.stats();
        assert_eq!(s.levels[0].tables, 4, "{s:?}");
        db.compact_range::<&[u8], _>(..).unwrap();
        let s = db.stats();
        assert_eq!(s.levels[0].tables, 0, "{s:?}");
        assert_eq!(
            s.levels.iter().skip(1).map(|l| l.tables).sum::<u64>(),
            4,
            "the four tables are below level 0: {s:?}"
        );
        assert_eq!(s.compaction_write_bytes, 0, "moved, not rewritten: {s:?}");
        assert!(s.compactions >= 1, "{s:?}");
        check_all(&db, &keys);
        db.close().unwrap();
    }
    let db = open(tmp.path());
    check_all(&db, &keys);
    assert_eq!(db.stats().levels[0].tables, 0);
}

#[test]
fn level0_tables_sharing_a_range_are_merged() {
    let tmp = tempfile::tempdir().unwrap();
    // Interleaved: every table spans the whole key range.
    let keys: Vec<u64> = (0..8_000).map(|i| (i % 4) * 2_000 + i / 4).collect();
    let db = open(tmp.path());
    load(&db, &keys, 2_000);
    assert_eq!(db.stats().levels[0].tables, 4);
    db.compact_range::<&[u8], _>(..).unwrap();
    let s = db.stats();
    assert_eq!(s.levels[0].tables, 0, "{s:?}");
    assert!(s.compaction_write_bytes > 0, "merged: {s:?}");
    check_all(&db, &keys);
}

#[test]
fn disjoint_level0_tables_over_data_below_are_merged_with_it() {
    let tmp = tempfile::tempdir().unwrap();
    let db = open(tmp.path());
    // A bottom level first, then disjoint level-0 tables overwriting part of its range.
    let base: Vec<u64> = (0..4_000).collect();
    load(&db, &base, 4_000);
    db.compact_range::<&[u8], _>(..).unwrap();
    let before = db.stats().compaction_write_bytes;
    let over: Vec<u64> = (1_000..3_000).collect();
    for table in over.chunks(1_000) {
        let mut b = WriteBatch::new();
        for &k in table {
            b.put(&key(k), &[(k as u8).wrapping_add(1); 100]);
        }
        db.write(b, WriteOptions::default()).unwrap();
        db.flush().unwrap();
    }
    db.compact_range::<&[u8], _>(..).unwrap();
    let s = db.stats();
    assert_eq!(s.levels[0].tables, 0, "{s:?}");
    assert!(s.compaction_write_bytes > before, "merged: {s:?}");
    for k in 0..4_000u64 {
        let want = if (1_000..3_000).contains(&k) {
            (k as u8).wrapping_add(1)
        } else {
            k as u8
        };
        assert_eq!(db.get(&key(k)).unwrap(), Some(vec![want; 100]), "key {k}");
    }
}

#[test]
fn two_sequential_writers_do_not_rewrite_what_lies_between_them() {
    // Writers A (keys from 0) and B (keys from 1,000,000) load sequentially, so every
    // level-0 table spans both ranges and its hull covers everything B loaded before. Only
    // the tables holding keys of the new tables are merged; the rest stay, with the outputs
    // cut around them.
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::builder(tmp.path())
        .sync_mode(SyncMode::None)
        .memtable_bytes(1 << 20)
        .table_target_bytes(64 << 10)
        .l0_compaction_trigger(1000)
        .l0_stall_tables(2000)
        .open()
        .unwrap();
    let mut all = Vec::new();
    let (mut a, mut b) = (0u64, 1_000_000u64);
    for _round in 0..8 {
        for _flush in 0..4 {
            let mut keys = Vec::new();
            for _ in 0..500 {
                keys.push(a);
                keys.push(b);
                a += 1;
                b += 1;
            }
            keys.sort();
            let mut batch = WriteBatch::new();
            for &k in &keys {
                batch.put(&key(k), &[k as u8; 100]);
            }
            db.write(batch, WriteOptions::default()).unwrap();
            db.flush().unwrap();
            all.extend(keys);
        }
        db.compact_range::<&[u8], _>(..).unwrap();
    }
    let s = db.stats();
    let table_bytes: u64 = s.levels.iter().map(|l| l.bytes).sum();
    assert_eq!(s.levels[0].tables, 0, "{s:?}");
    // Each entry is merged about once (level-0 tables overlap each other), plus one
    // table-sized straddle per round; rewriting the hull each round costs ~2.7x here.
    assert!(
        (s.compaction_write_bytes as f64) < 1.5 * table_bytes as f64,
        "compaction wrote {} for {} of tables: {s:?}",
        s.compaction_write_bytes,
        table_bytes
    );
    all.sort();
    check_all(&db, &all);
    let scanned: Vec<Vec<u8>> = db.iter().map(|r| r.unwrap().0.to_vec()).collect();
    let want: Vec<Vec<u8>> = all.iter().map(|k| key(*k).to_vec()).collect();
    assert_eq!(scanned, want, "a full scan sees every key once, in order");
    db.close().unwrap();
    let db = open(tmp.path());
    check_all(&db, &all);
}

/// A large compaction split into sub-compactions writes exactly what one thread would:
/// the same pairs, tables that do not overlap, and overwritten and deleted keys gone.
#[test]
fn sub_compactions_write_what_one_compaction_would() {
    use rand::{Rng, SeedableRng};
    let mut contents = Vec::new();
    for n in [1usize, 2, 3] {
        let dir = tempfile::tempdir().unwrap();
        let db = silt::Db::builder(dir.path())
            .memtable_bytes(64 << 10)
            .table_target_bytes(16 << 10)
            .level_base_bytes(64 << 10)
            .l0_compaction_trigger(100)
            .subcompactions(n)
            .open()
            .unwrap();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for i in 0..6000u32 {
            let k = format!("k{:05}", rng.random_range(0..3000u32));
            if i % 10 == 0 {
                db.delete(k.as_bytes()).unwrap();
            } else {
                db.put(k.as_bytes(), &[i as u8; 40]).unwrap();
            }
        }
        db.compact_range::<&[u8], _>(..).unwrap();
        let s = db.stats();
        if n == 1 {
            assert_eq!(s.split_compactions, 0);
        } else {
            assert!(s.split_compactions > 0, "{n} threads: nothing was split");
        }
        contents.push(db.iter().collect::<Result<Vec<_>, _>>().unwrap());
        // The last level's tables are disjoint and sorted.
        let tables = db.stats().levels[6].tables;
        assert!(tables > 1);
    }
    assert_eq!(contents[0], contents[1]);
    assert_eq!(contents[0], contents[2]);
}

/// Deletes that land in a middle level under its size target are compacted early: a table
/// that is mostly tombstones is merged into the level below, where they meet what they
/// delete and are dropped at the bottom, without waiting for its level to fill.
#[test]
fn a_tombstone_heavy_table_is_compacted_down_early() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::builder(dir.path())
        .memtable_bytes(1 << 20)
        .table_target_bytes(64 << 10)
        .level_base_bytes(64 << 10)
        .level_size_ratio(4)
        .l0_compaction_trigger(1)
        .open()
        .unwrap();
    for i in 0..3000u32 {
        db.put(format!("k{i:05}").as_bytes(), &[1u8; 40]).unwrap();
    }
    db.compact_range::<&[u8], _>(..).unwrap();
    assert!(db.stats().levels[6].tables > 0);
    // 600 deletes: one level-0 table, moved down to the base level (nothing there to merge
    // with), far under that level's target.
    let mut b = WriteBatch::new();
    for i in 0..600u32 {
        b.delete(format!("k{:05}", i * 5).as_bytes());
    }
    db.write(b, WriteOptions::default()).unwrap();
    db.flush().unwrap();
    let start = std::time::Instant::now();
    loop {
        let s = db.stats();
        let middle: u64 = s.levels[1..6].iter().map(|l| l.tables).sum();
        if s.levels[0].tables == 0 && middle == 0 && s.tombstone_compactions > 0 {
            break;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(30),
            "the tombstones stayed above the last level: {s:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(db.iter().count(), 2400);
    assert_eq!(db.get(b"k00005").unwrap(), None);
}

/// `wait_for_compactions` returns `true` only when nothing is running or due: level 0 is
/// under its trigger and no compaction starts afterwards while nothing is written.
#[test]
fn wait_for_compactions_returns_once_nothing_is_due() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::builder(tmp.path())
        .sync_mode(SyncMode::None)
        .memtable_bytes(1 << 20)
        .l0_compaction_trigger(2)
        .level_base_bytes(1 << 20)
        .open()
        .unwrap();
    // Interleaved keys: every table spans the whole range, so level 0 must be merged and
    // the levels below fill past their targets, several jobs' worth.
    let keys: Vec<u64> = (0..60_000).map(|i| (i % 6) * 10_000 + i / 6).collect();
    load(&db, &keys, 5_000);
    assert!(db
        .wait_for_compactions(std::time::Duration::from_secs(120))
        .unwrap());
    let s = db.stats();
    assert!(s.levels[0].tables < 2, "{s:?}");
    assert!(s.compactions >= 1, "{s:?}");
    // Idle means no job is picked later: give the compaction thread several wake-ups.
    let done = s.compactions;
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(db.stats().compactions, done);
    assert!(db.wait_for_compactions(std::time::Duration::ZERO).unwrap());
    check_all(&db, &keys);
    db.close().unwrap();

    // A read-only handle has no background work.
    let ro = Db::builder(tmp.path()).read_only(true).open().unwrap();
    assert!(ro.wait_for_compactions(std::time::Duration::ZERO).unwrap());
}

/// Settled also means the files are gone: the flush's log purge (after the version swap
/// `flush` waits for) and the replaced tables' removal are part of the background work.
#[test]
fn wait_for_compactions_covers_the_log_purge_and_replaced_tables() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::builder(tmp.path())
        .sync_mode(SyncMode::None)
        .memtable_bytes(4 << 20)
        .wal_segment_bytes(1 << 20)
        .l0_compaction_trigger(2)
        .level_base_bytes(1 << 20)
        .open()
        .unwrap();
    let files = |sub: &str, ext: &str| {
        std::fs::read_dir(tmp.path().join(sub))
            .unwrap()
            .filter(|e| {
                let p = e.as_ref().unwrap().path();
                p.extension().is_some_and(|x| x == ext)
            })
            .count()
    };
    for round in 0..4u64 {
        // About 3 MiB of records: three segments' worth, flushed below the memtable's size.
        let keys: Vec<u64> = (0..24_000).map(|i| i * 4 + round).collect();
        load(&db, &keys, keys.len());
        assert!(db
            .wait_for_compactions(std::time::Duration::from_secs(120))
            .unwrap());
        assert_eq!(
            files("wal", "wal"),
            1,
            "round {round}: the quiet log keeps one segment"
        );
        let s = db.stats();
        let live: u64 = s.levels.iter().map(|l| l.tables).sum();
        assert_eq!(files("tables", "sst") as u64, live, "round {round}: {s:?}");
    }
    db.close().unwrap();
}

/// Loads `streams` writers' key ranges round robin, `per_batch` keys of each writer per
/// batch, `per_writer` keys each, into a database with 256 KiB memtables; returns the
/// stats once everything is flushed and compacted, and checks every key and a full scan.
fn load_streams(
    below_l0: bool,
    streams: &[u64],
    per_writer: u64,
    per_batch: u64,
    key: &dyn Fn(u64) -> Vec<u8>,
) -> silt::Stats {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::builder(tmp.path())
        .sync_mode(SyncMode::None)
        .memtable_bytes(256 << 10)
        .table_target_bytes(64 << 10)
        .flush_below_level0(below_l0)
        .open()
        .unwrap();
    let mut all = Vec::new();
    for start in (0..per_writer).step_by(per_batch as usize) {
        let mut b = WriteBatch::new();
        for &s in streams {
            for i in start..(start + per_batch).min(per_writer) {
                b.put(&key(s + i), &[i as u8; 100]);
                all.push((key(s + i), i as u8));
            }
        }
        db.write(b, WriteOptions::default()).unwrap();
    }
    db.flush().unwrap();
    assert!(db
        .wait_for_compactions(std::time::Duration::from_secs(60))
        .unwrap());
    all.sort();
    for (k, v) in &all {
        assert_eq!(db.get(k).unwrap(), Some(vec![*v; 100]), "{k:?}");
    }
    let scanned: Vec<Vec<u8>> = db.iter().map(|r| r.unwrap().0.to_vec()).collect();
    let want: Vec<Vec<u8>> = all.iter().map(|(k, _)| k.clone()).collect();
    assert_eq!(scanned, want, "a full scan sees every key once, in order");
    let s = db.stats();
    db.close().unwrap();
    s
}

#[test]
fn two_sequential_writers_load_without_any_rewrite() {
    // Writers A (keys from 0) and B (from 1,000,000): each memtable holds a run of each. The
    // flush cuts between the runs, and each table, overlapping nothing, goes straight to the
    // last level: nothing is compacted, so the write amplification is the log's and the
    // flush's alone.
    let key = |i: u64| i.to_be_bytes().to_vec();
    let s = load_streams(true, &[0, 1_000_000], 20_000, 50, &key);
    assert!(s.flushes >= 10, "{s:?}");
    assert_eq!(s.flush_tables_below_l0, 2 * s.flushes, "{s:?}");
    assert_eq!(s.levels[0].tables, 0, "{s:?}");
    assert_eq!(s.compaction_write_bytes, 0, "{s:?}");
    // The same load with every flushed table in level 0: the tables span both runs,
    // overlap each other, and level-0 compactions rewrite them.
    let off = load_streams(false, &[0, 1_000_000], 20_000, 50, &key);
    assert_eq!(off.flush_tables_below_l0, 0, "{off:?}");
    assert!(off.compaction_write_bytes > 0, "{off:?}");
}

#[test]
fn eight_sequential_writers_of_decimal_keys_load_without_any_rewrite() {
    // Keys in ASCII decimal, whose carries make ordinary gaps up to 256 times each other:
    // the flush cuts between the writers' runs, and where a run crosses a carry two digits
    // above any it saw (a table boundary more, overlapping nothing either).
    let key = |i: u64| format!("user{i:016}").into_bytes();
    let streams: Vec<u64> = (0..8).map(|s| s * 625_000).collect();
    let s = load_streams(true, &streams, 5_000, 25, &key);
    assert!(s.flushes >= 10, "{s:?}");
    assert!(s.flush_tables_below_l0 >= 8 * s.flushes, "{s:?}");
    assert_eq!(s.levels[0].tables, 0, "{s:?}");
    assert_eq!(s.compaction_write_bytes, 0, "{s:?}");
}

#[test]
fn random_keys_are_flushed_whole_into_level_0() {
    // Each flush spans the key space: no cut, so every table goes to level 0, the first
    // (into an empty tree) too.
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let keys: Vec<u64> = (0..40_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        })
        .collect();
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::builder(tmp.path())
        .sync_mode(SyncMode::None)
        .memtable_bytes(256 << 10)
        .table_target_bytes(64 << 10)
        .l0_compaction_trigger(1000)
        .l0_stall_tables(2000)
        .open()
        .unwrap();
    for chunk in keys.chunks(100) {
        let mut b = WriteBatch::new();
        for &k in chunk {
            b.put(&key(k), &[k as u8; 100]);
        }
        db.write(b, WriteOptions::default()).unwrap();
    }
    db.flush().unwrap();
    let s = db.stats();
    assert!(s.flushes >= 10, "{s:?}");
    assert_eq!(s.flush_tables_below_l0, 0, "{s:?}");
    assert_eq!(s.levels[0].tables, s.flushes, "one table per flush: {s:?}");
    check_all(&db, &keys);
}

/// Four writers, each over its own range, in three sequential passes: the first pass's
/// flushes are cut between the writers' runs and placed below level 0, the second overwrites
/// (its tables overlap what is there and go to level 0, merged by compactions running
/// meanwhile), the third deletes every seventh key. Whatever mix of placed tables, level-0
/// tables and compactions that makes, the database must equal the model, in a full scan, in
/// point reads and after a reopen.
#[test]
fn placed_and_level0_tables_mixed_with_compactions_read_as_the_model() {
    use std::collections::BTreeMap;
    let tmp = tempfile::tempdir().unwrap();
    let open = || {
        Db::builder(tmp.path())
            .sync_mode(SyncMode::None)
            .memtable_bytes(64 << 10)
            .table_target_bytes(16 << 10)
            .l0_compaction_trigger(2)
            .open()
            .unwrap()
    };
    let db = open();
    const PER: u64 = 3_000;
    let key = |t: u64, i: u64| (t * 1_000_000 + i).to_be_bytes();
    let value = |t: u64, pass: u64, i: u64| format!("{t}-{pass}-{i}").into_bytes();
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let db = db.clone();
            s.spawn(move || {
                for pass in 0..3u64 {
                    for start in (0..PER).step_by(20) {
                        let mut b = WriteBatch::new();
                        for i in start..start + 20 {
                            if pass == 2 && i % 7 == 0 {
                                b.delete(&key(t, i));
                            } else if pass < 2 || i % 2 == 0 {
                                b.put(&key(t, i), &value(t, pass, i));
                            }
                        }
                        db.write(b, WriteOptions::default()).unwrap();
                    }
                }
            });
        }
    });
    let mut model = BTreeMap::new();
    for t in 0..4u64 {
        for i in 0..PER {
            let v = if i % 7 == 0 {
                continue;
            } else if i % 2 == 0 {
                value(t, 2, i)
            } else {
                value(t, 1, i)
            };
            model.insert(key(t, i).to_vec(), v);
        }
    }
    let check = |db: &Db| {
        let scanned: Vec<(Vec<u8>, Vec<u8>)> = db
            .iter()
            .map(|r| {
                let (k, v) = r.unwrap();
                (k.to_vec(), v.to_vec())
            })
            .collect();
        let want: Vec<(Vec<u8>, Vec<u8>)> =
            model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(scanned.len(), want.len());
        assert!(scanned == want, "a full scan equals the model");
        for t in 0..4u64 {
            for i in 0..PER {
                assert_eq!(
                    db.get(&key(t, i)).unwrap(),
                    model.get(&key(t, i)[..]).cloned()
                );
            }
        }
    };
    check(&db);
    db.flush().unwrap();
    assert!(db
        .wait_for_compactions(std::time::Duration::from_secs(60))
        .unwrap());
    check(&db);
    let s = db.stats();
    assert!(s.flush_tables_below_l0 > 0, "tables were placed: {s:?}");
    assert!(s.compactions > 0, "and compacted: {s:?}");
    db.close().unwrap();
    let db = open();
    check(&db);
}
