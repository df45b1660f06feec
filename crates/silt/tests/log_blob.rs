//! Log blobs (`docs/format/vlog.md`, "Log blobs"): a flush points at large values where
//! the log already holds them, by hard-linking the log segment into `tables/`. Reads,
//! iterators, reopen, compaction, collection, checkpoints and repair see the values
//! unchanged; a damaged value is `Corruption` naming the log blob; the log never reuses a
//! linked segment; with `blob_from_log(false)` values are copied as before.

use std::path::{Path, PathBuf};

use silt::{Db, DbBuilder, Error};

/// Small segments (64 KiB) and a memtable of a few of them, so that a flush covers whole
/// segments and many segments are linked, purged and (the unlinked ones) recycled.
fn builder(dir: &Path) -> DbBuilder {
    Db::builder(dir)
        .wal_segment_bytes(64 << 10)
        .memtable_bytes(256 << 10)
        .table_target_bytes(32 << 10)
        .level_base_bytes(128 << 10)
        .level_size_ratio(4)
        .l0_compaction_trigger(2)
        .blob_threshold_bytes(Some(1000))
}

/// Value `round` of key `i`: 2–3 KiB, above the threshold, unique per key and round.
fn value(i: u32, round: u32) -> Vec<u8> {
    let mut v = format!("{i}:{round}:").into_bytes();
    v.resize(
        2000 + (i as usize % 5) * 200,
        b'a' + ((i + round) % 26) as u8,
    );
    v
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// The blob files in `tables/`, split into log blobs (log segment magic) and others.
fn blob_files(dir: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir.join("tables"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "blob"))
        .collect();
    v.sort();
    v.into_iter()
        .partition(|p| std::fs::read(p).unwrap().starts_with(b"SILTWAL\0"))
}

fn check_all(db: &Db, n: u32, round: impl Fn(u32) -> u32) {
    for i in 0..n {
        assert_eq!(
            db.get(&key(i)).unwrap(),
            Some(value(i, round(i))),
            "key {i}"
        );
    }
    let fwd: Vec<_> = db.iter().map(|r| r.unwrap()).collect();
    assert_eq!(fwd.len(), n as usize);
    for (i, (k, v)) in fwd.iter().enumerate() {
        let i = i as u32;
        assert_eq!((k, v), (&key(i), &value(i, round(i))));
    }
    let back: Vec<_> = db.iter().rev().map(|r| r.unwrap()).collect();
    assert_eq!(back.len(), n as usize);
}

fn wait_idle(db: &Db) {
    // Background compactions (and blob collection) run until nothing is due.
    assert!(db
        .wait_for_compactions(std::time::Duration::from_secs(60))
        .unwrap());
}

#[test]
fn large_values_are_pointed_at_in_the_log_and_written_once() {
    let dir = tempfile::tempdir().unwrap();
    let n = 1500; // about 3.5 MB of values: some 50 segments
    {
        let db = builder(dir.path()).open().unwrap();
        let mut b = silt::WriteBatch::new();
        for i in 0..n {
            b.put(&key(i), &value(i, 0));
            if b.len() == 10 {
                db.write(std::mem::take(&mut b), Default::default())
                    .unwrap();
            }
        }
        db.write(b, Default::default()).unwrap();
        db.flush().unwrap();
        check_all(&db, n, |_| 0);
        let s = db.stats();
        let (logs, copies) = blob_files(dir.path());
        assert!(
            logs.len() >= 10,
            "{} log blobs, {} copies",
            logs.len(),
            copies.len()
        );
        // Most values were not written a second time: the copies hold a minority.
        assert!(
            s.blob_write_bytes * 4 < s.blob_live_bytes,
            "blob bytes written {} of {} live",
            s.blob_write_bytes,
            s.blob_live_bytes
        );
        // Many more segments through the log: the linked ones are never reused (a reused
        // one would overwrite values the tables point at, which the checks below read).
        for i in 0..n {
            db.put(&key(n + i), &[b'x'; 100]).unwrap();
            db.delete(&key(n + i)).unwrap();
        }
        db.flush().unwrap();
        db.compact_range::<&[u8], _>(..).unwrap();
        check_all(&db, n, |_| 0);
        db.close().unwrap();
    }
    let db = builder(dir.path()).paranoid_checks(true).open().unwrap();
    check_all(&db, n, |_| 0);
    // A database written with log blobs opens and reads with the option off, and the
    // other way round.
    drop(db);
    let db = builder(dir.path()).blob_from_log(false).open().unwrap();
    check_all(&db, n, |_| 0);
}

