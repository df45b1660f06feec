#!/usr/bin/env python3
"""silt-bench's TidesDB figures beside a C driver in the loop of TidesDB's own benchmark, same library.

A peer's number must be its real number: before silt is compared with TidesDB, the adapter
(crates/silt-bench/src/engine/peer_tidesdb.rs) is checked against a small C driver
(scripts/tidesdb_check/driver.c, built by scripts/tidesdb_check.sh) that writes in the loop of
TidesDB's own benchmark tool (bench/tidesdb__bench.c in TidesDB's repository) and links the
very libtidesdb.a the adapter links (the tidesdb crate's bundled TidesDB). Each cell runs
silt-bench and three driver variants, interleaved (A B A B, --repeat times), and the table
shows the medians and their ratios to silt-bench:

  * driver, adapter options, silt-bench's keys: the adapter's options (library defaults,
    64 MiB block cache, sync none, warn logging, bloom on) and silt-bench's keys and values
    (16-byte keys, 100-byte pseudo-random values). Same work as silt-bench; a gap here is
    the adapter's or the Rust binding's per-call overhead.
  * driver, tool options, silt-bench's keys: TidesDB's bench defaults (mapped onto 10.x: 2+2
    background threads, 64 MiB memtable, 512 B value separation, stall at 20 immutable
    memtables, min 5 levels, dividing offset 2, LZ4 when the library has it). A gap against
    the previous column is the options.
  * driver, tool options, tool's keys: also the tool's keys and values, which are C strings
    far shorter than its nominal sizes (sequential "k%06d": 7 bytes; random: 15
    alphanumerics; values "val_%010d": 14 bytes). This column is the figure comparable to
    what TidesDB's tool prints; what is left between it and the tool's own figure on the
    same machine is the version.
  * with --tool-src DIR (a TidesDB source tree, e.g. a checkout of v9.3.14), three more:
    the driver built against DIR's TidesDB (scripts/tidesdb_check.sh --driver-for), with the
    adapter's options and silt-bench's keys, then with the tool's options and keys: the same
    driver on another version, so the difference is the version; and TidesDB's own tool
    itself, built from DIR by scripts/tidesdb_check.sh --tool (one build per pattern, thread
    count and --num, which it fixes at compile time; batch 1000 only). Only the tool's Put
    phase is timed here: the script stops it once it prints that line.

Usage:
  cargo build --release -p silt-bench --features tidesdb
  python3 scripts/tidesdb_check.py [--num 1000000] [--repeat 3] [--dir /tmp] [--json FILE]
                                   [--cells seq:2:1000,random:2:1000] [--tool-src DIR]

How the loops line up:
  * Both split --num among the threads, each thread a contiguous slice (sequential keys: each
    writes its slice in order; the tool does the same with its index ranges).
  * One transaction per batch: begin, --batch puts, commit (the tool hard-codes 1000).
  * random: silt-bench's random_write draws keys uniformly with replacement over 0..num; the
    driver with silt-bench's keys does the same (SplitMix64); with the tool's keys, random
    15-character strings from rand(), as the tool.
  * Timing: wall time from the release of all threads to the end of the last one. silt-bench
    then flushes and waits for compactions (untimed); the driver closes the database (untimed,
    printed as close_seconds); the tool closes and reopens for its read phase (untimed).
"""

import argparse
import json
import os
import re
import signal
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SILT_BENCH = os.path.join(ROOT, "target", "release", "silt-bench")

# (pattern, threads, batch)
CELLS = [
    ("seq", 2, 1000),
    ("random", 2, 1000),
    ("seq", 1, 1000),
    ("random", 1, 1000),
]

# The driver variants: (column name, --options, --keys).
VARIANTS = [
    ("driver adapter-opts", "adapter", "silt"),
    ("driver tool-opts", "tool", "silt"),
    ("driver tool-opts tool-keys", "tool", "tool"),
]

WORKLOAD = {"seq": "seq_write", "random": "random_write"}

TOOL_PUT = re.compile(r"Put: (\d+) operations in ([\d.]+) ms \(([\d.]+) ops/sec\)")


def tool_binary(src, pattern, threads, num):
    out = subprocess.run(
        ["bash", os.path.join(ROOT, "scripts", "tidesdb_check.sh"), "--tool", src,
         "sequential" if pattern == "seq" else "random", str(threads), str(num)],
        check=True, capture_output=True, text=True).stdout
    return os.path.join(ROOT, out.strip().splitlines()[-1])


