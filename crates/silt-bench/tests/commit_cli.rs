//! The `commit` subcommand end to end: every strategy, sync mode and caller kind at a tiny
//! size; every JSON field that scripts rely on is present. No speed is asserted.

use std::process::Command;

const FIELDS: &[&str] = &[
    "strategy",
    "sync",
    "threads",
    "tasks",
    "record_bytes",
    "ops",
    "seconds",
    "ops_per_sec",
    "p50_us",
    "p99_us",
    "p999_us",
    "fsyncs",
    "fsyncs_per_commit",
];

fn run(args: &[&str]) -> Vec<serde_json::Value> {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_silt-bench"))
        .arg("commit")
        .args(args)
        .args(["--format", "json", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn every_cell_reports_every_field() {
    let cells = run(&[
        "--ops",
        "200",
        "--threads",
        "1,2",
        "--tasks",
        "4",
        "--sync",
        "none,interval,full",
        "--strategies",
        "pipelined,direct,timed,fsync-loop",
        "--timed-max-wait-us",
        "200",
    ]);
    // 4 strategies x 3 modes x (2 thread counts + 1 task count)
    assert_eq!(cells.len(), 4 * 3 * 3);
    for c in &cells {
        for f in FIELDS {
            assert!(c.get(f).is_some(), "missing {f} in {c}");
        }
        assert_eq!(c["ops"], 200, "{c}");
        let threads = c["threads"].as_u64().unwrap();
        let tasks = c["tasks"].as_u64().unwrap();
        assert!((threads == 0) != (tasks == 0), "{c}");
        if c["sync"] == "full" {
            assert!(c["fsyncs"].as_u64().unwrap() > 0, "{c}");
        }
        if c["sync"] == "none" {
            assert_eq!(c["fsyncs"], 0, "{c}");
        }
    }
}

#[test]
fn seed001_and_fsync_delay_run() {
    let cells = run(&[
        "--seed001",
        "--strategies",
        "pipelined,timed",
        "--timed-max-wait-us",
        "500",
    ]);
    assert_eq!(cells.len(), 2);
    for c in &cells {
        assert_eq!(c["tasks"], 1000);
        assert_eq!(c["record_bytes"], 545);
        assert_eq!(c["ops"], 1000);
        assert_eq!(c["sync"], "full");
    }
    for model in ["merged", "serial"] {
        let cells = run(&[
            "--ops",
            "40",
            "--threads",
            "2",
            "--sync",
            "full",
            "--strategies",
            "pipelined,fsync-loop",
            "--fsync-delay-us",
            "300",
            "--fsync-delay-model",
            model,
        ]);
        for c in &cells {
            assert_eq!(c["fsync_delay_us"], 300);
            // Every commit waited at least one emulated flush.
            assert!(c["p50_us"].as_f64().unwrap() >= 300.0, "{c}");
        }
    }
}

#[test]
fn bad_flags_fail_with_a_message() {
    let out = Command::new(env!("CARGO_BIN_EXE_silt-bench"))
        .args(["commit", "--strategies", "nope"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown"));
}
