//! Corrupted and truncated SSTables and manifests give typed errors naming the file.
//!
//! A small database is built once (tables in level 0 and in the last level, in two column
//! families; a manifest of several dozen records; a log of several segments, the older ones
//! purged), closed, and kept as a pristine image. Every case copies the image, damages one
//! file, reopens the copy and reads everything back through the public API: `get` of every
//! key ever written (and of absent ones), full scans both ways and a prefix scan, in every
//! column family. Each read must give what was written, or an error — never a panic (on the
//! caller's thread or the engine's), never wrong data. Each test reports every failed case.
//!
//! How strict a case is follows from what the formats promise (`docs/format/`):
//!
//! * SSTables: every byte lies in a checksummed block or in the checksummed footer, and a
//!   full scan reads every block of every table, so any flipped byte and any truncation
//!   must surface as `Error::Corruption` naming the damaged table, at open or at read time
//!   (tables are opened lazily). Sweeps cover the footer fields and magic, the index
//!   (entries, restart array, trailer), the properties, the bloom filter (bits, probe
//!   count) and data blocks (payload, compression byte, checksum), in one table of each
//!   kind.
//! * A deleted table: `Io` or `Corruption` naming that table.
//! * The manifest: a damaged header, a cut inside the snapshot record, or a damaged record
//!   followed by valid ones, is `Corruption` naming the manifest. A damaged or cut *last*
//!   record is by design a torn append and dropped; a cut at an earlier record boundary
//!   cannot be told from one either. Such a manifest opens in an earlier state, and then the
//!   data must still be right (the log replays what the dropped records described), or
//!   reads fail naming a file (a table the earlier state names but a compaction removed),
//!   or the open fails with `Corruption` naming the manifest, `CURRENT` or the log (which
//!   the earlier state contradicts).
//! * `CURRENT`: `Corruption` naming `CURRENT` or the manifest it names.
//!
//! The `repro_*` tests are minimal reproducers of engine bugs these cases found, kept as
//! regressions.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use common::{engine_panics, install_engine_panic_hook, show};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use silt::{ColumnFamily, Db, DbBuilder, Error};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;
/// Per column family, a set of keys.
type Keys = BTreeMap<String, BTreeSet<Vec<u8>>>;

const SIDE_CF: &str = "side";
const FOOTER: u64 = 64;
const TRAILER: u64 = 5;
const MANIFEST_HEADER: u64 = 24;

// ------------------------------------------------------------------------------ fixture

/// The options of the main image: tiny memtables, tables and blocks, so a few hundred keys
/// make many tables of several blocks each.
fn builder(dir: &Path) -> DbBuilder {
    Db::builder(dir)
        .memtable_bytes(4096)
        .table_target_bytes(4096)
        .block_size_bytes(256)
        // Only the test compacts, so the image has the shape built below and a reopen
        // starts no background compaction that could race the reads.
        .l0_compaction_trigger(10_000)
        .l0_stall_tables(10_000)
        // Small segments, so flushes purge some of the log.
        .wal_segment_bytes(64 << 10)
}

/// The options of the small image: one log segment, nothing purged.
fn small_builder(dir: &Path) -> DbBuilder {
    Db::builder(dir)
        .l0_compaction_trigger(10_000)
        .l0_stall_tables(10_000)
        .wal_segment_bytes(64 << 10)
}

/// What kind of table a file is, by the phase that wrote it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum TableKind {
    /// Default column family, last level (compaction output).
    DefaultBottom,
    /// Side column family, last level.
    SideBottom,
    /// Side column family, level 0.
    SideL0,
    /// Default column family, level 0 (newest data).
    DefaultL0,
}

/// A closed database and what it must hold.
struct Fixture {
    /// The closed database's files, by path relative to its directory.
    image: BTreeMap<PathBuf, Vec<u8>>,
    /// How to open it.
    builder: fn(&Path) -> DbBuilder,
    /// Per column family: the live pairs.
    models: BTreeMap<String, Model>,
    /// Per column family: keys that must read as absent (deleted, or never written).
    absent: Keys,
    /// Table file names by kind, ascending (main image only).
    tables: BTreeMap<TableKind, Vec<String>>,
    /// The live manifest's file name.
    manifest: String,
}

fn value(cf: &str, key: &[u8], generation: u32) -> Vec<u8> {
    // Lengths vary (20..220 bytes) so blocks hold one to several entries.
    let h = key
        .iter()
        .fold(generation as usize * 31, |a, b| a * 131 + *b as usize);
    let len = 20 + h % 200;
    let mut v = format!("{cf}/{}/g{generation}/", String::from_utf8_lossy(key)).into_bytes();
    v.resize(len.max(v.len()), b'a' + (h % 26) as u8);
    v
}

fn key(i: u32) -> Vec<u8> {
    format!("k{i:04}").into_bytes()
}

fn table_files(dir: &Path) -> BTreeSet<String> {
    fs::read_dir(dir.join("tables"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".sst"))
        .collect()
}

/// Writes through a database and remembers what it must hold.
struct Recorder<'a> {
    db: &'a Db,
    models: BTreeMap<String, Model>,
    written: Keys,
}

impl<'a> Recorder<'a> {
    fn new(db: &'a Db) -> Self {
        Recorder {
            db,
            models: BTreeMap::new(),
            written: BTreeMap::new(),
        }
    }

