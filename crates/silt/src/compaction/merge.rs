//! Step 4 of the algorithm (see the module above): which entries of a key survive a
//! compaction ([`keep_versions`]), and the merge that streams the survivors into output
//! tables cut between user keys ([`merge`]). Pure: the caller supplies the merged input
//! and a function that opens each output table.

use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{self, Kind, Seqno};
use crate::vlog::{Finished, Output};

/// The stripe of `seqno`: how many snapshots cannot see it.
fn stripe(snapshots: &[Seqno], seqno: Seqno) -> usize {
    snapshots.partition_point(|s| *s <= seqno)
}

/// Decides which entries of one user key (newest first) survive.
pub(crate) fn keep_versions(
    group: &[(Vec<u8>, Vec<u8>)],
    snapshots: &[Seqno],
    bottommost: bool,
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
        // Shadowed: a newer entry of this stripe hides this one from every snapshot.
        let shadowed = last_stripe == Some(s);
        last_stripe = Some(s);
        if p.kind == Kind::SingleDelete {
            let j = next_distinct(group, i, p.seqno);
            let next = group.get(j).and_then(|(k, _)| key::parse(k));
            if let Some(q) = next
                .as_ref()
                .filter(|q| q.kind.is_value() && stripe(snapshots, q.seqno) == s)
            {
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
        } else if !shadowed && (p.kind.is_value() || !(bottommost && s == 0)) {
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

/// Merges `m` (positioned on its first entry) into output tables of about `target_bytes`
/// (values separated into blob files do not count),
/// cut only between user keys; `open_output` creates each output table. `fences` are the
/// user-key ranges `[lo, hi]` (sorted, disjoint) of tables of the output level that stay
/// where they are, inside the merge's range but holding none of its keys: an output table
/// is cut before it would span one, so the output level stays disjoint. Returns the
/// finished tables in key order.
pub(crate) fn merge(
    m: &mut dyn InternalIterator,
    snapshots: &[Seqno],
    bottommost: bool,
    target_bytes: u64,
    fences: &[(Vec<u8>, Vec<u8>)],
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
            for i in keep_versions(&group[..len], snapshots, bottommost) {
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
