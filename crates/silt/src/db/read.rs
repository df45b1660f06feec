//! The reads of [`Db`] and [`Snapshot`] (the [`Read`] trait of `read/`, and the same
//! methods on each type): a read takes a super-version and a seqno (`read_view`), then
//! searches it (`SuperVersion::get`) or iterates it (`read::Iter`, `read::Cursor`).

use super::*;
use crate::read::{Cursor, Read, Source};

/// What a read sees: a super-version (the memtables and tables it may read, pinned) and the
/// seqno it reads at. `sv: None` takes the current super-version when the read starts
/// (a snapshot: its seqno is registered, so compaction keeps what it sees).
pub(crate) struct View {
    inner: Arc<DbInner>,
    sv: Option<Arc<SuperVersion>>,
    seqno: Seqno,
}

impl View {
    fn get(&self, cf: u32, key: &[u8]) -> Result<Option<Vec<u8>>> {
        match &self.sv {
            Some(sv) => self.inner.get_in(sv, cf, key, self.seqno),
            None => self.inner.get(cf, key, self.seqno),
        }
    }

    /// The source of an iterator starting at `lo` (`Some`), or of a cursor.
    fn source(self, cf: u32, lo: Option<&std::ops::Bound<Vec<u8>>>) -> Source {
        // Registered before the super-version is taken, or while the one taken is current
        // (invariant D1, rule 2).
        let dead = lo.and_then(|lo| self.inner.dead_source(cf, lo, self.sv.as_ref()));
        let sv = self.sv.unwrap_or_else(|| self.inner.super_version());
        let inner = self.inner;
        let now = Arc::new(crate::clock::ReadTime::new(inner.opts.clock.clone()));
        let merge = inner.merge_operator_if_any(cf);
        Source::new(sv, cf, self.seqno, now, || inner.cf_not_found(cf))
            .with_merge(merge)
            .with_l0_scan(inner.opts.l0_scan_compaction_ratio > 0.0)
            .with_dead_runs(dead)
    }

    fn iter(self, cf: u32, bounds: Bounds) -> Iter {
        Iter::new(self.source(cf, Some(&bounds.lo)), bounds)
    }

    fn cursor(self, cf: u32) -> Cursor {
        Cursor::new(self.source(cf, None))
    }
}

/// The read methods, written once for every view of a database ([`Db`], [`Snapshot`], and
/// later transactions), so that no read exists on one and not the other. Each type has a
/// `view(&self) -> View`; [`Read`] is the same set as a trait, for generic code.
macro_rules! read_methods {
    ($what:literal) => {
        #[doc = concat!("The value of `key` in the default column family, ", $what, ".")]
        ///
        /// # Errors
        ///
        /// `Io` or `Corruption` (naming the table) if a table could not be read.
        pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
            self.view().get(0, key)
        }

        #[doc = concat!("The value of `key` in column family `cf`, ", $what, ".")]
        ///
        /// # Errors
        ///
        /// As `get`, and `ColumnFamilyNotFound`.
        pub fn get_cf(&self, cf: &ColumnFamily, key: &[u8]) -> Result<Option<Vec<u8>>> {
            self.view().get(cf.id, key)
        }

        #[doc = concat!("Every key-value pair of the default column family, ", $what, ", in key order; `.rev()` walks backwards. Shorthand for `range::<&[u8], _>(..)`.")]
        pub fn iter(&self) -> Iter {
            self.range::<&[u8], _>(..)
        }

        #[doc = concat!("The key-value pairs of the default column family in `range`, ", $what, ", in key order; `.rev()` walks backwards.")]
        pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Iter {
            self.view().iter(0, Bounds::from_range(range))
        }

        #[doc = concat!("The key-value pairs of column family `cf` in `range`, ", $what, ".")]
        pub fn range_cf<K: AsRef<[u8]>, R: RangeBounds<K>>(
            &self,
            cf: &ColumnFamily,
            range: R,
        ) -> Iter {
            self.view().iter(cf.id, Bounds::from_range(range))
        }

        #[doc = concat!("The pairs of the default column family whose key starts with `prefix`, ", $what, ".")]
        pub fn prefix(&self, prefix: &[u8]) -> Iter {
            self.view().iter(0, Bounds::prefix(prefix))
        }

        #[doc = concat!("The pairs of column family `cf` whose key starts with `prefix`, ", $what, ".")]
        pub fn prefix_cf(&self, cf: &ColumnFamily, prefix: &[u8]) -> Iter {
            self.view().iter(cf.id, Bounds::prefix(prefix))
        }

        #[doc = concat!("A cursor over the default column family that can seek anywhere and step both ways, ", $what, ".")]
        pub fn cursor(&self) -> Cursor {
            self.view().cursor(0)
        }

        #[doc = concat!("A cursor over column family `cf`, ", $what, ".")]
        pub fn cursor_cf(&self, cf: &ColumnFamily) -> Cursor {
            self.view().cursor(cf.id)
        }
    };
}

macro_rules! impl_read {
    ($t:ty) => {
        impl Read for $t {
            fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
                <$t>::get(self, key)
            }
            fn get_cf(&self, cf: &ColumnFamily, key: &[u8]) -> Result<Option<Vec<u8>>> {
                <$t>::get_cf(self, cf, key)
            }
            fn iter(&self) -> Iter {
                <$t>::iter(self)
            }
            fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Iter {
                <$t>::range(self, range)
            }
            fn range_cf<K: AsRef<[u8]>, R: RangeBounds<K>>(
                &self,
                cf: &ColumnFamily,
                range: R,
            ) -> Iter {
                <$t>::range_cf(self, cf, range)
            }
            fn prefix(&self, prefix: &[u8]) -> Iter {
                <$t>::prefix(self, prefix)
            }
            fn prefix_cf(&self, cf: &ColumnFamily, prefix: &[u8]) -> Iter {
                <$t>::prefix_cf(self, cf, prefix)
            }
            fn cursor(&self) -> Cursor {
                <$t>::cursor(self)
            }
            fn cursor_cf(&self, cf: &ColumnFamily) -> Cursor {
                <$t>::cursor_cf(self, cf)
            }
        }
    };
}

