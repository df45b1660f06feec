"""The dict-like surface, point reads and writes, options, and persistence."""

import pathlib

import pytest

import silt
from conftest import open_db


def test_dict_like(db):
    db[b"a"] = b"1"
    db[b"b"] = b"2"
    assert db[b"a"] == b"1"
    assert b"a" in db
    assert b"zz" not in db
    with pytest.raises(KeyError) as e:
        db[b"zz"]
    assert e.value.args == (b"zz",)
    del db[b"a"]
    assert b"a" not in db
    with pytest.raises(KeyError):
        db[b"a"]
    # Deleting an absent key is a no-op (a blind tombstone).
    del db[b"never"]
    assert list(db) == [b"b"]


def test_no_len(db):
    # The engine keeps no count of live keys: len() is absent, not a hidden scan.
    with pytest.raises(TypeError):
        len(db)
    assert not hasattr(db, "__len__")


def test_get_default_put_delete(db):
    assert db.get(b"k") is None
    assert db.get(b"k", b"dflt") == b"dflt"
    sentinel = object()
    assert db.get(b"k", sentinel) is sentinel
    db.put(b"k", b"v")
    assert db.get(b"k", b"dflt") == b"v"
    db.put(b"k", b"v2", sync=True)
    assert db.get(b"k") == b"v2"
    db.delete(b"k", sync=False)
    assert db.get(b"k") is None


def test_empty_key_and_value(db):
    db[b""] = b""
    assert db[b""] == b""
    assert list(db.items()) == [(b"", b"")]


def test_bytes_like_in_bytes_out(db):
    db[bytearray(b"ba")] = bytearray(b"x")
    db[memoryview(b"mv")] = memoryview(b"y")
    assert db[b"ba"] == b"x" and type(db[b"ba"]) is bytes
    assert db[memoryview(b"mv")] == b"y"
    assert db.get(bytearray(b"mv")) == b"y"
    # A bytearray changed after the call does not change what was written.
    buf = bytearray(b"v1")
    db[b"buf"] = buf
    buf[:] = b"zz"
    assert db[b"buf"] == b"v1"


def test_str_keys_need_opt_in(db, tmp_path):
    with pytest.raises(TypeError, match="str_keys=True"):
        db["text"] = b"v"
    with pytest.raises(TypeError, match="str"):
        db[b"k"] = "a str value"
    with pytest.raises(TypeError):
        db[1] = b"v"
    with pytest.raises(TypeError):
        db[b"k"] = 1
    assert db.str_keys is False
    with open_db(str(tmp_path / "s"), str_keys=True) as sdb:
        assert sdb.str_keys is True
        sdb["ключ"] = b"v"
        # Encoded as UTF-8; keys come back as bytes.
        assert sdb["ключ".encode()] == b"v"
        assert list(sdb) == ["ключ".encode()]
        assert "ключ" in sdb
        assert list(sdb.keys(prefix="клю")) == ["ключ".encode()]
        # Values stay bytes-only.
        with pytest.raises(TypeError):
            sdb["k"] = "v"


def test_persistence_and_reopen(path):
    # The default log segment size (64 MiB), which every other test shrinks.
    with silt.Db(path, sync="full") as db:
        for i in range(100):
            db[b"k%03d" % i] = b"v%d" % i
        db.flush()
        db[b"after-flush"] = b"x"
    with silt.Db(path) as db:
        assert db[b"k042"] == b"v42"
        assert db[b"after-flush"] == b"x"
        assert len(list(db.keys())) == 101


def test_context_manager_closes(path):
    with open_db(path) as db:
        assert not db.closed
        db[b"k"] = b"v"
    assert db.closed
    with pytest.raises(silt.ClosedError):
        db[b"k"]
    db.close()  # a second close does nothing
    # The directory lock was released: it opens again.
    with open_db(path) as db2:
        assert db2[b"k"] == b"v"


def test_context_manager_closes_on_exception(path):
    with pytest.raises(RuntimeError):
        with open_db(path) as db:
            db[b"k"] = b"v"
            raise RuntimeError("boom")
    assert db.closed
    with open_db(path) as db:
        assert db[b"k"] == b"v"


def test_path_repr_and_constants(db, path):
    assert db.path == pathlib.Path(path)
    assert path in repr(db) and "open" in repr(db)
    assert silt.MAX_KEY_BYTES == 64 * 1024
    assert silt.MAX_VALUE_BYTES == 16 * 1024 * 1024
    assert silt.DEFAULT_CF == "default"
    # Path-like objects are accepted.
    other = pathlib.Path(path).with_name("other")
    with open_db(other) as d2:
        assert d2.path == other


