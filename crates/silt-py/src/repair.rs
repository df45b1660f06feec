//! `silt.repair(path)`: the engine's `Db::repair` (rebuild a database whose manifest is
//! lost or damaged from its tables, blob files and log), its report as a dict.
//!
//! Invariants: it runs with the GIL released; the report has every public field of
//! `silt::RepairReport` under the same name, paths as `str`.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors;

fn path_str(p: &std::path::Path) -> String {
    p.display().to_string()
}

/// Repairs the database at `path`, as RocksDB's RepairDB: rebuilds its manifest from
/// its tables, blob files and log when the manifest (or CURRENT) is lost or damaged,
/// moving damaged files into `lost/`. The database then opens with silt.Db(path).
/// No handle may hold it (LockedError).
///
/// Returns what it found and did, as a dict: manifest_error (why the manifest could
/// not be used, or None), tables_recovered, blob_files_recovered, damaged (a list of
/// (file, why): their entries are lost unless the log held them), assumed_default
/// (tables no readable manifest placed: put in the default column family),
/// cfs_recreated (families re-created as "recovered-ID"), records_recovered,
/// log_damage (where the log stopped being readable, or None), tables_written, and
/// set_aside (a list of (from, to): files moved into lost/).
#[pyfunction]
pub(crate) fn repair(py: Python<'_>, path: PathBuf) -> PyResult<Bound<'_, PyDict>> {
    let r = py
        .detach(|| silt::Db::repair(&path))
        .map_err(|e| errors::to_py(py, e))?;
    let pairs = |v: &[(PathBuf, PathBuf)]| -> Vec<(String, String)> {
        v.iter().map(|(a, b)| (path_str(a), path_str(b))).collect()
    };
    let d = PyDict::new(py);
    d.set_item("manifest_error", r.manifest_error.as_deref())?;
    d.set_item("tables_recovered", r.tables_recovered)?;
    d.set_item("blob_files_recovered", r.blob_files_recovered)?;
    d.set_item(
        "damaged",
        r.damaged
            .iter()
            .map(|(p, why)| (path_str(p), why.as_str()))
            .collect::<Vec<_>>(),
    )?;
    d.set_item(
        "assumed_default",
        r.assumed_default
            .iter()
            .map(|p| path_str(p))
            .collect::<Vec<_>>(),
    )?;
    d.set_item("cfs_recreated", r.cfs_recreated.clone())?;
    d.set_item("records_recovered", r.records_recovered)?;
    d.set_item("log_damage", r.log_damage.as_deref())?;
    d.set_item("tables_written", r.tables_written)?;
    d.set_item("set_aside", pairs(&r.set_aside))?;
    Ok(d)
}
