//! A transaction's writes until it commits: one entry per `(column family, key)` (a later
//! write to a key replaces the earlier), in key order, with an undo log for savepoints and a
//! count of the memory it holds.
//!
//! Invariants:
//! 1. `bytes` is the sum of [`entry_bytes`] over the entries, and `undo_bytes` the same
//!    over the undo log's records: their sum is what the limit (`TxnOptions::max_bytes`)
//!    is checked against.
//! 2. Undoing the undo log back to a savepoint's length restores exactly the entries the
//!    buffer had when the savepoint was taken.
//! 3. The undo log records writes only while a savepoint is open, and is empty when none
//!    is: without savepoints a transaction holds one copy of its writes, however often it
//!    overwrites a key.

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
#[derive(Debug, Default)]
pub(crate) struct WriteBuffer {
    entries: BTreeMap<BufKey, Op>,
    /// For each write while a savepoint is open, what the key held before it (`None`: not
    /// in the buffer).
    undo: Vec<(BufKey, Option<Op>)>,
    bytes: u64,
    undo_bytes: u64,
    /// Savepoints open (invariant 3).
    open: usize,
}

/// What one undo record costs: the key again, the replaced write, and the record's share.
fn undo_bytes(key: &[u8], prev: Option<&Op>) -> u64 {
    (key.len() + prev.map_or(0, |p| p.value().len()) + 64) as u64
}

impl WriteBuffer {
    /// The buffered write of `key`, if any.
    pub(crate) fn get(&self, cf: u32, key: &[u8]) -> Option<&Op> {
        self.entries.get(buf_key(cf, key).as_slice())
    }

    /// Whether writing `op` to `key` keeps the buffer within `limit` bytes (entries and
    /// undo log); `Err` carries what it would hold.
    ///
    /// Without an open savepoint a write adds its entry and takes away at most what it
    /// replaces, so when the entry alone fits, no lookup is needed: in a large
    /// transaction that lookup is a cache miss per write, in a map of every key it wrote.
    pub(crate) fn fits(&self, cf: u32, key: &[u8], op: &Op, limit: u64) -> Result<(), u64> {
        if self.open == 0 && self.bytes + self.undo_bytes + entry_bytes(key, op) <= limit {
            return Ok(());
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
    pub(crate) fn bytes_after(&self, cf: u32, key: &[u8], op: &Op) -> u64 {
        let prev = self.get(cf, key);
        let old = prev.map_or(0, |o| entry_bytes(key, o));
        let undo = if self.open > 0 {
            undo_bytes(key, prev)
        } else {
            0
        };
        self.bytes + self.undo_bytes - old + entry_bytes(key, op) + undo
    }

    /// Buffers `op` for `key`, replacing an earlier write of it.
    pub(crate) fn write(&mut self, cf: u32, key: &[u8], op: Op) {
        self.bytes += entry_bytes(key, &op);
        let k = buf_key(cf, key);
        let prev = if self.open > 0 {
            self.entries.insert(k.clone(), op)
        } else {
            self.entries.insert(k, op)
        };
        if let Some(p) = &prev {
            self.bytes -= entry_bytes(key, p);
        }
        if self.open > 0 {
            self.undo_bytes += undo_bytes(key, prev.as_ref());
            self.undo.push((buf_key(cf, key), prev));
        }
    }

    /// Opens a savepoint: returns its mark (the undo log's length).
    pub(crate) fn mark(&mut self) -> usize {
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
            if let Some(now) = self.entries.get(&k) {
                self.bytes -= entry_bytes(user_key, now);
            }
            match prev {
                Some(p) => {
                    self.bytes += entry_bytes(user_key, &p);
                    self.entries.insert(k, p);
                }
                None => {
                    self.entries.remove(&k);
                }
            }
        }
        self.release();
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The memory counted against the limit: the entries and the undo log.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes + self.undo_bytes
    }

    /// Every buffered `(cf, key)`, in order.
    pub(crate) fn keys(&self) -> impl Iterator<Item = (u32, &[u8])> {
        self.entries.keys().map(|k| split(k))
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
        Overlay::new(
            self.entries
                .range((lo, hi))
                .map(|(k, op)| (split(k).1, op.kind(), op.value())),
        )
    }

    /// The buffer as batches of at most about `chunk_bytes` of encoded entries each, in key
    /// order (one batch if it fits). Every key is in exactly one batch.
    pub(crate) fn batches(&self, chunk_bytes: usize) -> Vec<WriteBatch> {
        let mut out = Vec::new();
        let mut b = WriteBatch::new();
        for (k, op) in &self.entries {
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

    proptest! {
        /// Savepoints restore exactly the earlier buffer, bytes included; batches hold every
        /// entry once, in order, under the chunk size (unless one entry alone is larger).
        #[test]
        fn undo_restores_and_batches_cover(
            ops in proptest::collection::vec((0u32..2, 0u8..20, 0u8..4, 0usize..300), 1..80),
            mark_at in 0usize..80,
            chunk in 64usize..2000,
            limit in 0u64..20_000,
        ) {
            let mut b = WriteBuffer::default();
            let mut snapshot = None;
            for (i, (cf, k, what, vlen)) in ops.iter().enumerate() {
                if i == mark_at {
                    snapshot = Some((b.mark(), b.entries.clone(), b.bytes));
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
                b.write(*cf, &[*k], op);
                prop_assert_eq!(after, b.bytes());
            }
            let sum: u64 = b.entries.iter().map(|(k, o)| entry_bytes(split(k).1, o)).sum();
            prop_assert_eq!(sum, b.bytes);
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
            prop_assert_eq!(seen, keys);
            if let Some((m, entries, bytes)) = snapshot {
                b.undo_to(m);
                prop_assert_eq!(&b.entries, &entries);
                prop_assert_eq!(b.bytes, bytes);
                prop_assert!(b.undo.is_empty() && b.undo_bytes == 0);
            }
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