def test_options(tmp_path):
    opts = dict(
        sync="interval",
        sync_interval=0.005,
        memtable_bytes=64 * 1024,
        block_cache_bytes=1 << 20,
        block_size_bytes=1024,
        bloom_bits_per_key=8,
        compression="zstd:1",
        level_size_ratio=4,
        l0_compaction_trigger=2,
        l0_slowdown_tables=3,
        memtable_scan_flush_trigger=16,
        memtable_bloom_ratio=0.1,
        background_threads=2,
        blob_threshold_bytes=None,
        paranoid_checks=False,
        create_if_missing=True,
    )
    with open_db(str(tmp_path / "o"), **opts) as db:
        for i in range(2000):
            db[b"%06d" % i] = b"x" * 100
        db.flush()
        assert db[b"001999"] == b"x" * 100
        assert sum(1 for _ in db.keys()) == 2000
    for compression in ("none", "lz4", "zstd"):
        with open_db(str(tmp_path / compression), compression=compression) as db:
            db[b"k"] = b"v" * 5000
            db.flush()
            assert db[b"k"] == b"v" * 5000


@pytest.mark.parametrize(
    "opts, match",
    [
        (dict(sync="always"), "option sync"),
        (dict(sync=1), "option sync"),
        (dict(sync_interval=0.01), "sync_interval"),
        (dict(sync="interval", sync_interval=-1), "sync_interval"),
        (dict(memtable_bytes=-1), "memtable_bytes"),
        (dict(memtable_bloom_ratio=0.5), "memtable_bloom_ratio"),
        (dict(memtable_bloom_ratio="x"), "memtable_bloom_ratio"),
        (dict(memtable_bytes="big"), "memtable_bytes"),
        (dict(memtable_bytes=True), "memtable_bytes"),
        (dict(compression="brotli"), "compression"),
        (dict(compression="zstd:x"), "compression"),
        (dict(str_keys="yes"), "str_keys"),
        (dict(stats_dump_period=0), "stats_dump_period"),
        (dict(stats_dump_period="often"), "stats_dump_period"),
    ],
)
def test_bad_option_values(path, opts, match):
    with pytest.raises(silt.InvalidArgumentError, match=match):
        open_db(path, **opts)


def test_stats_file_for_other_processes(tmp_path):
    """stats_dump_period: the STATS file `silt stats` reads appears, and close removes it."""
    import time

    p = tmp_path / "s"
    with open_db(str(p), stats_dump_period=0.02) as db:
        db[b"k"] = b"v"
        deadline = time.time() + 20
        while not (p / "STATS").exists():
            assert time.time() < deadline, "no STATS file"
            time.sleep(0.01)
        text = (p / "STATS").read_text()
        assert text.startswith("silt-stats 1\n") and "\nuser_bytes " in text
    assert not (p / "STATS").exists()
    with open_db(str(tmp_path / "off"), stats_dump_period=None) as db:
        db[b"k"] = b"v"
        time.sleep(0.2)
    assert not (tmp_path / "off" / "STATS").exists()


def test_unknown_option_is_type_error(path):
    with pytest.raises(TypeError, match="memtable_size"):
        open_db(path, memtable_size=1)


def test_create_if_missing_false(tmp_path):
    with pytest.raises(silt.SiltError):
        open_db(str(tmp_path / "missing"), create_if_missing=False)


def test_stats(db):
    s = db.stats()
    for k in ("levels", "memtable_bytes", "wal_bytes", "wal_fsyncs", "user_bytes", "write_amp"):
        assert k in s
    assert len(s["levels"]) == 7
    assert set(s["levels"][0]) == {"tables", "bytes"}
    db.put(b"k", b"v", sync=True)
    db.flush()
    s2 = db.stats()
    assert s2["wal_fsyncs"] >= s["wal_fsyncs"] + 1
    assert s2["flushes"] >= 1
    assert s2["levels"][0]["tables"] >= 1 or any(l["tables"] for l in s2["levels"])
    assert db.background_error() is None


def test_sync_and_compact(db):
    for i in range(500):
        db[b"%04d" % i] = b"v"
    db.sync()
    db.flush()
    db.compact_range()
    db.compact_range(b"0100", b"0200")
    assert db[b"0150"] == b"v"
    assert db.wait_for_compactions(30.0) is True
    assert db.wait_for_compactions(0) is True
    with pytest.raises(ValueError):
        db.wait_for_compactions(-1.0)


def test_large_values_go_through_blobs(db):
    big = bytes(range(256)) * 64  # 16 KiB, above the 1 KiB blob threshold
    for i in range(20):
        db[b"big%02d" % i] = big
    db.flush()
    assert db[b"big07"] == big
    assert [v for v in db.values(prefix=b"big")] == [big] * 20
    assert db.stats()["blob_files"] >= 1


def test_help_reads_well():
    doc = silt.Db.__doc__
    assert "with silt.Db(" in doc and "len(db)" in doc and "sync=" in doc
    for name in ("get", "put", "delete", "range", "prefix", "keys", "values", "items",
                 "batch", "write", "snapshot", "create_cf", "drop_cf", "list_cfs", "close"):
        assert getattr(silt.Db, name).__doc__, name
    for cls in (silt.ColumnFamily, silt.WriteBatch, silt.Snapshot, silt.Iter):
        assert cls.__doc__ and cls.__module__ == "silt"
    assert silt.Db.__text_signature__ == "(path, **options)"
