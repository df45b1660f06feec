//! [`FillRing`]: the contiguous "filled" watermark of the commit path.
//!
//! Committers reserve disjoint byte ranges in LSN order, but finish copying them in any
//! order. [`FillRing`] turns those out-of-order completions into one monotonic watermark,
//! `filled`: every byte below it belongs to a record whose bytes are all in the OS. Only the
//! prefix below `filled` may be synced and acknowledged, so recovery can never find commit
//! k+1 without commit k below the durable point.
//!
//! ## How (a "link buffer", as InnoDB's `recent_written`)
//!
//! A ring of `SLOTS` atomic words indexed by `(start / 8) % SLOTS`. A committer whose record
//! spans `start..end` stores `end` in `start`'s slot, then tries to advance. Advancing reads
//! `f = filled` and `e = slot[f]`; if `e > f` the record at `f` is complete and
//! `filled.compare_exchange(f, e)` moves the watermark (the winner then clears the slot).
//!
//! Invariants:
//! 1. A committer publishes only once `start - filled < WINDOW_BYTES` (it copies first,
//!    then waits), so every occupied slot belongs to exactly one in-flight start.
//! 2. `filled` only grows, and only to a published `end`. A CAS from a stale `f` fails, so
//!    a value read from a slot is trusted only while `filled == f`.
//! 3. A slot holding a value `<= filled` is stale (already consumed) and is ignored.
//! 4. Publish (store slot, fence, load filled) and advance (CAS filled, fence, load slot)
//!    are separated by `SeqCst` fences, so of a publisher and a concurrent advancer at least
//!    one sees the other's store: no completion is left behind the watermark. (Fences, not
//!    just `SeqCst` accesses: that is what the C++11 model — and loom — guarantee.)

use std::sync::atomic::Ordering::SeqCst;

use crate::sync_shim::{fence, AtomicU64};

/// Slots in the ring. With 8-byte granularity this bounds in-flight starts to 512 KiB.
#[cfg(not(loom))]
const SLOTS: usize = 1 << 16;
/// A ring of 4 slots lets loom explore slot reuse within a few records.
#[cfg(loom)]
const SLOTS: usize = 4;
/// How far ahead of `filled` a record may start before its committer waits.
pub(crate) const WINDOW_BYTES: u64 = (SLOTS as u64) * 8;

pub(crate) struct FillRing {
    slots: Box<[AtomicU64]>,
    filled: AtomicU64,
}

/// `SLOTS` zeroed slots from a zeroed allocation: 512 KiB the allocator takes as fresh zero
/// pages, faulted in only where records land, instead of 512 KiB written at every open.
#[cfg(not(loom))]
fn zeroed_slots() -> Box<[AtomicU64]> {
    // `vec![0; n]` allocates zeroed memory (calloc) rather than writing zeros.
    let zeros: Box<[u64]> = vec![0u64; SLOTS].into_boxed_slice();
    // SAFETY: `AtomicU64` has the size, alignment and bit validity of `u64` (documented), so
    // a boxed `[u64]` is a valid boxed `[AtomicU64]` of the same length, from the same
    // allocation and layout; zero is `AtomicU64::new(0)`.
    unsafe { Box::from_raw(Box::into_raw(zeros) as *mut [AtomicU64]) }
}

#[cfg(loom)]
fn zeroed_slots() -> Box<[AtomicU64]> {
    (0..SLOTS).map(|_| AtomicU64::new(0)).collect()
}

impl FillRing {
    pub(crate) fn new(start: u64) -> Self {
        FillRing {
            slots: zeroed_slots(),
            filled: AtomicU64::new(start),
        }
    }

    #[inline]
    fn slot(&self, pos: u64) -> &AtomicU64 {
        &self.slots[(pos / 8) as usize % SLOTS]
    }

    /// The watermark: every byte below it is in the OS.
    #[inline]
    pub(crate) fn filled(&self) -> u64 {
        self.filled.load(SeqCst)
    }

    /// Whether a record starting at `start` may be published now (invariant 1).
    #[inline]
    pub(crate) fn in_window(&self, start: u64) -> bool {
        start - self.filled() < WINDOW_BYTES
    }

    /// Records that `start..end` is completely written. REQUIRES: `in_window(start)` held
    /// at some point after `start` was reserved. Returns whether the watermark moved.
    pub(crate) fn publish(&self, start: u64, end: u64) -> bool {
        debug_assert!(end > start);
        // A swap, not a store: every access to a slot is then a read-modify-write, totally
        // ordered with the advancer's clearing CAS (on x86 a SeqCst store is an xchg anyway).
        let stale = self.slot(start).swap(end, SeqCst);
        debug_assert!(
            stale <= self.filled(),
            "slot {start} still held a live record"
        );
        self.advance()
    }

    fn advance(&self) -> bool {
        let mut moved = false;
        loop {
            fence(SeqCst);
            let f = self.filled.load(SeqCst);
            let slot = self.slot(f);
            let e = slot.load(SeqCst);
            if e <= f {
                return moved;
            }
            if self.filled.compare_exchange(f, e, SeqCst, SeqCst).is_ok() {
                // Clear only if it still holds our value: a record starting one window later
                // may already have reused the slot.
                let _ = slot.compare_exchange(e, 0, SeqCst, SeqCst);
                moved = true;
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn out_of_order_completions_advance_only_contiguously() {
        let r = FillRing::new(64);
        assert!(!r.publish(104, 200));
        assert_eq!(r.filled(), 64);
        assert!(r.publish(64, 104));
        assert_eq!(r.filled(), 200);
    }

    #[test]
    fn a_record_as_long_as_the_window_reuses_its_slot_safely() {
        let r = FillRing::new(0);
        r.publish(0, WINDOW_BYTES);
        assert_eq!(r.filled(), WINDOW_BYTES);
        r.publish(WINDOW_BYTES + 8, WINDOW_BYTES + 16);
        assert_eq!(r.filled(), WINDOW_BYTES);
        r.publish(WINDOW_BYTES, WINDOW_BYTES + 8);
        assert_eq!(r.filled(), WINDOW_BYTES + 16);
    }

    #[test]
    fn many_threads_publishing_in_random_order_end_at_the_total() {
        let r = Arc::new(FillRing::new(0));
        let next = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let r = r.clone();
                let next = next.clone();
                std::thread::spawn(move || {
                    for i in 0..20_000u64 {
                        let len = 8 * (1 + (i * 7 + t) % 13);
                        let start = next.fetch_add(len, SeqCst);
                        while !r.in_window(start) {
                            std::thread::yield_now();
                        }
                        r.publish(start, start + len);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(r.filled(), next.load(SeqCst));
    }
}
