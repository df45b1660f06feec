//! Steps 1–3 of the algorithm (see the module above): level targets, scores, and the job
//! that runs next. Pure functions of a version, the tree's shape options, the compaction
//! pointers and the set of busy tables: no I/O, no lock of the database.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use super::{Job, LAST};
use crate::key::Seqno;
use crate::manifest::LEVELS;
use crate::version::{CfVersion, TableHandle, Version};

/// The options that shape the tree (from `DbBuilder`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shape {
    /// Level 0 compacts at this many tables.
    pub(crate) l0_trigger: usize,
    /// The base level's target is at most this.
    pub(crate) base_bytes: u64,
    /// Each level's target is this times the one above.
    pub(crate) ratio: u64,
    /// Blob files are collected once they together hold this share of garbage, each file
    /// at or above it, the most garbage first (`Version::blob_collection_due`; 1.0: never).
    pub(crate) blob_gc_ratio: f64,
    /// Level 0 compacts early once reads passed over this many times the entries the job
    /// would read (0: never; `scan_compaction`).
    pub(crate) l0_scan_ratio: f64,
}

/// Per (column family, level), the largest user key of the last table compacted there: the
/// next compaction of that level starts after it (round robin over the key space).
pub(crate) type Pointers = BTreeMap<(u32, usize), Vec<u8>>;

/// Level targets and the base level of one column family.
pub(super) fn targets(cf: &CfVersion, base_bytes: u64, ratio: u64) -> (Vec<u64>, usize) {
    let mut t = vec![0u64; LEVELS];
    t[LAST] = cf.level_bytes(LAST).max(1);
    let mut k = LAST;
    while k > 1 && t[k] > base_bytes {
        t[k - 1] = t[k] / ratio;
        k -= 1;
    }
    (t, k)
}

/// The user-key range `[lo, hi]` the tables cover together.
pub(crate) fn key_range(tables: &[Arc<TableHandle>]) -> (Vec<u8>, Vec<u8>) {
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

/// Completes a job from its inputs: the overlapping tables of `output_level`, and whether
/// nothing older lies below. `None` if one of those tables is busy.
fn with_lower(
    cf: &CfVersion,
    level: usize,
    output_level: usize,
    inputs: Vec<Arc<TableHandle>>,
    busy: &HashSet<u64>,
) -> Option<Job> {
    let (lo, hi) = key_range(&inputs);
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
        collect_blob: None,
        for_tombstones: false,
        rewrite: false,
        for_scans: false,
    })
}

/// A table is tombstone-heavy when at least this share of its entries are deletes...
const TOMBSTONE_SHARE: f64 = 0.5;
/// ...and it has at least this many entries (a tiny table is not worth a job).
const TOMBSTONE_TABLE_MIN_ENTRIES: u64 = 64;

/// Picks the most urgent compaction whose tables are all free. `oldest_snapshot` is the
/// oldest registered snapshot (`Seqno::MAX` if none): tombstones at or above it may still
/// be needed.
pub(crate) fn pick(
    version: &Version,
    shape: Shape,
    pointers: &Pointers,
    busy: &HashSet<u64>,
    oldest_snapshot: Seqno,
) -> Option<Job> {
    let mut best: Option<(f64, Job)> = None;
    for cf in version.cfs.values() {
        let (t, base) = targets(cf, shape.base_bytes, shape.ratio);
        let mut candidates: Vec<(f64, usize)> = Vec::new();
        let l0 = cf.l0_runs();
        if l0 > 0 {
            candidates.push((l0 as f64 / shape.l0_trigger as f64, 0));
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
            if let Some(job) = job_for(cf, level, base, pointers, busy) {
                best = Some((score, job));
                break;
            }
        }
    }
    best.map(|(_, j)| j)
        .or_else(|| scan_compaction(version, shape, pointers, busy))
        .or_else(|| blob_collection(version, shape, pointers, busy))
        .or_else(|| tombstone_compaction(version, busy, oldest_snapshot))
}

