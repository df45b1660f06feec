//! Delayed writes: a smooth slowdown before a write stall (RocksDB's delayed write rate).
//!
//! When flushes or level-0 compactions fall behind, writers used to run at full speed until
//! a hard limit and then stop outright (for a whole flush: hundreds of milliseconds). Now,
//! in the zone before the stop, each write waits in proportion to its bytes, so the writers
//! together run at about the rate the background drains; the stop stays as the last resort.
//!
//! The rate comes from the flushes themselves: bytes of memtable flushed per second of
//! flush, a moving average ([`Throttle::note_flush`]). The waits are handed out on one
//! virtual clock ([`Throttle::delay`]): each write takes the next `bytes / rate` slice of
//! it, so concurrent writers share the rate instead of each taking all of it, and waits too
//! short to sleep for accumulate instead of being lost.
//!
//! Invariant: a delay is only ever a wait before the write registers; it never holds a lock
//! or a reservation, so it cannot hold back anyone else's commit.

use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// The flush rate assumed before the first flush was measured: 64 MiB/s.
const FLUSH_RATE_DEFAULT: u64 = 64 << 20;
/// The slowest rate ever imposed, so writes crawl rather than stop: 1 MiB/s.
const RATE_MIN: u64 = 1 << 20;
/// A wait shorter than this is not slept (a sleep costs more); it stays on the clock.
const SLEEP_MIN: Duration = Duration::from_micros(100);
/// The virtual clock never runs further ahead of now than this: a burst after a quiet
/// period is not punished for the quiet period, and a long debt is forgiven after a while.
const AHEAD_MAX: Duration = Duration::from_millis(100);

#[derive(Default)]
pub(crate) struct Throttle {
    /// Moving average of the flush rate, in bytes per second (0: not measured yet).
    flush_rate: AtomicU64,
    /// When the next delayed write may go.
    next: Mutex<Option<Instant>>,
}

impl Throttle {
    /// Records a flush of `bytes` of memtable that took `took`.
    pub(crate) fn note_flush(&self, bytes: u64, took: Duration) {
        let secs = took.as_secs_f64();
        if bytes == 0 || secs <= 0.0 {
            return;
        }
        let rate = (bytes as f64 / secs) as u64;
        let old = self.flush_rate.load(SeqCst);
        let new = if old == 0 { rate } else { (old * 3 + rate) / 4 };
        self.flush_rate.store(new.max(RATE_MIN), SeqCst);
    }

    /// The measured flush rate, or the default before the first flush.
    pub(crate) fn flush_rate(&self) -> u64 {
        match self.flush_rate.load(SeqCst) {
            0 => FLUSH_RATE_DEFAULT,
            r => r,
        }
    }

    /// Takes the next `bytes / rate` slice of the virtual clock and returns how long the
    /// caller should wait before writing (zero for a wait too short to sleep).
    pub(crate) fn delay(&self, bytes: u64, rate: u64) -> Duration {
        let rate = rate.max(RATE_MIN);
        let cost = Duration::from_secs_f64(bytes as f64 / rate as f64);
        let now = Instant::now();
        let mut next = self.next.lock();
        let start = match *next {
            Some(t) if t > now => t.min(now + AHEAD_MAX),
            _ => now,
        };
        let end = start + cost;
        *next = Some(end);
        let wait = end.saturating_duration_since(now);
        if wait < SLEEP_MIN {
            Duration::ZERO
        } else {
            wait
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writers_share_the_rate_and_short_waits_accumulate() {
        let t = Throttle::default();
        // 1 MB/s: 100 writes of 100 bytes are 10 ms of clock; the first few are too short
        // to sleep, the later ones are not.
        let began = std::time::Instant::now();
        let waits: Vec<_> = (0..100).map(|_| t.delay(100, 1_000_000)).collect();
        // The clock runs against real time: whatever the loop itself took (a preempted
        // thread) is that much less to wait.
        let took = began.elapsed();
        assert_eq!(waits[0], Duration::ZERO);
        let last = *waits.last().unwrap();
        assert!(
            last + took >= Duration::from_millis(9) && last <= Duration::from_millis(11),
            "{last:?} after {took:?}"
        );
        // The clock is bounded: a huge write waits at most AHEAD_MAX plus its own cost.
        let big = t.delay(10 << 20, 1 << 30);
        assert!(big <= AHEAD_MAX + Duration::from_millis(11), "{big:?}");
    }

    #[test]
    fn the_flush_rate_is_a_moving_average_with_a_floor() {
        let t = Throttle::default();
        assert_eq!(t.flush_rate(), FLUSH_RATE_DEFAULT);
        t.note_flush(100 << 20, Duration::from_secs(1));
        assert_eq!(t.flush_rate(), 100 << 20);
        t.note_flush(20 << 20, Duration::from_secs(1));
        assert_eq!(t.flush_rate(), (300 << 20) / 4 + (20 << 20) / 4);
        t.note_flush(1, Duration::from_secs(100));
        assert!(t.flush_rate() >= RATE_MIN);
    }
}
