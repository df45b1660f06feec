"""Threads: concurrent writers, readers and iterators on one database; close while
others work; and group commit measured from Python threads (durable writes from
several threads share fdatasyncs, which is only possible if the GIL is released while
a write waits for its sync)."""

import threading
import time

import pytest

from conftest import open_db, report

import silt


def run_threads(n, target):
    errors = []

    def wrap(i):
        try:
            target(i)
        except BaseException as e:  # noqa: BLE001 - reported to the test below
            errors.append(e)

    threads = [threading.Thread(target=wrap, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
        assert not t.is_alive(), "a thread hung"
    if errors:
        raise errors[0]


def test_concurrent_writers_readers_iterators(path):
    with open_db(path, memtable_bytes=256 * 1024) as db:
        users = db.create_cf("users")
        per_thread = 1500
        done = threading.Event()

        def writer(i):
            for j in range(per_thread):
                k = b"t%d-%05d" % (i, j)
                if j % 3 == 0:
                    with db.batch() as b:
                        b[k] = b"v%d" % j
                        b.put(k, b"u%d" % j, cf=users)
                else:
                    db[k] = b"v%d" % j
                    users[k] = b"u%d" % j

        def reader(_):
            while not done.is_set():
                # A scan is a consistent view: in every family each key it sees has
                # its final value (keys are written once).
                for k, v in db.items():
                    assert v == b"v%d" % int(k.split(b"-")[1])
                snap = db.snapshot()
                keys = list(snap.keys())
                # Each batch wrote both families; the snapshot sees both or neither.
                for k in keys:
                    if int(k.split(b"-")[1]) % 3 == 0:
                        assert snap.get(k, cf=users) is not None
                snap.close()

        readers = threading.Thread(target=lambda: run_threads(2, reader))
        readers.start()
        run_threads(4, writer)
        done.set()
        readers.join(timeout=120)
        db.flush()
        for i in range(4):
            got = list(db.items(prefix=b"t%d-" % i))
            assert len(got) == per_thread
            assert got == [(b"t%d-%05d" % (i, j), b"v%d" % j) for j in range(per_thread)]
            assert len(list(users.keys(prefix=b"t%d-" % i))) == per_thread


def test_shared_iterator_between_threads(db):
    for i in range(5000):
        db[b"%05d" % i] = b"v"
    it = db.keys()
    seen = [[] for _ in range(4)]

    def consume(i):
        for k in it:
            seen[i].append(k)

    run_threads(4, consume)
    allk = sorted(k for s in seen for k in s)
    # Every key exactly once across the threads; each thread saw ascending keys.
    assert allk == [b"%05d" % i for i in range(5000)]
    for s in seen:
        assert s == sorted(s)


def test_close_while_others_work(path):
    db = open_db(path)
    stop = threading.Event()
    outcomes = []

    def worker(i):
        n = 0
        try:
            while not stop.is_set():
                db[b"%d-%d" % (i, n)] = b"v"
                db.get(b"%d-%d" % (i, n // 2))
                for _ in db.keys(prefix=b"%d-" % i):
                    break
                n += 1
        except silt.ClosedError:
            outcomes.append("closed")
            return
        outcomes.append("stopped")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    time.sleep(0.3)
    db.close()
    stop.set()
    for t in threads:
        t.join(timeout=60)
        assert not t.is_alive()
    assert outcomes and set(outcomes) <= {"closed", "stopped"}
    assert "closed" in outcomes
    with open_db(path) as db2:
        assert any(True for _ in db2.keys())


def durable_writes(path, threads, seconds):
    """Durable writes (sync="full") from `threads` Python threads for about `seconds`:
    commits, log fdatasyncs, and commits per second."""
    with open_db(path, sync="full") as db:
        db[b"warm"] = b"up"
        stop = threading.Event()
        counts = [0] * threads
        value = b"v" * 100

        def writer(i):
            n = 0
            while not stop.is_set():
                db[b"%d-%08d" % (i, n)] = value
                n += 1
            counts[i] = n

        before = db.stats()["wal_fsyncs"]
        ts = [threading.Thread(target=writer, args=(i,)) for i in range(threads)]
        t0 = time.perf_counter()
        for t in ts:
            t.start()
        time.sleep(seconds)
        stop.set()
        for t in ts:
            t.join(timeout=60)
        elapsed = time.perf_counter() - t0
        fsyncs = db.stats()["wal_fsyncs"] - before
        commits = sum(counts)
        # Every acknowledged write is there.
        for i in range(threads):
            assert sum(1 for _ in db.keys(prefix=b"%d-" % i)) == counts[i]
    return commits, fsyncs, commits / elapsed


def test_group_commit_from_python_threads(tmp_path):
    results = {}
    for n in (1, 2, 4):
        commits, fsyncs, rate = durable_writes(str(tmp_path / ("g%d" % n)), n, 0.7)
        results[n] = (commits, fsyncs, rate)
        report(
            "group commit, sync=full, %d thread(s): %d commits, %d fdatasyncs, "
            "%.2f fdatasyncs/commit, %.0f commits/s" % (n, commits, fsyncs, fsyncs / commits, rate)
        )
    c1, f1, _ = results[1]
    c4, f4, _ = results[4]
    # One writer: every durable write pays its own fdatasync.
    assert f1 >= 0.95 * c1
    # Four writers: they share. With the GIL held across a write no two writes could
    # ever wait for the same sync, and fdatasyncs would equal commits.
    assert f4 <= 0.8 * c4, results
