//! Reading a log without changing it (`Wal::open_read_only`), copying a range of it
//! (`Wal::copy_range`, held against purges by `Wal::hold_purge`), and a fresh log that
//! continues another's LSNs (`Wal::create_after`).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use common::*;
use silt_vfs::OsFs;
use silt_wal::{DamageKind, Options, SyncMode, Wal};

/// Every file under `dir` with its length, modification time and content.
fn listing(dir: &Path) -> BTreeMap<PathBuf, (u64, SystemTime, Vec<u8>)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            if m.is_dir() {
                stack.push(e.path());
            } else {
                let data = std::fs::read(e.path()).unwrap();
                out.insert(e.path(), (m.len(), m.modified().unwrap(), data));
            }
        }
    }
    out
}

fn opts() -> Options {
    small(Options::default().sync(SyncMode::None))
}

#[test]
fn read_only_sees_every_record_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let wal = Wal::open(dir.path(), opts()).unwrap();
    let payloads: Vec<_> = (0..400).map(|i| payload(1, i)).collect();
    let lsns: Vec<_> = payloads.iter().map(|p| wal.append(p).unwrap()).collect();
    // Beside the live writer: a prefix of what was appended, whole records only.
    let ro = Wal::open_read_only(dir.path(), opts()).unwrap();
    let got = read_all(&ro);
    assert_eq!(got.len(), payloads.len());
    for (r, (p, l)) in got.iter().zip(payloads.iter().zip(&lsns)) {
        assert_eq!((&r.payload, r.lsn), (p, *l));
    }
    assert!(ro.append(b"x").is_err(), "a read-only log takes no append");
    drop(ro);
    drop(wal);

    // A torn tail: reported, not cut.
    let seg = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "wal"))
        .unwrap();
    let last = *lsns.last().unwrap();
    let s = 64u64 << 10;
    let torn_at = lsns.iter().rev().find(|&&l| l / s == last / s).unwrap() % s;
    let seg = seg.parent().unwrap().join(format!("{:020}.wal", last / s));
    let mut bytes = std::fs::read(&seg).unwrap();
    bytes[torn_at as usize + 45] ^= 0xff; // in the last record's payload
    std::fs::write(&seg, &bytes).unwrap();
    let before = listing(dir.path());
    let ro = Wal::open_read_only(dir.path(), opts()).unwrap();
    let info = ro.recovery().clone();
    let cut = info.cut.expect("the torn tail is reported");
    assert_eq!(cut.kind, DamageKind::TornTail);
    assert_eq!(cut.offset, torn_at);
    assert_eq!(cut.file, seg);
    assert!(cut.saved.is_empty());
    assert_eq!(read_all(&ro).len(), payloads.len() - 1);
    drop(ro);
    assert_eq!(before, listing(dir.path()), "open_read_only changed a file");
}

#[test]
fn durable_damage_is_reported_not_refused() {
    let dir = tempfile::tempdir().unwrap();
    let wal = Wal::open(dir.path(), small(Options::default().sync(SyncMode::Full))).unwrap();
    let lsns: Vec<_> = (0..50)
        .map(|i| wal.append(&payload(2, i)).unwrap())
        .collect();
    drop(wal);
    let s = 64u64 << 10;
    let seg = dir.path().join(format!("{:020}.wal", lsns[10] / s));
    let mut bytes = std::fs::read(&seg).unwrap();
    bytes[(lsns[10] % s) as usize + 50] ^= 1;
    std::fs::write(&seg, &bytes).unwrap();
    assert!(matches!(
        Wal::open(dir.path(), opts()),
        Err(silt_wal::Error::Corruption { .. })
    ));
    // `open` refused before changing anything; a read-only open reports the damage.
    let ro = Wal::open_read_only(dir.path(), opts()).unwrap();
    let cut = ro.recovery().cut.clone().unwrap();
    assert_eq!(cut.kind, DamageKind::DurableLost);
    assert_eq!(
        (cut.file, cut.offset, cut.lsn),
        (seg, lsns[10] % s, lsns[10])
    );
    assert_eq!(read_all(&ro).len(), 10);
}

#[test]
fn copy_range_ends_at_to_while_appends_go_on_and_holds_stop_purges() {
    let dir = tempfile::tempdir().unwrap();
    let wal = Wal::open(dir.path(), opts()).unwrap();
    let payloads: Vec<_> = (0..3000).map(|i| payload(3, i)).collect();
    let lsns: Vec<_> = payloads[..2000]
        .iter()
        .map(|p| wal.append(p).unwrap())
        .collect();
    let from = lsns[700];
    let to = lsns[1500];
    let hold = wal.hold_purge(from);
    let s = 64u64 << 10;
    assert!(to / s > from / s + 1, "the range spans segments");
    // Only the segments wholly below `from` go.
    assert_eq!(wal.purge_up_to(to).unwrap() as u64, from / s);
    let copy = tempfile::tempdir().unwrap();
    std::thread::scope(|sc| {
        sc.spawn(|| {
            for p in &payloads[2000..] {
                wal.append(p).unwrap();
            }
        });
        wal.copy_range(from, to, copy.path(), &*OsFs::new())
            .unwrap();
    });
    drop(hold);
    assert!(
        wal.purge_up_to(to).unwrap() > 0,
        "released: the purge catches up"
    );
    let c = Wal::open(copy.path(), opts()).unwrap();
    let got: Vec<_> = c
        .read_from(from)
        .unwrap()
        .map(|r| r.unwrap().payload)
        .collect();
    assert_eq!(got, payloads[700..1500].to_vec());
    assert_eq!(c.reserved_lsn(), to);
}

#[test]
fn create_after_continues_the_lsns() {
    let dir = tempfile::tempdir().unwrap();
    let first = Wal::create_after(dir.path(), opts(), 1_000_000).unwrap();
    assert!(first > 1_000_000);
    let wal = Wal::open(dir.path(), opts()).unwrap();
    let lsn = wal.append(b"after").unwrap();
    assert_eq!(lsn, first);
    assert!(Wal::create_after(dir.path(), opts(), 0).is_err());
}
