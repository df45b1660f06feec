//! Iterators over internal keys, and the merge that combines them into the user's view.
//!
//! [`InternalIterator`] is the cursor every source implements (memtable, table block,
//! table, level, merge): positioned on one entry or invalid; errors make it invalid and are
//! taken with [`InternalIterator::take_error`]. Positions are internal keys compared with
//! [`crate::key::cmp_internal`].

use crate::error::Error;

/// A bidirectional cursor over entries sorted by internal key.
pub(crate) trait InternalIterator: Send {
    /// Whether the cursor is on an entry.
    fn valid(&self) -> bool;
    /// Moves to the first entry.
    fn seek_to_first(&mut self);
    /// Moves to the last entry.
    fn seek_to_last(&mut self);
    /// Moves to the first entry `>= target` (internal order).
    fn seek(&mut self, target: &[u8]);
    /// Moves to the last entry `<= target` (internal order).
    fn seek_for_prev(&mut self, target: &[u8]);
    /// Moves to the next entry. REQUIRES: `valid()`.
    fn next(&mut self);
    /// Moves to the previous entry. REQUIRES: `valid()`.
    fn prev(&mut self);
    /// The internal key of the current entry. REQUIRES: `valid()`.
    fn key(&self) -> &[u8];
    /// The value of the current entry. REQUIRES: `valid()`.
    fn value(&self) -> &[u8];
    /// The error that made the cursor invalid, if one did (taken: a second call gives `None`).
    fn take_error(&mut self) -> Option<Error>;
}

use std::cmp::Ordering;

use crate::key::cmp_internal;

/// Merges sorted children into one sorted cursor (both directions).
///
/// The valid children are kept in `order`, best first in the direction of travel (smallest
/// key going forward, largest going back; among equal keys the lowest index, in both
/// directions). A step moves only the front child, so only it can be out of place: it goes
/// back into the order by comparing it with the children after it until one is better.
/// A step within one child's run (a memtable's or a table's entries) costs one comparison;
/// a step where two children alternate, as a walk over deletes and the values they hide
/// does, about two, where a scan of every child cost one or two per child. Seeks and turns
/// sort the order anew (insertion sort: an LSM read has few children).
pub(crate) struct MergingIter {
    children: Vec<Box<dyn InternalIterator>>,
    /// The valid children, best first in the present direction; the cursor is on the first.
    order: Vec<usize>,
    forward: bool,
    error: Option<Error>,
}

impl MergingIter {
    pub(crate) fn new(children: Vec<Box<dyn InternalIterator>>) -> MergingIter {
        MergingIter {
            order: Vec::with_capacity(children.len()),
            children,
            forward: true,
            error: None,
        }
    }

    /// The index of the child the merged cursor stands on (in the order given to `new`).
    #[inline]
    pub(crate) fn current_child(&self) -> Option<usize> {
        self.order.first().copied()
    }

    /// Whether child `a` comes strictly before child `b` in the present direction.
    #[inline]
    fn before(&self, a: usize, b: usize) -> bool {
        match cmp_internal(self.children[a].key(), self.children[b].key()) {
            Ordering::Equal => a < b,
            Ordering::Less => self.forward,
            Ordering::Greater => !self.forward,
        }
    }

    /// An invalid child's error, if it has one, ends the cursor.
    fn check_invalid(&mut self, i: usize) {
        if self.error.is_none() {
            self.error = self.children[i].take_error();
        }
        if self.error.is_some() {
            self.order.clear();
        }
    }

    /// Sorts every valid child into `order` after a seek or a turn; an error any child
    /// met ends the cursor.
    fn sort(&mut self) {
        self.order.clear();
        // An error not yet taken keeps the cursor ended, whatever a seek found since.
        if self.error.is_some() {
            return;
        }
        for i in 0..self.children.len() {
            if self.children[i].valid() {
                let mut pos = self.order.len();
                while pos > 0 && self.before(i, self.order[pos - 1]) {
                    pos -= 1;
                }
                self.order.insert(pos, i);
            } else {
                self.check_invalid(i);
                if self.error.is_some() {
                    return;
                }
            }
        }
    }

    /// After the front child moved one step in the present direction: puts it back where
    /// it belongs, or drops it if it ran out.
    #[inline]
    fn reposition_front(&mut self) {
        let cur = self.order[0];
        if !self.children[cur].valid() {
            self.order.remove(0);
            self.check_invalid(cur);
            return;
        }
        let mut pos = 1;
        while pos < self.order.len() && self.before(self.order[pos], cur) {
            pos += 1;
        }
        if pos > 1 {
            self.order.copy_within(1..pos, 0);
            self.order[pos - 1] = cur;
        }
    }
}

