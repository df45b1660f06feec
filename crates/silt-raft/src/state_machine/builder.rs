//! [`SnapshotBuilder`]: openraft's `RaftSnapshotBuilder`, writing a snapshot file from one
//! consistent silt snapshot off the runtime's worker threads.

use std::sync::Arc;

use openraft::{ErrorSubject, ErrorVerb, RaftSnapshotBuilder, StorageError};

use super::SmShared;
use crate::error::IntoStorage;
use crate::{NodeId, Snapshot, TypeConfig};

/// Builds a snapshot of the state machine as it is when the build starts.
pub struct SnapshotBuilder {
    shared: Arc<SmShared>,
}

impl SnapshotBuilder {
    pub(crate) fn new(shared: Arc<SmShared>) -> Self {
        SnapshotBuilder { shared }
    }
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot, StorageError<NodeId>> {
        let shared = self.shared.clone();
        tokio::task::spawn_blocking(move || shared.build())
            .await
            .map_err(std::io::Error::other)
            .sto(ErrorSubject::Snapshot(None), ErrorVerb::Write)?
            .sto(ErrorSubject::Snapshot(None), ErrorVerb::Write)
    }
}
