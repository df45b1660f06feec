//! `silt-bench`: SiltDB's benchmark tool.
//!
//! Today it has one subcommand, `commit`: the commit-path matrix of `silt-wal`'s strategies
//! beside the seeds' designs and the raw `pwrite`+`fdatasync` floor. Engine workloads
//! (`run`, `report`, `suite`) arrive with the engine.

mod commit;
mod output;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "silt-bench", version, about = "SiltDB benchmarks")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Commit-path matrix: strategies x sync modes x callers x record sizes.
    Commit(commit::CommitArgs),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Commit(args) => commit::run(args),
    };
    if let Err(e) = result {
        eprintln!("silt-bench: {e}");
        std::process::exit(1);
    }
}
