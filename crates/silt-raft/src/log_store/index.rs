//! [`LogIndex`]: the in-memory map from log index to the LSN of its record in silt-wal, plus
//! the vote, the committed id, the last purged id and a byte-bounded cache of recent
//! entries. Replay at open and the live operations go through the same methods, so the
//! state after a restart is the state before it.
//!
//! Invariants:
//! 1. `slots` holds consecutive indexes starting at `first`; `slots[i]` is index `first + i`.
//! 2. When `purged` is set and `slots` is not empty, `first > purged.index`.
//! 3. Cached entries form a suffix of `slots` (from index `cached_from` on), and
//!    `cached_bytes` is the sum of their sizes: eviction takes the oldest first.

use std::collections::VecDeque;

use openraft::{LogId, Vote};
use silt_wal::Lsn;

use crate::error::{Error, Result};
use crate::{Entry, NodeId};

/// Where one log entry is.
#[derive(Clone, Debug)]
pub(crate) struct Slot {
    pub(crate) log_id: LogId<NodeId>,
    pub(crate) lsn: Lsn,
    pub(crate) entry: Option<Entry>,
    /// The size of the entry's record.
    pub(crate) size: usize,
    /// Bytes this slot counts in the cache (0 once evicted).
    bytes: usize,
}

/// The Raft log's state, in memory.
#[derive(Debug)]
pub(crate) struct LogIndex {
    pub(crate) purged: Option<LogId<NodeId>>,
    pub(crate) vote: Option<Vote<NodeId>>,
    pub(crate) committed: Option<LogId<NodeId>>,
    first: u64,
    slots: VecDeque<Slot>,
    cached_from: u64,
    cached_bytes: usize,
    cache_limit_bytes: usize,
}

impl LogIndex {
    /// An empty log whose cache holds at most `cache_limit_bytes` of encoded entries.
    pub(crate) fn new(cache_limit_bytes: usize) -> Self {
        LogIndex {
            purged: None,
            vote: None,
            committed: None,
            first: 0,
            slots: VecDeque::new(),
            cached_from: 0,
            cached_bytes: 0,
            cache_limit_bytes,
        }
    }

    /// The last log id: of the last entry, or the last purged one when there is none.
    pub(crate) fn last_log_id(&self) -> Option<LogId<NodeId>> {
        self.slots.back().map(|s| s.log_id).or(self.purged)
    }

    /// The index the next appended entry must have, if the log constrains it.
    fn expected_next(&self) -> Option<u64> {
        self.last_log_id().map(|id| id.index + 1)
    }

    /// Whether `index` is at or below the last purge: such an entry is already part of the
    /// state a snapshot covers, and an append of it is dropped (openraft's storage suite
    /// appends below a purge; openraft itself does not).
    pub(crate) fn is_purged(&self, index: u64) -> bool {
        self.purged.is_some_and(|p| index <= p.index)
    }

    /// Checks that an entry at `index` may follow the log as it is now.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` if the entry would leave a hole or go backwards (it must follow the
    /// last entry, or the last purged id; an empty, never purged log takes any index).
    pub(crate) fn check_next(&self, index: u64) -> Result<()> {
        match self.expected_next() {
            Some(next) if next != index => Err(Error::InvalidArgument(format!(
                "appending entry {index} where entry {next} is expected would leave a hole"
            ))),
            _ => Ok(()),
        }
    }

    /// Records that the entry `log_id` is at `lsn`; keeps `entry` in the cache if given.
    ///
    /// # Errors
    ///
    /// As [`LogIndex::check_next`].
    pub(crate) fn push(
        &mut self,
        log_id: LogId<NodeId>,
        lsn: Lsn,
        entry: Option<Entry>,
        bytes: usize,
    ) -> Result<()> {
        self.check_next(log_id.index)?;
        if self.slots.is_empty() {
            self.first = log_id.index;
            self.cached_from = log_id.index;
        }
        let size = bytes;
        let (entry, bytes) = match entry {
            Some(e) => (Some(e), bytes),
            None => (None, 0),
        };
        if entry.is_none() {
            // Nothing older than an uncached entry stays cached (invariant 3).
            self.evict_below(log_id.index + 1);
        }
        self.cached_bytes += bytes;
        self.slots.push_back(Slot {
            log_id,
            lsn,
            entry,
            size,
            bytes,
        });
        self.evict_to_limit();
        Ok(())
    }

    /// Drops the entries at index `since` and above.
    pub(crate) fn truncate(&mut self, since: u64) {
        while self.slots.back().is_some_and(|s| s.log_id.index >= since) {
            if let Some(s) = self.slots.pop_back() {
                self.cached_bytes -= s.bytes;
            }
        }
        let end = self.first + self.slots.len() as u64;
        self.cached_from = self.cached_from.min(end);
    }

