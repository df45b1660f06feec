//! `silt-vfs`: the file layer between silt's storage (the write-ahead log, the tables, the
//! manifest) and the operating system.
//!
//! Nothing in silt calls the OS's file API directly: it goes through [`FileSystem`] and
//! [`File`], so a test can swap in `SimFs` (feature `sim`), which keeps unsynced writes
//! apart from durable ones and can "lose power" (drop, keep a prefix of, or tear unsynced
//! writes) or fail the N-th call. Pebble's `vfs` package and LevelDB's `Env` are the same
//! idea.
//!
//! Implementations:
//!
//! * [`OsFs`]: the real one (`pwritev`, `fdatasync`, `flock`, and a shared memory mapping for
//!   [`File::write_mapped`]);
//! * `SimFs` (feature `sim`): the crash and I/O-error simulator the tests run on;
//! * `DelayFs` (feature `delay`): a wrapper that makes every `fdatasync` take longer, so a
//!   slow device can be studied on a fast one (the benchmarks' `--fsync-delay-us`).
//!
//! This crate owns the file abstraction only; it knows nothing about logs, tables or
//! manifests, and depends on no other silt crate.

#![warn(missing_docs)]

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[cfg(feature = "delay")]
mod delay;
mod os;
#[cfg(feature = "sim")]
mod sim;

#[cfg(feature = "delay")]
pub use delay::DelayFs;
pub use os::OsFs;
#[cfg(feature = "sim")]
pub use sim::{CrashMode, FailOp, SimFs};

/// A directory tree of files.
///
/// All paths are absolute or relative to the process's working directory, as the caller
/// gave them.
pub trait FileSystem: Send + Sync + std::fmt::Debug + 'static {
    /// Creates `dir` and its parents if missing.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// The paths of the regular files directly inside `dir`.
    fn list(&self, dir: &Path) -> io::Result<Vec<PathBuf>>;
    /// Creates a new, empty file (fails if it exists) opened for reading and writing.
    fn create(&self, path: &Path) -> io::Result<Arc<dyn File>>;
    /// Opens an existing file for reading and writing.
    fn open(&self, path: &Path) -> io::Result<Arc<dyn File>>;
    /// Renames `from` to `to`, replacing `to` if it exists. Durable once the directory is synced.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes a file. Durable once the directory is synced.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Makes the directory's entries (creations, renames, removals) durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Makes `to` a second name of the file `from` (a hard link); durable once `to`'s
    /// directory is synced. Fails if `to` exists. A file system that has no links (or two
    /// paths on different devices) fails, and the caller copies instead (checkpoints do).
    /// Default: `Unsupported`.
    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        let _ = (from, to);
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this file system has no hard links",
        ))
    }
    /// How many names (hard links) the file `path` has. Default: 1 (a file system without
    /// links).
    fn link_count(&self, path: &Path) -> io::Result<u64> {
        let _ = path;
        Ok(1)
    }
    /// Removes the empty directory `dir`. Default: `Unsupported` (the directory stays).
    fn remove_dir(&self, dir: &Path) -> io::Result<()> {
        let _ = dir;
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this file system cannot remove directories",
        ))
    }
    /// Takes an exclusive lock on the file `path` (created if missing) for as long as the
    /// returned guard lives. Fails with [`io::ErrorKind::WouldBlock`] at once, without
    /// waiting, while anyone else holds it: another process, or another guard of this
    /// process. A crash releases it.
    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>>;
}

/// A held [`FileSystem::lock`]; dropping it releases the lock.
pub trait FileLock: Send + Sync + std::fmt::Debug {}

/// Why [`FileSystem::lock`] was refused, inside its [`io::ErrorKind::WouldBlock`] error
/// (`err.get_ref()` downcasts to it): who holds the lock, when that can be known. A caller
/// must take the holder from here rather than open the lock file to read it: with POSIX
/// locks, closing any descriptor of the file releases this process's lock on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockHeld {
    /// The holder's process id, as it wrote it into the lock file (`None` if unreadable).
    pub holder: Option<u32>,
}

impl LockHeld {
    /// The `WouldBlock` error carrying this.
    pub fn error(holder: Option<u32>) -> io::Error {
        io::Error::new(io::ErrorKind::WouldBlock, LockHeld { holder })
    }

    /// The holder information inside a refused lock's error, if the file layer gave it.
    pub fn of(e: &io::Error) -> Option<LockHeld> {
        e.get_ref()?.downcast_ref::<LockHeld>().copied()
    }
}

impl std::fmt::Display for LockHeld {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.holder {
            Some(pid) => write!(f, "the lock is held by process {pid}"),
            None => write!(f, "the lock is held"),
        }
    }
}

impl std::error::Error for LockHeld {}

/// Writes zeros over `offset..offset + len` through `write`, one call per `piece`-aligned
/// piece (the first and last may be shorter), so no call crosses a `piece` boundary.
pub(crate) fn zeros_in_pieces(
    offset: u64,
    len: u64,
    piece: u64,
    mut write: impl FnMut(&[u8], u64) -> io::Result<()>,
) -> io::Result<()> {
    let zeros = vec![0u8; piece.min(len) as usize];
    let end = offset.saturating_add(len);
    let mut off = offset;
    while off < end {
        let n = (piece - off % piece).min(end - off) as usize;
        write(&zeros[..n], off)?;
        off += n as u64;
    }
    Ok(())
}

