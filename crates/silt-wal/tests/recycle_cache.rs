//! A recycled segment's pages are read into the page cache when the segment is prepared,
//! before writers reach it (`File::prefetch`); where most commits are not synced, its old
//! bytes are forgotten instead, so they are never read (`File::forget`). A store through the mapping into a page that
//! is not cached waits for the device to read the page, in the commit path: a pooled
//! segment's pages may have left the cache (reclaim of cold pages), and on a device busy
//! with a flush's sync such a read held a commit for 200 ms (`queue_indexed`, 2026-11-28).
//!
//! Its own test binary: it drops pages of its files from the page cache. On a file system
//! that does not drop them (tmpfs), nothing here can fail.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use silt_wal::{Options, Preallocate, SyncMode, Wal};

const SEG: u64 = 4 << 20;

fn append_to(wal: &Wal, lsn: u64) {
    while wal.reserved_lsn() < lsn {
        wal.append(&[7u8; 1000]).unwrap();
    }
}

fn page_size() -> usize {
    // SAFETY: a plain query.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

/// (pages in the page cache, pages) of the file at `path`.
fn resident(path: &Path) -> (usize, usize) {
    let f = std::fs::File::open(path).unwrap();
    let len = f.metadata().unwrap().len() as usize;
    let page = page_size();
    let pages = len.div_ceil(page);
    // SAFETY: a fresh read-only shared mapping of the whole file, only passed to mincore
    // and unmapped below; nothing reads through it.
    unsafe {
        let map = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        );
        assert_ne!(map, libc::MAP_FAILED);
        let mut vec = vec![0u8; pages];
        assert_eq!(libc::mincore(map, len, vec.as_mut_ptr()), 0);
        libc::munmap(map, len);
        (vec.iter().filter(|&&b| b & 1 == 1).count(), pages)
    }
}

/// Writes the file's dirty pages back and asks the kernel to drop its cached pages.
fn drop_cached(path: &Path) {
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.sync_data().unwrap();
    // SAFETY: a plain system call on an open descriptor.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
}

fn pool_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "recycle"))
        .collect()
}

#[test]
fn a_recycled_segment_is_read_into_the_cache_before_writers_reach_it() {
    let dir = tempfile::tempdir().unwrap();
    let wal = Wal::open(
        dir.path(),
        Options::default()
            .sync(SyncMode::None)
            .segment_bytes(SEG)
            .recycle_segments(4),
    )
    .unwrap();
    // Segments 0 to 3, the first two purged into the pool (writers left them, and their
    // mappings, a segment ago: mapped pages would stay cached).
    append_to(&wal, 3 * SEG + 1000);
    wal.purge_up_to(2 * SEG).unwrap();
    let pool = pool_files(dir.path());
    assert!(!pool.is_empty(), "nothing was pooled");
    for p in &pool {
        drop_cached(p);
    }
    let (cached, pages) = pool
        .iter()
        .map(|p| resident(p))
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    if cached * 2 > pages {
        eprintln!("{cached} of {pages} pooled pages stay cached here (tmpfs?): nothing to check");
        return;
    }
    // Past a quarter of segment 3, segment 4 is prepared from the pool; its writers are a
    // segment away yet.
    append_to(&wal, 3 * SEG + SEG / 2);
    let next = wal.segment_path(4);
    let start = Instant::now();
    let (mut cached, mut pages) = (0, 1);
    while start.elapsed() < Duration::from_secs(20) {
        if next.exists() {
            (cached, pages) = resident(&next);
            if cached == pages {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(next.exists(), "segment 4 was not prepared");
    assert_eq!(
        cached, pages,
        "of the prepared segment's {pages} pages, {cached} are in the page cache"
    );
    assert_eq!(wal.poison_cause(), None);
}

/// Whether `fallocate(FALLOC_FL_ZERO_RANGE)` works in `dir`.
fn zero_range_works(dir: &Path) -> bool {
    let p = dir.join("probe");
    std::fs::write(&p, vec![0xffu8; 8192]).unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
    // SAFETY: a plain system call on an open descriptor.
    let r = unsafe { libc::fallocate(f.as_raw_fd(), libc::FALLOC_FL_ZERO_RANGE, 4096, 4096) };
    drop(f);
    let ok = r == 0 && std::fs::read(&p).unwrap()[4096..].iter().all(|&b| b == 0);
    std::fs::remove_file(&p).unwrap();
    ok
}

#[test]
fn without_synced_commits_a_recycled_segments_old_bytes_are_forgotten() {
    let dir = tempfile::tempdir().unwrap();
    if !zero_range_works(dir.path()) {
        eprintln!("this file system cannot forget a range: nothing to check");
        return;
    }
    let opts = || {
        Options::default()
            .sync(SyncMode::None)
            .segment_bytes(SEG)
            .recycle_segments(4)
            .preallocate(Preallocate::RecycleElseAllocate)
    };
    let wal = Wal::open(dir.path(), opts()).unwrap();
    append_to(&wal, 3 * SEG + 1000);
    wal.purge_up_to(3 * SEG).unwrap();
    assert!(!pool_files(dir.path()).is_empty(), "nothing was pooled");
    // Segment 4 is prepared from the pool; the file appears under its name once its old
    // bytes are forgotten and its header synced.
    append_to(&wal, 3 * SEG + SEG / 2);
    let next = wal.segment_path(4);
    let start = Instant::now();
    while !next.exists() && start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let bytes = std::fs::read(&next).unwrap();
    assert_eq!(bytes.len() as u64, SEG);
    let old = bytes[4096..].iter().filter(|&&b| b != 0).count();
    assert_eq!(
        old, 0,
        "{old} old bytes after the header's page of the recycled segment"
    );
    // Writers go on into it, and the log reads back whole after a reopen.
    append_to(&wal, 4 * SEG + SEG / 2);
    let end = wal.reserved_lsn();
    assert_eq!(wal.poison_cause(), None);
    wal.close().unwrap();
    let wal = Wal::open(dir.path(), opts()).unwrap();
    let mut n = 0u64;
    let mut last = 0;
    for r in wal.read_from(0).unwrap() {
        let r = r.unwrap();
        assert_eq!(&r.payload[..], &[7u8; 1000][..]);
        last = r.lsn;
        n += 1;
    }
    assert!(
        n > 0 && last < end && last + 1100 > end,
        "the tail survived: {n} records, last {last}, end {end}"
    );
}
