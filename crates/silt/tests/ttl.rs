//! Expiring values (TTL): per write and per column family, judged by a clock the tests
//! drive (`ManualClock`). An expired value reads as deleted at once everywhere (point
//! reads, iterators both ways, cursors, snapshots, transactions), in the memtable, in
//! tables and in blob files, across reopen and log replay; compaction drops it.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use silt::inspect::SstFile;
use silt::{Db, DbBuilder, Kind, ManualClock, Read, TxnOptions, WriteBatch, WriteOptions};

const T0: u64 = 1_700_000_000_000;

fn builder(dir: &Path, clock: &Arc<ManualClock>) -> DbBuilder {
    Db::builder(dir)
        .clock(clock.clone())
        .memtable_bytes(64 << 10)
        .table_target_bytes(32 << 10)
        .level_base_bytes(128 << 10)
        .l0_compaction_trigger(2)
        .blob_threshold_bytes(Some(100))
}

fn put_ttl(db: &Db, k: &[u8], v: &[u8], ttl_ms: u64) {
    let mut b = WriteBatch::new();
    b.put_with_ttl(k, v, Duration::from_millis(ttl_ms));
    db.write(b, WriteOptions::default()).unwrap();
}

fn all(r: &impl Read) -> Vec<(Vec<u8>, Vec<u8>)> {
    r.iter().map(|e| e.unwrap()).collect()
}

fn all_rev(r: &impl Read) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut v: Vec<_> = r.iter().rev().map(|e| e.unwrap()).collect();
    v.reverse();
    v
}

/// Entries of every live table of the database, by kind.
fn table_kinds(dir: &Path) -> Vec<Kind> {
    let mut kinds = Vec::new();
    let m = silt::inspect::manifest(dir).unwrap();
    for t in m.tables {
        let f = SstFile::open(dir.join("tables").join(format!("{:06}.sst", t.id))).unwrap();
        for e in f.entries() {
            kinds.push(e.unwrap().kind);
        }
    }
    kinds
}

#[test]
fn an_expired_value_reads_as_deleted_everywhere_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let db = builder(dir.path(), &clock).open().unwrap();
    db.put(b"a", b"old").unwrap();
    put_ttl(&db, b"a", b"new", 1000); // hides "old" while live, and once expired
    put_ttl(&db, b"b", b"bee", 2000);
    db.put(b"c", b"sea").unwrap();
    let big = vec![7u8; 500]; // separated into a blob file at flush
    put_ttl(&db, b"d", &big, 1000);
    let snap = db.snapshot();
    for phase in ["memtable", "tables"] {
        clock.set(T0 + 999);
        let want: Vec<(Vec<u8>, Vec<u8>)> = vec![
            (b"a".to_vec(), b"new".to_vec()),
            (b"b".to_vec(), b"bee".to_vec()),
            (b"c".to_vec(), b"sea".to_vec()),
            (b"d".to_vec(), big.clone()),
        ];
        assert_eq!(all(&db), want, "{phase}");
        assert_eq!(all_rev(&db), want, "{phase}");
        assert_eq!(db.get(b"d").unwrap(), Some(big.clone()), "{phase}");
        clock.set(T0 + 1000);
        let want: Vec<(Vec<u8>, Vec<u8>)> = vec![
            (b"b".to_vec(), b"bee".to_vec()),
            (b"c".to_vec(), b"sea".to_vec()),
        ];
        assert_eq!(
            db.get(b"a").unwrap(),
            None,
            "{phase}: the expired value hides the old"
        );
        assert_eq!(db.get(b"d").unwrap(), None, "{phase}");
        assert_eq!(all(&db), want, "{phase}");
        assert_eq!(all_rev(&db), want, "{phase}");
        // A snapshot taken before the expiry sees it too: expiry is by the clock.
        assert_eq!(snap.get(b"a").unwrap(), None, "{phase}");
        assert_eq!(all(&snap), want, "{phase}");
        let mut c = db.cursor();
        c.seek(b"a").unwrap();
        assert_eq!(c.key(), Some(&b"b"[..]), "{phase}");
        c.seek_for_prev(b"a1").unwrap();
        assert_eq!(c.key(), None, "{phase}");
        clock.set(T0 + 2000);
        assert_eq!(db.get(b"b").unwrap(), None, "{phase}");
        assert_eq!(all(&db), vec![(b"c".to_vec(), b"sea".to_vec())], "{phase}");
        db.flush().unwrap();
    }
}