/// An open file.
///
/// Every method may be called from many threads at once; writes to disjoint ranges do not
/// interfere. A write is "in the OS" when the call returns (a process crash does not lose it);
/// it is durable after a later [`File::sync_data`] returns `Ok`.
pub trait File: Send + Sync + std::fmt::Debug {
    /// The file's length in bytes.
    fn len(&self) -> io::Result<u64>;
    /// Whether the file is empty.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
    /// Sets the file's length; new bytes read as zero. Durable after `sync_data`.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Extends the file to `len` bytes, reserving its blocks on the device without writing
    /// them (`fallocate`): new bytes read as zero, and a later write into them cannot fail
    /// for want of space. Durable after `sync_data`. Default: [`File::set_len`].
    fn allocate(&self, len: u64) -> io::Result<()> {
        self.set_len(len)
    }
    /// Reads exactly `buf.len()` bytes at `offset`; reading past the end is an error of kind
    /// `UnexpectedEof`.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Writes all of `bufs`, one after another, starting at `offset` (one `pwritev`).
    fn write_at(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()>;
    /// Like [`File::write_at`], but may copy into a shared memory mapping of the file
    /// instead of making a system call. The bytes must lie inside the current length.
    /// The result is equally "in the OS": a process crash does not lose it.
    fn write_mapped(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()> {
        self.write_at(bufs, offset)
    }
    /// Writes zeros over `offset..offset + len`, so that a later small write into the
    /// range followed by [`File::sync_data`] sends only the pages it touched to the
    /// device. Default: [`File::write_at`] in 1 MiB pieces (a file system without a page
    /// cache, such as the simulated one, has nothing more to take care of).
    fn write_zeros(&self, offset: u64, len: u64) -> io::Result<()> {
        zeros_in_pieces(offset, len, 1 << 20, |z, at| self.write_at(&[z], at))
    }
    /// `fdatasync`: makes every write that returned before this call durable.
    fn sync_data(&self) -> io::Result<()>;
    /// A hint that `offset..offset + len` will soon be written in small pieces: start
    /// reading its pages into the page cache now, without waiting for them
    /// (`posix_fadvise(POSIX_FADV_WILLNEED)`). A write smaller than a page, or a store
    /// through [`File::write_mapped`], into a page that is not cached waits for the page
    /// to be read from the device first; a reused file's pages may have left the cache
    /// since it was last written (reclaim of cold pages), and on a busy device that read
    /// took 200 ms in a commit. Default: no-op.
    fn prefetch(&self, _offset: u64, _len: u64) {}
    /// A hint that the bytes of `offset..offset + len` will be overwritten before anything
    /// reads them: the file system may forget them, so that a later small write there does
    /// not first read the page it lands in from the device. Forgotten bytes read as zeros;
    /// the rest keep their old bytes. On Linux `fallocate(FALLOC_FL_ZERO_RANGE)`: the blocks
    /// stay allocated, marked unwritten (a change to the file's metadata, durable after
    /// [`File::sync_data`]), and the range's pages leave the page cache. Where the file
    /// system cannot, nothing (the default): the bytes stay.
    fn forget(&self, _offset: u64, _len: u64) -> io::Result<()> {
        Ok(())
    }
    /// A hint that [`File::write_mapped`] will not be used for a while: drop the mapping it
    /// made, so the file's pages stop counting in the process's resident memory. Writes
    /// already made stay in the OS; a later `write_mapped` maps the file again. Default: no-op.
    fn release_mapping(&self) {}
    /// A hint that `offset..offset + len` of the mapping [`File::write_mapped`] made will not
    /// be written again: its pages leave the process's resident memory (`madvise`
    /// `MADV_DONTNEED`; the bytes stay in the page cache and the file, and a later write
    /// there maps the page again, as on Linux). `offset` is a multiple of the page size.
    /// Default: no-op.
    fn release_mapped_range(&self, _offset: u64, _len: u64) {}
    /// A read-only shared mapping of the file's first `len` bytes, through which bytes
    /// already written (by any means) can be read in place, without a copy or a system
    /// call; `None` where the file system maps nothing (the default, and the simulated
    /// one). The caller must read only bytes that were written and must not shrink the file
    /// below them while the mapping lives (a read past the file's end faults).
    fn map_read(&self, _len: u64) -> io::Result<Option<Arc<ReadMap>>> {
        Ok(None)
    }
}

/// A read-only shared mapping of a file ([`File::map_read`]): its bytes stay valid, at the
/// same address, until the last `Arc` is dropped, even if the file is unlinked meanwhile.
/// Only a raw pointer is handed out: the mapping may extend past what was written.
pub struct ReadMap {
    map: memmap2::Mmap,
}

impl ReadMap {
    pub(crate) fn new(map: memmap2::Mmap) -> ReadMap {
        ReadMap { map }
    }

    /// The mapping's first byte.
    pub fn as_ptr(&self) -> *const u8 {
        self.map.as_ptr()
    }

    /// The mapping's length in bytes.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the mapping is empty.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

impl std::fmt::Debug for ReadMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadMap").field("len", &self.len()).finish()
    }
}
