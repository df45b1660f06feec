//! [`Proposer`]: turns concurrent client writes into few Raft entries.
//!
//! openraft 0.9's core appends each client write as its own entry and waits for that
//! append's flush before it takes the next one (`RaftCore::append_to_log`), so on the
//! leader one proposal costs one log `fdatasync` however many clients wait. The proposer
//! therefore gathers the writes that queue up while earlier proposals are in flight into
//! one [`Request::Batch`] (one entry, one append, one sync), with at most
//! `max_inflight` proposals in flight. A lone client's write goes out at once as itself.
//!
//! Merging keeps each client's semantics: the writes of one entry are applied in queue
//! order in one silt batch, so each client request (itself atomic, a batch included) takes
//! effect at one point, and requests that were all pending together are concurrent, so any
//! order among them is a valid linearization.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use openraft::error::{ClientWriteError, RaftError};
use openraft::Raft;
use silt_raft::{NodeId, Op, Request, TypeConfig};
use tokio::sync::{mpsc, oneshot, Semaphore};

/// Why a write failed.
#[derive(Debug)]
pub enum WriteError {
    /// This node is not the leader; the write was never proposed here.
    NotLeader(Option<NodeId>),
    /// The write was proposed but its outcome is unknown (leadership changed, the node is
    /// stopping): it may or may not be applied.
    Indeterminate(String),
}

/// A write's reply channel.
type Reply = oneshot::Sender<Result<u64, WriteError>>;

/// Counters of the proposer.
#[derive(Debug, Default)]
pub struct ProposerStats {
    /// Client write requests taken.
    pub requests: AtomicU64,
    /// Raft entries proposed for them.
    pub proposals: AtomicU64,
}

/// The handle client handlers send writes to.
#[derive(Clone)]
pub struct Proposer {
    tx: mpsc::Sender<(Request, Reply)>,
    stats: Arc<ProposerStats>,
}

/// The most client requests merged into one entry.
const MAX_MERGED: usize = 1024;
/// The most bytes (keys and values) merged into one entry (a larger request goes alone;
/// each is at most `silt_raft::MAX_BATCH_BYTES`).
const MAX_MERGED_BYTES: usize = 4 << 20;

impl Proposer {
    /// Starts the proposer task for `raft`.
    /// A merged entry carries at most `max_bytes` of keys and values (a larger request,
    /// already checked against the log's limit, goes alone).
    pub fn start(raft: Raft<TypeConfig>, max_inflight: usize, max_bytes: usize) -> Proposer {
        let (tx, rx) = mpsc::channel(16 * 1024);
        let stats = Arc::new(ProposerStats::default());
        let max_bytes = max_bytes.min(MAX_MERGED_BYTES);
        tokio::spawn(run(raft, rx, max_inflight.max(1), max_bytes, stats.clone()));
        Proposer { tx, stats }
    }

    /// Proposes `req` and waits until it is applied; returns its log index.
    ///
    /// # Errors
    ///
    /// As [`WriteError`].
    pub async fn write(&self, req: Request) -> Result<u64, WriteError> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send((req, tx))
            .await
            .map_err(|_| WriteError::NotLeader(None))?;
        rx.await
            .unwrap_or_else(|_| Err(WriteError::Indeterminate("the proposer stopped".into())))
    }

    /// Counters.
    pub fn stats(&self) -> &ProposerStats {
        &self.stats
    }
}

fn size(req: &Request) -> usize {
    match req {
        Request::Put { key, value } => key.len() + value.len(),
        Request::Delete { key } => key.len(),
        Request::Batch { ops } => ops
            .iter()
            .map(|o| match o {
                Op::Put { key, value } => key.len() + value.len() + 16,
                Op::Delete { key } => key.len() + 16,
            })
            .sum(),
    }
}

async fn run(
    raft: Raft<TypeConfig>,
    mut rx: mpsc::Receiver<(Request, Reply)>,
    max_inflight: usize,
    max_bytes: usize,
    stats: Arc<ProposerStats>,
) {
    let inflight = Arc::new(Semaphore::new(max_inflight));
    // A write that did not fit the last group opens the next one.
    let mut carry: Option<(Request, Reply)> = None;
    loop {
        let Ok(permit) = inflight.clone().acquire_owned().await else {
            return;
        };
        let first = match carry.take() {
            Some(w) => w,
            None => match rx.recv().await {
                Some(w) => w,
                None => return,
            },
        };
        let mut bytes = size(&first.0);
        let mut group = vec![first];
        while group.len() < MAX_MERGED {
            match rx.try_recv() {
                Ok(w) => {
                    let b = size(&w.0);
                    if bytes + b > max_bytes {
                        carry = Some(w);
                        break;
                    }
                    bytes += b;
                    group.push(w);
                }
                Err(_) => break,
            }
        }
        stats
            .requests
            .fetch_add(group.len() as u64, Ordering::Relaxed);
        stats.proposals.fetch_add(1, Ordering::Relaxed);
        let raft = raft.clone();
        tokio::spawn(async move {
            let (reqs, replies): (Vec<Request>, Vec<Reply>) = group.into_iter().unzip();
            let req = merge(reqs);
            let result = match raft.client_write(req).await {
                Ok(resp) => Ok(resp.log_id.index),
                Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))) => {
                    // openraft also answers this to writes it had appended when the leader
                    // stepped down; such an entry may still commit under the new leader.
                    Err(format!("leadership changed (leader now {:?})", f.leader_id))
                }
                Err(e) => Err(e.to_string()),
            };
            drop(permit);
            for tx in replies {
                let r = match &result {
                    Ok(i) => Ok(*i),
                    Err(m) => Err(WriteError::Indeterminate(m.clone())),
                };
                let _ = tx.send(r);
            }
        });
    }
}

/// One request for a group: itself if alone, else their writes in order as one batch.
fn merge(mut reqs: Vec<Request>) -> Request {
    if reqs.len() == 1 {
        if let Some(r) = reqs.pop() {
            return r;
        }
    }
    let mut ops: Vec<Op> = Vec::new();
    for r in reqs {
        match r {
            Request::Put { key, value } => ops.push(Op::Put { key, value }),
            Request::Delete { key } => ops.push(Op::Delete { key }),
            Request::Batch { ops: o } => ops.extend(o),
        }
    }
    Request::Batch { ops }
}
