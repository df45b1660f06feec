//! `silt-bench`: SiltDB's benchmark tool.
//!
//! Subcommands:
//!
//! * `commit`: the commit-path matrix of `silt-wal`'s strategies beside the seeds' designs
//!   and the raw `pwrite`+`fdatasync` floor.
//! * `run`: db_bench-style engine workloads (fillseq, fillrandom, readrandom, seekrandom,
//!   scan, …) on the engines of `engine.rs`, one child process per cell.
//!
//! `report` and `suite` arrive with the benchmark issue.

mod commit;
mod engine;
mod output;
mod run;
mod sysstat;

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
    /// Engine workloads (db_bench names): engines x workloads x sync modes x threads.
    Run(run::RunArgs),
    /// One cell of `run`, in its own process (used by `run` itself).
    #[command(hide = true)]
    Cell(run::CellArgs),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Commit(args) => commit::run(args),
        Command::Run(args) => run::run(args),
        Command::Cell(args) => run::cell(args),
    };
    if let Err(e) = result {
        eprintln!("silt-bench: {e}");
        std::process::exit(1);
    }
}
