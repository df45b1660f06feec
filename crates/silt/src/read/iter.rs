//! [`Iter`]: the double-ended iterator over a key range, and the machinery it shares with
//! the cursor: the merged cursor over a column family ([`merged`]) and the walk that turns
//! internal entries into visible pairs ([`Walker`]).

use std::ops::Bound;
use std::sync::Arc;

use super::dead_runs::{self, DeadRunTable, DeadRuns, Jump, Ticket};
use super::overlay::{Overlay, OverlayIter, ScanLog, ScanRange, OVERLAY_SEQNO};
use super::Bounds;
use crate::clock::ReadTime;
use crate::error::{Error, Result};
use crate::iter::{InternalIterator, MergingIter};
use crate::key::{self, Kind, Seqno};
use crate::memtable::Memtable;
use crate::merge_op::MergeOperator;
use crate::sstable::TableIter;
use crate::version::{LevelIter, SuperVersion};

/// What an iterator or cursor reads: a pinned super-version, one column family of it, and
/// the seqno it reads at; or, if the family was not in that super-version, the error to
/// report on the first step. A transaction's read adds its own writes (`overlay`) and
/// records what it covered (`scans`).
pub(crate) struct Source {
    pub(crate) sv: Arc<SuperVersion>,
    pub(crate) cf: u32,
    pub(crate) snapshot: Seqno,
    pub(crate) missing: Option<Error>,
    pub(crate) overlay: Option<Arc<Overlay>>,
    pub(crate) scans: Option<ScanLog>,
    /// The instant expiring entries are judged at (read at the first one met).
    pub(crate) now: Arc<ReadTime>,
    /// The family's merge operator, if it has one.
    pub(crate) merge: Option<Arc<dyn MergeOperator>>,
    /// Count the level-0 entries reads pass over (`DbBuilder::l0_scan_compaction_ratio`).
    pub(crate) l0_scan: bool,
    /// The family's dead runs, and this read's registration, taken before `sv`
    /// (`read/dead_runs.rs`, invariant D1 rule 2); `None`: the read neither seeks past nor
    /// records runs.
    pub(crate) dead: Option<DeadSource>,
}

/// A read's part in its family's dead runs (`read/dead_runs.rs`).
pub(crate) struct DeadSource {
    /// Every family's runs, and which family the read is of: a read that walks far arms it.
    pub(crate) table: Arc<DeadRunTable>,
    pub(crate) cf: u32,
    /// The family's runs; `None` if no family was armed when the read started (the read
    /// then costs an atomic load and the `table` reference: it may arm its family, but
    /// neither seeks nor records).
    pub(crate) runs: Option<Arc<DeadRuns>>,
    /// Registered from the read's start (`None` while the family is not armed: the read
    /// may seek past runs and arm the family, but records none).
    pub(crate) ticket: Option<Ticket>,
}

impl Source {
    /// A source reading `cf` of `sv` at `snapshot`; `missing` is the error for a family
    /// `sv` does not have (the caller knows its name).
    pub(crate) fn new(
        sv: Arc<SuperVersion>,
        cf: u32,
        snapshot: Seqno,
        now: Arc<ReadTime>,
        missing: impl FnOnce() -> Error,
    ) -> Source {
        let missing = (!sv.version.cfs.contains_key(&cf)).then(missing);
        Source {
            sv,
            cf,
            snapshot,
            missing,
            overlay: None,
            scans: None,
            now,
            merge: None,
            l0_scan: false,
            dead: None,
        }
    }

    /// This source seeking past, and recording, dead runs of its family; `dead` was made
    /// before the super-version was taken.
    pub(crate) fn with_dead_runs(mut self, dead: Option<DeadSource>) -> Source {
        self.dead = dead;
        self
    }

    /// This source counting the level-0 entries its reads pass over, for the compaction
    /// picker (`DbBuilder::l0_scan_compaction_ratio`).
    pub(crate) fn with_l0_scan(mut self, on: bool) -> Source {
        self.l0_scan = on;
        self
    }

    /// This source folding merge operands with `op`.
    pub(crate) fn with_merge(mut self, op: Option<Arc<dyn MergeOperator>>) -> Source {
        self.merge = op;
        self
    }

