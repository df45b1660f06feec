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
//! `DIR/charts` (or `--charts`) and are linked from the report by relative paths.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Range;
use std::path::{Path, PathBuf};

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

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
    let md = markdown(
        &model,
        results,
        &relative_link(dir, charts),
        title_note,
        &skipped,
    );
    let path = dir.join("report.md");
    std::fs::write(&path, md).map_err(|e| format!("writing {}: {e}", path.display()))?;
    Ok(path)
}

// ------------------------------------------------------------------------------- the model

/// A cell's identity: everything that says what was measured, but not by which engine.
/// `threads` and `batch` come last so that sweeps sort together, smallest first.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Cell {
    workload: String,
    base_workload: Option<String>,
    sync: String,
    pattern: String,
    num: u64,
    key_bytes: usize,
    value_bytes: usize,
    range_size: Option<usize>,
    fsync_delay_us: u64,
    read_percent: Option<u32>,
    threads: usize,
    batch: usize,
}

impl Cell {
    fn of(r: &EngineResult) -> Cell {
        Cell {
            workload: r.workload.clone(),
            base_workload: r.base_workload.clone(),
            sync: r.sync.clone(),
            pattern: r.pattern.clone(),
            num: r.num,
            key_bytes: r.key_bytes,
            value_bytes: r.value_bytes,
            range_size: r.range_size,
            fsync_delay_us: r.fsync_delay_us,
            read_percent: r.read_percent,
            threads: r.threads,
            batch: r.batch,
        }
    }

    /// A readable description for the tables (`short: false`) or a compact label for the
    /// charts (`short: true`), without the swept dimension `omit`. `num` is shown only when
    /// the cells differ in it.
    fn describe(&self, short: bool, omit: Option<Sweep>, with_num: bool) -> String {
        let mut parts = vec![match (&self.base_workload, short) {
            (Some(base), false) if *base != self.workload => {
                format!("{} ({base})", self.workload)
            }
            _ => self.workload.clone(),
        }];
        if omit != Some(Sweep::Threads) {
            parts.push(match (short, self.threads) {
                (true, t) => format!("t{t}"),
                (false, 1) => "1 thread".to_string(),
                (false, t) => format!("{t} threads"),
            });
        }
        if omit != Some(Sweep::Batch) {
            parts.push(if short {
                format!("b{}", self.batch)
            } else {
                format!("batch {}", self.batch)
            });
        }
        parts.push(if short {
            self.sync.clone()
        } else {
            format!("sync {}", self.sync)
        });
        parts.push(if short {
            match self.pattern.as_str() {
                "sequential" => "seq".to_string(),
                "random" => "rand".to_string(),
                "zipfian" => "zipf".to_string(),
                other => other.to_string(),
            }
        } else {
            self.pattern.clone()
        });
        if self.key_bytes != 16 || self.value_bytes != 100 {
            parts.push(if short {
                format!("k{}v{}", self.key_bytes, self.value_bytes)
            } else {
                format!("key {} B, value {} B", self.key_bytes, self.value_bytes)
            });
        }
        if let Some(n) = self.range_size {
            parts.push(if short {
                format!("r{n}")
            } else {
                format!("{n} per scan")
            });
        }
        if let Some(p) = self.read_percent {
            parts.push(if short {
                format!("{p}%r")
            } else {
                format!("{p}% reads")
            });
        }
        if self.fsync_delay_us != 0 {
            parts.push(if short {
                format!("fd{}", self.fsync_delay_us)
            } else {
                format!("fsync delay {} µs", self.fsync_delay_us)
            });
        }
        if with_num {
            parts.push(if short {
                format!("n{}", si(self.num as f64))
            } else {
                format!("{} keys", grouped(self.num as f64))
            });
        }
        parts.join(if short { " " } else { ", " })
    }
}

/// Medians over one engine's ok repeats of one cell (each figure separately).
#[derive(Debug)]
struct Figures {
    runs: usize,
    ops_per_sec: Option<f64>,
    p50_us: Option<f64>,
    p99_us: Option<f64>,
    max_us: Option<f64>,
    cpu_s: Option<f64>,
    rss_mib: Option<f64>,
    write_amp: Option<f64>,
    disk_write_amp: Option<f64>,
    space_amp: Option<f64>,
}

impl Figures {
    fn of(rows: &[&EngineResult]) -> Figures {
        let m = |f: fn(&EngineResult) -> Option<f64>| median_of(rows.iter().map(|r| f(r)));
        Figures {
            runs: rows.len(),
            ops_per_sec: m(|r| r.ops_per_sec),
            p50_us: m(|r| r.p50_us),
            p99_us: m(|r| r.p99_us),
            max_us: m(|r| r.max_us),
            cpu_s: m(|r| Some(r.cpu_user_s? + r.cpu_sys_s?)),
            rss_mib: m(|r| r.peak_rss_bytes.map(|b| b as f64 / (1u64 << 20) as f64)),
            write_amp: m(|r| r.write_amp),
            disk_write_amp: m(|r| r.disk_write_amp),
            space_amp: m(|r| r.space_amp),
        }
    }
}

/// Engines in this order after the baseline (silt first when it is not the baseline); any
/// other engine follows, alphabetically.
const ENGINE_ORDER: &[&str] = &["silt", "rocksdb", "tidesdb", "sqlite", "fjall", "redb"];

