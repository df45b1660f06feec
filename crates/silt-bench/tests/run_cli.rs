//! The `run` subcommand end to end: runs the built binary over every workload at a tiny
//! size, checks that every JSON line parses, carries every field scripts rely on (each
//! figure a number, or `null` where unavailable), did the expected operations, and that an
//! engine not compiled in is reported as unavailable rather than failing the run. No speed
//! is asserted. The delete, queue and YCSB workloads and the batch-size sweep run on every
//! compiled-in engine too (one test per engine, so they run side by side).

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
    check_engine(v, "silt", NUM);
}

/// Checks one `ok` line of `engine` from a run of every workload with
/// `--range-size 16`, `--num n`.
fn check_engine(v: &Value, engine: &str, n: u64) {
    for f in FIELDS {
        assert!(v.get(*f).is_some(), "field {f} missing from {v}");
    }
    assert_eq!(v["status"], "ok", "{v}");
    assert_eq!(v["engine"], engine);
    let w = v["workload"].as_str().unwrap();
    let expected_ops = match w {
        "fillsync" => n / 100,
        _ => n,
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
            "readrandom" | "seekrandom" | "readseq" => assert_eq!(found, n, "{v}"),
            // Scans starting near the end read fewer than --range-size entries.
            "scan" => assert!(found > n * 8 && found <= n * 16, "{v}"),
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
    // A peer not compiled into this build, or (with every feature on) an unknown engine:
    // either is reported as unavailable, and the run still succeeds.
    let compiled = compiled_engines();
    let absent = ["rocksdb", "tidesdb", "sqlite", "fjall", "redb"]
        .into_iter()
        .find(|e| !compiled.contains(e));
    let other = absent.unwrap_or("nosuch");
    let (ok, lines, stderr) = run(&[
        "--engines",
        &format!("silt,{other}"),
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
        assert_eq!(v["engine"], other);
        assert_eq!(v["status"], "unavailable");
        let why = if absent.is_some() {
            "not compiled"
        } else {
            "unknown"
        };
        assert!(v["error"].as_str().unwrap().contains(why), "{v}");
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
        &["--batch", "1,0"],
        &["--batch", "ten"],
        &["--read-percent", "101"],
        &["--workloads", "seeds,nosuch"],
    ] {
        let (ok, lines, stderr) = run(args);
        assert!(!ok && lines.is_empty(), "{args:?}: {stderr}");
    }
}

/// The engines compiled into this build (silt always; the peers by cargo feature).
fn compiled_engines() -> Vec<&'static str> {
    let mut e = vec!["silt"];
    if cfg!(feature = "sqlite") {
        e.push("sqlite");
    }
    if cfg!(feature = "fjall") {
        e.push("fjall");
    }
    if cfg!(feature = "redb") {
        e.push("redb");
    }
    if cfg!(feature = "rocksdb") {
        e.push("rocksdb");
    }
    if cfg!(feature = "tidesdb") {
        e.push("tidesdb");
    }
    e
}

/// Every compiled-in engine runs every workload at a tiny size, on two threads (so the
/// adapters' sharing between threads is exercised), and reports it correctly: the
/// requested operations done, and reads finding every preloaded key.
#[test]
fn every_engine_runs_every_workload() {
    const N: u64 = 500;
    let engines = compiled_engines();
    let (ok, lines, stderr) = run(&[
        "--engines",
        &engines.join(","),
        "--workloads",
        &WORKLOADS.join(","),
        "--num",
        &N.to_string(),
        "--range-size",
        "16",
        "--threads",
        "2",
    ]);
    assert!(ok, "{stderr}");
    assert_eq!(lines.len(), engines.len() * WORKLOADS.len(), "{stderr}");
    for (i, v) in lines.iter().enumerate() {
        let engine = engines[i / WORKLOADS.len()];
        assert_eq!(v["workload"], WORKLOADS[i % WORKLOADS.len()], "{v}");
        check_engine(v, engine, N);
        assert_eq!(v["threads"], 2);
    }
}

/// Batched, durable writes on every compiled-in engine: one transaction per batch, synced.
#[test]
fn every_engine_writes_durable_batches() {
    let engines = compiled_engines();
    let (ok, lines, stderr) = run(&[
        "--engines",
        &engines.join(","),
        "--workloads",
        "fillrandom,overwrite,readseq",
        "--num",
        "300",
        "--batch",
        "10",
        "--sync",
        "full",
    ]);
    assert!(ok, "{stderr}");
    assert_eq!(lines.len(), engines.len() * 3, "{stderr}");
    for (i, v) in lines.iter().enumerate() {
        assert_eq!(v["engine"], engines[i / 3], "{v}");
        assert_eq!(v["status"], "ok", "{v}");
        assert_eq!(v["sync"], "full", "{v}");
        assert_eq!(v["ops"], 300, "{v}");
        match v["workload"].as_str().unwrap() {
            "fillrandom" | "overwrite" => assert_eq!(v["batch"], 10, "{v}"),
            "readseq" => assert_eq!(v["found"], 300, "{v}"),
            w => panic!("{w}"),
        }
    }
}

/// The workloads that came with deletes: `delete`, `queue` and YCSB A–F.
const NEW_WORKLOADS: &[&str] = &[
    "delete", "queue", "ycsba", "ycsbb", "ycsbc", "ycsbd", "ycsbe", "ycsbf",
];

/// Runs every workload of [`NEW_WORKLOADS`] on `engine` at `--num 300` and checks each line:
/// the contract's fields, the operations done, and the workload's own fields.
fn new_workloads_on(engine: &str) {
    const N: u64 = 300;
    let (ok, lines, stderr) = run(&[
        "--engines",
        engine,
        "--workloads",
        &NEW_WORKLOADS.join(","),
        "--num",
        &N.to_string(),
        "--range-size",
        "16",
        "--threads",
        "2",
    ]);
    assert!(ok, "{stderr}");
    assert_eq!(lines.len(), NEW_WORKLOADS.len(), "{stderr}");
    for (v, w) in lines.iter().zip(NEW_WORKLOADS) {
        for f in FIELDS {
            assert!(v.get(*f).is_some(), "field {f} missing from {v}");
        }
        for f in [
            "inserted",
            "deleted",
            "worst_delete_us_per_sec",
            "max_delete_us",
        ] {
            assert!(v.get(f).is_some(), "field {f} missing from {v}");
        }
        assert_eq!(v["status"], "ok", "{v}");
        assert_eq!(v["engine"], engine, "{v}");
        assert_eq!(v["workload"], *w, "{v}");
        assert_eq!(v["batch"], 1, "{v}");
        assert!(
            num(v, "seconds") > 0.0 && num(v, "ops_per_sec") > 0.0,
            "{v}"
        );
        let p = ["p50_us", "p95_us", "p99_us", "p999_us", "max_us"].map(|f| num(v, f));
        assert!(p[0] > 0.0, "{v}");
        assert!(p.windows(2).all(|w| w[0] <= w[1]), "{v}");
        assert!(
            num(v, "peak_rss_bytes") > 1e6 && num(v, "db_bytes") > 0.0,
            "{v}"
        );
        assert!(num(v, "load_seconds") > 0.0, "{v}");
        let logical = num(v, "logical_write_bytes");
        match *w {
            "delete" => {
                assert_eq!(v["ops"].as_u64(), Some(N), "{v}");
                assert_eq!(v["deleted"].as_u64(), Some(N), "{v}");
                assert!(v["found"].is_null() && v["inserted"].is_null(), "{v}");
                assert_eq!(logical, N as f64 * 16.0, "{v}");
                // Every key deleted (a permutation): nothing live.
                assert_eq!(num(v, "live_bytes"), 0.0, "{v}");
                assert_eq!(v["threads"], 2, "{v}");
            }
            "queue" => {
                assert_eq!(v["ops"].as_u64(), Some(2 * N), "{v}");
                assert_eq!(v["inserted"].as_u64(), Some(N), "{v}");
                assert_eq!(v["deleted"].as_u64(), Some(N), "{v}");
                assert_eq!(v["threads"], 2, "{v}");
                assert_eq!(logical, N as f64 * (116.0 + 16.0), "{v}");
                let worst: Vec<f64> = v["worst_delete_us_per_sec"]
                    .as_array()
                    .unwrap_or_else(|| panic!("no per-second array in {v}"))
                    .iter()
                    .map(|x| x.as_f64().unwrap())
                    .collect();
                assert!(!worst.is_empty() && worst.iter().all(|&x| x >= 0.0), "{v}");
                let max = num(v, "max_delete_us");
                assert!(max > 0.0, "{v}");
                assert_eq!(worst.iter().copied().fold(0.0, f64::max), max, "{v}");
                assert!(max <= num(v, "max_us"), "{v}");
            }
            _ => {
                assert_eq!(v["ops"].as_u64(), Some(N), "{v}");
                assert_eq!(v["threads"], 2, "{v}");
                assert!(
                    v["deleted"].is_null() && v["max_delete_us"].is_null(),
                    "{v}"
                );
                let pattern = if *w == "ycsbd" { "latest" } else { "zipfian" };
                assert_eq!(v["pattern"], pattern, "{v}");
                let found = v["found"].as_u64().unwrap();
                match *w {
                    // Every read is of a preloaded key.
                    "ycsbc" | "ycsbf" => assert_eq!(found, N, "{v}"),
                    "ycsba" | "ycsbb" | "ycsbd" => assert!(found > 0 && found < N, "{v}"),
                    // Scans of 1..=16 entries.
                    "ycsbe" => assert!(found > N && found < N * 16, "{v}"),
                    _ => unreachable!(),
                }
                if *w == "ycsbc" {
                    assert_eq!(logical, 0.0, "{v}");
                    assert!(v["write_amp"].is_null(), "{v}");
                } else {
                    assert!(logical > 0.0, "{v}");
                    assert_eq!(logical % 116.0, 0.0, "{v}");
                }
                if matches!(*w, "ycsbd" | "ycsbe") {
                    let ins = v["inserted"].as_u64().unwrap();
                    assert!(ins > 0 && ins < N / 5, "{v}");
                    assert_eq!(logical, ins as f64 * 116.0, "{v}");
                    assert_eq!(num(v, "live_bytes"), (N + ins) as f64 * 116.0, "{v}");
                } else {
                    assert!(v["inserted"].is_null(), "{v}");
                }
                if *w == "ycsbe" {
                    assert_eq!(v["range_size"], 16, "{v}");
                }
            }
        }
    }
}

#[test]
fn silt_runs_delete_queue_and_ycsb() {
    new_workloads_on("silt");
}

#[cfg(feature = "sqlite")]
#[test]
fn sqlite_runs_delete_queue_and_ycsb() {
    new_workloads_on("sqlite");
}

#[cfg(feature = "fjall")]
#[test]
fn fjall_runs_delete_queue_and_ycsb() {
    new_workloads_on("fjall");
}

#[cfg(feature = "redb")]
#[test]
fn redb_runs_delete_queue_and_ycsb() {
    new_workloads_on("redb");
}

#[cfg(feature = "rocksdb")]
#[test]
fn rocksdb_runs_delete_queue_and_ycsb() {
    new_workloads_on("rocksdb");
}

#[cfg(feature = "tidesdb")]
#[test]
fn tidesdb_runs_delete_queue_and_ycsb() {
    new_workloads_on("tidesdb");
}

/// A seed workload: name, base workload, pattern, key bytes, value bytes, range size
/// (`None`: not a scan).
type Seed = (
    &'static str,
    &'static str,
    &'static str,
    u64,
    u64,
    Option<u64>,
);

/// The seed 000/003 workloads, in `--workloads seeds` order.
const SEEDS: &[Seed] = &[
    ("seq_write", "fillseq", "sequential", 16, 100, None),
    ("random_write", "fillrandom", "random", 16, 100, None),
    ("random_read", "readrandom", "random", 16, 100, None),
    ("random_mixed", "mixed", "random", 16, 100, None),
    ("zipf_write", "fillrandom", "zipfian", 16, 100, None),
    ("zipf_mixed", "mixed", "zipfian", 16, 100, None),
    ("random_delete", "delete", "random", 16, 100, None),
    ("large_value", "fillrandom", "random", 256, 4096, None),
    ("small_value", "fillrandom", "random", 16, 64, None),
    ("random_seek", "seekrandom", "random", 16, 100, None),
    ("seq_seek", "seekrandom", "sequential", 16, 100, None),
    ("zipf_seek", "seekrandom", "zipfian", 16, 100, None),
    ("range100", "scan", "random", 16, 100, Some(100)),
    ("range1000", "scan", "random", 16, 100, Some(1000)),
    ("seq_range", "scan", "sequential", 16, 100, Some(100)),
    ("iterate", "readseq", "sequential", 16, 100, None),
];

/// Every seed workload (`--workloads seeds`) and `mixed` with its `--read-percent` on
/// `engine`: each line names the seed workload and the one it is built on, carries the
/// preset's sizes and pattern, did its operations, and its reads found what they should.
fn seed_workloads_on(engine: &str) {
    const N: u64 = 300;
    let (ok, lines, stderr) = run(&[
        "--engines",
        engine,
        "--workloads",
        "seeds,mixed",
        "--read-percent",
        "100",
        "--num",
        &N.to_string(),
        "--threads",
        "2",
    ]);
    assert!(ok, "{stderr}");
    assert_eq!(lines.len(), SEEDS.len() + 1, "{stderr}");
    for (v, &(name, base, pattern, kb, vb, range)) in lines.iter().zip(SEEDS) {
        assert_eq!(v["status"], "ok", "{v}");
        assert_eq!(v["engine"], engine, "{v}");
        assert_eq!(v["workload"], name, "{v}");
        assert_eq!(v["base_workload"], base, "{v}");
        assert_eq!(v["pattern"], pattern, "{v}");
        assert_eq!(v["key_bytes"], kb, "{v}");
        assert_eq!(v["value_bytes"], vb, "{v}");
        assert_eq!(v["range_size"].as_u64(), range, "{v}");
        assert_eq!(v["ops"], N, "{v}");
        match base {
            "fillseq" | "fillrandom" => {
                assert_eq!(v["logical_write_bytes"], N * (kb + vb), "{v}");
                assert!(v["found"].is_null(), "{v}");
            }
            "readrandom" | "seekrandom" | "readseq" => assert_eq!(v["found"], N, "{v}"),
            "delete" => assert_eq!(v["deleted"], N, "{v}"),
            "scan" => {
                let found = v["found"].as_u64().unwrap();
                assert!(found >= N && found <= N * range.unwrap(), "{v}");
            }
            "mixed" => {
                assert_eq!(v["read_percent"], 50, "{v}");
                let found = v["found"].as_u64().unwrap();
                let written = v["logical_write_bytes"].as_u64().unwrap() / (kb + vb);
                // Every get finds its key (all were preloaded); gets + puts = ops.
                assert_eq!(found + written, N, "{v}");
                assert!(found > 0 && written > 0, "{v}");
            }
            other => panic!("{other}"),
        }
    }
    // `mixed` itself, all gets: no writes, every key found.
    let v = lines.last().unwrap();
    assert_eq!(v["workload"], "mixed", "{v}");
    assert!(v["base_workload"].is_null(), "{v}");
    assert_eq!(v["read_percent"], 100, "{v}");
    assert_eq!(v["found"], N, "{v}");
    assert_eq!(v["logical_write_bytes"], 0, "{v}");
}

#[test]
fn silt_runs_the_seed_workloads() {
    seed_workloads_on("silt");
}

#[cfg(feature = "sqlite")]
#[test]
fn sqlite_runs_the_seed_workloads() {
    seed_workloads_on("sqlite");
}

#[cfg(feature = "fjall")]
#[test]
fn fjall_runs_the_seed_workloads() {
    seed_workloads_on("fjall");
}

#[cfg(feature = "redb")]
#[test]
fn redb_runs_the_seed_workloads() {
    seed_workloads_on("redb");
}

#[cfg(feature = "rocksdb")]
#[test]
fn rocksdb_runs_the_seed_workloads() {
    seed_workloads_on("rocksdb");
}

#[cfg(feature = "tidesdb")]
#[test]
fn tidesdb_runs_the_seed_workloads() {
    seed_workloads_on("tidesdb");
}

/// `--fsync-delay-us` reaches every peer through the LD_PRELOAD shim: each peer's durable
/// writes are delayed (`delayed_fsyncs` counts them), silt's go through its own file layer
/// (`null` there), and without the flag no shim is loaded.
#[test]
fn fsync_delay_reaches_every_engine() {
    let engines = compiled_engines();
    let (ok, lines, stderr) = run(&[
        "--engines",
        &engines.join(","),
        "--workloads",
        "fillrandom",
        "--sync",
        "full,none",
        "--num",
        "40",
        "--fsync-delay-us",
        "100",
    ]);
    assert!(ok, "{stderr}");
    assert_eq!(lines.len(), engines.len() * 2, "{stderr}");
    for v in &lines {
        assert_eq!(v["status"], "ok", "{v}");
        assert_eq!(v["fsync_delay_us"], 100, "{v}");
        if v["engine"] == "silt" {
            assert!(v["delayed_fsyncs"].is_null(), "{v}");
        } else if v["sync"] == "full" {
            // Durable writes went through the shim (how many fsyncs an engine issues per
            // commit is its own business).
            let n = v["delayed_fsyncs"].as_u64().unwrap_or(0);
            assert!(n > 0, "{v}");
        } else {
            assert!(v["delayed_fsyncs"].is_u64(), "{v}");
        }
    }
    let (ok, lines, stderr) = run(&[
        "--engines",
        &engines.join(","),
        "--workloads",
        "fillrandom",
        "--num",
        "40",
    ]);
    assert!(ok, "{stderr}");
    assert!(
        lines.iter().all(|v| v["delayed_fsyncs"].is_null()),
        "{lines:?}"
    );
}

/// `--batch` takes a list (a batch-size sweep): one cell per size for the fills and
/// `delete`, one cell (batch 1) for the others; a delete pattern other than random works.
#[test]
fn batch_sweep_covers_writes_and_deletes() {
    let engines = compiled_engines();
    let (ok, lines, stderr) = run(&[
        "--engines",
        &engines.join(","),
        "--workloads",
        "fillrandom,delete,readrandom",
        "--batch",
        "1,10,100",
        "--num",
        "300",
        "--pattern",
        "sequential",
    ]);
    assert!(ok, "{stderr}");
    assert_eq!(lines.len(), engines.len() * 7, "{stderr}");
    for (i, v) in lines.iter().enumerate() {
        assert_eq!(v["engine"], engines[i / 7], "{v}");
        assert_eq!(v["status"], "ok", "{v}");
        assert_eq!(v["ops"], 300, "{v}");
        let (w, b) = [
            ("fillrandom", 1),
            ("fillrandom", 10),
            ("fillrandom", 100),
            ("delete", 1),
            ("delete", 10),
            ("delete", 100),
            ("readrandom", 1),
        ][i % 7];
        assert_eq!(v["workload"], w, "{v}");
        assert_eq!(v["batch"], b, "{v}");
        match w {
            "delete" => {
                assert_eq!(v["deleted"], 300, "{v}");
                assert_eq!(v["pattern"], "sequential", "{v}");
                assert_eq!(num(v, "live_bytes"), 0.0, "{v}");
            }
            "readrandom" => assert_eq!(v["found"], 300, "{v}"),
            _ => {}
        }
    }
}
