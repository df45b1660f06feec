//! The report's model: results grouped into cells (one workload at one configuration),
//! medians over repeats per engine (`Figures`), the engine order and the ratios against the
//! baseline. No formatting here.

use super::*;

/// A cell's identity: everything that says what was measured, but not by which engine.
/// `threads` and `batch` come last so that sweeps sort together, smallest first.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Cell {
    pub(super) workload: String,
    pub(super) base_workload: Option<String>,
    pub(super) sync: String,
    pub(super) pattern: String,
    pub(super) num: u64,
    pub(super) key_bytes: usize,
    pub(super) value_bytes: usize,
    pub(super) range_size: Option<usize>,
    pub(super) fsync_delay_us: u64,
    pub(super) read_percent: Option<u32>,
    pub(super) threads: usize,
    pub(super) batch: usize,
}

impl Cell {
    pub(super) fn of(r: &EngineResult) -> Cell {
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
    pub(super) fn describe(&self, short: bool, omit: Option<Sweep>, with_num: bool) -> String {
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
pub(super) struct Figures {
    pub(super) runs: usize,
    pub(super) ops_per_sec: Option<f64>,
    pub(super) p50_us: Option<f64>,
    pub(super) p99_us: Option<f64>,
    pub(super) max_us: Option<f64>,
    pub(super) cpu_s: Option<f64>,
    pub(super) rss_mib: Option<f64>,
    pub(super) write_amp: Option<f64>,
    pub(super) disk_write_amp: Option<f64>,
    pub(super) space_amp: Option<f64>,
}

impl Figures {
    pub(super) fn of(rows: &[&EngineResult]) -> Figures {
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
pub(super) const ENGINE_ORDER: &[&str] = &["silt", "rocksdb", "tidesdb", "sqlite", "fjall", "redb"];

/// Sort key of an engine, before its name: the baseline, then [`ENGINE_ORDER`], then the
/// rest (which the name then orders).
pub(super) fn engine_rank(engine: &str, baseline: &str) -> usize {
    if engine == baseline {
        return 0;
    }
    ENGINE_ORDER
        .iter()
        .position(|e| *e == engine)
        .map_or(ENGINE_ORDER.len() + 1, |i| i + 1)
}

/// The ok results, as cells × engines of medians.
pub(super) struct Model {
    pub(super) baseline: String,
    /// Cells with at least one ok row: workloads in the order they first appear in the
    /// results, the rest of the identity sorted.
    pub(super) cells: Vec<Cell>,
    /// Engines with at least one ok row, in [`engine_rank`] order.
    pub(super) engines: Vec<String>,
    /// `figs[cell][engine]`.
    pub(super) figs: Vec<Vec<Option<Figures>>>,
    /// Whether the cells differ in `num` (then their labels show it).
    pub(super) with_num: bool,
}

impl Model {
    pub(super) fn new(results: &[EngineResult], baseline: &str) -> Model {
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

    pub(super) fn baseline_index(&self) -> Option<usize> {
        self.engines.iter().position(|e| *e == self.baseline)
    }

    /// The engines that are not the baseline, with their index in `engines`.
    pub(super) fn peers(&self) -> impl Iterator<Item = (usize, &String)> {
        self.engines
            .iter()
            .enumerate()
            .filter(move |(_, e)| **e != self.baseline)
    }

    pub(super) fn figure(
        &self,
        cell: usize,
        engine: usize,
        f: fn(&Figures) -> Option<f64>,
    ) -> Option<f64> {
        self.figs[cell][engine].as_ref().and_then(f)
    }

    /// Baseline ops/s over the peer's (medians), when both were measured.
    pub(super) fn ratio(&self, cell: usize, base: usize, peer: usize) -> Option<f64> {
        let b = self.figure(cell, base, |f| f.ops_per_sec)?;
        let p = self.figure(cell, peer, |f| f.ops_per_sec)?;
        (b > 0.0 && p > 0.0).then(|| b / p)
    }

    pub(super) fn label(&self, cell: usize, short: bool) -> String {
        self.cells[cell].describe(short, None, self.with_num)
    }
}
