//! The user's view of the data: [`Iter`] (a double-ended iterator over a key range),
//! [`Cursor`] (seek anywhere, step both ways), and the [`Read`] trait every view of a
//! database implements (`Db`, `Snapshot`, and later transactions).
//!
//! Both merge every source of one column family (memtables, level-0 tables, one
//! concatenating cursor per deeper level) and then, per user key, keep only the newest entry
//! visible at the read's seqno: a value is returned, a tombstone hides the key.
//!
//! An iterator pins the super-version it started with (it holds the `Arc<SuperVersion>`,
//! not the database): the tables it reads stay on disk until it is dropped, so it sees one
//! consistent state however long it lives.
//!
//! This module sits above `version`, `iter`, `memtable` and `sstable` and below `db`: it
//! reads a super-version at a seqno and knows nothing of writes, the log or the manifest.
//! The `impl`s that give `Db` and `Snapshot` these reads are in `db/read.rs`.

use std::ops::{Bound, RangeBounds};

use crate::cf::ColumnFamily;
use crate::error::Result;
use crate::key::{self, KIND_SEEK, MAX_SEQNO};

mod cursor;
mod dead_runs;
mod iter;
mod overlay;

pub use cursor::{Cursor, Entry, EntryRef};
pub(crate) use dead_runs::DeadRunTable;
pub use iter::Iter;
pub(crate) use iter::{merged, parse, DeadSource, Source};
pub(crate) use overlay::{Overlay, ScanLog, ScanRange};

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
pub(crate) fn first_of(user_key: &[u8]) -> Vec<u8> {
    let mut k = user_key.to_vec();
    k.extend_from_slice(&key::trailer(MAX_SEQNO, KIND_SEEK));
    k
}

/// Every read of a database view, as a trait: implemented by [`Db`](crate::Db) (the latest
/// state) and [`Snapshot`](crate::Snapshot) (a fixed one), for code that reads either. The
/// types' own methods of the same names are the same functions.
pub trait Read {
    /// See [`Db::get`](crate::Db::get).
    ///
    /// # Errors
    ///
    /// As [`Db::get`](crate::Db::get).
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// See [`Db::get_cf`](crate::Db::get_cf).
    ///
    /// # Errors
    ///
    /// As [`Db::get_cf`](crate::Db::get_cf).
    fn get_cf(&self, cf: &ColumnFamily, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// See [`Db::iter`](crate::Db::iter).
    fn iter(&self) -> Iter;
    /// See [`Db::range`](crate::Db::range).
    fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Iter;
    /// See [`Db::range_cf`](crate::Db::range_cf).
    fn range_cf<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, cf: &ColumnFamily, range: R) -> Iter;
    /// See [`Db::prefix`](crate::Db::prefix).
    fn prefix(&self, prefix: &[u8]) -> Iter;
    /// See [`Db::prefix_cf`](crate::Db::prefix_cf).
    fn prefix_cf(&self, cf: &ColumnFamily, prefix: &[u8]) -> Iter;
    /// See [`Db::cursor`](crate::Db::cursor).
    fn cursor(&self) -> Cursor;
    /// See [`Db::cursor_cf`](crate::Db::cursor_cf).
    fn cursor_cf(&self, cf: &ColumnFamily) -> Cursor;
}
