"""The exceptions of :mod:`silt`, one per variant of the Rust ``silt::Error``.

They are defined in Python (not in the extension) so that they can also derive from the
built-in exception a Python user expects to catch: an ``IoError`` is an ``OSError`` (with
``errno``), an ``InvalidArgumentError`` a ``ValueError``, a
``ColumnFamilyNotFoundError`` a ``LookupError``. The extension (``src/errors.rs``) raises
these classes and fills the attributes each one documents. Every class derives from
:class:`SiltError`, so ``except silt.SiltError`` catches everything the engine raises.
"""

from typing import Optional


class SiltError(Exception):
    """Base class of every error the silt engine raises."""


class IoError(SiltError, OSError):
    """An operating-system call failed (``silt::Error::Io``).

    ``errno`` is the OS error number when the OS gave one; ``op`` names what the engine
    was doing (``"fdatasync"``, ``"read table"``, ...) and ``path`` the file, if any.
    A failed ``fdatasync`` also poisons the database: later writes raise
    :class:`PoisonedError`.
    """

    op: Optional[str] = None
    path: Optional[str] = None


class NoSpaceError(IoError):
    """The disk (or the user's quota) is full (``silt::Error::NoSpace``).

    Nothing of the failed call was applied and the database is not poisoned: free space
    and retry, without reopening.
    """


class CorruptionError(SiltError):
    """Bytes on disk are not what the engine wrote (``silt::Error::Corruption``).

    ``file`` is the damaged file, ``offset`` the byte offset of the damaged block or
    record, ``reason`` the check that failed. Nothing is skipped silently: restore the
    database from a backup or replica.
    """

    file: Optional[str] = None
    offset: Optional[int] = None
    reason: Optional[str] = None


class PoisonedError(SiltError):
    """An earlier ``fdatasync`` failed, so the database accepts no more writes
    (``silt::Error::Poisoned``). Reopen it to recover its durable state;
    :meth:`silt.Db.background_error` says what failed."""


class InvalidArgumentError(SiltError, ValueError):
    """The engine cannot take an argument: a key over 64 KiB, a value over 16 MiB, a bad
    option (``silt::Error::InvalidArgument``). Nothing was written."""


class ColumnFamilyNotFoundError(SiltError, LookupError):
    """No column family has this name: it was never created, or it was dropped
    (``silt::Error::ColumnFamilyNotFound``). ``name`` is the name asked for."""

    name: Optional[str] = None


class ClosedError(SiltError):
    """The database was closed (``silt::Error::Closed``): by :meth:`silt.Db.close`, the
    end of its ``with`` block, or another handle's close. Also raised by a snapshot or an
    iterator of a closed database, and by a closed snapshot."""


class LockedError(SiltError):
    """Another handle holds the database (``silt::Error::Locked``): another process, or
    another :class:`silt.Db` of this process that is still open. Close that one first.
    ``path`` is the lock file, ``holder`` the process id written in it (or ``None``)."""

    path: Optional[str] = None
    holder: Optional[int] = None


class ConflictError(SiltError):
    """A transaction conflicted with a concurrent commit and was not applied.

    Reserved: the engine has no transactions yet. When it does,
    ``with db.transaction() as txn:`` raises this from its commit, and the caller retries
    the transaction.
    """


# Shown as silt.XxxError in tracebacks and reprs: the package is where users import them.
for _cls in (
    SiltError,
    IoError,
    NoSpaceError,
    CorruptionError,
    PoisonedError,
    InvalidArgumentError,
    ColumnFamilyNotFoundError,
    ClosedError,
    LockedError,
    ConflictError,
):
    _cls.__module__ = "silt"
del _cls
