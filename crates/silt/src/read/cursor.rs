//! [`Cursor`]: seek anywhere in one column family, step both ways. Each step has a copying
//! form (`seek`, `next`, ...: owned pairs) and a lending one (`seek_ref`, `next_ref`, ...:
//! the pair borrowed until the next step, with no allocation).

use std::ops::Bound;

use super::iter::{Skip, Source, Walker};
use super::Bounds;
use crate::error::{Error, Result};
use crate::iter::InternalIterator;

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
    source: Source,
    walker: Option<Walker>,
    forward: bool,
    /// Whether the cursor stands on a pair (the walker's `key` and `value`).
    positioned: bool,
    /// In a transaction's read: the slot of the range the last steps covered, and that
    /// range, which a step continuing from its edge widens instead of adding another.
    run: Option<Run>,
}

impl std::fmt::Debug for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cursor")
            .field("cf", &self.source.cf)
            .field("current", &self.key())
            .finish()
    }
}

/// A covered range and its slot in a transaction's scan log.
type Run = (usize, Bound<Vec<u8>>, Bound<Vec<u8>>);

/// One pair, or none at the end.
pub type Entry = Option<(Vec<u8>, Vec<u8>)>;

/// A pair lent by a cursor until its next step, or none at the end.
pub type EntryRef<'a> = Option<(&'a [u8], &'a [u8])>;

fn owned(e: EntryRef<'_>) -> Entry {
    e.map(|(k, v)| (k.to_vec(), v.to_vec()))
}

impl Cursor {
    pub(crate) fn new(source: Source) -> Cursor {
        Cursor {
            source,
            walker: None,
            forward: true,
            positioned: false,
            run: None,
        }
    }

    fn walker(&mut self) -> Result<&mut Walker> {
        if self.walker.is_none() {
            self.walker = Some(self.source.walker()?);
        }
        self.walker.as_mut().ok_or(Error::Closed)
    }

    /// The key of the pair the cursor stands on.
    pub fn key(&self) -> Option<&[u8]> {
        self.current().map(|(k, _)| k)
    }

    /// The value of the pair the cursor stands on.
    pub fn value(&self) -> Option<&[u8]> {
        self.current().map(|(_, v)| v)
    }