/// When no level needs compacting and no blob file is due: the most tombstone-heavy table
/// of a level below 0 (level 0 drains on its own trigger). Merged into the next level if
/// that holds data of its range (the deletes meet what they delete, and the data moves
/// down); rewritten in place if nothing lies below it and every tombstone in it is older
/// than the oldest snapshot (they are all dropped, so the job cannot repeat forever);
/// otherwise left alone.
fn tombstone_compaction(
    version: &Version,
    busy: &HashSet<u64>,
    oldest_snapshot: Seqno,
) -> Option<Job> {
    let mut heavy: Vec<(f64, u32, usize, Arc<TableHandle>)> = Vec::new();
    for cf in version.cfs.values() {
        for (level, tables) in cf.levels.iter().enumerate().skip(1) {
            for t in tables {
                let m = &t.meta;
                if busy.contains(&m.id) || m.entries < TOMBSTONE_TABLE_MIN_ENTRIES {
                    continue;
                }
                let share = m.tombstones as f64 / m.entries as f64;
                if share >= TOMBSTONE_SHARE {
                    heavy.push((share, cf.id, level, t.clone()));
                }
            }
        }
    }
    heavy.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.3.meta.id.cmp(&b.3.meta.id)));
    for (_, cf_id, level, t) in heavy {
        let cf = &version.cfs[&cf_id];
        let (lo, hi) = (t.user_smallest().to_vec(), t.user_largest().to_vec());
        if level < LAST && !cf.overlapping(level + 1, &lo, &hi).is_empty() {
            if let Some(mut job) = with_lower(cf, level, level + 1, vec![t.clone()], busy) {
                job.for_tombstones = true;
                return Some(job);
            }
        } else if bottommost(cf, level, &lo, &hi) && t.meta.largest_seqno < oldest_snapshot {
            return Some(Job {
                cf: cf.id,
                level,
                output_level: level,
                inputs: vec![t.clone()],
                lower: Vec::new(),
                bottommost: true,
                collect_blob: None,
                for_tombstones: true,
                rewrite: false,
                for_scans: false,
            });
        }
    }
    None
}

/// When no level needs compacting: level 0 of a family whose reads have passed over at
/// least `shape.l0_scan_ratio` times as many of its level-0 entries as the job would read
/// (`DbBuilder::l0_scan_compaction_ratio`): walking them again would soon cost more than
/// rewriting them once, and the deletes and overwritten versions they walk meet what they
/// hide one level down.
fn scan_compaction(
    version: &Version,
    shape: Shape,
    pointers: &Pointers,
    busy: &HashSet<u64>,
) -> Option<Job> {
    if shape.l0_scan_ratio <= 0.0 {
        return None;
    }
    for cf in version.cfs.values() {
        let l0 = &cf.levels[0];
        let passed: u64 = l0.iter().map(|t| t.scan_passed()).sum();
        let l0_entries: u64 = l0.iter().map(|t| t.meta.entries).sum();
        // Level 0 alone is a lower bound of what the job reads: most families stop here.
        if passed == 0 || (passed as f64) < shape.l0_scan_ratio * l0_entries as f64 {
            continue;
        }
        let (_, base) = targets(cf, shape.base_bytes, shape.ratio);
        if let Some(mut job) = job_for(cf, 0, base, pointers, busy) {
            let reads = l0_entries + job.lower.iter().map(|t| t.meta.entries).sum::<u64>();
            if passed as f64 >= shape.l0_scan_ratio * reads as f64 {
                job.for_scans = true;
                return Some(job);
            }
        }
    }
    None
}

/// When no level needs compacting and the blob files are due for collection
/// ([`Version::blob_collection_due`]): a job for the blob file with the most garbage at or
/// above `shape.blob_gc_ratio`. It compacts one table pointing into that file (all of
/// level 0 for a level-0 table; the table alone, in place, at the last level), and the
/// outputs relocate the values it still points at (`docs/format/vlog.md`).
fn blob_collection(
    version: &Version,
    shape: Shape,
    pointers: &Pointers,
    busy: &HashSet<u64>,
) -> Option<Job> {
    if !version.blob_collection_due(shape.blob_gc_ratio) {
        return None;
    }
    let mut due: Vec<(f64, u64)> = version
        .blobs
        .values()
        .map(|b| (b.garbage_ratio(), b.meta.id))
        .filter(|(r, _)| *r >= shape.blob_gc_ratio)
        .collect();
    due.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    for (_, blob) in due {
        for cf in version.cfs.values() {
            for (level, tables) in cf.levels.iter().enumerate() {
                let Some(t) = tables.iter().find(|t| {
                    !busy.contains(&t.meta.id) && t.meta.blobs.iter().any(|r| r.id == blob)
                }) else {
                    continue;
                };
                let job = if level == LAST {
                    Some(Job {
                        cf: cf.id,
                        level,
                        output_level: LAST,
                        inputs: vec![t.clone()],
                        lower: Vec::new(),
                        bottommost: true,
                        collect_blob: None,
                        for_tombstones: false,
                        rewrite: false,
                        for_scans: false,
                    })
                } else if level == 0 {
                    let (_, base) = targets(cf, shape.base_bytes, shape.ratio);
                    job_for(cf, 0, base, pointers, busy)
                } else {
                    with_lower(cf, level, level + 1, vec![t.clone()], busy)
                };
                if let Some(mut job) = job {
                    job.collect_blob = Some(blob);
                    return Some(job);
                }
            }
        }
    }
    None
}

