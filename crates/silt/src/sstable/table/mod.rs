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
    index: Arc<Block>,
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
        let index = Arc::new(Block::new(
            read(footer.index)?,
            path_arc.clone(),
            footer.index.offset,
        )?);
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
        let mut index = BlockIter::new(self.index.clone());
        index.seek(target);
        // Usually one block; the first entry >= target may open the next one.
        loop {
            if !index.valid() {
                return match index.take_error() {
                    Some(e) => Err(e),
                    None => Ok(None),
                };
            }
            let handle = self.decode_handle(index.value())?;
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
            index.next();
        }
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
                self.index.offset(),
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
        }
    }

    /// Bytes this open table keeps in memory (index and filter), outside the block cache.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.index.size_bytes() + self.filter.as_ref().map_or(0, Bloom::size_bytes)
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
    index: BlockIter,
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
            index: BlockIter::new(table.index.clone()),
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
mod tests {
    use super::*;
    use crate::key::make_internal;
    use crate::sstable::{Compression, TableBuilder, TableOptions};
    use proptest::prelude::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use silt_vfs::{FileSystem, SimFs};
    use std::cmp::Ordering;
    use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

    type Entries = Vec<(Vec<u8>, Vec<u8>)>;

    static NEXT_ID: AtomicU64 = AtomicU64::new(1);

    fn sim() -> Arc<SimFs> {
        let fs = SimFs::new();
        fs.create_dir_all(Path::new("/db/tables")).unwrap();
        fs
    }

    fn build(fs: &SimFs, entries: &Entries, opts: &TableOptions) -> (PathBuf, TableMeta) {
        let id = NEXT_ID.fetch_add(1, AtomicOrdering::Relaxed);
        let path = PathBuf::from(format!("/db/tables/{id:06}.sst"));
        let file = fs.create(&path).unwrap();
        let mut b = TableBuilder::new(id, path.clone(), file, opts);
        for (k, v) in entries {
            b.add(k, v).unwrap();
        }
        let meta = b.finish().unwrap();
        (path, meta)
    }

    /// Opens a table built by `build` (ids are unique, as the shared cache needs).
    fn open(fs: &SimFs, path: &Path, cache: &Arc<BlockCache>) -> Result<Arc<Table>> {
        let file = fs.open(path).unwrap();
        let id = path
            .file_stem()
            .and_then(|s| s.to_str())
            .and_then(|s| s.parse().ok())
            .unwrap();
        Table::open(id, path.to_path_buf(), file, cache.clone())
    }

    /// Compares entry lists, reporting the first difference briefly.
    #[track_caller]
    fn assert_same(got: &[(Vec<u8>, Vec<u8>)], want: &[(Vec<u8>, Vec<u8>)], what: &str) {
        if let Some(i) = (0..got.len().min(want.len())).find(|&i| got[i] != want[i]) {
            panic!(
                "{what}: entry {i} differs: got key {:?} ({} value bytes), want key {:?} ({} value bytes)",
                got[i].0, got[i].1.len(), want[i].0, want[i].1.len()
            );
        }
        assert_eq!(got.len(), want.len(), "{what}: lengths differ");
    }

    fn forward(it: &mut TableIter) -> (Entries, Option<Error>) {
        let mut out = Vec::new();
        it.seek_to_first();
        while it.valid() {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.next();
        }
        (out, it.take_error())
    }

    fn backward(it: &mut TableIter) -> (Entries, Option<Error>) {
        let mut out = Vec::new();
        it.seek_to_last();
        while it.valid() {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.prev();
        }
        out.reverse();
        (out, it.take_error())
    }

    /// The reference answer of `Table::get`.
    fn ref_get(entries: &Entries, uk: &[u8], snapshot: Seqno) -> Option<(Kind, Seqno, Vec<u8>)> {
        entries.iter().find_map(|(k, v)| {
            let p = key::parse(k)?;
            (p.user_key == uk && p.seqno < snapshot).then(|| (p.kind, p.seqno, v.clone()))
        })
    }