    /// This source with a transaction's own writes merged in, and its covered ranges
    /// recorded in `scans`.
    pub(crate) fn for_txn(
        mut self,
        overlay: Option<Arc<Overlay>>,
        scans: Option<ScanLog>,
    ) -> Source {
        self.overlay = overlay.filter(|o| !o.is_empty());
        self.scans = scans;
        self
    }

    /// This source failing with `e` at its first step (a lock a transaction's scan needed
    /// was not granted).
    pub(crate) fn failing(mut self, e: Error) -> Source {
        self.missing = Some(e);
        self
    }

    pub(crate) fn walker(&self) -> Result<Walker> {
        if let Some(e) = &self.missing {
            return Err(e.duplicate());
        }
        Ok(Walker {
            m: merged(&self.sv, self.cf, self.overlay.as_ref())?,
            snapshot: self.snapshot,
            version: self.sv.version.clone(),
            now: self.now.clone(),
            cf: self.cf,
            merge: self.merge.clone(),
            operands: Vec::new(),
            key: Vec::new(),
            value: Vec::new(),
            skip: Vec::new(),
            target: Vec::new(),
            // The active memtable is the child after the overlay (`merged`).
            // (Entries a writer adds to an empty one later are invisible to this walk, and a
            // flush would not take them out of its way.)
            active: self
                .sv
                .mems
                .first()
                .filter(|m| !m.is_empty())
                .map(|m| (usize::from(self.overlay.is_some()), m.clone())),
            stepped: std::cell::Cell::new(0),
            l0: match self.sv.version.cfs.get(&self.cf) {
                Some(cfv) if self.l0_scan && !cfv.levels[0].is_empty() => {
                    Some(L0Scan {
                        // Children: the overlay, the memtables, then level 0 (`merged`).
                        first: usize::from(self.overlay.is_some()) + self.sv.mems.len(),
                        tables: cfv.levels[0].clone(),
                        passed: vec![std::cell::Cell::new(0); cfv.levels[0].len()],
                        any: std::cell::Cell::new(false),
                    })
                }
                _ => None,
            },
            overlay: self.overlay.is_some(),
            watch: None,
        })
    }

    /// Records that the read in `slot` covered from `fixed` (the end it started from) to
    /// `to` (where it is now), in its direction; a read that has a slot already has only
    /// its moving end changed, in place (no allocation per step).
    pub(crate) fn cover_to(
        &self,
        slot: &mut Option<usize>,
        fixed: &Bound<Vec<u8>>,
        to: Bound<&[u8]>,
        forward: bool,
    ) {
        let Some(log) = &self.scans else { return };
        match slot {
            Some(i) => log.move_end(*i, forward, to),
            None => {
                let to = to.map(<[u8]>::to_vec);
                let (lo, hi) = if forward {
                    (fixed.clone(), to)
                } else {
                    (to, fixed.clone())
                };
                *slot = Some(log.push(ScanRange {
                    cf: self.cf,
                    lo,
                    hi,
                }));
            }
        }
    }

    /// Records that `lo..hi` was covered, in `slot` if the read has one already.
    pub(crate) fn cover(&self, slot: &mut Option<usize>, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>) {
        let Some(log) = &self.scans else { return };
        let r = ScanRange {
            cf: self.cf,
            lo,
            hi,
        };
        match slot {
            Some(i) => log.set(*i, r),
            None => *slot = Some(log.push(r)),
        }
    }
}

/// Builds the merged cursor over one column family of a super-version, with a
/// transaction's own writes on top if it has any. The caller checked that the family is in
/// it (`Source::new`).
pub(crate) fn merged(
    sv: &SuperVersion,
    cf: u32,
    overlay: Option<&Arc<Overlay>>,
) -> Result<MergingIter> {
    let Some(cfv) = sv.version.cfs.get(&cf) else {
        return Err(Error::ColumnFamilyNotFound(format!("(id {cf})")));
    };
    let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
    if let Some(ov) = overlay {
        children.push(Box::new(OverlayIter::new(ov.clone())));
    }
    for m in &sv.mems {
        children.push(Box::new(m.iter(cf)));
    }
    for t in &cfv.levels[0] {
        let table = t.table()?;
        children.push(Box::new(TableIter::new_with(&table, true)));
    }
    for level in cfv.levels.iter().skip(1) {
        if !level.is_empty() {
            children.push(Box::new(LevelIter::new(level.clone(), true)));
        }
    }
    Ok(MergingIter::new(children))
}

