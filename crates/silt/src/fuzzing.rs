//! Entry points for the fuzz targets (`fuzz/`) and the test that replays their corpora
//! (`tests/fuzz_corpus.rs`). Not a stable API.
//!
//! Each entry point hands arbitrary bytes to the engine's own decoders and must never
//! panic, loop forever or allocate without bound: bad bytes are an error (usually
//! `Error::Corruption`), never a crash. They only call existing code; the one piece of
//! encoding here ([`manifest`]'s third reading) seals a record with the checksum the
//! format specifies, so that the fuzzer reaches the edit decoder behind it.
//!
//! [`seed_inputs`] builds valid inputs for every entry point with the engine's writers (the
//! corpora's seeds and the starting points of the replay test's mutations).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use silt_vfs::{File, FileSystem, SimFs};

use crate::batch;
use crate::iter::InternalIterator;
use crate::key::{self, Kind};
use crate::manifest::{Edit, Manifest, ManifestState};
use crate::sstable::block::{BlockBuilder, BlockIter};
use crate::sstable::format::{block_crc, compress_block, decode_block, BlockHandle};
use crate::sstable::BlockCache;
use crate::sstable::{Block, Compression, Table, TableBuilder, TableIter, TableOptions};
use crate::{ColumnFamily, WriteBatch};

/// What an entry point made of its input.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Whether some reading of the input decoded whole, without an error.
    pub accepted: bool,
    /// Entries (block or table entries, batch entries, or column families plus tables of a
    /// manifest state) the most successful reading decoded.
    pub items: usize,
}

impl Summary {
    fn merge(self, other: Summary) -> Summary {
        Summary {
            accepted: self.accepted || other.accepted,
            items: self.items.max(other.items),
        }
    }
}

/// Steps an iterator may take over one input before the walk stops: generous for any
/// input a fuzzer makes, and a bound on the time one input can take.
const MAX_STEPS: usize = 100_000;

/// Point lookups (and seeks) per input.
const MAX_PROBES: usize = 64;

// ---------------------------------------------------------------------------------------
// (a) One block.

/// Reads `data` three ways: as a decoded block (entries and restart array), as a stored
/// block (payload, compression byte, CRC-32C: checked and decompressed first), and as a
/// payload plus compression byte sealed here with a correct checksum (so the decompressors
/// see arbitrary bytes). Every block that decodes is walked forwards, backwards, and with
/// seeks to its own keys and to a key taken from the input.
pub fn sstable_block(data: &[u8]) -> Summary {
    let path: Arc<Path> = Arc::from(Path::new("/fuzz/block"));
    let mut out = walk_block(Block::new(data.to_vec(), path.clone(), 0), data);
    if let Ok(raw) = decode_block(data.to_vec(), &path, 0) {
        out = out.merge(walk_block(Block::new(raw, path.clone(), 0), data));
    }
    if let Some((&byte, payload)) = data.split_last() {
        let mut sealed = payload.to_vec();
        sealed.push(byte);
        sealed.extend_from_slice(&block_crc(payload, byte).to_le_bytes());
        if let Ok(raw) = decode_block(sealed, &path, 0) {
            out = out.merge(walk_block(Block::new(raw, path, 0), data));
        }
    }
    out
}

fn walk_block(block: crate::Result<Block>, data: &[u8]) -> Summary {
    let Ok(block) = block else {
        return Summary::default();
    };
    let mut it = BlockIter::new(Arc::new(block));
    let (keys, mut ok) = walk(&mut it);
    for target in probe_targets(&keys, data) {
        it.seek(&target);
        ok &= it.valid() || it.take_error().is_none();
        it.seek_for_prev(&target);
        ok &= it.valid() || it.take_error().is_none();
        if it.valid() {
            it.prev();
            it.take_error();
        }
    }
    Summary {
        accepted: ok,
        items: keys.len(),
    }
}

// ---------------------------------------------------------------------------------------
// (b) A whole table file.

