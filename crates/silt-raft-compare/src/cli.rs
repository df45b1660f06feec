//! One cell in its own process: the command line both binaries share
//! (`silt-raft-compare cell`, `silt-raft-memstore`), and the line they print.

use std::path::PathBuf;

use clap::Args;

use crate::harness::{run_cell, CellResult, CellSpec, Store};

/// One cell's parameters.
#[derive(Args, Clone, Debug)]
pub struct CellArgs {
    /// Where the nodes keep their data (emptied first).
    #[arg(long)]
    pub dir: PathBuf,
    /// Concurrent clients.
    #[arg(long, default_value_t = 8)]
    pub clients: usize,
    /// Seconds of writing.
    #[arg(long, default_value_t = 10.0)]
    pub secs: f64,
    /// Stop after this many writes, if sooner (0: no limit).
    #[arg(long, default_value_t = 0)]
    pub max_writes: u64,
    /// Value size.
    #[arg(long, default_value_t = 100)]
    pub value_bytes: usize,
    /// Nodes in the cluster.
    #[arg(long, default_value_t = 3)]
    pub nodes: u64,
    /// Small storage files (tests).
    #[arg(long)]
    pub small: bool,
}

impl CellArgs {
    /// The cell these arguments describe.
    pub fn spec(&self) -> CellSpec {
        CellSpec {
            nodes: self.nodes,
            clients: self.clients,
            secs: self.secs,
            max_writes: self.max_writes,
            value_bytes: self.value_bytes,
            small: self.small,
        }
    }

    /// The arguments again, for a child process.
    pub fn to_args(&self) -> Vec<String> {
        let mut v = vec![
            "--dir".to_string(),
            self.dir.display().to_string(),
            "--clients".into(),
            self.clients.to_string(),
            "--secs".into(),
            self.secs.to_string(),
            "--max-writes".into(),
            self.max_writes.to_string(),
            "--value-bytes".into(),
            self.value_bytes.to_string(),
            "--nodes".into(),
            self.nodes.to_string(),
        ];
        if self.small {
            v.push("--small".into());
        }
        v
    }
}

/// Runs one cell of store `S` on a fresh multi-threaded tokio runtime (one worker per
/// core, as `#[tokio::main]`), in `args.dir` emptied first.
///
/// # Panics
///
/// If the directory cannot be made, or as [`run_cell`].
pub fn run<S: Store>(args: &CellArgs) -> CellResult
where
    <S::C as openraft::RaftTypeConfig>::SnapshotData:
        tokio::io::AsyncRead + tokio::io::AsyncWrite + tokio::io::AsyncSeek + Unpin,
{
    let _ = std::fs::remove_dir_all(&args.dir);
    std::fs::create_dir_all(&args.dir).unwrap_or_else(|e| panic!("{}: {e}", args.dir.display()));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("tokio runtime: {e}"));
    let r = rt.block_on(run_cell::<S>(&args.dir, &args.spec()));
    drop(rt);
    let _ = std::fs::remove_dir_all(&args.dir);
    r
}
