//! An arena-backed concurrent skip list with inline keys: the memtable's index.
//!
//! Why not `crossbeam-skiplist` (used until issue 12): profiles of a random fill put about
//! half of the write path's CPU in its search. Its nodes hold a pointer to the key, so every
//! comparison of a search costs a second cache miss; every node is a separate allocation
//! with a reference count and an epoch-based reclamation scheme, none of which a memtable
//! needs, since its entries are never removed and are freed all at once. This is the design
//! of LevelDB's and RocksDB's skip lists (`InlineSkipList`) and Pebble's `arenaskl`:
//!
//! - a node is one arena allocation: header, tower of `height` next pointers, key, value;
//! - nodes are never unlinked or changed after they are published, except their towers
//!   gaining successors, so readers need no lock and no reclamation: the arena lives as long
//!   as the list;
//! - writers link a node bottom-up, each level with one compare-and-swap; a failed CAS
//!   (a concurrent insert in the same gap) re-searches that level from the node before it;
//! - a [`Splice`] remembers where the previous insert of a batch went, so a sorted batch
//!   (ascending or descending) costs about two comparisons per entry instead of a search;
//!   an ascending batch whose keys lie apart (a random batch, sorted) searches each from
//!   the lowest level whose gap after the previous insert still holds it (a finger
//!   search), not from the head.
//!
//! ## Invariants
//!
//! 1. At every level, the nodes reachable from the head are in strictly increasing key
//!    order ([`KeyOrder`]); level `i` holds a subset of level `i - 1`.
//! 2. A node's header, key, value and tower entries are written before the release CAS that
//!    publishes it at level 0; readers load links with acquire, so a reachable node is
//!    fully initialised.
//! 3. Memory is freed only when the list is dropped (nothing unlinks).
//! 4. An external value ([`NodeValue::External`]) is read where the caller said it lies:
//!    the caller keeps those bytes valid and unchanged for as long as the list lives.
//! 5. A [`Splice`]'s nodes are hints, not bounds: a level searched again after a failed CAS
//!    may remember a node that lies after the last insert, and so after later keys of its
//!    batch. A search starts only from a node compared less than its key (`last`, or a
//!    remembered node checked first); otherwise it starts from the head.

use std::cell::Cell;
use std::cmp::Ordering;
use std::marker::PhantomData;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering as AO};
use std::sync::Arc;

use parking_lot::Mutex;

use super::prefetch;

/// The tallest tower. With a branching factor of 4, 12 levels index 4^12 = 16M entries
/// well; a memtable holds about a million.
pub(crate) const MAX_HEIGHT: usize = 12;

/// Size of the arena's chunks. Nodes larger than a quarter of it get a chunk of their own.
const CHUNK_BYTES: usize = 2 << 20;

/// Bytes of a node before its tower: key length, value length, height (u32 each) and
/// padding to 8.
const HEADER_BYTES: usize = 16;

/// Orders the keys of a list. Probes passed to searches may be prefixes (see the memtable's
/// order). A type rather than a function pointer, so a search inlines its comparisons
/// (through a pointer they were a call each, about 14% of a memtable lookup's CPU).
pub(crate) trait KeyOrder {
    fn cmp(a: &[u8], b: &[u8]) -> Ordering;
}

/// The high bit of a node's `value_len`: the value lies outside the list (invariant 4), and
/// the node holds, in its value's place, the value's address (8 bytes, unaligned) and its
/// crc32c (4 bytes). Every value, inline or external, is shorter than this.
pub(crate) const EXTERNAL: u32 = 1 << 31;

/// Bytes an external value takes in its node.
const EXTERNAL_BYTES: usize = 12;

/// A value to insert: its bytes, copied into the node, or where they lie outside the list.
#[derive(Clone, Copy)]
pub(crate) enum NodeValue<'a> {
    Inline(&'a [u8]),
    /// `len` bytes at `at`, whose crc32c is `crc`; kept valid by the caller as long as the
    /// list lives (invariant 4). `len` is below 2^31.
    External {
        at: *const u8,
        len: u32,
        crc: u32,
    },
}

impl NodeValue<'_> {
    /// Bytes the value takes in its node.
    fn node_bytes(&self) -> usize {
        match self {
            NodeValue::Inline(v) => v.len(),
            NodeValue::External { .. } => EXTERNAL_BYTES,
        }
    }
}

/// A node: `HEADER_BYTES` of header, then `height` `AtomicPtr<Node>`, then the key, then the
/// value (or, for an external value, its address and crc: [`EXTERNAL`]). Only ever handled
/// by pointer; the struct names the header.
#[repr(C)]
pub(crate) struct Node {
    key_len: u32,
    value_len: u32,
    height: u32,
    /// The caller's word about the entry, stored with it (the memtable: where the log holds
    /// the value).
    aux: u32,
}

impl Node {
    fn tower(&self) -> *const AtomicPtr<Node> {
        // SAFETY: the tower follows the header in the same allocation.
        unsafe { (self as *const Node as *const u8).add(HEADER_BYTES) as *const AtomicPtr<Node> }
    }

    /// The link at `level`. REQUIRES: `level < height`.
    fn next(&self, level: usize) -> &AtomicPtr<Node> {
        debug_assert!(level < self.height as usize);
        // SAFETY: `level < height`, and the tower was initialised at allocation.
        unsafe { &*self.tower().add(level) }
    }

    fn data(&self) -> *const u8 {
        // SAFETY: key and value follow the tower in the same allocation.
        unsafe { (self.tower() as *const u8).add(self.height as usize * 8) }
    }

