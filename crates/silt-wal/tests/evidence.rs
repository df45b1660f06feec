//! Damage in the middle of the log (issue 10, bugs 4 and 5): recovery keeps the prefix
//! rule but never destroys evidence, says what it did, tells a torn tail from a hole with
//! records after it, reports where the cut began, and skips damage below the first record
//! the caller needs. Each test failed before its fix.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use silt_vfs::{FileSystem, SimFs};
use silt_wal::{DamageKind, Error, Options, SyncMode, Wal};

const DIR: &str = "/log";
const SEG: u64 = 64 << 10;

fn opts(fs: Arc<SimFs>, sync: SyncMode) -> Options {
    Options::default().sync(sync).segment_bytes(SEG).fs(fs)
}

fn payload(i: usize) -> Vec<u8> {
    format!("record {i:05} {}", "p".repeat(200 + i % 100)).into_bytes()
}

/// A log of `n` records; with `sync_every`, a sync after every that many appends (so later
/// records carry durable watermarks above earlier ones). Returns the LSNs.
fn build(sim: &Arc<SimFs>, n: usize, sync: SyncMode, sync_every: Option<usize>) -> Vec<u64> {
    let wal = Wal::open(DIR, opts(sim.clone(), sync)).unwrap();
    let mut lsns = Vec::new();
    for i in 0..n {
        lsns.push(wal.append(&payload(i)).unwrap());
        if sync_every.is_some_and(|k| (i + 1) % k == 0) {
            wal.sync().unwrap();
        }
    }
    wal.sync().unwrap();
    drop(wal);
    lsns
}

fn seg_path(lsn: u64) -> PathBuf {
    Path::new(DIR).join(format!("{:020}.wal", lsn / SEG))
}

fn read(fs: &SimFs, p: &Path) -> Vec<u8> {
    let f = fs.open(p).unwrap();
    let mut b = vec![0; f.len().unwrap() as usize];
    f.read_at(&mut b, 0).unwrap();
    b
}

fn write(fs: &SimFs, p: &Path, at: u64, bytes: &[u8]) {
    let f = fs.open(p).unwrap();
    f.write_at(&[bytes], at).unwrap();
    f.sync_data().unwrap();
}

fn payloads(wal: &Wal, from: u64) -> Vec<Vec<u8>> {
    wal.read_from(from)
        .unwrap()
        .map(|r| r.unwrap().payload)
        .collect()
}

fn lost(fs: &SimFs) -> Vec<PathBuf> {
    fs.list(&Path::new(DIR).join("lost")).unwrap_or_default()
}

/// The case: one flipped byte in the middle of the last segment under
/// `SyncMode::None`. The records before it come back; the records after it are not
/// replayed (prefix rule) but kept, byte for byte, in `lost/`; the report says so.
#[test]
fn a_flipped_byte_mid_log_keeps_the_prefix_and_the_evidence() {
    let sim = SimFs::new();
    let lsns = build(&sim, 120, SyncMode::None, None);
    let bad = 40;
    let path = seg_path(lsns[bad]);
    let whole = read(&sim, &path);
    let off = (lsns[bad] % SEG) as usize;
    write(&sim, &path, (off + 40) as u64, &[whole[off + 40] ^ 0x10]);
    let in_seg_after = lsns[bad + 1..]
        .iter()
        .filter(|&&l| l / SEG == lsns[bad] / SEG)
        .count() as u64;

    let wal = Wal::open(DIR, opts(sim.clone(), SyncMode::None)).unwrap();
    let got = payloads(&wal, 0);
    assert_eq!(got, (0..bad).map(payload).collect::<Vec<_>>());
    let info = wal.recovery().clone();
    assert_eq!(info.truncated, Some((path.clone(), off as u64)));
    let cut = info.cut.expect("the cut is reported");
    assert_eq!(cut.kind, DamageKind::RecordsFollow);
    assert_eq!(
        (cut.file.clone(), cut.offset, cut.lsn),
        (path.clone(), off as u64, lsns[bad])
    );
    assert!(cut.records_after >= in_seg_after, "{cut:?}");
    assert!(!cut.saved.is_empty());
    // The kept tail is exactly the original bytes from the cut on (the flipped one aside).
    let kept = read(&sim, &cut.saved[0]);
    let mut want = whole[off..off + kept.len()].to_vec();
    want[40] ^= 0x10;
    assert_eq!(kept, want);
    assert_eq!(
        cut.bytes,
        cut.saved
            .iter()
            .map(|p| read(&sim, p).len() as u64)
            .sum::<u64>()
    );
    // New appends go after the prefix; a reopen finds a clean log and leaves lost/ alone.
    wal.append(b"after recovery").unwrap();
    wal.sync().unwrap();
    drop(wal);
    let saved = lost(&sim);
    let wal = Wal::open(DIR, opts(sim.clone(), SyncMode::None)).unwrap();
    assert_eq!(wal.recovery().cut, None);
    assert_eq!(payloads(&wal, 0).len(), bad + 1);
    assert_eq!(lost(&sim), saved);
}

/// A zeroed range from the start of a record: `truncated` names where the cut began (the
/// record), not the first non-zero byte after the zeros (which it reported before).
#[test]
fn truncated_names_where_the_cut_began() {
    let sim = SimFs::new();
    let lsns = build(&sim, 120, SyncMode::None, None);
    let bad = 30;
    let path = seg_path(lsns[bad]);
    let off = lsns[bad] % SEG;
    write(&sim, &path, off, &vec![0u8; 1000]);
    let wal = Wal::open(DIR, opts(sim.clone(), SyncMode::None)).unwrap();
    assert_eq!(payloads(&wal, 0).len(), bad);
    assert_eq!(wal.recovery().truncated, Some((path, off)));
    let cut = wal.recovery().cut.clone().unwrap();
    assert_eq!(cut.kind, DamageKind::RecordsFollow);
    assert!(cut.records_after > 0);
}

