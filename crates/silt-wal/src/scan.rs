//! Reading a log without changing it ([`crate::Wal::open_read_only`]): for tools, for a
//! second reader process beside a live writer, and for repair.
//!
//! The walk is recovery's (`recovery.rs`, rules 1–3 of `docs/format/wal.md`,
//! "Recovery") with every write left out: no `lost/` copy, no zeroing, no segment removed,
//! created or synced, no `.tmp` file removed. Damage ends the readable log and is reported
//! in [`RecoveryInfo::cut`] (`saved` empty: nothing was kept, because nothing was cut),
//! including damage proven durable ([`DamageKind::DurableLost`]), which [`crate::Wal::open`]
//! refuses with `Corruption`; the caller decides what that means for it.
//!
//! Invariants:
//! 1. Nothing under the log directory is created, written, renamed or removed.
//! 2. A live writer may be appending while the walk runs. Its records land out of order
//!    (the fill ring), so a record that was invalid when read may be whole a moment later,
//!    and a later record may already carry a durable watermark above it. Before damage is
//!    reported as durable, the bad record is read again: if it has become valid the walk
//!    goes on. Records the walk returns are always whole and checked.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use silt_vfs::File;

use crate::error::{Error, Result};
use crate::format::{SegmentHeader, SEGMENT_HEADER_BYTES};
use crate::options::Options;
use crate::recovery::{
    corrupt_or_io, hole_below, scan_valid, Damage, DamageKind, Recovered, RecoveryInfo, Step,
    Walker,
};
use crate::segment::{parse_segment_name, Segments};

/// How many times a bad record that later records claim durable is read again before it is
/// reported (a live writer may have been filling it).
const REREADS_MAX: usize = 3;