def tool(binary, base):
    """TidesDB's own tool, in a fresh directory (it makes `benchmark_db` in its working
    directory); its Put figure, then it is stopped (its later phases are not wanted)."""
    d = tempfile.mkdtemp(prefix="tdbtool-", dir=base)
    p = subprocess.Popen(["stdbuf", "-oL", binary], cwd=d, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, errors="replace",
                         start_new_session=True)
    try:
        for line in p.stdout:
            m = TOOL_PUT.search(line)
            if m:
                return float(m.group(3))
        raise SystemExit(f"TidesDB's tool printed no Put line (exit {p.wait()})")
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        shutil.rmtree(d, ignore_errors=True)


def driver(options, keys, pattern, threads, batch, num, base, src=None):
    d = tempfile.mkdtemp(prefix="tdbchk-", dir=base)
    try:
        cmd = ["bash", os.path.join(ROOT, "scripts", "tidesdb_check.sh")]
        if src:
            cmd += ["--driver-for", src]
        cmd += ["--options", options, "--keys", keys, "--pattern", pattern,
               "--threads", str(threads), "--batch", str(batch), "--num", str(num),
               "--key-bytes", "16", "--value-bytes", "100", "--cache-bytes", "67108864",
               "--dir", os.path.join(d, "db")]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.startswith("{"):
                r = json.loads(line)
                if r["status"] != "ok":
                    raise SystemExit(f"driver: {r}")
                return r["ops_per_sec"]
        raise SystemExit(f"driver printed no result:\n{out}")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def silt_bench(pattern, threads, batch, num, base):
    cmd = [SILT_BENCH, "run", "--engines", "tidesdb", "--workloads", WORKLOAD[pattern],
           "--threads", str(threads), "--batch", str(batch), "--num", str(num),
           "--key-bytes", "16", "--value-bytes", "100", "--sync", "none",
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
                    help="comma-separated pattern:threads:batch (default: the built-in list)")
    ap.add_argument("--tool-src", default=None,
                    help="a TidesDB source tree: also run TidesDB's own tool built from it")
    a = ap.parse_args()
    cells = CELLS
    if a.cells:
        cells = [(p, int(t), int(b)) for p, t, b in (c.split(":") for c in a.cells.split(","))]
    if not os.path.exists(SILT_BENCH):
        raise SystemExit("build first: cargo build --release -p silt-bench --features tidesdb")
    subprocess.run(["bash", os.path.join(ROOT, "scripts", "tidesdb_check.sh")], check=True,
                   stdout=subprocess.DEVNULL)
    base = a.dir or tempfile.mkdtemp(prefix="tidesdb-check-")
    cols = ["silt-bench"] + [v[0] for v in VARIANTS]
    tools = {}
    if a.tool_src:
        a.tool_src = os.path.abspath(a.tool_src)
        cols += ["other driver adapter-opts", "other driver tool-opts tool-keys", "tool"]
        for c in cells:
            if c[2] != 1000:
                raise SystemExit("--tool-src: TidesDB's tool writes batches of 1000 only")
            tools[c] = tool_binary(a.tool_src, c[0], c[1], a.num)
    res = {c: {k: [] for k in cols} for c in cells}
    for r in range(a.repeat):
        for c in cells:
            # A B A B: silt-bench, then each driver variant (and the tool), every round.
            res[c]["silt-bench"].append(silt_bench(*c, a.num, base))
            for name, options, keys in VARIANTS:
                res[c][name].append(driver(options, keys, *c, a.num, base))
            if c in tools:
                res[c]["other driver adapter-opts"].append(
                    driver("adapter", "silt", *c, a.num, base, a.tool_src))
                res[c]["other driver tool-opts tool-keys"].append(
                    driver("tool", "tool", *c, a.num, base, a.tool_src))
                res[c]["tool"].append(tool(tools[c], base))
            print(f"round {r + 1}: {c[0]} threads {c[1]} batch {c[2]}: "
                  + ", ".join(f"{k} {res[c][k][-1]:,.0f}/s" for k in cols), file=sys.stderr)
    print(f"| cell ({a.num:,} keys) | silt-bench (adapter) | driver, adapter options "
          "| driver, tool options | driver, tool options + tool keys |"
          + (" other version's driver, adapter options | other version's driver, tool options "
             "+ tool keys | other version's TidesDB tool |" if tools else ""))
    print("|---|---|---|---|---|" + ("---|---|---|" if tools else ""))
    for c in cells:
        s = statistics.median(res[c]["silt-bench"])
        row = [f"{s / 1e3:,.0f}K/s"]
        for name in cols[1:]:
            d = statistics.median(res[c][name])
            row.append(f"{d / 1e3:,.0f}K/s ({d / s:.2f}×)")
        print(f"| {c[0]}, {c[1]} thread{'s' if c[1] > 1 else ''}, batch {c[2]} | "
              + " | ".join(row) + " |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump([{"pattern": c[0], "threads": c[1], "batch": c[2], "num": a.num, **res[c]}
                       for c in cells], f, indent=1)


if __name__ == "__main__":
    main()
