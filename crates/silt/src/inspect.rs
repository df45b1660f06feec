//! Read-only inspection of a database's files, for tools (`silt-cli`'s `sst dump`,
//! `manifest dump`, `wal dump`, `verify`): each entry point runs the engine's own
//! decoders and checks, so a tool never decodes a format itself. Nothing here writes.
//!
//! The shapes returned are descriptions (numbers and byte strings), not engine internals;
//! they may grow fields (`#[non_exhaustive]`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use silt_vfs::{FileSystem, OsFs};

use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{self, Kind};
use crate::manifest::{Edit, Manifest};
use crate::sstable::block::{Block, BlockIter};
use crate::sstable::format::{
    decode_block, BlockHandle, Footer, BLOCK_TRAILER_BYTES, FOOTER_BYTES,
};
use crate::sstable::{BlockCache, Table, TableIter};
use crate::table_meta::{table_file_name, BlobPointer};

/// An entry's kind as a word: `put`, `delete`, `single_delete`, `blob`, `put_ttl`,
/// `blob_ttl`, `merge`.
pub fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::Put => "put",
        Kind::Delete => "delete",
        Kind::SingleDelete => "single_delete",
        Kind::Blob => "blob",
        Kind::PutTtl => "put_ttl",
        Kind::BlobTtl => "blob_ttl",
        Kind::Merge => "merge",
    }
}

/// One entry of a table or a log batch.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Entry {
    /// The user key.
    pub key: Vec<u8>,
    /// The seqno (the batch's LSN).
    pub seqno: u64,
    /// What the entry does.
    pub kind: Kind,
    /// The value (empty for a tombstone; a 20-byte pointer for a `blob` entry, 24 bytes into
    /// a log blob, `docs/format/vlog.md`; for the
    /// expiring kinds, the 8-byte expiry time first, see [`Entry::expiry_millis`]).
    pub value: Vec<u8>,
    /// The column family id (log entries only; 0 in tables, which belong to one family).
    pub cf: u32,
}

impl Entry {
    /// For a `blob` or `blob_ttl` entry: the blob file id, offset and value length it
    /// points at.
    pub fn blob_pointer(&self) -> Option<(u64, u64, u32)> {
        let ptr = match self.kind {
            Kind::Blob => &self.value[..],
            Kind::BlobTtl => self.value.get(key::EXPIRY_BYTES..)?,
            _ => return None,
        };
        BlobPointer::decode(ptr).map(|p| (p.id, p.offset, p.len))
    }

    /// For an expiring entry (`put_ttl`, `blob_ttl`): when it expires, in milliseconds
    /// since the Unix epoch.
    pub fn expiry_millis(&self) -> Option<u64> {
        self.kind
            .expires()
            .then(|| key::expiry_of(&self.value))
            .flatten()
    }
}

/// What a table's properties block says.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SstProperties {
    /// File length.
    pub size_bytes: u64,
    /// Entries.
    pub entries: u64,
    /// Tombstones among them.
    pub tombstones: u64,
    /// Smallest and largest seqno.
    pub seqnos: (u64, u64),
    /// Data blocks.
    pub data_blocks: u64,
    /// Bytes of keys and values before compression, and of data blocks as stored.
    pub raw_key_bytes: u64,
    /// See `raw_key_bytes`.
    pub raw_value_bytes: u64,
    /// See `raw_key_bytes`.
    pub data_bytes: u64,
    /// Smallest and largest user key.
    pub smallest: Vec<u8>,
    /// See `smallest`.
    pub largest: Vec<u8>,
    /// Blob files the table points into: `(id, bytes)`.
    pub blobs: Vec<(u64, u64)>,
}

