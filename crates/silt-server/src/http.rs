//! The HTTP/JSON routes of a node (axum): the client API under `/kv`, cluster admin under
//! `/admin`, and openraft's RPCs under `/raft` (`docs/server.md` lists them).

use std::collections::BTreeSet;

use axum::extract::{DefaultBodyLimit, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use openraft::error::{CheckIsLeaderError, ClientWriteError, RaftError};
use openraft::raft::{AppendEntriesRequest, VoteRequest};
use openraft::BasicNode;
use serde::Serialize;
use silt_raft::{NodeId, Request, TypeConfig};

use crate::app::App;
use crate::metrics::metrics;
use crate::proposer::WriteError;
use crate::wire::*;

/// The router of a node.
pub fn router(app: App) -> Router {
    Router::new()
        .route("/kv/put", post(put))
        .route("/kv/delete", post(delete))
        .route("/kv/batch", post(batch))
        .route("/kv/get", get(get_key))
        .route("/kv/scan", get(scan))
        .route("/admin/init", post(init))
        .route("/admin/add-learner", post(add_learner))
        .route("/admin/change-membership", post(change_membership))
        .route("/admin/metrics", get(metrics_handler))
        .route("/admin/digest", get(digest))
        .route("/admin/snapshot", post(trigger_snapshot))
        .route("/raft/append", post(raft_append))
        .route("/raft/vote", post(raft_vote))
        .route("/raft/snapshot", post(raft_snapshot))
        // Entries and snapshot chunks are larger than axum's default 2 MiB.
        .layer(DefaultBodyLimit::max(128 << 20))
        .with_state(app)
}

fn error(status: StatusCode, kind: &str, message: String) -> Response {
    (
        status,
        Json(ErrorReply {
            kind: kind.into(),
            message,
            leader_id: None,
            leader_addr: None,
        }),
    )
        .into_response()
}

fn leader_addr(app: &App, leader: Option<NodeId>) -> Option<String> {
    let m = app.raft.metrics().borrow().membership_config.clone();
    leader.and_then(|l| m.membership().get_node(&l).map(|n| n.addr.clone()))
}

fn not_leader(app: &App, leader: Option<NodeId>) -> Response {
    (
        StatusCode::MISDIRECTED_REQUEST,
        Json(ErrorReply {
            kind: "not_leader".into(),
            message: format!("node {} is not the leader", app.id),
            leader_id: leader,
            leader_addr: leader_addr(app, leader),
        }),
    )
        .into_response()
}

async fn write(app: App, req: Request) -> Response {
    if let Err(e) = req.validate(app.log.max_command_bytes()) {
        return error(StatusCode::BAD_REQUEST, "bad_request", e.to_string());
    }
    // Checked before proposing, so that a `not_leader` answer means "never proposed".
    let leader = app.raft.current_leader().await;
    if leader != Some(app.id) {
        return not_leader(&app, leader);
    }
    match app.proposer.write(req).await {
        Ok(index) => Json(WriteReply { index }).into_response(),
        Err(WriteError::NotLeader(l)) => not_leader(&app, l),
        Err(WriteError::Indeterminate(m)) => {
            error(StatusCode::SERVICE_UNAVAILABLE, "indeterminate", m)
        }
    }
}

async fn put(State(app): State<App>, Json(b): Json<PutBody>) -> Response {
    write(
        app,
        Request::Put {
            key: b.key,
            value: b.value,
        },
    )
    .await
}

async fn delete(State(app): State<App>, Json(b): Json<DeleteBody>) -> Response {
    write(app, Request::Delete { key: b.key }).await
}

async fn batch(State(app): State<App>, Json(b): Json<BatchBody>) -> Response {
    write(app, Request::Batch { ops: b.ops }).await
}

/// Confirms leadership and waits until this node has applied everything committed when the
/// read arrived (openraft's read index), unless the read is `stale`.
async fn read_barrier(app: &App, stale: bool) -> Result<(), Response> {
    if stale {
        return Ok(());
    }
    match app.raft.ensure_linearizable().await {
        Ok(_) => Ok(()),
        Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f))) => {
            Err(not_leader(app, f.leader_id))
        }
        Err(e) => Err(error(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            e.to_string(),
        )),
    }
}