    fn sort_entries(mut e: Entries) -> Entries {
        e.sort_by(|a, b| key::cmp_internal(&a.0, &b.0));
        e.dedup_by(|a, b| key::cmp_internal(&a.0, &b.0) == Ordering::Equal);
        e
    }

    /// Entries with several versions per user key and all kinds.
    fn sample(n: usize, seed: u64) -> Entries {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut e = Vec::new();
        for i in 0..n {
            let uk = format!("user{:04}", i / 3).into_bytes();
            let seqno = rng.random_range(1..1000u64);
            let kind = match rng.random_range(0..4) {
                0 => Kind::Delete,
                1 => Kind::SingleDelete,
                _ => Kind::Put,
            };
            let vlen = rng.random_range(0..40);
            let v: Vec<u8> = (0..vlen).map(|_| rng.random()).collect();
            e.push((make_internal(&uk, seqno, kind), v));
        }
        sort_entries(e)
    }

    #[test]
    fn round_trip_every_option_combination() {
        let fs = sim();
        let cache = Arc::new(BlockCache::new(1 << 20));
        let entries = sample(600, 1);
        for compression in [Compression::None, Compression::Lz4, Compression::Zstd(3)] {
            for block_size_bytes in [1, 64, 4096, 1 << 20] {
                for bloom_bits_per_key in [0, 10] {
                    let opts = TableOptions {
                        block_size_bytes,
                        restart_interval: 4,
                        bloom_bits_per_key,
                        compression,
                    };
                    let (path, meta) = build(&fs, &entries, &opts);
                    let t = open(&fs, &path, &cache).unwrap();
                    assert_eq!(t.size_bytes(), meta.size_bytes);
                    assert_eq!(t.meta(), meta);
                    assert_eq!(meta.entries, entries.len() as u64);
                    let mut it = t.iter();
                    let (f, e) = forward(&mut it);
                    assert!(e.is_none());
                    assert_same(&f, &entries, "forward");
                    let (b, e) = backward(&mut it);
                    assert!(e.is_none());
                    assert_same(&b, &entries, "backward");
                    for (k, _) in entries.iter().step_by(7) {
                        let uk = key::user_key(k);
                        for snap in [1, key::seqno(k), key::seqno(k) + 1, 2000] {
                            assert_eq!(t.get(uk, snap).unwrap(), ref_get(&entries, uk, snap));
                        }
                        assert!(t.may_contain(uk));
                    }
                    assert_eq!(t.get(b"absent", 5000).unwrap(), None);
                }
            }
        }
        assert!(cache.hits() > 0 && cache.misses() > 0);
    }

    #[test]
    fn empty_table() {
        let fs = sim();
        let cache = Arc::new(BlockCache::new(0));
        let (path, meta) = build(&fs, &Vec::new(), &TableOptions::default());
        assert_eq!(meta.entries, 0);
        let t = open(&fs, &path, &cache).unwrap();
        let mut it = t.iter();
        assert_eq!(forward(&mut it).0, vec![]);
        assert_eq!(backward(&mut it).0, vec![]);
        it.seek(b"anything");
        assert!(!it.valid());
        it.seek_for_prev(b"anything");
        assert!(!it.valid());
        assert!(it.take_error().is_none());
        assert_eq!(t.get(b"a", 10).unwrap(), None);
    }

    #[test]
    fn bloom_filter_skips_absent_keys() {
        let fs = sim();
        let cache = Arc::new(BlockCache::new(1 << 20));
        let entries = sample(3000, 2);
        let (path, _) = build(&fs, &entries, &TableOptions::default());
        let t = open(&fs, &path, &cache).unwrap();
        let misses = cache.misses();
        let mut passed = 0;
        for i in 0..1000 {
            let k = format!("absent{i}");
            if t.may_contain(k.as_bytes()) {
                passed += 1;
            }
            assert_eq!(t.get(k.as_bytes(), 10_000).unwrap(), None);
        }
        assert!(passed < 50, "{passed} false positives");
        assert!(cache.misses() - misses <= passed);
    }