/// A torn tail — garbage to the end, no valid record after it — is told apart from a hole,
/// and its bytes are kept; a log that ends in zeros reports no cut and keeps nothing.
#[test]
fn a_torn_tail_is_told_from_a_hole_and_zeros_are_no_cut() {
    let sim = SimFs::new();
    let lsns = build(&sim, 50, SyncMode::None, None);
    let wal = Wal::open(DIR, opts(sim.clone(), SyncMode::None)).unwrap();
    assert_eq!(wal.recovery().cut, None);
    assert_eq!(wal.recovery().truncated, None);
    let end = wal.recovery().tail_lsn;
    drop(wal);
    assert!(lost(&sim).is_empty());

    let garbage: Vec<u8> = (0..300u32).map(|i| (i * 7 + 3) as u8).collect();
    write(&sim, &seg_path(end), end % SEG, &garbage);
    let wal = Wal::open(DIR, opts(sim.clone(), SyncMode::None)).unwrap();
    assert_eq!(payloads(&wal, 0).len(), lsns.len());
    let cut = wal.recovery().cut.clone().unwrap();
    assert_eq!(cut.kind, DamageKind::TornTail);
    assert_eq!(cut.records_after, 0);
    assert_eq!(cut.offset, end % SEG);
    assert_eq!(read(&sim, &cut.saved[0]), garbage);
}

/// Damage below the first record the caller needs (bug 5): skipped and reported, and every
/// record from that point on is read — even though later records' durable watermarks show
/// the damaged bytes had been synced, which without `required_from` is `Corruption`.
#[test]
fn damage_below_the_required_start_is_skipped_and_reported() {
    let sim = SimFs::new();
    const N: usize = 700;
    let lsns = build(&sim, N, SyncMode::None, Some(10));
    assert!(lsns[N - 1] / SEG >= 2, "the log spans three segments");
    let bad = 20;
    let path = seg_path(lsns[bad]);
    let off = lsns[bad] % SEG;
    let whole = read(&sim, &path);
    // A flipped payload byte: the record's header is intact.
    write(&sim, &path, off + 40, &[whole[(off + 40) as usize] ^ 1]);
    let image = clone(&sim);

    // Without it: the hole is below a durable watermark, so durable data was lost.
    match Wal::open(DIR, opts(image.clone(), SyncMode::None)) {
        Err(Error::Corruption { file, offset, .. }) => {
            assert_eq!((file, offset), (path.clone(), off))
        }
        other => panic!("expected Corruption, got {:?}", other.map(|_| ())),
    }
    // With the required start just past the damaged record, or further on.
    for required in [lsns[bad] + 1, lsns[bad + 1], lsns[200]] {
        let image = clone(&sim);
        let wal = Wal::open(
            DIR,
            opts(image.clone(), SyncMode::None).required_from(required),
        )
        .unwrap();
        let info = wal.recovery().clone();
        assert_eq!(info.cut, None, "required {required}");
        assert_eq!(info.skipped.len(), 1, "required {required}: {info:?}");
        let s = &info.skipped[0];
        assert_eq!(
            (s.file.clone(), s.offset, s.lsn),
            (path.clone(), off, lsns[bad])
        );
        assert_eq!(s.bytes, lsns[bad + 1] - lsns[bad]);
        let first = lsns.iter().position(|&l| l >= required).unwrap();
        assert_eq!(
            payloads(&wal, required),
            (first..N).map(payload).collect::<Vec<_>>(),
            "required {required}"
        );
        // Appends and reopens go on as usual.
        wal.append(b"more").unwrap();
        drop(wal);
        let wal = Wal::open(DIR, opts(image, SyncMode::None).required_from(required)).unwrap();
        assert_eq!(payloads(&wal, required).len(), N - first + 1);
    }
}

/// Damage that may hide a needed record is not skipped: a zeroed range (headers gone, so
/// the damaged records' extent is unknown) that reaches past the required start.
#[test]
fn damage_that_may_hide_a_needed_record_is_corruption() {
    let sim = SimFs::new();
    let lsns = build(&sim, 200, SyncMode::None, Some(10));
    let path = seg_path(lsns[50]);
    assert_eq!(seg_path(lsns[53]), path);
    let off = lsns[50] % SEG;
    write(&sim, &path, off, &vec![0u8; (lsns[53] - lsns[50]) as usize]);
    for required in [lsns[51], lsns[52], lsns[53] - 1] {
        let image = clone(&sim);
        match Wal::open(DIR, opts(image, SyncMode::None).required_from(required)) {
            Err(Error::Corruption { file, offset, .. }) => {
                assert_eq!((file, offset), (path.clone(), off))
            }
            other => panic!(
                "required {required}: expected Corruption, got {:?}",
                other.map(|_| ())
            ),
        }
    }
    // A start at or past the next valid record: nothing needed is in the hole.
    let image = clone(&sim);
    let wal = Wal::open(DIR, opts(image, SyncMode::None).required_from(lsns[53])).unwrap();
    assert_eq!(payloads(&wal, lsns[53]).len(), 200 - 53);
}

fn clone(src: &Arc<SimFs>) -> Arc<SimFs> {
    src.crash(silt_vfs::CrashMode::KeepAll, 0)
}
