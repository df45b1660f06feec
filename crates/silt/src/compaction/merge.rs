//! Step 4 of the algorithm (see the module above): which entries of a key survive a
//! compaction ([`keep_versions`]), and the merge that streams the survivors into output
//! tables cut between user keys ([`merge`]). Pure: the caller supplies the merged input
//! and a function that opens each output table.

use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{self, Kind, Seqno};
use crate::sstable::TableBuilder;
use crate::table_meta::TableMeta;

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
                .filter(|q| q.kind == Kind::Put && stripe(snapshots, q.seqno) == s)
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
        } else if !shadowed && (p.kind == Kind::Put || !(bottommost && s == 0)) {
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

/// Merges `m` (positioned on its first entry) into output tables of about `target_bytes`,
/// cut only between user keys; `open_output` creates each output table. Returns the
/// finished tables in key order.
pub(crate) fn merge(
    m: &mut dyn InternalIterator,
    snapshots: &[Seqno],
    bottommost: bool,
    target_bytes: u64,
    open_output: &mut dyn FnMut() -> Result<TableBuilder>,
) -> Result<Vec<TableMeta>> {
    let mut outputs = Vec::new();
    let mut builder: Option<TableBuilder> = None;
    let mut group: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    loop {
        let same = m.valid()
            && group
                .first()
                .is_some_and(|(k, _)| key::user_key(k) == key::user_key(m.key()));
        if !same && !group.is_empty() {
            // Cut only here, between user keys: a key's versions never span two tables.
            if builder
                .as_ref()
                .is_some_and(|b| b.estimated_size_bytes() >= target_bytes)
            {
                if let Some(b) = builder.take() {
                    outputs.push(b.finish()?);
                    crate::kill_point::hit("compaction: an output table written, more to come");
                }
            }
            for i in keep_versions(&group, snapshots, bottommost) {
                let b = match &mut builder {
                    Some(b) => b,
                    None => builder.insert(open_output()?),
                };
                b.add(&group[i].0, &group[i].1)?;
            }
            group.clear();
        }
        if !m.valid() {
            break;
        }
        group.push((m.key().to_vec(), m.value().to_vec()));
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

    fn g(entries: &[(u64, Kind)]) -> Vec<(Vec<u8>, Vec<u8>)> {
        entries
            .iter()
            .map(|(s, k)| (make_internal(b"k", *s, *k), vec![]))
            .collect()
    }

    #[test]
    fn newest_wins_without_snapshots() {
        let grp = g(&[(9, Kind::Put), (5, Kind::Put), (3, Kind::Delete)]);
        assert_eq!(keep_versions(&grp, &[], false), vec![0]);
    }

    #[test]
    fn snapshots_keep_what_they_see() {
        let grp = g(&[(9, Kind::Put), (5, Kind::Put), (3, Kind::Put)]);
        // A snapshot at 6 sees seqno 5; one at 4 sees seqno 3.
        assert_eq!(keep_versions(&grp, &[4, 6], false), vec![0, 1, 2]);
        assert_eq!(keep_versions(&grp, &[6], false), vec![0, 1]);
    }

    #[test]
    fn tombstones_drop_only_at_the_bottom_and_unseen() {
        let grp = g(&[(9, Kind::Delete), (5, Kind::Put)]);
        assert_eq!(keep_versions(&grp, &[], false), vec![0]);
        assert_eq!(keep_versions(&grp, &[], true), Vec::<usize>::new());
        // A snapshot at 6 still sees the put under the tombstone; newer readers must not.
        assert_eq!(keep_versions(&grp, &[6], true), vec![0, 1]);
    }

    #[test]
    fn single_delete_cancels_its_put() {
        let grp = g(&[(9, Kind::SingleDelete), (5, Kind::Put), (2, Kind::Put)]);
        // Below the cancelled pair the older put is visible again: putting twice before a
        // single delete is undefined, as in RocksDB.
        assert_eq!(keep_versions(&grp, &[], false), vec![2]);
        // An older tombstone below the pair keeps the key deleted.
        let grp = g(&[(9, Kind::SingleDelete), (5, Kind::Put), (3, Kind::Delete)]);
        assert_eq!(keep_versions(&grp, &[], false), vec![2]);
        assert_eq!(keep_versions(&grp, &[], true), Vec::<usize>::new());
        // Separated by a snapshot: both stay.
        assert_eq!(keep_versions(&grp, &[7], false), vec![0, 1]);
        // Put, single delete, put, single delete: the first pair never met; the older
        // single delete must survive under the newer put.
        let grp = g(&[(9, Kind::Put), (5, Kind::SingleDelete)]);
        assert_eq!(keep_versions(&grp, &[], false), vec![0, 1]);
        assert_eq!(keep_versions(&grp, &[], true), vec![0]);
        let grp = g(&[(9, Kind::Put), (5, Kind::SingleDelete), (3, Kind::Put)]);
        assert_eq!(keep_versions(&grp, &[], false), vec![0]);
        // The same with a snapshot between the first put and its single delete: the pair
        // is in different stripes, so even at the bottom the single delete must stay to
        // hide the old put once the snapshot is gone and the newer pair has cancelled.
        let grp = g(&[(9, Kind::Put), (5, Kind::SingleDelete), (3, Kind::Put)]);
        assert_eq!(keep_versions(&grp, &[4], true), vec![0, 1, 2]);
        let later = g(&[
            (11, Kind::SingleDelete),
            (9, Kind::Put),
            (5, Kind::SingleDelete),
            (3, Kind::Put),
        ]);
        assert_eq!(keep_versions(&later, &[4], true), vec![2, 3]);
        assert_eq!(keep_versions(&later, &[], true), Vec::<usize>::new());
        let lone = g(&[(9, Kind::SingleDelete)]);
        assert_eq!(keep_versions(&lone, &[], false), vec![0]);
        assert_eq!(keep_versions(&lone, &[], true), Vec::<usize>::new());
    }
}
