//! [`BlobWriter`]: appends value records to a new blob file and finishes it with a footer
//! and an fdatasync (`docs/format/vlog.md`).

use std::path::PathBuf;
use std::sync::Arc;

use silt_vfs::File;

use super::format;
use crate::error::{Error, Result};
use crate::table_meta::{BlobMeta, BlobPointer};

/// Buffered bytes written out at once.
const WRITE_BUFFER_BYTES: usize = 1 << 20;

/// Writes one blob file. A failed write leaves it unusable (`finish` refuses), so a
/// half-written file is never described as whole.
pub(crate) struct BlobWriter {
    id: u64,
    path: PathBuf,
    file: Arc<dyn File>,
    buf: Vec<u8>,
    /// Bytes in the file so far (`buf` not included).
    written: u64,
    records: u64,
    value_bytes: u64,
    failed: bool,
}

impl BlobWriter {
    /// A writer of blob file `id` into `file` (new and empty) at `path`.
    pub(crate) fn new(id: u64, path: PathBuf, file: Arc<dyn File>) -> BlobWriter {
        let mut buf = Vec::with_capacity(WRITE_BUFFER_BYTES);
        buf.extend_from_slice(&format::header());
        BlobWriter {
            id,
            path,
            file,
            buf,
            written: 0,
            records: 0,
            value_bytes: 0,
            failed: false,
        }
    }

    /// Appends `value` of `user_key`; returns the pointer to it.
    pub(crate) fn add(&mut self, user_key: &[u8], value: &[u8]) -> Result<BlobPointer> {
        if self.failed {
            return Err(Error::invalid("blob writer used after a failed write"));
        }
        let len = u32::try_from(value.len())
            .map_err(|_| Error::invalid("a value of 4 GiB or more cannot go to a blob file"))?;
        let offset = self.written + self.buf.len() as u64;
        self.buf
            .extend_from_slice(&format::record_header(user_key, value));
        self.buf.extend_from_slice(user_key);
        self.buf.extend_from_slice(value);
        self.records += 1;
        self.value_bytes += value.len() as u64;
        if self.buf.len() >= WRITE_BUFFER_BYTES {
            self.write_buffer()?;
        }
        Ok(BlobPointer {
            id: self.id,
            offset,
            len,
            crc: None,
        })
    }

    /// Values appended so far.
    pub(crate) fn records(&self) -> u64 {
        self.records
    }

    /// Writes the footer, syncs the file and describes it.
    pub(crate) fn finish(mut self) -> Result<BlobMeta> {
        if self.failed {
            return Err(Error::invalid("blob writer used after a failed write"));
        }
        self.buf
            .extend_from_slice(&format::footer(self.records, self.value_bytes));
        self.write_buffer()?;
        self.file
            .sync_data()
            .map_err(|e| Error::io("fdatasync blob file", Some(self.path.clone()), e))?;
        Ok(BlobMeta {
            id: self.id,
            size_bytes: self.written,
            records: self.records,
            value_bytes: self.value_bytes,
            log: None,
        })
    }

    fn write_buffer(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        if let Err(e) = self.file.write_at(&[&self.buf], self.written) {
            self.failed = true;
            return Err(Error::io("write blob file", Some(self.path.clone()), e));
        }
        self.written += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }
}
