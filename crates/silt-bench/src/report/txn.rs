//! The report's transactional section: tpcc's tpmC, NOPM and abort rate; queue_indexed's
//! rows/s and worst delete latency over time (seed 002's figure, `queue_indexed.svg`) with
//! the regime checks; txn_batch_sweep's time per row and peak RSS per batch size
//! (`txn_batch_sweep.svg`). Every figure is the median over a cell's ok repeats; the
//! charts draw the first ok repeat of each queue cell.

use super::charts::*;
use super::charts::{Area, DrawResult};
use super::markdown::*;
use super::model::*;
use super::*;
use plotters::prelude::*;

/// Seconds at the start of a queue run that the worst-delete figure leaves out (the
/// warm-up: the preload's memtables and first compactions).
pub(super) const WARMUP_SECS: usize = 10;
/// The width of the windows the steady rows/s is taken over.
pub(super) const WINDOW_SECS: usize = 10;

/// The regime figures of one `queue_indexed` run, from its per-second series.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Regime {
    /// Mean rows inserted per second over the first minute (or the first half of a
    /// shorter run).
    pub(super) first: f64,
    /// The lowest mean rows/s of any whole 10-second window after that (`None`: no
    /// whole window left).
    pub(super) steady_min: Option<f64>,
    /// The worst delete latency (µs) of any second after the warm-up.
    pub(super) worst_after_warmup_us: Option<f64>,
}

impl Regime {
    pub(super) fn of(r: &EngineResult) -> Option<Regime> {
        let ins = r.inserted_per_sec.as_ref()?;
        let worst = r.worst_delete_us_per_sec.as_ref()?;
        if ins.is_empty() {
            return None;
        }
        // The last second is partial: left out.
        let whole = ins.len().saturating_sub(1);
        let first_len = 60.min(whole / 2).max(1);
        let first = ins.iter().take(first_len).sum::<u64>() as f64 / first_len as f64;
        let steady_min = ins[first_len.min(ins.len())..whole.max(first_len)]
            .chunks_exact(WINDOW_SECS)
            .map(|w| w.iter().sum::<u64>() as f64 / WINDOW_SECS as f64)
            .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.min(x))));
        let worst_after_warmup_us = worst
            .iter()
            .skip(WARMUP_SECS)
            .copied()
            .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))));
        Some(Regime {
            first,
            steady_min,
            worst_after_warmup_us,
        })
    }
}

type Key = (Cell, String);

/// The ok rows of `workload`, by cell and engine, in cell order then engine rank.
fn by_cell<'a>(
    results: &'a [EngineResult],
    workload: &str,
    baseline: &str,
) -> Vec<(Key, Vec<&'a EngineResult>)> {
    let mut groups: BTreeMap<(Cell, usize, String), Vec<&EngineResult>> = BTreeMap::new();
    for r in results
        .iter()
        .filter(|r| r.status == "ok" && r.workload == workload)
    {
        groups
            .entry((
                Cell::of(r),
                engine_rank(&r.engine, baseline),
                r.engine.clone(),
            ))
            .or_default()
            .push(r);
    }
    groups
        .into_iter()
        .map(|((c, _, e), rows)| ((c, e), rows))
        .collect()
}

fn med(rows: &[&EngineResult], f: impl Fn(&EngineResult) -> Option<f64>) -> Option<f64> {
    median_of(rows.iter().map(|r| f(r)))
}

fn us_per_row(r: &EngineResult) -> Option<f64> {
    r.txn.as_ref()?.get("us_per_row")?.as_f64()
}

fn fmt_pct(x: f64) -> String {
    format!("{:.2}%", x * 100.0)
}

fn fmt_ms(us: f64) -> String {
    fmt_us(us / 1000.0)
}

