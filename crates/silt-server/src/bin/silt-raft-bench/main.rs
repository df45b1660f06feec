//! `silt-raft-bench`: the measurements of issue 15 on a loopback cluster of `silt-server`
//! processes (built beside this binary: `cargo build --release -p silt-server`).
//!
//! - `writes`: replicated durable writes/s with 1, 8, 64 clients, p50/p99, beside silt
//!   alone, and `fdatasync`s per committed write and per entry on each node;
//! - `recovery`: how long a kill -9'd follower takes to open, and to catch up;
//! - `snapshot`: build, transfer and install of a large state to a new node.

mod procs;
mod writes;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use silt_server::client::{Outcome, Write};
use silt_server::metrics::Metrics;

use procs::Procs;

#[derive(Parser)]
#[command(name = "silt-raft-bench", about)]
struct Args {
    /// Where the nodes keep their data (a fresh subdirectory per run).
    #[arg(long, default_value = "/tmp/silt-raft-bench")]
    dir: PathBuf,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Replicated durable writes beside silt alone.
    Writes {
        /// Client counts.
        #[arg(long, value_delimiter = ',', default_value = "1,8,64")]
        clients: Vec<usize>,
        /// Seconds per cell.
        #[arg(long, default_value_t = 10.0)]
        secs: f64,
        /// Value size.
        #[arg(long, default_value_t = 100)]
        value_bytes: usize,
        /// Nodes in the cluster.
        #[arg(long, default_value_t = 3)]
        nodes: u64,
        /// Proposals in flight on the leader (silt-server's `--max-inflight-proposals`).
        #[arg(long, default_value_t = 2)]
        inflight: usize,
    },
    /// Restart time of a kill -9'd follower.
    Recovery {
        /// Client writes before the kill (64 clients; the proposer merges them into fewer
        /// entries).
        #[arg(long, default_value_t = 200_000)]
        before: u64,
        /// Client writes while it is down.
        #[arg(long, default_value_t = 50_000)]
        during: u64,
        /// Value size.
        #[arg(long, default_value_t = 100)]
        value_bytes: usize,
    },
    /// Snapshot build, transfer and install of a large state to a new node.
    Snapshot {
        /// Bytes of state (keys and values) to load.
        #[arg(long, default_value_t = 1 << 30)]
        bytes: u64,
        /// Value size.
        #[arg(long, default_value_t = 1024)]
        value_bytes: usize,
    },
}

fn fresh(dir: &Path, name: &str) -> PathBuf {
    let d = dir.join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
    d
}

async fn all_metrics(p: &Procs) -> Vec<Metrics> {
    let mut v = Vec::new();
    for n in &p.nodes {
        if n.child.is_some() {
            v.push(p.client.metrics(&n.addr).await.unwrap_or_default());
        }
    }
    v
}

