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
use std::sync::Arc;

use crate::key::cmp_internal;
use crate::sstable::TableIter;
use crate::version::TableHandle;

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

/// Concatenates the tables of one level >= 1 (disjoint, sorted), opening each on demand.
pub(crate) struct LevelIter {
    tables: Vec<Arc<TableHandle>>,
    index: usize,
    iter: Option<TableIter>,
    fill_cache: bool,
    error: Option<Error>,
}

impl LevelIter {
    pub(crate) fn new(tables: Vec<Arc<TableHandle>>, fill_cache: bool) -> LevelIter {
        LevelIter {
            tables,
            index: 0,
            iter: None,
            fill_cache,
            error: None,
        }
    }

    fn open(&mut self, index: usize) -> bool {
        self.index = index;
        self.iter = None;
        let Some(h) = self.tables.get(index) else {
            return false;
        };
        match h.table() {
            Ok(t) => {
                self.iter = Some(TableIter::new_with(&t, self.fill_cache));
                true
            }
            Err(e) => {
                self.error = Some(e);
                false
            }
        }
    }

    fn check(&mut self) {
        if let Some(it) = &mut self.iter {
            if let Some(e) = it.take_error() {
                self.error = Some(e);
                self.iter = None;
            }
        }
    }

    /// Moves forward over exhausted tables.
    fn skip_forward(&mut self) {
        loop {
            self.check();
            match &self.iter {
                Some(it) if it.valid() => return,
                Some(_) => {
                    if !self.open(self.index + 1) {
                        self.iter = None;
                        return;
                    }
                    if let Some(it) = &mut self.iter {
                        it.seek_to_first();
                    }
                }
                None => return,
            }
        }
    }

    fn skip_backward(&mut self) {
        loop {
            self.check();
            match &self.iter {
                Some(it) if it.valid() => return,
                Some(_) => {
                    if self.index == 0 || !self.open(self.index - 1) {
                        self.iter = None;
                        return;
                    }
                    if let Some(it) = &mut self.iter {
                        it.seek_to_last();
                    }
                }
                None => return,
            }
        }
    }
}

impl InternalIterator for LevelIter {
    fn valid(&self) -> bool {
        self.iter.as_ref().is_some_and(|i| i.valid())
    }

    fn seek_to_first(&mut self) {
        if self.open(0) {
            if let Some(it) = &mut self.iter {
                it.seek_to_first();
            }
        }
        self.skip_forward();
    }

    fn seek_to_last(&mut self) {
        if !self.tables.is_empty() && self.open(self.tables.len() - 1) {
            if let Some(it) = &mut self.iter {
                it.seek_to_last();
            }
        }
        self.skip_backward();
    }

    fn seek(&mut self, target: &[u8]) {
        let i = self
            .tables
            .partition_point(|t| cmp_internal(&t.meta.largest, target) == Ordering::Less);
        if self.open(i) {
            if let Some(it) = &mut self.iter {
                it.seek(target);
            }
        }
        self.skip_forward();
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        // The last table whose smallest key is <= target.
        let i = self
            .tables
            .partition_point(|t| cmp_internal(&t.meta.smallest, target) != Ordering::Greater);
        if i == 0 {
            self.iter = None;
            return;
        }
        if self.open(i - 1) {
            if let Some(it) = &mut self.iter {
                it.seek_for_prev(target);
            }
        }
        self.skip_backward();
    }

    fn next(&mut self) {
        if let Some(it) = &mut self.iter {
            it.next();
        }
        self.skip_forward();
    }

    fn prev(&mut self) {
        if let Some(it) = &mut self.iter {
            it.prev();
        }
        self.skip_backward();
    }

    fn key(&self) -> &[u8] {
        self.iter.as_ref().map(|i| i.key()).unwrap_or(&[])
    }

    fn value(&self) -> &[u8] {
        self.iter.as_ref().map(|i| i.value()).unwrap_or(&[])
    }

    fn take_error(&mut self) -> Option<Error> {
        self.check();
        self.error.take()
    }
}
