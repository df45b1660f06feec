//! `silt-py`: the Python bindings of the silt engine, the extension module `silt._silt`
//! of the Python package `silt` (`python/silt`, built by maturin: `pyproject.toml`).
//!
//! One file per Python class: `db.rs` (`Db`), `cf.rs` (`ColumnFamily`), `batch.rs`
//! (`WriteBatch`), `snapshot.rs` (`Snapshot`), `txn.rs` (`Transaction`, and
//! `Db.transact`'s retries), `iter.rs` (`Iter`), `backup.rs` (`BackupStore`, and
//! `Db.checkpoint`'s report), `repair.rs` (`silt.repair`); what they share:
//! `shared.rs` (the database state every object holds, and the one way to call the engine
//! with the GIL released), `view.rs` (what a read sees, which column family), `ops.rs`
//! (point reads and writes), `convert.rs` (bytes in and out), `options.rs`
//! (`Db(path, **options)`), `errors.rs` (engine errors to the exceptions of
//! `python/silt/_errors.py`), `stats.rs`.
//!
//! Invariants kept across the crate (each file states its own):
//! * the GIL is released around every call into the engine, and never held while
//!   waiting on a Rust lock that a thread without the GIL may hold;
//! * an object made from a database keeps its state alive (an `Arc`), so nothing Python
//!   holds can outlive what it points into; after `Db.close()` all of them raise
//!   `silt.ClosedError`;
//! * no panic crosses into Python: bad input is a `TypeError` or a `silt` exception (PyO3
//!   would turn a panic into `PanicException`, which the tests would catch as a bug).
//!
//! `docs/design.md` ("silt-py") has the design; the tests are the pytest suite in
//! `tests/`, run by `scripts/test.sh`.

use pyo3::prelude::*;

mod backup;
mod batch;
mod cf;
mod convert;
mod db;
mod errors;
mod iter;
mod ops;
mod options;
mod repair;
mod shared;
mod snapshot;
mod stats;
mod txn;
mod view;

/// The extension module; `silt/__init__.py` re-exports it.
#[pymodule]
fn _silt(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<db::Db>()?;
    m.add_class::<cf::ColumnFamily>()?;
    m.add_class::<batch::WriteBatch>()?;
    m.add_class::<snapshot::Snapshot>()?;
    m.add_class::<iter::Iter>()?;
    m.add_class::<txn::Transaction>()?;
    m.add_class::<backup::BackupStore>()?;
    m.add_function(wrap_pyfunction!(repair::repair, m)?)?;
    m.add("MAX_KEY_BYTES", silt::MAX_KEY_BYTES)?;
    m.add("MAX_VALUE_BYTES", silt::MAX_VALUE_BYTES)?;
    m.add("DEFAULT_CF", silt::DEFAULT_CF)?;
    Ok(())
}
