//! The contiguous "filled" watermark and the waiting primitive the commit path shares.
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
//! 1. A committer publishes only once `start - filled < WINDOW_BYTES` (it waits before
//!    copying), so every occupied slot belongs to exactly one in-flight start.
//! 2. `filled` only grows, and only to a published `end`. A CAS from a stale `f` fails, so
//!    a value read from a slot is trusted only while `filled == f`.
//! 3. A slot holding a value `<= filled` is stale (already consumed) and is ignored.
//! 4. Publish (store slot, fence, load filled) and advance (CAS filled, fence, load slot)
//!    are separated by `SeqCst` fences, so of a publisher and a concurrent advancer at least
//!    one sees the other's store: no completion is left behind the watermark. (Fences, not
//!    just `SeqCst` accesses: that is what the C++11 model — and loom — guarantee.)

use std::sync::atomic::Ordering::SeqCst;
use std::time::{Duration, Instant};

use crate::sync_shim::{fence, yield_now, AtomicBool, AtomicU64, AtomicUsize, Condvar, Mutex};

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

impl FillRing {
    pub(crate) fn new(start: u64) -> Self {
        FillRing {
            slots: (0..SLOTS).map(|_| AtomicU64::new(0)).collect(),
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

/// Something waited for: threads spin briefly, then yield, then park on a condvar.
///
/// Waking costs nothing when no thread is parked (one atomic load), which keeps a lone
/// writer's path free of syscalls.
pub(crate) struct Event {
    parked: AtomicUsize,
    lock: Mutex<()>,
    cv: Condvar,
}

/// How long a waiter spins, then yields, before it parks. Tuned on this project's machines:
/// an fdatasync takes ~50 µs and a futex wake 3–10 µs, so yielding through most of one sync
/// keeps the hand-off cheap while a parked thread costs no CPU.
/// A `sched_yield` that took longer than this gave the core to another process for a time
/// slice (on an idle core it returns in about a microsecond, and this log's own threads
/// hand it back within tens of µs; a CPU-bound process holds it for ~4 ms here): waiters
/// stop yielding and park, and a syncer stops gathering (`Inner::gather`), because on a
/// machine loaded by others every further yield may cost milliseconds while a wake-up from
/// a condvar preempts. Measured with 2 ms against 0.2, 1 and 3 ms: 0.2 and 1 ms also fire
/// on an idle machine with 8 committers (15% fewer commits/s there); 2 and 3 ms do not,
/// and all four catch two busy-looping processes.
pub(crate) const YIELD_OVERRUN: Duration = Duration::from_millis(2);

/// For this long after a yield overran, nobody yields at all: waiters park at once and a
/// syncer does not gather. Each overrun costs a time slice; on a machine loaded by other
/// processes, yielding again would cost one on every commit.
const CONTENDED_FOR: Duration = Duration::from_millis(100);

/// When a yield last overran, in ns since `clock_epoch()` (0: never).
static LAST_OVERRUN_NS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn clock_ns() -> u64 {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    // +1: 0 means "never".
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64 + 1
}

/// Yields once; whether that yield overran [`YIELD_OVERRUN`] (and so marks the machine
/// contended for [`CONTENDED_FOR`]).
pub(crate) fn timed_yield() -> bool {
    let t = Instant::now();
    yield_now();
    let over = t.elapsed() > YIELD_OVERRUN;
    if over {
        LAST_OVERRUN_NS.store(clock_ns(), std::sync::atomic::Ordering::Relaxed);
    }
    over
}

/// Whether a yield overran within the last [`CONTENDED_FOR`].
pub(crate) fn contended() -> bool {
    let last = LAST_OVERRUN_NS.load(std::sync::atomic::Ordering::Relaxed);
    last != 0 && clock_ns().saturating_sub(last) < CONTENDED_FOR.as_nanos() as u64
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Backoff {
    pub spin: Duration,
    pub yield_for: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            spin: Duration::from_micros(2),
            yield_for: Duration::from_micros(30),
        }
    }
}

impl Event {
    pub(crate) fn new() -> Self {
        Event {
            parked: AtomicUsize::new(0),
            lock: Mutex::new(()),
            cv: Condvar::new(),
        }
    }

    /// Wakes every parked waiter. Call after making the awaited condition true.
    #[inline]
    pub(crate) fn notify(&self) {
        // Pairs with the fence in `wait`: either the waiter sees the new condition, or we
        // see it parked.
        fence(SeqCst);
        if self.parked.load(SeqCst) > 0 {
            drop(self.lock.lock());
            self.cv.notify_all();
        }
    }

    /// Returns once `ready()` is true. `ready` must become true only through changes that
    /// are followed by [`Event::notify`].
    pub(crate) fn wait(&self, backoff: Backoff, mut ready: impl FnMut() -> bool) {
        if ready() {
            return;
        }
        // Under loom there is no clock: go straight to the parking protocol, the part whose
        // races matter.
        let start = Instant::now();
        while !cfg!(loom) && start.elapsed() < backoff.spin {
            for _ in 0..32 {
                std::hint::spin_loop();
            }
            if ready() {
                return;
            }
        }
        // On a machine loaded by other processes a yield can cost a time slice, while a
        // parked thread's wake-up preempts: then park at once.
        while !cfg!(loom) && !contended() && start.elapsed() < backoff.spin + backoff.yield_for {
            let over = timed_yield();
            if ready() {
                return;
            }
            if over {
                break;
            }
        }
        let mut guard = self.lock.lock();
        self.parked.fetch_add(1, SeqCst);
        fence(SeqCst);
        while !ready() {
            self.cv.wait(&mut guard);
        }
        self.parked.fetch_sub(1, SeqCst);
    }
}

/// What [`SyncStream::sync_to`] needs from the log around it.
pub(crate) trait SyncEnv {
    type Error;
    /// The filled watermark.
    fn filled(&self) -> u64;
    /// Blocks until `filled() >= need` or the log is poisoned.
    fn wait_filled(&self, need: u64);
    /// `Err` once the log is poisoned: no sync may start after that.
    fn check(&self) -> Result<(), Self::Error>;
    /// Makes `from..to` durable (`fdatasync`). On failure the environment poisons itself.
    fn sync(&self, from: u64, to: u64) -> Result<(), Self::Error>;
    /// Called after `durable` was raised to `to`.
    fn synced(&self, to: u64);
    /// Called by the syncer just before it reads `filled`: a chance to let committers that
    /// are about to arrive join this sync (see `Inner::gather`).
    fn gather(&self) {}
}

/// The one sync stream of a log: the durable watermark and who is syncing.
///
/// A committer that needs `durable >= need` returns at once if it already holds; otherwise
/// it waits for `filled >= need`, then either becomes the syncer (one CAS) and syncs
/// everything filled at that moment, or waits for the running sync and tries again. No timer:
/// a sync starts the moment someone needs one and no sync is running; everyone who arrived
/// meanwhile rides the next one.
///
/// Invariants: at most one sync runs at a time; successive syncs cover contiguous ranges
/// `durable..filled`; `durable` only takes values `filled` had.
pub(crate) struct SyncStream {
    durable: AtomicU64,
    syncing: AtomicBool,
    pub(crate) ev: Event,
}

impl SyncStream {
    pub(crate) fn new(durable: u64) -> Self {
        SyncStream {
            durable: AtomicU64::new(durable),
            syncing: AtomicBool::new(false),
            ev: Event::new(),
        }
    }

    #[inline]
    pub(crate) fn durable(&self) -> u64 {
        self.durable.load(SeqCst)
    }

    /// Raises `durable` (a caller that synced on its own, as `DirectPwrite` does) and wakes
    /// waiters.
    pub(crate) fn advance(&self, to: u64) {
        self.durable.fetch_max(to, SeqCst);
        self.ev.notify();
    }

    /// Returns once `durable >= need`, syncing if no one else is.
    pub(crate) fn sync_to<E: SyncEnv>(
        &self,
        need: u64,
        backoff: Backoff,
        env: &E,
    ) -> Result<(), E::Error> {
        loop {
            if self.durable() >= need {
                return Ok(());
            }
            env.check()?;
            if env.filled() < need {
                env.wait_filled(need);
                continue;
            }
            if self.try_sync(env)? {
                continue;
            }
            self.ev.wait(backoff, || {
                self.durable() >= need || !self.syncing.load(SeqCst) || env.check().is_err()
            });
        }
    }

    /// Syncs everything filled now, waiting for a running sync to end first.
    pub(crate) fn sync_all<E: SyncEnv>(&self, backoff: Backoff, env: &E) -> Result<(), E::Error> {
        loop {
            env.check()?;
            if self.try_sync(env)? {
                return Ok(());
            }
            self.ev.wait(backoff, || {
                !self.syncing.load(SeqCst) || env.check().is_err()
            });
        }
    }

    /// Becomes the syncer if no one is, and syncs `durable..filled`. `Ok(false)`: someone
    /// else is syncing.
    fn try_sync<E: SyncEnv>(&self, env: &E) -> Result<bool, E::Error> {
        if self
            .syncing
            .compare_exchange(false, true, SeqCst, SeqCst)
            .is_err()
        {
            return Ok(false);
        }
        let r = (|| {
            env.check()?;
            env.gather();
            let from = self.durable();
            let to = env.filled();
            if to > from {
                env.sync(from, to)?;
                self.durable.fetch_max(to, SeqCst);
                env.synced(to);
            }
            Ok(())
        })();
        self.syncing.store(false, SeqCst);
        self.ev.notify();
        r.map(|()| true)
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

#[cfg(loom)]
mod loom_tests {
    //! Exhaustive interleavings of 2–3 committers over the fill ring and the sync stream.
    use super::*;
    use loom::sync::Arc;

    /// A log without files: records are "written" by publishing them; a sync records the
    /// range it covered.
    struct Env {
        ring: FillRing,
        syncs: Mutex<Vec<(u64, u64)>>,
        filled_ev: Event,
    }

    impl SyncEnv for Env {
        type Error = ();
        fn filled(&self) -> u64 {
            self.ring.filled()
        }
        fn wait_filled(&self, need: u64) {
            self.filled_ev
                .wait(Backoff::default(), || self.ring.filled() >= need);
        }
        fn check(&self) -> Result<(), ()> {
            Ok(())
        }
        fn sync(&self, from: u64, to: u64) -> Result<(), ()> {
            assert!(to <= self.ring.filled(), "synced past the filled watermark");
            self.syncs.lock().push((from, to));
            Ok(())
        }
        fn synced(&self, _to: u64) {}
    }

    fn commit(env: &Env, stream: &SyncStream, start: u64, len: u64) {
        while !env.ring.in_window(start) {
            loom::thread::yield_now();
        }
        if env.ring.publish(start, start + len) {
            env.filled_ev.notify();
        }
        stream
            .sync_to(start + len, Backoff::default(), env)
            .unwrap();
        assert!(stream.durable() >= start + len);
        assert!(env.ring.filled() >= start + len);
    }

    fn check_syncs(env: &Env, stream: &SyncStream, total: u64) {
        let syncs = env.syncs.lock();
        let mut at = 0;
        for &(from, to) in syncs.iter() {
            assert_eq!(from, at, "syncs must cover contiguous ranges");
            assert!(to > from);
            at = to;
        }
        assert_eq!(at, stream.durable());
        assert_eq!(stream.durable(), total);
    }

    #[test]
    fn loom_two_committers_share_the_stream() {
        loom::model(|| {
            let env = Arc::new(Env {
                ring: FillRing::new(0),
                syncs: Mutex::new(Vec::new()),
                filled_ev: Event::new(),
            });
            let stream = Arc::new(SyncStream::new(0));
            // Reservations are made in order up front; completion order is what loom varies.
            let (e2, s2) = (env.clone(), stream.clone());
            let t = loom::thread::spawn(move || commit(&e2, &s2, 8, 16));
            commit(&env, &stream, 0, 8);
            t.join().unwrap();
            check_syncs(&env, &stream, 24);
        });
    }

    #[test]
    fn loom_three_committers_with_slot_reuse() {
        let mut b = loom::model::Builder::new();
        b.preemption_bound = Some(2);
        b.check(|| {
            let env = Arc::new(Env {
                ring: FillRing::new(0),
                syncs: Mutex::new(Vec::new()),
                filled_ev: Event::new(),
            });
            let stream = Arc::new(SyncStream::new(0));
            // Window = 4 slots x 8 bytes: the third record (start 32) reuses slot 0.
            let handles: Vec<_> = [(8u64, 24u64), (32, 8)]
                .into_iter()
                .map(|(start, len)| {
                    let (e, s) = (env.clone(), stream.clone());
                    loom::thread::spawn(move || commit(&e, &s, start, len))
                })
                .collect();
            commit(&env, &stream, 0, 8);
            for h in handles {
                h.join().unwrap();
            }
            check_syncs(&env, &stream, 40);
        });
    }
}
