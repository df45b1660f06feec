//! The harness: a cluster of openraft nodes in one process over an in-process network,
//! generic over the storage ([`Store`]), and one benchmark cell on it ([`run_cell`]).
//!
//! Everything but the storage is the same for every store: openraft's config, the network
//! (an RPC is a direct call on the target's `Raft` handle: no sockets, no serialization),
//! the clients (each a task calling `Raft::client_write` on the leader and waiting for the
//! answer, one command per Raft entry), the runtime and the measurement.

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use openraft::error::{InstallSnapshotError, RPCError, RaftError, RemoteError, Unreachable};
use openraft::impls::OneshotResponder;
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::storage::{RaftLogStorage, RaftStateMachine};
use openraft::{Raft, RaftTypeConfig, SnapshotPolicy, TokioRuntime};

/// A node's id in the harness: 1, 2, 3, ...
pub type NodeId = u64;

/// Counters a store can report, read before and after a cell.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StorageCounters {
    /// `fdatasync`s of the Raft log.
    pub log_fsyncs: u64,
}

/// Reads a node's storage counters; `None` for a store that has none (one in memory).
pub type Probe = Box<dyn Fn() -> Option<StorageCounters> + Send + Sync>;

/// A storage under test: how to open one node's log and state machine, and the command a
/// client write becomes.
pub trait Store: 'static {
    /// openraft's types of this store.
    type C: RaftTypeConfig<
        NodeId = NodeId,
        AsyncRuntime = TokioRuntime,
        Responder = OneshotResponder<Self::C>,
    >;
    /// The Raft log.
    type Log: RaftLogStorage<Self::C>;
    /// The state machine.
    type Sm: RaftStateMachine<Self::C>;
    /// The name printed in results.
    const NAME: &'static str;
    /// Opens node `id`'s storage in `dir` (a fresh directory; a store in memory ignores it),
    /// with small files if `small` (tests).
    fn open(
        id: NodeId,
        dir: PathBuf,
        small: bool,
    ) -> impl Future<Output = (Self::Log, Self::Sm, Probe)> + Send;
    /// What the cluster's membership records for node `id`.
    fn node(id: NodeId) -> <Self::C as RaftTypeConfig>::Node;
    /// Client `client`'s `i`-th write: a new key with `value`.
    fn request(client: usize, i: u64, value: String) -> <Self::C as RaftTypeConfig>::D;
}

/// The nodes of one cluster, by id: the in-process network's address book.
pub struct Router<C: RaftTypeConfig> {
    nodes: Mutex<BTreeMap<NodeId, Raft<C>>>,
}

impl<C: RaftTypeConfig<NodeId = NodeId>> Router<C> {
    fn get(&self, id: NodeId) -> Option<Raft<C>> {
        self.nodes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&id)
            .cloned()
    }
}

/// openraft's network factory over a [`Router`].
pub struct Network<C: RaftTypeConfig> {
    router: Arc<Router<C>>,
}

/// One node's connection to one target.
pub struct Connection<C: RaftTypeConfig> {
    router: Arc<Router<C>>,
    target: NodeId,
}

impl<C: RaftTypeConfig<NodeId = NodeId>> Connection<C> {
    fn target<E: std::error::Error>(&self) -> Result<Raft<C>, RPCError<NodeId, C::Node, E>> {
        self.router.get(self.target).ok_or_else(|| {
            RPCError::Unreachable(Unreachable::new(&io::Error::new(
                io::ErrorKind::NotConnected,
                format!("node {} is not running", self.target),
            )))
        })
    }
}

impl<C> RaftNetworkFactory<C> for Network<C>
where
    C: RaftTypeConfig<NodeId = NodeId>,
    C::SnapshotData: tokio::io::AsyncRead + tokio::io::AsyncWrite + tokio::io::AsyncSeek + Unpin,
{
    type Network = Connection<C>;

    async fn new_client(&mut self, target: NodeId, _node: &C::Node) -> Connection<C> {
        Connection {
            router: self.router.clone(),
            target,
        }
    }
}

