//! `silt-bench commit`: the commit-path matrix.
//!
//! Every cell opens a fresh log (or, for `fsync-loop`, a fresh preallocated file) in its own
//! directory under `--dir`, starts its callers together, and times only the commits. Cells
//! of a matrix run one after another in one process on the same disk; with `--repeat N` the
//! whole matrix runs N times interleaved (A B A B) and the table reports medians.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use clap::Args;
use silt_vfs::{DelayFs, File, FileSystem, OsFs};
use silt_wal::{Options, Preallocate, Strategy, SyncMode, Wal};

use crate::output::{json_line, table, CommitResult};
use crate::stats::{latency_histogram, list_of, split};

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
    /// Comma-separated preallocation modes to compare: zero, recycle.
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
            other => return Err(format!("--preallocate: unknown {other:?} (zero, recycle)")),
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
            let r = run_cell(&a, cell, &dir, repeat, &date);
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

/// What one caller measured.
struct Part {
    /// Latencies in ns. A histogram per caller would be ~600 KB; 1000 tasks would spend
    /// their time zeroing them.
    lat_ns: Vec<u64>,
    ops: u64,
    start: Instant,
    end: Instant,
}

/// Wall time of a cell: from the first caller's start to the last caller's end.
fn span(parts: &[Part]) -> f64 {
    let start = parts.iter().map(|p| p.start).min();
    let end = parts.iter().map(|p| p.end).max();
    match (start, end) {
        (Some(s), Some(e)) => e.duration_since(s).as_secs_f64().max(1e-9),
        _ => 1e-9,
    }
}

/// The thing a cell commits to.
enum Target {
    Wal(Arc<Wal>),
    Loop(Arc<FsyncLoop>),
}

impl Target {
    fn commit(&self, p: &[u8]) -> Result<(), String> {
        match self {
            Target::Wal(w) => w.append(p).map(|_| ()).map_err(|e| e.to_string()),
            Target::Loop(l) => l.commit(p),
        }
    }
}

/// The `fsync-loop` file never grows past this; longer runs wrap around inside it (the
/// blocks are allocated and written either way).
const FLOOR_FILE_MAX: u64 = 1 << 30;

/// The physical floor: `pwrite` at the next offset, then `fdatasync` (under `full`). The
/// file is zero-filled to the cell's size and synced before timing, so no commit allocates
/// blocks or grows the file.
struct FsyncLoop {
    file: Arc<dyn File>,
    next: AtomicU64,
    len: u64,
    sync_each: bool,
    fsyncs: AtomicU64,
    stop: std::sync::atomic::AtomicBool,
}

impl FsyncLoop {
    fn open(
        fs: &Arc<dyn FileSystem>,
        dir: &Path,
        bytes: u64,
        sync_each: bool,
    ) -> Result<Self, String> {
        fs.create_dir_all(dir).map_err(|e| e.to_string())?;
        let file = fs
            .create(&dir.join("floor.dat"))
            .map_err(|e| e.to_string())?;
        let zeros = vec![0u8; 1 << 20];
        let mut off = 0;
        while off < bytes {
            let n = (bytes - off).min(zeros.len() as u64) as usize;
            file.write_at(&[&zeros[..n]], off)
                .map_err(|e| e.to_string())?;
            off += n as u64;
        }
        file.sync_data().map_err(|e| e.to_string())?;
        fs.sync_dir(dir).map_err(|e| e.to_string())?;
        Ok(FsyncLoop {
            file,
            next: AtomicU64::new(0),
            len: bytes,
            sync_each,
            fsyncs: AtomicU64::new(0),
            stop: Default::default(),
        })
    }

