//! White-box crash points: named places in the log and the engine where a crash is most
//! dangerous (between a table write and its manifest edit, between a manifest write and
//! the `CURRENT` rename, in the middle of a compaction or of segment recycling), at which a
//! stress test can kill its own process with `SIGKILL`, as RocksDB's `TEST_KILL_RANDOM`
//! does for `db_stress`.
//!
//! Without the cargo feature `kill-points`, [`hit`] is an empty inline function and the
//! points cost nothing. With it, they do nothing either until a process calls [`arm`]
//! (kill at each point with odds 1 in N) or [`arm_nth`] (kill at exactly the N-th point
//! reached, to sweep every point of a short workload). Before it kills, the process
//! writes `silt kill point: <name> (hit <n>)` to standard error, so the driver can count
//! which points fired.

#[cfg(feature = "kill-points")]
mod armed {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

    /// 0: off. Otherwise the odds, 1 in `ODDS`.
    pub(super) static ODDS: AtomicU64 = AtomicU64::new(0);
    /// 0: off. Otherwise kill at the `NTH` hit.
    pub(super) static NTH: AtomicU64 = AtomicU64::new(0);
    pub(super) static HITS: AtomicU64 = AtomicU64::new(0);
    pub(super) static RNG: AtomicU64 = AtomicU64::new(0);
    /// The test hook of [`super::set_hook`].
    #[allow(clippy::type_complexity)]
    pub(super) static HOOK: std::sync::RwLock<
        Option<std::sync::Arc<dyn Fn(&'static str) + Send + Sync>>,
    > = std::sync::RwLock::new(None);

    /// splitmix64 over a shared counter: good enough to pick kill points, and lock-free.
    pub(super) fn next_random() -> u64 {
        let mut z = RNG
            .fetch_add(0x9E37_79B9_7F4A_7C15, Relaxed)
            .wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub(super) fn kill(name: &str, hit: u64) -> ! {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "silt kill point: {name} (hit {hit})");
        let _ =
            rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
        // SIGKILL cannot be caught; should delivery be delayed, do not run on.
        std::process::abort()
    }
}

/// Whether this build has kill points (the cargo feature `kill-points`).
pub const ENABLED: bool = cfg!(feature = "kill-points");

/// Kills the process at each later kill point with probability `1 / one_in`, choosing with
/// a generator seeded by `seed`. `one_in == 0` disarms. (Only with the feature: arming
/// points that are not compiled in would test nothing.)
#[cfg(feature = "kill-points")]
pub fn arm(seed: u64, one_in: u64) {
    use std::sync::atomic::Ordering::SeqCst;
    armed::RNG.store(seed, SeqCst);
    armed::NTH.store(0, SeqCst);
    armed::ODDS.store(one_in, SeqCst);
}

/// Kills the process at the `n`-th kill point reached from now (counting from 1); 0
/// disarms.
#[cfg(feature = "kill-points")]
pub fn arm_nth(n: u64) {
    use std::sync::atomic::Ordering::SeqCst;
    armed::ODDS.store(0, SeqCst);
    armed::HITS.store(0, SeqCst);
    armed::NTH.store(n, SeqCst);
}

/// How many kill points were reached since the last [`arm_nth`] (counted only while armed
/// with `arm_nth`): a workload that reached `k` points offers `k` places to die.
pub fn hits() -> u64 {
    #[cfg(feature = "kill-points")]
    {
        armed::HITS.load(std::sync::atomic::Ordering::SeqCst)
    }
    #[cfg(not(feature = "kill-points"))]
    0
}

/// A function a test runs at every kill point reached, with the point's name, before the
/// kill check: to pause a thread there, or act between two steps the engine otherwise runs
/// back to back, and so make a rare interleaving happen every time. The hook is process-wide:
/// a test that sets one runs alone in its test binary, or takes turns with the others there.
/// It runs with whatever locks the engine holds at the point (`log: quiet purge checked …`
/// holds the segment table's), so it may wait for other threads but must not need those
/// locks itself. `None` removes it.
#[cfg(feature = "kill-points")]
pub fn set_hook(hook: Option<std::sync::Arc<dyn Fn(&'static str) + Send + Sync>>) {
    *armed::HOOK.write().unwrap_or_else(|p| p.into_inner()) = hook;
}

/// A kill point named `name`: see the module documentation.
#[inline(always)]
pub fn hit(name: &'static str) {
    #[cfg(feature = "kill-points")]
    {
        use std::sync::atomic::Ordering::{Relaxed, SeqCst};
        let hook = armed::HOOK
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(hook) = hook {
            hook(name);
        }
        let nth = armed::NTH.load(Relaxed);
        if nth != 0 {
            let h = armed::HITS.fetch_add(1, SeqCst) + 1;
            if h == nth {
                armed::kill(name, h);
            }
            return;
        }
        let odds = armed::ODDS.load(Relaxed);
        if odds != 0 && armed::next_random() % odds == 0 {
            armed::kill(name, 0);
        }
    }
    let _ = name;
}
