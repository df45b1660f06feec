//! `silt-bench run`: db_bench-style workloads on the engines of [`crate::engine`].
//!
//! Each engine × workload × sync mode × thread count (× repeat) is one *cell*, and every
//! cell runs in a fresh child process (this binary re-executed with the hidden `cell`
//! subcommand), so its peak RSS, CPU and `/proc/self/io` counters are its own. The child
//! opens the engine in a fresh directory, preloads it if the workload reads (untimed, then
//! flushed and left to settle), runs the timed phase on `--threads` threads sharing one
//! engine handle, and prints one JSON line; the parent prints the lines (`json`), CSV rows
//! (`csv`) or a table of medians over `--repeat` (`table`).
//!
//! Workloads (names as in RocksDB's db_bench):
//!
//! * `fillseq`: `--num` puts, keys in ascending order (with N threads, each writes its own
//!   contiguous slice of the key space in order).
//! * `fillrandom`: `--num` puts, keys drawn from `--pattern` (default uniform random, with
//!   replacement, as db_bench) over `0..num`.
//! * `overwrite`: as `fillrandom`, on a database preloaded with all `--num` keys.
//! * `fillsync`: `fillrandom` with sync forced to `full`, `--num / 100` puts (LevelDB's
//!   db_bench).
//! * `readrandom`: `--reads` (default `--num`) point gets of keys from `--pattern`.
//! * `readseq`: one full forward iteration (N threads: each iterates its slice).
//! * `seekrandom`: `--reads` seeks of a reused per-thread cursor, each reading the one
//!   entry it lands on (db_bench's `seekrandom` with `seek_nexts = 0`).
//! * `scan` (alias `range`): `--reads` range reads of `--range-size` entries from a key
//!   drawn from `--pattern`, each through a new range iterator (`db.range(start..)`).
//!
//! * `delete`: deletes every one of the `--num` preloaded keys, `--batch` keys per write:
//!   in a random order by default (a permutation: each key once), in key order with
//!   `--pattern sequential` (each thread its slice), or drawn from a zipfian (keys repeat:
//!   absent keys are deleted again) with `--pattern zipfian`. Plain deletes, not single
//!   deletes.
//! * `queue` (seed 002, the l.i1 phase of iibench): on `--num` preloaded keys `0..num`, one
//!   thread inserts `num..2·num` in increasing order while another deletes `0..num` in
//!   increasing order at the same rate (the deleter never gets ahead of the inserter: its
//!   d-th delete waits for the d-th insert), with `single_delete` where the engine has one
//!   (silt) and a plain delete elsewhere. Always two threads and single-key writes. `ops` =
//!   inserts + deletes (`inserted` and `deleted` separately); `worst_delete_us_per_sec`
//!   is the worst delete latency in each elapsed second and `max_delete_us` the worst of
//!   all.
//! * `ycsba` … `ycsbf`, YCSB's core workloads on `--num` preloaded records, `--reads`
//!   (default `--num`) operations: A 50% read / 50% update; B 95% read / 5% update; C 100%
//!   read; D 95% read / 5% insert, reads from the `latest` distribution (a zipfian over
//!   recency: the newest record the most popular); E 95% scan / 5% insert, scans of a
//!   length uniform in `1..=--range-size` (default 100, YCSB's `maxscanlength`); F 50%
//!   read / 50% read-modify-write (a get then a put of the same key, one operation).
//!   Requests (all but D's) are YCSB's scrambled zipfian (`--zipf-theta`, default 0.99,
//!   over the `--num` preloaded records; `--pattern` is ignored). Inserts take the next
//!   new key (`num`, `num+1`, …). A record is one value of `--value-bytes` (YCSB's is 10
//!   fields × 100 B, and an update writes one field; here an update rewrites the value).
//!
//! * `tpcc`: TPC-C-like transactions on `--warehouses`, `--threads` terminals for
//!   `--duration` seconds, tables at `--tpcc-scale` of TPC-C's sizes; reports `tpmc`,
//!   `nopm`, `abort_rate` and per-transaction latencies (`tpcc`), and fails the cell if a
//!   consistency condition does not hold at the end (`crate::tpcc`, docs/bench.md).
//! * `queue_indexed` (seed 002, iibench's l.i1 with its three secondary indexes, in
//!   transactions): `--num` rows preloaded; for `--duration` seconds one thread inserts
//!   `--batch` rows per transaction at the high end while another deletes the lowest
//!   `--batch` rows per transaction from where its last delete ended, finding the lowest
//!   row from the table's start every `--resync-get-min` deletes, as iibench does
//!   (single deletes where the engine has them), each row
//!   with its index entries; `inserted_per_sec`, `worst_delete_us_per_sec`,
//!   `max_delete_us`, `abort_rate`; the table is checked at the end (`iib.rs`,
//!   `crate::iib`).
//! * `txn_batch_sweep` (seed 002's batch sweep): `--num` rows with their three index
//!   entries at `--batch` rows per transaction (one cell per size): rows/s,
//!   `txn.us_per_row`, peak RSS; checked at the end.
//! * `mixed`: on `--num` preloaded keys, `--reads` (default `--num`) operations with keys
//!   from `--pattern`, each a get (`--read-percent`, default 50) or else a put.
//!
//! The seed 000/003 workloads (TidesDB's benchtool against RocksDB) are named presets of
//! these ([`PRESETS`]): `seq_write`, `random_write`, `random_read`, `random_mixed`,
//! `zipf_write`, `zipf_mixed`, `random_delete`, `large_value` (256 B keys, 4 KiB values),
//! `small_value` (64 B values), `random_seek`, `seq_seek`, `zipf_seek`, `range100`,
//! `range1000`, `seq_range` (range scans from sequential start keys) and `iterate`;
//! `--workloads seeds` names them all. Their JSON lines carry the preset's name as
//! `workload` and the workload it is built on as `base_workload`.
//!
//! Read workloads, `overwrite`, `delete`, `queue`, `mixed` and YCSB preload all `--num` keys (in
//! `--load-order`, batches of 1000) before the timed phase. `--batch` (a comma-separated
//! list makes one cell per size: a batch-size sweep) applies to the fills and `delete`;
//! every other workload writes one key at a time and reports `batch` 1.
//!
//! Keys are the key index as 8 big-endian bytes padded with `'0'` to `--key-bytes` (so key
//! order is numeric order); values are slices of a 1 MiB pseudo-random buffer.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use clap::Args;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

