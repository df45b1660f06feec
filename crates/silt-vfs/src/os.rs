//! [`OsFs`]: the real file layer.
//!
//! Writes go through `pwritev` ([`File::write_at`]) or, for [`File::write_mapped`], a
//! `memcpy` into a shared (`MAP_SHARED`) mapping of the file. A store into a shared mapping
//! lands in the same page cache that `pwrite` fills, so it is "in the OS" as soon as the copy
//! ends: a process crash cannot lose it, and `fdatasync` on the file makes it durable. The
//! mapping saves one system call per commit when the log does not sync.
//!
//! Caveat of mappings: if another process truncates a mapped file, a store into the lost
//! range raises `SIGBUS`. The engine owns its directory; nothing else should write there.

use std::collections::BTreeSet;
use std::fs::{self as stdfs, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memmap2::MmapRaw;
use parking_lot::{Mutex, RwLock};

use crate::{File, FileLock, FileSystem, LockHeld};

/// The operating system's file system.
#[derive(Debug, Default)]
pub struct OsFs(());

impl OsFs {
    /// The real file system, shared.
    pub fn new() -> Arc<OsFs> {
        Arc::new(OsFs(()))
    }
}

impl FileSystem for OsFs {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            if entry.file_type()?.is_file() {
                out.push(entry.path());
            }
        }
        out.sort();
        Ok(out)
    }

    fn create(&self, path: &Path) -> io::Result<Arc<dyn File>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(path)?;
        Ok(Arc::new(OsFile::new(file)))
    }

    fn open(&self, path: &Path) -> io::Result<Arc<dyn File>> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        Ok(Arc::new(OsFile::new(file)))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::hard_link(from, to)
    }

    fn link_count(&self, path: &Path) -> io::Result<u64> {
        use std::os::unix::fs::MetadataExt;
        Ok(std::fs::metadata(path)?.nlink())
    }

    fn remove_dir(&self, dir: &Path) -> io::Result<()> {
        std::fs::remove_dir(dir)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        stdfs::File::open(dir)?.sync_all()
    }

    /// An exclusive POSIX record lock (`fcntl(F_SETLK)`) on the whole file, as LevelDB and
    /// RocksDB lock their `LOCK` file, plus a table of the paths this process holds.
    ///
    /// Why not `flock`: a `flock` belongs to the open file description, which a child
    /// process `fork`ed by another thread shares until it `exec`s; closing our handle then
    /// leaves the lock held by that child for a moment, and an open right after a close
    /// was refused (seen in the kill -9 tests, which spawn processes from several threads).
    /// POSIX locks belong to the process and are not inherited. Their two traps are handled
    /// here: they never conflict within one process (the table refuses a second lock of the
    /// same path), and closing *any* descriptor of the file releases them (only this
    /// function opens a lock file, holding the table's mutex, and a refused caller learns
    /// the holder from [`LockHeld`] instead of opening the file again). The holder writes
    /// its process id into the file.
    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>> {
        let key = lock_key(path)?;
        let mut held = HELD.lock();
        if held.contains(&key) {
            return Err(LockHeld::error(Some(std::process::id())));
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o644)
            .open(path)?;
        if let Err(e) =
            rustix::fs::fcntl_lock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive)
        {
            if e == rustix::io::Errno::AGAIN || e == rustix::io::Errno::ACCESS {
                // Another process holds it. This process holds no lock on the file, so
                // reading through (and closing) this descriptor releases nothing.
                let mut buf = [0u8; 32];
                let n = file.read_at(&mut buf, 0).unwrap_or(0);
                let holder = std::str::from_utf8(&buf[..n])
                    .ok()
                    .and_then(|s| s.trim().parse().ok());
                return Err(LockHeld::error(holder));
            }
            return Err(io::Error::from(e));
        }
        file.set_len(0)?;
        file.write_all_at(format!("{}\n", std::process::id()).as_bytes(), 0)?;
        held.insert(key.clone());
        Ok(Box::new(OsLock {
            file: Some(file),
            key,
        }))
    }
}

/// The lock files this process holds, by [`lock_key`].
static HELD: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());

/// The identity of a lock file: its directory, resolved (symbolic links, `..`), and its
/// name, so two spellings of one path are one lock.
fn lock_key(path: &Path) -> io::Result<PathBuf> {
    let name = path.file_name().ok_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidInput, "a lock path needs a file name")
    })?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    Ok(stdfs::canonicalize(dir)?.join(name))
}

