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

mod dump;
mod edit;
mod file;
mod recover;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use silt_vfs::{File, FileSystem};

use crate::error::{Error, Result};
use crate::table_meta::{BlobMeta, TableMeta};

pub(crate) use dump::dump;
use edit::{Applier, DEFAULT_CF_ID, DEFAULT_CF_NAME};
pub(crate) use edit::{Edit, LEVELS};
use file::*;

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
    /// The blob files some table points into, by id (`docs/format/vlog.md`).
    pub blobs: BTreeMap<u64, BlobMeta>,
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
            blobs: BTreeMap::new(),
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
    /// id order, every blob file, then every table level by level in level order, then the
    /// counters.
    pub(crate) fn snapshot(&self) -> Vec<Edit> {
        let mut edits = Vec::new();
        for cf in self.cfs.values() {
            edits.push(Edit::CreateCf {
                id: cf.id,
                name: cf.name.clone(),
            });
        }
        for b in self.blobs.values() {
            edits.push(Edit::AddBlob(b.clone()));
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

    /// Writes a new database's manifest for `state` into `dir` (which holds none):
    /// `MANIFEST-000001` with one snapshot record, synced, then `CURRENT` naming it
    /// (through the usual synced temporary file and rename). For checkpoints, backups
    /// and repair, which make a database from a state rather than from nothing. Returns
    /// the manifest's path.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` if `dir` already holds a database; `Io` if a call fails.
    pub(crate) fn install_state(
        fs: &dyn FileSystem,
        dir: &Path,
        state: &ManifestState,
    ) -> Result<PathBuf> {
        if Manifest::exists(fs, dir)? {
            return Err(Error::invalid(format!(
                "{} already holds a database",
                dir.display()
            )));
        }
        let (path, _file, _end) = write_snapshot_file(fs, dir, 1, state)?;
        sync_dir(fs, dir)?;
        install_current(fs, dir, 1)?;
        Ok(path)
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
