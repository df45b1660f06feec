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

use crate::engine::{self, Engine, EngineConfig};
use crate::output::{csv_header, csv_row, engine_json_line, engine_table, EngineResult};
use crate::stats::{latency_histogram, names, split};
use crate::sysstat;

/// Flags of `silt-bench run`. Names are a contract: add, never rename.
#[derive(Args, Debug, Clone, Serialize, Deserialize)]
pub struct RunArgs {
    /// Comma-separated engines: silt, rocksdb, tidesdb, sqlite, fjall, redb (each peer
    /// behind the cargo feature of its name; sqlite, fjall and redb are default features,
    /// rocksdb and tidesdb need native builds). An engine not compiled in is reported as
    /// unavailable. Their settings: docs/bench.md.
    #[arg(long, default_value = "silt")]
    pub engines: String,
    /// Comma-separated workloads: fillseq, fillrandom, overwrite, fillsync, readrandom,
    /// readseq, seekrandom, scan (alias range), delete, queue, mixed, ycsba, ycsbb, ycsbc,
    /// ycsbd, ycsbe, ycsbf; the seed 000/003 workloads seq_write, random_write, random_read,
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
    /// Entries per write (or delete) batch of the fills and `delete`; comma-separated for
    /// several cells (a batch-size sweep: 1,10,100,1000).
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

// ------------------------------------------------------------------------------ workloads

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    FillSeq,
    FillRandom,
    Overwrite,
    FillSync,
    ReadRandom,
    ReadSeq,
    SeekRandom,
    Scan,
    Delete,
    Queue,
    Mixed,
    YcsbA,
    YcsbB,
    YcsbC,
    YcsbD,
    YcsbE,
    YcsbF,
}

