//! One cell of the commit matrix: open its target (a log, or the fsync loop), start its
//! callers together (threads, or tasks on a runtime), time only the commits, and measure.

use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use silt_wal::{Options, Preallocate, Strategy, SyncMode, Wal};

use super::fsync_loop::{FsyncLoop, FLOOR_FILE_MAX};
use super::{file_system, payload, Cell, CommitArgs, Kind};
use crate::output::CommitResult;
use crate::stats::{latency_histogram, split};

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

/// Runs one cell: opens its target, starts its callers together, times the commits.
pub(super) fn run_cell(
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
            Preallocate::RecycleElseAllocate => "allocate",
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
