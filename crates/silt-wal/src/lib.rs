//! `silt-wal`: a write-ahead log any database can embed.
//!
//! Append opaque payloads (serialized batches) and get back their LSN; choose when they are
//! acknowledged ([`SyncMode`]); wait for durability later with a ticket
//! ([`Wal::wait_durable`], or `async` with the `tokio` feature); replay them after a crash
//! ([`Wal::read_from`]). Recovery keeps the prefix property: it never returns commit k+1
//! without commit k, and it reports lost durable data as `Corruption` instead of skipping it.
//!
//! The format is specified in `docs/format/wal.md`, the design in `docs/design.md`.
//!
//! # Examples
//!
//! ```
//! use silt_wal::{AppendOptions, Options, SyncMode, Wal};
//! # let dir = tempfile::tempdir().unwrap();
//! let wal = Wal::open(dir.path(), Options::default().sync(SyncMode::None)).unwrap();
//! wal.append(b"fast, in the OS on return").unwrap();
//! let lsn = wal
//!     .append_with(b"this one must be durable", AppendOptions { sync: Some(true) })
//!     .unwrap();
//! assert!(wal.durable_lsn() > lsn);
//! ```

#![warn(missing_docs)]

mod commit;
mod copy;
mod error;
mod format;
pub mod kill_point;
mod options;
mod recovery;
mod reservation;
mod scan;
mod segment;
mod sync_shim;
mod wal;

// The async API (feature `tokio`), or its no-op hooks: the commit path calls the same
// `async_api::Waiters` methods either way, so the core carries no `cfg`.
#[cfg(feature = "tokio")]
mod async_api;
#[cfg(not(feature = "tokio"))]
#[path = "async_off.rs"]
mod async_api;

pub use copy::PurgeHold;
pub use error::{Error, Result};
pub use format::{
    max_payload_bytes, verify_span, SegmentHeader, MAX_PAYLOAD_BYTES, RECORD_HEADER_BYTES,
    SEGMENT_HEADER_BYTES,
};
pub use options::{AppendOptions, Options, Preallocate, Strategy, SyncMode};
pub use recovery::{Damage, DamageKind, Reader, Record, RecoveryInfo};
pub use reservation::{Appended, Reservation};
pub use wal::{Wal, WalStats};

/// A log sequence number: the byte position of a record in the log. Later records have
/// larger LSNs.
pub type Lsn = u64;

/// Decoders and fuzz entry points, for the fuzz targets and the corpus replay test (feature
/// `fuzzing`); not a stable API.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod decode {
    pub use crate::format::{RecordHeader, RecordType};
    pub use crate::fuzzing::{decode_bytes, recover_damaged};
}

#[cfg(feature = "fuzzing")]
mod fuzzing;
