//! The lock manager of pessimistic transactions: shared and exclusive locks on keys, shared
//! locks on key ranges (predicate locks for `Serializable` scans), lock waits with a
//! timeout, and deadlock detection on the wait-for graph.
//!
//! It knows nothing of the engine: owners are transaction ids, keys are `(column family id,
//! user key)`. The transaction layer (`txn/`) takes locks here and releases them all at
//! commit or rollback (strict two-phase locking).
//!
//! Compatibility (a request is granted when it conflicts with no lock of another owner):
//!
//! | held by another \ requested | key `S` | key `X` | range `S` |
//! |---|---|---|---|
//! | key `S`                    | ok      | wait    | ok        |
//! | key `X`                    | wait    | wait    | wait if the key is in the range |
//! | range `S`                  | ok      | wait if the key is in the range | ok |
//!
//! An owner's own locks never conflict with its requests (re-entrant; `S` upgrades to `X`
//! when no other owner shares the key).
//!
//! Invariants:
//! 1. `waits` holds an entry exactly for each owner blocked in [`LockTable::lock`], naming
//!    the owners it waits for; an owner never waits for itself.
//! 2. A request whose wait would close a cycle in `waits` is refused at once with
//!    [`LockError::Deadlock`] (the requester is the victim), so no set of owners ever waits
//!    for each other forever; a release wakes every waiter (`notify_all`), so none misses a
//!    grant (no lost wake-up).
//! 3. Everything an owner holds is listed in `held`, so [`LockTable::release_all`] frees it
//!    all in one call.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::Bound;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

/// A transaction's id in the lock table.
pub(crate) type Owner = u64;

/// A key: column family id and user key.
pub(crate) type LockKey = (u32, Vec<u8>);

/// The mode of a key lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Readers: any number of owners at once.
    Shared,
    /// One writer, no one else.
    Exclusive,
}

/// Why a lock was not granted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum LockError {
    /// Waited the whole timeout.
    Timeout { waited: Duration },
    /// Waiting would close a cycle of waiting owners (invariant 2).
    Deadlock,
}

/// A shared range lock: `lo..hi` of one column family.
#[derive(Clone, Debug)]
struct RangeLock {
    owner: Owner,
    lo: Bound<Vec<u8>>,
    hi: Bound<Vec<u8>>,
}

impl RangeLock {
    fn contains(&self, k: &[u8]) -> bool {
        let above = match &self.lo {
            Bound::Included(b) => k >= b.as_slice(),
            Bound::Excluded(b) => k > b.as_slice(),
            Bound::Unbounded => true,
        };
        let below = match &self.hi {
            Bound::Included(b) => k <= b.as_slice(),
            Bound::Excluded(b) => k < b.as_slice(),
            Bound::Unbounded => true,
        };
        above && below
    }
}

#[derive(Default, Debug)]
struct KeyLock {
    exclusive: Option<Owner>,
    shared: Vec<Owner>,
}

#[derive(Default)]
struct Held {
    keys: Vec<LockKey>,
    ranges: usize,
}

#[derive(Default)]
struct State {
    /// Key locks, ordered so a range request finds the exclusive locks inside it.
    keys: BTreeMap<LockKey, KeyLock>,
    /// Range locks per column family.
    ranges: HashMap<u32, Vec<RangeLock>>,
    /// Invariant 1: who each blocked owner waits for.
    waits: HashMap<Owner, Vec<Owner>>,
    /// Invariant 3.
    held: HashMap<Owner, Held>,
}

/// The lock table of one database.
#[derive(Default)]
pub(crate) struct LockTable {
    state: Mutex<State>,
    released: Condvar,
}

/// What a request is for.
enum Request<'a> {
    Key(&'a LockKey, Mode),
    Range(u32, &'a Bound<Vec<u8>>, &'a Bound<Vec<u8>>),
}

