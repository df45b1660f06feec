//! Three `silt-server` processes on loopback under concurrent clients while a driver
//! kill -9s the leader or a follower, pauses a node (SIGSTOP/SIGCONT) and restarts what it
//! killed. After healing: every acknowledged write is on every node, the nodes' state
//! machines are identical (digest), and the clients' history of reads and writes is
//! linearizable (`support::lincheck`).
//!
//! `SILT_RAFT_CHAOS_SECS` sets how long faults are injected (default 12 s; the nodes
//! snapshot every 300 entries, so snapshots and log purges happen under the faults too).

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use silt_server::client::{Client, Outcome, Write};
use support::cluster::Cluster;
use support::lincheck::{check_kv, Call, Op};

const REGISTERS: usize = 4;

#[derive(Default)]
struct Record {
    history: Vec<Op>,
    acked_unique: Vec<String>,
    unknown: usize,
    failed: usize,
}

fn chaos_secs() -> u64 {
    std::env::var("SILT_RAFT_CHAOS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12)
}

async fn client_loop(
    c: usize,
    addrs: Vec<String>,
    t0: Instant,
    stop: Arc<AtomicBool>,
    rec: Arc<Mutex<Record>>,
) {
    let client = Client::new(addrs, Duration::from_millis(1500));
    let mut rng = ChaCha8Rng::seed_from_u64(c as u64);
    let now = || t0.elapsed().as_micros() as u64;
    let mut seq = 0u64;
    while !stop.load(Ordering::Relaxed) {
        seq += 1;
        let addr = client.leader_hint();
        let roll = rng.random_range(0..100);
        let key = format!("r{}", rng.random_range(0..REGISTERS));
        if roll < 15 {
            let k = format!("u-{c}-{seq}");
            if let Outcome::Ok(_) = client
                .write_at(&addr, &Write::Put(k.clone(), "x".into()))
                .await
            {
                rec.lock().acked_unique.push(k);
            }
        } else if roll < 60 {
            let (w, call) = if roll < 55 {
                let v = format!("{c}-{seq}");
                (Write::Put(key.clone(), v.clone()), Call::Write(Some(v)))
            } else {
                (Write::Delete(key.clone()), Call::Write(None))
            };
            let invoke = now();
            let o = client.write_at(&addr, &w).await;
            let complete = now();
            let mut r = rec.lock();
            match o {
                Outcome::Ok(_) => r.history.push(Op {
                    key,
                    call,
                    invoke,
                    complete: Some(complete),
                    client: c,
                }),
                Outcome::Unknown(_) => {
                    r.unknown += 1;
                    r.history.push(Op {
                        key,
                        call,
                        invoke,
                        complete: None,
                        client: c,
                    })
                }
                Outcome::Fail(_) => r.failed += 1,
            }
        } else {
            let invoke = now();
            let o = client.get_at(&addr, &key, false).await;
            let complete = now();
            if let Outcome::Ok(v) = o {
                rec.lock().history.push(Op {
                    key,
                    call: Call::Read(v),
                    invoke,
                    complete: Some(complete),
                    client: c,
                });
            }
        }
        tokio::time::sleep(Duration::from_millis(rng.random_range(0..3))).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_pause_restart_under_load_loses_nothing_and_stays_linearizable() {
    let mut cluster = Cluster::start(
        3,
        &[
            "--segment-mib",
            "2",
            "--snapshot-logs",
            "300",
            "--keep-logs",
            "50",
        ],
    )
    .await;
    let t0 = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let rec = Arc::new(Mutex::new(Record::default()));
    let mut clients = Vec::new();
    for c in 0..6 {
        clients.push(tokio::spawn(client_loop(
            c,
            cluster.addrs(),
            t0,
            stop.clone(),
            rec.clone(),
        )));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(chaos_secs() ^ 0x5117);
    let end = Instant::now() + Duration::from_secs(chaos_secs());
    let mut faults: Vec<String> = Vec::new();
    // Every kind of fault in turn, with random timing.
    let kinds = [
        "kill -9 leader",
        "pause follower",
        "kill -9 follower",
        "pause leader",
    ];
    while Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(rng.random_range(200..700))).await;
        let kind = kinds[faults.len() % kinds.len()];
        let leader = cluster.leader().await;
        let victim = match leader {
            Some(l) if kind.ends_with("leader") => l,
            Some(l) => (l + rng.random_range(1..3)) % 3,
            None => rng.random_range(0..3),
        };
        faults.push(format!(
            "{kind} (node {}{})",
            victim + 1,
            if leader.is_none() {
                ", no leader seen"
            } else {
                ""
            }
        ));
        if kind.starts_with("kill") {
            cluster.kill(victim).await;
            tokio::time::sleep(Duration::from_millis(rng.random_range(200..1200))).await;
            let t = Instant::now();
            cluster.restart(victim).await;
            if let Some(f) = faults.last_mut() {
                f.push_str(&format!(", back in {} ms", t.elapsed().as_millis()));
            }
        } else {
            cluster.pause(victim);
            tokio::time::sleep(Duration::from_millis(rng.random_range(300..1500))).await;
            cluster.resume(victim);
        }
    }
    // Heal: everything runs; let the clients go on a moment against a stable cluster.
    cluster.wait_leader(Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.await.unwrap();
    }
    // Final linearizable reads of every register join the history.
    let reader = Client::new(cluster.addrs(), Duration::from_secs(5));
    reader.set_leader_hint(&cluster.client.leader_hint());
    for k in 0..REGISTERS {
        let key = format!("r{k}");
        let invoke = t0.elapsed().as_micros() as u64;
        let v = reader
            .get(&key, Duration::from_secs(20))
            .await
            .ok()
            .expect("final read");
        let complete = t0.elapsed().as_micros() as u64;
        rec.lock().history.push(Op {
            key,
            call: Call::Read(v),
            invoke,
            complete: Some(complete),
            client: 99,
        });
    }
    let keys = cluster
        .wait_converged(&[0, 1, 2], Duration::from_secs(60))
        .await;
    let rec = std::mem::take(&mut *rec.lock());
    // Every acknowledged write is on every node (read locally there).
    for (i, addr) in cluster.addrs().iter().enumerate() {
        for k in &rec.acked_unique {
            let v = reader.get_at(addr, k, true).await;
            assert_eq!(
                v,
                Outcome::Ok(Some("x".into())),
                "acknowledged {k} missing on node {}",
                i + 1
            );
        }
    }
    let writes = rec
        .history
        .iter()
        .filter(|o| matches!(o.call, Call::Write(_)))
        .count();
    let reads = rec.history.len() - writes;
    let started = Instant::now();
    if let Err(v) = check_kv(&rec.history) {
        panic!("not linearizable on key {}: {:#?}", v.key, v.ops);
    }
    let mut snapshots = 0;
    let mut installs = 0;
    for i in 0..3 {
        let m = cluster.metrics(i).await.unwrap();
        snapshots += m.snapshots_built;
        installs += m.snapshots_installed;
    }
    eprintln!(
        "chaos {} s: faults {faults:?}; {writes} register writes ({} unknown outcome, {} refused), {reads} reads, \
         {} acknowledged unique keys on all 3 nodes, {keys} keys, snapshots built {snapshots} (since last restarts), \
         installed {installs}; history checked in {:?}",
        chaos_secs(),
        rec.unknown,
        rec.failed,
        rec.acked_unique.len(),
        started.elapsed()
    );
    assert!(
        writes > 100 && reads > 100,
        "too little load got through: {writes} writes, {reads} reads"
    );
    assert!(!rec.acked_unique.is_empty());
}
