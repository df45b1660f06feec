//! [`App`]: what every HTTP handler of a node shares — the Raft handle, the state machine's
//! read handle, the log store's counters and the proposer — and [`Config`], the node's
//! command line.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use openraft::Raft;
use silt_raft::{LogStore, NodeId, StateMachineHandle, TypeConfig};

use crate::proposer::Proposer;

/// One node of the replicated key-value service.
#[derive(Clone, Debug, Parser)]
#[command(name = "silt-server", version, about)]
pub struct Config {
    /// This node's id (unique in the cluster).
    #[arg(long)]
    pub id: NodeId,
    /// Address to listen on; port 0 picks a free port (printed on stdout).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// Data directory (the Raft log, the state machine, snapshots).
    #[arg(long)]
    pub dir: PathBuf,
    /// Leader heartbeat interval.
    #[arg(long, default_value_t = 50)]
    pub heartbeat_ms: u64,
    /// Election timeout, lower bound.
    #[arg(long, default_value_t = 300)]
    pub election_min_ms: u64,
    /// Election timeout, upper bound.
    #[arg(long, default_value_t = 600)]
    pub election_max_ms: u64,
    /// Build a snapshot every this many applied entries.
    #[arg(long, default_value_t = 20_000)]
    pub snapshot_logs: u64,
    /// Entries kept in the log behind a snapshot (a follower within them catches up from
    /// the log, not a snapshot).
    #[arg(long, default_value_t = 1_000)]
    pub keep_logs: u64,
    /// Client-write proposals in flight at once (see `proposer.rs`).
    #[arg(long, default_value_t = 2)]
    pub max_inflight_proposals: usize,
    /// Segment size of the Raft log and of silt's log, MiB. A record never spans segments,
    /// so a command is limited to a quarter of a segment (16 MiB at most).
    #[arg(long, default_value_t = 64)]
    pub segment_mib: u64,
    /// Bytes of a snapshot chunk (the install RPC's payload).
    #[arg(long, default_value_t = 3 << 20)]
    pub snapshot_chunk_bytes: u64,
    /// How long a snapshot install RPC may take, ms.
    #[arg(long, default_value_t = 10_000)]
    pub install_snapshot_timeout_ms: u64,
}

/// What a node's handlers share.
#[derive(Clone)]
pub struct App {
    /// This node's id.
    pub id: NodeId,
    /// The address it listens on.
    pub addr: String,
    /// openraft.
    pub raft: Raft<TypeConfig>,
    /// Reads of the state machine.
    pub sm: StateMachineHandle,
    /// The Raft log (for its counters).
    pub log: LogStore,
    /// Client writes go through it.
    pub proposer: Proposer,
    /// When the process started.
    pub started: Instant,
    /// How long opening the storage took, ms.
    pub open_ms: u64,
    /// Of which opening (replaying) the Raft log, ms.
    pub open_log_ms: u64,
}
