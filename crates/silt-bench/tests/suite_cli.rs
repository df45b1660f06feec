//! `suite seeds` and `report` end to end, at a tiny size: the suite runs the whole seed
//! matrix on the compiled-in default peers beside silt, writes one JSON line per cell, and
//! its report has the ratios and the charts; `report DIR` remakes it from the lines. No
//! speed is asserted.

use std::process::Command;

use serde_json::Value;

fn bench() -> Command {
    Command::new(env!("CARGO_BIN_EXE_silt-bench"))
}

#[test]
fn the_seed_suite_runs_and_reports() {
    let out_dir = tempfile::tempdir().unwrap();
    let db_dir = tempfile::tempdir().unwrap();
    let engines = if cfg!(feature = "sqlite") {
        "silt,sqlite"
    } else {
        "silt"
    };
    let out = bench()
        .args(["suite", "seeds", "--num", "1000", "--engines", engines])
        .arg("--out")
        .arg(out_dir.path())
        .arg("--dir")
        .arg(db_dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let results = std::fs::read_to_string(out_dir.path().join("results.jsonl")).unwrap();
    let lines: Vec<Value> = results
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Per engine: 4 writes, large values, 6 reads, 2 + 1 range scans, iteration, delete,
    // and the durable sweep of writes and deletes over 4 batch sizes.
    let n_engines = engines.split(',').count();
    assert_eq!(
        lines.len(),
        n_engines * (4 + 1 + 6 + 3 + 1 + 1 + 8),
        "{results}"
    );
    assert!(lines.iter().all(|v| v["status"] == "ok"), "{results}");
    let durable: Vec<&Value> = lines.iter().filter(|v| v["sync"] == "full").collect();
    assert_eq!(durable.len(), n_engines * 8);
    for b in [1, 10, 100, 1000] {
        assert!(durable
            .iter()
            .any(|v| v["batch"] == b && v["workload"] == "random_write"));
        assert!(durable
            .iter()
            .any(|v| v["batch"] == b && v["workload"] == "random_delete"));
    }
    let report = std::fs::read_to_string(out_dir.path().join("report.md")).unwrap();
    assert!(report.contains("large_value"), "{report}");
    if n_engines > 1 {
        assert!(report.contains("silt/sqlite"), "{report}");
    }
    for chart in ["throughput", "latency", "amplification", "batch_scaling"] {
        let p = out_dir.path().join("charts").join(format!("{chart}.svg"));
        let svg = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p:?}: {e}"));
        assert!(svg.contains("<svg"), "{chart}");
        assert!(svg.contains("silt"), "{chart}");
    }
    // Every database directory was removed after its cell.
    assert_eq!(std::fs::read_dir(db_dir.path()).unwrap().count(), 0);

    // `report DIR` remakes the report from the results alone.
    std::fs::remove_file(out_dir.path().join("report.md")).unwrap();
    let out = bench().arg("report").arg(out_dir.path()).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let again = std::fs::read_to_string(out_dir.path().join("report.md")).unwrap();
    assert!(again.contains("large_value"));
    // It keeps the command the suite recorded.
    assert!(
        again.contains("silt-bench suite seeds --num 1000"),
        "{again}"
    );
}

#[test]
fn the_full_scale_runs_the_seeds_regime_too() {
    // silt only, N = 1000: the default 24 cells, then batch 1000 at 5N for 2 and 8 threads
    // and sync none and full, large values at N/2, the reads at 5N, and 10N keys for the
    // larger-than-cache group.
    let out_dir = tempfile::tempdir().unwrap();
    let out = bench()
        .args([
            "suite",
            "seeds",
            "--num",
            "1000",
            "--engines",
            "silt",
            "--scale",
            "full",
        ])
        .arg("--out")
        .arg(out_dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let results = std::fs::read_to_string(out_dir.path().join("results.jsonl")).unwrap();
    let lines: Vec<Value> = results
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 24 + 20 + 4 + 20 + 3, "{results}");
    assert!(lines.iter().all(|v| v["status"] == "ok"), "{results}");
    let cell = |w: &str, t: u64, b: u64, sync: &str, num: u64| {
        lines.iter().any(|v| {
            v["workload"] == w
                && v["threads"] == t
                && v["batch"] == b
                && v["sync"] == sync
                && v["num"] == num
        })
    };
    for t in [2, 8] {
        for sync in ["none", "full"] {
            assert!(
                cell("random_write", t, 1000, sync, 5000),
                "random_write {t} {sync}"
            );
            assert!(
                cell("large_value", t, 1000, sync, 500),
                "large_value {t} {sync}"
            );
        }
        assert!(cell("random_seek", t, 1, "none", 5000), "random_seek {t}");
    }
    assert!(cell("range100", 2, 1, "none", 10_000));
}

