//! fsync failure is final: inject EIO at every `fdatasync` index of a workload (foreground
//! commits, segment preallocation, background interval syncs). The failing commit errors,
//! every later append gets `Poisoned`, no further `fdatasync` is issued, and reopening
//! recovers the durable prefix with every commit acknowledged before the failure.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use silt_vfs::{FailOp, FileSystem, SimFs};
use silt_wal::{Error, Options, Strategy, SyncMode, Wal};

const DIR: &str = "/log";
const N: u64 = 120;

fn opts(sim: &Arc<SimFs>, strategy: Strategy) -> Options {
    Options::default()
        .sync(SyncMode::Full)
        .strategy(strategy)
        .segment_bytes(64 << 10)
        .fs(sim.clone() as Arc<dyn FileSystem>)
}

/// The number of `fdatasync` calls the workload makes when nothing fails.
fn baseline_syncs(strategy: Strategy) -> u64 {
    let sim = SimFs::new();
    let wal = Wal::open(DIR, opts(&sim, strategy)).unwrap();
    let before = sim.sync_count();
    for i in 0..N {
        wal.append(&payload(0, i)).unwrap();
    }
    drop(wal);
    sim.sync_count() - before
}

#[test]
fn every_fdatasync_index_fails_once_for_every_strategy() {
    let mut cases = 0;
    for strategy in strategies() {
        let total = baseline_syncs(strategy);
        assert!(total >= N / 8, "{strategy:?}: only {total} syncs");
        for k in 1..=total {
            let sim = SimFs::new();
            let wal = Wal::open(DIR, opts(&sim, strategy)).unwrap();
            let base = sim.sync_count();
            sim.fail_nth(FailOp::Sync, k, false);
            let mut acked = Vec::new();
            let mut failed_at = None;
            for i in 0..N {
                match wal.append(&payload(0, i)) {
                    Ok(lsn) => {
                        assert!(
                            failed_at.is_none(),
                            "{strategy:?} k={k}: append {i} succeeded after a failed sync"
                        );
                        acked.push((lsn, i));
                    }
                    // The first error is the failed sync's `Io`, or `Poisoned` when the
                    // failure hit a background thread (segment preallocation).
                    Err(Error::Io { .. } | Error::Poisoned) if failed_at.is_none() => {
                        failed_at = Some((i, sim.sync_count()));
                    }
                    Err(Error::Poisoned) => {}
                    Err(e) => panic!("{strategy:?} k={k}: append {i}: unexpected {e}"),
                }
            }
            if failed_at.is_none() {
                // The k-th fdatasync may be the background preparation of the next
                // segment, asked for once appends pass a quarter of one, which can run
                // after the last append: wait for it; the log must then refuse the next
                // append. (If this run never reaches a k-th sync, as the baseline's last
                // preparation may not happen at all here, there is nothing to check.)
                let t = std::time::Instant::now();
                while sim.sync_count() < base + k && t.elapsed() < Duration::from_secs(2) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                if sim.sync_count() < base + k {
                    continue;
                }
                // The count moves when the preparer's sync is called; the log poisons
                // itself once that call has returned its error. Wait for that too (an
                // append in between is ordered before the failure, and is no violation).
                while wal.poison_cause().is_none() && t.elapsed() < Duration::from_secs(2) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                match wal.append(b"after the failure") {
                    Err(Error::Poisoned) => failed_at = Some((N, sim.sync_count())),
                    other => panic!(
                        "{strategy:?} k={k}: the injected failure never surfaced ({:?})",
                        other.map(|_| ())
                    ),
                }
            }
            let (_, syncs_at_failure) = failed_at.expect("set above");
            assert_eq!(
                sim.sync_count(),
                syncs_at_failure,
                "{strategy:?} k={k}: fdatasync issued after the failure"
            );
            assert!(matches!(wal.sync(), Err(Error::Poisoned)));
            assert!(matches!(wal.append(b"x"), Err(Error::Poisoned)));
            drop(wal);
            sim.clear_faults();
            let wal = Wal::open(DIR, opts(&sim, strategy)).unwrap();
            let got = read_all(&wal);
            assert!(
                got.len() >= acked.len(),
                "{strategy:?} k={k}: acknowledged commits lost"
            );
            for (r, (lsn, i)) in got.iter().zip(&acked) {
                assert_eq!(r.lsn, *lsn);
                assert_eq!(r.payload, payload(0, *i));
            }
            // The reopened log works again.
            wal.append(b"after reopen").unwrap();
            cases += 1;
        }
    }
    eprintln!("fsync error injection: {cases} failure positions, all passed");
}

#[test]
fn a_persistently_failing_disk_poisons_many_threads() {
    let sim = SimFs::new();
    let wal = Arc::new(Wal::open(DIR, opts(&sim, Strategy::Pipelined)).unwrap());
    sim.fail_nth(FailOp::Sync, 30, true);
    let threads: Vec<_> = (0..6u64)
        .map(|t| {
            let wal = wal.clone();
            std::thread::spawn(move || {
                let mut poisoned = 0;
                for i in 0..200 {
                    match wal.append(&payload(t, i)) {
                        Ok(_) => {}
                        Err(Error::Poisoned) => poisoned += 1,
                        Err(Error::Io { .. }) => {}
                        Err(e) => panic!("unexpected {e}"),
                    }
                }
                poisoned
            })
        })
        .collect();
    let poisoned: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(poisoned > 0);
    let syncs = sim.sync_count();
    assert!(matches!(wal.sync(), Err(Error::Poisoned)));
    assert_eq!(sim.sync_count(), syncs);
}

#[test]
fn a_failed_background_interval_sync_poisons_the_log() {
    let sim = SimFs::new();
    let opts = Options::default()
        .sync(SyncMode::Interval(Duration::from_millis(1)))
        .segment_bytes(64 << 10)
        .fs(sim.clone() as Arc<dyn FileSystem>);
    let wal = Wal::open(DIR, opts.clone()).unwrap();
    sim.fail_nth(FailOp::Sync, 1, false);
    let mut outcome = None;
    for i in 0..100_000u64 {
        match wal.append(&payload(3, i)) {
            Ok(_) => std::thread::sleep(Duration::from_micros(50)),
            Err(e) => {
                outcome = Some(e);
                break;
            }
        }
    }
    assert!(matches!(outcome, Some(Error::Poisoned)), "{outcome:?}");
    let syncs = sim.sync_count();
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(sim.sync_count(), syncs, "the interval thread kept syncing");
    drop(wal);
    sim.clear_faults();
    Wal::open(DIR, opts).unwrap();
}

#[test]
fn a_failed_write_poisons_too() {
    let sim = SimFs::new();
    let wal = Wal::open(DIR, opts(&sim, Strategy::DirectPwrite)).unwrap();
    wal.append(b"first").unwrap();
    sim.fail_nth(FailOp::Write, 1, false);
    assert!(matches!(wal.append(b"second"), Err(Error::Io { .. })));
    assert!(matches!(wal.append(b"third"), Err(Error::Poisoned)));
    drop(wal);
    sim.clear_faults();
    let wal = Wal::open(DIR, opts(&sim, Strategy::DirectPwrite)).unwrap();
    let got = read_all(&wal);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].payload, b"first");
}
