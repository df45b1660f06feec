//! [`TableBuilder`]: writes a table file from entries given in internal-key order
//! (`docs/format/sstable.md`).
//!
//! Steps: entries fill a data block until it reaches `block_size_bytes`; the block is
//! compressed (kept raw unless that saves at least 1/8), given a trailer, and appended to
//! an in-memory write buffer that goes to the file in ~256 KiB `write_at` calls. Its index
//! entry is written once the next key is known, under a short separator key between the
//! block's last key and the next block's first. `finish` appends the filter, properties
//! and index blocks and the footer, then `sync_data`s the file.
//!
//! Invariants: keys strictly increase (checked on every `add`, so a bad caller gets
//! `InvalidArgument`, never a silently unsorted table); every index key `K_i` satisfies
//! `last key of block i <= K_i < first key of block i+1`.

use std::path::PathBuf;
use std::sync::Arc;

use silt_vfs::File;

use super::block::BlockBuilder;
use super::bloom::{bloom_hash, BloomBuilder};
use super::format::{
    block_crc, compress_block, BlockHandle, Compression, Footer, TableProps, MAX_BLOCK_BYTES,
};
use crate::error::{Error, Result};
use crate::key::{self, cmp_internal, Kind, KIND_SEEK, MAX_SEQNO, TRAILER_BYTES};
use crate::table_meta::{BlobPointer, BlobRef, TableMeta};

/// Buffered bytes that trigger a write to the file.
const WRITE_BUFFER_BYTES: usize = 256 * 1024;

/// How tables are built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TableOptions {
    /// Target uncompressed size of a data block. A block ends at the first entry that
    /// brings it to this size, so one large entry makes one large block.
    pub block_size_bytes: usize,
    /// Entries between restart points in data blocks.
    pub restart_interval: usize,
    /// Bloom filter bits per distinct user key; 0 = no filter.
    pub bloom_bits_per_key: u32,
    /// Data block compression.
    pub compression: Compression,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            block_size_bytes: 4096,
            restart_interval: 8,
            bloom_bits_per_key: 10,
            compression: Compression::None,
        }
    }
}

/// Writes one table file.
pub(crate) struct TableBuilder {
    id: u64,
    path: PathBuf,
    file: Arc<dyn File>,
    opts: TableOptions,
    data_block: BlockBuilder,
    index_block: BlockBuilder,
    bloom: BloomBuilder,
    /// The handle of the last data block written, whose index entry waits for the next key.
    pending_index: Option<BlockHandle>,
    last_key: Vec<u8>,
    /// Bytes not yet written; they start at file offset `written`.
    buf: Vec<u8>,
    written: u64,
    scratch: Vec<u8>,
    zstd: Option<zstd::bulk::Compressor<'static>>,
    props: TableProps,
    /// Set after a failed write: the file is in an unknown state.
    failed: bool,
}

impl std::fmt::Debug for TableBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableBuilder")
            .field("id", &self.id)
            .field("path", &self.path)
            .field("entries", &self.props.entries)
            .field("written", &self.written)
            .finish_non_exhaustive()
    }
}

impl TableBuilder {
    /// A builder writing table `id` into `file` (new and empty) at `path`.
    pub(crate) fn new(
        id: u64,
        path: PathBuf,
        file: Arc<dyn File>,
        opts: &TableOptions,
    ) -> TableBuilder {
        TableBuilder {
            id,
            path,
            file,
            opts: opts.clone(),
            data_block: BlockBuilder::new(opts.restart_interval),
            // Index entries are few and searched often: restart at every one.
            index_block: BlockBuilder::new(1),
            bloom: BloomBuilder::new(opts.bloom_bits_per_key),
            pending_index: None,
            last_key: Vec::new(),
            buf: Vec::with_capacity(WRITE_BUFFER_BYTES + opts.block_size_bytes.min(1 << 20)),
            written: 0,
            scratch: Vec::new(),
            zstd: None,
            props: TableProps::default(),
            failed: false,
        }
    }

