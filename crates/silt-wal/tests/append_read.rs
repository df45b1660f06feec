//! Appends come back from `read_from` in LSN order, across segments, reopen, every strategy
//! and sync mode, and many threads.

mod common;

use std::sync::Arc;

use common::*;
use silt_wal::{AppendOptions, Error, Options, SyncMode, Wal};

#[test]
fn every_strategy_and_mode_round_trips_across_segments_and_reopen() {
    for strategy in strategies() {
        for sync in modes() {
            let dir = tempfile::tempdir().unwrap();
            let opts = small(Options::default().sync(sync).strategy(strategy));
            let mut lsns = Vec::new();
            {
                let wal = Wal::open(dir.path(), opts.clone()).unwrap();
                for i in 0..600 {
                    lsns.push(wal.append(&payload(0, i)).unwrap());
                }
                assert!(lsns.windows(2).all(|w| w[0] < w[1]));
                let got = read_all(&wal);
                assert_eq!(got.len(), 600, "{strategy:?} {sync:?}");
                wal.close().unwrap();
            }
            let wal = Wal::open(dir.path(), opts).unwrap();
            assert_eq!(wal.recovery().records, 600);
            assert_eq!(wal.recovery().truncated, None);
            let got = read_all(&wal);
            for (i, r) in got.iter().enumerate() {
                assert_eq!(r.lsn, lsns[i]);
                assert_eq!(r.payload, payload(0, i as u64));
            }
            // Appending continues after the recovered tail.
            let next = wal.append(b"after reopen").unwrap();
            assert!(next > *lsns.last().unwrap());
            assert!(wal.segment_bytes() == 64 << 10);
        }
    }
}

#[test]
fn read_from_skips_earlier_records() {
    let dir = tempfile::tempdir().unwrap();
    let wal = Wal::open(dir.path(), small(Options::default().sync(SyncMode::None))).unwrap();
    let lsns: Vec<_> = (0..1000)
        .map(|i| wal.append(&payload(1, i)).unwrap())
        .collect();
    let from = lsns[700];
    let got: Vec<_> = wal.read_from(from).unwrap().map(|r| r.unwrap()).collect();
    assert_eq!(got.len(), 300);
    assert_eq!(got[0].lsn, from);
}

#[test]
fn oversized_payload_is_invalid_argument_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let wal = Wal::open(dir.path(), small(Options::default())).unwrap();
    let too_big = vec![7u8; wal.max_payload_bytes() + 1];
    assert!(matches!(
        wal.append(&too_big),
        Err(Error::InvalidArgument(_))
    ));
    let max = vec![7u8; wal.max_payload_bytes()];
    wal.append(&max).unwrap();
    assert_eq!(read_all(&wal).len(), 1);
}

#[test]
fn a_16_mib_payload_works_with_default_segments() {
    let dir = tempfile::tempdir().unwrap();
    let wal = Wal::open(dir.path(), Options::default()).unwrap();
    let big: Vec<u8> = (0..16 << 20).map(|i: u32| (i % 251) as u8).collect();
    wal.append(b"small").unwrap();
    wal.append(&big).unwrap();
    wal.append(&big).unwrap();
    wal.append(&big).unwrap(); // crosses into the second segment
    assert!(matches!(
        wal.append(&vec![0u8; silt_wal::MAX_PAYLOAD_BYTES + 1]),
        Err(Error::InvalidArgument(_))
    ));
    drop(wal);
    let wal = Wal::open(dir.path(), Options::default()).unwrap();
    let got = read_all(&wal);
    assert_eq!(got.len(), 4);
    assert_eq!(got[3].payload, big);
}