    /// The key.
    pub(crate) fn key(&self) -> &[u8] {
        // SAFETY: written before the node was published (invariant 2), never changed.
        unsafe { std::slice::from_raw_parts(self.data(), self.key_len as usize) }
    }

    /// The word given to [`SkipList::insert`].
    pub(crate) fn aux(&self) -> u32 {
        self.aux
    }

    /// The value.
    #[inline]
    pub(crate) fn value(&self) -> &[u8] {
        // SAFETY: as for `key`; the value (or its address) follows the key. An external
        // value's bytes are valid while the list lives (invariant 4), and the node is
        // borrowed from the list.
        unsafe {
            let v = self.data().add(self.key_len as usize);
            if self.value_len & EXTERNAL != 0 {
                let at = ptr::read_unaligned(v as *const usize) as *const u8;
                std::slice::from_raw_parts(at, (self.value_len & !EXTERNAL) as usize)
            } else {
                std::slice::from_raw_parts(v, self.value_len as usize)
            }
        }
    }

    /// The crc32c of an external value (given at insert), `None` for a value in the node.
    pub(crate) fn external_crc(&self) -> Option<u32> {
        if self.value_len & EXTERNAL == 0 {
            return None;
        }
        // SAFETY: an external node's value bytes are its address, then its crc (`alloc_node`).
        let crc = unsafe {
            let v = self.data().add(self.key_len as usize + 8);
            ptr::read_unaligned(v as *const u32)
        };
        Some(crc)
    }
}

/// Bump allocation in chunks, 8 bytes at a time, freed all at once. Why an arena at all (before
/// this list existed): freeing a million small allocations when a flushed memtable was
/// dropped made glibc consolidate its fastbins under the arena lock writers need — 50–130 ms
/// put stalls after every flush (BENCHMARKS.md).
///
/// Chunks are anonymous memory mappings of their own, not `malloc`'s: a dropped memtable's
/// chunks go back to the kernel at once (`munmap`), or to its [`ChunkPool`] for the next
/// memtable. From `malloc`, 1 MiB blocks come from its heaps once its dynamic mmap threshold
/// has risen past them (it rises on the first free of a mapped block), and a heap keeps
/// freed memory resident for the next memtable and everything else (BENCHMARKS.md, issue
/// 12, "peak RSS").
#[derive(Default)]
struct Arena {
    chunks: Mutex<Chunks>,
    /// Where full-size chunks come from first and go when the arena is dropped.
    pool: Option<Arc<ChunkPool>>,
}

#[derive(Default)]
struct Chunks {
    /// The chunk being filled (`None` before the first allocation) and the bytes of it
    /// used (a multiple of 8); its memory never moves.
    current: Option<Chunk>,
    used: usize,
    /// Full chunks and oversized nodes, kept until the arena is dropped.
    done: Vec<Chunk>,
}

/// Page-aligned memory of its own mapping, unmapped on drop. Zeroed when new; a chunk from
/// a [`ChunkPool`] holds what its last list wrote.
struct Chunk {
    map: memmap2::MmapMut,
}

/// Full-size chunks of dropped lists, kept for the next lists of the same database. A new
/// mapping's pages are zeroed by the kernel as they are first touched: for a load of 4 KiB
/// values that was 14–16% of the engine's CPU (`perf`, BENCHMARKS.md), paid again for every
/// memtable. A kept chunk's pages are resident and need nothing. The pool holds at most
/// `max` chunks (a memtable's worth, `db/write.rs`) and at most as many as the last list
/// dropped had ([`ChunkPool::give`]); the rest are unmapped as before. Its chunks stay
/// resident while they wait: they come from a memtable that was just flushed, and the
/// active memtable takes them as it grows.
pub(crate) struct ChunkPool {
    free: Mutex<Vec<Chunk>>,
    max: usize,
}

impl ChunkPool {
    /// A pool that keeps up to `max_bytes` of chunks.
    pub(crate) fn new(max_bytes: u64) -> ChunkPool {
        ChunkPool {
            free: Mutex::new(Vec::new()),
            max: usize::try_from(max_bytes / CHUNK_BYTES as u64).unwrap_or(usize::MAX),
        }
    }

    /// Bytes of chunks waiting in the pool.
    pub(crate) fn bytes(&self) -> usize {
        self.free.lock().len() * CHUNK_BYTES
    }

    fn take(&self) -> Option<Chunk> {
        self.free.lock().pop()
    }

    /// Takes a dropped list's chunks. The pool then holds at most as many chunks as that
    /// list had (and at most `max`): it keeps what the next list is likely to use, the size
    /// of the last one, not the largest list ever seen. A database whose memtables shrink
    /// (flushed early for scans) gives the rest back, for the block cache and everything
    /// else (a queue's peak RSS rose 30% when the pool kept a load's worth).
    fn give(&self, chunks: impl Iterator<Item = Chunk>) {
        let given: Vec<Chunk> = chunks.filter(|c| c.len() == CHUNK_BYTES).collect();
        let limit = given.len().min(self.max);
        let mut free = self.free.lock();
        free.extend(given);
        // The surplus is unmapped as it drops (outside the lock).
        let surplus = free.split_off(limit);
        drop(free);
        drop(surplus);
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        if let Some(pool) = &self.pool {
            let c = self.chunks.get_mut();
            pool.give(c.current.take().into_iter().chain(c.done.drain(..)));
        }
    }
}