/// The markdown of the section (empty without a tpcc, queue_indexed or txn_batch_sweep
/// row), and the charts it links, drawn into `charts`.
pub(super) fn section(
    results: &[EngineResult],
    baseline: &str,
    charts: &Path,
    link: &Path,
) -> Result<Vec<String>, String> {
    let tpcc = by_cell(results, "tpcc", baseline);
    let queue = by_cell(results, "queue_indexed", baseline);
    let sweep = by_cell(results, "txn_batch_sweep", baseline);
    let queue_svg = charts.join("queue_indexed.svg");
    let sweep_svg = charts.join("txn_batch_sweep.svg");
    if queue.is_empty() {
        remove_stale(&queue_svg)?;
    }
    if sweep.is_empty() {
        remove_stale(&sweep_svg)?;
    }
    if tpcc.is_empty() && queue.is_empty() && sweep.is_empty() {
        return Ok(Vec::new());
    }
    let mut md = vec!["## Transactions".to_string(), String::new()];
    if !tpcc.is_empty() {
        md.push("### tpcc".to_string());
        md.push(String::new());
        md.push(
            "tpmC here counts every completed transaction of the mix per minute; NOPM the \
             New-Orders per minute (TPC-C's own tpmC); abort rate the attempts that failed \
             with a retryable error and ran again, over all attempts."
                .to_string(),
        );
        md.push(String::new());
        let header = [
            "cell",
            "engine",
            "runs",
            "tpmC",
            "NOPM",
            "abort rate",
            "p99 µs",
        ]
        .map(String::from)
        .to_vec();
        let rows: Vec<Vec<String>> = tpcc
            .iter()
            .map(|((c, e), rows)| {
                vec![
                    format!(
                        "tpcc, {} threads, warehouses: {}",
                        c.threads,
                        rows[0].warehouses.unwrap_or(0)
                    ),
                    e.clone(),
                    rows.len().to_string(),
                    fmt_opt(med(rows, |r| r.tpmc), fmt_rate),
                    fmt_opt(med(rows, |r| r.nopm), fmt_rate),
                    fmt_opt(med(rows, |r| r.abort_rate), fmt_pct),
                    fmt_opt(med(rows, |r| r.p99_us), fmt_us),
                ]
            })
            .collect();
        md.push(md_table(&header, &rows, "ll"));
        md.push(String::new());
    }
    if !queue.is_empty() {
        md.push("### queue_indexed".to_string());
        md.push(String::new());
        md.push(format!(
            "Inserted rows/s over the whole run; first minute: the mean over the first 60 s \
             (or the first half of a shorter run); steady min: the lowest mean of any whole \
             {WINDOW_SECS}-second window after that; worst delete: the worst delete \
             transaction (first attempt to commit) of any second after the first \
             {WARMUP_SECS} s. Targets (issue 13): first minute / steady min ≤ 2, worst \
             delete < 10 ms."
        ));
        md.push(String::new());
        md.push(chart_link(
            link,
            "queue_indexed.svg",
            "queue_indexed over time",
            &queue_chart(&queue_svg, &queue)?,
        ));
        md.push(String::new());
        let header = [
            "cell",
            "engine",
            "runs",
            "rows/s",
            "first minute",
            "steady min",
            "first/steady",
            "worst delete ms",
            "max delete ms",
            "abort rate",
        ]
        .map(String::from)
        .to_vec();
        let rows: Vec<Vec<String>> = queue
            .iter()
            .map(|((c, e), rows)| {
                let regimes: Vec<Regime> = rows.iter().filter_map(|r| Regime::of(r)).collect();
                let m = |f: fn(&Regime) -> Option<f64>| median_of(regimes.iter().map(f));
                let first = m(|g| Some(g.first));
                let steady = m(|g| g.steady_min);
                vec![
                    format!(
                        "queue_indexed, batch {}, {} rows",
                        c.batch,
                        grouped(c.num as f64)
                    ),
                    e.clone(),
                    rows.len().to_string(),
                    fmt_opt(
                        med(rows, |r| Some(r.inserted? as f64 / r.seconds?)),
                        fmt_rate,
                    ),
                    fmt_opt(first, fmt_rate),
                    fmt_opt(steady, fmt_rate),
                    fmt_opt(
                        first
                            .zip(steady)
                            .and_then(|(f, s)| (s > 0.0).then(|| f / s)),
                        fmt_2,
                    ),
                    fmt_opt(m(|g| g.worst_after_warmup_us), fmt_ms),
                    fmt_opt(med(rows, |r| r.max_delete_us), fmt_ms),
                    fmt_opt(med(rows, |r| r.abort_rate), fmt_pct),
                ]
            })
            .collect();
        md.push(md_table(&header, &rows, "ll"));
        md.push(String::new());
    }
    if !sweep.is_empty() {
        md.push("### txn_batch_sweep".to_string());
        md.push(String::new());
        md.push(
            "Rows inserted with their three index entries, `batch` rows per transaction; \
             µs/row is the timed phase over the rows; vs best: µs/row over the engine's \
             best batch size's (issue 13's target at 1M: ≤ 1.5); peak RSS is the cell \
             process's."
                .to_string(),
        );
        md.push(String::new());
        md.push(chart_link(
            link,
            "txn_batch_sweep.svg",
            "txn_batch_sweep",
            &sweep_chart(&sweep_svg, &sweep)?,
        ));
        md.push(String::new());
        let header = [
            "engine",
            "rows",
            "batch",
            "runs",
            "rows/s",
            "µs/row",
            "vs best",
            "peak RSS MiB",
        ]
        .map(String::from)
        .to_vec();
        let mut best: BTreeMap<(String, u64), f64> = BTreeMap::new();
        for ((c, e), rows) in &sweep {
            if let Some(x) = med(rows, us_per_row) {
                let b = best.entry((e.clone(), c.num)).or_insert(x);
                *b = b.min(x);
            }
        }
        let mut ordered: Vec<&(Key, Vec<&EngineResult>)> = sweep.iter().collect();
        ordered.sort_by_key(|((c, e), _)| (engine_rank(e, baseline), e.clone(), c.num, c.batch));
        let rows: Vec<Vec<String>> = ordered
            .iter()
            .map(|((c, e), rows)| {
                let x = med(rows, us_per_row);
                let b = best.get(&(e.clone(), c.num)).copied();
                vec![
                    e.clone(),
                    grouped(c.num as f64),
                    grouped(c.batch as f64),
                    rows.len().to_string(),
                    fmt_opt(med(rows, |r| r.ops_per_sec), fmt_rate),
                    fmt_opt(x, fmt_us),
                    fmt_opt(x.zip(b).map(|(x, b)| x / b), fmt_2),
                    fmt_opt(
                        med(rows, |r| {
                            r.peak_rss_bytes.map(|b| b as f64 / (1u64 << 20) as f64)
                        }),
                        |x| format!("{x:.0}"),
                    ),
                ]
            })
            .collect();
        md.push(md_table(&header, &rows, "l"));
        md.push(String::new());
    }
    Ok(md)
}

