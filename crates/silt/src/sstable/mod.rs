//! Sorted string tables: the immutable files that hold the LSM tree's levels.
//!
//! The byte layout is specified in `docs/format/sstable.md`. Modules, bottom up:
//! [`format`] (handles, trailer, compression, footer, properties), [`block`] (prefix-
//! compressed blocks with restart points and their cursor), [`bloom`] (the user-key
//! filter), [`cache`] (the block cache shared by every table), [`builder`]
//! ([`TableBuilder`]) and [`table`] ([`Table`], [`TableIter`]).

pub(crate) mod block;
pub(crate) mod bloom;
pub(crate) mod builder;
pub(crate) mod cache;
pub(crate) mod format;
pub(crate) mod index;
pub(crate) mod table;

pub(crate) use block::Block;
pub(crate) use builder::{TableBuilder, TableOptions};
pub(crate) use cache::BlockCache;
pub use format::Compression;
pub(crate) use table::{Table, TableIter};
