//! `silt-raft-compare`: silt-raft's storage beside openraft's own example store under one
//! harness — the same in-process 3-node cluster, network, clients, openraft config and
//! measurement for each store, so that the only difference is the storage.
//!
//! - [`harness`]: the cluster and one benchmark cell, generic over a [`harness::Store`];
//! - [`silt`] (feature `silt`, on by default): silt-raft's `LogStore` and `StateMachine`;
//! - [`cli`]: the command line of one cell in its own process.
//!
//! openraft 0.9 cannot build both stores into one binary: silt-raft implements the v2
//! storage traits, which needs openraft's `storage-v2` feature, and `openraft-memstore`
//! implements the v1 `RaftStorage`, which that feature removes (with `Adaptor`). So the
//! memstore cells run in a second binary, `silt-raft-memstore` (`memstore/`, a workspace
//! of its own that builds openraft without `storage-v2`), compiled from this same harness
//! with this crate's default features off; `silt-raft-compare writes` runs both, cell by
//! cell, each in a fresh process. See `docs/server.md`, "Beside openraft's example store".

#![warn(missing_docs)]
// openraft's network traits return its `RPCError` (over 128 bytes); it is not ours to box.
#![allow(clippy::result_large_err)]

pub mod cli;
pub mod harness;
#[cfg(feature = "silt")]
pub mod silt;
