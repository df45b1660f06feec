//! The one error type of `silt`.
//!
//! A user can tell apart what to retry (nothing here is retryable silently), what to repair
//! (`Corruption`), what to reopen (`Poisoned`) and what to fix in the calling code
//! (`InvalidArgument`, `ColumnFamilyNotFound`). Every message says what to do.

use std::io;
use std::path::PathBuf;

/// A `Result` whose error is [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in the engine.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system call failed. `op` names the call, `path` the file when there is one.
    Io {
        /// What the engine was doing: `"read table"`, `"fdatasync"`, ...
        op: &'static str,
        /// The file concerned, when there is one.
        path: Option<PathBuf>,
        /// The error the OS returned.
        source: io::Error,
    },
    /// Bytes on disk are not what the engine wrote: a checksum, length or format check
    /// failed. Nothing is skipped silently; restore the file from a backup or replica.
    Corruption {
        /// The damaged file.
        file: PathBuf,
        /// Byte offset of the damaged block or record inside `file`.
        offset: u64,
        /// What check failed.
        reason: String,
    },
    /// An earlier `fdatasync` (of the log, a table or the manifest) failed, so the kernel may
    /// have dropped dirty pages, or a manifest write or a background flush or compaction
    /// failed: the database accepts no more writes. [`Db::background_error`] says which.
    /// Reopen it to recover its durable state.
    ///
    /// [`Db::background_error`]: crate::Db::background_error
    Poisoned,
    /// The caller passed something the engine cannot take (a key over 64 KiB, a value over
    /// the limit, a bad option). Nothing was written.
    InvalidArgument(String),
    /// No column family has this name (it was never created, or it was dropped).
    ColumnFamilyNotFound(String),
    /// The database was closed.
    Closed,
    /// The disk (or the user's quota) is full. Nothing of the failed call was applied, and
    /// the database is not poisoned: flushes and compactions that failed for want of space
    /// are retried in the background, and writes succeed again once space frees, without a
    /// reopen. Free space, then retry.
    NoSpace {
        /// What the engine was doing: `"write table"`, `"write manifest"`, ...
        op: &'static str,
        /// The file concerned, when there is one.
        path: Option<PathBuf>,
        /// The error the OS returned (`ENOSPC` or `EDQUOT`).
        source: io::Error,
    },
    /// Another handle holds the database: another process, or another `Db` of this
    /// process that is still open. Close that one first; two handles on one directory would
    /// delete each other's files.
    Locked {
        /// The lock file, `LOCK` in the database directory.
        path: PathBuf,
        /// The process id of the holder, as it wrote it into the lock file (`None` if it
        /// could not be read).
        holder: Option<u32>,
    },
    /// A transaction could not commit because another write got there first (optimistic
    /// validation at commit, or a pessimistic lock whose key changed after the
    /// transaction's snapshot). Nothing of the transaction was written. **Retryable**: run
    /// the transaction again from the start (`Db::transact` does).
    Conflict {
        /// The column family of the key (its name).
        cf: String,
        /// The first key found in conflict (for a phantom: a key that appeared in a scanned
        /// range).
        key: Vec<u8>,
        /// Which check failed.
        kind: ConflictKind,
    },
    /// A pessimistic transaction waited `lock_timeout` for a lock another transaction
    /// holds. Nothing was written; the transaction is still open and holds its other locks.
    /// **Retryable**: retry the operation, or roll back and run the transaction again.
    LockTimeout {
        /// The column family of the key (its name).
        cf: String,
        /// The key whose lock was not granted (the start of the range, for a range lock).
        key: Vec<u8>,
        /// How long it waited, in milliseconds.
        waited_ms: u64,
    },
    /// Granting this pessimistic transaction's lock request would close a cycle of
    /// transactions waiting for each other; this transaction was chosen as the victim and
    /// must roll back. **Retryable**: roll back, then run it again (`Db::transact` does).
    Deadlock {
        /// The column family of the key (its name).
        cf: String,
        /// The key whose lock request closed the cycle.
        key: Vec<u8>,
    },
    /// A transaction buffered more than its `max_bytes` (`TxnOptions::max_bytes`). Nothing
    /// was written and the write that went over was not buffered. **Not retryable** as is:
    /// split the work or raise the limit.
    TransactionTooLarge {
        /// What the transaction would have held, in bytes.
        bytes: u64,
        /// Its limit.
        limit: u64,
    },
    /// The handle was opened read-only ([`crate::DbBuilder::read_only`]): it takes no
    /// write, flush, compaction or column-family change. Open the database without
    /// `read_only` (no other handle may hold it) to change it.
    ReadOnly,
}

