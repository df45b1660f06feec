//! `silt-raft-memstore`: one cell of openraft-memstore in silt-raft-compare's harness;
//! prints one `cell ...` line (`silt-raft-compare writes` runs it).

use clap::Parser;
use silt_raft_compare::cli::CellArgs;
use silt_raft_memstore::Memstore;

#[derive(Parser)]
#[command(name = "silt-raft-memstore", about)]
struct Args {
    #[command(flatten)]
    cell: CellArgs,
}

fn main() {
    let args = Args::parse();
    println!(
        "{}",
        silt_raft_compare::cli::run::<Memstore>(&args.cell).to_line()
    );
}
