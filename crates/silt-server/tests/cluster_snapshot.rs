//! A follower that falls behind a log purge catches up by snapshot: node 3 is killed, the
//! others take enough writes to build snapshots and purge the log past node 3's last entry,
//! and when node 3 comes back the leader must send it a snapshot (the entries it lacks are
//! gone), which it installs; then its state machine equals the others'.

mod support;

use std::time::Duration;

use silt_raft::Op;
use silt_server::client::{Outcome, Write};
use support::cluster::Cluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_behind_a_purge_installs_a_snapshot() {
    let mut cluster = Cluster::start(
        3,
        &[
            "--segment-mib",
            "2",
            "--snapshot-logs",
            "50",
            "--keep-logs",
            "10",
        ],
    )
    .await;
    let leader = cluster.wait_leader(Duration::from_secs(10)).await;
    let victim = (leader + 1) % 3;
    for i in 0..20 {
        let w = Write::Put(format!("before-{i}"), "v".into());
        assert!(matches!(
            cluster.client.write(&w, Duration::from_secs(10)).await,
            Outcome::Ok(_)
        ));
    }
    cluster
        .wait_converged(&[0, 1, 2], Duration::from_secs(20))
        .await;
    let behind = cluster
        .metrics(victim)
        .await
        .unwrap()
        .last_log_index
        .unwrap();
    cluster.kill(victim).await;
    // 200 entries of 5 keys each, with some values large enough to make the snapshot
    // several chunks.
    for i in 0..200 {
        let ops = (0..5)
            .map(|j| Op::Put {
                key: format!("after-{i:04}-{j}"),
                value: "x".repeat(if j == 0 { 4000 } else { 20 }),
            })
            .collect();
        assert!(matches!(
            cluster
                .client
                .write(&Write::Batch(ops), Duration::from_secs(10))
                .await,
            Outcome::Ok(_)
        ));
    }
    let leader = cluster.wait_leader(Duration::from_secs(10)).await;
    let m = cluster.metrics(leader).await.unwrap();
    let purged = m.purged_index.expect("the leader purged its log");
    assert!(
        purged > behind,
        "purged up to {purged}, node {} has up to {behind}",
        victim + 1
    );
    cluster.restart(victim).await;
    let keys = cluster
        .wait_converged(&[0, 1, 2], Duration::from_secs(60))
        .await;
    let m = cluster.metrics(victim).await.unwrap();
    assert!(
        m.snapshots_installed >= 1,
        "node {} caught up without a snapshot: {m:?}",
        victim + 1
    );
    assert_eq!(keys, 20 + 200 * 5);
    eprintln!(
        "snapshot: node {} had entries up to {behind}, the leader purged up to {purged}; it installed {} snapshot(s) \
         ({} bytes, {} ms)",
        victim + 1,
        m.snapshots_installed,
        m.snapshot_bytes,
        m.last_install_ms
    );
}
