//! The report's SVG charts (plotters, SVG backend only): throughput, latency,
//! amplification and scaling, with the axis, legend and bar layout they share. Reads the
//! model; writes files under `charts/`.

use super::model::*;
use super::*;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

pub(super) type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
pub(super) type DrawResult<T> = Result<T, DrawingAreaErrorKind<std::io::Error>>;

pub(super) const FONT: &str = "sans-serif";
pub(super) const GRID_BOLD: RGBColor = RGBColor(205, 205, 205);
pub(super) const GRID_LIGHT: RGBColor = RGBColor(238, 238, 238);

/// The fixed colour of an engine: the known ones by name, any other by a hash of its name.
pub(super) fn engine_colour(engine: &str) -> RGBColor {
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
pub(super) fn si(v: f64) -> String {
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
pub(super) struct Axis {
    pub(super) log: bool,
    pub(super) range: Range<f64>,
    /// Labelled ticks, in axis units.
    pub(super) bold: Vec<f64>,
    /// Unlabelled grid lines, in axis units.
    pub(super) light: Vec<f64>,
}

impl Axis {
    /// A log axis covering `values` (the positive ones) with ticks at decades (and at 2 and 5
    /// when it spans at most two decades), or `None` without a positive value.
    pub(super) fn log(values: impl Iterator<Item = f64>) -> Option<Axis> {
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
    pub(super) fn linear(values: impl Iterator<Item = f64>) -> Option<Axis> {
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
    pub(super) fn log_at(values: &[f64]) -> Axis {
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
    pub(super) fn at(&self, v: f64) -> Option<f64> {
        if !self.log {
            Some(v)
        } else if v > 0.0 && v.is_finite() {
            Some(v.log10())
        } else {
            None
        }
    }

    pub(super) fn coord(&self) -> Ticked {
        Ticked {
            linear: self.range.clone().into(),
            bold: self.bold.clone(),
            light: self.light.clone(),
        }
    }

    pub(super) fn label(&self, t: f64) -> String {
        si(if self.log { 10f64.powf(t) } else { t })
    }
}

/// A linear coordinate with the ticks of an [`Axis`] (plotters' `WithKeyPoints` would lose
/// the label formatter that `configure_mesh` needs).
pub(super) struct Ticked {
    pub(super) linear: RangedCoordf64,
    pub(super) bold: Vec<f64>,
    pub(super) light: Vec<f64>,
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
pub(super) fn render(
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
pub(super) fn remove_stale(path: &Path) -> Result<(), String> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(format!("removing stale {}: {e}", path.display()))
        }
        _ => Ok(()),
    }
}

/// Rough width in pixels of `text` at font size `size` (plotters' SVG text is
/// `size / 1.24` px high).
pub(super) fn text_px(text: &str, size: f64) -> i32 {
    (text.chars().count() as f64 * size * 0.45).ceil() as i32
}

/// The legend's entries for a chart `width` px wide, in rows: each engine with its x
/// offset in its row.
pub(super) fn legend_rows<'e>(width: u32, engines: &[&'e String]) -> Vec<Vec<(&'e String, i32)>> {
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
pub(super) fn header_height(width: u32, engines: &[&String]) -> u32 {
    50 + 22 * legend_rows(width, engines).len() as u32
}

/// Charts up to this wide have their title and legend centred; wider ones (many cells)
/// have them at the left, where a viewer opens them.
pub(super) const CENTRED_UP_TO: u32 = 1400;

/// Draws the title and a legend of engine colours across the top of `root`, and returns
/// the area below them.
pub(super) fn header<'a>(
    root: &Area<'a>,
    title: &str,
    engines: &[&String],
) -> DrawResult<Area<'a>> {
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
pub(super) struct Bars<'a> {
    pub(super) caption: Option<&'a str>,
    pub(super) y_desc: &'a str,
    pub(super) labels: Vec<String>,
    /// `values[group][engine]`, in `Model::engines` order.
    pub(super) values: Vec<Vec<Option<f64>>>,
}

/// Pixels per group of bars for `engines` bars.
pub(super) fn group_px(engines: usize) -> u32 {
    (engines as u32 * 12 + 20).clamp(60, 100)
}

/// Height of the area under a panel for its rotated group labels.
pub(super) fn label_area_px(labels: &[String]) -> u32 {
    let longest = labels.iter().map(|l| text_px(l, 13.0)).max().unwrap_or(0);
    (longest as u32 + 14).clamp(30, 320)
}

/// Height of a bar panel: caption, plot and labels.
pub(super) fn bars_height(b: &Bars<'_>) -> u32 {
    let caption = if b.caption.is_some() { 30 } else { 0 };
    caption + 340 + label_area_px(&b.labels)
}

pub(super) fn draw_bars(
    area: &Area<'_>,
    engines: &[String],
    b: &Bars<'_>,
    axis: &Axis,
) -> DrawResult<()> {
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
pub(super) fn bar_chart(
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
pub(super) fn bars_of<'a>(
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

pub(super) fn throughput_chart(path: &Path, m: &Model) -> Result<Option<String>, String> {
    let Some(panel) = bars_of(m, None, "ops/s (median, log scale)", true, |f| {
        f.ops_per_sec
    }) else {
        remove_stale(path)?;
        return Ok(Some("no cell has a throughput".to_string()));
    };
    bar_chart(path, "Throughput per cell (ops/s)", &m.engines, &[panel])?;
    Ok(None)
}

pub(super) fn latency_chart(path: &Path, m: &Model) -> Result<Option<String>, String> {
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

pub(super) fn amplification_chart(path: &Path, m: &Model) -> Result<Option<String>, String> {
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
pub(super) enum Sweep {
    Batch,
    Threads,
}

impl Sweep {
    pub(super) fn of(self, c: &Cell) -> usize {
        match self {
            Sweep::Batch => c.batch,
            Sweep::Threads => c.threads,
        }
    }

    /// The cell without this dimension: cells with the same family differ only in it.
    pub(super) fn family(self, c: &Cell) -> Cell {
        let mut f = c.clone();
        match self {
            Sweep::Batch => f.batch = 0,
            Sweep::Threads => f.threads = 0,
        }
        f
    }

    pub(super) fn file(self) -> &'static str {
        match self {
            Sweep::Batch => "batch_scaling.svg",
            Sweep::Threads => "thread_scaling.svg",
        }
    }

    pub(super) fn noun(self) -> &'static str {
        match self {
            Sweep::Batch => "batch size",
            Sweep::Threads => "thread count",
        }
    }
}

/// The families of cells that differ only in `sweep`, with at least two values of it
/// measured: (a cell of the family, its cells sorted by the swept value).
pub(super) fn families(m: &Model, sweep: Sweep) -> Vec<(usize, Vec<usize>)> {
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

pub(super) fn scaling_chart(
    charts: &Path,
    m: &Model,
    sweep: Sweep,
) -> Result<Option<String>, String> {
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

pub(super) fn scaling_panel(
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
