//! Opening a log: finding its segments, walking every record, and deciding whether a bad
//! record is damage the caller does not need (skip it), a torn tail or an unsynced hole (cut
//! it off, keep its bytes, append after it), or lost durable data (`Corruption`).
//!
//! The rules (see `docs/format/wal.md`, "Recovery"):
//! 1. Walk records from the oldest segment; stop at the first invalid one (zero or unknown
//!    type, non-zero reserved bytes, wrong segment id or LSN, bad length, bad checksum).
//! 2. Below `Options::required_from`, skip a hole that provably hides no needed record
//!    (`hole_below`), report it, and walk on.
//! 3. Read ahead over the rest of the log. If any later valid record carries a durable
//!    watermark above the bad offset, the bad bytes had been synced: fail with
//!    `Corruption { file, offset }`. Never skip the hole and keep replaying.
//! 4. Otherwise cut there: keep the non-zero bytes from the cut on in `lost/` (synced)
//!    before anything is destroyed (`save_tail`), then zero the rest of the segment (so no
//!    stale record behind it can ever be read after new appends), remove later segments,
//!    sync, and append from there. Report the cut: a torn tail (no valid record follows)
//!    or a hole with records after it.
//! 5. Sync every remaining segment, so the recovered records are durable before new
//!    records claim them as durable.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use silt_vfs::File;

use crate::error::{Error, Result};
use crate::format::{
    RecordHeader, RecordType, SegmentHeader, RECORD_ALIGN, RECORD_HEADER_BYTES,
    SEGMENT_HEADER_BYTES,
};
use crate::options::Options;
use crate::segment::{parse_segment_name, Segments};
use crate::Lsn;

/// The directory inside the log's where recovery keeps bytes it cut off.
pub(crate) const LOST_DIR: &str = "lost";

/// What opening the log found.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecoveryInfo {
    /// LSN of the oldest record still in the log (or of the tail if there is none).
    pub first_lsn: Lsn,
    /// Where the next record will go.
    pub tail_lsn: Lsn,
    /// Valid records found.
    pub records: u64,
    /// A tail that was cut off: the file and the offset where the cut began (the first
    /// invalid record). `None` if the log ended cleanly (zeros after the last record).
    pub truncated: Option<(PathBuf, u64)>,
    /// What was cut off at the tail, and where its bytes were kept: set whenever
    /// `truncated` is.
    pub cut: Option<Damage>,
    /// Damage below [`crate::Options::required_from`], skipped: nothing needed was lost.
    pub skipped: Vec<Damage>,
}

/// Whether bad bytes in the log were the unfinished end of the log or damage in its middle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DamageKind {
    /// Zeros or garbage to the end of the log: the end of appends that a crash cut short
    /// (no valid record follows).
    TornTail,
    /// Valid records follow the bad bytes, none of them covering the bad bytes with a
    /// durable watermark: a hole in records that were never synced (a machine crash in
    /// `SyncMode::None` or between interval syncs), or bit rot there. By the prefix rule
    /// the records after the hole are not replayed; their bytes are kept.
    RecordsFollow,
    /// A later valid record's durable watermark covers the bad bytes: data that had been
    /// synced is damaged. [`crate::Wal::open`] refuses this as `Corruption`; only
    /// [`crate::Wal::open_read_only`], which changes nothing, reports it here.
    DurableLost,
}

/// Bad bytes recovery found, what it did with them and where it kept them.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Damage {
    /// Torn tail or a hole with records after it.
    pub kind: DamageKind,
    /// The segment file holding the first bad byte.
    pub file: PathBuf,
    /// The offset in `file` of the first invalid record: where the cut (or the skipped
    /// hole) begins.
    pub offset: u64,
    /// That record's LSN.
    pub lsn: Lsn,
    /// Why the record there is invalid.
    pub reason: String,
    /// Bytes from `offset` on that were cut off (up to the last non-zero byte, over every
    /// segment cut); for skipped damage, the bytes up to the next valid record.
    pub bytes: u64,
    /// Valid records found after the bad bytes (not replayed, for a cut).
    pub records_after: u64,
    /// Where the cut bytes were kept: files in the log directory's `lost/`.
    pub saved: Vec<PathBuf>,
}

