//! `silt-bench report DIR`: a markdown report and SVG charts from the JSON lines that
//! `silt-bench run --format json` prints.
//!
//! Every `*.jsonl` / `*.json` file in `DIR` is read, one [`EngineResult`] per line (other
//! lines are skipped). Rows are grouped into cells (everything that says what was measured:
//! workload, threads, batch, sync, key pattern, sizes, …) × engine; the repeats of a cell are
//! summarised by the median of each figure separately. `DIR/report.md` gets a throughput
//! table with the baseline's ratio to each peer, a wins/losses line per peer, latency and
//! resource tables, and the cells that did not run; the charts (`throughput.svg`,
//! `latency.svg`, `batch_scaling.svg`, `thread_scaling.svg`, `amplification.svg`) go to
//! `DIR/charts` (or `--charts`) and are linked from the report by relative paths. Results
//! of the transactional workloads add a "Transactions" section (`txn.rs`): tpcc's tpmC,
//! NOPM and abort rate, queue_indexed's rows/s and worst delete latency over time
//! (`queue_indexed.svg`) and txn_batch_sweep's time per row and peak RSS by batch size
//! (`txn_batch_sweep.svg`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Range;
use std::path::{Path, PathBuf};

mod charts;
mod markdown;
mod model;
mod txn;

use charts::*;
use markdown::*;
use model::*;

use crate::output::{grouped, EngineResult};
use crate::stats::{fmt_opt, median_of, MISSING};

/// `silt-bench report DIR`: the markdown report and SVG charts of a directory of results.
#[derive(clap::Args, Debug, Clone)]
pub struct ReportArgs {
    /// Directory of results: every *.jsonl / *.json file in it (one EngineResult JSON object
    /// per line; other lines are skipped).
    pub dir: PathBuf,
    /// Where the SVG charts go (default: DIR/charts).
    #[arg(long)]
    pub charts: Option<PathBuf>,
    /// The engine the ratios are taken for (silt / each peer).
    #[arg(long, default_value = "silt")]
    pub baseline: String,
}

/// Reads the results in `a.dir`, writes `DIR/report.md` and the charts, and prints the path
/// of `report.md`.
pub fn report(a: ReportArgs) -> Result<(), String> {
    let results = read_results(&a.dir)?;
    let charts = a.charts.unwrap_or_else(|| a.dir.join("charts"));
    let mut note = format!(
        "`silt-bench report {}`: {} result lines.",
        a.dir.display(),
        results.len()
    );
    // `suite` leaves the command that made the results beside them.
    if let Ok(command) = std::fs::read_to_string(a.dir.join("command.txt")) {
        note = format!("{}\n\n{note}", command.trim_end());
    }
    let path = write_report(&a.dir, &results, &charts, &a.baseline, &note)?;
    println!("{}", path.display());
    Ok(())
}

/// Reads every `*.jsonl` / `*.json` file directly in `dir` (in file-name order), one
/// [`EngineResult`] per line; lines that are not one (blank lines, log lines, other JSON) are
/// skipped. An error names the directory or file that could not be read, and a directory
/// without any result is an error too.
pub fn read_results(dir: &Path) -> Result<Vec<EngineResult>, String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("reading directory {}: {e}", dir.display()))?;
    let mut files = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|e| format!("reading directory {}: {e}", dir.display()))?
            .path();
        let is_results = matches!(
            path.extension().and_then(|x| x.to_str()),
            Some("jsonl" | "json")
        );
        if is_results && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    let mut results = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        results.extend(
            text.lines()
                .filter_map(|line| serde_json::from_str::<EngineResult>(line.trim()).ok()),
        );
    }
    if results.is_empty() {
        return Err(format!(
            "no results in {}: no line of a *.jsonl / *.json file there is a `silt-bench run \
             --format json` result",
            dir.display()
        ));
    }
    Ok(results)
}

