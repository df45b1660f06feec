//! Step 4 of the algorithm (see the module above): which entries of a key survive a
//! compaction ([`keep_versions`]), and the merge that streams the survivors into output
//! tables cut between user keys ([`merge`]). Pure: the caller supplies the merged input
//! and a function that opens each output table.

use crate::error::{Error, Result};
use crate::filter::{CompactionFilter, FilterDecision};
use crate::iter::InternalIterator;
use crate::key::{self, Kind, Seqno, EXPIRY_BYTES};
use crate::merge_op::{self, MergeOperator};
use crate::vlog::{Finished, Output};

/// Reads the value a blob pointer points at: `(user key, pointer) -> value`.
pub(crate) type ReadBlob<'a> = dyn Fn(&[u8], &[u8]) -> Result<Vec<u8>> + Sync + 'a;

/// What a compaction does to entries besides dropping the versions nobody can see
/// ([`keep_versions`]): expired values become deletes, and the family's compaction filter
/// judges the newest value of each key ([`apply_policy`]).
pub(crate) struct EntryPolicy<'a> {
    /// The compaction's instant: an expiring entry whose expiry is at or before it is
    /// expired (it reads as a delete for every reader from now on).
    pub(crate) now_ms: u64,
    /// The column family's compaction filter, if it has one.
    pub(crate) filter: Option<&'a dyn CompactionFilter>,
    /// The level the outputs go to (the filter is told).
    pub(crate) level: usize,
    /// The value a blob entry's pointer (the bytes after any expiry) points at, for the
    /// filter and for folding operands onto a separated value: `(user key, pointer)`.
    pub(crate) read_blob: &'a ReadBlob<'a>,
    /// The column family's merge operator, if it has one ([`collapse_merges`]).
    pub(crate) merge: Option<&'a dyn MergeOperator>,
}

impl EntryPolicy<'_> {
    /// A policy that changes nothing but expired entries (as of `now_ms`).
    #[cfg(test)]
    pub(crate) fn expiry_only(now_ms: u64) -> EntryPolicy<'static> {
        EntryPolicy {
            now_ms,
            filter: None,
            level: 0,
            read_blob: &|_, _| Err(Error::invalid("no blob files here")),
            merge: None,
        }
    }
}

/// Turns entry `(k, v)` into a delete at its seqno.
fn make_delete(k: &mut Vec<u8>, v: &mut Vec<u8>, seqno: Seqno) {
    let n = k.len() - key::TRAILER_BYTES;
    k.truncate(n);
    k.extend_from_slice(&key::trailer(seqno, Kind::Delete as u8));
    v.clear();
}

fn bad_entry(reason: &str) -> Error {
    Error::Corruption {
        file: "<compaction input>".into(),
        offset: 0,
        reason: reason.into(),
    }
}

/// Applies `policy` to the entries of one user key (newest first), in place, before
/// [`keep_versions`] decides what survives:
///
/// 1. An expired value becomes a delete at its seqno. Exact for every reader: expiry is
///    judged by the clock, not by snapshots, so every read from now on (at any snapshot)
///    already sees the key as deleted from that entry down.
/// 2. The filter sees the newest entry if it is a value and no live snapshot can see it
///    (it is in the newest stripe); `Remove` makes it a delete at its seqno (older values
///    below, here or in levels this job does not reach, stay hidden), `Change` replaces
///    the value (an expiring entry keeps its expiry; a blob entry becomes an inline value,
///    which the output separates again if it is large).
pub(crate) fn apply_policy(
    group: &mut [(Vec<u8>, Vec<u8>)],
    snapshots: &[Seqno],
    policy: &EntryPolicy<'_>,
) -> Result<()> {
    for (k, v) in group.iter_mut() {
        let Some(p) = key::parse(k) else { continue };
        if p.kind.expires() {
            let at = key::expiry_of(v).ok_or_else(|| {
                bad_entry("an expiring entry's value is too short for its expiry")
            })?;
            if at <= policy.now_ms {
                let seqno = p.seqno;
                make_delete(k, v, seqno);
            }
        }
    }
    let Some(filter) = policy.filter else {
        return Ok(());
    };
    let Some((k, v)) = group.first_mut() else {
        return Ok(());
    };
    let Some(p) = key::parse(k) else {
        return Ok(());
    };
    if !p.kind.is_value() || stripe(snapshots, p.seqno) != snapshots.len() {
        return Ok(());
    }
    let (kind, seqno) = (p.kind, p.seqno);
    let expiry_len = if kind.expires() { EXPIRY_BYTES } else { 0 };
    let user_key = key::user_key(k);
    let blob;
    let value: &[u8] = if kind.is_blob() {
        blob = (policy.read_blob)(user_key, &v[expiry_len..])?;
        &blob
    } else {
        &v[expiry_len..]
    };
    match filter.filter(policy.level, user_key, value) {
        FilterDecision::Keep => {}
        FilterDecision::Remove => make_delete(k, v, seqno),
        FilterDecision::Change(nv) => {
            let new_kind = if kind.expires() {
                Kind::PutTtl
            } else {
                Kind::Put
            };
            let n = k.len() - key::TRAILER_BYTES;
            k.truncate(n);
            k.extend_from_slice(&key::trailer(seqno, new_kind as u8));
            v.truncate(expiry_len);
            v.extend_from_slice(&nv);
        }
    }
    Ok(())
}

