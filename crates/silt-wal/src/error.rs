//! The one error type of `silt-wal`.
//!
//! Every failure a caller can act on has its own variant, and each message says what to do.

use std::io;
use std::path::PathBuf;

/// A `Result` whose error is [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in the log.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system call failed. `op` names the call, `path` the file when there is one.
    Io {
        /// What the log was doing: `"fdatasync"`, `"pwrite"`, `"open"`, ...
        op: &'static str,
        /// The file concerned, when there is one.
        path: Option<PathBuf>,
        /// The error the OS returned.
        source: io::Error,
    },
    /// Bytes on disk that the log wrote are not what it wrote, at a place where it can prove
    /// that acknowledged data was lost (for example a bad record below the durable watermark).
    /// Recovery stops here instead of skipping it: restore the file from a replica or backup.
    Corruption {
        /// The file holding the bad bytes.
        file: PathBuf,
        /// Byte offset of the first bad byte (or bad record) inside `file`.
        offset: u64,
        /// What check failed.
        reason: String,
    },
    /// An earlier `fdatasync` failed, so the kernel may have dropped dirty pages: no more
    /// writes are accepted. Reopen the log to recover its durable prefix.
    Poisoned,
    /// The caller passed something the log cannot take (a payload over the size limit, a
    /// bad option). Nothing was written.
    InvalidArgument(String),
    /// The log was closed.
    Closed,
}

impl Error {
    pub(crate) fn io(op: &'static str, path: Option<PathBuf>, source: io::Error) -> Self {
        Error::Io { op, path, source }
    }

    pub(crate) fn corruption(file: PathBuf, offset: u64, reason: impl Into<String>) -> Self {
        Error::Corruption {
            file,
            offset,
            reason: reason.into(),
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Io { op, path, source } => match path {
                Some(p) => write!(f, "{op} on {} failed: {source}", p.display()),
                None => write!(f, "{op} failed: {source}"),
            },
            Error::Corruption {
                file,
                offset,
                reason,
            } => write!(
                f,
                "corruption in {} at offset {offset}: {reason}; acknowledged data was lost, \
                 restore this log from a backup or replica",
                file.display()
            ),
            Error::Poisoned => write!(
                f,
                "the log is poisoned by an earlier failed write, fdatasync or segment \
                 preparation (Wal::poison_cause names a background one) and accepts no \
                 writes; reopen it to recover the durable prefix"
            ),
            Error::InvalidArgument(m) => write!(f, "invalid argument: {m}"),
            Error::Closed => write!(f, "the log is closed"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
