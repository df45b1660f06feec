//! Blocks: sorted runs of key/value entries with prefix-compressed keys and restart points.
//! Data blocks and the index block share this layout (`docs/format/sstable.md`, "Block").
//!
//! ```text
//! entry    = shared varint | unshared varint | value_len varint | key[shared..] | value
//! block    = entry* | restart offset u32 LE * n | n u32 LE
//! ```
//!
//! A restart entry stores its whole key (`shared == 0`); restart offsets are strictly
//! increasing, the first is 0, and all lie before the restart array.
//!
//! Invariants: [`Block::new`] checks the restart array, so a [`BlockIter`] may trust it.
//! Entries are checked as they are decoded: a length that points outside the entry area, a
//! `shared` longer than the previous key, or a restart entry with `shared != 0` makes the
//! iterator invalid with `Error::Corruption`. Every decoded entry advances by at least three
//! bytes, so no loop over a block can spin forever.

use std::cmp::Ordering;
use std::path::Path;
use std::sync::Arc;

use super::format::{get_varint32, put_varint};
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::cmp_internal;

/// Builds one block. Keys must be added in increasing order (checked by the caller).
#[derive(Debug)]
pub(crate) struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    /// Entries since the last restart point.
    counter: usize,
    restart_interval: usize,
    last_key: Vec<u8>,
    entries: usize,
}

impl BlockBuilder {
    /// A builder that starts a restart point every `restart_interval` entries (at least 1).
    pub(crate) fn new(restart_interval: usize) -> BlockBuilder {
        BlockBuilder {
            buf: Vec::new(),
            restarts: Vec::new(),
            counter: 0,
            restart_interval: restart_interval.max(1),
            last_key: Vec::new(),
            entries: 0,
        }
    }

    /// Appends an entry. REQUIRES: `key` sorts after the previous key of this block.
    pub(crate) fn add(&mut self, key: &[u8], value: &[u8]) {
        let shared = if self.counter == 0 || self.counter >= self.restart_interval {
            self.restarts.push(self.buf.len() as u32);
            self.counter = 0;
            0
        } else {
            self.last_key
                .iter()
                .zip(key)
                .take_while(|(a, b)| a == b)
                .count()
        };
        put_varint(&mut self.buf, shared as u64);
        put_varint(&mut self.buf, (key.len() - shared) as u64);
        put_varint(&mut self.buf, value.len() as u64);
        self.buf.extend_from_slice(&key[shared..]);
        self.buf.extend_from_slice(value);
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(&key[shared..]);
        self.counter += 1;
        self.entries += 1;
    }

    /// The size of the block if it were finished now.
    pub(crate) fn estimated_size_bytes(&self) -> usize {
        self.buf.len() + 4 * self.restarts.len() + 4
    }

    /// Whether no entry was added since the last reset.
    pub(crate) fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// Appends the restart array and returns the finished block; call
    /// [`BlockBuilder::reset`] before adding again.
    pub(crate) fn finish(&mut self) -> &[u8] {
        for r in &self.restarts {
            self.buf.extend_from_slice(&r.to_le_bytes());
        }
        self.buf
            .extend_from_slice(&(self.restarts.len() as u32).to_le_bytes());
        &self.buf
    }

    /// Empties the builder, keeping its allocations.
    pub(crate) fn reset(&mut self) {
        self.buf.clear();
        self.restarts.clear();
        self.counter = 0;
        self.last_key.clear();
        self.entries = 0;
    }
}

/// A decoded block whose restart array has been checked.
#[derive(Debug)]
pub(crate) struct Block {
    data: Vec<u8>,
    /// Where the restart array starts: the end of the entries.
    restarts_offset: usize,
    num_restarts: usize,
    /// The table file and the block's offset in it, for errors.
    file: Arc<Path>,
    offset: u64,
}

impl Block {
    /// Checks the restart array of `data` (a decompressed block) and wraps it. `file` and
    /// `offset` say where the block came from, for errors.
    pub(crate) fn new(data: Vec<u8>, file: Arc<Path>, offset: u64) -> Result<Block> {
        let len = data.len();
        let n = match data.get(len.wrapping_sub(4)..) {
            Some(t) if len >= 4 => u32::from_le_bytes([t[0], t[1], t[2], t[3]]) as usize,
            _ => {
                return Err(Error::corruption(
                    &*file,
                    offset,
                    format!("block of {len} bytes is too short"),
                ))
            }
        };
        if n > (len - 4) / 4 {
            return Err(Error::corruption(
                &*file,
                offset,
                format!("block of {len} bytes claims {n} restart points"),
            ));
        }
        let block = Block {
            data,
            restarts_offset: len - 4 - 4 * n,
            num_restarts: n,
            file,
            offset,
        };
        block.check_restarts()?;
        Ok(block)
    }

