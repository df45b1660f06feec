//! Repair ([`Db::repair`]), as RocksDB's `RepairDB`: rebuilds a database whose manifest is
//! lost or damaged from its table files, blob files and log, and reports what it could
//! not recover. The rules and why are in `docs/design.md`, "Repair".
//!
//! Steps (each before the next):
//! 1. Take the directory lock (a live handle elsewhere is `Locked`).
//! 2. Read the manifest if it still reads: it says which column family each table
//!    belongs to and the families' names. Without it, every table goes to the default
//!    family (reported per table), and families the log writes to are re-created as
//!    `recovered-{id}`.
//! 3. Check every table completely (every block's checksum, every key) and every blob
//!    file (header, footer, size); a damaged one is moved into `lost/` and reported, and
//!    so is a table pointing into a blob file that did not survive.
//! 4. Read the log read-only up to its first invalid record (reported), into memory.
//! 5. Per column family, merge the surviving tables and the log's entries into one sorted
//!    run of new tables at the last level, keeping every entry (the newest-first order of
//!    internal keys keeps reads right whatever level the inputs came from; identical
//!    entries, the same write in two places, are written once).
//! 6. Move the old log segments into `lost/` and start a new log after the last LSN seen
//!    (`Wal::create_after`: seqnos are LSNs and never go back).
//! 7. Move the old `CURRENT` and manifest files into `lost/`, write the new manifest
//!    (every table in the new run, the surviving blob files, log start at the new log's
//!    first LSN), and only then remove the old tables, whose entries are all in the run.
//!
//! A crash at any step leaves a directory repair can run on again: the new tables merge
//! with the old ones (their entries are identical), and the log is in `lost/` only after
//! its entries are in synced tables.

use std::collections::{BTreeMap, BTreeSet};

use super::*;
use crate::manifest::{CfState, ManifestState};
use crate::sstable::{Table, TableIter};
use crate::table_meta::{blob_file_name, TableMeta};

/// What [`Db::repair`] found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RepairReport {
    /// Why the manifest could not be used, if it could not (it was then rebuilt from the
    /// files alone).
    pub manifest_error: Option<String>,
    /// Tables whose every block and key checked out.
    pub tables_recovered: u64,
    /// Blob files whose header and footer checked out.
    pub blob_files_recovered: u64,
    /// Files that did not check out, moved into `lost/`: `(file, why)`. Their entries are
    /// lost unless the log still held them.
    pub damaged: Vec<(PathBuf, String)>,
    /// Tables no readable manifest placed in a column family: put in the default one.
    pub assumed_default: Vec<PathBuf>,
    /// Column families re-created without their name (`recovered-{id}`): the log wrote
    /// to them and no readable manifest named them.
    pub cfs_recreated: Vec<String>,
    /// Log records recovered.
    pub records_recovered: u64,
    /// Where and why the log stopped being readable before its end, if it did: records
    /// after it are lost.
    pub log_damage: Option<String>,
    /// Tables written (the merged run).
    pub tables_written: u64,
    /// Files moved into `lost/` (the old log, the old manifest, damaged files): `(from,
    /// to)`.
    pub set_aside: Vec<(PathBuf, PathBuf)>,
}

/// The largest table the merged run cuts (between user keys).
const RUN_TABLE_BYTES: u64 = 64 << 20;

impl Db {
    /// Repairs the database at `path`, as RocksDB's `RepairDB`: rebuilds its manifest from
    /// its tables, blob files and log when the manifest (or `CURRENT`) is lost or damaged,
    /// moving damaged files into `lost/`, and reports what it could not recover. The
    /// database then opens with [`Db::open`]. Takes the directory lock: no other handle
    /// may hold the database.
    ///
    /// All data ends up in one sorted run of new tables at the last level (the old tables
    /// are merged, since their levels are not known without the manifest) and a new, empty
    /// log; the old log and manifest files are kept in `lost/`. See `docs/design.md`,
    /// "Repair".
    ///
    /// # Errors
    ///
    /// `Locked` if a handle holds the database; `InvalidArgument` if `path` holds no
    /// database files; `Io` if a call fails (the directory can be repaired again).
    pub fn repair(path: impl AsRef<Path>) -> Result<RepairReport> {
        repair_with(Db::builder(path))
    }
}