impl Chunk {
    /// A chunk of `bytes` bytes (at least 1). Out of memory is handled as the global
    /// allocator's failure is (`handle_alloc_error`: the process aborts).
    fn new(bytes: usize) -> Chunk {
        let bytes = bytes.max(1);
        match memmap2::MmapMut::map_anon(bytes) {
            Ok(map) => {
                // One transparent huge page per chunk where the kernel allows it (THP
                // `madvise` or `always`, and a 2 MiB-aligned mapping, which Linux 6.7 and
                // later give anonymous mappings of that size): one fault instead of 512,
                // and a 64 MiB memtable in 32 TLB entries. A hint: refused or unavailable,
                // the chunk is plain pages.
                #[cfg(target_os = "linux")]
                if bytes == CHUNK_BYTES {
                    let _ = map.advise(memmap2::Advice::HugePage);
                }
                Chunk { map }
            }
            Err(_) => std::alloc::handle_alloc_error(
                std::alloc::Layout::from_size_align(bytes, 8).expect("a chunk's layout"),
            ),
        }
    }

    fn len(&self) -> usize {
        self.map.len()
    }

    fn base(&mut self) -> *mut u8 {
        self.map.as_mut_ptr()
    }
}

impl Arena {
    /// `bytes` bytes, 8-aligned, valid until the arena is dropped. Not zeroed: a chunk from
    /// the pool holds its last list's bytes.
    fn alloc(&self, bytes: usize) -> *mut u8 {
        let bytes = bytes.next_multiple_of(8).max(8);
        let mut c = self.chunks.lock();
        if bytes > CHUNK_BYTES / 4 {
            let mut own = Chunk::new(bytes);
            let p = own.base();
            c.done.push(own);
            return p;
        }
        let room = c.current.as_ref().map_or(0, |k| k.len() - c.used);
        if room < bytes {
            let fresh = self
                .pool
                .as_ref()
                .and_then(|p| p.take())
                .unwrap_or_else(|| Chunk::new(CHUNK_BYTES));
            if let Some(full) = c.current.replace(fresh) {
                c.done.push(full);
            }
            c.used = 0;
        }
        let at = c.used;
        c.used += bytes;
        let current = c.current.as_mut().expect("a chunk was just made");
        debug_assert!(at + bytes <= current.len());
        // SAFETY: `at + bytes <= current.len()`; a mapping does not move when the `Chunk`
        // holding it is moved into `done`.
        unsafe { current.base().add(at) }
    }
}

thread_local! {
    static RNG: Cell<u64> = const { Cell::new(0) };
}

#[cfg(test)]
thread_local! {
    /// A test's next tower height (0: random).
    static NEXT_HEIGHT: Cell<usize> = const { Cell::new(0) };
}

/// A tower height: 1 with probability 3/4, 2 with 3/16, … (branching factor 4).
fn random_height() -> usize {
    #[cfg(test)]
    if let h @ 1.. = NEXT_HEIGHT.with(|h| h.replace(0)) {
        return h.min(MAX_HEIGHT);
    }
    RNG.with(|r| {
        let mut x = r.get();
        if x == 0 {
            // Seed per thread from the address of a stack value and the time.
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1);
            x = (t ^ (&x as *const u64 as u64)) | 1;
        }
        // xorshift64*
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        r.set(x);
        let bits = x.wrapping_mul(0x2545_f491_4f6c_dd1d);
        // Two bits per level: each level has a 1/4 chance to continue.
        let h = 1 + ((bits | (1 << 62)).trailing_zeros() as usize / 2);
        h.min(MAX_HEIGHT)
    })
}

/// Where the previous insert of a sequence went: the nodes before and after its key at every
/// level, and the node it inserted. Valid for one list; reused across the inserts of a batch.
pub(crate) struct Splice {
    prev: [*const Node; MAX_HEIGHT],
    next: [*const Node; MAX_HEIGHT],
    last: *const Node,
}

impl Default for Splice {
    fn default() -> Splice {
        Splice {
            prev: [ptr::null(); MAX_HEIGHT],
            next: [ptr::null(); MAX_HEIGHT],
            last: ptr::null(),
        }
    }
}

/// The skip list. Keys are unique (an insert of an equal key is dropped).
pub(crate) struct SkipList<O: KeyOrder> {
    head: *const Node,
    height: AtomicUsize,
    arena: Arena,
    order: PhantomData<fn() -> O>,
}

// SAFETY: nodes are reached only through atomics with acquire/release (invariant 2) and are
// immutable once published except for their atomic links; the arena is behind a mutex.
unsafe impl<O: KeyOrder> Send for SkipList<O> {}
unsafe impl<O: KeyOrder> Sync for SkipList<O> {}

impl<O: KeyOrder> SkipList<O> {
    #[cfg(test)]
    pub(crate) fn new() -> SkipList<O> {
        SkipList::new_in(None)
    }

    /// An empty list whose arena takes chunks from `pool` and gives them back when dropped.
    pub(crate) fn new_in(pool: Option<Arc<ChunkPool>>) -> SkipList<O> {
        let arena = Arena {
            chunks: Mutex::default(),
            pool,
        };
        let head = Self::alloc_node(&arena, MAX_HEIGHT, &[], NodeValue::Inline(&[]), 0).0;
        SkipList {
            head,
            height: AtomicUsize::new(1),
            arena,
            order: PhantomData,
        }
    }

