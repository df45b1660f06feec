//! The open tables ([`TableCache`]: a bounded cache of open files) and the handle a version
//! holds on each live table ([`TableHandle`]), which deletes the file once the table is
//! obsolete and no version refers to it (version invariant 3).

use std::path::PathBuf;
use std::sync::atomic::{
    AtomicBool, AtomicU64,
    Ordering::{Relaxed, SeqCst},
};
use std::sync::Arc;

use silt_vfs::FileSystem;

use crate::error::{Error, Result};
use crate::key;
use crate::sstable::BlockCache;
use crate::sstable::Table;
use crate::table_meta::{table_file_name, TableMeta};
use crate::unlink::Unlinker;

/// Opens tables on demand and keeps a bounded number open.
pub(crate) struct TableCache {
    open: quick_cache::sync::Cache<u64, Arc<Table>>,
    /// Tables opened once and kept open for the cache's life, whatever the bound: a
    /// read-only handle pins the tables of its fixed state, so that a writer in another
    /// process deleting them does not take them away (`db/read_only.rs`).
    pinned: std::sync::OnceLock<std::collections::HashMap<u64, Arc<Table>>>,
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    pub(crate) blocks: Arc<BlockCache>,
    /// Removes the files of obsolete tables, off the thread that dropped the last handle.
    pub(crate) unlinker: Arc<Unlinker>,
}

impl std::fmt::Debug for TableCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableCache")
            .field("dir", &self.dir)
            .finish()
    }
}

impl TableCache {
    pub(crate) fn new(
        fs: Arc<dyn FileSystem>,
        dir: PathBuf,
        tables_max: usize,
        blocks: Arc<BlockCache>,
        unlinker: Arc<Unlinker>,
    ) -> TableCache {
        TableCache {
            open: quick_cache::sync::Cache::new(tables_max),
            pinned: std::sync::OnceLock::new(),
            fs,
            dir,
            blocks,
            unlinker,
        }
    }

    pub(crate) fn path(&self, id: u64) -> PathBuf {
        self.dir.join(table_file_name(id))
    }

    /// The open table `id`, opening it if needed.
    pub(crate) fn get(&self, id: u64) -> Result<Arc<Table>> {
        if let Some(t) = self.pinned.get().and_then(|p| p.get(&id)) {
            return Ok(t.clone());
        }
        self.open.get_or_insert_with(&id, || {
            let path = self.path(id);
            let file = self
                .fs
                .open(&path)
                .map_err(|e| Error::io("open table", Some(path.clone()), e))?;
            Table::open(id, path, file, self.blocks.clone())
        })
    }

    /// Opens every table of `ids` now and keeps it open for the life of the cache (see
    /// `pinned`). Once per cache.
    ///
    /// # Errors
    ///
    /// As [`TableCache::get`], for the first table that does not open.
    pub(crate) fn pin(&self, ids: impl Iterator<Item = u64>) -> Result<()> {
        let mut map = std::collections::HashMap::new();
        for id in ids {
            map.insert(id, self.get(id)?);
        }
        let _ = self.pinned.set(map);
        Ok(())
    }

    pub(crate) fn evict(&self, id: u64) {
        self.open.remove(&id);
    }
}

/// One live table: its description, and the duty to delete its file once obsolete.
#[derive(Debug)]
pub(crate) struct TableHandle {
    pub(crate) meta: TableMeta,
    obsolete: AtomicBool,
    /// Entries of this (level-0) table that reads passed over on their way to a visible
    /// pair (`DbBuilder::l0_scan_compaction_ratio`).
    scan_passed: AtomicU64,
    tables: Arc<TableCache>,
}

impl TableHandle {
    pub(super) fn new(meta: TableMeta, tables: Arc<TableCache>) -> TableHandle {
        TableHandle {
            meta,
            obsolete: AtomicBool::new(false),
            scan_passed: AtomicU64::new(0),
            tables,
        }
    }

    /// Counts `n` more of this table's entries that a read passed over.
    pub(crate) fn add_scan_passed(&self, n: u64) {
        self.scan_passed.fetch_add(n, Relaxed);
    }

    /// Entries of this table that reads passed over so far.
    pub(crate) fn scan_passed(&self) -> u64 {
        self.scan_passed.load(Relaxed)
    }

    /// The manifest no longer names the table: its file goes with the last handle
    /// (version invariant 3).
    pub(super) fn mark_obsolete(&self) {
        self.obsolete.store(true, SeqCst);
    }

    pub(crate) fn user_smallest(&self) -> &[u8] {
        key::user_key(&self.meta.smallest)
    }

    pub(crate) fn user_largest(&self) -> &[u8] {
        key::user_key(&self.meta.largest)
    }

    /// Whether the table's user-key range meets `[lo, hi]` (inclusive).
    pub(crate) fn overlaps(&self, lo: &[u8], hi: &[u8]) -> bool {
        self.user_smallest() <= hi && self.user_largest() >= lo
    }

    pub(crate) fn table(&self) -> Result<Arc<Table>> {
        self.tables.get(self.meta.id)
    }
}

impl Drop for TableHandle {
    fn drop(&mut self) {
        if self.obsolete.load(SeqCst) {
            // Closed here (cheap while the file has its name), removed on the unlinker's
            // thread (`unlink.rs`: the unlink may wait for the device).
            self.tables.evict(self.meta.id);
            self.tables.unlinker.remove(self.tables.path(self.meta.id));
        }
    }
}
