//! [`BlobHandle`]: the handle versions hold on one live blob file, which reads its values
//! and deletes the file once it is obsolete and no version refers to it (version
//! invariant 3).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;

use crate::error::Result;
use crate::table_meta::{BlobMeta, BlobPointer};
use crate::vlog::BlobFiles;

/// One live blob file.
#[derive(Debug)]
pub(crate) struct BlobHandle {
    pub(crate) meta: BlobMeta,
    /// Value bytes the newest version's tables point at (the rest is garbage).
    live_bytes: AtomicU64,
    obsolete: AtomicBool,
    files: Arc<BlobFiles>,
}

impl BlobHandle {
    pub(super) fn new(meta: BlobMeta, live_bytes: u64, files: Arc<BlobFiles>) -> BlobHandle {
        BlobHandle {
            meta,
            live_bytes: AtomicU64::new(live_bytes),
            obsolete: AtomicBool::new(false),
            files,
        }
    }

    pub(super) fn set_live_bytes(&self, n: u64) {
        self.live_bytes.store(n, SeqCst);
    }

    /// Value bytes still pointed at, as of the newest version built.
    pub(crate) fn live_bytes(&self) -> u64 {
        self.live_bytes.load(SeqCst)
    }

    /// The share of the file's value bytes no table points at any more (0 to 1).
    pub(crate) fn garbage_ratio(&self) -> f64 {
        if self.meta.value_bytes == 0 {
            return 1.0;
        }
        1.0 - self.live_bytes().min(self.meta.value_bytes) as f64 / self.meta.value_bytes as f64
    }

    /// The manifest no longer names the file: it goes with the last handle.
    pub(super) fn mark_obsolete(&self) {
        self.obsolete.store(true, SeqCst);
    }

    /// The value `ptr` (into this file) points at for `user_key`.
    pub(crate) fn read(&self, ptr: BlobPointer, user_key: &[u8]) -> Result<Vec<u8>> {
        self.files.read(&self.meta, ptr, user_key)
    }
}

impl Drop for BlobHandle {
    fn drop(&mut self) {
        if self.obsolete.load(SeqCst) {
            // Removed on the unlinker's thread (`unlink.rs`); a failure leaves an orphan
            // file, removed at the next open (O2).
            self.files.evict(self.meta.id);
            self.files.unlinker.remove(self.files.path(self.meta.id));
        }
    }
}
