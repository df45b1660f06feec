//! Log blobs: a flush points at large values where the log already holds them, by linking
//! the log segment into `tables/` (`docs/format/vlog.md`, "Log blobs"), instead of copying
//! them into a blob file. A value then reaches the device once.
//!
//! The flush calls [`DbInner::link_log_values`] before it writes its tables. It walks the
//! memtable, not the log: the commit (and replay) inserted each entry with where its value
//! lies in its log record (`MemIter::logged_at`), so the flush notes every separable value
//! without reading the log back. It links each segment where those values fill enough of
//! the span the memtable covers, and hands the notes of linked segments to the outputs
//! ([`crate::vlog::Separation::log`]), keyed by the memtable value they describe.

use super::*;
use crate::iter::InternalIterator;
use crate::memtable::MemIter;
use crate::table_meta::{blob_file_name, BlobMeta, LogSpan};
use crate::vlog::{log_value_key, CheckedCopy, LogValue, LogValues, PassThrough};

/// A segment must be at least this share (1/n) pointed at to be linked: a log blob wastes
/// at most the rest of its segment's disk space beyond its span.
const MIN_SEGMENT_SHARE: u64 = 8;

/// What a flush linked: the log blobs (not yet in the manifest) and, per column family,
/// the values it may point at in them.
#[derive(Default)]
pub(super) struct LinkedLog {
    pub(super) blobs: Vec<BlobMeta>,
    pub(super) values: HashMap<u32, Arc<LogValues>>,
}

/// What the flush noted of one segment: the span of its noted values (from the first noted
/// value's record start to the last noted value's end; records never straddle two flushes,
/// so spans of one segment are disjoint), and the bytes and count of the values noted in it.
#[derive(Default)]
struct SegmentScan {
    span: Option<(u64, u64)>,
    bytes: u64,
    records: u64,
}

/// One noted value before linking: its segment, offset, length, crc, and whether the crc
/// is the one its commit took (a value the memtable read in the log) rather than one taken
/// here from the memtable's copy.
struct Note {
    segment: u64,
    offset: u64,
    len: u32,
    crc: u32,
    from_commit: bool,
}

impl DbInner {
    /// Links the log segments holding the separable values of `mem` (LSNs below
    /// `boundary`) as log blobs, registering each link's id in `new` (so a failed flush
    /// removes it). Returns nothing to point at when key-value separation or
    /// [`DbBuilder::blob_from_log`] is off, or no segment qualifies.
    ///
    /// # Errors
    ///
    /// `Io` from reserving ids.
    pub(super) fn link_log_values(
        &self,
        mem: &Arc<Memtable>,
        boundary: Seqno,
        version: &crate::version::Version,
        new: &mut NewTables<'_>,
    ) -> Result<LinkedLog> {
        let mut out = LinkedLog::default();
        // Under `Full` the log zero-fills the segments that replace linked ones, so a link
        // would save no byte written: copy.
        if !self.opts.blob_from_log || self.opts.sync == silt_wal::SyncMode::Full {
            return Ok(out);
        }
        let thresholds: HashMap<u32, usize> = mem
            .cfs()
            .into_iter()
            .filter_map(|cf| self.blob_threshold(cf).map(|t| (cf, t)))
            .collect();
        // Nothing to separate (small values only): no need to walk the memtable.
        if thresholds.values().all(|&t| mem.largest_value() < t as u64) {
            return Ok(out);
        }
        let s = self.wal.segment_bytes();
        // Per column family: log_value_key(the memtable's value) → note.
        type Notes = HashMap<u64, Note, std::hash::BuildHasherDefault<PassThrough>>;
        let mut notes: HashMap<u32, Notes> = HashMap::new();
        let mut segments: BTreeMap<u64, SegmentScan> = BTreeMap::new();
        for (&cf, &t) in &thresholds {
            let mut it = mem.iter(cf);
            it.seek_to_first();
            while it.valid() {
                let noted = note(&it, t, boundary, s);
                it.next();
                let Some((value, rec_start, note)) = noted else {
                    continue;
                };
                let end = note.offset + u64::from(note.len);
                let seg = segments.entry(note.segment).or_default();
                let (from, to) = seg.span.get_or_insert((rec_start, end));
                *from = (*from).min(rec_start);
                *to = (*to).max(end);
                seg.bytes += u64::from(note.len);
                seg.records += 1;
                notes.entry(cf).or_default().insert(value, note);
            }
        }
        // Link each segment whose noted values fill enough of the span this flush covers.
        let keep = 1.0 - self.opts.blob_gc_garbage_ratio.min(1.0);
        let mut linked: HashMap<u64, u64> = HashMap::new();
        // After a reopen whose log start a transaction in parts held back, the memtable
        // replays records an earlier flush already linked: spans of one segment must not
        // overlap (each byte is accounted once), so a span starts past the earlier ones.
        let owned = |segment: u64| {
            version
                .blobs
                .values()
                .filter_map(|b| b.meta.log)
                .filter(|l| l.segment == segment)
                .map(|l| l.to)
                .max()
                .unwrap_or(0)
        };
        for (&segment, scan) in &segments {
            let (Some((from, to)), bytes, records) = (scan.span, scan.bytes, scan.records) else {
                continue;
            };
            if from < owned(segment) {
                continue; // copy: part of it is another log blob's
            }
            if from >= to
                || (bytes as f64) < keep * (to - from) as f64
                || bytes < s / MIN_SEGMENT_SHARE
            {
                continue;
            }
            let Some(id) = self.link_segment(segment, new)? else {
                continue;
            };
            linked.insert(segment, id);
            out.blobs.push(BlobMeta {
                id,
                size_bytes: s,
                records,
                value_bytes: to - from,
                log: Some(LogSpan { segment, from, to }),
            });
        }
        let owner: Arc<dyn std::any::Any + Send + Sync> = mem.clone();
        let mut paths: HashMap<u64, Arc<std::path::Path>> = HashMap::new();
        for (cf, notes) in notes {
            let mut map: HashMap<u64, LogValue, _> = HashMap::default();
            let mut check: HashMap<u64, CheckedCopy, _> = HashMap::default();
            for (k, n) in notes {
                if let Some(&blob) = linked.get(&n.segment) {
                    let v = LogValue {
                        blob,
                        offset: n.offset,
                        len: n.len,
                        crc: n.crc,
                    };
                    map.insert(k, v);
                } else if n.from_commit {
                    // Copied, from the log's page cache: checked first (`LogValues::check`).
                    let file = paths
                        .entry(n.segment)
                        .or_insert_with(|| self.wal.segment_path(n.segment).into())
                        .clone();
                    let c = CheckedCopy {
                        crc: n.crc,
                        file,
                        offset: n.offset,
                    };
                    check.insert(k, c);
                }
            }
            if !map.is_empty() || !check.is_empty() {
                let v = LogValues {
                    map,
                    check,
                    _owner: owner.clone(),
                };
                out.values.insert(cf, Arc::new(v));
            }
        }
        Ok(out)
    }

