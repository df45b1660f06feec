//! [`Version`]: the set of live tables of every column family, per level, as the readers
//! see it; and the handles that delete a table's file once no version needs it.
//!
//! ## Invariants
//!
//! 1. Level 0 is ordered newest first (by largest seqno); its tables come from flushes of
//!    whole memtables: a later flush's entries are newer than an earlier one's (a flush
//!    after a replay may hold copies of entries older tables hold, T4 of `txn/mod.rs`: the
//!    same entries, so either answers alike), and the tables one flush cut a family into
//!    have disjoint user-key ranges (`compaction/flush_split.rs`), so of the level-0 tables
//!    holding a key, the first in this order holds its newest entry. Every level-0 entry of a key is newer than every
//!    entry of that key in the levels below.
//! 2. Levels 1.. hold tables with disjoint user-key ranges, sorted by smallest key; an entry
//!    in level k is newer than any entry of the same key in a level below k.
//! 3. A table file is deleted only when the manifest no longer names it *and* no version
//!    (held by an open iterator or a running read) refers to it: [`TableHandle`]'s `Drop`
//!    queues the removal then, and the unlinker makes it on its own thread (`unlink.rs`).
//!    The same holds of a blob file and [`BlobHandle`]: a version that holds a table
//!    pointing into a blob file holds that blob file.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::error::Result;
use crate::key;
use crate::manifest::{ManifestState, LEVELS};
use crate::table_meta::BlobPointer;
use crate::vlog::BlobFiles;

mod blob_handle;
mod level_iter;
mod super_version;
mod table_cache;

pub(crate) use blob_handle::BlobHandle;
pub(crate) use level_iter::LevelIter;
pub(crate) use super_version::{Lookup, SuperVersion};
pub(crate) use table_cache::{TableCache, TableHandle};

/// The tables of one column family.
#[derive(Debug, Clone)]
pub(crate) struct CfVersion {
    pub(crate) id: u32,
    pub(crate) name: String,
    pub(crate) levels: Vec<Vec<Arc<TableHandle>>>,
}

impl CfVersion {
    /// Level 0's runs ([`runs`]): what its compaction trigger, its slowdown and its stall
    /// count, since a point read checks at most one table of a run.
    pub(crate) fn l0_runs(&self) -> usize {
        runs(
            self.levels[0]
                .iter()
                .map(|t| (t.meta.smallest_seqno, t.meta.largest_seqno)),
        )
    }

    pub(crate) fn level_bytes(&self, level: usize) -> u64 {
        self.levels[level].iter().map(|t| t.meta.size_bytes).sum()
    }

    /// The tables of `level` (>= 1) whose ranges meet `[lo, hi]`.
    pub(crate) fn overlapping(&self, level: usize, lo: &[u8], hi: &[u8]) -> Vec<Arc<TableHandle>> {
        self.levels[level]
            .iter()
            .filter(|t| t.overlaps(lo, hi))
            .cloned()
            .collect()
    }

    /// In a level >= 1, the table that may hold `user_key`.
    pub(crate) fn find_in_level(&self, level: usize, user_key: &[u8]) -> Option<&Arc<TableHandle>> {
        let tables = &self.levels[level];
        let i = tables.partition_point(|t| t.user_largest() < user_key);
        tables.get(i).filter(|t| t.user_smallest() <= user_key)
    }

    /// The newest entry of `user_key` below `snapshot` in this column family's tables: level
    /// 0 newest first (each table after a key-range check; the table's bloom filter is
    /// checked inside), then the one table per deeper level that may hold the key. The first
    /// found decides, because of level 0's tables that may hold a key the first is the newest
    /// (invariant 1), and
    /// each level is newer than the one below (level-0 compactions take all of level 0).
    /// As LevelDB's `Version::Get`.
    pub(crate) fn get(&self, lk: &key::LookupKey) -> Result<Option<(key::Kind, Vec<u8>)>> {
        let user_key = lk.user_key();
        for t in &self.levels[0] {
            if t.user_smallest() <= user_key && user_key <= t.user_largest() {
                if let Some((kind, _, v)) = t.table()?.get_at(lk)? {
                    return Ok(Some((kind, v)));
                }
            }
        }
        for level in 1..LEVELS {
            if let Some(t) = self.find_in_level(level, user_key) {
                if let Some((kind, _, v)) = t.table()?.get_at(lk)? {
                    return Ok(Some((kind, v)));
                }
            }
        }
        Ok(None)
    }
}