/// One line per engine (and cell, when there are several).
struct Line {
    name: String,
    colour: RGBColor,
    points: Vec<(f64, f64)>,
}

/// A panel of lines on a linear or log-10 x axis (`x_log`: the points' x are log10) and a
/// log y axis.
fn line_panel(
    area: &Area<'_>,
    caption: &str,
    x_desc: &str,
    y_desc: &str,
    x_axis: &Axis,
    lines: &[Line],
) -> DrawResult<()> {
    let Some(y_axis) = Axis::log(lines.iter().flat_map(|l| l.points.iter().map(|p| p.1))) else {
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
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .bold_line_style(GRID_BOLD)
        .light_line_style(GRID_LIGHT)
        .label_style((FONT, 13))
        .draw()?;
    for l in lines {
        let points: Vec<(f64, f64)> = l
            .points
            .iter()
            .filter_map(|&(x, v)| Some((x, y_axis.at(v)?)))
            .collect();
        chart.draw_series(LineSeries::new(points.clone(), l.colour.stroke_width(2)))?;
        if x_axis.log {
            chart.draw_series(
                points
                    .into_iter()
                    .map(|p| Circle::new(p, 4, l.colour.filled())),
            )?;
        }
    }
    Ok(())
}

/// Seed 002's figure: rows inserted per second (top) and the worst delete latency per
/// second (bottom), both log scale, over the run's seconds.
fn queue_chart(path: &Path, cells: &[(Key, Vec<&EngineResult>)]) -> Result<Option<String>, String> {
    let several = cells
        .iter()
        .map(|((c, _), _)| c)
        .collect::<BTreeSet<_>>()
        .len()
        > 1;
    let mut top = Vec::new();
    let mut bottom = Vec::new();
    let mut names = Vec::new();
    for ((c, e), rows) in cells {
        let r = rows[0];
        let name = if several {
            format!("{e} b{} n{}", c.batch, si(c.num as f64))
        } else {
            e.clone()
        };
        let colour = engine_colour(e);
        if let Some(s) = &r.inserted_per_sec {
            let whole = s.len().saturating_sub(1).max(1);
            top.push(Line {
                name: name.clone(),
                colour,
                points: s[..whole.min(s.len())]
                    .iter()
                    .enumerate()
                    .map(|(i, &v)| (i as f64, v as f64))
                    .collect(),
            });
        }
        if let Some(s) = &r.worst_delete_us_per_sec {
            bottom.push(Line {
                name: name.clone(),
                colour,
                points: s
                    .iter()
                    .enumerate()
                    .map(|(i, &v)| (i as f64, v / 1000.0))
                    .collect(),
            });
        }
        names.push(name);
    }
    let secs = top
        .iter()
        .chain(&bottom)
        .flat_map(|l| l.points.iter().map(|p| p.0))
        .fold(0.0f64, f64::max);
    let Some(x_axis) = Axis::linear([secs.max(1.0)].into_iter()) else {
        remove_stale(path)?;
        return Ok(Some("no per-second figures".into()));
    };
    let shown: Vec<&String> = names.iter().collect();
    let width = 920u32;
    let size = (width, header_height(width, &shown) + 2 * 340);
    render(path, size, |root| {
        let body = header(root, "queue_indexed over time (log scale)", &shown)?;
        let (a, b) = body.split_vertically(340);
        line_panel(
            &a,
            "rows inserted per second",
            "seconds",
            "rows/s",
            &x_axis,
            &top,
        )?;
        line_panel(
            &b,
            "worst delete transaction per second",
            "seconds",
            "ms",
            &x_axis,
            &bottom,
        )
    })?;
    Ok(None)
}

/// log10 of the batch size, µs per row, peak RSS MiB.
type SweepPoint = (f64, f64, f64);

/// Time per row (top) and peak RSS (bottom) by rows per transaction, log-log, a line per
/// engine (and row count).
fn sweep_chart(path: &Path, cells: &[(Key, Vec<&EngineResult>)]) -> Result<Option<String>, String> {
    let mut series: BTreeMap<(String, u64), Vec<SweepPoint>> = BTreeMap::new();
    for ((c, e), rows) in cells {
        let (Some(t), Some(rss)) = (
            med(rows, us_per_row),
            med(rows, |r| {
                r.peak_rss_bytes.map(|b| b as f64 / (1u64 << 20) as f64)
            }),
        ) else {
            continue;
        };
        series
            .entry((e.clone(), c.num))
            .or_default()
            .push(((c.batch as f64).log10(), t, rss));
    }
    let batches: BTreeSet<u64> = cells.iter().map(|((c, _), _)| c.batch as u64).collect();
    if series.values().all(|s| s.len() < 2) {
        remove_stale(path)?;
        return Ok(Some(
            "no engine was measured at two or more batch sizes".into(),
        ));
    }
    let nums = series.keys().map(|(_, n)| *n).collect::<BTreeSet<_>>();
    let name = |e: &String, n: u64| {
        if nums.len() > 1 {
            format!("{e} n{}", si(n as f64))
        } else {
            e.clone()
        }
    };
    let mk = |pick: fn(&SweepPoint) -> f64| -> Vec<Line> {
        series
            .iter()
            .map(|((e, n), pts)| Line {
                name: name(e, *n),
                colour: engine_colour(e),
                points: pts.iter().map(|p| (p.0, pick(p))).collect(),
            })
            .collect()
    };
    let top = mk(|p| p.1);
    let bottom = mk(|p| p.2);
    let names: Vec<String> = top.iter().map(|l| l.name.clone()).collect();
    let shown: Vec<&String> = names.iter().collect();
    let x_axis = Axis::log_at(&batches.iter().map(|&b| b as f64).collect::<Vec<_>>());
    let width = 920u32;
    let size = (width, header_height(width, &shown) + 2 * 340);
    render(path, size, |root| {
        let body = header(
            root,
            "txn_batch_sweep: bulk insert with three indexes (log-log)",
            &shown,
        )?;
        let (a, b) = body.split_vertically(340);
        line_panel(
            &a,
            "time per row",
            "rows per transaction",
            "µs/row",
            &x_axis,
            &top,
        )?;
        line_panel(
            &b,
            "peak RSS",
            "rows per transaction",
            "MiB",
            &x_axis,
            &bottom,
        )
    })?;
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue_row(per_sec: Vec<u64>, worst_ms: Vec<f64>) -> EngineResult {
        let v = serde_json::json!({
            "engine": "silt", "workload": "queue_indexed", "status": "ok", "threads": 2,
            "batch": 1, "sync": "none", "pattern": "sequential", "num": 1000,
            "key_bytes": 16, "value_bytes": 100, "cache_bytes": 0, "fsync_delay_us": 0,
            "repeat": 0, "date": "2026-11-25",
            "inserted": per_sec.iter().sum::<u64>(), "seconds": per_sec.len() as f64,
            "inserted_per_sec": per_sec,
            "worst_delete_us_per_sec": worst_ms.iter().map(|m| m * 1000.0).collect::<Vec<f64>>(),
        });
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn the_regime_is_the_first_minute_against_the_worst_window_after_it() {
        // 150 s: 1000 rows/s for a minute, then 400 for 20 s, then 900; the last second
        // partial. Worst delete 50 ms in second 3 (warm-up), then 4 ms at most.
        let mut s = vec![1000u64; 60];
        s.extend([400u64; 20]);
        s.extend([900u64; 70]);
        s.push(5);
        let mut w = vec![1.0; 151];
        w[3] = 50.0;
        w[100] = 4.0;
        let g = Regime::of(&queue_row(s, w)).unwrap();
        assert_eq!(g.first, 1000.0);
        assert_eq!(g.steady_min, Some(400.0));
        assert_eq!(g.worst_after_warmup_us, Some(4000.0));
        // A 20-second run: the first 10 s against the one whole window after them.
        let g = Regime::of(&queue_row(vec![100; 21], vec![2.0; 21])).unwrap();
        assert_eq!((g.first, g.steady_min), (100.0, Some(100.0)));
    }
}
