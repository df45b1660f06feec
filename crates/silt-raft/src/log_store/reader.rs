//! [`LogReader`]: openraft's `RaftLogReader` over the [`LogIndex`]: cached entries are
//! cloned from memory, older ones read back from silt-wal by LSN.
//!
//! silt-wal's reader starts at the first record of the segment holding the LSN asked for
//! and walks forward, so a read of an old entry costs a walk over part of a segment. A
//! reader keeps its position (`Cursor`) between calls: replication to a follower that is
//! catching up asks for consecutive ranges, and each continues where the last one stopped.

use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use openraft::{ErrorSubject, ErrorVerb, LogId, RaftLogReader, StorageError};
use silt_wal::Lsn;

use super::Shared;
use crate::codec::{decode_record, LogRecord};
use crate::error::{Error, IntoStorage, Result};
use crate::{Entry, NodeId, TypeConfig};

/// A silt-wal reader left where the last read stopped.
struct Cursor {
    reader: silt_wal::Reader,
    /// The LSN of the last record the reader returned.
    last: Lsn,
    /// Every record below this LSN was in the log when the reader was made, so the reader
    /// will reach it.
    end_hint: Lsn,
}

/// Reads entries of the Raft log; openraft makes one per replication stream.
pub struct LogReader {
    shared: Arc<Shared>,
    cursor: Option<Cursor>,
}

impl Clone for LogReader {
    fn clone(&self) -> Self {
        LogReader::new(self.shared.clone())
    }
}

impl LogReader {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        LogReader {
            shared,
            cursor: None,
        }
    }

    /// Entries `start..end` that the log holds, up to `limit_bytes` (at least one).
    fn read(&mut self, start: u64, end: u64, limit_bytes: usize) -> Result<Vec<Entry>> {
        let mut out = Vec::new();
        // Under the lock: the cached entries (a suffix), and where the others are.
        let mut wanted: Vec<(u64, LogId<NodeId>, Lsn)> = Vec::new();
        let mut cached: Vec<Entry> = Vec::new();
        {
            let idx = self.shared.index.read();
            let present = idx.present();
            let start = start.max(present.start);
            let end = end.min(present.end);
            let mut bytes = 0usize;
            for i in start..end {
                let Some(slot) = idx.get(i) else { break };
                match &slot.entry {
                    Some(e) => cached.push(e.clone()),
                    None => wanted.push((i, slot.log_id, slot.lsn)),
                }
                bytes = bytes.saturating_add(slot.size);
                if bytes >= limit_bytes && !(wanted.is_empty() && cached.is_empty()) {
                    break;
                }
            }
        }
        if !wanted.is_empty() {
            match self.read_wal(&wanted, limit_bytes) {
                Ok(v) => out = v,
                Err(e) => {
                    // A purge may have removed the segments since the index was read: then
                    // the entries are simply gone (openraft will send a snapshot instead).
                    let first = wanted[0].0;
                    if self.shared.index.read().present().start > first {
                        self.cursor = None;
                        return Ok(Vec::new());
                    }
                    return Err(e);
                }
            }
            if out.len() < wanted.len() {
                // The byte limit stopped the WAL part: the cached part comes after it.
                return Ok(out);
            }
        }
        out.extend(cached);
        Ok(out)
    }

    /// Reads the records at the given LSNs (ascending, consecutive entries) from silt-wal.
    fn read_wal(
        &mut self,
        wanted: &[(u64, LogId<NodeId>, Lsn)],
        limit_bytes: usize,
    ) -> Result<Vec<Entry>> {
        let first_lsn = wanted[0].2;
        let reusable = self
            .cursor
            .as_ref()
            .is_some_and(|c| c.last < first_lsn && first_lsn < c.end_hint);
        if !reusable {
            let end_hint = self.shared.wal.stats().filled_lsn;
            let reader = self.shared.wal.read_from(first_lsn)?;
            self.cursor = Some(Cursor {
                reader,
                last: 0,
                end_hint,
            });
        }
        let mut out = Vec::with_capacity(wanted.len());
        let mut bytes = 0usize;
        let Some(cursor) = self.cursor.as_mut() else {
            return Ok(out);
        };
        let mut next = 0;
        while next < wanted.len() {
            let (index, log_id, lsn) = wanted[next];
            let Some(rec) = cursor.reader.next() else {
                self.cursor = None;
                return Err(Error::Corruption(format!(
                    "raft log: entry {index} at LSN {lsn} is past the end of the log"
                )));
            };
            let rec = match rec {
                Ok(r) => r,
                Err(e) => {
                    self.cursor = None;
                    return Err(e.into());
                }
            };
            cursor.last = rec.lsn;
            if rec.lsn < lsn {
                continue;
            }
            if rec.lsn > lsn {
                self.cursor = None;
                return Err(Error::Corruption(format!(
                    "raft log: no record at LSN {lsn} for entry {index}"
                )));
            }
            let LogRecord::Entry(entry) = decode_record(&rec.payload)? else {
                self.cursor = None;
                return Err(Error::Corruption(format!(
                    "raft log: the record at LSN {lsn} is not entry {index}"
                )));
            };
            if entry.log_id != log_id {
                self.cursor = None;
                return Err(Error::Corruption(format!(
                    "raft log: the record at LSN {lsn} is entry {}, the index says {log_id}",
                    entry.log_id
                )));
            }
            bytes += rec.payload.len();
            out.push(entry);
            next += 1;
            if bytes >= limit_bytes {
                break;
            }
        }
        Ok(out)
    }
}

fn bounds(range: &impl RangeBounds<u64>) -> (u64, u64) {
    let start = match range.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.saturating_add(1),
        Bound::Excluded(&e) => e,
        Bound::Unbounded => u64::MAX,
    };
    (start, end)
}

impl RaftLogReader<TypeConfig> for LogReader {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError<NodeId>> {
        let (start, end) = bounds(&range);
        // All of the range: openraft's apply and its tests expect every entry present.
        self.read(start, end, usize::MAX)
            .sto(ErrorSubject::Logs, ErrorVerb::Read)
    }

    async fn limited_get_log_entries(
        &mut self,
        start: u64,
        end: u64,
    ) -> Result<Vec<Entry>, StorageError<NodeId>> {
        let limit = self.shared.opts.read_limit_bytes;
        self.read(start, end, limit)
            .sto(ErrorSubject::Logs, ErrorVerb::Read)
    }
}
