//! [`Client`]: a small HTTP client of the service, for the cluster tests and the benchmark.
//! It finds the leader by following `not_leader` answers and tells apart the three
//! outcomes a history checker needs ([`Outcome`]): done, certainly not done, and unknown.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use serde::Serialize;
use silt_raft::{Digest, NodeId, Op};

use crate::http_client::{HttpClient, HttpError};
use crate::metrics::Metrics;
use crate::wire::*;

/// The outcome of one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome<T> {
    /// Done; the answer.
    Ok(T),
    /// Certainly not done (refused before it was proposed, or never delivered).
    Fail(String),
    /// May or may not have taken effect (a timeout, a connection lost mid-request, a
    /// leadership change after the proposal).
    Unknown(String),
}

impl<T> Outcome<T> {
    /// The answer, if done.
    pub fn ok(self) -> Option<T> {
        match self {
            Outcome::Ok(t) => Some(t),
            _ => None,
        }
    }
}

/// A write.
#[derive(Clone, Debug)]
pub enum Write {
    /// `POST /kv/put`.
    Put(String, String),
    /// `POST /kv/delete`.
    Delete(String),
    /// `POST /kv/batch`.
    Batch(Vec<Op>),
}

/// A client of a cluster.
pub struct Client {
    http: HttpClient,
    nodes: Vec<String>,
    leader: Mutex<String>,
    timeout: Duration,
}

enum Answer<T> {
    Ok(T),
    Err(u16, Option<ErrorReply>),
    Transport(HttpError),
}

impl Client {
    /// A client of the nodes at `nodes` (addresses), each request bounded by `timeout`.
    pub fn new(nodes: Vec<String>, timeout: Duration) -> Self {
        let first = nodes.first().cloned().unwrap_or_default();
        Client {
            http: HttpClient::new(),
            nodes,
            leader: Mutex::new(first),
            timeout,
        }
    }

    /// The node this client believes leads.
    pub fn leader_hint(&self) -> String {
        self.leader.lock().clone()
    }

    /// Believe `addr` leads.
    pub fn set_leader_hint(&self, addr: &str) {
        *self.leader.lock() = addr.to_string();
    }

    fn rotate(&self, from: &str) {
        let mut l = self.leader.lock();
        if *l == from && !self.nodes.is_empty() {
            let i = self
                .nodes
                .iter()
                .position(|n| n == from)
                .map_or(0, |i| (i + 1) % self.nodes.len());
            *l = self.nodes[i].clone();
        }
    }

    fn answer<T: DeserializeOwned>(r: Result<(u16, bytes::Bytes), HttpError>) -> Answer<T> {
        let (status, body) = match r {
            Ok(x) => x,
            Err(e) => return Answer::Transport(e),
        };
        if status == 200 {
            match serde_json::from_slice::<T>(&body) {
                Ok(t) => Answer::Ok(t),
                Err(e) => Answer::Transport(HttpError::Other(format!("bad answer: {e}"))),
            }
        } else {
            Answer::Err(status, serde_json::from_slice::<ErrorReply>(&body).ok())
        }
    }

    async fn post<B: Serialize, T: DeserializeOwned>(
        &self,
        addr: &str,
        path: &str,
        body: &B,
    ) -> Answer<T> {
        Self::answer(self.http.post_json(addr, path, body, self.timeout).await)
    }

    async fn get_json<T: DeserializeOwned>(
        &self,
        addr: &str,
        path: &str,
        query: &[(&str, &str)],
    ) -> Answer<T> {
        Self::answer(self.http.get(addr, path, query, self.timeout).await)
    }

    /// Classifies an answer to a write; follows a `not_leader` hint.
    fn classify<T>(&self, addr: &str, a: Answer<T>) -> Outcome<T> {
        match a {
            Answer::Ok(t) => Outcome::Ok(t),
            Answer::Err(421, e) => {
                match e.as_ref().and_then(|e| e.leader_addr.clone()) {
                    Some(l) => self.set_leader_hint(&l),
                    None => self.rotate(addr),
                }
                Outcome::Fail("not the leader".into())
            }
            Answer::Err(status, Some(e)) if e.kind == "indeterminate" => {
                Outcome::Unknown(format!("{status}: {}", e.message))
            }
            Answer::Err(status, e) if status == 400 || (status == 503 && e.is_some()) => {
                Outcome::Fail(format!(
                    "{status}: {}",
                    e.map(|e| e.message).unwrap_or_default()
                ))
            }
            Answer::Err(status, e) => Outcome::Unknown(format!("{status}: {e:?}")),
            Answer::Transport(HttpError::Connect(_)) => {
                self.rotate(addr);
                Outcome::Fail(format!("cannot connect to {addr}"))
            }
            Answer::Transport(e) => {
                self.rotate(addr);
                Outcome::Unknown(e.to_string())
            }
        }
    }

    /// One attempt of a write at `addr`.
    pub async fn write_at(&self, addr: &str, w: &Write) -> Outcome<u64> {
        let a: Answer<WriteReply> = match w {
            Write::Put(k, v) => {
                self.post(
                    addr,
                    "/kv/put",
                    &PutBody {
                        key: k.clone(),
                        value: v.clone(),
                    },
                )
                .await
            }
            Write::Delete(k) => {
                self.post(addr, "/kv/delete", &DeleteBody { key: k.clone() })
                    .await
            }
            Write::Batch(ops) => {
                self.post(addr, "/kv/batch", &BatchBody { ops: ops.clone() })
                    .await
            }
        };
        match self.classify(addr, a) {
            Outcome::Ok(r) => Outcome::Ok(r.index),
            Outcome::Fail(m) => Outcome::Fail(m),
            Outcome::Unknown(m) => Outcome::Unknown(m),
        }
    }