    fn commit(&self, p: &[u8]) -> Result<(), String> {
        let room = self.len.saturating_sub(p.len() as u64).max(1);
        let at = self.next.fetch_add(p.len() as u64, Relaxed) % room;
        self.file.write_at(&[p], at).map_err(|e| e.to_string())?;
        if self.sync_each {
            self.fsyncs.fetch_add(1, Relaxed);
            self.file.sync_data().map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

fn run_cell(
    a: &CommitArgs,
    cell: &Cell,
    dir: &Path,
    repeat: usize,
    date: &str,
) -> Result<CommitResult, String> {
    let fs = file_system(a);
    let callers = cell.threads.max(cell.tasks).max(1);
    let quotas = split(a.ops, callers);
    let deadline = (a.max_seconds > 0.0).then(|| Duration::from_secs_f64(a.max_seconds));
    let mut interval_thread = None;
    let (target, fsyncs_before) = match cell.kind {
        Kind::Wal(_) => {
            let opts = Options::default()
                .sync(cell.sync)
                .strategy(cell.strategy)
                .segment_bytes(a.segment_bytes)
                .preallocate(cell.preallocate)
                .fs(fs.clone());
            let wal = Wal::open(dir, opts).map_err(|e| format!("open {}: {e}", dir.display()))?;
            let before = wal.stats().fsyncs;
            (Target::Wal(Arc::new(wal)), before)
        }
        Kind::FsyncLoop => {
            let record = cell.record_bytes as u64;
            let bytes = (a.ops * record).clamp(1 << 20, FLOOR_FILE_MAX).max(record);
            let l = Arc::new(FsyncLoop::open(
                &fs,
                dir,
                bytes,
                matches!(cell.sync, SyncMode::Full),
            )?);
            if let SyncMode::Interval(every) = cell.sync {
                let l2 = l.clone();
                interval_thread = Some(std::thread::spawn(move || {
                    while !l2.stop.load(Relaxed) {
                        std::thread::sleep(every);
                        l2.fsyncs.fetch_add(1, Relaxed);
                        let _ = l2.file.sync_data();
                    }
                }));
            }
            (Target::Loop(l), 0)
        }
    };
    let target = Arc::new(target);
    let purging = Arc::new(std::sync::atomic::AtomicBool::new(a.purge));
    let purger = match (&*target, a.purge) {
        (Target::Wal(w), true) => {
            let (w, purging) = (w.clone(), purging.clone());
            Some(std::thread::spawn(move || {
                while purging.load(Relaxed) {
                    let _ = w.purge_up_to(w.stats().filled_lsn);
                    std::thread::sleep(Duration::from_millis(1));
                }
            }))
        }
        _ => None,
    };
    // Incompressible payloads, one per caller, made before timing.
    let payloads: Vec<Arc<[u8]>> = (0..callers)
        .map(|c| payload(cell.record_bytes, c as u64 + 1).into())
        .collect();

    let (parts, seconds, async_mode) = if cell.tasks > 0 {
        let native =
            matches!(cell.kind, Kind::Wal(_)) && matches!(cell.strategy, Strategy::Pipelined);
        run_tasks(&target, native, &payloads, &quotas, deadline)?
    } else {
        run_threads(&target, &payloads, &quotas, deadline)?
    };

    // Timing is over: stop the helpers, read the counters, then close the log.
    purging.store(false, Relaxed);
    if let Some(p) = purger {
        let _ = p.join();
    }
    let fsyncs = match &*target {
        Target::Wal(w) => w.stats().fsyncs - fsyncs_before,
        Target::Loop(l) => {
            l.stop.store(true, Relaxed);
            l.fsyncs.load(Relaxed)
        }
    };
    if let Some(t) = interval_thread {
        let _ = t.join();
    }
    let target = Arc::try_unwrap(target).map_err(|_| "a caller outlived its cell")?;
    if let Target::Wal(w) = target {
        let w = Arc::try_unwrap(w).map_err(|_| "a caller outlived its cell")?;
        w.close()
            .map_err(|e| format!("close {}: {e}", dir.display()))?;
    }

    let mut hist = latency_histogram();
    let mut ops = 0;
    for p in parts {
        for ns in p.lat_ns {
            hist.saturating_record(ns.max(1));
        }
        ops += p.ops;
    }
    let us = |q: f64| hist.value_at_quantile(q) as f64 / 1000.0;
    let name = match cell.kind {
        Kind::Wal(n) => n,
        Kind::FsyncLoop => "fsync-loop",
    };
    Ok(CommitResult {
        strategy: name.into(),
        sync: cell.sync_name.clone(),
        threads: cell.threads,
        tasks: cell.tasks,
        record_bytes: cell.record_bytes,
        ops,
        seconds,
        ops_per_sec: ops as f64 / seconds,
        p50_us: us(0.5),
        p95_us: us(0.95),
        p99_us: us(0.99),
        p999_us: us(0.999),
        max_us: hist.max() as f64 / 1000.0,
        fsyncs,
        fsyncs_per_commit: fsyncs as f64 / ops.max(1) as f64,
        bytes_per_fsync: if fsyncs > 0 {
            (ops * cell.record_bytes as u64) as f64 / fsyncs as f64
        } else {
            0.0
        },
        fsync_delay_us: a.fsync_delay_us,
        fsync_delay_model: a.fsync_delay_model.clone(),
        async_mode: async_mode.into(),
        segment_bytes: a.segment_bytes,
        preallocate: match cell.preallocate {
            Preallocate::ZeroFill => "zero",
            Preallocate::Recycle => "recycle",
        }
        .into(),
        repeat,
        date: date.into(),
    })
}

fn expired(start: Instant, deadline: Option<Duration>) -> bool {
    deadline.is_some_and(|d| start.elapsed() >= d)
}

fn run_threads(
    target: &Arc<Target>,
    payloads: &[Arc<[u8]>],
    quotas: &[u64],
    deadline: Option<Duration>,
) -> Result<(Vec<Part>, f64, &'static str), String> {
    let barrier = Arc::new(Barrier::new(payloads.len() + 1));
    let handles: Vec<_> = payloads
        .iter()
        .zip(quotas)
        .map(|(p, &quota)| {
            let (target, barrier, p) = (target.clone(), barrier.clone(), p.clone());
            std::thread::spawn(move || -> Result<Part, String> {
                let mut lat_ns = Vec::with_capacity(quota.min(1 << 20) as usize);
                barrier.wait();
                let start = Instant::now();
                let mut ops = 0;
                while ops < quota && !expired(start, deadline) {
                    let t = Instant::now();
                    target.commit(&p)?;
                    lat_ns.push(t.elapsed().as_nanos() as u64);
                    ops += 1;
                }
                Ok(Part {
                    lat_ns,
                    ops,
                    start,
                    end: Instant::now(),
                })
            })
        })
        .collect();
    barrier.wait();
    let mut parts = Vec::new();
    for h in handles {
        parts.push(h.join().map_err(|_| "a benchmark thread panicked")??);
    }
    let secs = span(&parts);
    Ok((parts, secs, "threads"))
}

/// Runs one Tokio task per payload on a fresh multi-thread runtime (default worker count).
/// `native`: the task awaits `Wal::append_async`; otherwise it awaits `spawn_blocking`
/// around the blocking commit.
fn run_tasks(
    target: &Arc<Target>,
    native: bool,
    payloads: &[Arc<[u8]>],
    quotas: &[u64],
    deadline: Option<Duration>,
) -> Result<(Vec<Part>, f64, &'static str), String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let work: Vec<(Arc<[u8]>, u64)> = payloads.iter().cloned().zip(quotas.to_vec()).collect();
    let target = target.clone();
    // Tasks are spawned from a runtime task (as a server spawns one per request), not from
    // the non-worker `block_on` thread, whose spawns all go through the injection queue.
    let parts = rt.block_on(async move {
        tokio::spawn(spawn_and_join(target, native, work, deadline))
            .await
            .map_err(|e| e.to_string())?
    })?;
    drop(rt);
    let secs = span(&parts);
    Ok((
        parts,
        secs,
        if native { "native" } else { "spawn_blocking" },
    ))
}

async fn spawn_and_join(
    target: Arc<Target>,
    native: bool,
    work: Vec<(Arc<[u8]>, u64)>,
    deadline: Option<Duration>,
) -> Result<Vec<Part>, String> {
    // The seed 001 figure is the total time from spawning the first task to the last
    // task's acknowledgement, so every task's part starts here.
    let start = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for (p, quota) in work {
        let target = target.clone();
        set.spawn(async move {
            let mut lat_ns = Vec::with_capacity(quota.min(1 << 20) as usize);
            let mut ops = 0;
            while ops < quota && !expired(start, deadline) {
                let t = Instant::now();
                match &*target {
                    Target::Wal(w) if native => {
                        w.append_async(&p).await.map_err(|e| e.to_string())?;
                    }
                    _ => {
                        let (target, p) = (target.clone(), p.clone());
                        tokio::task::spawn_blocking(move || target.commit(&p))
                            .await
                            .map_err(|e| e.to_string())??;
                    }
                }
                lat_ns.push(t.elapsed().as_nanos() as u64);
                ops += 1;
            }
            Ok::<Part, String>(Part {
                lat_ns,
                ops,
                start,
                end: Instant::now(),
            })
        });
    }
    let mut parts = Vec::new();
    while let Some(r) = set.join_next().await {
        parts.push(r.map_err(|e| e.to_string())??);
    }
    Ok(parts)
}

/// Today's UTC date as YYYY-MM-DD (civil-from-days, so no date crate is needed).
pub(crate) fn today() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn today_is_a_date() {
        let d = today();
        assert_eq!(d.len(), 10);
        assert!(d.starts_with("20"));
    }

    #[test]
    fn payloads_are_incompressible_enough() {
        let p = payload(4096, 7);
        let distinct = p.iter().collect::<std::collections::HashSet<_>>().len();
        assert!(distinct > 200);
    }
}
