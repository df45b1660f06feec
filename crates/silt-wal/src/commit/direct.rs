//! `Strategy::DirectPwrite`: TidesDB v7's commit (seed 000), reproduced so it can be measured
//! beside `Pipelined` on the same disk: an atomic offset reservation, one `pwrite` per
//! commit, and under `Full` one `fdatasync` per commit, shared with no one.

use super::sync_stream::SyncEnv;
use super::{Inner, WriteVia};
use crate::error::{Error, Result};
use crate::Lsn;

impl Inner {
    pub(super) fn append_direct(&self, payload: &[u8], want_sync: bool) -> Result<Lsn> {
        let (lsn, end) = self.write_record(payload, WriteVia::Pwrite)?;
        self.wait_filled(end)?;
        if want_sync {
            self.sync_own(end)?;
        }
        Ok(lsn)
    }

    /// `DirectPwrite` under `Full`: this commit's own `fdatasync`, shared with no one.
    pub(super) fn sync_own(&self, end: u64) -> Result<()> {
        if self.is_poisoned() {
            return Err(Error::Poisoned);
        }
        let target = self.ring.filled();
        debug_assert!(target >= end);
        let from = self.stream.durable().min(end - 1);
        self.sync_range(from, target)?;
        self.stream.advance(target);
        self.synced(target);
        Ok(())
    }
}
