//! [`Cursor`]: seek anywhere in one column family, step both ways.

use std::cmp::Ordering;
use std::ops::Bound;

use super::iter::{parse, Source, Walker};
use super::{first_of, last_of, Bounds};
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
    current: Option<Vec<u8>>,
    /// In a transaction's read: the slot of the range the last steps covered, and that
    /// range, which a step continuing from its edge widens instead of adding another.
    run: Option<Run>,
}

impl std::fmt::Debug for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cursor")
            .field("cf", &self.source.cf)
            .field("current", &self.current)
            .finish()
    }
}

/// A covered range and its slot in a transaction's scan log.
type Run = (usize, Bound<Vec<u8>>, Bound<Vec<u8>>);

/// One pair, or none at the end.
pub type Entry = Option<(Vec<u8>, Vec<u8>)>;

impl Cursor {
    pub(crate) fn new(source: Source) -> Cursor {
        Cursor {
            source,
            walker: None,
            forward: true,
            current: None,
            run: None,
        }
    }

    /// Records (in a transaction's read) that a step from `from` covered every key up to
    /// where it landed, `r`'s key, or to the end of the column family in its direction.
    fn cover(&mut self, from: Bound<Vec<u8>>, r: &Result<Entry>, forward: bool) {
        if self.source.scans.is_none() {
            return;
        }
        let Ok(e) = r else { return };
        let landed = match e {
            Some((k, _)) => Bound::Included(k.clone()),
            None => Bound::Unbounded,
        };
        let (lo, hi) = if forward {
            (from, landed)
        } else {
            (landed, from)
        };
        // Continue the last run when this step starts at its edge.
        let (slot, lo, hi) = match self.run.take() {
            Some((slot, rlo, rhi)) if forward && rhi == lo => (Some(slot), rlo, hi),
            Some((slot, rlo, rhi)) if !forward && rlo == hi => (Some(slot), lo, rhi),
            _ => (None, lo, hi),
        };
        let mut slot = slot;
        self.source.cover(&mut slot, lo.clone(), hi.clone());
        self.run = slot.map(|s| (s, lo, hi));
    }

    fn walker(&mut self) -> Result<&mut Walker> {
        if self.walker.is_none() {
            self.walker = Some(self.source.walker()?);
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
        self.cover(Bound::Included(key.to_vec()), &r, true);
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
        self.cover(Bound::Included(key.to_vec()), &r, false);
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
        self.cover(Bound::Unbounded, &r, false);
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
        self.cover(Bound::Included(cur), &r, true);
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
        self.cover(Bound::Included(cur), &r, false);
        self.land(r, false)
    }
}