/// Walks the log in `dir` without changing anything (invariant 1). The returned segments
/// are poisoned: they never create a file.
pub(crate) fn scan(dir: &Path, opts: &Options) -> Result<Recovered> {
    let fs = opts.fs.clone();
    let mut ids = Vec::new();
    match fs.list(dir) {
        Ok(paths) => {
            for path in paths {
                if let Some(id) = parse_segment_name(&path) {
                    ids.push((id, path));
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io("list directory", Some(dir.to_path_buf()), e)),
    }
    ids.sort();
    let mut files: BTreeMap<u64, Arc<dyn File>> = BTreeMap::new();
    let mut seg_bytes = None;
    for (id, path) in &ids {
        let f = fs
            .open(path)
            .map_err(|e| Error::io("open", Some(path.clone()), e))?;
        let mut hb = [0u8; SEGMENT_HEADER_BYTES as usize];
        f.read_at(&mut hb, 0)
            .map_err(|e| corrupt_or_io(e, path, 0, "segment header is truncated"))?;
        let h = SegmentHeader::decode(&hb).map_err(|m| Error::corruption(path.clone(), 0, m))?;
        if h.segment_id != *id {
            return Err(Error::corruption(
                path.clone(),
                24,
                "segment id in the header does not match the file name",
            ));
        }
        if *seg_bytes.get_or_insert(h.segment_bytes) != h.segment_bytes {
            return Err(Error::corruption(
                path.clone(),
                16,
                "segment size differs from the log's other segments",
            ));
        }
        let len = f
            .len()
            .map_err(|e| Error::io("stat", Some(path.clone()), e))?;
        if len != h.segment_bytes {
            return Err(Error::corruption(
                path.clone(),
                len.min(h.segment_bytes),
                "segment file is not its full preallocated size",
            ));
        }
        files.insert(*id, f);
    }
    for w in ids.windows(2) {
        if w[1].0 != w[0].0 + 1 {
            return Err(Error::corruption(
                crate::segment::segment_path(dir, w[0].0 + 1),
                0,
                "a segment in the middle of the log is missing",
            ));
        }
    }
    let s = seg_bytes.unwrap_or(opts.segment_bytes);
    let first = ids.first().map_or(0, |(id, _)| *id);
    let last = ids.last().map_or(0, |(id, _)| *id);
    let segments = Segments::new(
        fs,
        dir.to_path_buf(),
        s,
        opts.preallocate,
        0,
        files,
        Vec::new(),
    );
    segments.poison();
    let first_lsn = first * s + SEGMENT_HEADER_BYTES;
    if ids.is_empty() {
        let info = RecoveryInfo {
            first_lsn,
            tail_lsn: first_lsn,
            records: 0,
            truncated: None,
            cut: None,
            skipped: Vec::new(),
        };
        return Ok(Recovered {
            segments,
            tail: first_lsn,
            info,
        });
    }

    let mut walker = Walker::new(&segments, first_lsn, u64::MAX);
    let mut records = 0u64;
    let mut skipped = Vec::new();
    let mut rereads = 0;
    let mut cut = None;
    let tail = loop {
        match walker.next_record(false)? {
            Step::Record(_) => records += 1,
            Step::End(pos) => break pos,
            Step::Invalid(pos, why, span) => {
                if pos < opts.required_from {
                    if let Some(next) = hole_below(&segments, pos, span, opts.required_from, last)?
                    {
                        skipped.push(damage(
                            &segments,
                            DamageKind::RecordsFollow,
                            pos,
                            why,
                            next - pos,
                            0,
                        ));
                        walker = Walker::new(&segments, next, u64::MAX);
                        continue;
                    }
                }
                let mut after = 0;
                let mut proof = false;
                scan_valid(&segments, pos, last, |_, durable| {
                    if durable > pos {
                        proof = true;
                        return false;
                    }
                    after += 1;
                    true
                })?;
                if proof && rereads < REREADS_MAX {
                    // Invariant 2: a live writer may have filled it since.
                    rereads += 1;
                    walker = Walker::new(&segments, pos, u64::MAX);
                    continue;
                }
                let kind = if proof {
                    DamageKind::DurableLost
                } else if after > 0 {
                    DamageKind::RecordsFollow
                } else {
                    DamageKind::TornTail
                };
                let bytes = nonzero_extent(&segments, pos, last)?;
                if bytes > 0 || proof {
                    cut = Some(damage(&segments, kind, pos, why, bytes, after));
                }
                break pos;
            }
        }
    };
    let truncated = cut.as_ref().map(|d| (d.file.clone(), d.offset));
    Ok(Recovered {
        segments,
        tail,
        info: RecoveryInfo {
            first_lsn,
            tail_lsn: tail,
            records,
            truncated,
            cut,
            skipped,
        },
    })
}

fn damage(
    segments: &Segments,
    kind: DamageKind,
    pos: u64,
    why: &str,
    bytes: u64,
    records_after: u64,
) -> Damage {
    let s = segments.segment_bytes;
    Damage {
        kind,
        file: segments.path(pos / s),
        offset: pos % s,
        lsn: pos,
        reason: why.to_string(),
        bytes,
        records_after,
        saved: Vec::new(),
    }
}

/// Bytes from `tail` to the last non-zero byte of the log (over every segment up to
/// `last`, headers of later segments not counted): what recovery would cut and keep.
fn nonzero_extent(segments: &Segments, tail: u64, last: u64) -> Result<u64> {
    let s = segments.segment_bytes;
    let mut bytes = 0;
    let mut buf = vec![0u8; s as usize];
    for seg in tail / s..=last {
        let Some(f) = segments.existing(seg) else {
            continue;
        };
        let path = segments.path(seg);
        f.read_at(&mut buf, 0)
            .map_err(|e| corrupt_or_io(e, &path, 0, "segment is truncated"))?;
        let from = if seg == tail / s {
            (tail % s) as usize
        } else {
            SEGMENT_HEADER_BYTES as usize
        };
        if let Some(end) = buf[from..].iter().rposition(|&b| b != 0) {
            bytes += (end + 1) as u64;
        }
    }
    Ok(bytes)
}
