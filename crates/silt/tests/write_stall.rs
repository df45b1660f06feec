//! Writes slow down smoothly before they stop: with level 0 past `l0_slowdown_tables`
//! every write is delayed (counted in `Stats::delayed_writes`) and none is refused or lost;
//! below it none is.

use silt::Db;

#[test]
fn writes_are_delayed_between_the_slowdown_and_the_stall_and_not_below() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::builder(dir.path())
        .l0_compaction_trigger(100)
        .l0_slowdown_tables(2)
        .l0_stall_tables(100)
        .open()
        .unwrap();
    db.put(b"a", b"1").unwrap();
    db.flush().unwrap();
    db.put(b"b", b"1").unwrap();
    assert_eq!(
        db.stats().delayed_writes,
        0,
        "one level-0 table: below the slowdown"
    );
    db.flush().unwrap();
    for i in 0..100u32 {
        db.put(format!("c{i}").as_bytes(), &[0u8; 1000]).unwrap();
    }
    let s = db.stats();
    assert_eq!(s.levels[0].tables, 2);
    assert_eq!(
        s.delayed_writes, 100,
        "two level-0 tables: every write is delayed"
    );
    assert_eq!(s.stalls, 0);
    assert!(s.flush_rate_bytes_per_sec > 0);
    assert_eq!(db.iter().count(), 102);
}