/// Which check a transaction failed at commit ([`Error::Conflict`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConflictKind {
    /// A key this transaction writes (or locked with `get_for_update`) was written by
    /// another transaction or batch after this one's snapshot.
    WriteWrite,
    /// A key this transaction read was written after it read it (`RepeatableRead`,
    /// `Serializable`).
    ReadValidation,
    /// A key appeared in, changed in, or left a range this transaction scanned
    /// (`Serializable`).
    Phantom,
}

impl std::fmt::Display for ConflictKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ConflictKind::WriteWrite => "write-write conflict",
            ConflictKind::ReadValidation => "a key it read changed",
            ConflictKind::Phantom => "a scanned range changed (phantom)",
        })
    }
}

impl Error {
    /// An OS error of `op`: `NoSpace` if the disk is full and `op` is not a sync (a sync
    /// that fails for any reason may have lost written pages: that is `Io`, and poisons),
    /// else `Io`.
    pub(crate) fn io(op: &'static str, path: Option<PathBuf>, source: io::Error) -> Self {
        if is_no_space(&source) && !op.contains("sync") {
            return Error::NoSpace { op, path, source };
        }
        Error::Io { op, path, source }
    }

    /// Whether this is [`Error::NoSpace`]: the call can be retried once space frees.
    pub fn is_no_space(&self) -> bool {
        matches!(self, Error::NoSpace { .. })
    }

    /// Whether running the same transaction again may succeed: `Conflict`, `LockTimeout`
    /// and `Deadlock` (what [`crate::Db::transact`] retries). Nothing else is: `NoSpace`
    /// needs space freed first, the rest need the caller or the operator.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::Conflict { .. } | Error::LockTimeout { .. } | Error::Deadlock { .. }
        )
    }

    pub(crate) fn corruption(
        file: impl Into<PathBuf>,
        offset: u64,
        reason: impl Into<String>,
    ) -> Self {
        Error::Corruption {
            file: file.into(),
            offset,
            reason: reason.into(),
        }
    }

    pub(crate) fn invalid(msg: impl Into<String>) -> Self {
        Error::InvalidArgument(msg.into())
    }

    /// A copy of this error with the same kind and fields, for an error that must be
    /// reported more than once (the failure that poisoned the database is returned by
    /// `close` and kept for [`crate::Db::background_error`]). `io::Error` is not `Clone`:
    /// the copy keeps its OS error code, or else its kind and message.
    pub(crate) fn duplicate(&self) -> Error {
        fn io_copy(e: &io::Error) -> io::Error {
            match e.raw_os_error() {
                Some(code) => io::Error::from_raw_os_error(code),
                None => io::Error::new(e.kind(), e.to_string()),
            }
        }
        match self {
            Error::Io { op, path, source } => Error::Io {
                op,
                path: path.clone(),
                source: io_copy(source),
            },
            Error::NoSpace { op, path, source } => Error::NoSpace {
                op,
                path: path.clone(),
                source: io_copy(source),
            },
            Error::Corruption {
                file,
                offset,
                reason,
            } => Error::Corruption {
                file: file.clone(),
                offset: *offset,
                reason: reason.clone(),
            },
            Error::Poisoned => Error::Poisoned,
            Error::InvalidArgument(m) => Error::InvalidArgument(m.clone()),
            Error::ColumnFamilyNotFound(n) => Error::ColumnFamilyNotFound(n.clone()),
            Error::Closed => Error::Closed,
            Error::ReadOnly => Error::ReadOnly,
            Error::Locked { path, holder } => Error::Locked {
                path: path.clone(),
                holder: *holder,
            },
            Error::Conflict { cf, key, kind } => Error::Conflict {
                cf: cf.clone(),
                key: key.clone(),
                kind: *kind,
            },
            Error::LockTimeout { cf, key, waited_ms } => Error::LockTimeout {
                cf: cf.clone(),
                key: key.clone(),
                waited_ms: *waited_ms,
            },
            Error::Deadlock { cf, key } => Error::Deadlock {
                cf: cf.clone(),
                key: key.clone(),
            },
            Error::TransactionTooLarge { bytes, limit } => Error::TransactionTooLarge {
                bytes: *bytes,
                limit: *limit,
            },
        }
    }
}

