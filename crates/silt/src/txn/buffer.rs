//! A transaction's writes until it commits: one entry per `(column family, key)` (a later
//! write to a key replaces the earlier), in key order, with an undo log for savepoints and a
//! count of the memory it holds.
//!
//! The entries live in two parts: `recent`, an ordered map that takes each write, and
//! `run`, a sorted vector of older writes that `recent` is merged into once it holds a
//! quarter as many (at least `merge_at`). A write searches only the small map, so a bulk
//! transaction does not pay a search of everything it wrote per write (a cache miss at
//! each of the lower levels of a map of a million keys); the merges copy each entry a few
//! times, sequentially. A key in `recent` hides its older entry in `run` (a *shadowed*
//! entry) until the merge drops it.
//!
//! Invariants:
//! 1. `bytes` is the sum of [`entry_bytes`] over the entries of both parts, shadowed ones
//!    included, and `undo_bytes` the same over the undo log's records. What the limit
//!    (`TxnOptions::max_bytes`) is checked against is their sum less the shadowed
//!    entries' ([`WriteBuffer::bytes`]).
//! 2. Undoing the undo log back to a savepoint's length restores exactly the entries the
//!    buffer had when the savepoint was taken.
//! 3. The undo log records writes only while a savepoint is open, and is empty when none
//!    is: without savepoints a transaction holds one copy of its writes, however often it
//!    overwrites a key.
//! 4. `run` is sorted by key, one entry per key. While a savepoint is open nothing is
//!    shadowed and nothing is merged: opening the first one merges `recent` into `run`,
//!    and a write then replaces a key's entry where it is. So every undo record's key is
//!    in exactly one part, and a record of a key that was not buffered names a key in
//!    `recent`.

use std::collections::BTreeMap;
use std::ops::Bound;

use smallvec::SmallVec;

use crate::batch::WriteBatch;
use crate::key::Kind;
use crate::read::Overlay;

/// A buffered write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Put(Vec<u8>),
    Delete,
    SingleDelete,
}

impl Op {
    pub(crate) fn kind(&self) -> Kind {
        match self {
            Op::Put(_) => Kind::Put,
            Op::Delete => Kind::Delete,
            Op::SingleDelete => Kind::SingleDelete,
        }
    }

    fn value(&self) -> &[u8] {
        match self {
            Op::Put(v) => v,
            _ => &[],
        }
    }
}

/// What one buffered entry costs, counted against the limit: key, value, and the map's
/// per-entry overhead (a `BTreeMap` node share, the key's and value's allocations).
pub(crate) fn entry_bytes(key: &[u8], op: &Op) -> u64 {
    (key.len() + op.value().len() + 64) as u64
}

/// A buffered key: the column family id, big-endian, then the user key. One byte string
/// whose order is that of `(family, key)`, held inline when short: the map's searches
/// compare keys inside its nodes instead of following a pointer per comparison, a cache
/// miss each in a transaction of many writes.
type BufKey = SmallVec<[u8; 32]>;

/// The buffered key of `key` in family `cf`.
fn buf_key(cf: u32, key: &[u8]) -> BufKey {
    let mut k = BufKey::with_capacity(4 + key.len());
    k.extend_from_slice(&cf.to_be_bytes());
    k.extend_from_slice(key);
    k
}

/// A buffered key's family and user key.
fn split(k: &[u8]) -> (u32, &[u8]) {
    let (cf, key) = k.split_at(4);
    (u32::from_be_bytes(cf.try_into().expect("four bytes")), key)
}

/// The buffer.
#[derive(Debug)]
pub(crate) struct WriteBuffer {
    /// The newest writes (invariant 4).
    recent: BTreeMap<BufKey, Op>,
    /// Older writes, sorted, one per key; an entry whose key is in `recent` is shadowed.
    run: Vec<(BufKey, Op)>,
    /// For each write while a savepoint is open, what the key held before it (`None`: not
    /// in the buffer).
    undo: Vec<(BufKey, Option<Op>)>,
    bytes: u64,
    undo_bytes: u64,
    /// Savepoints open (invariant 3).
    open: usize,
    /// `recent` is merged into `run` at this many entries, or a quarter of `run`'s.
    merge_at: usize,
}

