//! [`SuperVersion`]: what a read sees — the memtables and the version of the tables — pinned
//! together in one `Arc`, so a read or an iterator holds one consistent state however long
//! it lives. Built only here: the database swaps in a new one when a memtable is frozen
//! ([`SuperVersion::rotated`]), flushed ([`SuperVersion::flushed`]), or the tables change
//! ([`SuperVersion::with_version`]).

use std::sync::Arc;

use super::{CfVersion, Version};
use crate::error::Result;
use crate::key::LookupKey;
use crate::memtable::Memtable;

/// The memtables (newest first, the active one at index 0) and the tables.
#[derive(Debug)]
pub(crate) struct SuperVersion {
    pub(crate) mems: Vec<Arc<Memtable>>,
    pub(crate) version: Arc<Version>,
    /// One more than the one it was made from (0 for an open's first): each is made from
    /// the current one and installed under the same lock, so a higher generation is a
    /// later state (`read/dead_runs.rs` relies on it).
    pub(crate) generation: u64,
}

impl SuperVersion {
    /// The first super-version of an open: one (active) memtable.
    pub(crate) fn new(active: Arc<Memtable>, version: Arc<Version>) -> SuperVersion {
        SuperVersion {
            mems: vec![active],
            version,
            generation: 0,
        }
    }

    /// This one with `active` as the new active memtable; the old one is frozen.
    pub(crate) fn rotated(&self, active: Arc<Memtable>) -> SuperVersion {
        let mut mems = Vec::with_capacity(self.mems.len() + 1);
        mems.push(active);
        mems.extend(self.mems.iter().cloned());
        debug_assert!(
            mems.windows(2)
                .all(|w| w[0].first_seqno() >= w[1].first_seqno()),
            "memtables are newest first (memtable invariant M1)"
        );
        SuperVersion {
            mems,
            version: self.version.clone(),
            generation: self.generation + 1,
        }
    }

    /// This one with the tables of `version`.
    pub(crate) fn with_version(&self, version: Arc<Version>) -> SuperVersion {
        SuperVersion {
            mems: self.mems.clone(),
            version,
            generation: self.generation + 1,
        }
    }

    /// This one without the frozen memtable `mem`, whose data `version` now holds in tables.
    pub(crate) fn flushed(&self, mem: &Arc<Memtable>, version: Arc<Version>) -> SuperVersion {
        debug_assert!(
            !Arc::ptr_eq(&self.mems[0], mem),
            "the active memtable is never flushed"
        );
        let mut mems = self.mems.clone();
        mems.retain(|m| !Arc::ptr_eq(m, mem));
        SuperVersion {
            mems,
            version,
            generation: self.generation + 1,
        }
    }

    /// The value of `lk`'s key in column family `cf` (of this super-version's version) as
    /// of `lk`'s seqno: the memtables newest first, then the tables ([`CfVersion::get`]). The
    /// first entry found decides: `Found(None)` if it is a tombstone, has expired by `now`,
    /// or there is none; `Merge` if it is a merge operand (the caller folds the key's
    /// operands, `DbInner::get_merged`).
    pub(crate) fn get(
        &self,
        cf: &CfVersion,
        lk: &LookupKey,
        now: &crate::clock::ReadTime,
    ) -> Result<Lookup> {
        for m in &self.mems {
            if let Some((kind, _, v)) = m.get(lk) {
                // The memtable holds no blob entry: separation happens at flush.
                return self.found(kind, lk, v, now);
            }
        }
        match cf.get(lk)? {
            Some((kind, v)) => self.found(kind, lk, v, now),
            None => Ok(Lookup::Found(None)),
        }
    }

    fn found(
        &self,
        kind: crate::key::Kind,
        lk: &LookupKey,
        v: Vec<u8>,
        now: &crate::clock::ReadTime,
    ) -> Result<Lookup> {
        if kind == crate::key::Kind::Merge {
            return Ok(Lookup::Merge);
        }
        if !kind.is_value() {
            return Ok(Lookup::Found(None));
        }
        Ok(Lookup::Found(self.version.resolve(
            kind,
            lk.user_key(),
            v,
            now,
        )?))
    }
}

/// What a point read's search found ([`SuperVersion::get`]).
pub(crate) enum Lookup {
    /// The key's value, or `None`.
    Found(Option<Vec<u8>>),
    /// The newest visible entry is a merge operand: fold the key's operands.
    Merge,
}