/// One block of a table as stored: where, how long, its compression byte, and whether
/// its checksum and decoding pass.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct BlockInfo {
    /// `data`, `filter`, `properties` or `index`.
    pub role: &'static str,
    /// Offset of the payload.
    pub offset: u64,
    /// Stored payload bytes (without the 5-byte trailer).
    pub len: u64,
    /// The trailer's compression byte (0 none, 1 lz4, 2 zstd).
    pub compression: u8,
    /// `None` if the checksum and decoding pass; otherwise why not.
    pub error: Option<String>,
}

/// The index block's entries: separator key and the data block's handle.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct IndexEntry {
    /// The separator (an internal key: user key, then seqno and kind).
    pub separator: Vec<u8>,
    /// The separator's user key.
    pub user_key: Vec<u8>,
    /// The data block's offset.
    pub offset: u64,
    /// The data block's stored length.
    pub len: u64,
}

/// The bloom filter's size and probe count.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct BloomStats {
    /// Bytes of the bit array.
    pub bytes: u64,
    /// Probes per key.
    pub probes: u8,
    /// Bits per entry (`bytes * 8 / entries`).
    pub bits_per_entry: f64,
}

/// An open table file (`docs/format/sstable.md`), read with the engine's reader.
#[derive(Debug)]
pub struct SstFile {
    table: Arc<Table>,
    file: Arc<dyn silt_vfs::File>,
    path: PathBuf,
    footer: Footer,
}

impl SstFile {
    /// Opens the table at `path`: footer, index, filter and properties are read and checked.
    ///
    /// # Errors
    ///
    /// `Corruption { file, offset }` if they do not check out; `Io` if it cannot be read.
    pub fn open(path: impl AsRef<Path>) -> Result<SstFile> {
        let path = path.as_ref().to_path_buf();
        let fs = OsFs::new();
        let file = fs
            .open(&path)
            .map_err(|e| Error::io("open table", Some(path.clone()), e))?;
        let id = path
            .file_stem()
            .and_then(|s| s.to_str())
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let table = Table::open(
            id,
            path.clone(),
            file.clone(),
            Arc::new(BlockCache::new(1 << 20)),
        )?;
        let len = file
            .len()
            .map_err(|e| Error::io("stat table", Some(path.clone()), e))?;
        let mut f = [0u8; FOOTER_BYTES];
        let at = len - FOOTER_BYTES as u64;
        file.read_at(&mut f, at)
            .map_err(|e| Error::io("read table", Some(path.clone()), e))?;
        let footer = Footer::decode(&f, &path, at)?;
        Ok(SstFile {
            table,
            file,
            path,
            footer,
        })
    }

    /// The properties block.
    pub fn properties(&self) -> SstProperties {
        let p = self.table.properties();
        let m = self.table.meta();
        SstProperties {
            size_bytes: m.size_bytes,
            entries: p.entries,
            tombstones: p.tombstones,
            seqnos: (p.smallest_seqno, p.largest_seqno),
            data_blocks: p.data_blocks,
            raw_key_bytes: p.raw_key_bytes,
            raw_value_bytes: p.raw_value_bytes,
            data_bytes: p.data_bytes,
            smallest: key::user_key(&p.smallest).to_vec(),
            largest: key::user_key(&p.largest).to_vec(),
            blobs: p.blobs.iter().map(|b| (b.id, b.bytes)).collect(),
        }
    }

    fn read_block(&self, h: BlockHandle) -> Result<(u8, Vec<u8>)> {
        let end = self.table.meta().size_bytes - FOOTER_BYTES as u64;
        if h.end().is_none_or(|e| e > end) || h.len > 1 << 30 {
            return Err(Error::corruption(
                &self.path,
                h.offset,
                "block handle out of bounds",
            ));
        }
        let mut buf = vec![0u8; h.len as usize + BLOCK_TRAILER_BYTES];
        self.file
            .read_at(&mut buf, h.offset)
            .map_err(|e| Error::io("read table", Some(self.path.clone()), e))?;
        let compression = buf[h.len as usize];
        Ok((compression, decode_block(buf, &self.path, h.offset)?))
    }