/// The stripe of `seqno`: how many snapshots cannot see it.
fn stripe(snapshots: &[Seqno], seqno: Seqno) -> usize {
    snapshots.partition_point(|s| *s <= seqno)
}

/// Folds merge operands early, in place, after [`apply_policy`] and before
/// [`keep_versions`]; returns the indexes of operands folded into another entry (to drop).
/// Per stripe (snapshots see each stripe's newest entry, so operands never fold across
/// one), a run of operands at the top of the stripe is folded:
///
/// - onto the value or tombstone right below it in the stripe: the run's newest entry
///   becomes a put of the folded value at its seqno, which shadows the rest of the stripe;
/// - onto nothing, if the run ends the key's entries and the output is the bottom (no
///   older data of the key anywhere): a put as above;
/// - otherwise into one operand at the run's newest seqno (associativity), the others
///   dropped; so is a run above an expiring value, which is never folded into (a read
///   folds onto it while it lives and onto nothing after, and a put could not do both).
///
/// An operator error leaves the run as it is (a read reports it). Without an operator,
/// nothing is folded.
pub(crate) fn collapse_merges(
    group: &mut [(Vec<u8>, Vec<u8>)],
    snapshots: &[Seqno],
    bottommost: bool,
    policy: &EntryPolicy<'_>,
) -> Result<Vec<usize>> {
    let mut consumed = Vec::new();
    let Some(op) = policy.merge else {
        return Ok(consumed);
    };
    let mut i = 0;
    while i < group.len() {
        let Some(p) = key::parse(&group[i].0) else {
            i += 1;
            continue;
        };
        let s = stripe(snapshots, p.seqno);
        if p.kind != Kind::Merge {
            // Past the rest of this stripe: only its newest entry starts a run.
            i += 1;
            while i < group.len()
                && key::parse(&group[i].0).is_some_and(|q| stripe(snapshots, q.seqno) == s)
            {
                i += 1;
            }
            continue;
        }
        // The run: operands of this stripe, newest first (a duplicate seqno counts once).
        let top = i;
        let mut run = vec![i];
        let mut last = p.seqno;
        let mut j = i + 1;
        let mut below: Option<usize> = None;
        while j < group.len() {
            let Some(q) = key::parse(&group[j].0) else {
                break;
            };
            if stripe(snapshots, q.seqno) != s {
                break;
            }
            if q.seqno != last {
                last = q.seqno;
                if q.kind == Kind::Merge {
                    run.push(j);
                } else {
                    below = Some(j);
                    break;
                }
            }
            j += 1;
        }
        let ends_key = below.is_none() && j == group.len();
        let user_key = key::user_key(&group[top].0).to_vec();
        let operands: Vec<Vec<u8>> = run.iter().rev().map(|&k| group[k].1.clone()).collect();
        let refs: Vec<&[u8]> = operands.iter().map(Vec::as_slice).collect();
        // What the run folds onto, if it may fold into a put: Some(base).
        let onto: Option<Option<Vec<u8>>> = match below {
            Some(b) => {
                let q = key::parse(&group[b].0).expect("parsed above");
                if q.kind.expires() {
                    None
                } else if q.kind.is_blob() {
                    Some(Some((policy.read_blob)(&user_key, &group[b].1)?))
                } else if q.kind.is_value() {
                    Some(Some(group[b].1.clone()))
                } else {
                    Some(None) // a tombstone
                }
            }
            // Nothing older anywhere: a snapshot that cannot see the run sees no value.
            None if ends_key && bottommost => Some(None),
            None => None,
        };
        let seqno = p.seqno;
        match onto {
            Some(base) => {
                if let Ok(v) = merge_op::fold(op, &user_key, base.as_deref(), &refs) {
                    let (k, val) = &mut group[top];
                    let n = k.len() - key::TRAILER_BYTES;
                    k.truncate(n);
                    k.extend_from_slice(&key::trailer(seqno, Kind::Put as u8));
                    *val = v;
                    // The rest of the stripe is shadowed by the put (keep_versions).
                }
            }
            None if run.len() > 1 => {
                let (first, rest) = refs.split_first().expect("a run has an operand");
                if let Ok(v) = merge_op::fold(op, &user_key, Some(first), rest) {
                    group[top].1 = v;
                    consumed.extend_from_slice(&run[1..]);
                }
            }
            None => {}
        }
        // On to the next stripe.
        i = j;
        while i < group.len()
            && key::parse(&group[i].0).is_some_and(|q| stripe(snapshots, q.seqno) == s)
        {
            i += 1;
        }
    }
    Ok(consumed)
}