    /// Allocates a node with a null tower; returns it and its size in bytes.
    fn alloc_node(
        arena: &Arena,
        height: usize,
        key: &[u8],
        value: NodeValue<'_>,
        aux: u32,
    ) -> (*const Node, usize) {
        let bytes = HEADER_BYTES + height * 8 + key.len() + value.node_bytes();
        let p = arena.alloc(bytes);
        let value_len = match value {
            NodeValue::Inline(v) => {
                assert!(v.len() < EXTERNAL as usize, "a value is shorter than 2 GiB");
                v.len() as u32
            }
            NodeValue::External { len, .. } => {
                assert!(len < EXTERNAL, "a value is shorter than 2 GiB");
                len | EXTERNAL
            }
        };
        // SAFETY: `p` is 8-aligned and `bytes` long; the tower is made null here (the
        // arena's memory may hold an earlier list's bytes).
        unsafe {
            ptr::write(
                p as *mut Node,
                Node {
                    key_len: key.len() as u32,
                    value_len,
                    height: height as u32,
                    aux,
                },
            );
            ptr::write_bytes(p.add(HEADER_BYTES), 0, height * 8);
            let data = p.add(HEADER_BYTES + height * 8);
            ptr::copy_nonoverlapping(key.as_ptr(), data, key.len());
            let v = data.add(key.len());
            match value {
                NodeValue::Inline(value) => {
                    ptr::copy_nonoverlapping(value.as_ptr(), v, value.len())
                }
                NodeValue::External { at, crc, .. } => {
                    ptr::write_unaligned(v as *mut usize, at as usize);
                    ptr::write_unaligned(v.add(8) as *mut u32, crc);
                }
            }
        }
        (p as *const Node, bytes.div_ceil(8) * 8)
    }

    fn node(&self, p: *const Node) -> &Node {
        // SAFETY: every non-null pointer in the list points into the arena, which lives as
        // long as `self` (invariant 3).
        unsafe { &*p }
    }

    /// Whether `key` sorts after node `n` (the head sorts before everything).
    fn after(&self, key: &[u8], n: *const Node) -> bool {
        n == self.head || O::cmp(self.node(n).key(), key) == Ordering::Less
    }

    /// Whether `key` sorts before node `n` (a null link sorts after everything).
    fn before(&self, key: &[u8], n: *const Node) -> bool {
        n.is_null() || O::cmp(key, self.node(n).key()) == Ordering::Less
    }

    /// From `before` (a node whose key is less than `key`, or the head) at `level`: the last
    /// node less than `key` and the first not less. `known_ge` is a node already known not
    /// less than `key` (where the level above stopped), or null: reaching it needs no
    /// comparison, since nodes never change.
    fn find_level(
        &self,
        key: &[u8],
        mut before: *const Node,
        level: usize,
        known_ge: *const Node,
    ) -> (*const Node, *const Node) {
        loop {
            let next: *const Node = self.node(before).next(level).load(AO::Acquire);
            if level > 0 {
                // Where the search goes if `next` ends this level: fetch it while `next` is
                // compared, so the two cache misses overlap (a lookup's time is almost all
                // such misses).
                prefetch(self.node(before).next(level - 1).load(AO::Relaxed));
            }
            if next.is_null()
                || next == known_ge
                || O::cmp(self.node(next).key(), key) != Ordering::Less
            {
                return (before, next);
            }
            before = next;
        }
    }

    /// Fills `s` for `key` from the head, at every level below the list's height.
    fn find_splice(&self, key: &[u8], s: &mut Splice) {
        let mut x = self.head;
        let mut ge: *const Node = ptr::null();
        let height = self.height.load(AO::Relaxed);
        for level in (0..MAX_HEIGHT).rev() {
            if level >= height {
                s.prev[level] = self.head;
                s.next[level] = ptr::null();
                continue;
            }
            (x, ge) = self.find_level(key, x, level, ge);
            s.prev[level] = x;
            s.next[level] = ge;
        }
    }

    /// Inserts `key` with `value` and `aux` (kept beside them, [`Node::aux`]), using and
    /// updating `splice` (fresh or from a previous insert into this list). Returns the bytes
    /// allocated, or 0 if an equal key was present.
    #[cfg(test)]
    pub(crate) fn insert(&self, splice: &mut Splice, key: &[u8], value: &[u8], aux: u32) -> usize {
        // SAFETY: an inline value is copied into the node.
        unsafe { self.insert_value(splice, key, NodeValue::Inline(value), aux) }
    }