#[test]
fn per_commit_sync_override_and_tickets() {
    let dir = tempfile::tempdir().unwrap();
    let wal = Wal::open(dir.path(), Options::default().sync(SyncMode::None)).unwrap();
    let a = wal.append(b"not synced").unwrap();
    assert!(wal.durable_lsn() <= a);
    let b = wal
        .append_with(b"synced", AppendOptions { sync: Some(true) })
        .unwrap();
    assert!(wal.durable_lsn() > b);

    let full = tempfile::tempdir().unwrap();
    let wal = Wal::open(full.path(), Options::default().sync(SyncMode::Full)).unwrap();
    let t = wal
        .append_with(b"ticket", AppendOptions { sync: Some(false) })
        .unwrap();
    assert!(wal.durable_lsn() <= t);
    wal.wait_durable(t).unwrap();
    assert!(wal.durable_lsn() > t);
    assert!(matches!(
        wal.wait_durable(t + 1_000_000),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn many_threads_every_strategy_and_mode_no_loss_no_duplicates() {
    for strategy in strategies() {
        for sync in modes() {
            let dir = tempfile::tempdir().unwrap();
            let opts = small(Options::default().sync(sync).strategy(strategy));
            let wal = Arc::new(Wal::open(dir.path(), opts.clone()).unwrap());
            let threads: Vec<_> = (0..6u64)
                .map(|t| {
                    let wal = wal.clone();
                    std::thread::spawn(move || {
                        (0..300u64)
                            .map(|i| (wal.append(&payload(t, i)).unwrap(), t, i))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            let mut acked: Vec<_> = threads
                .into_iter()
                .flat_map(|t| t.join().unwrap())
                .collect();
            acked.sort();
            drop(Arc::try_unwrap(wal).unwrap());
            let wal = Wal::open(dir.path(), opts).unwrap();
            let got = read_all(&wal);
            assert_eq!(got.len(), acked.len(), "{strategy:?} {sync:?}");
            for (r, (lsn, t, i)) in got.iter().zip(&acked) {
                assert_eq!(r.lsn, *lsn);
                assert_eq!(parse(&r.payload), (*t, *i));
                assert_eq!(r.payload, payload(*t, *i));
            }
            // Each writer's records are in its own order.
            let mut last = [None; 6];
            for r in &got {
                let (t, i) = parse(&r.payload);
                assert!(last[t as usize].is_none_or(|l| l < i));
                last[t as usize] = Some(i);
            }
        }
    }
}

#[test]
fn purge_removes_old_segments_and_reading_continues() {
    let dir = tempfile::tempdir().unwrap();
    let opts = small(Options::default().sync(SyncMode::None));
    let wal = Wal::open(dir.path(), opts.clone()).unwrap();
    let lsns: Vec<_> = (0..2000)
        .map(|i| wal.append(&payload(2, i)).unwrap())
        .collect();
    let segs_before = std::fs::read_dir(dir.path()).unwrap().count();
    let checkpoint = lsns[1500];
    let n = wal.purge_up_to(checkpoint).unwrap();
    assert!(n > 0);
    let segs_after = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension().unwrap() == "wal")
        .count();
    assert!(segs_after < segs_before);
    let got: Vec<_> = wal
        .read_from(checkpoint)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(got.len(), 500);
    wal.sync().unwrap();
    drop(wal);
    let wal = Wal::open(dir.path(), opts).unwrap();
    let got: Vec<_> = wal
        .read_from(checkpoint)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(got.len(), 500);
    assert_eq!(got[0].payload, payload(2, 1500));
    // Recycled segments are reused without their stale records being read.
    for i in 0..3000 {
        wal.append(&payload(3, i)).unwrap();
    }
    drop(wal);
    let wal = Wal::open(dir.path(), small(Options::default())).unwrap();
    let got: Vec<_> = wal
        .read_from(checkpoint)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(got.len(), 3500);
}

#[test]
fn bad_options_are_invalid_argument() {
    let dir = tempfile::tempdir().unwrap();
    for bytes in [0, 4096, (64 << 10) + 1] {
        let r = Wal::open(dir.path(), Options::default().segment_bytes(bytes));
        assert!(matches!(r, Err(Error::InvalidArgument(_))), "{bytes}");
    }
    let r = Wal::open(
        dir.path(),
        Options::default().sync(SyncMode::Interval(std::time::Duration::ZERO)),
    );
    assert!(matches!(r, Err(Error::InvalidArgument(_))));
}

#[test]
fn large_records_are_written_with_pwrite_small_ones_through_the_mapping() {
    // Pages written through the mapping must be write-protected by every later fdatasync
    // (one TLB-shootdown IPI per page); a record of 64 KiB or more pays one system call
    // instead and never enters the mapping (`Inner::via`).
    let fs = silt_vfs::SimFs::new();
    let dynfs: Arc<dyn silt_vfs::FileSystem> = fs.clone();
    let wal = Wal::open("/wal", Options::default().sync(SyncMode::None).fs(dynfs)).unwrap();
    let before = fs.mapped_write_count();
    wal.append(&vec![7u8; 64 << 10]).unwrap();
    wal.append(&vec![8u8; 1 << 20]).unwrap();
    assert_eq!(
        fs.mapped_write_count(),
        before,
        "a large record went through the mapping"
    );
    wal.append(&[9u8; 100]).unwrap();
    assert_eq!(
        fs.mapped_write_count(),
        before + 1,
        "a small record did not"
    );
    let got: Vec<usize> = wal
        .read_from(0)
        .unwrap()
        .map(|r| r.unwrap().payload.len())
        .collect();
    assert_eq!(got, vec![64 << 10, 1 << 20, 100]);
}

/// The resident pages of the mappings of files under `dir` (`/proc/self/smaps`), in bytes.
#[cfg(target_os = "linux")]
fn mapped_rss_under(dir: &std::path::Path) -> u64 {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    // smaps names the resolved path.
    let dir = dir.canonicalize().unwrap();
    let dir = dir.to_str().unwrap();
    let mut inside = false;
    let mut kib = 0;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if first.contains('-') && first.chars().next().is_some_and(|c| c.is_ascii_hexdigit()) {
            inside = line.contains(dir);
        } else if inside && first == "Rss:" {
            kib += line
                .split_whitespace()
                .nth(1)
                .unwrap()
                .parse::<u64>()
                .unwrap();
        }
    }
    kib << 10
}

#[cfg(target_os = "linux")]
#[test]
fn pages_written_through_the_mapping_leave_resident_memory_a_step_behind_and_keep_their_bytes() {
    // Small records go through the segment's shared mapping; without releasing the pages
    // behind the newest record, a 64 MiB segment's written pages all stayed resident.
    let dir = tempfile::tempdir().unwrap();
    let wal = Wal::open(dir.path(), Options::default().sync(SyncMode::None)).unwrap();
    assert_eq!(wal.segment_bytes(), 64 << 20);
    let n = 120_000usize; // 240 bytes a record with its header: about 27.5 MiB, one segment
    let payload = |i: usize| {
        let mut p = vec![(i % 251) as u8; 200];
        p[..8].copy_from_slice(&(i as u64).to_le_bytes());
        p
    };
    for i in 0..n {
        wal.append(&payload(i)).unwrap();
    }
    let rss = mapped_rss_under(dir.path());
    // At most the step being written and the one behind it (8 MiB), with room for the
    // page cache's larger folios; at least the newest record's page, or the test did not
    // find the mapping at all.
    assert!(
        (4 << 10..=10 << 20).contains(&rss),
        "{} KiB of the log's mapping resident after writing ~27.5 MiB",
        rss >> 10
    );
    let check = |wal: &Wal| {
        let mut i = 0;
        for r in wal.read_from(0).unwrap() {
            assert_eq!(r.unwrap().payload, payload(i), "record {i}");
            i += 1;
        }
        assert_eq!(i, n);
    };
    check(&wal);
    drop(wal);
    let wal = Wal::open(dir.path(), Options::default().sync(SyncMode::None)).unwrap();
    check(&wal);
}