/// Decides which entries of one user key (newest first) survive.
pub(crate) fn keep_versions(
    group: &[(Vec<u8>, Vec<u8>)],
    snapshots: &[Seqno],
    bottommost: bool,
) -> Vec<usize> {
    keep_versions_above(group, snapshots, bottommost, 0)
}

/// [`keep_versions`] for a job that may not see every copy of an entry: a single delete
/// cancels a put only if the put's seqno is at least `pair_floor`. A flush passes the
/// largest seqno in the family's tables + 1: below it, a put in the memtable may be a
/// replayed copy of one a table holds too (replay can start below what tables hold,
/// invariant T4 of `txn/mod.rs`), and dropping the single delete with the memtable's copy
/// would bring the table's back. The single delete then stays, and the put it shadows goes.
pub(crate) fn keep_versions_above(
    group: &[(Vec<u8>, Vec<u8>)],
    snapshots: &[Seqno],
    bottommost: bool,
    pair_floor: Seqno,
) -> Vec<usize> {
    let mut keep = Vec::new();
    let mut i = 0;
    let mut last_stripe: Option<usize> = None;
    let mut last_seq: Option<Seqno> = None;
    while i < group.len() {
        let Some(p) = key::parse(&group[i].0) else {
            i += 1;
            continue;
        };
        // Identical seqno: the same entry twice (log replay of a flushed batch).
        if last_seq == Some(p.seqno) {
            i += 1;
            continue;
        }
        last_seq = Some(p.seqno);
        let s = stripe(snapshots, p.seqno);
        // Shadowed: a newer entry of this stripe hides this one from every snapshot. A
        // merge operand hides nothing: what lies below it is what it folds onto.
        let shadowed = last_stripe == Some(s);
        if p.kind != Kind::Merge {
            last_stripe = Some(s);
        }
        if p.kind == Kind::SingleDelete {
            let j = next_distinct(group, i, p.seqno);
            let next = group.get(j).and_then(|(k, _)| key::parse(k));
            if let Some(q) = next.as_ref().filter(|q| {
                q.kind.is_value() && q.seqno >= pair_floor && stripe(snapshots, q.seqno) == s
            }) {
                // It meets its put in one stripe: both go. Unless the pair was shadowed,
                // what lies below it (an older tombstone, say) is not shadowed by anything
                // any more, so it is judged afresh.
                last_seq = Some(q.seqno);
                if !shadowed {
                    last_stripe = None;
                }
                i = j + 1;
                continue;
            }
            // A shadowed single delete still matters: if a later single delete cancels the
            // newer put, this one must hide the put below it (put, sd, put, sd is a valid
            // sequence). So it stays until it meets that put, or until it is at the bottom
            // with nothing older left to hide.
            let gone = if shadowed {
                bottommost && next.is_none()
            } else {
                bottommost && s == 0
            };
            if !gone {
                keep.push(i);
            }
        } else if !shadowed && (p.kind.carries_value() || !(bottommost && s == 0)) {
            keep.push(i);
        }
        i += 1;
    }
    keep
}