/// Stores `data` as a table file on a `SimFs`, opens it with `Table::open` (footer, index,
/// filter and properties blocks checked), and if that succeeds reads every entry forwards
/// and backwards, seeks to and looks up sampled keys, and asks the filter.
pub fn sstable_file(data: &[u8]) -> Summary {
    let fs = SimFs::new();
    let path = PathBuf::from("/fuzz/000001.sst");
    fs.create_dir_all(Path::new("/fuzz")).expect("SimFs mkdir");
    let file = fs.create(&path).expect("SimFs create");
    if !data.is_empty() {
        file.write_at(&[data], 0).expect("SimFs write");
    }
    // A small cache, so that both the cached and the uncached reads run.
    let cache = Arc::new(BlockCache::new(64 << 10));
    let Ok(table) = Table::open(1, path, file, cache) else {
        return Summary::default();
    };
    let props = table.properties().clone();
    let _ = table.meta();
    let mut it = table.iter();
    let (keys, mut ok) = walk(&mut it);
    let mut uncached = TableIter::new_with(&table, false);
    let (keys_uncached, ok_uncached) = walk(&mut uncached);
    ok &= ok_uncached && keys_uncached.len() == keys.len();
    let mut targets = probe_targets(&keys, data);
    targets.push(props.smallest);
    targets.push(props.largest);
    for target in targets {
        it.seek(&target);
        ok &= it.valid() || it.take_error().is_none();
        it.seek_for_prev(&target);
        ok &= it.valid() || it.take_error().is_none();
        if target.len() >= key::TRAILER_BYTES {
            let uk = key::user_key(&target);
            let _ = table.may_contain(uk);
            for snapshot in [0, 1, key::seqno(&target).saturating_add(1), u64::MAX] {
                ok &= table.get(uk, snapshot).is_ok();
            }
        }
    }
    Summary {
        accepted: ok,
        items: keys.len(),
    }
}

/// Walks `it` forwards then backwards. Returns the keys seen forwards and whether both
/// walks ended without an error.
fn walk(it: &mut dyn InternalIterator) -> (Vec<Vec<u8>>, bool) {
    let mut keys = Vec::new();
    it.seek_to_first();
    while it.valid() && keys.len() < MAX_STEPS {
        keys.push(it.key().to_vec());
        let _ = it.value().len();
        it.next();
    }
    let mut ok = it.take_error().is_none();
    let mut steps = 0;
    it.seek_to_last();
    while it.valid() && steps < MAX_STEPS {
        let _ = (it.key().len(), it.value().len());
        it.prev();
        steps += 1;
    }
    ok &= it.take_error().is_none();
    (keys, ok)
}

/// Seek targets: a sample of `keys`, each also as the seek key one seqno past it, plus a
/// key made of the input's first bytes.
fn probe_targets(keys: &[Vec<u8>], data: &[u8]) -> Vec<Vec<u8>> {
    let stride = keys.len() / MAX_PROBES + 1;
    let mut out = Vec::new();
    for k in keys.iter().step_by(stride) {
        out.push(k.clone());
        if let Some(p) = key::parse(k) {
            out.push(key::seek_key(p.user_key, p.seqno));
        }
    }
    out.push(data[..data.len().min(24)].to_vec());
    out.push(Vec::new());
    out
}

// ---------------------------------------------------------------------------------------
// (c) The manifest.

/// The database directory of the manifest readings.
const MANIFEST_DIR: &str = "/fuzz/db";
/// The manifest a new database starts with, and the file naming it.
const FIRST_MANIFEST: &str = "MANIFEST-000001";
const CURRENT: &str = "CURRENT";

/// Where a new database's first manifest ends: its 24-byte header and one snapshot record.
fn first_manifest_end(fs: &SimFs) -> u64 {
    let dir = Path::new(MANIFEST_DIR);
    let f = fs.open(&dir.join(FIRST_MANIFEST)).expect("SimFs open");
    f.len().expect("SimFs len")
}

/// Reads `data` three ways through `Manifest::open`, each time in a new database on a
/// `SimFs`: as the whole manifest file that `CURRENT` names; as the `CURRENT` file (next
/// to a valid manifest); and as the payload of one record appended to a valid manifest,
/// sealed here with the record checksum `docs/format/manifest.md` specifies (so the edit
/// decoder and the replay checks see arbitrary payloads). A manifest that opens must open
/// again to the same state, also after one more edit was logged.
pub fn manifest(data: &[u8]) -> Summary {
    let as_log = {
        let fs = new_database();
        replace(&fs, FIRST_MANIFEST, data);
        open_manifest(&fs, true)
    };
    let as_current = {
        let fs = new_database();
        replace(&fs, CURRENT, data);
        open_manifest(&fs, false)
    };
    let as_record = if data.is_empty() || data.len() > 1 << 20 {
        Summary::default()
    } else {
        let fs = new_database();
        let at = first_manifest_end(&fs);
        let f = fs
            .open(&Path::new(MANIFEST_DIR).join(FIRST_MANIFEST))
            .expect("SimFs open");
        let len = (data.len() as u32).to_le_bytes();
        let crc = crc32c::crc32c_append(
            crc32c::crc32c_append(crc32c::crc32c(&at.to_le_bytes()), &len),
            data,
        );
        f.write_at(&[&len, &crc.to_le_bytes(), data], at)
            .expect("SimFs write");
        open_manifest(&fs, false)
    };
    as_log.merge(as_current).merge(as_record)
}