impl Db {
    read_methods!("as of now (a consistent view as of the call)");

    /// The latest state: the super-version first, then the seqno (see
    /// [`DbInner::read_view`]).
    fn view(&self) -> View {
        let (sv, seqno) = self.inner.read_view();
        View {
            inner: self.inner.clone(),
            sv: Some(sv),
            seqno,
        }
    }

    /// A consistent read view: reads through it see exactly the writes acknowledged before
    /// it was taken (and compaction keeps what it needs while it lives).
    pub fn snapshot(&self) -> Snapshot {
        let mut s = self.inner.snapshots.lock();
        let seqno = self.inner.visible();
        *s.entry(seqno).or_insert(0) += 1;
        Snapshot {
            db: self.clone(),
            seqno,
        }
    }
}

impl_read!(Db);
impl_read!(Snapshot);

/// A consistent read view; see [`Db::snapshot`]. Released when dropped.
pub struct Snapshot {
    db: Db,
    seqno: Seqno,
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("seqno", &self.seqno)
            .finish()
    }
}

impl Snapshot {
    /// The seqno this view reads at: it sees every batch with a smaller one.
    pub fn seqno(&self) -> u64 {
        self.seqno
    }

    read_methods!("as of the snapshot");

    fn view(&self) -> View {
        View {
            inner: self.db.inner.clone(),
            sv: None,
            seqno: self.seqno,
        }
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        let mut s = self.db.inner.snapshots.lock();
        if let Some(n) = s.get_mut(&self.seqno) {
            *n -= 1;
            if *n == 0 {
                s.remove(&self.seqno);
            }
        }
    }
}

impl DbInner {
    /// The super-version and the seqno of a read that is not through a snapshot: the
    /// super-version first, so that no compaction installed after the seqno was taken can
    /// have dropped a version the read must see.
    pub(crate) fn read_view(&self) -> (Arc<SuperVersion>, Seqno) {
        let sv = self.super_version();
        let seqno = self.visible();
        (sv, seqno)
    }

    pub(crate) fn get(&self, cf: u32, key: &[u8], snapshot: Seqno) -> Result<Option<Vec<u8>>> {
        let sv = self.super_version();
        self.get_in(&sv, cf, key, snapshot)
    }

    pub(crate) fn get_in(
        &self,
        sv: &SuperVersion,
        cf: u32,
        key: &[u8],
        snapshot: Seqno,
    ) -> Result<Option<Vec<u8>>> {
        let Some(cfv) = sv.version.cfs.get(&cf) else {
            return Err(self.cf_not_found(cf));
        };
        // The search key, built once for every memtable and table this read visits.
        let now = crate::clock::ReadTime::new(self.opts.clock.clone());
        match sv.get(cfv, &key::LookupKey::new(cf, key, snapshot), &now)? {
            crate::version::Lookup::Found(v) => Ok(v),
            crate::version::Lookup::Merge => self.get_merged(sv, cf, key, snapshot, &now),
        }
    }

    /// The value of `key` whose newest visible entry is a merge operand: its visible
    /// entries newest first, through the merged cursor, collecting operands down to a value
    /// (its base), a tombstone or the end, then folded oldest first by the family's merge
    /// operator. A duplicate of an entry (same seqno, from a replayed batch that is also
    /// in a table) counts once.
    fn get_merged(
        &self,
        sv: &SuperVersion,
        cf: u32,
        key: &[u8],
        snapshot: Seqno,
        now: &crate::clock::ReadTime,
    ) -> Result<Option<Vec<u8>>> {
        let op = self
            .merge_operator(cf)
            .ok_or_else(|| self.no_merge_operator(cf))?;
        let mut m = crate::read::merged(sv, cf, None)?;
        m.seek(&key::seek_key(key, snapshot));
        let mut operands: Vec<Vec<u8>> = Vec::new();
        let mut base = None;
        let mut last = None;
        while m.valid() {
            let p = crate::read::parse(m.key())?;
            if p.user_key != key {
                break;
            }
            if last == Some(p.seqno) {
                m.next();
                continue;
            }
            last = Some(p.seqno);
            if p.kind == key::Kind::Merge {
                operands.push(m.value().to_vec());
                m.next();
                continue;
            }
            if p.kind.is_value() {
                base = sv.version.resolve(p.kind, key, m.value().to_vec(), now)?;
            }
            break;
        }
        if let Some(e) = m.take_error() {
            return Err(e);
        }
        operands.reverse();
        let refs: Vec<&[u8]> = operands.iter().map(Vec::as_slice).collect();
        crate::merge_op::fold(op.as_ref(), key, base.as_deref(), &refs)
            .map(Some)
            .map_err(|e| {
                Error::invalid(format!(
                    "the merge operator of column family {}: {e}",
                    self.cf_name(cf)
                ))
            })
    }

    /// Live snapshots, ascending.
    pub(crate) fn snapshot_list(&self) -> Vec<Seqno> {
        self.snapshots.lock().keys().copied().collect()
    }
}
