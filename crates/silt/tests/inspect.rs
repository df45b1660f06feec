//! `silt::inspect`: tables, the manifest and the log read through the engine's decoders,
//! and `verify` naming the first damaged file and offset.

use silt::{inspect, Db, Error, Kind};

#[test]
fn dumps_and_verify() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path()).unwrap();
    for i in 0..500u32 {
        db.put(format!("k{i:04}").as_bytes(), &[1u8; 50]).unwrap();
    }
    db.delete(b"k0001").unwrap();
    db.flush().unwrap();
    db.put(b"tail", b"in the log").unwrap();
    db.close().unwrap();

    let m = inspect::manifest(dir.path()).unwrap();
    assert_eq!(m.tables.len(), 1);
    assert!(m
        .records
        .iter()
        .any(|r| r.edits.iter().any(|e| e.starts_with("add_table"))));
    let w = inspect::wal(dir.path()).unwrap();
    let last = w.records.last().unwrap();
    let e = &last.entries.as_ref().unwrap()[0];
    assert_eq!((e.key.as_slice(), e.kind), (&b"tail"[..], Kind::Put));

    let path = dir
        .path()
        .join("tables")
        .join(format!("{:06}.sst", m.tables[0].id));
    let sst = inspect::SstFile::open(&path).unwrap();
    // 499 puts and k0001's delete: the put it deletes was in the same memtable, so the
    // flush left it out.
    assert_eq!(sst.properties().entries, 500);
    assert_eq!(sst.verify().unwrap(), 500);
    assert!(sst.bloom().unwrap().is_some());
    let blocks = sst.blocks().unwrap();
    assert!(blocks.iter().all(|b| b.error.is_none()));
    assert_eq!(
        sst.index().unwrap().len() as u64,
        sst.properties().data_blocks
    );
    let r = inspect::verify(dir.path()).unwrap();
    assert_eq!((r.tables, r.entries, r.log_records), (1, 500, 1));

    // A flipped byte in the second data block: verify names the table and that block.
    let second = blocks
        .iter()
        .filter(|b| b.role == "data")
        .nth(1)
        .unwrap()
        .offset;
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[second as usize + 3] ^= 0x20;
    std::fs::write(&path, &bytes).unwrap();
    match inspect::verify(dir.path()) {
        Err(Error::Corruption { file, offset, .. }) => assert_eq!((file, offset), (path, second)),
        other => panic!("{other:?}"),
    }
}