/// A held lock: dropping it closes the file (releasing the POSIX lock) and then forgets the
/// path, both under the table's mutex, so no other handle of this process can lock the
/// path in between (it would get a lock that our close then released).
#[derive(Debug)]
struct OsLock {
    file: Option<stdfs::File>,
    key: PathBuf,
}

impl Drop for OsLock {
    fn drop(&mut self) {
        let mut held = HELD.lock();
        drop(self.file.take());
        held.remove(&self.key);
    }
}

impl FileLock for OsLock {}

/// Bytes of a zero-fill whose writeback is started together ([`File::write_zeros`]).
const PACE_BYTES: u64 = 1 << 20;

/// Starts writeback behind a sequential write every [`PACE_BYTES`], and waits for the piece
/// before, so the write never has more than two pieces on their way to the device.
struct Pacer {
    /// Where the piece being written starts.
    piece: u64,
    /// Where the piece before it started, if its writeback was started and not waited for.
    started: Option<u64>,
    /// Pacing is off: `sync_file_range` is not supported here, or starting a piece's
    /// writeback failed (a hint only: the write goes on, and its `fdatasync` decides).
    off: bool,
}

impl Pacer {
    fn new(offset: u64) -> Pacer {
        Pacer {
            piece: offset,
            started: None,
            // Elsewhere the first `sync_range` answers "not supported" and turns it off.
            off: false,
        }
    }

    /// The write has reached `end`.
    fn wrote(&mut self, file: &stdfs::File, end: u64) -> io::Result<()> {
        if self.off || end - self.piece < PACE_BYTES {
            return Ok(());
        }
        // Starting writeback does not touch the file's writeback error, so a failure here
        // only ends the pacing; waiting does report and clear that error, so a failed wait
        // is the write's failure (the final `fdatasync` would no longer see it).
        if !matches!(
            sync_range(file, self.piece, end - self.piece, false),
            Ok(true)
        ) {
            self.off = true;
            return Ok(());
        }
        if let Some(prev) = self.started {
            sync_range(file, prev, self.piece - prev, true)?;
        }
        self.started = Some(self.piece);
        self.piece = end;
        Ok(())
    }
}

/// `sync_file_range` over `offset..offset + len`: start writeback of its dirty pages, and
/// with `wait`, wait for them too (a hint for pacing, not durability: no metadata, no
/// device cache flush). `Ok(false)`: not supported here.
#[cfg(target_os = "linux")]
fn sync_range(file: &stdfs::File, offset: u64, len: u64, wait: bool) -> io::Result<bool> {
    use std::os::fd::AsRawFd;
    let flags = if wait {
        libc::SYNC_FILE_RANGE_WAIT_BEFORE
            | libc::SYNC_FILE_RANGE_WRITE
            | libc::SYNC_FILE_RANGE_WAIT_AFTER
    } else {
        libc::SYNC_FILE_RANGE_WRITE
    };
    let (Ok(off), Ok(n)) = (i64::try_from(offset), i64::try_from(len)) else {
        return Ok(false);
    };
    // SAFETY: a plain system call on an open descriptor this file owns; no memory is passed.
    let r = unsafe { libc::sync_file_range(file.as_raw_fd(), off, n, flags) };
    if r == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::ENOSYS) | Some(libc::EINVAL) | Some(libc::ESPIPE) => Ok(false),
        _ => Err(e),
    }
}

#[cfg(not(target_os = "linux"))]
fn sync_range(_file: &stdfs::File, _offset: u64, _len: u64, _wait: bool) -> io::Result<bool> {
    Ok(false)
}

/// An open file and, once [`File::write_mapped`] was used, a shared mapping of it.
struct OsFile {
    file: stdfs::File,
    /// The mapping covers the file's length at the time it was made; `set_len` drops it.
    map: RwLock<Option<MmapRaw>>,
}

impl std::fmt::Debug for OsFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OsFile").field("file", &self.file).finish()
    }
}

impl OsFile {
    fn new(file: stdfs::File) -> Self {
        OsFile {
            file,
            map: RwLock::new(None),
        }
    }

    fn copy_into(map: &MmapRaw, bufs: &[&[u8]], offset: u64) -> io::Result<()> {
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        let end = offset as usize + total;
        if end > map.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "write_mapped past the end of the file",
            ));
        }
        let mut at = offset as usize;
        for b in bufs {
            // SAFETY: `at..at + b.len()` lies inside the mapping (checked above). The caller
            // (the log) gives each writer a disjoint byte range, so no two threads copy to the same
            // bytes, and nothing in this process holds a Rust reference into the mapping.
            unsafe {
                std::ptr::copy_nonoverlapping(b.as_ptr(), map.as_mut_ptr().add(at), b.len());
            }
            at += b.len();
        }
        Ok(())
    }
}

