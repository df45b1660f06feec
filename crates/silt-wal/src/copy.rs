//! Copies of a log for checkpoints and backups, and a fresh log that continues another's
//! LSNs (for repair): [`Wal::hold_purge`], [`Wal::copy_range`], [`Wal::create_after`].
//!
//! Invariants:
//! 1. While a [`PurgeHold`] at `lsn` lives, [`Wal::purge_up_to`] removes no segment holding
//!    an LSN at or above `lsn`, so a copy can read every record it needs.
//! 2. A copy of `[from, to)` holds, at the same LSNs, exactly the records of this log in
//!    that range (and the whole records of the copied segments before `from`), and zeros
//!    from `to` to the end of its last segment: opened with [`Wal::open`] it ends at `to`,
//!    whatever a writer appended past `to` while the copy ran.
//! 3. The copy is synced (files and directory) before `copy_range` returns.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;
use silt_vfs::FileSystem;

use crate::error::{Error, Result};
use crate::format::SEGMENT_HEADER_BYTES;
use crate::options::Options;
use crate::segment::{parse_segment_name, segment_path, Segments};
use crate::{Lsn, Wal};

/// Keeps [`Wal::purge_up_to`] from removing segments at or above an LSN while it lives
/// (from [`Wal::hold_purge`]). Dropping it releases the hold; the next purge catches up.
#[derive(Debug)]
pub struct PurgeHold {
    holds: Arc<Mutex<std::collections::BTreeMap<Lsn, usize>>>,
    lsn: Lsn,
}

impl Drop for PurgeHold {
    fn drop(&mut self) {
        let mut h = self.holds.lock();
        if let Some(n) = h.get_mut(&self.lsn) {
            *n -= 1;
            if *n == 0 {
                h.remove(&self.lsn);
            }
        }
    }
}

/// Chunk size of a segment copy.
const COPY_CHUNK_BYTES: u64 = 1 << 20;

impl Wal {
    /// Holds every segment that contains an LSN at or above `lsn` until the returned guard
    /// is dropped: [`Wal::purge_up_to`] stops below it (invariant 1). For a checkpoint or a
    /// backup that copies records from `lsn` on.
    pub fn hold_purge(&self, lsn: Lsn) -> PurgeHold {
        *self.holds.lock().entry(lsn).or_insert(0) += 1;
        PurgeHold {
            holds: self.holds.clone(),
            lsn,
        }
    }

    /// Writes into `dest` (a directory, created if missing, holding no segment) a log whose
    /// records are this log's records below `to`, from the segment holding `from` on
    /// (invariant 2): segment files copied byte for byte, the last one zeroed from `to`.
    /// Every record below `to` must already be in the OS (below the filled watermark: an
    /// engine passes a watermark its readers see). Returns the files written.
    ///
    /// Safe while appends continue. A log opened with [`Wal::open_read_only`] beside a
    /// writer in another process may see that writer purge a segment under the copy: the
    /// segments' names are checked again after copying, and a segment gone is `Corruption`
    /// (reopen and copy again).
    ///
    /// # Errors
    ///
    /// `InvalidArgument` if `from > to`, `to` is above what this handle has seen, or `dest`
    /// already holds a segment; `Corruption` if a segment needed was purged; `Io` if a
    /// call fails.
    pub fn copy_range(
        &self,
        from: Lsn,
        to: Lsn,
        dest: &Path,
        dest_fs: &dyn FileSystem,
    ) -> Result<Vec<PathBuf>> {
        let segs = &self.inner.segments;
        let s = segs.segment_bytes;
        if from > to || to > self.inner.ring.filled() {
            return Err(Error::InvalidArgument(format!(
                "copy_range({from}, {to}): the range must be ordered and below the filled \
                 watermark {}",
                self.inner.ring.filled()
            )));
        }
        dest_fs
            .create_dir_all(dest)
            .map_err(|e| Error::io("create directory", Some(dest.to_path_buf()), e))?;
        let present = dest_fs
            .list(dest)
            .map_err(|e| Error::io("list directory", Some(dest.to_path_buf()), e))?;
        if present.iter().any(|p| parse_segment_name(p).is_some()) {
            return Err(Error::InvalidArgument(format!(
                "{} already holds log segments",
                dest.display()
            )));
        }
        // The segment holding `from`; when `from` is a segment's first byte, the record
        // before it ended the previous segment, which then carries the log's end.
        let lo = from.saturating_sub(1) / s;
        let hi = (to.saturating_sub(1) / s).max(lo);
        let mut written = Vec::new();
        let mut buf = vec![0u8; COPY_CHUNK_BYTES as usize];
        for id in lo..=hi {
            let src = segs.existing(id).ok_or_else(|| {
                Error::corruption(
                    segs.path(id),
                    0,
                    "a log segment the copy needs was purged (a writer moved on): copy again",
                )
            })?;
            let to_path = segment_path(dest, id);
            let out = dest_fs
                .create(&to_path)
                .map_err(|e| Error::io("create", Some(to_path.clone()), e))?;
            // Bytes at or past `to` read as zeros in the copy (invariant 2).
            let keep_end = if to / s == id { to % s } else { s };
            let keep_end = keep_end.max(SEGMENT_HEADER_BYTES);
            let mut off = 0;
            while off < s {
                let n = COPY_CHUNK_BYTES.min(s - off);
                let chunk = &mut buf[..n as usize];
                if off < keep_end {
                    src.read_at(chunk, off)
                        .map_err(|e| Error::io("read", Some(segs.path(id)), e))?;
                    if off + n > keep_end {
                        chunk[(keep_end - off) as usize..].fill(0);
                    }
                } else {
                    chunk.fill(0);
                }
                out.write_at(&[chunk], off)
                    .map_err(|e| Error::io("pwrite", Some(to_path.clone()), e))?;
                off += n;
            }
            out.sync_data()
                .map_err(|e| Error::io("fdatasync", Some(to_path.clone()), e))?;
            written.push(to_path);
        }
        dest_fs
            .sync_dir(dest)
            .map_err(|e| Error::io("fsync directory", Some(dest.to_path_buf()), e))?;
        // A writer in another process may have purged (and recycled) a segment while it
        // was read.
        self.check_unpurged(lo * s + SEGMENT_HEADER_BYTES, hi * s + SEGMENT_HEADER_BYTES)?;
        Ok(written)
    }

