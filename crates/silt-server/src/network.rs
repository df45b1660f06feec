//! [`Network`]: openraft's `RaftNetworkFactory` over HTTP/JSON (`http_client.rs`): one
//! client per target, posting to the target's `/raft/*` endpoints (`http.rs`). A failure
//! to connect or a timeout is `Unreachable` (openraft backs off); an error the target
//! returns is a `RemoteError`.

use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;
use serde::de::DeserializeOwned;
use serde::Serialize;
use silt_raft::{NodeId, TypeConfig};

use crate::http_client::{HttpClient, HttpError};
use crate::wire::SnapshotChunk;

/// Makes a [`NetworkClient`] per target node; all share one connection pool.
#[derive(Clone)]
pub struct Network {
    http: HttpClient,
}

impl Network {
    /// A network with its own connection pool.
    pub fn new() -> Self {
        Network {
            http: HttpClient::new(),
        }
    }
}

impl Default for Network {
    fn default() -> Self {
        Network::new()
    }
}

/// Sends the Raft RPCs of one node to one target.
pub struct NetworkClient {
    http: HttpClient,
    target: NodeId,
    addr: String,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = NetworkClient;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> NetworkClient {
        NetworkClient {
            http: self.http.clone(),
            target,
            addr: node.addr.clone(),
        }
    }
}

type RpcResult<T, E> = Result<T, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>;

impl NetworkClient {
    async fn post<Req, Resp, E>(
        &self,
        path: &str,
        body: &Req,
        option: &RPCOption,
    ) -> RpcResult<Resp, E>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let path = format!("/raft/{path}");
        let (_, bytes) = self
            .http
            .post_json(&self.addr, &path, body, option.hard_ttl())
            .await
            .map_err(|e| match e {
                HttpError::Connect(_) | HttpError::Timeout => {
                    RPCError::Unreachable(Unreachable::new(&e))
                }
                HttpError::Other(_) => RPCError::Network(NetworkError::new(&e)),
            })?;
        let res: Result<Resp, RaftError<NodeId, E>> =
            serde_json::from_slice(&bytes).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        res.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<TypeConfig> for NetworkClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>, openraft::error::Infallible> {
        self.post("append", &rpc, &option).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<NodeId>, InstallSnapshotError> {
        self.post("snapshot", &SnapshotChunk::from_request(&rpc), &option)
            .await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> RpcResult<VoteResponse<NodeId>, openraft::error::Infallible> {
        self.post("vote", &rpc, &option).await
    }
}