async fn get_key(State(app): State<App>, Query(q): Query<GetQuery>) -> Response {
    if let Err(r) = read_barrier(&app, q.stale).await {
        return r;
    }
    match app.sm.get(&q.key) {
        Ok(value) => Json(GetReply { value }).into_response(),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, "storage", e.to_string()),
    }
}

async fn scan(State(app): State<App>, Query(q): Query<ScanQuery>) -> Response {
    if let Err(r) = read_barrier(&app, q.stale).await {
        return r;
    }
    let limit = q.limit.unwrap_or(1000).min(100_000);
    let sm = app.sm.clone();
    let r = tokio::task::spawn_blocking(move || sm.scan(&q.start, q.end.as_deref(), limit)).await;
    match r {
        Ok(Ok(pairs)) => Json(ScanReply { pairs }).into_response(),
        Ok(Err(e)) => error(StatusCode::INTERNAL_SERVER_ERROR, "storage", e.to_string()),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, "storage", e.to_string()),
    }
}

fn admin_result<T: Serialize, E: std::fmt::Display>(r: Result<T, E>) -> Response {
    match r {
        Ok(v) => Json(v).into_response(),
        Err(e) => error(StatusCode::BAD_REQUEST, "admin", e.to_string()),
    }
}

async fn init(State(app): State<App>, Json(b): Json<InitBody>) -> Response {
    let mut nodes = nodes(&b);
    if nodes.is_empty() {
        nodes.insert(app.id, BasicNode::new(&app.addr));
    }
    admin_result(app.raft.initialize(nodes).await)
}

fn membership_result(
    app: &App,
    r: Result<
        openraft::raft::ClientWriteResponse<TypeConfig>,
        RaftError<NodeId, ClientWriteError<NodeId, BasicNode>>,
    >,
) -> Response {
    match r {
        Ok(resp) => Json(serde_json::json!({ "index": resp.log_id.index })).into_response(),
        Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))) => {
            not_leader(app, f.leader_id)
        }
        Err(e) => error(StatusCode::BAD_REQUEST, "admin", e.to_string()),
    }
}

async fn add_learner(State(app): State<App>, Json(b): Json<AddLearnerBody>) -> Response {
    let r = app
        .raft
        .add_learner(b.id, BasicNode::new(&b.addr), b.blocking)
        .await;
    membership_result(&app, r)
}

async fn change_membership(
    State(app): State<App>,
    Json(b): Json<ChangeMembershipBody>,
) -> Response {
    let members: BTreeSet<NodeId> = b.members.into_iter().collect();
    let r = app.raft.change_membership(members, b.retain).await;
    membership_result(&app, r)
}

async fn metrics_handler(State(app): State<App>) -> Response {
    Json(metrics(&app)).into_response()
}

async fn trigger_snapshot(State(app): State<App>) -> Response {
    admin_result(app.raft.trigger().snapshot().await)
}

async fn digest(State(app): State<App>) -> Response {
    let sm = app.sm.clone();
    match tokio::task::spawn_blocking(move || sm.digest()).await {
        Ok(r) => admin_result(r),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, "storage", e.to_string()),
    }
}

async fn raft_append(
    State(app): State<App>,
    Json(req): Json<AppendEntriesRequest<TypeConfig>>,
) -> Response {
    Json(app.raft.append_entries(req).await).into_response()
}

async fn raft_vote(State(app): State<App>, Json(req): Json<VoteRequest<NodeId>>) -> Response {
    Json(app.raft.vote(req).await).into_response()
}

async fn raft_snapshot(State(app): State<App>, Json(chunk): Json<SnapshotChunk>) -> Response {
    match chunk.into_request() {
        Ok(req) => Json(app.raft.install_snapshot(req).await).into_response(),
        Err(e) => error(StatusCode::BAD_REQUEST, "bad_request", e.to_string()),
    }
}
