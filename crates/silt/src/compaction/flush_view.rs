//! What a flush writes of a frozen memtable: each user key's entries judged as a compaction
//! into a level above the bottom judges them ([`keep_versions_above`]), so a level-0 table
//! holds no entry that no reader can see:
//!
//! - a version overwritten by a newer one with no snapshot between them;
//! - a single delete together with the put it deletes (same stripe), the case of a queue
//!   that inserts and soon deletes each row: neither reaches a table.
//!
//! Tombstones that delete something older stay (the table below may hold what they delete),
//! as do merge operands (they hide nothing). A put below the family's largest table seqno
//! is never paired away with a single delete: it may be a replayed copy of an entry a table
//! holds too ([`keep_versions_above`]).
//!
//! Why this is safe for readers: a reader reads at a seqno it registered as a snapshot or in
//! a super-version it pinned (which keeps the memtable itself); a snapshot registered after
//! the flush began lies above every entry of a frozen memtable (the flush waited until they
//! were visible), so it splits no stripe.

use super::merge::keep_versions_above;
use crate::iter::InternalIterator;
use crate::key::{self, Seqno};
use crate::memtable::MemIter;

/// A forward cursor over one column family of a frozen memtable that yields only the
/// entries a flush keeps. `dropped` counts the others.
pub(crate) struct FlushView {
    /// The kept entry the view stands on (invalid at the end).
    cur: MemIter,
    /// The first entry after the current user key's entries.
    end: MemIter,
    /// Indexes of the kept entries among the current key's (newest first), the one `cur`
    /// stands on (`at`), and `cur`'s index among the key's entries (`pos`).
    keep: Vec<usize>,
    at: usize,
    pos: usize,
    snapshots: Vec<Seqno>,
    pair_floor: Seqno,
    /// The internal keys of a user key with several entries (values are not needed to
    /// decide), reused.
    scratch: Vec<(Vec<u8>, Vec<u8>)>,
    /// Entries left out so far.
    pub(crate) dropped: u64,
}

impl FlushView {
    /// The view of `it`'s memtable and column family from its first entry; `snapshots` are
    /// the live snapshots (ascending), `pair_floor` the family's largest table seqno + 1.
    pub(crate) fn new(mut it: MemIter, snapshots: Vec<Seqno>, pair_floor: Seqno) -> FlushView {
        it.seek_to_first();
        let end = it.clone();
        let mut v = FlushView {
            cur: it,
            end,
            keep: Vec::new(),
            at: 0,
            pos: 0,
            snapshots,
            pair_floor,
            scratch: Vec::new(),
            dropped: 0,
        };
        v.start_key();
        v
    }

    /// From `cur` at the first entry of a user key: finds the key's entries, decides which
    /// stay, and puts `cur` on the first kept one (moving on to later keys if none stays).
    fn start_key(&mut self) {
        while self.cur.valid() {
            self.end.copy_position_from(&self.cur);
            self.end.next();
            let mut len = 1;
            while self.end.valid() && key::user_key(self.end.key()) == key::user_key(self.cur.key())
            {
                self.end.next();
                len += 1;
            }
            self.keep.clear();
            self.at = 0;
            self.pos = 0;
            if len == 1 {
                self.keep.push(0);
                return;
            }
            let mut w = self.cur.clone();
            for i in 0..len {
                if i == self.scratch.len() {
                    self.scratch.push((Vec::new(), Vec::new()));
                }
                self.scratch[i].0.clear();
                self.scratch[i].0.extend_from_slice(w.key());
                w.next();
            }
            self.keep = keep_versions_above(
                &self.scratch[..len],
                &self.snapshots,
                false,
                self.pair_floor,
            );
            self.dropped += (len - self.keep.len()) as u64;
            if let Some(&first) = self.keep.first() {
                self.step(first);
                return;
            }
            self.cur.copy_position_from(&self.end);
        }
    }

    /// Moves `cur` forward to entry `to` of the current key.
    fn step(&mut self, to: usize) {
        debug_assert!(to >= self.pos);
        for _ in self.pos..to {
            self.cur.next();
        }
        self.pos = to;
    }

    pub(crate) fn valid(&self) -> bool {
        self.cur.valid()
    }

    /// The current entry's internal key. REQUIRES: `valid()`.
    pub(crate) fn key(&self) -> &[u8] {
        self.cur.key()
    }

    /// The current entry's value. REQUIRES: `valid()`.
    pub(crate) fn value(&self) -> &[u8] {
        self.cur.value()
    }