    /// Appends an entry. REQUIRES: `ikey` sorts strictly after the previous key
    /// (`InvalidArgument` otherwise, and nothing is added).
    pub(crate) fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        if self.failed {
            return Err(Error::invalid("table builder used after a failed write"));
        }
        let Some(parsed) = key::parse(ikey) else {
            return Err(Error::invalid(format!(
                "table {}: malformed internal key of {} bytes",
                self.id,
                ikey.len()
            )));
        };
        let first = self.props.entries == 0;
        if !first && cmp_internal(ikey, &self.last_key) != std::cmp::Ordering::Greater {
            return Err(Error::invalid(format!(
                "table {}: keys added out of order",
                self.id
            )));
        }
        if ikey.len() + value.len() + 32 > MAX_BLOCK_BYTES {
            return Err(Error::invalid(format!(
                "table {}: an entry of {} bytes does not fit in a block",
                self.id,
                ikey.len() + value.len()
            )));
        }
        // Keep every block under the reader's size limit whatever `block_size_bytes` says.
        if !self.data_block.is_empty()
            && self.data_block.estimated_size_bytes() + ikey.len() + value.len() + 32
                > MAX_BLOCK_BYTES
        {
            self.flush_data_block()?;
        }
        if let Some(handle) = self.pending_index.take() {
            let sep = separator(&self.last_key, ikey);
            self.add_index_entry(&sep, handle);
        }
        if first || key::user_key(&self.last_key) != parsed.user_key {
            self.bloom.add_hash(bloom_hash(parsed.user_key));
        }

        let p = &mut self.props;
        if first {
            p.smallest = ikey.to_vec();
            p.smallest_seqno = parsed.seqno;
            p.largest_seqno = parsed.seqno;
        } else {
            p.smallest_seqno = p.smallest_seqno.min(parsed.seqno);
            p.largest_seqno = p.largest_seqno.max(parsed.seqno);
        }
        p.entries += 1;
        if parsed.kind.is_tombstone() {
            p.tombstones += 1;
        }
        if parsed.kind.is_blob() {
            let ptr = match parsed.kind {
                Kind::BlobTtl => value.get(crate::key::EXPIRY_BYTES..).unwrap_or_default(),
                _ => value,
            };
            let ptr = BlobPointer::decode(ptr).ok_or_else(|| Error::Corruption {
                file: self.path.clone(),
                offset: 0,
                reason: "a blob entry's value is not a blob pointer".into(),
            })?;
            add_blob_ref(&mut p.blobs, ptr);
        }
        p.raw_key_bytes += ikey.len() as u64;
        p.raw_value_bytes += value.len() as u64;
        self.last_key.clear();
        self.last_key.extend_from_slice(ikey);

        self.data_block.add(ikey, value);
        if self.data_block.estimated_size_bytes() >= self.opts.block_size_bytes {
            self.flush_data_block()?;
        }
        Ok(())
    }

    /// Bytes the file would have if finished now (roughly: pending blocks estimated raw).
    pub(crate) fn estimated_size_bytes(&self) -> u64 {
        self.written
            + self.buf.len() as u64
            + self.data_block.estimated_size_bytes() as u64
            + self.index_block.estimated_size_bytes() as u64
            + self.bloom.estimated_size_bytes() as u64
    }

    /// The table's id.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The table file's path.
    pub(crate) fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Entries added so far.
    #[allow(dead_code)] // part of the builder API, for callers that cut tables by count
    pub(crate) fn entries(&self) -> u64 {
        self.props.entries
    }

    /// Writes the last data block, the filter, properties and index blocks and the footer,
    /// syncs the file, and describes the table. An empty table is valid (its meta has
    /// empty keys); the engine normally does not write one.
    pub(crate) fn finish(mut self) -> Result<TableMeta> {
        if self.failed {
            return Err(Error::invalid("table builder used after a failed write"));
        }
        if !self.data_block.is_empty() {
            self.flush_data_block()?;
        }
        if let Some(handle) = self.pending_index.take() {
            // Past the last block any key >= its last key will do; the last key is exact.
            let last = std::mem::take(&mut self.last_key);
            self.add_index_entry(&last, handle);
            self.last_key = last;
        }
        let filter = match self.bloom.finish() {
            Some(f) => self.append_block(&f),
            None => BlockHandle::default(),
        };
        self.props.largest = self.last_key.clone();
        let props_bytes = self.props.encode();
        let props = self.append_block(&props_bytes);
        let index_bytes = self.index_block.finish().to_vec();
        let index = self.append_block(&index_bytes);
        let footer = Footer {
            index,
            filter,
            props,
        };
        self.buf.extend_from_slice(&footer.encode());
        self.write_buffer()?;
        self.file
            .sync_data()
            .map_err(|e| Error::io("fdatasync table", Some(self.path.clone()), e))?;
        let p = self.props;
        Ok(TableMeta {
            id: self.id,
            size_bytes: self.written,
            entries: p.entries,
            tombstones: p.tombstones,
            smallest: p.smallest,
            largest: p.largest,
            smallest_seqno: p.smallest_seqno,
            largest_seqno: p.largest_seqno,
            blobs: p.blobs,
        })
    }
}

