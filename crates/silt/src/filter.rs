//! [`CompactionFilter`]: a user callback that keeps, removes or rewrites entries as
//! compaction rewrites them (RocksDB's `CompactionFilter`), for data that should age out
//! by a rule of the application's (expired sessions, tombstoned tenants, rewritten
//! formats). The engine's own expiry (TTL) does not need one.

use std::fmt::Debug;

/// What a [`CompactionFilter`] does with one entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FilterDecision {
    /// Keep the entry as it is.
    Keep,
    /// Remove the key: the entry becomes a delete at the same sequence number, so older
    /// values of the key in levels this compaction does not reach stay hidden; the delete
    /// itself is dropped once it reaches the bottom.
    Remove,
    /// Replace the value (an expiring value keeps its expiry).
    Change(Vec<u8>),
}

/// A callback run by compaction on the newest value of each key it rewrites, in the
/// column families it is set for ([`crate::DbBuilder::compaction_filter`],
/// [`crate::DbBuilder::cf_compaction_filter`]).
///
/// When it runs, and on what:
/// - only on a value no live snapshot (and so no open iterator or transaction reading at
///   a snapshot) can see: what a snapshot reads never changes under it. A value some
///   snapshot sees is kept as it is and offered again by a later compaction, after the
///   snapshot is released;
/// - on the newest value of a key only (older values are shadowed for every reader that
///   could see the filter's result); never on deletes;
/// - in compactions (background and [`crate::Db::compact_range`], which then rewrites
///   every table of the range, the bottom level too), not in flushes; so a write is
///   filtered some time after it is made, or never if no compaction reaches its table
///   before it is overwritten. A filter must therefore be a pure function of the key and
///   value: the engine may call it any number of times, from several threads at once;
/// - a value stored in a blob file is read for it (a filter over blob-separated data costs
///   a read per value).
///
/// Its effect bypasses transactions: a change is not a write, has no sequence number of
/// its own and is not seen by conflict checks.
pub trait CompactionFilter: Send + Sync + Debug {
    /// The decision for `key` with `value`, being compacted into `level` (0–6).
    fn filter(&self, level: usize, key: &[u8], value: &[u8]) -> FilterDecision;
}
