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
//! 3. A value read in the log ([`Memtable::insert_in_log`]) stays valid while the memtable
//!    lives: before the first such insert from a log segment, the writer pins that
//!    segment's mapping and what keeps the log's segments from the memtable's first seqno
//!    ([`Memtable::pin_log`]: the engine's purge hold, and its directory lock so that no
//!    other handle opens the log), so the log neither removes nor recycles (overwrites) a
//!    segment holding one of its entries' records until the memtable is dropped — after
//!    its flush, once the last reader lets go of it.
//!
//! Backed by [`skiplist`]: an arena-backed concurrent skip list with the key and value inline
//! in each node (why not a general-purpose crate: see that module).

use std::cmp::Ordering;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use parking_lot::Mutex;
use silt_vfs::ReadMap;
use smallvec::SmallVec;

use crate::error::Error;
use crate::iter::InternalIterator;
use crate::key::{self, Kind, Seqno};

mod bloom;
mod skiplist;

use bloom::MemBloom;
pub(crate) use skiplist::{ChunkPool, Splice};
use skiplist::{Node, NodeValue, SkipList};

/// Orders memtable keys: column family (4 bytes, big-endian), then internal key order. A
/// probe may be just the 4-byte column-family prefix.
struct MemOrder;

impl skiplist::KeyOrder for MemOrder {
    #[inline]
    fn cmp(a: &[u8], b: &[u8]) -> Ordering {
        cmp_mem(a, b)
    }
}

/// [`MemOrder`]'s order. Full keys (column family, user key, trailer) take a path of word
/// comparisons, the same order as the general one below: big-endian words compare as their
/// bytes do, and the first eight bytes of two user keys usually differ, so a search step
/// rarely calls `memcmp`.
#[inline]
fn cmp_mem(a: &[u8], b: &[u8]) -> Ordering {
    const T: usize = key::TRAILER_BYTES;
    if a.len() >= 4 + T && b.len() >= 4 + T {
        let word = |x: &[u8], i: usize| u32::from_be_bytes([x[i], x[i + 1], x[i + 2], x[i + 3]]);
        let (ca, cb) = (word(a, 0), word(b, 0));
        if ca != cb {
            return ca.cmp(&cb);
        }
        let (ua, ta) = a[4..].split_at(a.len() - 4 - T);
        let (ub, tb) = b[4..].split_at(b.len() - 4 - T);
        return cmp_user(ua, ub).then_with(|| {
            let t = |x: &[u8]| u64::from_be_bytes(x.try_into().expect("trailer bytes"));
            t(ta).cmp(&t(tb))
        });
    }
    let (ca, cb) = (&a[..4.min(a.len())], &b[..4.min(b.len())]);
    ca.cmp(cb)
        .then_with(|| key::cmp_internal(&a[4.min(a.len())..], &b[4.min(b.len())..]))
}

/// Byte order of two user keys, deciding on their first eight bytes as one word when it can.
#[inline]
fn cmp_user(a: &[u8], b: &[u8]) -> Ordering {
    if a.len() >= 8 && b.len() >= 8 {
        let w = |x: &[u8]| u64::from_be_bytes(x[..8].try_into().expect("8 bytes"));
        let (wa, wb) = (w(a), w(b));
        if wa != wb {
            return wa.cmp(&wb);
        }
        return a[8..].cmp(&b[8..]);
    }
    a.cmp(b)
}

/// Asks the CPU to start loading the cache line at `p` (a hint; never faults), for the skip
/// list's nodes and the filter's blocks.
#[inline(always)]
fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint that never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p as *const i8, std::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

fn cf_of(k: &[u8]) -> u32 {
    u32::from_be_bytes([k[0], k[1], k[2], k[3]])
}

fn probe_bytes(cf: u32, ikey: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(4 + ikey.len());
    v.extend_from_slice(&cf.to_be_bytes());
    v.extend_from_slice(ikey);
    v
}

