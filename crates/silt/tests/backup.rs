//! Backups (`BackupStore`): incremental (a table already in the store is not copied
//! again), restores that match the database at the backup's seqno, a damaged backup
//! refused with `Corruption` naming the file, and purging old backups.

mod common;

use silt::{BackupStore, Db, Error};

fn key(i: u64) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn open(path: &std::path::Path) -> Db {
    Db::builder(path)
        .memtable_bytes(64 << 10)
        .wal_segment_bytes(1 << 20)
        .open()
        .unwrap()
}

fn all(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.iter().map(|kv| kv.unwrap()).collect()
}

#[test]
fn incremental_backups_restore_verify_and_purge() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir.path().join("db"));
    for i in 0..3000 {
        db.put(&key(i), &[b'a'; 60]).unwrap();
    }
    db.put(b"big", &[7u8; 4000]).unwrap(); // a blob file
    db.flush().unwrap();
    db.put(b"log-only", b"1").unwrap();
    let store = BackupStore::open(dir.path().join("store")).unwrap();
    let b1 = store.create(&db).unwrap();
    let at1 = all(&db);
    assert_eq!(b1.id, 1);
    assert!(b1.new_files > 2 && b1.new_bytes > 0);

    for i in 3000..3500 {
        db.put(&key(i), &[b'b'; 60]).unwrap();
    }
    db.delete(&key(1)).unwrap();
    db.flush().unwrap();
    let b2 = store.create(&db).unwrap();
    let at2 = all(&db);
    // The tables of the first backup are not copied again: only the new table(s) and the
    // backup's own manifest and log are new.
    let shared_new = b2.new_bytes;
    assert!(
        shared_new < b1.new_bytes,
        "second backup copied {shared_new} bytes, the first {}",
        b1.new_bytes
    );
    assert!(b2.files > b2.new_files, "{b2:?}");
    assert_eq!(
        store
            .list()
            .unwrap()
            .iter()
            .map(|b| b.id)
            .collect::<Vec<_>>(),
        vec![1, 2]
    );
    store.verify(1).unwrap();
    db.close().unwrap();

    store.restore(1, dir.path().join("r1")).unwrap();
    store.restore(2, dir.path().join("r2")).unwrap();
    assert!(matches!(
        store.restore(2, dir.path().join("r2")),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(all(&Db::open(dir.path().join("r1")).unwrap()), at1);
    assert_eq!(all(&Db::open(dir.path().join("r2")).unwrap()), at2);

    // Damage one shared table: restore refuses, naming it, and leaves nothing behind.
    let shared = dir.path().join("store/files");
    // The first table backup 1 names (docs/format/backup.md: `files/{name}-{len}-{crc}`).
    let meta = std::fs::read_to_string(dir.path().join("store/meta/000001")).unwrap();
    let line = meta
        .lines()
        .find(|l| l.starts_with("file shared") && l.contains(".sst"))
        .unwrap();
    let f: Vec<&str> = line.split(' ').collect();
    let name = std::path::Path::new(f[2])
        .file_name()
        .unwrap()
        .to_string_lossy();
    let victim = shared.join(format!("{name}-{}-{}", f[3], f[4]));
    let mut bytes = std::fs::read(&victim).unwrap();
    bytes[10] ^= 0x40;
    std::fs::write(&victim, &bytes).unwrap();
    let target = dir.path().join("r-bad");
    match store.restore(1, &target) {
        Err(Error::Corruption { file, .. }) => assert_eq!(file, victim),
        other => panic!("expected Corruption naming {victim:?}, got {other:?}"),
    }
    assert!(!target.exists());
    assert!(matches!(store.verify(1), Err(Error::Corruption { .. })));
    bytes[10] ^= 0x40;
    std::fs::write(&victim, &bytes).unwrap();

    // Purge: the first backup goes, the second still restores.
    assert_eq!(store.purge_old(1).unwrap(), vec![1]);
    assert_eq!(store.list().unwrap().len(), 1);
    assert!(matches!(
        store.restore(1, dir.path().join("x")),
        Err(Error::InvalidArgument(_))
    ));
    store.restore(2, dir.path().join("r2b")).unwrap();
    assert_eq!(all(&Db::open(dir.path().join("r2b")).unwrap()), at2);
}

#[test]
fn damaged_metadata_is_corruption_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir.path().join("db"));
    db.put(b"k", b"v").unwrap();
    let store = BackupStore::open(dir.path().join("store")).unwrap();
    store.create(&db).unwrap();
    let meta = dir.path().join("store/meta/000001");
    let text = std::fs::read_to_string(&meta)
        .unwrap()
        .replace("seqno", "seqnq");
    std::fs::write(&meta, text).unwrap();
    match store.list() {
        Err(Error::Corruption { file, .. }) => assert_eq!(file, meta),
        other => panic!("{other:?}"),
    }
}
