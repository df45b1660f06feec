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
/// With the few children an LSM read has (memtables, level-0 tables, one per deeper level)
/// a linear scan for the smallest or largest child is as fast as a heap and simpler to get
/// right when the direction changes.
///
/// A step usually moves within one child (a run of a memtable's or a table's entries), so
/// the scan also keeps the runner-up: the best of the children the cursor is not on. While
/// the moved child still sorts strictly before the runner-up it stays current, and the step
/// costs one comparison instead of a scan of every child. This holds because only the
/// current child moves in a step: the others, and so the runner-up among them, are where
/// the last scan found them.
pub(crate) struct MergingIter {
    children: Vec<Box<dyn InternalIterator>>,
    current: Option<usize>,
    /// The best valid child other than `current` in the present direction (smallest going
    /// forward, largest going back), as of the last scan; `None` when there is none.
    runner_up: Option<usize>,
    forward: bool,
    error: Option<Error>,
}

impl MergingIter {
    pub(crate) fn new(children: Vec<Box<dyn InternalIterator>>) -> MergingIter {
        MergingIter {
            children,
            current: None,
            runner_up: None,
            forward: true,
            error: None,
        }
    }

    /// The index of the child the merged cursor stands on (in the order given to `new`).
    #[inline]
    pub(crate) fn current_child(&self) -> Option<usize> {
        self.current
    }

    fn collect_errors(&mut self) {
        if self.error.is_none() {
            for c in &mut self.children {
                if let Some(e) = c.take_error() {
                    self.error = Some(e);
                    break;
                }
            }
        }
        if self.error.is_some() {
            self.current = None;
            self.runner_up = None;
        }
    }

    /// Sets `current` and `runner_up` to the best and second-best valid children, where
    /// `better(a, b)` says key `a` comes strictly before key `b` in the direction of travel.
    /// Among equal keys the lowest index wins, as it always has.
    fn find_best(&mut self, better: Ordering) {
        self.collect_errors();
        if self.error.is_some() {
            return;
        }
        let mut best: Option<usize> = None;
        let mut second: Option<usize> = None;
        for (i, c) in self.children.iter().enumerate() {
            if !c.valid() {
                continue;
            }
            match best {
                None => best = Some(i),
                Some(b) => {
                    if cmp_internal(c.key(), self.children[b].key()) == better {
                        second = best;
                        best = Some(i);
                    } else if second
                        .is_none_or(|s| cmp_internal(c.key(), self.children[s].key()) == better)
                    {
                        second = Some(i);
                    }
                }
            }
        }
        self.current = best;
        self.runner_up = second;
    }

    fn find_smallest(&mut self) {
        self.find_best(Ordering::Less);
    }

    fn find_largest(&mut self) {
        self.find_best(Ordering::Greater);
    }

    /// After the current child `cur` moved one step in the present direction: whether it is
    /// still strictly better than the runner-up (or is the only valid child), so that
    /// `current` and `runner_up` both still hold. An invalid child (its end, or an error to
    /// collect) always goes back to the scan.
    #[inline]
    fn still_best(&self, cur: usize, better: Ordering) -> bool {
        let c = &self.children[cur];
        if !c.valid() {
            return false;
        }
        match self.runner_up {
            None => true,
            Some(r) => cmp_internal(c.key(), self.children[r].key()) == better,
        }
    }
}

impl InternalIterator for MergingIter {
    fn valid(&self) -> bool {
        self.current.is_some()
    }

    fn seek_to_first(&mut self) {
        for c in &mut self.children {
            c.seek_to_first();
        }
        self.forward = true;
        self.find_smallest();
    }

    fn seek_to_last(&mut self) {
        for c in &mut self.children {
            c.seek_to_last();
        }
        self.forward = false;
        self.find_largest();
    }

    fn seek(&mut self, target: &[u8]) {
        for c in &mut self.children {
            c.seek(target);
        }
        self.forward = true;
        self.find_smallest();
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        for c in &mut self.children {
            c.seek_for_prev(target);
        }
        self.forward = false;
        self.find_largest();
    }

    fn next(&mut self) {
        let Some(cur) = self.current else { return };
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
            self.find_smallest();
            return;
        }
        self.children[cur].next();
        if !self.still_best(cur, Ordering::Less) {
            self.find_smallest();
        }
    }

    fn prev(&mut self) {
        let Some(cur) = self.current else { return };
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
            self.find_largest();
            return;
        }
        self.children[cur].prev();
        if !self.still_best(cur, Ordering::Greater) {
            self.find_largest();
        }
    }

    fn key(&self) -> &[u8] {
        match self.current {
            Some(i) => self.children[i].key(),
            None => &[],
        }
    }

    fn value(&self) -> &[u8] {
        match self.current {
            Some(i) => self.children[i].value(),
            None => &[],
        }
    }

    fn take_error(&mut self) -> Option<Error> {
        self.collect_errors();
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
        /// the lowest child first — the runner-up shortcut never lets a later child's
        /// equal key jump ahead.
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
        /// directions and across direction changes and seeks, whatever the runner-up
        /// shortcut skips.
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
}
