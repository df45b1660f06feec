//! The `commit` subcommand end to end: runs the built binary over every strategy, sync mode
//! and caller kind at a tiny size and checks that every JSON line parses, carries every field
//! scripts rely on, did exactly `--ops` commits, and that the cell count is right. No speed
//! is asserted.

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
    "fsync_delay_us",
    "max_us",
    "async_mode",
    "date",
    "repeat",
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

/// Checks what every cell of a matrix must satisfy.
fn check_cells(cells: &[serde_json::Value], ops: u64) {
    for c in cells {
        for f in FIELDS {
            assert!(c.get(f).is_some(), "missing {f} in {c}");
        }
        assert_eq!(c["ops"], ops, "{c}");
        let threads = c["threads"].as_u64().unwrap();
        let tasks = c["tasks"].as_u64().unwrap();
        assert!((threads == 0) != (tasks == 0), "{c}");
        let mode = c["async_mode"].as_str().unwrap();
        match (tasks, c["strategy"].as_str().unwrap()) {
            (0, _) => assert_eq!(mode, "threads", "{c}"),
            (_, "pipelined") => assert_eq!(mode, "native", "{c}"),
            _ => assert_eq!(mode, "spawn_blocking", "{c}"),
        }
        if c["sync"] == "full" {
            // Every commit waited for an fdatasync; a sync may cover several commits.
            let fsyncs = c["fsyncs"].as_u64().unwrap();
            assert!(fsyncs > 0 && fsyncs <= ops, "{c}");
        }
        if c["sync"] == "none" {
            assert_eq!(c["fsyncs"], 0, "{c}");
        }
    }
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
        "none,full",
        "--strategies",
        "pipelined,direct,timed,fsync-loop",
        "--timed-max-wait-us",
        "200",
    ]);
    // 4 strategies x 2 modes x (2 thread counts + 1 task count)
    assert_eq!(cells.len(), 4 * 2 * 3);
    check_cells(&cells, 200);
    for strategy in ["pipelined", "direct", "timed", "fsync-loop"] {
        for sync in ["none", "full"] {
            for (threads, tasks) in [(1, 0), (2, 0), (0, 4)] {
                let n = cells
                    .iter()
                    .filter(|c| {
                        c["strategy"] == strategy
                            && c["sync"] == sync
                            && c["threads"] == threads
                            && c["tasks"] == tasks
                    })
                    .count();
                assert_eq!(n, 1, "{strategy} {sync} {threads}/{tasks}");
            }
        }
    }
}

#[test]
fn interval_mode_and_uneven_splits() {
    // 100 commits over 3 threads or 7 tasks: still exactly 100 per cell.
    let cells = run(&[
        "--ops",
        "100",
        "--threads",
        "3",
        "--tasks",
        "7",
        "--sync",
        "interval",
        "--strategies",
        "pipelined,direct,timed,fsync-loop",
        "--timed-max-wait-us",
        "200",
        "--repeat",
        "2",
    ]);
    assert_eq!(cells.len(), 4 * 2 * 2);
    check_cells(&cells, 100);
    for c in &cells {
        assert_eq!(c["sync"], "interval");
    }
    assert_eq!(cells.iter().filter(|c| c["repeat"] == 1).count(), 8);
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
    check_cells(&cells, 1000);
    for c in &cells {
        assert_eq!(c["tasks"], 1000);
        assert_eq!(c["record_bytes"], 545);
        assert_eq!(c["ops"], 1000);
        assert_eq!(c["sync"], "full");
    }
    // The flag only sets those values: the spelled-out form gives the same cells.
    let spelled = run(&[
        "--tasks",
        "1000",
        "--ops",
        "1000",
        "--record-bytes",
        "545",
        "--sync",
        "full",
        "--strategies",
        "pipelined,timed",
        "--timed-max-wait-us",
        "500",
    ]);
    let identity = |c: &serde_json::Value| {
        [
            "strategy",
            "sync",
            "threads",
            "tasks",
            "record_bytes",
            "ops",
        ]
        .map(|f| c[f].clone())
    };
    assert_eq!(
        cells.iter().map(identity).collect::<Vec<_>>(),
        spelled.iter().map(identity).collect::<Vec<_>>()
    );
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