/// Sort key of an engine, before its name: the baseline, then [`ENGINE_ORDER`], then the
/// rest (which the name then orders).
fn engine_rank(engine: &str, baseline: &str) -> usize {
    if engine == baseline {
        return 0;
    }
    ENGINE_ORDER
        .iter()
        .position(|e| *e == engine)
        .map_or(ENGINE_ORDER.len() + 1, |i| i + 1)
}

/// The ok results, as cells × engines of medians.
struct Model {
    baseline: String,
    /// Cells with at least one ok row: workloads in the order they first appear in the
    /// results, the rest of the identity sorted.
    cells: Vec<Cell>,
    /// Engines with at least one ok row, in [`engine_rank`] order.
    engines: Vec<String>,
    /// `figs[cell][engine]`.
    figs: Vec<Vec<Option<Figures>>>,
    /// Whether the cells differ in `num` (then their labels show it).
    with_num: bool,
}

impl Model {
    fn new(results: &[EngineResult], baseline: &str) -> Model {
        let mut workload_order: HashMap<&str, usize> = HashMap::new();
        for r in results {
            let next = workload_order.len();
            workload_order.entry(r.workload.as_str()).or_insert(next);
        }
        // (workload order, cell) → (engine rank, engine) → its ok rows.
        type ByEngine<'a> = BTreeMap<(usize, String), Vec<&'a EngineResult>>;
        let mut groups: BTreeMap<(usize, Cell), ByEngine<'_>> = BTreeMap::new();
        for r in results.iter().filter(|r| r.status == "ok") {
            let cell = (workload_order[r.workload.as_str()], Cell::of(r));
            let engine = (engine_rank(&r.engine, baseline), r.engine.clone());
            groups
                .entry(cell)
                .or_default()
                .entry(engine)
                .or_default()
                .push(r);
        }
        let engines: BTreeSet<(usize, String)> = groups
            .values()
            .flat_map(|by_engine| by_engine.keys().cloned())
            .collect();
        let engines: Vec<(usize, String)> = engines.into_iter().collect();
        let figs = groups
            .values()
            .map(|by_engine| {
                engines
                    .iter()
                    .map(|e| by_engine.get(e).map(|rows| Figures::of(rows)))
                    .collect()
            })
            .collect();
        let cells: Vec<Cell> = groups.into_keys().map(|(_, c)| c).collect();
        let with_num = cells.iter().any(|c| c.num != cells[0].num);
        Model {
            baseline: baseline.to_string(),
            cells,
            engines: engines.into_iter().map(|(_, e)| e).collect(),
            figs,
            with_num,
        }
    }

    fn baseline_index(&self) -> Option<usize> {
        self.engines.iter().position(|e| *e == self.baseline)
    }

    /// The engines that are not the baseline, with their index in `engines`.
    fn peers(&self) -> impl Iterator<Item = (usize, &String)> {
        self.engines
            .iter()
            .enumerate()
            .filter(move |(_, e)| **e != self.baseline)
    }

    fn figure(&self, cell: usize, engine: usize, f: fn(&Figures) -> Option<f64>) -> Option<f64> {
        self.figs[cell][engine].as_ref().and_then(f)
    }

    /// Baseline ops/s over the peer's (medians), when both were measured.
    fn ratio(&self, cell: usize, base: usize, peer: usize) -> Option<f64> {
        let b = self.figure(cell, base, |f| f.ops_per_sec)?;
        let p = self.figure(cell, peer, |f| f.ops_per_sec)?;
        (b > 0.0 && p > 0.0).then(|| b / p)
    }

    fn label(&self, cell: usize, short: bool) -> String {
        self.cells[cell].describe(short, None, self.with_num)
    }
}

// ---------------------------------------------------------------------------- the markdown

/// Why each chart was not drawn (`None`: it was).
struct Skipped {
    throughput: Option<String>,
    latency: Option<String>,
    batch: Option<String>,
    threads: Option<String>,
    amplification: Option<String>,
}

fn fmt_rate(x: f64) -> String {
    if x < 100.0 {
        format!("{x:.1}")
    } else {
        grouped(x)
    }
}

fn fmt_us(x: f64) -> String {
    if x < 10.0 {
        format!("{x:.2}")
    } else if x < 100.0 {
        format!("{x:.1}")
    } else {
        grouped(x)
    }
}

fn fmt_2(x: f64) -> String {
    format!("{x:.2}")
}

fn fmt_ratio(x: f64) -> String {
    format!("{x:.2}×")
}

/// A markdown table, padded so that its source reads as a table too. `align` has an `l`
/// for each column to left-align (text); the others (figures) are right-aligned.
fn md_table(header: &[String], rows: &[Vec<String>], align: &str) -> String {
    let left: Vec<bool> = (0..header.len())
        .map(|i| align.chars().nth(i) == Some('l'))
        .collect();
    let cell = |s: &str| s.replace('|', "\\|").replace(['\n', '\r'], " ");
    let header: Vec<String> = header.iter().map(|h| cell(h)).collect();
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(|c| cell(c)).collect())
        .collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain([header[i].chars().count(), 3])
                .max()
                .unwrap_or(3)
        })
        .collect();
    let line = |r: &[String]| {
        let cells: Vec<String> = r
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (c, w))| {
                if left[i] {
                    format!("{c:<w$}")
                } else {
                    format!("{c:>w$}")
                }
            })
            .collect();
        format!("| {} |", cells.join(" | "))
    };
    let rule: Vec<String> = widths
        .iter()
        .enumerate()
        .map(|(i, w)| {
            if left[i] {
                format!(":{}", "-".repeat(w - 1))
            } else {
                format!("{}:", "-".repeat(w - 1))
            }
        })
        .collect();
    let mut out = vec![line(&header), format!("| {} |", rule.join(" | "))];
    out.extend(rows.iter().map(|r| line(r)));
    out.join("\n")
}

