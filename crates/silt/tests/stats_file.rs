//! The `STATS` file (`docs/format/stats.md`): a writable handle rewrites it every
//! `stats_dump_period` with its live counters, another process reads it through
//! `silt::inspect::live_stats`, close removes it; a read-only handle and a handle with
//! dumps off write none; a damaged file is `Corruption`; a stale one does not stop open.

use std::path::Path;
use std::time::{Duration, Instant};

use silt::{Db, Error};

/// Waits (up to 20 s) for a `STATS` file whose `user_bytes` reaches `at_least`.
fn wait_for_dump(dir: &Path, at_least: u64) -> silt::StatsFile {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(f) = silt::inspect::live_stats(dir).unwrap() {
            if f.get("user_bytes").unwrap().parse::<u64>().unwrap() >= at_least {
                return f;
            }
        }
        assert!(Instant::now() < deadline, "no STATS dump within 20 s");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_writable_handle_dumps_its_counters_and_close_removes_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::builder(dir.path())
        .stats_dump_period(Some(Duration::from_millis(20)))
        .open()
        .unwrap();
    for i in 0..100u32 {
        db.put(format!("k{i:03}").as_bytes(), b"value").unwrap();
    }
    let want = db.stats().user_bytes;
    assert!(want > 0);
    let f = wait_for_dump(dir.path(), want);
    assert_eq!(f.pid, std::process::id());
    assert_eq!(f.period_ms, 20);
    assert_eq!(f.writer_running(), Some(true));
    // Every counter of `Stats`, in its order.
    let names: Vec<&str> = f.counters.iter().map(|(n, _)| n.as_str()).collect();
    let expected: Vec<String> = db.stats().counters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, expected);
    assert!(names.contains(&"level.6.bytes") && names.contains(&"write_amp"));
    // It follows the handle: a flush shows up in a later dump.
    db.flush().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let f = silt::inspect::live_stats(dir.path()).unwrap().unwrap();
        if f.get("flushes") != Some("0") {
            assert_ne!(f.get("level.0.tables"), Some("0"));
            break;
        }
        assert!(Instant::now() < deadline, "the flush never reached STATS");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(db.stats().stats_dump_failures, 0);
    db.close().unwrap();
    assert!(silt::inspect::live_stats(dir.path()).unwrap().is_none());
    assert!(!dir.path().join("STATS").exists());
    assert!(!dir.path().join("STATS.tmp").exists());
}

#[test]
fn read_only_handles_and_handles_with_dumps_off_write_none() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::builder(dir.path())
        .stats_dump_period(None)
        .open()
        .unwrap();
    db.put(b"k", b"v").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(silt::inspect::live_stats(dir.path()).unwrap().is_none());
    db.close().unwrap();
    let ro = Db::builder(dir.path())
        .read_only(true)
        .stats_dump_period(Some(Duration::from_millis(10)))
        .open()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(silt::inspect::live_stats(dir.path()).unwrap().is_none());
    drop(ro);
}

#[test]
fn a_stale_or_damaged_file_is_reported_and_never_stops_open() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::builder(dir.path())
        .stats_dump_period(Some(Duration::from_millis(20)))
        .open()
        .unwrap();
    db.put(b"k", b"v").unwrap();
    wait_for_dump(dir.path(), 1);
    // What a crash leaves: the file, with no handle behind it.
    let stale = std::fs::read(dir.path().join("STATS")).unwrap();
    db.close().unwrap();
    std::fs::write(dir.path().join("STATS"), &stale).unwrap();
    std::fs::write(dir.path().join("STATS.tmp"), b"half a dump").unwrap();

    // Damage: one flipped byte, a cut, another version, a bad line under a good checksum.
    let path = dir.path().join("STATS");
    let mut flipped = stale.clone();
    flipped[20] ^= 1;
    let cut = stale[..stale.len() - 12].to_vec();
    let text = String::from_utf8(stale.clone()).unwrap();
    let body = &text[..text.rfind("crc32c ").unwrap()];
    let resealed = |body: &str| format!("{body}crc32c {:08x}\n", crc32c(body.as_bytes()));
    let other_version = resealed(&body.replacen("silt-stats 1", "silt-stats 2", 1));
    let bad_line = resealed(&format!("{body}no_value\n"));
    for (what, bytes) in [
        ("a flipped byte", flipped),
        ("a cut", cut),
        ("another version", other_version.into_bytes()),
        ("a bad line", bad_line.into_bytes()),
    ] {
        std::fs::write(&path, &bytes).unwrap();
        match silt::inspect::live_stats(dir.path()) {
            Err(Error::Corruption { .. }) => {}
            other => panic!("{what}: {other:?}"),
        }
    }
    // Open leaves them alone, and the next handle's dump replaces them.
    std::fs::write(&path, &stale).unwrap();
    let db = Db::builder(dir.path())
        .stats_dump_period(Some(Duration::from_millis(20)))
        .open()
        .unwrap();
    assert!(db.recovery_report().set_aside.is_empty());
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    db.put(b"k2", b"v2").unwrap();
    let want = db.stats().user_bytes;
    let f = wait_for_dump(dir.path(), want);
    assert_eq!(f.pid, std::process::id());
    assert_eq!(db.stats().stats_dump_failures, 0);
    db.close().unwrap();
}

#[test]
fn a_failed_dump_is_counted_and_fails_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    // A directory where the dump's temporary file goes: every dump fails.
    std::fs::create_dir_all(dir.path().join("STATS.tmp/blocker")).unwrap();
    let db = Db::builder(dir.path())
        .stats_dump_period(Some(Duration::from_millis(10)))
        .open()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while db.stats().stats_dump_failures < 3 {
        assert!(Instant::now() < deadline, "no failed dump counted");
        db.put(b"k", b"v").unwrap();
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(db.background_error().is_none());
    db.put(b"still", b"writable").unwrap();
    db.flush().unwrap();
    assert!(silt::inspect::live_stats(dir.path()).unwrap().is_none());
    db.close().unwrap();
}

/// CRC-32C (Castagnoli), bit by bit: the file's checksum, computed independently of the
/// engine's crate.
fn crc32c(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82f6_3b78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}
