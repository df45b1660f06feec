//! [`LevelIter`]: one cursor over a whole level >= 1 of a version (its tables are disjoint
//! and sorted), opening each table on demand through its handle.

use std::cmp::Ordering;
use std::sync::Arc;

use super::TableHandle;
use crate::error::Error;
use crate::iter::InternalIterator;
use crate::key::cmp_internal;
use crate::sstable::TableIter;

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
