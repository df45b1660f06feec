//! Regressions for segment recycling found by the engine's kill -9 test:
//!
//! 1. Pool file names must not collide after reopens: the serial continues after the
//!    highest survivor, whatever order the directory lists them in.
//! 2. A crash at any step of reusing a pooled file leaves either a pool file or a segment
//!    whose header names it: never a `.wal` file that still carries its former header.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;

use silt_vfs::{File, FileSystem, OsFs};
use silt_wal::{Options, Wal};

const SEG: u64 = 64 << 10;

/// `OsFs` with a deterministic (reversed) listing order, and optionally a "process death"
/// right after the first rename of a pooled file: every later call fails.
#[derive(Debug)]
struct Wrap {
    os: Arc<OsFs>,
    die_after_recycle_rename: bool,
    dead: AtomicBool,
}

impl Wrap {
    fn new(die_after_recycle_rename: bool) -> Arc<Wrap> {
        Arc::new(Wrap {
            os: OsFs::new(),
            die_after_recycle_rename,
            dead: AtomicBool::new(false),
        })
    }

    fn alive(&self) -> io::Result<()> {
        if self.dead.load(SeqCst) {
            Err(io::Error::other("the process is dead"))
        } else {
            Ok(())
        }
    }
}

impl FileSystem for Wrap {
    fn create_dir_all(&self, d: &Path) -> io::Result<()> {
        self.alive()?;
        self.os.create_dir_all(d)
    }
    fn list(&self, d: &Path) -> io::Result<Vec<PathBuf>> {
        self.alive()?;
        let mut v = self.os.list(d)?;
        v.sort();
        v.reverse();
        Ok(v)
    }
    fn create(&self, p: &Path) -> io::Result<Arc<dyn File>> {
        self.alive()?;
        self.os.create(p)
    }
    fn open(&self, p: &Path) -> io::Result<Arc<dyn File>> {
        self.alive()?;
        self.os.open(p)
    }
    fn rename(&self, a: &Path, b: &Path) -> io::Result<()> {
        self.alive()?;
        self.os.rename(a, b)?;
        if self.die_after_recycle_rename && a.extension().is_some_and(|e| e == "recycle") {
            self.dead.store(true, SeqCst);
        }
        Ok(())
    }
    fn remove(&self, p: &Path) -> io::Result<()> {
        self.alive()?;
        self.os.remove(p)
    }
    fn sync_dir(&self, d: &Path) -> io::Result<()> {
        self.alive()?;
        self.os.sync_dir(d)
    }
    fn lock(&self, p: &Path) -> io::Result<Box<dyn silt_vfs::FileLock>> {
        self.os.lock(p)
    }
}

fn append_to(wal: &Wal, lsn: u64) -> silt_wal::Result<()> {
    while wal.reserved_lsn() < lsn {
        wal.append(&[7u8; 1000])?;
    }
    Ok(())
}

#[test]
fn pool_names_do_not_collide_across_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let open = || {
        Wal::open(
            dir.path(),
            Options::default().segment_bytes(SEG).fs(Wrap::new(false)),
        )
        .unwrap()
    };
    // Each session fills a segment more and purges everything below the tail, so the pool
    // survivors' serials climb past the pool's size.
    for session in 3..=5u64 {
        let wal = open();
        append_to(&wal, session * SEG + 2000).unwrap();
        // One byte short of the end: a purge to the very end empties the pool.
        wal.purge_up_to(wal.reserved_lsn() - 1).unwrap();
        if session < 5 {
            wal.close().unwrap();
            continue;
        }
        // Several more segments, each from the pool: with colliding names one of them is
        // gone and the log poisons itself.
        append_to(&wal, 9 * SEG).unwrap();
        assert_eq!(wal.poison_cause(), None);
        let end = wal.reserved_lsn();
        wal.close().unwrap();
        let wal = open();
        let last = wal.read_from(0).unwrap().last().unwrap().unwrap();
        assert!(last.lsn < end && last.lsn + 1100 > end, "the tail survived");
    }
}