/// The index of the first entry after `i` with a seqno other than `seqno`.
fn next_distinct(group: &[(Vec<u8>, Vec<u8>)], i: usize, seqno: Seqno) -> usize {
    let mut j = i + 1;
    while j < group.len() && key::parse(&group[j].0).map(|q| q.seqno) == Some(seqno) {
        j += 1;
    }
    j
}

/// Merges `m` (positioned on its first entry), its entries changed by `policy`, into output
/// tables of about `target_bytes`
/// (values separated into blob files do not count),
/// cut only between user keys; `open_output` creates each output table. `fences` are the
/// user-key ranges `[lo, hi]` (sorted, disjoint) of tables of the output level that stay
/// where they are, inside the merge's range but holding none of its keys: an output table
/// is cut before it would span one, so the output level stays disjoint. Returns the
/// finished tables in key order.
#[allow(clippy::too_many_arguments)]
pub(crate) fn merge(
    m: &mut dyn InternalIterator,
    snapshots: &[Seqno],
    bottommost: bool,
    target_bytes: u64,
    fences: &[(Vec<u8>, Vec<u8>)],
    policy: &EntryPolicy<'_>,
    open_output: &mut dyn FnMut() -> Result<Output>,
) -> Result<Vec<Finished>> {
    let mut outputs = Vec::new();
    let mut builder: Option<Output> = None;
    // The entries of the current user key; buffers are reused across keys (`len` in use),
    // so a merge allocates per distinct key size, not per entry.
    let mut group: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut len = 0usize;
    let mut fence = 0usize;
    loop {
        let same = m.valid() && len > 0 && key::user_key(&group[0].0) == key::user_key(m.key());
        if !same && len > 0 {
            let user = key::user_key(&group[0].0);
            // Fences wholly before this key: one lies between the current output's keys
            // and this one if the output has begun, so the output ends here.
            let mut crossed = false;
            while fence < fences.len() && fences[fence].1.as_slice() < user {
                crossed = true;
                fence += 1;
            }
            debug_assert!(
                fence >= fences.len() || fences[fence].0.as_slice() > user,
                "a fence holds a key of the merge"
            );
            // Cut only here, between user keys: a key's versions never span two tables.
            let full = builder
                .as_ref()
                .is_some_and(|b| b.estimated_size_bytes() >= target_bytes);
            if full || crossed {
                if let Some(b) = builder.take() {
                    outputs.push(b.finish()?);
                    crate::kill_point::hit("compaction: an output table written, more to come");
                }
            }
            apply_policy(&mut group[..len], snapshots, policy)?;
            let consumed = collapse_merges(&mut group[..len], snapshots, bottommost, policy)?;
            for i in keep_versions(&group[..len], snapshots, bottommost) {
                if consumed.contains(&i) {
                    continue;
                }
                let b = match &mut builder {
                    Some(b) => b,
                    None => builder.insert(open_output()?),
                };
                b.add(&group[i].0, &group[i].1)?;
            }
            len = 0;
        }
        if !m.valid() {
            break;
        }
        if len < group.len() {
            let (k, v) = &mut group[len];
            k.clear();
            k.extend_from_slice(m.key());
            v.clear();
            v.extend_from_slice(m.value());
        } else {
            group.push((m.key().to_vec(), m.value().to_vec()));
        }
        len += 1;
        m.next();
    }
    if let Some(e) = m.take_error() {
        return Err(e);
    }
    if let Some(b) = builder.take() {
        outputs.push(b.finish()?);
    }
    Ok(outputs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::make_internal;

    fn entry(k: &[u8], seqno: Seqno, kind: Kind, v: &[u8]) -> (Vec<u8>, Vec<u8>) {
        (make_internal(k, seqno, kind), v.to_vec())
    }

    fn expiring(at: u64, v: &[u8]) -> Vec<u8> {
        let mut out = at.to_le_bytes().to_vec();
        out.extend_from_slice(v);
        out
    }

    fn kinds(g: &[(Vec<u8>, Vec<u8>)]) -> Vec<(Seqno, Kind)> {
        g.iter()
            .map(|(k, _)| {
                let p = key::parse(k).unwrap();
                (p.seqno, p.kind)
            })
            .collect()
    }

    #[derive(Debug)]
    struct Upper;
    impl CompactionFilter for Upper {
        fn filter(&self, _: usize, key: &[u8], value: &[u8]) -> FilterDecision {
            if key == b"drop" {
                FilterDecision::Remove
            } else {
                FilterDecision::Change(value.to_ascii_uppercase())
            }
        }
    }

    #[test]
    fn expired_entries_become_deletes_at_their_seqno_and_live_ones_stay() {
        let mut g = vec![
            entry(b"k", 9, Kind::PutTtl, &expiring(2000, b"new")),
            entry(b"k", 5, Kind::PutTtl, &expiring(1000, b"old")),
            entry(b"k", 3, Kind::Put, b"older"),
        ];
        apply_policy(&mut g, &[], &EntryPolicy::expiry_only(1000)).unwrap();
        assert_eq!(
            kinds(&g),
            vec![(9, Kind::PutTtl), (5, Kind::Delete), (3, Kind::Put)]
        );
        assert!(g[1].1.is_empty());
        // Past the newer one too; then the bottom keeps nothing of the key.
        apply_policy(&mut g, &[], &EntryPolicy::expiry_only(5000)).unwrap();
        assert_eq!(kinds(&g)[0], (9, Kind::Delete));
        assert!(keep_versions(&g, &[], true).is_empty());
        // A short expiring value is damage, not a panic.
        let mut bad = vec![entry(b"k", 9, Kind::PutTtl, b"1234")];
        assert!(apply_policy(&mut bad, &[], &EntryPolicy::expiry_only(0)).is_err());
    }

    #[test]
    fn the_filter_sees_only_the_newest_value_no_snapshot_sees() {
        let f = Upper;
        let read_blob = |_: &[u8], _: &[u8]| -> Result<Vec<u8>> { Ok(b"from blob".to_vec()) };
        let policy = EntryPolicy {
            now_ms: 0,
            filter: Some(&f),
            level: 6,
            read_blob: &read_blob,
            merge: None,
        };
        // No snapshot: the newest value changes, an expiring one keeps its expiry.
        let mut g = vec![
            entry(b"k", 9, Kind::PutTtl, &expiring(7777, b"abc")),
            entry(b"k", 5, Kind::Put, b"old"),
        ];
        apply_policy(&mut g, &[], &policy).unwrap();
        assert_eq!(kinds(&g), vec![(9, Kind::PutTtl), (5, Kind::Put)]);
        assert_eq!(g[0].1, expiring(7777, b"ABC"));
        assert_eq!(g[1].1, b"old");
        // A snapshot at 10 sees seqno 9: untouched.
        let mut g = vec![entry(b"k", 9, Kind::Put, b"abc")];
        apply_policy(&mut g, &[10], &policy).unwrap();
        assert_eq!(g[0].1, b"abc");
        // A snapshot at 9 does not: filtered.
        apply_policy(&mut g, &[9], &policy).unwrap();
        assert_eq!(g[0].1, b"ABC");
        // Remove: a delete at the value's seqno; a blob value is read for the filter and
        // becomes an inline put.
        let mut g = vec![entry(b"drop", 4, Kind::Put, b"x")];
        apply_policy(&mut g, &[], &policy).unwrap();
        assert_eq!(kinds(&g), vec![(4, Kind::Delete)]);
        let mut g = vec![entry(b"b", 4, Kind::Blob, &[0u8; 20])];
        apply_policy(&mut g, &[], &policy).unwrap();
        assert_eq!(kinds(&g), vec![(4, Kind::Put)]);
        assert_eq!(g[0].1, b"FROM BLOB");
        // Deletes are not offered.
        let mut g = vec![entry(b"k", 4, Kind::Delete, b"")];
        apply_policy(&mut g, &[], &policy).unwrap();
        assert_eq!(kinds(&g), vec![(4, Kind::Delete)]);
    }
}
