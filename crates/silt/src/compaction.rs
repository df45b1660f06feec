//! Leveled compaction with dynamic level targets.
//!
//! ## The algorithm
//!
//! 1. **Targets.** Per column family, the last level (6) is where the data should live. Its
//!    target is its size; each level above gets a tenth (`level_size_ratio`) of the one
//!    below, going up until a target falls to `level_base_bytes` or less: that level is the
//!    *base level*, where level 0 compacts into. Levels between 0 and the base level stay
//!    empty. So a small database is one level-0 stage plus one sorted run at the bottom
//!    (space amplification ≈ 1), and each level is ~1/ratio of the next as it grows (in the
//!    spirit of RocksDB's dynamic level bytes and TidesDB's dynamic capacity adaptation).
//! 2. **Scores.** Level 0: tables / `l0_compaction_trigger`. Level k in base..6: bytes /
//!    target. A non-empty level above the base level: must drain (score 1000). The highest
//!    score ≥ 1 runs.
//! 3. **Inputs.** Level 0: every level-0 table (so level 0 stays newer than the levels
//!    below: version invariant 1) plus the overlapping base-level tables. Level k: the next
//!    table after the level's compaction pointer (round robin over the key space) plus the
//!    overlapping tables of level k+1. A single input with nothing to merge moves down by a
//!    manifest edit alone (trivial move).
//! 4. **Merge.** Entries are grouped by user key, newest first. Per key, of the entries
//!    visible to the same set of snapshots (a *stripe*), only the newest is kept. A
//!    single delete meets the put right below it in the same stripe: both vanish. At the
//!    bottom (no older data of the range below the output level), tombstones that every
//!    snapshot sees are dropped. Output tables are cut at `table_target_bytes`, only
//!    between user keys (a key's versions never span two tables of a level).
//! 5. **Install.** New tables are synced, the directory synced, then one manifest edit
//!    removes the inputs and adds the outputs; input files go when no reader needs them.
//!
//! Several compactions may run at once on disjoint tables (the `busy` set).

use std::sync::atomic::Ordering::SeqCst;
use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::db::{DbInner, NewTables, NO_SPACE_RETRY};
use crate::error::Result;
use crate::iter::{InternalIterator, MergingIter};
use crate::key::{self, Kind, Seqno};
use crate::manifest::{Edit, LEVELS};
use crate::read::Bounds;
use crate::sstable::{TableBuilder, TableIter};
use crate::table_meta::TableMeta;
use crate::version::{CfVersion, TableHandle};

const LAST: usize = LEVELS - 1;

/// One compaction to run.
pub(crate) struct Job {
    cf: u32,
    level: usize,
    output_level: usize,
    inputs: Vec<Arc<TableHandle>>,
    lower: Vec<Arc<TableHandle>>,
    /// No table below the output level overlaps the inputs' key range.
    bottommost: bool,
}

impl Job {
    fn ids(&self) -> Vec<u64> {
        self.inputs
            .iter()
            .chain(&self.lower)
            .map(|t| t.meta.id)
            .collect()
    }
}

/// Level targets and the base level of one column family.
pub(crate) fn targets(cf: &CfVersion, base_bytes: u64, ratio: u64) -> (Vec<u64>, usize) {
    let mut t = vec![0u64; LEVELS];
    t[LAST] = cf.level_bytes(LAST).max(1);
    let mut k = LAST;
    while k > 1 && t[k] > base_bytes {
        t[k - 1] = t[k] / ratio;
        k -= 1;
    }
    (t, k)
}

fn key_range(tables: &[Arc<TableHandle>]) -> (Vec<u8>, Vec<u8>) {
    let lo = tables
        .iter()
        .map(|t| t.user_smallest())
        .min()
        .unwrap_or_default()
        .to_vec();
    let hi = tables
        .iter()
        .map(|t| t.user_largest())
        .max()
        .unwrap_or_default()
        .to_vec();
    (lo, hi)
}

fn bottommost(cf: &CfVersion, output_level: usize, lo: &[u8], hi: &[u8]) -> bool {
    (output_level + 1..LEVELS).all(|l| cf.levels[l].iter().all(|t| !t.overlaps(lo, hi)))
}

