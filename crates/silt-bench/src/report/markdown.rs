//! The report's markdown: the throughput, latency and resource tables, who wins, what did
//! not run, and the links to the charts. Reads the model; draws nothing.

use super::*;
use super::{charts::*, model::*};

/// Why each chart was not drawn (`None`: it was).
pub(super) struct Skipped {
    pub(super) throughput: Option<String>,
    pub(super) latency: Option<String>,
    pub(super) batch: Option<String>,
    pub(super) threads: Option<String>,
    pub(super) amplification: Option<String>,
}

pub(super) fn fmt_rate(x: f64) -> String {
    if x < 100.0 {
        format!("{x:.1}")
    } else {
        grouped(x)
    }
}

pub(super) fn fmt_us(x: f64) -> String {
    if x < 10.0 {
        format!("{x:.2}")
    } else if x < 100.0 {
        format!("{x:.1}")
    } else {
        grouped(x)
    }
}

pub(super) fn fmt_2(x: f64) -> String {
    format!("{x:.2}")
}

pub(super) fn fmt_ratio(x: f64) -> String {
    format!("{x:.2}×")
}

/// A markdown table, padded so that its source reads as a table too. `align` has an `l`
/// for each column to left-align (text); the others (figures) are right-aligned.
pub(super) fn md_table(header: &[String], rows: &[Vec<String>], align: &str) -> String {
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
pub(super) fn chart_link(charts: &Path, file: &str, alt: &str, skipped: &Option<String>) -> String {
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

pub(super) fn markdown(
    m: &Model,
    results: &[EngineResult],
    charts: &Path,
    title_note: &str,
    skipped: &Skipped,
    txn: &[String],
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

    md.extend(txn.iter().cloned());

    md.push("## Not measured".to_string());
    md.push(String::new());
    md.push(problems(results, &m.baseline));
    md.push(String::new());
    md.join("\n")
}

pub(super) fn throughput_table(m: &Model, base: Option<usize>) -> String {
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
pub(super) fn wins(m: &Model, base: Option<usize>) -> Vec<String> {
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

pub(super) fn latency_table(m: &Model) -> String {
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

pub(super) fn resources_table(m: &Model) -> String {
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
pub(super) fn problems(results: &[EngineResult], baseline: &str) -> String {
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
pub(super) fn relative_link(from: &Path, to: &Path) -> PathBuf {
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