pub(crate) struct Recovered {
    pub(crate) segments: Segments,
    pub(crate) tail: u64,
    pub(crate) info: RecoveryInfo,
}

pub(crate) fn recover(dir: &Path, opts: &Options) -> Result<Recovered> {
    let fs = opts.fs.clone();
    let io = |op: &'static str, p: &Path| {
        let p = p.to_path_buf();
        move |e| Error::io(op, Some(p), e)
    };
    fs.create_dir_all(dir)
        .map_err(io("create directory", dir))?;
    let mut ids = Vec::new();
    let mut pool = Vec::new();
    for path in fs.list(dir).map_err(io("list directory", dir))? {
        if let Some(id) = parse_segment_name(&path) {
            ids.push((id, path));
        } else if path.extension().is_some_and(|e| e == "recycle") {
            pool.push(path);
        } else if path.extension().is_some_and(|e| e == "tmp") {
            // A segment whose preallocation did not finish.
            fs.remove(&path).map_err(io("remove", &path))?;
        }
    }
    ids.sort();

    if ids.is_empty() {
        let segments = Segments::new(
            fs,
            dir.to_path_buf(),
            opts.segment_bytes,
            opts.preallocate,
            opts.recycle_segments,
            BTreeMap::new(),
            pool,
        );
        segments.get(0)?;
        let tail = SEGMENT_HEADER_BYTES;
        return Ok(Recovered {
            segments,
            tail,
            info: RecoveryInfo {
                first_lsn: tail,
                tail_lsn: tail,
                records: 0,
                truncated: None,
                cut: None,
                skipped: Vec::new(),
            },
        });
    }

    // Open every segment and check its header.
    let mut files: BTreeMap<u64, Arc<dyn File>> = BTreeMap::new();
    let mut seg_bytes = None;
    for (id, path) in &ids {
        let f = fs.open(path).map_err(io("open", path))?;
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
        let len = f.len().map_err(io("stat", path))?;
        if len != h.segment_bytes {
            return Err(Error::corruption(
                path.clone(),
                len.min(h.segment_bytes),
                "segment file is not its full preallocated size",
            ));
        }
        files.insert(*id, f);
    }
    let s = seg_bytes.expect("at least one segment");
    let first = ids[0].0;
    let last = ids[ids.len() - 1].0;
    for w in ids.windows(2) {
        if w[1].0 != w[0].0 + 1 {
            return Err(Error::corruption(
                crate::segment::segment_path(dir, w[0].0 + 1),
                0,
                "a segment in the middle of the log is missing",
            ));
        }
    }

    let segments = Segments::new(
        fs.clone(),
        dir.to_path_buf(),
        s,
        opts.preallocate,
        opts.recycle_segments,
        files,
        pool,
    );
    let first_lsn = first * s + SEGMENT_HEADER_BYTES;
    let mut walker = Walker::new(&segments, first_lsn, u64::MAX);
    let mut records = 0u64;
    let mut skipped = Vec::new();
    let mut bad = None;
    let tail = loop {
        match walker.next_record(false)? {
            Step::Record(_) => records += 1,
            Step::End(pos) => break pos,
            Step::Invalid(pos, why, span) => {
                if pos < opts.required_from {
                    if let Some(next) = hole_below(&segments, pos, span, opts.required_from, last)?
                    {
                        skipped.push(Damage {
                            kind: DamageKind::RecordsFollow,
                            file: segments.path(pos / s),
                            offset: pos % s,
                            lsn: pos,
                            reason: why.to_string(),
                            bytes: next - pos,
                            records_after: 0,
                            saved: Vec::new(),
                        });
                        walker = Walker::new(&segments, next, u64::MAX);
                        continue;
                    }
                }
                let after = check_torn_tail(&segments, pos, last)?;
                bad = Some((why, after));
                break pos;
            }
        }
    };
    let mut truncated = None;
    let mut cut = None;
    let tail_seg = tail / s;
    if tail_seg <= last {
        // Keep the bytes before destroying them: a torn tail of garbage, or records after a
        // hole, are evidence (issue 10). Zeros are not.
        let (saved, bytes) = save_tail(&*fs, dir, &segments, tail, last)?;
        if bytes > 0 {
            let (why, after) = bad.unwrap_or(("zeros expected after the last record", 0));
            truncated = Some((segments.path(tail_seg), tail % s));
            cut = Some(Damage {
                kind: if after > 0 {
                    DamageKind::RecordsFollow
                } else {
                    DamageKind::TornTail
                },
                file: segments.path(tail_seg),
                offset: tail % s,
                lsn: tail,
                reason: why.to_string(),
                bytes,
                records_after: after,
                saved,
            });
        }
        zero_from(&segments, tail)?;
        segments.remove_after(tail_seg)?;
    }
    for id in segments.ids() {
        let f = segments.existing(id).expect("listed");
        f.sync_data()
            .map_err(|e| Error::io("fdatasync", Some(segments.path(id)), e))?;
    }
    if tail_seg > last {
        segments.get(tail_seg)?;
    }
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

