//! The `silt-stress` command: see `silt-stress --help` and `docs/reliability.md`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use silt_stress::modes::{self, CrashRun, Summary};

#[derive(Parser)]
#[command(
    name = "silt-stress",
    about = "Stress and crash tests of silt: kill it, cut its power, fail its I/O, and check that nothing acknowledged was lost",
    after_help = "Examples:\n  silt-stress crash --mode blackbox --cycles 1000 --dir /tmp/stress\n  silt-stress crash --mode whitebox --cycles 1000 --dir /tmp/stress --kill-odds 4\n  silt-stress power-loss --cycles 100000 --seed 7\n  silt-stress io-errors --seed 1\n\nEvery failure prints the seed and the command that replays it. Exit status: 0 no violation, 1 violations, 2 usage."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
    /// Print the summary as one JSON object.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Subcommand)]
enum Cmd {
    /// Process-crash cycles: run the workload in a child process, SIGKILL it (black-box: at
    /// a random time; white-box: at a random kill point inside the engine), reopen, verify.
    Crash {
        /// blackbox or whitebox.
        #[arg(long, default_value = "blackbox")]
        mode: String,
        /// Crash cycles.
        #[arg(long, default_value_t = 100)]
        cycles: u64,
        /// Working directory: the database goes in DIR/db, the expected state in
        /// DIR/expected (created; reused if present, so runs can continue a database).
        #[arg(long)]
        dir: PathBuf,
        /// Seed of everything random (default: from the clock, printed).
        #[arg(long)]
        seed: Option<u64>,
        /// Keys per column family.
        #[arg(long, default_value_t = 2000)]
        keys: u32,
        /// Writer threads in the child.
        #[arg(long, default_value_t = 2)]
        threads: u32,
        /// none, interval or full.
        #[arg(long, default_value = "none")]
        sync: String,
        /// Black-box: the child is killed after MIN..MAX milliseconds.
        #[arg(long, default_value = "20..200")]
        kill_after_ms: String,
        /// White-box: each kill point fires with odds 1 in N.
        #[arg(long, default_value_t = 4)]
        kill_odds: u64,
    },
    /// Simulated power losses on the crash simulator (in-process).
    PowerLoss {
        /// Power losses.
        #[arg(long, default_value_t = 1000)]
        cycles: u64,
        /// Seed (default: from the clock, printed).
        #[arg(long)]
        seed: Option<u64>,
        /// Keys per column family.
        #[arg(long, default_value_t = 200)]
        keys: u32,
    },
    /// Fail the n-th file-system call once, then persistently, for n = 1, 2, …, of a short
    /// workload; reopen and verify after each.
    IoErrors {
        /// Seed of the workload.
        #[arg(long)]
        seed: Option<u64>,
        /// Keys per column family.
        #[arg(long, default_value_t = 100)]
        keys: u32,
        /// Operations of the workload.
        #[arg(long, default_value_t = 150)]
        ops: u64,
        /// Stop at call n = MAX even if the workload makes more calls.
        #[arg(long, default_value_t = 100_000)]
        max_n: u64,
    },
    /// The child of `crash` (not for direct use).
    #[command(hide = true)]
    Run {
        #[arg(long)]
        db: PathBuf,
        #[arg(long)]
        expected: PathBuf,
        #[arg(long)]
        keys: u32,
        #[arg(long)]
        threads: u32,
        #[arg(long)]
        sync: String,
        #[arg(long)]
        seed: u64,
        #[arg(long)]
        seconds: u64,
        #[arg(long, default_value_t = 0)]
        kill_odds: u64,
    },
}

fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
}

