//! Node processes for the benchmark: `silt-server` binaries started from the directory of
//! this binary, on ports the OS picks, killed with SIGKILL, restarted on their port.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use silt_server::client::Client;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// One node process.
pub struct Proc {
    pub id: u64,
    pub dir: PathBuf,
    pub addr: String,
    pub child: Option<Child>,
}

/// Nodes started by the benchmark.
pub struct Procs {
    pub nodes: Vec<Proc>,
    pub client: Client,
    args: Vec<String>,
}

fn server_binary() -> PathBuf {
    let me = std::env::current_exe().unwrap_or_default();
    me.parent().unwrap_or(Path::new(".")).join("silt-server")
}

/// Starts `silt-server --id id` in `dir`; returns it and its address once it listens, and
/// how long that took.
pub async fn spawn(
    id: u64,
    dir: &Path,
    listen: &str,
    args: &[String],
) -> Result<(Child, String, Duration), String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let stderr = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("stderr.log"))
        .map_err(|e| e.to_string())?;
    let t = Instant::now();
    let mut child = Command::new(server_binary())
        .args(["--id", &id.to_string(), "--listen", listen])
        .arg("--dir")
        .arg(dir.join("data"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::from(stderr))
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("{}: {e}", server_binary().display()))?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let line = tokio::time::timeout(Duration::from_secs(600), lines.next_line())
        .await
        .map_err(|_| format!("node {id} did not start"))?
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("node {id} exited; see {}/stderr.log", dir.display()))?;
    let took = t.elapsed();
    let addr = line
        .split("listening on ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .ok_or_else(|| format!("unexpected line {line:?}"))?
        .to_string();
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok((child, addr, took))
}

impl Procs {
    /// Starts `n` nodes under `root` and makes them one cluster.
    pub async fn start(root: &Path, n: u64, args: &[String]) -> Result<Procs, String> {
        let mut nodes = Vec::new();
        for id in 1..=n {
            let dir = root.join(format!("n{id}"));
            let (child, addr, _) = spawn(id, &dir, "127.0.0.1:0", args).await?;
            nodes.push(Proc {
                id,
                dir,
                addr,
                child: Some(child),
            });
        }
        let client = Client::new(
            nodes.iter().map(|n| n.addr.clone()).collect(),
            Duration::from_secs(30),
        );
        let members: BTreeMap<u64, String> = nodes.iter().map(|n| (n.id, n.addr.clone())).collect();
        client.init(&nodes[0].addr, members).await?;
        let p = Procs {
            nodes,
            client,
            args: args.to_vec(),
        };
        p.wait_leader().await?;
        Ok(p)
    }

    /// Starts a node that is not a member yet.
    pub async fn spawn_extra(&mut self, root: &Path, id: u64) -> Result<usize, String> {
        let dir = root.join(format!("n{id}"));
        let (child, addr, _) = spawn(id, &dir, "127.0.0.1:0", &self.args).await?;
        self.nodes.push(Proc {
            id,
            dir,
            addr,
            child: Some(child),
        });
        Ok(self.nodes.len() - 1)
    }

    /// The leader's index.
    pub async fn wait_leader(&self) -> Result<usize, String> {
        let end = Instant::now() + Duration::from_secs(60);
        while Instant::now() < end {
            for (i, n) in self.nodes.iter().enumerate() {
                if n.child.is_none() {
                    continue;
                }
                if let Ok(m) = self.client.metrics(&n.addr).await {
                    if m.state == "Leader" {
                        self.client.set_leader_hint(&n.addr);
                        return Ok(i);
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err("no leader".into())
    }

    /// kill -9 node `i`.
    pub async fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.nodes[i].child.take() {
            let _ = c.start_kill();
            let _ = c.wait().await;
        }
    }

    /// Restarts node `i` on its address; returns how long until it listened.
    pub async fn restart(&mut self, i: usize) -> Result<Duration, String> {
        let (id, dir, addr) = (
            self.nodes[i].id,
            self.nodes[i].dir.clone(),
            self.nodes[i].addr.clone(),
        );
        let (child, _, took) = spawn(id, &dir, &addr, &self.args).await?;
        self.nodes[i].child = Some(child);
        Ok(took)
    }
}
