//! Results of a benchmark cell, printed as JSON lines (or CSV) or as a table of medians.

use std::collections::BTreeMap;

use comfy_table::{presets::ASCII_MARKDOWN, Table};
use serde::{Deserialize, Serialize};

use crate::stats::{fmt_opt, median, median_of};

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
        let m = |f: fn(&CommitResult) -> f64| median(g.iter().map(|r| f(r))).unwrap_or(f64::NAN);
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

/// One cell of `silt-bench run` (an engine × workload × sync × threads × repeat). Field
/// names are a contract (`--format json`): add, never rename. Every figure that could not
/// be measured is `null`, never a made-up number.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EngineResult {
    pub engine: String,
    pub workload: String,
    /// "ok", "unavailable" (engine not in this build, or unknown) or "failed".
    pub status: String,
    /// Why the cell is unavailable or failed.
    pub error: Option<String>,
    pub threads: usize,
    /// Entries per write batch (write workloads).
    pub batch: usize,
    /// "none" or "full" (`fillsync` is always "full").
    pub sync: String,
    /// Key order: "sequential", "random" or "zipfian".
    pub pattern: String,
    /// `--num`: keys in the database (preloaded for read workloads and `overwrite`).
    pub num: u64,
    pub key_bytes: usize,
    pub value_bytes: usize,
    /// Entries per scan (`scan` only).
    pub range_size: Option<usize>,
    pub cache_bytes: u64,
    pub fsync_delay_us: u64,
    /// Operations in the timed phase: entries written (fills), gets, seeks, scans, or
    /// entries iterated (`readseq`).
    pub ops: Option<u64>,
    /// Reads that found data: gets that found their key, seeks that landed on an entry,
    /// entries read by scans and by `readseq`. `null` for writes.
    pub found: Option<u64>,
    /// Wall time of the timed phase, from the first worker's start to the last one's end.
    pub seconds: Option<f64>,
    pub ops_per_sec: Option<f64>,
    /// Latency of one operation (one write batch, get, seek, scan, or `readseq` step).
    pub p50_us: Option<f64>,
    pub p95_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub p999_us: Option<f64>,
    pub max_us: Option<f64>,
    /// CPU of the whole process (foreground and background threads) over the timed phase.
    pub cpu_user_s: Option<f64>,
    pub cpu_sys_s: Option<f64>,
    /// Peak RSS of the cell's process (load and timed phase).
    pub peak_rss_bytes: Option<u64>,
    /// `/proc/self/io` `write_bytes` minus `cancelled_write_bytes`, from the start of the
    /// timed phase to its end — for write workloads, to the end of the final flush and the
    /// wait for compaction to settle.
    pub device_write_bytes: Option<u64>,
    /// The raw `write_bytes` delta over the same span.
    pub proc_write_bytes: Option<u64>,
    /// The raw `cancelled_write_bytes` delta over the same span.
    pub cancelled_write_bytes: Option<u64>,
    /// `/proc/self/io` `wchar` delta over the same span: bytes handed to write system
    /// calls, free of page-cache granularity (see BENCHMARKS.md on large folios), but blind
    /// to stores into memory-mapped files (silt's log under sync `none`).
    pub syscall_write_bytes: Option<u64>,
    /// Sectors written to the block device holding the database (× 512) over the same
    /// span, after a `syncfs` for write workloads: real device writes, but of every process
    /// on that device (noisy on a shared machine).
    pub disk_write_bytes: Option<u64>,
    /// Key + value bytes written in the timed phase.
    pub logical_write_bytes: Option<u64>,
    /// Key + value bytes of the distinct live keys at the end.
    pub live_bytes: Option<u64>,
    /// Sum of file lengths in the database directory at the end (after the final flush for
    /// write workloads); a file with several names (hard links) counts once.
    pub db_bytes: Option<u64>,
    /// Allocated bytes (blocks) of the same files.
    pub db_alloc_bytes: Option<u64>,
    /// device_write_bytes / logical_write_bytes (`null` without logical writes).
    pub write_amp: Option<f64>,
    /// db_bytes / live_bytes.
    pub space_amp: Option<f64>,
    /// syscall_write_bytes / logical_write_bytes.
    pub syscall_write_amp: Option<f64>,
    /// disk_write_bytes / logical_write_bytes.
    pub disk_write_amp: Option<f64>,
    /// Untimed preload (read workloads, `overwrite`), including its flush and settle.
    pub load_seconds: Option<f64>,
    /// Untimed final flush and compaction settle after a write workload.
    pub post_seconds: Option<f64>,
    /// CPU (user + sys) of that final flush and settle.
    pub post_cpu_s: Option<f64>,
    pub repeat: usize,
    pub date: String,
    /// Engine-specific counters at the end (silt: `Db::stats`), or `null`.
    pub engine_stats: Option<serde_json::Value>,
    /// Keys inserted in the timed phase (`queue`; YCSB D and E), else `null`.
    #[serde(default)]
    pub inserted: Option<u64>,
    /// Keys deleted in the timed phase (`delete`, `queue`), else `null`.
    #[serde(default)]
    pub deleted: Option<u64>,
    /// `queue`: the worst delete latency (µs) in each elapsed second of the timed phase
    /// (0 for a second without a delete), else `null`.
    #[serde(default)]
    pub worst_delete_us_per_sec: Option<Vec<f64>>,
    /// `queue`: the worst delete latency (µs) of the whole timed phase, else `null`.
    #[serde(default)]
    pub max_delete_us: Option<f64>,
    /// The `run` workload a named seed workload (`workload`, e.g. `zipf_write`) is built on
    /// (`fillrandom`); `null` when `workload` is one of `run`'s own.
    #[serde(default)]
    pub base_workload: Option<String>,
    /// `mixed`: the share of operations that are gets, in percent; else `null`.
    #[serde(default)]
    pub read_percent: Option<u32>,
    /// fsyncs the `--fsync-delay-us` shim delayed in the cell's process (peers; silt's
    /// delays are in its own file layer), else `null`.
    #[serde(default)]
    pub delayed_fsyncs: Option<u64>,
    /// Whether the preload was copied from a load image (`run --load-cache`) instead of
    /// loaded again; `load_seconds` is then the copy's time. `null` without a preload.
    #[serde(default)]
    pub load_from_image: Option<bool>,
    /// `tpcc`: `--warehouses`, else `null`.
    #[serde(default)]
    pub warehouses: Option<u32>,
    /// `tpcc`: transactions of the whole mix completed per minute (all five types), else
    /// `null`. (TPC-C's own "tpmC" counts New-Orders only: that is `nopm`.)
    #[serde(default)]
    pub tpmc: Option<f64>,
    /// `tpcc`: New-Order transactions completed per minute (those rolled back by TPC-C's
    /// 1% unknown-item rule included, as TPC-C counts them), else `null`.
    #[serde(default)]
    pub nopm: Option<f64>,
    /// `tpcc`: attempts that failed with a retryable error (conflict, deadlock, lock
    /// timeout, busy) and were run again, over all attempts; else `null`.
    #[serde(default)]
    pub abort_rate: Option<f64>,
    /// `tpcc`: per transaction type its count, retries, rollbacks and p50/p95/p99 (µs,
    /// first attempt to commit), the engine's mode, the sizes and the consistency
    /// checks; else `null`.
    #[serde(default)]
    pub tpcc: Option<serde_json::Value>,
    /// `queue_indexed`: rows inserted in each elapsed second of the timed phase, else
    /// `null` (beside `worst_delete_us_per_sec`, the seed 002 figure's two series).
    #[serde(default)]
    pub inserted_per_sec: Option<Vec<u64>>,
    /// `queue_indexed`, `txn_batch_sweep`: the engine's transaction mode, whether deletes
    /// are single deletes, rows per transaction, retries and the consistency check's
    /// result; else `null`.
    #[serde(default)]
    pub txn: Option<serde_json::Value>,
}

