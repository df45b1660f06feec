//! The memstore benchmark path at a tiny size, so that it cannot rot. No speed thresholds.

use silt_raft_compare::cli::{run, CellArgs};
use silt_raft_memstore::Memstore;

#[test]
fn a_tiny_memstore_cell_commits_every_write() {
    let dir = tempfile::tempdir().unwrap();
    let r = run::<Memstore>(&CellArgs {
        dir: dir.path().join("cell"),
        clients: 8,
        secs: 20.0,
        max_writes: 300,
        value_bytes: 100,
        nodes: 3,
        small: true,
    });
    assert_eq!(r.store, "openraft-memstore");
    assert_eq!(r.errors, 0);
    assert!(r.ops >= 300 - 8, "{r:?}");
    // One command per entry: every acknowledged write is an entry the leader applied.
    assert!(r.entries >= r.ops, "{r:?}");
    assert_eq!(r.fsyncs, None, "memstore does not fsync");
}