/// Picks the most urgent compaction whose tables are all free.
fn pick(db: &DbInner, busy: &std::collections::HashSet<u64>) -> Option<Job> {
    let sv = db.super_version();
    let mut best: Option<(f64, Job)> = None;
    for cf in sv.version.cfs.values() {
        let (t, base) = targets(cf, db.opts.level_base_bytes, db.opts.level_size_ratio);
        let mut candidates: Vec<(f64, usize)> = Vec::new();
        let l0 = cf.levels[0].len();
        if l0 > 0 {
            candidates.push((l0 as f64 / db.opts.l0_compaction_trigger as f64, 0));
        }
        for (level, target) in t.iter().enumerate().take(LAST).skip(1) {
            let bytes = cf.level_bytes(level);
            if bytes == 0 {
                continue;
            }
            let score = if level < base {
                1000.0
            } else {
                bytes as f64 / (*target).max(1) as f64
            };
            candidates.push((score, level));
        }
        candidates.sort_by(|a, b| b.0.total_cmp(&a.0));
        for (score, level) in candidates {
            if score < 1.0 || best.as_ref().is_some_and(|(s, _)| *s >= score) {
                break;
            }
            if let Some(job) = job_for(db, cf, level, base, busy) {
                best = Some((score, job));
                break;
            }
        }
    }
    best.map(|(_, j)| j)
}

fn job_for(
    db: &DbInner,
    cf: &CfVersion,
    level: usize,
    base: usize,
    busy: &std::collections::HashSet<u64>,
) -> Option<Job> {
    let inputs: Vec<Arc<TableHandle>> = if level == 0 {
        cf.levels[0].clone()
    } else {
        let ptr = db
            .compact_pointer
            .lock()
            .get(&(cf.id, level))
            .cloned()
            .unwrap_or_default();
        let tables = &cf.levels[level];
        let start =
            tables.partition_point(|t| t.user_smallest() <= ptr.as_slice() && !ptr.is_empty());
        let order = (start..tables.len()).chain(0..start);
        let mut pick = None;
        for i in order {
            if !busy.contains(&tables[i].meta.id) {
                pick = Some(tables[i].clone());
                break;
            }
        }
        vec![pick?]
    };
    if inputs.is_empty() || inputs.iter().any(|t| busy.contains(&t.meta.id)) {
        return None;
    }
    let (lo, hi) = key_range(&inputs);
    // Level 0 drains into the base level, unless a level above it still holds data of
    // this range (the base level moved down as the last level shrank): then into that
    // level, so newer data never lands below older data.
    let output_level = if level == 0 {
        (1..base)
            .find(|l| !cf.overlapping(*l, &lo, &hi).is_empty())
            .unwrap_or(base)
    } else {
        level + 1
    };
    let lower = cf.overlapping(output_level, &lo, &hi);
    if lower.iter().any(|t| busy.contains(&t.meta.id)) {
        return None;
    }
    let (lo2, hi2) = key_range(&inputs.iter().chain(&lower).cloned().collect::<Vec<_>>());
    Some(Job {
        cf: cf.id,
        level,
        output_level,
        bottommost: bottommost(cf, output_level, &lo2, &hi2),
        inputs,
        lower,
    })
}

/// Background compaction thread.
pub(crate) fn compaction_loop(w: Weak<DbInner>) {
    loop {
        let Some(db) = w.upgrade() else { return };
        if db.closing.load(SeqCst) || db.poisoned.load(SeqCst) {
            return;
        }
        let job = {
            let mut busy = db.busy.lock();
            let job = pick(&db, &busy);
            if let Some(j) = &job {
                busy.extend(j.ids());
            }
            job
        };
        match job {
            Some(job) => {
                let ids = job.ids();
                let r = run(&db, &job);
                db.busy.lock().retain(|id| !ids.contains(id));
                match r {
                    Ok(()) => db.set_no_space(None),
                    Err(e) if e.is_no_space() => {
                        // Nothing changed; retry after a pause, as space may free.
                        db.set_no_space(Some(format!("compaction: {e}")));
                        let mut g = db.bg_lock.lock();
                        db.bg_cv.wait_for(&mut g, NO_SPACE_RETRY);
                        continue;
                    }
                    Err(e) => {
                        db.poison("compaction failed", &e);
                        return;
                    }
                }
                db.notify_bg();
            }
            None => {
                let mut g = db.bg_lock.lock();
                db.bg_cv.wait_for(&mut g, Duration::from_millis(50));
            }
        }
    }
}

