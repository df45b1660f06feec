//! [`MemBloom`]: a concurrent bloom filter over the user keys of one memtable, so a point
//! read of a key the memtable does not hold skips its skip-list search (RocksDB's
//! `memtable_whole_key_filtering`).
//!
//! A memtable of 64 MiB holds hundreds of thousands of nodes; a search for a key it does
//! not hold still descends every level, about one cache miss per level. Reads of rows
//! that were not written lately (most of TPC-C's item, stock and customer reads, and the
//! commit-time validation of what a transaction read) miss the active memtable and each
//! frozen one, and paid for those searches: 11% of the CPU of `silt-bench --workloads
//! tpcc`, profiled.
//!
//! ## Layout and probes
//!
//! The filter is `blocks` cache lines of 512 bits (8 × `AtomicU64`), `blocks` a power of
//! two. A key's hash `h` (xxh3-64 of the user key, mixed with the column family) picks one
//! block with its low bits, and [`PROBES`] bit positions inside it with 9-bit slices of a
//! second mix of `h`: one cache line per insert and per lookup (a blocked bloom filter,
//! as RocksDB's `DynamicBloom`). At 2% of the memtable budget (1 MiB
//! for 64 MiB, the size rounded down to a power of two of blocks) a memtable of 100-byte
//! values has about 18 bits per key, and a false
//! positive costs only the search the filter would have saved.
//!
//! ## Invariant
//!
//! B1. A key's bits are set before [`crate::memtable::Memtable::insert_with`] returns,
//!     so before its writer marks the entry applied and before its seqno is published.
//!     Every reader that must see an entry learns of it through one of those two (the
//!     visible seqno of a snapshot read; `wait_applied_below` of a transaction's
//!     commit-time check), both sequentially consistent, and so also sees its bits: the
//!     filter never answers "absent" for a key such a reader must find. (A read racing an
//!     unpublished write may miss it, as if it ran just before the write.) Bits are only
//!     ever set, so the relaxed `fetch_or`s of concurrent writers cannot undo each other.
//!
//! The bits are set after the node is linked, not before, so that the line can be
//! prefetched before the skip list's search and is in cache when the bits are set: set
//! first, its miss was 4% of a random fill's CPU (`perf annotate`).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use xxhash_rust::xxh3::xxh3_64;

/// Bits set per key, all in one 512-bit block.
const PROBES: u32 = 6;

const WORDS_PER_BLOCK: usize = 8;

/// A fixed-size, insert-only bloom filter that writers and readers share without locks.
pub(crate) struct MemBloom {
    words: Box<[AtomicU64]>,
    /// `blocks - 1`, `blocks` a power of two.
    block_mask: u64,
}

impl std::fmt::Debug for MemBloom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemBloom")
            .field("bytes", &self.bytes())
            .finish()
    }
}