    #[test]
    fn big_keys_and_values() {
        let fs = sim();
        let cache = Arc::new(BlockCache::new(4 << 20));
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut e = Vec::new();
        for i in 0..12u64 {
            let klen = [0, 10, 1000, 64 * 1024][i as usize % 4];
            let mut uk: Vec<u8> = vec![b'k'; klen];
            uk.push(i as u8);
            let vlen = [0, 1 << 20, 5000, 300_000][(i as usize / 4) % 4];
            let v: Vec<u8> = (0..vlen)
                .map(|j| (j % 251) as u8 ^ rng.random::<u8>() & 1)
                .collect();
            e.push((make_internal(&uk, i + 1, Kind::Put), v));
        }
        let e = sort_entries(e);
        for compression in [Compression::None, Compression::Lz4, Compression::Zstd(1)] {
            let opts = TableOptions {
                compression,
                ..TableOptions::default()
            };
            let (path, _) = build(&fs, &e, &opts);
            let t = open(&fs, &path, &cache).unwrap();
            let mut it = t.iter();
            assert_same(&forward(&mut it).0, &e, "forward");
            assert_same(&backward(&mut it).0, &e, "backward");
            for (k, v) in &e {
                let got = t.get(key::user_key(k), 100).unwrap().unwrap();
                assert!(&got.2 == v);
            }
        }
    }

    #[test]
    fn fill_cache_false_leaves_the_cache_alone() {
        let fs = sim();
        let cache = Arc::new(BlockCache::new(1 << 20));
        let entries = sample(500, 4);
        let opts = TableOptions {
            block_size_bytes: 256,
            ..TableOptions::default()
        };
        let (path, _) = build(&fs, &entries, &opts);
        let t = open(&fs, &path, &cache).unwrap();
        let mut it = TableIter::new_with(&t, false);
        assert_same(&forward(&mut it).0, &entries, "forward");
        assert_eq!(cache.len(), 0);
        let mut it = t.iter();
        assert_same(&forward(&mut it).0, &entries, "forward");
        assert!(cache.len() > 1);
    }

    /// The bytes of a finished table file.
    fn file_bytes(fs: &SimFs, path: &Path) -> Vec<u8> {
        let f = fs.open(path).unwrap();
        let mut buf = vec![0u8; f.len().unwrap() as usize];
        f.read_at(&mut buf, 0).unwrap();
        buf
    }

    fn is_corruption_of(e: &Error, path: &Path) -> bool {
        matches!(e, Error::Corruption { file, .. } if file == path)
    }

    /// How a damaged table was caught.
    #[derive(Debug, Default)]
    struct Outcomes {
        open_failed: usize,
        read_failed: usize,
        all_correct: usize,
    }