/// A concurrent sorted buffer of entries of all column families.
pub(crate) struct Memtable {
    list: SkipList<MemOrder>,
    /// The first seqno this memtable owns (invariant 1).
    first_seqno: Seqno,
    approx_bytes: AtomicU64,
    entries: AtomicU64,
    /// The length of the longest value inserted (a flush with no value this long skips
    /// noting where the log holds its values: `db/log_blob.rs`).
    largest_value: AtomicU64,
    /// A read step that passes over at least this many of this memtable's entries asks for
    /// it to be flushed (0: never); see [`Memtable::note_scan`].
    scan_flush_trigger: u64,
    /// Set once a read step passed over `scan_flush_trigger` entries.
    flush_requested: AtomicBool,
    /// The user keys of the entries, so a point read of a key not here skips the search
    /// (`None`: no filter; see [`bloom`]).
    bloom: Option<MemBloom>,
    /// What keeps the values read in the log valid (invariant 3).
    log_pins: Mutex<LogPins>,
}

/// The log segments a memtable reads values in, and what keeps them (invariant 3).
#[derive(Default)]
struct LogPins {
    keep: Option<Box<dyn std::any::Any + Send + Sync>>,
    maps: Vec<Arc<ReadMap>>,
}

impl std::fmt::Debug for Memtable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memtable")
            .field("first_seqno", &self.first_seqno)
            .field("approx_bytes", &self.approx_bytes())
            .field("entries", &self.entries.load(Relaxed))
            .finish()
    }
}

impl Memtable {
    pub(crate) fn new(first_seqno: Seqno) -> Memtable {
        Memtable::new_in(first_seqno, None)
    }

    /// [`Memtable::new`] whose memory comes from `pool` first and goes back to it when the
    /// memtable is dropped ([`ChunkPool`]).
    pub(crate) fn new_in(first_seqno: Seqno, pool: Option<Arc<ChunkPool>>) -> Memtable {
        Memtable {
            list: SkipList::new_in(pool),
            first_seqno,
            approx_bytes: AtomicU64::new(0),
            entries: AtomicU64::new(0),
            largest_value: AtomicU64::new(0),
            scan_flush_trigger: 0,
            flush_requested: AtomicBool::new(false),
            bloom: None,
            log_pins: Mutex::new(LogPins::default()),
        }
    }

    /// This memtable, with a filter of about `bytes` bytes over its user keys (0: none).
    /// See [`bloom`] and `DbBuilder::memtable_bloom_ratio`.
    pub(crate) fn with_bloom_bytes(mut self, bytes: u64) -> Memtable {
        self.bloom = (bytes > 0).then(|| MemBloom::with_bytes(bytes));
        self
    }

    /// This memtable, asking to be flushed once a read step passes over `n` of its entries
    /// (0: never). See [`Memtable::note_scan`].
    pub(crate) fn with_scan_flush_trigger(mut self, n: u64) -> Memtable {
        self.scan_flush_trigger = n;
        self
    }

    /// A read step (one `next`, `prev` or seek of a user iterator) has passed over `stepped`
    /// entries of this memtable so far, looking for one visible pair: tombstones, the puts they delete,
    /// overwritten versions. At the trigger the memtable asks to be flushed (RocksDB's
    /// `memtable_op_scan_flush_trigger`): a flush drops what no reader can see (a single
    /// delete with its put, overwritten versions: `compaction/flush_view.rs`), so the next reads stop
    /// passing over it. The write path rotates a memtable that asked (`DbInner::rotate`).
    #[inline]
    pub(crate) fn note_scan(&self, stepped: u64) {
        if stepped == self.scan_flush_trigger && self.scan_flush_trigger != 0 {
            self.flush_requested.store(true, Relaxed);
        }
    }

    /// Whether a read step asked for this memtable to be flushed ([`Memtable::note_scan`]).
    pub(crate) fn flush_requested(&self) -> bool {
        self.flush_requested.load(Relaxed)
    }

    pub(crate) fn first_seqno(&self) -> Seqno {
        self.first_seqno
    }

