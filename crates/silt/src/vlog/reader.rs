//! [`BlobFiles`]: the open blob files of a database and the checked read of one value
//! (`docs/format/vlog.md`, "Reading" and "At open").

use std::path::{Path, PathBuf};
use std::sync::Arc;

use silt_vfs::{File, FileSystem};

use super::format::{self, FOOTER_BYTES, HEADER_BYTES};
use crate::error::{Error, Result};
use crate::table_meta::{blob_file_name, BlobMeta, BlobPointer, LogSpan};
use crate::unlink::Unlinker;

/// Opens blob files on demand and keeps a bounded number open.
pub(crate) struct BlobFiles {
    open: quick_cache::sync::Cache<u64, Arc<dyn File>>,
    /// Files kept open for the life of this set (a read-only handle's, as
    /// `TableCache::pin`).
    pinned: std::sync::OnceLock<std::collections::HashMap<u64, Arc<dyn File>>>,
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    /// Removes the files of obsolete blob files, off the thread that dropped the last
    /// handle.
    pub(crate) unlinker: Arc<Unlinker>,
}

impl std::fmt::Debug for BlobFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlobFiles").field("dir", &self.dir).finish()
    }
}

impl BlobFiles {
    pub(crate) fn new(
        fs: Arc<dyn FileSystem>,
        dir: PathBuf,
        files_max: usize,
        unlinker: Arc<Unlinker>,
    ) -> BlobFiles {
        BlobFiles {
            open: quick_cache::sync::Cache::new(files_max.max(1)),
            pinned: std::sync::OnceLock::new(),
            fs,
            dir,
            unlinker,
        }
    }

    pub(crate) fn path(&self, id: u64) -> PathBuf {
        self.dir.join(blob_file_name(id))
    }

    pub(crate) fn fs(&self) -> &Arc<dyn FileSystem> {
        &self.fs
    }

    fn file(&self, id: u64) -> Result<Arc<dyn File>> {
        if let Some(f) = self.pinned.get().and_then(|p| p.get(&id)) {
            return Ok(f.clone());
        }
        self.open.get_or_insert_with(&id, || {
            let path = self.path(id);
            self.fs
                .open(&path)
                .map_err(|e| Error::io("open blob file", Some(path), e))
        })
    }

    /// Opens every blob file of `ids` now and keeps it open for the life of this set.
    /// Once per set.
    ///
    /// # Errors
    ///
    /// `Io` for the first file that does not open.
    pub(crate) fn pin(&self, ids: impl Iterator<Item = u64>) -> Result<()> {
        let mut map = std::collections::HashMap::new();
        for id in ids {
            map.insert(id, self.file(id)?);
        }
        let _ = self.pinned.set(map);
        Ok(())
    }

    /// Forgets the open file of `id` (it is being deleted).
    pub(crate) fn evict(&self, id: u64) {
        self.open.remove(&id);
    }

    /// The value `ptr` points at in blob file `meta` for `user_key`, checked: the record
    /// lies inside the file's records, its lengths and key are the pointer's, its checksum
    /// matches.
    pub(crate) fn read(
        &self,
        meta: &BlobMeta,
        ptr: BlobPointer,
        user_key: &[u8],
    ) -> Result<Vec<u8>> {
        let corrupt = |reason: String| Error::Corruption {
            file: self.path(meta.id),
            offset: ptr.offset,
            reason,
        };
        debug_assert_eq!(meta.id, ptr.id);
        if let Some(span) = meta.log {
            return self.read_log(meta, span, ptr);
        }
        if ptr.crc.is_some() {
            return Err(corrupt(
                "a log pointer (24 bytes) names a blob file, not a log blob".into(),
            ));
        }
        let len = format::record_bytes(user_key.len(), ptr.len as usize);
        let end = ptr.offset.checked_add(len);
        let records_end = meta.size_bytes.saturating_sub(FOOTER_BYTES);
        if ptr.offset < HEADER_BYTES || end.is_none_or(|e| e > records_end) {
            return Err(corrupt(format!(
                "a pointer to {len} bytes at offset {} lies outside the file's records (16..{records_end})",
                ptr.offset
            )));
        }
        let mut rec = vec![0u8; len as usize];
        self.file(meta.id)?
            .read_at(&mut rec, ptr.offset)
            .map_err(|e| Error::io("read blob file", Some(self.path(meta.id)), e))?;
        let v = format::check_record(&rec, user_key, ptr.len as usize).map_err(corrupt)?;
        let start = rec.len() - v.len();
        rec.drain(..start);
        Ok(rec)
    }
}

