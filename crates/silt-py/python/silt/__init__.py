"""silt: an embedded, durable key-value store (an LSM tree written in Rust).

    import silt

    with silt.Db("/tmp/demo", sync="full") as db:
        db[b"user/1"] = b"ada"
        users = db.create_cf("users")
        with db.batch() as b:              # atomic across column families
            b.put(b"u1", b"ada", cf=users)
            b[b"count"] = b"1"
        with db.snapshot() as snap:        # a consistent view
            del db[b"user/1"]
            assert snap[b"user/1"] == b"ada"
        for key, value in db.prefix(b"user/"):
            print(key, value)
        with db.transaction() as txn:      # commits at the end, rolls back on error
            txn[b"count"] = b"%d" % (int(txn[b"count"]) + 1)
        db.transact(lambda txn: txn.put(b"k", b"v"))  # retried on conflicts

Tools: ``silt.Db(path, read_only=True)`` reads beside a writer in another process,
``db.checkpoint(dir)`` makes a copy that opens as a database, :class:`BackupStore` keeps
incremental, verified backups, and :func:`repair` rebuilds a lost manifest.

Keys and values are bytes. The GIL is released around every call that may wait for the
disk or a lock, so threads write in parallel and durable writes share fdatasyncs. Every
error the engine reports is a :class:`SiltError`; the ones worth running a transaction
again for are :class:`RetryableError`; see the classes below.
"""

from ._errors import (
    ClosedError,
    ColumnFamilyNotFoundError,
    ConflictError,
    CorruptionError,
    DeadlockError,
    InvalidArgumentError,
    IoError,
    LockedError,
    LockTimeoutError,
    NoSpaceError,
    PoisonedError,
    ReadOnlyError,
    RetryableError,
    SiltError,
    TransactionTooLargeError,
)
from ._silt import (
    DEFAULT_CF,
    MAX_KEY_BYTES,
    MAX_VALUE_BYTES,
    BackupStore,
    ColumnFamily,
    Db,
    Iter,
    Snapshot,
    Transaction,
    WriteBatch,
    repair,
)

__version__ = "0.1.0"

__all__ = [
    "Db",
    "ColumnFamily",
    "WriteBatch",
    "Snapshot",
    "Transaction",
    "Iter",
    "BackupStore",
    "repair",
    "SiltError",
    "IoError",
    "NoSpaceError",
    "CorruptionError",
    "PoisonedError",
    "InvalidArgumentError",
    "ColumnFamilyNotFoundError",
    "ClosedError",
    "LockedError",
    "ReadOnlyError",
    "RetryableError",
    "ConflictError",
    "LockTimeoutError",
    "DeadlockError",
    "TransactionTooLargeError",
    "MAX_KEY_BYTES",
    "MAX_VALUE_BYTES",
    "DEFAULT_CF",
]
