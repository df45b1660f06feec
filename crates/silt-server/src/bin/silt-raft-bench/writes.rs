//! Replicated durable writes per second with N concurrent clients, p50/p99, beside the same
//! writes on silt alone (`SyncMode::Full`, one process, no network), and the `fdatasync`s
//! each node paid per committed client write and per Raft entry.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use silt_server::client::{Client, Outcome, Write};
use silt_server::metrics::Metrics;

use crate::procs::Procs;

/// One cell's result.
pub struct Cell {
    pub ops: u64,
    pub secs: f64,
    pub p50_us: u64,
    pub p99_us: u64,
}

impl Cell {
    pub fn per_sec(&self) -> f64 {
        self.ops as f64 / self.secs
    }
}

fn value(bytes: usize, i: u64) -> String {
    let mut s = format!("{i:016x}");
    while s.len() < bytes {
        s.push('v');
    }
    s.truncate(bytes);
    s
}

/// Runs `clients` writers against the cluster for `secs`.
pub async fn cluster_cell(procs: &Procs, clients: usize, secs: f64, value_bytes: usize) -> Cell {
    let stop = Arc::new(AtomicBool::new(false));
    let leader = procs.client.leader_hint();
    let addrs: Vec<String> = procs.nodes.iter().map(|n| n.addr.clone()).collect();
    let mut tasks = Vec::new();
    let t = Instant::now();
    for c in 0..clients {
        let (stop, addrs, leader) = (stop.clone(), addrs.clone(), leader.clone());
        tasks.push(tokio::spawn(async move {
            let client = Client::new(addrs, Duration::from_secs(10));
            client.set_leader_hint(&leader);
            let mut h = Histogram::<u64>::new(3).unwrap_or_else(|_| unreachable!());
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let key = format!("bench-{c:03}-{i:010}");
                let w = Write::Put(key, value(value_bytes, i));
                let s = Instant::now();
                if let Outcome::Ok(_) = client.write(&w, Duration::from_secs(10)).await {
                    let _ = h.record(s.elapsed().as_micros() as u64);
                }
            }
            h
        }));
    }
    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
    stop.store(true, Ordering::Relaxed);
    let mut all = Histogram::<u64>::new(3).unwrap_or_else(|_| unreachable!());
    for t in tasks {
        if let Ok(h) = t.await {
            let _ = all.add(h);
        }
    }
    Cell {
        ops: all.len(),
        secs: t.elapsed().as_secs_f64(),
        p50_us: all.value_at_quantile(0.5),
        p99_us: all.value_at_quantile(0.99),
    }
}

/// The same writes on silt alone: `clients` threads, each write durable on return.
pub fn silt_cell(dir: &std::path::Path, clients: usize, secs: f64, value_bytes: usize) -> Cell {
    let db = silt::Db::builder(dir)
        .sync_mode(silt::SyncMode::Full)
        .open()
        .unwrap_or_else(|e| panic!("open silt: {e}"));
    let stop = Arc::new(AtomicBool::new(false));
    let t = Instant::now();
    let hs: Vec<Histogram<u64>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..clients)
            .map(|c| {
                let (db, stop) = (db.clone(), stop.clone());
                s.spawn(move || {
                    let mut h = Histogram::<u64>::new(3).unwrap_or_else(|_| unreachable!());
                    let mut i = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        i += 1;
                        let key = format!("bench-{c:03}-{i:010}");
                        let st = Instant::now();
                        if db
                            .put(key.as_bytes(), value(value_bytes, i).as_bytes())
                            .is_ok()
                        {
                            let _ = h.record(st.elapsed().as_micros() as u64);
                        }
                    }
                    h
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs_f64(secs));
        stop.store(true, Ordering::Relaxed);
        hs.into_iter().filter_map(|h| h.join().ok()).collect()
    });
    let mut all = Histogram::<u64>::new(3).unwrap_or_else(|_| unreachable!());
    for h in hs {
        let _ = all.add(h);
    }
    let _ = db.close();
    Cell {
        ops: all.len(),
        secs: t.elapsed().as_secs_f64(),
        p50_us: all.value_at_quantile(0.5),
        p99_us: all.value_at_quantile(0.99),
    }
}

/// Per node: (log fsyncs, entries appended, client writes, proposals) between two metric
/// snapshots.
pub fn deltas(before: &[Metrics], after: &[Metrics]) -> Vec<(u64, u64, u64, u64, u64)> {
    before
        .iter()
        .zip(after)
        .map(|(b, a)| {
            (
                a.id,
                a.log_fsyncs.saturating_sub(b.log_fsyncs),
                a.log_entries_appended
                    .saturating_sub(b.log_entries_appended),
                a.client_writes.saturating_sub(b.client_writes),
                a.proposals.saturating_sub(b.proposals),
            )
        })
        .collect()
}