#[test]
fn with_the_option_off_values_are_copied() {
    let dir = tempfile::tempdir().unwrap();
    let db = builder(dir.path()).blob_from_log(false).open().unwrap();
    for i in 0..800 {
        db.put(&key(i), &value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    let (logs, copies) = blob_files(dir.path());
    assert!(logs.is_empty() && !copies.is_empty());
    assert!(db.stats().blob_write_bytes >= db.stats().blob_live_bytes);
    check_all(&db, 800, |_| 0);
}

/// The log segments in `dir`'s log.
fn log_segments(dir: &Path) -> usize {
    std::fs::read_dir(dir.join("wal"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "wal")
        })
        .count()
}

#[test]
fn the_memtable_reads_large_values_in_the_log_and_copies_small_ones() {
    let dir = tempfile::tempdir().unwrap();
    let db = builder(dir.path()).open().unwrap();
    // Batches of ten, each within one log record (a larger one is committed in parts,
    // whose values the memtable copies).
    for i in (0..100).step_by(5) {
        let mut b = silt::WriteBatch::new();
        for i in i..i + 5 {
            b.put(&key(i), &value(i, 0));
            b.put(format!("small{i:04}").as_bytes(), &[b's'; 999]); // below the threshold
        }
        db.write(b, Default::default()).unwrap();
    }
    db.put(&key(100), &value(100, 0)).unwrap();
    // A transaction's values are in its commit record: left in the log too.
    let mut t = db.begin(Default::default());
    t.put(&key(101), &value(101, 0)).unwrap();
    t.commit().unwrap();
    assert_eq!(db.stats().memtable_values_in_log, 102);
    for i in 0..102 {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i, 0)), "key {i}");
    }
    let small = db.get(b"small0042").unwrap();
    assert_eq!(small, Some(vec![b's'; 999]));
    // Both directions, through the memtable's cursor.
    let fwd: Vec<_> = db.range(key(0)..key(102)).map(|r| r.unwrap()).collect();
    let back: Vec<_> = db
        .range(key(0)..key(102))
        .rev()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(fwd.len(), 102);
    assert!(fwd.iter().rev().eq(back.iter()));
    for (i, (k, v)) in fwd.iter().enumerate() {
        assert_eq!((k, v), (&key(i as u32), &value(i as u32, 0)));
    }
    // The flush points at them in the log (their crc taken at insert) and reads see them
    // unchanged, before and after a reopen.
    db.flush().unwrap();
    assert!(!blob_files(dir.path()).0.is_empty(), "a log blob");
    check_some(&db, 0..102);
    db.close().unwrap();
    let db = builder(dir.path()).open().unwrap();
    check_some(&db, 0..102);
}

fn check_some(db: &Db, keys: std::ops::Range<u32>) {
    for i in keys {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i, 0)), "key {i}");
    }
}

