//! `silt-bench suite seeds`: the seed 000/003 matrix (TidesDB's benchtool against RocksDB)
//! in one command, at a size that fits in about ten minutes here for silt and SQLite, then
//! `report` over the results.
//!
//! The matrix, on `--num` keys (N), `--threads` workers, 16-byte keys and 100-byte values
//! unless a workload says otherwise (the seed workloads are `run`'s `PRESETS`):
//!
//! | group | workloads | size | sync | batch |
//! |---|---|---|---|---|
//! | writes | seq_write, random_write, zipf_write, small_value | N puts | none | 1 |
//! | large | large_value (256 B keys, 4 KiB values) | N/20 puts | none | 1 |
//! | reads | random_read, random_mixed, zipf_mixed, random_seek, seq_seek, zipf_seek | N/2 ops on N keys | none | – |
//! | ranges | range100, seq_range | N/20 scans on N keys | none | – |
//! | long ranges | range1000 | N/200 scans on N keys | none | – |
//! | iteration | iterate | N keys | none | – |
//! | delete | random_delete | N deletes | none | 1 |
//! | durable batches | random_write, random_delete | N/20 keys | full | 1, 10, 100, 1000 |
//!
//! `--scale full` adds the seeds' own regime (TidesDB's benchmark against RocksDB: batches
//! of 1000, 5M operations, 2 and 8 threads, sync none and full) and a larger-than-cache
//! read group, after the groups above (which stay as they are); at the default N:
//!
//! | group | workloads | size | sync | batch | threads |
//! |---|---|---|---|---|---|
//! | seed writes | seq_write, random_write, zipf_write, small_value, random_delete | 5N | none, full | 1000 | 2, 8 |
//! | seed large | large_value (256 B keys, 4 KiB values) | N/2 | none, full | 1000 | 2, 8 |
//! | seed reads | the reads, ranges and iteration above | N/2 ops on 5N keys (ranges N/20, range1000 N/200) | none | – | 2, 8 |
//! | larger than cache | random_read, random_seek, range100 | N/2 ops (range100 N/20) on 10N keys, `--cache-bytes` | none | – | 2 |
//!
//! Every cell runs in its own process (as `run` does). Cells that preload the same keys
//! share one load per engine: the first loads and settles, later ones copy its closed
//! database directory (`run --load-cache`), and every preloading cell reopens the engine
//! before its timed phase. Results go to `--out`
//! (`results.jsonl`, one `run --format json` line per cell; `command.txt`), and the report
//! to `--out/report.md` with SVG charts in `--out/charts`.
//!
//! `suite txn`: the transactional workloads on every transactional engine compiled in
//! ([`TXN_ENGINES`], or `--engines`): tpcc (`--tpcc-duration` s on `--threads` terminals,
//! `--warehouses`, `--tpcc-scale`), queue_indexed (`--queue-rows` preloaded,
//! `--queue-duration` s, `--queue-batch` rows per transaction) and txn_batch_sweep
//! (`--sweep-rows` at each of `--sweep-batch` rows per transaction). The defaults (tpcc
//! 20 s, the queue 60 s on 100,000 rows, the sweep 200,000 rows at 100 … 200,000 rows per
//! transaction) took 11 min 47 s here with five engines (2026-11-26, a loaded 2-vCPU
//! machine); BENCHMARKS.md's run (tpcc 30 s, the queue 90 s, the sweep 1M rows up to 1M
//! per transaction) took 42 minutes.
//! Same outputs.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use crate::output::EngineResult;
use crate::run::RunArgs;

