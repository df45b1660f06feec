//! Read-only open (`DbBuilder::read_only`): beside a live writer it changes no file, reads a
//! consistent prefix that holds everything acknowledged before it opened, and refuses
//! every write with `Error::ReadOnly`.

mod common;

use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;

use common::*;
use silt::{Db, Error};

fn key(i: u64) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

fn writer(path: &std::path::Path) -> Db {
    Db::builder(path)
        .memtable_bytes(64 << 10)
        .table_target_bytes(32 << 10)
        .level_base_bytes(128 << 10)
        .wal_segment_bytes(1 << 20)
        .l0_compaction_trigger(2)
        .open()
        .unwrap()
}

fn reader(path: &std::path::Path) -> Db {
    Db::builder(path).read_only(true).open().unwrap()
}

#[test]
fn beside_a_writer_it_changes_no_file_and_reads_what_was_written() {
    let dir = tempfile::tempdir().unwrap();
    let db = writer(dir.path());
    let users = db.create_cf("users").unwrap();
    for i in 0..3000u64 {
        db.put(&key(i), &[i as u8; 100]).unwrap();
        if i % 3 == 0 {
            db.put_cf(&users, &key(i), b"u").unwrap();
        }
    }
    // Leave the writer with nothing due: everything compacted, then a few writes that stay
    // in its log and memtable.
    db.compact_range::<&[u8], _>(..).unwrap();
    db.compact_range_cf::<&[u8], _>(&users, ..).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    for i in 3000..3200u64 {
        db.put(&key(i), &[i as u8; 100]).unwrap(); // in the log only
    }
    db.delete(&key(5)).unwrap();
    // The writer holds the database (its lock) and is idle: nothing changes the files
    // but the reader, if it wrote anything. Idle means its listing has settled: the log
    // prepares its next segment in the background, later on a loaded machine.
    let mut before = listing(dir.path());
    for _ in 0..50 {
        std::thread::sleep(std::time::Duration::from_millis(200));
        let now = listing(dir.path());
        if now == before {
            break;
        }
        before = now;
    }
    let ro = reader(dir.path());
    assert!(ro.recovery_report().records_replayed > 0);
    assert_eq!(ro.iter().count(), 3199);
    assert_eq!(ro.get(&key(3199)).unwrap(), Some(vec![3199u64 as u8; 100]));
    assert_eq!(ro.get(&key(5)).unwrap(), None);
    let ru = ro.cf("users").unwrap();
    assert_eq!(ro.range_cf::<&[u8], _>(&ru, ..).count(), 1000);
    assert_eq!(ro.list_cfs(), db.list_cfs());
    // Every write path is refused, with its own error.
    assert!(matches!(ro.put(b"a", b"b"), Err(Error::ReadOnly)));
    assert!(matches!(ro.delete(b"a"), Err(Error::ReadOnly)));
    assert!(matches!(ro.flush(), Err(Error::ReadOnly)));
    assert!(matches!(
        ro.compact_range::<&[u8], _>(..),
        Err(Error::ReadOnly)
    ));
    assert!(matches!(ro.create_cf("x"), Err(Error::ReadOnly)));
    assert!(matches!(ro.drop_cf("users"), Err(Error::ReadOnly)));
    ro.close().unwrap();
    assert_eq!(
        before,
        listing(dir.path()),
        "the read-only open changed a file"
    );
    // The writer goes on unaffected, and a second reader sees its new writes.
    db.put(b"later", b"1").unwrap();
    assert_eq!(
        reader(dir.path()).get(b"later").unwrap(),
        Some(b"1".to_vec())
    );
    db.close().unwrap();
}

#[test]
fn opens_under_concurrent_writes_flushes_and_compactions_see_a_prefix() {
    install_engine_panic_hook();
    let dir = tempfile::tempdir().unwrap();
    let db = writer(dir.path());
    let acked = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let w = {
        let (db, acked, stop) = (db.clone(), acked.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(SeqCst) && i < 200_000 {
                // Every key is written once, in order, so a prefix is `0..n`.
                db.put(&key(i), &mix64(i).to_le_bytes().repeat(8)).unwrap();
                i += 1;
                acked.store(i, SeqCst);
            }
        })
    };
    let mut opens = 0;
    let start = std::time::Instant::now();
    // Twenty opens in at most 2 s, and on until the writer's flushes began (a loaded
    // machine may give the flush thread its first turn late).
    let more = |opens: u32| {
        let t = start.elapsed();
        (t < std::time::Duration::from_secs(2) && opens < 20)
            || (db.stats().flushes == 0 && t < std::time::Duration::from_secs(60))
    };
    while more(opens) {
        let floor = acked.load(SeqCst);
        let ro = reader(dir.path());
        let keys: Vec<Vec<u8>> = ro.iter().map(|kv| kv.unwrap().0).collect();
        let n = keys.len() as u64;
        assert!(
            n >= floor,
            "open {opens}: {n} keys, but {floor} were acknowledged before"
        );
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(k, &key(i as u64), "open {opens}: not a prefix at {i}");
        }
        if n > 0 {
            let v = ro.get(&key(n - 1)).unwrap().unwrap();
            assert_eq!(v, mix64(n - 1).to_le_bytes().repeat(8));
        }
        opens += 1;
    }
    stop.store(true, SeqCst);
    w.join().unwrap();
    let s = db.stats();
    db.close().unwrap();
    assert!(s.flushes > 0, "the writer flushed while readers opened");
    assert!(engine_panics().is_empty(), "{:?}", engine_panics());
}

#[test]
fn a_missing_database_is_not_created() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("none");
    assert!(matches!(
        Db::builder(&path).read_only(true).open(),
        Err(Error::InvalidArgument(_))
    ));
    assert!(!path.exists());
}
