//! A durable commit of a small record sends the pages it touched to the device, not the
//! page-cache folio its segment's zero-fill made (`File::write_zeros`), in a fresh segment
//! and in a recycled one.
//!
//! Its own test binary, so `/proc/self/io` counts this test's writes alone. On a file
//! system without a device (tmpfs), or a kernel without large folios (before 6.16 on
//! ext4), nothing here can fail; on ext4 with large folios a zero-fill in 1 MiB writes
//! made each sync below write 1 MiB.

use silt_wal::{AppendOptions, Options, SyncMode, Wal};

/// Bytes this process has caused to be sent to the storage layer, if the kernel counts
/// them (`CONFIG_TASK_IO_ACCOUNTING`).
fn device_write_bytes() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/self/io").ok()?;
    io.lines()
        .find_map(|l| l.strip_prefix("write_bytes:"))
        .and_then(|v| v.trim().parse().ok())
}

fn page_size() -> u64 {
    std::process::Command::new("getconf")
        .arg("PAGESIZE")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(4096)
}

/// Device bytes per durable append of `n` 116-byte records.
fn per_durable_record(wal: &Wal, n: u64) -> Option<u64> {
    let before = device_write_bytes()?;
    for i in 0..n {
        wal.append(&[i as u8; 116]).unwrap();
    }
    Some((device_write_bytes()? - before) / n)
}

#[test]
fn a_durable_small_record_writes_back_pages_not_the_whole_zero_fill() {
    const SEG: u64 = 8 << 20;
    // A record of ~140 bytes touches one page, two where it straddles a boundary.
    let limit = 8 * page_size();
    let dir = tempfile::tempdir().unwrap();
    let wal = Wal::open(
        dir.path(),
        Options::default().sync(SyncMode::Full).segment_bytes(SEG),
    )
    .unwrap();
    wal.append(&[0u8; 116]).unwrap();
    // 300 records stay far below a quarter of the segment, where the next segment is
    // prepared (and zero-filled) in the background.
    let Some(fresh) = per_durable_record(&wal, 300) else {
        eprintln!("no /proc/self/io: nothing to measure");
        return;
    };
    assert!(
        fresh <= limit,
        "each durable 116-byte record wrote {fresh} bytes to the device (fresh segment)"
    );

    // Into segment 2 without waiting for syncs, segments 0 and 1 purged into the pool
    // before segment 3 is prepared (a quarter into segment 2), then into segment 3, which
    // is one of them renamed.
    let unsynced = AppendOptions { sync: Some(false) };
    let payload = vec![7u8; 60_000];
    while wal.reserved_lsn() < 2 * SEG + 4096 {
        wal.append_with(&payload, unsynced).unwrap();
    }
    wal.sync().unwrap();
    wal.purge_up_to(2 * SEG).unwrap();
    let pooled = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            let p = e.as_ref().unwrap().path();
            p.extension().is_some_and(|x| x == "recycle")
        })
        .count();
    assert_eq!(pooled, 2, "segments 0 and 1 kept for reuse");
    while wal.reserved_lsn() < 3 * SEG + 4096 {
        wal.append_with(&payload, unsynced).unwrap();
    }
    wal.sync().unwrap();
    let recycled = per_durable_record(&wal, 300).unwrap();
    assert!(
        recycled <= limit,
        "each durable 116-byte record wrote {recycled} bytes to the device (recycled segment)"
    );
}