    /// The index block's entries, in order.
    ///
    /// # Errors
    ///
    /// `Corruption` if the index does not decode.
    pub fn index(&self) -> Result<Vec<IndexEntry>> {
        let (_, raw) = self.read_block(self.footer.index)?;
        let block = Arc::new(Block::new(
            raw,
            Arc::from(self.path.as_path()),
            self.footer.index.offset,
        )?);
        let mut it = BlockIter::new(block);
        it.seek_to_first();
        let mut out = Vec::new();
        while it.valid() {
            let h = BlockHandle::decode(it.value()).ok_or_else(|| {
                Error::corruption(
                    &self.path,
                    self.footer.index.offset,
                    "bad block handle in the index",
                )
            })?;
            out.push(IndexEntry {
                separator: it.key().to_vec(),
                user_key: key::user_key(it.key()).to_vec(),
                offset: h.offset,
                len: h.len,
            });
            it.next();
        }
        if let Some(e) = it.take_error() {
            return Err(e);
        }
        Ok(out)
    }

    /// The bloom filter's size and probe count; `None` for a table without one.
    ///
    /// # Errors
    ///
    /// `Corruption` if the filter block fails its checksum.
    pub fn bloom(&self) -> Result<Option<BloomStats>> {
        if self.footer.filter == BlockHandle::default() {
            return Ok(None);
        }
        let (_, raw) = self.read_block(self.footer.filter)?;
        let Some((&probes, bits)) = raw.split_last() else {
            return Ok(None);
        };
        let entries = self.table.properties().entries.max(1);
        Ok(Some(BloomStats {
            bytes: bits.len() as u64,
            probes,
            bits_per_entry: bits.len() as f64 * 8.0 / entries as f64,
        }))
    }

    /// Every block as stored, data blocks first (in index order), then filter, properties
    /// and index, each with the result of its checksum and decoding.
    ///
    /// # Errors
    ///
    /// `Corruption` if the index does not decode (the data blocks cannot be found).
    pub fn blocks(&self) -> Result<Vec<BlockInfo>> {
        let mut handles: Vec<(&'static str, BlockHandle)> = self
            .index()?
            .into_iter()
            .map(|e| {
                (
                    "data",
                    BlockHandle {
                        offset: e.offset,
                        len: e.len,
                    },
                )
            })
            .collect();
        if self.footer.filter != BlockHandle::default() {
            handles.push(("filter", self.footer.filter));
        }
        handles.push(("properties", self.footer.props));
        handles.push(("index", self.footer.index));
        Ok(handles
            .into_iter()
            .map(|(role, h)| {
                let r = self.read_block(h).and_then(|(c, raw)| {
                    if role == "data" {
                        Block::new(raw, Arc::from(self.path.as_path()), h.offset)?;
                    }
                    Ok(c)
                });
                let mut c = [0u8; 1];
                let compression = match &r {
                    Ok(c) => *c,
                    Err(_) => self
                        .file
                        .read_at(&mut c, h.offset + h.len)
                        .map(|_| c[0])
                        .unwrap_or(0),
                };
                BlockInfo {
                    role,
                    offset: h.offset,
                    len: h.len,
                    compression,
                    error: r.err().map(|e| e.to_string()),
                }
            })
            .collect())
    }

    /// Every entry in order, each decoded and checked (block checksums, keys).
    pub fn entries(&self) -> SstEntries {
        let mut it = TableIter::new_with(&self.table, false);
        it.seek_to_first();
        SstEntries { it, done: false }
    }

    /// Reads every block and entry, checking every checksum; returns the entry count.
    ///
    /// # Errors
    ///
    /// `Corruption { file, offset }` at the first block that fails.
    pub fn verify(&self) -> Result<u64> {
        let mut n = 0;
        for e in self.entries() {
            e?;
            n += 1;
        }
        Ok(n)
    }
}

/// The entries of an [`SstFile`], from [`SstFile::entries`].
pub struct SstEntries {
    it: TableIter,
    done: bool,
}

impl Iterator for SstEntries {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        if self.done {
            return None;
        }
        if !self.it.valid() {
            self.done = true;
            return self.it.take_error().map(Err);
        }
        let e = match key::parse(self.it.key()) {
            Some(p) => Entry {
                key: p.user_key.to_vec(),
                seqno: p.seqno,
                kind: p.kind,
                value: self.it.value().to_vec(),
                cf: 0,
            },
            None => {
                self.done = true;
                return Some(Err(Error::corruption(
                    "<table>",
                    0,
                    "malformed internal key",
                )));
            }
        };
        self.it.next();
        Some(Ok(e))
    }
}

