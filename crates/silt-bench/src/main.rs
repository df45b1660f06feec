//! `silt-bench`: SiltDB's benchmark tool.
//!
//! Subcommands:
//!
//! * `commit`: the commit-path matrix of `silt-wal`'s strategies beside the seeds' designs
//!   and the raw `pwrite`+`fdatasync` floor.
//! * `run`: db_bench-style engine workloads (fillseq, fillrandom, readrandom, seekrandom,
//!   scan, …), the seed 000/003 workloads by name and YCSB A–F, on the engines of
//!   `engine.rs`, one child process per cell.
//! * `report DIR`: a markdown summary (silt / each peer) and SVG charts of `run` results.
//! * `suite seeds`: the seed 000/003 matrix, then its report.
//! * `suite txn`: tpcc, queue_indexed and txn_batch_sweep on every transactional engine
//!   compiled in, then the report.

mod commit;
mod engine;
mod iib;
mod output;
mod report;
mod run;
mod stats;
mod suite;
mod sysstat;
mod tpcc;

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
    /// Markdown summary and SVG charts of `run --format json` results in DIR.
    Report(report::ReportArgs),
    /// A named matrix of `run` cells and its report: `seeds` (seeds 000 and 003) or `txn`
    /// (tpcc, queue_indexed, txn_batch_sweep).
    Suite(suite::SuiteArgs),
    /// One cell of `run`, in its own process (used by `run` itself).
    #[command(hide = true)]
    Cell(run::CellArgs),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Commit(args) => commit::run(args),
        Command::Run(args) => run::run(args),
        Command::Report(args) => report::report(args),
        Command::Suite(args) => suite::suite(args),
        Command::Cell(args) => run::cell(args),
    };
    if let Err(e) = result {
        eprintln!("silt-bench: {e}");
        std::process::exit(1);
    }
}