/// `ENOSPC` or `EDQUOT`.
pub(crate) fn is_no_space(e: &io::Error) -> bool {
    const EDQUOT: i32 = 122;
    e.kind() == io::ErrorKind::StorageFull || e.raw_os_error() == Some(EDQUOT)
}

impl From<silt_wal::Error> for Error {
    fn from(e: silt_wal::Error) -> Self {
        match e {
            silt_wal::Error::Io { op, path, source } => Error::io(op, path, source),
            silt_wal::Error::Corruption {
                file,
                offset,
                reason,
            } => Error::Corruption {
                file,
                offset,
                reason,
            },
            silt_wal::Error::Poisoned => Error::Poisoned,
            silt_wal::Error::InvalidArgument(m) => Error::InvalidArgument(m),
            silt_wal::Error::Closed => Error::Closed,
            other => Error::InvalidArgument(other.to_string()),
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
                "corruption in {} at offset {offset}: {reason}; restore the database from a \
                 backup or replica",
                file.display()
            ),
            Error::Poisoned => write!(
                f,
                "the database is poisoned by an earlier failed log write or fdatasync, \
                 manifest write or background job, and accepts no writes (its cause: \
                 Db::background_error); reopen it to recover its durable state"
            ),
            Error::InvalidArgument(m) => write!(f, "invalid argument: {m}"),
            Error::ColumnFamilyNotFound(name) => write!(
                f,
                "no column family named {name:?}; create it with Db::create_cf first"
            ),
            Error::Closed => write!(f, "the database is closed"),
            Error::ReadOnly => write!(
                f,
                "the database was opened read-only: open it without read_only (while no other \
                 handle holds it) to change it"
            ),
            Error::NoSpace { op, path, source } => {
                match path {
                    Some(p) => write!(f, "{op} on {} failed: {source}", p.display())?,
                    None => write!(f, "{op} failed: {source}")?,
                }
                write!(
                    f,
                    "; nothing of this call was applied: free space and retry (the database \
                     recovers by itself)"
                )
            }
            Error::Locked { path, holder } => {
                write!(f, "the database is in use: {} is locked", path.display())?;
                match holder {
                    Some(pid) if *pid == std::process::id() => write!(
                        f,
                        " by this process (pid {pid}): close the other handle first"
                    ),
                    Some(pid) => write!(f, " by process {pid}"),
                    None => write!(f, " by another handle"),
                }
            }
            Error::Conflict { cf, key, kind } => write!(
                f,
                "transaction conflict ({kind}) on key {} in column family {cf:?}; nothing was \
                 written: run the transaction again",
                show_key(key)
            ),
            Error::LockTimeout { cf, key, waited_ms } => write!(
                f,
                "lock wait timeout after {waited_ms} ms on key {} in column family {cf:?}; \
                 retry, or roll back and run the transaction again",
                show_key(key)
            ),
            Error::Deadlock { cf, key } => write!(
                f,
                "deadlock: locking key {} in column family {cf:?} would close a cycle of \
                 waiting transactions; this one was chosen as the victim: roll it back and \
                 run it again",
                show_key(key)
            ),
            Error::TransactionTooLarge { bytes, limit } => write!(
                f,
                "transaction too large: {bytes} bytes buffered, over its limit of {limit} \
                 bytes (TxnOptions::max_bytes); split the work or raise the limit"
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } | Error::NoSpace { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// A key for an error message: as text if it is printable ASCII, else in hex, cut at 64
/// bytes.
fn show_key(key: &[u8]) -> String {
    let cut = &key[..key.len().min(64)];
    let more = if key.len() > 64 { "..." } else { "" };
    if cut.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
        format!("{:?}{more}", String::from_utf8_lossy(cut))
    } else {
        let hex: String = cut.iter().map(|b| format!("{b:02x}")).collect();
        format!("0x{hex}{more}")
    }
}
