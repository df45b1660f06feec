//! The manifest: a log of version edits ([`Edit`]) that describes the durable shape of the
//! database (column families, each one's tables per level, where WAL replay starts, the
//! next table and column family ids), and the `CURRENT` file that names the live log.
//! The byte format and the protocols are in `docs/format/manifest.md`.
//!
//! ## Invariants
//!
//! 1. `CURRENT` only ever names a manifest file whose header and first record (a snapshot
//!    of the whole state) were synced before `CURRENT` was switched to it, and `CURRENT`
//!    changes only by an atomic rename of a synced temporary file.
//! 2. One [`Manifest::log_and_apply`] call is one record (or one new snapshot file): after
//!    a crash either all of its edits are in the recovered state or none are. It returns
//!    `Ok` only once the record is durable, and changes the in-memory state only then.
//! 3. Records are appended only right after the last valid one: a torn tail found at open
//!    is cut off (and the cut synced) before anything is appended.
//! 4. After a failed write, fdatasync, rename or directory sync the manifest is poisoned:
//!    it never writes again, and every later `log_and_apply` returns `Poisoned`.
//! 5. All I/O goes through [`FileSystem`] / [`File`], so `SimFs` crash tests cover it.

mod edit;

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use silt_vfs::{File, FileSystem};

use crate::error::{Error, Result};
use crate::table_meta::TableMeta;

use edit::{Applier, DEFAULT_CF_ID, DEFAULT_CF_NAME};
pub(crate) use edit::{Edit, LEVELS};

/// The file naming the live manifest.
const CURRENT: &str = "CURRENT";
/// Where `CURRENT`'s next content is written before it is renamed over `CURRENT`.
const CURRENT_TMP: &str = "CURRENT.tmp";
/// Manifest files are `MANIFEST-{number:06}`.
const MANIFEST_PREFIX: &str = "MANIFEST-";
/// `CURRENT` holds one manifest name and a newline; anything longer is damage.
const CURRENT_MAX_BYTES: u64 = 64;

/// First bytes of every manifest file.
const MAGIC: [u8; 8] = *b"SILTMAN\0";
/// The format version in the file header.
const FORMAT_VERSION: u32 = 1;
/// magic (8) + version (4) + manifest number (8) + crc32c (4).
const FILE_HEADER_BYTES: u64 = 24;
/// length (4) + crc32c (4).
const RECORD_HEADER_BYTES: u64 = 8;
/// The largest record payload: bounds the allocation a reader makes for one record. A
/// snapshot of 100 000 tables with 100-byte keys takes about 30 MiB.
pub(crate) const MAX_RECORD_BYTES: u32 = 256 << 20;
/// Default manifest size that triggers a rewrite into a new file.
pub(crate) const REWRITE_BYTES_DEFAULT: u64 = 4 << 20;

/// One column family as the manifest knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CfState {
    /// Its id.
    pub id: u32,
    /// Its name.
    pub name: String,
    /// Its tables per level: [`LEVELS`] entries, ordered as invariant 4 of `edit.rs` says.
    pub levels: Vec<Vec<TableMeta>>,
}

impl CfState {
    fn new(id: u32, name: String) -> CfState {
        CfState {
            id,
            name,
            levels: vec![Vec::new(); LEVELS],
        }
    }
}

/// Everything the manifest describes: the state reached by replaying its edits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ManifestState {
    /// The live column families by id.
    pub cfs: BTreeMap<u32, CfState>,
    /// WAL records below this LSN are fully in tables; replay starts here.
    pub log_start: u64,
    /// The smallest table id never used.
    pub next_table_id: u64,
    /// The smallest column family id never used.
    pub next_cf_id: u32,
}

impl ManifestState {
    /// The state before the first edit of a manifest: nothing at all. A manifest's first
    /// record (a snapshot) builds the real state from here.
    pub(crate) fn empty() -> ManifestState {
        ManifestState {
            cfs: BTreeMap::new(),
            log_start: 0,
            next_table_id: 0,
            next_cf_id: 0,
        }
    }

    /// The state of a new database: the default column family, no tables, table ids from 1.
    pub(crate) fn initial() -> ManifestState {
        let mut a = Applier::new(ManifestState::empty());
        let edits = [
            Edit::CreateCf {
                id: DEFAULT_CF_ID,
                name: DEFAULT_CF_NAME.to_string(),
            },
            Edit::NextTableId(1),
        ];
        for e in &edits {
            let applied = a.apply(e);
            debug_assert!(applied.is_ok(), "{applied:?}");
        }
        a.into_state()
    }

    /// Edits that rebuild this state from [`ManifestState::empty`]: every column family in
    /// id order, then every table level by level in level order, then the counters.
    pub(crate) fn snapshot(&self) -> Vec<Edit> {
        let mut edits = Vec::new();
        for cf in self.cfs.values() {
            edits.push(Edit::CreateCf {
                id: cf.id,
                name: cf.name.clone(),
            });
        }
        for cf in self.cfs.values() {
            for (level, tables) in cf.levels.iter().enumerate() {
                for meta in tables {
                    edits.push(Edit::AddTable {
                        cf: cf.id,
                        level: level as u8,
                        meta: meta.clone(),
                    });
                }
            }
        }
        edits.push(Edit::NextCfId(self.next_cf_id));
        edits.push(Edit::NextTableId(self.next_table_id));
        edits.push(Edit::LogStart(self.log_start));
        edits
    }

    /// The id of every table in every column family.
    pub(crate) fn table_ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.cfs
            .values()
            .flat_map(|cf| cf.levels.iter().flatten().map(|t| t.id))
    }
}

/// The durable description of the database, open for appending edits.
///
/// Not thread-safe by itself: the engine calls it under its state lock.
pub(crate) struct Manifest {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    /// The number of the live manifest file.
    number: u64,
    path: PathBuf,
    file: Arc<dyn File>,
    /// The end of the last valid record: where the next one goes.
    end_bytes: u64,
    /// The size of the file right after its snapshot was written.
    base_bytes: u64,
    /// Rewrite once appending would take the file past
    /// `max(rewrite_bytes, 2 * base_bytes)` (the second term keeps rewrites rare when the
    /// snapshot alone is large).
    rewrite_bytes: u64,
    state: ManifestState,
    poisoned: bool,
}

impl std::fmt::Debug for Manifest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manifest")
            .field("path", &self.path)
            .field("end_bytes", &self.end_bytes)
            .field("cfs", &self.state.cfs.len())
            .field("poisoned", &self.poisoned)
            .finish_non_exhaustive()
    }
}

impl Manifest {
    /// Whether `dir` holds a database (a `CURRENT` file). A missing `dir` holds none.
    ///
    /// # Errors
    ///
    /// `Io` if `dir` cannot be listed.
    pub(crate) fn exists(fs: &dyn FileSystem, dir: &Path) -> Result<bool> {
        match fs.list(dir) {
            Ok(files) => Ok(files
                .iter()
                .any(|p| p.file_name() == Some(CURRENT.as_ref()))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Error::io("list directory", Some(dir.to_path_buf()), e)),
        }
    }

    /// Creates the manifest of a new database in `dir` (created if missing):
    /// `MANIFEST-000001` holding a snapshot of [`ManifestState::initial`], synced, then
    /// `CURRENT` naming it, written through a synced temporary file, a rename and a
    /// directory sync. Leftovers of an earlier attempt that crashed before `CURRENT` became
    /// durable are removed first.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` if `dir` already holds a database; `Io` if a call fails.
    pub(crate) fn create(fs: Arc<dyn FileSystem>, dir: &Path) -> Result<Manifest> {
        fs.create_dir_all(dir)
            .map_err(|e| Error::io("create directory", Some(dir.to_path_buf()), e))?;
        if Manifest::exists(&*fs, dir)? {
            return Err(Error::invalid(format!(
                "{} already holds a database",
                dir.display()
            )));
        }
        remove_leftovers(&*fs, dir, None)?;
        let state = ManifestState::initial();
        let number = 1;
        let (path, file, end_bytes) = write_snapshot_file(&*fs, dir, number, &state)?;
        sync_dir(&*fs, dir)?;
        install_current(&*fs, dir, number)?;
        Ok(Manifest::fresh(
            fs,
            dir.to_path_buf(),
            number,
            path,
            file,
            end_bytes,
            state,
        ))
    }