/// Where the walk resumes after an invalid record at `bad`, which lies below `required`
/// (the first LSN the caller needs): the next valid record, if the hole provably holds no
/// record at or above `required` — the next valid record is at or below it, or the bad
/// record's own header is intact and ends exactly where the next valid record starts (one
/// record, starting below `required`, damaged). `None` if the hole may hide a needed
/// record, or nothing valid follows: the caller applies the usual rules.
pub(crate) fn hole_below(
    segments: &Segments,
    bad: u64,
    span: Option<u64>,
    required: u64,
    last: u64,
) -> Result<Option<u64>> {
    let mut next = None;
    scan_valid(segments, bad, last, |pos, _| {
        next = Some(pos);
        false
    })?;
    Ok(next.filter(|&n| n <= required || span.is_some_and(|sp| bad + sp == n)))
}

/// Calls `visit(lsn, durable watermark)` for every valid record found at an aligned
/// position after `bad`, in order, until it returns false.
pub(crate) fn scan_valid(
    segments: &Segments,
    bad: u64,
    last: u64,
    mut visit: impl FnMut(u64, u64) -> bool,
) -> Result<()> {
    let s = segments.segment_bytes;
    let mut buf = vec![0u8; s as usize];
    for seg in bad / s..=last {
        let Some(f) = segments.existing(seg) else {
            continue;
        };
        let path = segments.path(seg);
        f.read_at(&mut buf, 0)
            .map_err(|e| corrupt_or_io(e, &path, 0, "segment is truncated"))?;
        let from = if seg == bad / s {
            bad % s + RECORD_ALIGN
        } else {
            SEGMENT_HEADER_BYTES
        };
        let mut off = from;
        while off + RECORD_HEADER_BYTES as u64 <= s {
            let o = off as usize;
            let pos = seg * s + off;
            // A record's LSN field (bytes 24..32 of its header) is never zero, so no record
            // starts where that field lies in an all-zero page: skip to the first position
            // whose field is in the next page. (A preallocated segment is mostly zeros;
            // comparing whole pages is a memcmp, where a byte loop is slow in debug builds.)
            let field = o + 24;
            let page = field / ZERO_PAGE.len() * ZERO_PAGE.len();
            if field + 8 <= page + ZERO_PAGE.len()
                && all_zero(&buf[page..(page + ZERO_PAGE.len()).min(buf.len())])
            {
                let next_field = (page + ZERO_PAGE.len()) as u64;
                let next = (next_field - 24).div_ceil(RECORD_ALIGN) * RECORD_ALIGN;
                off = next.max(off + RECORD_ALIGN);
                continue;
            }
            // Cheap filter before decoding: the LSN field must equal the position.
            if buf[o + 24..o + 32] == pos.to_le_bytes() {
                if let Ok(h) = RecordHeader::decode(&buf[o..], pos, seg, s - off) {
                    let payload = match h.kind {
                        RecordType::Data => &buf[o + RECORD_HEADER_BYTES..][..h.len as usize],
                        RecordType::Padding | RecordType::Void => &[][..],
                    };
                    if RecordHeader::verify(&buf[o..], payload) && !visit(pos, h.durable) {
                        return Ok(());
                    }
                }
            }
            off += RECORD_ALIGN;
        }
    }
    Ok(())
}

