//! The `run` subcommand end to end: runs the built binary over every workload at a tiny
//! size, checks that every JSON line parses, carries every field scripts rely on (each
//! figure a number, or `null` where unavailable), did the expected operations, and that an
//! engine not compiled in is reported as unavailable rather than failing the run. No speed
//! is asserted.

use std::process::Command;

use serde_json::Value;

/// Fields every line must have (the `--format json` contract).
const FIELDS: &[&str] = &[
    "engine",
    "workload",
    "threads",
    "batch",
    "sync",
    "ops",
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
    "db_bytes",
    "write_amp",
    "space_amp",
    "status",
];

const WORKLOADS: &[&str] = &[
    "fillseq",
    "fillrandom",
    "overwrite",
    "fillsync",
    "readrandom",
    "readseq",
    "seekrandom",
    "scan",
];

const NUM: u64 = 2000;

fn run(args: &[&str]) -> (bool, Vec<Value>, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_silt-bench"))
        .arg("run")
        .args(args)
        .args(["--format", "json", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let lines = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}\n{stderr}")))
        .collect();
    // Every cell's directory is removed after it ran.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    (out.status.success(), lines, stderr)
}

fn num(v: &Value, f: &str) -> f64 {
    v[f].as_f64()
        .unwrap_or_else(|| panic!("{f} is not a number in {v}"))
}

fn check_ok(v: &Value) {
    for f in FIELDS {
        assert!(v.get(*f).is_some(), "field {f} missing from {v}");
    }
    assert_eq!(v["status"], "ok", "{v}");
    assert_eq!(v["engine"], "silt");
    let w = v["workload"].as_str().unwrap();
    let expected_ops = match w {
        "fillsync" => NUM / 100,
        _ => NUM,
    };
    assert_eq!(v["ops"].as_u64(), Some(expected_ops), "{v}");
    assert!(num(v, "seconds") > 0.0);
    assert!(num(v, "ops_per_sec") > 0.0);
    let p = ["p50_us", "p95_us", "p99_us", "p999_us", "max_us"].map(|f| num(v, f));
    assert!(p[0] > 0.0, "{v}");
    assert!(
        p.windows(2).all(|w| w[0] <= w[1]),
        "percentiles out of order: {v}"
    );
    assert!(num(v, "cpu_user_s") >= 0.0 && num(v, "cpu_sys_s") >= 0.0);
    assert!(num(v, "peak_rss_bytes") > 1e6);
    assert!(num(v, "db_bytes") > 0.0);
    assert!(num(v, "space_amp") > 0.0);
    // /proc/self/io exists wherever these tests run (Linux); elsewhere it would be null.
    if std::path::Path::new("/proc/self/io").exists() {
        assert!(num(v, "device_write_bytes") >= 0.0);
    }
    let writes = matches!(w, "fillseq" | "fillrandom" | "overwrite" | "fillsync");
    if writes {
        assert!(v["found"].is_null());
        assert!(num(v, "logical_write_bytes") == expected_ops as f64 * 116.0);
        if !v["device_write_bytes"].is_null() {
            assert!(num(v, "write_amp") > 0.0, "{v}");
        }
    } else {
        assert!(v["write_amp"].is_null(), "{v}");
        // Reads ran on a database preloaded with every key.
        let found = v["found"].as_u64().unwrap();
        match w {
            "readrandom" | "seekrandom" | "readseq" => assert_eq!(found, NUM, "{v}"),
            // Scans starting near the end read fewer than --range-size entries.
            "scan" => assert!(found > NUM * 8 && found <= NUM * 16, "{v}"),
            _ => unreachable!(),
        }
        assert!(num(v, "load_seconds") > 0.0);
    }
    if w == "fillsync" {
        assert_eq!(v["sync"], "full");
    }
}

#[test]
fn every_workload_runs_and_reports() {
    let (ok, lines, stderr) = run(&[
        "--engines",
        "silt,rocksdb",
        "--workloads",
        &WORKLOADS.join(","),
        "--num",
        &NUM.to_string(),
        "--range-size",
        "16",
        "--threads",
        "2",
    ]);
    assert!(ok, "{stderr}");
    assert_eq!(lines.len(), 2 * WORKLOADS.len(), "{stderr}");
    for v in &lines[..WORKLOADS.len()] {
        check_ok(v);
        assert_eq!(v["threads"], 2);
    }
    let got: Vec<&str> = lines[..WORKLOADS.len()]
        .iter()
        .map(|v| v["workload"].as_str().unwrap())
        .collect();
    assert_eq!(got, WORKLOADS);
    for v in &lines[WORKLOADS.len()..] {
        assert_eq!(v["engine"], "rocksdb");
        assert_eq!(v["status"], "unavailable");
        assert!(v["error"].as_str().unwrap().contains("not compiled"));
        for f in FIELDS {
            assert!(v.get(*f).is_some(), "field {f} missing from {v}");
        }
        assert!(v["ops"].is_null() && v["ops_per_sec"].is_null());
    }
}

#[test]
fn batches_sync_zipfian_and_range_alias() {
    let (ok, lines, stderr) = run(&[
        "--workloads",
        "fillrandom,range",
        "--num",
        "1000",
        "--batch",
        "10",
        "--sync",
        "full",
        "--pattern",
        "zipfian",
        "--reads",
        "300",
    ]);
    assert!(ok, "{stderr}");
    assert_eq!(lines.len(), 2);
    let (fill, scan) = (&lines[0], &lines[1]);
    assert_eq!(fill["status"], "ok", "{fill}");
    assert_eq!(fill["ops"], 1000);
    assert_eq!(fill["batch"], 10);
    assert_eq!(fill["sync"], "full");
    assert_eq!(fill["pattern"], "zipfian");
    // Zipfian draws repeat keys: fewer live keys than writes.
    assert!(num(fill, "live_bytes") < 1000.0 * 116.0, "{fill}");
    assert_eq!(scan["workload"], "scan");
    assert_eq!(scan["ops"], 300);
    assert_eq!(scan["range_size"], 100);
}

#[test]
fn bad_flags_are_errors() {
    for args in [
        &["--workloads", "nosuch"][..],
        &["--sync", "sometimes"],
        &["--format", "xml"],
        &["--pattern", "spiral"],
    ] {
        let (ok, lines, stderr) = run(args);
        assert!(!ok && lines.is_empty(), "{args:?}: {stderr}");
    }
}