/// An interrupted suite goes on where it stopped: `--resume` keeps the finished cells (not
/// run again: their lines come back unchanged), drops a failed or torn line and runs its
/// cell again, and refuses a run started with other flags or none at all.
#[test]
fn a_resumed_suite_runs_only_what_was_not_finished() {
    let out_dir = tempfile::tempdir().unwrap();
    let run = |extra: &[&str]| {
        bench()
            .args(["suite", "seeds", "--num", "1000", "--engines", "silt"])
            .args(extra)
            .arg("--out")
            .arg(out_dir.path())
            .output()
            .unwrap()
    };
    // Nothing to resume yet.
    let out = run(&["--resume"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no run to go on with"));

    let out = run(&[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = out_dir.path().join("results.jsonl");
    let full = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = full.lines().collect();
    assert_eq!(lines.len(), 24, "{full}");
    // As if killed during the sixth cell, after a failed fifth: five lines kept whole, the
    // fifth marked failed, and half of the sixth.
    let failed = lines[4].replacen("\"status\":\"ok\"", "\"status\":\"failed\"", 1);
    assert_ne!(failed, lines[4]);
    let cut = format!(
        "{}\n{failed}\n{}",
        lines[..4].join("\n"),
        &lines[5][..lines[5].len() / 2]
    );
    std::fs::write(&path, cut).unwrap();
    // A finished run says so in `resume.txt`; this one was stopped before.
    let stamp = out_dir.path().join("resume.txt");
    let flags = std::fs::read_to_string(&stamp).unwrap();
    assert!(flags.lines().any(|l| l == "finished"), "{flags}");
    std::fs::write(&stamp, flags.lines().next().unwrap()).unwrap();

    // A fresh start would throw the unfinished run away: refused.
    let out = run(&[]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("did not finish"));
    // Other flags: refused, and nothing is touched.
    let out = run(&["--resume", "--seed", "7"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("was started as"));

    let out = run(&["--resume"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("4 finished cells kept"), "{stderr}");
    // The failed line and the torn one were moved aside, not lost.
    let dropped = std::fs::read_to_string(out_dir.path().join("results.dropped.jsonl")).unwrap();
    assert_eq!(dropped.lines().count(), 2, "{dropped}");
    assert!(dropped.contains("\"status\":\"failed\""));
    let after = std::fs::read_to_string(&path).unwrap();
    let again: Vec<&str> = after.lines().collect();
    assert_eq!(again.len(), 24, "{after}");
    // The kept cells were not run again: their lines, timings included, are as they were.
    assert_eq!(&again[..4], &lines[..4]);
    let cells = |ls: &[&str]| {
        let mut v: Vec<(String, String, u64, u64)> = ls
            .iter()
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                (
                    v["workload"].as_str().unwrap().to_string(),
                    v["sync"].as_str().unwrap().to_string(),
                    v["batch"].as_u64().unwrap(),
                    v["num"].as_u64().unwrap(),
                )
            })
            .collect();
        v.sort();
        v
    };
    assert_eq!(cells(&again), cells(&lines), "the same cells, each once");
    assert!(again.iter().all(|l| l.contains("\"status\":\"ok\"")));
    let command = std::fs::read_to_string(out_dir.path().join("command.txt")).unwrap();
    assert!(command.contains("Resumed on"), "{command}");
    assert!(out_dir.path().join("report.md").exists());
    // Finished: a fresh start is allowed again.
    let out = run(&[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn unknown_suite_and_tiny_sizes_are_errors() {
    let bad_scale = ["suite", "seeds", "--scale", "huge"];
    for args in [
        &["suite", "nosuch"][..],
        &["suite", "seeds", "--num", "10"],
        &bad_scale,
    ] {
        let out = bench().args(args).output().unwrap();
        assert!(!out.status.success(), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("silt-bench:"));
    }
}