/// What [`Walker::forward`] passes over before it looks for the next pair: nothing, every
/// entry of the pair the walk stands on (its previous result), or every entry of a key.
pub(crate) enum Skip<'a> {
    Nothing,
    Current,
    Key(&'a [u8]),
}

/// One direction of user-level iteration over a merged cursor. The pair it stands on is
/// kept in buffers the walk reuses, so a step copies bytes but allocates nothing (except
/// to read a value separated into a blob file); callers lend it out or copy it.
pub(crate) struct Walker {
    pub(crate) m: MergingIter,
    snapshot: Seqno,
    /// Resolves `Blob` entries' pointers to their values.
    version: Arc<crate::version::Version>,
    /// The instant expiring entries are judged at, shared by both ends of an iterator.
    now: Arc<ReadTime>,
    /// The column family, its merge operator, and the operands of the key being folded
    /// (reused).
    cf: u32,
    merge: Option<Arc<dyn MergeOperator>>,
    operands: Vec<Vec<u8>>,
    /// The pair the walk stands on, after `forward` or `backward` returned true.
    key: Vec<u8>,
    value: Vec<u8>,
    /// A deleted key whose older entries a forward walk passes over.
    skip: Vec<u8>,
    /// Scratch for internal seek targets.
    target: Vec<u8>,
    /// The merged cursor's child reading the active memtable, and that memtable: a step
    /// that passes over many of its entries asks for a flush ([`Memtable::note_scan`]).
    active: Option<(usize, Arc<Memtable>)>,
    /// Entries of the active memtable the current step has passed over (hidden or deleted,
    /// counted where the walk skips them, so a step that lands at once counts nothing).
    stepped: std::cell::Cell<u64>,
    /// The family's level-0 tables as merged children, and the entries of them the current
    /// step has passed over; `None` without level 0 or with the trigger off.
    l0: Option<L0Scan>,
    /// Whether the merged cursor's first child is a transaction's own writes.
    overlay: bool,
    /// What a step passes over, watched for a dead run (`read/dead_runs.rs`).
    watch: Option<Watch>,
}

/// What a walk's step passed over before the pair it found: how many entries, and whether
/// any of them keeps the keys it passed from being recorded as a dead run (invariant D1,
/// rules 2 and 3, `read/dead_runs.rs`).
#[derive(Default)]
struct Watch {
    passed: u64,
    uncertain: bool,
}

/// A walk's count of the entries of each level-0 table it passes over, added to the tables'
/// own counts (`TableHandle::add_scan_passed`, weighed by `compaction::picker`) at the start
/// of each step and when the walk ends: one atomic add per table a step passed over, not
/// one per entry.
struct L0Scan {
    /// The merged cursor's child index of `tables[0]`.
    first: usize,
    tables: Vec<Arc<crate::version::TableHandle>>,
    passed: Vec<std::cell::Cell<u64>>,
    /// Whether any of `passed` is non-zero.
    any: std::cell::Cell<bool>,
}

impl L0Scan {
    fn publish(&self) {
        if self.any.replace(false) {
            for (t, n) in self.tables.iter().zip(&self.passed) {
                let n = n.replace(0);
                if n > 0 {
                    t.add_scan_passed(n);
                }
            }
        }
    }
}

impl Drop for L0Scan {
    fn drop(&mut self) {
        self.publish();
    }
}

