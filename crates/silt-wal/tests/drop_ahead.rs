//! A quiet purge drops the segments prepared ahead of the current one, unless a writer has
//! reserved past it. A writer that reserves just after that check must not write into a
//! segment being dropped: its synced record would be lost to a power loss (what
//! `silt-stress power-loss` once found, fixed in `Segments::drop_ahead`). The kill points'
//! test hook (`kill_point::set_hook`) holds the purge right after its check while the
//! writer appends, so the interleaving happens every time. The hook is process-wide, so
//! this binary holds this one test.

#![cfg(feature = "kill-points")]

mod common;

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use common::read_all;
use silt_vfs::{CrashMode, FileSystem, SimFs};
use silt_wal::{AppendOptions, Options, SyncMode, Wal};

const DIR: &str = "/log";
const POINT: &str = "log: quiet purge checked, before dropping the segments ahead";
const SEG: u64 = 64 << 10;

#[test]
fn a_record_reserved_during_a_quiet_purge_survives_a_power_loss() {
    let sim = SimFs::new();
    let fs: Arc<dyn FileSystem> = sim.clone();
    let opts = Options::default()
        .sync(SyncMode::None)
        .segment_bytes(SEG)
        .fs(fs.clone());
    let wal = Arc::new(Wal::open(DIR, opts.clone()).unwrap());
    // Past the first quarter of segment 0, so segment 1 is prepared ahead.
    for _ in 0..40 {
        wal.append(&[1u8; 1000]).unwrap();
    }
    wal.sync().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let segments = || {
        fs.list(DIR.as_ref())
            .unwrap()
            .iter()
            .filter(|p| p.extension().is_some_and(|e| e == "wal"))
            .count()
    };
    while segments() < 2 {
        assert!(Instant::now() < deadline, "segment 1 was never prepared");
        std::thread::sleep(Duration::from_millis(1));
    }

    // At the purge's point: a writer appends a synced record that lands in segment 1.
    // Given a moment, it either finishes (it found the doomed segment's handle) or waits
    // for the purge (the fix); either way the purge then goes on.
    let fired = Arc::new(AtomicBool::new(false));
    let writer: Arc<Mutex<Option<std::thread::JoinHandle<u64>>>> = Default::default();
    let hook = {
        let (wal, fired, writer) = (wal.clone(), fired.clone(), writer.clone());
        move |name: &'static str| {
            if name != POINT || fired.swap(true, SeqCst) {
                return;
            }
            let (done_tx, done_rx) = mpsc::channel();
            let w = wal.clone();
            *writer.lock().unwrap() = Some(std::thread::spawn(move || {
                let lsn = w
                    .append_with(&[2u8; 30_000], AppendOptions { sync: Some(true) })
                    .unwrap();
                let _ = done_tx.send(());
                lsn
            }));
            // The writer has reserved past segment 0 (so the window is open) before it is
            // given its moment: without the fix it then finds the doomed segment's handle.
            let deadline = Instant::now() + Duration::from_secs(30);
            while wal.reserved_lsn() <= SEG {
                assert!(Instant::now() < deadline, "the writer never reserved");
                std::thread::yield_now();
            }
            let _ = done_rx.recv_timeout(Duration::from_millis(300));
        }
    };
    silt_wal::kill_point::set_hook(Some(Arc::new(hook)));
    wal.purge_up_to(wal.reserved_lsn()).unwrap();
    silt_wal::kill_point::set_hook(None);
    assert!(
        fired.load(SeqCst),
        "the purge was quiet and reached its point"
    );
    let lsn = writer
        .lock()
        .unwrap()
        .take()
        .expect("the writer ran")
        .join()
        .unwrap();
    assert!(
        lsn + 30_000 > SEG,
        "the record reaches segment 1 (LSN {lsn})"
    );

    // A power loss: only what was synced survives, the acknowledged synced record with it.
    let crashed = sim.crash(CrashMode::DropAll, 7);
    drop(Arc::into_inner(wal).expect("no other handle").close());
    let wal = Wal::open(DIR, opts.fs(crashed)).unwrap();
    let got = read_all(&wal);
    assert_eq!(got.len(), 41, "the 40 records and the writer's");
    let last = got.last().unwrap();
    assert_eq!(last.lsn, lsn);
    assert_eq!(last.payload, vec![2u8; 30_000]);
}
