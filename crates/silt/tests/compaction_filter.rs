//! Compaction filters: a user callback keeps, removes or rewrites the newest value of each
//! key as compaction rewrites it, per column family, never under a live snapshot that can
//! still see the value, and over values separated into blob files too.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;

use silt::{CompactionFilter, Db, DbBuilder, FilterDecision, Read};

/// Removes `tmp/` keys, upper-cases `up/` values, keeps the rest; counts its calls.
#[derive(Debug, Default)]
struct Rules {
    calls: AtomicU64,
}

impl CompactionFilter for Rules {
    fn filter(&self, _level: usize, key: &[u8], value: &[u8]) -> FilterDecision {
        self.calls.fetch_add(1, SeqCst);
        if key.starts_with(b"tmp/") {
            FilterDecision::Remove
        } else if key.starts_with(b"up/") {
            FilterDecision::Change(value.to_ascii_uppercase())
        } else {
            FilterDecision::Keep
        }
    }
}

fn builder(dir: &Path) -> DbBuilder {
    Db::builder(dir)
        .memtable_bytes(64 << 10)
        .table_target_bytes(16 << 10)
        .level_base_bytes(64 << 10)
        .l0_compaction_trigger(100) // only manual compactions here
        .blob_threshold_bytes(Some(200))
}

fn value(i: u32) -> Vec<u8> {
    // Every third value is long enough to live in a blob file.
    let len = if i % 3 == 0 { 400 } else { 20 };
    let mut v = format!("value-{i}-").into_bytes();
    v.resize(len, b'v');
    v
}

fn load(db: &Db, cf: &silt::ColumnFamily) {
    for i in 0..300u32 {
        for p in ["tmp/", "up/", "keep/"] {
            db.put_cf(cf, format!("{p}{i:04}").as_bytes(), &value(i))
                .unwrap();
        }
    }
    db.flush().unwrap();
}

fn check_filtered(r: &impl Read, cf: &silt::ColumnFamily) {
    let all: Vec<_> = r.range_cf::<&[u8], _>(cf, ..).map(|e| e.unwrap()).collect();
    assert_eq!(all.len(), 600);
    for (k, v) in &all {
        let i: u32 = std::str::from_utf8(&k[k.len() - 4..])
            .unwrap()
            .parse()
            .unwrap();
        if k.starts_with(b"up/") {
            assert_eq!(v, &value(i).to_ascii_uppercase());
        } else {
            assert!(k.starts_with(b"keep/"));
            assert_eq!(v, &value(i));
        }
    }
}

#[test]
fn the_filter_removes_and_rewrites_values_as_compaction_passes() {
    let dir = tempfile::tempdir().unwrap();
    let rules = Arc::new(Rules::default());
    let db = builder(dir.path())
        .compaction_filter(rules.clone())
        .open()
        .unwrap();
    let cf = db.default_cf();
    load(&db, &cf);
    // Not applied at flush: nothing changed yet.
    assert_eq!(db.range_cf::<&[u8], _>(&cf, ..).count(), 900);
    assert_eq!(rules.calls.load(SeqCst), 0);
    db.compact_range::<&[u8], _>(..).unwrap();
    assert!(rules.calls.load(SeqCst) >= 900);
    check_filtered(&db, &cf);
    // Blob-separated values were read for the filter and rewritten (upper case), and the
    // removed ones left nothing at the bottom: a second full pass removes nothing more.
    assert_eq!(
        db.get(b"up/0003").unwrap(),
        Some(value(3).to_ascii_uppercase())
    );
    db.close().unwrap();
    let db = builder(dir.path()).open().unwrap();
    check_filtered(&db, &db.default_cf());
}

#[test]
fn a_value_a_snapshot_can_see_is_not_filtered_until_the_snapshot_goes() {
    let dir = tempfile::tempdir().unwrap();
    let db = builder(dir.path())
        .compaction_filter(Arc::new(Rules::default()))
        .open()
        .unwrap();
    let cf = db.default_cf();
    load(&db, &cf);
    let snap = db.snapshot();
    // A newer write to one key: its old value is the snapshot's, its new one nobody's.
    db.put(b"up/0001", b"fresh").unwrap();
    db.flush().unwrap();
    db.compact_range::<&[u8], _>(..).unwrap();
    // The snapshot reads exactly what it read before.
    let seen: Vec<_> = snap.iter().map(|e| e.unwrap()).collect();
    assert_eq!(seen.len(), 900);
    assert_eq!(snap.get(b"up/0001").unwrap(), Some(value(1)));
    assert_eq!(snap.get(b"tmp/0007").unwrap(), Some(value(7)));
    // So does the database for every value the snapshot still sees; the one value no
    // snapshot sees was filtered.
    assert_eq!(db.get(b"tmp/0007").unwrap(), Some(value(7)));
    assert_eq!(db.get(b"up/0001").unwrap(), Some(b"FRESH".to_vec()));
    drop(snap);
    db.compact_range::<&[u8], _>(..).unwrap();
    assert_eq!(db.get(b"tmp/0007").unwrap(), None);
    assert_eq!(
        db.get(b"up/0002").unwrap(),
        Some(value(2).to_ascii_uppercase())
    );
}

#[test]
fn each_family_has_its_own_filter_or_none() {
    let dir = tempfile::tempdir().unwrap();
    let db = builder(dir.path())
        .compaction_filter(Arc::new(Rules::default()))
        .cf_compaction_filter("raw", None)
        .open()
        .unwrap();
    let raw = db.create_cf("raw").unwrap();
    let cf = db.default_cf();
    load(&db, &cf);
    load(&db, &raw);
    db.compact_range::<&[u8], _>(..).unwrap();
    db.compact_range_cf::<&[u8], _>(&raw, ..).unwrap();
    check_filtered(&db, &cf);
    assert_eq!(db.range_cf::<&[u8], _>(&raw, ..).count(), 900);
    assert_eq!(db.get_cf(&raw, b"up/0002").unwrap(), Some(value(2)));
}
