//! Results of a benchmark cell, printed as JSON lines or as a table of medians.

use std::collections::BTreeMap;

use comfy_table::{presets::ASCII_MARKDOWN, Table};
use serde::Serialize;

/// One measured cell. Field names are a contract (`--format json`): add, never rename.
#[derive(Clone, Debug, Serialize)]
pub struct CommitResult {
    pub strategy: String,
    pub sync: String,
    pub threads: usize,
    pub tasks: usize,
    pub record_bytes: usize,
    pub ops: u64,
    pub seconds: f64,
    pub ops_per_sec: f64,
    pub p50_us: f64,
    pub p95_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    pub fsyncs: u64,
    pub fsyncs_per_commit: f64,
    pub bytes_per_fsync: f64,
    pub fsync_delay_us: u64,
    pub fsync_delay_model: String,
    /// "threads", "native" (async API) or "spawn_blocking".
    pub async_mode: String,
    pub segment_bytes: u64,
    pub preallocate: String,
    pub repeat: usize,
    pub date: String,
}

impl CommitResult {
    /// The cell's identity, without the measurements.
    pub fn key(&self) -> (String, String, usize, usize, usize, String) {
        (
            self.strategy.clone(),
            self.sync.clone(),
            self.threads,
            self.tasks,
            self.record_bytes,
            self.preallocate.clone(),
        )
    }
}

pub fn json_line(r: &CommitResult) -> String {
    serde_json::to_string(r).expect("a result serializes")
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// A markdown table with one row per cell: medians over repeats (of every column
/// separately), in first-run order.
pub fn table(results: &[CommitResult]) -> String {
    let mut order = Vec::new();
    let mut groups: BTreeMap<_, Vec<&CommitResult>> = BTreeMap::new();
    for r in results {
        let k = r.key();
        if !groups.contains_key(&k) {
            order.push(k.clone());
        }
        groups.entry(k).or_default().push(r);
    }
    let mut t = Table::new();
    t.load_style(ASCII_MARKDOWN);
    t.set_header(vec![
        "strategy",
        "sync",
        "callers",
        "record B",
        "prealloc",
        "commits/s",
        "wall ms",
        "p50 µs",
        "p99 µs",
        "p99.9 µs",
        "max µs",
        "fsyncs/commit",
        "runs",
    ]);
    for k in order {
        let g = &groups[&k];
        let m = |f: fn(&CommitResult) -> f64| median(g.iter().map(|r| f(r)).collect());
        let callers = if k.3 > 0 {
            format!("{} tasks ({})", k.3, g[0].async_mode)
        } else {
            format!("{} threads", k.2)
        };
        t.add_row(vec![
            k.0.clone(),
            k.1.clone(),
            callers,
            k.4.to_string(),
            k.5.clone(),
            format!("{:.0}", m(|r| r.ops_per_sec)),
            format!("{:.1}", m(|r| r.seconds * 1e3)),
            format!("{:.1}", m(|r| r.p50_us)),
            format!("{:.1}", m(|r| r.p99_us)),
            format!("{:.1}", m(|r| r.p999_us)),
            format!("{:.1}", m(|r| r.max_us)),
            format!("{:.3}", m(|r| r.fsyncs_per_commit)),
            g.len().to_string(),
        ]);
    }
    t.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