    fn check_restarts(&self) -> Result<()> {
        let end = self.restarts_offset;
        if self.num_restarts == 0 {
            if end != 0 {
                return Err(self.corruption("block has entries but no restart point".into()));
            }
            return Ok(());
        }
        let mut prev: Option<usize> = None;
        for i in 0..self.num_restarts {
            let r = self.restart(i);
            let ok = match prev {
                None => r == 0,
                Some(p) => r > p,
            };
            if !ok || r >= end {
                return Err(self.corruption(format!(
                    "restart point {i} at {r} is out of order or outside the entries \
                     (which end at {end})"
                )));
            }
            prev = Some(r);
        }
        Ok(())
    }

    /// The restart offset `i`. REQUIRES: `i < num_restarts`.
    #[inline]
    fn restart(&self, i: usize) -> usize {
        let p = self.restarts_offset + 4 * i;
        u32::from_le_bytes([
            self.data[p],
            self.data[p + 1],
            self.data[p + 2],
            self.data[p + 3],
        ]) as usize
    }

    /// Bytes held (for the cache's weight).
    pub(crate) fn size_bytes(&self) -> usize {
        self.data.len()
    }

    /// The block's offset in its file.
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// Whether the block holds no entry.
    pub(crate) fn is_empty(&self) -> bool {
        self.num_restarts == 0
    }

    fn corruption(&self, reason: String) -> Error {
        Error::corruption(&*self.file, self.offset, reason)
    }
}

/// The decoded header of an entry.
struct EntryHeader {
    shared: usize,
    unshared: usize,
    value_len: usize,
    /// Offset of the key delta.
    body: usize,
}

/// A cursor over one block; owns an `Arc` of it.
#[derive(Debug)]
pub(crate) struct BlockIter {
    block: Arc<Block>,
    /// Offset of the current entry; meaningless when `!valid`.
    cur: usize,
    /// Offset just past the current entry.
    next: usize,
    /// The restart region that holds `cur`.
    restart_idx: usize,
    key: Vec<u8>,
    value_start: usize,
    value_end: usize,
    valid: bool,
    err: Option<Error>,
}

impl BlockIter {
    /// A cursor over `block`, not positioned yet.
    pub(crate) fn new(block: Arc<Block>) -> BlockIter {
        BlockIter {
            block,
            cur: 0,
            next: 0,
            restart_idx: 0,
            key: Vec::new(),
            value_start: 0,
            value_end: 0,
            valid: false,
            err: None,
        }
    }

    /// The block this cursor walks.
    pub(crate) fn block(&self) -> &Arc<Block> {
        &self.block
    }

    fn fail(&mut self, reason: String) {
        self.valid = false;
        if self.err.is_none() {
            self.err = Some(self.block.corruption(reason));
        }
    }

    fn header(&self, at: usize) -> Result<EntryHeader, String> {
        let data = &self.block.data[..self.block.restarts_offset];
        let mut pos = at;
        let bad = || format!("entry at {at} has a truncated header");
        let shared = get_varint32(data, &mut pos).ok_or_else(bad)? as usize;
        let unshared = get_varint32(data, &mut pos).ok_or_else(bad)? as usize;
        let value_len = get_varint32(data, &mut pos).ok_or_else(bad)? as usize;
        let end = pos
            .checked_add(unshared)
            .and_then(|e| e.checked_add(value_len));
        match end {
            Some(e) if e <= data.len() => Ok(EntryHeader {
                shared,
                unshared,
                value_len,
                body: pos,
            }),
            _ => Err(format!(
                "entry at {at} (key {unshared} + value {value_len} bytes) runs past the \
                 entries' end {}",
                data.len()
            )),
        }
    }

    /// Decodes the entry at `self.next`, building on `self.key`. Returns false at the end
    /// of the block or on corruption (then `err` is set).
    fn parse_next(&mut self) -> bool {
        let at = self.next;
        if at >= self.block.restarts_offset {
            self.valid = false;
            return false;
        }
        let h = match self.header(at) {
            Ok(h) => h,
            Err(reason) => {
                self.fail(reason);
                return false;
            }
        };
        if h.shared > self.key.len() {
            self.fail(format!(
                "entry at {at} shares {} bytes with a previous key of {}",
                h.shared,
                self.key.len()
            ));
            return false;
        }
        self.key.truncate(h.shared);
        self.key
            .extend_from_slice(&self.block.data[h.body..h.body + h.unshared]);
        self.cur = at;
        self.value_start = h.body + h.unshared;
        self.value_end = self.value_start + h.value_len;
        self.next = self.value_end;
        while self.restart_idx + 1 < self.block.num_restarts
            && self.block.restart(self.restart_idx + 1) <= self.cur
        {
            self.restart_idx += 1;
        }
        self.valid = true;
        true
    }

