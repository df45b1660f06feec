//! The silt-raft benchmark path at a tiny size, so that it cannot rot. No speed thresholds.

use silt_raft_compare::cli::{run, CellArgs};
use silt_raft_compare::silt::SiltRaft;

#[test]
fn a_tiny_silt_raft_cell_commits_every_write_and_syncs_every_log() {
    let dir = tempfile::tempdir().unwrap();
    let r = run::<SiltRaft>(&CellArgs {
        dir: dir.path().join("cell"),
        clients: 8,
        secs: 20.0,
        max_writes: 300,
        value_bytes: 100,
        nodes: 3,
        small: true,
    });
    assert_eq!(r.store, "silt-raft");
    assert_eq!(r.errors, 0);
    assert!(r.ops >= 300 - 8, "{r:?}");
    assert!(r.entries >= r.ops, "{r:?}");
    let fsyncs = r.fsyncs.expect("silt-raft counts its log's fsyncs");
    assert_eq!(fsyncs.len(), 3);
    assert!(fsyncs.iter().all(|&f| f > 0), "{fsyncs:?}");
}

#[test]
fn the_driver_runs_a_silt_raft_cell_in_a_child_process() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_silt-raft-compare"))
        .args([
            "cell",
            "--clients",
            "2",
            "--max-writes",
            "50",
            "--secs",
            "20",
            "--small",
        ])
        .arg("--dir")
        .arg(dir.path().join("cell"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let r = stdout
        .lines()
        .find_map(silt_raft_compare::harness::CellResult::parse)
        .unwrap_or_else(|| panic!("no result line: {stdout}"));
    assert_eq!(r.clients, 2);
    assert!(r.ops >= 48, "{r:?}");
}