/// A consistent view of every column family's tables, and of the blob files they point
/// into.
#[derive(Debug, Default)]
pub(crate) struct Version {
    pub(crate) cfs: BTreeMap<u32, Arc<CfVersion>>,
    pub(crate) blobs: HashMap<u64, Arc<BlobHandle>>,
}

impl Version {
    /// Whether blob files are due for collection at garbage ratio `ratio`: their garbage
    /// (value bytes no table points at) is at least `ratio` of all their value bytes. The
    /// bound is on the files together, not each: collection then takes the files with the
    /// most garbage first, which copies the fewest live values per byte reclaimed (the
    /// greedy cleaner of log-structured file systems), and a burst of overwrites does not
    /// copy values into new files that the next overwrites make garbage again.
    pub(crate) fn blob_collection_due(&self, ratio: f64) -> bool {
        if ratio >= 1.0 {
            return false;
        }
        let (mut garbage, mut total) = (0u64, 0u64);
        for b in self.blobs.values() {
            let v = b.meta.value_bytes;
            garbage += v - b.live_bytes().min(v);
            total += v;
        }
        total > 0 && garbage as f64 >= ratio * total as f64
    }

    /// The value a `Blob` entry of `user_key` points at (`pointer` is the entry's value).
    pub(crate) fn read_blob(&self, user_key: &[u8], pointer: &[u8]) -> Result<Vec<u8>> {
        let bad = |reason: &str| crate::error::Error::Corruption {
            file: "<blob pointer>".into(),
            offset: 0,
            reason: reason.into(),
        };
        let ptr = BlobPointer::decode(pointer)
            .ok_or_else(|| bad("a blob entry's value is not a blob pointer"))?;
        let h = self
            .blobs
            .get(&ptr.id)
            .ok_or_else(|| bad("a blob pointer names a blob file the version does not have"))?;
        h.read(ptr, user_key)
    }

    /// The value an entry of a value kind gives its key as of `now_ms`: `value` itself for
    /// a `Put`, the blob file's value for a `Blob`, the same without the expiry for the
    /// expiring kinds; `None` if it has expired by `now` (the key reads as deleted).
    pub(crate) fn resolve(
        &self,
        kind: key::Kind,
        user_key: &[u8],
        mut value: Vec<u8>,
        now: &crate::clock::ReadTime,
    ) -> Result<Option<Vec<u8>>> {
        match key::Expiry::of(kind, &value, || now.now()) {
            None => Err(crate::error::Error::Corruption {
                file: "<expiring entry>".into(),
                offset: 0,
                reason: "an expiring entry's value is too short to hold its expiry".into(),
            }),
            Some(key::Expiry::Expired) => Ok(None),
            Some(key::Expiry::Live(v)) if kind.is_blob() => self.read_blob(user_key, v).map(Some),
            Some(key::Expiry::Live(_)) => {
                if kind.expires() {
                    value.drain(..key::EXPIRY_BYTES);
                }
                Ok(Some(value))
            }
        }
    }
}

/// Keeps one handle per live table and blob file and builds versions from manifest states.
pub(crate) struct VersionBuilder {
    handles: HashMap<u64, Arc<TableHandle>>,
    blob_handles: HashMap<u64, Arc<BlobHandle>>,
    tables: Arc<TableCache>,
    blob_files: Arc<BlobFiles>,
}

impl VersionBuilder {
    pub(crate) fn new(tables: Arc<TableCache>, blob_files: Arc<BlobFiles>) -> VersionBuilder {
        VersionBuilder {
            handles: HashMap::new(),
            blob_handles: HashMap::new(),
            tables,
            blob_files,
        }
    }

