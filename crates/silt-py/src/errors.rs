//! The mapping from `silt::Error` to the exceptions of `silt/_errors.py`.
//!
//! Invariants:
//! * every engine error becomes an instance of a `silt.SiltError` subclass, one class per
//!   variant, with the variant's fields as attributes (keys as `bytes`, column families
//!   by name); the retryable ones (`Error::is_retryable`: `Conflict`, `LockTimeout`,
//!   `Deadlock`) derive from `silt.RetryableError`, which is what `Db.transact` retries;
//!   a variant this crate does not know yet (`silt::Error` is `#[non_exhaustive]`)
//!   becomes a plain `silt.SiltError` with the engine's message, never a panic;
//! * the message is the engine's `Display`, which says what to do;
//! * the classes are looked up once (`PyOnceLock`) from `silt._errors`, so the mapping
//!   costs one call of the class on the error path only.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyType};

/// One cached exception class of `silt._errors`.
struct Class {
    name: &'static str,
    cell: PyOnceLock<Py<PyType>>,
}

impl Class {
    const fn new(name: &'static str) -> Class {
        Class {
            name,
            cell: PyOnceLock::new(),
        }
    }

    fn get<'py>(&self, py: Python<'py>) -> PyResult<&Bound<'py, PyType>> {
        self.cell.import(py, "silt._errors", self.name)
    }
}

static SILT: Class = Class::new("SiltError");
static IO: Class = Class::new("IoError");
static NO_SPACE: Class = Class::new("NoSpaceError");
static CORRUPTION: Class = Class::new("CorruptionError");
static POISONED: Class = Class::new("PoisonedError");
static INVALID: Class = Class::new("InvalidArgumentError");
static CF_NOT_FOUND: Class = Class::new("ColumnFamilyNotFoundError");
static CLOSED: Class = Class::new("ClosedError");
static LOCKED: Class = Class::new("LockedError");
static CONFLICT: Class = Class::new("ConflictError");
static LOCK_TIMEOUT: Class = Class::new("LockTimeoutError");
static DEADLOCK: Class = Class::new("DeadlockError");
static TOO_LARGE: Class = Class::new("TransactionTooLargeError");
static READ_ONLY: Class = Class::new("ReadOnlyError");
static RETRYABLE: Class = Class::new("RetryableError");

/// The Python exception for an engine error.
pub(crate) fn to_py(py: Python<'_>, e: silt::Error) -> PyErr {
    // Building the exception can itself fail (the package is broken, memory is short):
    // then that failure is what the caller sees, which still names the cause.
    build(py, &e).unwrap_or_else(|build_err| build_err)
}

