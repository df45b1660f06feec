//! `silt-bench commit`: the commit-path matrix.
//!
//! Every cell opens a fresh log (or, for `fsync-loop`, a fresh preallocated file) in its own
//! directory under `--dir`, starts its callers together, and times only the commits. Cells
//! of a matrix run one after another in one process on the same disk; with `--repeat N` the
//! whole matrix runs N times interleaved (A B A B) and the table reports medians.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use silt_vfs::{DelayFs, FileSystem, OsFs};
use silt_wal::{Preallocate, Strategy, SyncMode};

use crate::output::{json_line, table, today};
use crate::stats::list_of;

mod cell;
mod fsync_loop;

/// Flags of `silt-bench commit`. Names are a contract: add, never rename.
#[derive(Args, Debug, Clone)]
pub struct CommitArgs {
    /// Comma-separated: pipelined, direct, timed, fsync-loop.
    #[arg(long, default_value = "pipelined,direct,timed,fsync-loop")]
    strategies: String,
    /// Comma-separated: none, interval, full.
    #[arg(long, default_value = "full,none")]
    sync: String,
    /// Comma-separated thread counts (default 1,8 unless --tasks is given).
    #[arg(long)]
    threads: Option<String>,
    /// Comma-separated counts of concurrent Tokio tasks (cells with tasks instead of threads).
    #[arg(long, default_value = "")]
    tasks: String,
    /// Comma-separated payload sizes in bytes.
    #[arg(long, default_value = "100")]
    record_bytes: String,
    /// Commits per cell, split across its threads or tasks.
    #[arg(long, default_value_t = 20_000)]
    ops: u64,
    /// Stop a cell early after this many seconds (its `ops` then says how many commits it
    /// did); 0 means no limit, so every cell does exactly `--ops` commits. The default cap
    /// keeps the default matrix to about a minute: `timed` with one caller waits its full
    /// timer (10 ms) for every commit.
    #[arg(long, default_value_t = 5.0)]
    max_seconds: f64,
    /// Where each cell's log is created (a fresh subdirectory per cell, removed after).
    #[arg(long, default_value = "silt-bench-data")]
    dir: PathBuf,
    /// Emulate a slower device: every fdatasync takes at least this many µs more.
    #[arg(long, default_value_t = 0)]
    fsync_delay_us: u64,
    /// merged: one device flush at a time, concurrent fdatasyncs share the next one (as
    /// Linux's blk-flush merges them); serial: each fdatasync gets a flush of its own.
    #[arg(long, default_value = "merged")]
    fsync_delay_model: String,
    /// table or json (one object per line per cell and repeat).
    #[arg(long, default_value = "table")]
    format: String,
    /// Run the whole matrix this many times, interleaved; the table shows medians.
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// TimedGroups: a group closes at this many commits (MuopDB used 940).
    #[arg(long, default_value_t = 940)]
    timed_max_entries: usize,
    /// TimedGroups: a group closes this long after it opened (MuopDB used 10 ms).
    #[arg(long, default_value_t = 10_000)]
    timed_max_wait_us: u64,
    /// Interval sync mode's period in ms.
    #[arg(long, default_value_t = 10)]
    interval_ms: u64,
    /// Segment size of each log in bytes.
    #[arg(long, default_value_t = 64 << 20)]
    segment_bytes: u64,
    /// Comma-separated preallocation modes to compare: zero, recycle, allocate (recycle, else
    /// fallocate).
    #[arg(long, default_value = "recycle")]
    preallocate: String,
    /// Purge segments behind the writers every millisecond (as a checkpointing engine
    /// would), so recycling has segments to reuse.
    #[arg(long)]
    purge: bool,
    /// The seed 001 workload: 1000 Tokio tasks, one durable 545-byte entry each (same as
    /// --tasks 1000 --ops 1000 --record-bytes 545 --sync full).
    #[arg(long)]
    seed001: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Wal(&'static str),
    FsyncLoop,
}

#[derive(Clone, Debug)]
struct Cell {
    kind: Kind,
    strategy: Strategy,
    sync: SyncMode,
    sync_name: String,
    threads: usize,
    tasks: usize,
    record_bytes: usize,
    preallocate: Preallocate,
}

fn cells(a: &CommitArgs) -> Result<Vec<Cell>, String> {
    let mut out = Vec::new();
    let tasks: Vec<usize> = list_of(&a.tasks, "tasks")?;
    let threads: Vec<usize> = match &a.threads {
        Some(t) => list_of(t, "threads")?,
        None if tasks.is_empty() => vec![1, 8],
        None => vec![],
    };
    let sizes: Vec<usize> = list_of(&a.record_bytes, "record-bytes")?;
    let syncs: Vec<String> = list_of(&a.sync, "sync")?;
    let strategies: Vec<String> = list_of(&a.strategies, "strategies")?;
    let mut preallocs = Vec::new();
    for p in list_of::<String>(&a.preallocate, "preallocate")? {
        preallocs.push(match p.as_str() {
            "zero" => Preallocate::ZeroFill,
            "recycle" => Preallocate::Recycle,
            "allocate" => Preallocate::RecycleElseAllocate,
            other => {
                return Err(format!(
                    "--preallocate: unknown {other:?} (zero, recycle, allocate)"
                ))
            }
        });
    }
    if threads.iter().chain(&tasks).any(|&n| n == 0) {
        return Err("--threads and --tasks must be positive".into());
    }
    for s in &syncs {
        let sync = match s.as_str() {
            "none" => SyncMode::None,
            "interval" => SyncMode::Interval(Duration::from_millis(a.interval_ms.max(1))),
            "full" => SyncMode::Full,
            other => {
                return Err(format!(
                    "--sync: unknown mode {other:?} (none, interval, full)"
                ))
            }
        };
        for st in &strategies {
            let (kind, strategy) = match st.as_str() {
                "pipelined" => (Kind::Wal("pipelined"), Strategy::Pipelined),
                "direct" => (Kind::Wal("direct"), Strategy::DirectPwrite),
                "timed" => (
                    Kind::Wal("timed"),
                    Strategy::TimedGroups {
                        max_entries: a.timed_max_entries.max(1),
                        max_wait: Duration::from_micros(a.timed_max_wait_us),
                    },
                ),
                "fsync-loop" => (Kind::FsyncLoop, Strategy::Pipelined),
                other => {
                    return Err(format!(
                        "--strategies: unknown {other:?} (pipelined, direct, timed, fsync-loop)"
                    ))
                }
            };
            for &size in &sizes {
                let callers = threads
                    .iter()
                    .map(|&t| (t, 0))
                    .chain(tasks.iter().map(|&t| (0, t)));
                for (threads, tasks) in callers {
                    for &preallocate in &preallocs {
                        out.push(Cell {
                            kind,
                            strategy,
                            sync,
                            sync_name: s.clone(),
                            threads,
                            tasks,
                            record_bytes: size,
                            preallocate,
                        });
                    }
                }
            }
        }
    }
    Ok(out)
}

pub fn run(mut a: CommitArgs) -> Result<(), String> {
    if a.seed001 {
        a.tasks = "1000".into();
        a.threads = None;
        a.ops = 1000;
        a.record_bytes = "545".into();
        a.sync = "full".into();
    }
    if a.format != "table" && a.format != "json" {
        return Err(format!("--format: {:?} is not table or json", a.format));
    }
    if a.fsync_delay_model != "merged" && a.fsync_delay_model != "serial" {
        return Err("--fsync-delay-model: merged or serial".into());
    }
    let cells = cells(&a)?;
    std::fs::create_dir_all(&a.dir).map_err(|e| format!("--dir {}: {e}", a.dir.display()))?;
    let mut results = Vec::new();
    let date = today();
    for repeat in 0..a.repeat.max(1) {
        for (i, cell) in cells.iter().enumerate() {
            let dir = a
                .dir
                .join(format!("cell-{}-{i}-{repeat}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            let r = cell::run_cell(&a, cell, &dir, repeat, &date);
            let _ = std::fs::remove_dir_all(&dir);
            let r = r?;
            eprintln!(
                "[{}/{}] {} {} {} record={}B: {} commits in {:.1} ms, {:.0} commits/s, \
                 p99 {:.1} µs, {:.3} fsyncs/commit",
                repeat * cells.len() + i + 1,
                cells.len() * a.repeat.max(1),
                r.strategy,
                r.sync,
                if r.tasks > 0 {
                    format!("{} tasks", r.tasks)
                } else {
                    format!("{} threads", r.threads)
                },
                r.record_bytes,
                r.ops,
                r.seconds * 1e3,
                r.ops_per_sec,
                r.p99_us,
                r.fsyncs_per_commit
            );
            if a.format == "json" {
                println!("{}", json_line(&r));
            }
            results.push(r);
        }
    }
    if a.format == "table" {
        println!("{}", table(&results));
    }
    Ok(())
}

fn file_system(a: &CommitArgs) -> Arc<dyn FileSystem> {
    let os: Arc<dyn FileSystem> = OsFs::new();
    if a.fsync_delay_us == 0 {
        return os;
    }
    let extra = Duration::from_micros(a.fsync_delay_us);
    if a.fsync_delay_model == "serial" {
        DelayFs::serial(os, extra)
    } else {
        DelayFs::new(os, extra)
    }
}

/// A payload of incompressible bytes (xorshift), made before timing.
fn payload(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_are_incompressible_enough() {
        let p = payload(4096, 7);
        let distinct = p.iter().collect::<std::collections::HashSet<_>>().len();
        assert!(distinct > 200);
    }
}
