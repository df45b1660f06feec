//! Copies of a database: `Db.checkpoint(dir)` (its report as a dict) and
//! `silt.BackupStore` (incremental backups, verified restores), over the engine's
//! `Db::checkpoint` and `BackupStore`.
//!
//! Invariants:
//! * every call runs with the GIL released (they copy, link and fdatasync files);
//!   `create` reads the database through `Shared::call`, so `Db.close()` waits for it and
//!   a closed database raises `ClosedError`;
//! * the engine's reports become dicts with the engine's field names (paths as `str`),
//!   every public field present, as `Db.stats()` does.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::db::Db;
use crate::errors;

/// `silt::CheckpointInfo` as a dict.
pub(crate) fn checkpoint_dict<'py>(
    py: Python<'py>,
    c: &silt::CheckpointInfo,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("dir", c.dir.display().to_string())?;
    d.set_item("seqno", c.seqno)?;
    d.set_item("files_linked", c.files_linked)?;
    d.set_item("files_copied", c.files_copied)?;
    d.set_item("bytes_copied", c.bytes_copied)?;
    d.set_item("log_segments", c.log_segments)?;
    Ok(d)
}

/// `silt::BackupInfo` as a dict.
fn backup_dict<'py>(py: Python<'py>, b: &silt::BackupInfo) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("id", b.id)?;
    d.set_item("created_unix_secs", b.created_unix_secs)?;
    d.set_item("seqno", b.seqno)?;
    d.set_item("files", b.files)?;
    d.set_item("bytes", b.bytes)?;
    d.set_item("new_files", b.new_files)?;
    d.set_item("new_bytes", b.new_bytes)?;
    Ok(d)
}

/// A directory of backups of databases: incremental (a table already in the store is
/// not copied again), each file recorded with its length and CRC-32C, restored only
/// once every file matched.
///
///     store = silt.BackupStore("/backups/app")     # created if missing
///     info = store.create(db)                      # while writes go on
///     store.verify(info["id"])                     # checks every file's checksum
///     store.restore(info["id"], "/var/lib/app/restored")
///
/// Each backup is a dict: id, created_unix_secs, seqno (every write below it is in
/// the backup), files, bytes, new_files and new_bytes (what this backup added to the
/// store; 0 from list()). Damage is silt.CorruptionError naming the store's file.
#[pyclass(frozen, module = "silt", name = "BackupStore")]
pub struct BackupStore {
    store: silt::BackupStore,
    path: PathBuf,
}

#[pymethods]
impl BackupStore {
    /// Opens the store at `path`, creating its directories if missing.
    #[new]
    fn new(py: Python<'_>, path: PathBuf) -> PyResult<BackupStore> {
        let store = py
            .detach(|| silt::BackupStore::open(&path))
            .map_err(|e| errors::to_py(py, e))?;
        Ok(BackupStore { store, path })
    }

    /// Backs up `db` (its state at one seqno, holding every write acknowledged before
    /// the call) while writes go on; returns the new backup's dict.
    fn create<'py>(&self, py: Python<'py>, db: &Bound<'py, Db>) -> PyResult<Bound<'py, PyDict>> {
        let info = db.get().shared.call(py, |d| self.store.create(d))?;
        backup_dict(py, &info)
    }

    /// Every backup in the store, oldest first.
    fn list<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let all = py
            .detach(|| self.store.list())
            .map_err(|e| errors::to_py(py, e))?;
        let out = PyList::empty(py);
        for b in &all {
            out.append(backup_dict(py, b)?)?;
        }
        Ok(out)
    }

    /// Checks every file of backup `id` against its recorded length and CRC-32C
    /// without restoring it; returns its dict. CorruptionError names the first file
    /// that differs or is missing; InvalidArgumentError if there is no such backup.
    fn verify<'py>(&self, py: Python<'py>, id: u64) -> PyResult<Bound<'py, PyDict>> {
        let info = py
            .detach(|| self.store.verify(id))
            .map_err(|e| errors::to_py(py, e))?;
        backup_dict(py, &info)
    }

    /// Restores backup `id` into `target` (which must not exist) as a database
    /// directory, checking every file as it is copied; the directory appears only once
    /// all matched. Returns the backup's dict.
    fn restore<'py>(
        &self,
        py: Python<'py>,
        id: u64,
        target: PathBuf,
    ) -> PyResult<Bound<'py, PyDict>> {
        let info = py
            .detach(|| self.store.restore(id, &target))
            .map_err(|e| errors::to_py(py, e))?;
        backup_dict(py, &info)
    }

    /// Removes all but the newest `keep` backups, then the files no remaining backup
    /// needs; returns the ids removed.
    fn purge_old(&self, py: Python<'_>, keep: usize) -> PyResult<Vec<u64>> {
        py.detach(|| self.store.purge_old(keep))
            .map_err(|e| errors::to_py(py, e))
    }

    /// The store's directory.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    fn __repr__(&self) -> String {
        format!("<silt.BackupStore {:?}>", self.path.display().to_string())
    }
}