/// Counts `ptr`'s value in `refs` (sorted by blob id; a table points into few files).
fn add_blob_ref(refs: &mut Vec<BlobRef>, ptr: BlobPointer) {
    match refs.binary_search_by_key(&ptr.id, |r| r.id) {
        Ok(i) => refs[i].bytes += u64::from(ptr.len),
        Err(i) => refs.insert(
            i,
            BlobRef {
                id: ptr.id,
                bytes: u64::from(ptr.len),
            },
        ),
    }
}

impl TableBuilder {
    fn add_index_entry(&mut self, key: &[u8], handle: BlockHandle) {
        let mut v = Vec::with_capacity(20);
        handle.encode_to(&mut v);
        self.index_block.add(key, &v);
    }

    fn flush_data_block(&mut self) -> Result<()> {
        debug_assert!(!self.data_block.is_empty());
        let raw = self.data_block.finish();
        let (payload, byte) = compress_block(
            raw,
            self.opts.compression,
            &mut self.zstd,
            &mut self.scratch,
        );
        let offset = self.written + self.buf.len() as u64;
        self.buf.extend_from_slice(payload);
        self.buf.push(byte);
        self.buf
            .extend_from_slice(&block_crc(payload, byte).to_le_bytes());
        let handle = BlockHandle {
            offset,
            len: payload.len() as u64,
        };
        self.props.data_blocks += 1;
        self.props.data_bytes += handle.len + super::format::BLOCK_TRAILER_BYTES as u64;
        self.data_block.reset();
        self.pending_index = Some(handle);
        if self.buf.len() >= WRITE_BUFFER_BYTES {
            self.write_buffer()?;
        }
        Ok(())
    }

    /// Appends an uncompressed block to the buffer and returns its handle.
    fn append_block(&mut self, payload: &[u8]) -> BlockHandle {
        let offset = self.written + self.buf.len() as u64;
        self.buf.extend_from_slice(payload);
        self.buf.push(0);
        self.buf
            .extend_from_slice(&block_crc(payload, 0).to_le_bytes());
        BlockHandle {
            offset,
            len: payload.len() as u64,
        }
    }

    fn write_buffer(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        if let Err(e) = self.file.write_at(&[&self.buf], self.written) {
            self.failed = true;
            return Err(Error::io("write table", Some(self.path.clone()), e));
        }
        self.written += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }
}

