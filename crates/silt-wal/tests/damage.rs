//! Bad files: truncate the log at every offset, zero its tail from every offset, flip every
//! byte. Each reopen gives a typed `Corruption` naming the file and offset, or a correct
//! prefix of what was appended — never a panic, never a wrong record.

mod common;

use std::path::PathBuf;
use std::sync::Arc;

use common::*;
use proptest::prelude::*;
use silt_vfs::{FileSystem, SimFs};
use silt_wal::{Error, Options, SyncMode, Wal};

const DIR: &str = "/log";

fn opts(fs: Arc<dyn FileSystem>, sync: SyncMode) -> Options {
    Options::default().sync(sync).segment_bytes(64 << 10).fs(fs)
}

/// A log of `payloads` on a fresh `SimFs`; returns it with the first segment's path and
/// the LSNs.
fn build(payloads: &[Vec<u8>], sync: SyncMode) -> (Arc<SimFs>, PathBuf, Vec<u64>) {
    let sim = SimFs::new();
    let wal = Wal::open(DIR, opts(sim.clone(), sync)).unwrap();
    let lsns = payloads.iter().map(|p| wal.append(p).unwrap()).collect();
    drop(wal);
    let seg = sim.list(DIR.as_ref()).unwrap().into_iter().next().unwrap();
    (sim, seg, lsns)
}

/// Copies the log into a fresh `SimFs` (so each damage starts from the same bytes).
fn clone_fs(src: &Arc<SimFs>) -> Arc<SimFs> {
    let dst = SimFs::new();
    dst.create_dir_all(DIR.as_ref()).unwrap();
    for path in src.list(DIR.as_ref()).unwrap() {
        let f = src.open(&path).unwrap();
        let mut buf = vec![0u8; f.len().unwrap() as usize];
        f.read_at(&mut buf, 0).unwrap();
        let g = dst.create(&path).unwrap();
        g.write_at(&[&buf], 0).unwrap();
        g.sync_data().unwrap();
    }
    dst.sync_dir(DIR.as_ref()).unwrap();
    dst
}

/// Reopens and checks: Ok → a prefix of `payloads`; Err → Corruption naming a file.
/// Returns how many records came back (None for a Corruption).
fn check(fs: Arc<SimFs>, sync: SyncMode, payloads: &[Vec<u8>], what: &str) -> Option<usize> {
    match Wal::open(DIR, opts(fs, sync)) {
        Ok(wal) => {
            let mut n = 0;
            for r in wal.read_from(0).unwrap() {
                match r {
                    Ok(r) => {
                        assert_eq!(r.payload, payloads[n], "{what}: record {n} is wrong");
                        n += 1;
                    }
                    Err(Error::Corruption { .. }) => return None,
                    Err(e) => panic!("{what}: unexpected {e}"),
                }
            }
            Some(n)
        }
        Err(Error::Corruption { file, .. }) => {
            assert!(file.starts_with(DIR), "{what}: corruption names {file:?}");
            None
        }
        Err(e) => panic!("{what}: unexpected error kind {e}"),
    }
}

fn payloads(n: u64) -> Vec<Vec<u8>> {
    (0..n).map(|i| payload(5, i)).collect()
}

#[test]
fn zeroing_the_tail_at_every_offset_gives_exactly_the_records_before_it() {
    let ps = payloads(12);
    let (sim, seg, lsns) = build(&ps, SyncMode::None);
    let end = lsns.last().unwrap() + 40 + ps.last().unwrap().len() as u64 + 8;
    for at in 64..end {
        let fs = clone_fs(&sim);
        let f = fs.open(&seg).unwrap();
        f.write_at(&[&vec![0u8; (end - at) as usize]], at).unwrap();
        let n = check(fs, SyncMode::None, &ps, &format!("zero from {at}"));
        // Records wholly before `at` survive (the tail was never synced: a torn tail).
        let expect = lsns
            .iter()
            .zip(&ps)
            .take_while(|(l, p)| **l + 40 + p.len() as u64 <= at)
            .count();
        assert_eq!(n, Some(expect), "zero from {at}");
    }
}

#[test]
fn truncating_the_file_at_every_offset_is_a_typed_error() {
    let ps = payloads(6);
    let (sim, seg, _) = build(&ps, SyncMode::None);
    let len = 64 << 10;
    for at in (0..len).step_by(61).chain([len - 1]) {
        let fs = clone_fs(&sim);
        fs.open(&seg).unwrap().set_len(at).unwrap();
        // A preallocated segment shorter than its size was damaged outside the log.
        assert_eq!(
            check(fs, SyncMode::None, &ps, &format!("truncate at {at}")),
            None
        );
    }
}

#[test]
fn flipping_any_byte_gives_a_typed_error_or_a_correct_prefix() {
    for sync in [SyncMode::None, SyncMode::Full] {
        let ps = payloads(10);
        let (sim, seg, lsns) = build(&ps, sync);
        let end = lsns.last().unwrap() + 40 + ps.last().unwrap().len() as u64;
        // Bytes between a payload's end and the next 8-byte boundary carry nothing.
        let in_padding = |at: u64| {
            lsns.iter().zip(&ps).any(|(l, p)| {
                at >= l + 40 + p.len() as u64 && at < (l + 40 + p.len() as u64).next_multiple_of(8)
            })
        };
        let (mut corrupt, mut prefix) = (0, 0);
        for at in 0..end {
            let fs = clone_fs(&sim);
            let f = fs.open(&seg).unwrap();
            let mut b = [0u8];
            f.read_at(&mut b, at).unwrap();
            f.write_at(&[&[b[0] ^ 0x5a]], at).unwrap();
            match check(fs, sync, &ps, &format!("{sync:?} flip at {at}")) {
                None => corrupt += 1,
                Some(n) => {
                    assert!(
                        n < ps.len() || in_padding(at),
                        "{sync:?} flip at {at} unnoticed"
                    );
                    prefix += 1;
                }
            }
        }
        if sync == SyncMode::Full {
            // Synced records followed by later records: damage below the durable point is
            // reported, not truncated away.
            assert!(corrupt > (end as usize) / 2, "{corrupt} corruption reports");
        }
        assert!(prefix > 0);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn random_payloads_round_trip_and_random_damage_never_lies(
        lens in proptest::collection::vec(0usize..5000, 1..60),
        damage in proptest::collection::vec((0u64..(64 << 10) * 2, any::<u8>()), 0..4),
        synced in any::<bool>(),
    ) {
        let ps: Vec<Vec<u8>> = lens
            .iter()
            .enumerate()
            .map(|(i, &n)| (0..n).map(|j| (i * 31 + j) as u8).collect())
            .collect();
        let sync = if synced { SyncMode::Full } else { SyncMode::None };
        let (sim, _, _) = build(&ps, sync);
        prop_assert_eq!(check(clone_fs(&sim), sync, &ps, "clean"), Some(ps.len()));
        let fs = clone_fs(&sim);
        let files = fs.list(DIR.as_ref()).unwrap();
        for (pos, byte) in damage {
            let path = &files[(pos / (64 << 10)) as usize % files.len()];
            fs.open(path).unwrap().write_at(&[&[byte]], pos % (64 << 10)).unwrap();
        }
        check(fs, sync, &ps, "random damage");
    }
}