mod child;
mod iib;
mod keys;
mod parent;
mod tpcc;
mod worker;
mod workload;

pub use child::cell;
pub use parent::{progress, run, run_matrix, run_matrix_except, CellKey};
#[cfg(test)]
pub(crate) use workload::PRESETS;

/// Whether the named workload (a `run` workload or a seed workload) preloads keys before
/// its timed phase.
pub fn preloads(name: &str) -> bool {
    workload::resolve(name, &RunArgs::defaults()).is_ok_and(|(w, _, _)| w.preloads())
}

use crate::engine::{self, Engine, EngineConfig};
use crate::output::{csv_header, csv_row, engine_json_line, engine_table, EngineResult};
use crate::stats::{latency_histogram, names, split};
use crate::sysstat;

/// Flags of `silt-bench run`. Names are a contract: add, never rename.
#[derive(Args, Debug, Clone, Serialize, Deserialize)]
pub struct RunArgs {
    /// Comma-separated engines: silt, rocksdb, tidesdb, sqlite, fjall, redb (each peer
    /// behind the cargo feature of its name; sqlite, fjall and redb are default features,
    /// rocksdb and tidesdb need native builds); silt-inline is silt with key-value
    /// separation off, for A/B. An engine not compiled in is reported as unavailable.
    /// Their settings: docs/bench.md.
    #[arg(long, default_value = "silt")]
    pub engines: String,
    /// Comma-separated workloads: fillseq, fillrandom, overwrite, fillsync, readrandom,
    /// readseq, seekrandom, scan (alias range), delete, queue, mixed, ycsba, ycsbb, ycsbc,
    /// ycsbd, ycsbe, ycsbf; the transactional tpcc, queue_indexed and txn_batch_sweep; the seed 000/003 workloads seq_write, random_write, random_read,
    /// random_mixed, zipf_write, zipf_mixed, random_delete, large_value, small_value,
    /// random_seek, seq_seek, zipf_seek, range100, range1000, seq_range, iterate; `seeds`
    /// for all of the seed workloads.
    #[arg(long, default_value = "fillseq,fillrandom,readrandom,seekrandom,scan")]
    pub workloads: String,
    /// Keys: puts of a fill, keys preloaded for reads and `overwrite`.
    #[arg(long, default_value_t = 1_000_000)]
    pub num: u64,
    /// Operations of readrandom, seekrandom, scan and the YCSB workloads (default: --num).
    #[arg(long)]
    pub reads: Option<u64>,
    /// Worker threads sharing one engine handle; comma-separated for several cells.
    #[arg(long, default_value = "1")]
    pub threads: String,
    /// Entries per write (or delete) batch of the fills and `delete`, rows per transaction
    /// of `queue_indexed` and `txn_batch_sweep`; comma-separated for several cells (a
    /// batch-size sweep: 1,10,100,1000).
    #[arg(long, default_value = "1")]
    pub batch: String,
    /// Key size in bytes (8-byte big-endian index, padded; under 8 keeps the low bytes).
    #[arg(long, default_value_t = 16)]
    pub key_bytes: usize,
    /// Value size in bytes.
    #[arg(long, default_value_t = 100)]
    pub value_bytes: usize,
    /// Key order of every workload but fillseq (always sequential), readseq (a full
    /// scan), queue (always sequential) and YCSB (its own distributions): sequential, random
    /// (uniform; for delete, a random permutation) or zipfian (scrambled, --zipf-theta).
    #[arg(long, default_value = "random")]
    pub pattern: String,
    /// Skew of --pattern zipfian, in (0, 1).
    #[arg(long, default_value_t = 0.99)]
    pub zipf_theta: f64,
    /// none or full (comma-separated for several cells). fillsync is always full.
    #[arg(long, default_value = "none")]
    pub sync: String,
    /// Entries per `scan`; the longest YCSB E scan.
    #[arg(long, default_value_t = 100)]
    pub range_size: usize,
    /// Block cache budget in bytes.
    #[arg(long, default_value_t = 64 << 20)]
    pub cache_bytes: u64,
    /// Where the database directories go (one fresh subdirectory per cell, removed after);
    /// default a new temporary directory.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Emulate a slower device: every fsync/fdatasync of a file takes at least this many µs
    /// more, for every engine alike: silt through silt-wal's `DelayFs`, the peers through
    /// an LD_PRELOAD shim (`shim/fsync_delay.c`) with the same device model.
    #[arg(long, default_value_t = 0)]
    pub fsync_delay_us: u64,
    /// merged or serial (see `silt-bench commit --help`).
    #[arg(long, default_value = "merged")]
    pub fsync_delay_model: String,
    /// table (medians over repeats), json (one object per line per cell) or csv.
    #[arg(long, default_value = "table")]
    pub format: String,
    /// Run the whole matrix this many times, interleaved (A B A B); the table shows medians.
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    /// Seed of the key generators.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Order of the untimed preload: random (a full permutation of 0..num) or sequential.
    #[arg(long, default_value = "random")]
    pub load_order: String,
    /// Keep each cell's database directory instead of removing it.
    #[arg(long)]
    pub keep: bool,
    /// `mixed`: the share of operations that are gets (the rest are puts), in percent.
    #[arg(long, default_value_t = 50)]
    #[serde(default = "default_read_percent")]
    pub read_percent: u32,
    /// Keep a load image per engine and load (engine, --num, key and value sizes, seed,
    /// --load-order, sync) in this directory: the first cell that preloads loads, settles,
    /// closes the engine and copies its directory here; later cells with the same load
    /// copy the image instead of loading again. Every preloading cell then reopens the
    /// engine before its timed phase, so cells with and without an image start alike.
    /// `suite` uses it; unset, every cell loads.
    #[arg(long)]
    #[serde(default)]
    pub load_cache: Option<PathBuf>,
    /// No per-cell progress bars or lines on stderr: the caller draws its own (`suite`
    /// does: one bar for the whole suite).
    #[arg(long)]
    #[serde(default)]
    pub quiet: bool,
    /// `tpcc`: warehouses (each terminal thread has a home warehouse: thread t serves
    /// warehouse t % W + 1).
    #[arg(long, default_value_t = 1)]
    #[serde(default = "default_warehouses")]
    pub warehouses: u32,
    /// `tpcc`, `queue_indexed`: seconds of the timed phase (the mix, or the inserter, runs
    /// until then).
    #[arg(long, default_value_t = 60.0)]
    #[serde(default = "default_duration")]
    pub duration: f64,
    /// `tpcc`: the share of TPC-C's table sizes per warehouse, in (0, 1] (items, customers,
    /// orders; the ten districts stay): 0.01 for a tiny run.
    #[arg(long, default_value_t = 1.0)]
    #[serde(default = "default_tpcc_scale")]
    pub tpcc_scale: f64,
    /// `queue_indexed`: every this many delete transactions the deleter asks the table
    /// for its lowest row, walking from the table's start (iibench's `--resync_get_min`,
    /// whose default is 1000); in between it deletes from where the last delete ended
    /// (iibench's `transactionid >= min_trxid`). 1: before every delete; 0: once, at the
    /// start.
    #[arg(long, default_value_t = 1000)]
    #[serde(default = "default_resync_get_min")]
    pub resync_get_min: u64,
}