/// A `SimFs` holding a new database's manifest: `MANIFEST-000001` and `CURRENT`.
fn new_database() -> Arc<SimFs> {
    let fs = SimFs::new();
    let fs_dyn: Arc<dyn FileSystem> = fs.clone();
    Manifest::create(fs_dyn, Path::new(MANIFEST_DIR)).expect("create a manifest on SimFs");
    fs
}

/// Replaces the contents of file `name` of the database directory with `data`.
fn replace(fs: &SimFs, name: &str, data: &[u8]) {
    let f = fs
        .open(&Path::new(MANIFEST_DIR).join(name))
        .expect("SimFs open");
    f.set_len(0).expect("SimFs truncate");
    if !data.is_empty() {
        f.write_at(&[data], 0).expect("SimFs write");
    }
}

/// Opens the manifest; if it opens, checks that it opens again to the same state, and
/// (with `log_one_more`) that an edit logged after recovery is there on the next open.
fn open_manifest(fs: &Arc<SimFs>, log_one_more: bool) -> Summary {
    let fs_dyn: Arc<dyn FileSystem> = fs.clone();
    let dir = Path::new(MANIFEST_DIR);
    let Ok(m) = Manifest::open(fs_dyn.clone(), dir) else {
        return Summary::default();
    };
    let state = m.state().clone();
    let _ = m.live_table_ids();
    // One handle at a time, as the engine's directory lock guarantees: open moves the state
    // into a new manifest file, so the old handle's file is gone.
    drop(m);
    let mut m = Manifest::open(fs_dyn.clone(), dir).expect("a manifest that opened reopens");
    assert_eq!(m.state(), &state, "reopening changed the manifest state");
    if log_one_more {
        let edit = Edit::NextTableId(state.next_table_id.saturating_add(1));
        if m.log_and_apply(vec![edit]).is_ok() {
            let want = m.state().clone();
            drop(m);
            let after = Manifest::open(fs_dyn, dir).expect("reopen after logging an edit");
            assert_eq!(
                after.state(),
                &want,
                "an edit logged after recovery was lost"
            );
        }
    }
    Summary {
        accepted: true,
        items: items_of(&state),
    }
}

fn items_of(state: &ManifestState) -> usize {
    state
        .cfs
        .values()
        .map(|cf| 1 + cf.levels.iter().map(Vec::len).sum::<usize>())
        .sum()
}

// ---------------------------------------------------------------------------------------
// (d) A write batch.

/// Decodes `data` as a write batch payload (what a log record holds) and checks what a
/// decoded entry promises the replay: a known kind, and a value only for a put.
pub fn write_batch(data: &[u8]) -> Summary {
    match batch::decode(data) {
        Ok(entries) => {
            for e in &entries {
                assert!(
                    e.kind == Kind::Put || e.value.is_empty(),
                    "a tombstone with a value"
                );
            }
            Summary {
                accepted: true,
                items: entries.len(),
            }
        }
        Err(_) => Summary::default(),
    }
}

// ---------------------------------------------------------------------------------------
// Seeds.

/// Valid inputs for each entry point, made by the engine's writers: `(target, name, bytes)`
/// where `target` is `sstable_block`, `sstable_file`, `manifest` or `write_batch`. Each is
/// accepted by its entry point.
pub fn seed_inputs() -> Vec<(&'static str, String, Vec<u8>)> {
    let mut out = Vec::new();
    for (name, bytes) in block_seeds() {
        out.push(("sstable_block", name, bytes));
    }
    for (name, bytes) in table_seeds() {
        out.push(("sstable_file", name, bytes));
    }
    for (name, bytes) in manifest_seeds() {
        out.push(("manifest", name, bytes));
    }
    for (name, bytes) in batch_seeds() {
        out.push(("write_batch", name, bytes));
    }
    out
}

