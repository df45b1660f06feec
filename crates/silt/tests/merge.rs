//! Merge operators: operands written without a read, folded onto the key's value by the
//! family's operator in every read (point reads, iterators both ways, cursors, snapshots,
//! transactions), across memtable, tables, reopen and replay; compaction folds them early
//! without changing any read, and never across a snapshot.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use silt::inspect::SstFile;
use silt::{
    Append, Counter, Db, DbBuilder, Error, Kind, ManualClock, TxnOptions, WriteBatch, WriteOptions,
};

fn n(x: i64) -> Vec<u8> {
    x.to_le_bytes().to_vec()
}

fn builder(dir: &Path) -> DbBuilder {
    Db::builder(dir)
        .memtable_bytes(64 << 10)
        .table_target_bytes(16 << 10)
        .level_base_bytes(64 << 10)
        .l0_compaction_trigger(100) // only manual compactions here
        .blob_threshold_bytes(Some(64))
        .merge_operator(Arc::new(Counter))
        .cf_merge_operator(
            "log",
            Some(Arc::new(Append {
                separator: b",".to_vec(),
            })),
        )
}

/// Every live table entry of `user_key`, newest first, by kind.
fn stored(dir: &Path, user_key: &[u8]) -> Vec<Kind> {
    let mut out = Vec::new();
    let m = silt::inspect::manifest(dir).unwrap();
    for t in m.tables {
        let f = SstFile::open(dir.join("tables").join(format!("{:06}.sst", t.id))).unwrap();
        for e in f.entries() {
            let e = e.unwrap();
            if e.key == user_key {
                out.push((e.seqno, e.kind));
            }
        }
    }
    out.sort_by_key(|e| std::cmp::Reverse(e.0));
    out.into_iter().map(|(_, k)| k).collect()
}

#[test]
fn operands_fold_in_every_read_across_memtable_tables_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let db = builder(dir.path()).open().unwrap();
    let log = db.create_cf("log").unwrap();
    db.put(b"c", &n(100)).unwrap();
    db.merge(b"c", &n(1)).unwrap();
    db.flush().unwrap(); // base and one operand in a table
    db.merge(b"c", &n(2)).unwrap();
    let snap = db.snapshot();
    db.merge(b"c", &n(3)).unwrap();
    db.merge(b"fresh", &n(7)).unwrap(); // no value below: folded onto nothing
    db.put(b"z", &n(0)).unwrap();
    db.merge_cf(&log, b"k", b"a").unwrap();
    db.flush().unwrap();
    db.merge_cf(&log, b"k", b"b").unwrap();
    for round in 0..2 {
        assert_eq!(db.get(b"c").unwrap(), Some(n(106)), "round {round}");
        assert_eq!(snap.get(b"c").unwrap(), Some(n(103)), "round {round}");
        assert_eq!(db.get(b"fresh").unwrap(), Some(n(7)));
        let want = vec![
            (b"c".to_vec(), n(106)),
            (b"fresh".to_vec(), n(7)),
            (b"z".to_vec(), n(0)),
        ];
        let fwd: Vec<_> = db.iter().map(|e| e.unwrap()).collect();
        let mut rev: Vec<_> = db.iter().rev().map(|e| e.unwrap()).collect();
        rev.reverse();
        assert_eq!(fwd, want, "round {round}");
        assert_eq!(rev, want, "round {round}");
        let mut c = db.cursor();
        assert_eq!(c.seek(b"c").unwrap().map(|(_, v)| v), Some(n(106)));
        assert_eq!(c.next().unwrap().map(|(k, _)| k), Some(b"fresh".to_vec()));
        assert_eq!(c.prev().unwrap().map(|(_, v)| v), Some(n(106)));
        assert_eq!(db.get_cf(&log, b"k").unwrap(), Some(b"a,b".to_vec()));
        let txn = db.begin(TxnOptions::default());
        assert_eq!(txn.get(b"c").unwrap(), Some(n(106)));
        drop(txn);
        if round == 0 {
            db.compact_range::<&[u8], _>(..).unwrap();
        }
    }
    drop(snap);
    db.close().unwrap();
    // Replayed from the log (the last operands were never flushed): counted once each.
    let db = builder(dir.path()).open().unwrap();
    let log = db.cf("log").unwrap();
    assert_eq!(db.get(b"c").unwrap(), Some(n(106)));
    assert_eq!(db.get_cf(&log, b"k").unwrap(), Some(b"a,b".to_vec()));
}