#[test]
fn values_read_in_the_log_outlive_the_purge_of_their_segments() {
    // One large value among 30 small ones per batch: no segment is mostly large values, so
    // a flush copies them into a blob file instead of linking the segments. An iterator
    // opened on the active memtable still reads it after writers filled it and its flush
    // purged the log while they went on — a purge that recycles the segments, rewriting
    // them in place with later records. The iterator's large values lie in those segments:
    // they must stay as written until it lets go (memtable invariant 3).
    let dir = tempfile::tempdir().unwrap();
    let db = builder(dir.path()).memtable_bytes(4 << 20).open().unwrap();
    let batch = |i: u32, fill: u8| {
        let mut b = silt::WriteBatch::new();
        b.put(&key(i), &value(i, 0));
        for j in 0..30 {
            b.put(format!("small{i:05}-{j:02}").as_bytes(), &[fill; 900]);
        }
        b
    };
    let held = 100;
    for i in 0..held {
        db.write(batch(i, b's'), Default::default()).unwrap();
    }
    assert_eq!(db.stats().memtable_values_in_log, u64::from(held));
    let held_segments = log_segments(dir.path());
    assert!(held_segments >= 40, "{held_segments} segments");
    let mut it = db.iter();
    // Six memtables' worth more: flushes while writes go on, each purge recycling.
    for i in 0..800 {
        db.write(batch(10_000 + i, b'z'), Default::default())
            .unwrap();
    }
    // The frozen memtables flush without more writes; the counter may trail a moment.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while db.stats().flushes < 4 {
        assert!(
            std::time::Instant::now() < deadline,
            "{} flushes",
            db.stats().flushes
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let (logs, copies) = blob_files(dir.path());
    assert!(logs.is_empty() && !copies.is_empty(), "copied, not linked");
    // All flushed, but not one of the held segments was purged (each is still in the log).
    db.flush().unwrap();
    assert!(log_segments(dir.path()) >= held_segments);
    let mut seen = 0;
    for r in it.by_ref() {
        let (k, v) = r.unwrap();
        if let Some(i) = std::str::from_utf8(&k).unwrap().strip_prefix("key") {
            let i: u32 = i.parse().unwrap();
            let head = String::from_utf8_lossy(&v[..16.min(v.len())]).into_owned();
            assert!(v == value(i, 0), "key {i}: {head:?}… was rewritten");
            seen += 1;
        } else {
            assert!(
                v == [b's'; 900],
                "{:?} was rewritten",
                String::from_utf8_lossy(&k)
            );
        }
    }
    assert_eq!(seen, held);
    // Let go: the flush thread makes the purge it owes, with no further write or flush.
    drop(it);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while log_segments(dir.path()) >= 8 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(
        log_segments(dir.path()) < 8,
        "{} segments left",
        log_segments(dir.path())
    );
    check_some(&db, 0..held);
}

#[test]
fn a_reader_of_values_in_the_log_keeps_the_directory_locked_after_close() {
    // An iterator may outlive its database. One that reads values in the log keeps the
    // directory locked, so no other handle opens the log and recycles its segments under it.
    let dir = tempfile::tempdir().unwrap();
    let db = builder(dir.path()).open().unwrap();
    for i in (0..20).step_by(2) {
        let mut b = silt::WriteBatch::new();
        b.put(&key(i), &value(i, 0));
        b.put(&key(i + 1), &value(i + 1, 0));
        db.write(b, Default::default()).unwrap();
    }
    assert_eq!(db.stats().memtable_values_in_log, 20);
    let it = db.iter();
    db.close().unwrap();
    match builder(dir.path()).open() {
        Err(Error::Locked { .. }) => {}
        other => panic!("opened beside a reader of the log: {:?}", other.map(|_| ())),
    }
    let read: Vec<_> = it.map(|r| r.unwrap()).collect();
    assert_eq!(read.len(), 20);
    for (i, (k, v)) in read.iter().enumerate() {
        assert_eq!((k, v), (&key(i as u32), &value(i as u32, 0)));
    }
    // Let go: the directory opens, and the values were kept.
    let db = builder(dir.path()).open().unwrap();
    check_some(&db, 0..20);
}

#[test]
fn a_value_read_in_the_log_that_changed_there_is_corruption_when_the_flush_copies_it() {
    // One large value among 30 small ones per batch: the flush copies the large values
    // (their segments are not mostly theirs) from the log's pages, where the memtable left
    // them. One of them is changed in the segment file behind the engine's back (the page
    // cache the mapping reads is the file's): the flush must refuse to copy it under a
    // fresh crc, and report where the log holds it.
    let dir = tempfile::tempdir().unwrap();
    let db = builder(dir.path()).memtable_bytes(4 << 20).open().unwrap();
    for i in 0..40 {
        let mut b = silt::WriteBatch::new();
        b.put(&key(i), &value(i, 0));
        for j in 0..30 {
            b.put(format!("small{i:04}-{j:02}").as_bytes(), &[b's'; 900]);
        }
        db.write(b, Default::default()).unwrap();
    }
    assert_eq!(db.stats().memtable_values_in_log, 40);
    let victim = value(17, 0);
    let mut found = None;
    for e in std::fs::read_dir(dir.path().join("wal")).unwrap() {
        let path = e.unwrap().path();
        // Segments only (a segment being prepared is renamed meanwhile).
        if path.extension().is_none_or(|x| x != "wal") {
            continue;
        }
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        if let Some(at) = bytes.windows(victim.len()).position(|w| w == &victim[..]) {
            found = Some((path, at));
        }
    }
    let (segment, at) = found.expect("the value is in a log segment");
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&segment)
            .unwrap();
        f.write_all_at(b"X", (at + 100) as u64).unwrap();
    }
    // The memtable reads the log's bytes as they are now: the change shows.
    assert_ne!(db.get(&key(17)).unwrap(), Some(victim));
    let e = db.flush().unwrap_err();
    let cause = db.background_error().unwrap_or_default();
    assert!(
        cause.contains("no longer matches the crc") && cause.contains(".wal"),
        "{e}: {cause}"
    );
    // Poisoned: nothing more is written.
    assert!(db.put(b"after", b"x").is_err());
}