    /// A write at the leader: retried while it certainly did not happen (not the leader,
    /// no connection, no leader yet), until `deadline`.
    pub async fn write(&self, w: &Write, deadline: Duration) -> Outcome<u64> {
        let end = Instant::now() + deadline;
        loop {
            let addr = self.leader_hint();
            match self.write_at(&addr, w).await {
                Outcome::Fail(m) if Instant::now() < end => {
                    let _ = m;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                o => return o,
            }
        }
    }

    /// One linearizable (or, with `stale`, local) read of `key` at `addr`.
    pub async fn get_at(&self, addr: &str, key: &str, stale: bool) -> Outcome<Option<String>> {
        let stale = if stale { "true" } else { "false" };
        let a: Answer<GetReply> = self
            .get_json(addr, "/kv/get", &[("key", key), ("stale", stale)])
            .await;
        match self.classify(addr, a) {
            Outcome::Ok(r) => Outcome::Ok(r.value),
            // A read that did not answer had no effect.
            Outcome::Fail(m) | Outcome::Unknown(m) => Outcome::Fail(m),
        }
    }

    /// A linearizable read at the leader, retried until `deadline`.
    pub async fn get(&self, key: &str, deadline: Duration) -> Outcome<Option<String>> {
        let end = Instant::now() + deadline;
        loop {
            let addr = self.leader_hint();
            match self.get_at(&addr, key, false).await {
                Outcome::Fail(_) if Instant::now() < end => {
                    tokio::time::sleep(Duration::from_millis(20)).await
                }
                o => return o,
            }
        }
    }

    /// A scan at `addr`.
    pub async fn scan_at(
        &self,
        addr: &str,
        start: &str,
        end: Option<&str>,
        limit: usize,
        stale: bool,
    ) -> Outcome<Vec<(String, String)>> {
        let limit = limit.to_string();
        let mut q = vec![
            ("start", start),
            ("limit", limit.as_str()),
            ("stale", if stale { "true" } else { "false" }),
        ];
        if let Some(e) = end {
            q.push(("end", e));
        }
        let a: Answer<ScanReply> = self.get_json(addr, "/kv/scan", &q).await;
        match self.classify(addr, a) {
            Outcome::Ok(r) => Outcome::Ok(r.pairs),
            Outcome::Fail(m) | Outcome::Unknown(m) => Outcome::Fail(m),
        }
    }

    /// A node's metrics.
    ///
    /// # Errors
    ///
    /// The node did not answer.
    pub async fn metrics(&self, addr: &str) -> Result<Metrics, String> {
        match self.get_json::<Metrics>(addr, "/admin/metrics", &[]).await {
            Answer::Ok(m) => Ok(m),
            Answer::Err(s, e) => Err(format!("{s}: {e:?}")),
            Answer::Transport(e) => Err(e.to_string()),
        }
    }

    /// A node's state-machine digest.
    ///
    /// # Errors
    ///
    /// The node did not answer.
    pub async fn digest(&self, addr: &str) -> Result<Digest, String> {
        match self.get_json::<Digest>(addr, "/admin/digest", &[]).await {
            Answer::Ok(m) => Ok(m),
            Answer::Err(s, e) => Err(format!("{s}: {e:?}")),
            Answer::Transport(e) => Err(e.to_string()),
        }
    }

    async fn admin<B: Serialize>(
        &self,
        addr: &str,
        path: &str,
        body: &B,
    ) -> Result<serde_json::Value, String> {
        match self.post::<B, serde_json::Value>(addr, path, body).await {
            Answer::Ok(v) => Ok(v),
            Answer::Err(s, e) => Err(format!("{s}: {e:?}")),
            Answer::Transport(e) => Err(e.to_string()),
        }
    }

    /// `POST /admin/init` at `addr`.
    ///
    /// # Errors
    ///
    /// The node refused or did not answer.
    pub async fn init(&self, addr: &str, nodes: BTreeMap<NodeId, String>) -> Result<(), String> {
        self.admin(addr, "/admin/init", &InitBody { nodes })
            .await
            .map(|_| ())
    }

    /// `POST /admin/snapshot` at `addr`: build a snapshot now (openraft then purges the
    /// log behind it).
    ///
    /// # Errors
    ///
    /// The node refused or did not answer.
    pub async fn trigger_snapshot(&self, addr: &str) -> Result<(), String> {
        self.admin(addr, "/admin/snapshot", &()).await.map(|_| ())
    }

    /// `POST /admin/add-learner` at `addr` (blocking: returns once the learner caught up).
    ///
    /// # Errors
    ///
    /// The node refused or did not answer.
    pub async fn add_learner(
        &self,
        addr: &str,
        id: NodeId,
        learner_addr: &str,
    ) -> Result<(), String> {
        let body = AddLearnerBody {
            id,
            addr: learner_addr.into(),
            blocking: true,
        };
        self.admin(addr, "/admin/add-learner", &body)
            .await
            .map(|_| ())
    }

    /// `POST /admin/change-membership` at `addr`.
    ///
    /// # Errors
    ///
    /// The node refused or did not answer.
    pub async fn change_membership(&self, addr: &str, members: Vec<NodeId>) -> Result<(), String> {
        let body = ChangeMembershipBody {
            members,
            retain: false,
        };
        self.admin(addr, "/admin/change-membership", &body)
            .await
            .map(|_| ())
    }
}
