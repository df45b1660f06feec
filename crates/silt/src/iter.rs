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
pub(crate) struct MergingIter {
    children: Vec<Box<dyn InternalIterator>>,
    current: Option<usize>,
    forward: bool,
    error: Option<Error>,
}

impl MergingIter {
    pub(crate) fn new(children: Vec<Box<dyn InternalIterator>>) -> MergingIter {
        MergingIter {
            children,
            current: None,
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
        }
    }

    fn find_smallest(&mut self) {
        self.collect_errors();
        if self.error.is_some() {
            return;
        }
        let mut best: Option<usize> = None;
        for (i, c) in self.children.iter().enumerate() {
            if c.valid() {
                best = match best {
                    Some(b) if cmp_internal(c.key(), self.children[b].key()) != Ordering::Less => {
                        Some(b)
                    }
                    _ => Some(i),
                };
            }
        }
        self.current = best;
    }

    fn find_largest(&mut self) {
        self.collect_errors();
        if self.error.is_some() {
            return;
        }
        let mut best: Option<usize> = None;
        for (i, c) in self.children.iter().enumerate() {
            if c.valid() {
                best = match best {
                    Some(b)
                        if cmp_internal(c.key(), self.children[b].key()) != Ordering::Greater =>
                    {
                        Some(b)
                    }
                    _ => Some(i),
                };
            }
        }
        self.current = best;
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
        }
        self.children[cur].next();
        self.find_smallest();
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
        }
        self.children[cur].prev();
        self.find_largest();
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
