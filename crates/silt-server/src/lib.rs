//! `silt-server`: a replicated key-value service — one openraft node per process, storage
//! by `silt-raft` (the Raft log on silt-wal, the state machine on silt), HTTP/JSON (axum)
//! for both the Raft RPCs and the client API. The endpoints are listed in
//! `docs/server.md`; the design in `docs/design.md` ("silt-raft" and "silt-server").

#![warn(missing_docs)]

pub mod app;
pub mod client;
mod http;
pub mod http_client;
pub mod metrics;
mod network;
mod node;
mod proposer;
pub mod wire;

pub use app::{App, Config};
pub use node::run;