    /// [`SkipList::insert`] of a value in the node or outside the list.
    ///
    /// # Safety
    ///
    /// For [`NodeValue::External`], `at` points to `len` readable bytes that stay valid and
    /// unchanged as long as this list lives (invariant 4).
    pub(crate) unsafe fn insert_value(
        &self,
        splice: &mut Splice,
        key: &[u8],
        value: NodeValue<'_>,
        aux: u32,
    ) -> usize {
        let height = random_height();
        let cur = self.height.load(AO::Relaxed);
        if height > cur {
            self.height.fetch_max(height, AO::Relaxed);
        }
        let mut prev = [ptr::null::<Node>(); MAX_HEIGHT];
        let mut next = [ptr::null::<Node>(); MAX_HEIGHT];
        // How far up `splice` was searched again (levels `0..=top`); above, it stays.
        let mut top = MAX_HEIGHT - 1;
        let found = !splice.last.is_null() && {
            let last = self.node(splice.last);
            match O::cmp(key, last.key()) {
                Ordering::Equal => return 0,
                Ordering::Greater => {
                    // A finger search: the lowest level whose gap after the last insert
                    // (from it, or from the node before it where it is not that tall) still
                    // holds `key`; from there down, as a search from the head would. A
                    // sorted batch's next key is usually a few nodes on at a low level,
                    // where a search from the head would pass every level.
                    let lh = last.height as usize;
                    let from = |i: usize| if i < lh { splice.last } else { splice.prev[i] };
                    let l = (0..MAX_HEIGHT).find(|&i| self.before(key, splice.next[i]));
                    // Every start must be less than `key`: `last` is; a remembered node
                    // above its height may not be (invariant 5), so it is compared.
                    let starts_below = |l: usize| {
                        (l.max(lh)..=l.max(height - 1)).all(|i| self.after(key, splice.prev[i]))
                    };
                    match l.filter(|&l| starts_below(l)) {
                        Some(l) => {
                            top = l.max(height - 1);
                            for i in (0..=top).rev() {
                                (prev[i], next[i]) = if i >= l {
                                    self.find_level(key, from(i), i, ptr::null())
                                } else {
                                    self.find_level(key, prev[i + 1], i, next[i + 1])
                                };
                            }
                            true
                        }
                        None => false,
                    }
                }
                Ordering::Less => {
                    // Between the last insert's predecessor and it? (Each start compared:
                    // invariant 5.)
                    if (0..height).all(|i| self.after(key, splice.prev[i])) {
                        top = height - 1;
                        for i in 0..height {
                            (prev[i], next[i]) =
                                self.find_level(key, splice.prev[i], i, ptr::null());
                        }
                        true
                    } else {
                        false
                    }
                }
            }
        };
        if !found {
            self.find_splice(key, splice);
            prev.copy_from_slice(&splice.prev);
            next.copy_from_slice(&splice.next);
        }
        if !next[0].is_null() && O::cmp(self.node(next[0]).key(), key) == Ordering::Equal {
            // `splice` may now bracket this key while `last` is older: start afresh.
            splice.last = ptr::null();
            return 0;
        }
        let (x, bytes) = Self::alloc_node(&self.arena, height, key, value, aux);
        let xn = self.node(x);
        for i in 0..height {
            loop {
                xn.next(i).store(next[i] as *mut Node, AO::Relaxed);
                match self.node(prev[i]).next(i).compare_exchange(
                    next[i] as *mut Node,
                    x as *mut Node,
                    AO::Release,
                    AO::Acquire,
                ) {
                    Ok(_) => break,
                    Err(_) => {
                        // Someone linked a node into this gap: search the level again from
                        // the node before it (still less than `key`).
                        let (p, n) = self.find_level(key, prev[i], i, ptr::null());
                        if i == 0
                            && !n.is_null()
                            && O::cmp(self.node(n).key(), key) == Ordering::Equal
                        {
                            // An equal key won the race at level 0; `x` stays unlinked
                            // (its bytes are wasted until the list is dropped).
                            splice.last = ptr::null();
                            return 0;
                        }
                        prev[i] = p;
                        next[i] = n;
                    }
                }
            }
        }
        // Remember the gaps for the next insert: those searched again, and above them what
        // they had (nodes before the previous key, and so before this one).
        splice.prev[..=top].copy_from_slice(&prev[..=top]);
        splice.next[..=top].copy_from_slice(&next[..=top]);
        splice.last = x;
        bytes
    }

    /// One descent from the head: the last node whose key is `< key` (the head if none) and
    /// the first whose key is `>= key` (null if none), both from the level-0 search, so a
    /// concurrent insert into that gap cannot put a smaller key in the second.
    fn descend(&self, key: &[u8]) -> (*const Node, *const Node) {
        let mut x = self.head;
        let mut ge: *const Node = ptr::null();
        for level in (0..self.height.load(AO::Relaxed)).rev() {
            (x, ge) = self.find_level(key, x, level, ge);
        }
        (x, ge)
    }

    /// The first node whose key is `>= key`, or null.
    pub(crate) fn seek_ge(&self, key: &[u8]) -> *const Node {
        self.descend(key).1
    }

    /// The last node whose key is `< key`, or null.
    pub(crate) fn seek_lt(&self, key: &[u8]) -> *const Node {
        match self.descend(key).0 {
            x if x == self.head => ptr::null(),
            x => x,
        }
    }

    /// The last node whose key is `<= key`, or null.
    pub(crate) fn seek_le(&self, key: &[u8]) -> *const Node {
        let (lt, ge) = self.descend(key);
        if !ge.is_null() && O::cmp(self.node(ge).key(), key) == Ordering::Equal {
            ge
        } else if lt == self.head {
            ptr::null()
        } else {
            lt
        }
    }

    /// The first node, or null.
    #[cfg(test)]
    pub(crate) fn first(&self) -> *const Node {
        self.node(self.head).next(0).load(AO::Acquire)
    }

    /// The last node, or null.
    pub(crate) fn last(&self) -> *const Node {
        let mut x = self.head;
        for level in (0..self.height.load(AO::Relaxed)).rev() {
            loop {
                let n = self.node(x).next(level).load(AO::Acquire);
                if n.is_null() {
                    break;
                }
                x = n;
            }
        }
        if x == self.head {
            ptr::null()
        } else {
            x
        }
    }

    /// The node after `n` (non-null, of this list), or null.
    pub(crate) fn next(&self, n: *const Node) -> *const Node {
        self.node(n).next(0).load(AO::Acquire)
    }

    /// Starts loading the node after `n` (non-null, of this list) into the cache, for a
    /// cursor about to hand `n` to its caller: a walk in key order visits nodes in
    /// insertion order's scatter, so each step is otherwise a cache miss of its own.
    pub(crate) fn prefetch_next(&self, n: *const Node) {
        prefetch(self.node(n).next(0).load(AO::Relaxed));
    }

    /// The node before `n` (non-null, of this list), or null: a search, as nodes have no
    /// back links.
    pub(crate) fn prev(&self, n: *const Node) -> *const Node {
        self.seek_lt(self.node(n).key())
    }

