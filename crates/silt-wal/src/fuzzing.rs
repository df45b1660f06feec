//! Entry points for the fuzz targets (`fuzz/`) and the test that replays their corpus.
//! Not a stable API.

use std::sync::Arc;

use silt_vfs::{FileSystem, SimFs};

use crate::format::{RecordHeader, SegmentHeader, RECORD_HEADER_BYTES, SEGMENT_HEADER_BYTES};
use crate::{Error, Options, SyncMode, Wal};

/// Feeds arbitrary bytes to every decoder at every 8-aligned position. Must never panic.
pub fn decode_bytes(data: &[u8]) {
    let _ = SegmentHeader::decode(data);
    let room = data.len() as u64 + 64;
    for off in (0..data.len()).step_by(8) {
        let b = &data[off..];
        // Claim whatever position the bytes claim, so the checks past it are exercised.
        let (seg, lsn) = if b.len() >= 32 {
            (
                u64::from_le_bytes(b[16..24].try_into().expect("8 bytes")),
                u64::from_le_bytes(b[24..32].try_into().expect("8 bytes")),
            )
        } else {
            (0, 0)
        };
        if let Ok(h) = RecordHeader::decode(b, lsn, seg, room) {
            let payload = b
                .get(RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + h.len as usize)
                .unwrap_or(&[]);
            let _ = RecordHeader::verify(b, payload);
            assert!(h.span() >= RECORD_HEADER_BYTES as u64);
        }
    }
}

/// Bytes one `recover_damaged` run appends at most: five 64 KiB segments.
const APPEND_CAP: usize = 5 * (64 << 10);

/// `len` bytes of `src` repeated, copied slice by slice (a byte loop would dominate an
/// instrumented fuzz run).
fn repeat_to(src: &[u8], len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    if src.is_empty() {
        out.resize(len, 0);
        return out;
    }
    while out.len() < len {
        let take = (len - out.len()).min(src.len());
        out.extend_from_slice(&src[..take]);
    }
    out
}

/// Builds a log from `data` (payload sizes and bytes), damages its files as `data` says,
/// reopens it, and checks the oracle: opening either fails with a typed error, or returns
/// a prefix of what was appended, byte for byte. Must never panic otherwise.
pub fn recover_damaged(data: &[u8]) {
    let fs: Arc<dyn FileSystem> = SimFs::new();
    let dir = std::path::Path::new("/fuzz");
    let opts = Options::default()
        .sync(SyncMode::None)
        .segment_bytes(64 << 10)
        .fs(fs.clone());
    let (script, damage) = data.split_at(data.len() / 2);
    let mut appended = Vec::new();
    let mut total = 0usize;
    {
        let wal = Wal::open(dir, opts.clone()).expect("open a new log");
        let mut rest = script;
        while let Some((&n, tail)) = rest.split_first() {
            let len = (n as usize * 97) % 3000;
            // At most ~5 segments per run: enough for damage that spans segment boundaries,
            // cheap enough for 10M runs (an uncapped script appended ~3 MB per run).
            total += len;
            if total > APPEND_CAP {
                break;
            }
            let payload = repeat_to(tail, len);
            rest = tail.get(1..).unwrap_or(&[]);
            if n % 7 == 0 {
                wal.sync().expect("sync");
            }
            if n % 11 == 5 {
                // An abandoned reservation: a Void record of that size, never read back.
                let r = wal
                    .reserve(len, crate::AppendOptions::default())
                    .expect("reserve");
                r.abandon().expect("abandon");
                continue;
            }
            wal.append(&payload).expect("append");
            appended.push(payload);
        }
    }
    // Damage: 8-byte commands (file index, offset, byte).
    let files = fs.list(dir).expect("list");
    for cmd in damage.chunks_exact(8) {
        if files.is_empty() {
            break;
        }
        let path = &files[cmd[0] as usize % files.len()];
        let f = fs.open(path).expect("open segment");
        let len = f.len().expect("len");
        let off = u32::from_le_bytes(cmd[1..5].try_into().expect("4 bytes")) as u64 % len.max(1);
        let _ = f.write_at(&[&cmd[5..8]], off.min(len.saturating_sub(3)));
        if cmd[0] & 0x80 != 0 {
            let _ = f.set_len(off.max(SEGMENT_HEADER_BYTES / 2));
        }
    }
    match Wal::open(dir, opts) {
        Ok(wal) => {
            let mut got = Vec::new();
            for r in wal.read_from(0).expect("reader") {
                match r {
                    Ok(r) => got.push(r.payload),
                    Err(Error::Corruption { .. }) => return,
                    Err(e) => panic!("unexpected error while reading: {e}"),
                }
            }
            assert!(got.len() <= appended.len(), "more records than appended");
            for (g, a) in got.iter().zip(&appended) {
                assert_eq!(g, a, "recovered a record that was not appended there");
            }
        }
        Err(Error::Corruption { .. }) | Err(Error::InvalidArgument(_)) => {}
        Err(e) => panic!("unexpected error kind: {e}"),
    }
}