/// [`Db::repair`] with the options of `opts` (file system, table options, segment size).
pub(crate) fn repair_with(opts: DbBuilder) -> Result<RepairReport> {
    let fs: Arc<dyn FileSystem> = opts.fs.clone().unwrap_or_else(|| OsFs::new());
    let dir = opts.path.clone();
    let tables_dir = dir.join("tables");
    let wal_dir = dir.join("wal");
    if fs.list(&dir).is_err() {
        return Err(Error::invalid(format!("no database at {}", dir.display())));
    }
    let _lock = dir::lock(&*fs, &dir)?;
    let mut report = RepairReport::default();

    // 2. What the manifest still says.
    let known = match Manifest::recover(fs.clone(), &dir) {
        Ok(r) => Some(r.state().clone()),
        Err(e) => {
            report.manifest_error = Some(e.to_string());
            None
        }
    };

    // 3. Blob files, then tables, checked.
    let files = fs.list(&tables_dir).unwrap_or_default();
    let id_of = |p: &Path, ext: &str| -> Option<u64> {
        p.file_name()?
            .to_str()?
            .strip_suffix(ext)?
            .parse::<u64>()
            .ok()
    };
    let set_aside = |report: &mut RepairReport, p: &Path, why: String| -> Result<()> {
        let to = crate::lost::set_aside(&*fs, &dir, p)?;
        report.damaged.push((p.to_path_buf(), why));
        report.set_aside.push((p.to_path_buf(), to));
        Ok(())
    };
    let mut blobs = BTreeMap::new();
    let mut max_id = 0;
    for p in &files {
        if let Some(id) = id_of(p, ".blob") {
            max_id = max_id.max(id);
            match crate::vlog::read_meta(&*fs, &tables_dir, id) {
                Ok(m) => {
                    blobs.insert(id, m);
                }
                Err(e) => set_aside(&mut report, p, e.to_string())?,
            }
        }
    }
    report.blob_files_recovered = blobs.len() as u64;
    let cache = Arc::new(BlockCache::new(8 << 20));
    let mut tables: Vec<(Arc<Table>, TableMeta)> = Vec::new();
    for p in &files {
        let Some(id) = id_of(p, ".sst") else { continue };
        max_id = max_id.max(id);
        let checked = fs
            .open(p)
            .map_err(|e| Error::io("open table", Some(p.clone()), e))
            .and_then(|f| Table::open(id, p.clone(), f, cache.clone()))
            .and_then(|t| {
                let mut it = TableIter::new_with(&t, false);
                it.seek_to_first();
                while it.valid() {
                    it.next();
                }
                match it.take_error() {
                    Some(e) => Err(e),
                    None => Ok(t),
                }
            });
        match checked {
            Ok(t) => {
                let meta = t.meta();
                if let Some(b) = meta.blobs.iter().find(|b| !blobs.contains_key(&b.id)) {
                    let why = format!(
                        "it points into blob file {}, which did not survive",
                        blob_file_name(b.id)
                    );
                    set_aside(&mut report, p, why)?;
                } else {
                    tables.push((t, meta));
                }
            }
            Err(e) => set_aside(&mut report, p, e.to_string())?,
        }
    }
    report.tables_recovered = tables.len() as u64;

    // 4. The log, read-only, into memory.
    let wal = Wal::open_read_only(
        &wal_dir,
        silt_wal::Options::default()
            .segment_bytes(opts.log_segment_bytes())
            .fs(fs.clone()),
    )?;
    if let Some(d) = &wal.recovery().cut {
        if d.records_after > 0 || d.kind == silt_wal::DamageKind::DurableLost {
            report.log_damage = Some(format!(
                "{} at offset {} (LSN {}): {}; {} valid record(s) after it are not recovered",
                d.file.display(),
                d.offset,
                d.lsn,
                d.reason,
                d.records_after
            ));
        }
    }
    let mem = Arc::new(Memtable::new(0));
    let mut log_cfs = BTreeSet::new();
    let mut parts: BTreeMap<u64, Vec<Vec<u8>>> = BTreeMap::new();
    type Owned = (crate::key::Kind, u32, Vec<u8>, Vec<u8>);
    let owned =
        |e: batch::BatchEntry<'_>| -> Owned { (e.kind, e.cf, e.key.to_vec(), e.value.to_vec()) };
    let mut last_lsn = wal.reserved_lsn();
    for rec in wal.read_from(0)? {
        let rec = match rec {
            Ok(r) => r,
            Err(e) => {
                report.log_damage.get_or_insert(e.to_string());
                break;
            }
        };
        let Ok(record) = batch::decode_record(&rec.payload) else {
            report.log_damage.get_or_insert(format!(
                "the log record at LSN {} holds a bad batch; later records are not recovered",
                rec.lsn
            ));
            break;
        };
        // A transaction written in parts (`docs/format/batch.md`) is applied at its commit
        // record, all of it; parts no commit follows are dropped, as replay drops them.
        let entries = match record {
            batch::Record::Batch(es) => es,
            batch::Record::Part { txn, .. } => {
                parts.entry(txn).or_default().push(rec.payload);
                continue;
            }
            batch::Record::Commit { txn, entries, .. } => {
                let mut all = Vec::new();
                for p in parts.remove(&txn).unwrap_or_default() {
                    if let Ok(batch::Record::Part { entries, .. }) = batch::decode_record(&p) {
                        all.extend(entries.into_iter().map(owned));
                    }
                }
                let here: Vec<_> = entries.into_iter().map(owned).collect();
                all.extend(here);
                let es: Vec<batch::BatchEntry<'_>> = all
                    .iter()
                    .map(|(kind, cf, k, v)| batch::BatchEntry {
                        kind: *kind,
                        cf: *cf,
                        key: k,
                        value: v,
                    })
                    .collect();
                log_cfs.extend(es.iter().map(|e| e.cf));
                super::write::apply(&mem, rec.lsn, &es, None, |_| true, None);
                report.records_recovered += 1;
                last_lsn = last_lsn.max(rec.lsn + 1);
                continue;
            }
        };
        log_cfs.extend(entries.iter().map(|e| e.cf));
        super::write::apply(&mem, rec.lsn, &entries, None, |_| true, None);
        report.records_recovered += 1;
        last_lsn = last_lsn.max(rec.lsn + 1);
    }
    let table_seqno_max = tables.iter().map(|(_, m)| m.largest_seqno).max();
    last_lsn = last_lsn.max(table_seqno_max.map_or(0, |s| s + 1));

    // Column families and where each table goes.
    let mut cfs: BTreeMap<u32, String> = BTreeMap::new();
    cfs.insert(0, DEFAULT_CF.to_string());
    let mut table_cf: BTreeMap<u64, u32> = BTreeMap::new();
    let mut next_cf_id = 1;
    if let Some(s) = &known {
        for c in s.cfs.values() {
            cfs.insert(c.id, c.name.clone());
            for t in c.levels.iter().flatten() {
                table_cf.insert(t.id, c.id);
            }
        }
        next_cf_id = s.next_cf_id;
        max_id = max_id.max(s.next_table_id);
    }
    for &cf in &log_cfs {
        if let std::collections::btree_map::Entry::Vacant(v) = cfs.entry(cf) {
            let name = format!("recovered-{cf}");
            report.cfs_recreated.push(name.clone());
            v.insert(name);
        }
    }
    next_cf_id = next_cf_id.max(cfs.keys().max().map_or(1, |m| m + 1));
    let mut inputs: BTreeMap<u32, Vec<Box<dyn InternalIterator>>> = BTreeMap::new();
    for (t, meta) in &tables {
        let cf = match table_cf.get(&meta.id) {
            Some(&cf) => cf,
            None => {
                report.assumed_default.push(t.path().to_path_buf());
                0
            }
        };
        inputs
            .entry(cf)
            .or_default()
            .push(Box::new(TableIter::new_with(t, false)));
    }
    for cf in mem.cfs() {
        inputs.entry(cf).or_default().push(Box::new(mem.iter(cf)));
    }

    // 5. One sorted run per column family.
    let table_opts = TableOptions {
        block_size_bytes: opts.block_size_bytes,
        bloom_bits_per_key: opts.bloom_bits_per_key,
        compression: opts.compression,
        ..TableOptions::default()
    };
    let mut next_id = max_id + 1;
    let mut run: BTreeMap<u32, Vec<TableMeta>> = BTreeMap::new();
    for (cf, children) in inputs {
        let mut it = crate::iter::MergingIter::new(children);
        it.seek_to_first();
        let mut out: Option<TableBuilder> = None;
        let mut last: Vec<u8> = Vec::new();
        while it.valid() {
            let k = it.key();
            if k == last.as_slice() {
                it.next(); // the same write in two places
                continue;
            }
            let new_user_key = last.is_empty() || key::user_key(&last) != key::user_key(k);
            if new_user_key
                && out
                    .as_ref()
                    .is_some_and(|b| b.estimated_size_bytes() >= RUN_TABLE_BYTES)
            {
                let b = out.take().expect("checked");
                run.entry(cf).or_default().push(b.finish()?);
            }
            if out.is_none() {
                let path = tables_dir.join(table_file_name(next_id));
                let file = fs
                    .create(&path)
                    .map_err(|e| Error::io("create table", Some(path.clone()), e))?;
                out = Some(TableBuilder::new(next_id, path, file, &table_opts));
                next_id += 1;
            }
            out.as_mut().expect("made").add(k, it.value())?;
            last.clear();
            last.extend_from_slice(k);
            it.next();
        }
        if let Some(e) = it.take_error() {
            return Err(e);
        }
        if let Some(b) = out {
            run.entry(cf).or_default().push(b.finish()?);
        }
    }
    fs.sync_dir(&tables_dir)
        .map_err(|e| Error::io("fsync directory", Some(tables_dir.clone()), e))?;
    report.tables_written = run.values().map(|v| v.len() as u64).sum();

    // 6. The old log into lost/, a new one after every LSN seen.
    let wal_segments = wal.segment_bytes();
    drop(wal);
    for p in fs.list(&wal_dir).unwrap_or_default() {
        if p.extension().is_some_and(|e| e == "wal" || e == "recycle") {
            let to = crate::lost::set_aside(&*fs, &dir, &p)?;
            report.set_aside.push((p, to));
        }
    }
    let log_start = Wal::create_after(
        &wal_dir,
        silt_wal::Options::default()
            .segment_bytes(wal_segments)
            .fs(fs.clone()),
        last_lsn,
    )?;

    // 7. The new manifest, then the old tables go.
    for p in fs.list(&dir).unwrap_or_default() {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if name == "CURRENT" || name == "CURRENT.tmp" || name.starts_with("MANIFEST-") {
            let to = crate::lost::set_aside(&*fs, &dir, &p)?;
            report.set_aside.push((p, to));
        }
    }
    let mut state = ManifestState {
        cfs: BTreeMap::new(),
        log_start,
        next_table_id: next_id,
        next_cf_id,
        blobs,
    };
    for (id, name) in cfs {
        let mut levels = vec![Vec::new(); LEVELS];
        levels[LEVELS - 1] = run.remove(&id).unwrap_or_default();
        state.cfs.insert(id, CfState { id, name, levels });
    }
    // Blob files no table points into any more leave the state (as at the end of every
    // manifest record); the next open removes them as garbage.
    let referenced: BTreeSet<u64> = state
        .cfs
        .values()
        .flat_map(|c| c.levels.iter().flatten())
        .flat_map(|t| t.blobs.iter().map(|b| b.id))
        .collect();
    state.blobs.retain(|id, _| referenced.contains(id));
    Manifest::install_state(&*fs, &dir, &state)?;
    for (t, _) in &tables {
        let _ = fs.remove(t.path());
    }
    fs.sync_dir(&tables_dir)
        .map_err(|e| Error::io("fsync directory", Some(tables_dir.clone()), e))?;
    Ok(report)
}