fn job_for(
    cf: &CfVersion,
    level: usize,
    base: usize,
    pointers: &Pointers,
    busy: &HashSet<u64>,
) -> Option<Job> {
    let inputs: Vec<Arc<TableHandle>> = if level == 0 {
        cf.levels[0].clone()
    } else {
        let ptr = pointers
            .get(&(cf.id, level))
            .map(Vec::as_slice)
            .unwrap_or_default();
        let tables = &cf.levels[level];
        let start = tables.partition_point(|t| t.user_smallest() <= ptr && !ptr.is_empty());
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
    with_lower(cf, level, output_level, inputs, busy)
}

/// The job of a manual compaction (`Db::compact_range`) at `level` of the user-key range
/// `[lo, hi]` (`None` = unbounded): the tables of that level overlapping it (all of level 0,
/// so level 0 stays newer than the levels below), merged into the first level below that
/// has data of their range, or the last.
pub(crate) fn manual_job(
    cf: &CfVersion,
    level: usize,
    lo: Option<&[u8]>,
    hi: Option<&[u8]>,
    busy: &HashSet<u64>,
) -> Manual {
    let overlaps = cf.levels[level].iter().any(|t| {
        lo.is_none_or(|l| t.user_largest() >= l) && hi.is_none_or(|h| t.user_smallest() <= h)
    });
    if !overlaps {
        return Manual::Nothing;
    }
    let inputs: Vec<Arc<TableHandle>> = cf.levels[level]
        .iter()
        .filter(|t| {
            level == 0
                || (lo.is_none_or(|l| t.user_largest() >= l)
                    && hi.is_none_or(|h| t.user_smallest() <= h))
        })
        .cloned()
        .collect();
    if inputs.iter().any(|t| busy.contains(&t.meta.id)) {
        return Manual::Busy;
    }
    let (klo, khi) = key_range(&inputs);
    // Skip levels with nothing to merge: go straight to the first one that has.
    let output_level = (level + 1..LAST)
        .find(|l| !cf.overlapping(*l, &klo, &khi).is_empty())
        .unwrap_or(LAST);
    match with_lower(cf, level, output_level, inputs, busy) {
        Some(job) => Manual::Job(job),
        None => Manual::Busy,
    }
}

/// A manual compaction's in-place rewrite of the last level's tables in `lo..=hi`, so that
/// a compaction filter and expiry reach data no other job would rewrite (RocksDB's
/// `BottommostLevelCompaction::kIfHaveCompactionFilter`).
pub(crate) fn manual_rewrite_last(
    cf: &CfVersion,
    lo: Option<&[u8]>,
    hi: Option<&[u8]>,
    busy: &HashSet<u64>,
) -> Manual {
    let inputs: Vec<Arc<TableHandle>> = cf.levels[LAST]
        .iter()
        .filter(|t| {
            lo.is_none_or(|l| t.user_largest() >= l) && hi.is_none_or(|h| t.user_smallest() <= h)
        })
        .cloned()
        .collect();
    if inputs.is_empty() {
        return Manual::Nothing;
    }
    if inputs.iter().any(|t| busy.contains(&t.meta.id)) {
        return Manual::Busy;
    }
    Manual::Job(Job {
        cf: cf.id,
        level: LAST,
        output_level: LAST,
        inputs,
        lower: Vec::new(),
        bottommost: true,
        collect_blob: None,
        for_tombstones: false,
        rewrite: true,
        for_scans: false,
    })
}

/// What [`manual_job`] found at one level.
pub(crate) enum Manual {
    /// No table of the level overlaps the range.
    Nothing,
    /// A table the job needs is in another compaction: try again when it is done.
    Busy,
    /// The job to run.
    Job(Job),
}