    /// A manifest whose file `number` at `path` holds just a snapshot of `state`, ending at
    /// `end_bytes` (made by `create` or by committing a recovered state).
    fn fresh(
        fs: Arc<dyn FileSystem>,
        dir: PathBuf,
        number: u64,
        path: PathBuf,
        file: Arc<dyn File>,
        end_bytes: u64,
        state: ManifestState,
    ) -> Manifest {
        Manifest {
            fs,
            dir,
            number,
            path,
            file,
            end_bytes,
            base_bytes: end_bytes,
            rewrite_bytes: REWRITE_BYTES_DEFAULT,
            state,
            poisoned: false,
        }
    }

    /// Opens the manifest of the database in `dir` for appending: [`Manifest::recover`],
    /// then [`Recovered::commit`]. The engine does the two apart, to check the tables and
    /// the log in between.
    ///
    /// # Errors
    ///
    /// As [`Manifest::recover`] and [`Recovered::commit`].
    #[cfg_attr(not(test), allow(dead_code))] // the engine recovers and commits apart
    pub(crate) fn open(fs: Arc<dyn FileSystem>, dir: &Path) -> Result<Manifest> {
        Ok(Manifest::recover(fs, dir)?.commit()?.0)
    }

    /// Reads the state of the database in `dir` without changing anything on disk: reads
    /// `CURRENT`, replays the manifest it names, and notes a torn last record (a crash
    /// during an append that was never acknowledged) and the other manifest files present.
    ///
    /// # Errors
    ///
    /// `Corruption { file, offset }` if `CURRENT` is missing or malformed, the manifest it
    /// names is missing, its header is wrong, a record other than the last is damaged, a
    /// record decodes to an unknown edit or to edits that do not fit the state, or no
    /// default column family results. `Io` if a call fails.
    pub(crate) fn recover(fs: Arc<dyn FileSystem>, dir: &Path) -> Result<Recovered> {
        let number = read_current(&*fs, dir)?;
        let path = dir.join(manifest_name(number));
        let file = fs.open(&path).map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                Error::corruption(&path, 0, "the manifest named by CURRENT is missing")
            } else {
                Error::io("open manifest", Some(path.clone()), e)
            }
        })?;
        let file_bytes = file
            .len()
            .map_err(|e| Error::io("stat manifest", Some(path.clone()), e))?;
        check_file_header(&*file, &path, file_bytes, number)?;

        let mut applier = Applier::new(ManifestState::empty());
        let mut at = FILE_HEADER_BYTES;
        let mut torn = None;
        while at < file_bytes {
            let payload = match read_record(&*file, &path, at, file_bytes)? {
                Ok(payload) => payload,
                Err(reason) => {
                    if valid_record_after(&*file, &path, at + 1, file_bytes)? {
                        return Err(Error::corruption(
                            &path,
                            at,
                            format!("{reason}, and valid records follow"),
                        ));
                    }
                    // A torn last record: its append was never acknowledged.
                    torn = Some(reason);
                    break;
                }
            };
            let edits = edit::decode(&payload).map_err(|r| Error::corruption(&path, at, r))?;
            for e in &edits {
                applier
                    .apply(e)
                    .map_err(|r| Error::corruption(&path, at, format!("bad edit: {r}")))?;
            }
            applier
                .finish_record()
                .map_err(|r| Error::corruption(&path, at, format!("bad edit: {r}")))?;
            at += RECORD_HEADER_BYTES + payload.len() as u64;
        }
        let state = applier.into_state();
        if !state.cfs.contains_key(&DEFAULT_CF_ID) {
            return Err(Error::corruption(
                &path,
                FILE_HEADER_BYTES,
                "the manifest holds no snapshot (no default column family)",
            ));
        }
        let mut others = Vec::new();
        let mut current_tmp = false;
        for p in fs
            .list(dir)
            .map_err(|e| Error::io("list directory", Some(dir.to_path_buf()), e))?
        {
            match p.file_name().and_then(|n| n.to_str()) {
                Some(CURRENT_TMP) => current_tmp = true,
                Some(name) => {
                    if let Some(n) = parse_manifest_name(name).filter(|&n| n != number) {
                        others.push((n, p));
                    }
                }
                None => {}
            }
        }
        others.sort();
        Ok(Recovered {
            fs,
            dir: dir.to_path_buf(),
            number,
            path,
            state,
            valid_bytes: at,
            file_bytes,
            torn,
            others,
            current_tmp,
        })
    }

    /// Sets the size past which the manifest is rewritten into a new file (default
    /// [`REWRITE_BYTES_DEFAULT`]).
    #[cfg_attr(not(test), allow(dead_code))] // no engine option sets it yet
    pub(crate) fn with_rewrite_bytes(mut self, n: u64) -> Manifest {
        self.rewrite_bytes = n;
        self
    }

    /// The state all acknowledged edits built.
    pub(crate) fn state(&self) -> &ManifestState {
        &self.state
    }

    /// Checks `edits` against the state, makes them durable as one record, then applies
    /// them. When the record would take the file past its size limit, the new state is
    /// written instead as the snapshot of a new manifest file, `CURRENT` is switched to it
    /// (the commit point) and the old file is removed. An empty `edits` does nothing.
    ///
    /// # Errors
    ///
    /// `Poisoned` if an earlier call failed an I/O; `InvalidArgument` if an edit does not
    /// fit the state (nothing written, not poisoned); `NoSpace` if a write failed for want
    /// of space (nothing durable changed, not poisoned: retry); `Io` if a write, fdatasync,
    /// rename or directory sync fails otherwise — the manifest is then poisoned, and the
    /// state is unchanged in memory while the edits may or may not be durable.
    pub(crate) fn log_and_apply(&mut self, edits: Vec<Edit>) -> Result<()> {
        if self.poisoned {
            return Err(Error::Poisoned);
        }
        if edits.is_empty() {
            return Ok(());
        }
        let mut applier = Applier::new(self.state.clone());
        for e in &edits {
            applier
                .apply(e)
                .map_err(|r| Error::invalid(format!("manifest edit refused: {r}")))?;
        }
        applier
            .finish_record()
            .map_err(|r| Error::invalid(format!("manifest edit refused: {r}")))?;
        let mut payload = Vec::new();
        edit::encode(&edits, &mut payload);
        check_record_size(&payload)?;
        let limit = self.rewrite_bytes.max(self.base_bytes.saturating_mul(2));
        let end = self.end_bytes + RECORD_HEADER_BYTES + payload.len() as u64;
        let written = if end > limit {
            self.rewrite(applier.state())
        } else {
            self.append(&payload)
        };
        match &written {
            // A write that failed for want of space wrote no whole record (a partial one
            // past `end_bytes` is overwritten by the next append, or is a torn tail) and
            // switched no `CURRENT`: nothing changed, and the call can be retried.
            Err(e) if e.is_no_space() => {}
            Err(_) => self.poisoned = true,
            Ok(()) => {}
        }
        written?;
        self.state = applier.into_state();
        Ok(())
    }

    /// The id of every table the manifest references (tests and the fuzz target check
    /// them).
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn live_table_ids(&self) -> std::collections::BTreeSet<u64> {
        self.state.table_ids().collect()
    }

    /// Appends one record and syncs it.
    fn append(&mut self, payload: &[u8]) -> Result<()> {
        let header = record_header(self.end_bytes, payload);
        self.file
            .write_at(&[&header, payload], self.end_bytes)
            .map_err(|e| Error::io("write manifest", Some(self.path.clone()), e))?;
        crate::kill_point::hit("manifest: record written, before fdatasync");
        self.file
            .sync_data()
            .map_err(|e| Error::io("fdatasync", Some(self.path.clone()), e))?;
        self.end_bytes += RECORD_HEADER_BYTES + payload.len() as u64;
        Ok(())
    }

    /// Writes `state` as the snapshot of manifest `number + 1`, switches `CURRENT` to it
    /// and removes the old file.
    fn rewrite(&mut self, state: &ManifestState) -> Result<()> {
        let number = self.number + 1;
        let (path, file, end_bytes) = write_snapshot_file(&*self.fs, &self.dir, number, state)
            .inspect_err(|e| {
                if e.is_no_space() {
                    // Not named by CURRENT: garbage, and it holds space the disk lacks.
                    let _ = self.fs.remove(&self.dir.join(manifest_name(number)));
                }
            })?;
        sync_dir(&*self.fs, &self.dir)?;
        crate::kill_point::hit("manifest: rewrite, new file written, before CURRENT");
        install_current(&*self.fs, &self.dir, number)?;
        let old = std::mem::replace(&mut self.path, path);
        crate::kill_point::hit("manifest: rewrite, CURRENT switched, before removing the old file");
        // The switch is durable, so the old file is garbage. If removing it fails, the
        // next open removes it (it is older than the one `CURRENT` names); the edits are
        // safe either way.
        let _ = self.fs.remove(&old);
        self.number = number;
        self.file = file;
        self.end_bytes = end_bytes;
        self.base_bytes = end_bytes;
        Ok(())
    }
}