fn report(name: &str, seed: u64, replay: String, sum: &Summary, json: bool) -> ExitCode {
    if json {
        println!("{}", sum.json(name, seed));
    } else {
        println!(
            "{name}: seed {seed}: {} cycles, {}{} writes acknowledged, {} keys verified, \
             {} violations, {:.1} s ({:.3} s per cycle)",
            sum.cycles,
            if sum.ops > 0 {
                format!("{} operations, ", sum.ops)
            } else {
                String::new()
            },
            sum.writes,
            sum.verified,
            sum.violations.len(),
            sum.seconds,
            if sum.cycles > 0 {
                sum.seconds / sum.cycles as f64
            } else {
                0.0
            }
        );
        for (p, n) in &sum.kill_points {
            println!("  kill point {p}: {n}");
        }
        if sum.prefix_losses > 0 {
            println!(
                "  power losses that dropped acknowledged unsynced writes (SyncMode::None): {}",
                sum.prefix_losses
            );
        }
        if sum.faults_injected > 0 {
            println!("  fault positions tried: {}", sum.faults_injected);
        }
    }
    if sum.violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        for v in sum.violations.iter().take(20) {
            eprintln!("violation: {v}");
        }
        eprintln!("replay: {replay}");
        ExitCode::from(1)
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("silt-stress"));
    match cli.cmd {
        Cmd::Crash {
            mode,
            cycles,
            dir,
            seed,
            keys,
            threads,
            sync,
            kill_after_ms,
            kill_odds,
        } => {
            let seed = seed.unwrap_or_else(clock_seed);
            let Some((lo, hi)) = kill_after_ms
                .split_once("..")
                .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
                .filter(|(a, b): &(u64, u64)| a <= b)
            else {
                eprintln!("--kill-after-ms takes MIN..MAX");
                return ExitCode::from(2);
            };
            if modes::sync_mode(&sync).is_none()
                || !["blackbox", "whitebox"].contains(&mode.as_str())
            {
                eprintln!("--mode is blackbox or whitebox; --sync is none, interval or full");
                return ExitCode::from(2);
            }
            if let Err(e) = std::fs::create_dir_all(&dir) {
                eprintln!("create {}: {e}", dir.display());
                return ExitCode::from(1);
            }
            let run = CrashRun {
                db: dir.join("db"),
                expected: dir.join("expected"),
                keys,
                threads,
                sync: sync.clone(),
                cycles,
                seed,
                kill_after_ms: (lo, hi),
                kill_odds: if mode == "whitebox" {
                    kill_odds.max(1)
                } else {
                    0
                },
            };
            let sum = modes::crash(&exe, &run);
            let replay = format!(
                "silt-stress crash --mode {mode} --cycles {cycles} --dir {} --seed {seed} \
                 --keys {keys} --threads {threads} --sync {sync} --kill-after-ms {kill_after_ms} \
                 --kill-odds {kill_odds} (on a copy of the directory as it was before the run)",
                dir.display()
            );
            report(&format!("crash {mode}"), seed, replay, &sum, cli.json)
        }
        Cmd::PowerLoss { cycles, seed, keys } => {
            let seed = seed.unwrap_or_else(clock_seed);
            let sum = modes::power_loss(cycles, seed, keys);
            let replay =
                format!("silt-stress power-loss --cycles {cycles} --seed {seed} --keys {keys}");
            report("power-loss", seed, replay, &sum, cli.json)
        }
        Cmd::IoErrors {
            seed,
            keys,
            ops,
            max_n,
        } => {
            let seed = seed.unwrap_or_else(clock_seed);
            let sum = modes::io_errors(seed, keys, ops, max_n);
            let replay = format!(
                "silt-stress io-errors --seed {seed} --keys {keys} --ops {ops} --max-n {max_n}"
            );
            report("io-errors", seed, replay, &sum, cli.json)
        }
        Cmd::Run {
            db,
            expected,
            keys,
            threads,
            sync,
            seed,
            seconds,
            kill_odds,
        } => {
            let run = CrashRun {
                db,
                expected,
                keys,
                threads,
                sync,
                cycles: 1,
                seed,
                kill_after_ms: (0, 0),
                kill_odds,
            };
            match modes::child(&run, seconds) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("{e}");
                    ExitCode::from(1)
                }
            }
        }
    }
}