impl EngineResult {
    /// The cell's identity, without the measurements or the repeat.
    pub fn key(&self) -> (String, String, String, usize, usize, String, u64) {
        (
            self.engine.clone(),
            self.workload.clone(),
            self.sync.clone(),
            self.threads,
            self.batch,
            self.pattern.clone(),
            self.num,
        )
    }
}

pub fn engine_json_line(r: &EngineResult) -> String {
    serde_json::to_string(r).expect("a result serializes")
}

/// CSV columns, in order: every field of [`EngineResult`] (`engine_stats` as JSON text).
pub const CSV_COLUMNS: &[&str] = &[
    "engine",
    "workload",
    "status",
    "error",
    "threads",
    "batch",
    "sync",
    "pattern",
    "num",
    "key_bytes",
    "value_bytes",
    "range_size",
    "cache_bytes",
    "fsync_delay_us",
    "ops",
    "found",
    "seconds",
    "ops_per_sec",
    "p50_us",
    "p95_us",
    "p99_us",
    "p999_us",
    "max_us",
    "cpu_user_s",
    "cpu_sys_s",
    "peak_rss_bytes",
    "device_write_bytes",
    "proc_write_bytes",
    "cancelled_write_bytes",
    "syscall_write_bytes",
    "disk_write_bytes",
    "logical_write_bytes",
    "live_bytes",
    "db_bytes",
    "db_alloc_bytes",
    "write_amp",
    "space_amp",
    "syscall_write_amp",
    "disk_write_amp",
    "load_seconds",
    "post_seconds",
    "post_cpu_s",
    "repeat",
    "date",
    "engine_stats",
    "inserted",
    "deleted",
    "worst_delete_us_per_sec",
    "max_delete_us",
    "base_workload",
    "read_percent",
    "delayed_fsyncs",
    "load_from_image",
    "warehouses",
    "tpmc",
    "nopm",
    "abort_rate",
    "tpcc",
    "inserted_per_sec",
    "txn",
];

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