/// A manifest read by [`Manifest::recover`]: the state it holds, and what else lies in the
/// directory. Nothing on disk has changed yet; [`Recovered::commit`] makes it the live
/// manifest.
pub(crate) struct Recovered {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    number: u64,
    path: PathBuf,
    state: ManifestState,
    /// The end of the last valid record.
    valid_bytes: u64,
    file_bytes: u64,
    /// Why the record at `valid_bytes` is not whole, if the file goes on past it.
    torn: Option<String>,
    /// Manifest files other than `number`, by number.
    others: Vec<(u64, PathBuf)>,
    current_tmp: bool,
}

/// What [`Recovered::commit`] did with the files it replaced.
#[derive(Debug, Default)]
pub(crate) struct Disposal {
    /// Files deleted: each provably garbage.
    pub removed: Vec<PathBuf>,
    /// Files moved into `lost/` (from, to): not used, not provably garbage.
    pub set_aside: Vec<(PathBuf, PathBuf)>,
}

impl Recovered {
    /// The state the manifest holds.
    pub(crate) fn state(&self) -> &ManifestState {
        &self.state
    }

    /// The manifest file read.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// A torn last record that [`Recovered::commit`] will leave out: its offset, the bytes
    /// from there to the end of the file, and why it is not a record.
    pub(crate) fn torn_tail(&self) -> Option<(u64, u64, &str)> {
        self.torn
            .as_deref()
            .map(|why| (self.valid_bytes, self.file_bytes - self.valid_bytes, why))
    }

    /// Makes the recovered state the live manifest: writes it as the snapshot of a new
    /// manifest file (numbered above every manifest file present), switches `CURRENT` to
    /// it, and only then disposes of the files it replaces. Manifests older than the one
    /// read are removed (`CURRENT` only moves forward, so they are superseded); the one read
    /// is removed, or moved into `lost/` if its tail was torn; newer ones — a rewrite that
    /// crashed before switching `CURRENT`, or a `CURRENT` rolled back — are moved into
    /// `lost/`, never removed.
    ///
    /// # Errors
    ///
    /// `Io` if a call fails; the directory then still opens as before.
    pub(crate) fn commit(self) -> Result<(Manifest, Disposal)> {
        let fs = self.fs;
        let dir = self.dir;
        let newest = self.others.iter().map(|&(n, _)| n).max().unwrap_or(0);
        let number = self.number.max(newest) + 1;
        let (path, file, end_bytes) = write_snapshot_file(&*fs, &dir, number, &self.state)?;
        sync_dir(&*fs, &dir)?;
        crate::kill_point::hit("manifest: open, new snapshot written, before CURRENT");
        install_current(&*fs, &dir, number)?;
        crate::kill_point::hit("manifest: open, CURRENT switched, before disposal");
        let mut out = Disposal::default();
        let mut garbage = Vec::new();
        if self.torn.is_some() {
            let to = crate::lost::set_aside(&*fs, &dir, &self.path)?;
            out.set_aside.push((self.path, to));
        } else {
            garbage.push(self.path);
        }
        for (n, p) in self.others {
            if n < self.number {
                garbage.push(p);
            } else {
                let to = crate::lost::set_aside(&*fs, &dir, &p)?;
                out.set_aside.push((p, to));
            }
        }
        if self.current_tmp {
            garbage.push(dir.join(CURRENT_TMP));
        }
        for p in garbage {
            remove_if_exists(&*fs, &p)?;
            out.removed.push(p);
        }
        if !out.removed.is_empty() {
            sync_dir(&*fs, &dir)?;
        }
        let m = Manifest::fresh(fs, dir, number, path, file, end_bytes, self.state);
        Ok((m, out))
    }
}

/// `MANIFEST-{number:06}`.
fn manifest_name(number: u64) -> String {
    format!("{MANIFEST_PREFIX}{number:06}")
}

/// The number in a manifest file name written by [`manifest_name`], and only such a name.
fn parse_manifest_name(name: &str) -> Option<u64> {
    let digits = name.strip_prefix(MANIFEST_PREFIX)?;
    if digits.len() < 6 || digits.len() > 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    (n >= 1 && manifest_name(n) == name).then_some(n)
}

fn check_record_size(payload: &[u8]) -> Result<()> {
    if payload.len() > MAX_RECORD_BYTES as usize {
        return Err(Error::invalid(format!(
            "a manifest record of {} bytes is over the limit of {MAX_RECORD_BYTES}",
            payload.len()
        )));
    }
    Ok(())
}

/// The record's CRC-32C: over its file offset, its length and its payload. Mixing in the
/// offset means a record only validates where it was written, so stale or shifted bytes
/// never pass for a record.
fn record_crc(offset: u64, payload: &[u8]) -> u32 {
    let c = crc32c::crc32c(&offset.to_le_bytes());
    let c = crc32c::crc32c_append(c, &(payload.len() as u32).to_le_bytes());
    crc32c::crc32c_append(c, payload)
}

/// The 8-byte header of a record written at `offset`. REQUIRES: `payload` has passed
/// [`check_record_size`].
fn record_header(offset: u64, payload: &[u8]) -> [u8; RECORD_HEADER_BYTES as usize] {
    debug_assert!(!payload.is_empty() && payload.len() <= MAX_RECORD_BYTES as usize);
    let mut h = [0; RECORD_HEADER_BYTES as usize];
    h[..4].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    h[4..].copy_from_slice(&record_crc(offset, payload).to_le_bytes());
    h
}

/// Reads the record at `at`: `Ok(Ok(payload))` if it is whole and its checksum matches,
/// `Ok(Err(reason))` if not; `Err` only for an I/O failure. The length is checked against
/// the limit and against the bytes left in the file before anything is allocated.
fn read_record(
    file: &dyn File,
    path: &Path,
    at: u64,
    file_bytes: u64,
) -> Result<std::result::Result<Vec<u8>, String>> {
    let left = file_bytes - at;
    if left < RECORD_HEADER_BYTES {
        return Ok(Err(format!("record header cut short ({left} bytes)")));
    }
    let mut h = [0; RECORD_HEADER_BYTES as usize];
    read_at(file, path, &mut h, at)?;
    let [l0, l1, l2, l3, c0, c1, c2, c3] = h;
    let len = u32::from_le_bytes([l0, l1, l2, l3]);
    let crc = u32::from_le_bytes([c0, c1, c2, c3]);
    if len == 0 {
        return Ok(Err("record of length 0".into()));
    }
    if len > MAX_RECORD_BYTES {
        return Ok(Err(format!("record length {len} is over the limit")));
    }
    if u64::from(len) > left - RECORD_HEADER_BYTES {
        return Ok(Err(format!(
            "record of {len} bytes runs past the end of the file"
        )));
    }
    let mut payload = vec![0; len as usize];
    read_at(file, path, &mut payload, at + RECORD_HEADER_BYTES)?;
    if record_crc(at, &payload) != crc {
        return Ok(Err("record checksum mismatch".into()));
    }
    Ok(Ok(payload))
}

