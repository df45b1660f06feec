//! The `queue_indexed` and `txn_batch_sweep` cells (seed 002, on `crate::iib`'s table with
//! three secondary indexes, in each engine's transactions).
//!
//! * `queue_indexed`: preload `--num` rows (untimed, then settled); then for `--duration`
//!   seconds one thread inserts rows at the high end, `--batch` rows per transaction, while
//!   another deletes the lowest `--batch` rows per transaction, each with its three index
//!   entries, from where its previous delete ended (iibench's `transactionid >=
//!   min_trxid`; every `--resync-get-min` deletes it first finds the lowest row from the
//!   table's start, iibench's get_min, timed apart), at the same rate: the deleter never deletes more rows than have been
//!   inserted, and the inserter waits when it is [`max_lag`] rows ahead (so the table
//!   stays at about `--num` rows, and a slow delete slows the queue). A transaction that fails with a retryable error runs again (`abort_rate`).
//!   Per elapsed second: rows inserted (`inserted_per_sec`) and the worst delete
//!   transaction's latency, first attempt to commit (`worst_delete_us_per_sec`).
//! * `txn_batch_sweep`: `--num` rows inserted in ascending order, `--batch` rows per
//!   transaction, on one thread; rows/s, µs per row (`txn.us_per_row`) and the process's
//!   peak RSS. One cell (one process) per `--batch` size.
//!
//! After the timed phase both settle (untimed), take the peak RSS, and check the table
//! (`IibDb::check`): a violation fails the cell.

use serde_json::json;

use super::parent::*;
use super::worker::*;
use super::*;
use crate::iib::{self, IibDb, Shape};
use crate::tpcc::TxError;

/// silt's `TxnOptions::max_bytes` in these workloads: far above what any `--batch` here
/// buffers (about 450 bytes per row with its three index entries, so 1M rows ≈ 450 MB
/// against the default limit of 1 GiB), so the sweep measures the transaction, not the
/// limit.
pub(super) const MAX_TXN_BYTES: u64 = 64 << 30;

/// Rows per untimed load transaction.
const LOAD_CHUNK: u64 = 1000;

/// Runs `f` until it does not fail with a retryable error (bounded exponential backoff
/// with jitter: 20 µs doubling to ~5 ms); returns its value and the failed attempts.
fn retrying<T>(
    rng: &mut crate::tpcc::Rng,
    mut f: impl FnMut() -> Result<T, TxError>,
) -> Result<(T, u64, Option<String>), String> {
    let mut retries = 0u64;
    let mut last = None;
    loop {
        match f() {
            Ok(v) => return Ok((v, retries, last)),
            Err(TxError::Retry(e)) => {
                retries += 1;
                last = Some(e);
                let base = 20u64 << retries.min(8);
                let us = base + rng.next_u64() % base;
                std::thread::sleep(Duration::from_micros(us));
            }
            Err(TxError::Fatal(e)) => return Err(e),
        }
    }
}

fn open(spec: &CellSpec, threads: usize) -> Result<(Box<dyn IibDb>, EngineConfig), String> {
    let a = &spec.args;
    let cfg = EngineConfig {
        dir: spec.dir.clone(),
        sync_full: spec.sync == "full",
        cache_bytes: a.cache_bytes,
        fsync_delay_us: a.fsync_delay_us,
        fsync_delay_model: a.fsync_delay_model.clone(),
        threads,
    };
    let shape = Shape {
        seed: a.seed,
        data_bytes: a.value_bytes,
    };
    Ok((iib::open(&spec.engine, &cfg, shape, MAX_TXN_BYTES)?, cfg))
}

/// Bytes of one row with its index entries as the key-value engines store them (the
/// logical bytes written per row).
fn row_bytes(value_bytes: usize) -> u64 {
    (8 + 24 + value_bytes + 16 + 20 + 24) as u64
}

/// How many rows the inserter of `queue_indexed` may be ahead of the deleter: both run at
/// the slower one's rate, as iibench's one delete per insert.
pub(super) fn max_lag(batch: u64) -> u64 {
    (10 * batch).max(1000)
}

/// What the inserter of `queue_indexed` measured.
struct Inserter {
    hist: Histogram<u64>,
    rows: u64,
    retries: u64,
    last_retry: Option<String>,
    per_sec: Vec<u64>,
    start: Instant,
    end: Instant,
}