impl Workload {
    pub fn parse(s: &str) -> Result<Workload, String> {
        Ok(match s {
            "fillseq" => Workload::FillSeq,
            "fillrandom" => Workload::FillRandom,
            "overwrite" => Workload::Overwrite,
            "fillsync" => Workload::FillSync,
            "readrandom" => Workload::ReadRandom,
            "readseq" => Workload::ReadSeq,
            "seekrandom" => Workload::SeekRandom,
            "scan" | "range" => Workload::Scan,
            "delete" => Workload::Delete,
            "queue" => Workload::Queue,
            "mixed" => Workload::Mixed,
            "ycsba" => Workload::YcsbA,
            "ycsbb" => Workload::YcsbB,
            "ycsbc" => Workload::YcsbC,
            "ycsbd" => Workload::YcsbD,
            "ycsbe" => Workload::YcsbE,
            "ycsbf" => Workload::YcsbF,
            other => {
                return Err(format!(
                    "--workloads: unknown {other:?} (fillseq, fillrandom, overwrite, fillsync, \
                     readrandom, readseq, seekrandom, scan, delete, queue, mixed, ycsba, \
                     ycsbb, ycsbc, ycsbd, ycsbe, ycsbf; the seed workloads {}; or `seeds` \
                     for all of those)",
                    PRESETS
                        .iter()
                        .map(|p| format!("{} ({})", p.name, p.about))
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            }
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Workload::FillSeq => "fillseq",
            Workload::FillRandom => "fillrandom",
            Workload::Overwrite => "overwrite",
            Workload::FillSync => "fillsync",
            Workload::ReadRandom => "readrandom",
            Workload::ReadSeq => "readseq",
            Workload::SeekRandom => "seekrandom",
            Workload::Scan => "scan",
            Workload::Delete => "delete",
            Workload::Queue => "queue",
            Workload::Mixed => "mixed",
            Workload::YcsbA => "ycsba",
            Workload::YcsbB => "ycsbb",
            Workload::YcsbC => "ycsbc",
            Workload::YcsbD => "ycsbd",
            Workload::YcsbE => "ycsbe",
            Workload::YcsbF => "ycsbf",
        }
    }

    fn fills(self) -> bool {
        matches!(
            self,
            Workload::FillSeq | Workload::FillRandom | Workload::Overwrite | Workload::FillSync
        )
    }

    /// Only writes (puts or deletes) in the timed phase: `found` is `null`.
    fn writes(self) -> bool {
        self.fills() || matches!(self, Workload::Delete | Workload::Queue)
    }

    /// Takes `--batch` (the others write one key at a time).
    fn batched(self) -> bool {
        self.fills() || self == Workload::Delete
    }

    /// Writes anything in the timed phase (then a final flush and settle follow it).
    fn mutates(self) -> bool {
        self.writes() || self == Workload::Mixed || (self.ycsb() && self != Workload::YcsbC)
    }

    fn ycsb(self) -> bool {
        matches!(
            self,
            Workload::YcsbA
                | Workload::YcsbB
                | Workload::YcsbC
                | Workload::YcsbD
                | Workload::YcsbE
                | Workload::YcsbF
        )
    }

    fn preloads(self) -> bool {
        !matches!(
            self,
            Workload::FillSeq | Workload::FillRandom | Workload::FillSync
        )
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pattern {
    Sequential,
    Random,
    Zipfian,
    /// YCSB D's request distribution (not a `--pattern`).
    Latest,
}

impl Pattern {
    fn parse(s: &str) -> Result<Pattern, String> {
        match s {
            "sequential" | "seq" => Ok(Pattern::Sequential),
            "random" | "uniform" => Ok(Pattern::Random),
            "zipfian" | "zipf" => Ok(Pattern::Zipfian),
            other => Err(format!(
                "--pattern: unknown {other:?} (sequential, random, zipfian)"
            )),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Pattern::Sequential => "sequential",
            Pattern::Random => "random",
            Pattern::Zipfian => "zipfian",
            Pattern::Latest => "latest",
        }
    }
}

// ------------------------------------------------------------------------------ seed workloads

/// A workload of seeds 000 and 003 (TidesDB's benchtool against RocksDB), by name: one of
/// `run`'s own workloads with a key pattern, sizes or a range length of its own. The
/// other flags (`--num`, `--threads`, `--batch`, `--sync`, …) apply as usual; its JSON
/// lines carry the name as `workload` and the workload it is built on as `base_workload`.
#[derive(Clone, Copy, Debug)]
pub struct Preset {
    pub name: &'static str,
    pub base: Workload,
    pub pattern: Option<&'static str>,
    pub key_bytes: Option<usize>,
    pub value_bytes: Option<usize>,
    pub range_size: Option<usize>,
    /// `mixed`'s share of gets (the seeds' mixes are 50/50 whatever `--read-percent` says).
    pub read_percent: Option<u32>,
    /// The seeds' name for it.
    pub about: &'static str,
}

const fn preset(name: &'static str, base: Workload, about: &'static str) -> Preset {
    Preset {
        name,
        base,
        pattern: None,
        key_bytes: None,
        value_bytes: None,
        range_size: None,
        read_percent: None,
        about,
    }
}

const fn with_pattern(mut p: Preset, pattern: &'static str) -> Preset {
    p.pattern = Some(pattern);
    p
}

/// The seed 000/003 matrix (`--workloads seeds` names them all).
pub const PRESETS: &[Preset] = &[
    preset("seq_write", Workload::FillSeq, "sequential write"),
    with_pattern(
        preset("random_write", Workload::FillRandom, "random write"),
        "random",
    ),
    with_pattern(
        preset(
            "random_read",
            Workload::ReadRandom,
            "random read (after load)",
        ),
        "random",
    ),
    Preset {
        read_percent: Some(50),
        ..with_pattern(
            preset("random_mixed", Workload::Mixed, "mixed 50/50 read/write"),
            "random",
        )
    },
    with_pattern(
        preset("zipf_write", Workload::FillRandom, "zipfian write"),
        "zipfian",
    ),
    Preset {
        read_percent: Some(50),
        ..with_pattern(
            preset("zipf_mixed", Workload::Mixed, "zipfian mixed 50/50"),
            "zipfian",
        )
    },
    with_pattern(
        preset("random_delete", Workload::Delete, "delete"),
        "random",
    ),
    Preset {
        key_bytes: Some(256),
        value_bytes: Some(4096),
        ..with_pattern(
            preset(
                "large_value",
                Workload::FillRandom,
                "large values (256 B keys, 4 KiB values)",
            ),
            "random",
        )
    },
    Preset {
        value_bytes: Some(64),
        ..with_pattern(
            preset("small_value", Workload::FillRandom, "small values (64 B)"),
            "random",
        )
    },
    with_pattern(
        preset("random_seek", Workload::SeekRandom, "random seek"),
        "random",
    ),
    with_pattern(
        preset("seq_seek", Workload::SeekRandom, "sequential seek"),
        "sequential",
    ),
    with_pattern(
        preset("zipf_seek", Workload::SeekRandom, "zipfian seek"),
        "zipfian",
    ),
    Preset {
        range_size: Some(100),
        ..with_pattern(
            preset("range100", Workload::Scan, "range scans of 100 keys"),
            "random",
        )
    },
    Preset {
        range_size: Some(1000),
        ..with_pattern(
            preset("range1000", Workload::Scan, "range scans of 1000 keys"),
            "random",
        )
    },
    Preset {
        range_size: Some(100),
        ..with_pattern(
            preset("seq_range", Workload::Scan, "sequential range (100 keys)"),
            "sequential",
        )
    },
    preset("iterate", Workload::ReadSeq, "full iteration"),
];

/// A `--workloads` entry: one of `run`'s workloads, or a seed workload with its settings.
fn resolve(name: &str, a: &RunArgs) -> Result<(Workload, Option<&'static str>, RunArgs), String> {
    if let Ok(w) = Workload::parse(name) {
        return Ok((w, None, a.clone()));
    }
    let p = PRESETS
        .iter()
        .find(|p| p.name == name)
        .ok_or_else(|| Workload::parse(name).unwrap_err())?;
    let mut args = a.clone();
    if let Some(x) = p.pattern {
        args.pattern = x.into();
    }
    if let Some(x) = p.key_bytes {
        args.key_bytes = x;
    }
    if let Some(x) = p.value_bytes {
        args.value_bytes = x;
    }
    if let Some(x) = p.range_size {
        args.range_size = x;
    }
    if let Some(x) = p.read_percent {
        args.read_percent = x;
    }
    Ok((p.base, Some(p.name), args))
}

/// `--workloads` as a list, with `seeds` expanded to every seed workload.
fn workload_names(a: &RunArgs) -> Vec<String> {
    names(&a.workloads)
        .into_iter()
        .flat_map(|w| {
            if w == "seeds" {
                PRESETS.iter().map(|p| p.name.to_string()).collect()
            } else {
                vec![w]
            }
        })
        .collect()
}

// ------------------------------------------------------------------------------ keys

/// SplitMix64: a small, fast, well-mixed generator (and its finalizer as a hash).
#[derive(Clone, Debug)]
struct Rng(u64);

fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(mix64(seed ^ 0x5117_db00_5eed_0000))
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix64(self.0)
    }

    /// Uniform in `0..n` (multiply-shift; bias below 2^-64 · n).
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// YCSB's Zipfian generator (Gray et al.), item 0 the most popular; callers scramble the
/// rank so hot keys are spread over the key space.
#[derive(Debug)]
struct Zipf {
    n: u64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
}

impl Zipf {
    fn new(n: u64, theta: f64) -> Zipf {
        let zetan: f64 = (1..=n).map(|i| 1.0 / (i as f64).powf(theta)).sum();
        let zeta2 = 1.0 + 0.5f64.powf(theta);
        let alpha = 1.0 / (1.0 - theta);
        let eta = (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan);
        Zipf {
            n,
            theta,
            alpha,
            zetan,
            eta,
        }
    }

    fn rank(&self, u: f64) -> u64 {
        let uz = u * self.zetan;
        if uz < 1.0 || self.n <= 1 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1;
        }
        let r = self.n as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha);
        (r as u64).min(self.n - 1)
    }
}

/// One worker's stream of key indexes.
enum KeyGen {
    /// `lo, lo+1, …` wrapping within `lo..lo+len`.
    Seq {
        lo: u64,
        len: u64,
        i: u64,
    },
    Uniform {
        rng: Rng,
        n: u64,
    },
    Zipf {
        rng: Rng,
        z: Arc<Zipf>,
    },
    /// Positions `lo, lo+1, …` (wrapping within `lo..lo+len`) of a permutation.
    Perm {
        perm: Perm,
        lo: u64,
        len: u64,
        i: u64,
    },
}

impl KeyGen {
    fn next(&mut self) -> u64 {
        match self {
            KeyGen::Seq { lo, len, i } => {
                let k = *lo + *i % *len;
                *i += 1;
                k
            }
            KeyGen::Uniform { rng, n } => rng.below(*n),
            KeyGen::Zipf { rng, z } => scrambled(z, rng),
            KeyGen::Perm { perm, lo, len, i } => {
                let k = perm.at(*lo + *i % *len);
                *i += 1;
                k
            }
        }
    }
}

/// A scrambled zipfian draw (YCSB's `ScrambledZipfianGenerator`): the rank hashed over
/// the key space, so hot keys are spread out.
fn scrambled(z: &Zipf, rng: &mut Rng) -> u64 {
    mix64(z.rank(rng.unit()) ^ 0x2545_f491_4f6c_dd1d) % z.n
}

/// The slice `lo..hi` of `0..num` that thread `t` of `threads` owns.
fn slice(num: u64, threads: usize, t: usize) -> (u64, u64) {
    let n = threads as u64;
    let t = t as u64;
    let lo = (u128::from(num) * u128::from(t) / u128::from(n)) as u64;
    let hi = (u128::from(num) * u128::from(t + 1) / u128::from(n)) as u64;
    (lo, hi)
}

/// Writes key `idx` into `out` (`out.len()` = key bytes).
fn make_key(idx: u64, out: &mut [u8]) {
    let be = idx.to_be_bytes();
    if out.len() >= 8 {
        out[..8].copy_from_slice(&be);
        out[8..].fill(b'0');
    } else {
        let n = out.len();
        out.copy_from_slice(&be[8 - n..]);
    }
}

fn key(idx: u64, key_bytes: usize) -> Vec<u8> {
    let mut k = vec![0; key_bytes];
    make_key(idx, &mut k);
    k
}

const VALUE_POOL: usize = 1 << 20;

/// Values: slices of a pseudo-random 1 MiB buffer, at a position picked by the key.
struct Values {
    buf: Vec<u8>,
    len: usize,
}

impl Values {
    fn new(seed: u64, len: usize) -> Values {
        let mut rng = Rng::new(seed ^ 0x7a1e);
        let mut buf = Vec::with_capacity(VALUE_POOL + len + 8);
        while buf.len() < VALUE_POOL + len {
            buf.extend_from_slice(&rng.next_u64().to_le_bytes());
        }
        Values { buf, len }
    }

    fn get(&self, idx: u64, salt: u64) -> &[u8] {
        let off = (mix64(idx ^ salt.rotate_left(32)) % VALUE_POOL as u64) as usize;
        &self.buf[off..off + self.len]
    }
}

/// A full permutation of `0..num` (a stride walk, the stride coprime to num): every key
/// once, in an order spread over the key space.
#[derive(Clone, Copy, Debug)]
struct Perm {
    num: u64,
    stride: u64,
    off: u64,
}

impl Perm {
    fn new(num: u64, seed: u64) -> Perm {
        fn gcd(a: u64, b: u64) -> u64 {
            if b == 0 {
                a
            } else {
                gcd(b, a % b)
            }
        }
        let mut stride = ((num as f64) * 0.618_033_988_75) as u64 | 1;
        while num > 1 && gcd(stride % num, num) != 1 {
            stride += 1;
        }
        let off = if num > 0 { mix64(seed) % num } else { 0 };
        Perm { num, stride, off }
    }

    /// The `i`-th key (`i < num`).
    fn at(&self, i: u64) -> u64 {
        ((u128::from(i) * u128::from(self.stride) + u128::from(self.off)) % u128::from(self.num))
            as u64
    }
}

/// [`Perm`] as an iterator, for random preloads.
fn permutation(num: u64, seed: u64) -> impl Iterator<Item = u64> {
    let p = Perm::new(num, seed);
    (0..num).map(move |i| p.at(i))
}

// ------------------------------------------------------------------------------ parent

fn validate(a: &RunArgs) -> Result<(), String> {
    if !["table", "json", "csv"].contains(&a.format.as_str()) {
        return Err(format!(
            "--format: {:?} is not table, json or csv",
            a.format
        ));
    }
    if a.num == 0 {
        return Err("--num must be positive".into());
    }
    if a.key_bytes == 0 || (a.key_bytes < 8 && a.num > 1u64 << (8 * a.key_bytes)) {
        return Err(format!(
            "--key-bytes {} cannot hold {} distinct keys",
            a.key_bytes, a.num
        ));
    }
    if a.range_size == 0 || a.reads == Some(0) {
        return Err("--range-size and --reads must be positive".into());
    }
    for b in names(&a.batch) {
        match b.parse::<usize>() {
            Ok(n) if n > 0 => {}
            _ => return Err(format!("--batch: {b:?} is not a positive count")),
        }
    }
    Pattern::parse(&a.pattern)?;
    if !(a.zipf_theta > 0.0 && a.zipf_theta < 1.0) {
        return Err("--zipf-theta must be in (0, 1)".into());
    }
    if a.load_order != "random" && a.load_order != "sequential" {
        return Err("--load-order: random or sequential".into());
    }
    if a.fsync_delay_model != "merged" && a.fsync_delay_model != "serial" {
        return Err("--fsync-delay-model: merged or serial".into());
    }
    for s in names(&a.sync) {
        if s != "none" && s != "full" {
            return Err(format!("--sync: unknown mode {s:?} (none, full)"));
        }
    }
    for t in names(&a.threads) {
        match t.parse::<usize>() {
            Ok(n) if n > 0 => {}
            _ => return Err(format!("--threads: {t:?} is not a positive count")),
        }
    }
    for w in workload_names(a) {
        let (_, _, args) = resolve(&w, a)?;
        if args.key_bytes < 8 && a.num > 1u64 << (8 * args.key_bytes) {
            return Err(format!("{w}: --key-bytes too small for --num"));
        }
    }
    if a.read_percent > 100 {
        return Err("--read-percent must be in 0..=100".into());
    }
    if names(&a.engines).is_empty() || names(&a.workloads).is_empty() || names(&a.batch).is_empty()
    {
        return Err("--engines, --workloads and --batch must name at least one".into());
    }
    Ok(())
}

/// A result for a cell that did not run (or whose child failed).
fn not_run(spec: &CellSpec, status: &str, error: String) -> EngineResult {
    let a = &spec.args;
    let w = Workload::parse(&spec.workload).ok();
    let base = w.map_or(spec.workload.clone(), |w| w.name().to_string());
    EngineResult {
        engine: spec.engine.clone(),
        workload: spec.label.clone().unwrap_or_else(|| base.clone()),
        status: status.into(),
        error: Some(error),
        threads: spec.threads,
        batch: spec.batch,
        sync: if w == Some(Workload::FillSync) {
            "full".into()
        } else {
            spec.sync.clone()
        },
        pattern: pattern_of(w, a).map_or(a.pattern.clone(), |p| p.name().to_string()),
        num: a.num,
        key_bytes: a.key_bytes,
        value_bytes: a.value_bytes,
        range_size: matches!(w, Some(Workload::Scan | Workload::YcsbE)).then_some(a.range_size),
        cache_bytes: a.cache_bytes,
        fsync_delay_us: a.fsync_delay_us,
        ops: None,
        found: None,
        seconds: None,
        ops_per_sec: None,
        p50_us: None,
        p95_us: None,
        p99_us: None,
        p999_us: None,
        max_us: None,
        cpu_user_s: None,
        cpu_sys_s: None,
        peak_rss_bytes: None,
        device_write_bytes: None,
        proc_write_bytes: None,
        cancelled_write_bytes: None,
        syscall_write_bytes: None,
        disk_write_bytes: None,
        logical_write_bytes: None,
        live_bytes: None,
        db_bytes: None,
        db_alloc_bytes: None,
        write_amp: None,
        space_amp: None,
        syscall_write_amp: None,
        disk_write_amp: None,
        load_seconds: None,
        post_seconds: None,
        post_cpu_s: None,
        repeat: spec.repeat,
        date: spec.date.clone(),
        engine_stats: None,
        inserted: None,
        deleted: None,
        worst_delete_us_per_sec: None,
        max_delete_us: None,
        base_workload: spec.label.is_some().then_some(base),
        read_percent: (w == Some(Workload::Mixed)).then_some(a.read_percent),
        delayed_fsyncs: None,
    }
}

/// How many fsyncs the preloaded fsync-delay shim delayed in this process (`None` without
/// the shim).
fn shim_delayed_calls() -> Option<u64> {
    // SAFETY: dlsym with a NUL-terminated name; the symbol, when the shim is preloaded, is
    // `uint64_t silt_fsync_delay_calls(void)`.
    unsafe {
        let f = libc::dlsym(libc::RTLD_DEFAULT, c"silt_fsync_delay_calls".as_ptr());
        if f.is_null() {
            return None;
        }
        let f: extern "C" fn() -> u64 = std::mem::transmute(f);
        Some(f())
    }
}

fn pattern_of(w: Option<Workload>, a: &RunArgs) -> Option<Pattern> {
    match w? {
        Workload::FillSeq | Workload::ReadSeq | Workload::Queue => Some(Pattern::Sequential),
        Workload::YcsbD => Some(Pattern::Latest),
        w if w.ycsb() => Some(Pattern::Zipfian),
        _ => Pattern::parse(&a.pattern).ok(),
    }
}

pub fn run(a: RunArgs) -> Result<(), String> {
    validate(&a)?;
    if a.format == "csv" {
        println!("{}", csv_header());
    }
    let format = a.format.clone();
    let results = run_matrix(&a, &mut |r| match format.as_str() {
        "json" => println!("{}", engine_json_line(r)),
        "csv" => println!("{}", csv_row(r)),
        _ => {}
    })?;
    if a.format == "table" {
        println!("{}", engine_table(&results));
    }
    let failed = results.iter().filter(|r| r.status == "failed").count();
    if failed > 0 {
        return Err(format!("{failed} cell(s) failed"));
    }
    Ok(())
}

/// The fsync-delay shim (`shim/fsync_delay.c`, built by `build.rs`).
const FSYNC_DELAY_SHIM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/fsync_delay.so"));

/// Runs every cell of `a` (each in a child process), calling `each` with each result as it
/// arrives; returns them all. Failed cells are results (`status` "failed"), not errors.
pub fn run_matrix(
    a: &RunArgs,
    each: &mut dyn FnMut(&EngineResult),
) -> Result<Vec<EngineResult>, String> {
    validate(a)?;
    let engines = names(&a.engines);
    let workloads = workload_names(a);
    let syncs = names(&a.sync);
    let threads: Vec<usize> = names(&a.threads)
        .iter()
        .map(|t| t.parse().expect("validated"))
        .collect();
    let batches: Vec<usize> = names(&a.batch)
        .iter()
        .map(|b| b.parse().expect("validated"))
        .collect();
    let _tmp;
    let base = match &a.dir {
        Some(d) => {
            std::fs::create_dir_all(d).map_err(|e| format!("--dir {}: {e}", d.display()))?;
            d.clone()
        }
        None => {
            let t = tempfile::Builder::new()
                .prefix("silt-bench-run-")
                .tempdir()
                .map_err(|e| format!("temporary directory: {e}"))?;
            let p = t.path().to_path_buf();
            _tmp = t;
            p
        }
    };
    // Peers get --fsync-delay-us through the LD_PRELOAD shim (silt through DelayFs).
    let shim = if a.fsync_delay_us > 0 && engines.iter().any(|e| e != "silt") {
        if FSYNC_DELAY_SHIM.is_empty() {
            return Err(
                "--fsync-delay-us for peer engines needs the LD_PRELOAD shim, which \
                        is only built on Linux"
                    .into(),
            );
        }
        let path = base.join(format!("fsync_delay-{}.so", std::process::id()));
        std::fs::write(&path, FSYNC_DELAY_SHIM)
            .map_err(|e| format!("write {}: {e}", path.display()))?;
        Some(path)
    } else {
        None
    };
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let date = crate::commit::today();
    let mut cells = Vec::new();
    for repeat in 0..a.repeat.max(1) {
        for e in &engines {
            for w in &workloads {
                let (wl, label, args) = resolve(w, a)?;
                // queue is always one inserter and one deleter; only the fills and delete
                // take --batch.
                let ts = if wl == Workload::Queue {
                    vec![2]
                } else {
                    threads.clone()
                };
                let bs = if wl.batched() {
                    batches.clone()
                } else {
                    vec![1]
                };
                for s in &syncs {
                    for &t in &ts {
                        for &b in &bs {
                            cells.push(CellSpec {
                                args: args.clone(),
                                engine: e.clone(),
                                workload: wl.name().to_string(),
                                sync: s.clone(),
                                threads: t,
                                batch: b,
                                dir: PathBuf::new(),
                                repeat,
                                date: date.clone(),
                                label: label.map(String::from),
                                place: (0, 0),
                                shim: (e != "silt").then(|| shim.clone()).flatten(),
                            });
                        }
                    }
                }
            }
        }
    }
    let mut results = Vec::new();
    let mut warned = std::collections::HashSet::new();
    let total = cells.len();
    for (i, mut spec) in cells.into_iter().enumerate() {
        spec.place = (i + 1, total);
        let r = match engine::availability(&spec.engine) {
            Err(why) => {
                if warned.insert(spec.engine.clone()) {
                    eprintln!("silt-bench run: {} unavailable: {why}", spec.engine);
                }
                not_run(&spec, "unavailable", why)
            }
            Ok(()) => {
                spec.dir = base.join(format!(
                    "{}-{}-{}-t{}-b{}-r{}-{}",
                    spec.engine,
                    spec.label.as_deref().unwrap_or(&spec.workload),
                    spec.sync,
                    spec.threads,
                    spec.batch,
                    spec.repeat,
                    std::process::id()
                ));
                let _ = std::fs::remove_dir_all(&spec.dir);
                let r = run_child(&exe, &spec);
                if !a.keep {
                    let _ = std::fs::remove_dir_all(&spec.dir);
                }
                r
            }
        };
        if r.status != "unavailable" {
            eprintln!("[{}/{}] {}", i + 1, total, progress(&r));
        }
        each(&r);
        results.push(r);
    }
    if let Some(p) = shim {
        let _ = std::fs::remove_file(p);
    }
    Ok(results)
}

fn progress(r: &EngineResult) -> String {
    let head = format!(
        "{} {} sync={} threads={} batch={}",
        r.engine, r.workload, r.sync, r.threads, r.batch
    );
    if r.status != "ok" {
        return format!(
            "{head}: {} ({})",
            r.status,
            r.error.as_deref().unwrap_or("")
        );
    }
    let f = |x: Option<f64>, d: usize| x.map_or("null".into(), |v| format!("{v:.d$}"));
    format!(
        "{head}: {} ops in {} s, {} ops/s, p50 {} µs, p99 {} µs, max {} µs, cpu {}+{} s, \
         write amp {}, space amp {}",
        r.ops.unwrap_or(0),
        f(r.seconds, 2),
        f(r.ops_per_sec, 0),
        f(r.p50_us, 1),
        f(r.p99_us, 1),
        f(r.max_us, 0),
        f(r.cpu_user_s, 2),
        f(r.cpu_sys_s, 2),
        f(r.write_amp, 2),
        f(r.space_amp, 2),
    )
}

fn run_child(exe: &Path, spec: &CellSpec) -> EngineResult {
    let json = serde_json::to_string(spec).expect("a spec serializes");
    let mut cmd = Command::new(exe);
    cmd.arg("cell")
        .arg("--spec")
        .arg(&json)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if let Some(shim) = &spec.shim {
        cmd.env("LD_PRELOAD", shim)
            .env("SILT_FSYNC_DELAY_US", spec.args.fsync_delay_us.to_string())
            .env("SILT_FSYNC_DELAY_MODEL", &spec.args.fsync_delay_model);
    }
    let out = cmd.output();
    let out = match out {
        Ok(o) => o,
        Err(e) => {
            return not_run(
                spec,
                "failed",
                format!("cannot start {}: {e}", exe.display()),
            )
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'));
    match line.map(serde_json::from_str::<EngineResult>) {
        Some(Ok(r)) => r,
        Some(Err(e)) => not_run(spec, "failed", format!("unreadable result line: {e}")),
        None => not_run(
            spec,
            "failed",
            format!("the cell process exited with {} and no result", out.status),
        ),
    }
}

// ------------------------------------------------------------------------------ child

/// The hidden `cell` subcommand: runs one cell and prints its JSON line (a `failed` line if
/// it could not).
pub fn cell(c: CellArgs) -> Result<(), String> {
    let spec: CellSpec = serde_json::from_str(&c.spec).map_err(|e| format!("--spec: {e}"))?;
    let r = match run_cell(&spec) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("silt-bench cell {} {}: {e}", spec.engine, spec.workload);
            not_run(&spec, "failed", e)
        }
    };
    println!("{}", engine_json_line(&r));
    Ok(())
}

/// What the timed phase shares between workers.
struct Ctx<'a> {
    engine: &'a dyn Engine,
    w: Workload,
    pattern: Pattern,
    zipf: Option<Arc<Zipf>>,
    num: u64,
    threads: usize,
    key_bytes: usize,
    batch: usize,
    range_size: usize,
    /// `mixed`: percent of operations that are gets.
    read_percent: u32,
    values: &'a Values,
    seed: u64,
    /// `delete` with `--pattern random`: the order keys are deleted in.
    perm: Option<Perm>,
    /// `queue`: inserts done (the deleter's allowance); YCSB D/E: one past the newest
    /// inserted key (`latest`'s reference point).
    progress: AtomicU64,
    /// YCSB D/E: the next new key to insert.
    next_insert: AtomicU64,
    /// Set by a worker that failed, so a waiting partner gives up.
    abort: AtomicBool,
}

impl Ctx<'_> {
    /// Thread `t`'s key stream.
    fn keygen(&self, t: usize) -> KeyGen {
        let seed = self.seed.wrapping_mul(1_000_003).wrapping_add(t as u64);
        if let Some(perm) = self.perm {
            let (lo, hi) = slice(self.num, self.threads, t);
            let (lo, len) = if hi > lo {
                (lo, hi - lo)
            } else {
                (0, self.num)
            };
            return KeyGen::Perm {
                perm,
                lo,
                len,
                i: 0,
            };
        }
        match self.pattern {
            Pattern::Sequential => {
                let (lo, hi) = slice(self.num, self.threads, t);
                if hi > lo {
                    KeyGen::Seq {
                        lo,
                        len: hi - lo,
                        i: 0,
                    }
                } else {
                    KeyGen::Seq {
                        lo: 0,
                        len: self.num,
                        i: 0,
                    }
                }
            }
            Pattern::Random => KeyGen::Uniform {
                rng: Rng::new(seed),
                n: self.num,
            },
            Pattern::Zipfian | Pattern::Latest => KeyGen::Zipf {
                rng: Rng::new(seed),
                z: self.zipf.clone().expect("a zipf table for zipfian"),
            },
        }
    }
}

