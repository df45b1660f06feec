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

Keys and values are bytes. The GIL is released around every call that may wait for the
disk or a lock, so threads write in parallel and durable writes share fdatasyncs. Every
error the engine reports is a :class:`SiltError`; see the classes below.
"""

from ._errors import (
    ClosedError,
    ColumnFamilyNotFoundError,
    ConflictError,
    CorruptionError,
    InvalidArgumentError,
    IoError,
    LockedError,
    NoSpaceError,
    PoisonedError,
    SiltError,
)
from ._silt import (
    DEFAULT_CF,
    MAX_KEY_BYTES,
    MAX_VALUE_BYTES,
    ColumnFamily,
    Db,
    Iter,
    Snapshot,
    WriteBatch,
)

__version__ = "0.1.0"

__all__ = [
    "Db",
    "ColumnFamily",
    "WriteBatch",
    "Snapshot",
    "Iter",
    "SiltError",
    "IoError",
    "NoSpaceError",
    "CorruptionError",
    "PoisonedError",
    "InvalidArgumentError",
    "ColumnFamilyNotFoundError",
    "ClosedError",
    "LockedError",
    "ConflictError",
    "MAX_KEY_BYTES",
    "MAX_VALUE_BYTES",
    "DEFAULT_CF",
]
