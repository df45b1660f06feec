//! Two-step appends (`Wal::reserve`): a written reservation reads back like an append, an
//! abandoned or dropped one leaves a Void record that readers and recovery skip, a later
//! record is not acknowledged before an earlier reservation is finished, and all of it holds
//! across segments, threads, reopen and a power loss.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use silt_vfs::{CrashMode, SimFs};
use silt_wal::{AppendOptions, Error, Options, SyncMode, Wal};

#[test]
fn written_reservations_read_back_and_abandoned_ones_leave_nothing() {
    for sync in modes() {
        let dir = tempfile::tempdir().unwrap();
        let opts = small(Options::default().sync(sync));
        let mut kept = Vec::new();
        {
            let wal = Wal::open(dir.path(), opts.clone()).unwrap();
            for i in 0..900u64 {
                let p = payload(2, i);
                let r = wal.reserve(p.len(), AppendOptions::default()).unwrap();
                let lsn = r.lsn();
                match i % 3 {
                    0 => {
                        let a = r.write(&p).unwrap();
                        assert_eq!(a.lsn(), lsn);
                        a.wait().unwrap();
                        kept.push((lsn, p));
                    }
                    1 => r.abandon().unwrap(),
                    _ => drop(r),
                }
            }
            // Appends after abandoned places are acknowledged (the watermark moved on).
            let lsn = wal.append(b"plain").unwrap();
            kept.push((lsn, b"plain".to_vec()));
            let got = read_all(&wal);
            assert_eq!(got.len(), kept.len(), "{sync:?}");
            wal.close().unwrap();
        }
        let wal = Wal::open(dir.path(), opts).unwrap();
        assert_eq!(wal.recovery().truncated, None, "{sync:?}");
        assert_eq!(wal.recovery().records as usize, kept.len());
        let got = read_all(&wal);
        assert_eq!(got.len(), kept.len());
        for (r, (lsn, p)) in got.iter().zip(&kept) {
            assert_eq!(r.lsn, *lsn);
            assert_eq!(&r.payload, p);
        }
        // 900 places of ~215 bytes on average cross two 64 KiB segment boundaries.
        assert!(kept.last().unwrap().0 > 2 * (64 << 10));
    }
}

#[test]
fn wrong_length_is_refused_and_the_place_abandoned() {
    let dir = tempfile::tempdir().unwrap();
    let wal = Wal::open(dir.path(), small(Options::default())).unwrap();
    let r = wal.reserve(10, AppendOptions::default()).unwrap();
    assert!(matches!(r.write(b"short"), Err(Error::InvalidArgument(_))));
    let lsn = wal.append(b"next").unwrap();
    let got = read_all(&wal);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].lsn, lsn);
    assert!(matches!(
        wal.reserve(wal.max_payload_bytes() + 1, AppendOptions::default()),
        Err(Error::InvalidArgument(_))
    ));
}

/// A record reserved after an unfinished reservation is written but not acknowledged until
/// the earlier one is finished: the prefix rule holds for reservations as for appends.
#[test]
fn a_later_record_waits_for_an_earlier_reservation() {
    let dir = tempfile::tempdir().unwrap();
    let wal =
        Arc::new(Wal::open(dir.path(), small(Options::default().sync(SyncMode::None))).unwrap());
    let r = wal.reserve(100, AppendOptions::default()).unwrap();
    let acked = Arc::new(AtomicBool::new(false));
    let t = {
        let (wal, acked) = (wal.clone(), acked.clone());
        std::thread::spawn(move || {
            let lsn = wal.append(b"behind the reservation").unwrap();
            acked.store(true, Ordering::SeqCst);
            lsn
        })
    };
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        !acked.load(Ordering::SeqCst),
        "acknowledged past an unfinished reservation"
    );
    let first = r.lsn();
    r.write(&[7u8; 100]).unwrap().wait().unwrap();
    let second = t.join().unwrap();
    assert!(second > first);
    let got = read_all(&wal);
    assert_eq!(
        got.iter().map(|r| r.lsn).collect::<Vec<_>>(),
        vec![first, second]
    );
}

/// Threads mixing appends, written and abandoned reservations: after a reopen exactly the
/// written records are there, in LSN order.
#[test]
fn concurrent_reservations_and_appends_recover_exactly_the_written_records() {
    let dir = tempfile::tempdir().unwrap();
    let opts = small(Options::default().sync(SyncMode::Full));
    let written = Arc::new(Mutex::new(Vec::new()));
    {
        let wal = Arc::new(Wal::open(dir.path(), opts.clone()).unwrap());
        let threads: Vec<_> = (0..4u64)
            .map(|w| {
                let (wal, written) = (wal.clone(), written.clone());
                std::thread::spawn(move || {
                    for i in 0..300u64 {
                        let p = payload(w, i);
                        match (w + i) % 4 {
                            0 => {
                                let lsn = wal.append(&p).unwrap();
                                written.lock().unwrap().push((lsn, p));
                            }
                            1 => wal
                                .reserve(p.len(), AppendOptions::default())
                                .unwrap()
                                .abandon()
                                .unwrap(),
                            _ => {
                                let r = wal.reserve(p.len(), AppendOptions::default()).unwrap();
                                let lsn = r.lsn();
                                r.write(&p).unwrap().wait().unwrap();
                                written.lock().unwrap().push((lsn, p));
                            }
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        Arc::try_unwrap(wal).ok().unwrap().close().unwrap();
    }
    let mut expect = written.lock().unwrap().clone();
    expect.sort();
    let wal = Wal::open(dir.path(), opts).unwrap();
    let got: Vec<_> = read_all(&wal)
        .into_iter()
        .map(|r| (r.lsn, r.payload))
        .collect();
    assert_eq!(got, expect);
}

/// A power loss keeps Void records as it keeps any other: recovery walks past them, and a
/// durable record after a Void record survives.
#[test]
fn void_records_survive_power_loss_and_recovery() {
    let fs = SimFs::new();
    let opts = small(Options::default().sync(SyncMode::Full)).fs(fs.clone());
    let mut durable = Vec::new();
    {
        let wal = Wal::open("/wal", opts.clone()).unwrap();
        for i in 0..200u64 {
            let p = payload(5, i);
            if i % 2 == 0 {
                wal.reserve(p.len(), AppendOptions::default())
                    .unwrap()
                    .abandon()
                    .unwrap();
            } else {
                durable.push((wal.append(&p).unwrap(), p));
            }
        }
    }
    let crashed = fs.crash(CrashMode::DropAll, 1);
    let wal = Wal::open("/wal", opts.fs(crashed)).unwrap();
    let got: Vec<_> = read_all(&wal)
        .into_iter()
        .map(|r| (r.lsn, r.payload))
        .collect();
    assert_eq!(got, durable);
}
