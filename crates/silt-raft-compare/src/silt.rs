//! silt-raft's storage in the harness: the Raft log on silt-wal, the state machine on silt,
//! opened as `silt-server` opens them (64 MiB segments, `SyncMode::Full` log).

use std::path::PathBuf;

use silt_raft::{LogStoreOptions, StateMachineOptions, StoreOptions};

use crate::harness::{NodeId, Probe, StorageCounters, Store};

/// silt-raft's `LogStore` and `StateMachine`.
pub struct SiltRaft;

impl Store for SiltRaft {
    type C = silt_raft::TypeConfig;
    type Log = silt_raft::LogStore;
    type Sm = silt_raft::StateMachine;
    const NAME: &'static str = "silt-raft";

    async fn open(_id: NodeId, dir: PathBuf, small: bool) -> (Self::Log, Self::Sm, Probe) {
        let opts = if small {
            StoreOptions::small()
        } else {
            // silt-server's defaults (`--segment-mib 64`).
            StoreOptions {
                log: LogStoreOptions::default(),
                sm: StateMachineOptions::default(),
            }
        };
        let (log, sm) = tokio::task::spawn_blocking(move || silt_raft::open(&dir, &opts))
            .await
            .unwrap_or_else(|e| panic!("open: {e}"))
            .unwrap_or_else(|e| panic!("open: {e}"));
        let stats = log.clone();
        let probe: Probe = Box::new(move || {
            Some(StorageCounters {
                log_fsyncs: stats.stats().wal.fsyncs,
            })
        });
        (log, sm, probe)
    }

    fn node(id: NodeId) -> silt_raft::Node {
        openraft::BasicNode::new(format!("node-{id}"))
    }

    fn request(client: usize, i: u64, value: String) -> silt_raft::Request {
        silt_raft::Request::Put {
            key: format!("bench-{client:03}-{i:010}"),
            value,
        }
    }
}