/// What one worker measured.
struct Part {
    hist: Histogram<u64>,
    ops: u64,
    found: u64,
    inserts: u64,
    deletes: u64,
    /// Logical bytes written: key + value per put, key per delete.
    wbytes: u64,
    /// `queue`'s deleter: the worst delete latency (ns) in each elapsed second.
    worst_ns: Vec<u64>,
    start: Instant,
    end: Instant,
}

fn record(hist: &mut Histogram<u64>, t0: &mut Instant) {
    let t1 = Instant::now();
    hist.saturating_record((t1.duration_since(*t0).as_nanos() as u64).max(1));
    *t0 = t1;
    tick();
}

/// Operations recorded so far by this (cell) process's workers, for the progress bar;
/// each worker adds its count every 1024 operations, so the bar costs no shared write per
/// operation.
static RECORDED: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static PENDING: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

fn tick() {
    PENDING.with(|p| {
        let n = p.get() + 1;
        if n >= 1024 {
            RECORDED.fetch_add(n, Ordering::Relaxed);
            p.set(0);
        } else {
            p.set(n);
        }
    });
}

fn flush_ticks() {
    PENDING.with(|p| RECORDED.fetch_add(p.replace(0), Ordering::Relaxed));
}

/// A progress bar on stderr for one phase of a cell (hidden when stderr is not a
/// terminal, so logs and tests see none).
fn bar(spec: &CellSpec, phase: &str, len: u64) -> indicatif::ProgressBar {
    let pb = indicatif::ProgressBar::with_draw_target(
        Some(len),
        indicatif::ProgressDrawTarget::stderr_with_hz(4),
    );
    pb.set_style(
        indicatif::ProgressStyle::with_template(
            "{prefix} {wide_bar} {human_pos}/{human_len} {per_sec} eta {eta}",
        )
        .expect("a valid template"),
    );
    pb.set_prefix(format!(
        "[{}/{}] {} {} {phase}",
        spec.place.0,
        spec.place.1,
        spec.engine,
        spec.label.as_deref().unwrap_or(&spec.workload)
    ));
    pb
}

