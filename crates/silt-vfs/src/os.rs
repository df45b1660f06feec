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

use std::fs::{self as stdfs, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memmap2::MmapRaw;
use parking_lot::RwLock;

use crate::{File, FileLock, FileSystem};

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

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        stdfs::File::open(dir)?.sync_all()
    }

    /// `flock(LOCK_EX | LOCK_NB)`, as LevelDB and RocksDB lock their `LOCK` file. The lock
    /// belongs to this open file description, so a second `lock` of the same path in this
    /// process fails too. The holder writes its process id into the file, for the error
    /// message of whoever is refused.
    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o644)
            .open(path)?;
        rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive).map_err(
            |e| {
                if e == rustix::io::Errno::WOULDBLOCK {
                    io::Error::new(io::ErrorKind::WouldBlock, "the lock is held")
                } else {
                    io::Error::from(e)
                }
            },
        )?;
        file.set_len(0)?;
        file.write_all_at(format!("{}\n", std::process::id()).as_bytes(), 0)?;
        Ok(Box::new(OsLock(file)))
    }
}

/// A held `flock`: closing the file releases it.
#[derive(Debug)]
struct OsLock(#[allow(dead_code)] stdfs::File);

impl FileLock for OsLock {}

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

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
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
}
