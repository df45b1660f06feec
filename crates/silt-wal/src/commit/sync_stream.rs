//! [`SyncStream`]: the durable watermark and the one sync that may run at a time, shared by
//! every committer that needs durability (invariant 4 of `commit/mod.rs`).

use std::sync::atomic::Ordering::SeqCst;

use super::wait::{Backoff, Event};
use crate::sync_shim::{AtomicBool, AtomicU64};

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
    #[cfg(feature = "strategies")]
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

#[cfg(loom)]
mod loom_tests {
    //! Exhaustive interleavings of 2–3 committers over the fill ring and the sync stream.
    use super::*;
    use crate::commit::fill_ring::FillRing;
    use crate::sync_shim::Mutex;
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