#[test]
fn writers_racing_flushes_and_readers_see_every_value_left_in_the_log() {
    // Writers commit large values while another thread keeps freezing and flushing the
    // memtable, so commits land in a memtable that is no longer the active one (the one
    // owning their seqno), segments are linked, copied and purged under them, and readers
    // read values acknowledged a moment ago, from whichever memtable or table holds them.
    // Threads of their own and a deadline: a writer that panics inside the commit path
    // leaves the others waiting, and the test must fail, not hang.
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::SeqCst};
    use std::sync::Arc;
    const WRITERS: u32 = 3;
    // Each writer commits at least BATCHES batches, and goes on until the flusher has
    // completed FLUSHES flushes, so the race is run however the threads are scheduled (a
    // count of flushes reached by a fixed number of batches depends on the machine's load).
    const BATCHES: u32 = 200;
    const FLUSHES: u32 = 10;
    const MAX_BATCHES: u32 = 45_000; // keeps each writer's keys below the next writer's
    let k = |t: u32, n: u32| t * 100_000 + n;
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(builder(dir.path()).memtable_bytes(1 << 20).open().unwrap());
    let acked: Arc<Vec<AtomicU32>> = Arc::new((0..WRITERS).map(|_| AtomicU32::new(0)).collect());
    let flushed = Arc::new(AtomicU32::new(0));
    let finished = Arc::new(AtomicU32::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let failed = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for t in 0..WRITERS {
        let (db, acked, failed) = (db.clone(), acked.clone(), failed.clone());
        let (flushed, finished) = (flushed.clone(), finished.clone());
        threads.push(std::thread::spawn(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let mut b = 0;
                while b < BATCHES || (flushed.load(SeqCst) < FLUSHES && b < MAX_BATCHES) {
                    let mut batch = silt::WriteBatch::new();
                    batch.put(&key(k(t, 2 * b)), &value(k(t, 2 * b), 0));
                    batch.put(&key(k(t, 2 * b + 1)), &value(k(t, 2 * b + 1), 0));
                    db.write(batch, Default::default()).unwrap();
                    acked[t as usize].store(2 * b + 2, SeqCst);
                    b += 1;
                }
            }));
            if r.is_err() {
                failed.store(true, SeqCst);
            }
            finished.fetch_add(1, SeqCst);
        }));
    }
    {
        let (db, done, flushed) = (db.clone(), done.clone(), flushed.clone());
        threads.push(std::thread::spawn(move || {
            while !done.load(SeqCst) {
                db.flush().unwrap();
                // Flushes that wrote a table (a call on an empty memtable writes none).
                let n = u32::try_from(db.stats().flushes).unwrap_or(u32::MAX);
                flushed.store(n, SeqCst);
            }
        }));
    }
    {
        let (db, done, acked, failed) = (db.clone(), done.clone(), acked.clone(), failed.clone());
        threads.push(std::thread::spawn(move || {
            let mut x = 7u32;
            while !done.load(SeqCst) {
                for t in 0..WRITERS {
                    let n = acked[t as usize].load(SeqCst);
                    if n == 0 {
                        continue;
                    }
                    x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                    let i = k(t, (x >> 8) % n);
                    if db.get(&key(i)).unwrap() != Some(value(i, 0)) {
                        eprintln!("key {i} read back wrong");
                        failed.store(true, SeqCst);
                        return;
                    }
                }
            }
        }));
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while finished.load(SeqCst) < WRITERS {
        assert!(!failed.load(SeqCst), "a writer or the reader failed");
        assert!(std::time::Instant::now() < deadline, "the writers stalled");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    done.store(true, SeqCst);
    for h in threads {
        h.join().unwrap();
    }
    assert!(!failed.load(SeqCst), "a writer or the reader failed");
    let s = db.stats();
    assert!(
        s.memtable_values_in_log >= u64::from(WRITERS * BATCHES),
        "{s:?}"
    );
    // The flusher had completed FLUSHES flushes while the writers were still writing.
    assert!(
        s.flushes >= u64::from(FLUSHES),
        "{} flushes after {:?} keys per writer",
        s.flushes,
        acked.iter().map(|a| a.load(SeqCst)).collect::<Vec<_>>()
    );
    let written: Vec<u32> = acked.iter().map(|a| a.load(SeqCst)).collect();
    let check = |db: &Db| {
        for t in 0..WRITERS {
            for n in 0..written[t as usize] {
                let i = k(t, n);
                assert_eq!(db.get(&key(i)).unwrap(), Some(value(i, 0)), "key {i}");
            }
        }
    };
    check(&db);
    match Arc::try_unwrap(db) {
        Ok(db) => db.close().unwrap(),
        Err(_) => panic!("a thread still holds the database"),
    }
    check(&builder(dir.path()).open().unwrap());
}

#[test]
fn values_are_copied_into_the_memtable_with_the_option_off_or_durable_syncs() {
    let offs: [fn(&Path) -> DbBuilder; 3] = [
        |d| builder(d).memtable_values_in_log(false),
        |d| builder(d).blob_from_log(false),
        |d| builder(d).sync_mode(silt::SyncMode::Full),
    ];
    for off in offs {
        let dir = tempfile::tempdir().unwrap();
        let db = off(dir.path()).open().unwrap();
        for i in 0..50 {
            db.put(&key(i), &value(i, 0)).unwrap();
        }
        assert_eq!(db.stats().memtable_values_in_log, 0);
        check_some(&db, 0..50);
        db.flush().unwrap();
        check_some(&db, 0..50);
    }
}

#[test]
fn overwritten_values_in_log_blobs_are_collected_and_the_links_removed() {
    let dir = tempfile::tempdir().unwrap();
    let n = 600;
    let db = builder(dir.path()).open().unwrap();
    for round in 0..6 {
        for i in 0..n {
            db.put(&key(i), &value(i, round)).unwrap();
        }
        db.flush().unwrap();
    }
    db.compact_range::<&[u8], _>(..).unwrap();
    wait_idle(&db);
    check_all(&db, n, |_| 5);
    let s = db.stats();
    // Every round but the last is garbage: collection must have dropped most log blobs.
    assert!(
        (s.blob_file_bytes as f64) < 2.5 * s.blob_live_bytes as f64,
        "blob bytes {} for {} live",
        s.blob_file_bytes,
        s.blob_live_bytes
    );
    let (logs, _) = blob_files(dir.path());
    assert!(
        logs.len() as u64 <= s.blob_files,
        "a log blob left the state but its link stayed"
    );
    drop(db);
    let db = builder(dir.path()).open().unwrap();
    check_all(&db, n, |_| 5);
}

#[test]
fn a_damaged_value_in_a_log_blob_is_corruption_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let n = 300;
    {
        let db = builder(dir.path()).open().unwrap();
        for i in 0..n {
            db.put(&key(i), &value(i, 0)).unwrap();
        }
        db.flush().unwrap();
        db.close().unwrap();
    }
    let (logs, _) = blob_files(dir.path());
    assert!(!logs.is_empty());
    // `verify` walks the log blobs' records too.
    let r = silt::inspect::verify(dir.path()).unwrap();
    assert!(r.blob_files >= logs.len() as u64);
    let f = &logs[0];
    let mut bytes = std::fs::read(f).unwrap();
    // A byte inside some value: the values of key i start with "i:0:" in this file.
    let at = (0..bytes.len() - 4)
        .find(|&o| bytes[o..].starts_with(b":0:aaa") || bytes[o..].starts_with(b":0:b"))
        .expect("a value in the log blob");
    bytes[at + 10] ^= 0x40;
    std::fs::write(f, &bytes).unwrap();
    match silt::inspect::verify(dir.path()) {
        Err(Error::Corruption { file, .. }) => assert_eq!(&file, f),
        other => panic!("verify passed a damaged log blob: {:?}", other.map(|_| ())),
    }
    let db = builder(dir.path()).open().unwrap();
    let mut bad = 0;
    for i in 0..n {
        match db.get(&key(i)) {
            Ok(v) => assert!(v == Some(value(i, 0)), "key {i} read wrong bytes"),
            Err(Error::Corruption { file, reason, .. }) => {
                assert_eq!(&file, f);
                assert!(reason.contains("checksum"), "{reason}");
                bad += 1;
            }
            Err(e) => panic!("key {i}: {e}"),
        }
    }
    assert_eq!(bad, 1, "one value was damaged");
    drop(db);
    // A damaged segment header is refused at open with paranoid checks; a cut file always.
    bytes[at + 10] ^= 0x40;
    bytes[30] ^= 1;
    std::fs::write(f, &bytes).unwrap();
    match builder(dir.path()).paranoid_checks(true).open() {
        Err(Error::Corruption { file, .. }) => assert_eq!(&file, f),
        other => panic!("a damaged log blob opened: {:?}", other.map(|_| ())),
    }
    bytes[30] ^= 1;
    std::fs::write(f, &bytes[..bytes.len() - 1]).unwrap();
    match builder(dir.path()).open() {
        Err(Error::Corruption { file, reason, .. }) => {
            assert_eq!(&file, f);
            assert!(reason.contains("bytes"), "{reason}");
        }
        other => panic!("a cut log blob opened: {:?}", other.map(|_| ())),
    }
}

