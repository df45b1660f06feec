//! A table's index, decoded once when the table is opened ([`DecodedIndex`]), and a cursor
//! over it ([`IndexIter`]).
//!
//! The index block on disk (`docs/format/sstable.md`) is a block like any other: every entry
//! a restart point, each with three varints before its key. A seek binary-searches it, so
//! each of its ~log2(n) probes decoded three varints and checked the entry's bounds: about
//! 2,800 instructions of a 7,000-instruction seek (callgrind, `seekrandom` on 300K keys).
//! Decoded, the keys and block handles sit in two flat arrays with their end offsets, and a
//! probe is a slice and a comparison. Nothing on disk changes.
//!
//! Invariants: built only from a block that decoded without error, so every key is an
//! internal key the block held, in the block's (strictly increasing) order; offsets are
//! increasing and within their arrays.

use std::cmp::Ordering;
use std::sync::Arc;

use super::block::{Block, BlockIter};
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::cmp_internal;

/// The index entries of a table: the separator keys (internal keys) and the encoded handles
/// of their data blocks.
#[derive(Debug)]
pub(crate) struct DecodedIndex {
    keys: Vec<u8>,
    key_ends: Vec<u32>,
    values: Vec<u8>,
    value_ends: Vec<u32>,
}

impl DecodedIndex {
    /// Decodes every entry of `block`.
    ///
    /// # Errors
    ///
    /// `Corruption` if an entry does not decode.
    pub(crate) fn new(block: Arc<Block>) -> Result<DecodedIndex> {
        let mut it = BlockIter::new(block);
        let mut d = DecodedIndex {
            keys: Vec::new(),
            key_ends: Vec::new(),
            values: Vec::new(),
            value_ends: Vec::new(),
        };
        it.seek_to_first();
        while it.valid() {
            d.keys.extend_from_slice(it.key());
            d.key_ends.push(d.keys.len() as u32);
            d.values.extend_from_slice(it.value());
            d.value_ends.push(d.values.len() as u32);
            it.next();
        }
        if let Some(e) = it.take_error() {
            return Err(e);
        }
        Ok(d)
    }

    pub(crate) fn len(&self) -> usize {
        self.key_ends.len()
    }

    pub(crate) fn key(&self, i: usize) -> &[u8] {
        let start = if i == 0 {
            0
        } else {
            self.key_ends[i - 1] as usize
        };
        &self.keys[start..self.key_ends[i] as usize]
    }

    pub(crate) fn value(&self, i: usize) -> &[u8] {
        let start = if i == 0 {
            0
        } else {
            self.value_ends[i - 1] as usize
        };
        &self.values[start..self.value_ends[i] as usize]
    }

    /// The first entry whose key is `>= target` (`len()` if none).
    pub(crate) fn lower_bound(&self, target: &[u8]) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if cmp_internal(self.key(mid), target) == Ordering::Less {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Bytes the decoded index holds in memory.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.keys.capacity()
            + self.values.capacity()
            + 4 * (self.key_ends.len() + self.value_ends.len())
    }
}

/// A cursor over a [`DecodedIndex`]; it cannot fail (the index decoded when the table
/// opened).
#[derive(Debug)]
pub(crate) struct IndexIter {
    index: Arc<DecodedIndex>,
    /// The current entry, or `None` when invalid.
    pos: Option<usize>,
}

impl IndexIter {
    pub(crate) fn new(index: Arc<DecodedIndex>) -> IndexIter {
        IndexIter { index, pos: None }
    }

    fn at(&mut self, i: usize) {
        self.pos = (i < self.index.len()).then_some(i);
    }

    /// Whether the first entry `>= target` is the current one: `target` lies after the
    /// previous separator and at or before the current one. Then a seek would land here
    /// again, and its binary search can be skipped.
    pub(crate) fn covers(&self, target: &[u8]) -> bool {
        let Some(p) = self.pos else { return false };
        let at_or_before = cmp_internal(target, self.index.key(p)) != Ordering::Greater;
        let after_previous =
            p == 0 || cmp_internal(self.index.key(p - 1), target) == Ordering::Less;
        at_or_before && after_previous
    }
}

impl InternalIterator for IndexIter {
    fn valid(&self) -> bool {
        self.pos.is_some()
    }

    fn seek_to_first(&mut self) {
        self.at(0);
    }

    fn seek_to_last(&mut self) {
        self.pos = self.index.len().checked_sub(1);
    }

    fn seek(&mut self, target: &[u8]) {
        let i = self.index.lower_bound(target);
        self.at(i);
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        // The last entry <= target.
        let i = self.index.lower_bound(target);
        if i < self.index.len() && cmp_internal(self.index.key(i), target) == Ordering::Equal {
            self.pos = Some(i);
        } else {
            self.pos = i.checked_sub(1);
        }
    }

    fn next(&mut self) {
        if let Some(p) = self.pos {
            self.at(p + 1);
        }
    }

    fn prev(&mut self) {
        self.pos = self.pos.and_then(|p| p.checked_sub(1));
    }

    fn key(&self) -> &[u8] {
        self.index.key(self.pos.expect("REQUIRES: valid()"))
    }

    fn value(&self) -> &[u8] {
        self.index.value(self.pos.expect("REQUIRES: valid()"))
    }

    fn take_error(&mut self) -> Option<Error> {
        None
    }
}