fn worker(ctx: &Ctx<'_>, t: usize, quota: u64, barrier: &Barrier) -> Result<Part, String> {
    let r = worker_inner(ctx, t, quota, barrier);
    flush_ticks();
    if r.is_err() {
        ctx.abort.store(true, Ordering::Release);
    }
    r
}

/// YCSB's operations.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Read,
    Update,
    Insert,
    Scan,
    ReadModifyWrite,
}

/// The operation of YCSB workload `w` for a uniform draw `u` in `[0, 1)`.
fn ycsb_op(w: Workload, u: f64) -> Op {
    let (first, p, second) = match w {
        Workload::YcsbA => (Op::Read, 0.5, Op::Update),
        Workload::YcsbB => (Op::Read, 0.95, Op::Update),
        Workload::YcsbC => (Op::Read, 1.0, Op::Read),
        Workload::YcsbD => (Op::Read, 0.95, Op::Insert),
        Workload::YcsbE => (Op::Scan, 0.95, Op::Insert),
        Workload::YcsbF => (Op::Read, 0.5, Op::ReadModifyWrite),
        other => unreachable!("{other:?} is not YCSB"),
    };
    if u < p {
        first
    } else {
        second
    }
}

fn worker_inner(ctx: &Ctx<'_>, t: usize, quota: u64, barrier: &Barrier) -> Result<Part, String> {
    let mut hist = latency_histogram();
    let mut keys = ctx.keygen(t);
    let kb = ctx.key_bytes;
    let mut keybuf = vec![0u8; kb * ctx.batch];
    let mut seeker = match ctx.w {
        Workload::SeekRandom => Some(ctx.engine.seeker()?),
        _ => None,
    };
    let salt = ctx.seed ^ ctx.w as u64;
    let mut ops = 0u64;
    let mut found = 0u64;
    let mut inserts = 0u64;
    let mut deletes = 0u64;
    let mut wbytes = 0u64;
    let mut worst_ns: Vec<u64> = Vec::new();
    let entry_bytes = (kb + ctx.values.len) as u64;
    barrier.wait();
    let start = Instant::now();
    let mut t0 = start;
    let mut result = Ok(());
    match ctx.w {
        Workload::FillSeq | Workload::FillRandom | Workload::Overwrite | Workload::FillSync => {
            while ops < quota {
                let m = (quota - ops).min(ctx.batch as u64) as usize;
                let r = if m == 1 {
                    let i = keys.next();
                    make_key(i, &mut keybuf[..kb]);
                    ctx.engine
                        .write(&[(&keybuf[..kb], ctx.values.get(i, salt))])
                } else {
                    let ids: Vec<u64> = (0..m).map(|_| keys.next()).collect();
                    for (j, &i) in ids.iter().enumerate() {
                        make_key(i, &mut keybuf[j * kb..(j + 1) * kb]);
                    }
                    let kvs: Vec<(&[u8], &[u8])> = ids
                        .iter()
                        .enumerate()
                        .map(|(j, &i)| (&keybuf[j * kb..(j + 1) * kb], ctx.values.get(i, salt)))
                        .collect();
                    ctx.engine.write(&kvs)
                };
                if let Err(e) = r {
                    result = Err(e);
                    break;
                }
                record(&mut hist, &mut t0);
                ops += m as u64;
                wbytes += m as u64 * entry_bytes;
            }
        }
        Workload::Delete => {
            while ops < quota {
                let m = (quota - ops).min(ctx.batch as u64) as usize;
                for j in 0..m {
                    make_key(keys.next(), &mut keybuf[j * kb..(j + 1) * kb]);
                }
                let ks: Vec<&[u8]> = keybuf[..m * kb].chunks(kb).collect();
                if let Err(e) = ctx.engine.delete(&ks) {
                    result = Err(e);
                    break;
                }
                record(&mut hist, &mut t0);
                ops += m as u64;
                deletes += m as u64;
                wbytes += (m * kb) as u64;
            }
        }
        Workload::Queue if t == 0 => {
            // The inserter: num, num+1, … (after the preloaded 0..num).
            while ops < quota {
                let i = ctx.num + ops;
                make_key(i, &mut keybuf[..kb]);
                if let Err(e) = ctx
                    .engine
                    .write(&[(&keybuf[..kb], ctx.values.get(i, salt))])
                {
                    result = Err(e);
                    break;
                }
                record(&mut hist, &mut t0);
                ops += 1;
                inserts += 1;
                wbytes += entry_bytes;
                ctx.progress.store(ops, Ordering::Release);
            }
        }
        Workload::Queue => {
            // The deleter: 0, 1, …, its d-th delete only after the inserter's d-th insert.
            'outer: while ops < quota {
                let mut spins = 0u32;
                while ctx.progress.load(Ordering::Acquire) <= ops {
                    if ctx.abort.load(Ordering::Acquire) {
                        break 'outer;
                    }
                    spins += 1;
                    if spins < 64 {
                        std::hint::spin_loop();
                    } else {
                        std::thread::yield_now();
                    }
                }
                make_key(ops, &mut keybuf[..kb]);
                t0 = Instant::now();
                if let Err(e) = ctx.engine.single_delete(&[&keybuf[..kb]]) {
                    result = Err(e);
                    break;
                }
                let now = Instant::now();
                let ns = (now.duration_since(t0).as_nanos() as u64).max(1);
                hist.saturating_record(ns);
                let sec = now.duration_since(start).as_secs() as usize;
                if worst_ns.len() <= sec {
                    worst_ns.resize(sec + 1, 0);
                }
                worst_ns[sec] = worst_ns[sec].max(ns);
                ops += 1;
                deletes += 1;
                wbytes += kb as u64;
            }
        }
        w if w.ycsb() => {
            let z = ctx.zipf.clone().expect("a zipf table for YCSB");
            let mut rng = Rng::new(ctx.seed ^ 0x7c5b ^ (t as u64).wrapping_mul(0x9e37));
            while ops < quota {
                let op = ycsb_op(w, rng.unit());
                let k = match op {
                    Op::Insert => ctx.next_insert.fetch_add(1, Ordering::Relaxed),
                    _ if w == Workload::YcsbD => {
                        // latest: rank r is the r-th newest record.
                        let newest = ctx.progress.load(Ordering::Acquire).max(1) - 1;
                        newest - z.rank(rng.unit()).min(newest)
                    }
                    _ => scrambled(&z, &mut rng),
                };
                make_key(k, &mut keybuf[..kb]);
                let key = &keybuf[..kb];
                let r = match op {
                    Op::Read => ctx.engine.get(key).map(|v| found += u64::from(v.is_some())),
                    Op::Update => ctx
                        .engine
                        .write(&[(key, ctx.values.get(k, salt ^ ops))])
                        .map(|()| wbytes += entry_bytes),
                    Op::Insert => ctx
                        .engine
                        .write(&[(key, ctx.values.get(k, salt))])
                        .map(|()| {
                            wbytes += entry_bytes;
                            inserts += 1;
                            ctx.progress.fetch_max(k + 1, Ordering::AcqRel);
                        }),
                    Op::Scan => {
                        let len = 1 + rng.below(ctx.range_size as u64) as usize;
                        ctx.engine.scan(key, len).map(|n| found += n as u64)
                    }
                    Op::ReadModifyWrite => ctx.engine.get(key).and_then(|v| {
                        found += u64::from(v.is_some());
                        wbytes += entry_bytes;
                        ctx.engine.write(&[(key, ctx.values.get(k, salt ^ ops))])
                    }),
                };
                if let Err(e) = r {
                    result = Err(e);
                    break;
                }
                record(&mut hist, &mut t0);
                ops += 1;
            }
        }
        Workload::Mixed => {
            let mut rng = Rng::new(ctx.seed ^ 0x3d1c ^ (t as u64).wrapping_mul(0x9e37));
            while ops < quota {
                let i = keys.next();
                make_key(i, &mut keybuf[..kb]);
                let key = &keybuf[..kb];
                let r = if rng.below(100) < u64::from(ctx.read_percent) {
                    ctx.engine.get(key).map(|v| found += u64::from(v.is_some()))
                } else {
                    ctx.engine
                        .write(&[(key, ctx.values.get(i, salt ^ ops))])
                        .map(|()| wbytes += entry_bytes)
                };
                if let Err(e) = r {
                    result = Err(e);
                    break;
                }
                record(&mut hist, &mut t0);
                ops += 1;
            }
        }
        Workload::ReadRandom => {
            while ops < quota {
                make_key(keys.next(), &mut keybuf[..kb]);
                match ctx.engine.get(&keybuf[..kb]) {
                    Ok(v) => found += u64::from(v.is_some()),
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                }
                record(&mut hist, &mut t0);
                ops += 1;
            }
        }
        Workload::SeekRandom => {
            let s = seeker.as_mut().expect("made above");
            while ops < quota {
                make_key(keys.next(), &mut keybuf[..kb]);
                match s.seek(&keybuf[..kb]) {
                    Ok(hit) => found += u64::from(hit),
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                }
                record(&mut hist, &mut t0);
                ops += 1;
            }
        }
        Workload::Scan => {
            while ops < quota {
                make_key(keys.next(), &mut keybuf[..kb]);
                match ctx.engine.scan(&keybuf[..kb], ctx.range_size) {
                    Ok(n) => found += n as u64,
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                }
                record(&mut hist, &mut t0);
                ops += 1;
            }
        }
        Workload::ReadSeq => {
            let (lo, hi) = slice(ctx.num, ctx.threads, t);
            if hi > lo {
                let lo_key = (t > 0).then(|| key(lo, kb));
                let hi_key = (t + 1 < ctx.threads).then(|| key(hi, kb));
                let r = ctx
                    .engine
                    .for_each(lo_key.as_deref(), hi_key.as_deref(), &mut |_, _| {
                        record(&mut hist, &mut t0)
                    });
                match r {
                    Ok(n) => {
                        ops = n;
                        found = n;
                    }
                    Err(e) => result = Err(e),
                }
            }
        }
        w => unreachable!("{w:?} has an arm above"),
    }
    let end = Instant::now();
    drop(seeker);
    result?;
    Ok(Part {
        hist,
        ops,
        found,
        inserts,
        deletes,
        wbytes,
        worst_ns,
        start,
        end,
    })
}