    /// Bytes of the arena the entries take (nodes, keys, values).
    pub(crate) fn approx_bytes(&self) -> u64 {
        self.approx_bytes.load(Relaxed)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.load(Relaxed) == 0
    }

    /// Inserts one entry. Re-inserting the same (cf, key, seqno, kind) — log replay of a
    /// batch that was already flushed — keeps the first copy.
    #[cfg(test)]
    pub(crate) fn insert(&self, cf: u32, user_key: &[u8], seqno: Seqno, kind: Kind, value: &[u8]) {
        self.insert_with(&mut Splice::default(), cf, user_key, seqno, kind, value, 0);
    }

    /// [`Memtable::insert`] for one of a sequence of inserts (a batch): `splice` remembers
    /// where the previous one went, so keys in order (either way) cost about two comparisons
    /// each instead of a search. Use one `Splice` per memtable. `logged` is where the log
    /// holds `value`, [`MemIter::logged_at`] plus one (0: not known).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn insert_with(
        &self,
        splice: &mut Splice,
        cf: u32,
        user_key: &[u8],
        seqno: Seqno,
        kind: Kind,
        value: &[u8],
        logged: u32,
    ) {
        let v = NodeValue::Inline(value);
        // SAFETY: an inline value is copied into the node.
        unsafe { self.insert_node(splice, cf, user_key, seqno, kind, v, logged) };
    }

    /// Keeps `map` (a mapping of a log segment) and what `keep` returns (called once per
    /// memtable with its first seqno: what keeps the log's segments from there on) for as
    /// long as this memtable lives: invariant 3, before values in that segment are inserted
    /// with [`Memtable::insert_in_log`].
    pub(crate) fn pin_log(
        &self,
        map: &Arc<ReadMap>,
        keep: impl FnOnce(Seqno) -> Box<dyn std::any::Any + Send + Sync>,
    ) {
        let mut pins = self.log_pins.lock();
        if pins.keep.is_none() {
            pins.keep = Some(keep(self.first_seqno));
        }
        if !pins.maps.iter().any(|m| Arc::ptr_eq(m, map)) {
            pins.maps.push(map.clone());
        }
    }

    /// [`Memtable::insert_with`] of a value the log holds at `in_log` (`value` is the same
    /// bytes, read once here for their crc): the entry points there instead of holding a
    /// copy, and its value's bytes still count toward [`Memtable::approx_bytes`]. Returns
    /// whether the entry points into the log (a value of 2 GiB or more is copied).
    ///
    /// # Safety
    ///
    /// `in_log` is the start of `value.len()` bytes equal to `value` in a mapping pinned
    /// with [`Memtable::pin_log`], which keeps them valid and unchanged while this memtable
    /// lives (invariant 3).
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn insert_in_log(
        &self,
        splice: &mut Splice,
        cf: u32,
        user_key: &[u8],
        seqno: Seqno,
        kind: Kind,
        value: &[u8],
        in_log: *const u8,
        logged: u32,
    ) -> bool {
        debug_assert!(
            !self.log_pins.lock().maps.is_empty(),
            "invariant 3: pinned first"
        );
        // SAFETY (of the check): the caller says `in_log` holds `value.len()` bytes.
        debug_assert!(unsafe { std::slice::from_raw_parts(in_log, value.len()) } == value);
        let len = match u32::try_from(value.len()) {
            Ok(len) if len < skiplist::EXTERNAL => len,
            _ => {
                self.insert_with(splice, cf, user_key, seqno, kind, value, logged);
                return false;
            }
        };
        let v = NodeValue::External {
            at: in_log,
            len,
            crc: crc32c::crc32c(value),
        };
        // SAFETY: the caller keeps the bytes at `in_log` while this memtable lives (its list
        // is dropped with it, before its pins: field order).
        unsafe { self.insert_node(splice, cf, user_key, seqno, kind, v, logged) > 0 }
    }

    /// Inserts one node; returns the bytes it counts for (0: a replayed duplicate).
    ///
    /// # Safety
    ///
    /// As [`SkipList::insert_value`]'s.
    #[allow(clippy::too_many_arguments)]
    unsafe fn insert_node(
        &self,
        splice: &mut Splice,
        cf: u32,
        user_key: &[u8],
        seqno: Seqno,
        kind: Kind,
        value: NodeValue<'_>,
        logged: u32,
    ) -> usize {
        debug_assert!(seqno >= self.first_seqno);
        // The filter's line loads while the skip list searches (`bloom`, invariant B1).
        let h = self.bloom.as_ref().map(|b| {
            let h = bloom::hash(cf, user_key);
            b.prefetch(h);
            h
        });
        let trailer = key::trailer(seqno, kind as u8);
        // The node's key, built on the stack: keys up to a few hundred bytes are common
        // (the seeds' 4 KiB-value load uses 256), and a heap buffer per insert made
        // concurrent writers queue on the allocator's lock (`perf` of the context
        // switches: 40% of the writers' waits).
        let mut kb: SmallVec<[u8; 512]> = SmallVec::new();
        kb.extend_from_slice(&cf.to_be_bytes());
        kb.extend_from_slice(user_key);
        kb.extend_from_slice(&trailer);
        let kb: &[u8] = &kb;
        // SAFETY: passed on from this function's caller.
        let mut bytes = unsafe { self.list.insert_value(splice, kb, value, logged) };
        if let (Some(b), Some(h)) = (&self.bloom, h) {
            // Before this insert returns: invariant B1 of `bloom`.
            b.insert(h);
        }
        let len = match value {
            NodeValue::Inline(v) => v.len() as u64,
            NodeValue::External { len, .. } => {
                if bytes > 0 {
                    // Counted as if copied: the flush comes after as much log as before.
                    bytes += len as usize;
                }
                u64::from(len)
            }
        };
        if bytes > 0 {
            self.approx_bytes.fetch_add(bytes as u64, Relaxed);
            self.entries.fetch_add(1, Relaxed);
        }
        if len > self.largest_value.load(Relaxed) {
            self.largest_value.fetch_max(len, Relaxed);
        }
        bytes
    }

    /// The length of the longest value inserted so far.
    pub(crate) fn largest_value(&self) -> u64 {
        self.largest_value.load(Relaxed)
    }

    /// The newest entry of `user_key` in `cf` with `seqno < snapshot`.
    pub(crate) fn get(&self, lk: &key::LookupKey) -> Option<(Kind, Seqno, Vec<u8>)> {
        if let Some(b) = &self.bloom {
            if !b.may_contain(bloom::hash(lk.cf(), lk.user_key())) {
                return None;
            }
        }
        let n = self.list.seek_ge(lk.memtable_key());
        if n.is_null() {
            return None;
        }
        let node = self.list.get(n);
        let k = node.key();
        if cf_of(k) != lk.cf() {
            return None;
        }
        let p = key::parse(&k[4..])?;
        if p.user_key != lk.user_key() {
            return None;
        }
        Some((p.kind, p.seqno, node.value().to_vec()))
    }

    /// The column families with entries here, in order.
    pub(crate) fn cfs(&self) -> Vec<u32> {
        let mut out = Vec::new();
        let mut next = Some(0u32);
        while let Some(cf) = next {
            let n = self.list.seek_ge(&cf.to_be_bytes());
            if n.is_null() {
                break;
            }
            let c = cf_of(self.list.get(n).key());
            out.push(c);
            next = c.checked_add(1);
        }
        out
    }

    /// A cursor over the entries of `cf`.
    pub(crate) fn iter(self: &Arc<Self>, cf: u32) -> MemIter {
        MemIter {
            mem: self.clone(),
            cf,
            cur: std::ptr::null(),
        }
    }
}

