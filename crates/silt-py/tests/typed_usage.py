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
        with db.transaction(isolation="serializable", mode="pessimistic", lock_timeout=0.5) as txn:
            got: Optional[bytes] = txn.get_for_update(b"k", cf=users)
            txn[b"k"] = got or b""
            txn.savepoint()
            txn.rollback_to_savepoint()
            own: List[Tuple[bytes, bytes]] = list(txn.items(reverse=True))
            state: str = txn.state

        def incr(t: silt.Transaction) -> int:
            n = int(t.get(b"n", b"0")) + 1
            t.put(b"n", b"%d" % n)
            return n

        count: int = db.transact(incr, max_retries=3)
        try:
            db.transact(incr)
        except silt.ConflictError as c:
            print(c.cf, c.key, c.kind)
        except silt.RetryableError:
            pass
        try:
            db.cf("missing")
        except silt.ColumnFamilyNotFoundError as e:
            print(e.name)
        except silt.SiltError:
            raise
        print(v, maybe, either, old, pairs, keys, fsyncs, own, state, count)