#[test]
fn a_family_ttl_applies_to_its_puts_and_transactions_only() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let db = builder(dir.path(), &clock)
        .cf_ttl("sessions", Some(Duration::from_secs(60)))
        .open()
        .unwrap();
    let sessions = db.create_cf("sessions").unwrap();
    db.put_cf(&sessions, b"s1", b"alice").unwrap();
    db.put(b"user", b"alice").unwrap();
    let mut b = WriteBatch::new();
    b.put_cf(&sessions, b"s2", b"bob");
    // A write's own TTL wins over the family's.
    b.put_cf_with_ttl(&sessions, b"s3", b"carol", Duration::from_secs(600));
    db.write(b, WriteOptions::default()).unwrap();
    let mut txn = db.begin(TxnOptions::default());
    txn.put_cf(&sessions, b"s4", b"dave").unwrap();
    txn.commit().unwrap();
    clock.advance(Duration::from_secs(59));
    assert_eq!(db.range_cf::<&[u8], _>(&sessions, ..).count(), 4);
    clock.advance(Duration::from_secs(1));
    let left: Vec<_> = db
        .range_cf::<&[u8], _>(&sessions, ..)
        .map(|e| e.unwrap().0)
        .collect();
    assert_eq!(left, vec![b"s3".to_vec()]);
    assert_eq!(
        db.get(b"user").unwrap(),
        Some(b"alice".to_vec()),
        "no TTL here"
    );
}

#[test]
fn expiry_times_survive_reopen_and_log_replay_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let db = builder(dir.path(), &clock)
        .ttl(Some(Duration::from_secs(10)))
        .open()
        .unwrap();
    db.put(b"in-log", b"1").unwrap();
    db.flush().unwrap();
    clock.advance(Duration::from_secs(5));
    db.put(b"in-log-later", b"2").unwrap();
    db.close().unwrap();
    // Reopened later, with another TTL: the stored expiry times are what count.
    clock.advance(Duration::from_secs(6)); // T0 + 11 s
    let db = builder(dir.path(), &clock)
        .ttl(Some(Duration::from_secs(1000)))
        .open()
        .unwrap();
    assert_eq!(db.get(b"in-log").unwrap(), None);
    assert_eq!(db.get(b"in-log-later").unwrap(), Some(b"2".to_vec()));
    clock.advance(Duration::from_secs(4)); // T0 + 15 s
    assert_eq!(db.get(b"in-log-later").unwrap(), None);
    // A write under the new TTL.
    db.put(b"new", b"3").unwrap();
    clock.advance(Duration::from_secs(999));
    assert_eq!(db.get(b"new").unwrap(), Some(b"3".to_vec()));
}

#[test]
fn compaction_drops_expired_values_and_collects_their_blob_files() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let db = builder(dir.path(), &clock)
        .ttl(Some(Duration::from_secs(30)))
        .open()
        .unwrap();
    for i in 0..400u32 {
        let v = if i % 2 == 0 {
            vec![b'x'; 300]
        } else {
            vec![b'y'; 10]
        };
        db.put(format!("k{i:04}").as_bytes(), &v).unwrap();
    }
    db.flush().unwrap();
    db.compact_range::<&[u8], _>(..).unwrap();
    let kinds = table_kinds(dir.path());
    assert_eq!(kinds.len(), 400);
    assert!(
        kinds.contains(&Kind::PutTtl) && kinds.contains(&Kind::BlobTtl),
        "{kinds:?}"
    );
    assert!(db.stats().blob_files >= 1);
    clock.advance(Duration::from_secs(30));
    assert_eq!(db.iter().count(), 0);
    db.compact_range::<&[u8], _>(..).unwrap();
    // Expired entries became deletes, which the bottom level drops: nothing is left.
    assert_eq!(table_kinds(dir.path()), Vec::<Kind>::new());
    assert_eq!(db.stats().blob_files, 0, "{:?}", db.stats());
    db.close().unwrap();
    let db = builder(dir.path(), &clock).open().unwrap();
    assert_eq!(db.iter().count(), 0);
}

#[test]
fn a_value_written_without_ttl_never_expires_and_costs_no_clock_read() {
    #[derive(Debug)]
    struct Panicking;
    impl silt::Clock for Panicking {
        fn now_millis(&self) -> u64 {
            panic!("read the clock without an expiring entry in sight")
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let db = Db::builder(dir.path())
        .clock(Arc::new(Panicking))
        .open()
        .unwrap();
    db.put(b"a", b"1").unwrap();
    db.flush().unwrap();
    db.put(b"b", b"2").unwrap();
    assert_eq!(db.get(b"a").unwrap(), Some(b"1".to_vec()));
    assert_eq!(db.iter().count(), 2);
    assert_eq!(db.iter().rev().count(), 2);
}