impl Walker {
    fn error(&mut self) -> Result<()> {
        match self.m.take_error() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The user key of the pair the walk stands on.
    pub(crate) fn key(&self) -> &[u8] {
        &self.key
    }

    /// The value of the pair the walk stands on.
    pub(crate) fn value(&self) -> &[u8] {
        &self.value
    }

    /// Puts the merged cursor on the first entry of `user_key` or after.
    pub(crate) fn seek_first_of(&mut self, user_key: &[u8]) {
        self.target.clear();
        self.target.extend_from_slice(user_key);
        self.target
            .extend_from_slice(&key::trailer(key::MAX_SEQNO, key::KIND_SEEK));
        self.m.seek(&self.target);
    }

    /// Puts the merged cursor on the last entry of `user_key` or before.
    pub(crate) fn seek_last_of(&mut self, user_key: &[u8]) {
        self.target.clear();
        self.target.extend_from_slice(user_key);
        self.target.extend_from_slice(&[0xFF; key::TRAILER_BYTES]);
        self.m.seek_for_prev(&self.target);
    }

    /// Puts the merged cursor on the last entry before every entry of `user_key`.
    pub(crate) fn seek_before(&mut self, user_key: &[u8]) -> Result<()> {
        self.target.clear();
        self.target.extend_from_slice(user_key);
        self.target
            .extend_from_slice(&key::trailer(key::MAX_SEQNO, key::KIND_SEEK));
        self.m.seek_for_prev(&self.target);
        while self.m.valid() && parse(self.m.key())?.user_key >= user_key {
            self.m.prev();
        }
        Ok(())
    }

    /// Puts the merged cursor before the pair the walk stands on (for `backward`).
    pub(crate) fn seek_before_current(&mut self) -> Result<()> {
        let cur = std::mem::take(&mut self.key);
        let r = self.seek_before(&cur);
        self.key = cur;
        r
    }

    /// Counts the merged cursor's current entry, which the walk passes over (hidden or
    /// deleted, never the entry of a pair it returns), if it comes from the active memtable
    /// (at the trigger, asking for that memtable to be flushed) or a level-0 table.
    #[inline]
    fn count_step(&self) {
        if let Some(c) = self.m.current_child() {
            self.count_child(c);
        }
    }

    /// [`Walker::count_step`] for an entry of the merged cursor's child `c`.
    #[inline]
    fn count_child(&self, c: usize) {
        if let Some((child, mem)) = &self.active {
            if c == *child {
                let n = self.stepped.get() + 1;
                self.stepped.set(n);
                mem.note_scan(n);
                return;
            }
        }
        if let Some(l0) = &self.l0 {
            if let Some(n) = c.checked_sub(l0.first).and_then(|i| l0.passed.get(i)) {
                n.set(n.get() + 1);
                l0.any.set(true);
            }
        }
    }

    /// Starts a step's counts of the entries it passes over.
    #[inline]
    fn start_step(&self) {
        self.stepped.set(0);
        if let Some(l0) = &self.l0 {
            l0.publish();
        }
    }

    /// From the merged cursor's position, moves forward to the next visible pair within
    /// `b`, passing over `skip` first. Returns whether it found one (then `key`/`value`).
    pub(crate) fn forward(&mut self, skip: Skip<'_>, b: &Bounds) -> Result<bool> {
        self.start_step();
        // 0: nothing to pass over; 1: entries of `key`; 2: entries of `skip`.
        let mut passing = match skip {
            Skip::Nothing => 0,
            Skip::Current => 1,
            Skip::Key(k) => {
                self.skip.clear();
                self.skip.extend_from_slice(k);
                2
            }
        };
        // The cursor stands on the entry of the pair the last step returned: not passed
        // over, so not counted.
        let mut returned = matches!(skip, Skip::Current);
        while self.m.valid() {
            let p = parse(self.m.key())?;
            let passed = match passing {
                1 => p.user_key == self.key.as_slice(),
                2 => p.user_key == self.skip.as_slice(),
                _ => false,
            };
            if passed || !visible(p.seqno, self.snapshot) {
                if !std::mem::take(&mut returned) {
                    self.count_step();
                }
                if let Some(w) = &mut self.watch {
                    w.passed += 1;
                    // A value or operand written from the read's seqno on (rule 2), or a
                    // transaction's own write (rule 3).
                    w.uncertain |= (!visible(p.seqno, self.snapshot) && p.kind.carries_value())
                        || (self.overlay && self.m.current_child() == Some(0));
                }
                self.m.next();
                continue;
            }
            returned = false;
            if !b.below_hi(p.user_key) {
                return Ok(false);
            }
            if p.kind == Kind::Merge {
                self.key.clear();
                self.key.extend_from_slice(p.user_key);
                self.fold_forward()?;
                return Ok(true);
            }
            if p.kind.is_value() {
                let live = match key::Expiry::of(p.kind, self.m.value(), || self.now.now()) {
                    Some(key::Expiry::Live(v)) => Some(v),
                    Some(key::Expiry::Expired) => None,
                    None => return Err(short_expiry()),
                };
                if let Some(v) = live {
                    self.key.clear();
                    self.key.extend_from_slice(p.user_key);
                    if p.kind.is_blob() {
                        self.value = self.version.read_blob(&self.key, v)?;
                    } else {
                        self.value.clear();
                        self.value.extend_from_slice(v);
                    }
                    return Ok(true);
                }
            }
            // A tombstone, or a value that has expired: its key's older entries are passed
            // over.
            self.count_step();
            if let Some(w) = &mut self.watch {
                w.passed += 1;
                // Dead by the clock, or by the transaction's own delete (rule 3).
                w.uncertain |=
                    p.kind.is_value() || (self.overlay && self.m.current_child() == Some(0));
            }
            self.skip.clear();
            self.skip.extend_from_slice(p.user_key);
            passing = 2;
            self.m.next();
        }
        self.error()?;
        Ok(false)
    }

    /// The cursor stands on the newest visible entry of `self.key`, a merge operand:
    /// collects it and the visible entries below it down to a value, a tombstone or the
    /// key's end (a duplicate seqno counts once), and folds them into `self.value`. Leaves
    /// the cursor inside or after the key's entries.
    fn fold_forward(&mut self) -> Result<()> {
        let mut n = 0;
        let mut base: Option<Vec<u8>> = None;
        let mut last = None;
        while self.m.valid() {
            let p = parse(self.m.key())?;
            if p.user_key != self.key.as_slice() {
                break;
            }
            let (kind, seqno) = (p.kind, p.seqno);
            if !visible(seqno, self.snapshot) || last == Some(seqno) {
                self.m.next();
                continue;
            }
            last = Some(seqno);
            if kind == Kind::Merge {
                if n == self.operands.len() {
                    self.operands.push(Vec::new());
                }
                self.operands[n].clear();
                self.operands[n].extend_from_slice(self.m.value());
                n += 1;
                self.m.next();
                continue;
            }
            if kind.is_value() {
                let stored = self.m.value().to_vec();
                base = self.version.resolve(kind, &self.key, stored, &self.now)?;
            }
            break;
        }
        self.error()?;
        self.operands[..n].reverse();
        self.fold(n, base.as_deref())
    }

    /// Folds the first `n` collected operands (oldest first) onto `base` into `self.value`.
    fn fold(&mut self, n: usize, base: Option<&[u8]>) -> Result<()> {
        let Some(op) = self.merge.as_ref() else {
            return Err(Error::invalid(format!(
                "column family {} holds merge operands but has no merge operator \
                 (DbBuilder::merge_operator)",
                self.family_name()
            )));
        };
        let refs: Vec<&[u8]> = self.operands[..n].iter().map(Vec::as_slice).collect();
        self.value = crate::merge_op::fold(op.as_ref(), &self.key, base, &refs).map_err(|e| {
            Error::invalid(format!(
                "the merge operator of column family {}: {e}",
                self.family_name()
            ))
        })?;
        Ok(())
    }

    fn family_name(&self) -> String {
        self.version
            .cfs
            .values()
            .find(|c| c.id == self.cf)
            .map(|c| c.name.clone())
            .unwrap_or_else(|| "(dropped)".into())
    }

    /// From the merged cursor's position (on the last entry of some user key), moves
    /// backward to the previous visible pair within `b`. Leaves the cursor on the entry
    /// before that key. Returns whether it found one (then `key`/`value`).
    pub(crate) fn backward(&mut self, b: &Bounds) -> Result<bool> {
        self.start_step();
        while self.m.valid() {
            {
                let p = parse(self.m.key())?;
                self.key.clear();
                self.key.extend_from_slice(p.user_key);
            }
            if !b.above_lo(&self.key) {
                return Ok(false);
            }
            // Entries of the key come oldest first going backwards: the last visible
            // value or tombstone wins, with the merge operands visible above it (`n`,
            // oldest first) folded onto it.
            let mut best: Option<Kind> = None;
            let mut n = 0;
            let mut last = None;
            // The child of the entry that is `best` so far: passed over if a newer one
            // replaces it, or if the key yields no pair.
            let mut best_child: Option<usize> = None;
            while self.m.valid() {
                let p = parse(self.m.key())?;
                if p.user_key != self.key.as_slice() {
                    break;
                }
                if !visible(p.seqno, self.snapshot) || last == Some(p.seqno) {
                    self.count_step();
                }
                if visible(p.seqno, self.snapshot) && last != Some(p.seqno) {
                    last = Some(p.seqno);
                    if p.kind == Kind::Merge {
                        if n == self.operands.len() {
                            self.operands.push(Vec::new());
                        }
                        self.operands[n].clear();
                        self.operands[n].extend_from_slice(self.m.value());
                        n += 1;
                    } else {
                        if let Some(c) = best_child.take() {
                            self.count_child(c);
                        }
                        best = Some(p.kind);
                        best_child = self.m.current_child();
                        n = 0;
                        self.value.clear();
                        self.value.extend_from_slice(self.m.value());
                    }
                }
                self.m.prev();
            }
            self.error()?;
            // A deleted key's tombstone is passed over; a value is what the step returns.
            if let (Some(c), Some(kind)) = (best_child, best) {
                if n == 0 && !kind.is_value() {
                    self.count_child(c);
                }
            }
            if n > 0 {
                if !b.below_hi(&self.key) {
                    continue;
                }
                let base = match best.filter(|k| k.is_value()) {
                    Some(kind) => {
                        let stored = std::mem::take(&mut self.value);
                        self.version.resolve(kind, &self.key, stored, &self.now)?
                    }
                    None => None,
                };
                self.fold(n, base.as_deref())?;
                return Ok(true);
            }
            if let Some(kind) = best.filter(|k| k.is_value()) {
                if b.below_hi(&self.key) {
                    let stored = std::mem::take(&mut self.value);
                    if let Some(v) = self.version.resolve(kind, &self.key, stored, &self.now)? {
                        self.value = v;
                        return Ok(true);
                    }
                    // Expired: the key reads as deleted.
                }
            }
        }
        self.error()?;
        Ok(false)
    }
}

fn short_expiry() -> Error {
    Error::Corruption {
        file: "<merged read>".into(),
        offset: 0,
        reason: "an expiring entry's value is too short to hold its expiry".into(),
    }
}

/// Whether an entry at `seqno` is visible to a read at `snapshot`: committed before it, or
/// the reading transaction's own write.
fn visible(seqno: Seqno, snapshot: Seqno) -> bool {
    seqno < snapshot || seqno == OVERLAY_SEQNO
}

pub(crate) fn parse(ikey: &[u8]) -> Result<key::ParsedKey<'_>> {
    key::parse(ikey).ok_or_else(|| Error::Corruption {
        file: "<merged read>".into(),
        offset: 0,
        reason: "an internal key is too short or has an unknown kind".into(),
    })
}

