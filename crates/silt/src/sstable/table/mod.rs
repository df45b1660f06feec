//! [`Table`]: an open table file, and [`TableIter`], the two-level cursor over it (index
//! block entry → data block entries). The format is `docs/format/sstable.md`.
//!
//! Opening reads the footer, then the index, filter and properties blocks, checking each
//! checksum, and keeps them in memory. Data blocks are read on demand through the shared
//! [`BlockCache`], keyed by `(table id, block offset)`.
//!
//! Invariants: nothing read from the file is trusted before it is checked. A block handle
//! must lie inside the area before the footer before anything is allocated for it; a
//! block's checksum is verified before it is decompressed or decoded; a data entry's key
//! must parse as an internal key. Any failed check is `Error::Corruption` naming this
//! file and the offset of the block (or footer) that failed.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use silt_vfs::File;

use super::block::{Block, BlockIter};
use super::bloom::Bloom;
use super::format::{
    decode_block, BlockHandle, Footer, TableProps, BLOCK_TRAILER_BYTES, FOOTER_BYTES,
    MAX_BLOCK_BYTES,
};
use super::index::{DecodedIndex, IndexIter};
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{self, Kind, Seqno};
use crate::sstable::BlockCache;
use crate::table_meta::TableMeta;

/// An open, immutable table file.
#[derive(Debug)]
pub(crate) struct Table {
    id: u64,
    path: PathBuf,
    /// The same path, shared with every block for its errors.
    path_arc: Arc<Path>,
    file: Arc<dyn File>,
    cache: Arc<BlockCache>,
    size_bytes: u64,
    /// Offset of the footer: every block must end at or before it.
    footer_offset: u64,
    /// The index, decoded at open (`sstable/index.rs`), and where its block is in the file.
    index: Arc<DecodedIndex>,
    index_offset: u64,
    filter: Option<Bloom>,
    props: TableProps,
}

impl Table {
    /// Opens table `id` stored in `file` (at `path`, for errors): reads and verifies the
    /// footer, index, filter and properties blocks.
    pub(crate) fn open(
        id: u64,
        path: PathBuf,
        file: Arc<dyn File>,
        cache: Arc<BlockCache>,
    ) -> Result<Arc<Table>> {
        let size_bytes = file
            .len()
            .map_err(|e| Error::io("stat table", Some(path.clone()), e))?;
        if size_bytes < FOOTER_BYTES as u64 {
            return Err(Error::corruption(
                &path,
                0,
                format!(
                    "table file of {size_bytes} bytes is shorter than its {FOOTER_BYTES}-byte footer"
                ),
            ));
        }
        let footer_offset = size_bytes - FOOTER_BYTES as u64;
        let mut fbuf = [0u8; FOOTER_BYTES];
        read_exact(&*file, &path, &mut fbuf, footer_offset)?;
        let footer = Footer::decode(&fbuf, &path, footer_offset)?;
        let path_arc: Arc<Path> = Arc::from(path.as_path());
        let read = |h: BlockHandle| read_block(&*file, &path, footer_offset, h);
        let index = Arc::new(DecodedIndex::new(Arc::new(Block::new(
            read(footer.index)?,
            path_arc.clone(),
            footer.index.offset,
        )?))?);
        let filter = if footer.filter == BlockHandle::default() {
            None
        } else {
            Some(Bloom::new(read(footer.filter)?))
        };
        let props = TableProps::decode(&read(footer.props)?).ok_or_else(|| {
            Error::corruption(&path, footer.props.offset, "properties block is truncated")
        })?;
        let table = Table {
            id,
            path,
            path_arc,
            file,
            cache,
            size_bytes,
            footer_offset,
            index,
            index_offset: footer.index.offset,
            filter,
            props,
        };
        Ok(Arc::new(table))
    }

