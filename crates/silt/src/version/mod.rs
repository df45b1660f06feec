//! [`Version`]: the set of live tables of every column family, per level, as the readers
//! see it; and the handles that delete a table's file once no version needs it.
//!
//! ## Invariants
//!
//! 1. Level 0 is ordered newest first; its tables come from flushes of whole memtables, so
//!    their seqno ranges are disjoint and decrease along the level. Every level-0 entry of a
//!    key is newer than every entry of that key in the levels below.
//! 2. Levels 1.. hold tables with disjoint user-key ranges, sorted by smallest key; an entry
//!    in level k is newer than any entry of the same key in a level below k.
//! 3. A table file is deleted only when the manifest no longer names it *and* no version
//!    (held by an open iterator or a running read) refers to it: [`TableHandle`]'s `Drop`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::error::Result;
use crate::key;
use crate::manifest::{ManifestState, LEVELS};

mod level_iter;
mod super_version;
mod table_cache;

pub(crate) use level_iter::LevelIter;
pub(crate) use super_version::SuperVersion;
pub(crate) use table_cache::{TableCache, TableHandle};

/// The tables of one column family.
#[derive(Debug, Clone)]
pub(crate) struct CfVersion {
    pub(crate) id: u32,
    pub(crate) name: String,
    pub(crate) levels: Vec<Vec<Arc<TableHandle>>>,
}

impl CfVersion {
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
    /// found decides, because level 0's tables own disjoint seqno ranges, newest first, and
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

/// A consistent view of every column family's tables.
#[derive(Debug, Default)]
pub(crate) struct Version {
    pub(crate) cfs: BTreeMap<u32, Arc<CfVersion>>,
}

/// Keeps one handle per live table id and builds versions from manifest states.
pub(crate) struct VersionBuilder {
    handles: HashMap<u64, Arc<TableHandle>>,
    tables: Arc<TableCache>,
}

impl VersionBuilder {
    pub(crate) fn new(tables: Arc<TableCache>) -> VersionBuilder {
        VersionBuilder {
            handles: HashMap::new(),
            tables,
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
        Version { cfs }
    }
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
