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
//!    became active meanwhile (see `Db::insert`). So memtables, and the level-0 tables
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

use crate::error::Error;
use crate::iter::InternalIterator;
use crate::key::{self, Kind, Seqno};

/// Per-entry bookkeeping counted against the memtable budget (skip-list node, pointers).
const ENTRY_OVERHEAD_BYTES: u64 = 64;

/// A memtable key: `cf ++ internal key`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MemKey(pub Box<[u8]>);

impl MemKey {
    pub(crate) fn new(cf: u32, ikey_user: &[u8], seqno: Seqno, kind: u8) -> MemKey {
        let mut v = Vec::with_capacity(4 + ikey_user.len() + key::TRAILER_BYTES);
        v.extend_from_slice(&cf.to_be_bytes());
        v.extend_from_slice(ikey_user);
        v.extend_from_slice(&key::trailer(seqno, kind));
        MemKey(v.into_boxed_slice())
    }

    fn from_cf_ikey(cf: u32, ikey: &[u8]) -> MemKey {
        let mut v = Vec::with_capacity(4 + ikey.len());
        v.extend_from_slice(&cf.to_be_bytes());
        v.extend_from_slice(ikey);
        MemKey(v.into_boxed_slice())
    }

    fn cf(&self) -> u32 {
        u32::from_be_bytes([self.0[0], self.0[1], self.0[2], self.0[3]])
    }

    fn ikey(&self) -> &[u8] {
        &self.0[4..]
    }
}

impl Ord for MemKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0[..4]
            .cmp(&other.0[..4])
            .then_with(|| key::cmp_internal(&self.0[4..], &other.0[4..]))
    }
}

impl PartialOrd for MemKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// A concurrent sorted buffer of entries of all column families.
#[derive(Debug)]
pub(crate) struct Memtable {
    map: SkipMap<MemKey, Box<[u8]>>,
    /// The first seqno this memtable owns (invariant 1).
    first_seqno: Seqno,
    approx_bytes: AtomicU64,
    entries: AtomicU64,
}

impl Memtable {
    pub(crate) fn new(first_seqno: Seqno) -> Memtable {
        Memtable {
            map: SkipMap::new(),
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
    /// batch that was already flushed — keeps one copy.
    pub(crate) fn insert(&self, cf: u32, user_key: &[u8], seqno: Seqno, kind: Kind, value: &[u8]) {
        debug_assert!(seqno >= self.first_seqno);
        let k = MemKey::new(cf, user_key, seqno, kind as u8);
        let bytes = (k.0.len() + value.len()) as u64 + ENTRY_OVERHEAD_BYTES;
        self.map.insert(k, value.into());
        self.approx_bytes.fetch_add(bytes, Relaxed);
        self.entries.fetch_add(1, Relaxed);
    }

    /// The newest entry of `user_key` in `cf` with `seqno < snapshot`.
    pub(crate) fn get(
        &self,
        cf: u32,
        user_key: &[u8],
        snapshot: Seqno,
    ) -> Option<(Kind, Seqno, Vec<u8>)> {
        let seek = MemKey::from_cf_ikey(cf, &key::seek_key(user_key, snapshot));
        let e = self.map.lower_bound(Bound::Included(&seek))?;
        let k = e.key();
        if k.cf() != cf {
            return None;
        }
        let p = key::parse(k.ikey())?;
        if p.user_key != user_key {
            return None;
        }
        Some((p.kind, p.seqno, e.value().to_vec()))
    }

    /// The column families with entries here, in order.
    pub(crate) fn cfs(&self) -> Vec<u32> {
        let mut out = Vec::new();
        let mut next = Some(0u32);
        while let Some(cf) = next {
            let probe = MemKey(cf.to_be_bytes().to_vec().into_boxed_slice());
            match self.map.lower_bound(Bound::Included(&probe)) {
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

/// A cursor over one column family of a memtable. It keeps a copy of the current entry and
/// re-seeks the skip list for each step, so it holds no borrow of the map.
pub(crate) struct MemIter {
    mem: Arc<Memtable>,
    cf: u32,
    cur: Option<(MemKey, Box<[u8]>)>,
}

impl MemIter {
    fn set(&mut self, e: Option<crossbeam_skiplist::map::Entry<'_, MemKey, Box<[u8]>>>) {
        self.cur = match e {
            Some(e) if e.key().cf() == self.cf => Some((e.key().clone(), e.value().clone())),
            _ => None,
        };
    }

    fn lo(&self) -> MemKey {
        MemKey(self.cf.to_be_bytes().to_vec().into_boxed_slice())
    }
}

impl InternalIterator for MemIter {
    fn valid(&self) -> bool {
        self.cur.is_some()
    }

    fn seek_to_first(&mut self) {
        let lo = self.lo();
        let mem = self.mem.clone();
        self.set(mem.map.lower_bound(Bound::Included(&lo)));
    }

    fn seek_to_last(&mut self) {
        let mem = self.mem.clone();
        match self.cf.checked_add(1) {
            Some(n) => {
                let hi = MemKey(n.to_be_bytes().to_vec().into_boxed_slice());
                self.set(mem.map.upper_bound(Bound::Excluded(&hi)));
            }
            None => self.set(mem.map.back()),
        }
    }

    fn seek(&mut self, target: &[u8]) {
        let k = MemKey::from_cf_ikey(self.cf, target);
        let mem = self.mem.clone();
        self.set(mem.map.lower_bound(Bound::Included(&k)));
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        let k = MemKey::from_cf_ikey(self.cf, target);
        let mem = self.mem.clone();
        self.set(mem.map.upper_bound(Bound::Included(&k)));
    }

    fn next(&mut self) {
        let Some((k, _)) = self.cur.take() else {
            return;
        };
        let mem = self.mem.clone();
        self.set(mem.map.lower_bound(Bound::Excluded(&k)));
    }

    fn prev(&mut self) {
        let Some((k, _)) = self.cur.take() else {
            return;
        };
        let mem = self.mem.clone();
        self.set(mem.map.upper_bound(Bound::Excluded(&k)));
    }

    fn key(&self) -> &[u8] {
        self.cur.as_ref().map(|(k, _)| k.ikey()).unwrap_or(&[])
    }

    fn value(&self) -> &[u8] {
        self.cur.as_ref().map(|(_, v)| &v[..]).unwrap_or(&[])
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
        assert_eq!(m.get(0, b"k", 11).unwrap().2, b"v10");
        assert_eq!(m.get(0, b"k", 25).unwrap().2, b"v20");
        assert_eq!(m.get(0, b"k", 31).unwrap().0, Kind::Delete);
        assert!(m.get(0, b"k", 10).is_none());
        assert_eq!(m.get(1, b"k", 100).unwrap().2, b"cf1");
        assert!(m.get(2, b"k", 100).is_none());
        assert!(m.get(0, b"j", 100).is_none());
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