    /// The table's id.
    #[allow(dead_code)] // part of the table API; the engine reads these from `TableMeta`
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The table's file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The file's length.
    #[allow(dead_code)] // part of the table API; the engine reads these from `TableMeta`
    pub(crate) fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    /// Whether `user_key` may be in the table (the bloom filter; true without one).
    pub(crate) fn may_contain(&self, user_key: &[u8]) -> bool {
        self.filter.as_ref().is_none_or(|f| f.may_contain(user_key))
    }

    /// The newest entry of `user_key` with `seqno < snapshot`, as `(kind, seqno, value)`.
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn get(
        &self,
        user_key: &[u8],
        snapshot: Seqno,
    ) -> Result<Option<(Kind, Seqno, Vec<u8>)>> {
        self.get_at(&key::LookupKey::new(0, user_key, snapshot))
    }

    /// The newest entry of the lookup's user key visible at its snapshot, if this table
    /// holds one. The search key is built once per read, by the caller.
    pub(crate) fn get_at(&self, lk: &key::LookupKey) -> Result<Option<(Kind, Seqno, Vec<u8>)>> {
        let user_key = lk.user_key();
        if lk.snapshot() == 0 || !self.may_contain(user_key) {
            return Ok(None);
        }
        let target = lk.internal_key();
        // Usually one block; the first entry >= target may open the next one.
        for i in self.index.lower_bound(target)..self.index.len() {
            let handle = self.decode_handle(self.index.value(i))?;
            let block = self.read_data_block(handle, true)?;
            let mut data = BlockIter::new(block);
            data.seek(target);
            if data.valid() {
                let parsed = key::parse(data.key()).ok_or_else(|| {
                    Error::corruption(&self.path, handle.offset, "malformed internal key")
                })?;
                if parsed.user_key != user_key {
                    return Ok(None);
                }
                return Ok(Some((parsed.kind, parsed.seqno, data.value().to_vec())));
            }
            if let Some(e) = data.take_error() {
                return Err(e);
            }
        }
        Ok(None)
    }

    /// A cursor over the whole table that fills the block cache.
    #[allow(dead_code)] // the engine builds cursors with `TableIter::new_with`
    pub(crate) fn iter(self: &Arc<Self>) -> TableIter {
        TableIter::new_with(self, true)
    }

    fn decode_handle(&self, v: &[u8]) -> Result<BlockHandle> {
        BlockHandle::decode(v).ok_or_else(|| {
            Error::corruption(
                &self.path,
                self.index_offset,
                "index entry holds a malformed block handle",
            )
        })
    }

    /// The data block at `handle`, from the cache or the file. `fill_cache: false` uses a
    /// cached block but does not cache one it had to read.
    fn read_data_block(&self, handle: BlockHandle, fill_cache: bool) -> Result<Arc<Block>> {
        let load = || -> Result<Arc<Block>> {
            let data = read_block(&*self.file, &self.path, self.footer_offset, handle)?;
            Ok(Arc::new(Block::new(
                data,
                self.path_arc.clone(),
                handle.offset,
            )?))
        };
        if fill_cache {
            self.cache.get_or_load(self.id, handle.offset, load)
        } else {
            match self.cache.get(self.id, handle.offset) {
                Some(b) => Ok(b),
                None => load(),
            }
        }
    }
}

// Descriptions for tools and statistics (sst dump, memory accounting); not every one has
// a caller in the engine yet.
#[allow(dead_code)]
impl Table {
    /// The user keys the index separates data blocks at (about one per data block, in
    /// order): a cheap sample of the table's key distribution, each standing for one block.
    pub(crate) fn block_boundaries(&self) -> Result<Vec<Vec<u8>>> {
        Ok((0..self.index.len())
            .map(|i| key::user_key(self.index.key(i)).to_vec())
            .collect())
    }

    /// What the properties block says about the table.
    pub(crate) fn properties(&self) -> &TableProps {
        &self.props
    }

