#!/usr/bin/env python3
"""silt-bench's RocksDB figures beside RocksDB's own db_bench, same library, same options.

A peer's number must be its real number: before silt is compared with RocksDB, the adapter
(crates/silt-bench/src/engine/peer_rocksdb.rs) is checked against RocksDB's own benchmark
tool, built by scripts/db_bench.sh from the source tree inside librocksdb-sys and linked
against the very librocksdb.a the adapter links. Each cell runs both harnesses, interleaved
(A B A B, --repeat times), with the adapter's options spelled out as db_bench flags, and
the table shows the medians and db_bench / silt-bench.

Usage:
  cargo build --release -p silt-bench --features rocksdb
  python3 scripts/rocksdb_check.py [--num 1000000] [--repeat 3] [--dir /tmp] [--json FILE]

How the loops line up (db_bench_tool.cc):
  * db_bench gives every thread --num operations (--writes / --reads when set), silt-bench
    splits --num among the threads: db_bench gets --writes / --reads = num / threads.
  * fills: db_bench's fillseq / fillrandom with --batch_size (entries per WriteBatch;
    db_bench counts entries, as silt-bench does). fillrandom draws keys with replacement in
    both harnesses.
  * reads: silt-bench preloads a random permutation of the keys, flushes and waits for
    compactions, then times the reads; db_bench runs filluniquerandom, flush,
    waitforcompaction, then readrandom / seekrandom (its timer restarts per benchmark).
  * keys: 16 bytes, the index big-endian in the first 8 (both); values 100 bytes.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SILT_BENCH = os.path.join(ROOT, "target", "release", "silt-bench")

# (workload, threads, batch). `seekrandom` is silt-bench's (one iterator kept for the
# thread's run) beside db_bench's with --use_tailing_iterator=1 (its one kept iterator);
# `seekfresh` is a new iterator per seek in both: silt-bench's `scan --range-size 1` beside
# db_bench's plain `seekrandom`, which makes a new iterator for every seek.
CELLS = [
    ("fillseq", 1, 1),
    ("fillseq", 1, 1000),
    ("fillrandom", 1, 1),
    ("fillrandom", 1, 1000),
    ("fillrandom", 2, 1000),
    ("readrandom", 1, 1),
    ("readrandom", 2, 1),
    ("seekrandom", 1, 1),
    ("seekfresh", 1, 1),
]

# The adapter's options (peer_rocksdb.rs), as db_bench flags. Everything not named here is
# RocksDB's default in both harnesses.
COMMON = [
    "--compression_type=none",
    "--wal_compression=none",
    "--bloom_bits=10",
    "--block_size=4096",
    "--cache_size=67108864",
    "--cache_type=lru_cache",
    "--write_buffer_size=67108864",
    "--level_compaction_dynamic_level_bytes=true",
    "--max_background_jobs=2",
    "--key_size=16",
    "--value_size=100",
    "--sync=0",
    "--disable_wal=0",
    "--histogram=0",
    "--statistics=0",
    "--seed=42",
]

LINE = re.compile(r"^(\w+)\s*:\s*([\d.]+) micros/op (\d+) ops/sec")


def db_bench(workload, threads, batch, num, base):
    d = tempfile.mkdtemp(prefix="dbb-", dir=base)
    try:
        per = num // threads
        if workload.startswith("fill"):
            benches = workload
            extra = [f"--writes={per}", f"--batch_size={batch}"]
        else:
            extra = [f"--reads={per}", "--batch_size=1", "--seek_nexts=0"]
            if workload == "seekrandom":
                extra.append("--use_tailing_iterator=1")
            elif workload == "seekfresh":
                workload = "seekrandom"
            benches = f"filluniquerandom,flush,waitforcompaction,{workload}"
        # The preload runs on one thread (as silt-bench's loader); the timed benchmark on
        # `threads`: db_bench's --threads applies to every benchmark, so the preload of a
        # multi-threaded read cell is a separate, single-threaded invocation.
        if not workload.startswith("fill") and threads > 1:
            run_db_bench(
                ["--benchmarks=filluniquerandom,flush,waitforcompaction", "--threads=1",
                 f"--num={num}", f"--db={d}", "--use_existing_db=0"] + extra, None)
            benches = workload
            extra += ["--use_existing_db=1"]
        else:
            extra += ["--use_existing_db=0"]
        return run_db_bench(
            [f"--benchmarks={benches}", f"--threads={threads}", f"--num={num}", f"--db={d}"]
            + extra, workload)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def run_db_bench(flags, want):
    cmd = ["bash", os.path.join(ROOT, "scripts", "db_bench.sh")] + COMMON + flags
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    if want is None:
        return None
    for line in out.splitlines():
        m = LINE.match(line.strip())
        if m and m.group(1) == want:
            return float(m.group(3))
    raise SystemExit(f"db_bench printed no {want} line:\n{out}")


def silt_bench(workload, threads, batch, num, base):
    extra = []
    if workload == "seekfresh":
        workload, extra = "scan", ["--range-size", "1"]
    cmd = [SILT_BENCH, "run", "--engines", "rocksdb", "--workloads", workload] + extra + [
           "--threads", str(threads), "--batch", str(batch), "--num", str(num),
           "--cache-bytes", "67108864", "--format", "json", "--quiet", "--dir", base]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            if r["status"] != "ok":
                raise SystemExit(f"silt-bench: {r}")
            return r["ops_per_sec"]
    raise SystemExit(f"silt-bench printed no result:\n{out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--num", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default=None, help="where the databases go (default: a temp dir)")
    ap.add_argument("--json", default=None, help="also write every figure to this file")
    ap.add_argument("--cells", default=None,
                    help="comma-separated workload:threads:batch (default: the built-in list)")
    a = ap.parse_args()
    cells = CELLS
    if a.cells:
        cells = [(w, int(t), int(b)) for w, t, b in (c.split(":") for c in a.cells.split(","))]
    if not os.path.exists(SILT_BENCH):
        raise SystemExit("build first: cargo build --release -p silt-bench --features rocksdb")
    subprocess.run(["bash", os.path.join(ROOT, "scripts", "db_bench.sh")], check=True,
                   stdout=subprocess.DEVNULL)
    base = a.dir or tempfile.mkdtemp(prefix="rocksdb-check-")
    res = {c: {"silt-bench": [], "db_bench": []} for c in cells}
    for r in range(a.repeat):
        for c in cells:
            res[c]["silt-bench"].append(silt_bench(*c, a.num, base))
            res[c]["db_bench"].append(db_bench(*c, a.num, base))
            print(f"round {r + 1}: {c[0]} threads {c[1]} batch {c[2]}: silt-bench "
                  f"{res[c]['silt-bench'][-1]:,.0f}/s, db_bench {res[c]['db_bench'][-1]:,.0f}/s",
                  file=sys.stderr)
    print(f"| cell ({a.num:,} keys) | silt-bench (adapter) | db_bench | db_bench / silt-bench |")
    print("|---|---|---|---|")
    for c in cells:
        s = statistics.median(res[c]["silt-bench"])
        d = statistics.median(res[c]["db_bench"])
        print(f"| {c[0]}, {c[1]} thread{'s' if c[1] > 1 else ''}, batch {c[2]} "
              f"| {s / 1e3:,.0f}K/s | {d / 1e3:,.0f}K/s | {d / s:.2f} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump([{"workload": c[0], "threads": c[1], "batch": c[2], **res[c]}
                       for c in cells], f, indent=1)


if __name__ == "__main__":
    main()