impl BlobFiles {
    /// The value a log pointer points at in log blob `meta` (`docs/format/vlog.md`, "Log
    /// blobs"): inside the span, and of the pointer's crc32c.
    fn read_log(&self, meta: &BlobMeta, span: LogSpan, ptr: BlobPointer) -> Result<Vec<u8>> {
        let corrupt = |reason: String| Error::Corruption {
            file: self.path(meta.id),
            offset: ptr.offset,
            reason,
        };
        let Some(crc) = ptr.crc else {
            return Err(corrupt(
                "a blob-file pointer (20 bytes) names a log blob".into(),
            ));
        };
        let end = ptr.offset.checked_add(u64::from(ptr.len));
        if ptr.offset < span.from || end.is_none_or(|e| e > span.to) {
            return Err(corrupt(format!(
                "a pointer to {} bytes at offset {} lies outside the log blob's span ({}..{})",
                ptr.len, ptr.offset, span.from, span.to
            )));
        }
        let mut v = vec![0u8; ptr.len as usize];
        self.file(meta.id)?
            .read_at(&mut v, ptr.offset)
            .map_err(|e| Error::io("read log blob", Some(self.path(meta.id)), e))?;
        if crc32c::crc32c(&v) != crc {
            return Err(corrupt("value checksum mismatch".into()));
        }
        Ok(v)
    }
}

/// The description of blob file `id` in `dir` read from the file itself (its length,
/// header and footer), for repair, which has no manifest to take it from. Its records are
/// checked when read.
///
/// # Errors
///
/// `Corruption` if the header or footer is damaged; `Io` if it cannot be read.
pub(crate) fn read_meta(fs: &dyn FileSystem, dir: &Path, id: u64) -> Result<BlobMeta> {
    let path = dir.join(blob_file_name(id));
    let f = fs
        .open(&path)
        .map_err(|e| Error::io("open blob file", Some(path.clone()), e))?;
    let size = f
        .len()
        .map_err(|e| Error::io("stat blob file", Some(path.clone()), e))?;
    // A log blob (a linked log segment) starts with the log's magic; its span is unknown
    // without the manifest, so it is the whole segment after its header.
    let mut magic = [0u8; silt_wal::SEGMENT_HEADER_BYTES as usize];
    if size >= silt_wal::SEGMENT_HEADER_BYTES {
        f.read_at(&mut magic, 0)
            .map_err(|e| Error::io("read blob file", Some(path.clone()), e))?;
        if magic.starts_with(b"SILTWAL\0") {
            let h = silt_wal::SegmentHeader::decode(&magic)
                .map_err(|r| Error::corruption(&path, 0, r.to_string()))?;
            // The span: from the first record to the end of the last valid one (the
            // segment's tail past it may be zeros, or a record torn after the link).
            let from = silt_wal::SEGMENT_HEADER_BYTES;
            let (records, to) = match silt_wal::verify_span(&*f, h, from, size) {
                Ok(n) => (n, size),
                Err((at, _)) => (0, at),
            };
            if to <= from {
                return Err(Error::corruption(
                    &path,
                    from,
                    "a log blob without a valid record",
                ));
            }
            let meta = BlobMeta {
                id,
                size_bytes: size,
                records,
                value_bytes: to - from,
                log: Some(LogSpan {
                    segment: h.segment_id,
                    from,
                    to,
                }),
            };
            check_file(fs, dir, &meta, true)?;
            return Ok(meta);
        }
    }
    if size < HEADER_BYTES + FOOTER_BYTES {
        return Err(Error::corruption(&path, 0, "blob file too short"));
    }
    let mut b = [0u8; FOOTER_BYTES as usize];
    f.read_at(&mut b, size - FOOTER_BYTES)
        .map_err(|e| Error::io("read blob file", Some(path.clone()), e))?;
    let (records, value_bytes) =
        format::decode_footer(&b).map_err(|r| Error::corruption(&path, size - FOOTER_BYTES, r))?;
    let meta = BlobMeta {
        id,
        size_bytes: size,
        records,
        value_bytes,
        log: None,
    };
    check_file(fs, dir, &meta, true)?;
    Ok(meta)
}