    /// The table's description rebuilt from its properties block.
    pub(crate) fn meta(&self) -> TableMeta {
        let p = &self.props;
        TableMeta {
            id: self.id,
            size_bytes: self.size_bytes,
            entries: p.entries,
            tombstones: p.tombstones,
            smallest: p.smallest.clone(),
            largest: p.largest.clone(),
            smallest_seqno: p.smallest_seqno,
            largest_seqno: p.largest_seqno,
            blobs: p.blobs.clone(),
        }
    }

    /// Bytes this open table keeps in memory (index and filter), outside the block cache.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.index.memory_bytes() + self.filter.as_ref().map_or(0, Bloom::size_bytes)
    }
}

/// Reads, checks and decodes the block at `handle` of a table whose footer starts at
/// `footer_offset`.
fn read_block(
    file: &dyn File,
    path: &Path,
    footer_offset: u64,
    handle: BlockHandle,
) -> Result<Vec<u8>> {
    let in_bounds = handle.len <= MAX_BLOCK_BYTES as u64
        && handle.end().is_some_and(|end| end <= footer_offset);
    if !in_bounds {
        return Err(Error::corruption(
            path,
            handle.offset,
            format!(
                "block handle (offset {}, length {}) lies outside the table's {footer_offset} \
                 bytes of blocks",
                handle.offset, handle.len
            ),
        ));
    }
    let mut buf = vec![0u8; handle.len as usize + BLOCK_TRAILER_BYTES];
    read_exact(file, path, &mut buf, handle.offset)?;
    decode_block(buf, path, handle.offset)
}

/// `read_at` with a short file reported as corruption (the table was measured at open, so
/// missing bytes mean it was cut behind our back).
fn read_exact(file: &dyn File, path: &Path, buf: &mut [u8], offset: u64) -> Result<()> {
    file.read_at(buf, offset).map_err(|e| {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            Error::corruption(
                path,
                offset,
                format!("table file ends inside the {} bytes read here", buf.len()),
            )
        } else {
            Error::io("read table", Some(path.to_path_buf()), e)
        }
    })
}

/// A cursor over all entries of one table, in both directions. Owns an `Arc` of the table.
#[derive(Debug)]
pub(crate) struct TableIter {
    table: Arc<Table>,
    index: IndexIter,
    /// The cursor in the data block the index cursor points at.
    data: Option<BlockIter>,
    fill_cache: bool,
    err: Option<Error>,
}

impl TableIter {
    /// A cursor over `table`; `fill_cache: false` keeps blocks it reads out of the cache
    /// (for compaction, which reads everything once).
    pub(crate) fn new_with(table: &Arc<Table>, fill_cache: bool) -> TableIter {
        TableIter {
            table: table.clone(),
            index: IndexIter::new(table.index.clone()),
            data: None,
            fill_cache,
            err: None,
        }
    }

    fn set_err(&mut self, e: Error) {
        self.data = None;
        if self.err.is_none() {
            self.err = Some(e);
        }
    }

    /// Points `data` at the block of the current index entry (reusing it if it is the
    /// same block). REQUIRES: `index.valid()`. False on error.
    fn load_block(&mut self) -> bool {
        let handle = match self.table.decode_handle(self.index.value()) {
            Ok(h) => h,
            Err(e) => {
                self.set_err(e);
                return false;
            }
        };
        if let Some(d) = &self.data {
            if d.block().offset() == handle.offset {
                return true;
            }
        }
        match self.table.read_data_block(handle, self.fill_cache) {
            Ok(b) => {
                self.data = Some(BlockIter::new(b));
                true
            }
            Err(e) => {
                self.set_err(e);
                false
            }
        }
    }

    /// After the index cursor moved: if it is invalid, note its error and drop the data
    /// cursor; otherwise load its block. True if a block is loaded.
    fn index_moved(&mut self) -> bool {
        if !self.index.valid() {
            if let Some(e) = self.index.take_error() {
                self.set_err(e);
            }
            self.data = None;
            return false;
        }
        self.load_block()
    }

