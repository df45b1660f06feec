//! The handles a [`SimFs`] gives out: an open file ([`SimFile`]: the shared state and an
//! inode id) and a directory lock ([`SimLock`]).

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::Mutex;

use super::*;
use crate::{File, FileLock};

/// The guard of a [`SimFs`] lock: releases the path when dropped.
pub(super) struct SimLock {
    pub(super) state: Arc<Mutex<State>>,
    pub(super) path: PathBuf,
}

impl std::fmt::Debug for SimLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimLock").field("path", &self.path).finish()
    }
}

impl FileLock for SimLock {}

impl Drop for SimLock {
    fn drop(&mut self) {
        self.state.lock().locks.remove(&self.path);
    }
}

/// An open file of a [`SimFs`]: the shared state and an inode id.
pub(super) struct SimFile {
    pub(super) state: Arc<Mutex<State>>,
    pub(super) ino: Ino,
}

impl std::fmt::Debug for SimFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimFile").field("ino", &self.ino).finish()
    }
}

impl Drop for SimFile {
    fn drop(&mut self) {
        let mut st = self.state.lock();
        st.inode_mut(self.ino).handles -= 1;
        st.reap(self.ino);
    }
}

impl SimFile {
    fn write(&self, bufs: &[&[u8]], offset: u64, mapped: bool) -> io::Result<()> {
        let mut st = self.state.lock();
        st.call(FailOp::Write)?;
        st.mapped_writes += u64::from(mapped);
        let total: u64 = bufs.iter().map(|b| b.len() as u64).sum();
        let end = offset
            .checked_add(total)
            .filter(|&e| usize::try_from(e).is_ok())
            .ok_or_else(too_large)?;
        let inode = st.inode_mut(self.ino);
        if mapped && end > inode.live.len() as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "write_mapped past the end of the file",
            ));
        }
        if total == 0 {
            // A zero-length write changes nothing, not even the length.
            return Ok(());
        }
        let op = Op::Write {
            offset,
            data: bufs.concat(),
        };
        apply(&mut inode.live, &op);
        inode.unsynced.push(op);
        Ok(())
    }
}

impl File for SimFile {
    fn len(&self) -> io::Result<u64> {
        Ok(self.state.lock().inode_mut(self.ino).live.len() as u64)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut st = self.state.lock();
        st.call(FailOp::Write)?;
        usize::try_from(len).map_err(|_| too_large())?;
        let inode = st.inode_mut(self.ino);
        let op = Op::SetLen(len);
        apply(&mut inode.live, &op);
        inode.unsynced.push(op);
        Ok(())
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let mut st = self.state.lock();
        let live = &st.inode_mut(self.ino).live;
        let start = usize::try_from(offset).map_err(|_| io::ErrorKind::UnexpectedEof)?;
        let src = start
            .checked_add(buf.len())
            .and_then(|end| live.get(start..end))
            .ok_or(io::ErrorKind::UnexpectedEof)?;
        buf.copy_from_slice(src);
        Ok(())
    }

    fn write_at(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()> {
        self.write(bufs, offset, false)
    }

    fn write_mapped(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()> {
        self.write(bufs, offset, true)
    }

    /// As Linux's `FALLOC_FL_ZERO_RANGE` looks to a reader: the range reads as zeros, made
    /// durable by a sync and lost with the other unsynced writes at a power loss; a write
    /// for the injected faults.
    fn forget(&self, offset: u64, len: u64) -> io::Result<()> {
        self.write_zeros(offset, len)
    }

    fn sync_data(&self) -> io::Result<()> {
        let mut st = self.state.lock();
        let res = st.call(FailOp::Sync);
        let inode = st.inode_mut(self.ino);
        match res {
            Err(e) => {
                // The kernel drops dirty pages after a failed writeback.
                inode.live = inode.durable.clone();
                let dropped = inode.unsynced.len() as u64;
                inode.unsynced.clear();
                if dropped > 0 {
                    let names: Vec<PathBuf> = st
                        .live
                        .iter()
                        .filter(|(_, &i)| i == self.ino)
                        .map(|(p, _)| p.clone())
                        .collect();
                    for name in names {
                        *st.dropped_by_failed_syncs.entry(name).or_default() += dropped;
                    }
                }
                Err(e)
            }
            Ok(()) => {
                // Durable + every unsynced op == live; cheaper than copying the whole file.
                let Inode {
                    durable, unsynced, ..
                } = inode;
                for op in unsynced.drain(..) {
                    apply(durable, &op);
                }
                debug_assert_eq!(inode.durable.len(), inode.live.len());
                Ok(())
            }
        }
    }
}
