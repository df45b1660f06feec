//! The read API is one set of methods shared by `Db` and `Snapshot` (the `Read` trait):
//! every read gives the same answer through either view when nothing changed in between,
//! and a snapshot's answers stay fixed while the database moves on.

use silt::{Db, Read};

/// Every read of `Read`, over the default family and `cf`, as one comparable value.
fn everything(r: &impl Read, cf: &silt::ColumnFamily) -> Vec<String> {
    let mut out = Vec::new();
    let collect =
        |it: silt::Iter| -> Vec<(Vec<u8>, Vec<u8>)> { it.collect::<Result<_, _>>().unwrap() };
    out.push(format!("get {:?}", r.get(b"a1").unwrap()));
    out.push(format!("get missing {:?}", r.get(b"zz").unwrap()));
    out.push(format!("get_cf {:?}", r.get_cf(cf, b"c2").unwrap()));
    out.push(format!("iter {:?}", collect(r.iter())));
    out.push(format!(
        "rev {:?}",
        r.iter().rev().collect::<Result<Vec<_>, _>>().unwrap()
    ));
    out.push(format!(
        "range {:?}",
        collect(r.range(&b"a1"[..]..&b"b"[..]))
    ));
    out.push(format!(
        "range_cf {:?}",
        collect(r.range_cf(cf, &b"c"[..]..))
    ));
    out.push(format!("prefix {:?}", collect(r.prefix(b"a"))));
    out.push(format!("prefix_cf {:?}", collect(r.prefix_cf(cf, b"c1"))));
    let mut c = r.cursor();
    out.push(format!("cursor {:?}", c.seek(b"a2").unwrap()));
    out.push(format!("cursor next {:?}", c.next().unwrap()));
    let mut c = r.cursor_cf(cf);
    out.push(format!("cursor_cf last {:?}", c.seek_to_last().unwrap()));
    out
}

#[test]
fn db_and_snapshot_offer_the_same_reads_with_the_same_answers() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path()).unwrap();
    let cf = db.create_cf("side").unwrap();
    for i in 0..5u8 {
        db.put(format!("a{i}").as_bytes(), &[i]).unwrap();
        db.put(format!("b{i}").as_bytes(), &[i]).unwrap();
        db.put_cf(&cf, format!("c{i}").as_bytes(), &[i]).unwrap();
    }
    db.delete(b"a3").unwrap();
    db.flush().unwrap();
    db.put(b"a4", b"newer").unwrap();

    let snap = db.snapshot();
    let before = everything(&db, &cf);
    assert_eq!(everything(&snap, &cf), before);
    assert_eq!(snap.get(b"a4").unwrap().as_deref(), Some(&b"newer"[..]));

    // The database moves on; the snapshot does not.
    db.put(b"a1", b"changed").unwrap();
    db.delete_cf(&cf, b"c4").unwrap();
    db.put(b"a0", b"x").unwrap();
    db.flush().unwrap();
    db.compact_range::<&[u8], _>(..).unwrap();
    assert_eq!(everything(&snap, &cf), before);
    assert_ne!(everything(&db, &cf), before);
}

/// `Stats` reports the level-0 compaction trigger in force, so a caller (the benchmark's
/// settle loop) can tell whether level 0 is due without knowing the option's default.
#[test]
fn stats_report_the_level0_trigger_in_force() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path()).unwrap();
    assert_eq!(db.stats().l0_compaction_trigger, 4);
    db.close().unwrap();
    let db = Db::builder(dir.path())
        .l0_compaction_trigger(9)
        .open()
        .unwrap();
    assert_eq!(db.stats().l0_compaction_trigger, 9);
}