/// The filter's hash of a key: xxh3-64 of the user key, with the column family mixed in.
#[inline]
pub(crate) fn hash(cf: u32, user_key: &[u8]) -> u64 {
    xxh3_64(user_key) ^ (u64::from(cf).wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

impl MemBloom {
    /// A filter of about `bytes` bytes (rounded down to a power of two of 64-byte blocks,
    /// at least one block).
    pub(crate) fn with_bytes(bytes: u64) -> MemBloom {
        let blocks = 1u64 << (bytes / 64).max(1).ilog2();
        let words = (0..blocks as usize * WORDS_PER_BLOCK)
            .map(|_| AtomicU64::new(0))
            .collect();
        MemBloom {
            words,
            block_mask: blocks - 1,
        }
    }

    /// The filter's size in bytes.
    pub(crate) fn bytes(&self) -> usize {
        self.words.len() * 8
    }

    /// The first word of the block of `h` (its low bits).
    #[inline]
    fn block(&self, h: u64) -> usize {
        ((h & self.block_mask) as usize) * WORDS_PER_BLOCK
    }

    /// The block's first word and the mask each of its 8 words must hold for `h`.
    #[inline]
    fn probes(&self, h: u64) -> (usize, [u64; WORDS_PER_BLOCK]) {
        let first = self.block(h);
        // A second, independent-looking mix for the positions inside the block: the low
        // bits of `h` already chose the block.
        let mut g = h.rotate_right(32).wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
        let mut masks = [0u64; WORDS_PER_BLOCK];
        for _ in 0..PROBES {
            let bit = (g >> 55) as usize; // top 9 bits: 0..512
            masks[bit / 64] |= 1 << (bit % 64);
            g <<= 9;
        }
        (first, masks)
    }

    /// Starts loading the block of hash `h` into the cache, so a later [`MemBloom::insert`]
    /// of it does not wait.
    #[inline]
    pub(crate) fn prefetch(&self, h: u64) {
        super::prefetch(&self.words[self.block(h)]);
    }

    /// Records the key with hash `h` (see [`hash`]). Invariant B1: call before the insert
    /// of its entry returns.
    #[inline]
    pub(crate) fn insert(&self, h: u64) {
        let (first, masks) = self.probes(h);
        for (i, &m) in masks.iter().enumerate() {
            if m != 0 {
                let w = &self.words[first + i];
                // A key written again (its bits already set) leaves the line clean.
                if w.load(Relaxed) & m != m {
                    w.fetch_or(m, Relaxed);
                }
            }
        }
    }

    /// `false` if no key with hash `h` was inserted; `true` if one may have been.
    #[inline]
    pub(crate) fn may_contain(&self, h: u64) -> bool {
        let (first, masks) = self.probes(h);
        masks
            .iter()
            .enumerate()
            .all(|(i, &m)| m == 0 || self.words[first + i].load(Relaxed) & m == m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_round_down_to_a_power_of_two_of_blocks() {
        assert_eq!(MemBloom::with_bytes(0).bytes(), 64);
        assert_eq!(MemBloom::with_bytes(64).bytes(), 64);
        assert_eq!(MemBloom::with_bytes(1000).bytes(), 512);
        assert_eq!(MemBloom::with_bytes(1 << 20).bytes(), 1 << 20);
        assert_eq!(MemBloom::with_bytes((1 << 20) + 5000).bytes(), 1 << 20);
    }

    #[test]
    fn every_inserted_key_is_found_and_few_others_are() {
        // 64 KiB for 20,000 keys: about 26 bits per key.
        let f = MemBloom::with_bytes(64 << 10);
        for i in 0..20_000u32 {
            f.insert(hash(i % 3, format!("key{i}").as_bytes()));
        }
        for i in 0..20_000u32 {
            assert!(f.may_contain(hash(i % 3, format!("key{i}").as_bytes())));
        }
        let fp = (0..100_000u32)
            .filter(|i| f.may_contain(hash(0, format!("other{i}").as_bytes())))
            .count();
        // A blocked filter at 26 bits per key and 6 probes: well under 1% (about 0.1%).
        assert!(fp < 1_000, "{fp} false positives in 100,000");
        // The column family is part of the key.
        let in_other_cf = (0..20_000u32)
            .filter(|&i| i % 3 == 0)
            .filter(|&i| f.may_contain(hash(7, format!("key{i}").as_bytes())))
            .count();
        assert!(in_other_cf < 200, "{in_other_cf}");
    }

    #[test]
    fn an_empty_filter_contains_nothing() {
        let f = MemBloom::with_bytes(4096);
        assert!((0..1000u32).all(|i| !f.may_contain(hash(0, &i.to_be_bytes()))));
    }

    #[test]
    fn concurrent_inserts_lose_no_bits() {
        let f = std::sync::Arc::new(MemBloom::with_bytes(4096)); // 64 blocks: many collide
        let threads: Vec<_> = (0..4u32)
            .map(|t| {
                let f = f.clone();
                std::thread::spawn(move || {
                    for i in 0..5_000u32 {
                        f.insert(hash(0, format!("{t}-{i}").as_bytes()));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        for t in 0..4u32 {
            for i in 0..5_000u32 {
                assert!(f.may_contain(hash(0, format!("{t}-{i}").as_bytes())));
            }
        }
    }
}
