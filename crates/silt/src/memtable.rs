//! [`Memtable`]: the in-memory, concurrent, sorted buffer that takes every write before it
//! is flushed to a level-0 table.
//!
//! One memtable holds the entries of every column family: its keys are
//! `cf id (u32 big-endian) ++ internal key`, ordered by column family, then internal key
//! order ([`crate::key::cmp_internal`]). So a flush turns one memtable into one table per
//! column family, and the log can be purged up to one point for all of them.
//!
//! ## Invariants
//!
//! 1. A memtable owns the seqno range `[first_seqno, next memtable's first_seqno)`: a writer
//!    inserts into the memtable whose range holds its seqno, even if a newer memtable
//!    became active meanwhile (see `apply` in `db/write.rs` and invariant M1 in `db/mod.rs`). So memtables, and the level-0 tables
//!    flushed from them, cover disjoint, increasing seqno ranges.
//! 2. Entries are never removed or changed: a memtable only grows until it is flushed and
//!    dropped.
//!
//! Backed by `crossbeam-skiplist` (lock-free inserts and reads).

use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use crossbeam_skiplist::SkipMap;
use parking_lot::Mutex;

use crate::error::Error;
use crate::iter::InternalIterator;
use crate::key::{self, Kind, Seqno};

/// Per-entry bookkeeping counted against the memtable budget (skip-list node, pointers).
const ENTRY_OVERHEAD_BYTES: u64 = 64;

/// Size of the arena's chunks. Entries larger than a quarter of it get a chunk of their own.
const CHUNK_BYTES: usize = 1 << 20;

/// Where a memtable keeps its entries' bytes: large chunks, written once, freed all at once
/// when the memtable is dropped.
///
/// Why not a `Box` per key and per value: a 64 MiB memtable of small entries is a million
/// allocations, and freeing them when a flushed memtable is dropped made glibc consolidate
/// its fastbins under the arena lock that writers need — 50–130 ms put stalls after every
/// flush, and about 30% of a sequential fill's time in the allocator (BENCHMARKS.md). With
/// the arena an entry costs one allocation, the skip list's node.
#[derive(Debug, Default)]
struct Arena {
    chunks: Mutex<Chunks>,
}

#[derive(Debug, Default)]
struct Chunks {
    /// The chunk being filled; its heap buffer never moves (it is never grown).
    current: Vec<u8>,
    /// Full chunks and oversized entries, kept until the arena is dropped.
    done: Vec<Vec<u8>>,
}

impl Arena {
    /// Copies `parts` one after the other into the arena; returns where they start.
    ///
    /// The bytes stay valid and unchanged until the arena is dropped.
    fn store(&self, parts: &[&[u8]]) -> *const u8 {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let mut c = self.chunks.lock();
        let buf: &mut Vec<u8> = if len > CHUNK_BYTES / 4 {
            c.done.push(Vec::with_capacity(len));
            c.done.last_mut().expect("just pushed")
        } else {
            if c.current.capacity() - c.current.len() < len {
                let full = std::mem::replace(&mut c.current, Vec::with_capacity(CHUNK_BYTES));
                if full.capacity() > 0 {
                    c.done.push(full);
                }
            }
            &mut c.current
        };
        // Within capacity: `extend_from_slice` never reallocates, so earlier entries keep
        // their addresses.
        debug_assert!(buf.capacity() - buf.len() >= len);
        let at = buf.len();
        for p in parts {
            buf.extend_from_slice(p);
        }
        buf[at..].as_ptr()
    }
}

/// A memtable key: `cf ++ internal key`, followed in memory by the entry's value. The bytes
/// live in the memtable's [`Arena`] (or, for a probe, in a buffer the caller keeps alive
/// while the probe is used); a `MemKey` is only ever used while they are alive.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MemKey {
    ptr: *const u8,
    key_len: u32,
    value_len: u32,
}

// SAFETY: a `MemKey` is a read-only view of bytes that are never written after it is made
// and outlive every use of it (the arena lives as long as the memtable whose map holds the
// key; probes live on the caller's stack frame).
unsafe impl Send for MemKey {}
unsafe impl Sync for MemKey {}

impl MemKey {
    /// A probe over `bytes` (`cf ++ internal key` or a prefix of it). It must not be used
    /// after `bytes` is gone.
    fn probe(bytes: &[u8]) -> MemKey {
        MemKey {
            ptr: bytes.as_ptr(),
            key_len: bytes.len() as u32,
            value_len: 0,
        }
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: see the type's invariant.
        unsafe { std::slice::from_raw_parts(self.ptr, self.key_len as usize) }
    }

