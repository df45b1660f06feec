"""WriteBatch and Snapshot."""

import pytest

import silt
from conftest import open_db


def test_batch_context_manager_commits(db):
    with db.batch() as b:
        b[b"a"] = b"1"
        b.put(b"b", b"2")
        b.delete(b"a")
        del b[b"zz"]
        assert len(b) == 4
        assert b"b" not in db  # nothing before the block ends
    assert len(b) == 0
    assert list(db.items()) == [(b"b", b"2")]  # a later write of a key wins


def test_batch_discarded_on_exception(db):
    with pytest.raises(RuntimeError):
        with db.batch() as b:
            b[b"a"] = b"1"
            raise RuntimeError
    assert b"a" not in db
    assert len(b) == 0


def test_batch_explicit_write_clear_and_reuse(db):
    b = db.batch(sync=True)
    b[b"a"] = b"1"
    b.clear()
    assert len(b) == 0
    b[b"b"] = b"2"
    db.write(b)
    assert len(b) == 0 and db[b"b"] == b"2"
    b[b"c"] = b"3"
    b.write(sync=False)
    assert db[b"c"] == b"3"
    b.write()  # an empty batch writes nothing, without error
    assert "WriteBatch" in repr(b)


def test_failed_batch_keeps_its_writes(db):
    b = db.batch()
    b[b"ok"] = b"1"
    b[b"k" * (silt.MAX_KEY_BYTES + 1)] = b"x"
    with pytest.raises(silt.InvalidArgumentError):
        db.write(b)
    assert len(b) == 2
    assert b"ok" not in db


def test_batch_of_another_database(tmp_path):
    with open_db(str(tmp_path / "x")) as x, open_db(str(tmp_path / "y")) as y:
        b = x.batch()
        b[b"k"] = b"v"
        with pytest.raises(silt.InvalidArgumentError):
            y.write(b)
        assert len(b) == 1
        x.write(b)
        assert x[b"k"] == b"v" and b"k" not in y


def test_batch_durable_counts_one_fsync(path):
    with open_db(path, sync="none") as db:
        before = db.stats()["wal_fsyncs"]
        with db.batch(sync=True) as b:
            for i in range(100):
                b[b"%03d" % i] = b"v"
        after = db.stats()["wal_fsyncs"]
        assert after - before == 1


def test_snapshot_isolation(db):
    db[b"a"] = b"1"
    db[b"b"] = b"1"
    with db.snapshot() as snap:
        db[b"a"] = b"2"
        del db[b"b"]
        db[b"c"] = b"new"
        db.flush()
        assert snap[b"a"] == b"1"
        assert snap.get(b"b") == b"1"
        assert b"c" not in snap
        with pytest.raises(KeyError):
            snap[b"c"]
        assert snap.get(b"c", b"d") == b"d"
        assert list(snap) == [b"a", b"b"]
        assert list(snap.items()) == [(b"a", b"1"), (b"b", b"1")]
        assert list(snap.range(b"b")) == [(b"b", b"1")]
        assert list(snap.keys(reverse=True)) == [b"b", b"a"]
        assert list(snap.prefix(b"a")) == [(b"a", b"1")]
        assert list(snap.values(prefix=b"b")) == [b"1"]
        assert list(db.items()) == [(b"a", b"2"), (b"c", b"new")]
        s2 = db.snapshot()
        assert s2.seqno > snap.seqno
        s2.close()
    assert snap.closed
    with pytest.raises(silt.ClosedError):
        snap[b"a"]
    with pytest.raises(silt.ClosedError):
        snap.seqno
    snap.close()  # twice: nothing


def test_snapshot_of_column_families(db):
    c = db.create_cf("c")
    c[b"k"] = b"old"
    snap = db.snapshot()
    c[b"k"] = b"new"
    assert snap.get(b"k", cf=c) == b"old"
    assert snap.get(b"k", cf="c") == b"old"
    assert list(snap.items(cf="c")) == [(b"k", b"old")]
    snap.close()


def test_snapshot_iterator_outlives_unnamed_snapshot(db):
    for i in range(100):
        db[b"%03d" % i] = b"old"
    it = db.snapshot().values()  # the Snapshot object is gone at once
    for i in range(100):
        db[b"%03d" % i] = b"new"
    db.flush()
    db.compact_range()
    assert list(it) == [b"old"] * 100


def test_closed_snapshot_stops_its_iterators(db):
    db[b"a"] = b"1"
    snap = db.snapshot()
    it = snap.keys()
    snap.close()
    with pytest.raises(silt.ClosedError):
        next(it)