impl State {
    /// The owners whose locks conflict with `req` by `owner`.
    fn blockers(&self, owner: Owner, req: &Request<'_>) -> Vec<Owner> {
        let mut out = Vec::new();
        match req {
            Request::Key(key, mode) => {
                if let Some(l) = self.keys.get(*key) {
                    if let Some(x) = l.exclusive.filter(|&x| x != owner) {
                        out.push(x);
                    }
                    if *mode == Mode::Exclusive {
                        out.extend(l.shared.iter().copied().filter(|&s| s != owner));
                    }
                }
                if *mode == Mode::Exclusive {
                    if let Some(rs) = self.ranges.get(&key.0) {
                        out.extend(
                            rs.iter()
                                .filter(|r| r.owner != owner && r.contains(&key.1))
                                .map(|r| r.owner),
                        );
                    }
                }
            }
            Request::Range(cf, lo, hi) => {
                let lo_key = match lo {
                    Bound::Included(b) => Bound::Included((*cf, b.clone())),
                    Bound::Excluded(b) => Bound::Excluded((*cf, b.clone())),
                    Bound::Unbounded => Bound::Included((*cf, Vec::new())),
                };
                let hi_key = match hi {
                    Bound::Included(b) => Bound::Included((*cf, b.clone())),
                    Bound::Excluded(b) => Bound::Excluded((*cf, b.clone())),
                    Bound::Unbounded => match cf.checked_add(1) {
                        Some(next) => Bound::Excluded((next, Vec::new())),
                        None => Bound::Unbounded,
                    },
                };
                if range_is_empty(&lo_key, &hi_key) {
                    return out;
                }
                for (_, l) in self.keys.range((lo_key, hi_key)) {
                    if let Some(x) = l.exclusive.filter(|&x| x != owner) {
                        out.push(x);
                    }
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Whether `from` reaches `target` through the wait-for edges.
    fn reaches(&self, from: &[Owner], target: Owner) -> bool {
        let mut seen = HashSet::new();
        let mut stack: Vec<Owner> = from.to_vec();
        while let Some(o) = stack.pop() {
            if o == target {
                return true;
            }
            if seen.insert(o) {
                if let Some(next) = self.waits.get(&o) {
                    stack.extend(next.iter().copied());
                }
            }
        }
        false
    }

    fn grant(&mut self, owner: Owner, req: &Request<'_>) {
        match req {
            Request::Key(key, mode) => {
                let l = self.keys.entry((*key).clone()).or_default();
                let new = match mode {
                    Mode::Exclusive => {
                        let new = l.exclusive != Some(owner) && !l.shared.contains(&owner);
                        l.exclusive = Some(owner);
                        l.shared.retain(|&s| s != owner);
                        new
                    }
                    Mode::Shared => {
                        if l.exclusive == Some(owner) || l.shared.contains(&owner) {
                            false
                        } else {
                            l.shared.push(owner);
                            true
                        }
                    }
                };
                if new {
                    self.held
                        .entry(owner)
                        .or_default()
                        .keys
                        .push((*key).clone());
                }
            }
            Request::Range(cf, lo, hi) => {
                self.ranges.entry(*cf).or_default().push(RangeLock {
                    owner,
                    lo: (*lo).clone(),
                    hi: (*hi).clone(),
                });
                self.held.entry(owner).or_default().ranges += 1;
            }
        }
    }
}

fn range_is_empty(lo: &Bound<LockKey>, hi: &Bound<LockKey>) -> bool {
    match (lo, hi) {
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Included(a), Bound::Excluded(b))
        | (Bound::Excluded(a), Bound::Included(b))
        | (Bound::Excluded(a), Bound::Excluded(b)) => a >= b,
        _ => false,
    }
}

impl LockTable {
    /// Locks `key` in `mode` for `owner`, waiting at most `timeout`.
    pub(crate) fn lock(
        &self,
        owner: Owner,
        key: &LockKey,
        mode: Mode,
        timeout: Duration,
    ) -> Result<(), LockError> {
        self.acquire(owner, Request::Key(key, mode), timeout)
    }

    /// Locks the range `lo..hi` of column family `cf` shared for `owner` (a predicate lock:
    /// no other owner may write a key inside it until released), waiting at most `timeout`.
    pub(crate) fn lock_range(
        &self,
        owner: Owner,
        cf: u32,
        lo: &Bound<Vec<u8>>,
        hi: &Bound<Vec<u8>>,
        timeout: Duration,
    ) -> Result<(), LockError> {
        self.acquire(owner, Request::Range(cf, lo, hi), timeout)
    }

    fn acquire(&self, owner: Owner, req: Request<'_>, timeout: Duration) -> Result<(), LockError> {
        let start = Instant::now();
        let deadline = start + timeout;
        let mut st = self.state.lock();
        loop {
            let blockers = st.blockers(owner, &req);
            if blockers.is_empty() {
                st.waits.remove(&owner);
                st.grant(owner, &req);
                return Ok(());
            }
            // Invariant 2: refuse a wait that closes a cycle.
            if st.reaches(&blockers, owner) {
                st.waits.remove(&owner);
                return Err(LockError::Deadlock);
            }
            st.waits.insert(owner, blockers);
            if self.released.wait_until(&mut st, deadline).timed_out() {
                // One last look: a release may have raced the deadline.
                if st.blockers(owner, &req).is_empty() {
                    continue;
                }
                st.waits.remove(&owner);
                return Err(LockError::Timeout {
                    waited: start.elapsed(),
                });
            }
        }
    }

    /// Frees every lock `owner` holds and wakes every waiter (invariant 2).
    pub(crate) fn release_all(&self, owner: Owner) {
        let mut st = self.state.lock();
        st.waits.remove(&owner);
        let Some(held) = st.held.remove(&owner) else {
            return;
        };
        for key in held.keys {
            if let Some(l) = st.keys.get_mut(&key) {
                if l.exclusive == Some(owner) {
                    l.exclusive = None;
                }
                l.shared.retain(|&s| s != owner);
                if l.exclusive.is_none() && l.shared.is_empty() {
                    st.keys.remove(&key);
                }
            }
        }
        if held.ranges > 0 {
            for rs in st.ranges.values_mut() {
                rs.retain(|r| r.owner != owner);
            }
            st.ranges.retain(|_, rs| !rs.is_empty());
        }
        // Waiters re-check their blockers when woken; drop the stale edges now so another
        // owner's deadlock check does not follow them meanwhile.
        for w in st.waits.values_mut() {
            w.retain(|&o| o != owner);
        }
        drop(st);
        self.released.notify_all();
    }

    /// The owners blocked in [`LockTable::lock`] now, each with those it waits for.
    pub(crate) fn waiting(&self) -> Vec<(Owner, Vec<Owner>)> {
        let st = self.state.lock();
        let mut out: Vec<_> = st.waits.iter().map(|(o, w)| (*o, w.clone())).collect();
        out.sort();
        out
    }

    /// How many keys and ranges `owner` holds locked.
    #[cfg(test)]
    pub(crate) fn held_by(&self, owner: Owner) -> (usize, usize) {
        let st = self.state.lock();
        st.held
            .get(&owner)
            .map(|h| (h.keys.len(), h.ranges))
            .unwrap_or((0, 0))
    }
}

#[cfg(test)]
#[path = "lock_table_tests.rs"]
mod tests;
