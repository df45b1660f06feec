//! [`Iter`]: the double-ended iterator over a key range, and the machinery it shares with
//! the cursor: the merged cursor over a column family ([`merged`]) and the walk that turns
//! internal entries into visible pairs ([`Walker`]).

use std::ops::Bound;
use std::sync::Arc;

use super::overlay::{Overlay, OverlayIter, ScanLog, ScanRange, OVERLAY_SEQNO};
use super::{first_of, last_of, Bounds};
use crate::error::{Error, Result};
use crate::iter::{InternalIterator, MergingIter};
use crate::key::{self, Kind, Seqno};
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
}

impl Source {
    /// A source reading `cf` of `sv` at `snapshot`; `missing` is the error for a family
    /// `sv` does not have (the caller knows its name).
    pub(crate) fn new(
        sv: Arc<SuperVersion>,
        cf: u32,
        snapshot: Seqno,
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
        }
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
        })
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

/// One direction of user-level iteration over a merged cursor.
pub(crate) struct Walker {
    pub(crate) m: MergingIter,
    snapshot: Seqno,
    /// Resolves `Blob` entries' pointers to their values.
    version: Arc<crate::version::Version>,
}

impl Walker {
    fn error(&mut self) -> Result<()> {
        match self.m.take_error() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// From the cursor's position, the next visible pair moving forward, skipping entries
    /// of `skip` first.
    pub(crate) fn next_forward(
        &mut self,
        skip: Option<&[u8]>,
        b: &Bounds,
    ) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let mut skip: Option<Vec<u8>> = skip.map(|s| s.to_vec());
        while self.m.valid() {
            let p = parse(self.m.key())?;
            if !visible(p.seqno, self.snapshot) || skip.as_deref() == Some(p.user_key) {
                self.m.next();
                continue;
            }
            if !b.below_hi(p.user_key) {
                return Ok(None);
            }
            let uk = p.user_key.to_vec();
            if p.kind.is_value() {
                let v = self.version.resolve(p.kind, &uk, self.m.value().to_vec())?;
                return Ok(Some((uk, v)));
            }
            skip = Some(uk);
            self.m.next();
        }
        self.error()?;
        Ok(None)
    }

    /// From the cursor's position (on the last entry of some user key), the previous
    /// visible pair moving backward. Leaves the cursor on the entry before that key.
    pub(crate) fn next_backward(&mut self, b: &Bounds) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        while self.m.valid() {
            let uk = parse(self.m.key())?.user_key.to_vec();
            if !b.above_lo(&uk) {
                return Ok(None);
            }
            // Entries of `uk` come oldest first going backwards: the last visible one wins.
            let mut best: Option<(Kind, Vec<u8>)> = None;
            while self.m.valid() {
                let p = parse(self.m.key())?;
                if p.user_key != uk.as_slice() {
                    break;
                }
                if visible(p.seqno, self.snapshot) {
                    best = Some((p.kind, self.m.value().to_vec()));
                }
                self.m.prev();
            }
            self.error()?;
            if let Some((kind, v)) = best.filter(|(k, _)| k.is_value()) {
                if b.below_hi(&uk) {
                    let v = self.version.resolve(kind, &uk, v)?;
                    return Ok(Some((uk, v)));
                }
            }
        }
        self.error()?;
        Ok(None)
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
pub struct Iter {
    source: Source,
    bounds: Bounds,
    front: Option<Walker>,
    back: Option<Walker>,
    last_front: Option<Vec<u8>>,
    last_back: Option<Vec<u8>>,
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
            last_front: None,
            last_back: None,
            done: false,
            front_slot: None,
            back_slot: None,
        }
    }

    /// Records what the front end covered: from the range's start to `to` (the key it
    /// returned, or the range's end when it ran out).
    fn cover_front(&mut self, to: Bound<Vec<u8>>) {
        if self.source.scans.is_some() {
            let lo = self.bounds.lo.clone();
            self.source.cover(&mut self.front_slot, lo, to);
        }
    }

    /// Records what the back end covered: from `from` to the range's end.
    fn cover_back(&mut self, from: Bound<Vec<u8>>) {
        if self.source.scans.is_some() {
            let hi = self.bounds.hi.clone();
            self.source.cover(&mut self.back_slot, from, hi);
        }
    }

    fn step_front(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        if self.front.is_none() {
            let mut w = self.source.walker()?;
            match &self.bounds.lo {
                Bound::Included(k) | Bound::Excluded(k) => w.m.seek(&first_of(k)),
                Bound::Unbounded => w.m.seek_to_first(),
            }
            let skip = match &self.bounds.lo {
                Bound::Excluded(k) => Some(k.clone()),
                _ => None,
            };
            let r = w.next_forward(skip.as_deref(), &self.bounds);
            self.front = Some(w);
            return r;
        }
        let skip = self.last_front.clone();
        let w = self.front.as_mut().ok_or(Error::Closed)?;
        w.next_forward(skip.as_deref(), &self.bounds)
    }

    fn step_back(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        if self.back.is_none() {
            let mut w = self.source.walker()?;
            match &self.bounds.hi {
                Bound::Included(k) => w.m.seek_for_prev(&last_of(k)),
                Bound::Excluded(k) => w.m.seek_for_prev(&first_of(k)),
                Bound::Unbounded => w.m.seek_to_last(),
            }
            self.back = Some(w);
        }
        let w = self.back.as_mut().ok_or(Error::Closed)?;
        w.next_backward(&self.bounds)
    }
}

impl Iterator for Iter {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.step_front() {
            Ok(Some((k, v))) => {
                if let Some(b) = &self.last_back {
                    if k.as_slice() >= b.as_slice() {
                        // The two ends met: nothing lies between them.
                        self.cover_front(Bound::Included(k));
                        self.done = true;
                        return None;
                    }
                }
                self.cover_front(Bound::Included(k.clone()));
                self.last_front = Some(k.clone());
                Some(Ok((k, v)))
            }
            Ok(None) => {
                let hi = self.bounds.hi.clone();
                self.cover_front(hi);
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

impl DoubleEndedIterator for Iter {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.step_back() {
            Ok(Some((k, v))) => {
                if let Some(f) = &self.last_front {
                    if k.as_slice() <= f.as_slice() {
                        self.cover_back(Bound::Included(k));
                        self.done = true;
                        return None;
                    }
                }
                self.cover_back(Bound::Included(k.clone()));
                self.last_back = Some(k.clone());
                Some(Ok((k, v)))
            }
            Ok(None) => {
                let lo = self.bounds.lo.clone();
                self.cover_back(lo);
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