/// A short key `s` with `a <= s < b` (internal order), for the index entry between a
/// block ending with `a` and one starting with `b`. REQUIRES: `a < b`.
///
/// When the user keys differ, the first differing byte of `a`'s user key is incremented
/// and the rest dropped, if that still sorts below `b`'s user key; the trailer then takes
/// the smallest possible value (`MAX_SEQNO`, kind `KIND_SEEK`: all zero bytes), which sorts
/// first among that user key's entries. Otherwise `a` itself is used.
pub(crate) fn separator(a: &[u8], b: &[u8]) -> Vec<u8> {
    if a.len() < TRAILER_BYTES || b.len() < TRAILER_BYTES {
        return a.to_vec();
    }
    let ua = key::user_key(a);
    let ub = key::user_key(b);
    let common = ua.iter().zip(ub).take_while(|(x, y)| x == y).count();
    if common < ua.len().min(ub.len()) {
        let byte = ua[common];
        if byte < 0xFF && byte + 1 < ub[common] && common + 1 < ua.len() {
            let mut s = Vec::with_capacity(common + 1 + TRAILER_BYTES);
            s.extend_from_slice(&ua[..common]);
            s.push(byte + 1);
            s.extend_from_slice(&key::trailer(MAX_SEQNO, KIND_SEEK));
            debug_assert_eq!(cmp_internal(a, &s), std::cmp::Ordering::Less);
            debug_assert_eq!(cmp_internal(&s, b), std::cmp::Ordering::Less);
            return s;
        }
    }
    a.to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{make_internal, Kind};
    use std::cmp::Ordering;

    #[test]
    fn thread_safety() {
        fn send<T: Send>() {}
        fn send_sync<T: Send + Sync>() {}
        send::<TableBuilder>();
        send_sync::<crate::sstable::Table>();
        send::<crate::sstable::TableIter>();
        send_sync::<crate::sstable::BlockCache>();
    }

    #[test]
    fn separator_is_between_and_short() {
        let cases: &[(&[u8], &[u8])] = &[
            (b"abcdefgh", b"abzzzz"),
            (b"abc", b"abd"),
            (b"ab", b"abc"),
            (b"a\xff\xff", b"b"),
            (b"", b"a"),
            (b"helloworld", b"help"),
        ];
        for (x, y) in cases {
            let a = make_internal(x, 5, Kind::Put);
            let b = make_internal(y, 9, Kind::Delete);
            let s = separator(&a, &b);
            assert_ne!(cmp_internal(&a, &s), Ordering::Greater, "{x:?} {y:?}");
            assert_eq!(cmp_internal(&s, &b), Ordering::Less, "{x:?} {y:?}");
            assert!(s.len() <= a.len());
        }
        let a = make_internal(b"abcdefgh", 5, Kind::Put);
        let b = make_internal(b"abzzzz", 9, Kind::Put);
        assert_eq!(key::user_key(&separator(&a, &b)), b"abd");
        // Same user key: the key itself.
        let a = make_internal(b"k", 9, Kind::Put);
        let b = make_internal(b"k", 5, Kind::Put);
        assert_eq!(separator(&a, &b), a);
    }

    #[test]
    fn add_rejects_unsorted_and_malformed_keys() {
        let fs = silt_vfs::SimFs::new();
        use silt_vfs::FileSystem;
        fs.create_dir_all(std::path::Path::new("/t")).unwrap();
        let path = PathBuf::from("/t/1.sst");
        let f = fs.create(&path).unwrap();
        let mut b = TableBuilder::new(1, path, f, &TableOptions::default());
        b.add(&make_internal(b"b", 5, Kind::Put), b"v").unwrap();
        assert!(matches!(
            b.add(&make_internal(b"b", 5, Kind::Put), b"v"),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            b.add(&make_internal(b"a", 9, Kind::Put), b"v"),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            b.add(b"short", b"v"),
            Err(Error::InvalidArgument(_))
        ));
        b.add(&make_internal(b"b", 4, Kind::Delete), b"").unwrap();
        assert_eq!(b.entries(), 2);
        let meta = b.finish().unwrap();
        assert_eq!(meta.entries, 2);
        assert_eq!(meta.tombstones, 1);
        assert_eq!(meta.smallest, make_internal(b"b", 5, Kind::Put));
        assert_eq!(meta.largest, make_internal(b"b", 4, Kind::Delete));
        assert_eq!((meta.smallest_seqno, meta.largest_seqno), (4, 5));
    }
}