    /// Opens `bytes` as a table and reads all of it every way; everything returned must be
    /// right, and anything that fails must fail with `Corruption` naming the file.
    fn check_damaged(fs: &SimFs, bytes: &[u8], entries: &Entries, what: &str, out: &mut Outcomes) {
        let path = PathBuf::from("/db/tables/damaged.sst");
        let _ = fs.remove(&path);
        let f = fs.create(&path).unwrap();
        if !bytes.is_empty() {
            f.write_at(&[bytes], 0).unwrap();
        }
        let cache = Arc::new(BlockCache::new(0));
        let t = match Table::open(9, path.clone(), f, cache) {
            Ok(t) => t,
            Err(e) => {
                assert!(is_corruption_of(&e, &path), "{what}: open: {e:?}");
                out.open_failed += 1;
                return;
            }
        };
        let mut failed = false;
        let mut it = t.iter();
        let (f, err) = forward(&mut it);
        assert_same(&f, &entries[..f.len().min(entries.len())], what);
        match err {
            Some(e) => {
                assert!(is_corruption_of(&e, &path), "{what}: {e:?}");
                failed = true;
            }
            None => assert_eq!(f.len(), entries.len(), "{what}: forward ended early"),
        }
        let (b, err) = backward(&mut it);
        assert_same(&b, &entries[entries.len().saturating_sub(b.len())..], what);
        match err {
            Some(e) => {
                assert!(is_corruption_of(&e, &path), "{what}: {e:?}");
                failed = true;
            }
            None => assert_eq!(b.len(), entries.len(), "{what}: backward ended early"),
        }
        for (k, _) in entries.iter().step_by(5) {
            let uk = key::user_key(k);
            match t.get(uk, key::seqno(k) + 1) {
                Ok(got) => assert_eq!(got, ref_get(entries, uk, key::seqno(k) + 1), "{what}"),
                Err(e) => {
                    assert!(is_corruption_of(&e, &path), "{what}: {e:?}");
                    failed = true;
                }
            }
            it.seek(k);
            if it.valid() {
                assert_eq!(it.key(), &k[..], "{what}: seek");
            } else if let Some(e) = it.take_error() {
                assert!(is_corruption_of(&e, &path), "{what}: {e:?}");
                failed = true;
            } else {
                panic!("{what}: seek to a present key found nothing and no error");
            }
        }
        if failed {
            out.read_failed += 1;
        } else {
            out.all_correct += 1;
        }
    }

    #[test]
    fn truncated_and_flipped_tables_are_corruption_never_panics() {
        let fs = sim();
        let cache = Arc::new(BlockCache::new(0));
        let entries = sample(120, 5);
        for compression in [Compression::None, Compression::Lz4, Compression::Zstd(1)] {
            let opts = TableOptions {
                block_size_bytes: 200,
                restart_interval: 3,
                bloom_bits_per_key: 10,
                compression,
            };
            let (path, _) = build(&fs, &entries, &opts);
            let good = file_bytes(&fs, &path);
            let mut out = Outcomes::default();
            check_damaged(&fs, &good, &entries, "intact", &mut out);
            assert_eq!(out.all_correct, 1);
            let t = open(&fs, &path, &cache).unwrap();
            assert_eq!(t.size_bytes(), good.len() as u64);
            for len in 0..good.len() {
                check_damaged(
                    &fs,
                    &good[..len],
                    &entries,
                    &format!("{compression:?} cut at {len}"),
                    &mut out,
                );
            }
            let mut rng = ChaCha8Rng::seed_from_u64(6);
            for i in 0..good.len() {
                let mut bad = good.clone();
                let x: u8 = rng.random_range(1..=255);
                bad[i] ^= x;
                check_damaged(
                    &fs,
                    &bad,
                    &entries,
                    &format!("{compression:?} flip {x:#x} at {i}"),
                    &mut out,
                );
            }
            // Extra bytes in front of the footer move every handle: also caught.
            let mut longer = good.clone();
            longer.splice(good.len() - 64..good.len() - 64, [0u8; 3]);
            check_damaged(&fs, &longer, &entries, "grown", &mut out);
            // Every truncation loses the footer; every flip is caught by a checksum (at
            // open for the footer and metadata blocks, on read for data blocks).
            assert_eq!(out.all_correct, 2, "{out:?}"); // intact and grown
            assert!(out.read_failed > 0, "{out:?}");
            assert_eq!(out.open_failed + out.read_failed, 2 * good.len(), "{out:?}");
        }
    }