/// The pairs of a key range in order, from [`crate::Db::range`] and friends. `Item` is a
/// `Result`: a damaged table ends the iteration with its error. Double-ended: `.rev()`
/// works, and both ends can be consumed until they meet.
///
/// As an `Iterator` it hands out owned pairs; [`Iter::next_ref`] and
/// [`Iter::next_back_ref`] lend them instead, without allocating.
pub struct Iter {
    source: Source,
    bounds: Bounds,
    front: Option<Walker>,
    back: Option<Walker>,
    /// Whether each end has handed out a pair (its walker's `key` is then the last).
    front_moved: bool,
    back_moved: bool,
    done: bool,
    /// Where each end records what it covered, in a transaction's read.
    front_slot: Option<usize>,
    back_slot: Option<usize>,
}

impl std::fmt::Debug for Iter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Iter")
            .field("cf", &self.source.cf)
            .field("snapshot", &self.source.snapshot)
            .finish()
    }
}

impl Iter {
    pub(crate) fn new(source: Source, bounds: Bounds) -> Iter {
        Iter {
            source,
            bounds,
            front: None,
            back: None,
            front_moved: false,
            back_moved: false,
            done: false,
            front_slot: None,
            back_slot: None,
        }
    }

    /// Records that the front end ran out: it covered the whole range.
    fn cover_front_to_end(&mut self) {
        let hi = self.bounds.hi.as_ref().map(Vec::as_slice);
        self.source
            .cover_to(&mut self.front_slot, &self.bounds.lo, hi, true);
    }