/// `n` sorted entries over `n / 3` user keys, with every kind, as a table holds them.
fn sample_entries(n: usize, value_bytes: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..n)
        .map(|i| {
            let kind = [Kind::Put, Kind::Delete, Kind::Put, Kind::SingleDelete][i % 4];
            let k = key::make_internal(
                format!("user{:04}", i / 3).as_bytes(),
                1000 - (i % 3) as u64,
                kind,
            );
            let v = if kind == Kind::Put {
                (0..value_bytes).map(|j| (i + j % 7) as u8).collect()
            } else {
                Vec::new()
            };
            (k, v)
        })
        .collect()
}

fn block_seeds() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let build = |entries: &[(Vec<u8>, Vec<u8>)], interval: usize| {
        let mut b = BlockBuilder::new(interval);
        for (k, v) in entries {
            b.add(k, v);
        }
        b.finish().to_vec()
    };
    let entries = sample_entries(24, 12);
    out.push(("data_restart4".into(), build(&entries, 4)));
    out.push(("data_restart1".into(), build(&entries[..6], 1)));
    out.push(("empty".into(), build(&[], 16)));
    // An index block: separator keys pointing at block handles.
    let index: Vec<(Vec<u8>, Vec<u8>)> = entries
        .iter()
        .step_by(5)
        .enumerate()
        .map(|(i, (k, _))| {
            let mut h = Vec::new();
            BlockHandle {
                offset: i as u64 * 300,
                len: 295,
            }
            .encode_to(&mut h);
            (k.clone(), h)
        })
        .collect();
    out.push(("index".into(), build(&index, 1)));
    // Stored blocks (payload, compression byte, checksum) and sealed ones (payload and
    // compression byte only).
    let raw = build(&sample_entries(60, 20), 16);
    for (name, c) in [
        ("none", Compression::None),
        ("lz4", Compression::Lz4),
        ("zstd", Compression::Zstd(1)),
    ] {
        let (mut zstd, mut scratch) = (None, Vec::new());
        let (payload, byte) = compress_block(&raw, c, &mut zstd, &mut scratch);
        let mut stored = payload.to_vec();
        stored.push(byte);
        out.push((format!("sealed_{name}"), stored.clone()));
        stored.extend_from_slice(&block_crc(payload, byte).to_le_bytes());
        out.push((format!("stored_{name}"), stored));
    }
    out
}

fn table_seeds() -> Vec<(String, Vec<u8>)> {
    let fs = SimFs::new();
    fs.create_dir_all(Path::new("/seed")).expect("SimFs mkdir");
    let build = |name: &str, entries: &[(Vec<u8>, Vec<u8>)], opts: TableOptions| {
        let path = PathBuf::from(format!("/seed/{name}.sst"));
        let file = fs.create(&path).expect("SimFs create");
        let mut b = TableBuilder::new(1, path, file.clone(), &opts);
        for (k, v) in entries {
            b.add(k, v).expect("add a sorted entry");
        }
        b.finish().expect("finish a table on SimFs");
        (name.to_string(), read_all(&*file))
    };
    let opts = |block_size_bytes, restart_interval, bloom_bits_per_key, compression| TableOptions {
        block_size_bytes,
        restart_interval,
        bloom_bits_per_key,
        compression,
    };
    vec![
        build(
            "none_bloom",
            &sample_entries(60, 16),
            opts(256, 4, 10, Compression::None),
        ),
        build(
            "lz4_no_bloom",
            &sample_entries(90, 40),
            opts(512, 16, 0, Compression::Lz4),
        ),
        build(
            "zstd",
            &sample_entries(90, 40),
            opts(1024, 8, 6, Compression::Zstd(1)),
        ),
        build("empty", &[], TableOptions::default()),
        build(
            "big_value",
            &sample_entries(3, 4000),
            opts(4096, 16, 10, Compression::None),
        ),
    ]
}

fn read_all(f: &dyn File) -> Vec<u8> {
    let mut buf = vec![0u8; f.len().expect("SimFs len") as usize];
    f.read_at(&mut buf, 0).expect("SimFs read");
    buf
}

