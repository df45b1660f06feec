//! openraft's own example store, `openraft-memstore` 0.9 (in memory: no file, no fsync),
//! as a [`Store`] of silt-raft-compare's harness, through openraft's `Adaptor` (its v1
//! `RaftStorage` split into the log and state-machine halves openraft's core takes).

use std::path::PathBuf;
use std::sync::Arc;

use openraft::storage::Adaptor;
use openraft_memstore::{ClientRequest, MemStore, TypeConfig};
use silt_raft_compare::harness::{NodeId, Probe, Store};

/// `openraft_memstore::MemStore`.
pub struct Memstore;

impl Store for Memstore {
    type C = TypeConfig;
    type Log = Adaptor<TypeConfig, Arc<MemStore>>;
    type Sm = Adaptor<TypeConfig, Arc<MemStore>>;
    const NAME: &'static str = "openraft-memstore";

    async fn open(_id: NodeId, _dir: PathBuf, _small: bool) -> (Self::Log, Self::Sm, Probe) {
        let (log, sm) = Adaptor::new(MemStore::new_async().await);
        let probe: Probe = Box::new(|| None);
        (log, sm, probe)
    }

    fn node(_id: NodeId) {}

    fn request(client: usize, i: u64, value: String) -> ClientRequest {
        // memstore's command: client `client`'s status, at serial `i`.
        ClientRequest {
            client: format!("bench-{client:03}"),
            serial: i,
            status: value,
        }
    }
}
