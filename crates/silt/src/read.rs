//! The user's view of the data: [`Iter`] (a double-ended iterator over a key range) and
//! [`Cursor`] (seek anywhere, step both ways).
//!
//! Both merge every source of one column family (memtables, level-0 tables, one
//! concatenating cursor per deeper level) and then, per user key, keep only the newest entry
//! visible at the read's seqno: a value is returned, a tombstone hides the key.
//!
//! An iterator pins the super-version it started with: the tables it reads stay on disk
//! until it is dropped, so it sees one consistent state however long it lives.

use std::cmp::Ordering;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use crate::db::{DbInner, SuperVersion};
use crate::error::{Error, Result};
use crate::iter::{InternalIterator, LevelIter, MergingIter};
use crate::key::{self, Kind, Seqno, KIND_SEEK, MAX_SEQNO};
use crate::sstable::TableIter;

/// A key range with owned bounds.
#[derive(Clone, Debug)]
pub(crate) struct Bounds {
    pub(crate) lo: Bound<Vec<u8>>,
    pub(crate) hi: Bound<Vec<u8>>,
}

impl Bounds {
    pub(crate) fn from_range<K: AsRef<[u8]>, R: RangeBounds<K>>(r: R) -> Bounds {
        let own = |b: Bound<&K>| match b {
            Bound::Included(k) => Bound::Included(k.as_ref().to_vec()),
            Bound::Excluded(k) => Bound::Excluded(k.as_ref().to_vec()),
            Bound::Unbounded => Bound::Unbounded,
        };
        Bounds {
            lo: own(r.start_bound()),
            hi: own(r.end_bound()),
        }
    }

    pub(crate) fn prefix(p: &[u8]) -> Bounds {
        let mut end = p.to_vec();
        let hi = loop {
            match end.pop() {
                None => break Bound::Unbounded,
                Some(0xFF) => continue,
                Some(b) => {
                    end.push(b + 1);
                    break Bound::Excluded(end);
                }
            }
        };
        Bounds {
            lo: Bound::Included(p.to_vec()),
            hi,
        }
    }

    pub(crate) fn above_lo(&self, k: &[u8]) -> bool {
        match &self.lo {
            Bound::Included(b) => k >= b.as_slice(),
            Bound::Excluded(b) => k > b.as_slice(),
            Bound::Unbounded => true,
        }
    }

    pub(crate) fn below_hi(&self, k: &[u8]) -> bool {
        match &self.hi {
            Bound::Included(b) => k <= b.as_slice(),
            Bound::Excluded(b) => k < b.as_slice(),
            Bound::Unbounded => true,
        }
    }

    /// The user-key range as inclusive ends for overlap tests (`None` = unbounded).
    pub(crate) fn lo_key(&self) -> Option<&[u8]> {
        match &self.lo {
            Bound::Included(b) | Bound::Excluded(b) => Some(b),
            Bound::Unbounded => None,
        }
    }

    pub(crate) fn hi_key(&self) -> Option<&[u8]> {
        match &self.hi {
            Bound::Included(b) | Bound::Excluded(b) => Some(b),
            Bound::Unbounded => None,
        }
    }
}

/// The internal key sorting before every entry of `user_key`.
fn first_of(user_key: &[u8]) -> Vec<u8> {
    let mut k = user_key.to_vec();
    k.extend_from_slice(&key::trailer(MAX_SEQNO, KIND_SEEK));
    k
}

/// The internal key sorting after every entry of `user_key`.
fn last_of(user_key: &[u8]) -> Vec<u8> {
    let mut k = user_key.to_vec();
    k.extend_from_slice(&[0xFF; key::TRAILER_BYTES]);
    k
}

