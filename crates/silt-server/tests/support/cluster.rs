//! A cluster of real `silt-server` processes on loopback for the tests: start, kill -9,
//! restart on the same port, pause (SIGSTOP) and resume (SIGCONT), wait for a leader and
//! for every node's state machine to converge. Ports are picked by the OS (port 0) at the
//! first start and reused on restarts; nothing depends on a fixed port being free.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use silt_server::client::Client;
use silt_server::metrics::Metrics;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// One node process.
pub struct Node {
    pub id: u64,
    pub dir: PathBuf,
    pub addr: String,
    child: Option<Child>,
    pub paused: bool,
}

/// A cluster of node processes in one temporary directory.
pub struct Cluster {
    pub nodes: Vec<Node>,
    pub client: Client,
    args: Vec<String>,
    pub tmp: tempfile::TempDir,
}

impl Node {
    /// The process id, while running.
    pub fn pid(&self) -> Option<i32> {
        self.child.as_ref().and_then(|c| c.id()).map(|p| p as i32)
    }

    /// Whether the process runs (paused or not).
    pub fn running(&self) -> bool {
        self.child.is_some()
    }
}

async fn spawn(
    id: u64,
    dir: &PathBuf,
    listen: &str,
    args: &[String],
) -> Result<(Child, String), String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let stderr = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("stderr.log"))
        .map_err(|e| e.to_string())?;
    let mut child = Command::new(env!("CARGO_BIN_EXE_silt-server"))
        .arg("--id")
        .arg(id.to_string())
        .arg("--listen")
        .arg(listen)
        .arg("--dir")
        .arg(dir.join("data"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::from(stderr))
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| e.to_string())?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .map_err(|_| format!("node {id} did not start in 60 s"))?
        .map_err(|e| e.to_string())?
        .ok_or_else(|| {
            format!(
                "node {id} exited at start; see {}",
                dir.join("stderr.log").display()
            )
        })?;
    let addr = line
        .split("listening on ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .ok_or_else(|| format!("unexpected first line {line:?}"))?
        .to_string();
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok((child, addr))
}

impl Cluster {
    /// Starts `n` nodes (ids 1..=n) with extra `args`, initializes them as one cluster and
    /// waits for a leader.
    pub async fn start(n: u64, args: &[&str]) -> Cluster {
        let tmp = tempfile::tempdir().unwrap();
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let mut nodes = Vec::new();
        for id in 1..=n {
            let dir = tmp.path().join(format!("n{id}"));
            let (child, addr) = spawn(id, &dir, "127.0.0.1:0", &args).await.unwrap();
            nodes.push(Node {
                id,
                dir,
                addr,
                child: Some(child),
                paused: false,
            });
        }
        let addrs: Vec<String> = nodes.iter().map(|n| n.addr.clone()).collect();
        let client = Client::new(addrs, Duration::from_secs(5));
        let members: BTreeMap<u64, String> = nodes.iter().map(|n| (n.id, n.addr.clone())).collect();
        client.init(&nodes[0].addr, members).await.unwrap();
        let c = Cluster {
            nodes,
            client,
            args,
            tmp,
        };
        c.wait_leader(Duration::from_secs(30)).await;
        c
    }

    /// Starts one more node (id `id`) that is not a member yet; returns its index.
    pub async fn spawn_extra(&mut self, id: u64) -> usize {
        let dir = self.tmp.path().join(format!("n{id}"));
        let (child, addr) = spawn(id, &dir, "127.0.0.1:0", &self.args).await.unwrap();
        self.nodes.push(Node {
            id,
            dir,
            addr,
            child: Some(child),
            paused: false,
        });
        self.nodes.len() - 1
    }

    /// Addresses of every node.
    pub fn addrs(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.addr.clone()).collect()
    }

    /// kill -9 node `i`.
    pub async fn kill(&mut self, i: usize) {
        let n = &mut self.nodes[i];
        if let Some(mut c) = n.child.take() {
            let _ = c.start_kill();
            let _ = c.wait().await;
        }
        n.paused = false;
    }

    /// Restarts node `i` on its address.
    pub async fn restart(&mut self, i: usize) {
        assert!(self.nodes[i].child.is_none(), "node {i} is running");
        let (id, dir, addr) = (
            self.nodes[i].id,
            self.nodes[i].dir.clone(),
            self.nodes[i].addr.clone(),
        );
        // The port was ours a moment ago; a bind can still race a connection in TIME_WAIT.
        let mut tries = 0;
        let child = loop {
            match spawn(id, &dir, &addr, &self.args).await {
                Ok((c, a)) => {
                    assert_eq!(a, addr);
                    break c;
                }
                Err(e) if tries < 20 => {
                    tries += 1;
                    eprintln!("restart of node {id}: {e}; retrying");
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Err(e) => panic!("restart of node {id}: {e}"),
            }
        };
        self.nodes[i].child = Some(child);
    }

    /// SIGSTOP node `i`.
    pub fn pause(&mut self, i: usize) {
        if let Some(pid) = self.nodes[i].pid() {
            // SAFETY: kill(2) on a child process id we own.
            unsafe { libc::kill(pid, libc::SIGSTOP) };
            self.nodes[i].paused = true;
        }
    }

    /// SIGCONT node `i`.
    pub fn resume(&mut self, i: usize) {
        if let Some(pid) = self.nodes[i].pid() {
            // SAFETY: kill(2) on a child process id we own.
            unsafe { libc::kill(pid, libc::SIGCONT) };
        }
        self.nodes[i].paused = false;
    }

    /// Metrics of node `i`, if it answers.
    pub async fn metrics(&self, i: usize) -> Option<Metrics> {
        if !self.nodes[i].running() || self.nodes[i].paused {
            return None;
        }
        self.client.metrics(&self.nodes[i].addr).await.ok()
    }

    /// The index of the node that is leader now (highest term wins), if any answers so.
    pub async fn leader(&self) -> Option<usize> {
        let mut best: Option<(u64, usize)> = None;
        for i in 0..self.nodes.len() {
            if let Some(m) = self.metrics(i).await {
                if m.state == "Leader" && best.is_none_or(|(t, _)| m.term > t) {
                    best = Some((m.term, i));
                }
            }
        }
        best.map(|(_, i)| i)
    }

    /// Waits for a leader; returns its index.
    pub async fn wait_leader(&self, timeout: Duration) -> usize {
        let end = Instant::now() + timeout;
        loop {
            if let Some(i) = self.leader().await {
                self.client.set_leader_hint(&self.nodes[i].addr);
                return i;
            }
            assert!(Instant::now() < end, "no leader after {timeout:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until the nodes at `idx` have applied the same last entry and their state
    /// machines have the same digest; returns the digest's key count.
    pub async fn wait_converged(&self, idx: &[usize], timeout: Duration) -> u64 {
        let end = Instant::now() + timeout;
        let mut last = String::new();
        loop {
            let mut digests = Vec::new();
            for &i in idx {
                match self.client.digest(&self.nodes[i].addr).await {
                    Ok(d) => digests.push(d),
                    Err(e) => last = format!("node {}: {e}", self.nodes[i].id),
                }
            }
            if digests.len() == idx.len()
                && digests.windows(2).all(|w| w[0] == w[1])
                && digests[0].last_applied.is_some()
            {
                return digests[0].keys;
            }
            if digests.len() == idx.len() {
                last = format!("{digests:?}");
            }
            assert!(
                Instant::now() < end,
                "no convergence after {timeout:?}: {last}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}
