//! `silt-raft`: silt as the storage of [openraft](https://docs.rs/openraft/0.9) — the Raft
//! log on `silt-wal` ([`LogStore`], openraft's `RaftLogStorage`) and the replicated state
//! machine on `silt` ([`StateMachine`], openraft's `RaftStateMachine`), for a key-value
//! service whose commands are [`Request`]s.
//!
//! openraft decides (elections, replication, commitment, membership); this crate stores.
//! The formats are in `docs/format/raft.md`, the design in `docs/design.md` ("silt-raft").
//!
//! ```no_run
//! # async fn f() -> Result<(), Box<dyn std::error::Error>> {
//! let (log, sm) = silt_raft::open("/var/lib/silt/node-1", &silt_raft::StoreOptions::default())?;
//! let reads = sm.handle(); // the service reads the state machine through this
//! // openraft::Raft::new(1, config, network, log, sm).await?;
//! # Ok(()) }
//! ```

#![warn(missing_docs)]
// openraft's traits return its `StorageError` (over 200 bytes); it is not ours to box.
#![allow(clippy::result_large_err)]

mod codec;
mod error;
mod log_store;
mod state_machine;
mod types;

use std::path::Path;

pub use error::{Error, Result};
pub use log_store::{LogReader, LogStore, LogStoreOptions, LogStoreStats, ReplayStats};
pub use state_machine::{
    Applied, Digest, SnapshotBuilder, StateMachine, StateMachineHandle, StateMachineOptions,
    StateMachineStats,
};
pub use types::{Op, Request, Response, MAX_BATCH_BYTES};

/// A node's id.
pub type NodeId = u64;
/// What the cluster knows of a node: its address.
pub type Node = openraft::BasicNode;

openraft::declare_raft_types!(
    /// openraft's types for a silt-raft node: [`Request`] commands, [`Response`] results,
    /// `u64` node ids with an address each, and snapshots as files.
    pub TypeConfig:
        D = Request,
        R = Response,
        NodeId = NodeId,
        Node = Node,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = tokio::fs::File,
        AsyncRuntime = openraft::TokioRuntime,
);

/// A log entry of this service.
pub type Entry = openraft::Entry<TypeConfig>;
/// A snapshot's meta of this service.
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, Node>;
/// A snapshot of this service.
pub type Snapshot = openraft::Snapshot<TypeConfig>;

/// Options of a node's storage.
#[derive(Clone, Debug, Default)]
pub struct StoreOptions {
    /// The Raft log's.
    pub log: LogStoreOptions,
    /// The state machine's.
    pub sm: StateMachineOptions,
}

impl StoreOptions {
    /// Small segments and memtables, for tests: a new silt-wal segment is zero-filled, and
    /// tests open many stores.
    pub fn small() -> StoreOptions {
        StoreOptions {
            log: LogStoreOptions {
                segment_bytes: 1 << 20,
                ..LogStoreOptions::default()
            },
            sm: StateMachineOptions {
                wal_segment_bytes: 1 << 20,
                memtable_bytes: 4 << 20,
            },
        }
    }
}

/// Opens a node's storage in `dir`: the Raft log in `dir/log`, the state machine in
/// `dir/sm` and its snapshots in `dir/snapshots` (`docs/format/raft.md`). Blocking.
///
/// # Errors
///
/// As [`LogStore::open`] and [`StateMachine::open`].
pub fn open(dir: impl AsRef<Path>, opts: &StoreOptions) -> Result<(LogStore, StateMachine)> {
    let dir = dir.as_ref();
    let log = LogStore::open(dir.join("log"), opts.log.clone())?;
    let sm = StateMachine::open(dir, &opts.sm)?;
    Ok((log, sm))
}