/// Copies what lies from `tail` to the end of the log into the log directory's `lost/`,
/// synced, before recovery zeroes it: the rest of the tail segment (up to its last non-zero
/// byte) as `lost/{segment}.{offset}.tail`, and each later segment holding anything past
/// its header as `lost/{segment}`. Returns the files written and the bytes kept (0, and no
/// file, if everything there is zero).
fn save_tail(
    fs: &dyn silt_vfs::FileSystem,
    dir: &Path,
    segments: &Segments,
    tail: u64,
    last: u64,
) -> Result<(Vec<PathBuf>, u64)> {
    let s = segments.segment_bytes;
    let lost = dir.join(LOST_DIR);
    let mut saved = Vec::new();
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
        let Some(end) = last_nonzero(&buf[from..]) else {
            continue;
        };
        let (keep, name) = if seg == tail / s {
            (
                &buf[from..from + end + 1],
                format!("{}.{from}.tail", file_name(&path)),
            )
        } else {
            (&buf[..from + end + 1], file_name(&path))
        };
        fs.create_dir_all(&lost)
            .map_err(|e| Error::io("create directory", Some(lost.clone()), e))?;
        let mut to = lost.join(&name);
        let mut n = 0;
        while fs.open(&to).is_ok() {
            n += 1;
            to = lost.join(format!("{name}.{n}"));
        }
        let out = fs
            .create(&to)
            .map_err(|e| Error::io("create", Some(to.clone()), e))?;
        out.write_at(&[keep], 0)
            .map_err(|e| Error::io("pwrite", Some(to.clone()), e))?;
        out.sync_data()
            .map_err(|e| Error::io("fdatasync", Some(to.clone()), e))?;
        bytes += (end + 1) as u64;
        saved.push(to);
    }
    if !saved.is_empty() {
        fs.sync_dir(&lost)
            .map_err(|e| Error::io("fsync directory", Some(lost.clone()), e))?;
        fs.sync_dir(dir)
            .map_err(|e| Error::io("fsync directory", Some(dir.to_path_buf()), e))?;
    }
    Ok((saved, bytes))
}

/// A page of zeros, to compare against.
static ZERO_PAGE: [u8; 4096] = [0; 4096];

/// Whether `b` is all zeros: compared a page at a time (a memcmp), not byte by byte.
fn all_zero(b: &[u8]) -> bool {
    b.chunks(ZERO_PAGE.len())
        .all(|c| c == &ZERO_PAGE[..c.len()])
}