    /// Records that the back end ran out: it covered the whole range.
    fn cover_back_to_end(&mut self) {
        let lo = self.bounds.lo.as_ref().map(Vec::as_slice);
        self.source
            .cover_to(&mut self.back_slot, &self.bounds.hi, lo, false);
    }

    fn step_front(&mut self) -> Result<bool> {
        if self.front.is_none() {
            let mut w = self.source.walker()?;
            let jump = self.dead_jump();
            match (&jump, &self.bounds.lo) {
                (Some(j), _) => w.seek_first_of(j.end()),
                (None, Bound::Included(k) | Bound::Excluded(k)) => w.seek_first_of(k),
                (None, Bound::Unbounded) => w.m.seek_to_first(),
            }
            let skip = match (&jump, &self.bounds.lo) {
                (None, Bound::Excluded(k)) => Skip::Key(k),
                _ => Skip::Nothing,
            };
            if self.source.dead.is_some() {
                w.watch = Some(Watch::default());
            }
            let r = w.forward(skip, &self.bounds);
            if let Some(watch) = w.watch.take() {
                if matches!(r, Ok(true)) {
                    self.after_first_step(&watch, w.key(), jump.as_ref());
                }
            }
            // Only the first step records: a registration kept longer would only make
            // commits into the family note their keys in it.
            if let Some(dead) = &mut self.source.dead {
                dead.ticket = None;
            }
            self.front = Some(w);
            return r;
        }
        let w = self.front.as_mut().ok_or(Error::Closed)?;
        w.forward(Skip::Current, &self.bounds)
    }

