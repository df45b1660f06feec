//! One `tpcc` cell: open the engine's TPC-C (`crate::tpcc::open`), load the population
//! (untimed), run the mix on `--threads` terminals for `--duration`, check TPC-C's
//! consistency conditions 1–4 (a violation fails the cell), and report.

use std::collections::BTreeMap;

use serde_json::json;

use super::parent::*;
use super::worker::*;
use super::*;
use crate::tpcc::{self, Input, Params, Sizes, Terminal, TpccDb, TxError, TxKind};

/// What one terminal measured.
struct TermPart {
    /// Per transaction type: latency (first attempt to completion), completed, retried
    /// attempts, rollbacks (New-Order's unknown item).
    hist: BTreeMap<TxKind, Histogram<u64>>,
    done: BTreeMap<TxKind, u64>,
    retries: BTreeMap<TxKind, u64>,
    /// The last retryable error per type, to show what the aborts were.
    last_retry: BTreeMap<TxKind, String>,
    /// Per type, the retryable errors counted by cause (`retry_cause`).
    causes: BTreeMap<TxKind, BTreeMap<String, u64>>,
    rollbacks: u64,
    start: Instant,
    end: Instant,
}

/// A retryable error's cause, to count: its message with the key left out (an engine's
/// message names the key as `0x` and hex digits), so that conflicts of one kind on one
/// table count together.
fn retry_cause(e: &str) -> String {
    let mut out = String::with_capacity(e.len());
    let mut rest = e;
    while let Some(i) = rest.find("0x") {
        out.push_str(&rest[..i]);
        let hex = rest[i + 2..]
            .find(|c: char| !c.is_ascii_hexdigit())
            .unwrap_or(rest.len() - i - 2);
        if hex == 0 {
            out.push_str("0x");
        } else {
            out.push_str("0x…");
        }
        rest = &rest[i + 2 + hex..];
    }
    out.push_str(rest);
    out
}

fn exec(db: &dyn TpccDb, x: &Input) -> Result<bool, TxError> {
    match x {
        Input::NewOrder(x) => db.new_order(x).map(|committed| !committed),
        Input::Payment(x) => db.payment(x).map(|()| false),
        Input::OrderStatus(x) => db.order_status(x).map(|()| false),
        Input::Delivery(x) => db.delivery(x).map(|()| false),
        Input::StockLevel(x) => db.stock_level(x).map(|_| false),
    }
}

fn terminal(
    db: &dyn TpccDb,
    p: &Params,
    t: usize,
    barrier: &Barrier,
    stop: &AtomicBool,
) -> Result<TermPart, String> {
    let mut term = Terminal::new(t, p.warehouses, p.sizes, p.seed);
    let mut part = TermPart {
        hist: TxKind::ALL
            .iter()
            .map(|&k| (k, latency_histogram()))
            .collect(),
        done: BTreeMap::new(),
        retries: BTreeMap::new(),
        last_retry: BTreeMap::new(),
        causes: BTreeMap::new(),
        rollbacks: 0,
        start: Instant::now(),
        end: Instant::now(),
    };
    let mut backoff_rng = tpcc::Rng::new(p.seed ^ t as u64 ^ 0xb0ff);
    barrier.wait();
    part.start = Instant::now();
    let deadline = part.start + p.duration;
    'run: while Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
        let x = term.next();
        let kind = x.kind();
        let t0 = Instant::now();
        let mut attempt = 0u32;
        let rolled_back = loop {
            match exec(db, &x) {
                Ok(rb) => break rb,
                Err(TxError::Retry(e)) => {
                    *part.retries.entry(kind).or_default() += 1;
                    *part
                        .causes
                        .entry(kind)
                        .or_default()
                        .entry(retry_cause(&e))
                        .or_default() += 1;
                    part.last_retry.insert(kind, e);
                    if Instant::now() >= deadline {
                        break 'run; // unfinished at the end: not counted
                    }
                    // Bounded exponential backoff with jitter: 20 µs doubling to ~5 ms.
                    let base = 20u64 << attempt.min(8);
                    attempt += 1;
                    let us = base + backoff_rng.next_u64() % base;
                    std::thread::sleep(Duration::from_micros(us));
                }
                Err(TxError::Fatal(e)) => {
                    return Err(format!("{}: {e}", kind.name()));
                }
            }
        };
        let ns = (t0.elapsed().as_nanos() as u64).max(1);
        part.hist
            .get_mut(&kind)
            .expect("every kind")
            .saturating_record(ns);
        *part.done.entry(kind).or_default() += 1;
        part.rollbacks += u64::from(rolled_back);
        tick();
    }
    part.end = Instant::now();
    Ok(part)
}

