//! Simulated power loss on `SimFs`: thousands of seeded crash images across sync modes,
//! strategies and crash modes. After every crash the reopened log must hold a prefix of
//! what was appended, byte for byte, including every commit known to be durable; and the
//! harness must be shown to drop unsynced data, so it cannot pass vacuously.
//! Seeds: `SILT_POWER_LOSS_SEEDS` (default 3000). A failing seed is printed.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use rand::{Rng, SeedableRng};
use silt_vfs::{CrashMode, FileSystem, SimFs};
use silt_wal::{AppendOptions, Options, Strategy, SyncMode, Wal};

const DIR: &str = "/log";

fn crash_modes() -> [CrashMode; 5] {
    [
        CrashMode::DropAll,
        CrashMode::KeepAll,
        CrashMode::Prefix,
        CrashMode::Sectors,
        CrashMode::Tear,
    ]
}

struct Outcome {
    appended: usize,
    recovered: usize,
}

/// One seeded run: a workload, a crash at a random moment, a reopen and the checks.
fn run(seed: u64) -> Outcome {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let sync = match rng.random_range(0..3) {
        0 => SyncMode::None,
        1 => SyncMode::Interval(Duration::from_micros(rng.random_range(50..500))),
        _ => SyncMode::Full,
    };
    let strategy = match rng.random_range(0..4) {
        0 => Strategy::DirectPwrite,
        1 => Strategy::TimedGroups {
            max_entries: rng.random_range(1..6),
            max_wait: Duration::from_micros(50),
        },
        _ => Strategy::Pipelined,
    };
    let crash_mode = crash_modes()[rng.random_range(0..5)];
    let sim = SimFs::new();
    let fs: Arc<dyn FileSystem> = sim.clone();
    let opts = Options::default()
        .sync(sync)
        .strategy(strategy)
        .segment_bytes(64 << 10)
        .fs(fs);
    let ctx = format!("seed {seed} ({sync:?}, {strategy:?}, {crash_mode:?})");

    let wal = Wal::open(DIR, opts.clone()).unwrap();
    let n = rng.random_range(1..400);
    let mut appended: Vec<(u64, Vec<u8>)> = Vec::new();
    // Everything below this LSN was durable at some point before the crash image.
    let mut durable_floor = 0;
    for i in 0..n {
        let p = payload(seed, i);
        let want_sync = rng.random_ratio(1, 50);
        let opts = AppendOptions {
            sync: want_sync.then_some(true),
        };
        // Under Pipelined, one append in five goes through a reservation, and half of those
        // are abandoned: their Void records must be skipped, and never end a prefix.
        let lsn = if matches!(strategy, Strategy::Pipelined) && rng.random_ratio(1, 5) {
            let r = wal.reserve(p.len(), opts).unwrap();
            if rng.random_ratio(1, 2) {
                r.abandon().unwrap();
                continue;
            }
            let a = r.write(&p).unwrap();
            let lsn = a.lsn();
            a.wait().unwrap();
            lsn
        } else {
            wal.append_with(&p, opts).unwrap()
        };
        appended.push((lsn, p));
        if want_sync || sync == SyncMode::Full {
            durable_floor = lsn + 1;
        }
        if rng.random_ratio(1, 100) {
            wal.sync().unwrap();
            durable_floor = lsn + 1;
        }
    }
    // The power fails now: the image is taken while the log (and its background threads)
    // are still running, as a real power loss would find them. Whatever the durable
    // watermark said before the image was taken (an interval sync may have run) must
    // survive too.
    let durable_at_crash = durable_floor.max(wal.durable_lsn());
    let crashed = sim.crash(crash_mode, seed);
    drop(wal);

    let fs2: Arc<dyn FileSystem> = crashed.clone();
    let wal = Wal::open(DIR, opts.clone().fs(fs2))
        .unwrap_or_else(|e| panic!("{ctx}: reopen after crash failed: {e}"));
    let got = read_all(&wal);
    assert!(
        got.len() <= appended.len(),
        "{ctx}: more records than appended"
    );
    for (i, r) in got.iter().enumerate() {
        assert_eq!(r.lsn, appended[i].0, "{ctx}: record {i} at the wrong LSN");
        assert_eq!(r.payload, appended[i].1, "{ctx}: record {i} differs");
    }
    let must_have = appended
        .iter()
        .filter(|(l, _)| *l < durable_at_crash)
        .count();
    assert!(
        got.len() >= must_have,
        "{ctx}: {} durable commits, only {} recovered",
        must_have,
        got.len()
    );
    if crash_mode == CrashMode::KeepAll {
        // Like a process crash: everything that reached the OS survives.
        assert_eq!(got.len(), appended.len(), "{ctx}: KeepAll lost data");
    }
    // The recovered log takes new appends and keeps them.
    let more = wal.append(b"after the crash").unwrap();
    wal.sync().unwrap();
    drop(wal);
    let wal = Wal::open(DIR, opts.fs(crashed)).unwrap();
    let again = read_all(&wal);
    assert_eq!(
        again.len(),
        got.len() + 1,
        "{ctx}: append after recovery lost"
    );
    assert_eq!(again.last().unwrap().lsn, more);
    Outcome {
        appended: appended.len(),
        recovered: got.len(),
    }
}