/// Whether a valid record starts anywhere in `from..file_bytes`: proof that a bad record
/// before `from` is damage in the middle of the log, not a torn last append. (After a
/// crash during an append, only bytes of that one record can follow the valid prefix, and
/// those never validate as a record of their own: the checksum covers the offset.)
fn valid_record_after(file: &dyn File, path: &Path, from: u64, file_bytes: u64) -> Result<bool> {
    if from + RECORD_HEADER_BYTES >= file_bytes {
        return Ok(false);
    }
    // The tail is read once; its size is the file's, not a length read from the file.
    let mut tail = vec![0; (file_bytes - from) as usize];
    read_at(file, path, &mut tail, from)?;
    let h = RECORD_HEADER_BYTES as usize;
    for i in 0..tail.len() - h {
        let word = |j: usize| u32::from_le_bytes([tail[j], tail[j + 1], tail[j + 2], tail[j + 3]]);
        let len = word(i) as usize;
        if len == 0 || len > MAX_RECORD_BYTES as usize || len > tail.len() - i - h {
            continue;
        }
        if record_crc(from + i as u64, &tail[i + h..i + h + len]) == word(i + 4) {
            return Ok(true);
        }
    }
    Ok(false)
}

fn read_at(file: &dyn File, path: &Path, buf: &mut [u8], at: u64) -> Result<()> {
    file.read_at(buf, at)
        .map_err(|e| Error::io("read manifest", Some(path.to_path_buf()), e))
}

/// Checks the 24-byte header of manifest `number`.
fn check_file_header(file: &dyn File, path: &Path, file_bytes: u64, number: u64) -> Result<()> {
    if file_bytes < FILE_HEADER_BYTES {
        return Err(Error::corruption(
            path,
            0,
            format!("{file_bytes} bytes, shorter than the manifest header"),
        ));
    }
    let mut h = [0; FILE_HEADER_BYTES as usize];
    read_at(file, path, &mut h, 0)?;
    let bad = |reason: &str| Err(Error::corruption(path, 0, reason));
    if h[..8] != MAGIC {
        return bad("not a silt manifest (bad magic)");
    }
    let crc = u32::from_le_bytes([h[20], h[21], h[22], h[23]]);
    if crc32c::crc32c(&h[..20]) != crc {
        return bad("manifest header checksum mismatch");
    }
    let version = u32::from_le_bytes([h[8], h[9], h[10], h[11]]);
    if version != FORMAT_VERSION {
        return Err(Error::corruption(
            path,
            8,
            format!("unknown manifest format version {version}"),
        ));
    }
    let mut n = [0; 8];
    n.copy_from_slice(&h[12..20]);
    let found = u64::from_le_bytes(n);
    if found != number {
        return Err(Error::corruption(
            path,
            12,
            format!("the header says manifest {found}, the file name says {number}"),
        ));
    }
    Ok(())
}

fn file_header(number: u64) -> [u8; FILE_HEADER_BYTES as usize] {
    let mut h = [0; FILE_HEADER_BYTES as usize];
    h[..8].copy_from_slice(&MAGIC);
    h[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    h[12..20].copy_from_slice(&number.to_le_bytes());
    let crc = crc32c::crc32c(&h[..20]);
    h[20..].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Creates manifest `number` in `dir` holding the header and one snapshot record of
/// `state`, and syncs it (not the directory). Returns its path, handle and length.
fn write_snapshot_file(
    fs: &dyn FileSystem,
    dir: &Path,
    number: u64,
    state: &ManifestState,
) -> Result<(PathBuf, Arc<dyn File>, u64)> {
    let mut payload = Vec::new();
    edit::encode(&state.snapshot(), &mut payload);
    check_record_size(&payload)?;
    let path = dir.join(manifest_name(number));
    remove_if_exists(fs, &path)?;
    let file = fs
        .create(&path)
        .map_err(|e| Error::io("create manifest", Some(path.clone()), e))?;
    let header = file_header(number);
    let rec = record_header(FILE_HEADER_BYTES, &payload);
    file.write_at(&[&header, &rec, &payload], 0)
        .map_err(|e| Error::io("write manifest", Some(path.clone()), e))?;
    file.sync_data()
        .map_err(|e| Error::io("fdatasync", Some(path.clone()), e))?;
    let end = FILE_HEADER_BYTES + RECORD_HEADER_BYTES + payload.len() as u64;
    Ok((path, file, end))
}

/// Points `CURRENT` at manifest `number`: write and sync `CURRENT.tmp`, rename it over
/// `CURRENT`, sync the directory. The rename is atomic, so `CURRENT` always names a whole
/// manifest file, the old one or the new one.
fn install_current(fs: &dyn FileSystem, dir: &Path, number: u64) -> Result<()> {
    let tmp = dir.join(CURRENT_TMP);
    remove_if_exists(fs, &tmp)?;
    let file = fs
        .create(&tmp)
        .map_err(|e| Error::io("create", Some(tmp.clone()), e))?;
    let content = format!("{}\n", manifest_name(number));
    file.write_at(&[content.as_bytes()], 0)
        .map_err(|e| Error::io("write", Some(tmp.clone()), e))?;
    file.sync_data()
        .map_err(|e| Error::io("fdatasync", Some(tmp.clone()), e))?;
    let current = dir.join(CURRENT);
    crate::kill_point::hit("manifest: CURRENT.tmp synced, before rename");
    fs.rename(&tmp, &current)
        .map_err(|e| Error::io("rename", Some(current.clone()), e))?;
    sync_dir(fs, dir)
}

/// The manifest number `CURRENT` names.
fn read_current(fs: &dyn FileSystem, dir: &Path) -> Result<u64> {
    let path = dir.join(CURRENT);
    let file = fs.open(&path).map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            Error::corruption(&path, 0, "CURRENT is missing")
        } else {
            Error::io("open", Some(path.clone()), e)
        }
    })?;
    let len = file
        .len()
        .map_err(|e| Error::io("stat", Some(path.clone()), e))?;
    if len > CURRENT_MAX_BYTES {
        return Err(Error::corruption(
            &path,
            0,
            format!("CURRENT has {len} bytes, too many for a manifest name"),
        ));
    }
    let mut buf = vec![0; len as usize];
    file.read_at(&mut buf, 0)
        .map_err(|e| Error::io("read", Some(path.clone()), e))?;
    std::str::from_utf8(&buf)
        .ok()
        .and_then(|s| s.strip_suffix('\n'))
        .and_then(parse_manifest_name)
        .ok_or_else(|| {
            Error::corruption(
                &path,
                0,
                format!(
                    "CURRENT does not hold a manifest name and a newline: {:?}",
                    String::from_utf8_lossy(&buf)
                ),
            )
        })
}

/// Removes manifest files other than `keep` and `CURRENT.tmp`: what a crash during a
/// rewrite (or during `create`) left behind. The directory is synced first, so the removals
/// can never become durable before the `CURRENT` that makes them garbage.
fn remove_leftovers(fs: &dyn FileSystem, dir: &Path, keep: Option<u64>) -> Result<()> {
    let files = fs
        .list(dir)
        .map_err(|e| Error::io("list directory", Some(dir.to_path_buf()), e))?;
    let garbage: Vec<PathBuf> = files
        .into_iter()
        .filter(|p| match p.file_name().and_then(|n| n.to_str()) {
            Some(CURRENT_TMP) => true,
            Some(name) => parse_manifest_name(name).is_some_and(|n| Some(n) != keep),
            None => false,
        })
        .collect();
    if garbage.is_empty() {
        return Ok(());
    }
    sync_dir(fs, dir)?;
    for p in garbage {
        remove_if_exists(fs, &p)?;
    }
    Ok(())
}

fn remove_if_exists(fs: &dyn FileSystem, path: &Path) -> Result<()> {
    match fs.remove(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io("remove", Some(path.to_path_buf()), e)),
    }
}

