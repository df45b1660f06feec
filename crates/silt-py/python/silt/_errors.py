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
    iterator of a closed database, by a closed snapshot, and by a transaction that has
    ended (committed, rolled back, or failed to commit) and its iterators."""


class LockedError(SiltError):
    """Another handle holds the database (``silt::Error::Locked``): another process, or
    another :class:`silt.Db` of this process that is still open. Close that one first.
    ``path`` is the lock file, ``holder`` the process id written in it (or ``None``)."""

    path: Optional[str] = None
    holder: Optional[int] = None


class ReadOnlyError(SiltError):
    """The database was opened read-only (``silt.Db(path, read_only=True)``), so it takes
    no write, flush, compaction, column-family change or transaction commit with writes
    (``silt::Error::ReadOnly``). Open it without ``read_only`` (while no other handle
    holds it) to change it."""


class RetryableError(SiltError):
    """Base class of the errors after which running the same transaction again may
    succeed: :class:`ConflictError`, :class:`LockTimeoutError` and
    :class:`DeadlockError` (``silt::Error::is_retryable``). Nothing of the transaction
    was written. :meth:`silt.Db.transact` retries on exactly these::

        try:
            with db.transaction() as txn:
                ...
        except silt.RetryableError:
            ...  # run the transaction again
    """


class ConflictError(RetryableError):
    """A transaction could not commit because another write got there first
    (``silt::Error::Conflict``): optimistic validation at commit, or a pessimistic lock
    on a key that changed after the transaction's snapshot. Nothing of the transaction
    was written, and it has ended (rolled back): run it again
    (:meth:`silt.Db.transact` does).

    ``cf`` is the column family's name, ``key`` (bytes) the first key found in conflict
    (for a phantom, a key that appeared in a scanned range), ``kind`` which check
    failed: ``"write_write"`` (a key it wrote, or read with ``get_for_update``, was
    written by someone else after its snapshot), ``"read_validation"`` (a key it read
    changed before it committed; ``repeatable_read`` and ``serializable``) or
    ``"phantom"`` (a range it scanned changed; ``serializable``).
    """

    cf: Optional[str] = None
    key: Optional[bytes] = None
    kind: Optional[str] = None


class LockTimeoutError(RetryableError):
    """A pessimistic transaction waited ``lock_timeout`` seconds for a lock another
    transaction holds (``silt::Error::LockTimeout``). Nothing was written and the
    transaction is still open, holding its other locks: retry the call, or roll back
    and run the transaction again. ``cf`` and ``key`` name the key (the start of the
    range, for a range lock), ``waited_ms`` how long it waited."""

    cf: Optional[str] = None
    key: Optional[bytes] = None
    waited_ms: Optional[int] = None


class DeadlockError(RetryableError):
    """Granting this pessimistic transaction's lock would close a cycle of transactions
    waiting for each other (``silt::Error::Deadlock``); this one was chosen as the
    victim. Roll it back (the end of its ``with`` block does) and run it again; its
    locks block the others until then. ``cf`` and ``key`` name the key it asked for."""

    cf: Optional[str] = None
    key: Optional[bytes] = None


class TransactionTooLargeError(SiltError):
    """A transaction would buffer more than its ``max_bytes``
    (``silt::Error::TransactionTooLarge``): keys, values and 64 bytes per key. The write
    that went over was not buffered; the transaction is still open. Not retryable as
    is: split the work, or raise ``max_bytes``. ``bytes`` is what it would have held,
    ``limit`` its limit."""

    bytes: Optional[int] = None
    limit: Optional[int] = None


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
    ReadOnlyError,
    RetryableError,
    ConflictError,
    LockTimeoutError,
    DeadlockError,
    TransactionTooLargeError,
):
    _cls.__module__ = "silt"
del _cls
