//! A durable commit of a small record sends the pages it touched to the device, not the
//! page-cache folio its segment's zero-fill made (`File::write_zeros`).
//!
//! Its own test binary, so `/proc/self/io` counts this test's writes alone.

use silt_wal::{Options, SyncMode, Wal};

/// Bytes this process has caused to be sent to the storage layer, if the kernel counts
/// them (`CONFIG_TASK_IO_ACCOUNTING`).
fn device_write_bytes() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/self/io").ok()?;
    io.lines()
        .find_map(|l| l.strip_prefix("write_bytes:"))
        .and_then(|v| v.trim().parse().ok())
}

#[test]
fn a_durable_small_record_writes_back_pages_not_the_whole_zero_fill() {
    // On a file system without a device (tmpfs) nothing is counted and this proves
    // nothing; on ext4 with large folios (Linux 6.16+) a zero-fill in 1 MiB writes made
    // each sync below write 1 MiB.
    let dir = tempfile::tempdir().unwrap();
    let wal = Wal::open(
        dir.path(),
        Options::default()
            .sync(SyncMode::Full)
            .segment_bytes(8 << 20),
    )
    .unwrap();
    wal.append(&[0u8; 116]).unwrap();
    let Some(before) = device_write_bytes() else {
        eprintln!("no /proc/self/io: nothing to measure");
        return;
    };
    const N: u64 = 300;
    // 300 records of ~140 bytes stay far below a quarter of the segment, where the next
    // segment is prepared (and zero-filled) in the background.
    for i in 0..N {
        wal.append(&[i as u8; 116]).unwrap();
    }
    let per_sync = (device_write_bytes().unwrap() - before) / N;
    assert!(
        per_sync <= 32 << 10,
        "each durable 116-byte record wrote {per_sync} bytes to the device"
    );
}