    fn value(&self) -> &[u8] {
        // SAFETY: the value follows the key in the same allocation (arena entries only).
        unsafe {
            std::slice::from_raw_parts(self.ptr.add(self.key_len as usize), self.value_len as usize)
        }
    }

    fn cf(&self) -> u32 {
        let b = self.bytes();
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    fn ikey(&self) -> &[u8] {
        &self.bytes()[4..]
    }
}

fn probe_bytes(cf: u32, ikey: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(4 + ikey.len());
    v.extend_from_slice(&cf.to_be_bytes());
    v.extend_from_slice(ikey);
    v
}

impl Ord for MemKey {
    fn cmp(&self, other: &Self) -> Ordering {
        let (a, b) = (self.bytes(), other.bytes());
        // A probe may be just the 4-byte cf prefix.
        let (ca, cb) = (&a[..4.min(a.len())], &b[..4.min(b.len())]);
        ca.cmp(cb)
            .then_with(|| key::cmp_internal(&a[4.min(a.len())..], &b[4.min(b.len())..]))
    }
}

impl PartialOrd for MemKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for MemKey {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for MemKey {}

/// A concurrent sorted buffer of entries of all column families.
#[derive(Debug)]
pub(crate) struct Memtable {
    /// Declared before `arena`: it is dropped first, so no key outlives its bytes.
    map: SkipMap<MemKey, ()>,
    arena: Arena,
    /// The first seqno this memtable owns (invariant 1).
    first_seqno: Seqno,
    approx_bytes: AtomicU64,
    entries: AtomicU64,
}

impl Memtable {
    pub(crate) fn new(first_seqno: Seqno) -> Memtable {
        Memtable {
            map: SkipMap::new(),
            arena: Arena::default(),
            first_seqno,
            approx_bytes: AtomicU64::new(0),
            entries: AtomicU64::new(0),
        }
    }

    pub(crate) fn first_seqno(&self) -> Seqno {
        self.first_seqno
    }

    /// Bytes of keys, values and per-entry overhead inserted so far.
    pub(crate) fn approx_bytes(&self) -> u64 {
        self.approx_bytes.load(Relaxed)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.load(Relaxed) == 0
    }

    /// Inserts one entry. Re-inserting the same (cf, key, seqno, kind) — log replay of a
    /// batch that was already flushed — keeps the first copy.
    pub(crate) fn insert(&self, cf: u32, user_key: &[u8], seqno: Seqno, kind: Kind, value: &[u8]) {
        debug_assert!(seqno >= self.first_seqno);
        let trailer = key::trailer(seqno, kind as u8);
        let ptr = self
            .arena
            .store(&[&cf.to_be_bytes(), user_key, &trailer, value]);
        let key_len = 4 + user_key.len() + trailer.len();
        let k = MemKey {
            ptr,
            key_len: key_len as u32,
            value_len: value.len() as u32,
        };
        let bytes = (key_len + value.len()) as u64 + ENTRY_OVERHEAD_BYTES;
        // Never replaces (a replaced key would outlive nothing, but keep entries immutable).
        self.map.get_or_insert(k, ());
        self.approx_bytes.fetch_add(bytes, Relaxed);
        self.entries.fetch_add(1, Relaxed);
    }

    /// The newest entry of `user_key` in `cf` with `seqno < snapshot`.
    pub(crate) fn get(&self, lk: &key::LookupKey) -> Option<(Kind, Seqno, Vec<u8>)> {
        let e = self
            .map
            .lower_bound(Bound::Included(&MemKey::probe(lk.memtable_key())))?;
        let k = e.key();
        if k.cf() != lk.cf() {
            return None;
        }
        let p = key::parse(k.ikey())?;
        if p.user_key != lk.user_key() {
            return None;
        }
        Some((p.kind, p.seqno, k.value().to_vec()))
    }

    /// The column families with entries here, in order.
    pub(crate) fn cfs(&self) -> Vec<u32> {
        let mut out = Vec::new();
        let mut next = Some(0u32);
        while let Some(cf) = next {
            let buf = cf.to_be_bytes();
            match self.map.lower_bound(Bound::Included(&MemKey::probe(&buf))) {
                Some(e) => {
                    let c = e.key().cf();
                    out.push(c);
                    next = c.checked_add(1);
                }
                None => break,
            }
        }
        out
    }

