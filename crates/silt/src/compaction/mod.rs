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
//! 2. **Scores.** Level 0: runs / `l0_compaction_trigger` (a run: the tables of one flush,
//!    `CfVersion::l0_runs`; a read checks one table of each). Level k in base..6: bytes /
//!    target. A non-empty level above the base level: must drain (score 1000). The highest
//!    score ≥ 1 runs.
//! 3. **Inputs.** Level 0: every level-0 table (so level 0 stays newer than the levels
//!    below: version invariant 1) plus the overlapping base-level tables. Level k: the next
//!    table after the level's compaction pointer (round robin over the key space) plus the
//!    overlapping tables of level k+1. Inputs with nothing below to merge with and disjoint
//!    key ranges (one table, or a sequential load's level-0 tables) move down by a manifest
//!    edit alone (trivial move). Of the lower tables in the inputs' range, only those
//!    holding a key of the inputs are merged (the driver checks with one index seek per
//!    pair); the others stay where they are, as fences (see step 4). Why: the range is a
//!    hull, and two sequential writers' level-0 tables span everything loaded between them.
//! 4. **Merge.** Entries are grouped by user key, newest first. Per key, of the entries
//!    visible to the same set of snapshots (a *stripe*), only the newest is kept. A
//!    single delete meets the put right below it in the same stripe: both vanish. At the
//!    bottom (no older data of the range below the output level), tombstones that every
//!    snapshot sees are dropped. Output tables are cut at `table_target_bytes`, only
//!    between user keys (a key's versions never span two tables of a level), and before a
//!    fence, so no output spans a table that stayed.
//! 5. **Install.** New tables are synced, the directory synced, then one manifest edit
//!    removes the inputs and adds the outputs; input files go when no reader needs them.
//!
//! Flushes feed the tree from above (`db/flush.rs`), and one decision of theirs lives here
//! (`flush_split`): a flush cuts a family's entries at gaps in the key space, and a flushed
//! table that overlaps no table at any level, nor a running job's span, goes straight
//! to the base level, so two writers loading their own ranges are not compacted (as long as
//! the cuts are found and nothing else overlaps their tables).
//!
//! When no level needs compacting, two kinds of job keep the tree tidy: blob collection
//! (relocate values out of blob files with much garbage) and tombstone compaction (a table
//! whose entries are mostly deletes is merged into the level below, where the deletes meet
//! what they delete, or, with nothing below and no snapshot that needs them, rewritten in
//! place without them), so delete-heavy ranges are compacted early instead of waiting for
//! their level's size to call for it.
//!
//! Several compactions may run at once on disjoint tables (the `busy` set).
//!
//! ## Where things are
//!
//! This module owns the *decisions*, as pure functions of a version and options: `picker`
//! (steps 1–3: what to compact, and where to), `merge` (step 4: which entries survive,
//! and where output tables are cut), `flush_view` (what a flush keeps) and `flush_split`
//! (where a flush cuts its tables and which level each goes to). It touches no file and no lock of the database. The
//! driver that runs jobs, writes their tables and installs their results (step 5) is
//! `db/compact.rs`, above it.

use std::sync::Arc;

use crate::manifest::LEVELS;
use crate::version::TableHandle;

mod flush_split;
mod flush_view;
mod merge;
mod picker;

pub(crate) use flush_split::{flush_level, Busy, GapDetector, MIN_PIECE_DIVISOR};
pub(crate) use flush_view::FlushView;
pub(crate) use merge::{merge, EntryPolicy};
pub(crate) use picker::{
    key_range, manual_job, manual_rewrite_last, pick, Manual, Pointers, Shape,
};

/// User-key ranges `[lo, hi]` of output-level tables a merge must not span (sorted,
/// disjoint): see [`merge`].
pub(crate) type Fences = Vec<(Vec<u8>, Vec<u8>)>;

/// The last level, where the data should live.
pub(crate) const LAST: usize = LEVELS - 1;

/// One compaction to run.
pub(crate) struct Job {
    /// The column family.
    pub(crate) cf: u32,
    /// The level of `inputs`.
    pub(crate) level: usize,
    /// The level the output goes to (and of `lower`).
    pub(crate) output_level: usize,
    /// The tables picked at `level`.
    pub(crate) inputs: Vec<Arc<TableHandle>>,
    /// The tables of `output_level` that overlap `inputs`.
    pub(crate) lower: Vec<Arc<TableHandle>>,
    /// No table below the output level overlaps the inputs' key range.
    pub(crate) bottommost: bool,
    /// A blob-collection job: run to relocate the values the inputs point at in this blob
    /// file (`docs/format/vlog.md`), so never a trivial move.
    pub(crate) collect_blob: Option<u64>,
    /// A tombstone compaction (picked because its input is mostly deletes). In place
    /// (`level == output_level`, nothing below to merge with) it is never a trivial move:
    /// its point is to drop the tombstones.
    pub(crate) for_tombstones: bool,
    /// A manual compaction under a compaction filter or TTL: every entry must pass the
    /// merge (where the filter and expiry apply), so never a trivial move.
    pub(crate) rewrite: bool,
    /// Picked early because reads passed over many entries of its level-0 inputs
    /// (`DbBuilder::l0_scan_compaction_ratio`).
    pub(crate) for_scans: bool,
}

impl Job {
    /// Every table the job reads (and removes).
    pub(crate) fn ids(&self) -> Vec<u64> {
        self.inputs
            .iter()
            .chain(&self.lower)
            .map(|t| t.meta.id)
            .collect()
    }

    /// Inputs with nothing below them to merge with and no key in two of them (a
    /// sequential load's level-0 tables): moved down by a manifest edit, not rewritten.
    pub(crate) fn is_trivial_move(&self) -> bool {
        if !self.lower.is_empty()
            || self.collect_blob.is_some()
            || self.rewrite
            || (self.for_tombstones && self.level == self.output_level)
            // Its point is to drop what reads pass over: a move would keep it.
            || self.for_scans
        {
            return false;
        }
        let mut v: Vec<&Arc<TableHandle>> = self.inputs.iter().collect();
        v.sort_by(|a, b| a.user_smallest().cmp(b.user_smallest()));
        // Disjoint user-key ranges: together they are a valid sorted run (version
        // invariant: a level below 0 holds disjoint tables, a key's versions in one table).
        v.windows(2)
            .all(|w| w[0].user_largest() < w[1].user_smallest())
    }
}