    /// The node behind a pointer this list returned. The reference lives as long as the list.
    pub(crate) fn get(&self, n: *const Node) -> &Node {
        self.node(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;
    use std::sync::Arc;

    /// A list's chunks go to its pool when it is dropped (up to the pool's size), the next
    /// list takes them, and its entries read back exactly: a node made in a used chunk has
    /// its own header and null links, not the last list's bytes.
    #[test]
    fn a_dropped_lists_chunks_are_reused_by_the_next_list() {
        let pool = Arc::new(ChunkPool::new(4 * CHUNK_BYTES as u64));
        let fill = |tag: u8, n: u32| {
            let l = SkipList::<Bytes>::new_in(Some(pool.clone()));
            let mut s = Splice::default();
            let mut want = Vec::new();
            for i in 0..n {
                // Descending then ascending runs, so towers of every height are made.
                let k = format!("{:08}-{tag}", (i * 7919) % n).into_bytes();
                l.insert(&mut s, &k, &[tag; 900], i);
                want.push(k);
            }
            want.sort();
            want.dedup();
            (l, want)
        };
        let (a, _) = fill(1, 12_000); // about 11 MB: six chunks
        assert_eq!(pool.bytes(), 0);
        drop(a);
        assert_eq!(
            pool.bytes(),
            4 * CHUNK_BYTES,
            "the pool keeps at most its size"
        );
        let (b, want) = fill(2, 3_000); // under 3 MB: two of the pool's chunks
        assert_eq!(pool.bytes(), 2 * CHUNK_BYTES);
        // A smaller list dropped: the pool keeps no more than that list had.
        let (c, _) = fill(3, 100); // one chunk, from the pool
        assert_eq!(pool.bytes(), CHUNK_BYTES);
        drop(c);
        assert_eq!(
            pool.bytes(),
            CHUNK_BYTES,
            "kept more than the last list had"
        );
        assert_eq!(collect(&b), want);
        let mut back = want.clone();
        back.reverse();
        assert_eq!(collect_back(&b), back);
        let mut n = b.first();
        while !n.is_null() {
            let node = b.get(n);
            assert_eq!(node.value(), &[2u8; 900][..]);
            // `aux` is the insert's index i, whose key was (i * 7919) % 3000.
            let k: u32 = std::str::from_utf8(&node.key()[..8])
                .unwrap()
                .parse()
                .unwrap();
            assert_eq!(
                (node.aux() * 7919) % 3_000,
                k,
                "a header left from the last list"
            );
            n = b.next(n);
        }
        for k in &want {
            assert_eq!(b.get(b.seek_ge(k)).key(), &k[..]);
        }
    }

    /// Every allocation is 8-aligned and its own: sizes that fill chunks unevenly, cross
    /// into new chunks and take oversized mappings of their own, each filled with its own
    /// byte, all intact at the end.
    #[test]
    fn arena_allocations_are_aligned_and_disjoint() {
        let arena = Arena::default();
        let sizes = [
            1,
            8,
            13,
            4096,
            100_000,
            CHUNK_BYTES / 4 + 8,
            7,
            CHUNK_BYTES - 16,
            64,
        ];
        let mut held: Vec<(*mut u8, usize, u8)> = Vec::new();
        for round in 0..6 {
            for (i, &n) in sizes.iter().enumerate() {
                let p = arena.alloc(n);
                assert_eq!(p as usize % 8, 0, "8-aligned");
                // SAFETY: `alloc` returned `n` bytes valid until `arena` is dropped.
                let bytes = unsafe { std::slice::from_raw_parts_mut(p, n) };
                let tag = (round * sizes.len() + i) as u8 | 1;
                bytes.fill(tag);
                held.push((p, n, tag));
            }
        }
        for &(p, n, tag) in &held {
            // SAFETY: as above; `arena` is still alive.
            let bytes = unsafe { std::slice::from_raw_parts(p, n) };
            assert!(
                bytes.iter().all(|&b| b == tag),
                "an allocation was overwritten"
            );
        }
    }

    /// Plain byte order.
    struct Bytes;
    impl KeyOrder for Bytes {
        fn cmp(a: &[u8], b: &[u8]) -> Ordering {
            a.cmp(b)
        }
    }

    fn collect(l: &SkipList<Bytes>) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut n = l.first();
        while !n.is_null() {
            out.push(l.get(n).key().to_vec());
            n = l.next(n);
        }
        out
    }

    fn collect_back(l: &SkipList<Bytes>) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut n = l.last();
        while !n.is_null() {
            out.push(l.get(n).key().to_vec());
            n = l.prev(n);
        }
        out
    }

    fn key_of(l: &SkipList<Bytes>, n: *const Node) -> Option<Vec<u8>> {
        (!n.is_null()).then(|| l.get(n).key().to_vec())
    }

    /// How a batch of keys is ordered before it is inserted with one splice.
    #[derive(Debug, Clone)]
    enum Order {
        Asc,
        Desc,
        AsIs,
    }