/// Flags of `silt-bench suite`.
#[derive(Args, Debug, Clone)]
pub struct SuiteArgs {
    /// The suite: `seeds` (the seed 000/003 matrix) or `txn` (tpcc, queue_indexed and
    /// txn_batch_sweep on every transactional engine compiled in; see `crate::suite`).
    pub name: String,
    /// Comma-separated engines (see `run --engines`). Default: `silt,sqlite` for `seeds`;
    /// for `txn` every transactional engine compiled in (silt, sqlite, fjall, redb,
    /// tidesdb, rocksdb).
    #[arg(long)]
    pub engines: Option<String>,
    /// N: keys of the main write and read workloads (the others are scaled from it).
    #[arg(long, default_value_t = 1_000_000)]
    pub num: u64,
    /// Worker threads of every workload but the queue.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Run the matrix this many times (interleaved per group); the report takes medians.
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    /// Where results, the report and the charts go (default `bench-results/<suite>`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Where the databases go (see `run --dir`).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Block cache budget of every engine, bytes.
    #[arg(long, default_value_t = 64 << 20)]
    pub cache_bytes: u64,
    /// See `run --fsync-delay-us` (every engine alike).
    #[arg(long, default_value_t = 0)]
    pub fsync_delay_us: u64,
    /// Seed of the key generators.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// `default`: the matrix above, batch 1, at N. `full`: also the seeds' own regime —
    /// batch 1000, 5N operations (4 KiB values: N/2), 2 and 8 threads, sync none and full,
    /// every seed workload — and reads on 10N keys, larger than the cache (hours with every
    /// engine; the estimate printed at the start says how many).
    #[arg(long, default_value = "default")]
    pub scale: String,
    /// `txn`: seconds of each tpcc cell's timed phase.
    #[arg(long, default_value_t = 20.0)]
    pub tpcc_duration: f64,
    /// `txn`: tpcc's warehouses.
    #[arg(long, default_value_t = 1)]
    pub warehouses: u32,
    /// `txn`: tpcc's share of TPC-C's table sizes (see `run --tpcc-scale`).
    #[arg(long, default_value_t = 0.1)]
    pub tpcc_scale: f64,
    /// `txn`: rows preloaded before queue_indexed (the queue's length).
    #[arg(long, default_value_t = 100_000)]
    pub queue_rows: u64,
    /// `txn`: seconds of each queue_indexed cell's timed phase.
    #[arg(long, default_value_t = 60.0)]
    pub queue_duration: f64,
    /// `txn`: queue_indexed's rows per insert and per delete transaction.
    #[arg(long, default_value_t = 1)]
    pub queue_batch: usize,
    /// `txn`: rows txn_batch_sweep inserts (per batch size; the workload's own default,
    /// and the scale of BENCHMARKS.md's run, is 1,000,000).
    #[arg(long, default_value_t = 200_000)]
    pub sweep_rows: u64,
    /// `txn`: txn_batch_sweep's rows per transaction, comma-separated (a cell each; the
    /// last is every row in one transaction, 800,000 key-value writes).
    #[arg(long, default_value = "100,1000,10000,100000,200000")]
    pub sweep_batch: String,
    /// `seeds`: go on with an interrupted run in `--out` instead of starting afresh: its
    /// finished cells (status ok in `results.jsonl`) are kept and not run again, so a
    /// matrix of hours (`--scale full`) can run in pieces. Refused unless every other flag
    /// but `--dir` is as the run in `--out` was started with (`resume.txt`).
    #[arg(long)]
    pub resume: bool,
}

impl SuiteArgs {
    /// `--out` (set by [`suite`] when not given).
    fn out(&self) -> &std::path::Path {
        self.out
            .as_deref()
            .unwrap_or(std::path::Path::new("bench-results"))
    }
}

/// One `run` invocation of the suite.
struct Group {
    name: &'static str,
    workloads: &'static str,
    num: u64,
    reads: Option<u64>,
    /// Sync modes, comma-separated.
    sync: &'static str,
    /// Batch sizes, comma-separated.
    batch: &'static str,
    /// Threads, comma-separated; `None`: the suite's `--threads`.
    threads: Option<&'static str>,
}

fn g(
    name: &'static str,
    workloads: &'static str,
    num: u64,
    reads: Option<u64>,
    sync: &'static str,
    batch: &'static str,
) -> Group {
    Group {
        name,
        workloads,
        num: num.max(1),
        reads: reads.map(|r| r.max(1)),
        sync,
        batch,
        threads: None,
    }
}

/// The groups of `--scale full` that follow [`seeds`]' (see the module's second table).
fn seeds_full(n: u64) -> Vec<Group> {
    let both = |mut gr: Group| {
        gr.threads = Some("2,8");
        gr
    };
    vec![
        both(g(
            "seed writes",
            "seq_write,random_write,zipf_write,small_value,random_delete",
            5 * n,
            None,
            "none,full",
            "1000",
        )),
        both(g(
            "seed large",
            "large_value",
            n / 2,
            None,
            "none,full",
            "1000",
        )),
        both(g(
            "seed reads",
            "random_read,random_mixed,zipf_mixed,random_seek,seq_seek,zipf_seek,iterate",
            5 * n,
            Some(n / 2),
            "none",
            "1",
        )),
        both(g(
            "seed ranges",
            "range100,seq_range",
            5 * n,
            Some(n / 20),
            "none",
            "1",
        )),
        both(g(
            "seed long ranges",
            "range1000",
            5 * n,
            Some(n / 200),
            "none",
            "1",
        )),
        Group {
            threads: Some("2"),
            ..g(
                "larger than cache",
                "random_read,random_seek",
                10 * n,
                Some(n / 2),
                "none",
                "1",
            )
        },
        Group {
            threads: Some("2"),
            ..g(
                "larger than cache, ranges",
                "range100",
                10 * n,
                Some(n / 20),
                "none",
                "1",
            )
        },
    ]
}

