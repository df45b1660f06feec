"""range / prefix / keys / values / items, forward and reverse, against a sorted model,
over memtables and tables; consistency and lifetime of iterators."""

import gc
import random

import pytest

import silt
from conftest import open_db


def fill(db, n, seed=7, flush_every=None):
    rng = random.Random(seed)
    model = {}
    for i in range(n):
        k = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 6)))
        v = b"v%d" % i
        db[k] = v
        model[k] = v
        if flush_every and i % flush_every == flush_every - 1:
            db.flush()
    for k in rng.sample(sorted(model), n // 10):
        del db[k]
        del model[k]
    return dict(sorted(model.items()))


@pytest.mark.parametrize("flush_every", [None, 700])
def test_against_model(db, flush_every):
    model = fill(db, 3000, flush_every=flush_every)
    keys = list(model)
    assert list(db) == keys
    assert list(db.keys()) == keys
    assert list(db.values()) == list(model.values())
    assert list(db.items()) == list(model.items())
    assert list(db.range()) == list(model.items())
    assert list(db.items(reverse=True)) == list(reversed(model.items()))
    rng = random.Random(1)
    for _ in range(50):
        a, b = sorted(rng.sample(keys, 2))
        want = [(k, v) for k, v in model.items() if a <= k < b]
        assert list(db.range(a, b)) == want
        assert list(db.range(a, b, reverse=True)) == want[::-1]
        assert list(db.keys(start=a)) == [k for k in keys if k >= a]
        assert list(db.keys(end=b)) == [k for k in keys if k < b]
        p = a[:1]
        wantp = [(k, v) for k, v in model.items() if k.startswith(p)]
        assert list(db.prefix(p)) == wantp
        assert list(db.prefix(p, reverse=True)) == wantp[::-1]
        assert list(db.values(prefix=p)) == [v for _, v in wantp]


def test_bounds_inclusive_exclusive(db):
    for k in (b"a", b"b", b"c", b"d"):
        db[k] = k
    assert list(db.keys(b"b", b"d")) == [b"b", b"c"]
    assert list(db.keys(b"b", b"b")) == []
    assert list(db.keys(b"d", b"a")) == []
    assert list(db.keys(None, b"c", reverse=True)) == [b"b", b"a"]
    assert list(db.keys(b"bb")) == [b"c", b"d"]


def test_prefix_edges(db):
    for k in (b"\xff", b"\xff\xff", b"\xff\x00", b"\xfe\xff", b"a", b"ab", b"b"):
        db[k] = b""
    assert list(db.keys(prefix=b"\xff")) == [b"\xff", b"\xff\x00", b"\xff\xff"]
    assert list(db.keys(prefix=b"a")) == [b"a", b"ab"]
    assert list(db.keys(prefix=b"")) == sorted([b"\xff", b"\xff\xff", b"\xff\x00", b"\xfe\xff", b"a", b"ab", b"b"])
    with pytest.raises(silt.InvalidArgumentError):
        db.keys(b"a", prefix=b"a")


def test_iterator_is_a_consistent_view(db):
    for i in range(100):
        db[b"%03d" % i] = b"old"
    it = db.items()
    first = next(it)
    for i in range(100):
        db[b"%03d" % i] = b"new"
    db[b"999"] = b"added"
    del db[b"050"]
    rest = list(it)
    assert first == (b"000", b"old")
    assert len(rest) == 99 and all(v == b"old" for _, v in rest)
    assert b"050" not in db


def test_iterator_keeps_db_alive(path):
    with open_db(path) as db:
        for i in range(2000):
            db[b"%05d" % i] = b"v"
    # The Db object is unreachable once the expression is evaluated; the iterator keeps
    # the database open and reads all of it.
    it = open_db(path).keys()
    gc.collect()
    assert sum(1 for _ in it) == 2000
    del it
    gc.collect()
    # The last reference gone, the database was closed: it opens again.
    with open_db(path) as db:
        assert db[b"00001"] == b"v"


def test_iterator_close_and_closed_db(path):
    db = open_db(path)
    for i in range(50):
        db[b"%02d" % i] = b"v"
    it = db.keys()
    assert next(it) == b"00"
    it.close()
    assert list(it) == []
    it2 = db.keys()
    assert next(it2) == b"00"  # a chunk is buffered now
    db.close()
    with pytest.raises(silt.ClosedError):
        next(it2)


def test_iterator_error_is_raised_where_met(db):
    # Iterating a dropped column family fails on the first step, not at creation.
    cf = db.create_cf("gone")
    cf[b"k"] = b"v"
    db.drop_cf("gone")
    with pytest.raises(silt.ColumnFamilyNotFoundError):
        list(cf.items())


def test_long_scan_crosses_chunks_and_memory(db):
    # Values large enough that the 1 MiB chunk cap, not the pair count, ends chunks.
    v = b"x" * 4000
    for i in range(1200):
        db[b"%05d" % i] = v
    n = 0
    for k, val in db.items():
        assert val == v
        n += 1
    assert n == 1200
    assert sum(1 for _ in db.items(reverse=True)) == 1200


def test_iterators_are_independent(db):
    for i in range(30):
        db[b"%02d" % i] = b"v"
    a, b = db.keys(), db.keys(reverse=True)
    assert [next(a), next(b), next(a), next(b)] == [b"00", b"29", b"01", b"28"]
    assert iter(a) is a
    assert "keys" in repr(a)