/// One record of a manifest: its offset and its edits, each as one line of text.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ManifestRecord {
    /// The record's offset in the file.
    pub offset: u64,
    /// Its edits, in order, described.
    pub edits: Vec<String>,
}

/// One table of the current version, as the manifest records it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ManifestTable {
    /// Column family name.
    pub cf: String,
    /// Level.
    pub level: usize,
    /// Table id (`tables/{id:06}.sst`).
    pub id: u64,
    /// File length.
    pub size_bytes: u64,
    /// Entries.
    pub entries: u64,
    /// Smallest and largest user key.
    pub smallest: Vec<u8>,
    /// See `smallest`.
    pub largest: Vec<u8>,
}

/// Everything the live manifest says.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ManifestDump {
    /// The manifest file `CURRENT` names.
    pub path: PathBuf,
    /// Every record, in order.
    pub records: Vec<ManifestRecord>,
    /// A torn last record: its offset and why.
    pub torn_tail: Option<(u64, String)>,
    /// The current version: every table per column family and level.
    pub tables: Vec<ManifestTable>,
    /// Column families: `(id, name)`.
    pub cfs: Vec<(u32, String)>,
    /// Live blob files: `(id, bytes)`.
    pub blobs: Vec<(u64, u64)>,
    /// Where log replay starts.
    pub log_start: u64,
    /// The next table id and column family id.
    pub next_table_id: u64,
    /// See `next_table_id`.
    pub next_cf_id: u32,
}

fn describe(e: &Edit) -> String {
    let show = |k: &[u8]| String::from_utf8_lossy(key::user_key(k)).into_owned();
    match e {
        Edit::CreateCf { id, name } => format!("create_cf id={id} name={name:?}"),
        Edit::DropCf { id } => format!("drop_cf id={id}"),
        Edit::AddTable { cf, level, meta } => format!(
            "add_table cf={cf} level={level} id={} bytes={} entries={} keys={:?}..{:?} seqnos={}..{}{}",
            meta.id,
            meta.size_bytes,
            meta.entries,
            show(&meta.smallest),
            show(&meta.largest),
            meta.smallest_seqno,
            meta.largest_seqno,
            if meta.blobs.is_empty() {
                String::new()
            } else {
                format!(" blobs={:?}", meta.blobs.iter().map(|b| (b.id, b.bytes)).collect::<Vec<_>>())
            }
        ),
        Edit::RemoveTable { cf, level, id } => format!("remove_table cf={cf} level={level} id={id}"),
        Edit::LogStart(l) => format!("log_start {l}"),
        Edit::NextTableId(n) => format!("next_table_id {n}"),
        Edit::NextCfId(n) => format!("next_cf_id {n}"),
        Edit::AddBlob(b) => match b.log {
            None => format!(
                "add_blob id={} bytes={} records={} value_bytes={}",
                b.id, b.size_bytes, b.records, b.value_bytes
            ),
            Some(l) => format!(
                "add_log_blob id={} bytes={} records={} value_bytes={} segment={} span={}..{}",
                b.id, b.size_bytes, b.records, b.value_bytes, l.segment, l.from, l.to
            ),
        },
    }
}

