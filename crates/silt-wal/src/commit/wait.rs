//! The waiting policy of the commit path: [`Event`] (spin, then yield, then park on a
//! condvar; waking is free when nobody is parked) and its [`Backoff`], and the yield that
//! notices a machine loaded by other processes ([`timed_yield`], [`contended`]).
//!
//! `Event` and `Backoff` are public: an engine that builds its own commit steps on the log
//! (silt's writers waiting for each other to apply) waits the same way, rather than with a
//! second policy that can drift from this one.

use std::sync::atomic::Ordering::SeqCst;
use std::time::{Duration, Instant};

use crate::sync_shim::{fence, yield_now, AtomicUsize, Condvar, Mutex};

/// Something waited for: threads spin briefly, then yield, then park on a condvar.
///
/// Waking costs nothing when no thread is parked (one atomic load), which keeps a lone
/// writer's path free of syscalls.
///
/// No lost wake-up: a waiter counts itself parked under the lock and then looks at its
/// condition; a notifier changes the condition and then looks at the count (a `SeqCst`
/// fence on each side), so either the waiter sees the change or the notifier sees the
/// waiter and wakes it under the lock.
pub struct Event {
    parked: AtomicUsize,
    lock: Mutex<()>,
    cv: Condvar,
    /// Parked waits of [`Event::wait_unless`] that ended because their nap ran out rather
    /// than by a notification (tests use it to find a lost wake-up).
    naps_out: std::sync::atomic::AtomicU64,
}

impl Default for Event {
    fn default() -> Self {
        Event::new()
    }
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Event")
            .field("parked", &self.parked.load(SeqCst))
            .finish_non_exhaustive()
    }
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

/// How long an [`Event`] waiter spins, then yields, before it parks.
#[derive(Clone, Copy, Debug)]
pub struct Backoff {
    /// How long to spin on the condition first.
    pub spin: Duration,
    /// How long to yield after the spin (not at all on a contended machine).
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
    /// An event nobody waits on yet.
    pub fn new() -> Self {
        Event {
            parked: AtomicUsize::new(0),
            lock: Mutex::new(()),
            cv: Condvar::new(),
            naps_out: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Wakes every parked waiter. Call after making the awaited condition true.
    #[inline]
    pub fn notify(&self) {
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
    pub fn wait(&self, backoff: Backoff, mut ready: impl FnMut() -> bool) {
        if self.spin_then_yield(backoff, &mut ready) {
            return;
        }
        let mut guard = self.lock.lock();
        self.parked.fetch_add(1, SeqCst);
        fence(SeqCst);
        while !ready() {
            self.cv.wait(&mut guard);
        }
        self.parked.fetch_sub(1, SeqCst);
    }

    /// As [`Event::wait`], but gives up once `stop()` holds: returns whether `ready()`
    /// held at the end (`false` only when stopped). `stop` may become true without a
    /// notification (a poisoned database): a parked waiter looks at it every `nap`.
    #[cfg(not(loom))]
    pub fn wait_unless(
        &self,
        backoff: Backoff,
        nap: Duration,
        mut ready: impl FnMut() -> bool,
        stop: impl Fn() -> bool,
    ) -> bool {
        if self.spin_then_yield(backoff, &mut ready) {
            return true;
        }
        let mut guard = self.lock.lock();
        self.parked.fetch_add(1, SeqCst);
        fence(SeqCst);
        let held = loop {
            if ready() {
                break true;
            }
            if stop() {
                break ready();
            }
            if self.cv.wait_for(&mut guard, nap).timed_out() {
                self.naps_out.fetch_add(1, SeqCst);
            }
        };
        self.parked.fetch_sub(1, SeqCst);
        held
    }

    /// How many parked waits of [`Event::wait_unless`] ended by their nap rather than by a
    /// notification. With a nap longer than any wait, a non-zero count is a lost wake-up.
    pub fn naps_out(&self) -> u64 {
        self.naps_out.load(SeqCst)
    }

    /// The first two phases of a wait: whether `ready()` held before it is time to park.
    fn spin_then_yield(&self, backoff: Backoff, ready: &mut impl FnMut() -> bool) -> bool {
        if ready() {
            return true;
        }
        // Under loom there is no clock: go straight to the parking protocol, the part whose
        // races matter.
        let start = Instant::now();
        while !cfg!(loom) && start.elapsed() < backoff.spin {
            for _ in 0..32 {
                std::hint::spin_loop();
            }
            if ready() {
                return true;
            }
        }
        // On a machine loaded by other processes a yield can cost a time slice, while a
        // parked thread's wake-up preempts: then park at once.
        while !cfg!(loom) && !contended() && start.elapsed() < backoff.spin + backoff.yield_for {
            let over = timed_yield();
            if ready() {
                return true;
            }
            if over {
                break;
            }
        }
        false
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    /// No lost wake-up: with a nap far longer than the test, every parked waiter is woken
    /// by a notification, never by its nap running out.
    #[test]
    fn every_parked_waiter_is_woken_by_a_notification() {
        let ev = Arc::new(Event::new());
        let n = Arc::new(AtomicU64::new(0));
        let waiters: Vec<_> = (0..3u64)
            .map(|w| {
                let (ev, n) = (ev.clone(), n.clone());
                std::thread::spawn(move || {
                    for k in (w..4000).step_by(3) {
                        let ready = || n.load(SeqCst) > k;
                        assert!(ev.wait_unless(
                            Backoff::default(),
                            Duration::from_secs(5),
                            ready,
                            || false
                        ));
                    }
                })
            })
            .collect();
        for i in 0..4000u64 {
            n.store(i + 1, SeqCst);
            ev.notify();
            if i % 64 == 0 {
                // Let the waiters park now and then.
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        for w in waiters {
            w.join().unwrap();
        }
        assert_eq!(ev.naps_out(), 0);
    }

    #[test]
    fn a_stop_ends_the_wait() {
        let ev = Event::new();
        let stop = AtomicU64::new(0);
        let t = std::thread::scope(|s| {
            let h = s.spawn(|| {
                ev.wait_unless(
                    Backoff::default(),
                    Duration::from_millis(1),
                    || false,
                    || stop.load(SeqCst) == 1,
                )
            });
            std::thread::sleep(Duration::from_millis(20));
            stop.store(1, SeqCst);
            h.join()
        });
        assert_eq!(
            t.ok(),
            Some(false),
            "a stopped wait says its condition may not hold"
        );
    }
}