/// A chart's image link, or why it was not drawn.
fn chart_link(charts: &Path, file: &str, alt: &str, skipped: &Option<String>) -> String {
    match skipped {
        Some(why) => format!("*No `{file}`: {why}.*"),
        None => {
            let target = charts.join(file).display().to_string();
            if target.contains([' ', '(', ')']) {
                format!("![{alt}](<{target}>)")
            } else {
                format!("![{alt}]({target})")
            }
        }
    }
}

fn markdown(
    m: &Model,
    results: &[EngineResult],
    charts: &Path,
    title_note: &str,
    skipped: &Skipped,
) -> String {
    let mut md = vec!["# silt-bench report".to_string(), String::new()];
    if !title_note.trim().is_empty() {
        md.push(title_note.trim().to_string());
        md.push(String::new());
    }
    let dates: BTreeSet<&str> = results.iter().map(|r| r.date.as_str()).collect();
    let dates: Vec<&str> = dates.into_iter().collect();
    let ok = results.iter().filter(|r| r.status == "ok").count();
    md.push(format!(
        "Dates: {}. Rows: {} ({ok} ok). Engines: {}. Figures are medians over each cell's \
         ok repeats (`runs`); ratios are `{}/<peer>` of the median ops/s.",
        match dates.len() {
            0..=6 => dates.join(", "),
            n => format!("{} … {} ({n} dates)", dates[0], dates[n - 1]),
        },
        results.len(),
        if m.engines.is_empty() {
            "none measured".to_string()
        } else {
            m.engines.join(", ")
        },
        m.baseline,
    ));
    md.push(String::new());
    md.push(
        "Chart labels: workload, `tN` threads, `bN` batch, sync mode, key pattern; then, \
         where they apply, `kNvN` key/value bytes, `rN` entries per scan, `N%r` reads, \
         `fdN` fsync delay (µs), `nN` keys."
            .to_string(),
    );
    md.push(String::new());

    let base = m.baseline_index();
    md.push("## Throughput".to_string());
    md.push(String::new());
    md.push(chart_link(
        charts,
        "throughput.svg",
        "throughput",
        &skipped.throughput,
    ));
    md.push(String::new());
    if !m.cells.is_empty() {
        md.push(throughput_table(m, base));
        md.push(String::new());
    }
    md.push(format!("### {} against each peer", m.baseline));
    md.push(String::new());
    md.extend(wins(m, base));
    md.push(String::new());

    md.push("## Latency".to_string());
    md.push(String::new());
    md.push(chart_link(
        charts,
        "latency.svg",
        "latency",
        &skipped.latency,
    ));
    md.push(String::new());
    if !m.cells.is_empty() {
        md.push(
            "Per operation (one write batch, get, seek, scan or `readseq` step), in µs."
                .to_string(),
        );
        md.push(String::new());
        md.push(latency_table(m));
        md.push(String::new());
    }

    md.push("## Resources".to_string());
    md.push(String::new());
    md.push(chart_link(
        charts,
        "amplification.svg",
        "amplification",
        &skipped.amplification,
    ));
    md.push(String::new());
    if !m.cells.is_empty() {
        md.push(
            "CPU is the whole process's user + system time over the timed phase; write amp \
             is the process's device writes (`/proc/self/io`) over logical writes; disk \
             write amp is the block device's written sectors over logical writes (every \
             process on that device, so noisy on a shared machine, but free of the page \
             cache's accounting: on this kernel a small write into a large folio, such as a \
             preallocated log file's, is charged to `/proc/self/io` as the whole folio); \
             space amp is database bytes over live bytes."
                .to_string(),
        );
        md.push(String::new());
        md.push(resources_table(m));
        md.push(String::new());
    }

    md.push("## Scaling".to_string());
    md.push(String::new());
    md.push(chart_link(
        charts,
        Sweep::Batch.file(),
        "batch scaling",
        &skipped.batch,
    ));
    md.push(String::new());
    md.push(chart_link(
        charts,
        Sweep::Threads.file(),
        "thread scaling",
        &skipped.threads,
    ));
    md.push(String::new());

    md.push("## Not measured".to_string());
    md.push(String::new());
    md.push(problems(results, &m.baseline));
    md.push(String::new());
    md.join("\n")
}

fn throughput_table(m: &Model, base: Option<usize>) -> String {
    let mut header = vec!["cell".to_string(), "runs".to_string()];
    header.extend(m.engines.iter().map(|e| format!("{e} ops/s")));
    if base.is_some() {
        header.extend(m.peers().map(|(_, p)| format!("{}/{p}", m.baseline)));
    }
    let rows: Vec<Vec<String>> = (0..m.cells.len())
        .map(|c| {
            let runs: Vec<(&String, usize)> = m
                .engines
                .iter()
                .zip(&m.figs[c])
                .filter_map(|(e, f)| Some((e, f.as_ref()?.runs)))
                .collect();
            let runs = match runs.as_slice() {
                [(_, n), rest @ ..] if rest.iter().all(|(_, k)| k == n) => n.to_string(),
                _ => {
                    let each: Vec<String> = runs.iter().map(|(e, n)| format!("{e} {n}")).collect();
                    each.join(", ")
                }
            };
            let mut row = vec![m.label(c, false), runs];
            row.extend(
                (0..m.engines.len()).map(|e| fmt_opt(m.figure(c, e, |f| f.ops_per_sec), fmt_rate)),
            );
            if let Some(b) = base {
                row.extend(m.peers().map(|(p, _)| fmt_opt(m.ratio(c, b, p), fmt_ratio)));
            }
            row
        })
        .collect();
    md_table(&header, &rows, "l")
}

