//! Installing a received snapshot (invariant 2 of `state_machine/mod.rs`): the pairs are
//! copied into a fresh `data-{gen+1}` column family while the file is checked, then one
//! synced batch switches `data_cf`, `last_applied` and `membership`; the old generation is
//! dropped and the file becomes the current snapshot. A damaged file is refused and the
//! half-filled column family dropped.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Instant;

use silt::{WriteBatch, WriteOptions};

use super::meta::{self, data_cf_name};
use super::snapshot_file::SnapshotReader;
use super::{sync_dir, Current, Data, SmShared, INSTALL_BATCH_BYTES, RECEIVING};
use crate::error::{Error, Result};
use crate::SnapshotMeta;

impl SmShared {
    /// Installs the snapshot in `file` (normally `snapshots/receiving`, which openraft
    /// filled through [`RaftStateMachine::begin_receiving_snapshot`]).
    pub(super) fn install(&self, meta: &SnapshotMeta, file: std::fs::File) -> Result<()> {
        let started = Instant::now();
        let recv = self.snap_dir.join(RECEIVING);
        let ours = same_file(&file, &recv);
        let copy = if ours {
            None
        } else {
            // Handed a file of someone else's (openraft's suite passes the leader's): keep
            // a copy as our current snapshot.
            let tmp = self.snap_dir.join(format!(
                "{:020}.tmp",
                self.next_snap.fetch_add(1, Ordering::SeqCst)
            ));
            let mut src = file.try_clone()?;
            std::io::Seek::seek(&mut src, std::io::SeekFrom::Start(0))?;
            let mut dst = std::fs::File::create(&tmp)?;
            std::io::copy(&mut src, &mut dst)?;
            dst.sync_all()?;
            Some(tmp)
        };
        let mut reader = SnapshotReader::from_file(file)?;
        if reader.meta() != meta {
            return Err(Error::Corruption(format!(
                "the received snapshot says {:?}, openraft says {meta:?}",
                reader.meta()
            )));
        }
        let old_gen = self.data.read().gen;
        let new_gen = old_gen + 1;
        let name = data_cf_name(new_gen);
        if self.db.list_cfs().contains(&name) {
            self.db.drop_cf(&name)?;
        }
        let cf = self.db.create_cf(&name)?;
        let filled = (|| -> Result<u64> {
            let mut batch = WriteBatch::new();
            let mut pairs = 0;
            while let Some((k, v)) = reader.next_pair()? {
                batch.put_cf(&cf, &k, &v);
                pairs += 1;
                if batch.encoded_bytes() >= INSTALL_BATCH_BYTES {
                    self.db
                        .write(std::mem::take(&mut batch), WriteOptions::default())?;
                }
            }
            self.db.write(batch, WriteOptions::default())?;
            Ok(pairs)
        })();
        let pairs = match filled {
            Ok(p) => p,
            Err(e) => {
                // Never switched to: drop what was copied (open would drop it too).
                let _ = self.db.drop_cf(&name);
                return Err(e);
            }
        };
        // The switch (invariant 2): one synced batch after every batch of the copy.
        let mut b = WriteBatch::new();
        meta::put_data_gen(&mut b, &self.meta_cf, new_gen);
        if let Some(id) = &meta.last_log_id {
            meta::put_last_applied(&mut b, &self.meta_cf, id);
        }
        meta::put_membership(&mut b, &self.meta_cf, &meta.last_membership)?;
        self.db.write(b, WriteOptions::durable())?;
        {
            let mut data = self.data.write();
            *data = Data { gen: new_gen, cf };
            let mut a = self.applied.write();
            *a = (meta.last_log_id, meta.last_membership.clone());
        }
        self.db.drop_cf(&data_cf_name(old_gen))?;
        // The received file becomes the current snapshot.
        let n = self.next_snap.fetch_add(1, Ordering::SeqCst);
        let path = self.snap_dir.join(format!("{n:020}.snap"));
        std::fs::rename(copy.as_ref().unwrap_or(&recv), &path)?;
        sync_dir(&self.snap_dir)?;
        let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        self.set_current(Current {
            meta: meta.clone(),
            path,
        })?;
        let mut s = self.stats.lock();
        s.snapshots_installed += 1;
        s.last_install_ms = started.elapsed().as_millis() as u64;
        s.last_applied = meta.last_log_id;
        s.snapshot_bytes = bytes;
        s.snapshot_pairs = pairs;
        s.snapshot_last_log_id = meta.last_log_id;
        Ok(())
    }
}

/// Whether `file` is the file at `path` (same device and inode).
fn same_file(file: &std::fs::File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}
