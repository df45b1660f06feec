//! The waiting policy of the commit path: [`Event`] (spin, then yield, then park on a
//! condvar; waking is free when nobody is parked) and its [`Backoff`], and the yield that
//! notices a machine loaded by other processes ([`timed_yield`], [`contended`]).

use std::sync::atomic::Ordering::SeqCst;
use std::time::{Duration, Instant};

use crate::sync_shim::{fence, yield_now, AtomicUsize, Condvar, Mutex};

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

/// How long an [`Event`] waiter spins, then yields, before it parks.
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