fn build(py: Python<'_>, e: &silt::Error) -> PyResult<PyErr> {
    let msg = e.to_string();
    let path_str = |p: &std::path::Path| p.display().to_string();
    let inst = match e {
        silt::Error::Io { op, path, source } | silt::Error::NoSpace { op, path, source } => {
            let class = if e.is_no_space() { &NO_SPACE } else { &IO };
            // OSError(errno, strerror) sets `errno` and `strerror`; without an errno the
            // one-argument form keeps `str(e)` free of "[Errno None]".
            let inst = match source.raw_os_error() {
                Some(errno) => class.get(py)?.call1((errno, msg))?,
                None => class.get(py)?.call1((msg,))?,
            };
            inst.setattr("op", *op)?;
            inst.setattr("path", path.as_deref().map(path_str))?;
            inst
        }
        silt::Error::Corruption {
            file,
            offset,
            reason,
        } => {
            let inst = CORRUPTION.get(py)?.call1((msg,))?;
            inst.setattr("file", path_str(file))?;
            inst.setattr("offset", *offset)?;
            inst.setattr("reason", reason.as_str())?;
            inst
        }
        silt::Error::Poisoned => POISONED.get(py)?.call1((msg,))?,
        silt::Error::InvalidArgument(_) => INVALID.get(py)?.call1((msg,))?,
        silt::Error::ColumnFamilyNotFound(name) => {
            let inst = CF_NOT_FOUND.get(py)?.call1((msg,))?;
            inst.setattr("name", name.as_str())?;
            inst
        }
        silt::Error::Closed => CLOSED.get(py)?.call1((msg,))?,
        silt::Error::Locked { path, holder } => {
            let inst = LOCKED.get(py)?.call1((msg,))?;
            inst.setattr("path", path_str(path))?;
            inst.setattr("holder", *holder)?;
            inst
        }
        silt::Error::Conflict { cf, key, kind } => {
            let inst = CONFLICT.get(py)?.call1((msg,))?;
            inst.setattr("cf", cf.as_str())?;
            inst.setattr("key", PyBytes::new(py, key))?;
            inst.setattr("kind", conflict_kind(*kind))?;
            inst
        }
        silt::Error::LockTimeout { cf, key, waited_ms } => {
            let inst = LOCK_TIMEOUT.get(py)?.call1((msg,))?;
            inst.setattr("cf", cf.as_str())?;
            inst.setattr("key", PyBytes::new(py, key))?;
            inst.setattr("waited_ms", *waited_ms)?;
            inst
        }
        silt::Error::Deadlock { cf, key } => {
            let inst = DEADLOCK.get(py)?.call1((msg,))?;
            inst.setattr("cf", cf.as_str())?;
            inst.setattr("key", PyBytes::new(py, key))?;
            inst
        }
        silt::Error::TransactionTooLarge { bytes, limit } => {
            let inst = TOO_LARGE.get(py)?.call1((msg,))?;
            inst.setattr("bytes", *bytes)?;
            inst.setattr("limit", *limit)?;
            inst
        }
        silt::Error::ReadOnly => READ_ONLY.get(py)?.call1((msg,))?,
        _ => SILT.get(py)?.call1((msg,))?,
    };
    Ok(PyErr::from_value(inst))
}

/// `ConflictError.kind`: which check failed, as a stable string.
fn conflict_kind(kind: silt::ConflictKind) -> &'static str {
    match kind {
        silt::ConflictKind::WriteWrite => "write_write",
        silt::ConflictKind::ReadValidation => "read_validation",
        silt::ConflictKind::Phantom => "phantom",
        // `ConflictKind` is `#[non_exhaustive]`: a kind added later is still a conflict.
        _ => "other",
    }
}

/// Whether `e` is a `silt.RetryableError` (a conflict, a lock timeout, a deadlock: what
/// `Db.transact` retries), as `silt::Error::is_retryable` says of the engine's errors.
pub(crate) fn is_retryable(py: Python<'_>, e: &PyErr) -> bool {
    RETRYABLE
        .get(py)
        .is_ok_and(|class| e.is_instance(py, class.as_any()))
}

/// `silt.ClosedError` for an object of a closed database (or a closed snapshot).
pub(crate) fn closed(py: Python<'_>, what: &str) -> PyErr {
    closed_msg(py, format!("{what} is closed"))
}

/// `silt.ClosedError` with the message `msg` (an ended transaction says how it ended).
pub(crate) fn closed_msg(py: Python<'_>, msg: String) -> PyErr {
    match CLOSED.get(py).and_then(|c| c.call1((msg,))) {
        Ok(inst) => PyErr::from_value(inst),
        Err(e) => e,
    }
}

/// `silt.InvalidArgumentError` (a `ValueError`) raised by the binding itself, for an
/// argument the engine never sees (a bad option value, a handle of another database).
pub(crate) fn invalid(py: Python<'_>, msg: impl Into<String>) -> PyErr {
    let msg = msg.into();
    match INVALID.get(py).and_then(|c| c.call1((msg,))) {
        Ok(inst) => PyErr::from_value(inst),
        Err(e) => e,
    }
}

/// `TypeError` for an argument of the wrong type.
pub(crate) fn type_error(msg: impl Into<String>) -> PyErr {
    PyTypeError::new_err(msg.into())
}