fn default_resync_get_min() -> u64 {
    1000
}

fn default_warehouses() -> u32 {
    1
}

fn default_duration() -> f64 {
    60.0
}

fn default_tpcc_scale() -> f64 {
    1.0
}

fn default_read_percent() -> u32 {
    50
}

impl RunArgs {
    /// Every flag at its default (what `silt-bench run` alone means).
    pub fn defaults() -> RunArgs {
        #[derive(clap::Parser)]
        struct Wrap {
            #[command(flatten)]
            a: RunArgs,
        }
        <Wrap as clap::Parser>::parse_from(["run"]).a
    }
}

/// The hidden `cell` subcommand: one cell, run by the parent in a child process.
#[derive(Args, Debug, Clone)]
pub struct CellArgs {
    /// The cell, as JSON.
    #[arg(long)]
    spec: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct CellSpec {
    args: RunArgs,
    engine: String,
    workload: String,
    sync: String,
    threads: usize,
    batch: usize,
    dir: PathBuf,
    repeat: usize,
    date: String,
    /// The seed workload's name when `workload` is the base of one.
    #[serde(default)]
    label: Option<String>,
    /// This cell's place in the run, for the progress bars: (1-based index, total).
    #[serde(default)]
    place: (usize, usize),
    /// The fsync-delay shim to preload (peers with `--fsync-delay-us`), if any.
    #[serde(default)]
    shim: Option<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::keys::*;
    use super::worker::*;
    use super::workload::*;
    use super::*;

    #[test]
    fn keys_sort_as_numbers() {
        let mut prev = key(0, 16);
        for i in [1u64, 2, 255, 256, 65_535, 1 << 40] {
            let k = key(i, 16);
            assert_eq!(k.len(), 16);
            assert!(k > prev, "{i}");
            prev = k;
        }
        assert_eq!(key(258, 2), vec![1, 2]);
        assert_eq!(&key(1, 10)[8..], b"00");
    }

    #[test]
    fn permutation_hits_every_key_once() {
        for n in [1u64, 2, 10, 1000, 4096, 999_983] {
            let mut seen = vec![false; n as usize];
            for k in permutation(n, 7) {
                assert!(!seen[k as usize], "n={n} k={k} twice");
                seen[k as usize] = true;
            }
            assert!(seen.iter().all(|&s| s), "n={n}");
        }
    }

    #[test]
    fn zipf_is_skewed_and_in_range() {
        let z = Arc::new(Zipf::new(10_000, 0.99));
        let mut g = KeyGen::Zipf {
            rng: Rng::new(1),
            z: z.clone(),
        };
        let mut counts = std::collections::HashMap::new();
        for _ in 0..100_000 {
            let k = g.next();
            assert!(k < 10_000);
            *counts.entry(k).or_insert(0u32) += 1;
        }
        let mut c: Vec<u32> = counts.values().copied().collect();
        c.sort_unstable_by(|a, b| b.cmp(a));
        // The hottest key of a theta-0.99 Zipf over 10k items gets ~10% of draws.
        assert!(c[0] > 5_000, "{}", c[0]);
        assert!(counts.len() > 1_000);
        let mut r = Rng::new(3);
        assert!((0..1000).all(|_| r.below(7) < 7));
    }

    #[test]
    fn ycsb_mixes_are_the_core_ones() {
        let share = |w: Workload, op: Op| {
            let mut r = Rng::new(9);
            (0..100_000).filter(|_| ycsb_op(w, r.unit()) == op).count() as f64 / 100_000.0
        };
        let near = |x: f64, y: f64| (x - y).abs() < 0.01;
        assert!(near(share(Workload::YcsbA, Op::Update), 0.5));
        assert!(near(share(Workload::YcsbB, Op::Update), 0.05));
        assert_eq!(share(Workload::YcsbC, Op::Read), 1.0);
        assert!(near(share(Workload::YcsbD, Op::Insert), 0.05));
        assert!(near(share(Workload::YcsbE, Op::Scan), 0.95));
        assert!(near(share(Workload::YcsbF, Op::ReadModifyWrite), 0.5));
    }

    #[test]
    fn delete_permutation_slices_cover_every_key_once() {
        let perm = Perm::new(1000, 5);
        let mut seen = vec![false; 1000];
        for t in 0..3 {
            let (lo, hi) = slice(1000, 3, t);
            let mut g = KeyGen::Perm {
                perm,
                lo,
                len: hi - lo,
                i: 0,
            };
            for _ in lo..hi {
                let k = g.next() as usize;
                assert!(!seen[k], "{k} twice");
                seen[k] = true;
            }
        }
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn slices_and_splits_cover_exactly() {
        assert_eq!(split(10, 3), vec![4, 3, 3]);
        let mut next = 0;
        for t in 0..7 {
            let (lo, hi) = slice(100, 7, t);
            assert_eq!(lo, next);
            next = hi;
        }
        assert_eq!(next, 100);
    }

    #[test]
    fn workload_names_round_trip() {
        for n in [
            "fillseq",
            "fillrandom",
            "overwrite",
            "fillsync",
            "readrandom",
            "readseq",
            "seekrandom",
            "scan",
            "delete",
            "queue",
            "ycsba",
            "ycsbb",
            "ycsbc",
            "ycsbd",
            "ycsbe",
            "ycsbf",
            "tpcc",
            "queue_indexed",
            "txn_batch_sweep",
        ] {
            assert_eq!(Workload::parse(n).unwrap().name(), n);
        }
        assert_eq!(Workload::parse("range").unwrap(), Workload::Scan);
        assert!(Workload::parse("nope").is_err());
    }
}