#[test]
fn a_crash_while_reusing_a_pool_file_leaves_an_openable_log() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Wrap::new(true);
    let wal = Wal::open(
        dir.path(),
        Options::default().segment_bytes(SEG).fs(fs.clone()),
    )
    .unwrap();
    append_to(&wal, SEG + 1000).unwrap();
    // One byte short of the end: a purge to the very end empties the pool.
    wal.purge_up_to(wal.reserved_lsn() - 1).unwrap();
    let mut acked = 0;
    while wal.append(&[7u8; 1000]).is_ok() {
        acked += 1;
        assert!(acked < 1000, "no pooled file was reused");
    }
    assert!(fs.dead.load(SeqCst), "the crash point was reached");
    drop(wal);
    let wal = Wal::open(dir.path(), Options::default().segment_bytes(SEG))
        .expect("a crash while recycling must leave an openable log");
    let mut n = 0;
    for r in wal.read_from(0).unwrap() {
        r.unwrap();
        n += 1;
    }
    assert!(n >= 1, "the records before the crash are there");
    // And it keeps working: more segments, recycled again.
    append_to(&wal, 6 * SEG).unwrap();
    wal.close().unwrap();
}

#[test]
fn a_failed_segment_preparation_poisons_the_log_and_says_why() {
    use silt_vfs::{FailOp, SimFs};
    let fs = SimFs::new();
    let wal = Wal::open("/log", Options::default().segment_bytes(SEG).fs(fs.clone())).unwrap();
    assert_eq!(wal.poison_cause(), None);
    // Every directory sync fails from now on: the next segment's preparation cannot finish.
    fs.fail_nth(FailOp::SyncDir, 1, true);
    let err = loop {
        match wal.append(&[7u8; 1000]) {
            Ok(_) => assert!(wal.reserved_lsn() < 4 * SEG, "the preparer never failed"),
            Err(e) => break e,
        }
    };
    // The append that ran into it gets the I/O error if it prepared the segment itself,
    // `Poisoned` if the background thread did; every later one gets `Poisoned`.
    assert!(
        matches!(err, silt_wal::Error::Poisoned | silt_wal::Error::Io { .. }),
        "{err:?}"
    );
    assert!(matches!(wal.append(b"x"), Err(silt_wal::Error::Poisoned)));
    let cause = wal.poison_cause().expect("the cause is kept");
    assert!(cause.contains("preparing log segment"), "{cause}");
}

fn pool_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "recycle")
        })
        .count()
}

#[test]
fn a_purge_to_the_end_of_the_log_deletes_the_pool_and_the_log_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let open = || Wal::open(dir.path(), Options::default().segment_bytes(SEG)).unwrap();
    let wal = open();
    append_to(&wal, 4 * SEG + 1000).unwrap();
    // Not the end: purged segments are kept for recycling.
    wal.purge_up_to(wal.reserved_lsn() - 1).unwrap();
    assert!(pool_files(dir.path()) > 0, "kept for recycling");
    // Past the middle of segment 5, so segment 6 is prepared ahead (in the background).
    append_to(&wal, 5 * SEG + SEG * 3 / 4).unwrap();
    let wal_files = || {
        std::fs::read_dir(dir.path())
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "wal")
            })
            .count()
    };
    let start = std::time::Instant::now();
    while wal_files() < 2 && start.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(wal_files() >= 2, "the next segment was prepared ahead");
    // The end: nothing appended is needed any more; the pool goes too.
    wal.purge_up_to(wal.reserved_lsn()).unwrap();
    assert_eq!(
        pool_files(dir.path()),
        0,
        "a quiet log keeps no spare segments"
    );
    // Nor a segment prepared ahead: only the one the next record goes into.
    assert_eq!(wal_files(), 1, "a quiet log keeps one segment");
    // Appends go on (new segments zero-filled), and a reopen reads them.
    let from = wal.reserved_lsn();
    append_to(&wal, 8 * SEG + 1000).unwrap();
    let end = wal.reserved_lsn();
    wal.close().unwrap();
    let wal = open();
    let n = wal
        .read_from(from)
        .unwrap()
        .map(|r| r.unwrap())
        .filter(|r| r.lsn >= from && r.lsn < end)
        .count();
    assert!(
        n > 0 && n as u64 * 1000 >= end - from - SEG,
        "{n} records after the purge"
    );
}