fn seeds(n: u64) -> Vec<Group> {
    vec![
        g(
            "writes",
            "seq_write,random_write,zipf_write,small_value",
            n,
            None,
            "none",
            "1",
        ),
        g("large", "large_value", n / 20, None, "none", "1"),
        g(
            "reads",
            "random_read,random_mixed,zipf_mixed,random_seek,seq_seek,zipf_seek",
            n,
            Some(n / 2),
            "none",
            "1",
        ),
        g("ranges", "range100,seq_range", n, Some(n / 20), "none", "1"),
        g("long ranges", "range1000", n, Some(n / 200), "none", "1"),
        g("iteration", "iterate", n, None, "none", "1"),
        g("delete", "random_delete", n, None, "none", "1"),
        g(
            "durable batches",
            "random_write,random_delete",
            n / 20,
            None,
            "full",
            "1,10,100,1000",
        ),
    ]
}

/// Measured wall seconds of one cell of the default suite on a 2-vCPU machine
/// (BENCHMARKS.md, "The seed suite's own time", 2026-11-24): the timed phase, the settle and
/// about 0.1 s of process start, open, close and removal, but not the preload, which is in
/// [`LOAD_SECONDS`] and [`COPY_SECONDS`]. Per engine and workload (`workload@full/batch`
/// for the durable-batches group), normalised to 1,000,000 keys; an estimate scales them
/// linearly with the cell's key count.
const CELL_SECONDS: &[(&str, &str, f64)] = &[
    ("silt", "seq_write", 1.89),
    ("silt", "random_write", 5.14),
    ("silt", "zipf_write", 4.31),
    ("silt", "small_value", 5.08),
    ("sqlite", "seq_write", 10.51),
    ("sqlite", "random_write", 19.89),
    ("sqlite", "zipf_write", 8.56),
    ("sqlite", "small_value", 17.89),
    ("silt", "large_value", 20.75),
    ("sqlite", "large_value", 55.79),
    ("silt", "random_read", 2.02),
    ("silt", "random_mixed", 3.78),
    ("silt", "zipf_mixed", 2.68),
    ("silt", "random_seek", 4.54),
    ("silt", "seq_seek", 0.84),
    ("silt", "zipf_seek", 3.08),
    ("sqlite", "random_read", 2.53),
    ("sqlite", "random_mixed", 7.80),
    ("sqlite", "zipf_mixed", 6.45),
    ("sqlite", "random_seek", 2.20),
    ("sqlite", "seq_seek", 1.50),
    ("sqlite", "zipf_seek", 2.03),
    ("silt", "range100", 1.41),
    ("silt", "seq_range", 0.71),
    ("sqlite", "range100", 1.12),
    ("sqlite", "seq_range", 0.71),
    ("silt", "range1000", 1.06),
    ("sqlite", "range1000", 0.74),
    ("silt", "iterate", 0.35),
    ("sqlite", "iterate", 0.30),
    ("silt", "random_delete", 3.87),
    ("sqlite", "random_delete", 22.13),
    ("silt", "random_write@full/1", 134.44),
    ("silt", "random_write@full/10", 18.96),
    ("silt", "random_write@full/100", 8.42),
    ("silt", "random_write@full/1000", 6.31),
    ("silt", "random_delete@full/1", 137.45),
    ("silt", "random_delete@full/10", 19.12),
    ("silt", "random_delete@full/100", 8.11),
    ("silt", "random_delete@full/1000", 5.82),
    ("sqlite", "random_write@full/1", 135.97),
    ("sqlite", "random_write@full/10", 42.19),
    ("sqlite", "random_write@full/100", 17.57),
    ("sqlite", "random_write@full/1000", 9.53),
    ("sqlite", "random_delete@full/1", 206.72),
    ("sqlite", "random_delete@full/10", 36.53),
    ("sqlite", "random_delete@full/100", 24.42),
    ("sqlite", "random_delete@full/1000", 13.98),
];

/// Measured wall seconds of one preload of 1,000,000 keys (16 + 100 bytes): load, settle,
/// close, copy into the image directory and reopen.
const LOAD_SECONDS: &[(&str, f64)] = &[("silt", 3.71), ("sqlite", 39.17)];

/// Measured wall seconds to copy a load image of 1,000,000 keys into a cell's directory
/// and open it (silt's includes its preallocated log segments).
const COPY_SECONDS: &[(&str, f64)] = &[("silt", 0.35), ("sqlite", 0.05)];

/// Engines the tables above do not know are estimated as this one (the slowest measured).
const UNKNOWN_LIKE: &str = "sqlite";

/// What the suite will run and about how long it takes, for the estimate printed at the
/// start and the progress bar (weighted by each cell's estimate).
struct Plan {
    total_ms: u64,
    cells: usize,
}

/// The load images a run has made so far: (engine, keys, sync).
#[derive(Default)]
struct Images(std::collections::HashSet<(String, u64, String)>);

