//! `run --workloads queue_indexed,txn_batch_sweep` and `suite txn` end to end at tiny
//! sizes on the default build's transactional engines (silt, sqlite, fjall, redb): each
//! cell succeeds, which means its consistency check held (the rows are exactly the live
//! range, every index entry belongs to a live row and every live row has its three; a
//! violation fails the cell), and the JSON lines carry the counts that must add up. No
//! speed is asserted.

use std::process::Command;

use serde_json::Value;

const ENGINES: &[&str] = &["silt", "sqlite", "fjall", "redb"];

fn run(engine: &str, args: &[&str]) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_silt-bench"))
        .args(["run", "--engines", engine, "--format", "json", "--dir"])
        .arg(dir.path())
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{engine}: {stdout}\n{stderr}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}\n{stderr}")))
        .collect()
}

fn num(v: &Value, f: &str) -> f64 {
    v[f].as_f64()
        .unwrap_or_else(|| panic!("{f} is not a number in {v}"))
}

fn queue_indexed(engine: &str, batch: u64) {
    queue_indexed_resync(engine, batch, None);
}

/// `resync`: `--resync-get-min` (None: its default, 1000).
fn queue_indexed_resync(engine: &str, batch: u64, resync: Option<u64>) {
    let batch_s = batch.to_string();
    let mut args = vec![
        "--workloads",
        "queue_indexed",
        "--num",
        "500",
        "--duration",
        "1.5",
        "--batch",
        &batch_s,
        "--value-bytes",
        "32",
    ];
    let resync_s = resync.map(|r| r.to_string());
    if let Some(r) = &resync_s {
        args.extend(["--resync-get-min", r]);
    }
    let lines = run(engine, &args);
    assert_eq!(lines.len(), 1);
    let v = &lines[0];
    assert_eq!(v["status"], "ok", "{v}");
    assert_eq!(v["workload"], "queue_indexed");
    assert_eq!(v["threads"], 2);
    assert_eq!(num(v, "batch"), batch as f64);
    assert!(
        v["txn"]["consistency"]
            .as_str()
            .unwrap()
            .starts_with("rows exactly"),
        "{v}"
    );
    let (ins, del) = (num(v, "inserted"), num(v, "deleted"));
    assert!(ins > 0.0 && del > 0.0, "{v}");
    // Whole transactions of `batch` rows; the deleter never passes the inserter.
    assert_eq!(ins % batch as f64, 0.0, "{v}");
    assert_eq!(del % batch as f64, 0.0, "{v}");
    assert!(del <= ins, "{v}");
    // …nor falls more than the lag behind it (both at the slower one's rate).
    assert!(ins - del <= num(&v["txn"], "max_lag_rows"), "{v}");
    assert_eq!(num(v, "ops"), ins + del, "{v}");
    // One entry per started second of the run; the inserts add up.
    let per_sec: Vec<f64> = v["inserted_per_sec"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    let worst: Vec<f64> = v["worst_delete_us_per_sec"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    // (The deleter's last transaction may end in the second after the inserter's.)
    let secs = num(v, "seconds").ceil() as usize;
    assert!((secs..=secs + 1).contains(&per_sec.len()), "{v}");
    assert_eq!(worst.len(), per_sec.len(), "{v}");
    assert_eq!(per_sec.iter().sum::<f64>(), ins, "{v}");
    let max = worst.iter().copied().fold(0.0, f64::max);
    assert_eq!(num(v, "max_delete_us"), max, "{v}");
    assert!(max > 0.0, "{v}");
    assert!((0.0..1.0).contains(&num(v, "abort_rate")), "{v}");
    let single = v["txn"]["single_delete"].as_bool().unwrap();
    assert_eq!(single, engine.starts_with("silt"), "{v}");
    // iibench's get_min: before the first delete and every `resync` deletes after it
    // (0: only the first); each found the row the queue expected, or the cell failed.
    let resync = resync.unwrap_or(1000);
    assert_eq!(num(&v["txn"], "resync_get_min"), resync as f64, "{v}");
    let rounds = (del / batch as f64) as u64;
    let queries = if resync == 0 {
        1
    } else {
        rounds.div_ceil(resync)
    };
    assert_eq!(num(&v["txn"], "get_min_queries"), queries as f64, "{v}");
    assert!(num(&v["txn"], "get_min_max_us") > 0.0, "{v}");
}

#[test]
fn queue_indexed_silt() {
    queue_indexed("silt", 1);
}

#[test]
fn queue_indexed_sqlite() {
    queue_indexed("sqlite", 1);
}

#[test]
fn queue_indexed_fjall() {
    queue_indexed("fjall", 1);
}

#[test]
fn queue_indexed_redb() {
    queue_indexed("redb", 1);
}

#[test]
fn queue_indexed_in_batches_and_silt_pessimistic() {
    queue_indexed("silt", 5);
    queue_indexed("silt-pess", 3);
}

#[test]
fn queue_indexed_get_min_every_delete_or_once() {
    queue_indexed_resync("silt", 1, Some(1));
    queue_indexed_resync("silt", 2, Some(0));
    queue_indexed_resync("sqlite", 1, Some(7));
}

#[test]
fn txn_batch_sweep_every_default_engine() {
    for engine in ENGINES {
        let lines = run(
            engine,
            &[
                "--workloads",
                "txn_batch_sweep",
                "--num",
                "3000",
                "--batch",
                "7,1000,3000",
                "--value-bytes",
                "32",
            ],
        );
        assert_eq!(lines.len(), 3, "{engine}");
        for (v, b) in lines.iter().zip([7.0, 1000.0, 3000.0]) {
            assert_eq!(v["status"], "ok", "{v}");
            assert_eq!(v["workload"], "txn_batch_sweep");
            assert_eq!(v["threads"], 1);
            assert_eq!(num(v, "batch"), b);
            assert_eq!(num(v, "ops"), 3000.0, "{v}");
            assert_eq!(num(&v["txn"], "transactions"), (3000.0 / b).ceil(), "{v}");
            assert_eq!(num(&v["txn"], "rows_per_txn"), b, "{v}");
            let us = num(&v["txn"], "us_per_row");
            assert!(
                (us - num(v, "seconds") * 1e6 / 3000.0).abs() < 1e-6 * us.max(1.0),
                "{v}"
            );
            assert!(num(v, "peak_rss_bytes") > 0.0, "{v}");
        }
    }
}

#[test]
fn unknown_engines_fail_the_cell() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_silt-bench"))
        .args([
            "run",
            "--engines",
            "silt-inline",
            "--workloads",
            "txn_batch_sweep",
        ])
        .args(["--num", "10", "--format", "json", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    let v: Value = serde_json::from_str(stdout.lines().next().unwrap()).unwrap();
    assert_eq!(v["status"], "failed");
    assert!(v["error"].as_str().unwrap().contains("no adapter"), "{v}");
}

#[test]
fn the_txn_suite_runs_and_reports() {
    let out_dir = tempfile::tempdir().unwrap();
    let db_dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_silt-bench"))
        .args(["suite", "txn", "--engines", "silt,sqlite,fjall,redb"])
        .args(["--tpcc-duration", "0.5", "--tpcc-scale", "0.01"])
        .args(["--queue-rows", "300", "--queue-duration", "1"])
        .args(["--sweep-rows", "500", "--sweep-batch", "10,500"])
        .arg("--out")
        .arg(out_dir.path())
        .arg("--dir")
        .arg(db_dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    let results = std::fs::read_to_string(out_dir.path().join("results.jsonl")).unwrap();
    let rows: Vec<Value> = results
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Per engine: one tpcc, one queue_indexed and two txn_batch_sweep cells.
    assert_eq!(rows.len(), 4 * 4, "{results}");
    for r in &rows {
        assert_eq!(r["status"], "ok", "{r}");
    }
    for w in ["tpcc", "queue_indexed", "txn_batch_sweep"] {
        let engines: Vec<&str> = rows
            .iter()
            .filter(|r| r["workload"] == w)
            .map(|r| r["engine"].as_str().unwrap())
            .collect();
        for e in ["silt", "sqlite", "fjall", "redb"] {
            assert!(engines.contains(&e), "{w}: {engines:?}");
        }
    }
    let md = std::fs::read_to_string(out_dir.path().join("report.md")).unwrap();
    for s in [
        "## Transactions",
        "### tpcc",
        "tpmC",
        "NOPM",
        "abort rate",
        "### queue_indexed",
        "(charts/queue_indexed.svg)",
        "first/steady",
        "### txn_batch_sweep",
        "(charts/txn_batch_sweep.svg)",
        "µs/row",
    ] {
        assert!(md.contains(s), "{s} not in {md}");
    }
    for f in ["queue_indexed.svg", "txn_batch_sweep.svg"] {
        let svg = std::fs::read_to_string(out_dir.path().join("charts").join(f)).unwrap();
        for e in ["silt", "sqlite", "fjall", "redb"] {
            assert!(
                svg.contains(&format!(">{e}<")) || svg.contains(e),
                "{e} not in {f}"
            );
        }
    }
    assert!(md.contains("silt-bench suite txn"), "{md}");
    assert_eq!(std::fs::read_dir(db_dir.path()).unwrap().count(), 0);
}
