//! The file layer between the log and the operating system.
//!
//! The log never calls the OS directly: it goes through [`FileSystem`] and [`LogFile`], so a
//! test can swap in [`SimFs`], which keeps unsynced writes apart from durable ones and can
//! "lose power" (drop, keep a prefix of, or tear unsynced writes) or fail the N-th call.
//!
//! Implementations: [`OsFs`] (the real one: `pwritev`, `fdatasync`, and a shared memory
//! mapping for [`LogFile::write_mapped`]), [`SimFs`] (tests), and [`DelayFs`], a wrapper that
//! makes every `fdatasync` take longer so a slow device can be studied on a fast one.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

mod delay;
mod os;
mod sim;

pub use delay::DelayFs;
pub use os::OsFs;
pub use sim::{CrashMode, FailOp, SimFs};

/// A directory tree of log files.
///
/// All paths are absolute or relative to the process's working directory, as given to
/// [`crate::Wal::open`].
pub trait FileSystem: Send + Sync + std::fmt::Debug + 'static {
    /// Creates `dir` and its parents if missing.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// The paths of the regular files directly inside `dir`.
    fn list(&self, dir: &Path) -> io::Result<Vec<PathBuf>>;
    /// Creates a new, empty file (fails if it exists) opened for reading and writing.
    fn create(&self, path: &Path) -> io::Result<Arc<dyn LogFile>>;
    /// Opens an existing file for reading and writing.
    fn open(&self, path: &Path) -> io::Result<Arc<dyn LogFile>>;
    /// Renames `from` to `to`, replacing `to` if it exists. Durable once the directory is synced.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes a file. Durable once the directory is synced.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Makes the directory's entries (creations, renames, removals) durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Takes an exclusive lock on the file `path` (created if missing) for as long as the
    /// returned guard lives. Fails with [`io::ErrorKind::WouldBlock`] at once, without
    /// waiting, while anyone else holds it: another process, or another guard of this
    /// process. A crash releases it.
    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>>;
}

/// A held [`FileSystem::lock`]; dropping it releases the lock.
pub trait FileLock: Send + Sync + std::fmt::Debug {}

/// An open log file.
///
/// Every method may be called from many threads at once; writes to disjoint ranges do not
/// interfere. A write is "in the OS" when the call returns (a process crash does not lose it);
/// it is durable after a later [`LogFile::sync_data`] returns `Ok`.
pub trait LogFile: Send + Sync + std::fmt::Debug {
    /// The file's length in bytes.
    fn len(&self) -> io::Result<u64>;
    /// Whether the file is empty.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
    /// Sets the file's length; new bytes read as zero. Durable after `sync_data`.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Reads exactly `buf.len()` bytes at `offset`; reading past the end is an error of kind
    /// `UnexpectedEof`.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Writes all of `bufs`, one after another, starting at `offset` (one `pwritev`).
    fn write_at(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()>;
    /// Like [`LogFile::write_at`], but may copy into a shared memory mapping of the file
    /// instead of making a system call. The bytes must lie inside the current length.
    /// The result is equally "in the OS": a process crash does not lose it.
    fn write_mapped(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()> {
        self.write_at(bufs, offset)
    }
    /// `fdatasync`: makes every write that returned before this call durable.
    fn sync_data(&self) -> io::Result<()>;
}
