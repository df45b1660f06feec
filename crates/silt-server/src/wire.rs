//! The JSON bodies of the service's HTTP API (`docs/server.md` lists the endpoints): the
//! client API, the admin API, and the one Raft message that is not openraft's own serde
//! form (a snapshot chunk, whose bytes travel as base64 instead of a JSON array of numbers).

use std::collections::BTreeMap;

use base64::Engine;
use openraft::raft::InstallSnapshotRequest;
use openraft::{BasicNode, Vote};
use serde::{Deserialize, Serialize};
use silt_raft::{NodeId, Op, SnapshotMeta, TypeConfig};

/// `POST /kv/put`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PutBody {
    /// The key.
    pub key: String,
    /// The value.
    pub value: String,
}

/// `POST /kv/delete`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DeleteBody {
    /// The key.
    pub key: String,
}

/// `POST /kv/batch`: writes applied atomically.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BatchBody {
    /// The writes, in order.
    pub ops: Vec<Op>,
}

/// The answer to a write: the log index of the entry that carried it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WriteReply {
    /// The Raft log index the write was committed at.
    pub index: u64,
}

/// `GET /kv/get` and `GET /kv/scan` take `stale=true` to read this node's state machine
/// without confirming leadership.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GetQuery {
    /// The key.
    pub key: String,
    /// Read locally, possibly stale, on any node.
    #[serde(default)]
    pub stale: bool,
}

/// The answer to a get.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GetReply {
    /// The value, `null` if the key is absent.
    pub value: Option<String>,
}

/// `GET /kv/scan?start=..&end=..&limit=..`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ScanQuery {
    /// First key (inclusive); default the first key.
    #[serde(default)]
    pub start: String,
    /// End key (exclusive); default none.
    pub end: Option<String>,
    /// At most this many pairs (default 1000, at most 100,000).
    pub limit: Option<usize>,
    /// Read locally, possibly stale.
    #[serde(default)]
    pub stale: bool,
}

/// The answer to a scan.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ScanReply {
    /// Pairs in key order.
    pub pairs: Vec<(String, String)>,
}

/// An error answer. `kind` is `not_leader` (421: the write was not proposed, retry at
/// `leader_addr`), `bad_request` (400), `unavailable` (503: nothing was done, retry) or
/// `indeterminate` (503: the write may or may not be applied).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ErrorReply {
    /// The kind, as above.
    pub kind: String,
    /// What happened.
    pub message: String,
    /// The leader's id, when known.
    pub leader_id: Option<NodeId>,
    /// The leader's address, when known.
    pub leader_addr: Option<String>,
}

/// `POST /admin/init`: the initial members (id → address). Empty: this node alone.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct InitBody {
    /// Members.
    #[serde(default)]
    pub nodes: BTreeMap<NodeId, String>,
}

/// `POST /admin/add-learner`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AddLearnerBody {
    /// The new node's id.
    pub id: NodeId,
    /// Its address.
    pub addr: String,
    /// Wait until it has caught up (default true).
    #[serde(default = "yes")]
    pub blocking: bool,
}

fn yes() -> bool {
    true
}

/// `POST /admin/change-membership`: the new voters.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ChangeMembershipBody {
    /// The voters after the change.
    pub members: Vec<NodeId>,
    /// Keep removed voters as learners.
    #[serde(default)]
    pub retain: bool,
}

/// A snapshot chunk on the wire: openraft's `InstallSnapshotRequest` with its bytes in
/// base64.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SnapshotChunk {
    /// The leader's vote.
    pub vote: Vote<NodeId>,
    /// The snapshot's meta.
    pub meta: SnapshotMeta,
    /// Where the chunk goes in the snapshot.
    pub offset: u64,
    /// The bytes, base64.
    pub data: String,
    /// The last chunk.
    pub done: bool,
}

impl SnapshotChunk {
    /// Encodes a request.
    pub fn from_request(r: &InstallSnapshotRequest<TypeConfig>) -> Self {
        SnapshotChunk {
            vote: r.vote,
            meta: r.meta.clone(),
            offset: r.offset,
            data: base64::engine::general_purpose::STANDARD.encode(&r.data),
            done: r.done,
        }
    }

    /// Decodes into a request.
    ///
    /// # Errors
    ///
    /// The base64 text is bad.
    pub fn into_request(self) -> Result<InstallSnapshotRequest<TypeConfig>, base64::DecodeError> {
        Ok(InstallSnapshotRequest {
            vote: self.vote,
            meta: self.meta,
            offset: self.offset,
            data: base64::engine::general_purpose::STANDARD.decode(self.data)?,
            done: self.done,
        })
    }
}

/// The nodes of an init body as openraft's.
pub fn nodes(body: &InitBody) -> BTreeMap<NodeId, BasicNode> {
    body.nodes
        .iter()
        .map(|(id, addr)| (*id, BasicNode::new(addr)))
        .collect()
}