fn manifest_seeds() -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(MANIFEST_DIR);
    let read = |fs: &SimFs, name: &str| read_all(&*fs.open(&dir.join(name)).expect("SimFs open"));
    // A new database's manifest handle, still `FIRST_MANIFEST` (an open would move the
    // state into a new file, numbered 2).
    let create = || {
        let fs = SimFs::new();
        let fs_dyn: Arc<dyn FileSystem> = fs.clone();
        let m = Manifest::create(fs_dyn, dir).expect("create a manifest on SimFs");
        (fs, m)
    };
    let table = |id: u64, lo: &str, hi: &str, seqno: u64| crate::table_meta::TableMeta {
        id,
        size_bytes: 4096,
        entries: 10,
        tombstones: 2,
        smallest: key::make_internal(lo.as_bytes(), seqno, Kind::Put),
        largest: key::make_internal(hi.as_bytes(), seqno + 9, Kind::Delete),
        smallest_seqno: seqno,
        largest_seqno: seqno + 9,
        blobs: Vec::new(),
    };
    let add = |cf: u32, level: u8, meta| Edit::AddTable { cf, level, meta };
    let users = || Edit::CreateCf {
        id: 1,
        name: "users".into(),
    };
    // Records as the engine logs them (creating a column family, a flush, a compaction,
    // dropping a column family), in order.
    let records = [
        vec![users()],
        vec![
            add(0, 0, table(1, "a", "m", 10)),
            add(1, 0, table(2, "b", "c", 10)),
            Edit::LogStart(20),
        ],
        vec![
            Edit::RemoveTable {
                cf: 0,
                level: 0,
                id: 1,
            },
            add(0, 1, table(3, "a", "f", 10)),
            add(0, 1, table(4, "g", "m", 10)),
        ],
        vec![
            Edit::DropCf { id: 1 },
            Edit::NextTableId(9),
            Edit::CreateCf {
                id: 2,
                name: "orders".into(),
            },
        ],
    ];
    let (fs, mut m) = create();
    let mut out = vec![
        ("log_snapshot_only".to_string(), read(&fs, FIRST_MANIFEST)),
        ("current".to_string(), read(&fs, CURRENT)),
    ];
    for edits in records.iter().cloned() {
        m.log_and_apply(edits).expect("log a valid edit");
    }
    let log = read(&fs, FIRST_MANIFEST);
    out.push(("log_torn_tail".into(), log[..log.len() - 5].to_vec()));
    out.push(("log_five_records".into(), log));
    // A flush that separated values: a blob file and the table pointing into it, then a
    // compaction that drops the table (and with it the blob file).
    {
        let (fs, mut m) = create();
        let blob = crate::table_meta::BlobMeta {
            id: 10,
            size_bytes: 9000,
            records: 3,
            value_bytes: 8800,
            log: None,
        };
        let with_blob = crate::table_meta::TableMeta {
            blobs: vec![crate::table_meta::BlobRef {
                id: 10,
                bytes: 5000,
            }],
            ..table(10, "a", "z", 30)
        };
        m.log_and_apply(vec![Edit::AddBlob(blob), add(0, 0, with_blob)])
            .expect("log a flush with a blob file");
        m.log_and_apply(vec![Edit::RemoveTable {
            cf: 0,
            level: 0,
            id: 10,
        }])
        .expect("log its removal");
        out.push(("log_with_blob_files".into(), read(&fs, FIRST_MANIFEST)));
    }
    // Payloads alone (the third reading of `manifest`), each logged on a new database, the
    // state that reading appends to; the later records need the earlier ones' edits.
    for (i, n) in [1, 2, 3, 4].into_iter().enumerate() {
        let edits: Vec<Edit> = records[..n].iter().flatten().cloned().collect();
        let (fs, mut m) = create();
        let before = read(&fs, FIRST_MANIFEST).len();
        m.log_and_apply(edits).expect("log valid edits");
        let log = read(&fs, FIRST_MANIFEST);
        out.push((format!("record_payload_{i}"), log[before + 8..].to_vec()));
    }
    out
}

fn batch_seeds() -> Vec<(String, Vec<u8>)> {
    let users = ColumnFamily {
        id: 1,
        name: Arc::from("users"),
    };
    let mut mixed = WriteBatch::new();
    mixed
        .put(b"k1", b"v1")
        .delete(b"k2")
        .single_delete(b"k3")
        .put_cf(&users, b"u1", b"ada")
        .delete_cf(&users, b"u2")
        .single_delete_cf(&users, b"u3")
        .put(b"", b"");
    let mut big = WriteBatch::new();
    big.put(b"big", &[7u8; 3000]).put(&[0xFF; 300], b"x");
    vec![
        ("empty".into(), WriteBatch::new().payload().to_vec()),
        ("mixed".into(), mixed.payload().to_vec()),
        ("big".into(), big.payload().to_vec()),
    ]
}
