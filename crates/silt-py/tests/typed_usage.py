"""Code a user would write, type-checked against the stubs by test_stubs.py (mypy
--strict): the stubs must accept it and infer bytes where silt returns bytes. Never run."""

from typing import List, Optional, Tuple

import silt


def use(path: str) -> None:
    with silt.Db(path, sync="full", memtable_bytes=1 << 20, str_keys=True) as db:
        db[b"k"] = b"v"
        db["k"] = bytearray(b"v")
        v: bytes = db[b"k"]
        maybe: Optional[bytes] = db.get(b"k")
        either: bytes | int = db.get(b"k", 0)
        users = db.create_cf("users")
        users.put(b"u", b"1", sync=True)
        with db.batch(sync=True) as b:
            b.put(b"a", b"1", cf=users)
            b.delete(b"b", cf="users")
        with db.snapshot() as snap:
            old: Optional[bytes] = snap.get(b"k", cf=users)
        pairs: List[Tuple[bytes, bytes]] = list(db.range(b"a", b"z", reverse=True))
        keys: List[bytes] = list(db.keys(prefix=b"a"))
        fsyncs: int = db.stats()["wal_fsyncs"]
        try:
            db.cf("missing")
        except silt.ColumnFamilyNotFoundError as e:
            print(e.name)
        except silt.SiltError:
            raise
        print(v, maybe, either, old, pairs, keys, fsyncs)