fn per_engine<'a, T: Copy>(table: &'a [(&'a str, T)], engine: &str) -> T {
    table
        .iter()
        .find(|(e, _)| *e == engine)
        .or_else(|| table.iter().find(|(e, _)| *e == UNKNOWN_LIKE))
        .map(|(_, v)| *v)
        .expect("the tables list UNKNOWN_LIKE")
}

/// [`CELL_SECONDS`] of a cell; a cell the table does not list (another suite size or a new
/// workload) is taken as the engine's slowest listed one.
fn cell_seconds(engine: &str, workload: &str, sync: &str, batch: usize) -> f64 {
    let known = CELL_SECONDS.iter().any(|(e, _, _)| *e == engine);
    let e = if known { engine } else { UNKNOWN_LIKE };
    let key = if sync == "none" {
        workload.to_string()
    } else {
        format!("{workload}@{sync}/{batch}")
    };
    CELL_SECONDS
        .iter()
        .find(|(x, w, _)| *x == e && *w == key)
        .map(|(_, _, s)| *s)
        .unwrap_or_else(|| {
            CELL_SECONDS
                .iter()
                .filter(|(x, _, _)| *x == e)
                .map(|(_, _, s)| *s)
                .fold(0.0, f64::max)
        })
}

impl Plan {
    fn new(groups: &[Group], engines: &[String], repeat: usize, threads: usize) -> Plan {
        let mut plan = Plan {
            total_ms: 0,
            cells: 0,
        };
        let mut images = Images::default();
        let default_threads = threads.to_string();
        for _ in 0..repeat {
            for g in groups {
                let ts = g.threads.unwrap_or(&default_threads);
                for e in engines {
                    for w in g.workloads.split(',') {
                        for sync in g.sync.split(',') {
                            for b in g.batch.split(',') {
                                let b = b.parse().unwrap_or(1);
                                for _ in ts.split(',') {
                                    plan.total_ms += Plan::ms(e, w, sync, b, g, &mut images);
                                    plan.cells += 1;
                                }
                            }
                        }
                    }
                }
            }
        }
        plan
    }

    /// The estimate of one cell of group `g` in milliseconds. A cell that preloads pays a
    /// whole load the first time its engine loads `g.num` keys (`images` remembers), and a
    /// copy of the image after that, as `run --load-cache` does.
    fn ms(
        engine: &str,
        workload: &str,
        sync: &str,
        batch: usize,
        g: &Group,
        images: &mut Images,
    ) -> u64 {
        let scale = g.num as f64 / 1e6;
        let load = if !crate::run::preloads(workload) {
            0.0
        } else if images
            .0
            .insert((engine.to_string(), g.num, sync.to_string()))
        {
            per_engine(LOAD_SECONDS, engine) * scale
        } else {
            per_engine(COPY_SECONDS, engine) * scale
        };
        ((cell_seconds(engine, workload, sync, batch) * scale + load) * 1000.0) as u64
    }

    fn total_ms(&self) -> u64 {
        self.total_ms.max(1)
    }

    fn describe(&self, engines: &[String]) -> String {
        let unknown: Vec<&str> = engines
            .iter()
            .filter(|e| !LOAD_SECONDS.iter().any(|(k, _)| k == e))
            .map(String::as_str)
            .collect();
        let mut s = format!(
            "silt-bench suite seeds: {} cells, about {} on a 2-vCPU machine like the one measured \
             (BENCHMARKS.md); the bar below is weighted by each cell's estimate",
            self.cells,
            fmt_minutes(self.total_ms as f64 / 1000.0)
        );
        if !unknown.is_empty() {
            s.push_str(&format!(
                "; no timings for {} yet, estimated as {UNKNOWN_LIKE}",
                unknown.join(", ")
            ));
        }
        s
    }
}

/// A line above the progress bar, or on stderr as it is when there is no bar to draw
/// (stderr is not a terminal).
fn say(bar: &indicatif::ProgressBar, line: String) {
    if bar.is_hidden() {
        eprintln!("{line}");
    } else {
        bar.println(line);
    }
}

fn fmt_minutes(secs: f64) -> String {
    if secs < 90.0 {
        format!("{secs:.0} s")
    } else {
        format!("{:.0} min", secs / 60.0)
    }
}

pub fn suite(mut a: SuiteArgs) -> Result<(), String> {
    if a.out.is_none() {
        a.out = Some(PathBuf::from("bench-results").join(&a.name));
    }
    if a.resume && a.name != "seeds" {
        return Err("--resume is for `suite seeds` only".into());
    }
    match a.name.as_str() {
        "seeds" => seeds_suite(a),
        "txn" => txn_suite(a),
        other => Err(format!("unknown suite {other:?} (known: seeds, txn)")),
    }
}

/// The engines `suite txn` runs by default: every transactional one compiled in.
pub const TXN_ENGINES: &[&str] = &["silt", "sqlite", "fjall", "redb", "tidesdb", "rocksdb"];

/// The `run` invocations of `suite txn`: (name, the run's flags).
fn txn_groups(a: &SuiteArgs, engines: &str) -> Vec<(&'static str, RunArgs)> {
    let base = RunArgs {
        engines: engines.to_string(),
        cache_bytes: a.cache_bytes,
        dir: a.dir.clone(),
        fsync_delay_us: a.fsync_delay_us,
        seed: a.seed,
        quiet: true,
        sync: "none".into(),
        ..RunArgs::defaults()
    };
    vec![
        (
            "tpcc",
            RunArgs {
                workloads: "tpcc".into(),
                threads: a.threads.to_string(),
                warehouses: a.warehouses,
                tpcc_scale: a.tpcc_scale,
                duration: a.tpcc_duration,
                ..base.clone()
            },
        ),
        (
            "queue_indexed",
            RunArgs {
                workloads: "queue_indexed".into(),
                num: a.queue_rows,
                duration: a.queue_duration,
                batch: a.queue_batch.to_string(),
                ..base.clone()
            },
        ),
        (
            "txn_batch_sweep",
            RunArgs {
                workloads: "txn_batch_sweep".into(),
                num: a.sweep_rows,
                batch: a.sweep_batch.clone(),
                ..base
            },
        ),
    ]
}

/// Creates `--out`, its `results.jsonl` and `command.txt`; returns the file and the note.
fn start_out(a: &SuiteArgs) -> Result<(std::fs::File, PathBuf, String), String> {
    let out = a.out();
    std::fs::create_dir_all(out).map_err(|e| format!("--out {}: {e}", out.display()))?;
    let results_path = out.join("results.jsonl");
    let file = std::fs::File::create(&results_path)
        .map_err(|e| format!("{}: {e}", results_path.display()))?;
    let command: Vec<String> = std::env::args().collect();
    let note = format!(
        "Command: `silt-bench {}` (on {}, {} CPUs; one process per cell).",
        command.get(1..).unwrap_or_default().join(" "),
        crate::output::today(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
    );
    std::fs::write(out.join("command.txt"), format!("{note}\n"))
        .map_err(|e| format!("{}: {e}", out.display()))?;
    Ok((file, results_path, note))
}

/// The line `resume.txt` gets once every cell of its run has run.
const FINISHED: &str = "finished";

/// What a resumed `suite seeds` must agree on with the run it continues: every flag that
/// changes which cells run or what they measure (`--dir`, where the databases go, may
/// differ).
fn fingerprint(a: &SuiteArgs, engines: &str) -> String {
    format!(
        "suite seeds --engines {engines} --num {} --threads {} --repeat {} --cache-bytes {} \
         --fsync-delay-us {} --seed {} --scale {}",
        a.num, a.threads, a.repeat, a.cache_bytes, a.fsync_delay_us, a.seed, a.scale
    )
}

/// Reopens `--out` of an interrupted `suite seeds` (`--resume`): checks `resume.txt`
/// against this run's flags, keeps the finished cells of `results.jsonl` (status ok; a
/// failed or torn line is dropped, so its cell runs again) and rewrites the file with
/// them, to be appended to. Returns the file, its path, the report's note and the kept
/// results.
fn resume_out(
    a: &SuiteArgs,
    engines: &str,
) -> Result<(std::fs::File, PathBuf, String, Vec<EngineResult>), String> {
    let out = a.out();
    let stamp = out.join("resume.txt");
    let want = fingerprint(a, engines);
    let had = std::fs::read_to_string(&stamp).map_err(|e| {
        format!(
            "--resume: {} has no run to go on with ({}: {e})",
            out.display(),
            stamp.display()
        )
    })?;
    let had = had.lines().next().unwrap_or_default();
    if had.trim() != want {
        return Err(format!(
            "--resume: the run in {} was started as `{}`, not `{want}`",
            out.display(),
            had.trim()
        ));
    }
    let results_path = out.join("results.jsonl");
    let text = std::fs::read_to_string(&results_path).unwrap_or_default();
    // Kept lines stay as they were written, byte for byte; the others (failed cells, a
    // torn last line, anything this binary cannot read) move to `results.dropped.jsonl`,
    // never lost. The new file replaces the old by a rename, so a kill meanwhile leaves
    // one or the other whole.
    let mut kept = Vec::new();
    let mut body = String::new();
    let mut dropped = String::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match serde_json::from_str::<EngineResult>(line.trim()) {
            Ok(r) if r.status == "ok" => {
                body.push_str(line);
                body.push('\n');
                kept.push(r);
            }
            _ => {
                dropped.push_str(line);
                dropped.push('\n');
            }
        }
    }
    if !dropped.is_empty() {
        let path = out.join("results.dropped.jsonl");
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        f.write_all(dropped.as_bytes())
            .and_then(|()| f.sync_all())
            .map_err(|e| format!("{}: {e}", path.display()))?;
        eprintln!(
            "silt-bench suite seeds: {} unfinished or unreadable lines moved to {} (their cells run again)",
            dropped.lines().count(),
            path.display()
        );
    }
    let tmp = out.join("results.jsonl.tmp");
    std::fs::write(&tmp, &body)
        .and_then(|()| std::fs::File::open(&tmp)?.sync_all())
        .and_then(|()| std::fs::rename(&tmp, &results_path))
        .map_err(|e| format!("{}: {e}", results_path.display()))?;
    let file = std::fs::OpenOptions::new()
        .append(true)
        .open(&results_path)
        .map_err(|e| format!("{}: {e}", results_path.display()))?;
    let command_path = out.join("command.txt");
    let first = std::fs::read_to_string(&command_path).unwrap_or_default();
    let resumed = format!(
        "Resumed on {} with {} finished cells kept.",
        crate::output::today(),
        kept.len()
    );
    let note = format!("{} {resumed}", first.lines().collect::<Vec<_>>().join(" "))
        .trim()
        .to_string();
    std::fs::write(&command_path, format!("{note}\n"))
        .map_err(|e| format!("{}: {e}", command_path.display()))?;
    Ok((file, results_path, note, kept))
}

/// Writes the report of `all` and fails if a cell failed.
fn finish_out(a: &SuiteArgs, all: &[EngineResult], note: &str) -> Result<(), String> {
    let report = crate::report::write_report(a.out(), all, &a.out().join("charts"), "silt", note)?;
    println!("{}", report.display());
    let failed = all.iter().filter(|r| r.status == "failed").count();
    if failed > 0 {
        return Err(format!(
            "{failed} cell(s) failed (see {})",
            report.display()
        ));
    }
    Ok(())
}

/// `suite txn`: tpcc, queue_indexed and txn_batch_sweep (module docs).
fn txn_suite(a: SuiteArgs) -> Result<(), String> {
    let engines = match &a.engines {
        Some(e) => e.clone(),
        None => TXN_ENGINES
            .iter()
            .filter(|e| crate::engine::availability(e).is_ok())
            .copied()
            .collect::<Vec<_>>()
            .join(","),
    };
    if a.queue_rows == 0 || a.sweep_rows == 0 {
        return Err("--queue-rows and --sweep-rows must be positive".into());
    }
    let (mut file, results_path, note) = start_out(&a)?;
    let started = std::time::Instant::now();
    let mut all: Vec<EngineResult> = Vec::new();
    let groups = txn_groups(&a, &engines);
    let cells: usize = groups
        .iter()
        .map(|(name, g)| {
            let per = if *name == "txn_batch_sweep" {
                crate::stats::names(&g.batch).len()
            } else {
                1
            };
            per * crate::stats::names(&g.engines).len()
        })
        .sum::<usize>()
        * a.repeat.max(1);
    eprintln!(
        "silt-bench suite txn: {cells} cells on {engines}: tpcc {} s each, queue_indexed {} s \
         each on {} rows, txn_batch_sweep {} rows at {} rows per transaction",
        a.tpcc_duration, a.queue_duration, a.queue_rows, a.sweep_rows, a.sweep_batch
    );
    let mut done = 0;
    for repeat in 0..a.repeat.max(1) {
        for (name, args) in &groups {
            eprintln!(
                "silt-bench suite txn: {name} (repeat {}/{})",
                repeat + 1,
                a.repeat.max(1)
            );
            let mut write_err = None;
            crate::run::run_matrix(args, &mut |r| {
                done += 1;
                if r.status != "unavailable" {
                    eprintln!("[{done}/{cells}] {}", crate::run::progress(r));
                }
                let mut r = r.clone();
                r.repeat = repeat;
                if let Err(e) = writeln!(file, "{}", crate::output::engine_json_line(&r)) {
                    write_err.get_or_insert(e);
                }
                all.push(r);
            })?;
            if let Some(e) = write_err {
                return Err(format!("{}: {e}", results_path.display()));
            }
        }
    }
    eprintln!(
        "silt-bench suite txn: {} cells in {:.0} s",
        all.len(),
        started.elapsed().as_secs_f64()
    );
    finish_out(&a, &all, &note)
}

fn seeds_suite(a: SuiteArgs) -> Result<(), String> {
    let engines_flag = a.engines.clone().unwrap_or_else(|| "silt,sqlite".into());
    if a.num < 1000 {
        return Err("--num must be at least 1000".into());
    }
    let full = match a.scale.as_str() {
        "default" => false,
        "full" => true,
        other => return Err(format!("--scale must be default or full, not {other:?}")),
    };
    let stamp = a.out().join("resume.txt");
    let (mut file, results_path, note, kept) = if a.resume {
        resume_out(&a, &engines_flag)?
    } else {
        // A run stopped before its end is not thrown away by a fresh start by mistake.
        let unfinished =
            std::fs::read_to_string(&stamp).is_ok_and(|t| !t.lines().any(|l| l == FINISHED));
        let has_results =
            std::fs::metadata(a.out().join("results.jsonl")).is_ok_and(|m| m.len() > 0);
        if unfinished && has_results {
            return Err(format!(
                "{} holds a run that did not finish: go on with it with --resume, or remove \
                 its results.jsonl (or give another --out) to start afresh",
                a.out().display()
            ));
        }
        let (file, path, note) = start_out(&a)?;
        std::fs::write(&stamp, format!("{}\n", fingerprint(&a, &engines_flag)))
            .map_err(|e| format!("{}: {e}", stamp.display()))?;
        (file, path, note, Vec::new())
    };
    // One load per engine and load shape, copied into every cell that preloads the same
    // keys (see `run --load-cache`): most of the suite's read cells preload the same N keys.
    let load_cache = match &a.dir {
        Some(d) => {
            std::fs::create_dir_all(d).map_err(|e| format!("--dir {}: {e}", d.display()))?;
            tempfile::Builder::new()
                .prefix("load-images-")
                .tempdir_in(d)
        }
        None => tempfile::Builder::new()
            .prefix("silt-bench-load-")
            .tempdir(),
    }
    .map_err(|e| format!("load image directory: {e}"))?;
    let started = std::time::Instant::now();
    let mut all: Vec<EngineResult> = kept.clone();
    let mut groups = seeds(a.num);
    if full {
        groups.extend(seeds_full(a.num));
    }
    let engines = crate::stats::names(&engines_flag);
    let plan = Plan::new(&groups, &engines, a.repeat.max(1), a.threads);
    let mut images = Images::default();
    let mut done = kept.len();
    eprintln!("{}", plan.describe(&engines));
    if a.resume {
        eprintln!(
            "silt-bench suite seeds: resuming {}: {} finished cells kept, not run again",
            a.out().display(),
            kept.len()
        );
    }
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(plan.total_ms()),
        indicatif::ProgressDrawTarget::stderr_with_hz(2),
    );
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "suite seeds {wide_bar} {percent}% {elapsed} of ~{msg}",
        )
        .expect("a valid template"),
    );
    bar.set_message(fmt_minutes(plan.total_ms() as f64 / 1000.0));
    for repeat in 0..a.repeat.max(1) {
        for g in &groups {
            say(
                &bar,
                format!(
                    "silt-bench suite seeds: {} (repeat {}/{}): {}",
                    g.name,
                    repeat + 1,
                    a.repeat.max(1),
                    g.workloads
                ),
            );
            let args = RunArgs {
                engines: engines_flag.clone(),
                workloads: g.workloads.into(),
                num: g.num,
                reads: g.reads,
                threads: g
                    .threads
                    .map_or_else(|| a.threads.to_string(), str::to_string),
                batch: g.batch.into(),
                sync: g.sync.into(),
                cache_bytes: a.cache_bytes,
                dir: a.dir.clone(),
                fsync_delay_us: a.fsync_delay_us,
                seed: a.seed,
                load_cache: Some(load_cache.path().to_path_buf()),
                quiet: true,
                ..RunArgs::defaults()
            };
            let mut write_err = None;
            let finished = |k: &crate::run::CellKey<'_>| {
                kept.iter().any(|r| {
                    r.repeat == repeat
                        && r.num == g.num
                        && r.engine == k.engine
                        && r.workload == k.workload
                        && r.sync == k.sync
                        && r.threads == k.threads
                        && r.batch == k.batch
                })
            };
            crate::run::run_matrix_except(&args, &finished, &mut |r| {
                done += 1;
                if r.status != "unavailable" {
                    say(
                        &bar,
                        format!("[{done}/{}] {}", plan.cells, crate::run::progress(r)),
                    );
                }
                bar.inc(Plan::ms(
                    &r.engine,
                    &r.workload,
                    &r.sync,
                    r.batch,
                    g,
                    &mut images,
                ));
                let mut r = r.clone();
                r.repeat = repeat;
                let line = crate::output::engine_json_line(&r);
                if let Err(e) = writeln!(file, "{line}") {
                    write_err.get_or_insert(e);
                }
                all.push(r);
            })?;
            if let Some(e) = write_err {
                return Err(format!("{}: {e}", results_path.display()));
            }
        }
    }
    bar.finish_and_clear();
    std::fs::write(
        &stamp,
        format!("{}\n{FINISHED}\n", fingerprint(&a, &engines_flag)),
    )
    .map_err(|e| format!("{}: {e}", stamp.display()))?;
    eprintln!(
        "silt-bench suite seeds: {} cells in {:.0} s (estimated {:.0} s)",
        all.len(),
        started.elapsed().as_secs_f64(),
        plan.total_ms() as f64 / 1000.0
    );
    finish_out(&a, &all, &note)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--resume` knows a finished cell by engine, workload, sync, threads, batch, N and
    /// repeat: no two cells of the matrix may share those.
    #[test]
    fn no_two_cells_of_the_seed_matrix_share_a_resume_key() {
        for n in [1000, 1_000_000] {
            let mut groups = seeds(n);
            groups.extend(seeds_full(n));
            let mut seen = std::collections::HashSet::new();
            for g in &groups {
                for w in g.workloads.split(',') {
                    for s in g.sync.split(',') {
                        for t in g.threads.unwrap_or("2").split(',') {
                            for b in g.batch.split(',') {
                                assert!(
                                    seen.insert((w, s, t, b, g.num)),
                                    "{w} sync {s} threads {t} batch {b} N {} again in {}",
                                    g.num,
                                    g.name
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn the_seed_matrix_names_every_seed_workload() {
        let groups = seeds(100_000);
        for p in crate::run::PRESETS {
            assert!(
                groups
                    .iter()
                    .any(|g| g.workloads.split(',').any(|w| w == p.name)),
                "{} is not in the suite",
                p.name
            );
        }
        let durable = groups.iter().find(|g| g.sync == "full").unwrap();
        assert_eq!(durable.batch, "1,10,100,1000");
    }

    #[test]
    fn the_estimate_pays_one_load_per_engine_and_shape_and_copies_after() {
        let groups = seeds(1_000_000);
        let one = |e: &str, repeat| Plan::new(&groups, &[e.to_string()], repeat, 2);
        let silt = one("silt", 1);
        assert_eq!(silt.cells, 24);
        // Loads: 1M keys (sync none) and 50K keys (the durable group), once each; every
        // other preloading cell copies an image.
        let loads = (LOAD_SECONDS[0].1 * (1.0 + 0.05) * 1000.0) as u64;
        assert!(silt.total_ms > loads, "{}", silt.total_ms);
        // A second repeat finds the images: it costs less than the first.
        let twice = one("silt", 2);
        assert!(twice.total_ms < 2 * silt.total_ms);
        assert!(twice.total_ms > silt.total_ms);
        // An engine without timings is estimated as the slowest measured one.
        assert_eq!(one("rocksdb", 1).total_ms, one(UNKNOWN_LIKE, 1).total_ms);
        // Twice the keys, about twice the time.
        let big = Plan::new(&seeds(2_000_000), &["silt".to_string()], 1, 2);
        assert!(big.total_ms > silt.total_ms * 19 / 10 && big.total_ms < silt.total_ms * 21 / 10);
    }

    #[test]
    fn the_full_scale_adds_the_seeds_regime_and_keeps_the_default_groups() {
        let n = 1_000_000;
        let full = seeds_full(n);
        // Batch 1000 at 5M operations (large values: 500K), 2 and 8 threads, sync none and
        // full, every write workload of the seeds.
        let writes = full.iter().find(|g| g.name == "seed writes").unwrap();
        assert_eq!(
            (writes.num, writes.batch, writes.sync),
            (5_000_000, "1000", "none,full")
        );
        assert_eq!(writes.threads, Some("2,8"));
        let large = full.iter().find(|g| g.name == "seed large").unwrap();
        assert_eq!(
            (large.num, large.batch, large.threads),
            (500_000, "1000", Some("2,8"))
        );
        // Every seed workload runs at the full scale too.
        for p in crate::run::PRESETS {
            assert!(
                full.iter()
                    .any(|g| g.workloads.split(',').any(|w| w == p.name)),
                "{} is not in the full scale",
                p.name
            );
        }
        // Reads on 10M keys, random reads, seeks and range100.
        let ltc: Vec<&Group> = full.iter().filter(|g| g.num == 10 * n).collect();
        let w: Vec<&str> = ltc.iter().flat_map(|g| g.workloads.split(',')).collect();
        assert_eq!(w, ["random_read", "random_seek", "range100"]);
        // Cells: the default 24, then 5 workloads x 2 syncs x 2 thread counts, 1 x 2 x 2,
        // 10 read workloads x 2 thread counts, 3 larger-than-cache cells.
        let mut groups = seeds(n);
        groups.extend(full);
        let plan = Plan::new(&groups, &["silt".to_string()], 1, 2);
        assert_eq!(plan.cells, 24 + 20 + 4 + 20 + 3);
    }
}
