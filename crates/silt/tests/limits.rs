//! The size limits: keys up to 64 KiB and values up to 16 MiB go in, survive a flush and a
//! reopen and come back; one byte more is `InvalidArgument` and writes nothing.

use silt::{Db, Error, SyncMode, WriteBatch, WriteOptions, MAX_VALUE_BYTES};

const MAX_KEY_BYTES: usize = 64 * 1024;

#[test]
fn largest_key_and_value_round_trip_and_one_more_byte_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::builder(dir.path())
        .sync_mode(SyncMode::Full)
        .open()
        .unwrap();
    let key = vec![b'k'; MAX_KEY_BYTES];
    let value: Vec<u8> = (0..MAX_VALUE_BYTES).map(|i| (i * 31 % 251) as u8).collect();
    db.put(&key, &value).unwrap();
    assert_eq!(db.get(&key).unwrap().as_deref(), Some(&value[..]));

    let big_key = vec![b'k'; MAX_KEY_BYTES + 1];
    let big_value = vec![0u8; MAX_VALUE_BYTES + 1];
    for r in [
        db.put(&big_key, b"v"),
        db.put(b"small", &big_value),
        db.delete(&big_key),
        db.single_delete(&big_key),
    ] {
        match r {
            Err(Error::InvalidArgument(msg)) => assert!(msg.contains("limit"), "{msg}"),
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
    }
    // A batch with one oversized entry is refused whole.
    let mut batch = WriteBatch::new();
    batch.put(b"fine", b"1").put(b"small", &big_value);
    assert!(matches!(
        db.write(batch, WriteOptions::default()),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(db.get(b"fine").unwrap(), None);

    db.flush().unwrap();
    assert_eq!(db.get(&key).unwrap().as_deref(), Some(&value[..]));
    db.close().unwrap();
    let db = Db::open(dir.path()).unwrap();
    assert_eq!(db.get(&key).unwrap().as_deref(), Some(&value[..]));
    let all: Vec<_> = db.iter().map(|r| r.unwrap()).collect();
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].0, key);
    db.close().unwrap();
}

#[test]
fn a_large_value_in_the_log_is_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let value = vec![7u8; MAX_VALUE_BYTES];
    {
        let db = Db::builder(dir.path())
            .sync_mode(SyncMode::Full)
            .open()
            .unwrap();
        db.put(b"big", &value).unwrap();
        // Dropped without close or flush: the value is only in the log.
    }
    let db = Db::open(dir.path()).unwrap();
    assert_eq!(db.get(b"big").unwrap().as_deref(), Some(&value[..]));
}

/// A batch larger than one log record (256 KiB segments here) is written in parts and
/// committed by the last record: atomic, a later write to a key still wins across parts,
/// and it is all there after a reopen. Only a single entry must fit in a record.
#[test]
fn a_batch_larger_than_a_log_record_is_written_in_parts() {
    let dir = tempfile::tempdir().unwrap();
    let open = || {
        Db::builder(dir.path())
            .wal_segment_bytes(256 << 10)
            .memtable_bytes(16 << 20)
            .open()
            .unwrap()
    };
    let db = open();
    let mut batch = WriteBatch::new();
    for i in 0..4000u32 {
        batch.put(
            format!("k{:04}", i % 2000).as_bytes(),
            &vec![(i / 2000) as u8; 300],
        );
    }
    batch.delete(b"k0007");
    assert!(batch.encoded_bytes() > 1 << 20);
    db.write(batch, WriteOptions::default()).unwrap();
    let check = |db: &Db| {
        let all: Vec<_> = db.iter().map(|r| r.unwrap()).collect();
        assert_eq!(all.len(), 1999);
        // The second write of each key (value 1) won over the first, across parts.
        assert!(all.iter().all(|(_, v)| v == &vec![1u8; 300]));
        assert_eq!(db.get(b"k0007").unwrap(), None);
    };
    check(&db);
    drop(db);
    let db = open();
    check(&db);
    // A single entry larger than a record is still refused.
    let mut one = WriteBatch::new();
    one.put(b"huge", &vec![0u8; 300 << 10]);
    assert!(matches!(
        db.write(one, WriteOptions::default()),
        Err(Error::InvalidArgument(_))
    ));
}

/// The log's segment size: a quarter of the memtable by default, never below what one
/// record of the largest key and value needs (17 MiB), never above 64 MiB; an explicit
/// size wins; an existing log keeps its size whatever the options say at reopen.
#[test]
fn log_segments_are_sized_to_the_memtable_unless_set() {
    fn segment_len(dir: &std::path::Path) -> u64 {
        let wal = dir.join("wal");
        let mut lens: Vec<u64> = std::fs::read_dir(&wal)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "wal"))
            .map(|p| std::fs::metadata(p).unwrap().len())
            .collect();
        lens.sort_unstable();
        lens.dedup();
        assert_eq!(lens.len(), 1, "segments of one size: {lens:?}");
        lens[0]
    }
    let cases: [(Option<u64>, Option<u64>, u64); 4] = [
        (None, None, 17 << 20), // 64 MiB memtable: a quarter is 16, below the floor
        (Some(128 << 20), None, 32 << 20), // a quarter
        (Some(1 << 20), None, 17 << 20), // the floor
        (Some(128 << 20), Some(1 << 20), 1 << 20), // set: as set
    ];
    for (memtable, segment, want) in cases {
        let dir = tempfile::tempdir().unwrap();
        let mut b = Db::builder(dir.path());
        if let Some(m) = memtable {
            b = b.memtable_bytes(m);
        }
        if let Some(s) = segment {
            b = b.wal_segment_bytes(s);
        }
        let db = b.open().unwrap();
        db.put(b"k", b"v").unwrap();
        db.close().unwrap();
        assert_eq!(
            segment_len(dir.path()),
            want,
            "memtable {memtable:?}, set {segment:?}"
        );
        // Reopened with options that would derive another size: the log keeps its own.
        let db = Db::builder(dir.path())
            .memtable_bytes(200 << 20)
            .open()
            .unwrap();
        assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
        db.put(b"k2", b"v2").unwrap();
        db.close().unwrap();
        assert_eq!(segment_len(dir.path()), want);
    }
}