/// A cursor over one column family of a memtable: a node pointer (the memtable, kept alive
/// by the `Arc`, owns the node), so `next` is one load and nothing is copied; `prev` is a
/// search, as nodes have no back links.
pub(crate) struct MemIter {
    mem: Arc<Memtable>,
    cf: u32,
    /// The current node, or null.
    cur: *const Node,
}

// SAFETY: `cur` points into `mem`'s arena, which the `Arc` keeps alive; published nodes are
// read-only apart from atomic links.
unsafe impl Send for MemIter {}
unsafe impl Sync for MemIter {}

impl Clone for MemIter {
    fn clone(&self) -> MemIter {
        MemIter {
            mem: self.mem.clone(),
            cf: self.cf,
            cur: self.cur,
        }
    }
}

impl MemIter {
    /// Puts this cursor where `other`, a cursor over the same memtable and column family,
    /// stands (a pointer copy: no search, no reference count).
    pub(crate) fn copy_position_from(&mut self, other: &MemIter) {
        debug_assert!(Arc::ptr_eq(&self.mem, &other.mem) && self.cf == other.cf);
        self.cur = other.cur;
    }

    fn set(&mut self, n: *const Node) {
        self.cur = if !n.is_null() && cf_of(self.mem.list.get(n).key()) == self.cf {
            // The next step's node loads while the caller uses this one.
            self.mem.list.prefetch_next(n);
            n
        } else {
            std::ptr::null()
        };
    }