    /// Places the cursor before the entry at restart point `i`.
    fn seek_restart(&mut self, i: usize) {
        self.key.clear();
        self.restart_idx = i;
        self.next = self.block.restart(i);
    }

    /// The whole key stored at restart point `i` (which must have `shared == 0`).
    fn restart_key(&self, i: usize) -> Result<&[u8], String> {
        let at = self.block.restart(i);
        let h = self.header(at)?;
        if h.shared != 0 {
            return Err(format!("restart entry at {at} shares {} bytes", h.shared));
        }
        Ok(&self.block.data[h.body..h.body + h.unshared])
    }

    fn reset_error_state(&mut self) {
        self.valid = false;
        self.err = None;
    }
}

impl InternalIterator for BlockIter {
    fn valid(&self) -> bool {
        self.valid
    }

    fn seek_to_first(&mut self) {
        self.reset_error_state();
        if self.block.is_empty() {
            return;
        }
        self.seek_restart(0);
        self.parse_next();
    }

    fn seek_to_last(&mut self) {
        self.reset_error_state();
        if self.block.is_empty() {
            return;
        }
        self.seek_restart(self.block.num_restarts - 1);
        while self.parse_next() && self.next < self.block.restarts_offset {}
    }

    fn seek(&mut self, target: &[u8]) {
        self.reset_error_state();
        if self.block.is_empty() {
            return;
        }
        // The last restart point whose key is < target (or 0).
        let (mut left, mut right) = (0usize, self.block.num_restarts - 1);
        while left < right {
            let mid = left + (right - left).div_ceil(2);
            match self.restart_key(mid) {
                Ok(k) => {
                    if cmp_internal(k, target) == Ordering::Less {
                        left = mid;
                    } else {
                        right = mid - 1;
                    }
                }
                Err(reason) => {
                    self.fail(reason);
                    return;
                }
            }
        }
        self.seek_restart(left);
        while self.parse_next() {
            if cmp_internal(&self.key, target) != Ordering::Less {
                return;
            }
        }
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        self.seek(target);
        if self.err.is_some() {
            return;
        }
        if !self.valid {
            self.seek_to_last();
        } else if cmp_internal(&self.key, target) == Ordering::Greater {
            self.prev();
        }
    }

    fn next(&mut self) {
        debug_assert!(self.valid);
        self.parse_next();
    }

    fn prev(&mut self) {
        debug_assert!(self.valid);
        let original = self.cur;
        if original == 0 {
            self.valid = false;
            return;
        }
        let mut r = self.restart_idx;
        while self.block.restart(r) >= original {
            if r == 0 {
                self.valid = false;
                return;
            }
            r -= 1;
        }
        self.seek_restart(r);
        loop {
            if !self.parse_next() {
                if self.err.is_none() {
                    self.fail(format!("no entry ends at {original} while stepping back"));
                }
                return;
            }
            match self.next.cmp(&original) {
                Ordering::Less => {}
                Ordering::Equal => return,
                Ordering::Greater => {
                    self.fail(format!("entries overlap the entry at {original}"));
                    return;
                }
            }
        }
    }

    fn key(&self) -> &[u8] {
        &self.key
    }

    fn value(&self) -> &[u8] {
        &self.block.data[self.value_start..self.value_end]
    }

    fn take_error(&mut self) -> Option<Error> {
        self.err.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{make_internal, Kind};
    use proptest::prelude::*;

    fn path() -> Arc<Path> {
        Arc::from(Path::new("test.sst"))
    }

    fn build(entries: &[(Vec<u8>, Vec<u8>)], interval: usize) -> Arc<Block> {
        let mut b = BlockBuilder::new(interval);
        for (k, v) in entries {
            b.add(k, v);
        }
        let data = b.finish().to_vec();
        Arc::new(Block::new(data, path(), 0).unwrap())
    }

    fn entries(n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        (0..n)
            .map(|i| {
                (
                    make_internal(
                        format!("key{:05}", i / 3).as_bytes(),
                        100 - (i % 3) as u64,
                        Kind::Put,
                    ),
                    format!("v{i}").into_bytes(),
                )
            })
            .collect()
    }

    fn collect_forward(it: &mut BlockIter) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        it.seek_to_first();
        while it.valid() {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.next();
        }
        assert!(it.take_error().is_none());
        out
    }