    /// Moves to the next kept entry. REQUIRES: `valid()`.
    pub(crate) fn next(&mut self) {
        self.at += 1;
        if let Some(&to) = self.keep.get(self.at) {
            self.step(to);
        } else {
            self.cur.copy_position_from(&self.end);
            self.start_key();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::key::Kind;
    use crate::memtable::Memtable;

    fn view(
        m: &Arc<Memtable>,
        snapshots: Vec<Seqno>,
        floor: Seqno,
    ) -> (Vec<(Vec<u8>, Seqno, Kind)>, u64) {
        let mut v = FlushView::new(m.iter(0), snapshots, floor);
        let mut out = Vec::new();
        while v.valid() {
            let p = key::parse(v.key()).expect("an internal key");
            out.push((p.user_key.to_vec(), p.seqno, p.kind));
            v.next();
        }
        (out, v.dropped)
    }

    #[test]
    fn a_single_delete_and_its_put_leave_nothing_and_overwrites_keep_the_newest() {
        let m = Arc::new(Memtable::new(1));
        m.insert(0, b"a", 1, Kind::Put, b"1");
        m.insert(0, b"a", 2, Kind::SingleDelete, b"");
        m.insert(0, b"b", 3, Kind::Put, b"old");
        m.insert(0, b"b", 4, Kind::Put, b"new");
        m.insert(0, b"c", 5, Kind::Delete, b"");
        m.insert(0, b"d", 6, Kind::Put, b"x");
        m.insert(0, b"e", 7, Kind::Put, b"1");
        m.insert(0, b"e", 8, Kind::Delete, b"");
        m.insert(1, b"a", 9, Kind::Put, b"other family");
        let (out, dropped) = view(&m, vec![], 0);
        assert_eq!(
            out,
            vec![
                (b"b".to_vec(), 4, Kind::Put),
                (b"c".to_vec(), 5, Kind::Delete),
                (b"d".to_vec(), 6, Kind::Put),
                // A delete stays (a table below may hold an older `e`); its put goes.
                (b"e".to_vec(), 8, Kind::Delete),
            ]
        );
        assert_eq!(dropped, 4);
    }

    #[test]
    fn a_snapshot_between_keeps_both_versions() {
        let m = Arc::new(Memtable::new(1));
        m.insert(0, b"a", 1, Kind::Put, b"1");
        m.insert(0, b"a", 3, Kind::SingleDelete, b"");
        m.insert(0, b"b", 4, Kind::Put, b"old");
        m.insert(0, b"b", 6, Kind::Put, b"new");
        // Snapshot 2 sees a@1; snapshot 5 sees b@4.
        let (out, dropped) = view(&m, vec![2, 5], 0);
        assert_eq!(
            out,
            vec![
                (b"a".to_vec(), 3, Kind::SingleDelete),
                (b"a".to_vec(), 1, Kind::Put),
                (b"b".to_vec(), 6, Kind::Put),
                (b"b".to_vec(), 4, Kind::Put),
            ]
        );
        assert_eq!(dropped, 0);
    }

    #[test]
    fn a_put_a_table_may_also_hold_is_not_paired_away() {
        // Replay from below what tables hold put a@1 in the memtable again: the single
        // delete must stay to hide the table's copy; the memtable's copy goes.
        let m = Arc::new(Memtable::new(1));
        m.insert(0, b"a", 1, Kind::Put, b"1");
        m.insert(0, b"a", 7, Kind::SingleDelete, b"");
        m.insert(0, b"b", 8, Kind::Put, b"1");
        m.insert(0, b"b", 9, Kind::SingleDelete, b"");
        let (out, dropped) = view(&m, vec![], 2);
        assert_eq!(out, vec![(b"a".to_vec(), 7, Kind::SingleDelete)]);
        assert_eq!(dropped, 3);
    }

    #[test]
    fn merge_operands_stay_above_what_they_fold_onto() {
        let m = Arc::new(Memtable::new(1));
        m.insert(0, b"a", 1, Kind::Put, b"base");
        m.insert(0, b"a", 2, Kind::Merge, b"+1");
        m.insert(0, b"a", 3, Kind::Merge, b"+2");
        let (out, dropped) = view(&m, vec![], 0);
        assert_eq!(out.len(), 3);
        assert_eq!(dropped, 0);
    }

    #[test]
    fn an_empty_memtable_and_one_where_everything_goes_are_both_empty() {
        let m = Arc::new(Memtable::new(1));
        assert_eq!(view(&m, vec![], 0), (vec![], 0));
        m.insert(0, b"a", 1, Kind::Put, b"1");
        m.insert(0, b"a", 2, Kind::SingleDelete, b"");
        assert_eq!(view(&m, vec![], 0), (vec![], 2));
    }
}
