"""The engine's tools from Python: read-only open beside a writer in another process,
checkpoints that open as databases, incremental and verified backups, and repair after
the manifest is lost."""

import os
import subprocess
import sys
import textwrap

import pytest

from conftest import open_db

import silt

# A writer in its own process: writes w000..w099, says "ready", then on each line from
# stdin writes one more key ("x" + the line) and says "done"; exits at end of input.
WRITER = textwrap.dedent("""
    import sys, silt
    db = silt.Db(sys.argv[1], wal_segment_bytes=1 << 20)
    for i in range(100):
        db[b"w%03d" % i] = b"v%d" % i
    db.flush()
    db[b"zlog"] = b"in the log only"
    print("ready", flush=True)
    for line in sys.stdin:
        db[b"x" + line.strip().encode()] = b"1"
        print("done", flush=True)
    db.close()
""")


def test_read_only_beside_a_writer_in_another_process(path):
    child = subprocess.Popen(
        [sys.executable, "-c", WRITER, path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout.readline().strip() == "ready"
        # The writer holds the lock: a writable open is refused, a read-only one is not.
        with pytest.raises(silt.LockedError):
            open_db(path)
        with open_db(path, read_only=True) as ro:
            assert ro.read_only
            keys = list(ro.keys())
            assert keys == [b"w%03d" % i for i in range(100)] + [b"zlog"]
            assert ro[b"w007"] == b"v7" and ro[b"zlog"] == b"in the log only"
            for write in (
                lambda: ro.put(b"k", b"v"),
                lambda: ro.delete(b"w001"),
                lambda: ro.flush(),
                lambda: ro.create_cf("c"),
            ):
                with pytest.raises(silt.ReadOnlyError, match="read-only"):
                    write()
            # A transaction reads; its commit with writes is refused, without writes fine.
            with pytest.raises(silt.ReadOnlyError):
                with ro.transaction() as t:
                    assert t[b"w001"] == b"v1"
                    t[b"new"] = b"1"
            with ro.transaction() as t:
                assert t[b"w002"] == b"v2"
            # A fixed state: a write the writer makes now is not seen...
            child.stdin.write("late\n")
            child.stdin.flush()
            assert child.stdout.readline().strip() == "done"
            assert b"xlate" not in ro
        # ...until it is opened again.
        with open_db(path, read_only=True) as ro:
            assert ro[b"xlate"] == b"1"
    finally:
        child.stdin.close()
        child.wait(timeout=60)
    assert child.returncode == 0
    # The read-only opens wrote nothing that stops the writer's database from opening.
    with open_db(path) as db:
        assert len(list(db.keys())) == 102


def test_checkpoint_opens_as_a_database(tmp_path, db):
    for i in range(200):
        db[b"k%03d" % i] = b"v%d" % i
    db.flush()
    db[b"in-log"] = b"1"  # not in a table: the checkpoint's log must hold it
    before = list(db.items())
    ckpt = tmp_path / "ckpt"
    info = db.checkpoint(ckpt)
    db[b"later"] = b"1"
    del db[b"k000"]
    assert info["dir"] == str(ckpt)
    assert info["files_linked"] + info["files_copied"] >= 1
    assert info["log_segments"] >= 1 and info["seqno"] > 0
    with open_db(str(ckpt)) as c:
        assert list(c.items()) == before
        c[b"own"] = b"writes"  # a database of its own
    assert b"own" not in db and b"later" in db
    with pytest.raises(silt.InvalidArgumentError, match="exists"):
        db.checkpoint(ckpt)


def test_backups_are_incremental_verified_and_restorable(tmp_path, db):
    store = silt.BackupStore(tmp_path / "backups")
    for i in range(300):
        db[b"a%03d" % i] = b"x" * 100
    db.flush()
    first = store.create(db)
    db[b"b"] = b"second"
    db.flush()
    second = store.create(db)
    assert [b["id"] for b in store.list()] == [first["id"], second["id"]]
    # The first backup's table is in the store already: the second did not copy it.
    assert second["new_files"] < second["files"]
    assert second["new_bytes"] < second["bytes"]
    assert store.verify(first["id"])["seqno"] == first["seqno"]

    restored = tmp_path / "restored"
    store.restore(first["id"], restored)
    with open_db(str(restored)) as r:
        assert b"b" not in r and len(list(r.keys())) == 300

    # Damage a stored file: verify and restore name it, and nothing appears at target.
    shared = tmp_path / "backups" / "files"
    victim = sorted(shared.iterdir())[0]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    with pytest.raises(silt.CorruptionError) as e:
        store.verify(first["id"])
    assert e.value.file == str(victim)
    with pytest.raises(silt.CorruptionError):
        store.restore(first["id"], tmp_path / "again")
    assert not (tmp_path / "again").exists()
    with pytest.raises(silt.InvalidArgumentError):
        store.verify(999)
    assert store.purge_old(1) == [first["id"]]
    assert [b["id"] for b in store.list()] == [second["id"]]


def test_repair_after_the_manifest_is_lost(path):
    with open_db(path) as db:
        for i in range(500):
            db[b"k%03d" % i] = b"v%d" % i
        db.flush()
        db[b"log-only"] = b"1"
        with pytest.raises(silt.LockedError):
            silt.repair(path)
    for name in os.listdir(path):
        if name == "CURRENT" or name.startswith("MANIFEST-"):
            os.remove(os.path.join(path, name))
    report = silt.repair(path)
    assert report["manifest_error"]
    assert report["tables_recovered"] >= 1 and report["tables_written"] >= 1
    assert report["records_recovered"] >= 1 and report["damaged"] == []
    assert report["set_aside"]
    assert all(os.sep + "lost" + os.sep in to for _, to in report["set_aside"])
    with open_db(path) as db:
        assert len(list(db.keys())) == 501 and db[b"log-only"] == b"1"