#[test]
fn seeded_crash_images_recover_a_prefix_with_every_durable_commit() {
    let seeds: u64 = std::env::var("SILT_POWER_LOSS_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000);
    let (mut lost_some, mut appended, mut recovered) = (0, 0, 0);
    for seed in 0..seeds {
        let o = run(seed);
        appended += o.appended;
        recovered += o.recovered;
        if o.recovered < o.appended {
            lost_some += 1;
        }
    }
    eprintln!(
        "power loss: {seeds} crash images, {appended} commits appended, {recovered} recovered, \
         {lost_some} images lost unsynced commits, 0 durable commits lost"
    );
    // The harness really drops unsynced data.
    assert!(
        lost_some > seeds / 10,
        "only {lost_some} crash images lost anything"
    );
}

#[test]
fn unsynced_data_is_dropped_and_synced_data_survives() {
    // LevelDB's fault-injection check: values before a sync survive, values after it are
    // gone — proof that the harness is not vacuous.
    let sim = SimFs::new();
    let opts = Options::default()
        .sync(SyncMode::None)
        .segment_bytes(64 << 10)
        .fs(sim.clone());
    let wal = Wal::open(DIR, opts.clone()).unwrap();
    for i in 0..50 {
        wal.append(&payload(1, i)).unwrap();
    }
    wal.sync().unwrap();
    for i in 50..100 {
        wal.append(&payload(1, i)).unwrap();
    }
    assert!(sim.unsynced_bytes() > 0, "the unsynced appends are pending");
    let crashed = sim.crash(CrashMode::DropAll, 0);
    drop(wal);
    let wal = Wal::open(DIR, opts.clone().fs(crashed)).unwrap();
    let got = read_all(&wal);
    assert_eq!(got.len(), 50, "exactly the synced prefix survives");
    for (i, r) in got.iter().enumerate() {
        assert_eq!(r.payload, payload(1, i as u64));
    }
    // And a process crash (the OS survives) keeps all of it.
    let wal2 = Wal::open(DIR, opts.clone().fs(sim.clone())).unwrap();
    assert_eq!(read_all(&wal2).len(), 100);
}

#[test]
fn concurrent_writers_then_power_loss() {
    for seed in 0..40u64 {
        let sim = SimFs::new();
        let mode = [SyncMode::None, SyncMode::Full][seed as usize % 2];
        let opts = Options::default()
            .sync(mode)
            .segment_bytes(64 << 10)
            .fs(sim.clone());
        let wal = Arc::new(Wal::open(DIR, opts.clone()).unwrap());
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let wal = wal.clone();
                std::thread::spawn(move || {
                    (0..60u64)
                        .map(|i| (wal.append(&payload(t, i)).unwrap(), t, i))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut acked: Vec<_> = threads
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        acked.sort();
        let crashed = sim.crash(CrashMode::Sectors, seed);
        drop(wal);
        let wal = Wal::open(DIR, opts.fs(crashed)).unwrap();
        let got = read_all(&wal);
        if mode == SyncMode::Full {
            assert_eq!(got.len(), acked.len(), "seed {seed}: durable commits lost");
        }
        for (r, (lsn, t, i)) in got.iter().zip(&acked) {
            assert_eq!(r.lsn, *lsn, "seed {seed}: not a prefix");
            assert_eq!(r.payload, payload(*t, *i));
        }
    }
}