/// Near the limit, `recent` is merged before an exact count if it has more entries than
/// this (each costs a search of `run` to find what it shadows).
const EXACT_SEARCHES: usize = 1024;

/// `recent`'s smallest size to merge at: a transaction of up to this many writes never
/// merges, and its searches stay in a map that fits in the cache.
const MERGE_AT: usize = 32 * 1024;

impl Default for WriteBuffer {
    fn default() -> WriteBuffer {
        WriteBuffer {
            recent: BTreeMap::new(),
            run: Vec::new(),
            undo: Vec::new(),
            bytes: 0,
            undo_bytes: 0,
            open: 0,
            merge_at: MERGE_AT,
        }
    }
}

/// What one undo record costs: the key again, the replaced write, and the record's share.
fn undo_bytes(key: &[u8], prev: Option<&Op>) -> u64 {
    (key.len() + prev.map_or(0, |p| p.value().len()) + 64) as u64
}

/// The entries of two sorted sequences of `(key, value)` in order, `a`'s entry where both
/// have a key (`b`'s, which it shadows, is skipped).
struct Merged<A: Iterator, B: Iterator> {
    a: std::iter::Peekable<A>,
    b: std::iter::Peekable<B>,
}

impl<A: Iterator, B: Iterator> Merged<A, B> {
    fn new(a: A, b: B) -> Self {
        Merged {
            a: a.peekable(),
            b: b.peekable(),
        }
    }
}

impl<K: Ord, V, A, B> Iterator for Merged<A, B>
where
    A: Iterator<Item = (K, V)>,
    B: Iterator<Item = (K, V)>,
{
    type Item = (K, V);

    fn next(&mut self) -> Option<Self::Item> {
        let from_a = match (self.a.peek(), self.b.peek()) {
            (Some(x), Some(y)) => match x.0.cmp(&y.0) {
                std::cmp::Ordering::Less => true,
                std::cmp::Ordering::Greater => false,
                std::cmp::Ordering::Equal => {
                    self.b.next();
                    true
                }
            },
            (Some(_), None) => true,
            (None, _) => false,
        };
        if from_a {
            self.a.next()
        } else {
            self.b.next()
        }
    }
}

impl WriteBuffer {
    /// `run`'s index of `key`, or where it would go.
    fn run_index(&self, key: &[u8]) -> Result<usize, usize> {
        self.run.binary_search_by(|(k, _)| k.as_slice().cmp(key))
    }

    /// The buffered write of `key`, if any.
    pub(crate) fn get(&self, cf: u32, key: &[u8]) -> Option<&Op> {
        self.get_key(&buf_key(cf, key))
    }

    fn get_key(&self, k: &[u8]) -> Option<&Op> {
        match self.recent.get(k) {
            Some(op) => Some(op),
            None => self.run_index(k).ok().map(|i| &self.run[i].1),
        }
    }

    /// The count and bytes of the shadowed entries of `run` (invariant 1): a search of
    /// `run` per entry of `recent`.
    fn shadowed(&self) -> (usize, u64) {
        // Invariant 4: nothing is shadowed while a savepoint is open.
        if self.run.is_empty() || self.open > 0 {
            return (0, 0);
        }
        let mut n = 0;
        let mut bytes = 0;
        for k in self.recent.keys() {
            if let Ok(i) = self.run_index(k) {
                n += 1;
                bytes += entry_bytes(split(k).1, &self.run[i].1);
            }
        }
        (n, bytes)
    }

