//! Dead runs: key ranges of a column family that a forward read found to hold no live key,
//! remembered so that the next read starting there seeks past them instead of walking the
//! tombstones (and the puts they hide) again.
//!
//! A queue deletes at its head and reads from there (TPC-C's Delivery takes the oldest
//! NEW-ORDER row of a district; seed 002's `queue_indexed` deletes the oldest rows). Until a
//! compaction drops them, every delete since is in the way: each read walks them all, in
//! memtables that a flush cannot clean (a row's put and its delete usually lie in different
//! memtables). The first read that walks such a run records `[start, end)` — from where it
//! started to the live key it found — with the seqno it read at; a later read at or above
//! that seqno that starts inside the run seeks to `end`.
//!
//! **Invariant D1.** A run `[start, end)` recorded from seqno `s` on super-version
//! generation `g` holds no live key for any read at a seqno `>= s` on a super-version of
//! generation `>= g`: none at `s` (the walk saw to that), and no entry that could make one
//! live (a value or a merge operand: `Kind::carries_value`) was written into it since.
//! Deletes only keep it dead, and a later super-version holds what the recording one held,
//! less what flushes and compactions dropped. An earlier one may hold more: a put and the
//! delete of it that a flush dropped together (no snapshot between them), or a value a
//! compaction filter removed since, is still there for an iterator that pinned it, and its
//! seqno may see the put — so a read on an earlier super-version never seeks past a run.
//! It is kept by three rules:
//!
//! 1. Every commit calls [`DeadRunTable::touch`] with its entries after inserting them into
//!    the memtable and before it is visible (`db/write.rs`, between steps 5 and 6): a value
//!    written into a run removes it. A read at `r` sees only commits below `r`, so it sees no
//!    run such a commit removed.
//! 2. A read that may record a run registers its start ([`DeadRuns::register`]) before it
//!    takes its super-version. A writer's `touch` after that notes its key in the
//!    registration; a writer's `touch` before it inserted before the read took its
//!    super-version, so the walk meets the entry (a seqno `>= s` makes it invisible: a walk
//!    that passes an invisible value or merge operand records nothing). Either way a value
//!    written into the range from `s` on is seen, and the run is not recorded.
//! 3. A walk records nothing if it passed a transaction's own write (not committed, not
//!    everyone's), an expired value (dead by the clock, not by a write), or started from an
//!    excluded bound (it never looked at the bound's own key).
//!
//! Single deletes misused (two puts, one single delete) are undefined as in RocksDB: a
//! compaction may bring the older put back, and a run keeps hiding it.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound::{Excluded, Included, Unbounded};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::key::Seqno;

/// Runs kept per family; past it the one with the smallest start is forgotten. A queue
/// per prefix keeps one run each: TPC-C's NEW-ORDER has one per district, 10 a warehouse.
/// Each run holds two keys, some 100 bytes with the map's node.
const MAX_RUNS: usize = 1024;

/// Entries a walk's first step must pass over before it arms its family (reads register
/// from then on, so that later walks can record runs).
pub(crate) const ARM_AFTER: u64 = 64;

/// Entries a walk's first step must pass over for its run to be worth recording.
pub(crate) const RECORD_AFTER: u64 = 16;

/// The dead runs of every column family of a database, made on demand. A dropped family's
/// stay (family ids are never reused; at most [`MAX_RUNS`] runs each): removing them while
/// its last commits and reads finish would need its own ordering argument.
#[derive(Default)]
pub(crate) struct DeadRunTable {
    shared: Arc<Shared>,
    families: RwLock<HashMap<u32, Arc<DeadRuns>>>,
}

/// What every family's runs share with the table.
#[derive(Default)]
pub(crate) struct Shared {
    /// Whether any family is armed: commits look no further while none is. Set before
    /// the family's own flag, so no read registers while commits still look no further.
    any: AtomicBool,
    /// Runs recorded, and reads that seeked past one (`Stats::dead_run_records`, `..._jumps`).
    pub(crate) records: AtomicU64,
    pub(crate) jumps: AtomicU64,
}

impl DeadRunTable {
    /// Family `cf`'s runs, made if it has none yet.
    pub(crate) fn family(&self, cf: u32) -> Arc<DeadRuns> {
        if let Some(f) = self.families.read().get(&cf) {
            return f.clone();
        }
        self.families
            .write()
            .entry(cf)
            .or_insert_with(|| {
                Arc::new(DeadRuns {
                    shared: self.shared.clone(),
                    armed: AtomicBool::new(false),
                    state: Mutex::new(State::default()),
                })
            })
            .clone()
    }