/// Writes `dir/report.md` and the SVG charts (into `charts`, created if need be) for
/// `results`, with the ratios taken for `baseline` against each other engine, and
/// `title_note` (free text, e.g. the command and the machine) under the heading. Returns the
/// path of `report.md`.
pub fn write_report(
    dir: &Path,
    results: &[EngineResult],
    charts: &Path,
    baseline: &str,
    title_note: &str,
) -> Result<PathBuf, String> {
    if results.is_empty() {
        return Err(format!("no results to report in {}", dir.display()));
    }
    for d in [dir, charts] {
        std::fs::create_dir_all(d)
            .map_err(|e| format!("creating directory {}: {e}", d.display()))?;
    }
    let model = Model::new(results, baseline);
    let skipped = Skipped {
        throughput: throughput_chart(&charts.join("throughput.svg"), &model)?,
        latency: latency_chart(&charts.join("latency.svg"), &model)?,
        batch: scaling_chart(charts, &model, Sweep::Batch)?,
        threads: scaling_chart(charts, &model, Sweep::Threads)?,
        amplification: amplification_chart(&charts.join("amplification.svg"), &model)?,
    };
    let link = relative_link(dir, charts);
    let txn = txn::section(results, baseline, charts, &link)?;
    let md = markdown(&model, results, &link, title_note, &skipped, &txn);
    let path = dir.join("report.md");
    std::fs::write(&path, md).map_err(|e| format!("writing {}: {e}", path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use plotters::prelude::*;

    /// An ok row of `engine` on `workload` (threads 1, sync none, random keys, 16/100 B)
    /// with the given batch and throughput; latencies and resources follow from it. Built
    /// from JSON, so fields added to `EngineResult` later (`Option`s) are `None` here.
    fn row(engine: &str, workload: &str, batch: usize, ops_per_sec: f64) -> EngineResult {
        let v = serde_json::json!({
            "engine": engine,
            "workload": workload,
            "status": "ok",
            "threads": 1,
            "batch": batch,
            "sync": "none",
            "pattern": "random",
            "num": 100_000,
            "key_bytes": 16,
            "value_bytes": 100,
            "cache_bytes": 0,
            "fsync_delay_us": 0,
            "ops": 100_000,
            "seconds": 100_000.0 / ops_per_sec,
            "ops_per_sec": ops_per_sec,
            "p50_us": 1e6 / ops_per_sec,
            "p95_us": 2e6 / ops_per_sec,
            "p99_us": 4e6 / ops_per_sec,
            "p999_us": 8e6 / ops_per_sec,
            "max_us": 16e6 / ops_per_sec,
            "cpu_user_s": 1.0,
            "cpu_sys_s": 0.25,
            "peak_rss_bytes": 64u64 << 20,
            "write_amp": if engine == "silt" { 1.1 } else { 3.0 },
            "space_amp": 1.25,
            "repeat": 0,
            "date": "2026-05-01",
        });
        serde_json::from_value(v).expect("a test row")
    }

    fn not_ok(engine: &str, workload: &str, status: &str, error: &str) -> EngineResult {
        let mut r = row(engine, workload, 1, 1.0);
        r.status = status.into();
        r.error = Some(error.into());
        r.ops = None;
        r.seconds = None;
        r.ops_per_sec = None;
        r.p50_us = None;
        r.p95_us = None;
        r.p99_us = None;
        r.p999_us = None;
        r.max_us = None;
        r.write_amp = None;
        r.space_amp = None;
        r
    }

    /// The text of every `<text>` element of an SVG.
    fn svg_texts(svg: &str) -> Vec<&str> {
        svg.split("<text")
            .skip(1)
            .filter_map(|t| Some(t[t.find('>')? + 1..t.find("</text>")?].trim()))
            .collect()
    }

    fn repeat(mut r: EngineResult, n: usize) -> EngineResult {
        r.repeat = n;
        r
    }

    /// silt, rocksdb and sqlite: a fillrandom batch sweep (1, 10, 100), readrandom and
    /// readseq; three repeats of silt's fillrandom batch 100; tidesdb unavailable and a failed
    /// sqlite cell.
    fn sample() -> Vec<EngineResult> {
        let mut v = vec![
            // fillrandom, batch 1: silt 1.00× rocksdb (within), 2.00× sqlite.
            row("silt", "fillrandom", 1, 20_000.0),
            row("rocksdb", "fillrandom", 1, 20_200.0),
            row("sqlite", "fillrandom", 1, 10_000.0),
            // batch 10: silt ahead of both.
            row("silt", "fillrandom", 10, 150_000.0),
            row("rocksdb", "fillrandom", 10, 100_000.0),
            row("sqlite", "fillrandom", 10, 50_000.0),
            // batch 100: silt's median of 100k/120k/110k is 110,000 → 2.20× rocksdb.
            repeat(row("silt", "fillrandom", 100, 100_000.0), 0),
            repeat(row("silt", "fillrandom", 100, 120_000.0), 1),
            repeat(row("silt", "fillrandom", 100, 110_000.0), 2),
            row("rocksdb", "fillrandom", 100, 50_000.0),
            row("sqlite", "fillrandom", 100, 55_000.0),
            // readrandom: silt behind rocksdb (0.50×); sqlite failed.
            row("silt", "readrandom", 1, 400_000.0),
            row("rocksdb", "readrandom", 1, 800_000.0),
            not_ok("sqlite", "readrandom", "failed", "database is locked"),
            // readseq: silt ahead of rocksdb; no sqlite row.
            row("silt", "readseq", 1, 3_000_000.0),
            row("rocksdb", "readseq", 1, 1_000_000.0),
        ];
        for w in ["fillrandom", "readrandom"] {
            v.push(not_ok("tidesdb", w, "unavailable", "not in this build"));
        }
        v
    }

    fn write(results: &[EngineResult]) -> (tempfile::TempDir, String, PathBuf) {
        let dir = tempfile::tempdir().expect("temp dir");
        let charts = dir.path().join("charts");
        let path = write_report(dir.path(), results, &charts, "silt", "test run on a laptop")
            .expect("report");
        let md = std::fs::read_to_string(&path).expect("report.md");
        (dir, md, charts)
    }

    #[test]
    fn report_has_medians_ratios_and_wins() {
        let (_dir, md, _) = write(&sample());
        assert!(
            md.starts_with("# silt-bench report\n\ntest run on a laptop\n"),
            "{md}"
        );
        assert!(md.contains("Dates: 2026-05-01."), "{md}");
        // Header: baseline first, then the known peers' order.
        assert!(
            md.contains(
                "| silt ops/s | rocksdb ops/s | sqlite ops/s | silt/rocksdb | silt/sqlite |"
            ),
            "{md}"
        );
        let b100 = md
            .lines()
            .find(|l| l.starts_with("| fillrandom, 1 thread, batch 100, sync none, random"))
            .expect("batch 100 row");
        assert!(b100.contains("110,000"), "{b100}");
        assert!(b100.contains("2.20×"), "{b100}");
        assert!(b100.contains("2.00×"), "{b100}");
        assert!(b100.contains("silt 3, rocksdb 1, sqlite 1"), "{b100}");
        let readrandom = md
            .lines()
            .find(|l| l.starts_with("| readrandom"))
            .expect("readrandom row");
        assert!(readrandom.contains("0.50×"), "{readrandom}");
        assert!(readrandom.contains(MISSING), "{readrandom}");
        // vs rocksdb: ratios 0.99, 1.5, 2.2, 0.5, 3.0.
        assert!(
            md.contains("- **rocksdb**: silt ahead on 3, behind on 1, within ±5% on 1 of 5 cells"),
            "{md}"
        );
        // vs sqlite: 2.0, 3.0, 2.0 → geometric mean 2.29.
        assert!(
            md.contains("- **sqlite**: silt ahead on 3, behind on 0, within ±5% on 0 of 3 cells; geometric mean of silt/sqlite: 2.29×"),
            "{md}"
        );
        // Latency and resources.
        assert!(md.contains("| silt p50 / p99 / max |"), "{md}");
        assert!(md.contains("9.09 / 36.4 / 145"), "{md}");
        // CPU, RSS, write amp, then disk write amp (none in these rows) and space amp.
        let row = md
            .lines()
            .find(|l| l.contains("| rocksdb |  1.25 |           64 |      3.00 |"))
            .unwrap_or_else(|| panic!("{md}"));
        assert!(row.ends_with("— |      1.25 |"), "{row}");
        // Not measured.
        let not = &md[md.find("## Not measured").expect("section")..];
        assert!(
            not.contains("| tidesdb | fillrandom | unavailable |"),
            "{not}"
        );
        assert!(not.contains("not in this build"), "{not}");
        assert!(not.contains("| sqlite  | readrandom | failed"), "{not}");
        assert!(not.contains("database is locked"), "{not}");
        // tidesdb has no ok row: no column.
        assert!(!md.contains("tidesdb ops/s"), "{md}");
    }

    #[test]
    fn charts_are_svg_with_every_engine_in_the_legend() {
        let (_dir, md, charts) = write(&sample());
        for file in [
            "throughput.svg",
            "latency.svg",
            "batch_scaling.svg",
            "amplification.svg",
        ] {
            assert!(
                md.contains(&format!("(charts/{file})")),
                "{file} not linked: {md}"
            );
            let svg = std::fs::read_to_string(charts.join(file)).expect(file);
            assert!(
                svg.starts_with("<svg") || svg.starts_with("<?xml"),
                "{file}"
            );
            let texts = svg_texts(&svg);
            for engine in ["silt", "rocksdb", "sqlite"] {
                assert!(texts.contains(&engine), "{engine} not in {file}: {texts:?}");
            }
            assert!(!texts.contains(&"tidesdb"), "{file}");
        }
        // Every cell has one thread: no thread sweep.
        assert!(!charts.join("thread_scaling.svg").exists());
        assert!(
            md.contains(
                "*No `thread_scaling.svg`: no cell was measured at two or more thread counts"
            ),
            "{md}"
        );
    }

    #[test]
    fn no_sweep_no_scaling_charts() {
        let results = vec![
            row("silt", "fillseq", 1, 100.0),
            row("rocksdb", "fillseq", 1, 100.0),
            row("silt", "readrandom", 1, 100.0),
        ];
        let (dir, md, charts) = write(&results);
        assert!(!charts.join("batch_scaling.svg").exists());
        assert!(
            md.contains("*No `batch_scaling.svg`: no cell was measured at two or more batch sizes"),
            "{md}"
        );
        assert!(md.contains("Every cell ran."), "{md}");
        assert!(
            md.contains("within ±5% on 1 of 1 cells; geometric mean of silt/rocksdb: 1.00×"),
            "{md}"
        );

        // A stale chart from an earlier report is removed.
        std::fs::write(charts.join("batch_scaling.svg"), "<svg/>").expect("write");
        write_report(dir.path(), &results, &charts, "silt", "").expect("report");
        assert!(!charts.join("batch_scaling.svg").exists());
    }

    #[test]
    fn thread_sweep_and_other_engines() {
        let mut results = Vec::new();
        for (t, ops) in [(1, 1000.0), (2, 1900.0), (4, 3500.0)] {
            for e in ["zeta", "silt", "alpha", "redb"] {
                let mut r = row(e, "readrandom", 1, ops);
                r.threads = t;
                results.push(r);
            }
        }
        let (_dir, md, charts) = write(&results);
        assert!(
            md.contains("| silt ops/s | redb ops/s | alpha ops/s | zeta ops/s |"),
            "{md}"
        );
        let svg = std::fs::read_to_string(charts.join("thread_scaling.svg")).expect("svg");
        assert!(svg.starts_with("<svg") || svg.starts_with("<?xml"));
        let texts = svg_texts(&svg);
        for e in ["zeta", "silt", "alpha", "redb"] {
            assert!(texts.contains(&e), "{e}: {texts:?}");
        }
        assert!(!charts.join("batch_scaling.svg").exists());
        assert!(md.contains("readrandom, 4 threads, batch 1"), "{md}");
    }

    #[test]
    fn baseline_other_than_silt() {
        let dir = tempfile::tempdir().expect("temp dir");
        let results = sample();
        let path = write_report(dir.path(), &results, &dir.path().join("c"), "rocksdb", "")
            .expect("report");
        let md = std::fs::read_to_string(path).expect("read");
        assert!(
            md.contains(
                "| rocksdb ops/s | silt ops/s | sqlite ops/s | rocksdb/silt | rocksdb/sqlite |"
            ),
            "{md}"
        );
        assert!(md.contains("(c/throughput.svg)"), "{md}");

        let path = write_report(dir.path(), &results, &dir.path().join("c"), "nosuch", "")
            .expect("report");
        let md = std::fs::read_to_string(path).expect("read");
        assert!(
            md.contains("No ok result of the baseline `nosuch`: no ratios."),
            "{md}"
        );
    }

    #[test]
    fn only_failures_still_report() {
        let results = vec![
            not_ok("silt", "fillseq", "failed", "disk full | retry"),
            not_ok("rocksdb", "fillseq", "unavailable", "not in this build"),
        ];
        let (_dir, md, charts) = write(&results);
        assert!(
            md.contains("No ok result of the baseline `silt`: no ratios."),
            "{md}"
        );
        assert!(
            md.contains("*No `throughput.svg`: no cell has a throughput.*"),
            "{md}"
        );
        assert!(md.contains("disk full \\| retry"), "{md}");
        assert!(!charts.join("throughput.svg").exists());
        assert!(!md.contains("ops/s |"), "{md}");
    }

    #[test]
    fn read_results_skips_other_lines_and_reads_every_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let line = |r: &EngineResult| serde_json::to_string(r).expect("json");
        let a = format!(
            "running silt fillrandom...\n{}\n\n{{\"not\": \"a result\"}}\n{}\n",
            line(&row("silt", "fillrandom", 1, 1.0)),
            line(&row("rocksdb", "fillrandom", 1, 1.0)),
        );
        std::fs::write(dir.path().join("a.jsonl"), a).expect("write");
        std::fs::write(
            dir.path().join("b.json"),
            format!("{}\r\n", line(&row("silt", "readseq", 1, 1.0))),
        )
        .expect("write");
        std::fs::write(dir.path().join("c.txt"), line(&row("silt", "scan", 1, 1.0)))
            .expect("write");
        let results = read_results(dir.path()).expect("results");
        let got: Vec<(&str, &str)> = results
            .iter()
            .map(|r| (r.engine.as_str(), r.workload.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("silt", "fillrandom"),
                ("rocksdb", "fillrandom"),
                ("silt", "readseq")
            ]
        );
    }

    #[test]
    fn empty_or_missing_dir_is_an_error() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("x.jsonl"), "no results here\n").expect("write");
        let e = read_results(dir.path()).expect_err("empty");
        assert!(
            e.starts_with(&format!("no results in {}", dir.path().display())),
            "{e}"
        );
        let missing = dir.path().join("missing");
        let e = read_results(&missing).expect_err("missing");
        assert!(e.contains(&missing.display().to_string()), "{e}");
        let e = write_report(dir.path(), &[], &missing, "silt", "").expect_err("no rows");
        assert!(e.contains("no results"), "{e}");
    }

    #[test]
    fn report_subcommand_writes_next_to_the_results() {
        let dir = tempfile::tempdir().expect("temp dir");
        let lines: Vec<String> = sample()
            .iter()
            .map(|r| serde_json::to_string(r).expect("json"))
            .collect();
        std::fs::write(dir.path().join("run.jsonl"), lines.join("\n")).expect("write");
        report(ReportArgs {
            dir: dir.path().to_path_buf(),
            charts: None,
            baseline: "silt".into(),
        })
        .expect("report");
        assert!(dir.path().join("report.md").is_file());
        assert!(dir.path().join("charts/throughput.svg").is_file());
    }

    #[test]
    fn labels_and_numbers() {
        let mut c = Cell::of(&row("silt", "zipf_write", 10, 1.0));
        c.base_workload = Some("fillrandom".into());
        c.value_bytes = 1000;
        c.read_percent = Some(50);
        c.threads = 4;
        assert_eq!(
            c.describe(false, None, true),
            "zipf_write (fillrandom), 4 threads, batch 10, sync none, random, key 16 B, \
             value 1000 B, 50% reads, 100,000 keys"
        );
        assert_eq!(
            c.describe(true, Some(Sweep::Batch), false),
            "zipf_write t4 none rand k16v1000 50%r"
        );
        assert_eq!(si(1500.0), "1.5k");
        assert_eq!(si(10f64.powf(2.0)), "100");
        assert_eq!(si(2_000_000.0), "2M");
        assert_eq!(si(0.25), "0.25");
        assert_eq!(engine_colour("silt"), RGBColor(31, 119, 180));
        assert_eq!(engine_colour("zeta"), engine_colour("zeta"));
    }
}
