//! What a transaction adds to a read of its own: its buffered writes as one more sorted
//! source of an iterator or cursor ([`Overlay`], read-your-own-writes in both directions),
//! and the record of which key ranges the read covered ([`ScanLog`], for `Serializable`
//! validation of scans).
//!
//! An overlay entry carries the seqno [`OVERLAY_SEQNO`], above every real one (a write's
//! seqno is its log position, always below it: `db/write.rs` refuses to reach it), so it
//! sorts first among its key's entries and wins; the walk treats it as visible whatever the
//! read's seqno. An overlay is a frozen copy: writes the transaction makes after the
//! iterator was created are not in it (as a database iterator does not see later writes).

use std::ops::Bound;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::Error;
use crate::iter::InternalIterator;
use crate::key::{self, Kind, Seqno, MAX_SEQNO};

/// The seqno of a transaction's own, uncommitted entries in a read.
pub(crate) const OVERLAY_SEQNO: Seqno = MAX_SEQNO;

/// One column family's buffered writes of a transaction, sorted by internal key.
#[derive(Debug, Default)]
pub(crate) struct Overlay {
    /// `(internal key, value)`, ascending; one entry per user key.
    entries: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Overlay {
    /// An overlay of `(user key, kind, value)` entries given in ascending user-key order,
    /// one per key.
    pub(crate) fn new<'a>(entries: impl Iterator<Item = (&'a [u8], Kind, &'a [u8])>) -> Overlay {
        let entries: Vec<_> = entries
            .map(|(k, kind, v)| (key::make_internal(k, OVERLAY_SEQNO, kind), v.to_vec()))
            .collect();
        debug_assert!(entries
            .windows(2)
            .all(|w| key::cmp_internal(&w[0].0, &w[1].0) == std::cmp::Ordering::Less));
        Overlay { entries }
    }

    /// The entries as (user key, kind, value), in order.
    #[cfg(test)]
    pub(crate) fn user_entries(&self) -> Vec<(Vec<u8>, Kind, Vec<u8>)> {
        self.entries
            .iter()
            .map(|(k, v)| {
                let p = key::parse(k).expect("an overlay key");
                (p.user_key.to_vec(), p.kind, v.clone())
            })
            .collect()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether an entry's user key lies in `lo..hi`.
    pub(crate) fn has_key_in(&self, lo: &[u8], hi: &[u8]) -> bool {
        let i = self
            .entries
            .partition_point(|(k, _)| key::parse(k).is_some_and(|p| p.user_key < lo));
        self.entries
            .get(i)
            .and_then(|(k, _)| key::parse(k))
            .is_some_and(|p| p.user_key < hi)
    }
}

/// A cursor over an [`Overlay`].
pub(crate) struct OverlayIter {
    ov: Arc<Overlay>,
    /// The current index, or `None` when invalid.
    pos: Option<usize>,
}

impl OverlayIter {
    pub(crate) fn new(ov: Arc<Overlay>) -> OverlayIter {
        OverlayIter { ov, pos: None }
    }

    /// The index of the first entry `>= target`.
    fn lower_bound(&self, target: &[u8]) -> usize {
        self.ov
            .entries
            .partition_point(|(k, _)| key::cmp_internal(k, target) == std::cmp::Ordering::Less)
    }
}

impl InternalIterator for OverlayIter {
    fn valid(&self) -> bool {
        self.pos.is_some()
    }

    fn seek_to_first(&mut self) {
        self.pos = (!self.ov.entries.is_empty()).then_some(0);
    }

    fn seek_to_last(&mut self) {
        self.pos = self.ov.entries.len().checked_sub(1);
    }

    fn seek(&mut self, target: &[u8]) {
        let i = self.lower_bound(target);
        self.pos = (i < self.ov.entries.len()).then_some(i);
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        // The last entry <= target: one before the first entry > target.
        let i = self
            .ov
            .entries
            .partition_point(|(k, _)| key::cmp_internal(k, target) != std::cmp::Ordering::Greater);
        self.pos = i.checked_sub(1);
    }

    fn next(&mut self) {
        self.pos = self
            .pos
            .map(|p| p + 1)
            .filter(|&p| p < self.ov.entries.len());
    }

    fn prev(&mut self) {
        self.pos = self.pos.and_then(|p| p.checked_sub(1));
    }

    fn key(&self) -> &[u8] {
        &self.ov.entries[self.pos.expect("REQUIRES: valid()")].0
    }

    fn value(&self) -> &[u8] {
        &self.ov.entries[self.pos.expect("REQUIRES: valid()")].1
    }

    fn take_error(&mut self) -> Option<Error> {
        None
    }
}

/// A key range of one column family that a read covered: every key in it that existed at
/// the read's seqno was seen (or skipped as deleted).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ScanRange {
    pub(crate) cf: u32,
    pub(crate) lo: Bound<Vec<u8>>,
    pub(crate) hi: Bound<Vec<u8>>,
}

/// The ranges a transaction's iterators and cursors covered, shared with them: each read
/// widens its own entry as it moves, at every step (not when dropped), so a commit sees
/// everything read before it even while an iterator is still alive.
#[derive(Clone, Debug, Default)]
pub(crate) struct ScanLog(Arc<Mutex<Vec<ScanRange>>>);

impl ScanLog {
    /// Adds a range and returns its slot.
    pub(crate) fn push(&self, r: ScanRange) -> usize {
        let mut v = self.0.lock();
        v.push(r);
        v.len() - 1
    }

    /// Replaces the range in `slot`.
    pub(crate) fn set(&self, slot: usize, r: ScanRange) {
        self.0.lock()[slot] = r;
    }

    /// Moves one end of the range in `slot` (the high end if `forward`) to `to`, reusing
    /// its buffer: an iterator widens its range at every step.
    pub(crate) fn move_end(&self, slot: usize, forward: bool, to: Bound<&[u8]>) {
        let mut v = self.0.lock();
        let r = &mut v[slot];
        let end = if forward { &mut r.hi } else { &mut r.lo };
        match (end, to) {
            (Bound::Included(buf), Bound::Included(k))
            | (Bound::Excluded(buf), Bound::Excluded(k)) => {
                buf.clear();
                buf.extend_from_slice(k);
            }
            (end, to) => *end = to.map(<[u8]>::to_vec),
        }
    }

    /// Every range recorded so far.
    pub(crate) fn ranges(&self) -> Vec<ScanRange> {
        self.0.lock().clone()
    }
}