/// Loads `entries` entries of `per` keys each with `clients` concurrent writers.
async fn load(p: &Procs, entries: u64, per: usize, value_bytes: usize, clients: u64, tag: &str) {
    let addrs: Vec<String> = p
        .nodes
        .iter()
        .filter(|n| n.child.is_some())
        .map(|n| n.addr.clone())
        .collect();
    let leader = p.client.leader_hint();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (addrs, leader, tag) = (addrs.clone(), leader.clone(), tag.to_string());
        tasks.push(tokio::spawn(async move {
            let client = silt_server::client::Client::new(addrs, Duration::from_secs(60));
            client.set_leader_hint(&leader);
            let v = "v".repeat(value_bytes);
            let mut i = c;
            while i < entries {
                let w = if per == 1 {
                    Write::Put(format!("{tag}-{i:012}"), v.clone())
                } else {
                    Write::Batch(
                        (0..per)
                            .map(|j| silt_raft::Op::Put {
                                key: format!("{tag}-{i:012}-{j:04}"),
                                value: v.clone(),
                            })
                            .collect(),
                    )
                };
                match client.write(&w, Duration::from_secs(120)).await {
                    Outcome::Ok(_) => i += clients,
                    o => panic!("load write failed: {o:?}"),
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap_or_else(|e| panic!("{e}"));
    }
}

async fn wait_applied(p: &Procs, i: usize, index: u64) -> Duration {
    let t = Instant::now();
    loop {
        if let Ok(m) = p.client.metrics(&p.nodes[i].addr).await {
            if m.last_applied.unwrap_or(0) >= index {
                return t.elapsed();
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn cmd_writes(
    dir: &Path,
    clients: &[usize],
    secs: f64,
    value_bytes: usize,
    nodes: u64,
    inflight: usize,
) {
    println!("## writes: {nodes}-node cluster, {value_bytes}-byte values, {secs} s per cell\n");
    let root = fresh(dir, "writes");
    let args: Vec<String> = vec!["--max-inflight-proposals".into(), inflight.to_string()];
    let p = Procs::start(&root, nodes, &args)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    println!("| clients | replicated writes/s | p50 ms | p99 ms | silt alone writes/s | p50 ms | p99 ms | cost (silt/replicated) |");
    println!("|---|---|---|---|---|---|---|---|");
    let mut notes = Vec::new();
    for &c in clients {
        let before = all_metrics(&p).await;
        let r = writes::cluster_cell(&p, c, secs, value_bytes).await;
        let after = all_metrics(&p).await;
        let sdir = fresh(dir, &format!("silt-alone-{c}"));
        let s = tokio::task::spawn_blocking(move || writes::silt_cell(&sdir, c, secs, value_bytes))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        println!(
            "| {c} | {:.0} | {:.2} | {:.2} | {:.0} | {:.2} | {:.2} | {:.1}x |",
            r.per_sec(),
            r.p50_us as f64 / 1000.0,
            r.p99_us as f64 / 1000.0,
            s.per_sec(),
            s.p50_us as f64 / 1000.0,
            s.p99_us as f64 / 1000.0,
            s.per_sec() / r.per_sec().max(1e-9)
        );
        let writes = r.ops.max(1) as f64;
        let mut line = format!("{c} clients ({} writes):", r.ops);
        for (id, fsyncs, entries, cw, props) in writes::deltas(&before, &after) {
            line += &format!(
                " node {id}: {fsyncs} log fsyncs, {entries} entries = {:.3} fsyncs/write, {:.2} fsyncs/entry",
                fsyncs as f64 / writes,
                fsyncs as f64 / (entries.max(1) as f64)
            );
            if cw > 0 {
                line += &format!(
                    " (leader: {cw} client writes in {props} proposals, {:.1} per entry)",
                    cw as f64 / props.max(1) as f64
                );
            }
            line += ";";
        }
        notes.push(line);
    }
    println!();
    for n in notes {
        println!("- {n}");
    }
    println!();
}

async fn cmd_recovery(dir: &Path, before: u64, during: u64, value_bytes: usize) {
    println!(
        "## recovery: a follower kill -9'd after {before} client writes of {value_bytes}-byte values, {during} more while it is down\n"
    );
    let root = fresh(dir, "recovery");
    // No snapshot during the run: the restarted node replays its whole log.
    let args: Vec<String> = vec!["--snapshot-logs".into(), "100000000".into()];
    let mut p = Procs::start(&root, 3, &args)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let leader = p.wait_leader().await.unwrap_or_else(|e| panic!("{e}"));
    load(&p, before, 1, value_bytes, 64, "a").await;
    let victim = (leader + 1) % 3;
    p.kill(victim).await;
    load(&p, during, 1, value_bytes, 64, "b").await;
    let target = p
        .client
        .metrics(&p.nodes[leader].addr)
        .await
        .map(|m| m.last_applied.unwrap_or(0))
        .unwrap_or(0);
    let t = Instant::now();
    let listen = p.restart(victim).await.unwrap_or_else(|e| panic!("{e}"));
    let caught = wait_applied(&p, victim, target).await;
    let m = p
        .client
        .metrics(&p.nodes[victim].addr)
        .await
        .unwrap_or_default();
    println!(
        "- restart to listening: {:.0} ms (storage open {} ms: Raft log {} ms for {} records, {} entries; silt {} ms); to applied index {target}: {:.0} ms after the restart began ({:.0} ms after listening)",
        listen.as_secs_f64() * 1000.0,
        m.open_ms,
        m.open_log_ms,
        m.log_replayed_records,
        m.log_entries,
        m.open_ms.saturating_sub(m.open_log_ms),
        t.elapsed().as_secs_f64() * 1000.0,
        caught.as_secs_f64() * 1000.0,
    );
    println!();
}

async fn cmd_snapshot(dir: &Path, bytes: u64, value_bytes: usize) {
    let per = 256usize;
    let pair = value_bytes as u64 + 22;
    let entries = bytes / (pair * per as u64);
    println!(
        "## snapshot: {entries} batch writes of {per} {value_bytes}-byte values ({:.2} GiB of keys and values), then a new node joins\n",
        (entries * per as u64 * pair) as f64 / (1u64 << 30) as f64
    );
    let root = fresh(dir, "snapshot");
    let args: Vec<String> = vec![
        "--snapshot-logs".into(),
        "100000000".into(),
        "--keep-logs".into(),
        "0".into(),
        "--install-snapshot-timeout-ms".into(),
        "60000".into(),
    ];
    let mut p = Procs::start(&root, 3, &args)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let leader = p.wait_leader().await.unwrap_or_else(|e| panic!("{e}"));
    let t = Instant::now();
    load(&p, entries, per, value_bytes, 8, "s").await;
    let load_s = t.elapsed().as_secs_f64();
    let laddr = p.nodes[leader].addr.clone();
    let t = Instant::now();
    p.client
        .trigger_snapshot(&laddr)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let m = loop {
        let m = p.client.metrics(&laddr).await.unwrap_or_default();
        // Built, and the log purged behind it (`--keep-logs 0`): a new node can only get
        // the state by snapshot.
        if m.snapshot_index.is_some() && m.purged_index == m.snapshot_index {
            break m;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let build_s = t.elapsed().as_secs_f64();
    let new = p
        .spawn_extra(&root, 4)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let naddr = p.nodes[new].addr.clone();
    let target = m.last_applied.unwrap_or(0);
    let t = Instant::now();
    // openraft's blocking add-learner returns once the learner is within
    // `replication_lag_threshold` entries; wait until it has applied everything.
    p.client
        .add_learner(&laddr, 4, &naddr)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    wait_applied(&p, new, target).await;
    let join_s = t.elapsed().as_secs_f64();
    let n = p.client.metrics(&naddr).await.unwrap_or_default();
    let d1 = p.client.digest(&laddr).await;
    let d4 = p.client.digest(&naddr).await;
    println!(
        "- load {load_s:.1} s ({:.1} MB/s of keys and values); snapshot build on the leader {build_s:.1} s ({} ms in the builder, file {:.2} GiB, purged to index {:?})",
        (entries * per as u64 * pair) as f64 / load_s / 1e6,
        m.last_build_ms,
        m.snapshot_bytes as f64 / (1u64 << 30) as f64,
        m.purged_index
    );
    println!(
        "- add-learner until caught up: {join_s:.1} s (transfer and install; install into silt on the new node {} ms, {} snapshot(s) installed); digests equal: {}",
        n.last_install_ms,
        n.snapshots_installed,
        d1.is_ok() && d1 == d4
    );
    println!();
}

fn main() {
    let args = Args::parse();
    let rt = tokio::runtime::Runtime::new().unwrap_or_else(|e| panic!("runtime: {e}"));
    rt.block_on(async {
        match &args.cmd {
            Cmd::Writes {
                clients,
                secs,
                value_bytes,
                nodes,
                inflight,
            } => cmd_writes(&args.dir, clients, *secs, *value_bytes, *nodes, *inflight).await,
            Cmd::Recovery {
                before,
                during,
                value_bytes,
            } => cmd_recovery(&args.dir, *before, *during, *value_bytes).await,
            Cmd::Snapshot { bytes, value_bytes } => {
                cmd_snapshot(&args.dir, *bytes, *value_bytes).await
            }
        }
    });
}