/// Builds the merged cursor over one column family of a super-version. `db` names a
/// column family that is not there.
pub(crate) fn merged(db: &DbInner, sv: &SuperVersion, cf: u32) -> Result<MergingIter> {
    let Some(cfv) = sv.version.cfs.get(&cf) else {
        return Err(db.cf_not_found(cf));
    };
    let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
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
struct Walker {
    m: MergingIter,
    snapshot: Seqno,
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
    fn next_forward(
        &mut self,
        skip: Option<&[u8]>,
        b: &Bounds,
    ) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let mut skip: Option<Vec<u8>> = skip.map(|s| s.to_vec());
        while self.m.valid() {
            let p = parse(self.m.key())?;
            if p.seqno >= self.snapshot || skip.as_deref() == Some(p.user_key) {
                self.m.next();
                continue;
            }
            if !b.below_hi(p.user_key) {
                return Ok(None);
            }
            let uk = p.user_key.to_vec();
            if p.kind == Kind::Put {
                let v = self.m.value().to_vec();
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
    fn next_backward(&mut self, b: &Bounds) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
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
                if p.seqno < self.snapshot {
                    best = Some((p.kind, self.m.value().to_vec()));
                }
                self.m.prev();
            }
            self.error()?;
            if let Some((Kind::Put, v)) = best {
                if b.below_hi(&uk) {
                    return Ok(Some((uk, v)));
                }
            }
        }
        self.error()?;
        Ok(None)
    }
}

fn parse(ikey: &[u8]) -> Result<key::ParsedKey<'_>> {
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
    db: Arc<DbInner>,
    sv: Arc<SuperVersion>,
    cf: u32,
    bounds: Bounds,
    snapshot: Seqno,
    front: Option<Walker>,
    back: Option<Walker>,
    last_front: Option<Vec<u8>>,
    last_back: Option<Vec<u8>>,
    done: bool,
}

impl std::fmt::Debug for Iter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Iter")
            .field("cf", &self.cf)
            .field("snapshot", &self.snapshot)
            .finish()
    }
}

impl Iter {
    pub(crate) fn new(
        db: Arc<DbInner>,
        cf: u32,
        bounds: Bounds,
        snapshot: Seqno,
        sv: Option<Arc<SuperVersion>>,
    ) -> Iter {
        let sv = sv.unwrap_or_else(|| db.super_version());
        Iter {
            db,
            sv,
            cf,
            bounds,
            snapshot,
            front: None,
            back: None,
            last_front: None,
            last_back: None,
            done: false,
        }
    }

    fn walker(&self) -> Result<Walker> {
        Ok(Walker {
            m: merged(&self.db, &self.sv, self.cf)?,
            snapshot: self.snapshot,
        })
    }

    fn step_front(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        if self.front.is_none() {
            let mut w = self.walker()?;
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
            let mut w = self.walker()?;
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

    /// Keeps the database alive for as long as the iterator (it pins tables).
    #[allow(dead_code)]
    fn db(&self) -> &Arc<DbInner> {
        &self.db
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
                        self.done = true;
                        return None;
                    }
                }
                self.last_front = Some(k.clone());
                Some(Ok((k, v)))
            }
            Ok(None) => {
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
                        self.done = true;
                        return None;
                    }
                }
                self.last_back = Some(k.clone());
                Some(Ok((k, v)))
            }
            Ok(None) => {
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

/// A seekable cursor over one column family at one read seqno.
///
/// # Examples
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let db = silt::Db::open(dir.path()).unwrap();
/// for k in [b"a", b"c", b"e"] { db.put(k, b"").unwrap(); }
/// let mut c = db.cursor();
/// assert_eq!(c.seek(b"b").unwrap().map(|(k, _)| k), Some(b"c".to_vec()));
/// assert_eq!(c.next().unwrap().map(|(k, _)| k), Some(b"e".to_vec()));
/// assert_eq!(c.prev().unwrap().map(|(k, _)| k), Some(b"c".to_vec()));
/// assert_eq!(c.seek_for_prev(b"b").unwrap().map(|(k, _)| k), Some(b"a".to_vec()));
/// ```
pub struct Cursor {
    sv: Arc<SuperVersion>,
    _db: Arc<DbInner>,
    cf: u32,
    snapshot: Seqno,
    walker: Option<Walker>,
    forward: bool,
    current: Option<Vec<u8>>,
}

impl std::fmt::Debug for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cursor")
            .field("cf", &self.cf)
            .field("current", &self.current)
            .finish()
    }
}

/// One pair, or none at the end.
pub type Entry = Option<(Vec<u8>, Vec<u8>)>;

