//! [`Metrics`]: what `GET /admin/metrics` answers — openraft's view (state, leader, term,
//! log and apply positions, membership, replication) beside the storage's counters (the
//! Raft log's appends and `fdatasync`s, the state machine's snapshots, silt's own log
//! syncs) and the proposer's batching.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use serde::{Deserialize, Serialize};
use silt_raft::NodeId;

use crate::app::App;

/// A node's metrics.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Metrics {
    /// This node.
    pub id: NodeId,
    /// `Leader`, `Follower`, `Candidate` or `Learner`.
    pub state: String,
    /// The leader this node knows of.
    pub leader: Option<NodeId>,
    /// The current term.
    pub term: u64,
    /// The last log index.
    pub last_log_index: Option<u64>,
    /// The committed index this node knows (as saved in its log).
    pub commit_index: Option<u64>,
    /// The last applied index.
    pub last_applied: Option<u64>,
    /// `commit_index - last_applied`.
    pub apply_lag: u64,
    /// The last index included in the current snapshot.
    pub snapshot_index: Option<u64>,
    /// The last purged index.
    pub purged_index: Option<u64>,
    /// Voters.
    pub voters: Vec<NodeId>,
    /// Every member (voters and learners) with its address.
    pub nodes: BTreeMap<NodeId, String>,
    /// On the leader: each node's matched index.
    pub replication: BTreeMap<NodeId, Option<u64>>,
    /// Raft log: `append` calls since start.
    pub log_append_calls: u64,
    /// Raft log: entries appended since start.
    pub log_entries_appended: u64,
    /// Raft log: records appended (entries and others) since start.
    pub log_records: u64,
    /// Raft log: `fdatasync`s since start.
    pub log_fsyncs: u64,
    /// Raft log records replayed at start.
    pub log_replayed_records: u64,
    /// silt's own log `fdatasync`s (state machine) since start.
    pub sm_fsyncs: u64,
    /// Snapshots built since start.
    pub snapshots_built: u64,
    /// Snapshots installed since start.
    pub snapshots_installed: u64,
    /// The last install's duration, ms.
    pub last_install_ms: u64,
    /// The last build's duration, ms.
    pub last_build_ms: u64,
    /// The current snapshot's size.
    pub snapshot_bytes: u64,
    /// Client write requests taken by the proposer.
    pub client_writes: u64,
    /// Raft entries proposed for them.
    pub proposals: u64,
    /// Milliseconds since the process started.
    pub uptime_ms: u64,
    /// How long opening the storage took at start, ms.
    pub open_ms: u64,
    /// Of which replaying the Raft log, ms (the rest is opening silt).
    pub open_log_ms: u64,
    /// Raft log entries present (in the log, not purged).
    pub log_entries: u64,
}

/// Collects a node's metrics.
pub fn metrics(app: &App) -> Metrics {
    let m = app.raft.metrics().borrow().clone();
    let log = app.log.stats();
    let sm = app.sm.stats();
    let db = app.sm.db_stats();
    let membership = m.membership_config.membership();
    let commit_index = log.committed.map(|c| c.index);
    let last_applied = m.last_applied.map(|l| l.index);
    let replication = m
        .replication
        .as_ref()
        .map(|r| r.iter().map(|(id, l)| (*id, l.map(|l| l.index))).collect())
        .unwrap_or_default();
    Metrics {
        id: app.id,
        state: format!("{:?}", m.state),
        leader: m.current_leader,
        term: m.current_term,
        last_log_index: m.last_log_index,
        commit_index,
        last_applied,
        apply_lag: commit_index
            .unwrap_or(0)
            .saturating_sub(last_applied.unwrap_or(0)),
        snapshot_index: m.snapshot.map(|s| s.index),
        purged_index: m.purged.map(|p| p.index),
        voters: membership.voter_ids().collect(),
        nodes: membership
            .nodes()
            .map(|(id, n)| (*id, n.addr.clone()))
            .collect(),
        replication,
        log_append_calls: log.append_calls,
        log_entries_appended: log.entries_appended,
        log_records: log.wal.appends,
        log_fsyncs: log.wal.fsyncs,
        log_replayed_records: log.replay.records,
        sm_fsyncs: db.wal_fsyncs,
        snapshots_built: sm.snapshots_built,
        snapshots_installed: sm.snapshots_installed,
        last_install_ms: sm.last_install_ms,
        last_build_ms: sm.last_build_ms,
        snapshot_bytes: sm.snapshot_bytes,
        client_writes: app.proposer.stats().requests.load(Ordering::Relaxed),
        proposals: app.proposer.stats().proposals.load(Ordering::Relaxed),
        uptime_ms: app.started.elapsed().as_millis() as u64,
        open_ms: app.open_ms,
        open_log_ms: app.open_log_ms,
        log_entries: log
            .last_log_id
            .map_or(0, |l| l.index + 1)
            .saturating_sub(log.purged.map_or(0, |p| p.index + 1)),
    }
}