/// One line per peer: on how many cells the baseline is ahead, behind, within 5%, and the
/// geometric mean of the ratios.
fn wins(m: &Model, base: Option<usize>) -> Vec<String> {
    let Some(b) = base else {
        return vec![format!(
            "No ok result of the baseline `{}`: no ratios.",
            m.baseline
        )];
    };
    let lines: Vec<String> = m
        .peers()
        .map(|(p, peer)| {
            let ratios: Vec<f64> = (0..m.cells.len())
                .filter_map(|c| m.ratio(c, b, p))
                .collect();
            if ratios.is_empty() {
                return format!("- **{peer}**: no cell measured by both.");
            }
            let ahead = ratios.iter().filter(|r| **r > 1.05).count();
            let behind = ratios.iter().filter(|r| **r < 0.95).count();
            let geomean = (ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64).exp();
            format!(
                "- **{peer}**: {} ahead on {ahead}, behind on {behind}, within ±5% on {} of {} \
                 cells; geometric mean of {}/{peer}: {}",
                m.baseline,
                ratios.len() - ahead - behind,
                ratios.len(),
                m.baseline,
                fmt_ratio(geomean),
            )
        })
        .collect();
    if lines.is_empty() {
        vec![format!("No engine besides `{}`: no ratios.", m.baseline)]
    } else {
        lines
    }
}

fn latency_table(m: &Model) -> String {
    let mut header = vec!["cell".to_string()];
    header.extend(m.engines.iter().map(|e| format!("{e} p50 / p99 / max")));
    let rows: Vec<Vec<String>> = (0..m.cells.len())
        .map(|c| {
            let mut row = vec![m.label(c, false)];
            row.extend((0..m.engines.len()).map(|e| match &m.figs[c][e] {
                None => MISSING.to_string(),
                Some(f) => format!(
                    "{} / {} / {}",
                    fmt_opt(f.p50_us, fmt_us),
                    fmt_opt(f.p99_us, fmt_us),
                    fmt_opt(f.max_us, fmt_us)
                ),
            }));
            row
        })
        .collect();
    md_table(&header, &rows, "l")
}

fn resources_table(m: &Model) -> String {
    let header: Vec<String> = [
        "cell",
        "engine",
        "CPU s",
        "peak RSS MiB",
        "write amp",
        "disk write amp",
        "space amp",
    ]
    .map(String::from)
    .to_vec();
    let mut rows = Vec::new();
    for c in 0..m.cells.len() {
        let mut first = true;
        for (e, engine) in m.engines.iter().enumerate() {
            let Some(f) = &m.figs[c][e] else { continue };
            rows.push(vec![
                if first {
                    m.label(c, false)
                } else {
                    String::new()
                },
                engine.clone(),
                fmt_opt(f.cpu_s, fmt_2),
                fmt_opt(f.rss_mib, |x| format!("{x:.0}")),
                fmt_opt(f.write_amp, fmt_2),
                fmt_opt(f.disk_write_amp, fmt_2),
                fmt_opt(f.space_amp, fmt_2),
            ]);
            first = false;
        }
    }
    md_table(&header, &rows, "ll")
}

/// The rows that are not ok, by engine, workload, status and error, with how many cells
/// and rows each covers.
fn problems(results: &[EngineResult], baseline: &str) -> String {
    type Key<'a> = (usize, &'a str, &'a str, &'a str, &'a str);
    let mut groups: BTreeMap<Key<'_>, (BTreeSet<Cell>, usize)> = BTreeMap::new();
    for r in results.iter().filter(|r| r.status != "ok") {
        let key = (
            engine_rank(&r.engine, baseline),
            r.engine.as_str(),
            r.workload.as_str(),
            r.status.as_str(),
            r.error.as_deref().unwrap_or(""),
        );
        let entry = groups.entry(key).or_default();
        entry.0.insert(Cell::of(r));
        entry.1 += 1;
    }
    if groups.is_empty() {
        return "Every cell ran.".to_string();
    }
    let header = ["engine", "workload", "status", "cells", "rows", "error"].map(String::from);
    let rows: Vec<Vec<String>> = groups
        .into_iter()
        .map(|((_, engine, workload, status, error), (cells, n))| {
            vec![
                engine.to_string(),
                workload.to_string(),
                status.to_string(),
                cells.len().to_string(),
                n.to_string(),
                if error.is_empty() {
                    MISSING.to_string()
                } else {
                    error.to_string()
                },
            ]
        })
        .collect();
    format!(
        "Cells (or repeats of them) that did not run:\n\n{}",
        md_table(&header, &rows, "lllrrl")
    )
}

/// `to` relative to `from` (both directories that exist), for links from `from`; `to` as
/// given when either cannot be resolved.
fn relative_link(from: &Path, to: &Path) -> PathBuf {
    let (Ok(from), Ok(to_abs)) = (from.canonicalize(), to.canonicalize()) else {
        return to.to_path_buf();
    };
    let a: Vec<_> = from.components().collect();
    let b: Vec<_> = to_abs.components().collect();
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut rel = PathBuf::new();
    for _ in common..a.len() {
        rel.push("..");
    }
    for c in &b[common..] {
        rel.push(c);
    }
    rel
}

