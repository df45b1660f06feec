//! `Db.stats()`: the engine's `silt::Stats` as a dict, one key per field (same names).
//!
//! Invariant: every public field of `silt::Stats` appears; `levels` is a list of
//! `{"tables": n, "bytes": n}`, level 0 first.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

/// The dict of `s`.
pub(crate) fn to_dict<'py>(py: Python<'py>, s: &silt::Stats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let levels = PyList::empty(py);
    for l in &s.levels {
        let ld = PyDict::new(py);
        ld.set_item("tables", l.tables)?;
        ld.set_item("bytes", l.bytes)?;
        levels.append(ld)?;
    }
    d.set_item("levels", levels)?;
    d.set_item("memtable_bytes", s.memtable_bytes)?;
    d.set_item("immutable_memtables", s.immutable_memtables)?;
    d.set_item("memtable_pool_bytes", s.memtable_pool_bytes)?;
    d.set_item("cache_hits", s.cache_hits)?;
    d.set_item("cache_misses", s.cache_misses)?;
    d.set_item("user_bytes", s.user_bytes)?;
    d.set_item("wal_bytes", s.wal_bytes)?;
    d.set_item("wal_fsyncs", s.wal_fsyncs)?;
    d.set_item("flush_bytes", s.flush_bytes)?;
    d.set_item("compaction_read_bytes", s.compaction_read_bytes)?;
    d.set_item("compaction_write_bytes", s.compaction_write_bytes)?;
    d.set_item("blob_files", s.blob_files)?;
    d.set_item("blob_file_bytes", s.blob_file_bytes)?;
    d.set_item("blob_live_bytes", s.blob_live_bytes)?;
    d.set_item("blob_write_bytes", s.blob_write_bytes)?;
    d.set_item("flushes", s.flushes)?;
    d.set_item("compactions", s.compactions)?;
    d.set_item("write_amp", s.write_amp)?;
    d.set_item("stalls", s.stalls)?;
    d.set_item("stall_micros", s.stall_micros)?;
    d.set_item("l0_compaction_trigger", s.l0_compaction_trigger)?;
    Ok(d)
}
