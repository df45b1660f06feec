//! [`BlockCache`]: the shared cache of decoded table blocks, keyed by
//! `(table id, block offset)` and weighted by block bytes.
//!
//! One cache serves every table of a database. Table ids are never reused within a
//! database, so a stale entry of a deleted table is never returned for another table; it
//! simply ages out (or [`BlockCache::evict_table`] can drop it early).
//!
//! Capacity 0 disables caching: lookups always miss and nothing is kept, but callers use
//! the same code path. Hits and misses are counted here, not by `quick_cache`, so the
//! numbers mean "block reads served from memory" and "block reads that went to the file".

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use quick_cache::sync::Cache;
use quick_cache::Weighter;

use super::Block;
use crate::error::Result;

/// Per-entry bytes charged on top of the block's data (key, `Arc`, `Block` header).
const ENTRY_OVERHEAD_BYTES: u64 = 96;

#[derive(Clone, Copy, Debug, Default)]
struct BlockWeighter;

impl Weighter<(u64, u64), Arc<Block>> for BlockWeighter {
    fn weight(&self, _key: &(u64, u64), block: &Arc<Block>) -> u64 {
        block.size_bytes() as u64 + ENTRY_OVERHEAD_BYTES
    }
}

/// The block cache shared by all tables.
#[derive(Debug)]
pub(crate) struct BlockCache {
    cache: Option<Cache<(u64, u64), Arc<Block>, BlockWeighter>>,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl BlockCache {
    /// A cache holding at most about `capacity_bytes` of blocks (0: no caching).
    pub(crate) fn new(capacity_bytes: u64) -> BlockCache {
        let cache = (capacity_bytes > 0).then(|| {
            // Assume ~4 KiB blocks for the item estimate; it only sizes the tables.
            let items = (capacity_bytes / 4096).clamp(16, 1 << 22) as usize;
            Cache::with_weighter(items, capacity_bytes, BlockWeighter)
        });
        BlockCache {
            cache,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// The cached block of `table_id` at `offset`, if any (counts a hit or a miss).
    pub(crate) fn get(&self, table_id: u64, offset: u64) -> Option<Arc<Block>> {
        let found = self.cache.as_ref().and_then(|c| c.get(&(table_id, offset)));
        match found {
            Some(_) => self.hits.fetch_add(1, Ordering::Relaxed),
            None => self.misses.fetch_add(1, Ordering::Relaxed),
        };
        found
    }

    /// Caches a block (no-op when caching is disabled).
    #[cfg(test)]
    pub(crate) fn insert(&self, table_id: u64, offset: u64, block: Arc<Block>) {
        if let Some(c) = &self.cache {
            c.insert((table_id, offset), block);
        }
    }

    /// The cached block, or the one `load` produces, which is then cached. Concurrent
    /// callers for the same key wait for one load instead of each reading the file.
    pub(crate) fn get_or_load(
        &self,
        table_id: u64,
        offset: u64,
        load: impl FnOnce() -> Result<Arc<Block>>,
    ) -> Result<Arc<Block>> {
        let Some(c) = &self.cache else {
            self.misses.fetch_add(1, Ordering::Relaxed);
            return load();
        };
        let mut loaded = false;
        let res = c.get_or_insert_with(&(table_id, offset), || {
            loaded = true;
            load()
        });
        if loaded {
            self.misses.fetch_add(1, Ordering::Relaxed);
        } else {
            self.hits.fetch_add(1, Ordering::Relaxed);
        }
        res
    }

    /// Lookups served from the cache.
    pub(crate) fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// Lookups that had to read the file.
    pub(crate) fn misses(&self) -> u64 {
        self.misses.load(Ordering::Relaxed)
    }
}

// Statistics and maintenance calls for the engine's stats and table deletion; not every
// one has a caller yet.
#[allow(dead_code)]
impl BlockCache {
    /// Bytes of blocks held now (their weights).
    pub(crate) fn used_bytes(&self) -> u64 {
        self.cache.as_ref().map_or(0, |c| c.weight())
    }

    /// Blocks held now.
    pub(crate) fn len(&self) -> usize {
        self.cache.as_ref().map_or(0, |c| c.len())
    }

    /// Drops every cached block of `table_id` (after the table is deleted). Walks the
    /// whole cache: call it rarely.
    pub(crate) fn evict_table(&self, table_id: u64) {
        if let Some(c) = &self.cache {
            c.retain(|&(id, _), _| id != table_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn block(n: usize) -> Arc<Block> {
        let mut b = crate::sstable::block::BlockBuilder::new(16);
        b.add(
            &crate::key::make_internal(b"k", 1, crate::key::Kind::Put),
            &vec![7u8; n],
        );
        let data = b.finish().to_vec();
        Arc::new(Block::new(data, Arc::from(Path::new("t")), 0).unwrap())
    }

    #[test]
    fn hits_misses_and_weight() {
        let c = BlockCache::new(1 << 20);
        assert!(c.get(1, 0).is_none());
        assert_eq!(c.misses(), 1);
        c.insert(1, 0, block(1000));
        assert!(c.get(1, 0).is_some());
        assert_eq!(c.hits(), 1);
        assert!(c.used_bytes() >= 1000);
        let b = c.get_or_load(1, 4096, || Ok(block(10))).unwrap();
        assert_eq!(b.size_bytes(), block(10).size_bytes());
        assert_eq!(c.misses(), 2);
        let _ = c.get_or_load(1, 4096, || panic!("must be cached")).unwrap();
        assert_eq!(c.hits(), 2);
        // A failed load caches nothing.
        assert!(c
            .get_or_load(2, 0, || Err(crate::error::Error::invalid("x")))
            .is_err());
        assert!(c.get(2, 0).is_none());
        c.evict_table(1);
        assert_eq!(c.len(), 0);
    }

    #[test]
    fn capacity_is_respected() {
        let c = BlockCache::new(64 * 1024);
        for i in 0..200 {
            c.insert(1, i * 4096, block(4000));
        }
        assert!(c.used_bytes() <= 64 * 1024, "{}", c.used_bytes());
    }

    #[test]
    fn zero_capacity_disables_caching() {
        let c = BlockCache::new(0);
        c.insert(1, 0, block(10));
        assert!(c.get(1, 0).is_none());
        let mut calls = 0;
        for _ in 0..3 {
            c.get_or_load(1, 0, || {
                calls += 1;
                Ok(block(10))
            })
            .unwrap();
        }
        assert_eq!(calls, 3);
        assert_eq!(c.hits(), 0);
        assert_eq!(c.misses(), 4);
        assert_eq!(c.used_bytes(), 0);
    }
}
