//! A purge makes a request to prepare a segment stale. The background preparer takes a
//! request (make segment k), and before it creates the file the writers make k themselves,
//! fill it and the segments after it, and a purge removes k and k + 1. Created now, k
//! would be an orphan below the log, with k + 1 missing after it: a power loss then leaves
//! a log that recovery refuses to open ("a segment in the middle of the log is missing").
//! What `silt-stress power-loss` found on 2026-11-27: a directory of segments 168 and 170,
//! after 168 was purged with 169 and made again. The kill points' test hook holds the
//! preparer at that moment every time. The hook is process-wide, so this binary holds this
//! one test.

#![cfg(feature = "kill-points")]

mod common;

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use common::read_all;
use silt_vfs::{CrashMode, FileSystem, SimFs};
use silt_wal::{Options, SyncMode, Wal};

const DIR: &str = "/log";
const POINT: &str = "log: preparer took a request, before creating";
const SEG: u64 = 64 << 10;
const REC: usize = 1000;

fn segment_ids(fs: &dyn FileSystem) -> Vec<u64> {
    common::segment_ids(fs, DIR)
}

#[test]
fn a_segment_requested_before_a_purge_passed_it_is_not_created() {
    let sim = SimFs::new();
    let fs: Arc<dyn FileSystem> = sim.clone();
    let opts = Options::default()
        .sync(SyncMode::Full)
        .segment_bytes(SEG)
        .fs(fs.clone());
    // The preparer's first request is held until the test lets it go.
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let release_rx = Mutex::new(release_rx);
    let held = Arc::new(AtomicBool::new(false));
    {
        let held = held.clone();
        silt_wal::kill_point::set_hook(Some(Arc::new(move |name: &'static str| {
            if name == POINT && !held.swap(true, SeqCst) {
                let _ = release_rx
                    .lock()
                    .unwrap()
                    .recv_timeout(Duration::from_secs(60));
            }
        })));
    }
    let wal = Wal::open(DIR, opts.clone()).unwrap();
    let record = |i: u32| {
        let mut p = i.to_le_bytes().to_vec();
        p.resize(REC, i as u8);
        p
    };
    // Past the first quarter of segment 0: the preparer is asked for segment 1, and held.
    let mut n = 0;
    while wal.reserved_lsn() < SEG / 4 + REC as u64 {
        wal.append(&record(n)).unwrap();
        n += 1;
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while !held.load(SeqCst) {
        assert!(Instant::now() < deadline, "the preparer was never asked");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(segment_ids(&*fs), vec![0], "segment 1 is held back");
    // The writers go on through segments 1, 2 and 3 (making them themselves), and a purge
    // removes 0, 1 and 2.
    while wal.reserved_lsn() < 3 * SEG + SEG / 8 {
        wal.append(&record(n)).unwrap();
        n += 1;
    }
    assert_eq!(segment_ids(&*fs), vec![0, 1, 2, 3]);
    wal.purge_up_to(3 * SEG).unwrap();
    assert_eq!(segment_ids(&*fs), vec![3]);
    // The preparer goes on with its stale request. Then it is asked for segment 4: once
    // that exists, the stale request was handled (one thread, in order).
    release_tx.send(()).unwrap();
    while wal.reserved_lsn() < 3 * SEG + SEG / 2 {
        wal.append(&record(n)).unwrap();
        n += 1;
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while !segment_ids(&*fs).contains(&4) {
        assert!(Instant::now() < deadline, "segment 4 was never prepared");
        std::thread::sleep(Duration::from_millis(1));
    }
    silt_wal::kill_point::set_hook(None);
    assert_eq!(segment_ids(&*fs), vec![3, 4], "segment 1 was made again");

    // A power loss: the log opens, and every synced record from the purge on comes back.
    let image = sim.crash(CrashMode::DropAll, 3);
    let kept = read_all(&wal);
    drop(wal);
    let reopened = Wal::open(DIR, opts.fs(image)).unwrap();
    let got = read_all(&reopened);
    assert_eq!(got.len(), kept.len());
    assert_eq!(got.last().map(|r| r.lsn), kept.last().map(|r| r.lsn));
}
