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