/// Reads the manifest of the database at `dir` (the file `CURRENT` names), every record,
/// and the version it builds. Changes nothing.
///
/// # Errors
///
/// `Corruption` naming the manifest (or `CURRENT`) and offset; `Io`.
pub fn manifest(dir: impl AsRef<Path>) -> Result<ManifestDump> {
    let d = crate::manifest::dump(OsFs::new(), dir.as_ref())?;
    let s = &d.state;
    let mut tables = Vec::new();
    for cf in s.cfs.values() {
        for (level, ts) in cf.levels.iter().enumerate() {
            for t in ts {
                tables.push(ManifestTable {
                    cf: cf.name.clone(),
                    level,
                    id: t.id,
                    size_bytes: t.size_bytes,
                    entries: t.entries,
                    smallest: key::user_key(&t.smallest).to_vec(),
                    largest: key::user_key(&t.largest).to_vec(),
                });
            }
        }
    }
    Ok(ManifestDump {
        path: d.path.clone(),
        records: d
            .records
            .iter()
            .map(|r| ManifestRecord {
                offset: r.offset,
                edits: r.edits.iter().map(describe).collect(),
            })
            .collect(),
        torn_tail: d.torn.clone(),
        tables,
        cfs: s.cfs.values().map(|c| (c.id, c.name.clone())).collect(),
        blobs: s.blobs.values().map(|b| (b.id, b.size_bytes)).collect(),
        log_start: s.log_start,
        next_table_id: s.next_table_id,
        next_cf_id: s.next_cf_id,
    })
}

/// One log record: its LSN and its batch, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct WalRecord {
    /// The record's LSN (the seqno of its entries).
    pub lsn: u64,
    /// Payload bytes.
    pub bytes: u64,
    /// The batch's entries, or why it does not decode.
    pub entries: std::result::Result<Vec<Entry>, String>,
    /// For a record of a transaction written in parts (`docs/format/batch.md`): which part,
    /// or the commit; `None` for a batch. A part's entries are applied with its commit, at
    /// the commit record's LSN.
    pub txn: Option<String>,
}

/// What a read-only walk of a database's log found.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct WalDump {
    /// What the walk found: first and tail LSN, records, and where damage ends the
    /// readable log (`cut`: torn tail, hole with records after it, or damage proven
    /// durable, with file and offset).
    pub info: silt_wal::RecoveryInfo,
    /// The records, oldest first.
    pub records: Vec<WalRecord>,
    /// An error that stopped the read before the end, if one did.
    pub error: Option<String>,
}

/// The `STATS` file a writable handle of the database at `dir` keeps
/// (`DbBuilder::stats_dump_period`, `docs/format/stats.md`): `None` if there is none (no
/// handle holds the database, or its dumps are off, or it has not dumped yet).
///
/// # Errors
///
/// `Corruption` naming the file and line if it fails its checksum or is malformed; `Io`.
pub fn live_stats(dir: impl AsRef<Path>) -> Result<Option<crate::StatsFile>> {
    let path = dir.as_ref().join(crate::db::STATS_FILE_NAME);
    match std::fs::read(&path) {
        Ok(bytes) => crate::StatsFile::parse(&path, &bytes).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("read", Some(path), e)),
    }
}