    /// Whether writing `op` to `key` keeps the buffer within `limit` bytes (entries and
    /// undo log); `Err` carries what it would hold.
    ///
    /// Without an open savepoint a write adds its entry and takes away at most what it
    /// replaces, so when the entry alone fits, no lookup is needed: in a large
    /// transaction that lookup is a cache miss per write, in a map of every key it wrote.
    /// Near the limit the count must be exact: `recent` is merged first if it is more than
    /// small, so that finding the shadowed entries stays cheap for the writes after.
    pub(crate) fn fits(&mut self, cf: u32, key: &[u8], op: &Op, limit: u64) -> Result<(), u64> {
        if self.open == 0 && self.bytes + self.undo_bytes + entry_bytes(key, op) <= limit {
            return Ok(());
        }
        if self.open == 0 && self.recent.len() > EXACT_SEARCHES {
            self.merge();
        }
        match self.bytes_after(cf, key, op) {
            after if after > limit => Err(after),
            _ => Ok(()),
        }
    }

    /// Whether `key` of `cf` is buffered.
    pub(crate) fn contains(&self, cf: u32, key: &[u8]) -> bool {
        self.get(cf, key).is_some()
    }

    /// What the buffer would hold (entries and undo log) after writing `op` to `key`.
    fn bytes_after(&self, cf: u32, key: &[u8], op: &Op) -> u64 {
        let prev = self.get(cf, key);
        let old = prev.map_or(0, |o| entry_bytes(key, o));
        let undo = if self.open > 0 {
            undo_bytes(key, prev)
        } else {
            0
        };
        self.bytes() - old + entry_bytes(key, op) + undo
    }

    /// Buffers `op` for `key`, replacing an earlier write of it.
    pub(crate) fn write(&mut self, cf: u32, key: &[u8], op: Op) {
        self.bytes += entry_bytes(key, &op);
        let k = buf_key(cf, key);
        if self.open == 0 {
            // May shadow an entry of `run`: the merge settles it (invariant 1).
            if let Some(p) = self.recent.insert(k, op) {
                self.bytes -= entry_bytes(key, &p);
            }
            self.maybe_merge();
            return;
        }
        // Invariant 4: replace the key's entry where it is.
        let prev = if let Some(slot) = self.recent.get_mut(&k) {
            Some(std::mem::replace(slot, op))
        } else if let Ok(i) = self.run_index(&k) {
            Some(std::mem::replace(&mut self.run[i].1, op))
        } else {
            self.recent.insert(k.clone(), op);
            None
        };
        if let Some(p) = &prev {
            self.bytes -= entry_bytes(key, p);
        }
        self.undo_bytes += undo_bytes(key, prev.as_ref());
        self.undo.push((k, prev));
    }

    /// Merges `recent` into `run` once it holds `merge_at` entries and a quarter as many as
    /// `run` (geometric growth: each entry is copied a few times in all).
    fn maybe_merge(&mut self) {
        if self.recent.len() >= self.merge_at.max(self.run.len() / 4) {
            self.merge();
        }
    }

    /// Merges `recent` into `run`, dropping the entries it shadowed (invariant 1).
    ///
    /// In place, from the back: `run` grows by `recent`'s length (a large vector's
    /// reallocation remaps its pages, where a new vector per merge faulted every page in
    /// afresh: measured as the sweep's system time) and is filled from its end, each old
    /// entry moving once. Slots `run[r..w]` are holes throughout: the old entries not yet
    /// placed are `run[..r]`, the final ones `run[w..]`.
    fn merge(&mut self) {
        if self.recent.is_empty() {
            return;
        }
        debug_assert!(self.undo.is_empty(), "no merge while a savepoint is open");
        let recent = std::mem::take(&mut self.recent);
        let hole = || (BufKey::new(), Op::Delete);
        let old_len = self.run.len();
        self.run.resize_with(old_len + recent.len(), hole);
        let run = &mut self.run;
        let (mut r, mut w) = (old_len, run.len());
        for (k, op) in recent.into_iter().rev() {
            while r > 0 && run[r - 1].0 > k {
                r -= 1;
                w -= 1;
                run.swap(r, w);
            }
            if r > 0 && run[r - 1].0 == k {
                r -= 1;
                let (old_k, old_op) = std::mem::replace(&mut run[r], hole());
                self.bytes -= entry_bytes(split(&old_k).1, &old_op);
            }
            w -= 1;
            run[w] = (k, op);
        }
        // One hole per shadowed entry dropped is left between the old entries that stayed
        // where they were and the rest.
        if w > r {
            run.drain(r..w);
        }
        debug_assert!(run.windows(2).all(|p| p[0].0 < p[1].0), "invariant 4");
    }