fn load(
    engine: &dyn Engine,
    a: &RunArgs,
    values: &Values,
    pb: &indicatif::ProgressBar,
) -> Result<(), String> {
    const LOAD_BATCH: usize = 1000;
    let kb = a.key_bytes;
    let salt = a.seed ^ 0x10ad;
    let order: Box<dyn Iterator<Item = u64>> = if a.load_order == "sequential" {
        Box::new(0..a.num)
    } else {
        Box::new(permutation(a.num, a.seed))
    };
    let mut keybuf = vec![0u8; kb * LOAD_BATCH];
    let mut ids = Vec::with_capacity(LOAD_BATCH);
    let mut order = order.peekable();
    while order.peek().is_some() {
        ids.clear();
        ids.extend(order.by_ref().take(LOAD_BATCH));
        for (j, &i) in ids.iter().enumerate() {
            make_key(i, &mut keybuf[j * kb..(j + 1) * kb]);
        }
        let kvs: Vec<(&[u8], &[u8])> = ids
            .iter()
            .enumerate()
            .map(|(j, &i)| (&keybuf[j * kb..(j + 1) * kb], values.get(i, salt)))
            .collect();
        engine.write(&kvs)?;
        pb.inc(ids.len() as u64);
    }
    Ok(())
}

/// How long a cell waits for background compaction to settle after a load or a fill.
const SETTLE_MAX: Duration = Duration::from_secs(120);