    fn node(&self) -> Option<&Node> {
        (!self.cur.is_null()).then(|| self.mem.list.get(self.cur))
    }

    /// Where the log holds the current entry's value: its offset in the payload of the log
    /// record at the entry's seqno, when the commit or replay that inserted it said so
    /// (`db::write::apply`). `None` if not known or not valid.
    pub(crate) fn logged_at(&self) -> Option<u32> {
        self.node().and_then(|n| n.aux().checked_sub(1))
    }

    /// The crc32c of the current entry's value if the entry points at it in the log
    /// ([`Memtable::insert_in_log`]), taken from the writer's copy at insert.
    pub(crate) fn in_log_crc(&self) -> Option<u32> {
        self.node().and_then(|n| n.external_crc())
    }
}

impl InternalIterator for MemIter {
    fn valid(&self) -> bool {
        !self.cur.is_null()
    }

    fn seek_to_first(&mut self) {
        let n = self.mem.list.seek_ge(&self.cf.to_be_bytes());
        self.set(n);
    }

    fn seek_to_last(&mut self) {
        let n = match self.cf.checked_add(1) {
            Some(c) => self.mem.list.seek_lt(&c.to_be_bytes()),
            None => self.mem.list.last(),
        };
        self.set(n);
    }

    fn seek(&mut self, target: &[u8]) {
        let buf = probe_bytes(self.cf, target);
        let n = self.mem.list.seek_ge(&buf);
        self.set(n);
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        let buf = probe_bytes(self.cf, target);
        let n = self.mem.list.seek_le(&buf);
        self.set(n);
    }

    fn next(&mut self) {
        if self.cur.is_null() {
            return;
        }
        let n = self.mem.list.next(self.cur);
        self.set(n);
    }

    fn prev(&mut self) {
        if self.cur.is_null() {
            return;
        }
        let n = self.mem.list.prev(self.cur);
        self.set(n);
    }

    fn key(&self) -> &[u8] {
        self.node().map(|n| &n.key()[4..]).unwrap_or(&[])
    }

    fn value(&self) -> &[u8] {
        self.node().map(|n| n.value()).unwrap_or(&[])
    }

    fn take_error(&mut self) -> Option<Error> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The order `cmp_mem` must keep: column family bytes, then `key::cmp_internal`.
    fn cmp_reference(a: &[u8], b: &[u8]) -> Ordering {
        let (ca, cb) = (&a[..4.min(a.len())], &b[..4.min(b.len())]);
        ca.cmp(cb)
            .then_with(|| key::cmp_internal(&a[4.min(a.len())..], &b[4.min(b.len())..]))
    }

