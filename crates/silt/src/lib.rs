//! `silt`: an embedded, transactional LSM-tree key-value engine on [`silt_wal`].
//!
//! ```
//! # let dir = tempfile::tempdir().unwrap();
//! use silt::{Db, SyncMode, WriteBatch, WriteOptions};
//! let db = Db::builder(dir.path()).sync_mode(SyncMode::Full).open().unwrap();
//! let users = db.create_cf("users").unwrap();
//! let mut batch = WriteBatch::new();
//! batch.put_cf(&users, b"u1", b"ada").put(b"count", b"1");
//! db.write(batch, WriteOptions::default()).unwrap(); // atomic across column families
//! let snap = db.snapshot();
//! db.delete_cf(&users, b"u1").unwrap();
//! assert_eq!(snap.get_cf(&users, b"u1").unwrap().as_deref(), Some(&b"ada"[..]));
//! assert_eq!(db.get_cf(&users, b"u1").unwrap(), None);
//! for kv in db.range(&b"a"[..]..).rev() {
//!     let (k, v) = kv.unwrap();
//!     println!("{k:?} = {v:?}");
//! }
//! ```
//!
//! The design, its invariants and a glossary are in `docs/design.md`; the on-disk formats in
//! `docs/format/`.

#![warn(missing_docs)]

mod batch;
mod cf;
mod clock;
mod compaction;
mod db;
mod error;
mod filter;
/// Decoders' fuzz entry points for the fuzz targets and the corpus replay test (feature
/// `fuzzing`); not a stable API.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
/// Read-only inspection of a database's files for tools (`silt-cli`): tables, the
/// manifest, the log, and a check of every checksum, through the engine's own decoders.
pub mod inspect;
mod iter;
mod key;
mod lock_table;
mod lost;
mod manifest;
mod memtable;
mod merge_op;
mod options;
mod read;
mod sstable;
mod table_meta;
mod txn;
mod unlink;
mod version;
mod vlog;

/// The README's code blocks, compiled and run by `cargo test`.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

pub use batch::{WriteBatch, MAX_VALUE_BYTES};
pub use cf::{ColumnFamily, DEFAULT_CF};
pub use clock::{Clock, ManualClock, SystemClock};
pub use db::{
    BackupInfo, BackupStore, CheckpointInfo, Db, LevelStats, RecoveryReport, RepairReport,
    Snapshot, Stats, StatsFile,
};
pub use error::{ConflictKind, Error, Result};
pub use filter::{CompactionFilter, FilterDecision};
pub use key::{Kind, MAX_KEY_BYTES};
pub use merge_op::{Append, Counter, MergeOperator};
pub use options::{DbBuilder, SyncMode, WriteOptions};
pub use read::{Cursor, Entry, EntryRef, Iter, Read};
/// The file layer every file of a database goes through; [`DbBuilder::file_system`] takes
/// one. `vfs::OsFs` is the default; tests use the power-loss simulator `SimFs` (feature
/// `sim` of `silt-vfs`).
pub use silt_vfs as vfs;
/// White-box crash points for stress tests; see `silt_wal::kill_point` and the cargo feature
/// `kill-points`.
pub use silt_wal::kill_point;
pub use sstable::Compression;
pub use txn::{Concurrency, IsolationLevel, Txn, TxnOptions};