    fn put(&mut self, cf: &ColumnFamily, k: &[u8], generation: u32) {
        let v = value(cf.name(), k, generation);
        self.db.put_cf(cf, k, &v).unwrap();
        let name = cf.name().to_string();
        self.models
            .entry(name.clone())
            .or_default()
            .insert(k.to_vec(), v);
        self.written.entry(name).or_default().insert(k.to_vec());
    }

    fn delete(&mut self, cf: &ColumnFamily, k: &[u8]) {
        self.db.delete_cf(cf, k).unwrap();
        self.models
            .entry(cf.name().to_string())
            .or_default()
            .remove(k);
    }

    /// The models, and per column family the keys that must read as absent.
    fn finish(self) -> (BTreeMap<String, Model>, Keys) {
        let mut absent: Keys = BTreeMap::new();
        for (cf, keys) in &self.written {
            let m = &self.models[cf];
            let a = absent.entry(cf.clone()).or_default();
            a.extend(keys.iter().filter(|k| !m.contains_key(*k)).cloned());
            a.extend([
                b"".to_vec(),
                b"k".to_vec(),
                b"k0150x".to_vec(),
                b"zzz".to_vec(),
            ]);
        }
        (self.models, absent)
    }
}

fn live_manifest(dir: &Path) -> String {
    let current = fs::read_to_string(dir.join("CURRENT")).unwrap();
    let manifest = current.trim_end().to_string();
    assert!(dir.join(&manifest).exists());
    manifest
}

/// The main image: tables in level 0 and the last level of two column families, a manifest
/// of several dozen records, and a log of several segments, the older ones purged.
fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(build_fixture)
}

fn build_fixture() -> Fixture {
    let tmp = tempdir();
    let dir = tmp.path();
    let db = builder(dir).open().unwrap();
    let mut r = Recorder::new(&db);
    let default = db.default_cf();

    // Phase 1: the default column family, compacted into several last-level tables.
    for i in 0..300 {
        r.put(&default, &key(i), 1);
    }
    for i in (0..300).step_by(11) {
        r.delete(&default, &key(i));
    }
    db.flush().unwrap();
    db.compact_range_cf::<&[u8], _>(&default, ..).unwrap();
    let after1 = table_files(dir);

    // Phase 2: a second column family with a last level and a level 0.
    let side = db.create_cf(SIDE_CF).unwrap();
    for i in 0..120 {
        r.put(&side, &key(i), 1);
    }
    db.flush().unwrap();
    db.compact_range_cf::<&[u8], _>(&side, ..).unwrap();
    let after2a = table_files(dir);
    for i in (0..120).step_by(3) {
        r.put(&side, &key(i), 2);
    }
    r.delete(&side, &key(7));
    db.flush().unwrap();
    let after2b = table_files(dir);

    // Phase 3: overwrites and deletes in the default column family, flushed into many
    // level-0 tables, over more than one log segment.
    for round in 2..5 {
        for i in (round..300).step_by(round as usize) {
            r.put(&default, &key(i), round);
        }
        for i in (round * 5..300).step_by(17) {
            r.delete(&default, &key(i));
        }
    }
    db.flush().unwrap();
    let stats = db.stats();
    assert!(stats.levels[0].tables >= 4, "{stats:?}");
    assert!(stats.levels[6].tables >= 4, "{stats:?}");
    assert!(stats.compaction_write_bytes > 0, "{stats:?}");
    let (models, absent) = r.finish();
    db.close().unwrap();

    let segments = fs::read_dir(dir.join("wal"))
        .unwrap()
        .filter(|e| {
            let n = e.as_ref().unwrap().file_name();
            n.to_string_lossy().ends_with(".wal")
        })
        .count();
    let first_segment = fs::read_dir(dir.join("wal"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".wal"))
        .min()
        .unwrap();
    assert!(
        segments >= 1 && !first_segment.starts_with("00000000000000000000."),
        "the first log segment is purged: {first_segment}"
    );

    let after3 = table_files(dir);
    let mut tables: BTreeMap<TableKind, Vec<String>> = BTreeMap::new();
    for t in &after3 {
        let kind = if after1.contains(t) {
            TableKind::DefaultBottom
        } else if after2a.contains(t) {
            TableKind::SideBottom
        } else if after2b.contains(t) {
            TableKind::SideL0
        } else {
            TableKind::DefaultL0
        };
        tables.entry(kind).or_default().push(t.clone());
    }
    assert_eq!(tables.len(), 4, "every kind of table exists: {tables:?}");
    Fixture {
        manifest: live_manifest(dir),
        image: read_image(dir),
        builder,
        models,
        absent,
        tables,
    }
}

/// The small image: one log segment (nothing purged), a column family created after the
/// first flush, and writes left in the log only.
fn small_fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let tmp = tempdir();
        let dir = tmp.path();
        let db = small_builder(dir).open().unwrap();
        let mut r = Recorder::new(&db);
        let default = db.default_cf();
        for i in 0..60 {
            r.put(&default, &key(i), 1);
        }
        db.flush().unwrap();
        let side = db.create_cf(SIDE_CF).unwrap();
        for i in 0..40 {
            r.put(&side, &key(i), 1);
        }
        db.flush().unwrap();
        for i in (0..60).step_by(2) {
            r.put(&default, &key(i), 2);
        }
        r.delete(&default, &key(5));
        db.flush().unwrap();
        db.compact_range_cf::<&[u8], _>(&default, ..).unwrap();
        // Left in the log only.
        for i in (0..60).step_by(3) {
            r.put(&default, &key(i), 3);
        }
        r.put(&side, &key(1), 3);
        r.delete(&side, &key(2));
        let (models, absent) = r.finish();
        db.close().unwrap();
        Fixture {
            manifest: live_manifest(dir),
            image: read_image(dir),
            builder: small_builder,
            models,
            absent,
            tables: BTreeMap::new(),
        }
    })
}