fn run_cell(spec: &CellSpec) -> Result<EngineResult, String> {
    let a = &spec.args;
    validate(a)?;
    let w = Workload::parse(&spec.workload)?;
    let pattern = pattern_of(Some(w), a).expect("validated");
    let sync_full = spec.sync == "full" || w == Workload::FillSync;
    let threads = if w == Workload::Queue {
        2
    } else {
        spec.threads
    };
    let mut r = not_run(spec, "ok", String::new());
    r.error = None;
    let cfg = EngineConfig {
        dir: spec.dir.clone(),
        sync_full,
        cache_bytes: a.cache_bytes,
        fsync_delay_us: a.fsync_delay_us,
        fsync_delay_model: a.fsync_delay_model.clone(),
        threads,
    };
    let engine = engine::open(&spec.engine, &cfg)?;
    let values = Values::new(a.seed, a.value_bytes);
    let entry_bytes = (a.key_bytes + a.value_bytes) as u64;

    if w.preloads() {
        let t = Instant::now();
        let pb = bar(spec, "load", a.num);
        load(&*engine, a, &values, &pb)?;
        pb.set_message("flush");
        engine.flush()?;
        engine.wait_idle(SETTLE_MAX);
        pb.finish_and_clear();
        r.load_seconds = Some(t.elapsed().as_secs_f64());
    }

    let ops_total = match w {
        Workload::FillSync => (a.num / 100).max(1),
        Workload::FillSeq | Workload::FillRandom | Workload::Overwrite => a.num,
        Workload::ReadRandom | Workload::SeekRandom | Workload::Scan | Workload::Mixed => {
            a.reads.unwrap_or(a.num)
        }
        Workload::ReadSeq => a.num, // informational: readseq reads what is there
        Workload::Delete => a.num,
        Workload::Queue => 2 * a.num,
        _ => a.reads.unwrap_or(a.num), // YCSB
    };
    let zipf = (matches!(pattern, Pattern::Zipfian | Pattern::Latest))
        .then(|| Arc::new(Zipf::new(a.num, a.zipf_theta)));
    let ctx = Ctx {
        engine: &*engine,
        w,
        pattern,
        zipf,
        num: a.num,
        threads,
        key_bytes: a.key_bytes,
        batch: if w.batched() { spec.batch } else { 1 },
        range_size: a.range_size,
        read_percent: a.read_percent,
        values: &values,
        seed: a.seed,
        perm: (w == Workload::Delete && pattern == Pattern::Random)
            .then(|| Perm::new(a.num, a.seed ^ 0xde1e_7e00)),
        progress: AtomicU64::new(if w == Workload::Queue { 0 } else { a.num }),
        next_insert: AtomicU64::new(a.num),
        abort: AtomicBool::new(false),
    };
    let quotas = if w == Workload::Queue {
        vec![a.num, a.num]
    } else {
        split(ops_total, threads)
    };
    let barrier = Barrier::new(quotas.len() + 1);
    // What the workers will `record`: one per write batch, else one per operation (the
    // queue's deleter records none).
    let expected_records: u64 = match w {
        Workload::Queue => a.num,
        _ => quotas.iter().map(|q| q.div_ceil(ctx.batch as u64)).sum(),
    };
    let (io0, disk0, cpu0, parts, cpu1) = std::thread::scope(|s| {
        let handles: Vec<_> = quotas
            .iter()
            .enumerate()
            .map(|(t, &q)| {
                let (ctx, barrier) = (&ctx, &barrier);
                s.spawn(move || worker(ctx, t, q, barrier))
            })
            .collect();
        let io0 = sysstat::io();
        let disk0 = sysstat::disk_written_bytes(&spec.dir);
        let cpu0 = sysstat::cpu();
        barrier.wait();
        let pb = bar(spec, "run", expected_records);
        while !handles.iter().all(|h| h.is_finished()) {
            pb.set_position(RECORDED.load(Ordering::Relaxed));
            std::thread::sleep(Duration::from_millis(100));
        }
        pb.finish_and_clear();
        let parts: Vec<Result<Part, String>> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("a worker panicked".into())))
            .collect();
        let cpu1 = sysstat::cpu();
        (io0, disk0, cpu0, parts, cpu1)
    });
    let parts = parts.into_iter().collect::<Result<Vec<_>, _>>()?;
    let inserts: u64 = parts.iter().map(|p| p.inserts).sum();
    let deletes: u64 = parts.iter().map(|p| p.deletes).sum();
    let wbytes: u64 = parts.iter().map(|p| p.wbytes).sum();

    let mut synced = true;
    if w.mutates() {
        let t = Instant::now();
        engine.flush()?;
        engine.wait_idle(SETTLE_MAX);
        synced = sysstat::syncfs(&spec.dir);
        r.post_seconds = Some(t.elapsed().as_secs_f64());
        r.post_cpu_s = match (sysstat::cpu_seconds(), cpu1) {
            (Some(b), Some(a)) => Some(b - a.user_s - a.sys_s),
            _ => None,
        };
    }
    let io1 = sysstat::io();
    let disk1 = sysstat::disk_written_bytes(&spec.dir);
    let db = sysstat::dir_bytes(&spec.dir);
    r.engine_stats = engine.stats();
    let live_keys = match w {
        Workload::Delete => a.num - distinct_keys(&ctx, &quotas),
        Workload::Queue => a.num + inserts - deletes,
        _ if w.preloads() => a.num + inserts,
        _ => distinct_keys(&ctx, &quotas),
    };
    drop(ctx);
    engine.close()?;

    let mut hist = latency_histogram();
    let mut ops = 0;
    let mut found = 0;
    for p in &parts {
        hist.add(&p.hist).map_err(|e| format!("histogram: {e}"))?;
        ops += p.ops;
        found += p.found;
    }
    let start = parts.iter().map(|p| p.start).min();
    let end = parts.iter().map(|p| p.end).max();
    let seconds = match (start, end) {
        (Some(s), Some(e)) => e.duration_since(s).as_secs_f64().max(1e-9),
        _ => 1e-9,
    };
    let us = |q: f64| Some(hist.value_at_quantile(q) as f64 / 1000.0);
    r.ops = Some(ops);
    r.found = (!w.writes()).then_some(found);
    r.seconds = Some(seconds);
    r.ops_per_sec = Some(ops as f64 / seconds);
    if !hist.is_empty() {
        r.p50_us = us(0.5);
        r.p95_us = us(0.95);
        r.p99_us = us(0.99);
        r.p999_us = us(0.999);
        r.max_us = Some(hist.max() as f64 / 1000.0);
    }
    if let (Some(c0), Some(c1)) = (cpu0, cpu1) {
        r.cpu_user_s = Some(c1.user_s - c0.user_s);
        r.cpu_sys_s = Some(c1.sys_s - c0.sys_s);
    }
    r.peak_rss_bytes = sysstat::peak_rss_bytes();
    if let (Some(i0), Some(i1)) = (io0, io1) {
        let w = i1.write_bytes.saturating_sub(i0.write_bytes);
        let c = i1
            .cancelled_write_bytes
            .saturating_sub(i0.cancelled_write_bytes);
        r.proc_write_bytes = Some(w);
        r.cancelled_write_bytes = Some(c);
        r.device_write_bytes = Some(w.saturating_sub(c));
        r.syscall_write_bytes = Some(i1.wchar.saturating_sub(i0.wchar));
    }
    if let (Some(d0), Some(d1), true) = (disk0, disk1, synced) {
        r.disk_write_bytes = Some(d1.saturating_sub(d0));
    }
    r.delayed_fsyncs = shim_delayed_calls();
    if matches!(w, Workload::Queue | Workload::YcsbD | Workload::YcsbE) {
        r.inserted = Some(inserts);
    }
    if matches!(w, Workload::Delete | Workload::Queue) {
        r.deleted = Some(deletes);
    }
    if w == Workload::Queue {
        let mut worst: Vec<u64> = Vec::new();
        for p in &parts {
            if worst.len() < p.worst_ns.len() {
                worst.resize(p.worst_ns.len(), 0);
            }
            for (w, &x) in worst.iter_mut().zip(&p.worst_ns) {
                *w = (*w).max(x);
            }
        }
        // One entry per elapsed (started) second of the timed phase.
        let secs = (seconds.ceil() as usize).max(1);
        if worst.len() < secs {
            worst.resize(secs, 0);
        }
        r.max_delete_us = Some(worst.iter().copied().max().unwrap_or(0) as f64 / 1000.0);
        r.worst_delete_us_per_sec = Some(worst.iter().map(|&x| x as f64 / 1000.0).collect());
    }
    let logical = wbytes;
    r.logical_write_bytes = Some(logical);
    r.live_bytes = Some(live_keys * entry_bytes);
    if let Some((len, alloc)) = db {
        r.db_bytes = Some(len);
        r.db_alloc_bytes = Some(alloc);
    }
    if logical > 0 {
        let amp = |b: Option<u64>| b.map(|d| d as f64 / logical as f64);
        r.write_amp = amp(r.device_write_bytes);
        r.syscall_write_amp = amp(r.syscall_write_bytes);
        r.disk_write_amp = amp(r.disk_write_bytes);
    }
    if live_keys > 0 {
        r.space_amp = r
            .db_bytes
            .map(|d| d as f64 / (live_keys * entry_bytes) as f64);
    }
    Ok(r)
}

/// Distinct keys a fill wrote: its key streams regenerated (after timing) into a bitmap.
fn distinct_keys(ctx: &Ctx<'_>, quotas: &[u64]) -> u64 {
    let mut bits = vec![0u64; (ctx.num as usize).div_ceil(64)];
    for (t, &q) in quotas.iter().enumerate() {
        let mut g = ctx.keygen(t);
        for _ in 0..q {
            let k = g.next();
            bits[(k / 64) as usize] |= 1 << (k % 64);
        }
    }
    bits.iter().map(|w| u64::from(w.count_ones())).sum()
}

#[cfg(test)]
mod tests {
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
        ] {
            assert_eq!(Workload::parse(n).unwrap().name(), n);
        }
        assert_eq!(Workload::parse("range").unwrap(), Workload::Scan);
        assert!(Workload::parse("nope").is_err());
    }
}