/// Checks blob file `meta` in `dir` at open: present and of the recorded size; with
/// `paranoid`, also its header and footer, whose counts must be the manifest's.
pub(crate) fn check_file(
    fs: &dyn FileSystem,
    dir: &Path,
    meta: &BlobMeta,
    paranoid: bool,
) -> Result<()> {
    let path = dir.join(blob_file_name(meta.id));
    let corrupt = |offset: u64, reason: String| Error::Corruption {
        file: path.clone(),
        offset,
        reason,
    };
    let f = fs.open(&path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            corrupt(0, "a blob file the manifest names is missing".into())
        } else {
            Error::io("open blob file", Some(path.clone()), e)
        }
    })?;
    let size = f
        .len()
        .map_err(|e| Error::io("stat blob file", Some(path.clone()), e))?;
    if size != meta.size_bytes {
        return Err(corrupt(
            size.min(meta.size_bytes),
            format!(
                "blob file has {size} bytes, the manifest records {}",
                meta.size_bytes
            ),
        ));
    }
    if !paranoid {
        return Ok(());
    }
    if let Some(span) = meta.log {
        let mut h = [0u8; silt_wal::SEGMENT_HEADER_BYTES as usize];
        f.read_at(&mut h, 0)
            .map_err(|e| Error::io("read log blob", Some(path.clone()), e))?;
        let h = silt_wal::SegmentHeader::decode(&h).map_err(|r| corrupt(0, r.to_string()))?;
        if h.segment_id != span.segment || h.segment_bytes != size {
            return Err(corrupt(
                0,
                format!(
                    "log blob's header names segment {} of {} bytes, the manifest segment {} of {size}",
                    h.segment_id, h.segment_bytes, span.segment
                ),
            ));
        }
        return Ok(());
    }
    if size < HEADER_BYTES + FOOTER_BYTES {
        return Err(corrupt(
            0,
            format!("blob file of {size} bytes is too short"),
        ));
    }
    let mut h = [0u8; HEADER_BYTES as usize];
    f.read_at(&mut h, 0)
        .map_err(|e| Error::io("read blob file", Some(path.clone()), e))?;
    format::check_header(&h).map_err(|r| corrupt(0, r))?;
    let mut b = [0u8; FOOTER_BYTES as usize];
    f.read_at(&mut b, size - FOOTER_BYTES)
        .map_err(|e| Error::io("read blob file", Some(path.clone()), e))?;
    let (records, value_bytes) =
        format::decode_footer(&b).map_err(|r| corrupt(size - FOOTER_BYTES, r))?;
    if (records, value_bytes) != (meta.records, meta.value_bytes) {
        return Err(corrupt(
            size - FOOTER_BYTES,
            format!(
                "footer says {records} values of {value_bytes} bytes, the manifest {} of {}",
                meta.records, meta.value_bytes
            ),
        ));
    }
    Ok(())
}

/// Reads every record of blob file `meta` in `dir` and checks its checksum, and that the
/// records add up to the footer's counts. For `silt::inspect::verify`.
///
/// # Errors
///
/// `Corruption` at the first bad record (or the footer); `Io`.
pub(crate) fn verify_records(fs: &dyn FileSystem, dir: &Path, meta: &BlobMeta) -> Result<u64> {
    check_file(fs, dir, meta, true)?;
    if let Some(span) = meta.log {
        // A log blob's records are the log's, each with its checksum, from the span's
        // first to its last.
        let path = dir.join(blob_file_name(meta.id));
        let f = fs
            .open(&path)
            .map_err(|e| Error::io("open log blob", Some(path.clone()), e))?;
        let header = silt_wal::SegmentHeader {
            segment_bytes: meta.size_bytes,
            segment_id: span.segment,
        };
        return silt_wal::verify_span(&*f, header, span.from, span.to)
            .map_err(|(at, why)| Error::corruption(&path, at, why));
    }
    let path = dir.join(blob_file_name(meta.id));
    let f = fs
        .open(&path)
        .map_err(|e| Error::io("open blob file", Some(path.clone()), e))?;
    let end = meta.size_bytes - FOOTER_BYTES;
    let mut at = HEADER_BYTES;
    let (mut records, mut value_bytes) = (0u64, 0u64);
    let hdr = format::RECORD_HEADER_BYTES as u64;
    while at < end {
        let bad = |why: &str| Error::corruption(&path, at, why.to_string());
        if end - at < hdr {
            return Err(bad("record header cut short"));
        }
        let mut h = [0u8; format::RECORD_HEADER_BYTES];
        f.read_at(&mut h, at)
            .map_err(|e| Error::io("read blob file", Some(path.clone()), e))?;
        let klen = u32::from_le_bytes(h[4..8].try_into().expect("4 bytes")) as u64;
        let vlen = u32::from_le_bytes(h[8..12].try_into().expect("4 bytes")) as u64;
        if klen + vlen > end - at - hdr {
            return Err(bad("record runs past the records"));
        }
        let mut rec = vec![0u8; (hdr + klen + vlen) as usize];
        f.read_at(&mut rec, at)
            .map_err(|e| Error::io("read blob file", Some(path.clone()), e))?;
        let stored = u32::from_le_bytes(rec[..4].try_into().expect("4 bytes"));
        if crc32c::crc32c(&rec[4..]) != stored {
            return Err(bad("record checksum mismatch"));
        }
        records += 1;
        value_bytes += vlen;
        at += hdr + klen + vlen;
    }
    if (records, value_bytes) != (meta.records, meta.value_bytes) {
        return Err(Error::corruption(
            &path,
            end,
            format!(
                "{records} records of {value_bytes} value bytes, the footer says {} of {}",
                meta.records, meta.value_bytes
            ),
        ));
    }
    Ok(records)
}
