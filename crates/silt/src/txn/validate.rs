//! The checks of a transaction's commit: did a key, or any key of a range, get an entry
//! with a seqno in `since..below` — a write committed after the transaction read or locked
//! it and before its own commit?
//!
//! They read a super-version's memtables and tables directly, not the user's view: a
//! tombstone is a change like a put, and an entry not yet visible (applied by a writer
//! ordered before the commit, but not yet acknowledged) counts too. Sources whose newest
//! entry is older than `since` (a frozen memtable, whose seqnos end where the next one's
//! begin; a table, by its largest seqno) are skipped.
//!
//! What keeps the answer right: the transaction holds a snapshot at or below every `since`
//! it checks, so flushes and compactions keep the newest entry of each key above it (a
//! tombstone above a snapshot is never dropped); and the caller has waited for every writer
//! below `below` to apply its entries (`DbInner::wait_applied_below`, invariant W5). One
//! exception: a single delete and the put it deletes, both above the snapshot, may both be
//! dropped (`compaction::merge::keep_versions`). The key then reads as it did at the
//! snapshot (a single delete's key had no older value), so what the transaction read of it
//! is still what a commit at this point would read: the answer "unchanged" stays true of
//! the value, if not of the history.
//!
//! The caller starts a range's check after a dead run holding its start, when one recorded
//! at or below the snapshot is still there (`Txn::check`, `read/dead_runs.rs`): a delete of
//! a key that was already dead there is then not counted as a change.

use std::ops::Bound;

use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{self, LookupKey, Seqno};
use crate::read::{first_of, Bounds};
use crate::sstable::TableIter;
use crate::version::SuperVersion;

/// Whether memtable `i` of `sv` can hold no entry at or above `since`: a frozen memtable's
/// entries lie below the next newer memtable's first seqno (memtable invariant M1 of
/// `db/mod.rs`); the active one (index 0) is unbounded.
fn holds_nothing_since(sv: &SuperVersion, i: usize, since: Seqno) -> bool {
    i > 0 && sv.mems[i - 1].first_seqno() <= since
}

/// Whether `key` of `cf` has an entry with a seqno in `since..below`.
pub(crate) fn key_changed(
    sv: &SuperVersion,
    cf: u32,
    key: &[u8],
    since: Seqno,
    below: Seqno,
) -> Result<bool> {
    if since >= below {
        return Ok(false);
    }
    let lk = LookupKey::new(cf, key, below);
    for (i, m) in sv.mems.iter().enumerate() {
        if holds_nothing_since(sv, i, since) {
            continue;
        }
        // The newest entry below `below` in this memtable decides for it.
        if let Some((_, seqno, _)) = m.get(&lk) {
            if seqno >= since {
                return Ok(true);
            }
        }
    }
    let Some(cfv) = sv.version.cfs.get(&cf) else {
        return Ok(false);
    };
    for (level, tables) in cfv.levels.iter().enumerate() {
        let candidates: Vec<_> = if level == 0 {
            tables
                .iter()
                .filter(|t| t.user_smallest() <= key && key <= t.user_largest())
                .collect()
        } else {
            cfv.find_in_level(level, key).into_iter().collect()
        };
        for t in candidates {
            if t.meta.largest_seqno < since {
                continue;
            }
            if let Some((_, seqno, _)) = t.table()?.get_at(&lk)? {
                if seqno >= since {
                    return Ok(true);
                }
            }
        }
    }
    Ok(false)
}

/// The first key of `cf` within `lo..hi` that has an entry with a seqno in `since..below`.
pub(crate) fn range_changed(
    sv: &SuperVersion,
    cf: u32,
    lo: &Bound<Vec<u8>>,
    hi: &Bound<Vec<u8>>,
    since: Seqno,
    below: Seqno,
) -> Result<Option<Vec<u8>>> {
    if since >= below {
        return Ok(None);
    }
    let b = Bounds {
        lo: lo.clone(),
        hi: hi.clone(),
    };
    let mut found: Option<Vec<u8>> = None;
    let mut consider = |k: &[u8]| {
        if found.as_deref().is_none_or(|f| k < f) {
            found = Some(k.to_vec());
        }
    };
    for (i, m) in sv.mems.iter().enumerate() {
        if holds_nothing_since(sv, i, since) {
            continue;
        }
        if let Some(k) = scan(&mut m.iter(cf), &b, since, below)? {
            consider(&k);
        }
    }
    if let Some(cfv) = sv.version.cfs.get(&cf) {
        let lo_key = b.lo_key().unwrap_or(&[]);
        for tables in &cfv.levels {
            for t in tables {
                if t.meta.largest_seqno < since
                    || t.user_largest() < lo_key
                    || b.hi_key().is_some_and(|h| t.user_smallest() > h)
                {
                    continue;
                }
                let table = t.table()?;
                if let Some(k) = scan(&mut TableIter::new_with(&table, true), &b, since, below)? {
                    consider(&k);
                }
            }
        }
    }
    Ok(found)
}

/// The first user key in `b` of a cursor with an entry in `since..below`.
fn scan(
    it: &mut dyn InternalIterator,
    b: &Bounds,
    since: Seqno,
    below: Seqno,
) -> Result<Option<Vec<u8>>> {
    match &b.lo {
        Bound::Included(k) | Bound::Excluded(k) => it.seek(&first_of(k)),
        Bound::Unbounded => it.seek_to_first(),
    }
    while it.valid() {
        let p = key::parse(it.key()).ok_or_else(|| crate::error::Error::Corruption {
            file: "<transaction validation>".into(),
            offset: 0,
            reason: "an internal key is too short or has an unknown kind".into(),
        })?;
        if !b.below_hi(p.user_key) {
            break;
        }
        if b.above_lo(p.user_key) && p.seqno >= since && p.seqno < below {
            return Ok(Some(p.user_key.to_vec()));
        }
        it.next();
    }
    match it.take_error() {
        Some(e) => Err(e),
        None => Ok(None),
    }
}