    /// Opens a savepoint: returns its mark (the undo log's length). The first one merges
    /// `recent` into `run`, so nothing is shadowed while it is open (invariant 4).
    pub(crate) fn mark(&mut self) -> usize {
        self.settle();
        self.open += 1;
        self.undo.len()
    }

    /// Closes the newest savepoint without undoing anything; with none left open, the undo
    /// log goes (invariant 3).
    pub(crate) fn release(&mut self) {
        self.open = self.open.saturating_sub(1);
        if self.open == 0 {
            self.undo = Vec::new();
            self.undo_bytes = 0;
        }
    }

    /// Undoes every write after `mark` (invariant 2) and closes the savepoint it marked.
    pub(crate) fn undo_to(&mut self, mark: usize) {
        while self.undo.len() > mark {
            let (k, prev) = self.undo.pop().expect("longer than mark");
            let user_key = split(&k).1;
            self.undo_bytes -= undo_bytes(user_key, prev.as_ref());
            // Invariant 4: the key is in exactly one part.
            let slot = match self.recent.get_mut(&k) {
                Some(slot) => Some(slot),
                None => match self.run_index(&k) {
                    Ok(i) => Some(&mut self.run[i].1),
                    Err(_) => None,
                },
            };
            let slot = slot.expect("an undone write is buffered");
            self.bytes -= entry_bytes(user_key, slot);
            match prev {
                Some(p) => {
                    self.bytes += entry_bytes(user_key, &p);
                    *slot = p;
                }
                None => {
                    self.recent
                        .remove(&k)
                        .expect("a key that was not buffered went to `recent`");
                }
            }
        }
        self.release();
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.recent.is_empty() && self.run.is_empty()
    }

    /// The number of buffered keys.
    pub(crate) fn len(&self) -> usize {
        self.recent.len() + self.run.len() - self.shadowed().0
    }