impl InternalIterator for MergingIter {
    fn valid(&self) -> bool {
        !self.order.is_empty()
    }

    fn seek_to_first(&mut self) {
        for c in &mut self.children {
            c.seek_to_first();
        }
        self.forward = true;
        self.sort();
    }

    fn seek_to_last(&mut self) {
        for c in &mut self.children {
            c.seek_to_last();
        }
        self.forward = false;
        self.sort();
    }

    fn seek(&mut self, target: &[u8]) {
        for c in &mut self.children {
            c.seek(target);
        }
        self.forward = true;
        self.sort();
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        for c in &mut self.children {
            c.seek_for_prev(target);
        }
        self.forward = false;
        self.sort();
    }

    fn next(&mut self) {
        let Some(&cur) = self.order.first() else {
            return;
        };
        if !self.forward {
            // Put every other child on its first entry after the current key.
            let k = self.children[cur].key().to_vec();
            for (i, c) in self.children.iter_mut().enumerate() {
                if i != cur {
                    c.seek(&k);
                    if c.valid() && cmp_internal(c.key(), &k) == Ordering::Equal {
                        c.next();
                    }
                }
            }
            self.forward = true;
            self.children[cur].next();
            self.sort();
            return;
        }
        self.children[cur].next();
        self.reposition_front();
    }

    fn prev(&mut self) {
        let Some(&cur) = self.order.first() else {
            return;
        };
        if self.forward {
            let k = self.children[cur].key().to_vec();
            for (i, c) in self.children.iter_mut().enumerate() {
                if i != cur {
                    c.seek_for_prev(&k);
                    if c.valid() && cmp_internal(c.key(), &k) == Ordering::Equal {
                        c.prev();
                    }
                }
            }
            self.forward = false;
            self.children[cur].prev();
            self.sort();
            return;
        }
        self.children[cur].prev();
        self.reposition_front();
    }

    fn key(&self) -> &[u8] {
        match self.order.first() {
            Some(&i) => self.children[i].key(),
            None => &[],
        }
    }

    fn value(&self) -> &[u8] {
        match self.order.first() {
            Some(&i) => self.children[i].value(),
            None => &[],
        }
    }

    fn take_error(&mut self) -> Option<Error> {
        if self.error.is_none() {
            for c in &mut self.children {
                if let Some(e) = c.take_error() {
                    self.error = Some(e);
                    break;
                }
            }
        }
        if self.error.is_some() {
            self.order.clear();
        }
        self.error.take()
    }
}

/// A cursor that ends before the first entry whose user key is at or past `hi`: one
/// sub-compaction's share of a merge (`db/compact.rs`). Forward only is what a merge needs,
/// but both directions stay within the bound.
pub(crate) struct UpperBounded<'a> {
    inner: &'a mut dyn InternalIterator,
    hi: Option<Vec<u8>>,
}

impl<'a> UpperBounded<'a> {
    /// `inner` cut at user key `hi` (exclusive; `None`: not cut).
    pub(crate) fn new(inner: &'a mut dyn InternalIterator, hi: Option<Vec<u8>>) -> Self {
        UpperBounded { inner, hi }
    }
}

