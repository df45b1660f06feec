//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::time::Duration;

use silt_wal::{Options, Strategy, SyncMode, Wal};

/// Every strategy, with a short timer for the timed groups so tests stay quick.
pub fn strategies() -> Vec<Strategy> {
    vec![
        Strategy::Pipelined,
        Strategy::DirectPwrite,
        Strategy::TimedGroups {
            max_entries: 8,
            max_wait: Duration::from_micros(200),
        },
    ]
}

pub fn modes() -> Vec<SyncMode> {
    vec![
        SyncMode::None,
        SyncMode::Interval(Duration::from_millis(2)),
        SyncMode::Full,
    ]
}

/// A payload that names its writer and sequence number, with a length that varies.
pub fn payload(writer: u64, seq: u64) -> Vec<u8> {
    let len = 8 + ((writer * 131 + seq * 29) % 300) as usize;
    let mut p = Vec::with_capacity(16 + len);
    p.extend_from_slice(&writer.to_le_bytes());
    p.extend_from_slice(&seq.to_le_bytes());
    p.extend((0..len).map(|i| (i as u64 ^ seq ^ writer) as u8));
    p
}

pub fn parse(p: &[u8]) -> (u64, u64) {
    (
        u64::from_le_bytes(p[0..8].try_into().unwrap()),
        u64::from_le_bytes(p[8..16].try_into().unwrap()),
    )
}

pub fn read_all(wal: &Wal) -> Vec<silt_wal::Record> {
    wal.read_from(0)
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap()
}

pub fn small(opts: Options) -> Options {
    opts.segment_bytes(64 << 10)
}

/// The ids of the `.wal` segments in `dir`, sorted.
pub fn segment_ids(fs: &dyn silt_vfs::FileSystem, dir: &str) -> Vec<u64> {
    let mut ids: Vec<u64> = fs
        .list(dir.as_ref())
        .unwrap()
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "wal"))
        .map(|p| p.file_stem().unwrap().to_str().unwrap().parse().unwrap())
        .collect();
    ids.sort();
    ids
}
