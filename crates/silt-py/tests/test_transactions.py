"""Transactions: the context manager, the dict-like surface, reads of its own writes
(points and iterators, both directions), savepoints, the end of a transaction, the
typed errors with their attributes (conflicts of each kind, lock timeouts, deadlocks,
size), Db.transact's retries (deterministic, and two threads counting exactly), one
transaction shared by threads, and commits from threads sharing fdatasyncs."""

import collections
import gc
import threading
import time

import pytest

from conftest import open_db, report

import silt


def wait_for(cond, what, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out waiting for " + what
        time.sleep(0.002)


def test_with_block_commits_on_clean_exit(db):
    with db.transaction() as t:
        t[b"a"] = b"1"
        t.put(b"b", b"2")
        assert b"a" not in db  # private until commit
        assert t[b"a"] == b"1"
    assert t.state == "committed"
    assert db[b"a"] == b"1" and db[b"b"] == b"2"


def test_with_block_rolls_back_and_reraises(db):
    db[b"a"] = b"old"

    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        with db.transaction() as t:
            t[b"a"] = b"new"
            t[b"b"] = b"2"
            raise Boom()
    assert t.state == "rolled_back"
    assert db[b"a"] == b"old" and b"b" not in db


def test_explicit_end_and_every_call_after_it(db):
    t = db.transaction()
    t[b"k"] = b"v"
    it = t.keys()
    t.commit()
    assert db[b"k"] == b"v"
    for call in (
        lambda: t[b"k"],
        lambda: t.get(b"k"),
        lambda: t.put(b"k", b"w"),
        lambda: t.delete(b"k"),
        lambda: b"k" in t,
        lambda: t.keys(),
        lambda: next(it),  # made before the commit: its reads were never validated
        lambda: t.savepoint(),
        lambda: t.pending,
        lambda: t.commit(),
    ):
        with pytest.raises(silt.ClosedError, match="was committed"):
            call()
    t.rollback()  # an ended transaction: nothing, so cleanup cannot mask an error
    assert t.state == "committed"

    r = db.transaction()
    r[b"x"] = b"1"
    r.rollback()
    assert r.state == "rolled_back" and b"x" not in db
    with pytest.raises(silt.ClosedError, match="rolled back"):
        r.commit()
    # A with block around an ended transaction neither commits nor raises.
    with db.transaction() as w:
        w[b"y"] = b"1"
        w.rollback()
    assert b"y" not in db


def test_dict_like_surface_and_column_families(db):
    users = db.create_cf("users")
    db[b"gone"] = b"x"
    db[b"once"] = b"x"
    with db.transaction() as t:
        t[b"k"] = b"v"
        t.put(b"u1", b"ada", cf=users)
        t.put(b"u2", bytearray(b"grace"), cf="users")
        del t[b"gone"]
        t.single_delete(b"once")
        assert t[b"k"] == b"v" and b"k" in t
        assert b"gone" not in t and t.get(b"gone") is None
        assert t.get(b"missing", b"dflt") == b"dflt"
        with pytest.raises(KeyError):
            t[b"missing"]
        assert t.get(b"u1", cf=users) == b"ada"
        assert t.get_for_update(b"u2", cf="users") == b"grace"
        assert t.get_for_update(b"nope", 7) == 7
        assert list(t) == [b"k"]
        assert t.pending[0] == 5
        t.delete(b"u2", cf=users)
        with pytest.raises(silt.ColumnFamilyNotFoundError):
            t.put(b"k", b"v", cf="nope")
        with pytest.raises(TypeError):
            t[b"k"] = "str value"
    assert list(db.items()) == [(b"k", b"v")]
    assert list(users.items()) == [(b"u1", b"ada")]


def test_iterators_see_own_writes_in_both_directions(db):
    for k in (b"a", b"c", b"e", b"g"):
        db[k] = b"db-" + k
    with db.transaction() as t:
        t[b"b"] = b"t-b"  # new
        del t[b"c"]  # deleted
        t[b"e"] = b"t-e"  # overwritten
        t[b"h"] = b"t-h"  # past the stored keys
        want = [(b"a", b"db-a"), (b"b", b"t-b"), (b"e", b"t-e"), (b"g", b"db-g"), (b"h", b"t-h")]
        assert list(t.items()) == want
        assert list(t.items(reverse=True)) == want[::-1]
        assert list(t.range(b"b", b"g")) == want[1:3]
        assert list(t.range(b"b", b"g", reverse=True)) == want[1:3][::-1]
        assert list(t.keys(reverse=True)) == [k for k, _ in want][::-1]
        assert list(t.values()) == [v for _, v in want]
        assert list(t.prefix(b"h", reverse=True)) == [(b"h", b"t-h")]
        assert list(t.keys(prefix=b"c")) == []
        # An iterator sees the writes made before it was created, not after.
        it = t.keys()
        t[b"f"] = b"t-f"
        assert list(it) == [k for k, _ in want]
        assert b"f" in list(t.keys())
        # The database does not see any of it yet.
        assert list(db.keys()) == [b"a", b"c", b"e", b"g"]
    assert list(db.keys()) == [b"a", b"b", b"e", b"f", b"g", b"h"]


def test_savepoints(db):
    db[b"a"] = b"0"
    with db.transaction() as t:
        t[b"a"] = b"1"
        t.savepoint()
        t[b"b"] = b"2"
        del t[b"a"]
        assert list(t.keys()) == [b"b"]
        t.rollback_to_savepoint()
        assert list(t.items()) == [(b"a", b"1")]
        t.savepoint()
        t.savepoint()
        t[b"c"] = b"3"
        t.pop_savepoint()  # keeps c; the outer savepoint remains
        t[b"d"] = b"4"
        t.rollback_to_savepoint()  # undoes c and d
        assert list(t.keys()) == [b"a"]
        with pytest.raises(silt.InvalidArgumentError, match="no savepoint"):
            t.rollback_to_savepoint()
        with pytest.raises(silt.InvalidArgumentError, match="no savepoint"):
            t.pop_savepoint()
        t[b"e"] = b"5"
    assert list(db.items()) == [(b"a", b"1"), (b"e", b"5")]


def test_write_write_conflict_has_its_attributes(db):
    users = db.create_cf("users")
    t = db.transaction()
    t.put(b"\x00k\xff", b"mine", cf=users)
    users[b"\x00k\xff"] = b"theirs"  # committed after t's snapshot
    with pytest.raises(silt.ConflictError) as e:
        t.commit()
    err = e.value
    assert isinstance(err, silt.RetryableError) and isinstance(err, silt.SiltError)
    assert err.cf == "users" and err.key == b"\x00k\xff" and err.kind == "write_write"
    assert "run the transaction again" in str(err)
    assert t.state == "failed"
    assert users[b"\x00k\xff"] == b"theirs"  # nothing of t was written
    # Through a with block: raised by the block's end.
    with pytest.raises(silt.ConflictError):
        with db.transaction() as t2:
            t2[b"x"] = b"1"
            db[b"x"] = b"2"
    assert db[b"x"] == b"2"


def test_read_validation_and_phantom_conflicts(db):
    db[b"r"] = b"0"
    t = db.transaction(isolation="serializable")
    assert t.isolation == "serializable" and t.mode == "optimistic"
    t.get(b"r")
    t[b"w"] = b"1"
    db[b"r"] = b"changed"
    with pytest.raises(silt.ConflictError) as e:
        t.commit()
    assert (e.value.key, e.value.kind) == (b"r", "read_validation")

    t = db.transaction(isolation="serializable")
    assert list(t.prefix(b"p/")) == []
    t[b"w"] = b"2"
    db[b"p/new"] = b"1"  # appears in the range t scanned
    with pytest.raises(silt.ConflictError) as e:
        t.commit()
    assert (e.value.key, e.value.kind) == (b"p/new", "phantom")

    # Snapshot isolation allows both (it checks only what it writes).
    t = db.transaction(isolation="snapshot")
    t.get(b"r")
    list(t.prefix(b"p/"))
    t[b"w"] = b"3"
    db[b"r"] = b"again"
    db[b"p/other"] = b"1"
    t.commit()
    assert db[b"w"] == b"3"


def test_pessimistic_deadlock(db):
    t1 = db.transaction(mode="pessimistic", lock_timeout=30)
    t2 = db.transaction(mode="pessimistic", lock_timeout=30)
    t1[b"a"] = b"t1"
    t2[b"b"] = b"t2"
    outcome = {}

    def first():
        try:
            t1[b"b"] = b"t1"  # waits for t2's lock, with the GIL released
            t1.commit()
            outcome["t1"] = "committed"
        except BaseException as e:  # noqa: BLE001 - checked below
            outcome["t1"] = e

    th = threading.Thread(target=first)
    th.start()
    wait_for(lambda: db.lock_waits() == [(t1.id, [t2.id])], "t1 to wait for t2")
    with pytest.raises(silt.DeadlockError) as e:
        with t2:
            t2[b"a"] = b"t2"  # would close the cycle: t2 is the victim
    assert isinstance(e.value, silt.RetryableError)
    assert e.value.cf == "default" and e.value.key == b"a"
    assert "deadlock" in str(e.value)
    assert t2.state == "rolled_back"  # the with block released t2's locks...
    th.join(timeout=30)
    assert outcome["t1"] == "committed"  # ...so t1 went on
    assert db[b"a"] == b"t1" and db[b"b"] == b"t1"


def test_lock_timeout_leaves_the_transaction_open(db):
    holder = db.transaction(mode="pessimistic")
    holder[b"k"] = b"holder"
    t = db.transaction(mode="pessimistic", lock_timeout=0.05)
    t0 = time.monotonic()
    with pytest.raises(silt.LockTimeoutError) as e:
        t.get_for_update(b"k")
    assert time.monotonic() - t0 >= 0.045
    assert isinstance(e.value, silt.RetryableError)
    assert e.value.cf == "default" and e.value.key == b"k" and e.value.waited_ms >= 45
    assert t.state == "active"
    t[b"other"] = b"1"
    holder.rollback()
    t[b"k"] = b"t"  # granted now
    t.commit()
    assert db[b"k"] == b"t" and db[b"other"] == b"1"


def test_transaction_too_large(db):
    t = db.transaction(max_bytes=200)
    t[b"small"] = b"x"
    with pytest.raises(silt.TransactionTooLargeError) as e:
        t[b"big"] = b"x" * 300
    assert not isinstance(e.value, silt.RetryableError)
    assert e.value.limit == 200 and e.value.bytes > 300
    assert t.state == "active" and t.pending[0] == 1  # the write that went over is not in
    t.commit()
    assert db[b"small"] == b"x" and b"big" not in db


def test_options_are_checked(db):
    for kwargs in (
        dict(isolation="chaos"),
        dict(mode="hopeful"),
        dict(lock_timeout=-1),
        dict(lock_timeout=float("nan")),
        dict(max_bytes=-1),
        dict(max_bytes=True),
    ):
        with pytest.raises(silt.InvalidArgumentError):
            db.transaction(**kwargs)
    with pytest.raises(silt.InvalidArgumentError):
        db.transact(lambda t: None, max_retries=-1)
    with pytest.raises(TypeError):
        db.transaction(sync="yes")
    for level in ("read_uncommitted", "read_committed", "repeatable_read", "snapshot", "serializable"):
        for mode in ("optimistic", "pessimistic"):
            with db.transaction(isolation=level, mode=mode, sync=True) as t:
                assert (t.isolation, t.mode) == (level, mode)
                t[level.encode()] = mode.encode()
    assert len(list(db.keys())) == 5
    assert "snapshot/optimistic active" in repr(db.transaction())


def test_transact_retries_a_conflict(db):
    calls = []

    def incr(txn):
        n = int(txn.get(b"n", b"0"))
        if not calls:
            db[b"n"] = b"100"  # a commit after txn's snapshot: its commit conflicts
        calls.append(n)
        txn[b"n"] = b"%d" % (n + 1)
        return n + 1

    assert db.transact(incr) == 101
    assert calls == [0, 100] and db[b"n"] == b"101"


def test_transact_gives_up_and_propagates(db):
    calls = []

    def always_conflicts(txn):
        calls.append(1)
        txn[b"k"] = b"mine"
        db[b"k"] = b"theirs"

    with pytest.raises(silt.ConflictError):
        db.transact(always_conflicts, max_retries=2)
    assert len(calls) == 3

    seen = []

    def fails(txn):
        seen.append(txn)
        txn[b"never"] = b"1"
        raise ValueError("not retryable")

    with pytest.raises(ValueError):
        db.transact(fails)
    assert len(seen) == 1 and seen[0].state == "rolled_back" and b"never" not in db

    # func may end the transaction itself.
    assert db.transact(lambda t: (t.put(b"x", b"1"), t.rollback(), "rolled")[2]) == "rolled"
    assert b"x" not in db
    assert db.transact(lambda t: (t.put(b"y", b"1"), t.commit(), "done")[2], sync=True) == "done"
    assert db[b"y"] == b"1"


@pytest.mark.parametrize("mode", ["optimistic", "pessimistic"])
def test_transact_from_two_threads_counts_exactly(db, mode):
    per_thread = 60
    attempts = collections.Counter()

    def incr(txn):
        attempts[threading.get_ident()] += 1
        read = txn.get_for_update if mode == "pessimistic" else txn.get
        n = int(read(b"n", b"0"))
        txn[b"n"] = b"%d" % (n + 1)

    def worker():
        for _ in range(per_thread):
            db.transact(incr, mode=mode, max_retries=1000)

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
        assert not th.is_alive()
    assert db[b"n"] == b"%d" % (2 * per_thread)
    total = sum(attempts.values())
    report(
        "transact, %s, 2 threads x %d increments: exact count, %d attempts (%d retried)"
        % (mode, per_thread, total, total - 2 * per_thread)
    )


def test_one_transaction_used_by_several_threads(db):
    t = db.transaction()

    def writer(i):
        for j in range(50):
            t[b"t%d-%02d" % (i, j)] = b"%d" % j

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    assert t.pending[0] == 200
    t.commit()
    assert len(list(db.keys())) == 200


def test_commits_from_threads_share_fdatasyncs(path):
    with open_db(path, sync="full") as db:
        n_threads, per_thread = 4, 25
        before = db.stats()["wal_fsyncs"]

        def worker(i):
            for j in range(per_thread):
                with db.transaction() as t:
                    t[b"t%d-%03d" % (i, j)] = b"v"

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(n_threads)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=60)
        commits = n_threads * per_thread
        fsyncs = db.stats()["wal_fsyncs"] - before
        assert len(list(db.keys())) == commits
    report(
        "transaction commits, sync=full, 4 threads: %d commits, %d fdatasyncs (%.2f per commit)"
        % (commits, fsyncs, fsyncs / commits)
    )
    # With the GIL held through a commit's fdatasync, no two commits could share one.
    assert fsyncs <= 0.8 * commits


def test_closed_database_and_collected_transaction(path):
    db = open_db(path)
    t = db.transaction()
    t[b"k"] = b"v"
    db.close()
    with pytest.raises(silt.ClosedError, match="database"):
        t[b"k"]
    with pytest.raises(silt.ClosedError):
        t.commit()
    t.rollback()  # still possible: it only drops what the transaction holds

    db = open_db(path)
    holder = db.transaction(mode="pessimistic")
    holder[b"k"] = b"1"
    it = holder.keys()
    del holder
    gc.collect()
    # Collected without commit: rolled back at once, its lock released...
    t = db.transaction(mode="pessimistic", lock_timeout=0.0)
    t[b"k"] = b"2"
    t.commit()
    # ...and its iterator, which holds it only weakly, says so.
    with pytest.raises(silt.ClosedError, match="garbage-collected"):
        next(it)
    assert db[b"k"] == b"2"
    db.close()