#[test]
fn deletes_and_puts_reset_the_operands_and_a_batch_folds_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let db = builder(dir.path()).open().unwrap();
    db.merge(b"k", &n(5)).unwrap();
    db.delete(b"k").unwrap();
    db.merge(b"k", &n(1)).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(n(1)));
    db.put(b"k", &n(10)).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(n(10)));
    // One batch: operands of a key share its seqno, so the batch folds them itself.
    let mut b = WriteBatch::new();
    b.merge(b"k", &n(1))
        .merge(b"k", &n(2))
        .put(b"p", &n(1))
        .merge(b"p", &n(1));
    b.delete(b"d").merge(b"d", &n(4));
    b.merge(b"q", &n(3)).put(b"q", &n(50)); // a later put wins
    db.write(b, WriteOptions::default()).unwrap();
    for _ in 0..2 {
        assert_eq!(db.get(b"k").unwrap(), Some(n(13)));
        assert_eq!(db.get(b"p").unwrap(), Some(n(2)));
        assert_eq!(db.get(b"d").unwrap(), Some(n(4)));
        assert_eq!(db.get(b"q").unwrap(), Some(n(50)));
        db.flush().unwrap();
        db.compact_range::<&[u8], _>(..).unwrap();
    }
}

#[test]
fn compaction_folds_operands_but_never_across_a_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let db = builder(dir.path()).open().unwrap();
    db.put(b"c", &n(1)).unwrap();
    for i in 0..5 {
        db.merge(b"c", &n(i)).unwrap();
        db.flush().unwrap();
    }
    let snap = db.snapshot(); // sees 1 + 0+1+2+3+4 = 11
    for i in 0..3 {
        db.merge(b"c", &n(100 * (i + 1))).unwrap();
        db.flush().unwrap();
    }
    db.merge(b"nobase", &n(1)).unwrap();
    db.merge(b"nobase", &n(2)).unwrap();
    db.flush().unwrap();
    db.compact_range::<&[u8], _>(..).unwrap();
    assert_eq!(snap.get(b"c").unwrap(), Some(n(11)));
    assert_eq!(db.get(b"c").unwrap(), Some(n(611)));
    // Below the snapshot: one put (folded); above it: the three operands folded into one.
    assert_eq!(stored(dir.path(), b"c"), vec![Kind::Merge, Kind::Put]);
    // At the bottom with nothing below, operands fold onto nothing: a put.
    assert_eq!(stored(dir.path(), b"nobase"), vec![Kind::Put]);
    drop(snap);
    db.compact_range::<&[u8], _>(..).unwrap();
    assert_eq!(stored(dir.path(), b"c"), vec![Kind::Put]);
    assert_eq!(db.get(b"c").unwrap(), Some(n(611)));
}