impl Cursor {
    pub(crate) fn new(
        db: Arc<DbInner>,
        cf: u32,
        snapshot: Seqno,
        sv: Option<Arc<SuperVersion>>,
    ) -> Cursor {
        let sv = sv.unwrap_or_else(|| db.super_version());
        Cursor {
            sv,
            _db: db,
            cf,
            snapshot,
            walker: None,
            forward: true,
            current: None,
        }
    }

    fn walker(&mut self) -> Result<&mut Walker> {
        if self.walker.is_none() {
            self.walker = Some(Walker {
                m: merged(&self._db, &self.sv, self.cf)?,
                snapshot: self.snapshot,
            });
        }
        self.walker.as_mut().ok_or(Error::Closed)
    }

    fn land(&mut self, r: Result<Entry>, forward: bool) -> Result<Entry> {
        self.forward = forward;
        match r {
            Ok(e) => {
                self.current = e.as_ref().map(|(k, _)| k.clone());
                Ok(e)
            }
            Err(e) => {
                self.current = None;
                Err(e)
            }
        }
    }

    /// Moves to the first pair with a key `>= key`.
    ///
    /// # Errors
    ///
    /// `Io`/`Corruption` from a table.
    pub fn seek(&mut self, key: &[u8]) -> Result<Entry> {
        let all = Bounds::from_range::<&[u8], _>(..);
        let w = self.walker()?;
        w.m.seek(&first_of(key));
        let r = w.next_forward(None, &all);
        self.land(r, true)
    }

    /// Moves to the last pair with a key `<= key`.
    ///
    /// # Errors
    ///
    /// As [`Cursor::seek`].
    pub fn seek_for_prev(&mut self, key: &[u8]) -> Result<Entry> {
        let all = Bounds::from_range::<&[u8], _>(..);
        let w = self.walker()?;
        w.m.seek_for_prev(&last_of(key));
        let r = w.next_backward(&all);
        self.land(r, false)
    }

    /// Moves to the first pair.
    ///
    /// # Errors
    ///
    /// As [`Cursor::seek`].
    pub fn seek_to_first(&mut self) -> Result<Entry> {
        self.seek(&[])
    }

    /// Moves to the last pair.
    ///
    /// # Errors
    ///
    /// As [`Cursor::seek`].
    pub fn seek_to_last(&mut self) -> Result<Entry> {
        let all = Bounds::from_range::<&[u8], _>(..);
        let w = self.walker()?;
        w.m.seek_to_last();
        let r = w.next_backward(&all);
        self.land(r, false)
    }

    /// Moves to the pair after the current one (or the first, if unpositioned).
    ///
    /// # Errors
    ///
    /// As [`Cursor::seek`].
    // A cursor's step is fallible and never "ends" (it reports `None` and stays usable), so
    // it is deliberately not `Iterator::next`; use [`Db::range`](crate::Db::range) for that.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Entry> {
        let Some(cur) = self.current.clone() else {
            return self.seek_to_first();
        };
        let all = Bounds::from_range::<&[u8], _>(..);
        let forward = self.forward;
        let w = self.walker()?;
        if !forward {
            w.m.seek(&first_of(&cur));
        }
        let r = w.next_forward(Some(&cur), &all);
        self.land(r, true)
    }

    /// Moves to the pair before the current one (or the last, if unpositioned).
    ///
    /// # Errors
    ///
    /// As [`Cursor::seek`].
    pub fn prev(&mut self) -> Result<Entry> {
        let Some(cur) = self.current.clone() else {
            return self.seek_to_last();
        };
        let all = Bounds::from_range::<&[u8], _>(..);
        let w = self.walker()?;
        // Position on the last entry of the key before `cur`, whatever the direction.
        w.m.seek_for_prev(&first_of(&cur));
        while w.m.valid() && parse(w.m.key())?.user_key.cmp(cur.as_slice()) != Ordering::Less {
            w.m.prev();
        }
        let r = w.next_backward(&all);
        self.land(r, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Db;
    use rand::{Rng, SeedableRng};

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
            let mut m = merged(&db.inner, &sv, 0).unwrap();
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
