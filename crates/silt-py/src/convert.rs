//! Keys and values across the boundary: bytes in, bytes out.
//!
//! Invariants:
//! * a key or value is `bytes`, `bytearray` or `memoryview`; a `str` key is accepted, as
//!   its UTF-8 encoding, only when the database was opened with `str_keys=True` (a `str`
//!   value never is: values are bytes, and silently encoding them would hide a bug);
//! * `bytes` is borrowed, never copied: it is immutable, and the caller's reference keeps
//!   it alive for the whole call, also while the GIL is released. `bytearray` and
//!   `memoryview` are copied first, because another thread could change them while the
//!   GIL is released;
//! * what the engine returns is copied once, into a new `bytes`.

use std::borrow::Cow;
use std::ops::Bound as RangeBound;

use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyMemoryView, PyString};

use crate::errors;

/// A key or value taken from Python: borrowed from a `bytes`, or an owned copy.
pub(crate) type Bytes<'a> = Cow<'a, [u8]>;

/// The bytes of `obj` as a key; `str_keys` allows `str` (as UTF-8).
pub(crate) fn key<'a>(obj: &'a Bound<'_, PyAny>, str_keys: bool) -> PyResult<Bytes<'a>> {
    if let Ok(s) = obj.cast::<PyString>() {
        if str_keys {
            return Ok(Cow::Owned(s.to_cow()?.into_owned().into_bytes()));
        }
        return Err(errors::type_error(
            "a key must be bytes, bytearray or memoryview, not str: encode it, or open the \
             database with silt.Db(path, str_keys=True) to have str keys encoded as UTF-8",
        ));
    }
    bytes_like(obj, "key")
}

/// The bytes of `obj` as a value.
pub(crate) fn value<'a>(obj: &'a Bound<'_, PyAny>) -> PyResult<Bytes<'a>> {
    if obj.is_instance_of::<PyString>() {
        return Err(errors::type_error(
            "a value must be bytes, bytearray or memoryview, not str: encode it first \
             (values are bytes in and bytes out)",
        ));
    }
    bytes_like(obj, "value")
}

fn bytes_like<'a>(obj: &'a Bound<'_, PyAny>, what: &str) -> PyResult<Bytes<'a>> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(Cow::Borrowed(b.as_bytes()));
    }
    if let Ok(b) = obj.cast::<PyByteArray>() {
        return Ok(Cow::Owned(b.to_vec()));
    }
    if obj.is_instance_of::<PyMemoryView>() {
        // The buffer protocol is not in the stable ABI before 3.11: copy through tobytes().
        let b = obj.call_method0("tobytes")?;
        let b = b.cast::<PyBytes>()?;
        return Ok(Cow::Owned(b.as_bytes().to_vec()));
    }
    Err(errors::type_error(format!(
        "a {what} must be bytes, bytearray or memoryview, not {}",
        obj.get_type().name()?
    )))
}

/// An optional range end (`None` is unbounded), as a key.
pub(crate) fn bound(
    obj: Option<&Bound<'_, PyAny>>,
    str_keys: bool,
    inclusive: bool,
) -> PyResult<RangeBound<Vec<u8>>> {
    Ok(match obj {
        None => RangeBound::Unbounded,
        Some(o) if o.is_none() => RangeBound::Unbounded,
        Some(o) => {
            let k = key(o, str_keys)?.into_owned();
            if inclusive {
                RangeBound::Included(k)
            } else {
                RangeBound::Excluded(k)
            }
        }
    })
}

/// A new `bytes` holding `b`.
pub(crate) fn out<'py>(py: Python<'py>, b: &[u8]) -> Bound<'py, PyBytes> {
    PyBytes::new(py, b)
}
