//! [`SnapshotBuilder`]: openraft's `RaftSnapshotBuilder`, writing a snapshot file from one
//! consistent silt snapshot off the runtime's worker threads, synced with the database
//! before it is returned.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use openraft::{ErrorSubject, ErrorVerb, RaftSnapshotBuilder, StorageError};

use super::handle::IterAll;
use super::meta;
use super::snapshot_file::SnapshotWriter;
use super::{sync_dir, Current, SmShared};
use crate::error::{Error, IntoStorage, Result};
use crate::{NodeId, Snapshot, SnapshotMeta, TypeConfig};

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

impl SmShared {
    /// Writes a snapshot file from one silt snapshot (invariant 3 of
    /// `state_machine/mod.rs`) and makes it the current one.
    pub(super) fn build(&self) -> Result<Snapshot> {
        let started = Instant::now();
        // Held for the whole build: an install cannot drop the column family under us.
        let data = self.data.read();
        let view = self.db.snapshot();
        let m = meta::read(&view, &self.meta_cf)?;
        if m.data_gen != data.gen {
            return Err(Error::Corruption(format!(
                "data_cf says generation {}, the state machine uses {}",
                m.data_gen, data.gen
            )));
        }
        // Invariant 3: durable before openraft may purge the log up to this snapshot.
        self.db.sync()?;
        let n = self.next_snap.fetch_add(1, Ordering::SeqCst);
        let (term, index) = m
            .last_applied
            .map_or((0, 0), |id| (id.leader_id.term, id.index));
        let snap_meta = SnapshotMeta {
            last_log_id: m.last_applied,
            last_membership: m.membership,
            snapshot_id: format!("{term}-{index}-{n}"),
        };
        let tmp = self.snap_dir.join(format!("{n:020}.tmp"));
        let path = self.snap_dir.join(format!("{n:020}.snap"));
        let mut w = SnapshotWriter::create(&tmp, &snap_meta)?;
        for kv in view.iter_cf_all(&data.cf) {
            let (k, v) = kv?;
            w.pair(&k, &v)?;
        }
        let (pairs, bytes) = w.finish()?;
        drop(view);
        drop(data);
        std::fs::rename(&tmp, &path)?;
        sync_dir(&self.snap_dir)?;
        self.set_current(Current {
            meta: snap_meta.clone(),
            path: path.clone(),
        })?;
        let mut s = self.stats.lock();
        s.snapshots_built += 1;
        s.last_build_ms = started.elapsed().as_millis() as u64;
        s.snapshot_bytes = bytes;
        s.snapshot_pairs = pairs;
        s.snapshot_last_log_id = snap_meta.last_log_id;
        drop(s);
        let file = std::fs::File::open(&path)?;
        Ok(Snapshot {
            meta: snap_meta,
            snapshot: Box::new(tokio::fs::File::from_std(file)),
        })
    }
}
