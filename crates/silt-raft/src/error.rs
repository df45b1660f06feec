//! [`Error`]: what can go wrong in silt-raft's storage, and its conversion into openraft's
//! `StorageError` (which makes openraft stop the node: storage errors are never retried
//! silently).

use std::fmt;

use openraft::{AnyError, ErrorSubject, ErrorVerb, StorageError, StorageIOError};

/// An error of the Raft storage.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The Raft log (`silt-wal`) failed.
    Wal(silt_wal::Error),
    /// The state machine's database (`silt`) failed.
    Db(silt::Error),
    /// A file operation outside silt and silt-wal failed (snapshot files).
    Io(std::io::Error),
    /// Bytes on disk are not what was written: a log record, a state-machine key or a
    /// snapshot file failed a check. The message says which and where.
    Corruption(String),
    /// The caller passed something the store cannot take (an append that would leave a
    /// hole in the log, a key too long).
    InvalidArgument(String),
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Wal(e) => write!(f, "raft log: {e}"),
            Error::Db(e) => write!(f, "state machine: {e}"),
            Error::Io(e) => write!(f, "snapshot file: {e}"),
            Error::Corruption(m) => write!(f, "corruption: {m}"),
            Error::InvalidArgument(m) => write!(f, "invalid argument: {m}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Wal(e) => Some(e),
            Error::Db(e) => Some(e),
            Error::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<silt_wal::Error> for Error {
    fn from(e: silt_wal::Error) -> Self {
        Error::Wal(e)
    }
}

impl From<silt::Error> for Error {
    fn from(e: silt::Error) -> Self {
        Error::Db(e)
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(e)
    }
}

impl Error {
    /// This error as openraft's `StorageError`, naming what was being done.
    pub(crate) fn storage(self, subject: ErrorSubject<u64>, verb: ErrorVerb) -> StorageError<u64> {
        StorageIOError::new(subject, verb, AnyError::new(&self)).into()
    }
}

/// Shorthands for the subjects openraft distinguishes.
pub(crate) trait IntoStorage<T> {
    /// Maps the error to openraft's, as a failure on `subject` while doing `verb`.
    fn sto(self, subject: ErrorSubject<u64>, verb: ErrorVerb) -> Result<T, StorageError<u64>>;
}

impl<T, E: Into<Error>> IntoStorage<T> for Result<T, E> {
    fn sto(self, subject: ErrorSubject<u64>, verb: ErrorVerb) -> Result<T, StorageError<u64>> {
        self.map_err(|e| e.into().storage(subject, verb))
    }
}
