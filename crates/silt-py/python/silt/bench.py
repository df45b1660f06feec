"""``python -m silt.bench``: silt beside the key-value stores Python users pick.

Peers, each from PyPI (each skipped, and said so, if it is not installed): ``rocksdict``
(RocksDB through PyO3), ``lmdb`` (py-lmdb), ``plyvel`` (LevelDB), and the standard
library's ``sqlite3``. Install them with ``pip install rocksdict lmdb plyvel``, and
silt's wheel built with ``maturin build --release`` (a debug build measures the
debugger's code, not silt).

Workloads, one database per engine in a fresh directory, one call per operation (what a
Python program does; no batching), 16-byte keys and 100-byte values:

* ``fill``: ``--keys`` (default 100,000) puts in random order, not synced (each engine's default
  durability: in the OS on return);
* ``random read``: ``--keys`` gets of random existing keys;
* ``scan``: every pair, in key order, once;
* ``durable, 1 thread`` / ``durable, N threads``: puts acknowledged only once on
  stable storage (an fdatasync per commit, shared where the engine can), for
  ``--seconds`` from 1 and ``--threads`` Python threads. For silt the log's fdatasyncs
  per commit are reported too (``Db.stats()["wal_fsyncs"]``): below 1 with several
  threads is group commit seen from Python.

How each peer is configured (its closest equivalent of the same promise):

* rocksdict: ``Options(raw_mode=True)`` (bytes as they are, no pickling), defaults
  otherwise; durable writes pass ``WriteOptions`` with ``sync = True``;
* lmdb: ``map_size`` 4 GiB; non-durable writes in an environment opened with
  ``sync=False, metasync=False``; durable ones in one opened with ``sync=True``; each put
  is its own write transaction (commit = acknowledgement); reads share one read
  transaction per loop, as lmdb programs do;
* plyvel: ``create_if_missing``; ``put(sync=True)`` for durable writes;
* sqlite3: one table ``kv(k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID``, WAL journal,
  autocommit (a transaction per put); ``synchronous=NORMAL`` (no fsync per commit) for
  the non-durable rows and ``FULL`` for the durable ones; one connection per thread,
  ``busy_timeout`` 60 s.

Runs ``--repeat`` rounds (default 3), each running every engine once in turn, and prints
one markdown table of each cell's median (operations per second, higher is better); the
JSON file (``--out``) has every round's figures too.
"""

import argparse
import datetime
import importlib
import json
import os
import platform
import random
import shutil
import sqlite3
import sys
import tempfile
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

VALUE_BYTES = 100


def peer(name: str) -> Any:
    """A peer's module, imported when its engine runs (ImportError if not installed);
    untyped, so that type-checking the package needs none of them."""
    return importlib.import_module(name)


def keys_for(n: int, seed: int) -> List[bytes]:
    """`n` distinct 16-byte keys in a random order."""
    ks = [b"%016d" % (i * 7919 % (n * 10)) for i in range(n)]
    random.Random(seed).shuffle(ks)
    return ks


