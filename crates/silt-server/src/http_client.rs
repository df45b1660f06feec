//! [`HttpClient`]: JSON over HTTP/1.1 to another node or a server, on hyper's pooled
//! client (`hyper-util`), with a deadline per request. Shared by openraft's network
//! (`network.rs`) and the service client (`client.rs`). hyper's own client rather than
//! `reqwest`: everything needed here is plain HTTP/1.1 on loopback, and `reqwest` brings a
//! URL parser with Unicode tables (~20 more crates to compile) for nothing.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde::Serialize;

/// Why a request got no answer.
#[derive(Debug)]
pub enum HttpError {
    /// The connection could not be made: the request was certainly not delivered.
    Connect(String),
    /// No answer before the deadline: it may have been delivered.
    Timeout,
    /// Anything else (a connection lost mid-request, a bad answer): it may have been
    /// delivered.
    Other(String),
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HttpError::Connect(m) => write!(f, "cannot connect: {m}"),
            HttpError::Timeout => write!(f, "timed out"),
            HttpError::Other(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for HttpError {}

/// A pooled HTTP/1.1 client. Cheap to clone (the pool is shared).
#[derive(Clone)]
pub struct HttpClient {
    inner: Client<HttpConnector, Full<Bytes>>,
}

impl Default for HttpClient {
    fn default() -> Self {
        HttpClient::new()
    }
}

impl HttpClient {
    /// A client with `TCP_NODELAY` (small requests; see `node.rs`) and a pool per host.
    pub fn new() -> Self {
        let mut conn = HttpConnector::new();
        conn.set_nodelay(true);
        let inner = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(64)
            .build(conn);
        HttpClient { inner }
    }

    /// Sends `method` to `http://{addr}{path_and_query}` with an optional JSON body;
    /// returns the status and the body, all within `timeout`.
    ///
    /// # Errors
    ///
    /// As [`HttpError`].
    pub async fn send(
        &self,
        method: hyper::Method,
        addr: &str,
        path_and_query: &str,
        body: Option<Vec<u8>>,
        timeout: Duration,
    ) -> Result<(u16, Bytes), HttpError> {
        let mut req = Request::builder()
            .method(method)
            .uri(format!("http://{addr}{path_and_query}"));
        if body.is_some() {
            req = req.header(hyper::header::CONTENT_TYPE, "application/json");
        }
        let req = req
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| HttpError::Other(e.to_string()))?;
        let work = async {
            let resp = self.inner.request(req).await.map_err(|e| {
                if e.is_connect() {
                    HttpError::Connect(e.to_string())
                } else {
                    HttpError::Other(e.to_string())
                }
            })?;
            let status = resp.status().as_u16();
            let body = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| HttpError::Other(e.to_string()))?
                .to_bytes();
            Ok((status, body))
        };
        tokio::time::timeout(timeout, work)
            .await
            .map_err(|_| HttpError::Timeout)?
    }

    /// `POST` of `body` as JSON.
    ///
    /// # Errors
    ///
    /// As [`HttpClient::send`], and `Other` if the body does not serialize.
    pub async fn post_json<B: Serialize>(
        &self,
        addr: &str,
        path: &str,
        body: &B,
        timeout: Duration,
    ) -> Result<(u16, Bytes), HttpError> {
        let body = serde_json::to_vec(body).map_err(|e| HttpError::Other(e.to_string()))?;
        self.send(hyper::Method::POST, addr, path, Some(body), timeout)
            .await
    }

    /// `GET` with a query string built from `query`.
    ///
    /// # Errors
    ///
    /// As [`HttpClient::send`].
    pub async fn get(
        &self,
        addr: &str,
        path: &str,
        query: &[(&str, &str)],
        timeout: Duration,
    ) -> Result<(u16, Bytes), HttpError> {
        let q = serde_urlencoded::to_string(query).map_err(|e| HttpError::Other(e.to_string()))?;
        let pq = if q.is_empty() {
            path.to_string()
        } else {
            format!("{path}?{q}")
        };
        self.send(hyper::Method::GET, addr, &pq, None, timeout)
            .await
    }
}
