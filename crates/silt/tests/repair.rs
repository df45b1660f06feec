//! Repair (`Db::repair`): after `MANIFEST-*` and `CURRENT` are deleted every key comes
//! back (tables, blob files and the log); a damaged table is moved aside and reported;
//! a held database is refused.

mod common;

use silt::{Db, Error};

fn key(i: u64) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: u64) -> Vec<u8> {
    let n = if i % 50 == 0 { 2000 } else { 30 }; // some in blob files
    vec![(i % 251) as u8; n]
}

fn load(path: &std::path::Path) -> Vec<(Vec<u8>, Vec<u8>)> {
    let db = Db::builder(path)
        .memtable_bytes(64 << 10)
        .table_target_bytes(32 << 10)
        .level_base_bytes(128 << 10)
        .l0_compaction_trigger(2)
        .wal_segment_bytes(1 << 20)
        .open()
        .unwrap();
    for i in 0..4000 {
        db.put(&key(i), &value(i)).unwrap();
    }
    for i in (0..4000).step_by(9) {
        db.delete(&key(i)).unwrap();
    }
    for i in 0..200 {
        db.put(&key(i), b"overwritten").unwrap(); // newest in the log
    }
    let all = db.iter().map(|kv| kv.unwrap()).collect();
    db.close().unwrap();
    all
}

fn remove_manifest(path: &std::path::Path) {
    for e in std::fs::read_dir(path).unwrap() {
        let p = e.unwrap().path();
        let n = p.file_name().unwrap().to_string_lossy().into_owned();
        if n == "CURRENT" || n.starts_with("MANIFEST-") {
            std::fs::remove_file(p).unwrap();
        }
    }
}

#[test]
fn deleted_manifest_and_current_all_data_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let expected = load(&path);
    remove_manifest(&path);
    assert!(matches!(Db::open(&path), Err(Error::Corruption { .. })));
    let report = Db::repair(&path).unwrap();
    assert!(report.manifest_error.is_some());
    assert!(report.damaged.is_empty(), "{report:?}");
    assert!(report.tables_recovered > 0 && report.records_recovered > 0);
    assert!(report.blob_files_recovered > 0);
    let db = Db::open(&path).unwrap();
    let got: Vec<_> = db.iter().map(|kv| kv.unwrap()).collect();
    assert_eq!(got.len(), expected.len());
    assert!(got == expected, "repaired data differs");
    // New writes take seqnos above every recovered one: they win.
    db.put(&key(1), b"new").unwrap();
    assert_eq!(db.get(&key(1)).unwrap(), Some(b"new".to_vec()));
    db.close().unwrap();
    let db = Db::open(&path).unwrap();
    assert_eq!(db.get(&key(1)).unwrap(), Some(b"new".to_vec()));
}

#[test]
fn a_damaged_table_is_reported_and_set_aside() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    load(&path);
    let victim = std::fs::read_dir(path.join("tables"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sst"))
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap();
    let mut bytes = std::fs::read(&victim).unwrap();
    bytes[100] ^= 0xff; // inside the first data block
    std::fs::write(&victim, &bytes).unwrap();
    let report = Db::repair(&path).unwrap();
    assert!(report.manifest_error.is_none());
    assert_eq!(report.damaged.len(), 1, "{report:?}");
    assert_eq!(report.damaged[0].0, victim);
    assert!(!victim.exists());
    assert!(report.set_aside.iter().any(|(from, _)| from == &victim));
    // The rest opens and reads without error.
    let db = Db::open(&path).unwrap();
    assert!(db.iter().all(|kv| kv.is_ok()));
}

#[test]
fn a_held_database_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path()).unwrap();
    assert!(matches!(Db::repair(dir.path()), Err(Error::Locked { .. })));
    drop(db);
}
