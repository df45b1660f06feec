//! `silt-raft-compare`: replicated writes on a 3-node in-process cluster, silt-raft's
//! storage beside openraft's own example store (`openraft-memstore`), under one harness
//! (`silt_raft_compare::harness`). Each cell runs in a fresh process: `cell` runs a
//! silt-raft one here, the `silt-raft-memstore` binary (built from `memstore/`) a memstore
//! one. `writes` runs them all and prints the tables of BENCHMARKS.md.

use std::path::PathBuf;
use std::process::Command;

use clap::{Parser, Subcommand};
use silt_raft_compare::cli::CellArgs;
use silt_raft_compare::harness::CellResult;
use silt_raft_compare::silt::SiltRaft;

#[derive(Parser)]
#[command(name = "silt-raft-compare", about)]
struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// One silt-raft cell in this process; prints one `cell ...` line.
    Cell(CellArgs),
    /// Every store at every client count, each cell in a fresh process; prints the tables.
    Writes {
        /// Where the nodes keep their data (a fresh subdirectory per cell).
        #[arg(long, default_value = "/tmp/silt-raft-compare")]
        dir: PathBuf,
        /// Client counts.
        #[arg(long, value_delimiter = ',', default_value = "1,8,64")]
        clients: Vec<usize>,
        /// Seconds per cell.
        #[arg(long, default_value_t = 10.0)]
        secs: f64,
        /// Value size.
        #[arg(long, default_value_t = 100)]
        value_bytes: usize,
        /// Rounds (each round runs every cell once, stores alternating).
        #[arg(long, default_value_t = 1)]
        rounds: usize,
        /// The `silt-raft-memstore` binary (default: beside this one).
        #[arg(long)]
        memstore_bin: Option<PathBuf>,
        /// Run only silt-raft (no memstore binary needed).
        #[arg(long)]
        silt_only: bool,
    },
}

fn main() {
    match Args::parse().cmd {
        Cmd::Cell(args) => println!(
            "{}",
            silt_raft_compare::cli::run::<SiltRaft>(&args).to_line()
        ),
        Cmd::Writes {
            dir,
            clients,
            secs,
            value_bytes,
            rounds,
            memstore_bin,
            silt_only,
        } => {
            let me = std::env::current_exe().unwrap_or_else(|e| panic!("current exe: {e}"));
            let memstore = memstore_bin.unwrap_or_else(|| me.with_file_name("silt-raft-memstore"));
            if !silt_only && !memstore.exists() {
                eprintln!(
                    "{} not found: build it with `cargo build --release --manifest-path \
                     crates/silt-raft-compare/memstore/Cargo.toml --target-dir target` \
                     (or pass --memstore-bin, or --silt-only)",
                    memstore.display()
                );
                std::process::exit(2);
            }
            let mut results = Vec::new();
            for round in 0..rounds {
                for &c in &clients {
                    let mut order: Vec<(&str, Command)> = Vec::new();
                    if !silt_only {
                        order.push(("openraft-memstore", Command::new(&memstore)));
                    }
                    let mut cmd = Command::new(&me);
                    cmd.arg("cell");
                    order.push(("silt-raft", cmd));
                    // Alternate which store goes first, so neither always runs on a
                    // machine the other just warmed (or loaded).
                    if round % 2 == 1 {
                        order.reverse();
                    }
                    for (name, mut cmd) in order {
                        let args = CellArgs {
                            dir: dir.join(format!("{name}-{c}")),
                            clients: c,
                            secs,
                            max_writes: 0,
                            value_bytes,
                            nodes: 3,
                            small: false,
                        };
                        let r = run_child(&mut cmd, &args);
                        eprintln!("round {round}: {}", r.to_line());
                        results.push((round, r));
                    }
                }
            }
            for round in 0..rounds {
                let cells: Vec<&CellResult> = results
                    .iter()
                    .filter(|(r, _)| *r == round)
                    .map(|(_, c)| c)
                    .collect();
                println!("\nround {round}\n");
                print_tables(&cells, &clients);
            }
        }
    }
}

fn run_child(cmd: &mut Command, args: &CellArgs) -> CellResult {
    let out = cmd
        .args(args.to_args())
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        panic!(
            "{cmd:?} failed ({}):\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    stdout
        .lines()
        .find_map(CellResult::parse)
        .unwrap_or_else(|| panic!("{cmd:?} printed no result:\n{stdout}"))
}

fn ms(us: u64) -> String {
    format!("{:.2}", us as f64 / 1000.0)
}

fn find<'a>(cells: &[&'a CellResult], store: &str, c: usize) -> Option<&'a CellResult> {
    cells
        .iter()
        .copied()
        .find(|r| r.store == store && r.clients == c)
}

fn print_tables(cells: &[&CellResult], clients: &[usize]) {
    println!(
        "| clients | openraft-memstore writes/s | p50 ms | p99 ms | silt-raft writes/s | p50 ms | p99 ms | memstore / silt-raft |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for &c in clients {
        let m = find(cells, "openraft-memstore", c);
        let s = find(cells, "silt-raft", c);
        let col = |r: Option<&CellResult>| match r {
            Some(r) => format!("{:.0} | {} | {}", r.per_sec(), ms(r.p50_us), ms(r.p99_us)),
            None => "- | - | -".into(),
        };
        let ratio = match (m, s) {
            (Some(m), Some(s)) if s.ops > 0 => format!("{:.1}x", m.per_sec() / s.per_sec()),
            _ => "-".into(),
        };
        println!("| {c} | {} | {} | {ratio} |", col(m), col(s));
    }
    println!();
    println!(
        "| clients | store | writes | errors | entries | writes / entry | log fsyncs / entry (leader; followers) |"
    );
    println!("|---|---|---|---|---|---|---|");
    for &c in clients {
        for store in ["openraft-memstore", "silt-raft"] {
            if let Some(r) = find(cells, store, c) {
                let per = |f: u64| format!("{:.2}", f as f64 / r.entries.max(1) as f64);
                let fs = match &r.fsyncs {
                    None => "none (in memory)".to_string(),
                    Some(v) => {
                        let rest: Vec<String> = v[1..].iter().map(|&f| per(f)).collect();
                        format!("{}; {}", per(v[0]), rest.join(", "))
                    }
                };
                println!(
                    "| {c} | {store} | {} | {} | {} | {:.2} | {fs} |",
                    r.ops,
                    r.errors,
                    r.entries,
                    r.ops as f64 / r.entries.max(1) as f64
                );
            }
        }
    }
}