    /// The data cursor's state: `Some(true)` on an entry, `Some(false)` run off its block,
    /// `None` no block or an error (recorded).
    fn data_state(&mut self) -> Option<bool> {
        let d = self.data.as_mut()?;
        if d.valid() {
            return Some(true);
        }
        if let Some(e) = d.take_error() {
            self.set_err(e);
            return None;
        }
        Some(false)
    }

    fn skip_forward(&mut self) {
        loop {
            match self.data_state() {
                Some(true) => return self.check_entry(),
                None => return,
                Some(false) => {}
            }
            self.index.next();
            if !self.index_moved() {
                return;
            }
            if let Some(d) = self.data.as_mut() {
                d.seek_to_first();
            }
        }
    }

    fn skip_backward(&mut self) {
        loop {
            match self.data_state() {
                Some(true) => return self.check_entry(),
                None => return,
                Some(false) => {}
            }
            self.index.prev();
            if !self.index_moved() {
                return;
            }
            if let Some(d) = self.data.as_mut() {
                d.seek_to_last();
            }
        }
    }

    /// Refuses an entry whose key is not an internal key (it would confuse every layer
    /// above).
    fn check_entry(&mut self) {
        if let Some(d) = &self.data {
            if key::parse(d.key()).is_none() {
                let offset = d.block().offset();
                self.set_err(Error::corruption(
                    self.table.path(),
                    offset,
                    format!(
                        "data entry with a malformed internal key of {} bytes",
                        d.key().len()
                    ),
                ));
            }
        }
    }
}

impl InternalIterator for TableIter {
    fn valid(&self) -> bool {
        self.err.is_none() && self.data.as_ref().is_some_and(|d| d.valid())
    }

    fn seek_to_first(&mut self) {
        self.err = None;
        self.index.seek_to_first();
        if self.index_moved() {
            if let Some(d) = self.data.as_mut() {
                d.seek_to_first();
            }
            self.skip_forward();
        }
    }

    fn seek_to_last(&mut self) {
        self.err = None;
        self.index.seek_to_last();
        if self.index_moved() {
            if let Some(d) = self.data.as_mut() {
                d.seek_to_last();
            }
            self.skip_backward();
        }
    }

    fn seek(&mut self, target: &[u8]) {
        self.err = None;
        // A seek near the last one (a scan's next range, a sequential seek) often lands in
        // the block already loaded: then only that block is searched.
        if self.data.is_some() && self.index.covers(target) {
            if let Some(d) = self.data.as_mut() {
                d.seek(target);
            }
            self.skip_forward();
            return;
        }
        self.index.seek(target);
        if self.index_moved() {
            if let Some(d) = self.data.as_mut() {
                d.seek(target);
            }
            self.skip_forward();
        }
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        self.err = None;
        // The first block whose index key is >= target holds the answer, or the block
        // before it does (every key of earlier blocks is < target).
        self.index.seek(target);
        if !self.index.valid() {
            match self.index.take_error() {
                Some(e) => self.set_err(e),
                None => self.seek_to_last(),
            }
            return;
        }
        if self.load_block() {
            if let Some(d) = self.data.as_mut() {
                d.seek_for_prev(target);
            }
            self.skip_backward();
        }
    }

    fn next(&mut self) {
        debug_assert!(self.valid());
        if let Some(d) = self.data.as_mut() {
            d.next();
        }
        self.skip_forward();
    }

    fn prev(&mut self) {
        debug_assert!(self.valid());
        if let Some(d) = self.data.as_mut() {
            d.prev();
        }
        self.skip_backward();
    }

    fn key(&self) -> &[u8] {
        self.data.as_ref().map_or(&[], |d| d.key())
    }

    fn value(&self) -> &[u8] {
        self.data.as_ref().map_or(&[], |d| d.value())
    }

    fn take_error(&mut self) -> Option<Error> {
        self.err.take()
    }
}

#[cfg(test)]
mod tests;