// ------------------------------------------------------------------------------ the charts

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type DrawResult<T> = Result<T, DrawingAreaErrorKind<std::io::Error>>;

const FONT: &str = "sans-serif";
const GRID_BOLD: RGBColor = RGBColor(205, 205, 205);
const GRID_LIGHT: RGBColor = RGBColor(238, 238, 238);

/// The fixed colour of an engine: the known ones by name, any other by a hash of its name.
fn engine_colour(engine: &str) -> RGBColor {
    match engine {
        "silt" => RGBColor(31, 119, 180),
        "rocksdb" => RGBColor(255, 127, 14),
        "tidesdb" => RGBColor(44, 160, 44),
        "sqlite" => RGBColor(148, 103, 189),
        "fjall" => RGBColor(140, 86, 75),
        "redb" => RGBColor(227, 119, 194),
        other => {
            const MORE: [RGBColor; 4] = [
                RGBColor(127, 127, 127),
                RGBColor(188, 189, 34),
                RGBColor(23, 190, 207),
                RGBColor(214, 39, 40),
            ];
            let h = other
                .bytes()
                .fold(0usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize));
            MORE[h % MORE.len()]
        }
    }
}

/// `1.5k`, `20M`, `0.25`: a value with an SI suffix and at most three significant digits.
fn si(v: f64) -> String {
    let (div, suffix) = match v.abs() {
        a if a >= 1e9 => (1e9, "G"),
        a if a >= 1e6 => (1e6, "M"),
        a if a >= 1e3 => (1e3, "k"),
        _ => (1.0, ""),
    };
    let x = v / div;
    let s = if x.abs() >= 100.0 {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    };
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        &s
    };
    format!("{s}{suffix}")
}

/// A value axis: a linear range (of log10 values for a log axis) and its ticks.
struct Axis {
    log: bool,
    range: Range<f64>,
    /// Labelled ticks, in axis units.
    bold: Vec<f64>,
    /// Unlabelled grid lines, in axis units.
    light: Vec<f64>,
}

impl Axis {
    /// A log axis covering `values` (the positive ones) with ticks at decades (and at 2 and 5
    /// when it spans at most two decades), or `None` without a positive value.
    fn log(values: impl Iterator<Item = f64>) -> Option<Axis> {
        let (lo, hi) = values
            .filter(|v| *v > 0.0 && v.is_finite())
            .fold(None, |acc: Option<(f64, f64)>, v| {
                Some(acc.map_or((v, v), |(a, b)| (a.min(v), b.max(v))))
            })?;
        // Bars rise from the bottom of the axis: keep the smallest clear of it.
        let lo = (lo.log10() - 0.05).floor();
        let hi = (hi.log10() + 0.02).ceil().max(lo + 1.0);
        let mut bold = Vec::new();
        let mut light = Vec::new();
        let few = hi - lo <= 2.0;
        let mut decade = lo;
        while decade < hi {
            for k in 1..10 {
                let t = decade + (k as f64).log10();
                if k == 1 || (few && (k == 2 || k == 5)) {
                    bold.push(t);
                } else {
                    light.push(t);
                }
            }
            decade += 1.0;
        }
        bold.push(hi);
        Some(Axis {
            log: true,
            range: lo..hi,
            bold,
            light,
        })
    }

    /// A linear axis from 0 over `values` with about five round ticks, or `None` without a
    /// positive value.
    fn linear(values: impl Iterator<Item = f64>) -> Option<Axis> {
        let hi = values
            .filter(|v| v.is_finite())
            .fold(0.0f64, |a, v| a.max(v));
        if hi <= 0.0 {
            return None;
        }
        let raw = hi / 5.0;
        let mag = 10f64.powf(raw.log10().floor());
        let step = [1.0, 2.0, 2.5, 5.0, 10.0]
            .iter()
            .map(|k| k * mag)
            .find(|s| *s >= raw)
            .unwrap_or(10.0 * mag);
        let n = (hi * 1.05 / step).ceil() as usize;
        Some(Axis {
            log: false,
            range: 0.0..n as f64 * step,
            bold: (0..=n).map(|i| i as f64 * step).collect(),
            light: Vec::new(),
        })
    }

    /// A log axis with labelled ticks at exactly `values` (the swept batch sizes or thread
    /// counts), with a margin either side.
    fn log_at(values: &[f64]) -> Axis {
        let logs: Vec<f64> = values.iter().map(|v| v.log10()).collect();
        let (lo, hi) = logs
            .iter()
            .fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(*v), b.max(*v)));
        let pad = ((hi - lo) * 0.06).max(0.05);
        Axis {
            log: true,
            range: lo - pad..hi + pad,
            bold: logs,
            light: Vec::new(),
        }
    }

    /// A value in axis units (`None` for a log axis and a value that is not positive).
    fn at(&self, v: f64) -> Option<f64> {
        if !self.log {
            Some(v)
        } else if v > 0.0 && v.is_finite() {
            Some(v.log10())
        } else {
            None
        }
    }

    fn coord(&self) -> Ticked {
        Ticked {
            linear: self.range.clone().into(),
            bold: self.bold.clone(),
            light: self.light.clone(),
        }
    }

    fn label(&self, t: f64) -> String {
        si(if self.log { 10f64.powf(t) } else { t })
    }
}

/// A linear coordinate with the ticks of an [`Axis`] (plotters' `WithKeyPoints` would lose
/// the label formatter that `configure_mesh` needs).
struct Ticked {
    linear: RangedCoordf64,
    bold: Vec<f64>,
    light: Vec<f64>,
}