pub(super) fn cell(spec: &CellSpec) -> Result<EngineResult, String> {
    let a = &spec.args;
    validate(a)?;
    let mut r = not_run(spec, "ok", String::new());
    r.error = None;
    let cfg = EngineConfig {
        dir: spec.dir.clone(),
        sync_full: spec.sync == "full",
        cache_bytes: a.cache_bytes,
        fsync_delay_us: a.fsync_delay_us,
        fsync_delay_model: a.fsync_delay_model.clone(),
        threads: spec.threads,
    };
    let p = Params {
        warehouses: a.warehouses,
        sizes: Sizes::scaled(a.tpcc_scale),
        threads: spec.threads,
        duration: Duration::from_secs_f64(a.duration),
        seed: a.seed,
    };
    let db = crate::tpcc::open(&spec.engine, &cfg)?;

    // The load (untimed).
    let t = Instant::now();
    let pb = bar(
        spec,
        "load",
        p.sizes.rows_per_warehouse() * u64::from(p.warehouses),
    );
    tpcc::population(p.warehouses, p.sizes, p.seed, 2000, &mut |rows| {
        db.load(rows)?;
        pb.inc(rows.len() as u64);
        Ok(())
    })?;
    pb.set_message("settle");
    db.after_load()?;
    pb.finish_and_clear();
    r.load_seconds = Some(t.elapsed().as_secs_f64());
    let before = tpcc::check(&db.totals(p.warehouses)?, p.warehouses);
    if !before.is_empty() {
        return Err(format!(
            "tpcc: the loaded database is inconsistent: {}",
            before.join("; ")
        ));
    }

    // The timed phase.
    let barrier = Barrier::new(p.threads + 1);
    let stop = AtomicBool::new(false);
    let (io0, disk0, cpu0, parts, cpu1) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..p.threads)
            .map(|t| {
                let (db, p, barrier, stop) = (&*db, &p, &barrier, &stop);
                s.spawn(move || {
                    let r = terminal(db, p, t, barrier, stop);
                    flush_ticks();
                    if r.is_err() {
                        stop.store(true, Ordering::Relaxed);
                    }
                    r
                })
            })
            .collect();
        let io0 = sysstat::io();
        let disk0 = sysstat::disk_written_bytes(&spec.dir);
        let cpu0 = sysstat::cpu();
        barrier.wait();
        let pb = bar(spec, "run", (a.duration * 10.0) as u64);
        let t0 = Instant::now();
        while !handles.iter().all(|h| h.is_finished()) {
            pb.set_position((t0.elapsed().as_secs_f64() * 10.0) as u64);
            std::thread::sleep(Duration::from_millis(100));
        }
        pb.finish_and_clear();
        let parts: Vec<Result<TermPart, String>> = handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a terminal panicked".into()))
            })
            .collect();
        let cpu1 = sysstat::cpu();
        (io0, disk0, cpu0, parts, cpu1)
    });
    let parts = parts.into_iter().collect::<Result<Vec<_>, _>>()?;

    // Settle, then the consistency conditions.
    let t = Instant::now();
    db.settle()?;
    let synced = sysstat::syncfs(&spec.dir);
    r.post_seconds = Some(t.elapsed().as_secs_f64());
    r.post_cpu_s = match (sysstat::cpu_seconds(), cpu1) {
        (Some(b), Some(a)) => Some(b - a.user_s - a.sys_s),
        _ => None,
    };
    let io1 = sysstat::io();
    let disk1 = sysstat::disk_written_bytes(&spec.dir);
    let violations = tpcc::check(&db.totals(p.warehouses)?, p.warehouses);
    if !violations.is_empty() {
        return Err(format!(
            "tpcc: consistency check failed: {}",
            violations.join("; ")
        ));
    }
    r.engine_stats = db.stats();
    let mode = db.mode();
    drop(db);
    let dbb = sysstat::dir_bytes(&spec.dir);

    // The figures.
    let start = parts.iter().map(|p| p.start).min();
    let end = parts.iter().map(|p| p.end).max();
    let seconds = match (start, end) {
        (Some(s), Some(e)) => e.duration_since(s).as_secs_f64().max(1e-9),
        _ => 1e-9,
    };
    let mut all = latency_histogram();
    let mut types = serde_json::Map::new();
    let (mut done_total, mut retries_total, mut new_orders, mut rollbacks) = (0, 0, 0, 0);
    for k in TxKind::ALL {
        let mut h = latency_histogram();
        let mut done = 0;
        let mut retries = 0;
        let mut last_retry = None;
        let mut causes: BTreeMap<String, u64> = BTreeMap::new();
        for p in &parts {
            for (c, n) in p.causes.get(&k).into_iter().flatten() {
                *causes.entry(c.clone()).or_default() += n;
            }
            if let Some(e) = p.last_retry.get(&k) {
                last_retry = Some(e.clone());
            }
            h.add(&p.hist[&k]).map_err(|e| format!("histogram: {e}"))?;
            done += p.done.get(&k).copied().unwrap_or(0);
            retries += p.retries.get(&k).copied().unwrap_or(0);
        }
        all.add(&h).map_err(|e| format!("histogram: {e}"))?;
        done_total += done;
        retries_total += retries;
        if k == TxKind::NewOrder {
            new_orders = done;
            rollbacks = parts.iter().map(|p| p.rollbacks).sum::<u64>();
        }
        let q = |x: f64| (!h.is_empty()).then(|| h.value_at_quantile(x) as f64 / 1000.0);
        types.insert(
            k.name().into(),
            json!({
                "count": done,
                "retries": retries,
                "abort_rate": retries as f64 / (done + retries).max(1) as f64,
                "p50_us": q(0.5),
                "p95_us": q(0.95),
                "p99_us": q(0.99),
                "max_us": (!h.is_empty()).then(|| h.max() as f64 / 1000.0),
                "last_retry_error": last_retry,
                "retry_causes": causes,
            }),
        );
    }
    let minutes = seconds / 60.0;
    r.ops = Some(done_total);
    r.seconds = Some(seconds);
    r.ops_per_sec = Some(done_total as f64 / seconds);
    r.tpmc = Some(done_total as f64 / minutes);
    r.nopm = Some(new_orders as f64 / minutes);
    r.abort_rate = Some(retries_total as f64 / (done_total + retries_total).max(1) as f64);
    r.tpcc = Some(json!({
        "mode": mode,
        "scale": a.tpcc_scale,
        "items": p.sizes.items,
        "customers_per_district": p.sizes.customers,
        "new_order_rollbacks": rollbacks,
        "retries": retries_total,
        "consistency": "conditions 1-4 hold",
        "transactions": types,
    }));
    if !all.is_empty() {
        let us = |q: f64| Some(all.value_at_quantile(q) as f64 / 1000.0);
        r.p50_us = us(0.5);
        r.p95_us = us(0.95);
        r.p99_us = us(0.99);
        r.p999_us = us(0.999);
        r.max_us = Some(all.max() as f64 / 1000.0);
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
    if let Some((len, alloc)) = dbb {
        r.db_bytes = Some(len);
        r.db_alloc_bytes = Some(alloc);
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::retry_cause;

    #[test]
    fn a_retry_cause_leaves_the_key_out() {
        assert_eq!(
            retry_cause(
                "transaction conflict (write-write conflict) on key 0x00000001000000070a in \
                 column family \"district\"; nothing was written"
            ),
            "transaction conflict (write-write conflict) on key 0x… in column family \
             \"district\"; nothing was written"
        );
        assert_eq!(retry_cause("busy 0x"), "busy 0x");
        assert_eq!(retry_cause("a 0xAB and 0x12"), "a 0x… and 0x…");
        assert_eq!(retry_cause("no key"), "no key");
    }
}