/// What the deleter of `queue_indexed` measured.
struct Deleter {
    hist: Histogram<u64>,
    rows: u64,
    /// Delete transactions committed.
    rounds: u64,
    /// Each get_min's time, ns.
    get_min: Vec<u64>,
    retries: u64,
    last_retry: Option<String>,
    worst_ns: Vec<u64>,
}

pub(super) fn queue_cell(spec: &CellSpec) -> Result<EngineResult, String> {
    let a = &spec.args;
    validate(a)?;
    let mut r = not_run(spec, "ok", String::new());
    r.error = None;
    let b = spec.batch.max(1) as u64;
    let (db, _cfg) = open(spec, 2)?;

    // The preload (untimed), then settled.
    let t = Instant::now();
    let pb = bar(spec, "load", a.num);
    let mut lo = 0;
    while lo < a.num {
        let hi = (lo + LOAD_CHUNK).min(a.num);
        db.load(lo..hi)?;
        pb.inc(hi - lo);
        lo = hi;
    }
    pb.set_message("settle");
    db.settle()?;
    pb.finish_and_clear();
    r.load_seconds = Some(t.elapsed().as_secs_f64());

    // The timed phase: the inserter runs until the deadline; the deleter follows it.
    let duration = Duration::from_secs_f64(a.duration);
    let inserted = AtomicU64::new(0);
    let deleted = AtomicU64::new(0);
    let lag = max_lag(b);
    let done = AtomicBool::new(false);
    let barrier = Barrier::new(3);
    let num = a.num;
    let resync = a.resync_get_min;
    let (io0, disk0, cpu0, ins, del, cpu1) = std::thread::scope(|s| {
        let (db, inserted, deleted, done, barrier) = (&*db, &inserted, &deleted, &done, &barrier);
        let inserter = s.spawn(move || {
            let mut rng = crate::tpcc::Rng::new(a.seed ^ 0x1a5e);
            let mut p = Inserter {
                hist: latency_histogram(),
                rows: 0,
                retries: 0,
                last_retry: None,
                per_sec: Vec::new(),
                start: Instant::now(),
                end: Instant::now(),
            };
            barrier.wait();
            p.start = Instant::now();
            let deadline = p.start + duration;
            let mut result = Ok(());
            'run: while Instant::now() < deadline && !done.load(Ordering::Acquire) {
                // At the deleter's rate: no more than `lag` rows ahead of it.
                while p.rows >= deleted.load(Ordering::Acquire) + lag {
                    if Instant::now() >= deadline || done.load(Ordering::Acquire) {
                        break 'run;
                    }
                    std::thread::sleep(Duration::from_micros(50));
                }
                let lo = num + p.rows;
                let t0 = Instant::now();
                match retrying(&mut rng, || db.insert(lo..lo + b)) {
                    Ok(((), n, last)) => {
                        p.retries += n;
                        p.last_retry = last.or(p.last_retry.take());
                    }
                    Err(e) => {
                        result = Err(format!("insert: {e}"));
                        break;
                    }
                }
                let now = Instant::now();
                p.hist
                    .saturating_record((now.duration_since(t0).as_nanos() as u64).max(1));
                p.rows += b;
                inserted.store(p.rows, Ordering::Release);
                let sec = now.duration_since(p.start).as_secs() as usize;
                if p.per_sec.len() <= sec {
                    p.per_sec.resize(sec + 1, 0);
                }
                p.per_sec[sec] += b;
                tick();
            }
            p.end = Instant::now();
            done.store(true, Ordering::Release);
            flush_ticks();
            result.map(|()| p)
        });
        let deleter = s.spawn(move || {
            let mut rng = crate::tpcc::Rng::new(a.seed ^ 0xde1e);
            let mut p = Deleter {
                hist: latency_histogram(),
                rows: 0,
                rounds: 0,
                get_min: Vec::new(),
                retries: 0,
                last_retry: None,
                worst_ns: Vec::new(),
            };
            barrier.wait();
            let start = Instant::now();
            let mut result = Ok(());
            'run: while !done.load(Ordering::Acquire) {
                // Only rows the inserter has committed: the d-th deleted row after the
                // d-th inserted one.
                let mut spins = 0u32;
                let committed = loop {
                    let n = inserted.load(Ordering::Acquire);
                    if n >= p.rows + b {
                        break n;
                    }
                    if done.load(Ordering::Acquire) {
                        break 'run;
                    }
                    spins += 1;
                    if spins < 64 {
                        std::hint::spin_loop();
                    } else {
                        std::thread::sleep(Duration::from_micros(50));
                    }
                };
                // iibench's get_min: every `resync` delete transactions (0: only the
                // first), the lowest row, found from the table's start. Timed apart
                // from the deletes, as iibench does it outside the delete statement; it
                // still holds up the deleter, and so the queue.
                // (`is_multiple_of(0)` holds only for 0.)
                if p.rounds.is_multiple_of(resync) {
                    let t0 = Instant::now();
                    match retrying(&mut rng, || db.lowest(num + committed)) {
                        Ok((Some(lo), _, _)) if lo == p.rows => {}
                        Ok((lo, _, _)) => {
                            result = Err(format!(
                                "get_min: the lowest row is {lo:?}, row {} expected",
                                p.rows
                            ));
                            break;
                        }
                        Err(e) => {
                            result = Err(format!("get_min: {e}"));
                            break;
                        }
                    }
                    p.get_min.push(t0.elapsed().as_nanos() as u64);
                }
                let from = p.rows;
                let t0 = Instant::now();
                let ids = match retrying(&mut rng, || {
                    db.delete_lowest(b as usize, from, num + committed)
                }) {
                    Ok((ids, n, last)) => {
                        p.retries += n;
                        p.last_retry = last.or(p.last_retry.take());
                        ids
                    }
                    Err(e) => {
                        result = Err(format!("delete: {e}"));
                        break;
                    }
                };
                let now = Instant::now();
                let ns = (now.duration_since(t0).as_nanos() as u64).max(1);
                // The lowest rows are the next ones of the queue, in order.
                let want: Vec<u64> = (p.rows..p.rows + b).collect();
                if ids != want {
                    result = Err(format!(
                        "delete: the lowest rows were {:?}…, {:?}… expected",
                        &ids[..ids.len().min(3)],
                        &want[..want.len().min(3)]
                    ));
                    break;
                }
                p.hist.saturating_record(ns);
                let sec = now.duration_since(start).as_secs() as usize;
                if p.worst_ns.len() <= sec {
                    p.worst_ns.resize(sec + 1, 0);
                }
                p.worst_ns[sec] = p.worst_ns[sec].max(ns);
                p.rows += b;
                p.rounds += 1;
                deleted.store(p.rows, Ordering::Release);
            }
            if result.is_err() {
                done.store(true, Ordering::Release);
            }
            result.map(|()| p)
        });
        let io0 = sysstat::io();
        let disk0 = sysstat::disk_written_bytes(&spec.dir);
        let cpu0 = sysstat::cpu();
        barrier.wait();
        let pb = bar(spec, "run", (a.duration * 10.0) as u64);
        let t0 = Instant::now();
        while !(inserter.is_finished() && deleter.is_finished()) {
            pb.set_position((t0.elapsed().as_secs_f64() * 10.0) as u64);
            std::thread::sleep(Duration::from_millis(100));
        }
        pb.finish_and_clear();
        let ins = inserter
            .join()
            .unwrap_or_else(|_| Err("the inserter panicked".into()));
        let del = deleter
            .join()
            .unwrap_or_else(|_| Err("the deleter panicked".into()));
        let cpu1 = sysstat::cpu();
        (io0, disk0, cpu0, ins, del, cpu1)
    });
    let (ins, del) = (ins?, del?);
    let seconds = ins.end.duration_since(ins.start).as_secs_f64().max(1e-9);

    let post = finish(spec, &*db, &mut r, cpu1)?;
    let violations = db.check(del.rows..num + ins.rows)?;
    if !violations.is_empty() {
        return Err(format!(
            "queue_indexed: consistency check failed: {}",
            violations.join("; ")
        ));
    }
    r.engine_stats = db.stats();
    let mode = db.mode();
    let single = db.single_delete();
    drop(db);
    resources(spec, &mut r, io0, disk0, cpu0, cpu1, post);

    let mut all = latency_histogram();
    all.add(&ins.hist).map_err(|e| format!("histogram: {e}"))?;
    all.add(&del.hist).map_err(|e| format!("histogram: {e}"))?;
    latencies(&mut r, &all);
    let rows = ins.rows + del.rows;
    r.ops = Some(rows);
    r.seconds = Some(seconds);
    r.ops_per_sec = Some(rows as f64 / seconds);
    r.inserted = Some(ins.rows);
    r.deleted = Some(del.rows);
    let secs = (seconds.ceil() as usize).max(1);
    let mut per_sec = ins.per_sec;
    per_sec.resize(secs.max(per_sec.len()), 0);
    let mut worst = del.worst_ns;
    worst.resize(per_sec.len().max(worst.len()), 0);
    per_sec.resize(worst.len(), 0);
    r.inserted_per_sec = Some(per_sec);
    r.max_delete_us = Some(worst.iter().copied().max().unwrap_or(0) as f64 / 1000.0);
    r.worst_delete_us_per_sec = Some(worst.iter().map(|&x| x as f64 / 1000.0).collect());
    let txns = (ins.rows + del.rows) / b;
    let retries = ins.retries + del.retries;
    r.abort_rate = Some(retries as f64 / (txns + retries).max(1) as f64);
    r.logical_write_bytes = Some(ins.rows * row_bytes(a.value_bytes) + del.rows * 76);
    let live = num + ins.rows - del.rows;
    r.live_bytes = Some(live * row_bytes(a.value_bytes));
    amplification(&mut r, live);
    let q = |h: &Histogram<u64>, x: f64| {
        (!h.is_empty()).then(|| h.value_at_quantile(x) as f64 / 1000.0)
    };
    r.txn = Some(json!({
        "mode": mode,
        "single_delete": single,
        "rows_per_txn": b,
        "preloaded_rows": num,
        "max_lag_rows": lag,
        "inserted_rows_per_sec": ins.rows as f64 / seconds,
        "insert_retries": ins.retries,
        "delete_retries": del.retries,
        "last_retry_error": del.last_retry.or(ins.last_retry),
        "insert_p50_us": q(&ins.hist, 0.5),
        "insert_p99_us": q(&ins.hist, 0.99),
        "insert_max_us": (!ins.hist.is_empty()).then(|| ins.hist.max() as f64 / 1000.0),
        "delete_p50_us": q(&del.hist, 0.5),
        "delete_p99_us": q(&del.hist, 0.99),
        "resync_get_min": resync,
        "get_min_queries": del.get_min.len(),
        "get_min_max_us": del.get_min.iter().max().map(|&ns| ns as f64 / 1000.0),
        "get_min_total_s": del.get_min.iter().sum::<u64>() as f64 / 1e9,
        "consistency": "rows exactly the live range; every index entry a live row's; every live row its three entries",
    }));
    Ok(r)
}

