//! [`Output`]: one flush or compaction output. A table, plus the blob file beside it (same
//! id) that receives the values the output separates (a `Put` of at least the threshold)
//! or relocates (a `Blob` entry pointing into a file being collected).

use std::collections::HashMap;
use std::sync::Arc;

use super::{BlobFiles, BlobWriter};
use crate::error::{Error, Result};
use crate::key::{self, Kind, EXPIRY_BYTES};
use crate::sstable::TableBuilder;
use crate::table_meta::{BlobMeta, BlobPointer, TableMeta};

/// What an output does with values.
#[derive(Clone, Debug, Default)]
pub(crate) struct Separation {
    /// A `Put` value of at least this many bytes goes to the blob file (`None`: none do).
    pub(crate) threshold: Option<usize>,
    /// Blob files being collected: a pointer into one has its value copied to this
    /// output's blob file.
    pub(crate) relocate: HashMap<u64, BlobMeta>,
    /// Where relocated values are read, and where the blob file is created. Needed when
    /// `threshold` or `relocate` can apply.
    pub(crate) files: Option<Arc<BlobFiles>>,
    /// A flush's values found in the log, in linked segments: a `Put` to separate that is
    /// one of them gets a log pointer instead of a copy (`docs/format/vlog.md`, "Log
    /// blobs").
    pub(crate) log: Option<Arc<LogValues>>,
}

/// Where one value lies in a log blob.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LogValue {
    /// The log blob (a linked segment).
    pub(crate) blob: u64,
    /// The value's offset in the segment file.
    pub(crate) offset: u64,
    pub(crate) len: u32,
    /// CRC-32C of the value's bytes (taken from the writer's copy at commit for a value
    /// the memtable left in the log, else from the memtable's copy; the log holds the same
    /// bytes).
    pub(crate) crc: u32,
}

/// The values of one column family a flush may point at: [`log_value_key`] of the value's
/// bytes in the flushed memtable → where the log holds them. The key is exact: each entry's
/// value has its own place, in the memtable's arena or (left in the log) in a mapping of a
/// log segment the memtable pins, and `_owner` (the memtable) keeps that memory from being
/// freed or reused while the map exists. A value passed to the output from
/// anywhere else (a copy) finds nothing and is copied into the blob file.
pub(crate) struct LogValues {
    pub(crate) map: HashMap<u64, LogValue, std::hash::BuildHasherDefault<PassThrough>>,
    /// Values the memtable read in the log, in segments the flush did not link: they are
    /// copied into the blob file, and checked first against the crc their commit took
    /// (the key as for `map` → that crc, and where the log holds them), so that bytes which
    /// changed in the log are `Corruption`, not a new blob with a fresh crc over them.
    pub(crate) check: HashMap<u64, CheckedCopy, std::hash::BuildHasherDefault<PassThrough>>,
    /// What holds the memory the keys are addresses in (held, never read).
    pub(crate) _owner: Arc<dyn std::any::Any + Send + Sync>,
}

/// A value to check before it is copied ([`LogValues::check`]).
#[derive(Clone, Debug)]
pub(crate) struct CheckedCopy {
    pub(crate) crc: u32,
    /// The log segment's file and the value's offset in it, for the error.
    pub(crate) file: Arc<std::path::Path>,
    pub(crate) offset: u64,
}

impl std::fmt::Debug for LogValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogValues")
            .field("values", &self.map.len())
            .field("checked", &self.check.len())
            .finish()
    }
}