    proptest! {
        #[test]
        fn matches_a_sorted_set(
            batches in prop::collection::vec(
                (prop::collection::vec(prop::collection::vec(0u8..4, 0..4), 0..40),
                 prop_oneof![Just(Order::Asc), Just(Order::Desc), Just(Order::AsIs)]),
                0..12),
            probes in prop::collection::vec(prop::collection::vec(0u8..4, 0..4), 0..20),
        ) {
            let l = SkipList::<Bytes>::new();
            let mut model = BTreeSet::new();
            for (mut keys, order) in batches {
                match order {
                    Order::Asc => keys.sort(),
                    Order::Desc => { keys.sort(); keys.reverse() }
                    Order::AsIs => {}
                }
                let mut s = Splice::default();
                for k in keys {
                    let v = [k.len() as u8; 3];
                    let added = l.insert(&mut s, &k, &v, 0) > 0;
                    prop_assert_eq!(added, model.insert(k.clone()), "insert {:?}", k);
                }
            }
            let want: Vec<Vec<u8>> = model.iter().cloned().collect();
            prop_assert_eq!(collect(&l), want.clone());
            let mut back = want.clone();
            back.reverse();
            prop_assert_eq!(collect_back(&l), back);
            for n in { let mut v = Vec::new(); let mut n = l.first(); while !n.is_null() { v.push(n); n = l.next(n); } v } {
                let node = l.get(n);
                prop_assert_eq!(node.value(), &[node.key().len() as u8; 3][..]);
            }
            for p in probes {
                prop_assert_eq!(key_of(&l, l.seek_ge(&p)), model.range(p.clone()..).next().cloned());
                prop_assert_eq!(key_of(&l, l.seek_lt(&p)), model.range(..p.clone()).next_back().cloned());
                prop_assert_eq!(key_of(&l, l.seek_le(&p)), model.range(..=p.clone()).next_back().cloned());
            }
        }
    }

    /// Invariant 5: a splice can remember, above level 0, a node after its last insert
    /// (the state a failed CAS at level 1 leaves, set here by hand); an ascending insert
    /// after a descending one must not start from it. Before the check, 45 went in after
    /// 50 at level 0 and `seek_ge(45)` found 50.
    #[test]
    fn a_remembered_node_after_the_key_is_never_a_start() {
        let k = |x: u64| x.to_be_bytes();
        let with_height = |h: usize| NEXT_HEIGHT.with(|c| c.set(h));
        let l = SkipList::<Bytes>::new();
        let mut s = Splice::default();
        with_height(2);
        assert!(l.insert(&mut s, &k(100), b"", 0) > 0);
        with_height(2);
        assert!(l.insert(&mut Splice::default(), &k(50), b"", 0) > 0);
        // As if 50 had been linked at level 1 while `s`'s insert of 100 linked level 0,
        // and that level was searched again: 50 before 100 there, remembered.
        (s.prev[0], s.next[0]) = (l.head, ptr::null());
        (s.prev[1], s.next[1]) = (l.seek_ge(&k(50)), ptr::null());
        with_height(1);
        assert!(l.insert(&mut Splice::default(), &k(40), b"", 0) > 0);
        // Descending (30 < 100), then ascending (45 > 30): level 1's gap after 50 holds 45.
        with_height(1);
        assert!(l.insert(&mut s, &k(30), b"", 0) > 0);
        with_height(1);
        assert!(l.insert(&mut s, &k(45), b"", 0) > 0);
        let want: Vec<Vec<u8>> = [30u64, 40, 45, 50, 100]
            .iter()
            .map(|&x| k(x).to_vec())
            .collect();
        assert_eq!(collect(&l), want);
        assert_eq!(key_of(&l, l.seek_ge(&k(45))), Some(k(45).to_vec()));
    }

    #[test]
    fn concurrent_inserts_and_readers_keep_order_and_lose_nothing() {
        const THREADS: u64 = 4;
        const PER: u64 = 20_000;
        fn run_key(run: u64, j: u64) -> u64 {
            let i = run * 50 + j;
            match run % 4 {
                0 => i,
                1 => run * 50 + 49 - j,
                2 => (i * 7919) % PER,
                _ => j * (PER / 50) + run,
            }
        }
        let l = Arc::new(SkipList::<Bytes>::new());
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = {
            let (l, done) = (l.clone(), done.clone());
            std::thread::spawn(move || {
                let mut passes = 0u64;
                while !done.load(AO::Acquire) || passes == 0 {
                    if passes % 64 == 0 {
                        let keys = collect(&l);
                        assert!(keys.windows(2).all(|w| w[0] < w[1]), "out of order");
                    }
                    // Seeks racing with inserts into the gap they land in: the answer must
                    // still be on the right side of the probe.
                    let g = passes % (THREADS / 2);
                    let probe = ((g << 32) | ((passes * 7) % PER)).to_be_bytes();
                    if let Some(k) = key_of(&l, l.seek_ge(&probe)) {
                        assert!(k[..] >= probe[..], "seek_ge({probe:?}) gave {k:?}");
                    }
                    if let Some(k) = key_of(&l, l.seek_lt(&probe)) {
                        assert!(k[..] < probe[..], "seek_lt({probe:?}) gave {k:?}");
                    }
                    passes += 1;
                }
            })
        };
        let writers: Vec<_> = (0..THREADS)
            .map(|t| {
                let l = l.clone();
                std::thread::spawn(move || {
                    let mut added = 0u64;
                    // Runs of 50 keys: ascending, descending, scattered, or ascending
                    // far apart (each a finger search over other runs' keys); every key
                    // is also inserted by one other thread (the duplicate race).
                    for run in 0..(PER / 50) {
                        let mut s = Splice::default();
                        for j in 0..50u64 {
                            let k = run_key(run, j);
                            // Key space shared by threads t and t ^ 1.
                            let key = ((t / 2) << 32 | k).to_be_bytes();
                            if l.insert(&mut s, &key, &key, 0) > 0 {
                                added += 1;
                            }
                        }
                    }
                    added
                })
            })
            .collect();
        let added: u64 = writers.into_iter().map(|w| w.join().unwrap()).sum();
        done.store(true, AO::Release);
        reader.join().unwrap();
        let keys = collect(&l);
        let distinct: BTreeSet<u64> = (0..THREADS / 2)
            .flat_map(|g| {
                (0..PER / 50)
                    .flat_map(move |run| (0..50u64).map(move |j| g << 32 | run_key(run, j)))
            })
            .collect();
        assert_eq!(
            added as usize,
            distinct.len(),
            "each distinct key added once"
        );
        let want: Vec<Vec<u8>> = distinct.iter().map(|k| k.to_be_bytes().to_vec()).collect();
        assert_eq!(keys, want);
        for k in &want {
            let n = l.seek_ge(k);
            assert_eq!(l.get(n).value(), &k[..]);
        }
    }