    /// The dead run the front's first step may seek past: one holding the range's start,
    /// recorded at or below the read's seqno, with none of the transaction's own writes in
    /// it (they are not in the run's reckoning).
    fn dead_jump(&self) -> Option<Jump> {
        let runs = self.source.dead.as_ref()?.runs.as_ref()?;
        let start = self.bounds.lo_key().unwrap_or(&[]);
        let j = runs.lookup(start, self.source.snapshot, self.source.sv.generation)?;
        if let Some(ov) = &self.source.overlay {
            if ov.has_key_in(start, j.end()) {
                return None;
            }
        }
        runs.count_jump();
        Some(j)
    }

    /// After the front's first step found a live pair at `found`, having passed over what
    /// `watch` counted (after seeking past `jump`, if it did): arms the family if that was
    /// much, and records the run from the range's start to `found` if it may (invariant D1,
    /// `read/dead_runs.rs`).
    fn after_first_step(&self, watch: &Watch, found: &[u8], jump: Option<&Jump>) {
        let Some(dead) = &self.source.dead else {
            return;
        };
        if watch.passed >= dead_runs::ARM_AFTER {
            match &dead.runs {
                Some(runs) => runs.arm(),
                None => dead.table.family(dead.cf).arm(),
            }
        }
        let worth = match jump {
            // Extending a run keeps it up to date: the head moved since it was recorded.
            Some(_) => watch.passed > 0,
            None => watch.passed >= dead_runs::RECORD_AFTER,
        };
        // A read from an excluded bound has no ticket (rule 3, `DbInner::dead_source`).
        let (Some(runs), Some(ticket), false) = (&dead.runs, &dead.ticket, watch.uncertain) else {
            return;
        };
        if worth {
            runs.record(
                ticket,
                self.bounds.lo_key().unwrap_or(&[]),
                found,
                self.source.snapshot,
                self.source.sv.generation,
                jump,
            );
        }
    }

    fn step_back(&mut self) -> Result<bool> {
        if self.back.is_none() {
            let mut w = self.source.walker()?;
            match &self.bounds.hi {
                Bound::Included(k) => w.seek_last_of(k),
                Bound::Excluded(k) => {
                    let k = k.clone();
                    w.seek_before(&k)?
                }
                Bound::Unbounded => w.m.seek_to_last(),
            }
            self.back = Some(w);
        }
        let w = self.back.as_mut().ok_or(Error::Closed)?;
        w.backward(&self.bounds)
    }