impl Ranged for Ticked {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.linear.map(value, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            self.light.clone()
        } else {
            self.bold.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.linear.range()
    }
}

/// Renders an SVG of `size` with `draw` and writes it to `path`.
fn render(
    path: &Path,
    size: (u32, u32),
    draw: impl FnOnce(&Area<'_>) -> DrawResult<()>,
) -> Result<(), String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE)
            .and_then(|_| draw(&root))
            .and_then(|_| root.present())
            .map_err(|e| format!("drawing {}: {e}", path.display()))?;
    }
    std::fs::write(path, svg).map_err(|e| format!("writing {}: {e}", path.display()))
}

/// Removes a chart left by an earlier report, so a skipped chart is not mistaken for a
/// current one.
fn remove_stale(path: &Path) -> Result<(), String> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(format!("removing stale {}: {e}", path.display()))
        }
        _ => Ok(()),
    }
}

/// Rough width in pixels of `text` at font size `size` (plotters' SVG text is
/// `size / 1.24` px high).
fn text_px(text: &str, size: f64) -> i32 {
    (text.chars().count() as f64 * size * 0.45).ceil() as i32
}

/// The legend's entries for a chart `width` px wide, in rows: each engine with its x
/// offset in its row.
fn legend_rows<'e>(width: u32, engines: &[&'e String]) -> Vec<Vec<(&'e String, i32)>> {
    let mut rows: Vec<Vec<(&String, i32)>> = vec![Vec::new()];
    let mut x = 0;
    for e in engines {
        let step = 18 + text_px(e, 14.0) + 22;
        if x > 0 && x + step > width as i32 - 40 {
            rows.push(Vec::new());
            x = 0;
        }
        if let Some(row) = rows.last_mut() {
            row.push((e, x));
        }
        x += step;
    }
    rows
}

/// Height of the title and legend of a chart `width` px wide.
fn header_height(width: u32, engines: &[&String]) -> u32 {
    50 + 22 * legend_rows(width, engines).len() as u32
}

/// Charts up to this wide have their title and legend centred; wider ones (many cells)
/// have them at the left, where a viewer opens them.
const CENTRED_UP_TO: u32 = 1400;

/// Draws the title and a legend of engine colours across the top of `root`, and returns
/// the area below them.
fn header<'a>(root: &Area<'a>, title: &str, engines: &[&String]) -> DrawResult<Area<'a>> {
    let (width, _) = root.dim_in_pixel();
    let w = width as i32;
    let centred = width <= CENTRED_UP_TO;
    let rows = legend_rows(width, engines);
    let (top, body) = root.split_vertically(header_height(width, engines));
    let (x, h_pos) = if centred {
        (w / 2, HPos::Center)
    } else {
        (70, HPos::Left)
    };
    top.draw(&Text::new(
        title.to_string(),
        (x, 10),
        TextStyle::from((FONT, 22).into_font()).pos(Pos::new(h_pos, VPos::Top)),
    ))?;
    let name_style =
        TextStyle::from((FONT, 14).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    for (i, row) in rows.iter().enumerate() {
        let row_width = row.last().map_or(0, |(e, x)| x + 18 + text_px(e, 14.0));
        let x0 = if centred { (w - row_width) / 2 } else { 70 };
        let y = 44 + 22 * i as i32;
        for (e, x) in row {
            top.draw(&Rectangle::new(
                [(x0 + x, y), (x0 + x + 12, y + 12)],
                engine_colour(e).filled(),
            ))?;
            top.draw(&Text::new(
                e.to_string(),
                (x0 + x + 18, y + 6),
                name_style.clone(),
            ))?;
        }
    }
    Ok(body)
}

/// One panel of grouped bars: a group per label, a bar per engine.
struct Bars<'a> {
    caption: Option<&'a str>,
    y_desc: &'a str,
    labels: Vec<String>,
    /// `values[group][engine]`, in `Model::engines` order.
    values: Vec<Vec<Option<f64>>>,
}

/// Pixels per group of bars for `engines` bars.
fn group_px(engines: usize) -> u32 {
    (engines as u32 * 12 + 20).clamp(60, 100)
}

/// Height of the area under a panel for its rotated group labels.
fn label_area_px(labels: &[String]) -> u32 {
    let longest = labels.iter().map(|l| text_px(l, 13.0)).max().unwrap_or(0);
    (longest as u32 + 14).clamp(30, 320)
}

/// Height of a bar panel: caption, plot and labels.
fn bars_height(b: &Bars<'_>) -> u32 {
    let caption = if b.caption.is_some() { 30 } else { 0 };
    caption + 340 + label_area_px(&b.labels)
}