impl InternalIterator for UpperBounded<'_> {
    fn valid(&self) -> bool {
        self.inner.valid()
            && self
                .hi
                .as_deref()
                .is_none_or(|hi| crate::key::user_key(self.inner.key()) < hi)
    }
    fn seek_to_first(&mut self) {
        self.inner.seek_to_first();
    }
    fn seek_to_last(&mut self) {
        match &self.hi {
            Some(hi) => {
                let t = crate::key::seek_key(hi, crate::key::MAX_SEQNO);
                self.inner.seek_for_prev(&t);
                while self.inner.valid() && crate::key::user_key(self.inner.key()) >= hi.as_slice()
                {
                    self.inner.prev();
                }
            }
            None => self.inner.seek_to_last(),
        }
    }
    fn seek(&mut self, target: &[u8]) {
        self.inner.seek(target);
    }
    fn seek_for_prev(&mut self, target: &[u8]) {
        self.inner.seek_for_prev(target);
    }
    fn next(&mut self) {
        self.inner.next();
    }
    fn prev(&mut self) {
        self.inner.prev();
    }
    fn key(&self) -> &[u8] {
        self.inner.key()
    }
    fn value(&self) -> &[u8] {
        self.inner.value()
    }
    fn take_error(&mut self) -> Option<Error> {
        self.inner.take_error()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{make_internal, Kind};
    use proptest::prelude::*;

    /// A child over a sorted vector of internal keys (no values).
    struct VecIter {
        keys: Vec<Vec<u8>>,
        pos: Option<usize>,
    }

    impl VecIter {
        fn at(&mut self, p: Option<usize>) {
            self.pos = p.filter(|&i| i < self.keys.len());
        }
    }

    impl InternalIterator for VecIter {
        fn valid(&self) -> bool {
            self.pos.is_some()
        }
        fn seek_to_first(&mut self) {
            self.at(Some(0));
        }
        fn seek_to_last(&mut self) {
            self.at(self.keys.len().checked_sub(1));
        }
        fn seek(&mut self, t: &[u8]) {
            let i = self
                .keys
                .partition_point(|k| cmp_internal(k, t) == Ordering::Less);
            self.at(Some(i));
        }
        fn seek_for_prev(&mut self, t: &[u8]) {
            let i = self
                .keys
                .partition_point(|k| cmp_internal(k, t) != Ordering::Greater);
            self.at(i.checked_sub(1));
        }
        fn next(&mut self) {
            let p = self.pos.expect("valid");
            self.at(Some(p + 1));
        }
        fn prev(&mut self) {
            let p = self.pos.expect("valid");
            self.at(p.checked_sub(1));
        }
        fn key(&self) -> &[u8] {
            &self.keys[self.pos.expect("valid")]
        }
        fn value(&self) -> &[u8] {
            &[]
        }
        fn take_error(&mut self) -> Option<Error> {
            None
        }
    }

    fn ikey(user: u8, seqno: u64) -> Vec<u8> {
        make_internal(&[user], seqno, Kind::Put)
    }

    #[derive(Debug, Clone)]
    enum Op {
        Next,
        Prev,
        Seek(u8, u64),
        SeekForPrev(u8, u64),
        First,
        Last,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => Just(Op::Next),
            4 => Just(Op::Prev),
            1 => (0u8..40, 0u64..8).prop_map(|(k, s)| Op::Seek(k, s)),
            1 => (0u8..40, 0u64..8).prop_map(|(k, s)| Op::SeekForPrev(k, s)),
            1 => Just(Op::First),
            1 => Just(Op::Last),
        ]
    }

    proptest! {
        /// With the same internal key in several children (a write found in two places:
        /// repair, a flush racing a read), a walk in one direction gives each copy in turn,
        /// the lowest child first — the step that puts the moved child back in order never
        /// lets a later child's equal key jump ahead.
        #[test]
        fn equal_keys_come_lowest_child_first_in_both_directions(
            entries in proptest::collection::btree_set((0u8..12, 0u64..3), 0..30),
            owners in proptest::collection::vec(1u8..32, 30),
            backward in any::<bool>(),
        ) {
            let mut model: Vec<(Vec<u8>, usize)> = Vec::new();
            let mut per_child = vec![Vec::new(); 5];
            let mut keys: Vec<Vec<u8>> = entries.iter().map(|&(k, s)| ikey(k, s)).collect();
            keys.sort_by(|a, b| cmp_internal(a, b));
            for (i, k) in keys.iter().enumerate() {
                for (c, child) in per_child.iter_mut().enumerate() {
                    if owners[i] & (1 << c) != 0 {
                        child.push(k.clone());
                        model.push((k.clone(), c));
                    }
                }
            }
            if backward {
                // Keys descending, but equal keys still lowest child first.
                model.sort_by(|a, b| cmp_internal(&b.0, &a.0).then(a.1.cmp(&b.1)));
            }
            let children: Vec<Box<dyn InternalIterator>> = per_child
                .into_iter()
                .map(|keys| Box::new(VecIter { keys, pos: None }) as Box<dyn InternalIterator>)
                .collect();
            let mut m = MergingIter::new(children);
            if backward { m.seek_to_last() } else { m.seek_to_first() }
            for (k, c) in &model {
                prop_assert!(m.valid());
                prop_assert_eq!(m.key(), k.as_slice());
                prop_assert_eq!(m.current_child(), Some(*c));
                if backward { m.prev() } else { m.next() }
            }
            prop_assert!(!m.valid());
        }

        /// The merge walks the union of its children in internal-key order, in both
        /// directions and across direction changes and seeks, however few comparisons a
        /// step makes.
        #[test]
        fn merge_matches_a_sorted_union(
            entries in proptest::collection::btree_set((0u8..40, 0u64..8), 0..80),
            owners in proptest::collection::vec(0usize..5, 80),
            ops in proptest::collection::vec(op(), 1..120),
        ) {
            let mut model: Vec<Vec<u8>> = entries.iter().map(|&(k, s)| ikey(k, s)).collect();
            model.sort_by(|a, b| cmp_internal(a, b));
            let mut per_child = vec![Vec::new(); 5];
            for (i, k) in model.iter().enumerate() {
                per_child[owners[i]].push(k.clone());
            }
            let children: Vec<Box<dyn InternalIterator>> = per_child
                .into_iter()
                .map(|keys| Box::new(VecIter { keys, pos: None }) as Box<dyn InternalIterator>)
                .collect();
            let mut m = MergingIter::new(children);
            let mut pos: Option<usize> = None;
            for o in ops {
                match o {
                    Op::Next => {
                        if pos.is_none() { continue; }
                        m.next();
                        pos = pos.map(|p| p + 1).filter(|&p| p < model.len());
                    }
                    Op::Prev => {
                        if pos.is_none() { continue; }
                        m.prev();
                        pos = pos.and_then(|p| p.checked_sub(1));
                    }
                    Op::Seek(k, s) => {
                        let t = ikey(k, s);
                        m.seek(&t);
                        let i = model.partition_point(|x| cmp_internal(x, &t) == Ordering::Less);
                        pos = Some(i).filter(|&p| p < model.len());
                    }
                    Op::SeekForPrev(k, s) => {
                        let t = ikey(k, s);
                        m.seek_for_prev(&t);
                        let i = model.partition_point(|x| cmp_internal(x, &t) != Ordering::Greater);
                        pos = i.checked_sub(1);
                    }
                    Op::First => {
                        m.seek_to_first();
                        pos = Some(0).filter(|_| !model.is_empty());
                    }
                    Op::Last => {
                        m.seek_to_last();
                        pos = model.len().checked_sub(1);
                    }
                }
                prop_assert_eq!(m.valid(), pos.is_some());
                if let Some(p) = pos {
                    prop_assert_eq!(m.key(), model[p].as_slice());
                }
            }
        }
    }

    /// A child over `keys` that fails, instead of moving, when a step would take it to
    /// index `fail_at`: it turns invalid with an error, as a table's cursor does on a bad
    /// block.
    struct FailingIter {
        inner: VecIter,
        fail_at: usize,
        error: Option<Error>,
    }

    impl InternalIterator for FailingIter {
        fn valid(&self) -> bool {
            self.inner.valid()
        }
        fn seek_to_first(&mut self) {
            self.inner.seek_to_first();
        }
        fn seek_to_last(&mut self) {
            self.inner.seek_to_last();
        }
        fn seek(&mut self, t: &[u8]) {
            self.inner.seek(t);
        }
        fn seek_for_prev(&mut self, t: &[u8]) {
            self.inner.seek_for_prev(t);
        }
        fn next(&mut self) {
            self.inner.next();
            if self.inner.pos == Some(self.fail_at) {
                self.inner.pos = None;
                self.error = Some(Error::Corruption {
                    file: "t".into(),
                    offset: 0,
                    reason: "bad block".into(),
                });
            }
        }
        fn prev(&mut self) {
            self.inner.prev();
        }
        fn key(&self) -> &[u8] {
            self.inner.key()
        }
        fn value(&self) -> &[u8] {
            &[]
        }
        fn take_error(&mut self) -> Option<Error> {
            self.error.take()
        }
    }

    /// A child's error ends the merged cursor where the child failed: no entry of the
    /// other children is given past it as if the failed child had simply run out, and no
    /// seek revives the cursor before the error is taken.
    #[test]
    fn a_child_error_ends_the_merge_at_once() {
        for fail_at in 1..6 {
            let failing = FailingIter {
                inner: VecIter {
                    keys: (0..6).map(|k| ikey(2 * k, 1)).collect(),
                    pos: None,
                },
                fail_at,
                error: None,
            };
            let other = VecIter {
                keys: (0..6).map(|k| ikey(2 * k + 1, 1)).collect(),
                pos: None,
            };
            let mut m = MergingIter::new(vec![Box::new(other), Box::new(failing)]);
            m.seek_to_first();
            let mut seen = Vec::new();
            while m.valid() {
                seen.push(m.key()[0]);
                m.next();
            }
            // The failing child gives 0, 2, .. 2*(fail_at-1), and its step from there fails:
            // the merge ends after that key, before the other child's next one.
            let want: Vec<u8> = (0..2 * fail_at as u8 - 1).collect();
            assert_eq!(seen, want, "fail_at {fail_at}");
            // Until the error is taken, a seek does not bring the cursor back.
            m.seek_to_first();
            assert!(
                !m.valid(),
                "fail_at {fail_at}: valid again before its error was taken"
            );
            assert!(
                matches!(m.take_error(), Some(Error::Corruption { .. })),
                "fail_at {fail_at}"
            );
            assert!(m.take_error().is_none());
        }
    }
}