    /// The next pair from the front, lent until the next call: no allocation per pair.
    pub fn next_ref(&mut self) -> Option<Result<(&[u8], &[u8])>> {
        if self.done {
            return None;
        }
        match self.step_front() {
            Ok(true) => {
                let w = self.front.as_ref().expect("stepped");
                let met = self.back_moved && self.back.as_ref().is_some_and(|b| w.key() >= b.key());
                self.source.cover_to(
                    &mut self.front_slot,
                    &self.bounds.lo,
                    Bound::Included(w.key()),
                    true,
                );
                if met {
                    // The two ends met: nothing lies between them.
                    self.done = true;
                    return None;
                }
                self.front_moved = true;
                let w = self.front.as_ref().expect("stepped");
                Some(Ok((w.key(), w.value())))
            }
            Ok(false) => {
                self.cover_front_to_end();
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }

    /// The next pair from the back, lent until the next call: no allocation per pair.
    pub fn next_back_ref(&mut self) -> Option<Result<(&[u8], &[u8])>> {
        if self.done {
            return None;
        }
        match self.step_back() {
            Ok(true) => {
                let w = self.back.as_ref().expect("stepped");
                let met =
                    self.front_moved && self.front.as_ref().is_some_and(|f| w.key() <= f.key());
                self.source.cover_to(
                    &mut self.back_slot,
                    &self.bounds.hi,
                    Bound::Included(w.key()),
                    false,
                );
                if met {
                    self.done = true;
                    return None;
                }
                self.back_moved = true;
                let w = self.back.as_ref().expect("stepped");
                Some(Ok((w.key(), w.value())))
            }
            Ok(false) => {
                self.cover_back_to_end();
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

impl Iterator for Iter {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_ref()
            .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
    }
}

impl DoubleEndedIterator for Iter {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.next_back_ref()
            .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Db;
    use rand::{Rng, SeedableRng};
    use std::cmp::Ordering;

    fn collect(it: &mut dyn InternalIterator, backward: bool) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        if backward {
            it.seek_to_last();
            while it.valid() {
                out.push(it.key().to_vec());
                it.prev();
            }
            out.reverse();
        } else {
            it.seek_to_first();
            while it.valid() {
                out.push(it.key().to_vec());
                it.next();
            }
        }
        out
    }

    /// Every source, and their merge, must give the same entries forwards and backwards,
    /// strictly ordered.
    #[test]
    fn sources_iterate_the_same_both_ways() {
        let fs = silt_vfs::SimFs::new();
        let db = Db::builder("/db")
            .file_system(fs)
            .memtable_bytes(8 << 10)
            .table_target_bytes(8 << 10)
            .level_base_bytes(16 << 10)
            .level_size_ratio(4)
            .l0_compaction_trigger(2)
            .block_size_bytes(512)
            .open()
            .unwrap();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        for round in 0..40 {
            for _ in 0..200 {
                let k = format!("k{:04}", rng.random_range(0..300u32));
                match rng.random_range(0..10) {
                    0 => db.delete(k.as_bytes()).unwrap(),
                    1 => db.single_delete(k.as_bytes()).unwrap(),
                    _ => db
                        .put(k.as_bytes(), &vec![7u8; rng.random_range(0..80)])
                        .unwrap(),
                }
            }
            let sv = db.inner.super_version();
            let cfv = sv.version.cfs[&0].clone();
            let mut children: Vec<(String, Box<dyn InternalIterator>)> = Vec::new();
            for (i, m) in sv.mems.iter().enumerate() {
                children.push((format!("mem{i}"), Box::new(m.iter(0))));
            }
            for t in &cfv.levels[0] {
                let table = t.table().unwrap();
                children.push((
                    format!("L0 {}", t.meta.id),
                    Box::new(TableIter::new_with(&table, true)),
                ));
            }
            for (l, level) in cfv.levels.iter().enumerate().skip(1) {
                if !level.is_empty() {
                    children.push((
                        format!("L{l}"),
                        Box::new(LevelIter::new(level.clone(), true)),
                    ));
                }
            }
            for (name, c) in children.iter_mut() {
                let f = collect(c.as_mut(), false);
                let b = collect(c.as_mut(), true);
                assert_eq!(f.len(), b.len(), "round {round}: {name} count");
                assert!(f == b, "round {round}: {name} differs");
                for w in f.windows(2) {
                    assert_eq!(
                        key::cmp_internal(&w[0], &w[1]),
                        Ordering::Less,
                        "{name} order"
                    );
                }
            }
            let mut m = merged(&sv, 0, None).unwrap();
            let f = collect(&mut m, false);
            let b = collect(&mut m, true);
            assert!(
                f == b,
                "round {round}: merged differs ({} vs {})",
                f.len(),
                b.len()
            );
        }
    }
}