pub fn csv_header() -> String {
    CSV_COLUMNS.join(",")
}

/// One CSV row (RFC 4180 quoting); `null` is an empty field.
pub fn csv_row(r: &EngineResult) -> String {
    let v = serde_json::to_value(r).expect("a result serializes");
    CSV_COLUMNS
        .iter()
        .map(|c| match &v[*c] {
            serde_json::Value::Null => String::new(),
            serde_json::Value::String(s) => csv_field(s),
            other => csv_field(&other.to_string()),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Thousands separators for a rounded count.
pub fn grouped(x: f64) -> String {
    let s = format!("{:.0}", x.abs());
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if x < 0.0 {
        format!("-{out}")
    } else {
        out
    }
}

/// A markdown table with one row per cell: medians over repeats (of every column
/// separately), in first-run order. Cells that did not run show their status.
pub fn engine_table(results: &[EngineResult]) -> String {
    let mut order = Vec::new();
    let mut groups: BTreeMap<_, Vec<&EngineResult>> = BTreeMap::new();
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
        "engine",
        "workload",
        "sync",
        "threads",
        "batch",
        "ops",
        "ops/s",
        "p50 µs",
        "p99 µs",
        "p99.9 µs",
        "max µs",
        "CPU s",
        "peak RSS MiB",
        "write amp",
        "syscall write amp",
        "space amp",
        "runs",
    ]);
    let mut notes: Vec<String> = Vec::new();
    for k in order {
        let all = &groups[&k];
        let ok: Vec<&EngineResult> = all.iter().copied().filter(|r| r.status == "ok").collect();
        if ok.is_empty() {
            let r = all[0];
            let note = format!(
                "{} {}: {}",
                r.engine,
                r.status,
                r.error.clone().unwrap_or_default()
            );
            if r.status == "unavailable" {
                // One note per engine, no rows.
                if !notes
                    .iter()
                    .any(|n| n.starts_with(&format!("{} unavailable", r.engine)))
                {
                    notes.push(note);
                }
                continue;
            }
            notes.push(format!(
                "{} {} {} threads={}: {}",
                r.engine,
                r.workload,
                r.sync,
                r.threads,
                r.error.clone().unwrap_or_default()
            ));
            let mut row = vec![
                k.0.clone(),
                k.1.clone(),
                k.2.clone(),
                k.3.to_string(),
                k.4.to_string(),
                r.status.clone(),
            ];
            row.extend(std::iter::repeat_n(String::new(), 10));
            row.push("0".into());
            t.add_row(row);
            continue;
        }
        let m = |f: fn(&EngineResult) -> Option<f64>| median_of(ok.iter().map(|r| f(r)));
        t.add_row(vec![
            k.0.clone(),
            k.1.clone(),
            k.2.clone(),
            k.3.to_string(),
            k.4.to_string(),
            fmt_opt(m(|r| r.ops.map(|x| x as f64)), grouped),
            fmt_opt(m(|r| r.ops_per_sec), grouped),
            fmt_opt(m(|r| r.p50_us), |x| format!("{x:.1}")),
            fmt_opt(m(|r| r.p99_us), |x| format!("{x:.1}")),
            fmt_opt(m(|r| r.p999_us), |x| format!("{x:.1}")),
            fmt_opt(m(|r| r.max_us), |x| format!("{x:.0}")),
            fmt_opt(m(|r| Some(r.cpu_user_s? + r.cpu_sys_s?)), |x| {
                format!("{x:.2}")
            }),
            fmt_opt(
                m(|r| r.peak_rss_bytes.map(|b| b as f64 / (1 << 20) as f64)),
                |x| format!("{x:.0}"),
            ),
            fmt_opt(m(|r| r.write_amp), |x| format!("{x:.2}")),
            fmt_opt(m(|r| r.syscall_write_amp), |x| format!("{x:.2}")),
            fmt_opt(m(|r| r.space_amp), |x| format!("{x:.2}")),
            if ok.len() == all.len() {
                ok.len().to_string()
            } else {
                format!("{} ({} failed)", ok.len(), all.len() - ok.len())
            },
        ]);
    }
    let mut out = t.to_string();
    for n in notes {
        out.push_str("\n\n");
        out.push_str(&n);
    }
    out
}

/// Today's UTC date as YYYY-MM-DD (civil-from-days, so no date crate is needed).
pub(crate) fn today() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn today_is_a_date() {
        let d = today();
        assert_eq!(d.len(), 10);
        assert!(d.starts_with("20"));
    }

    #[test]
    fn grouped_thousands() {
        assert_eq!(grouped(0.0), "0");
        assert_eq!(grouped(999.4), "999");
        assert_eq!(grouped(1234567.0), "1,234,567");
        assert_eq!(grouped(-1000.0), "-1,000");
    }

    #[test]
    fn csv_columns_are_every_field() {
        let r = EngineResult {
            engine: "silt".into(),
            workload: "fillseq".into(),
            status: "ok".into(),
            error: Some("a, \"quoted\" note".into()),
            threads: 1,
            batch: 1,
            sync: "none".into(),
            pattern: "sequential".into(),
            num: 1,
            key_bytes: 16,
            value_bytes: 100,
            range_size: None,
            cache_bytes: 0,
            fsync_delay_us: 0,
            ops: Some(1),
            found: None,
            seconds: Some(1.0),
            ops_per_sec: Some(1.0),
            p50_us: None,
            p95_us: None,
            p99_us: None,
            p999_us: None,
            max_us: None,
            cpu_user_s: None,
            cpu_sys_s: None,
            peak_rss_bytes: None,
            device_write_bytes: None,
            proc_write_bytes: None,
            cancelled_write_bytes: None,
            syscall_write_bytes: None,
            disk_write_bytes: None,
            logical_write_bytes: None,
            live_bytes: None,
            db_bytes: None,
            db_alloc_bytes: None,
            write_amp: None,
            space_amp: None,
            syscall_write_amp: None,
            disk_write_amp: None,
            load_seconds: None,
            post_seconds: None,
            post_cpu_s: None,
            repeat: 0,
            date: "2026-01-01".into(),
            engine_stats: Some(serde_json::json!({"a": 1})),
            inserted: None,
            deleted: None,
            worst_delete_us_per_sec: None,
            max_delete_us: None,
            base_workload: None,
            read_percent: None,
            delayed_fsyncs: None,
            load_from_image: None,
            warehouses: None,
            tpmc: None,
            nopm: None,
            abort_rate: None,
            tpcc: None,
            inserted_per_sec: None,
            txn: None,
        };
        let v = serde_json::to_value(&r).unwrap();
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(keys.len(), CSV_COLUMNS.len());
        for k in keys {
            assert!(CSV_COLUMNS.contains(&k.as_str()), "{k} missing from CSV");
        }
        let row = csv_row(&r);
        assert!(
            row.starts_with("silt,fillseq,ok,\"a, \"\"quoted\"\" note\",1,"),
            "{row}"
        );
        assert!(row.ends_with(",\"{\"\"a\"\":1}\",,,,,,,,,,,,,,,"), "{row}");
        assert!(engine_table(&[r]).contains("fillseq"));
    }
}