/// The index of the last non-zero byte of `b`, skipping all-zero pages from the end.
fn last_nonzero(b: &[u8]) -> Option<usize> {
    let mut end = b.len();
    while end > 0 {
        let start = end.saturating_sub(ZERO_PAGE.len());
        if !all_zero(&b[start..end]) {
            return b[start..end]
                .iter()
                .rposition(|&x| x != 0)
                .map(|i| start + i);
        }
        end = start;
    }
    None
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

pub(crate) fn corrupt_or_io(e: std::io::Error, path: &Path, offset: u64, what: &str) -> Error {
    if e.kind() == std::io::ErrorKind::UnexpectedEof {
        Error::corruption(path.to_path_buf(), offset, what)
    } else {
        Error::io("read", Some(path.to_path_buf()), e)
    }
}

/// Read-ahead (rule 2): any valid record after `bad` whose durable watermark passed `bad`
/// proves that durable data was lost. Otherwise returns how many valid records follow (none:
/// a torn tail; some: a hole in records that were never synced).
fn check_torn_tail(segments: &Segments, bad: u64, last: u64) -> Result<u64> {
    let s = segments.segment_bytes;
    let mut after = 0;
    let mut proof = None;
    scan_valid(segments, bad, last, |pos, durable| {
        if durable > bad {
            proof = Some((pos, durable));
            return false;
        }
        after += 1;
        true
    })?;
    if let Some((pos, durable)) = proof {
        return Err(Error::corruption(
            segments.path(bad / s),
            bad % s,
            format!(
                "invalid record below the durable watermark: the valid record at LSN {pos} \
                 shows everything below LSN {durable} had been synced"
            ),
        ));
    }
    Ok(after)
}

/// Zeroes every non-zero byte from `tail` to the end of its segment. Returns the file offset
/// of the first non-zero byte, if there was any.
fn zero_from(segments: &Segments, tail: u64) -> Result<Option<u64>> {
    const CHUNK: u64 = 64 << 10;
    let s = segments.segment_bytes;
    let seg = tail / s;
    let f = segments.existing(seg).expect("tail segment exists");
    let path = segments.path(seg);
    let mut first_dirty = None;
    let mut off = tail % s;
    let zeros = vec![0u8; CHUNK as usize];
    let mut buf = vec![0u8; CHUNK as usize];
    while off < s {
        let n = CHUNK.min(s - off) as usize;
        f.read_at(&mut buf[..n], off)
            .map_err(|e| corrupt_or_io(e, &path, off, "segment is truncated"))?;
        if all_zero(&buf[..n]) {
            off += n as u64;
            continue;
        }
        if let Some(i) = buf[..n].iter().position(|&b| b != 0) {
            first_dirty.get_or_insert(off + i as u64);
            f.write_at(&[&zeros[..n]], off)
                .map_err(|e| Error::io("pwrite", Some(path.clone()), e))?;
        }
        off += n as u64;
    }
    if first_dirty.is_some() {
        f.sync_data()
            .map_err(|e| Error::io("fdatasync", Some(path.clone()), e))?;
    }
    Ok(first_dirty)
}

/// One record read from the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The record's LSN, as returned by `append`.
    pub lsn: u64,
    /// The payload that was appended.
    pub payload: Vec<u8>,
}

pub(crate) enum Step {
    Record(Record),
    /// The walk reached `end` (or a segment that does not exist) at this position.
    End(u64),
    /// The bytes at this position are not a valid record; the span its header claims, if
    /// the header itself is valid (only the payload's checksum failed).
    Invalid(u64, &'static str, Option<u64>),
}

/// Walks records in LSN order from a record boundary.
pub(crate) struct Walker<'a> {
    segments: &'a Segments,
    pos: u64,
    end: u64,
    header: [u8; RECORD_HEADER_BYTES],
}

impl<'a> Walker<'a> {
    pub(crate) fn new(segments: &'a Segments, pos: u64, end: u64) -> Self {
        Walker {
            segments,
            pos,
            end,
            header: [0; RECORD_HEADER_BYTES],
        }
    }

    pub(crate) fn pos(&self) -> u64 {
        self.pos
    }