pub(super) fn sweep_cell(spec: &CellSpec) -> Result<EngineResult, String> {
    let a = &spec.args;
    validate(a)?;
    let mut r = not_run(spec, "ok", String::new());
    r.error = None;
    let b = spec.batch.max(1) as u64;
    let (db, _cfg) = open(spec, 1)?;
    let mut hist = latency_histogram();
    let mut rng = crate::tpcc::Rng::new(a.seed ^ 0xba7c);
    let mut retries = 0;
    let mut txns = 0u64;
    let io0 = sysstat::io();
    let disk0 = sysstat::disk_written_bytes(&spec.dir);
    let cpu0 = sysstat::cpu();
    let pb = bar(spec, "run", a.num);
    let start = Instant::now();
    let mut lo = 0;
    while lo < a.num {
        let hi = (lo + b).min(a.num);
        let t0 = Instant::now();
        let ((), n, _) = retrying(&mut rng, || db.insert(lo..hi))
            .map_err(|e| format!("insert of rows {lo}..{hi}: {e}"))?;
        retries += n;
        txns += 1;
        hist.saturating_record((t0.elapsed().as_nanos() as u64).max(1));
        pb.inc(hi - lo);
        lo = hi;
    }
    let seconds = start.elapsed().as_secs_f64().max(1e-9);
    pb.finish_and_clear();
    let cpu1 = sysstat::cpu();

    let post = finish(spec, &*db, &mut r, cpu1)?;
    let violations = db.check(0..a.num)?;
    if !violations.is_empty() {
        return Err(format!(
            "txn_batch_sweep: consistency check failed: {}",
            violations.join("; ")
        ));
    }
    r.engine_stats = db.stats();
    let mode = db.mode();
    drop(db);
    resources(spec, &mut r, io0, disk0, cpu0, cpu1, post);
    latencies(&mut r, &hist);
    r.ops = Some(a.num);
    r.seconds = Some(seconds);
    r.ops_per_sec = Some(a.num as f64 / seconds);
    r.abort_rate = Some(retries as f64 / (txns + retries).max(1) as f64);
    r.logical_write_bytes = Some(a.num * row_bytes(a.value_bytes));
    r.live_bytes = r.logical_write_bytes;
    amplification(&mut r, a.num);
    r.txn = Some(json!({
        "mode": mode,
        "rows_per_txn": b,
        "kv_writes_per_txn": 4 * b.min(a.num),
        "transactions": txns,
        "us_per_row": seconds * 1e6 / a.num as f64,
        "retries": retries,
        "consistency": "rows exactly 0..num; every index entry a live row's; every live row its three entries",
    }));
    Ok(r)
}