    fn collect_backward(it: &mut BlockIter) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        it.seek_to_last();
        while it.valid() {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.prev();
        }
        assert!(it.take_error().is_none());
        out.reverse();
        out
    }

    #[test]
    fn empty_block() {
        let blk = build(&[], 16);
        assert!(blk.is_empty());
        let mut it = BlockIter::new(blk);
        it.seek_to_first();
        assert!(!it.valid());
        it.seek_to_last();
        assert!(!it.valid());
        it.seek(b"anything");
        assert!(!it.valid());
        it.seek_for_prev(b"anything");
        assert!(!it.valid());
        assert!(it.take_error().is_none());
    }

    #[test]
    fn iterate_both_ways_all_intervals() {
        for interval in [1, 2, 3, 16, 1000] {
            for n in [1, 2, 15, 16, 17, 100] {
                let e = entries(n);
                let blk = build(&e, interval);
                let mut it = BlockIter::new(blk);
                assert_eq!(collect_forward(&mut it), e);
                assert_eq!(collect_backward(&mut it), e);
            }
        }
    }

    #[test]
    fn seek_and_seek_for_prev() {
        let e = entries(50);
        let blk = build(&e, 4);
        let mut it = BlockIter::new(blk);
        for (i, (k, _)) in e.iter().enumerate() {
            it.seek(k);
            assert!(it.valid());
            assert_eq!(it.key(), &k[..]);
            it.seek_for_prev(k);
            assert_eq!(it.key(), &k[..]);
            // A key just after k (same user key, lower seqno) lands on the next entry.
            let uk = crate::key::user_key(k);
            let s = crate::key::seqno(k);
            let after = crate::key::seek_key(uk, s);
            it.seek(&after);
            if i + 1 < e.len() {
                assert_eq!(it.key(), &e[i + 1].0[..]);
            } else {
                assert!(!it.valid());
            }
            it.seek_for_prev(&after);
            assert_eq!(it.key(), &k[..]);
        }
        it.seek(b"zzzzzzzzzzzz");
        assert!(!it.valid());
        it.seek_for_prev(b"zzzzzzzzzzzz");
        assert_eq!(it.key(), &e[49].0[..]);
        it.seek_for_prev(&make_internal(b"a", 1, Kind::Put));
        assert!(!it.valid());
        assert!(it.take_error().is_none());
    }

    #[test]
    fn bad_restart_arrays_are_corruption() {
        let p = path();
        assert!(Block::new(vec![], p.clone(), 3).is_err());
        assert!(Block::new(vec![1, 2, 3], p.clone(), 3).is_err());
        // Claims many restarts.
        assert!(Block::new(vec![0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF], p.clone(), 3).is_err());
        // Entries but zero restarts.
        assert!(Block::new(vec![9, 9, 0, 0, 0, 0], p.clone(), 3).is_err());
        // First restart not 0.
        let mut d = vec![0u8, 1, 0, 0];
        d.extend_from_slice(&1u32.to_le_bytes());
        d.extend_from_slice(&1u32.to_le_bytes());
        match Block::new(d, p.clone(), 3) {
            Err(Error::Corruption { file, offset, .. }) => {
                assert_eq!(file, Path::new("test.sst"));
                assert_eq!(offset, 3);
            }
            other => panic!("{other:?}"),
        }
    }

    /// Every single-byte change and every truncation either decodes (to anything) or
    /// reports corruption; nothing panics or loops.
    #[test]
    fn garbage_never_panics() {
        let e = entries(40);
        let mut b = BlockBuilder::new(4);
        for (k, v) in &e {
            b.add(k, v);
        }
        let good = b.finish().to_vec();
        let exercise = |data: Vec<u8>| {
            let Ok(blk) = Block::new(data, path(), 0) else {
                return;
            };
            let mut it = BlockIter::new(Arc::new(blk));
            let mut steps = 0;
            it.seek_to_first();
            while it.valid() {
                it.next();
                steps += 1;
                assert!(steps < 10_000);
            }
            it.take_error();
            it.seek_to_last();
            while it.valid() {
                it.prev();
                steps += 1;
                assert!(steps < 20_000);
            }
            it.take_error();
            it.seek(&e[17].0);
            it.take_error();
            it.seek_for_prev(&e[23].0);
            it.take_error();
        };
        for len in 0..good.len() {
            exercise(good[..len].to_vec());
        }
        for i in 0..good.len() {
            for x in [0x01u8, 0x80, 0xFF] {
                let mut d = good.clone();
                d[i] ^= x;
                exercise(d);
            }
        }
    }

    proptest! {
        #[test]
        fn round_trip_random(
            keys in proptest::collection::btree_set(proptest::collection::vec(any::<u8>(), 0..40), 0..200),
            interval in 1usize..20,
        ) {
            let e: Vec<(Vec<u8>, Vec<u8>)> = keys
                .iter()
                .map(|k| (make_internal(k, 7, Kind::Put), k.iter().rev().copied().collect()))
                .collect();
            let blk = build(&e, interval);
            let mut it = BlockIter::new(blk);
            prop_assert_eq!(collect_forward(&mut it), e.clone());
            prop_assert_eq!(collect_backward(&mut it), e.clone());
            for (k, _) in &e {
                it.seek(k);
                prop_assert!(it.valid());
                prop_assert_eq!(it.key(), &k[..]);
            }
        }
    }
}