impl<C> RaftNetwork<C> for Connection<C>
where
    C: RaftTypeConfig<NodeId = NodeId>,
    C::SnapshotData: tokio::io::AsyncRead + tokio::io::AsyncWrite + tokio::io::AsyncSeek + Unpin,
{
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<C>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, C::Node, RaftError<NodeId>>> {
        let raft = self.target()?;
        raft.append_entries(rpc)
            .await
            .map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<C>,
        _option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, C::Node, RaftError<NodeId, InstallSnapshotError>>,
    > {
        let raft = self.target()?;
        raft.install_snapshot(rpc)
            .await
            .map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        _option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, C::Node, RaftError<NodeId>>> {
        let raft = self.target()?;
        raft.vote(rpc)
            .await
            .map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

/// What one cell runs.
#[derive(Clone, Debug)]
pub struct CellSpec {
    /// Nodes in the cluster.
    pub nodes: u64,
    /// Concurrent clients.
    pub clients: usize,
    /// How long the clients write.
    pub secs: f64,
    /// Stop after this many writes were started, if sooner (0: no limit).
    pub max_writes: u64,
    /// Bytes of each value.
    pub value_bytes: usize,
    /// Small storage files (tests: a store that preallocates its files opens faster).
    pub small: bool,
}

/// What one cell measured.
#[derive(Clone, Debug, PartialEq)]
pub struct CellResult {
    /// The store's name.
    pub store: String,
    /// Concurrent clients.
    pub clients: usize,
    /// Writes acknowledged (committed on a majority and applied on the leader).
    pub ops: u64,
    /// Writes that failed.
    pub errors: u64,
    /// Wall time of the writing.
    pub secs: f64,
    /// Median latency of an acknowledged write, µs.
    pub p50_us: u64,
    /// 99th percentile, µs.
    pub p99_us: u64,
    /// Entries appended over the cell (every node applied them before it ended).
    pub entries: u64,
    /// Per node (leader first): Raft-log `fdatasync`s over the cell, if the store counts them.
    pub fsyncs: Option<Vec<u64>>,
}

impl CellResult {
    /// Acknowledged writes per second.
    pub fn per_sec(&self) -> f64 {
        self.ops as f64 / self.secs.max(1e-9)
    }

    /// One line a parent process reads back ([`CellResult::parse`]).
    pub fn to_line(&self) -> String {
        let fsyncs = match &self.fsyncs {
            None => "-".to_string(),
            Some(v) => v.iter().map(u64::to_string).collect::<Vec<_>>().join(","),
        };
        format!(
            "cell store={} clients={} ops={} errors={} secs={:.6} p50_us={} p99_us={} entries={} fsyncs={}",
            self.store,
            self.clients,
            self.ops,
            self.errors,
            self.secs,
            self.p50_us,
            self.p99_us,
            self.entries,
            fsyncs
        )
    }

    /// Reads a line written by [`CellResult::to_line`]; `None` if it is not one.
    pub fn parse(line: &str) -> Option<CellResult> {
        let rest = line.trim().strip_prefix("cell ")?;
        let mut kv = BTreeMap::new();
        for part in rest.split_whitespace() {
            let (k, v) = part.split_once('=')?;
            kv.insert(k, v);
        }
        let num = |k: &str| kv.get(k)?.parse::<u64>().ok();
        let fsyncs = match *kv.get("fsyncs")? {
            "-" => None,
            s => Some(
                s.split(',')
                    .map(|x| x.parse::<u64>().ok())
                    .collect::<Option<Vec<_>>>()?,
            ),
        };
        Some(CellResult {
            store: kv.get("store")?.to_string(),
            clients: num("clients")? as usize,
            ops: num("ops")?,
            errors: num("errors")?,
            secs: kv.get("secs")?.parse().ok()?,
            p50_us: num("p50_us")?,
            p99_us: num("p99_us")?,
            entries: num("entries")?,
            fsyncs,
        })
    }
}

/// The value of write `i`: `bytes` long, unique per write.
pub fn value(bytes: usize, i: u64) -> String {
    let mut s = format!("{i:016x}");
    while s.len() < bytes {
        s.push('v');
    }
    s.truncate(bytes);
    s
}

/// openraft's config for every store: silt-server's timing, and no snapshot during a cell
/// (building one is not what is measured).
pub fn raft_config() -> openraft::Config {
    openraft::Config {
        cluster_name: "compare".into(),
        heartbeat_interval: 50,
        election_timeout_min: 300,
        election_timeout_max: 600,
        snapshot_policy: SnapshotPolicy::Never,
        ..Default::default()
    }
}

fn hist() -> Histogram<u64> {
    Histogram::<u64>::new(3).unwrap_or_else(|_| unreachable!("3 significant figures are valid"))
}

/// Waits until `f` holds of node `raft`'s metrics, or panics after `timeout`.
async fn wait_for<C: RaftTypeConfig>(
    raft: &Raft<C>,
    timeout: Duration,
    what: &str,
    f: impl Fn(&openraft::RaftMetrics<C::NodeId, C::Node>) -> bool,
) {
    let deadline = Instant::now() + timeout;
    let mut rx = raft.metrics();
    loop {
        if f(&rx.borrow_and_update()) {
            return;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "timed out waiting for {what}");
        let _ = tokio::time::timeout(left.min(Duration::from_millis(100)), rx.changed()).await;
    }
}

/// Runs one cell: a fresh `spec.nodes`-node cluster of store `S` (its data under `dir`,
/// which must exist), node 1 elected by initializing it, `spec.clients` clients writing
/// through node 1 for `spec.secs` (or `spec.max_writes` writes), then every node caught up
/// and shut down.
///
/// # Panics
///
/// If the cluster does not elect node 1 or catch up within 30 s.
pub async fn run_cell<S: Store>(dir: &Path, spec: &CellSpec) -> CellResult
where
    <S::C as RaftTypeConfig>::SnapshotData:
        tokio::io::AsyncRead + tokio::io::AsyncWrite + tokio::io::AsyncSeek + Unpin,
{
    let config = Arc::new(
        raft_config()
            .validate()
            .unwrap_or_else(|e| panic!("openraft config: {e}")),
    );
    let router = Arc::new(Router::<S::C> {
        nodes: Mutex::new(BTreeMap::new()),
    });
    let mut probes = Vec::new();
    let mut rafts = Vec::new();
    for id in 1..=spec.nodes {
        let node_dir = dir.join(format!("node-{id}"));
        std::fs::create_dir_all(&node_dir)
            .unwrap_or_else(|e| panic!("{}: {e}", node_dir.display()));
        let (log, sm, probe) = S::open(id, node_dir, spec.small).await;
        let net = Network {
            router: router.clone(),
        };
        let raft = Raft::new(id, config.clone(), net, log, sm)
            .await
            .unwrap_or_else(|e| panic!("node {id}: {e}"));
        router
            .nodes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, raft.clone());
        probes.push(probe);
        rafts.push(raft);
    }
    let members: BTreeMap<NodeId, _> = (1..=spec.nodes).map(|id| (id, S::node(id))).collect();
    let leader = rafts[0].clone();
    leader
        .initialize(members)
        .await
        .unwrap_or_else(|e| panic!("initialize: {e}"));
    let wait = Duration::from_secs(30);
    wait_for(&leader, wait, "node 1 to lead", |m| {
        m.current_leader == Some(1) && m.last_applied.is_some()
    })
    .await;
    let start_index = leader
        .metrics()
        .borrow()
        .last_applied
        .map_or(0, |l| l.index);
    for r in &rafts {
        wait_for(r, wait, "the initial membership everywhere", |m| {
            m.last_applied.map_or(0, |l| l.index) >= start_index
        })
        .await;
    }
    let before: Vec<Option<StorageCounters>> = probes.iter().map(|p| p()).collect();

    let stop = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicU64::new(0));
    let max = if spec.max_writes == 0 {
        u64::MAX
    } else {
        spec.max_writes
    };
    let t = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..spec.clients {
        let (raft, stop, started) = (leader.clone(), stop.clone(), started.clone());
        let value_bytes = spec.value_bytes;
        tasks.push(tokio::spawn(async move {
            let mut h = hist();
            let mut errors = 0u64;
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) && started.fetch_add(1, Ordering::Relaxed) < max {
                i += 1;
                let req = S::request(c, i, value(value_bytes, i));
                let s = Instant::now();
                match raft.client_write(req).await {
                    Ok(_) => {
                        let _ = h.record(s.elapsed().as_micros() as u64);
                    }
                    Err(_) => errors += 1,
                }
            }
            (h, errors)
        }));
    }
    let secs = Duration::from_secs_f64(spec.secs);
    while t.elapsed() < secs && started.load(Ordering::Relaxed) < max {
        tokio::time::sleep(Duration::from_millis(10).min(secs)).await;
    }
    stop.store(true, Ordering::Relaxed);
    let mut all = hist();
    let mut errors = 0;
    for task in tasks {
        let (h, e) = task
            .await
            .unwrap_or_else(|e| panic!("a client task failed: {e}"));
        let _ = all.add(h);
        errors += e;
    }
    let elapsed = t.elapsed().as_secs_f64();

    // The leader's last entry (its last_applied may lag its answers by an update).
    let end_index = leader.metrics().borrow().last_log_index.unwrap_or(0);
    for r in &rafts {
        wait_for(r, wait, "every node to apply the last entry", |m| {
            m.last_applied.map_or(0, |l| l.index) >= end_index
        })
        .await;
    }
    let after: Vec<Option<StorageCounters>> = probes.iter().map(|p| p()).collect();
    let fsyncs = before
        .iter()
        .zip(&after)
        .map(|(b, a)| match (b, a) {
            (Some(b), Some(a)) => Some(a.log_fsyncs.saturating_sub(b.log_fsyncs)),
            _ => None,
        })
        .collect::<Option<Vec<u64>>>();
    for r in &rafts {
        let _ = r.shutdown().await;
    }
    router
        .nodes
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clear();
    CellResult {
        store: S::NAME.to_string(),
        clients: spec.clients,
        ops: all.len(),
        errors,
        secs: elapsed,
        p50_us: all.value_at_quantile(0.5),
        p99_us: all.value_at_quantile(0.99),
        entries: end_index.saturating_sub(start_index),
        fsyncs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_line_reads_back() {
        let mut r = CellResult {
            store: "x".into(),
            clients: 8,
            ops: 100,
            errors: 1,
            secs: 1.5,
            p50_us: 10,
            p99_us: 20,
            entries: 99,
            fsyncs: Some(vec![3, 4, 5]),
        };
        assert_eq!(CellResult::parse(&r.to_line()), Some(r.clone()));
        r.fsyncs = None;
        assert_eq!(CellResult::parse(&r.to_line()), Some(r.clone()));
        assert_eq!(CellResult::parse("silt-raft listening"), None);
    }
}