/// Runs one job and installs its result.
fn run(db: &DbInner, job: &Job) -> Result<()> {
    let mut edits = Vec::new();
    for t in job.inputs.iter() {
        edits.push(Edit::RemoveTable {
            cf: job.cf,
            level: job.level as u8,
            id: t.meta.id,
        });
    }
    for t in &job.lower {
        edits.push(Edit::RemoveTable {
            cf: job.cf,
            level: job.output_level as u8,
            id: t.meta.id,
        });
    }
    let trivial = job.inputs.len() == 1 && job.lower.is_empty();
    let mut new = NewTables::new(db);
    let mut written = 0u64;
    let mut read = 0u64;
    if trivial {
        edits.push(Edit::AddTable {
            cf: job.cf,
            level: job.output_level as u8,
            meta: job.inputs[0].meta.clone(),
        });
    } else {
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
        for t in job.inputs.iter().chain(&job.lower) {
            read += t.meta.size_bytes;
            children.push(Box::new(TableIter::new_with(&t.table()?, false)));
        }
        let mut m = MergingIter::new(children);
        m.seek_to_first();
        let snapshots = db.snapshot_list();
        let outputs = merge(db, &mut m, &snapshots, job.bottommost, &mut new)?;
        if !outputs.is_empty() {
            db.sync_tables_dir()?;
        }
        for meta in outputs {
            written += meta.size_bytes;
            edits.push(Edit::AddTable {
                cf: job.cf,
                level: job.output_level as u8,
                meta,
            });
        }
    }
    edits.push(Edit::NextTableId(db.next_table_id.load(SeqCst)));
    crate::kill_point::hit("compaction: outputs written, before the manifest edit");
    let mut st = db.state.lock();
    if !st.manifest.state().cfs.contains_key(&job.cf) {
        // Dropped meanwhile: the outputs are orphans, removed with `new`.
        return Ok(());
    }
    let r = st.manifest.log_and_apply(edits);
    match &r {
        Err(e) if e.is_no_space() => {} // surely not recorded: `new` removes the outputs
        // Recorded, or perhaps recorded (an ambiguous failure, which poisons).
        _ => new.keep(),
    }
    db.after_manifest(&mut st, r)?;
    drop(st);
    if job.level > 0 {
        let (_, hi) = key_range(&job.inputs);
        db.compact_pointer.lock().insert((job.cf, job.level), hi);
    }
    db.counters.compactions.fetch_add(1, SeqCst);
    db.counters.compaction_read_bytes.fetch_add(read, SeqCst);
    db.counters
        .compaction_write_bytes
        .fetch_add(written, SeqCst);
    Ok(())
}

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

/// Merges `m` into tables of about `table_target_bytes`, cut between user keys.
fn merge(
    db: &DbInner,
    m: &mut MergingIter,
    snapshots: &[Seqno],
    bottommost: bool,
    new: &mut NewTables<'_>,
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
                .is_some_and(|b| b.estimated_size_bytes() >= db.opts.table_target_bytes)
            {
                if let Some(b) = builder.take() {
                    outputs.push(b.finish()?);
                    crate::kill_point::hit("compaction: an output table written, more to come");
                }
            }
            for i in keep_versions(&group, snapshots, bottommost) {
                let b = match &mut builder {
                    Some(b) => b,
                    None => {
                        let (id, path, file) = db.create_table(new)?;
                        builder.insert(TableBuilder::new(id, path, file, &db.table_opts))
                    }
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

/// Manual compaction of `bounds` down to the last level (`Db::compact_range`).
pub(crate) fn compact_range(db: &Arc<DbInner>, cf: u32, bounds: &Bounds) -> Result<()> {
    let lo = bounds.lo_key().map(|k| k.to_vec());
    let hi = bounds.hi_key().map(|k| k.to_vec());
    for level in 0..LAST {
        loop {
            db.check_writable()?;
            // Pick under the busy lock: a table that is in the current version and not
            // busy cannot be removed until we release it (compactions mark their inputs
            // busy before reading the version, and unmark them after installing theirs).
            let mut busy = db.busy.lock();
            let sv = db.super_version();
            let Some(cfv) = sv.version.cfs.get(&cf) else {
                return Err(db.cf_not_found(cf));
            };
            let inputs: Vec<Arc<TableHandle>> = cfv.levels[level]
                .iter()
                .filter(|t| {
                    lo.as_deref().is_none_or(|l| t.user_largest() >= l)
                        && hi.as_deref().is_none_or(|h| t.user_smallest() <= h)
                })
                .cloned()
                .collect();
            if inputs.is_empty() {
                break;
            }
            let inputs = if level == 0 {
                cfv.levels[0].clone()
            } else {
                inputs
            };
            let (klo, khi) = key_range(&inputs);
            // Skip levels with nothing to merge: go straight to the first one that has.
            let output_level = (level + 1..LAST)
                .find(|l| !cfv.overlapping(*l, &klo, &khi).is_empty())
                .unwrap_or(LAST);
            let lower = cfv.overlapping(output_level, &klo, &khi);
            let (l2, h2) = key_range(&inputs.iter().chain(&lower).cloned().collect::<Vec<_>>());
            let job = Job {
                cf,
                level,
                output_level,
                bottommost: bottommost(cfv, output_level, &l2, &h2),
                inputs,
                lower,
            };
            let ids = job.ids();
            if ids.iter().any(|id| busy.contains(id)) {
                drop(busy);
                let mut g = db.bg_lock.lock();
                db.bg_cv.wait_for(&mut g, Duration::from_millis(5));
                continue;
            }
            busy.extend(ids.iter().copied());
            drop(busy);
            let r = run(db, &job);
            db.busy.lock().retain(|id| !ids.contains(id));
            db.notify_bg();
            r?;
            break;
        }
    }
    Ok(())
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