    /// Whether any family is armed.
    pub(crate) fn any_armed(&self) -> bool {
        self.shared.any.load(SeqCst)
    }

    /// The counters (`Stats`).
    pub(crate) fn counters(&self) -> &Shared {
        &self.shared
    }

    /// Family `cf`'s runs, if it has any.
    pub(crate) fn get(&self, cf: u32) -> Option<Arc<DeadRuns>> {
        self.families.read().get(&cf).cloned()
    }

    /// Rule 1 of invariant D1: after a commit's entries are in the memtable and before it is
    /// visible, every value or merge operand among them removes the run it falls in and is
    /// noted by the registrations at or below it. `entries` are (family, user key, whether
    /// it carries a value).
    pub(crate) fn touch<'a>(&self, entries: impl Iterator<Item = (u32, &'a [u8], bool)>) {
        if !self.any_armed() {
            return;
        }
        let families = self.families.read();
        let mut held: Option<(u32, parking_lot::MutexGuard<'_, State>)> = None;
        for (cf, key, value) in entries {
            if !value {
                continue;
            }
            if held.as_ref().is_none_or(|(c, _)| *c != cf) {
                held = None;
                let Some(f) = families.get(&cf).filter(|f| f.armed.load(SeqCst)) else {
                    continue;
                };
                held = Some((cf, f.state.lock()));
            }
            if let Some((_, st)) = held.as_mut() {
                st.touch(key);
            }
        }
    }
}

/// One column family's dead runs and the reads registered to record one.
pub(crate) struct DeadRuns {
    shared: Arc<Shared>,
    /// Set by the first walk that passed over [`ARM_AFTER`] entries: from then on reads
    /// register and commits touch.
    armed: AtomicBool,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Start -> run; the runs do not overlap.
    runs: BTreeMap<Vec<u8>, Run>,
    registered: Vec<Registration>,
    next_ticket: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Run {
    end: Vec<u8>,
    /// The seqno and super-version generation it was recorded from: reads at or above
    /// both may seek past it.
    from: Seqno,
    generation: u64,
}

struct Registration {
    ticket: u64,
    start: Vec<u8>,
    /// The smallest key at or above `start` a commit wrote a value to since.
    touched: Option<Vec<u8>>,
}

impl State {
    /// The run holding `key`, with its start.
    fn run_holding(&self, key: &[u8]) -> Option<(&Vec<u8>, &Run)> {
        self.runs
            .range::<[u8], _>((Unbounded, Included(key)))
            .next_back()
            .filter(|(_, r)| key < r.end.as_slice())
    }

    fn touch(&mut self, key: &[u8]) {
        if let Some(s) = self.run_holding(key).map(|(s, _)| s.clone()) {
            self.runs.remove(&s);
        }
        for r in &mut self.registered {
            if r.start.as_slice() <= key && r.touched.as_deref().is_none_or(|t| key < t) {
                r.touched = Some(key.to_vec());
            }
        }
    }
}

/// A run a read seeked past, with its start: where to, and what it was, for extending it.
#[derive(Clone, Debug)]
pub(crate) struct Jump {
    start: Vec<u8>,
    run: Run,
}

impl Jump {
    /// Where the run ends: the first key it does not hold.
    pub(crate) fn end(&self) -> &[u8] {
        &self.run.end
    }
}

/// A read's registration (rule 2 of invariant D1); dropped, it is withdrawn.
pub(crate) struct Ticket {
    runs: Arc<DeadRuns>,
    id: u64,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut st = self.runs.state.lock();
        if let Some(i) = st.registered.iter().position(|r| r.ticket == self.id) {
            st.registered.swap_remove(i);
        }
    }
}

impl DeadRuns {
    /// Whether reads of this family register and commits to it touch.
    pub(crate) fn armed(&self) -> bool {
        self.armed.load(SeqCst)
    }

    /// Arms the family: a walk passed over [`ARM_AFTER`] entries in it.
    pub(crate) fn arm(&self) {
        if self.armed() {
            return;
        }
        self.shared.any.store(true, SeqCst);
        self.armed.store(true, SeqCst);
    }

    /// Registers a read that starts at `start`, before it takes its super-version (rule 2
    /// of invariant D1); `None` if the family is not armed.
    pub(crate) fn register(self: &Arc<Self>, start: &[u8]) -> Option<Ticket> {
        if !self.armed() {
            return None;
        }
        let mut st = self.state.lock();
        let id = st.next_ticket;
        st.next_ticket += 1;
        st.registered.push(Registration {
            ticket: id,
            start: start.to_vec(),
            touched: None,
        });
        Some(Ticket {
            runs: self.clone(),
            id,
        })
    }