    /// The version of `state`. Tables that left the state are marked obsolete: their files
    /// go when the last older version referring to them is dropped.
    pub(crate) fn build(&mut self, state: &ManifestState) -> Version {
        let mut live = HashMap::with_capacity(self.handles.len());
        let mut cfs = BTreeMap::new();
        for (id, cf) in &state.cfs {
            let mut levels = Vec::with_capacity(LEVELS);
            for level in &cf.levels {
                let mut v = Vec::with_capacity(level.len());
                for meta in level {
                    let h = self.handles.get(&meta.id).cloned().unwrap_or_else(|| {
                        Arc::new(TableHandle::new(meta.clone(), self.tables.clone()))
                    });
                    live.insert(meta.id, h.clone());
                    v.push(h);
                }
                levels.push(v);
            }
            while levels.len() < LEVELS {
                levels.push(Vec::new());
            }
            cfs.insert(
                *id,
                Arc::new(CfVersion {
                    id: *id,
                    name: cf.name.clone(),
                    levels,
                }),
            );
        }
        #[cfg(debug_assertions)]
        for cf in cfs.values() {
            check_levels(cf);
        }
        for (id, h) in self.handles.drain() {
            if !live.contains_key(&id) {
                h.mark_obsolete();
            }
        }
        self.handles = live;
        // Blob files: live bytes summed over the tables that point into each.
        let mut live_bytes: HashMap<u64, u64> = HashMap::with_capacity(state.blobs.len());
        for cf in state.cfs.values() {
            for t in cf.levels.iter().flatten() {
                for r in &t.blobs {
                    *live_bytes.entry(r.id).or_default() += r.bytes;
                }
            }
        }
        let mut blobs = HashMap::with_capacity(state.blobs.len());
        for (id, meta) in &state.blobs {
            let lb = live_bytes.get(id).copied().unwrap_or(0);
            let h = match self.blob_handles.get(id) {
                Some(h) => {
                    h.set_live_bytes(lb);
                    h.clone()
                }
                None => Arc::new(BlobHandle::new(meta.clone(), lb, self.blob_files.clone())),
            };
            blobs.insert(*id, h);
        }
        for (id, h) in self.blob_handles.drain() {
            if !blobs.contains_key(&id) {
                h.mark_obsolete();
            }
        }
        self.blob_handles = blobs.clone();
        Version { cfs, blobs }
    }
}

/// The runs among level-0 tables with these seqno ranges: groups of tables whose ranges
/// overlap, one after another. The tables one flush cut a family into
/// (`compaction/flush_split.rs`) hold disjoint keys and, written by writers at once,
/// interleaved seqnos: one run. Tables of different flushes hold disjoint seqno ranges: one
/// run each. (A flush after a replay may hold copies of entries older than an older table's
/// and join its run: the count is then low by one.)
pub(crate) fn runs(spans: impl Iterator<Item = (key::Seqno, key::Seqno)>) -> usize {
    let mut spans: Vec<_> = spans.collect();
    spans.sort_unstable();
    let mut count = 0;
    let mut end = None;
    for (lo, hi) in spans {
        match end {
            Some(e) if lo <= e => end = Some(hi.max(e)),
            _ => {
                count += 1;
                end = Some(hi);
            }
        }
    }
    count
}

/// Version invariant 2, checked in debug builds after every edit.
#[cfg(debug_assertions)]
fn check_levels(cf: &CfVersion) {
    for (l, tables) in cf.levels.iter().enumerate() {
        for t in tables {
            assert!(
                key::cmp_internal(&t.meta.smallest, &t.meta.largest) != std::cmp::Ordering::Greater,
                "table {} has smallest > largest",
                t.meta.id
            );
        }
        if l == 0 {
            continue;
        }
        for w in tables.windows(2) {
            assert!(
                w[0].user_largest() < w[1].user_smallest(),
                "level {l} of cf {}: tables {} and {} overlap or are unsorted",
                cf.id,
                w[0].meta.id,
                w[1].meta.id
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::runs;

    #[test]
    fn a_flushs_tables_with_interleaved_seqnos_are_one_run_and_flushes_are_apart() {
        assert_eq!(runs(std::iter::empty()), 0);
        // Two flushes: [10, 20] cut into three tables, then [21, 30] whole.
        let spans = [(10, 19), (11, 20), (12, 18), (21, 30)];
        assert_eq!(runs(spans.into_iter()), 2);
        // In any order.
        let spans = [(21, 30), (12, 18), (10, 19), (11, 20)];
        assert_eq!(runs(spans.into_iter()), 2);
        // Four whole flushes.
        let spans = [(1, 5), (6, 9), (10, 10), (11, 40)];
        assert_eq!(runs(spans.into_iter()), 4);
    }
}