fn draw_bars(area: &Area<'_>, engines: &[String], b: &Bars<'_>, axis: &Axis) -> DrawResult<()> {
    let n = b.labels.len();
    let mut builder = ChartBuilder::on(area);
    if let Some(caption) = b.caption {
        builder.caption(caption, (FONT, 16));
    }
    let mut chart = builder
        .margin(8)
        .margin_right(24)
        .x_label_area_size(label_area_px(&b.labels))
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..n as f64, axis.coord())?;
    let y_fmt = |t: &f64| axis.label(*t);
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc(b.y_desc)
        .y_label_formatter(&y_fmt)
        .bold_line_style(GRID_BOLD)
        .light_line_style(GRID_LIGHT)
        .label_style((FONT, 13))
        .draw()?;
    let (lo, hi) = (axis.range.start, axis.range.end);
    chart.draw_series(
        (1..n).map(|i| PathElement::new(vec![(i as f64, lo), (i as f64, hi)], GRID_BOLD)),
    )?;
    let m = engines.len().max(1) as f64;
    let width = 0.84 / m;
    for (j, engine) in engines.iter().enumerate() {
        let colour = engine_colour(engine);
        chart.draw_series(b.values.iter().enumerate().filter_map(|(i, row)| {
            let y = axis.at(row[j]?)?.min(hi);
            let x0 = i as f64 + 0.08 + j as f64 * width;
            Some(Rectangle::new(
                [(x0 + width * 0.06, lo), (x0 + width * 0.94, y)],
                colour.filled(),
            ))
        }))?;
    }
    let (bx, by) = area.get_base_pixel();
    let style = TextStyle::from((FONT, 13).into_font().transform(FontTransform::Rotate270))
        .pos(Pos::new(HPos::Right, VPos::Center));
    for (i, label) in b.labels.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(i as f64 + 0.5, lo));
        area.draw(&Text::new(
            label.clone(),
            (x - bx, y - by + 8),
            style.clone(),
        ))?;
    }
    Ok(())
}

/// Draws `panels` (with their axes) stacked under a title and legend into `path`: wide
/// enough for the group count, legend limited to the engines with a bar.
fn bar_chart(
    path: &Path,
    title: &str,
    engines: &[String],
    panels: &[(Bars<'_>, Axis)],
) -> Result<(), String> {
    let groups = panels
        .iter()
        .map(|(b, _)| b.labels.len())
        .max()
        .unwrap_or(0) as u32;
    let width = (110 + groups * group_px(engines.len())).max(760);
    let shown: Vec<&String> = engines
        .iter()
        .enumerate()
        .filter(|(j, _)| {
            panels.iter().any(|(b, a)| {
                b.values
                    .iter()
                    .any(|row| row[*j].and_then(|v| a.at(v)).is_some())
            })
        })
        .map(|(_, e)| e)
        .collect();
    let heights: Vec<u32> = panels.iter().map(|(b, _)| bars_height(b)).collect();
    let height = header_height(width, &shown) + heights.iter().sum::<u32>();
    render(path, (width, height), |root| {
        let mut rest = header(root, title, &shown)?;
        for ((b, axis), h) in panels.iter().zip(&heights) {
            let (panel, below) = rest.split_vertically(*h);
            draw_bars(&panel, engines, b, axis)?;
            rest = below;
        }
        Ok(())
    })
}

/// Bars of one figure for the cells where some engine has it (a log axis over the positive
/// values, or a linear one from 0); `None` when no cell has it.
fn bars_of<'a>(
    m: &Model,
    caption: Option<&'a str>,
    y_desc: &'a str,
    log: bool,
    f: fn(&Figures) -> Option<f64>,
) -> Option<(Bars<'a>, Axis)> {
    let mut labels = Vec::new();
    let mut values = Vec::new();
    for c in 0..m.cells.len() {
        let row: Vec<Option<f64>> = (0..m.engines.len())
            .map(|e| m.figure(c, e, f).filter(|v| !log || *v > 0.0))
            .collect();
        if row.iter().any(Option::is_some) {
            labels.push(m.label(c, true));
            values.push(row);
        }
    }
    let all = values.iter().flatten().flatten().copied();
    let axis = if log {
        Axis::log(all)
    } else {
        Axis::linear(all)
    }?;
    let bars = Bars {
        caption,
        y_desc,
        labels,
        values,
    };
    Some((bars, axis))
}

fn throughput_chart(path: &Path, m: &Model) -> Result<Option<String>, String> {
    let Some(panel) = bars_of(m, None, "ops/s (median, log scale)", true, |f| {
        f.ops_per_sec
    }) else {
        remove_stale(path)?;
        return Ok(Some("no cell has a throughput".to_string()));
    };
    bar_chart(path, "Throughput per cell (ops/s)", &m.engines, &[panel])?;
    Ok(None)
}

fn latency_chart(path: &Path, m: &Model) -> Result<Option<String>, String> {
    let panels: Vec<(Bars<'_>, Axis)> = [
        bars_of(m, Some("p50"), "p50 µs (median, log scale)", true, |f| {
            f.p50_us
        }),
        bars_of(m, Some("p99"), "p99 µs (median, log scale)", true, |f| {
            f.p99_us
        }),
    ]
    .into_iter()
    .flatten()
    .collect();
    if panels.is_empty() {
        remove_stale(path)?;
        return Ok(Some("no cell has a latency".to_string()));
    }
    bar_chart(path, "Latency per operation (µs)", &m.engines, &panels)?;
    Ok(None)
}

fn amplification_chart(path: &Path, m: &Model) -> Result<Option<String>, String> {
    let panels: Vec<(Bars<'_>, Axis)> = [
        bars_of(
            m,
            Some("Write amplification (block-device writes / logical writes, log scale)"),
            "disk write amp",
            true,
            |f| f.disk_write_amp,
        ),
        bars_of(
            m,
            Some("Space amplification (database bytes / live bytes)"),
            "space amp",
            false,
            |f| f.space_amp,
        ),
    ]
    .into_iter()
    .flatten()
    .collect();
    if panels.is_empty() {
        remove_stale(path)?;
        return Ok(Some(
            "no cell has a write or space amplification".to_string(),
        ));
    }
    bar_chart(path, "Amplification", &m.engines, &panels)?;
    Ok(None)
}

/// A dimension that cells can be swept over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sweep {
    Batch,
    Threads,
}