    /// The next record, skipping padding. With `payload_wanted == false` the payload is still
    /// read and checksummed but not returned.
    pub(crate) fn next_record(&mut self, payload_wanted: bool) -> Result<Step> {
        let s = self.segments.segment_bytes;
        loop {
            if self.pos >= self.end {
                return Ok(Step::End(self.pos));
            }
            let seg = self.pos / s;
            let off = self.pos % s;
            if off == 0 {
                self.pos += SEGMENT_HEADER_BYTES;
                continue;
            }
            let room = s - off;
            if room < RECORD_HEADER_BYTES as u64 {
                self.pos = (seg + 1) * s + SEGMENT_HEADER_BYTES;
                continue;
            }
            let Some(file) = self.segments.existing(seg) else {
                return Ok(Step::End(self.pos));
            };
            let path = || self.segments.path(seg);
            file.read_at(&mut self.header, off)
                .map_err(|e| corrupt_or_io(e, &path(), off, "segment is truncated"))?;
            let h = match RecordHeader::decode(&self.header, self.pos, seg, room) {
                Ok(h) => h,
                Err(why) => return Ok(Step::Invalid(self.pos, why, None)),
            };
            let payload = match h.kind {
                RecordType::Padding | RecordType::Void => Vec::new(),
                RecordType::Data => {
                    let mut p = vec![0u8; h.len as usize];
                    file.read_at(&mut p, off + RECORD_HEADER_BYTES as u64)
                        .map_err(|e| corrupt_or_io(e, &path(), off, "segment is truncated"))?;
                    p
                }
            };
            if !RecordHeader::verify(&self.header, &payload) {
                return Ok(Step::Invalid(
                    self.pos,
                    "record checksum mismatch",
                    Some(h.span()),
                ));
            }
            let lsn = self.pos;
            self.pos += h.span();
            match h.kind {
                RecordType::Padding => {
                    debug_assert_eq!(self.pos % s, 0);
                    continue;
                }
                RecordType::Void => continue,
                RecordType::Data => {}
            }
            let payload = if payload_wanted { payload } else { Vec::new() };
            return Ok(Step::Record(Record { lsn, payload }));
        }
    }
}

/// An iterator over records, from [`crate::Wal::read_from`].
pub struct Reader {
    segments: Arc<Segments>,
    pos: u64,
    end: u64,
    from: u64,
    done: bool,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("pos", &self.pos)
            .field("end", &self.end)
            .finish()
    }
}

impl Reader {
    pub(crate) fn new(segments: Arc<Segments>, from: u64, end: u64) -> Self {
        let s = segments.segment_bytes;
        let first = segments.ids().first().copied().unwrap_or(0);
        // Start at the first record of the segment holding `from` (or the oldest segment).
        let seg = (from / s).max(first);
        Reader {
            pos: seg * s + SEGMENT_HEADER_BYTES,
            segments,
            end,
            from,
            done: false,
        }
    }

    fn path_of(&self, pos: u64) -> PathBuf {
        self.segments.path(pos / self.segments.segment_bytes)
    }
}

impl Iterator for Reader {
    type Item = Result<Record>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            let mut w = Walker::new(&self.segments, self.pos, self.end);
            let step = w.next_record(true);
            self.pos = w.pos();
            match step {
                Ok(Step::Record(r)) if r.lsn < self.from => continue,
                Ok(Step::Record(r)) => return Some(Ok(r)),
                Ok(Step::End(_)) => self.done = true,
                Ok(Step::Invalid(pos, why, span)) => {
                    if pos < self.from {
                        // Damage below the first record wanted: skip it as recovery did
                        // (`hole_below`), if it provably hides no record from `from` on.
                        let last = self.segments.ids().last().copied().unwrap_or(0);
                        match hole_below(&self.segments, pos, span, self.from, last) {
                            Ok(Some(next)) => {
                                self.pos = next;
                                continue;
                            }
                            Ok(None) => {}
                            Err(e) => {
                                self.done = true;
                                return Some(Err(e));
                            }
                        }
                    }
                    self.done = true;
                    let s = self.segments.segment_bytes;
                    return Some(Err(Error::corruption(self.path_of(pos), pos % s, why)));
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod zero_tests {
    use super::*;

    #[test]
    fn zero_checks_find_the_last_nonzero_byte_across_pages() {
        let mut b = vec![0u8; 3 * 4096 + 100];
        assert!(all_zero(&b));
        assert_eq!(last_nonzero(&b), None);
        b[5] = 1;
        assert!(!all_zero(&b));
        assert_eq!(last_nonzero(&b), Some(5));
        b[4096 * 2 + 7] = 9;
        assert_eq!(last_nonzero(&b), Some(4096 * 2 + 7));
        b[3 * 4096 + 99] = 1;
        assert_eq!(last_nonzero(&b), Some(3 * 4096 + 99));
        assert_eq!(last_nonzero(&[]), None);
    }
}