/// A purged segment with a second name (the engine's log blob, `wal.md`, "Other names") is
/// removed, never recycled: the other name's bytes stay what they were while the log goes
/// on through many more segments, in both preallocation modes that recycle.
#[test]
fn a_segment_with_another_name_is_never_recycled() {
    for mode in [
        silt_wal::Preallocate::Recycle,
        silt_wal::Preallocate::RecycleElseAllocate,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        let wal = Wal::open(
            dir.path(),
            Options::default().segment_bytes(SEG).preallocate(mode),
        )
        .unwrap();
        append_to(&wal, 3 * SEG + 1000).unwrap();
        // Segments 1 and 2 get a second name; 0 does not.
        let seg = |id: u64| dir.path().join(format!("{id:020}.wal"));
        let linked: Vec<PathBuf> = (1..=2)
            .map(|id| {
                let to = other.path().join(format!("{id}.blob"));
                std::fs::hard_link(seg(id), &to).unwrap();
                to
            })
            .collect();
        let before: Vec<Vec<u8>> = linked.iter().map(|p| std::fs::read(p).unwrap()).collect();
        wal.purge_up_to(3 * SEG).unwrap();
        assert!(!seg(1).exists() && !seg(2).exists(), "the log's names go");
        // Only segment 0 could be pooled.
        assert!(pool_files(dir.path()) <= 1, "{mode:?}");
        // Many more segments, purged as they fill: each reuses the pool when it can.
        for k in 4..12u64 {
            append_to(&wal, k * SEG + 1000).unwrap();
            wal.purge_up_to(k * SEG).unwrap();
        }
        assert_eq!(wal.poison_cause(), None);
        for (p, b) in linked.iter().zip(&before) {
            assert!(
                std::fs::read(p).unwrap() == *b,
                "{mode:?}: {p:?} was written to"
            );
        }
        let end = wal.reserved_lsn();
        wal.close().unwrap();
        let wal = Wal::open(
            dir.path(),
            Options::default().segment_bytes(SEG).preallocate(mode),
        )
        .unwrap();
        let last = wal.read_from(0).unwrap().last().unwrap().unwrap();
        assert!(last.lsn < end && last.lsn + 1100 > end, "the tail survived");
    }
}

/// Under `RecycleElseAllocate`, the segments that stand in for linked ones (allocated, not
/// zero-filled) are full size, and a log made of them reads back and reopens like any
/// other.
#[test]
fn allocated_segments_are_full_size_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    let opts = || {
        Options::default()
            .segment_bytes(SEG)
            .preallocate(silt_wal::Preallocate::RecycleElseAllocate)
    };
    let wal = Wal::open(dir.path(), opts()).unwrap();
    // Every segment is linked before it is purged, so none returns to the pool.
    for k in 1..6u64 {
        append_to(&wal, k * SEG + 1000).unwrap();
        let seg = dir.path().join(format!("{:020}.wal", k - 1));
        std::fs::hard_link(&seg, other.path().join(format!("{k}"))).unwrap();
        wal.purge_up_to(k * SEG).unwrap();
    }
    assert_eq!(pool_files(dir.path()), 0);
    let from = 5 * SEG;
    let end = wal.reserved_lsn();
    wal.close().unwrap();
    for e in std::fs::read_dir(dir.path()).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "wal") {
            assert_eq!(std::fs::metadata(&p).unwrap().len(), SEG, "{p:?}");
        }
    }
    let wal = Wal::open(dir.path(), opts()).unwrap();
    let n = wal.read_from(from).unwrap().count();
    assert!(n > 0, "{n} records");
    let last = wal.read_from(0).unwrap().last().unwrap().unwrap();
    assert!(last.lsn < end && last.lsn + 1100 > end);
}

/// The pool keeps at most `recycle_segments` purged segments, and the next segments take
/// them back before any is zero-filled anew.
#[test]
fn the_pool_keeps_up_to_recycle_segments_and_they_are_reused() {
    for (keep, set_later) in [
        (0usize, false),
        (2, false),
        (4, false),
        (4, true),
        (1, true),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let opts = Options::default().segment_bytes(SEG);
        let wal = if set_later {
            let wal = Wal::open(dir.path(), opts).unwrap();
            wal.set_recycle_segments(keep);
            wal
        } else {
            Wal::open(dir.path(), opts.recycle_segments(keep)).unwrap()
        };
        append_to(&wal, 6 * SEG + 1000).unwrap();
        // Segments 0..6 purged, the writer in segment 6: not the end, so the pool fills.
        wal.purge_up_to(6 * SEG).unwrap();
        assert_eq!(pool_files(dir.path()), keep, "keep {keep}");
        // The next `keep` segments come from the pool.
        append_to(&wal, (6 + keep as u64) * SEG + 1000).unwrap();
        assert_eq!(pool_files(dir.path()), 0, "keep {keep}: all reused");
        wal.close().unwrap();
    }
}