    /// A reference model check: every operation on a random table against a sorted vector.
    fn check_against_reference(entries: &Entries, opts: &TableOptions, seed: u64) {
        let fs = sim();
        let cache = Arc::new(BlockCache::new(if seed & 1 == 0 { 0 } else { 1 << 16 }));
        let (path, meta) = build(&fs, entries, opts);
        assert_eq!(meta.entries, entries.len() as u64);
        if let (Some(first), Some(last)) = (entries.first(), entries.last()) {
            assert_eq!(meta.smallest, first.0);
            assert_eq!(meta.largest, last.0);
        }
        let t = open(&fs, &path, &cache).unwrap();
        let mut it = t.iter();
        let (f, e) = forward(&mut it);
        assert!(e.is_none());
        assert_same(&f, entries, "forward");
        let (b, e) = backward(&mut it);
        assert!(e.is_none());
        assert_same(&b, entries, "backward");

        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let pick_target = |rng: &mut ChaCha8Rng| -> Vec<u8> {
            if !entries.is_empty() && rng.random_bool(0.7) {
                let (k, _) = &entries[rng.random_range(0..entries.len())];
                let uk = key::user_key(k).to_vec();
                match rng.random_range(0..3) {
                    0 => k.clone(),
                    1 => key::seek_key(&uk, rng.random_range(1..300)),
                    _ => {
                        let mut u = uk;
                        u.push(rng.random());
                        key::seek_key(&u, rng.random_range(1..300))
                    }
                }
            } else {
                let len = rng.random_range(0..4);
                let u: Vec<u8> = (0..len).map(|_| rng.random_range(0..4u8)).collect();
                key::seek_key(&u, rng.random_range(1..300))
            }
        };
        for _ in 0..40 {
            let target = pick_target(&mut rng);
            // The position the reference says each seek lands on.
            let ge =
                entries.partition_point(|(k, _)| key::cmp_internal(k, &target) == Ordering::Less);
            let le = entries
                .partition_point(|(k, _)| key::cmp_internal(k, &target) != Ordering::Greater);
            let mut pos: Option<usize>;
            if rng.random_bool(0.5) {
                it.seek(&target);
                pos = (ge < entries.len()).then_some(ge);
            } else {
                it.seek_for_prev(&target);
                pos = le.checked_sub(1);
            }
            for _ in 0..6 {
                assert!(it.take_error().is_none());
                match pos {
                    None => {
                        assert!(!it.valid());
                        break;
                    }
                    Some(p) => {
                        assert!(it.valid());
                        assert_eq!(it.key(), &entries[p].0[..]);
                        assert_eq!(it.value(), &entries[p].1[..]);
                    }
                }
                let p = pos.unwrap_or(0);
                if rng.random_bool(0.5) {
                    it.next();
                    pos = (p + 1 < entries.len()).then_some(p + 1);
                } else {
                    it.prev();
                    pos = p.checked_sub(1);
                }
            }
            // A point read at a random snapshot.
            let uk = key::user_key(&target).to_vec();
            let snap = rng.random_range(0..300);
            assert_eq!(t.get(&uk, snap).unwrap(), ref_get(entries, &uk, snap));
        }
    }

    fn entries_strategy() -> impl Strategy<Value = Entries> {
        let entry = (
            proptest::collection::vec(0u8..4, 0..6),
            1u64..300,
            0u8..3,
            prop_oneof![
                3 => proptest::collection::vec(any::<u8>(), 0..20),
                1 => Just(Vec::new()),
                1 => proptest::collection::vec(0u8..3, 100..3000),
            ],
        );
        proptest::collection::vec(entry, 0..300).prop_map(|v| {
            sort_entries(
                v.into_iter()
                    .map(|(uk, s, k, val)| {
                        let kind = Kind::from_u8(k).unwrap_or(Kind::Put);
                        (make_internal(&uk, s, kind), val)
                    })
                    .collect(),
            )
        })
    }

    fn options_strategy() -> impl Strategy<Value = TableOptions> {
        (
            prop_oneof![Just(1usize), 16usize..512, Just(4096)],
            1usize..20,
            prop_oneof![Just(0u32), 1u32..16],
            prop_oneof![
                Just(Compression::None),
                Just(Compression::Lz4),
                (-3i32..6).prop_map(Compression::Zstd)
            ],
        )
            .prop_map(|(b, r, bits, c)| TableOptions {
                block_size_bytes: b,
                restart_interval: r,
                bloom_bits_per_key: bits,
                compression: c,
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn matches_reference(entries in entries_strategy(), opts in options_strategy(), seed: u64) {
            check_against_reference(&entries, &opts, seed);
        }
    }
}
