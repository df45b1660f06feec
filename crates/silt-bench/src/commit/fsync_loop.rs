//! The physical floor of the commit matrix (`--wal fsync-loop`): `pwrite` at the next
//! offset, then `fdatasync`, with nothing else around it.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use silt_vfs::{File, FileSystem};

/// The `fsync-loop` file never grows past this; longer runs wrap around inside it (the
/// blocks are allocated and written either way).
pub(super) const FLOOR_FILE_MAX: u64 = 1 << 30;

/// The physical floor: `pwrite` at the next offset, then `fdatasync` (under `full`). The
/// file is zero-filled to the cell's size and synced before timing, so no commit allocates
/// blocks or grows the file.
pub(super) struct FsyncLoop {
    pub(super) file: Arc<dyn File>,
    pub(super) next: AtomicU64,
    pub(super) len: u64,
    pub(super) sync_each: bool,
    pub(super) fsyncs: AtomicU64,
    pub(super) stop: std::sync::atomic::AtomicBool,
}

impl FsyncLoop {
    pub(super) fn open(
        fs: &Arc<dyn FileSystem>,
        dir: &Path,
        bytes: u64,
        sync_each: bool,
    ) -> Result<Self, String> {
        fs.create_dir_all(dir).map_err(|e| e.to_string())?;
        let file = fs
            .create(&dir.join("floor.dat"))
            .map_err(|e| e.to_string())?;
        let zeros = vec![0u8; 1 << 20];
        let mut off = 0;
        while off < bytes {
            let n = (bytes - off).min(zeros.len() as u64) as usize;
            file.write_at(&[&zeros[..n]], off)
                .map_err(|e| e.to_string())?;
            off += n as u64;
        }
        file.sync_data().map_err(|e| e.to_string())?;
        fs.sync_dir(dir).map_err(|e| e.to_string())?;
        Ok(FsyncLoop {
            file,
            next: AtomicU64::new(0),
            len: bytes,
            sync_each,
            fsyncs: AtomicU64::new(0),
            stop: Default::default(),
        })
    }

    pub(super) fn commit(&self, p: &[u8]) -> Result<(), String> {
        let room = self.len.saturating_sub(p.len() as u64).max(1);
        let at = self.next.fetch_add(p.len() as u64, Relaxed) % room;
        self.file.write_at(&[p], at).map_err(|e| e.to_string())?;
        if self.sync_each {
            self.fsyncs.fetch_add(1, Relaxed);
            self.file.sync_data().map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}
