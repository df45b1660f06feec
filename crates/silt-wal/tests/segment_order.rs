//! Segments are created in id order. A writer whose record lies in segment k + 2 may write
//! before any writer of segment k + 1 has (reservations are lock-free, and the background
//! preparer may be behind): it then creates k + 1 first, so the directory never shows a gap
//! in segment ids, which recovery refuses ("a segment in the middle of the log is missing").
//! Before, a power loss in that moment left a log that would not open (what `silt-stress
//! power-loss` found once, 2026-11-27, session 36).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use silt_vfs::{CrashMode, FileSystem, SimFs};
use silt_wal::{AppendOptions, Options, SyncMode, Wal};

const DIR: &str = "/log";
const SEG: u64 = 64 << 10;

fn segment_ids(fs: &dyn FileSystem) -> Vec<u64> {
    common::segment_ids(fs, DIR)
}

#[test]
fn a_writer_two_segments_ahead_creates_the_one_between_first() {
    let sim = SimFs::new();
    let fs: Arc<dyn FileSystem> = sim.clone();
    let opts = Options::default()
        .sync(SyncMode::Full)
        .segment_bytes(SEG)
        .fs(fs.clone());
    let wal = Arc::new(Wal::open(DIR, opts.clone()).unwrap());
    // Three records of a whole segment each: segments 0, 1 and 2.
    let big = wal.max_payload_bytes();
    let r0 = wal.reserve(big, AppendOptions::default()).unwrap();
    let r1 = wal.reserve(big, AppendOptions::default()).unwrap();
    assert_eq!(r1.lsn() / SEG, 1);
    let third = {
        let wal = wal.clone();
        std::thread::spawn(move || {
            let r2 = wal.reserve(big, AppendOptions::default()).unwrap();
            assert_eq!(r2.lsn() / SEG, 2);
            // Publishing waits for the records before it; the write itself goes first.
            r2.write(&vec![2u8; big]).unwrap().lsn()
        })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !segment_ids(&*fs).contains(&2) {
        assert!(Instant::now() < deadline, "segment 2 was never created");
        std::thread::sleep(Duration::from_millis(1));
    }
    // No gap, at any moment a power loss could take.
    assert_eq!(segment_ids(&*fs), vec![0, 1, 2]);
    let image = sim.crash(CrashMode::DropAll, 1);
    let reopened = Wal::open(DIR, opts.clone().fs(image)).unwrap();
    drop(reopened);
    let a0 = r0.write(&vec![0u8; big]).unwrap();
    let a1 = r1.write(&vec![1u8; big]).unwrap();
    a0.wait().unwrap();
    a1.wait().unwrap();
    assert_eq!(third.join().unwrap() / SEG, 2);
}

/// A purge leaves the log a segment. When the last record ends exactly at a segment's end,
/// the next segment does not exist yet; a purge of everything up to there used to remove
/// every segment, and a power loss before the next was made left an empty directory, from
/// which the log started again at LSN 0 (a database then refuses to open: its tables are
/// ahead of its log).
#[test]
fn a_purge_up_to_a_segment_boundary_keeps_the_last_segment() {
    let sim = SimFs::new();
    let fs: Arc<dyn FileSystem> = sim.clone();
    let opts = Options::default()
        .sync(SyncMode::Full)
        .segment_bytes(SEG)
        .fs(fs.clone());
    let wal = Wal::open(DIR, opts.clone()).unwrap();
    // One record of a whole segment: it ends exactly where segment 1 would start.
    let big = wal.max_payload_bytes();
    wal.append(&vec![7u8; big]).unwrap();
    let end = wal.reserved_lsn();
    assert_eq!(end, SEG, "the record fills segment 0");
    assert_eq!(segment_ids(&*fs), vec![0]);
    wal.purge_up_to(end).unwrap();
    assert_eq!(segment_ids(&*fs), vec![0], "the log's only segment stays");
    let image = sim.crash(CrashMode::DropAll, 1);
    drop(wal);
    let reopened = Wal::open(DIR, opts.fs(image)).unwrap();
    assert!(
        reopened.reserved_lsn() >= end,
        "the log goes on where it ended, not at LSN {}",
        reopened.reserved_lsn()
    );
    let lsn = reopened.append(b"next").unwrap();
    assert!(lsn >= end);
}