#[test]
fn checkpoints_and_repair_keep_log_blobs() {
    let dir = tempfile::tempdir().unwrap();
    let n = 500;
    let db = builder(dir.path()).open().unwrap();
    for i in 0..n {
        db.put(&key(i), &value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    assert!(!blob_files(dir.path()).0.is_empty());
    let cp = dir.path().join("cp");
    db.checkpoint(&cp).unwrap();
    // More writes through the source's log: the checkpoint's links must not change.
    for i in 0..n {
        db.put(&key(i), &value(i, 1)).unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    let c = builder(&cp).paranoid_checks(true).open().unwrap();
    check_all(&c, n, |_| 0);
    drop(c);
    // Repair (the manifest lost) finds the log blobs by their magic.
    std::fs::remove_file(cp.join("CURRENT")).unwrap();
    Db::repair(&cp).unwrap();
    let c = builder(&cp).open().unwrap();
    check_all(&c, n, |_| 0);
}

/// An expiring put's value sits after its 8-byte expiry in the log: the pointer must skip
/// it, and the entry keep its expiry in the table.
#[test]
fn expiring_values_are_pointed_at_past_their_expiry() {
    let dir = tempfile::tempdir().unwrap();
    let n = 400;
    let hour = std::time::Duration::from_secs(3600);
    let db = builder(dir.path()).open().unwrap();
    for i in 0..n {
        let mut b = silt::WriteBatch::new();
        b.put_with_ttl(&key(i), &value(i, 0), hour);
        db.write(b, Default::default()).unwrap();
    }
    db.flush().unwrap();
    assert!(!blob_files(dir.path()).0.is_empty(), "no log blob");
    assert!(db.stats().blob_write_bytes * 4 < db.stats().blob_live_bytes);
    check_all(&db, n, |_| 0);
    db.close().unwrap();
    let db = builder(dir.path()).open().unwrap();
    check_all(&db, n, |_| 0);
}

/// The flush learns where the log holds each value from the commit that inserted it, so
/// values a reopen replayed into the memtable, and values a transaction committed, are
/// pointed at in the log as a batch's are.
#[test]
fn replayed_and_transaction_values_are_pointed_at_in_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let n = 600;
    {
        let db = builder(dir.path()).open().unwrap();
        // Not flushed: `close` leaves the memtable to the log, and the reopen replays it.
        // The memtable holds 256 KiB, so write under that: 60 puts of 2-3 KiB.
        for i in 0..60 {
            db.put(&key(i), &value(i, 1)).unwrap();
        }
        db.close().unwrap();
    }
    let db = builder(dir.path()).open().unwrap();
    assert!(db.recovery_report().records_replayed > 0);
    let before = db.stats().blob_write_bytes;
    db.flush().unwrap();
    assert!(
        !blob_files(dir.path()).0.is_empty(),
        "no log blob after replay"
    );
    assert_eq!(
        db.stats().blob_write_bytes,
        before,
        "replayed values were copied"
    );
    // Transactions of ten puts each, one log record per commit.
    for c in 0..n / 10 {
        let mut t = db.begin(silt::TxnOptions::default());
        for i in c * 10..c * 10 + 10 {
            t.put(&key(i), &value(i, 2)).unwrap();
        }
        t.commit().unwrap();
    }
    db.flush().unwrap();
    let s = db.stats();
    assert!(
        s.blob_write_bytes * 4 < s.blob_live_bytes,
        "transactions' values copied: {} bytes written of {} live",
        s.blob_write_bytes,
        s.blob_live_bytes
    );
    check_all(&db, n, |_| 2);
    // A transaction larger than one log record (64 KiB segments): written in parts, its
    // values copied when flushed live; after a reopen that replays it, the commit record's
    // own values may be pointed at. Either way every value reads back, checked.
    let big_txn = |round: u32| {
        let mut t = db.begin(silt::TxnOptions::default());
        for i in 0..40 {
            t.put(&key(i), &value(i, round)).unwrap();
        }
        t.commit().unwrap();
    };
    big_txn(3);
    db.flush().unwrap();
    check_all(&db, n, |i| if i < 40 { 3 } else { 2 });
    big_txn(4);
    db.close().unwrap();
    let db = builder(dir.path()).paranoid_checks(true).open().unwrap();
    db.flush().unwrap();
    check_all(&db, n, |i| if i < 40 { 4 } else { 2 });
    db.close().unwrap();
    let db = builder(dir.path()).paranoid_checks(true).open().unwrap();
    check_all(&db, n, |i| if i < 40 { 4 } else { 2 });
}

/// The log goes on appending to a linked segment past its span: the next backup must find
/// its copy already stored (the bytes past the span are taken as zeros, so the copy does
/// not change, and a backup racing the appends cannot see it "change"), and a restore
/// reads every value.
#[test]
fn backups_of_a_log_blob_the_log_still_appends_to() {
    let dir = tempfile::tempdir().unwrap();
    let n = 400; // about 14 segments of values: the flush links the one the log is in
    let db = builder(&dir.path().join("db")).open().unwrap();
    for i in 0..n {
        db.put(&key(i), &value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    let logs = blob_files(&dir.path().join("db")).0.len() as u64;
    assert!(logs > 0);
    let store = silt::BackupStore::open(dir.path().join("store")).unwrap();
    let b1 = store.create(&db).unwrap();
    assert!(b1.new_files > logs);
    // Small writes, no flush: they land past the newest span, in its segment.
    for i in 0..40u32 {
        db.put(format!("small{i:04}").as_bytes(), &[b's'; 100])
            .unwrap();
    }
    store.create(&db).unwrap();
    // Each blob file is in the store once: none was stored again under a new checksum.
    let (logs_now, copies) = blob_files(&dir.path().join("db"));
    let stored: Vec<String> = std::fs::read_dir(dir.path().join("store/files"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".blob"))
        .collect();
    assert_eq!(
        stored.len(),
        logs_now.len() + copies.len(),
        "a blob file stored twice: {stored:?}"
    );
    drop(db);
    store.verify(1).unwrap();
    store.restore(1, dir.path().join("r1")).unwrap();
    let r = builder(&dir.path().join("r1"))
        .paranoid_checks(true)
        .open()
        .unwrap();
    for i in 0..n {
        assert!(r.get(&key(i)).unwrap() == Some(value(i, 0)), "key {i}");
    }
}