impl Sweep {
    fn of(self, c: &Cell) -> usize {
        match self {
            Sweep::Batch => c.batch,
            Sweep::Threads => c.threads,
        }
    }

    /// The cell without this dimension: cells with the same family differ only in it.
    fn family(self, c: &Cell) -> Cell {
        let mut f = c.clone();
        match self {
            Sweep::Batch => f.batch = 0,
            Sweep::Threads => f.threads = 0,
        }
        f
    }

    fn file(self) -> &'static str {
        match self {
            Sweep::Batch => "batch_scaling.svg",
            Sweep::Threads => "thread_scaling.svg",
        }
    }

    fn noun(self) -> &'static str {
        match self {
            Sweep::Batch => "batch size",
            Sweep::Threads => "thread count",
        }
    }
}

/// The families of cells that differ only in `sweep`, with at least two values of it
/// measured: (a cell of the family, its cells sorted by the swept value).
fn families(m: &Model, sweep: Sweep) -> Vec<(usize, Vec<usize>)> {
    let mut by_family: BTreeMap<Cell, Vec<usize>> = BTreeMap::new();
    for (c, cell) in m.cells.iter().enumerate() {
        let measured = (0..m.engines.len()).any(|e| m.figure(c, e, |f| f.ops_per_sec).is_some());
        // A zero (never written by `run`) has no place on a log axis.
        if measured && sweep.of(cell) > 0 {
            by_family.entry(sweep.family(cell)).or_default().push(c);
        }
    }
    let mut out: Vec<(usize, Vec<usize>)> = by_family
        .into_values()
        .filter(|cells| cells.len() >= 2)
        .map(|mut cells| {
            cells.sort_by_key(|c| sweep.of(&m.cells[*c]));
            (cells[0], cells)
        })
        .collect();
    out.sort_by_key(|(first, _)| *first);
    out
}

fn scaling_chart(charts: &Path, m: &Model, sweep: Sweep) -> Result<Option<String>, String> {
    let path = charts.join(sweep.file());
    let fams = families(m, sweep);
    if fams.is_empty() {
        remove_stale(&path)?;
        return Ok(Some(format!(
            "no cell was measured at two or more {}s with everything else the same",
            sweep.noun()
        )));
    }
    let shown: Vec<&String> = m
        .engines
        .iter()
        .enumerate()
        .filter(|(e, _)| {
            fams.iter().any(|(_, cells)| {
                cells
                    .iter()
                    .any(|c| m.figure(*c, *e, |f| f.ops_per_sec).is_some())
            })
        })
        .map(|(_, e)| e)
        .collect();
    let cols = fams.len().min(3);
    let rows = fams.len().div_ceil(cols);
    let (pw, ph) = (460u32, 340u32);
    let width = pw * cols as u32 + 20;
    let size = (width, header_height(width, &shown) + ph * rows as u32);
    let title = format!("Throughput by {} (ops/s, log-log)", sweep.noun());
    render(&path, size, |root| {
        let body = header(root, &title, &shown)?;
        let panels = body.split_evenly((rows, cols));
        for ((first, cells), area) in fams.iter().zip(&panels) {
            let caption = m.cells[*first].describe(true, Some(sweep), m.with_num);
            scaling_panel(area, m, sweep, &caption, cells)?;
        }
        Ok(())
    })?;
    Ok(None)
}

fn scaling_panel(
    area: &Area<'_>,
    m: &Model,
    sweep: Sweep,
    caption: &str,
    cells: &[usize],
) -> DrawResult<()> {
    let xs: Vec<f64> = cells
        .iter()
        .map(|c| sweep.of(&m.cells[*c]) as f64)
        .collect();
    let x_axis = Axis::log_at(&xs);
    let lines: Vec<(usize, Vec<(f64, f64)>)> = (0..m.engines.len())
        .map(|e| {
            let points = cells
                .iter()
                .zip(&xs)
                .filter_map(|(c, x)| {
                    let v = m.figure(*c, e, |f| f.ops_per_sec)?;
                    (v > 0.0).then(|| (x.log10(), v))
                })
                .collect();
            (e, points)
        })
        .collect();
    let Some(y_axis) = Axis::log(lines.iter().flat_map(|(_, p)| p.iter().map(|(_, v)| *v))) else {
        return Ok(());
    };
    let mut chart = ChartBuilder::on(area)
        .caption(caption, (FONT, 15))
        .margin(10)
        .margin_right(20)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d(x_axis.coord(), y_axis.coord())?;
    let x_fmt = |t: &f64| x_axis.label(*t);
    let y_fmt = |t: &f64| y_axis.label(*t);
    chart
        .configure_mesh()
        .x_desc(sweep.noun())
        .y_desc("ops/s")
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .bold_line_style(GRID_BOLD)
        .light_line_style(GRID_LIGHT)
        .label_style((FONT, 13))
        .draw()?;
    for (e, points) in lines {
        let colour = engine_colour(&m.engines[e]);
        let points: Vec<(f64, f64)> = points
            .into_iter()
            .filter_map(|(x, v)| Some((x, y_axis.at(v)?)))
            .collect();
        chart.draw_series(LineSeries::new(points.clone(), colour.stroke_width(2)))?;
        chart.draw_series(
            points
                .into_iter()
                .map(|p| Circle::new(p, 4, colour.filled())),
        )?;
    }
    Ok(())
}

// ----------------------------------------------------------------------------------- tests

#[cfg(test)]
mod tests {
    use super::*;

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