/// A fresh temporary directory: in memory (`/dev/shm`) when there is one and `TMPDIR` is
/// not set, since every case copies the image and the engine syncs files at open (on a
/// busy disk that is most of the test's time).
fn tempdir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if std::env::var_os("TMPDIR").is_none() && shm.is_dir() {
        if let Ok(d) = tempfile::Builder::new()
            .prefix("silt-corruption")
            .tempdir_in(shm)
        {
            return d;
        }
    }
    tempfile::tempdir().unwrap()
}

/// Every file under `dir`, by relative path.
fn read_image(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, at: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for e in fs::read_dir(at).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                walk(root, &e.path(), out);
            } else {
                let rel = e.path().strip_prefix(root).unwrap().to_path_buf();
                out.insert(rel, fs::read(e.path()).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn write_image(image: &BTreeMap<PathBuf, Vec<u8>>, to: &Path) {
    for (rel, bytes) in image {
        let p = to.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, bytes).unwrap();
    }
}

// ------------------------------------------------------------------------------ panics

// ------------------------------------------------------------------------------ reading

/// The file an error names, if any.
fn named_file(e: &Error) -> Option<&Path> {
    match e {
        Error::Corruption { file, .. } => Some(file),
        Error::Io { path: Some(p), .. } => Some(p),
        _ => None,
    }
}

/// Everything one reopen of a damaged copy did.
#[derive(Debug, Default)]
struct Outcome {
    open_error: Option<Error>,
    /// Errors of reads: (what was read, the error).
    read_errors: Vec<(String, Error)>,
    /// Reads that returned data other than what was written.
    wrong: Vec<String>,
    /// Reads that returned exactly what was written.
    correct: usize,
}

impl Outcome {
    fn errors(&self) -> impl Iterator<Item = &Error> {
        self.open_error
            .iter()
            .chain(self.read_errors.iter().map(|(_, e)| e))
    }
}

/// Reopens `dir` and reads everything `fx` knows about.
fn exercise(fx: &Fixture, dir: &Path) -> Outcome {
    let mut out = Outcome::default();
    let db = match (fx.builder)(dir).open() {
        Ok(db) => db,
        Err(e) => {
            out.open_error = Some(e);
            return out;
        }
    };
    for (name, model) in &fx.models {
        let cf = match db.cf(name) {
            Ok(cf) => cf,
            Err(e) => {
                out.wrong.push(format!("column family {name}: {e}"));
                continue;
            }
        };
        for (k, v) in model {
            match db.get_cf(&cf, k) {
                Ok(Some(got)) if got == *v => out.correct += 1,
                Ok(got) => out.wrong.push(format!(
                    "{name}: get {} = {:?}, wrote {:?}",
                    show(k),
                    got.as_deref().map(show),
                    show(v)
                )),
                Err(e) => out
                    .read_errors
                    .push((format!("{name}: get {}", show(k)), e)),
            }
        }
        for k in &fx.absent[name] {
            match db.get_cf(&cf, k) {
                Ok(None) => out.correct += 1,
                Ok(Some(got)) => out.wrong.push(format!(
                    "{name}: get {} = {:?}, but it is absent",
                    show(k),
                    show(&got)
                )),
                Err(e) => out
                    .read_errors
                    .push((format!("{name}: get {}", show(k)), e)),
            }
        }
        let expect: Vec<(&Vec<u8>, &Vec<u8>)> = model.iter().collect();
        let forward = db.range_cf::<&[u8], _>(&cf, ..);
        scan(&mut out, &format!("{name}: forward scan"), forward, &expect);
        let rev: Vec<_> = expect.iter().rev().copied().collect();
        let backward = db.range_cf::<&[u8], _>(&cf, ..).rev();
        scan(&mut out, &format!("{name}: backward scan"), backward, &rev);
        let prefixed: Vec<_> = expect
            .iter()
            .filter(|(k, _)| k.starts_with(b"k01"))
            .copied()
            .collect();
        let p = db.prefix_cf(&cf, b"k01");
        scan(&mut out, &format!("{name}: prefix scan"), p, &prefixed);
    }
    drop(db);
    out
}

/// Walks `it`: every pair before an error must be the next expected one; without an
/// error, exactly the expected pairs.
fn scan(
    out: &mut Outcome,
    what: &str,
    it: impl Iterator<Item = silt::Result<(Vec<u8>, Vec<u8>)>>,
    expect: &[(&Vec<u8>, &Vec<u8>)],
) {
    let mut n = 0;
    for item in it {
        match item {
            Ok((k, v)) => {
                match expect.get(n) {
                    Some((ek, ev)) if **ek == k && **ev == v => {}
                    Some((ek, _)) => {
                        out.wrong.push(format!(
                            "{what}: pair {n} is {} (value {}), expected {}",
                            show(&k),
                            show(&v),
                            show(ek)
                        ));
                        return;
                    }
                    None => {
                        out.wrong.push(format!(
                            "{what}: extra pair {} after the last one",
                            show(&k)
                        ));
                        return;
                    }
                }
                n += 1;
            }
            Err(e) => {
                out.read_errors.push((format!("{what} after {n} pairs"), e));
                return;
            }
        }
    }
    if n != expect.len() {
        out.wrong.push(format!(
            "{what}: ended after {n} pairs, expected {}",
            expect.len()
        ));
    } else {
        out.correct += 1;
    }
}

/// What a case requires.
#[derive(Clone, Copy, Debug)]
enum Expect<'a> {
    /// Some read (or the open) fails, and every error is `Corruption` naming this file.
    Corruption(&'a Path),
    /// Some read (or the open) fails, and every error is `Corruption` or `Io` naming this
    /// file.
    Missing(&'a Path),
    /// Manifest damage: reads are right, or fail naming a file of the database; an open
    /// error is `Corruption` naming one of these files, another manifest, or the log.
    Manifest(&'a [PathBuf]),
}

/// Copies the image, applies `damage`, reopens and reads, and checks the outcome: returns
/// the outcome and what was wrong with it (empty if the case passed).
fn case(
    fx: &Fixture,
    label: &str,
    expect: Expect<'_>,
    damage: impl FnOnce(&Path),
) -> (Outcome, Vec<String>) {
    install_engine_panic_hook();
    let tmp = tempdir();
    let dir = tmp.path().join("db");
    write_image(&fx.image, &dir);
    // The expected paths are relative to the database directory.
    let rebase = |p: &Path| dir.join(p);
    damage(&dir);
    let panics = engine_panics().len();
    let mut fail = Vec::new();
    let out = match catch_unwind(AssertUnwindSafe(|| exercise(fx, &dir))) {
        Ok(out) => out,
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            fail.push(format!("{label}: the engine panicked: {msg}"));
            Outcome::default()
        }
    };
    let new_panics: Vec<String> = engine_panics()[panics..].to_vec();
    if !new_panics.is_empty() {
        fail.push(format!("{label}: panics on engine threads: {new_panics:?}"));
    }
    if !out.wrong.is_empty() {
        fail.push(format!(
            "{label}: wrong data returned silently ({} wrong reads, {} correct, {} errors), \
             first: {:?}",
            out.wrong.len(),
            out.correct,
            out.errors().count(),
            &out.wrong[..out.wrong.len().min(3)],
        ));
    }
    match expect {
        Expect::Corruption(file) | Expect::Missing(file) => {
            let file = rebase(file);
            if out.errors().next().is_none() {
                fail.push(format!(
                    "{label}: the damage went unnoticed ({} reads correct)",
                    out.correct
                ));
            }
            for e in out.errors() {
                let ok = match (expect, e) {
                    (_, Error::Corruption { file: f, .. }) => *f == file,
                    (Expect::Missing(_), Error::Io { path: Some(p), .. }) => *p == file,
                    _ => false,
                };
                if !ok {
                    fail.push(format!(
                        "{label}: expected an error naming {file:?}, got {e:?}"
                    ));
                    break;
                }
            }
        }
        Expect::Manifest(files) => {
            let files: Vec<PathBuf> = files.iter().map(|f| rebase(f)).collect();
            // `CURRENT` naming a missing manifest is reported as that manifest; a manifest
            // that contradicts the log may be reported as the log; one cut to an earlier
            // state that names a table compaction has since deleted, as that table.
            let is_manifest = |f: &Path| {
                files.iter().any(|x| x == f)
                    || f.starts_with(dir.join("wal"))
                    || f.starts_with(dir.join("tables"))
                    || (f.parent() == Some(&dir)
                        && f.file_name()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| n.starts_with("MANIFEST-")))
            };
            if let Some(e) = &out.open_error {
                if !matches!(e, Error::Corruption { file, .. } if is_manifest(file)) {
                    fail.push(format!(
                        "{label}: expected Corruption naming one of {files:?} at open, got {e:?}"
                    ));
                }
            }
            for (what, e) in &out.read_errors {
                if !named_file(e).is_some_and(|f| f.starts_with(&dir)) {
                    fail.push(format!(
                        "{label}: {what}: the error names no file of the database: {e:?}"
                    ));
                    break;
                }
            }
        }
    }
    (out, fail)
}

/// Fails the test with every failed case.
fn report(what: &str, cases: usize, failures: Vec<String>) {
    assert!(
        failures.is_empty(),
        "{what}: {} failures in {cases} cases:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

// ------------------------------------------------------------------------------ formats

fn varint(buf: &[u8], pos: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let b = buf[*pos];
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return v;
        }
        shift += 7;
    }
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

/// A block: payload offset and length (the 5-byte trailer follows).
#[derive(Clone, Copy, Debug)]
struct Handle {
    off: u64,
    len: u64,
}

#[derive(Debug)]
struct TableLayout {
    size: u64,
    data: Vec<Handle>,
    filter: Option<Handle>,
    props: Handle,
    index: Handle,
}

/// Reads a table's layout per `docs/format/sstable.md`.
fn table_layout(bytes: &[u8]) -> TableLayout {
    let size = bytes.len() as u64;
    let f = &bytes[bytes.len() - FOOTER as usize..];
    assert_eq!(&f[56..64], b"siltSST1");
    let h = |i: usize| Handle {
        off: u64_at(f, i),
        len: u64_at(f, i + 8),
    };
    let (index, filter, props) = (h(0), h(16), h(32));
    let filter = (filter.len != 0).then_some(filter);
    let ib = &bytes[index.off as usize..(index.off + index.len) as usize];
    assert_eq!(
        bytes[(index.off + index.len) as usize],
        0,
        "index uncompressed"
    );
    let restarts = u32_at(ib, ib.len() - 4) as usize;
    let end = ib.len() - 4 - 4 * restarts;
    let mut pos = 0;
    let mut data = Vec::new();
    while pos < end {
        let _shared = varint(ib, &mut pos);
        let unshared = varint(ib, &mut pos) as usize;
        let vlen = varint(ib, &mut pos) as usize;
        pos += unshared;
        let mut vp = pos;
        let off = varint(ib, &mut vp);
        let len = varint(ib, &mut vp);
        data.push(Handle { off, len });
        pos += vlen;
    }
    assert!(!data.is_empty());
    TableLayout {
        size,
        data,
        filter,
        props,
        index,
    }
}

/// The offsets of the manifest's records (of their 8-byte headers) and their payload
/// lengths, per `docs/format/manifest.md`.
fn manifest_records(bytes: &[u8]) -> Vec<Handle> {
    let mut at = MANIFEST_HEADER as usize;
    let mut out = Vec::new();
    while at < bytes.len() {
        let len = u32_at(bytes, at) as u64;
        out.push(Handle {
            off: at as u64,
            len,
        });
        at += 8 + len as usize;
    }
    assert_eq!(at, bytes.len());
    out
}

fn truncate(path: &Path, len: u64) {
    let f = fs::OpenOptions::new().write(true).open(path).unwrap();
    f.set_len(len).unwrap();
}

fn xor(path: &Path, at: u64, mask: u8) {
    let mut b = fs::read(path).unwrap();
    b[at as usize] ^= mask;
    fs::write(path, b).unwrap();
}

fn sorted(mut v: Vec<u64>, below: u64) -> Vec<u64> {
    v.retain(|x| *x < below);
    v.sort_unstable();
    v.dedup();
    v
}

// ------------------------------------------------------------------------------ sstables

/// The tables the damage sweeps run on: one of each kind.
fn sample_tables() -> Vec<String> {
    let fx = fixture();
    fx.tables
        .values()
        .map(|names| names[names.len() / 2].clone())
        .collect()
}

/// All of `points` for the first sample table, every third one (a different third for
/// each) for the others: every region of every kind of table is hit, at a modest cost.
fn thin(points: Vec<u64>, table: usize) -> Vec<u64> {
    if table == 0 {
        return points;
    }
    points
        .into_iter()
        .enumerate()
        .filter(|(i, _)| i % 3 == table % 3)
        .map(|(_, p)| p)
        .collect()
}

/// A table's path, relative to the database directory.
fn table_path(name: &str) -> PathBuf {
    Path::new("tables").join(name)
}

fn layout_of(name: &str) -> TableLayout {
    let l = table_layout(&fixture().image[&table_path(name)]);
    assert!(l.data.len() >= 3 && l.filter.is_some(), "{name}: {l:?}");
    l
}

/// Lengths to cut a table to: inside the footer, the index, the properties and the filter,
/// inside and between data blocks, and shorter than a footer.
fn cut_points(l: &TableLayout) -> Vec<u64> {
    let mut v = vec![0, 1, 40, FOOTER - 1, FOOTER];
    let picks = [0, l.data.len() / 2, l.data.len() - 1];
    for h in picks.iter().map(|i| l.data[*i]) {
        v.extend([
            h.off + 1,
            h.off + h.len / 2,
            h.off + h.len,
            h.off + h.len + 2,
            h.off + h.len + TRAILER,
        ]);
    }
    if let Some(h) = l.filter {
        v.extend([h.off, h.off + h.len / 2, h.off + h.len + TRAILER]);
    }
    v.extend([l.props.off + l.props.len / 2, l.props.off + l.props.len + 3]);
    let i = l.index;
    v.extend([i.off, i.off + i.len / 2, i.off + i.len, i.off + i.len + 4]);
    let footer = l.size - FOOTER;
    v.extend([footer, footer + 4, footer + 8, footer + 16, footer + 47]);
    v.extend([footer + 48, footer + 52, footer + 56, l.size - 1]);
    sorted(v, l.size)
}

/// Bytes to flip: in data blocks (payload, compression byte, checksum), the filter (bits,
/// probe count), the properties, the index (entries, restart array) and each footer field.
fn flip_points(l: &TableLayout) -> Vec<u64> {
    let mut v = Vec::new();
    let mut block = |h: Handle| {
        v.extend([h.off, h.off + h.len / 2, h.off + h.len - 1, h.off + h.len]);
        v.push(h.off + h.len + 3);
    };
    for i in [0, l.data.len() / 2, l.data.len() - 1] {
        block(l.data[i]);
    }
    if let Some(h) = l.filter {
        block(h);
    }
    block(l.props);
    block(l.index);
    let footer = l.size - FOOTER;
    for f in [0, 7, 8, 16, 24, 32, 40, 47, 48, 51, 52, 55, 56, 63] {
        v.push(footer + f);
    }
    sorted(v, l.size)
}

#[test]
fn truncated_tables_are_corruption_naming_the_table() {
    let (mut n, mut failures) = (0, Vec::new());
    for (t, name) in sample_tables().into_iter().enumerate() {
        let l = layout_of(&name);
        let path = table_path(&name);
        for len in thin(cut_points(&l), t) {
            n += 1;
            let (_, f) = case(
                fixture(),
                &format!("{name} cut to {len} of {} bytes", l.size),
                Expect::Corruption(&path),
                |d| truncate(&d.join("tables").join(&name), len),
            );
            failures.extend(f);
        }
    }
    report("truncated tables", n, failures);
}

#[test]
fn flipped_table_bytes_are_corruption_naming_the_table() {
    let mut rng = ChaCha8Rng::seed_from_u64(0x5117);
    let (mut n, mut failures) = (0, Vec::new());
    for (t, name) in sample_tables().into_iter().enumerate() {
        let l = layout_of(&name);
        let path = table_path(&name);
        let mut points: Vec<(u64, u8)> = thin(flip_points(&l), t)
            .into_iter()
            .enumerate()
            .map(|(i, at)| (at, if i % 2 == 0 { 0x01 } else { 0x80 }))
            .collect();
        // And some anywhere, with any mask.
        for _ in 0..3 {
            points.push((rng.random_range(0..l.size), rng.random_range(1..=255)));
        }
        for (at, mask) in points {
            n += 1;
            let (_, f) = case(
                fixture(),
                &format!("{name} ({} bytes) byte {at} ^= {mask:#04x}", l.size),
                Expect::Corruption(&path),
                |d| xor(&d.join("tables").join(&name), at, mask),
            );
            failures.extend(f);
        }
        // A zeroed stretch in the middle of a data block (a lost page).
        let h = l.data[l.data.len() / 2];
        n += 1;
        let (_, f) = case(
            fixture(),
            &format!("{name}: data block at {} zeroed", h.off),
            Expect::Corruption(&path),
            |d| {
                let p = d.join("tables").join(&name);
                let mut b = fs::read(&p).unwrap();
                b[h.off as usize..(h.off + h.len) as usize].fill(0);
                fs::write(&p, b).unwrap();
            },
        );
        failures.extend(f);
    }
    report("flipped table bytes", n, failures);
}

#[test]
fn missing_tables_are_errors_naming_the_table() {
    let fx = fixture();
    let (mut n, mut failures) = (0, Vec::new());
    for (kind, names) in &fx.tables {
        for name in [names.first().unwrap(), names.last().unwrap()] {
            let path = table_path(name);
            n += 1;
            let (_, f) = case(
                fx,
                &format!("{kind:?} table {name} deleted"),
                Expect::Missing(&path),
                |d| fs::remove_file(d.join("tables").join(name)).unwrap(),
            );
            failures.extend(f);
        }
    }
    report("missing tables", n, failures);
}

// ------------------------------------------------------------------------------ manifest

/// The files (relative paths) whose damage a manifest case may report: the live manifest
/// and `CURRENT` (and, as `case` allows, any manifest `CURRENT` names, and the log, which
/// an earlier manifest state may contradict).
fn manifest_files(fx: &Fixture) -> Vec<PathBuf> {
    vec![PathBuf::from(&fx.manifest), PathBuf::from("CURRENT")]
}

fn manifest_bytes(fx: &Fixture) -> (Vec<u8>, Vec<Handle>) {
    let bytes = fx.image[Path::new(&fx.manifest)].clone();
    let records = manifest_records(&bytes);
    (bytes, records)
}

/// Cuts the manifest to each of `cuts` in turn: each case's outcome, and the failures.
fn cut_manifest(fx: &Fixture, cuts: Vec<u64>) -> (Vec<(u64, Outcome)>, Vec<String>) {
    let (bytes, _) = manifest_bytes(fx);
    let files = manifest_files(fx);
    let (mut outcomes, mut failures) = (Vec::new(), Vec::new());
    for len in sorted(cuts, bytes.len() as u64) {
        let label = format!("{} cut to {len} of {} bytes", fx.manifest, bytes.len());
        let (out, f) = case(fx, &label, Expect::Manifest(&files), |d| {
            truncate(&d.join(&fx.manifest), len)
        });
        failures.extend(f);
        outcomes.push((len, out));
    }
    (outcomes, failures)
}

fn flip_manifest(fx: &Fixture, points: Vec<u64>) -> (usize, Vec<String>) {
    let (bytes, records) = manifest_bytes(fx);
    let files = manifest_files(fx);
    let last = records.last().unwrap().off;
    let (mut n, mut failures) = (0, Vec::new());
    for at in sorted(points, bytes.len() as u64) {
        n += 1;
        let label = format!("{} byte {at} ^= 0x10 (last record at {last})", fx.manifest);
        let (out, f) = case(fx, &label, Expect::Manifest(&files), |d| {
            xor(&d.join(&fx.manifest), at, 0x10)
        });
        failures.extend(f);
        // Damage followed by valid records is never a torn tail.
        if at < last
            && !matches!(&out.open_error, Some(Error::Corruption { file, .. })
                if file.ends_with(&fx.manifest))
        {
            failures.push(format!(
                "{label}: expected Corruption naming the manifest at open, got {:?}",
                out.open_error
            ));
        }
    }
    (n, failures)
}

/// The record that creates the second column family (its first edit has tag 1).
fn create_cf_record(fx: &Fixture) -> Handle {
    let (bytes, records) = manifest_bytes(fx);
    let r = records[1..]
        .iter()
        .find(|r| bytes[r.off as usize + 8] == 1)
        .copied()
        .unwrap();
    assert!(r.len < 64, "{r:?} holds only a CreateCf");
    r
}

/// Bytes of each record: length, checksum, first, middle and last payload byte.
fn record_points(records: &[Handle], keep: impl Fn(usize) -> bool) -> Vec<u64> {
    let mut points: Vec<u64> = vec![0, 7, 8, 12, 19, 20, 23];
    for (i, r) in records.iter().enumerate() {
        if keep(i) {
            let p = r.off + 8;
            points.extend([r.off, r.off + 3, r.off + 5, p, p + r.len / 2, p + r.len - 1]);
        }
    }
    points
}

#[test]
fn flipped_manifest_bytes_are_corruption_naming_the_manifest() {
    let fx = fixture();
    let (_, records) = manifest_bytes(fx);
    assert!(records.len() >= 10, "{records:?}");
    let n = records.len();
    let (cases, failures) = flip_manifest(
        fx,
        record_points(&records, |i| i < 2 || i + 2 >= n || i % 6 == 0),
    );
    report("flipped manifest bytes", cases, failures);
}

#[test]
fn manifest_cut_inside_its_header_or_snapshot_is_corruption() {
    let fx = fixture();
    let (_, records) = manifest_bytes(fx);
    let snap = records[0];
    let cuts = vec![
        0,
        1,
        8,
        MANIFEST_HEADER - 1,
        MANIFEST_HEADER,
        MANIFEST_HEADER + 4,
        snap.off + 8 + snap.len / 2,
        snap.off + 8 + snap.len - 1,
    ];
    let (outcomes, mut failures) = cut_manifest(fx, cuts);
    for (len, out) in &outcomes {
        if !matches!(&out.open_error, Some(Error::Corruption { file, .. })
            if file.ends_with(&fx.manifest))
        {
            failures.push(format!(
                "manifest cut to {len}: expected Corruption naming it at open, got {:?}",
                out.open_error
            ));
        }
    }
    report("manifest cut in its snapshot", outcomes.len(), failures);
}

/// A cut inside the last record is a torn append: the record is dropped, and the log,
/// which still holds everything after the previous `log_start`, replays what it described.
#[test]
fn manifest_cut_inside_its_last_record_loses_nothing() {
    let fx = fixture();
    let (_, records) = manifest_bytes(fx);
    let r = *records.last().unwrap();
    let (outcomes, mut failures) = cut_manifest(fx, vec![r.off, r.off + 5, r.off + 8 + r.len / 2]);
    for (len, out) in &outcomes {
        if out.errors().next().is_some() {
            failures.push(format!(
                "manifest cut to {len}: errors, though the log holds everything the dropped \
                 record described: {:?}",
                out.errors().next()
            ));
        }
    }
    report("manifest cut in its last record", outcomes.len(), failures);
}

/// A manifest cut back to any earlier state, in a database whose log was partly purged:
/// the state names a `log_start` whose log segment is gone.
#[test]
fn manifest_cut_to_an_earlier_state_never_returns_wrong_data() {
    let fx = fixture();
    let (_, records) = manifest_bytes(fx);
    let n = records.len();
    let mut cuts = Vec::new();
    for (i, r) in records.iter().enumerate().skip(1) {
        if i < 4 || i + 4 > n || i % 3 == 0 {
            cuts.extend([r.off, r.off + 8 + r.len / 2]);
        }
    }
    let (outcomes, failures) = cut_manifest(fx, cuts);
    report("manifest cut to an earlier state", outcomes.len(), failures);
}

/// The same in a database whose whole log is there: every earlier state plus the log is
/// the same data, except for the column family created after the cut point.
#[test]
fn small_manifest_cut_or_flipped_anywhere() {
    let fx = small_fixture();
    let (_, records) = manifest_bytes(fx);
    let mut cuts = vec![0, 1, MANIFEST_HEADER];
    for r in &records {
        cuts.extend([r.off, r.off + 5, r.off + 8 + r.len / 2]);
    }
    // Not the cuts that drop the record creating the second column family (all between
    // the snapshot and the end of that record): see below.
    let create_cf = create_cf_record(fx);
    cuts.retain(|c| *c < records[1].off || *c >= create_cf.off + 8 + create_cf.len);
    let (outcomes, mut failures) = cut_manifest(fx, cuts);
    let mut flips = vec![0, 12, 20];
    for r in &records {
        flips.extend([r.off + 1, r.off + 4, r.off + 8 + r.len / 2]);
    }
    let (n2, f) = flip_manifest(fx, flips);
    failures.extend(f);
    report(
        "small manifest cut or flipped",
        outcomes.len() + n2,
        failures,
    );
}

/// A cut that drops the record creating a column family: the log still holds that column
/// family's writes, which replay must not skip silently.
#[test]
fn manifest_cut_before_a_column_family_was_created() {
    let fx = small_fixture();
    let create_cf = create_cf_record(fx);
    let (_, records) = manifest_bytes(fx);
    let (outcomes, failures) =
        cut_manifest(fx, vec![records[1].off, create_cf.off, create_cf.off + 8]);
    report("manifest cut before create_cf", outcomes.len(), failures);
}

// ------------------------------------------------------------------------------ CURRENT

#[test]
fn damaged_current_is_corruption_naming_it() {
    let fx = fixture();
    let files = manifest_files(fx);
    let name = fx.manifest.clone();
    let garbles: Vec<(&str, Vec<u8>)> = vec![
        ("empty", vec![]),
        ("no newline", name.clone().into_bytes()),
        ("cut short", name.as_bytes()[..5].to_vec()),
        ("two newlines", format!("{name}\n\n").into_bytes()),
        ("CRLF", format!("{name}\r\n").into_bytes()),
        ("garbage", vec![0xFF; 16]),
        ("NULs", vec![0; 16]),
        ("too long", format!("{name}\n").repeat(8).into_bytes()),
        ("non-canonical name", b"MANIFEST-1\n".to_vec()),
        ("names a missing manifest", b"MANIFEST-000999\n".to_vec()),
        ("names the directory", b"tables\n".to_vec()),
    ];
    let (mut n, mut failures) = (0, Vec::new());
    for (what, content) in garbles {
        n += 1;
        let label = format!("CURRENT {what}");
        let (out, f) = case(fx, &label, Expect::Manifest(&files), |d| {
            fs::write(d.join("CURRENT"), &content).unwrap()
        });
        failures.extend(f);
        if !matches!(&out.open_error, Some(Error::Corruption { .. })) {
            failures.push(format!(
                "{label}: expected Corruption at open, got {:?} ({} reads correct)",
                out.open_error, out.correct
            ));
        }
    }
    for bit in [0x01u8, 0x20] {
        for at in [0, 9, name.len() as u64 - 1, name.len() as u64] {
            n += 1;
            let (_, f) = case(
                fx,
                &format!("CURRENT byte {at} ^= {bit:#04x}"),
                Expect::Manifest(&files),
                |d| xor(&d.join("CURRENT"), at, bit),
            );
            failures.extend(f);
        }
    }
    report("damaged CURRENT", n, failures);
}

/// `CURRENT` deleted while the manifest, the tables and the log are all there.
#[test]
fn deleted_current_is_an_error_not_a_new_database() {
    let fx = fixture();
    let files = manifest_files(fx);
    let (out, mut failures) = case(fx, "CURRENT deleted", Expect::Manifest(&files), |d| {
        fs::remove_file(d.join("CURRENT")).unwrap()
    });
    if out.open_error.is_none() {
        failures.push(format!(
            "CURRENT deleted: opened a database ({} reads correct)",
            out.correct
        ));
    }
    report("deleted CURRENT", 1, failures);
}

// ------------------------------------------------------------------------------ reproducers

/// The length of a manifest cut right after its first record (the snapshot).
fn snapshot_end(manifest: &Path) -> u64 {
    let b = fs::read(manifest).unwrap();
    MANIFEST_HEADER + 8 + u64::from(u32_at(&b, MANIFEST_HEADER as usize))
}

/// Minimal reproducer of the bug behind `manifest_cut_to_an_earlier_state_...`: a
/// manifest that lost its tail (here: everything after the snapshot) names a `log_start`
/// (0) whose log segment flushes have purged; open replays from the oldest segment left
/// and returns a database missing the first writes, without an error.
#[test]
fn repro_log_start_in_a_purged_segment() {
    let dir = tempdir();
    let opts = |d: &Path| {
        Db::builder(d)
            .memtable_bytes(4096)
            .wal_segment_bytes(64 << 10)
    };
    let db = opts(dir.path()).open().unwrap();
    for i in 0..1500u32 {
        db.put(format!("k{i:05}").as_bytes(), &[b'v'; 100]).unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    let m = dir.path().join("MANIFEST-000001");
    truncate(&m, snapshot_end(&m));
    match opts(dir.path()).open() {
        Err(Error::Corruption { .. }) => {}
        Err(e) => panic!("expected Corruption, got {e:?}"),
        Ok(db) => {
            let got = db.get(b"k00000");
            assert!(
                !matches!(got, Ok(None)),
                "k00000 was written, reads as absent: the replay started after log_start"
            );
        }
    }
}

/// Minimal reproducer of the bug behind `manifest_cut_before_a_column_family_was_created`:
/// the log holds a write to column family 1, the manifest (cut before its `CreateCf`) has
/// `next_cf_id = 1`; replay skips the write as if the column family had been dropped.
#[test]
fn repro_log_writes_to_an_unknown_column_family() {
    let dir = tempdir();
    let db = Db::open(dir.path()).unwrap();
    let cf = db.create_cf("side").unwrap();
    db.put_cf(&cf, b"x", b"1").unwrap();
    db.close().unwrap();
    let m = dir.path().join("MANIFEST-000001");
    truncate(&m, snapshot_end(&m));
    match Db::open(dir.path()) {
        Err(Error::Corruption { .. }) => {}
        Err(e) => panic!("expected Corruption, got {e:?}"),
        Ok(db) => panic!(
            "opened with column families {:?}; the write to \"side\" is gone",
            db.list_cfs()
        ),
    }
}

/// Minimal reproducer of the bug behind `deleted_current_is_an_error_not_a_new_database`.
#[test]
fn repro_missing_current() {
    let dir = tempdir();
    let db = Db::open(dir.path()).unwrap();
    db.put(b"a", b"1").unwrap();
    db.flush().unwrap();
    db.close().unwrap();
    assert_eq!(table_files(dir.path()).len(), 1);
    fs::remove_file(dir.path().join("CURRENT")).unwrap();
    match Db::open(dir.path()) {
        Err(Error::Corruption { file, .. }) if file.ends_with("CURRENT") => {}
        Err(e) => panic!("expected Corruption naming CURRENT, got {e:?}"),
        Ok(db) => panic!(
            "opened a new database over the old one: table files left {:?}, get(a) = {:?}",
            table_files(dir.path()),
            db.get(b"a")
        ),
    }
}