#[test]
fn a_family_without_an_operator_refuses_merges_and_reads_of_operands() {
    let dir = tempfile::tempdir().unwrap();
    let db = builder(dir.path())
        .cf_merge_operator("plain", None)
        .open()
        .unwrap();
    let plain = db.create_cf("plain").unwrap();
    let e = db.merge_cf(&plain, b"k", b"x").unwrap_err();
    assert!(
        matches!(e, Error::InvalidArgument(ref m) if m.contains("plain")),
        "{e}"
    );
    // A whole batch is refused, not half applied.
    let mut b = WriteBatch::new();
    b.put(b"ok", b"1").merge_cf(&plain, b"k", b"x");
    assert!(db.write(b, WriteOptions::default()).is_err());
    assert_eq!(db.get(b"ok").unwrap(), None);
    // Operands written under an operator, read without one: a typed error, not garbage.
    db.merge(b"c", &n(1)).unwrap();
    db.close().unwrap();
    let db = Db::builder(dir.path()).open().unwrap();
    let e = db.get(b"c").unwrap_err();
    assert!(
        matches!(e, Error::InvalidArgument(ref m) if m.contains("merge operator")),
        "{e}"
    );
    assert!(db.iter().next().unwrap().is_err());
    // An operand the operator rejects: a typed error naming the family.
    drop(db);
    let db = builder(dir.path()).open().unwrap();
    db.merge(b"bad", b"not eight bytes").unwrap();
    let e = db.get(b"bad").unwrap_err();
    assert!(
        matches!(e, Error::InvalidArgument(ref m) if m.contains("8")),
        "{e}"
    );
}

#[test]
fn operands_onto_an_expiring_value_fold_onto_nothing_once_it_expires() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let db = builder(dir.path()).clock(clock.clone()).open().unwrap();
    let mut b = WriteBatch::new();
    b.put_with_ttl(b"c", &n(100), Duration::from_secs(10));
    db.write(b, WriteOptions::default()).unwrap();
    db.merge(b"c", &n(5)).unwrap();
    for _ in 0..2 {
        assert_eq!(db.get(b"c").unwrap(), Some(n(105)));
        db.flush().unwrap();
        db.compact_range::<&[u8], _>(..).unwrap();
    }
    clock.advance(Duration::from_secs(10));
    for _ in 0..2 {
        assert_eq!(db.get(b"c").unwrap(), Some(n(5)));
        let all: Vec<_> = db.iter().map(|e| e.unwrap()).collect();
        assert_eq!(all, vec![(b"c".to_vec(), n(5))]);
        db.compact_range::<&[u8], _>(..).unwrap();
    }
}

#[test]
fn a_compaction_meeting_an_operand_the_operator_rejects_keeps_the_operands() {
    let dir = tempfile::tempdir().unwrap();
    let db = builder(dir.path()).open().unwrap();
    db.put(b"bad", &n(10)).unwrap();
    db.merge(b"bad", &n(1)).unwrap();
    db.merge(b"bad", b"not eight bytes").unwrap();
    db.merge(b"bad", &n(2)).unwrap();
    db.merge(b"good", &n(3)).unwrap();
    db.merge(b"good", &n(4)).unwrap();
    db.flush().unwrap();
    db.compact_range::<&[u8], _>(..).unwrap();
    // The compaction neither failed nor poisoned the database, nor dropped anything: the
    // bad key's base and operands are all still stored, and its read still says why.
    assert!(db.background_error().is_none());
    let kinds = stored(dir.path(), b"bad");
    assert_eq!(kinds.last(), Some(&Kind::Put), "{kinds:?}");
    assert!(
        kinds.iter().filter(|k| **k == Kind::Merge).count() >= 1,
        "{kinds:?}"
    );
    let e = db.get(b"bad").unwrap_err();
    assert!(
        matches!(e, Error::InvalidArgument(ref m) if m.contains("8")),
        "{e}"
    );
    // The other key folded as usual, to a put.
    assert_eq!(stored(dir.path(), b"good"), vec![Kind::Put]);
    assert_eq!(db.get(b"good").unwrap(), Some(n(7)));
    // A put over the bad key ends it: the next compaction drops the old entries.
    db.put(b"bad", &n(5)).unwrap();
    db.flush().unwrap();
    db.compact_range::<&[u8], _>(..).unwrap();
    assert_eq!(db.get(b"bad").unwrap(), Some(n(5)));
    assert_eq!(stored(dir.path(), b"bad"), vec![Kind::Put]);
    db.put(b"x", b"writable").unwrap();
}
