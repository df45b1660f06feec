"""Column families: create, drop, list, handles, and `cf=` everywhere."""

import pytest

import silt
from conftest import open_db


def test_create_list_drop(path):
    with open_db(path) as db:
        assert db.list_cfs() == ["default"]
        users = db.create_cf("users")
        assert users.name == "users"
        assert db.create_cf("users").name == "users"  # exists: returned
        db.create_cf("logs")
        assert db.list_cfs() == ["default", "users", "logs"]
        users[b"u1"] = b"ada"
    with open_db(path) as db:
        assert db.list_cfs() == ["default", "users", "logs"]
        assert db.cf("users")[b"u1"] == b"ada"
        db.drop_cf("logs")
        db.drop_cf(db.cf("users"))
        assert db.list_cfs() == ["default"]
        with pytest.raises(silt.InvalidArgumentError):
            db.drop_cf("default")
        with pytest.raises(silt.ColumnFamilyNotFoundError):
            db.drop_cf("logs")
        with pytest.raises(silt.InvalidArgumentError):
            db.create_cf("")
    with open_db(path) as db:
        assert db.list_cfs() == ["default"]


def test_families_are_separate_key_spaces(db):
    a, b = db.create_cf("a"), db.create_cf("b")
    db[b"k"] = b"default"
    a[b"k"] = b"a"
    b.put(b"k", b"b", sync=True)
    assert (db[b"k"], a[b"k"], b[b"k"]) == (b"default", b"a", b"b")
    assert db.get(b"k", cf="a") == b"a"
    assert db.get(b"k", cf=b) == b"b"
    assert db.get(b"k", cf=None) == b"default"
    db.put(b"k2", b"x", cf="a")
    assert list(a) == [b"k", b"k2"]
    assert list(db.keys(cf="a")) == [b"k", b"k2"]
    assert list(a.items()) == [(b"k", b"a"), (b"k2", b"x")]
    assert list(a.prefix(b"k2")) == [(b"k2", b"x")]
    assert list(a.range(b"k2")) == [(b"k2", b"x")]
    assert list(a.values(reverse=True)) == [b"x", b"a"]
    assert list(a.keys(prefix=b"k")) == [b"k", b"k2"]
    assert a.get(b"zz", b"d") == b"d"
    assert b"k2" in a and b"k2" not in b
    del a[b"k2"]
    a.delete(b"k")
    assert list(a) == []
    assert list(db) == [b"k"]
    assert "a" in repr(a)


def test_dropped_handle_raises(db):
    c = db.create_cf("tmp")
    c[b"k"] = b"v"
    db.drop_cf(c)
    with pytest.raises(silt.ColumnFamilyNotFoundError):
        c[b"k"]
    with pytest.raises(silt.ColumnFamilyNotFoundError):
        c[b"k"] = b"v"
    # Recreated under the same name it is a new, empty family.
    c2 = db.create_cf("tmp")
    assert list(c2) == []


def test_handle_of_another_database(tmp_path):
    with open_db(str(tmp_path / "x")) as x, open_db(str(tmp_path / "y")) as y:
        cx = x.create_cf("c")
        y.create_cf("c")
        with pytest.raises(silt.InvalidArgumentError, match="another database"):
            y.put(b"k", b"v", cf=cx)
        with pytest.raises(silt.InvalidArgumentError):
            y.batch().put(b"k", b"v", cf=cx)


def test_batch_is_atomic_across_families(path):
    with open_db(path, sync="full") as db:
        users = db.create_cf("users")
        with db.batch() as b:
            b.put(b"u1", b"ada", cf=users)
            b.put(b"u2", b"grace", cf="users")
            b[b"count"] = b"2"
        assert list(users.items()) == [(b"u1", b"ada"), (b"u2", b"grace")]
        assert db[b"count"] == b"2"
        # One bad entry fails the whole batch: nothing of it is applied.
        b = db.batch()
        b.put(b"u3", b"x", cf=users)
        b.put(b"k" * (silt.MAX_KEY_BYTES + 1), b"x")
        with pytest.raises(silt.InvalidArgumentError):
            b.write()
        assert b"u3" not in users
        with pytest.raises(silt.ColumnFamilyNotFoundError):
            db.batch().put(b"k", b"v", cf="nope")