    /// A cursor over the entries of `cf`.
    pub(crate) fn iter(self: &Arc<Self>, cf: u32) -> MemIter {
        MemIter {
            mem: self.clone(),
            cf,
            cur: None,
        }
    }
}

/// A cursor over one column family of a memtable. It keeps the current entry's key (a view
/// into the arena, which its `Arc` keeps alive) and re-seeks the skip list for each step, so
/// it holds no borrow of the map and copies nothing.
pub(crate) struct MemIter {
    mem: Arc<Memtable>,
    cf: u32,
    cur: Option<MemKey>,
}

impl MemIter {
    fn set(&mut self, e: Option<crossbeam_skiplist::map::Entry<'_, MemKey, ()>>) {
        self.cur = match e {
            Some(e) if e.key().cf() == self.cf => Some(*e.key()),
            _ => None,
        };
    }
}

impl InternalIterator for MemIter {
    fn valid(&self) -> bool {
        self.cur.is_some()
    }

    fn seek_to_first(&mut self) {
        let lo = self.cf.to_be_bytes();
        let mem = self.mem.clone();
        self.set(mem.map.lower_bound(Bound::Included(&MemKey::probe(&lo))));
    }

    fn seek_to_last(&mut self) {
        let mem = self.mem.clone();
        match self.cf.checked_add(1) {
            Some(n) => {
                let hi = n.to_be_bytes();
                self.set(mem.map.upper_bound(Bound::Excluded(&MemKey::probe(&hi))));
            }
            None => self.set(mem.map.back()),
        }
    }

    fn seek(&mut self, target: &[u8]) {
        let buf = probe_bytes(self.cf, target);
        let mem = self.mem.clone();
        self.set(mem.map.lower_bound(Bound::Included(&MemKey::probe(&buf))));
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        let buf = probe_bytes(self.cf, target);
        let mem = self.mem.clone();
        self.set(mem.map.upper_bound(Bound::Included(&MemKey::probe(&buf))));
    }

    fn next(&mut self) {
        let Some(k) = self.cur.take() else {
            return;
        };
        let mem = self.mem.clone();
        self.set(mem.map.lower_bound(Bound::Excluded(&k)));
    }

    fn prev(&mut self) {
        let Some(k) = self.cur.take() else {
            return;
        };
        let mem = self.mem.clone();
        self.set(mem.map.upper_bound(Bound::Excluded(&k)));
    }

    fn key(&self) -> &[u8] {
        self.cur.as_ref().map(|k| k.ikey()).unwrap_or(&[])
    }

    fn value(&self) -> &[u8] {
        self.cur.as_ref().map(|k| k.value()).unwrap_or(&[])
    }

    fn take_error(&mut self) -> Option<Error> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_sees_newest_visible_and_respects_cf() {
        let m = Arc::new(Memtable::new(10));
        m.insert(0, b"k", 10, Kind::Put, b"v10");
        m.insert(0, b"k", 20, Kind::Put, b"v20");
        m.insert(0, b"k", 30, Kind::Delete, b"");
        m.insert(1, b"k", 15, Kind::Put, b"cf1");
        assert_eq!(m.get(&key::LookupKey::new(0, b"k", 11)).unwrap().2, b"v10");
        assert_eq!(m.get(&key::LookupKey::new(0, b"k", 25)).unwrap().2, b"v20");
        assert_eq!(
            m.get(&key::LookupKey::new(0, b"k", 31)).unwrap().0,
            Kind::Delete
        );
        assert!(m.get(&key::LookupKey::new(0, b"k", 10)).is_none());
        assert_eq!(m.get(&key::LookupKey::new(1, b"k", 100)).unwrap().2, b"cf1");
        assert!(m.get(&key::LookupKey::new(2, b"k", 100)).is_none());
        assert!(m.get(&key::LookupKey::new(0, b"j", 100)).is_none());
        assert_eq!(m.cfs(), vec![0, 1]);
    }

    #[test]
    fn iter_walks_one_cf_both_ways() {
        let m = Arc::new(Memtable::new(1));
        for (cf, k, s) in [
            (0, "a", 5),
            (1, "a", 6),
            (1, "b", 7),
            (1, "b", 9),
            (2, "c", 8),
        ] {
            m.insert(cf, k.as_bytes(), s, Kind::Put, b"");
        }
        let mut it = m.iter(1);
        it.seek_to_first();
        let mut fwd = vec![];
        while it.valid() {
            let p = key::parse(it.key()).unwrap();
            fwd.push((p.user_key.to_vec(), p.seqno));
            it.next();
        }
        assert_eq!(
            fwd,
            vec![(b"a".to_vec(), 6), (b"b".to_vec(), 9), (b"b".to_vec(), 7)]
        );
        it.seek_to_last();
        let mut back = vec![];
        while it.valid() {
            back.push(key::seqno(it.key()));
            it.prev();
        }
        assert_eq!(back, vec![7, 9, 6]);
        it.seek(&key::seek_key(b"b", 8));
        assert_eq!(key::seqno(it.key()), 7);
        it.seek_for_prev(&key::seek_key(b"b", 8));
        assert_eq!(key::seqno(it.key()), 9);
    }
}