/// The [`LogValues`] key of `value`, a slice of a memtable entry's value: its address,
/// mixed (a multiply by an odd constant, then the high half folded into the low one). Both
/// steps are bijections, so keys stay exact; the fold matters because the table picks a
/// bucket from the low bits, which a multiply alone leaves depending on the address's low
/// bits only (and values at one offset of 2 MiB-aligned chunks share those).
pub(crate) fn log_value_key(value: &[u8]) -> u64 {
    let x = (value.as_ptr() as usize as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x ^ (x >> 32)
}

/// The hasher of keys that are hashes already ([`LogValues`]): passes a `u64` through.
#[derive(Default)]
pub(crate) struct PassThrough(u64);

impl std::hash::Hasher for PassThrough {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A finished output: the table, and the blob file written beside it if any.
#[derive(Debug)]
pub(crate) struct Finished {
    pub(crate) table: TableMeta,
    pub(crate) blob: Option<BlobMeta>,
}

/// A table being written and its blob file.
pub(crate) struct Output {
    table: TableBuilder,
    blob: Option<BlobWriter>,
    sep: Arc<Separation>,
    /// Reused buffer for a rewritten internal key.
    key: Vec<u8>,
}

impl Output {
    pub(crate) fn new(table: TableBuilder, sep: Arc<Separation>) -> Output {
        Output {
            table,
            blob: None,
            sep,
            key: Vec::new(),
        }
    }

    /// Adds an entry (internal key order, as [`TableBuilder::add`]).
    pub(crate) fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        let Some(p) = key::parse(ikey) else {
            return self.table.add(ikey, value); // the builder reports it
        };
        // An expiring kind keeps its expiry in front of the value or pointer.
        let expiry_len = if p.kind.expires() { EXPIRY_BYTES } else { 0 };
        let Some(body) = value.get(expiry_len..) else {
            return Err(self.corrupt("an expiring entry's value is too short for its expiry"));
        };
        match p.kind {
            Kind::Put | Kind::PutTtl if self.sep.threshold.is_some_and(|t| body.len() >= t) => {
                let ptr = match self.log_pointer(body) {
                    Some(ptr) => ptr,
                    None => {
                        self.check_copy(body)?;
                        self.blob_writer()?.add(p.user_key, body)?
                    }
                };
                // The same entry, kind `Blob` (`BlobTtl`): only the trailer's kind byte
                // changes, and the value becomes the (expiry and the) pointer.
                let kind = if p.kind == Kind::Put {
                    Kind::Blob
                } else {
                    Kind::BlobTtl
                };
                self.key.clear();
                self.key.extend_from_slice(p.user_key);
                self.key
                    .extend_from_slice(&key::trailer(p.seqno, kind as u8));
                let mut v = Vec::with_capacity(expiry_len + crate::table_meta::LOG_POINTER_BYTES);
                v.extend_from_slice(&value[..expiry_len]);
                ptr.encode_into(&mut v);
                let k = std::mem::take(&mut self.key);
                let r = self.table.add(&k, &v);
                self.key = k;
                r
            }
            Kind::Blob | Kind::BlobTtl if !self.sep.relocate.is_empty() => {
                let ptr = BlobPointer::decode(body)
                    .ok_or_else(|| self.corrupt("a blob entry's value is not a blob pointer"))?;
                let Some(meta) = self.sep.relocate.get(&ptr.id) else {
                    return self.table.add(ikey, value);
                };
                let files = self
                    .sep
                    .files
                    .clone()
                    .expect("relocation needs the blob files");
                let v = files.read(meta, ptr, p.user_key)?;
                let new = self.blob_writer()?.add(p.user_key, &v)?;
                let mut nv = Vec::with_capacity(expiry_len + crate::table_meta::BLOB_POINTER_BYTES);
                nv.extend_from_slice(&value[..expiry_len]);
                new.encode_into(&mut nv);
                self.table.add(ikey, &nv)
            }
            _ => self.table.add(ikey, value),
        }
    }

    /// A log pointer to `value` if the flush noted where the log holds these very bytes (a
    /// slice of the memtable it flushes) in a segment it linked.
    fn log_pointer(&self, value: &[u8]) -> Option<BlobPointer> {
        let at = self.sep.log.as_ref()?.map.get(&log_value_key(value))?;
        if at.len as usize != value.len() {
            return None;
        }
        Some(BlobPointer {
            id: at.blob,
            offset: at.offset,
            len: at.len,
            crc: Some(at.crc),
        })
    }

    /// `Corruption` if `value` is one the memtable read in the log ([`LogValues::check`])
    /// and its bytes no longer match the crc its commit took.
    fn check_copy(&self, value: &[u8]) -> Result<()> {
        let Some(c) = self
            .sep
            .log
            .as_ref()
            .and_then(|l| l.check.get(&log_value_key(value)))
        else {
            return Ok(());
        };
        if crc32c::crc32c(value) == c.crc {
            return Ok(());
        }
        Err(Error::Corruption {
            file: c.file.to_path_buf(),
            offset: c.offset,
            reason: "a value the memtable read in the log no longer matches the crc its \
                     commit took"
                .into(),
        })
    }

    fn corrupt(&self, reason: &str) -> Error {
        Error::Corruption {
            file: self.table.path().to_path_buf(),
            offset: 0,
            reason: reason.into(),
        }
    }

    fn blob_writer(&mut self) -> Result<&mut BlobWriter> {
        if self.blob.is_none() {
            let files = self
                .sep
                .files
                .as_ref()
                .expect("separation needs the blob files");
            let id = self.table.id();
            let path = files.path(id);
            let file = files
                .fs()
                .create(&path)
                .map_err(|e| Error::io("create blob file", Some(path.clone()), e))?;
            self.blob = Some(BlobWriter::new(id, path, file));
        }
        Ok(self.blob.as_mut().expect("just created"))
    }

    /// Bytes the table would have if finished now (its values separated: the blob file does
    /// not count towards a table's target size).
    pub(crate) fn estimated_size_bytes(&self) -> u64 {
        self.table.estimated_size_bytes()
    }

    /// Finishes (and syncs) the blob file, then the table.
    pub(crate) fn finish(self) -> Result<Finished> {
        let blob = match self.blob {
            Some(b) if b.records() > 0 => Some(b.finish()?),
            _ => None,
        };
        let table = self.table.finish()?;
        Ok(Finished { table, blob })
    }
}
