//! Segments are created in id order. A writer whose record lies in segment k + 2 may write
//! before any writer of segment k + 1 has (reservations are lock-free, and the background
//! preparer may be behind): it then creates k + 1 first, so the directory never shows a gap
//! in segment ids, which recovery refuses ("a segment in the middle of the log is missing").
//! Before, a power loss in that moment left a log that would not open (what `silt-stress
//! power-loss` found once, 2026-11-27, session 36).

use std::sync::Arc;
use std::time::{Duration, Instant};

use silt_vfs::{CrashMode, FileSystem, SimFs};
use silt_wal::{AppendOptions, Options, SyncMode, Wal};

const DIR: &str = "/log";
const SEG: u64 = 64 << 10;

fn segment_ids(fs: &dyn FileSystem) -> Vec<u64> {
    let mut ids: Vec<u64> = fs
        .list(DIR.as_ref())
        .unwrap()
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "wal"))
        .map(|p| p.file_stem().unwrap().to_str().unwrap().parse().unwrap())
        .collect();
    ids.sort();
    ids
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