    /// The run holding `key` that a read at `seqno` on a super-version of `generation`
    /// may seek past, if there is one.
    pub(crate) fn lookup(&self, key: &[u8], seqno: Seqno, generation: u64) -> Option<Jump> {
        if !self.armed() {
            return None;
        }
        let st = self.state.lock();
        let (start, run) = st.run_holding(key)?;
        (run.from <= seqno && run.generation <= generation).then(|| Jump {
            start: start.clone(),
            run: run.clone(),
        })
    }

    /// Counts a read that seeked past a run (`Stats::dead_run_jumps`).
    pub(crate) fn count_jump(&self) {
        self.shared.jumps.fetch_add(1, Relaxed);
    }

    /// Records that `[start, end)` held no live key at `seqno` on a super-version of
    /// `generation`, as walked by the read that registered `ticket` from `start` (after
    /// seeking past `via`, if it did). Nothing is recorded if a commit wrote a value below
    /// `end` since the registration. Returns whether it recorded.
    pub(crate) fn record(
        &self,
        ticket: &Ticket,
        start: &[u8],
        end: &[u8],
        seqno: Seqno,
        generation: u64,
        via: Option<&Jump>,
    ) -> bool {
        debug_assert!(std::ptr::eq(ticket.runs.as_ref(), self));
        if start >= end {
            return false;
        }
        let mut st = self.state.lock();
        let Some(reg) = st.registered.iter().find(|r| r.ticket == ticket.id) else {
            return false;
        };
        debug_assert_eq!(reg.start.as_slice(), start);
        if reg.touched.as_deref().is_some_and(|t| t < end) {
            return false;
        }
        let mut run_start = start.to_vec();
        let mut from = seqno;
        if let Some(j) = via {
            // Dead from `j.from` on (D1 for the run it seeked past, unbroken since: a write
            // into it after the registration would have been noted above); the read could
            // seek past it, so its generation is at or above the run's.
            debug_assert!(j.run.generation <= generation);
            from = from.max(j.run.from);
            // The run, still recorded, extends below `start`: keep that part.
            if j.start.as_slice() < start && st.runs.get(&j.start) == Some(&j.run) {
                run_start = j.start.clone();
            }
        }
        // The runs do not overlap, so their ends ascend with their starts: walking back
        // from `end`, the first that ends at or before `run_start` is the last to look at.
        let overlapping: Vec<Vec<u8>> = st
            .runs
            .range::<[u8], _>((Unbounded, Excluded(end)))
            .rev()
            .take_while(|(_, r)| r.end.as_slice() > run_start.as_slice())
            .map(|(s, _)| s.clone())
            .collect();
        for s in overlapping {
            st.runs.remove(&s);
        }
        if st.runs.len() >= MAX_RUNS {
            st.runs.pop_first();
        }
        st.runs.insert(
            run_start,
            Run {
                end: end.to_vec(),
                from,
                generation,
            },
        );
        self.shared.records.fetch_add(1, Relaxed);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn armed(t: &Arc<DeadRunTable>) -> Arc<DeadRuns> {
        let f = t.family(1);
        f.arm();
        f
    }

    #[test]
    fn a_recorded_run_is_found_from_its_seqno_on_and_only_inside_it() {
        let t = Arc::new(DeadRunTable::default());
        let f = armed(&t);
        let tk = f.register(b"a").unwrap();
        assert!(f.record(&tk, b"a", b"m", 10, 0, None));
        assert!(
            f.lookup(b"a", 9, 0).is_none(),
            "a read below the seqno walks"
        );
        assert_eq!(f.lookup(b"a", 10, 0).unwrap().end(), b"m");
        assert_eq!(f.lookup(b"l", 99, 0).unwrap().end(), b"m");
        assert!(f.lookup(b"m", 99, 0).is_none());
        assert!(f.lookup(b"0", 99, 0).is_none());
    }

    #[test]
    fn a_value_written_into_a_run_removes_it_and_a_delete_does_not() {
        let t = Arc::new(DeadRunTable::default());
        let f = armed(&t);
        let tk = f.register(b"a").unwrap();
        assert!(f.record(&tk, b"a", b"m", 10, 0, None));
        t.touch([(1, &b"c"[..], false)].into_iter());
        assert!(f.lookup(b"a", 10, 0).is_some());
        t.touch([(2, &b"c"[..], true)].into_iter());
        assert!(f.lookup(b"a", 10, 0).is_some(), "another family's write");
        t.touch([(1, &b"z"[..], true)].into_iter());
        assert!(f.lookup(b"a", 10, 0).is_some(), "a write past the run");
        t.touch([(1, &b"c"[..], true)].into_iter());
        assert!(f.lookup(b"a", 10, 0).is_none());
    }

    #[test]
    fn a_value_written_after_the_registration_below_the_end_stops_the_record() {
        let t = Arc::new(DeadRunTable::default());
        let f = armed(&t);
        let tk = f.register(b"b").unwrap();
        t.touch([(1, &b"a"[..], true)].into_iter());
        t.touch([(1, &b"x"[..], true)].into_iter());
        assert!(
            f.record(&tk, b"b", b"m", 10, 0, None),
            "writes outside [b, m)"
        );
        let tk = f.register(b"b").unwrap();
        t.touch([(1, &b"k"[..], true)].into_iter());
        assert!(!f.record(&tk, b"b", b"m", 10, 0, None));
        assert!(
            f.record(&tk, b"b", b"k", 10, 0, None),
            "[b, k) is still dead"
        );
    }

    #[test]
    fn a_dropped_ticket_is_withdrawn_and_an_unarmed_family_neither_registers_nor_finds() {
        let t = Arc::new(DeadRunTable::default());
        let f = t.family(1);
        assert!(f.register(b"a").is_none());
        f.arm();
        let tk = f.register(b"a").unwrap();
        assert_eq!(f.state.lock().registered.len(), 1);
        drop(tk);
        assert!(f.state.lock().registered.is_empty());
    }

    #[test]
    fn a_walk_past_a_run_extends_it_from_the_later_seqno() {
        let t = Arc::new(DeadRunTable::default());
        let f = armed(&t);
        let tk = f.register(b"a").unwrap();
        assert!(f.record(&tk, b"a", b"f", 10, 0, None));
        // A read from "c" at 20 seeks past [a, f) and walks on to "k".
        let tk = f.register(b"c").unwrap();
        let j = f.lookup(b"c", 20, 0).unwrap();
        assert!(f.record(&tk, b"c", b"k", 20, 0, Some(&j)));
        assert!(f.lookup(b"a", 19, 0).is_none());
        assert_eq!(f.lookup(b"a", 20, 0).unwrap().end(), b"k");
        // Had the run been removed meanwhile, only the walked part would be recorded.
        let tk = f.register(b"c").unwrap();
        let j = f.lookup(b"c", 30, 0).unwrap();
        t.touch([(1, &b"b"[..], true)].into_iter());
        assert!(f.record(&tk, b"c", b"p", 30, 0, Some(&j)));
        assert!(f.lookup(b"b", 99, 0).is_none());
        assert_eq!(f.lookup(b"c", 30, 0).unwrap().end(), b"p");
    }

    #[test]
    fn a_read_on_an_older_super_version_does_not_seek_past() {
        let t = Arc::new(DeadRunTable::default());
        let f = armed(&t);
        let tk = f.register(b"a").unwrap();
        assert!(f.record(&tk, b"a", b"m", 10, 5, None));
        assert!(f.lookup(b"a", 10, 4).is_none());
        assert!(f.lookup(b"a", 10, 5).is_some());
        assert!(f.lookup(b"a", 10, 6).is_some());
    }

    #[test]
    fn a_record_replaces_the_runs_it_overlaps_and_keeps_the_others() {
        let t = Arc::new(DeadRunTable::default());
        let f = armed(&t);
        for (s, e) in [
            (&b"a"[..], &b"c"[..]),
            (b"d", b"f"),
            (b"g", b"i"),
            (b"x", b"z"),
        ] {
            let tk = f.register(s).unwrap();
            assert!(f.record(&tk, s, e, 1, 0, None));
        }
        let tk = f.register(b"e").unwrap();
        assert!(f.record(&tk, b"e", b"h", 1, 0, None));
        let runs: Vec<(Vec<u8>, Vec<u8>)> = f
            .state
            .lock()
            .runs
            .iter()
            .map(|(s, r)| (s.clone(), r.end.clone()))
            .collect();
        let want: Vec<(Vec<u8>, Vec<u8>)> = [("a", "c"), ("e", "h"), ("x", "z")]
            .iter()
            .map(|(s, e)| (s.as_bytes().to_vec(), e.as_bytes().to_vec()))
            .collect();
        assert_eq!(runs, want);
    }

    #[test]
    fn runs_are_bounded() {
        let t = Arc::new(DeadRunTable::default());
        let f = armed(&t);
        for i in 0..(MAX_RUNS as u32 + 100) {
            let s = (i * 2).to_be_bytes();
            let e = (i * 2 + 1).to_be_bytes();
            let tk = f.register(&s).unwrap();
            assert!(f.record(&tk, &s, &e, 1, 0, None));
        }
        assert_eq!(f.state.lock().runs.len(), MAX_RUNS);
    }
}
