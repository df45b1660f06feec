//! Checkpoints (`Db::checkpoint`): taken under concurrent writes, flushes and compactions,
//! a checkpoint opens as a database holding exactly a prefix of the writes that includes
//! everything acknowledged before the call; it links tables, carries the log tail, blob
//! files and column families; it refuses an existing directory.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;

use common::*;
use silt::{Db, Error};

fn key(i: u64) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

fn value(i: u64) -> Vec<u8> {
    // Every 7th value is large enough to go to a blob file.
    let n = if i % 7 == 0 { 1500 } else { 40 };
    mix64(i).to_le_bytes().repeat(n / 8)
}

fn small(path: &std::path::Path) -> Db {
    Db::builder(path)
        .memtable_bytes(64 << 10)
        .table_target_bytes(32 << 10)
        .level_base_bytes(128 << 10)
        .wal_segment_bytes(1 << 20)
        .l0_compaction_trigger(2)
        .open()
        .unwrap()
}

#[test]
fn under_concurrent_writes_a_checkpoint_is_a_prefix_with_everything_acknowledged() {
    install_engine_panic_hook();
    let dir = tempfile::tempdir().unwrap();
    let db = small(&dir.path().join("db"));
    let acked = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let w = {
        let (db, acked, stop) = (db.clone(), acked.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(SeqCst) && i < 300_000 {
                db.put(&key(i), &value(i)).unwrap();
                i += 1;
                acked.store(i, SeqCst);
            }
        })
    };
    let mut linked = 0;
    // Six rounds, and on until the background work the test is about has happened (a
    // loaded machine may start the first flush or compaction late).
    let start = std::time::Instant::now();
    let mut round = 0;
    while round < 6
        || ((linked == 0 || {
            let s = db.stats();
            s.flushes == 0 || s.compactions == 0
        }) && start.elapsed() < std::time::Duration::from_secs(60))
    {
        round += 1;
        std::thread::sleep(std::time::Duration::from_millis(150));
        let floor = acked.load(SeqCst);
        let ck = dir.path().join(format!("ck{round}"));
        let info = db.checkpoint(&ck).unwrap();
        linked += info.files_linked;
        let copy = Db::open(&ck).unwrap();
        let keys: Vec<(Vec<u8>, Vec<u8>)> = copy.iter().map(|kv| kv.unwrap()).collect();
        let n = keys.len() as u64;
        assert!(
            n >= floor,
            "round {round}: {n} keys, {floor} acknowledged before the call"
        );
        for (i, (k, v)) in keys.iter().enumerate() {
            assert_eq!(k, &key(i as u64), "round {round}: not a prefix at {i}");
            assert_eq!(v, &value(i as u64), "round {round}: value of key {i}");
        }
        // Writable and independent of the source.
        copy.put(b"zz-own", b"1").unwrap();
        copy.close().unwrap();
        assert_eq!(db.get(b"zz-own").unwrap(), None);
    }
    stop.store(true, SeqCst);
    w.join().unwrap();
    assert!(linked > 0, "tables were linked, not copied");
    assert!(db.stats().flushes > 0 && db.stats().compactions > 0);
    db.close().unwrap();
    assert!(engine_panics().is_empty(), "{:?}", engine_panics());
}

#[test]
fn column_families_deletes_and_the_log_tail_come_along() {
    let dir = tempfile::tempdir().unwrap();
    let db = small(&dir.path().join("db"));
    let cf = db.create_cf("users").unwrap();
    for i in 0..2000 {
        db.put_cf(&cf, &key(i), &value(i)).unwrap();
    }
    db.flush().unwrap();
    db.delete_cf(&cf, &key(3)).unwrap(); // in the log only
    db.put(b"plain", b"p").unwrap();
    let ck = dir.path().join("ck");
    let info = db.checkpoint(&ck).unwrap();
    assert!(info.log_segments >= 1);
    assert!(matches!(db.checkpoint(&ck), Err(Error::InvalidArgument(_))));
    db.close().unwrap();
    let copy = Db::open(&ck).unwrap();
    let cf = copy.cf("users").unwrap();
    assert_eq!(copy.get_cf(&cf, &key(3)).unwrap(), None);
    assert_eq!(copy.get_cf(&cf, &key(7)).unwrap(), Some(value(7)));
    assert_eq!(copy.range_cf::<&[u8], _>(&cf, ..).count(), 1999);
    assert_eq!(copy.get(b"plain").unwrap(), Some(b"p".to_vec()));
    let report = copy.recovery_report();
    // Open only replaced the checkpoint's manifest: no table or blob file was garbage.
    assert!(report.set_aside.is_empty(), "{report:?}");
    assert!(
        report
            .removed
            .iter()
            .all(|p| !p.starts_with(ck.join("tables"))),
        "{report:?}"
    );
    assert!(copy.stats().blob_files > 0, "blob files came along");
}

#[test]
fn a_read_only_handle_checkpoints_its_state() {
    let dir = tempfile::tempdir().unwrap();
    let db = small(&dir.path().join("db"));
    for i in 0..500 {
        db.put(&key(i), &value(i)).unwrap();
    }
    let ro = Db::builder(dir.path().join("db"))
        .read_only(true)
        .open()
        .unwrap();
    let ck = dir.path().join("ck");
    ro.checkpoint(&ck).unwrap();
    db.put(b"after", b"x").unwrap();
    let copy = Db::open(&ck).unwrap();
    assert_eq!(copy.iter().count(), 500);
}
