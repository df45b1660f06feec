//! Starting a node: bind the listener, open the storage off the runtime, start openraft
//! and the proposer, print the address (tests and scripts read it), serve HTTP.

use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use axum::serve::ListenerExt;
use openraft::{Raft, SnapshotPolicy};
use silt_raft::{LogStoreOptions, StateMachineOptions, StoreOptions};

use crate::app::{App, Config};
use crate::http::router;
use crate::network::Network;
use crate::proposer::Proposer;

/// Runs a node until the process is stopped.
///
/// # Errors
///
/// The listener cannot bind, the storage cannot open, or openraft refuses the config.
pub async fn run(cfg: Config) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let started = Instant::now();
    let listener = tokio::net::TcpListener::bind(cfg.listen).await?;
    let addr = listener.local_addr()?.to_string();
    // A record never spans segments: commands are limited to a quarter of a segment
    // (`LogStore::max_command_bytes`), the proposer merges at most that much.
    if cfg.segment_mib < 1 {
        return Err("--segment-mib must be at least 1".into());
    }
    let seg = cfg.segment_mib << 20;
    let opts = StoreOptions {
        log: LogStoreOptions {
            segment_bytes: seg,
            ..LogStoreOptions::default()
        },
        sm: StateMachineOptions {
            wal_segment_bytes: seg,
            ..StateMachineOptions::default()
        },
    };
    let dir = cfg.dir.clone();
    let (log, sm, log_ms) = tokio::task::spawn_blocking(move || -> silt_raft::Result<_> {
        // The two halves timed apart: a restart's cost is mostly one or the other.
        let t = Instant::now();
        let log = silt_raft::LogStore::open(dir.join("log"), opts.log.clone())?;
        let log_ms = t.elapsed().as_millis() as u64;
        let sm = silt_raft::StateMachine::open(&dir, &opts.sm)?;
        Ok((log, sm, log_ms))
    })
    .await??;
    let open_ms = started.elapsed().as_millis() as u64;
    let raft_config = openraft::Config {
        cluster_name: "silt".into(),
        heartbeat_interval: cfg.heartbeat_ms,
        election_timeout_min: cfg.election_min_ms,
        election_timeout_max: cfg.election_max_ms,
        snapshot_policy: SnapshotPolicy::LogsSinceLast(cfg.snapshot_logs),
        max_in_snapshot_log_to_keep: cfg.keep_logs,
        snapshot_max_chunk_size: cfg.snapshot_chunk_bytes,
        install_snapshot_timeout: cfg.install_snapshot_timeout_ms,
        ..Default::default()
    }
    .validate()?;
    let sm_handle = sm.handle();
    let raft = Raft::new(
        cfg.id,
        Arc::new(raft_config),
        Network::new(),
        log.clone(),
        sm,
    )
    .await?;
    let proposer = Proposer::start(
        raft.clone(),
        cfg.max_inflight_proposals,
        log.max_command_bytes(),
    );
    let app = App {
        id: cfg.id,
        addr: addr.clone(),
        raft: raft.clone(),
        sm: sm_handle,
        log,
        proposer,
        started,
        open_ms,
        open_log_ms: log_ms,
    };
    {
        let mut out = std::io::stdout().lock();
        writeln!(
            out,
            "silt-server {} listening on {addr} (storage opened in {open_ms} ms)",
            cfg.id
        )?;
        out.flush()?;
    }
    // Small request/response exchanges: without TCP_NODELAY, Nagle's algorithm and the
    // peer's delayed ACK add ~40 ms to every answer.
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, router(app))
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    raft.shutdown()
        .await
        .map_err(|e| format!("raft shutdown: {e}"))?;
    Ok(())
}