/// What [`finish`] measured, for [`resources`].
struct Post {
    io1: Option<sysstat::Io>,
    disk1: Option<u64>,
    synced: bool,
}

/// After the timed phase: settle (untimed), then the peak RSS (before the check, which
/// reads everything back).
fn finish(
    spec: &CellSpec,
    db: &dyn IibDb,
    r: &mut EngineResult,
    cpu1: Option<sysstat::Cpu>,
) -> Result<Post, String> {
    let t = Instant::now();
    db.settle()?;
    let synced = sysstat::syncfs(&spec.dir);
    r.post_seconds = Some(t.elapsed().as_secs_f64());
    r.post_cpu_s = match (sysstat::cpu_seconds(), cpu1) {
        (Some(b), Some(a)) => Some(b - a.user_s - a.sys_s),
        _ => None,
    };
    r.peak_rss_bytes = sysstat::peak_rss_bytes();
    Ok(Post {
        io1: sysstat::io(),
        disk1: sysstat::disk_written_bytes(&spec.dir),
        synced,
    })
}

fn resources(
    spec: &CellSpec,
    r: &mut EngineResult,
    io0: Option<sysstat::Io>,
    disk0: Option<u64>,
    cpu0: Option<sysstat::Cpu>,
    cpu1: Option<sysstat::Cpu>,
    post: Post,
) {
    if let (Some(c0), Some(c1)) = (cpu0, cpu1) {
        r.cpu_user_s = Some(c1.user_s - c0.user_s);
        r.cpu_sys_s = Some(c1.sys_s - c0.sys_s);
    }
    if let (Some(i0), Some(i1)) = (io0, post.io1) {
        let w = i1.write_bytes.saturating_sub(i0.write_bytes);
        let c = i1
            .cancelled_write_bytes
            .saturating_sub(i0.cancelled_write_bytes);
        r.proc_write_bytes = Some(w);
        r.cancelled_write_bytes = Some(c);
        r.device_write_bytes = Some(w.saturating_sub(c));
        r.syscall_write_bytes = Some(i1.wchar.saturating_sub(i0.wchar));
    }
    if let (Some(d0), Some(d1), true) = (disk0, post.disk1, post.synced) {
        r.disk_write_bytes = Some(d1.saturating_sub(d0));
    }
    r.delayed_fsyncs = shim_delayed_calls();
    if let Some((len, alloc)) = sysstat::dir_bytes(&spec.dir) {
        r.db_bytes = Some(len);
        r.db_alloc_bytes = Some(alloc);
    }
}

fn latencies(r: &mut EngineResult, h: &Histogram<u64>) {
    if !h.is_empty() {
        let us = |q: f64| Some(h.value_at_quantile(q) as f64 / 1000.0);
        r.p50_us = us(0.5);
        r.p95_us = us(0.95);
        r.p99_us = us(0.99);
        r.p999_us = us(0.999);
        r.max_us = Some(h.max() as f64 / 1000.0);
    }
}

fn amplification(r: &mut EngineResult, live_rows: u64) {
    if let Some(logical) = r.logical_write_bytes.filter(|&l| l > 0) {
        let amp = |b: Option<u64>| b.map(|d| d as f64 / logical as f64);
        r.write_amp = amp(r.device_write_bytes);
        r.syscall_write_amp = amp(r.syscall_write_bytes);
        r.disk_write_amp = amp(r.disk_write_bytes);
    }
    if let Some(live) = r.live_bytes.filter(|_| live_rows > 0) {
        r.space_amp = r.db_bytes.map(|d| d as f64 / live as f64);
    }
}
