//! What a database reports about itself: [`Stats`], [`LevelStats`], and the entries of one
//! key for diagnostics (feature `testing`).

use super::*;

impl Db {
    /// Every stored entry of `key` in `cf`, per source (memtables, then tables by level),
    /// for diagnostics: `"L{level} t{id}: seqno kind"`. Feature `testing`; not a stable
    /// interface.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub fn debug_entries(&self, cf: &ColumnFamily, key: &[u8]) -> Vec<String> {
        let sv = self.inner.super_version();
        let mut out = Vec::new();
        let mut dump = |name: String, it: &mut dyn crate::iter::InternalIterator| {
            it.seek(&key::seek_key(key, MAX_SEQNO + 1));
            while it.valid() {
                match key::parse(it.key()) {
                    Some(p) if p.user_key == key => out.push(format!(
                        "{name}: {} {:?} len {}",
                        p.seqno,
                        p.kind,
                        it.value().len()
                    )),
                    _ => break,
                }
                it.next();
            }
        };
        for (i, m) in sv.mems.iter().enumerate() {
            dump(
                format!("mem{i} (from {})", m.first_seqno()),
                &mut m.iter(cf.id),
            );
        }
        if let Some(cfv) = sv.version.cfs.get(&cf.id) {
            for (l, tables) in cfv.levels.iter().enumerate() {
                for t in tables {
                    if let Ok(table) = t.table() {
                        let mut it = crate::sstable::TableIter::new_with(&table, false);
                        dump(
                            format!(
                                "L{l} t{} [{}..{}]",
                                t.meta.id, t.meta.smallest_seqno, t.meta.largest_seqno
                            ),
                            &mut it,
                        );
                    }
                }
            }
        }
        out
    }

    /// Counters and sizes; see [`Stats`].
    pub fn stats(&self) -> Stats {
        self.inner.stats()
    }
}

/// Sizes of one level, summed over column families.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LevelStats {
    /// Tables in the level.
    pub tables: u64,
    /// Bytes of those tables.
    pub bytes: u64,
}

/// What [`Db::stats`] reports.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Stats {
    /// Per level (0 to 6), over every column family.
    pub levels: Vec<LevelStats>,
    /// Bytes in memtables (active and frozen).
    pub memtable_bytes: u64,
    /// Frozen memtables waiting for flush.
    pub immutable_memtables: u64,
    /// Block cache hits and misses.
    pub cache_hits: u64,
    /// Block cache misses.
    pub cache_misses: u64,
    /// Key and value bytes written by users since open.
    pub user_bytes: u64,
    /// Bytes appended to the log since open.
    pub wal_bytes: u64,
    /// fdatasync calls of the log since open.
    pub wal_fsyncs: u64,
    /// Bytes of tables and blob files written by flushes since open.
    pub flush_bytes: u64,
    /// Bytes of tables read and written by compactions since open.
    pub compaction_read_bytes: u64,
    /// Bytes of tables and blob files written by compactions since open.
    pub compaction_write_bytes: u64,
    /// Blob files (key-value separation) in the current version.
    pub blob_files: u64,
    /// Bytes of those files.
    pub blob_file_bytes: u64,
    /// Value bytes in those files that some table still points at (the rest is garbage
    /// that collection reclaims: `docs/format/vlog.md`).
    pub blob_live_bytes: u64,
    /// Bytes written to blob files (by flushes and compactions) since open; included in
    /// `flush_bytes` and `compaction_write_bytes`.
    pub blob_write_bytes: u64,
    /// Flushes and compactions since open.
    pub flushes: u64,
    /// Compactions since open.
    pub compactions: u64,
    /// Of those, the ones split into sub-compactions (`DbBuilder::subcompactions`).
    pub split_compactions: u64,
    /// Of those, the ones run because a table was mostly deletes (`compaction/mod.rs`).
    pub tombstone_compactions: u64,
    /// `(log + flush + compaction bytes) / user bytes` since open.
    pub write_amp: f64,
    /// Writes that had to wait for flush or compaction, and how long in total.
    pub stalls: u64,
    /// Microseconds writers spent stalled.
    pub stall_micros: u64,
    /// Writes slowed down (not stopped) because flushes or level-0 compactions fell
    /// behind, and the time they waited in total (`DbBuilder::l0_slowdown_tables`).
    pub delayed_writes: u64,
    /// Microseconds those writes waited, in total.
    pub delay_micros: u64,
    /// The measured flush rate the slowdown is based on, in bytes per second.
    pub flush_rate_bytes_per_sec: u64,
    /// The level-0 table count at which a compaction is due (the option
    /// `l0_compaction_trigger`): with `levels[0].tables` below it, level 0 waits for more.
    pub l0_compaction_trigger: u64,
}

impl DbInner {
    pub(super) fn stats(&self) -> Stats {
        let sv = self.super_version();
        let mut levels = vec![LevelStats::default(); LEVELS];
        for cf in sv.version.cfs.values() {
            for (l, tables) in cf.levels.iter().enumerate() {
                levels[l].tables += tables.len() as u64;
                levels[l].bytes += tables.iter().map(|t| t.meta.size_bytes).sum::<u64>();
            }
        }
        let w = self.wal.stats();
        let c = &self.counters;
        let user = c.user_bytes.load(SeqCst);
        let flush = c.flush_bytes.load(SeqCst);
        let cw = c.compaction_write_bytes.load(SeqCst);
        Stats {
            levels,
            memtable_bytes: sv.mems.iter().map(|m| m.approx_bytes()).sum(),
            immutable_memtables: sv.mems.len() as u64 - 1,
            cache_hits: self.tables.blocks.hits(),
            cache_misses: self.tables.blocks.misses(),
            user_bytes: user,
            wal_bytes: w.bytes,
            wal_fsyncs: w.fsyncs,
            flush_bytes: flush,
            compaction_read_bytes: c.compaction_read_bytes.load(SeqCst),
            compaction_write_bytes: cw,
            blob_files: sv.version.blobs.len() as u64,
            blob_file_bytes: sv.version.blobs.values().map(|b| b.meta.size_bytes).sum(),
            blob_live_bytes: sv.version.blobs.values().map(|b| b.live_bytes()).sum(),
            blob_write_bytes: c.blob_write_bytes.load(SeqCst),
            flushes: c.flushes.load(SeqCst),
            compactions: c.compactions.load(SeqCst),
            write_amp: if user == 0 {
                0.0
            } else {
                (w.bytes + flush + cw) as f64 / user as f64
            },
            stalls: c.stalls.load(SeqCst),
            stall_micros: c.stall_micros.load(SeqCst),
            split_compactions: c.split_compactions.load(SeqCst),
            tombstone_compactions: c.tombstone_compactions.load(SeqCst),
            delayed_writes: c.delayed_writes.load(SeqCst),
            delay_micros: c.delay_micros.load(SeqCst),
            flush_rate_bytes_per_sec: self.throttle.flush_rate(),
            l0_compaction_trigger: self.opts.l0_compaction_trigger as u64,
        }
    }
}