    /// Checks that every segment holding an LSN in `[from, to]` is still in the log's
    /// directory under its name. Names are never reused, so a handle that read records
    /// from those segments (a read-only one, beside a writer in another process) knows
    /// that no purge or recycling changed them under it.
    ///
    /// # Errors
    ///
    /// `Corruption` naming the first segment gone; `Io` if the directory cannot be listed.
    pub fn check_unpurged(&self, from: Lsn, to: Lsn) -> Result<()> {
        let segs = &self.inner.segments;
        let s = segs.segment_bytes;
        let names = segs
            .fs
            .list(&segs.dir)
            .map_err(|e| Error::io("list directory", Some(segs.dir.clone()), e))?;
        for id in from / s..=to / s {
            if segs.existing(id).is_some() && !names.contains(&segs.path(id)) {
                return Err(Error::corruption(
                    segs.path(id),
                    0,
                    "a log segment was purged while it was read (a writer moved on): read \
                     again",
                ));
            }
        }
        Ok(())
    }

    /// Creates in `dir` (holding no segment) an empty log that continues after `lsn`: its
    /// first segment is the one after the segment holding `lsn`, so every record appended
    /// to it gets an LSN above `lsn`. For repair: a database whose seqnos are LSNs must
    /// never reuse one. Returns the LSN of the first record it will take. Open it with
    /// [`Wal::open`].
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for bad options or if `dir` holds a segment; `Io` if a call fails.
    pub fn create_after(dir: &Path, opts: Options, lsn: Lsn) -> Result<Lsn> {
        crate::wal::validate(&opts)?;
        let fs = opts.fs.clone();
        fs.create_dir_all(dir)
            .map_err(|e| Error::io("create directory", Some(dir.to_path_buf()), e))?;
        let present = fs
            .list(dir)
            .map_err(|e| Error::io("list directory", Some(dir.to_path_buf()), e))?;
        if present.iter().any(|p| parse_segment_name(p).is_some()) {
            return Err(Error::InvalidArgument(format!(
                "{} already holds log segments",
                dir.display()
            )));
        }
        let s = opts.segment_bytes;
        let id = lsn / s + 1;
        let segments = Segments::new(
            fs,
            dir.to_path_buf(),
            s,
            crate::Preallocate::ZeroFill,
            0,
            Default::default(),
            Vec::new(),
        );
        segments.get(id)?;
        Ok(id * s + SEGMENT_HEADER_BYTES)
    }
}