    /// Gives log segment `segment` a second name `tables/{id}.blob` under a new table id;
    /// `None` (nothing linked) if the file system cannot link it or does not count links:
    /// the log would then not know to keep its bytes (`docs/format/wal.md`, "Other
    /// names"), so the flush copies instead.
    fn link_segment(&self, segment: u64, new: &mut NewTables<'_>) -> Result<Option<u64>> {
        let id = self.alloc_table_id()?;
        let from = self.wal.segment_path(segment);
        let to = self.tables_dir.join(blob_file_name(id));
        if self.fs.hard_link(&from, &to).is_err() {
            return Ok(None);
        }
        new.ids.push(id);
        if !self.fs.link_count(&to).is_ok_and(|n| n >= 2) {
            let _ = self.fs.remove(&to);
            return Ok(None);
        }
        Ok(Some(id))
    }
}

/// The note of the entry `it` stands on, with its [`log_value_key`] and its record's start
/// in the segment, if the flush may point at its value in the log: a `Put` or `PutTtl` below
/// `boundary` whose value (after the expiry) is at least `threshold` bytes and whose place
/// in its log record the memtable knows. The record is the one at the entry's seqno (every
/// entry of a commit gets its record's LSN as seqno), so the value's offset in segment
/// `seqno / s` is the record's start, its header, and the value's offset in the payload.
fn note(it: &MemIter, threshold: usize, boundary: Seqno, s: u64) -> Option<(u64, u64, Note)> {
    let in_payload = it.logged_at()?;
    let p = key::parse(it.key())?;
    if p.seqno >= boundary {
        return None;
    }
    let skip = match p.kind {
        key::Kind::Put => 0,
        key::Kind::PutTtl => key::EXPIRY_BYTES,
        _ => return None,
    };
    let body = it.value().get(skip..)?;
    if body.len() < threshold {
        return None;
    }
    let len = u32::try_from(body.len()).ok()?;
    let rec_start = p.seqno % s;
    let offset =
        rec_start + silt_wal::RECORD_HEADER_BYTES as u64 + u64::from(in_payload) + skip as u64;
    // A record lies inside its segment; anything else is not a place in the log.
    if offset + u64::from(len) > s {
        return None;
    }
    // A value read in the log had its crc taken from the writer's copy at insert, hot in the
    // cache then; here it would be read cold, through the log's mapping.
    let commit_crc = it.in_log_crc().filter(|_| p.kind == key::Kind::Put);
    let note = Note {
        segment: p.seqno / s,
        offset,
        len,
        crc: commit_crc.unwrap_or_else(|| crc32c::crc32c(body)),
        from_commit: commit_crc.is_some(),
    };
    Some((log_value_key(body), rec_start, note))
}
