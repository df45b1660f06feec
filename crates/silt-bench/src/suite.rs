//! `silt-bench suite seeds`: the seed 000/003 matrix (TidesDB's benchtool against RocksDB)
//! in one command, at a size that fits in about ten minutes here for silt and SQLite, then
//! `report` over the results.
//!
//! The matrix, on `--num` keys (N), `--threads` workers, 16-byte keys and 100-byte values
//! unless a workload says otherwise (the seed workloads are `run`'s `PRESETS`):
//!
//! | group | workloads | size | sync | batch |
//! |---|---|---|---|---|
//! | writes | seq_write, random_write, zipf_write, small_value | N puts | none | 1 |
//! | large | large_value (256 B keys, 4 KiB values) | N/20 puts | none | 1 |
//! | reads | random_read, random_mixed, zipf_mixed, random_seek, seq_seek, zipf_seek | N/2 ops on N keys | none | – |
//! | ranges | range100, seq_range | N/20 scans on N keys | none | – |
//! | long ranges | range1000 | N/200 scans on N keys | none | – |
//! | iteration | iterate | N keys | none | – |
//! | delete | random_delete | N deletes | none | 1 |
//! | durable batches | random_write, random_delete | N/20 keys | full | 1, 10, 100, 1000 |
//!
//! Every cell runs in its own process (as `run` does). Results go to `--out`
//! (`results.jsonl`, one `run --format json` line per cell; `command.txt`), and the report
//! to `--out/report.md` with SVG charts in `--out/charts`.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use crate::output::EngineResult;
use crate::run::RunArgs;

/// Flags of `silt-bench suite`.
#[derive(Args, Debug, Clone)]
pub struct SuiteArgs {
    /// The suite: `seeds` (the seed 000/003 matrix).
    pub name: String,
    /// Comma-separated engines (see `run --engines`).
    #[arg(long, default_value = "silt,sqlite")]
    pub engines: String,
    /// N: keys of the main write and read workloads (the others are scaled from it).
    #[arg(long, default_value_t = 1_000_000)]
    pub num: u64,
    /// Worker threads of every workload but the queue.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Run the matrix this many times (interleaved per group); the report takes medians.
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    /// Where results, the report and the charts go.
    #[arg(long, default_value = "bench-results/seeds")]
    pub out: PathBuf,
    /// Where the databases go (see `run --dir`).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Block cache budget of every engine, bytes.
    #[arg(long, default_value_t = 64 << 20)]
    pub cache_bytes: u64,
    /// See `run --fsync-delay-us` (every engine alike).
    #[arg(long, default_value_t = 0)]
    pub fsync_delay_us: u64,
    /// Seed of the key generators.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
}

/// One `run` invocation of the suite.
struct Group {
    name: &'static str,
    workloads: &'static str,
    num: u64,
    reads: Option<u64>,
    sync: &'static str,
    batch: &'static str,
}

fn seeds(n: u64) -> Vec<Group> {
    let g = |name, workloads, num: u64, reads: Option<u64>, sync, batch| Group {
        name,
        workloads,
        num: num.max(1),
        reads: reads.map(|r| r.max(1)),
        sync,
        batch,
    };
    vec![
        g(
            "writes",
            "seq_write,random_write,zipf_write,small_value",
            n,
            None,
            "none",
            "1",
        ),
        g("large", "large_value", n / 20, None, "none", "1"),
        g(
            "reads",
            "random_read,random_mixed,zipf_mixed,random_seek,seq_seek,zipf_seek",
            n,
            Some(n / 2),
            "none",
            "1",
        ),
        g("ranges", "range100,seq_range", n, Some(n / 20), "none", "1"),
        g("long ranges", "range1000", n, Some(n / 200), "none", "1"),
        g("iteration", "iterate", n, None, "none", "1"),
        g("delete", "random_delete", n, None, "none", "1"),
        g(
            "durable batches",
            "random_write,random_delete",
            n / 20,
            None,
            "full",
            "1,10,100,1000",
        ),
    ]
}

pub fn suite(a: SuiteArgs) -> Result<(), String> {
    if a.name != "seeds" {
        return Err(format!("unknown suite {:?} (known: seeds)", a.name));
    }
    if a.num < 1000 {
        return Err("--num must be at least 1000".into());
    }
    std::fs::create_dir_all(&a.out).map_err(|e| format!("--out {}: {e}", a.out.display()))?;
    let results_path = a.out.join("results.jsonl");
    let mut file = std::fs::File::create(&results_path)
        .map_err(|e| format!("{}: {e}", results_path.display()))?;
    let command: Vec<String> = std::env::args().collect();
    let note = format!(
        "Command: `silt-bench {}` (on {}, {} CPUs; one process per cell).",
        command.get(1..).unwrap_or_default().join(" "),
        crate::commit::today(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
    );
    std::fs::write(a.out.join("command.txt"), format!("{note}\n"))
        .map_err(|e| format!("{}: {e}", a.out.display()))?;
    let started = std::time::Instant::now();
    let mut all: Vec<EngineResult> = Vec::new();
    let groups = seeds(a.num);
    for repeat in 0..a.repeat.max(1) {
        for g in &groups {
            eprintln!(
                "silt-bench suite seeds: {} (repeat {}/{}): {}",
                g.name,
                repeat + 1,
                a.repeat.max(1),
                g.workloads
            );
            let args = RunArgs {
                engines: a.engines.clone(),
                workloads: g.workloads.into(),
                num: g.num,
                reads: g.reads,
                threads: a.threads.to_string(),
                batch: g.batch.into(),
                sync: g.sync.into(),
                cache_bytes: a.cache_bytes,
                dir: a.dir.clone(),
                fsync_delay_us: a.fsync_delay_us,
                seed: a.seed,
                ..RunArgs::defaults()
            };
            let mut write_err = None;
            crate::run::run_matrix(&args, &mut |r| {
                let mut r = r.clone();
                r.repeat = repeat;
                let line = crate::output::engine_json_line(&r);
                if let Err(e) = writeln!(file, "{line}") {
                    write_err.get_or_insert(e);
                }
                all.push(r);
            })?;
            if let Some(e) = write_err {
                return Err(format!("{}: {e}", results_path.display()));
            }
        }
    }
    eprintln!(
        "silt-bench suite seeds: {} cells in {:.0} s",
        all.len(),
        started.elapsed().as_secs_f64()
    );
    let report = crate::report::write_report(&a.out, &all, &a.out.join("charts"), "silt", &note)?;
    println!("{}", report.display());
    let failed = all.iter().filter(|r| r.status == "failed").count();
    if failed > 0 {
        return Err(format!(
            "{failed} cell(s) failed (see {})",
            report.display()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_matrix_names_every_seed_workload() {
        let groups = seeds(100_000);
        for p in crate::run::PRESETS {
            assert!(
                groups
                    .iter()
                    .any(|g| g.workloads.split(',').any(|w| w == p.name)),
                "{} is not in the suite",
                p.name
            );
        }
        let durable = groups.iter().find(|g| g.sync == "full").unwrap();
        assert_eq!(durable.batch, "1,10,100,1000");
    }
}