    /// Drops the entries up to `upto` (inclusive) and remembers it as the last purged id.
    /// A purge never goes backwards.
    pub(crate) fn purge(&mut self, upto: LogId<NodeId>) {
        if self.purged.is_some_and(|p| p.index >= upto.index) {
            return;
        }
        self.purged = Some(upto);
        while self
            .slots
            .front()
            .is_some_and(|s| s.log_id.index <= upto.index)
        {
            if let Some(s) = self.slots.pop_front() {
                self.cached_bytes -= s.bytes;
            }
        }
        // Entries newer than the purge may start past `upto + 1` when older segments were
        // already dropped at an earlier purge: `first` is the first entry kept.
        self.first = self
            .slots
            .front()
            .map_or(upto.index + 1, |s| s.log_id.index);
        self.cached_from = self.cached_from.max(self.first);
    }

    /// The slot of `index`, if the log has it.
    pub(crate) fn get(&self, index: u64) -> Option<&Slot> {
        let i = index.checked_sub(self.first)?;
        self.slots.get(usize::try_from(i).ok()?)
    }

    /// The range of indexes present: `first..end`.
    pub(crate) fn present(&self) -> std::ops::Range<u64> {
        self.first..self.first + self.slots.len() as u64
    }

    /// The LSN of the first entry kept, if any.
    pub(crate) fn first_lsn(&self) -> Option<Lsn> {
        self.slots.front().map(|s| s.lsn)
    }

    /// Bytes of entries held in the cache.
    pub(crate) fn cached_bytes(&self) -> usize {
        self.cached_bytes
    }

    fn evict_below(&mut self, end: u64) {
        while self.cached_from < end {
            let Some(i) = self.cached_from.checked_sub(self.first) else {
                self.cached_from = self.first;
                continue;
            };
            match self.slots.get_mut(i as usize) {
                Some(s) => {
                    self.cached_bytes -= s.bytes;
                    s.bytes = 0;
                    s.entry = None;
                }
                None => break,
            }
            self.cached_from += 1;
        }
    }

    fn evict_to_limit(&mut self) {
        while self.cached_bytes > self.cache_limit_bytes {
            let before = self.cached_from;
            self.evict_below(self.cached_from + 1);
            if self.cached_from == before {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use openraft::{CommittedLeaderId, EntryPayload};

    use super::*;

    fn id(i: u64) -> LogId<NodeId> {
        LogId::new(CommittedLeaderId::new(1, 1), i)
    }

    fn entry(i: u64) -> Entry {
        Entry {
            log_id: id(i),
            payload: EntryPayload::Blank,
        }
    }

    #[test]
    fn holes_are_refused_and_an_empty_log_takes_any_start() {
        let mut x = LogIndex::new(1 << 20);
        x.push(id(5), 100, Some(entry(5)), 10).unwrap();
        assert!(x.push(id(7), 200, None, 0).is_err());
        assert!(x.push(id(5), 200, None, 0).is_err());
        x.push(id(6), 200, None, 0).unwrap();
        assert_eq!(x.present(), 5..7);
        x.truncate(0);
        assert_eq!(x.present().count(), 0);
        x.push(id(3), 300, None, 0).unwrap();
        assert_eq!(x.last_log_id(), Some(id(3)));
    }

    #[test]
    fn purge_past_the_end_moves_the_last_log_id() {
        let mut x = LogIndex::new(1 << 20);
        for i in 0..=10 {
            x.push(id(i), i * 10, Some(entry(i)), 1).unwrap();
        }
        x.purge(id(5));
        assert_eq!(x.present(), 6..11);
        assert_eq!(x.first_lsn(), Some(60));
        x.purge(id(3));
        assert_eq!(x.purged, Some(id(5)), "a purge never goes backwards");
        x.purge(id(20));
        assert_eq!(x.present().count(), 0);
        assert_eq!(x.last_log_id(), Some(id(20)));
        assert_eq!(x.cached_bytes(), 0);
        assert!(x.push(id(20), 1, None, 0).is_err());
        x.push(id(21), 1, None, 0).unwrap();
    }

    #[test]
    fn the_cache_keeps_the_newest_entries_within_its_limit() {
        let mut x = LogIndex::new(30);
        for i in 0..10 {
            x.push(id(i), i, Some(entry(i)), 10).unwrap();
        }
        assert_eq!(x.cached_bytes(), 30);
        assert!(x.get(6).unwrap().entry.is_none());
        assert!(x.get(7).unwrap().entry.is_some());
        x.truncate(8);
        assert_eq!(x.cached_bytes(), 10);
        x.push(id(8), 8, None, 0).unwrap();
        assert_eq!(
            x.cached_bytes(),
            0,
            "an uncached entry uncaches everything older"
        );
    }
}