def value_for(i: int) -> bytes:
    return (b"%08d" % i) * (VALUE_BYTES // 8) + b"v" * (VALUE_BYTES % 8)


class Engine:
    """One engine's adapter: open, the operations, close. Subclasses fill them in."""

    name = ""

    def version(self) -> str:
        raise NotImplementedError

    def open(self, path: str, durable: bool) -> None:
        raise NotImplementedError

    def put(self, k: bytes, v: bytes) -> None:
        raise NotImplementedError

    def reads(self, ks: List[bytes]) -> int:
        """Reads every key of `ks`; returns how many were found."""
        raise NotImplementedError

    def scan(self) -> int:
        """Reads every pair in key order; returns the count."""
        raise NotImplementedError

    def thread_writer(self) -> Callable[[bytes, bytes], None]:
        """A put function for one more writer thread (its own connection if needed)."""
        return self.put

    def fsyncs(self) -> Optional[int]:
        """The log's fdatasync count, where the engine reports one."""
        return None

    def close(self) -> None:
        raise NotImplementedError


class Silt(Engine):
    name = "silt"

    def version(self) -> str:
        import silt

        return silt.__version__

    def open(self, path: str, durable: bool) -> None:
        import silt

        self.db = silt.Db(path, sync="full" if durable else "none")

    def put(self, k: bytes, v: bytes) -> None:
        self.db[k] = v

    def reads(self, ks: List[bytes]) -> int:
        get = self.db.get
        return sum(1 for k in ks if get(k) is not None)

    def scan(self) -> int:
        return sum(1 for _ in self.db.items())

    def fsyncs(self) -> Optional[int]:
        return int(self.db.stats()["wal_fsyncs"])

    def close(self) -> None:
        self.db.close()


class RocksDict(Engine):
    name = "rocksdict"

    def version(self) -> str:
        from importlib.metadata import version

        return version("rocksdict")

    def open(self, path: str, durable: bool) -> None:
        rocksdict = peer("rocksdict")

        self.db = rocksdict.Rdict(path, rocksdict.Options(raw_mode=True))
        if durable:
            wo = rocksdict.WriteOptions()
            wo.sync = True
            self.db.set_write_options(wo)

    def put(self, k: bytes, v: bytes) -> None:
        self.db[k] = v

    def reads(self, ks: List[bytes]) -> int:
        get = self.db.get
        return sum(1 for k in ks if get(k) is not None)

    def scan(self) -> int:
        return sum(1 for _ in self.db.items())

    def close(self) -> None:
        self.db.close()


class Lmdb(Engine):
    name = "lmdb"

    def version(self) -> str:
        lmdb = peer("lmdb")

        return lmdb.__version__

    def open(self, path: str, durable: bool) -> None:
        lmdb = peer("lmdb")

        os.makedirs(path, exist_ok=True)
        self.env = lmdb.open(
            path, map_size=4 << 30, sync=durable, metasync=durable, max_spare_txns=8
        )

    def put(self, k: bytes, v: bytes) -> None:
        with self.env.begin(write=True) as txn:
            txn.put(k, v)

    def reads(self, ks: List[bytes]) -> int:
        with self.env.begin() as txn:
            get = txn.get
            return sum(1 for k in ks if get(k) is not None)

    def scan(self) -> int:
        with self.env.begin() as txn:
            return sum(1 for _ in txn.cursor())

    def close(self) -> None:
        self.env.close()


class Plyvel(Engine):
    name = "plyvel"

    def version(self) -> str:
        plyvel = peer("plyvel")

        return plyvel.__version__

    def open(self, path: str, durable: bool) -> None:
        plyvel = peer("plyvel")

        self.db = plyvel.DB(path, create_if_missing=True)
        self.sync = durable

    def put(self, k: bytes, v: bytes) -> None:
        self.db.put(k, v, sync=self.sync)

    def reads(self, ks: List[bytes]) -> int:
        get = self.db.get
        return sum(1 for k in ks if get(k) is not None)

    def scan(self) -> int:
        return sum(1 for _ in self.db)

    def close(self) -> None:
        self.db.close()


class Sqlite(Engine):
    name = "sqlite3"

    def version(self) -> str:
        return sqlite3.sqlite_version

    def connect(self) -> sqlite3.Connection:
        con = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=%s" % ("FULL" if self.durable else "NORMAL"))
        con.execute("PRAGMA busy_timeout=60000")
        self.cons.append(con)
        return con

    def open(self, path: str, durable: bool) -> None:
        os.makedirs(path, exist_ok=True)
        self.path = os.path.join(path, "kv.sqlite")
        self.durable = durable
        self.cons: List[sqlite3.Connection] = []
        self.con = self.connect()
        self.con.execute("CREATE TABLE IF NOT EXISTS kv (k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID")

    def put(self, k: bytes, v: bytes) -> None:
        self.con.execute("INSERT OR REPLACE INTO kv VALUES (?, ?)", (k, v))

    def reads(self, ks: List[bytes]) -> int:
        ex = self.con.execute
        return sum(1 for k in ks if ex("SELECT v FROM kv WHERE k = ?", (k,)).fetchone() is not None)

    def scan(self) -> int:
        return sum(1 for _ in self.con.execute("SELECT k, v FROM kv ORDER BY k"))

    def thread_writer(self) -> Callable[[bytes, bytes], None]:
        con = self.connect()

        def put(k: bytes, v: bytes) -> None:
            con.execute("INSERT OR REPLACE INTO kv VALUES (?, ?)", (k, v))

        return put

    def close(self) -> None:
        for c in self.cons:
            c.close()


ENGINES = {e.name: e for e in (Silt, RocksDict, Lmdb, Plyvel, Sqlite)}


def timed(f: Callable[[], Any]) -> Tuple[float, Any]:
    t0 = time.perf_counter()
    r = f()
    return time.perf_counter() - t0, r


def durable_run(engine: Engine, path: str, threads: int, seconds: float) -> Dict[str, Any]:
    """Durable puts from `threads` threads for about `seconds`."""
    engine.open(path, durable=True)
    try:
        writers = [engine.thread_writer() for _ in range(threads)]
        writers[0](b"warm", b"up")
        counts = [0] * threads
        stop = threading.Event()
        value = value_for(0)

        def loop(i: int) -> None:
            put, n = writers[i], 0
            while not stop.is_set():
                put(b"t%02d-%012d" % (i, n), value)
                n += 1
            counts[i] = n

        before = engine.fsyncs()
        ts = [threading.Thread(target=loop, args=(i,)) for i in range(threads)]
        t0 = time.perf_counter()
        for t in ts:
            t.start()
        time.sleep(seconds)
        stop.set()
        for t in ts:
            t.join()
        elapsed = time.perf_counter() - t0
        after = engine.fsyncs()
        ops = sum(counts)
        out: Dict[str, Any] = {"ops": ops, "seconds": elapsed, "ops_per_s": ops / elapsed}
        if before is not None and after is not None and ops:
            out["fsyncs_per_commit"] = (after - before) / ops
        return out
    finally:
        engine.close()


def run_engine(name: str, args: argparse.Namespace, root: str) -> Dict[str, Any]:
    engine = ENGINES[name]()
    res: Dict[str, Any] = {"version": engine.version()}
    ks = keys_for(args.keys, seed=42)
    path = os.path.join(root, name)
    engine.open(path, durable=False)
    try:
        vals = [value_for(i) for i in range(len(ks))]
        put = engine.put

        def fill() -> None:
            for k, v in zip(ks, vals):
                put(k, v)

        t, _ = timed(fill)
        res["fill"] = {"ops": len(ks), "seconds": t, "ops_per_s": len(ks) / t}
        reads = ks[:]
        random.Random(7).shuffle(reads)
        t, found = timed(lambda: engine.reads(reads))
        assert found == len(reads), (name, found)
        res["random read"] = {"ops": len(reads), "seconds": t, "ops_per_s": len(reads) / t}
        t, n = timed(engine.scan)
        assert n == len(ks), (name, n)
        res["scan"] = {"ops": n, "seconds": t, "ops_per_s": n / t}
    finally:
        engine.close()
    shutil.rmtree(path, ignore_errors=True)
    for threads in (1, args.threads):
        dpath = os.path.join(root, "%s-durable-%d" % (name, threads))
        res["durable, %d thread%s" % (threads, "" if threads == 1 else "s")] = durable_run(
            engine, dpath, threads, args.seconds
        )
        shutil.rmtree(dpath, ignore_errors=True)
    return res


def table(results: Dict[str, Dict[str, Any]], rows: List[str]) -> str:
    names = list(results)
    head = "| workload | " + " | ".join(
        "%s %s" % (n, results[n]["version"]) for n in names
    )
    has_ratio = "silt" in results and "rocksdict" in results
    head += " | silt / rocksdict |" if has_ratio else " |"
    lines = [head, "|---" * (len(names) + 1 + has_ratio) + "|"]
    for row in rows:
        cells = []
        for n in names:
            r = results[n].get(row)
            if r is None:
                cells.append("—")
                continue
            cell = "{:,.0f}".format(r["ops_per_s"])
            if "fsyncs_per_commit" in r:
                cell += " (%.2f fsync/commit)" % r["fsyncs_per_commit"]
            cells.append(cell)
        line = "| %s | %s |" % (row, " | ".join(cells))
        if has_ratio:
            a, b = results["silt"].get(row), results["rocksdict"].get(row)
            line += " %.2f× |" % (a["ops_per_s"] / b["ops_per_s"]) if a and b else " — |"
        lines.append(line)
    return "\n".join(lines)


def median_runs(runs: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Per workload, the run with the median ops/s (all runs' ops/s kept beside it)."""
    out: Dict[str, Any] = {"version": runs[0]["version"]}
    for row in runs[0]:
        if row == "version":
            continue
        ordered = sorted((r[row] for r in runs), key=lambda r: r["ops_per_s"])
        med = dict(ordered[len(ordered) // 2])
        med["all_ops_per_s"] = [r[row]["ops_per_s"] for r in runs]
        out[row] = med
    return out


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m silt.bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--keys", type=int, default=100_000, help="keys for fill, read, scan (100000)")
    p.add_argument("--seconds", type=float, default=2.0, help="seconds per durable row (2)")
    p.add_argument("--threads", type=int, default=4, help="threads of the second durable row (4)")
    p.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="rounds; each runs every engine once, in turn, and the table shows each "
        "cell's median (3)",
    )
    p.add_argument(
        "--engines", default=",".join(ENGINES), help="comma-separated: " + ",".join(ENGINES)
    )
    p.add_argument("--dir", default=None, help="where the databases go (a new temporary directory)")
    p.add_argument("--out", default="silt-bench-python.json", help="JSON results (silt-bench-python.json)")
    args = p.parse_args(argv)
    names = []
    skipped: Dict[str, str] = {}
    for name in args.engines.split(","):
        if name not in ENGINES:
            p.error("unknown engine %r" % name)
        try:
            ENGINES[name]().version()
        except ImportError as e:
            skipped[name] = "not installed (%s)" % e
            print("%s: skipped, %s" % (name, skipped[name]), file=sys.stderr)
            continue
        names.append(name)
    root = tempfile.mkdtemp(prefix="silt-bench-", dir=args.dir)
    runs: Dict[str, List[Dict[str, Any]]] = {n: [] for n in names}
    try:
        # Rounds interleave the engines, so a change in the machine's load over the run
        # is shared by all of them rather than landing on one.
        for rnd in range(args.repeat):
            for name in names:
                print("round %d/%d: %s ..." % (rnd + 1, args.repeat, name), file=sys.stderr, flush=True)
                runs[name].append(run_engine(name, args, root))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    results = {n: median_runs(runs[n]) for n in names}
    rows = ["fill", "random read", "scan", "durable, 1 thread", "durable, %d threads" % args.threads]
    md = table(results, rows)
    print(md)
    meta = {
        "date": datetime.date.today().isoformat(),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "args": vars(args),
        "skipped": skipped,
    }
    with open(args.out, "w") as f:
        json.dump({"meta": meta, "results": results, "runs": runs, "table": md}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