    /// The memory counted against the limit: the entries and the undo log (invariant 1).
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes + self.undo_bytes - self.shadowed().1
    }

    /// Merges the two parts (before a commit walks them in order), unless a savepoint is
    /// open.
    pub(crate) fn settle(&mut self) {
        if self.open == 0 {
            self.merge();
        }
    }

    /// Every buffered entry in key order.
    fn entries(&self) -> impl Iterator<Item = (&BufKey, &Op)> {
        Merged::new(self.recent.iter(), self.run.iter().map(|(k, op)| (k, op)))
    }

    /// Every buffered `(cf, key)`, in order.
    pub(crate) fn keys(&self) -> impl Iterator<Item = (u32, &[u8])> {
        self.entries().map(|(k, _)| split(k))
    }

    /// The buffered writes of `cf` within `lo..hi`, as an iterator's overlay.
    pub(crate) fn overlay(&self, cf: u32, lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> Overlay {
        let lo = match lo {
            Bound::Included(k) => Bound::Included(buf_key(cf, k)),
            Bound::Excluded(k) => Bound::Excluded(buf_key(cf, k)),
            Bound::Unbounded => Bound::Included(buf_key(cf, &[])),
        };
        let hi = match hi {
            Bound::Included(k) => Bound::Included(buf_key(cf, k)),
            Bound::Excluded(k) => Bound::Excluded(buf_key(cf, k)),
            Bound::Unbounded => match cf.checked_add(1) {
                Some(n) => Bound::Excluded(buf_key(n, &[])),
                None => Bound::Unbounded,
            },
        };
        let empty = match (&lo, &hi) {
            (Bound::Included(a), Bound::Included(b)) => a > b,
            (Bound::Included(a) | Bound::Excluded(a), Bound::Excluded(b))
            | (Bound::Excluded(a), Bound::Included(b)) => a >= b,
            _ => false,
        };
        if empty {
            return Overlay::default();
        }
        let start = match &lo {
            Bound::Included(k) => self.run_index(k).unwrap_or_else(|i| i),
            Bound::Excluded(k) => self.run_index(k).map_or_else(|i| i, |i| i + 1),
            Bound::Unbounded => 0,
        };
        let end = match &hi {
            Bound::Included(k) => self.run_index(k).map_or_else(|i| i, |i| i + 1),
            Bound::Excluded(k) => self.run_index(k).unwrap_or_else(|i| i),
            Bound::Unbounded => self.run.len(),
        };
        let run = &self.run[start..end.max(start)];
        Overlay::new(
            Merged::new(
                self.recent.range((lo, hi)),
                run.iter().map(|(k, op)| (k, op)),
            )
            .map(|(k, op)| (split(k).1, op.kind(), op.value())),
        )
    }

    /// The buffer as batches of at most about `chunk_bytes` of encoded entries each, in key
    /// order (one batch if it fits). Every key is in exactly one batch.
    pub(crate) fn batches(&self, chunk_bytes: usize) -> Vec<WriteBatch> {
        let mut out = Vec::new();
        let mut b = WriteBatch::new();
        for (k, op) in self.entries() {
            let (cf, k) = split(k);
            let need = 13 + k.len() + op.value().len() + 4;
            if !b.is_empty() && b.encoded_bytes() + need > chunk_bytes {
                out.push(std::mem::take(&mut b));
                b = WriteBatch::new();
            }
            b.push(
                op.kind(),
                cf,
                k,
                matches!(op, Op::Put(_)).then(|| op.value()),
            );
        }
        if !b.is_empty() || out.is_empty() {
            out.push(b);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The entries as a reader sees them, in order.
    fn visible(b: &WriteBuffer) -> Vec<(BufKey, Op)> {
        b.entries().map(|(k, op)| (k.clone(), op.clone())).collect()
    }

    proptest! {
        /// Against a map of the writes: reads see the newest write of each key, merged or
        /// not; savepoints restore exactly the earlier buffer, bytes included; batches hold
        /// every entry once, in order, under the chunk size (unless one entry alone is
        /// larger); overlays of a range hold exactly its entries.
        #[test]
        fn undo_restores_and_batches_cover(
            ops in proptest::collection::vec((0u32..2, 0u8..20, 0u8..4, 0usize..300), 1..80),
            mark_at in 0usize..80,
            chunk in 64usize..2000,
            limit in 0u64..20_000,
            merge_at in 1usize..8,
            lo in 0u8..20,
            hi in 0u8..20,
        ) {
            let mut b = WriteBuffer { merge_at, ..WriteBuffer::default() };
            let mut model: BTreeMap<BufKey, Op> = BTreeMap::new();
            let mut snapshot = None;
            for (i, (cf, k, what, vlen)) in ops.iter().enumerate() {
                if i == mark_at {
                    snapshot = Some((b.mark(), model.clone(), b.bytes()));
                }
                let op = match what {
                    0 => Op::Delete,
                    1 => Op::SingleDelete,
                    _ => Op::Put(vec![*k; *vlen]),
                };
                let after = b.bytes_after(*cf, &[*k], &op);
                // The limit check, with or without its lookup, agrees with the sum.
                match b.fits(*cf, &[*k], &op, limit) {
                    Ok(()) => prop_assert!(after <= limit),
                    Err(would) => prop_assert!(would == after && after > limit),
                }
                model.insert(buf_key(*cf, &[*k]), op.clone());
                b.write(*cf, &[*k], op);
                prop_assert_eq!(after, b.bytes());
                for ((mcf, mk), op) in model.iter().map(|(k, op)| (split(k), op)) {
                    prop_assert_eq!(b.get(mcf, mk), Some(op));
                }
                prop_assert_eq!(b.get(*cf, &[20]), None);
            }
            let want: Vec<(BufKey, Op)> = model.clone().into_iter().collect();
            prop_assert_eq!(&visible(&b), &want);
            prop_assert_eq!(b.len(), model.len());
            let sum: u64 = model.iter().map(|(k, o)| entry_bytes(split(k).1, o)).sum();
            prop_assert_eq!(sum + b.undo_bytes, b.bytes());
            let undo: u64 = b.undo.iter().map(|(k, p)| undo_bytes(split(k).1, p.as_ref())).sum();
            prop_assert_eq!(undo, b.undo_bytes);
            // Invariant 3: records only after the savepoint.
            prop_assert_eq!(b.undo.len(), ops.len().saturating_sub(mark_at));
            let batches = b.batches(chunk);
            let mut seen = Vec::new();
            for batch in &batches {
                let e = crate::batch::decode(batch.payload()).unwrap();
                prop_assert!(batch.encoded_bytes() <= chunk || e.len() == 1);
                seen.extend(e.iter().map(|e| (e.cf, e.key.to_vec())));
            }
            let keys: Vec<_> = b.keys().map(|(cf, k)| (cf, k.to_vec())).collect();
            prop_assert_eq!(&seen, &keys);
            let all: Vec<_> = model.keys().map(|k| { let (cf, k) = split(k); (cf, k.to_vec()) }).collect();
            prop_assert_eq!(&keys, &all);
            // An overlay of family 1 within lo..=hi: exactly the model's entries there.
            let ov = b.overlay(1, &Bound::Included(vec![lo]), &Bound::Included(vec![hi]));
            let in_range: Vec<_> = model
                .iter()
                .filter(|(k, _)| { let (cf, k) = split(k); cf == 1 && k >= &[lo][..] && k <= &[hi][..] })
                .map(|(k, op)| (split(k).1.to_vec(), op.kind(), op.value().to_vec()))
                .collect();
            prop_assert_eq!(ov.user_entries(), in_range);
            if let Some((m, entries, bytes)) = snapshot {
                b.undo_to(m);
                let want: Vec<(BufKey, Op)> = entries.into_iter().collect();
                prop_assert_eq!(&visible(&b), &want);
                prop_assert_eq!(b.bytes(), bytes);
                prop_assert!(b.undo.is_empty() && b.undo_bytes == 0);
            }
            // Settled, one part holds everything, and nothing is shadowed.
            let before = visible(&b);
            let bytes = b.bytes();
            b.settle();
            prop_assert!(b.recent.is_empty() || b.open > 0);
            prop_assert_eq!(visible(&b), before);
            prop_assert_eq!(b.bytes(), bytes);
            prop_assert_eq!(b.bytes, bytes - b.undo_bytes);
        }
    }

    #[test]
    fn without_a_savepoint_overwrites_hold_one_copy() {
        let mut b = WriteBuffer::default();
        for i in 0..10_000u32 {
            b.write(0, b"hot", Op::Put(i.to_le_bytes().repeat(100)));
        }
        assert_eq!(b.bytes(), entry_bytes(b"hot", &Op::Put(vec![0; 400])));
        assert!(b.undo.is_empty());
        // With one open, each overwrite keeps the value it replaced, and counts it.
        let m = b.mark();
        for i in 0..100u32 {
            b.write(0, b"hot", Op::Put(i.to_le_bytes().repeat(100)));
        }
        assert_eq!(b.undo.len(), 100);
        assert!(b.bytes() > 100 * 400);
        b.undo_to(m);
        assert!(b.undo.is_empty());
        assert_eq!(b.bytes(), entry_bytes(b"hot", &Op::Put(vec![0; 400])));
    }
}