fn sync_dir(fs: &dyn FileSystem, dir: &Path) -> Result<()> {
    fs.sync_dir(dir)
        .map_err(|e| Error::io("sync directory", Some(dir.to_path_buf()), e))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::Mutex;

    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use silt_vfs::{CrashMode, FailOp, SimFs};

    use super::edit::tests::table;
    use super::*;
    use crate::key::{make_internal, Kind};
    use crate::table_meta::TableMeta;

    const DIR: &str = "/db";

    const MODES: [CrashMode; 5] = [
        CrashMode::DropAll,
        CrashMode::KeepAll,
        CrashMode::Prefix,
        CrashMode::Sectors,
        CrashMode::Tear,
    ];

    fn dir() -> PathBuf {
        PathBuf::from(DIR)
    }

    fn new_sim() -> Arc<SimFs> {
        let sim = SimFs::new();
        sim.create_dir_all(&dir()).unwrap();
        sim
    }

    fn dynfs(sim: &Arc<SimFs>) -> Arc<dyn FileSystem> {
        sim.clone()
    }

    fn read_file(fs: &dyn FileSystem, path: &Path) -> Vec<u8> {
        let f = fs.open(path).unwrap();
        let mut b = vec![0; f.len().unwrap() as usize];
        f.read_at(&mut b, 0).unwrap();
        b
    }

    fn write_file(fs: &dyn FileSystem, path: &Path, bytes: &[u8]) {
        let _ = fs.remove(path);
        let f = fs.create(path).unwrap();
        f.write_at(&[bytes], 0).unwrap();
        f.sync_data().unwrap();
    }

    fn names(fs: &dyn FileSystem) -> Vec<String> {
        let mut v: Vec<String> = fs
            .list(&dir())
            .unwrap()
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    fn is_corruption(r: &Result<Manifest>) -> bool {
        matches!(r, Err(Error::Corruption { .. }))
    }

    /// Random but valid edits for a state. Every table covers a user-key range of its own,
    /// so tables never overlap, whatever level they move to.
    struct Gen {
        rng: ChaCha8Rng,
        seqno: u64,
        ranges: u64,
        log: u64,
    }

    impl Gen {
        fn new(seed: u64) -> Gen {
            Gen {
                rng: ChaCha8Rng::seed_from_u64(seed),
                seqno: 1,
                ranges: 0,
                log: 0,
            }
        }

        fn table(&mut self, id: u64) -> TableMeta {
            let r = self.ranges;
            self.ranges += 1;
            let pad = "p".repeat(self.rng.random_range(0..120));
            let lo = format!("k{r:08}a{pad}");
            let hi = format!("k{r:08}b{pad}");
            let s0 = self.seqno;
            self.seqno += self.rng.random_range(1..50);
            let entries = self.rng.random_range(1..1000);
            TableMeta {
                id,
                size_bytes: self.rng.random_range(100..1 << 30),
                entries,
                tombstones: self.rng.random_range(0..=entries),
                smallest: make_internal(lo.as_bytes(), self.seqno, Kind::Put),
                largest: make_internal(hi.as_bytes(), s0, Kind::Delete),
                smallest_seqno: s0,
                largest_seqno: self.seqno,
            }
        }

        fn pick<T: Copy>(&mut self, v: &[T]) -> Option<T> {
            (!v.is_empty()).then(|| v[self.rng.random_range(0..v.len())])
        }

        /// The tables of a state as (cf, level, meta).
        fn tables(st: &ManifestState) -> Vec<(u32, u8, &TableMeta)> {
            st.cfs
                .values()
                .flat_map(|c| {
                    c.levels
                        .iter()
                        .enumerate()
                        .flat_map(move |(l, ts)| ts.iter().map(move |t| (c.id, l as u8, t)))
                })
                .collect()
        }

        fn edits(&mut self, st: &ManifestState) -> Vec<Edit> {
            let cfs: Vec<u32> = st.cfs.keys().copied().collect();
            let mut next_id = st.next_table_id;
            let mut edits = Vec::new();
            match self.rng.random_range(0..12) {
                0 => edits.push(Edit::CreateCf {
                    id: st.next_cf_id,
                    name: format!("cf-{}", st.next_cf_id),
                }),
                1 => {
                    let droppable: Vec<u32> = cfs.iter().copied().filter(|&c| c != 0).collect();
                    if let Some(id) = self.pick(&droppable) {
                        edits.push(Edit::DropCf { id });
                    }
                }
                2..=5 => {
                    // A flush: a level-0 table for some column families, then the counters.
                    for &cf in &cfs {
                        if self.rng.random_bool(0.6) {
                            let meta = self.table(next_id);
                            next_id += 1;
                            edits.push(Edit::AddTable { cf, level: 0, meta });
                        }
                    }
                    self.log = self.log.max(st.log_start) + self.rng.random_range(0..10_000);
                    edits.push(Edit::LogStart(self.log));
                    edits.push(Edit::NextTableId(next_id));
                }
                6..=8 => {
                    // A compaction: some tables of one level become new ones a level down.
                    let all = Self::tables(st);
                    let from: Vec<(u32, u8)> = all
                        .iter()
                        .filter(|(_, l, _)| usize::from(*l) + 1 < LEVELS)
                        .map(|(c, l, _)| (*c, *l))
                        .collect();
                    if let Some((cf, level)) = self.pick(&from) {
                        for (c, l, t) in &all {
                            if (*c, *l) == (cf, level) && self.rng.random_bool(0.7) {
                                edits.push(Edit::RemoveTable {
                                    cf,
                                    level,
                                    id: t.id,
                                });
                            }
                        }
                        for _ in 0..self.rng.random_range(0..3) {
                            let meta = self.table(next_id);
                            next_id += 1;
                            edits.push(Edit::AddTable {
                                cf,
                                level: level + 1,
                                meta,
                            });
                        }
                        edits.push(Edit::NextTableId(next_id));
                    }
                }
                9 => {
                    // A trivial move.
                    let all = Self::tables(st);
                    if !all.is_empty() {
                        let (cf, level, t) = all[self.rng.random_range(0..all.len())];
                        let to = self.rng.random_range(0..LEVELS) as u8;
                        edits.push(Edit::RemoveTable {
                            cf,
                            level,
                            id: t.id,
                        });
                        edits.push(Edit::AddTable {
                            cf,
                            level: to,
                            meta: t.clone(),
                        });
                    }
                }
                10 => edits.push(Edit::NextCfId(st.next_cf_id + self.rng.random_range(0..3))),
                _ => edits.push(Edit::NextTableId(
                    st.next_table_id + self.rng.random_range(0..3),
                )),
            }
            if edits.is_empty() {
                edits.push(Edit::LogStart(st.log_start));
            }
            edits
        }
    }

    // ---- round trips -------------------------------------------------------------------

    #[test]
    fn create_open_and_every_edit_kind_round_trip() {
        let sim = new_sim();
        let fs = dynfs(&sim);
        assert!(!Manifest::exists(&*fs, Path::new("/nowhere")).unwrap());
        assert!(!Manifest::exists(&*fs, &dir()).unwrap());
        let mut m = Manifest::create(fs.clone(), &dir()).unwrap();
        assert!(Manifest::exists(&*fs, &dir()).unwrap());
        assert_eq!(*m.state(), ManifestState::initial());
        assert_eq!(names(&*fs), ["CURRENT", "MANIFEST-000001"]);
        assert_eq!(
            read_file(&*fs, &dir().join("CURRENT")),
            b"MANIFEST-000001\n"
        );
        let calls = vec![
            vec![Edit::CreateCf {
                id: 1,
                name: "one".into(),
            }],
            vec![
                Edit::AddTable {
                    cf: 1,
                    level: 0,
                    meta: table(1, b"a", b"m", 1, 9),
                },
                Edit::AddTable {
                    cf: 0,
                    level: 3,
                    meta: table(2, b"c", b"d", 1, 9),
                },
                Edit::LogStart(10),
                Edit::NextTableId(3),
            ],
            vec![
                Edit::RemoveTable {
                    cf: 1,
                    level: 0,
                    id: 1,
                },
                Edit::AddTable {
                    cf: 1,
                    level: 1,
                    meta: table(3, b"a", b"m", 1, 9),
                },
            ],
            vec![
                Edit::CreateCf {
                    id: 2,
                    name: "two".into(),
                },
                Edit::AddTable {
                    cf: 2,
                    level: 6,
                    meta: table(4, b"x", b"y", 10, 20),
                },
                Edit::NextCfId(5),
            ],
            vec![Edit::DropCf { id: 2 }],
            vec![],
        ];
        for edits in calls {
            m.log_and_apply(edits).unwrap();
            let again = Manifest::open(fs.clone(), &dir()).unwrap();
            assert_eq!(again.state(), m.state());
            // Open moved the state into a new file: go on with that one.
            m = again;
        }
        let st = m.state().clone();
        assert_eq!(st.cfs.keys().copied().collect::<Vec<_>>(), [0, 1]);
        assert_eq!((st.log_start, st.next_table_id, st.next_cf_id), (10, 5, 5));
        assert_eq!(m.live_table_ids(), BTreeSet::from([2, 3]));
        drop(m);
        // Power loss right after: everything acknowledged was synced.
        let m = Manifest::open(dynfs(&sim.crash(CrashMode::DropAll, 0)), &dir()).unwrap();
        assert_eq!(*m.state(), st);
        assert!(matches!(
            Manifest::create(fs, &dir()),
            Err(Error::InvalidArgument(_))
        ));
    }

    #[test]
    fn refused_edits_write_nothing_and_do_not_poison() {
        let sim = new_sim();
        let mut m = Manifest::create(dynfs(&sim), &dir()).unwrap();
        let before = (m.state().clone(), m.end_bytes, sim.op_count(FailOp::Any));
        let r = m.log_and_apply(vec![
            Edit::CreateCf {
                id: 1,
                name: "x".into(),
            },
            Edit::RemoveTable {
                cf: 0,
                level: 0,
                id: 77,
            },
        ]);
        assert!(matches!(r, Err(Error::InvalidArgument(ref s)) if s.contains("table 77")));
        assert_eq!(
            (m.state().clone(), m.end_bytes, sim.op_count(FailOp::Any)),
            before
        );
        m.log_and_apply(vec![Edit::LogStart(5)]).unwrap();
        assert_eq!(m.state().log_start, 5);
    }

    #[test]
    fn rewrites_keep_the_state_and_remove_old_files() {
        let sim = new_sim();
        let fs = dynfs(&sim);
        let mut m = Manifest::create(fs.clone(), &dir())
            .unwrap()
            .with_rewrite_bytes(2048);
        let mut gen = Gen::new(1);
        for i in 0..300 {
            let edits = gen.edits(m.state());
            m.log_and_apply(edits).unwrap();
            assert!(m.end_bytes <= 2048.max(2 * m.base_bytes));
            if i % 37 == 0 {
                let again = Manifest::open(fs.clone(), &dir()).unwrap();
                assert_eq!(again.state(), m.state());
                m = again.with_rewrite_bytes(2048);
            }
        }
        assert!(m.number > 5, "only {} rewrites", m.number - 1);
        let current = manifest_name(m.number);
        assert_eq!(names(&*fs), ["CURRENT".to_string(), current.clone()]);
        let again = Manifest::open(dynfs(&sim.crash(CrashMode::DropAll, 0)), &dir()).unwrap();
        assert_eq!(again.state(), m.state());
        assert_eq!(again.number, m.number + 1);
        // A large state: the limit follows the snapshot, so rewrites stay rare.
        let mut m = m.with_rewrite_bytes(1);
        let n = m.number;
        for _ in 0..20 {
            m.log_and_apply(vec![Edit::LogStart(m.state().log_start + 1)])
                .unwrap();
        }
        assert!(m.number - n <= 1);
    }

    #[test]
    fn leftovers_at_open_are_removed_if_older_and_kept_aside_if_newer() {
        let sim = new_sim();
        let fs = dynfs(&sim);
        let m = Manifest::create(fs.clone(), &dir()).unwrap();
        let st = m.state().clone();
        drop(m);
        // A rewrite that crashed before switching CURRENT (or a CURRENT rolled back): not
        // provably garbage, so kept. CURRENT.tmp is garbage; a foreign name is not ours.
        write_file(&*fs, &dir().join("MANIFEST-000002"), b"half written");
        write_file(&*fs, &dir().join(CURRENT_TMP), b"MANIFEST-000002\n");
        write_file(&*fs, &dir().join("MANIFEST-1"), b"not ours");
        let m = Manifest::open(fs.clone(), &dir()).unwrap();
        assert_eq!(*m.state(), st);
        assert_eq!(m.number, 3, "numbered above every manifest present");
        assert_eq!(names(&*fs), ["CURRENT", "MANIFEST-000003", "MANIFEST-1"]);
        assert_eq!(
            read_file(&*fs, &dir().join("lost/MANIFEST-000002")),
            b"half written"
        );
        // An older manifest left by a rewrite that crashed before removing it: garbage.
        drop(m);
        let m = Manifest::open(fs.clone(), &dir()).unwrap();
        let old = dir().join("MANIFEST-000003");
        write_file(&*fs, &old, b"superseded");
        drop(m);
        let m = Manifest::open(fs.clone(), &dir()).unwrap();
        assert_eq!(*m.state(), st);
        assert_eq!(names(&*fs), ["CURRENT", "MANIFEST-000005", "MANIFEST-1"]);
    }

    // ---- damage --------------------------------------------------------------------------

    /// A manifest of several records (no rewrite): its bytes, the end offset of each record
    /// and the state after each.
    fn sample() -> (Vec<u8>, Vec<u64>, Vec<ManifestState>) {
        let sim = new_sim();
        let fs = dynfs(&sim);
        let mut m = Manifest::create(fs.clone(), &dir()).unwrap();
        let mut ends = vec![m.end_bytes];
        let mut states = vec![m.state().clone()];
        let mut gen = Gen::new(5);
        while states.len() < 7 {
            let edits = gen.edits(m.state());
            m.log_and_apply(edits).unwrap();
            ends.push(m.end_bytes);
            states.push(m.state().clone());
        }
        (read_file(&*fs, &m.path), ends, states)
    }

    /// A database directory holding `CURRENT` and `MANIFEST-000001` with `bytes`.
    fn with_manifest(bytes: &[u8]) -> Arc<dyn FileSystem> {
        let fs = dynfs(&new_sim());
        write_file(&*fs, &dir().join(CURRENT), b"MANIFEST-000001\n");
        write_file(&*fs, &dir().join("MANIFEST-000001"), bytes);
        fs
    }

    #[test]
    fn every_truncation_gives_a_valid_prefix_or_corruption() {
        let (bytes, ends, states) = sample();
        for cut in 0..=bytes.len() {
            let fs = with_manifest(&bytes[..cut]);
            let r = Manifest::open(fs.clone(), &dir());
            let whole = ends.iter().filter(|&&e| e <= cut as u64).count();
            if whole == 0 {
                assert!(is_corruption(&r), "cut {cut}: {r:?}");
                continue;
            }
            let m = r.unwrap_or_else(|e| panic!("cut {cut}: {e}"));
            assert_eq!(*m.state(), states[whole - 1], "cut {cut}");
            // The state went into a new manifest; the old one is gone if it was whole, and
            // kept in lost/ with its torn tail if not; appends follow the prefix.
            assert_eq!(names(&*fs), ["CURRENT", "MANIFEST-000002"], "cut {cut}");
            let kept = fs.open(&dir().join("lost/MANIFEST-000001")).ok();
            if cut as u64 == ends[whole - 1] {
                assert!(kept.is_none(), "cut {cut}");
            } else {
                let kept = read_file(&*fs, &dir().join("lost/MANIFEST-000001"));
                assert_eq!(kept, bytes[..cut], "cut {cut}");
            }
            let mut m = m;
            m.log_and_apply(vec![Edit::LogStart(u64::MAX)]).unwrap();
            let again = Manifest::open(fs, &dir()).unwrap();
            assert_eq!(again.state(), m.state(), "cut {cut}");
        }
    }

    #[test]
    fn byte_flips_are_corruption_unless_in_the_last_record() {
        let (bytes, ends, states) = sample();
        let last_start = ends[ends.len() - 2] as usize;
        for at in 0..bytes.len() {
            for mask in [0x01u8, 0x80, 0xFF] {
                let mut b = bytes.clone();
                b[at] ^= mask;
                let r = Manifest::open(with_manifest(&b), &dir());
                if at >= last_start {
                    let m = r.unwrap_or_else(|e| panic!("flip at {at}: {e}"));
                    assert_eq!(*m.state(), states[states.len() - 2], "flip at {at}");
                } else {
                    let Err(Error::Corruption { file, offset, .. }) = &r else {
                        panic!("flip at {at}: {r:?}");
                    };
                    assert_eq!(*file, dir().join("MANIFEST-000001"));
                    assert!(*offset <= at as u64, "flip at {at}: offset {offset}");
                }
            }
        }
    }

    #[test]
    fn a_checksummed_but_undecodable_or_misfitting_last_record_is_corruption() {
        let (bytes, ends, _) = sample();
        let end = *ends.last().unwrap();
        for payload in [
            vec![99u8, 1, 2, 3],
            vec![TAG_FOR_TEST_DROP, 9, 0, 0, 0],
            vec![5, 1],
        ] {
            let mut b = bytes.clone();
            b.extend_from_slice(&record_header(end, &payload));
            b.extend_from_slice(&payload);
            let r = Manifest::open(with_manifest(&b), &dir());
            let Err(Error::Corruption { offset, reason, .. }) = &r else {
                panic!("{payload:?}: {r:?}");
            };
            assert_eq!(*offset, end, "{reason}");
        }
    }

    /// `Edit::DropCf`'s tag, spelled out: the test must notice if it ever changes.
    const TAG_FOR_TEST_DROP: u8 = 2;

    #[test]
    fn bad_current_or_missing_manifest_is_corruption_naming_the_file() {
        let (bytes, _, _) = sample();
        let current = dir().join(CURRENT);
        for content in [
            &b""[..],
            b"MANIFEST-000001",
            b"MANIFEST-1\n",
            b"MANIFEST-000000\n",
            b"manifest-000001\n",
            b"MANIFEST-000001\n\n",
            b"\xFF\xFE\n",
            &[b'x'; 100],
        ] {
            let fs = with_manifest(&bytes);
            write_file(&*fs, &current, content);
            let r = Manifest::open(fs, &dir());
            assert!(
                matches!(&r, Err(Error::Corruption { file, .. }) if *file == current),
                "{content:?}: {r:?}"
            );
        }
        let fs = with_manifest(&bytes);
        fs.remove(&current).unwrap();
        assert!(is_corruption(&Manifest::open(fs, &dir())));
        // CURRENT names a manifest that is not there, or that says it is another one.
        let fs = with_manifest(&bytes);
        write_file(&*fs, &current, b"MANIFEST-000002\n");
        let r = Manifest::open(fs.clone(), &dir());
        assert!(
            matches!(&r, Err(Error::Corruption { file, .. }) if *file == dir().join("MANIFEST-000002")),
            "{r:?}"
        );
        write_file(&*fs, &dir().join("MANIFEST-000002"), &bytes);
        let r = Manifest::open(fs, &dir());
        assert!(
            matches!(&r, Err(Error::Corruption { offset: 12, .. })),
            "{r:?}"
        );
    }

    #[test]
    fn garbage_after_a_torn_append_is_never_read_as_a_record() {
        let sim = new_sim();
        let fs = dynfs(&sim);
        let mut m = Manifest::create(fs.clone(), &dir()).unwrap();
        m.log_and_apply(vec![Edit::LogStart(1)]).unwrap();
        let end = m.end_bytes;
        // A torn append: a plausible header, part of its payload.
        let mut payload = Vec::new();
        edit::encode(&[Edit::LogStart(2), Edit::NextTableId(50)], &mut payload);
        let header = record_header(end, &payload);
        m.file.write_at(&[&header, &payload[..5]], end).unwrap();
        m.file.sync_data().unwrap();
        drop(m);
        let mut m = Manifest::open(fs.clone(), &dir()).unwrap();
        assert_eq!(m.state().log_start, 1);
        // The torn file is kept whole in lost/; the state lives on in a new file.
        assert_eq!(
            read_file(&*fs, &dir().join("lost/MANIFEST-000001")).len() as u64,
            end + RECORD_HEADER_BYTES + 5
        );
        assert_eq!(m.number, 2);
        m.log_and_apply(vec![Edit::LogStart(3)]).unwrap();
        drop(m);
        let m = Manifest::open(dynfs(&sim.crash(CrashMode::DropAll, 0)), &dir()).unwrap();
        assert_eq!((m.state().log_start, m.state().next_table_id), (3, 1));
    }

    // ---- power loss ----------------------------------------------------------------------

    /// A file system that takes a crash image of the `SimFs` under it before every call
    /// that changes something, labelled with the manifest call in progress.
    #[derive(Debug)]
    struct Tap {
        sim: Arc<SimFs>,
        log: Arc<Mutex<TapLog>>,
    }

    #[derive(Debug, Default)]
    struct TapLog {
        seed: u64,
        call: usize,
        ops: u64,
        images: Vec<(usize, CrashMode, Arc<SimFs>)>,
    }

    impl TapLog {
        fn image(&mut self, sim: &SimFs) {
            self.ops += 1;
            let mode = MODES[((self.seed + self.ops) % MODES.len() as u64) as usize];
            let img = sim.crash(mode, self.seed.wrapping_mul(7919) ^ self.ops);
            self.images.push((self.call, mode, img));
        }
    }

    #[derive(Debug)]
    struct TapFile {
        sim: Arc<SimFs>,
        log: Arc<Mutex<TapLog>>,
        file: Arc<dyn File>,
    }

    impl Tap {
        fn before(&self) {
            self.log.lock().unwrap().image(&self.sim);
        }

        fn wrap(&self, file: Arc<dyn File>) -> Arc<dyn File> {
            Arc::new(TapFile {
                sim: self.sim.clone(),
                log: self.log.clone(),
                file,
            })
        }
    }

    impl FileSystem for Tap {
        fn create_dir_all(&self, d: &Path) -> io::Result<()> {
            self.sim.create_dir_all(d)
        }
        fn list(&self, d: &Path) -> io::Result<Vec<PathBuf>> {
            self.sim.list(d)
        }
        fn create(&self, p: &Path) -> io::Result<Arc<dyn File>> {
            self.before();
            Ok(self.wrap(self.sim.create(p)?))
        }
        fn open(&self, p: &Path) -> io::Result<Arc<dyn File>> {
            Ok(self.wrap(self.sim.open(p)?))
        }
        fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
            self.before();
            self.sim.rename(from, to)
        }
        fn remove(&self, p: &Path) -> io::Result<()> {
            self.before();
            self.sim.remove(p)
        }
        fn sync_dir(&self, d: &Path) -> io::Result<()> {
            self.before();
            self.sim.sync_dir(d)
        }
        fn lock(&self, p: &Path) -> io::Result<Box<dyn silt_vfs::FileLock>> {
            self.sim.lock(p)
        }
    }

    impl TapFile {
        fn before(&self) {
            self.log.lock().unwrap().image(&self.sim);
        }
    }

    impl File for TapFile {
        fn len(&self) -> io::Result<u64> {
            self.file.len()
        }
        fn set_len(&self, len: u64) -> io::Result<()> {
            self.before();
            self.file.set_len(len)
        }
        fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
            self.file.read_at(buf, offset)
        }
        fn write_at(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()> {
            self.before();
            self.file.write_at(bufs, offset)
        }
        fn sync_data(&self) -> io::Result<()> {
            self.before();
            self.file.sync_data()
        }
    }

    fn seeds(default: u64) -> u64 {
        std::env::var("SILT_MANIFEST_SEEDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(default)
    }

    /// Power fails before every I/O call of a workload (create, appends, rewrites), in every
    /// crash mode: the recovered state is the acknowledged one, or that plus the call in
    /// flight; and the recovered manifest takes and keeps new edits.
    #[test]
    fn power_loss_at_every_call_recovers_an_acknowledged_prefix() {
        let mut images_checked = 0;
        let mut saw = BTreeSet::new();
        for seed in 0..seeds(300) {
            let sim = new_sim();
            let log = Arc::new(Mutex::new(TapLog {
                seed,
                ..TapLog::default()
            }));
            let tap: Arc<dyn FileSystem> = Arc::new(Tap {
                sim: sim.clone(),
                log: log.clone(),
            });
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let mut m = Manifest::create(tap, &dir())
                .unwrap()
                .with_rewrite_bytes(rng.random_range(600..3000));
            let mut states = vec![m.state().clone()];
            let mut gen = Gen::new(seed);
            let calls = rng.random_range(1..40);
            for i in 1..=calls {
                log.lock().unwrap().call = i;
                let edits = gen.edits(m.state());
                m.log_and_apply(edits).unwrap();
                states.push(m.state().clone());
            }
            log.lock().unwrap().call = calls + 1;
            log.lock().unwrap().image(&sim);
            let images = std::mem::take(&mut log.lock().unwrap().images);
            for (k, (call, mode, img)) in images.into_iter().enumerate() {
                let ctx = format!("seed {seed}, image {k}, call {call}, {mode:?}");
                let fs = dynfs(&img);
                if call == 0 && !Manifest::exists(&*fs, &dir()).unwrap() {
                    continue; // `create` never returned: no database is fine.
                }
                let mut got = Manifest::open(fs.clone(), &dir())
                    .unwrap_or_else(|e| panic!("{ctx}: open failed: {e}"));
                let acked = &states[call.saturating_sub(1)];
                let ok = got.state() == acked || states.get(call) == Some(got.state());
                assert!(ok, "{ctx}: recovered state is not acknowledged");
                saw.insert((got.state() == acked, mode == CrashMode::Tear));
                images_checked += 1;
                if k % 4 == 0 {
                    // The recovered manifest appends after its valid prefix, durably.
                    let edits = gen.edits(got.state());
                    got.log_and_apply(edits).unwrap();
                    let want = got.state().clone();
                    drop(got);
                    let again = Manifest::open(dynfs(&img.crash(CrashMode::DropAll, 0)), &dir())
                        .unwrap_or_else(|e| panic!("{ctx}: second open failed: {e}"));
                    assert_eq!(*again.state(), want, "{ctx}: second recovery");
                }
            }
        }
        assert!(images_checked > 1000, "only {images_checked} crash images");
        // Both outcomes happen: the harness is not vacuous.
        assert!(
            saw.contains(&(true, true)) && saw.contains(&(false, true)),
            "{saw:?}"
        );
    }

    // ---- I/O errors ----------------------------------------------------------------------

    const FAIL_CALLS: usize = 60;

    /// Runs the workload with the `n`-th call of kind `op` failing once; checks the failure
    /// and poisoning, then reopening. Whether the fault surfaced.
    fn run_with_fault(op: FailOp, n: u64) -> bool {
        let sim = new_sim();
        let mut m = Manifest::create(dynfs(&sim), &dir())
            .unwrap()
            .with_rewrite_bytes(1500);
        sim.fail_nth(op, n, false);
        let mut gen = Gen::new(99);
        let mut acked = m.state().clone();
        let mut failed = None;
        for i in 0..FAIL_CALLS {
            let edits = gen.edits(m.state());
            match m.log_and_apply(edits.clone()) {
                Ok(()) => acked = m.state().clone(),
                Err(Error::Io { .. }) => {
                    assert_eq!(
                        *m.state(),
                        acked,
                        "{op:?} {n}: state changed by a failed call"
                    );
                    let mut a = Applier::new(acked.clone());
                    edits.iter().for_each(|e| a.apply(e).unwrap());
                    failed = Some((i, a.into_state()));
                    break;
                }
                Err(e) => panic!("{op:?} {n}: unexpected {e}"),
            }
        }
        let Some((_, inflight)) = failed else {
            return false;
        };
        let ops = sim.op_count(FailOp::Any);
        for _ in 0..3 {
            let edits = gen.edits(m.state());
            assert!(matches!(m.log_and_apply(edits), Err(Error::Poisoned)));
            assert!(matches!(
                m.log_and_apply(vec![Edit::LogStart(u64::MAX)]),
                Err(Error::Poisoned)
            ));
        }
        assert_eq!(
            sim.op_count(FailOp::Any),
            ops,
            "{op:?} {n}: I/O after poisoning"
        );
        assert_eq!(*m.state(), acked);
        drop(m);
        for img in [
            sim.clone(),
            sim.crash(CrashMode::DropAll, n),
            sim.crash(CrashMode::KeepAll, n),
        ] {
            let got = Manifest::open(dynfs(&img), &dir())
                .unwrap_or_else(|e| panic!("{op:?} {n}: reopen failed: {e}"));
            assert!(
                *got.state() == acked || *got.state() == inflight,
                "{op:?} {n}: reopened state is neither acknowledged nor in flight"
            );
        }
        true
    }

    #[test]
    fn every_failed_fdatasync_write_or_directory_sync_poisons() {
        for op in [FailOp::Sync, FailOp::Write, FailOp::SyncDir, FailOp::Any] {
            // Count the calls of this kind the workload makes.
            let sim = new_sim();
            let mut m = Manifest::create(dynfs(&sim), &dir())
                .unwrap()
                .with_rewrite_bytes(1500);
            let before = sim.op_count(op);
            let mut gen = Gen::new(99);
            for _ in 0..FAIL_CALLS {
                let edits = gen.edits(m.state());
                m.log_and_apply(edits).unwrap();
            }
            let total = sim.op_count(op) - before;
            let rewrites = m.number - 1;
            assert!(rewrites >= 2, "only {rewrites} rewrites");
            assert!(total >= 2, "{op:?}: only {total} calls");
            let mut surfaced = 0;
            for n in 1..=total {
                surfaced += u64::from(run_with_fault(op, n));
            }
            // Only removing the old manifest after a rewrite may fail unnoticed.
            match op {
                FailOp::Any => assert_eq!(surfaced + rewrites, total, "{op:?}"),
                _ => assert_eq!(surfaced, total, "{op:?}"),
            }
        }
    }

    #[test]
    fn create_failures_are_io_errors_and_leave_no_database_or_a_whole_one() {
        let sim = new_sim();
        let base = sim.op_count(FailOp::Any);
        Manifest::create(dynfs(&sim), &dir()).unwrap();
        let total = sim.op_count(FailOp::Any) - base;
        for n in 1..=total {
            let sim = new_sim();
            sim.fail_nth(FailOp::Any, n, true);
            assert!(matches!(
                Manifest::create(dynfs(&sim), &dir()),
                Err(Error::Io { .. })
            ));
            sim.clear_faults();
            let crashed = sim.crash(CrashMode::KeepAll, n);
            for fs in [dynfs(&sim), dynfs(&crashed)] {
                if Manifest::exists(&*fs, &dir()).unwrap() {
                    let m = Manifest::open(fs, &dir()).unwrap();
                    assert_eq!(*m.state(), ManifestState::initial());
                } else {
                    // A retry succeeds over the leftovers.
                    Manifest::create(fs, &dir()).unwrap();
                }
            }
        }
    }

    #[test]
    fn names_round_trip_and_only_canonical_ones_parse() {
        assert_eq!(manifest_name(1), "MANIFEST-000001");
        assert_eq!(parse_manifest_name("MANIFEST-000001"), Some(1));
        assert_eq!(parse_manifest_name("MANIFEST-1234567"), Some(1_234_567));
        assert_eq!(
            parse_manifest_name(&manifest_name(u64::MAX)),
            Some(u64::MAX)
        );
        for bad in [
            "MANIFEST-",
            "MANIFEST-1",
            "MANIFEST-000000",
            "MANIFEST-0000001",
            "MANIFEST-+00001",
            "MANIFEST-99999999999999999999",
            "CURRENT",
        ] {
            assert_eq!(parse_manifest_name(bad), None, "{bad}");
        }
    }
}