    #[test]
    fn seeks_racing_an_insert_into_their_gap_land_on_the_right_side() {
        // The list holds 4i; a writer inserts 4i + 1 in order while a reader seeks 4i + 2
        // just ahead of it: a seek that re-read the link after its search would return the
        // new 4i + 1, which is less than the probe (the kill -9 test's torn snapshot read).
        const N: u64 = 200_000;
        let l = Arc::new(SkipList::<Bytes>::new());
        let mut s = Splice::default();
        for i in 0..N {
            l.insert(&mut s, &(4 * i).to_be_bytes(), b"", 0);
        }
        let progress = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let writer = {
            let (l, progress) = (l.clone(), progress.clone());
            std::thread::spawn(move || {
                let mut s = Splice::default();
                for i in 0..N {
                    progress.store(i, AO::Relaxed);
                    l.insert(&mut s, &(4 * i + 1).to_be_bytes(), b"", 0);
                }
                progress.store(N, AO::Relaxed);
            })
        };
        loop {
            let i = progress.load(AO::Relaxed);
            if i >= N {
                break;
            }
            // Up to N - 2: the probe after the last key (4(N-1) + 2) has no successor.
            for j in i..(i + 4).min(N - 1) {
                let probe = (4 * j + 2).to_be_bytes();
                let got = key_of(&l, l.seek_ge(&probe)).expect("4(j+1) or beyond");
                assert!(got[..] >= probe[..], "seek_ge({probe:?}) gave {got:?}");
            }
        }
        writer.join().unwrap();
    }

    #[test]
    fn large_nodes_get_their_own_chunk() {
        let l = SkipList::<Bytes>::new();
        let big = vec![7u8; CHUNK_BYTES];
        let mut s = Splice::default();
        assert!(l.insert(&mut s, b"b", &big, 0) >= CHUNK_BYTES);
        assert!(l.insert(&mut s, b"a", b"small", 0) > 0);
        assert_eq!(l.get(l.seek_ge(b"b")).value(), &big[..]);
        assert_eq!(collect(&l), vec![b"a".to_vec(), b"b".to_vec()]);
    }

    #[test]
    fn external_values_are_read_where_they_lie_beside_inline_ones() {
        // Odd keys' values lie outside the list (in `outside`, which outlives it); even
        // keys' are copied. Keys of every length, so the address after the key is unaligned.
        let outside: Vec<Vec<u8>> = (0..64u32)
            .map(|i| {
                format!("outside value {i}")
                    .repeat(i as usize + 1)
                    .into_bytes()
            })
            .collect();
        let l = SkipList::<Bytes>::new();
        let mut s = Splice::default();
        let key = |i: u32| format!("{i:03}{}", "k".repeat(i as usize % 7)).into_bytes();
        for i in (0..64u32).rev() {
            let k = key(i);
            let v = &outside[i as usize];
            let value = if i % 2 == 1 {
                NodeValue::External {
                    at: v.as_ptr(),
                    len: v.len() as u32,
                    crc: crc32c::crc32c(v),
                }
            } else {
                NodeValue::Inline(v)
            };
            // SAFETY: `outside` outlives the list, unchanged.
            let bytes = unsafe { l.insert_value(&mut s, &k, value, i + 1) };
            // An external value takes its address and crc in the node, not its bytes.
            let in_node = if i % 2 == 1 { EXTERNAL_BYTES } else { v.len() };
            let least = HEADER_BYTES + 8 + k.len() + in_node;
            let most = HEADER_BYTES + MAX_HEIGHT * 8 + k.len() + in_node + 7;
            assert!((least..=most).contains(&bytes), "key {i}: {bytes} bytes");
        }
        for i in 0..64u32 {
            let n = l.get(l.seek_ge(&key(i)));
            let v = &outside[i as usize];
            assert_eq!(n.key(), &key(i)[..]);
            assert_eq!(n.value(), &v[..], "key {i}");
            assert_eq!(n.aux(), i + 1);
            let crc = (i % 2 == 1).then(|| crc32c::crc32c(v));
            assert_eq!(n.external_crc(), crc, "key {i}");
        }
        // The external node's value is where the caller said: same address, no copy.
        let n = l.get(l.seek_ge(&key(5)));
        assert_eq!(n.value().as_ptr(), outside[5].as_ptr());
    }

    #[test]
    fn heights_follow_a_quarter_branching() {
        let mut counts = [0u32; MAX_HEIGHT + 1];
        for _ in 0..100_000 {
            counts[random_height()] += 1;
        }
        assert_eq!(counts[0], 0);
        // About 75% at height 1 and 18.75% at 2 (loose bounds: a behaviour check).
        assert!((70_000..80_000).contains(&counts[1]), "{counts:?}");
        assert!((15_000..23_000).contains(&counts[2]), "{counts:?}");
    }
}