    /// The pair the cursor stands on, lent.
    pub fn current(&self) -> EntryRef<'_> {
        match (&self.walker, self.positioned) {
            (Some(w), true) => Some((w.key(), w.value())),
            _ => None,
        }
    }

    /// Ends a step: where it landed, lent; and (in a transaction's read) what it covered,
    /// from `from` to where it landed, or to the end of the column family in its
    /// direction.
    fn land(
        &mut self,
        r: Result<bool>,
        from: Bound<Vec<u8>>,
        forward: bool,
    ) -> Result<EntryRef<'_>> {
        self.forward = forward;
        self.positioned = matches!(r, Ok(true));
        r?;
        if self.source.scans.is_some() {
            let landed = match self.key() {
                Some(k) => Bound::Included(k.to_vec()),
                None => Bound::Unbounded,
            };
            self.cover(from, landed, forward);
        }
        Ok(self.current())
    }

    /// Records a covered range, continuing the last run when this step starts at its edge.
    fn cover(&mut self, from: Bound<Vec<u8>>, landed: Bound<Vec<u8>>, forward: bool) {
        let (lo, hi) = if forward {
            (from, landed)
        } else {
            (landed, from)
        };
        let (slot, lo, hi) = match self.run.take() {
            Some((slot, rlo, rhi)) if forward && rhi == lo => (Some(slot), rlo, hi),
            Some((slot, rlo, rhi)) if !forward && rlo == hi => (Some(slot), lo, rhi),
            _ => (None, lo, hi),
        };
        let mut slot = slot;
        self.source.cover(&mut slot, lo.clone(), hi.clone());
        self.run = slot.map(|s| (s, lo, hi));
    }

    /// Where a step starts, for the scan log (copied only in a transaction's read).
    fn from(&self, b: Bound<&[u8]>) -> Bound<Vec<u8>> {
        if self.source.scans.is_none() {
            return Bound::Unbounded;
        }
        match b {
            Bound::Included(k) => Bound::Included(k.to_vec()),
            Bound::Excluded(k) => Bound::Excluded(k.to_vec()),
            Bound::Unbounded => Bound::Unbounded,
        }
    }

    /// [`Cursor::seek`], lending the pair instead of copying it.
    ///
    /// # Errors
    ///
    /// As [`Cursor::seek`].
    pub fn seek_ref(&mut self, key: &[u8]) -> Result<EntryRef<'_>> {
        let all = Bounds::from_range::<&[u8], _>(..);
        let from = self.from(Bound::Included(key));
        let r = self.walker().and_then(|w| {
            w.seek_first_of(key);
            w.forward(Skip::Nothing, &all)
        });
        self.land(r, from, true)
    }

    /// Moves to the first pair with a key `>= key`.
    ///
    /// # Errors
    ///
    /// `Io`/`Corruption` from a table.
    pub fn seek(&mut self, key: &[u8]) -> Result<Entry> {
        self.seek_ref(key).map(owned)
    }

    /// [`Cursor::seek_for_prev`], lending the pair.
    ///
    /// # Errors
    ///
    /// As [`Cursor::seek`].
    pub fn seek_for_prev_ref(&mut self, key: &[u8]) -> Result<EntryRef<'_>> {
        let all = Bounds::from_range::<&[u8], _>(..);
        let from = self.from(Bound::Included(key));
        let r = self.walker().and_then(|w| {
            w.seek_last_of(key);
            w.backward(&all)
        });
        self.land(r, from, false)
    }

    /// Moves to the last pair with a key `<= key`.
    ///
    /// # Errors
    ///
    /// As [`Cursor::seek`].
    pub fn seek_for_prev(&mut self, key: &[u8]) -> Result<Entry> {
        self.seek_for_prev_ref(key).map(owned)
    }

    /// Moves to the first pair.
    ///
    /// # Errors
    ///
    /// As [`Cursor::seek`].
    pub fn seek_to_first(&mut self) -> Result<Entry> {
        self.seek(&[])
    }

    fn seek_to_last_ref(&mut self) -> Result<EntryRef<'_>> {
        let all = Bounds::from_range::<&[u8], _>(..);
        let r = self.walker().and_then(|w| {
            w.m.seek_to_last();
            w.backward(&all)
        });
        self.land(r, Bound::Unbounded, false)
    }

    /// Moves to the last pair.
    ///
    /// # Errors
    ///
    /// As [`Cursor::seek`].
    pub fn seek_to_last(&mut self) -> Result<Entry> {
        self.seek_to_last_ref().map(owned)
    }

    /// [`Cursor::next`], lending the pair.
    ///
    /// # Errors
    ///
    /// As [`Cursor::seek`].
    pub fn next_ref(&mut self) -> Result<EntryRef<'_>> {
        if !self.positioned {
            return self.seek_ref(&[]);
        }
        let all = Bounds::from_range::<&[u8], _>(..);
        let from = self.from(Bound::Included(self.key().unwrap_or(&[])));
        let forward = self.forward;
        let r = self.walker().and_then(|w| {
            if !forward {
                let cur = w.key().to_vec();
                w.seek_first_of(&cur);
            }
            w.forward(Skip::Current, &all)
        });
        self.land(r, from, true)
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
        self.next_ref().map(owned)
    }

    /// [`Cursor::prev`], lending the pair.
    ///
    /// # Errors
    ///
    /// As [`Cursor::seek`].
    pub fn prev_ref(&mut self) -> Result<EntryRef<'_>> {
        if !self.positioned {
            return self.seek_to_last_ref();
        }
        let all = Bounds::from_range::<&[u8], _>(..);
        let from = self.from(Bound::Included(self.key().unwrap_or(&[])));
        let r = self.walker().and_then(|w| {
            // Position on the last entry of the key before the current one, whatever the
            // direction.
            w.seek_before_current()?;
            w.backward(&all)
        });
        self.land(r, from, false)
    }

    /// Moves to the pair before the current one (or the last, if unpositioned).
    ///
    /// # Errors
    ///
    /// As [`Cursor::seek`].
    pub fn prev(&mut self) -> Result<Entry> {
        self.prev_ref().map(owned)
    }
}
