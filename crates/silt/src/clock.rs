//! [`Clock`]: where the engine reads the time that expiring entries (TTL) are judged by.
//! [`SystemClock`] is the default; [`ManualClock`] is a clock a test drives.

use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The time source of a database ([`crate::DbBuilder::clock`]): milliseconds since the Unix
/// epoch. A write with a time to live stores `now + ttl` as its expiry; a read or a
/// compaction at `now` treats every entry whose expiry is at or before `now` as deleted.
///
/// A clock that goes back in time makes expired entries readable again until compaction
/// has dropped them; the system clock can, so expiry is exact only to the clock's
/// accuracy.
pub trait Clock: Send + Sync + Debug {
    /// Milliseconds since the Unix epoch.
    fn now_millis(&self) -> u64;
}

/// The operating system's wall clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_millis(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0)
    }
}

/// A clock that moves only when told to: for tests of expiry.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use silt::{Db, ManualClock};
/// # let dir = tempfile::tempdir().unwrap();
/// let clock = Arc::new(ManualClock::new(1_000));
/// let db = Db::builder(dir.path()).clock(clock.clone()).open().unwrap();
/// let mut b = silt::WriteBatch::new();
/// b.put_with_ttl(b"session", b"token", Duration::from_secs(60));
/// db.write(b, Default::default()).unwrap();
/// clock.advance(Duration::from_secs(59));
/// assert!(db.get(b"session").unwrap().is_some());
/// clock.advance(Duration::from_secs(1));
/// assert_eq!(db.get(b"session").unwrap(), None);
/// ```
#[derive(Debug, Default)]
pub struct ManualClock {
    ms: AtomicU64,
}

impl ManualClock {
    /// A clock standing at `ms` milliseconds since the epoch.
    pub fn new(ms: u64) -> ManualClock {
        ManualClock {
            ms: AtomicU64::new(ms),
        }
    }

    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: Duration) {
        let d = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let _ = self
            .ms
            .fetch_update(SeqCst, SeqCst, |m| Some(m.saturating_add(d)));
    }

    /// Sets the clock to `ms` milliseconds since the epoch (backwards too).
    pub fn set(&self, ms: u64) {
        self.ms.store(ms, SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_millis(&self) -> u64 {
        self.ms.load(SeqCst)
    }
}

/// The instant one read judges expiring entries at: read from the clock the first time an
/// expiring entry is met, then the same for the rest of the read (an iterator sees one
/// instant), and never read at all by a read that meets none (no cost without TTLs).
#[derive(Debug)]
pub(crate) struct ReadTime {
    clock: Arc<dyn Clock>,
    ms: OnceLock<u64>,
}

impl ReadTime {
    pub(crate) fn new(clock: Arc<dyn Clock>) -> ReadTime {
        ReadTime {
            clock,
            ms: OnceLock::new(),
        }
    }

    /// The read's instant, in milliseconds since the epoch.
    pub(crate) fn now(&self) -> u64 {
        *self.ms.get_or_init(|| self.clock.now_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clocks_tell_the_time() {
        let c = ManualClock::new(5);
        c.advance(Duration::from_millis(7));
        assert_eq!(c.now_millis(), 12);
        c.advance(Duration::MAX);
        assert_eq!(c.now_millis(), u64::MAX);
        c.set(3);
        assert_eq!(c.now_millis(), 3);
        // 2020-01-01 in ms: the system clock is past it.
        assert!(SystemClock.now_millis() > 1_577_836_800_000);
        let c = Arc::new(ManualClock::new(10));
        let t = ReadTime::new(c.clone());
        c.set(20);
        assert_eq!(t.now(), 20);
        c.set(30);
        assert_eq!(t.now(), 20, "one read, one instant");
    }
}