impl File for OsFile {
    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        *self.map.write() = None;
        self.file.set_len(len)
    }

    fn allocate(&self, len: u64) -> io::Result<()> {
        *self.map.write() = None;
        match rustix::fs::fallocate(&self.file, rustix::fs::FallocateFlags::empty(), 0, len) {
            Ok(()) => Ok(()),
            // A file system without fallocate (tmpfs has it; some FUSE ones do not).
            Err(e) if e == rustix::io::Errno::OPNOTSUPP => self.file.set_len(len),
            Err(e) => Err(e.into()),
        }
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }

    /// One `pwrite` per page. Linux (6.16 and later on ext4; XFS earlier) makes each
    /// page-cache folio as large as the write that created it, up to 2 MiB, and writeback
    /// sends a dirty folio whole: after a zero-fill in 1 MiB writes, every `fdatasync` of a
    /// 116-byte log record wrote 1 MiB to the device (write amplification ~4,600 on
    /// durable single-record commits; docs/design.md, "Segments"). Written page by page,
    /// the folios are single pages, and a record's sync writes the pages it touched.
    ///
    /// Paced (Linux): after each [`PACE_BYTES`] written, their writeback is started and the
    /// previous piece's is waited for (`sync_file_range`, as RocksDB's `bytes_per_sync`),
    /// so at most two pieces are in flight. Written in one burst, a log segment's 16 MiB of
    /// zeros went to the device at once, and a durable commit's `fdatasync` that came while
    /// the background preparer's did waited behind all of it (15-20 ms: the worst batch of
    /// every durable cell). An error from a wait is returned, not swallowed: waiting reports
    /// and clears the file's writeback error, which the final `fdatasync` would then miss.
    fn write_zeros(&self, offset: u64, len: u64) -> io::Result<()> {
        let page = rustix::param::page_size() as u64;
        let mut pacer = Pacer::new(offset);
        crate::zeros_in_pieces(offset, len, page, |z, at| {
            self.file.write_all_at(z, at)?;
            pacer.wrote(&self.file, at + z.len() as u64)
        })
    }

    fn write_at(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()> {
        let mut slices: Vec<io::IoSlice<'_>> = bufs.iter().map(|b| io::IoSlice::new(b)).collect();
        let mut slices = &mut slices[..];
        let mut at = offset;
        while !slices.is_empty() {
            let n = rustix::io::pwritev(&self.file, slices, at)?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            at += n as u64;
            io::IoSlice::advance_slices(&mut slices, n);
        }
        Ok(())
    }

    fn write_mapped(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()> {
        {
            let map = self.map.read();
            if let Some(m) = map.as_ref() {
                return Self::copy_into(m, bufs, offset);
            }
        }
        let mut map = self.map.write();
        if map.is_none() {
            *map = Some(MmapRaw::map_raw(&self.file)?);
        }
        let m = map.as_ref().expect("mapping was just made");
        Self::copy_into(m, bufs, offset)
    }

    fn sync_data(&self) -> io::Result<()> {
        rustix::fs::fdatasync(&self.file)?;
        Ok(())
    }

    #[cfg(target_os = "linux")]
    fn forget(&self, offset: u64, len: u64) -> io::Result<()> {
        if len == 0 {
            return Ok(());
        }
        match rustix::fs::fallocate(
            &self.file,
            rustix::fs::FallocateFlags::ZERO_RANGE,
            offset,
            len,
        ) {
            // A file system without it (some FUSE ones): the bytes stay.
            Ok(()) | Err(rustix::io::Errno::OPNOTSUPP) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// In 1 MiB pieces: one `WILLNEED` reads no more than the device's readahead window
    /// (`max(io_pages, ra_pages)`: of a 17 MiB segment, the first 8 MiB here, measured
    /// with `fincore`); piece by piece the whole range is read, asynchronously (17 MiB
    /// took 3.8 ms of calls).
    fn prefetch(&self, offset: u64, len: u64) {
        const PIECE: u64 = 1 << 20;
        let end = offset.saturating_add(len);
        let mut at = offset;
        while at < end {
            let n = (end - at).min(PIECE);
            // A hint: a file system that refuses it (`ESPIPE`, `EINVAL`) reads on demand.
            // (`n` is not zero: `None` would mean "to the end of the file".)
            if rustix::fs::fadvise(
                &self.file,
                at,
                std::num::NonZeroU64::new(n),
                rustix::fs::Advice::WillNeed,
            )
            .is_err()
            {
                return;
            }
            at += n;
        }
    }

    fn release_mapping(&self) {
        // Waits for copies in progress (they hold the read lock).
        *self.map.write() = None;
    }

    fn release_mapped_range(&self, offset: u64, len: u64) {
        let map = self.map.read();
        let Some(m) = map.as_ref() else { return };
        let end = offset.saturating_add(len).min(m.len() as u64);
        if offset >= end {
            return;
        }
        // SAFETY: MADV_DONTNEED on a shared file mapping drops page-table entries only: the
        // pages (and what was stored in them, dirty or not) stay in the page cache, and any
        // later access, a straggling copy included, maps the same page again. Nothing in this
        // process holds a Rust reference into the mapping (`copy_into` writes through raw
        // pointers), and the read lock keeps the mapping itself alive meanwhile.
        let r = unsafe {
            m.unchecked_advise_range(
                memmap2::UncheckedAdvice::DontNeed,
                offset as usize,
                (end - offset) as usize,
            )
        };
        // A hint: if the kernel refuses it (locked pages: `mlockall`), they stay resident.
        drop(r);
    }

    fn map_read(&self, len: u64) -> io::Result<Option<Arc<crate::ReadMap>>> {
        let Ok(len) = usize::try_from(len) else {
            return Ok(None);
        };
        if len == 0 {
            return Ok(None);
        }
        // SAFETY: a read-only shared mapping; `ReadMap` hands out only a raw pointer, and
        // `File::map_read`'s contract leaves the file unshrunk below what is read.
        let map = unsafe { memmap2::MmapOptions::new().len(len).map(&self.file)? };
        Ok(Some(Arc::new(crate::ReadMap::new(map))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_zeros_zeroes_exactly_its_range_from_any_offset() {
        let dir = tempfile::tempdir().unwrap();
        let fs = OsFs::new();
        let f = fs.create(&dir.path().join("z")).unwrap();
        f.write_at(&[&vec![0xAAu8; 20_000]], 0).unwrap();
        // Unaligned at both ends, crossing several pages, and past the old end.
        f.write_zeros(1_000, 25_000).unwrap();
        assert_eq!(f.len().unwrap(), 26_000);
        let mut buf = vec![0u8; 26_000];
        f.read_at(&mut buf, 0).unwrap();
        assert!(buf[..1_000].iter().all(|&b| b == 0xAA));
        assert!(buf[1_000..].iter().all(|&b| b == 0));
        f.write_zeros(26_000, 0).unwrap();
        assert_eq!(f.len().unwrap(), 26_000);
    }

    #[test]
    fn a_paced_zero_fill_over_several_pieces_zeroes_exactly_its_range() {
        let dir = tempfile::tempdir().unwrap();
        let fs = OsFs::new();
        let f = fs.create(&dir.path().join("z")).unwrap();
        let len = 3 * PACE_BYTES + PACE_BYTES / 2;
        f.write_at(&[&vec![0xAAu8; (len + 10_000) as usize]], 0)
            .unwrap();
        // From an unaligned offset, over three whole pieces and a part, inside the file.
        f.write_zeros(5_000, len).unwrap();
        f.sync_data().unwrap();
        let mut buf = vec![0u8; (len + 10_000) as usize];
        f.read_at(&mut buf, 0).unwrap();
        let end = (5_000 + len) as usize;
        assert!(buf[..5_000].iter().all(|&b| b == 0xAA));
        assert!(buf[5_000..end].iter().all(|&b| b == 0));
        assert!(buf[end..].iter().all(|&b| b == 0xAA));
    }

    #[test]
    fn a_lock_is_exclusive_in_this_process_names_the_holder_and_is_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let fs = OsFs::new();
        let path = dir.path().join("LOCK");
        let guard = fs.lock(&path).unwrap();
        // The same file by another spelling is the same lock.
        let other = dir.path().join(".").join("LOCK");
        for p in [&path, &other] {
            let e = fs.lock(p).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
            assert_eq!(
                LockHeld::of(&e),
                Some(LockHeld {
                    holder: Some(std::process::id())
                })
            );
        }
        let pid = std::fs::read_to_string(&path).unwrap();
        assert_eq!(pid.trim(), std::process::id().to_string());
        drop(guard);
        let again = fs.lock(&path).expect("released on drop");
        drop(again);
    }

    #[test]
    fn locks_of_different_files_are_independent() {
        let dir = tempfile::tempdir().unwrap();
        let fs = OsFs::new();
        let a = fs.lock(&dir.path().join("A")).unwrap();
        let b = fs.lock(&dir.path().join("B")).unwrap();
        drop((a, b));
    }
}