/// Reads the log of the database at `dir` (`dir/wal`) without changing it
/// ([`silt_wal::Wal::open_read_only`]), every record decoded as a batch.
///
/// # Errors
///
/// `Corruption` if a segment header is damaged; `Io`.
pub fn wal(dir: impl AsRef<Path>) -> Result<WalDump> {
    let w = silt_wal::Wal::open_read_only(dir.as_ref().join("wal"), silt_wal::Options::default())?;
    let mut records = Vec::new();
    let mut error = None;
    for r in w.read_from(0)? {
        match r {
            Ok(r) => records.push(WalRecord {
                lsn: r.lsn,
                bytes: r.payload.len() as u64,
                txn: match crate::batch::decode_record(&r.payload) {
                    Ok(crate::batch::Record::Part { txn, index, .. }) => Some(format!(
                        "part {index} of transaction {txn} (applied with its commit record)"
                    )),
                    Ok(crate::batch::Record::Commit { txn, parts, .. }) => {
                        Some(format!("commit of transaction {txn} after {parts} parts"))
                    }
                    _ => None,
                },
                entries: crate::batch::decode_record(&r.payload)
                    .map(|rec| match rec {
                        crate::batch::Record::Batch(es)
                        | crate::batch::Record::Part { entries: es, .. }
                        | crate::batch::Record::Commit { entries: es, .. } => es,
                    })
                    .map(|es| {
                        es.iter()
                            .map(|e| Entry {
                                key: e.key.to_vec(),
                                seqno: r.lsn,
                                kind: e.kind,
                                value: e.value.to_vec(),
                                cf: e.cf,
                            })
                            .collect()
                    })
                    .map_err(|e| e.0.to_string()),
            }),
            Err(e) => {
                error = Some(Error::from(e).to_string());
                break;
            }
        }
    }
    Ok(WalDump {
        info: w.recovery().clone(),
        records,
        error,
    })
}

/// What [`verify`] checked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct VerifyReport {
    /// Live tables read whole (every block's checksum, every key).
    pub tables: u64,
    /// Entries in them.
    pub entries: u64,
    /// Live blob files read whole (every record's checksum).
    pub blob_files: u64,
    /// Manifest records (each checksummed).
    pub manifest_records: u64,
    /// Log records from the log start (each checksummed).
    pub log_records: u64,
    /// A torn log tail (not damage: the end of an append a crash cut short), if there is.
    pub log_torn_tail: Option<(PathBuf, u64)>,
}

/// Checks every checksum of every live file of the database at `dir`: the manifest's
/// records, every block of every live table, every record of every live blob file, the
/// log's records. Changes nothing (beside a writer too: it reads the state the manifest
/// held when read).
///
/// # Errors
///
/// `Corruption { file, offset }` for the first bad file and offset found (manifest, then
/// tables in id order, then blob files, then the log); `Io`.
pub fn verify(dir: impl AsRef<Path>) -> Result<VerifyReport> {
    let dir = dir.as_ref();
    let fs = OsFs::new();
    let m = Manifest::recover(fs.clone(), dir)?;
    let mut report = VerifyReport {
        manifest_records: crate::manifest::dump(fs.clone(), dir)?.records.len() as u64,
        ..VerifyReport::default()
    };
    let state = m.state();
    let tables_dir = dir.join("tables");
    crate::db::check_tables(&*fs, &tables_dir, state, true)?;
    let mut ids: Vec<u64> = state.table_ids().collect();
    ids.sort_unstable();
    for id in ids {
        let t = SstFile::open(tables_dir.join(table_file_name(id)))?;
        report.entries += t.verify()?;
        report.tables += 1;
    }
    for b in state.blobs.values() {
        crate::vlog::verify_records(&*fs, &tables_dir, b)?;
        report.blob_files += 1;
    }
    let w = silt_wal::Wal::open_read_only(
        dir.join("wal"),
        silt_wal::Options::default().required_from(state.log_start),
    )?;
    if let Some(d) = &w.recovery().cut {
        if d.kind == silt_wal::DamageKind::TornTail {
            report.log_torn_tail = Some((d.file.clone(), d.offset));
        } else {
            return Err(Error::corruption(
                d.file.clone(),
                d.offset,
                format!(
                    "log record at LSN {}: {} ({} valid records after it)",
                    d.lsn, d.reason, d.records_after
                ),
            ));
        }
    }
    for r in w.read_from(state.log_start)? {
        r?;
        report.log_records += 1;
    }
    Ok(report)
}
