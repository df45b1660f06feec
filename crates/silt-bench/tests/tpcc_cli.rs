//! `run --workloads tpcc` end to end at a tiny size (1 warehouse, 1% of TPC-C's table
//! sizes, about a second of the mix on two terminals) on every engine `tpcc` has: the cell
//! succeeds (so TPC-C's consistency conditions 1–4 held after the load and after the run:
//! a violation fails the cell), and its JSON line carries the contract fields. No speed is
//! asserted. One test per engine, so they run side by side.

use std::process::Command;

use serde_json::Value;

/// Runs one `tpcc` cell; `warehouses` and any `extra` flags as given.
fn run_tpcc(engine: &str, warehouses: &str, extra: &[&str]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_silt-bench"))
        .args(["run", "--workloads", "tpcc", "--engines", engine])
        .args(["--warehouses", warehouses, "--tpcc-scale", "0.01"])
        .args(["--duration", "1"])
        .args(["--threads", "2", "--format", "json", "--dir"])
        .arg(dir.path())
        .args(extra)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{engine}: {stdout}\n{stderr}");
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}\n{stderr}")))
        .collect();
    assert_eq!(lines.len(), 1, "{stdout}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    lines.into_iter().next().unwrap()
}

fn num(v: &Value, f: &str) -> f64 {
    v[f].as_f64()
        .unwrap_or_else(|| panic!("{f} is not a number in {v}"))
}

fn check(engine: &str, v: &Value) {
    assert_eq!(v["status"], "ok", "{v}");
    assert_eq!(v["engine"], engine);
    assert_eq!(v["workload"], "tpcc");
    assert_eq!(v["warehouses"], 1);
    assert_eq!(v["tpcc"]["consistency"], "conditions 1-4 hold", "{v}");
    let ops = num(v, "ops");
    assert!(ops > 0.0, "{v}");
    assert!(num(v, "tpmc") > 0.0 && num(v, "nopm") > 0.0, "{v}");
    assert!(num(v, "nopm") <= num(v, "tpmc"), "{v}");
    let abort = num(v, "abort_rate");
    assert!((0.0..1.0).contains(&abort), "{v}");
    for f in [
        "p50_us",
        "p95_us",
        "p99_us",
        "cpu_user_s",
        "peak_rss_bytes",
        "db_bytes",
    ] {
        assert!(num(v, f) >= 0.0, "{f}: {v}");
    }
    let types = &v["tpcc"]["transactions"];
    let mut count = 0.0;
    for t in [
        "new_order",
        "payment",
        "order_status",
        "delivery",
        "stock_level",
    ] {
        let x = &types[t];
        count += num(x, "count");
        assert!(num(x, "retries") >= 0.0, "{t}: {v}");
        if num(x, "count") > 0.0 {
            let p = ["p50_us", "p95_us", "p99_us"].map(|f| num(x, f));
            assert!(p[0] > 0.0 && p[0] <= p[1] && p[1] <= p[2], "{t}: {v}");
        }
    }
    assert_eq!(count, ops, "{v}");
    // The two big types are there in a second of the mix.
    assert!(num(&types["new_order"], "count") > 0.0, "{v}");
    assert!(num(&types["payment"], "count") > 0.0, "{v}");
}

fn tpcc_on(engine: &str) {
    let v = run_tpcc(engine, "1", &[]);
    check(engine, &v);
}

#[test]
fn silt_optimistic_serializable() {
    tpcc_on("silt");
}

#[test]
fn silt_optimistic_snapshot() {
    tpcc_on("silt-si");
}

#[test]
fn silt_pessimistic_serializable() {
    tpcc_on("silt-pess");
}

#[test]
fn silt_pessimistic_snapshot() {
    tpcc_on("silt-pess-si");
}

#[test]
fn silt_with_two_warehouses_and_durable_commits() {
    let v = run_tpcc("silt", "2", &["--sync", "full"]);
    assert_eq!(v["status"], "ok", "{v}");
    assert_eq!(v["warehouses"], 2);
    assert_eq!(v["sync"], "full");
}

#[cfg(feature = "sqlite")]
#[test]
fn sqlite() {
    tpcc_on("sqlite");
}

#[cfg(feature = "rocksdb")]
#[test]
fn rocksdb_transactiondb() {
    tpcc_on("rocksdb");
}

#[cfg(feature = "rocksdb")]
#[test]
fn rocksdb_optimistic() {
    tpcc_on("rocksdb-occ");
}

#[test]
fn bad_tpcc_flags_are_errors() {
    for bad in [
        ["--warehouses", "0"],
        ["--duration", "0"],
        ["--tpcc-scale", "0"],
        ["--tpcc-scale", "2"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_silt-bench"))
            .args(["run", "--workloads", "tpcc", "--format", "json"])
            .args(bad)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{bad:?}");
    }
}

/// An engine without a `tpcc` adapter fails its cell with a message naming the ones that
/// have one, and fails the run.
#[test]
fn an_engine_without_tpcc_fails_its_cell() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_silt-bench"))
        .args(["run", "--workloads", "tpcc", "--engines", "silt-inline"])
        .args([
            "--tpcc-scale",
            "0.01",
            "--duration",
            "0.2",
            "--format",
            "json",
        ])
        .arg("--dir")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let line: Value = serde_json::from_str(
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(line["status"], "failed");
    assert!(
        line["error"].as_str().unwrap().contains("tpcc engines"),
        "{line}"
    );
}

#[cfg(feature = "fjall")]
#[test]
fn fjall_optimistic() {
    tpcc_on("fjall");
}

#[cfg(feature = "redb")]
#[test]
fn redb_serial_writers() {
    tpcc_on("redb");
}

#[cfg(feature = "tidesdb")]
#[test]
fn tidesdb_serializable() {
    tpcc_on("tidesdb");
}
