"""Typed exceptions: one class per `silt::Error` variant, with its fields, under
`silt.SiltError`, and the built-in class a Python user would catch."""

import errno
import os
import subprocess
import sys
import textwrap

import pytest

import silt
from conftest import open_db


def test_hierarchy():
    for cls in (
        silt.IoError,
        silt.NoSpaceError,
        silt.CorruptionError,
        silt.PoisonedError,
        silt.InvalidArgumentError,
        silt.ColumnFamilyNotFoundError,
        silt.ClosedError,
        silt.LockedError,
        silt.ReadOnlyError,
        silt.RetryableError,
        silt.ConflictError,
        silt.LockTimeoutError,
        silt.DeadlockError,
        silt.TransactionTooLargeError,
    ):
        assert issubclass(cls, silt.SiltError), cls
        assert cls.__doc__, cls
        assert cls.__module__ == "silt", cls
    # What Db.transact retries, as silt::Error::is_retryable says.
    retryable = {c for c in vars(silt).values() if isinstance(c, type) and issubclass(c, silt.RetryableError)}
    assert retryable == {silt.RetryableError, silt.ConflictError, silt.LockTimeoutError, silt.DeadlockError}
    assert issubclass(silt.IoError, OSError)
    assert issubclass(silt.NoSpaceError, silt.IoError)
    assert issubclass(silt.InvalidArgumentError, ValueError)
    assert issubclass(silt.ColumnFamilyNotFoundError, LookupError)
    assert not issubclass(silt.ColumnFamilyNotFoundError, KeyError)


def test_invalid_argument_key_and_value_sizes(db):
    with pytest.raises(silt.InvalidArgumentError, match="65536"):
        db[b"k" * (silt.MAX_KEY_BYTES + 1)] = b"v"
    with pytest.raises(ValueError):
        db.put(b"k", b"v" * (silt.MAX_VALUE_BYTES + 1))
    # A key of exactly the limit is fine.
    db[b"k" * silt.MAX_KEY_BYTES] = b"v"
    assert db[b"k" * silt.MAX_KEY_BYTES] == b"v"


def test_column_family_not_found(db):
    with pytest.raises(silt.ColumnFamilyNotFoundError) as e:
        db.cf("nope")
    assert e.value.name == "nope"
    with pytest.raises(silt.ColumnFamilyNotFoundError):
        db.put(b"k", b"v", cf="nope")
    with pytest.raises(silt.ColumnFamilyNotFoundError):
        db.get(b"k", cf="nope")
    with pytest.raises(LookupError):
        list(db.items(cf="nope"))


def test_closed_everywhere(path):
    db = open_db(path)
    db[b"k"] = b"v"
    cf = db.create_cf("c")
    snap = db.snapshot()
    it = db.keys()
    b = db.batch()
    b[b"x"] = b"y"
    db.close()
    for call in (
        lambda: db[b"k"],
        lambda: db.put(b"k", b"v"),
        lambda: db.get(b"k"),
        lambda: list(db.items()),
        lambda: db.snapshot(),
        lambda: db.create_cf("d"),
        lambda: db.stats(),
        lambda: db.batch(),
        lambda: cf[b"k"],
        lambda: cf.put(b"k", b"v"),
        lambda: snap[b"k"],
        lambda: list(snap.items()),
        lambda: next(it),
        lambda: b.write(),
    ):
        with pytest.raises(silt.ClosedError):
            call()
    assert "closed" in repr(db)
    assert snap.closed


def test_locked_in_this_process(path):
    with open_db(path):
        with pytest.raises(silt.LockedError) as e:
            open_db(path)
    assert e.value.path == os.path.join(path, "LOCK")
    assert e.value.holder == os.getpid()
    assert "close the other handle" in str(e.value)


def test_locked_by_another_process(path):
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, silt
            db = silt.Db({path!r}, wal_segment_bytes=1 << 20)
            print("open", flush=True)
            sys.stdin.read()
        """)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout.readline().strip() == "open"
        with pytest.raises(silt.LockedError) as e:
            open_db(path)
        assert e.value.holder == child.pid
    finally:
        child.stdin.close()
        child.wait(timeout=30)
    with open_db(path):
        pass


def test_io_error_has_errno(tmp_path):
    # A directory name over the file system's 255-byte limit: mkdir fails.
    with pytest.raises(silt.IoError) as e:
        open_db(str(tmp_path / ("x" * 300)))
    assert isinstance(e.value, OSError)
    assert e.value.errno == errno.ENAMETOOLONG
    assert e.value.op == "create directory"
    assert e.value.path.endswith("x" * 300)
    assert "failed" in str(e.value)
    with pytest.raises(OSError):
        open_db(str(tmp_path / ("y" * 300)))


def test_not_a_directory_is_invalid_argument(tmp_path):
    f = tmp_path / "file"
    f.write_bytes(b"not a directory")
    with pytest.raises(silt.InvalidArgumentError, match="not a directory"):
        open_db(str(f))


def _table_files(path):
    return sorted(
        os.path.join(root, n)
        for root, _, names in os.walk(path)
        for n in names
        if n.endswith(".sst")
    )


def test_corruption_names_file_and_offset(path):
    with open_db(path, blob_threshold_bytes=None, block_size_bytes=1024) as db:
        for i in range(3000):
            db[b"key%06d" % i] = b"value%06d" % i * 4
        db.flush()
    tables = _table_files(path)
    assert tables, os.listdir(path)
    victim = tables[0]
    size = os.path.getsize(victim)
    # Damage data blocks (the first half of the file), not the footer, so that open
    # succeeds and the reads find it.
    with open(victim, "r+b") as f:
        for off in range(64, size // 2, 997):
            f.seek(off)
            f.write(b"\xff\x00\xff\x00")
    with open_db(path) as db:
        with pytest.raises(silt.CorruptionError) as e:
            for _ in db.items():
                pass
        assert e.value.file == victim
        assert isinstance(e.value.offset, int) and 0 <= e.value.offset < size
        assert e.value.reason
        assert "restore" in str(e.value)


def test_no_panic_on_odd_input(db):
    # Bad types are TypeErrors, never a PanicException.
    for bad in (None, 1, 1.5, object(), [b"a"]):
        with pytest.raises(TypeError):
            db.put(bad, b"v")
        with pytest.raises(TypeError):
            db.get(bad)
    with pytest.raises(TypeError):
        db.put(b"k", b"v", cf=123)
    with pytest.raises(TypeError):
        db.put(b"k", b"v", sync="yes")