    /// A memtable key from small alphabets, so column families, user keys (of lengths on
    /// both sides of 8) and trailers often tie.
    fn mem_key() -> impl Strategy<Value = Vec<u8>> {
        (
            0u32..3,
            prop::collection::vec(prop_oneof![Just(0u8), Just(1u8), Just(0xffu8)], 0..12),
            0u64..4,
            prop_oneof![Just(0u8), Just(1u8), Just(7u8)],
        )
            .prop_map(|(cf, user, seqno, kind)| {
                let mut k = cf.to_be_bytes().to_vec();
                k.extend_from_slice(&user);
                k.extend_from_slice(&key::trailer(seqno, kind));
                k
            })
    }

    proptest! {
        /// The word-comparison path orders exactly as the byte-wise definition: full keys
        /// that tie on column family, user key or trailer, and their prefixes (probes).
        #[test]
        fn cmp_mem_matches_the_bytewise_order(
            keys in prop::collection::vec(mem_key(), 1..12),
            cut in prop::collection::vec(0usize..24, 12),
        ) {
            let mut all = keys.clone();
            for (k, &c) in keys.iter().zip(&cut) {
                all.push(k[..c.min(k.len())].to_vec());
            }
            for a in &all {
                for b in &all {
                    prop_assert_eq!(cmp_mem(a, b), cmp_reference(a, b), "{:?} {:?}", a, b);
                }
            }
        }
    }

    proptest! {
        /// A filter changes no answer: gets agree with and without one, whether the filter
        /// is one block (almost every probe a false positive) or roomy.
        #[test]
        fn the_filter_changes_no_answer(
            writes in prop::collection::vec(
                (0u32..3, prop::collection::vec(0u8..4, 0..10), any::<bool>()), 0..60),
            probes in prop::collection::vec(
                (0u32..3, prop::collection::vec(0u8..4, 0..10), 1u64..70), 0..60),
        ) {
            let plain = Memtable::new(1);
            let tiny = Memtable::new(1).with_bloom_bytes(64);
            let roomy = Memtable::new(1).with_bloom_bytes(64 << 10);
            for (i, (cf, k, del)) in writes.iter().enumerate() {
                let kind = if *del { Kind::Delete } else { Kind::Put };
                for m in [&plain, &tiny, &roomy] {
                    m.insert(*cf, k, i as u64 + 1, kind, &[i as u8]);
                }
            }
            for (cf, k, snap) in &probes {
                let lk = key::LookupKey::new(*cf, k, *snap);
                let want = plain.get(&lk);
                prop_assert_eq!(&tiny.get(&lk), &want);
                prop_assert_eq!(&roomy.get(&lk), &want);
            }
        }
    }

    /// Invariant B1 of `bloom`: a reader that learns of an entry through a published seqno
    /// (as the write path's visible seqno publishes it) finds it, although its filter bits
    /// were set by another thread with relaxed stores.
    #[test]
    fn a_published_entry_is_never_filtered_out() {
        use std::sync::atomic::{
            AtomicU64,
            Ordering::{Acquire, Release},
        };
        let m = Arc::new(Memtable::new(1).with_bloom_bytes(1 << 20));
        let published = Arc::new(AtomicU64::new(0));
        const N: u64 = 20_000;
        let writer = {
            let (m, published) = (m.clone(), published.clone());
            std::thread::spawn(move || {
                for i in 1..=N {
                    m.insert(0, format!("key{i}").as_bytes(), i, Kind::Put, b"v");
                    published.store(i, Release);
                }
            })
        };
        let mut checked = 0;
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        loop {
            let p = published.load(Acquire);
            if p > 0 {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let j = rng % p + 1;
                let lk = key::LookupKey::new(0, format!("key{j}").as_bytes(), N + 1);
                assert!(m.get(&lk).is_some(), "key{j} published ({p}) but not found");
                checked += 1;
            }
            if p == N {
                break;
            }
        }
        writer.join().unwrap();
        assert!(checked > 0);
    }

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
