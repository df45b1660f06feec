//! Log blobs: a flush points at large values where the log already holds them, by linking
//! the log segment into `tables/` (`docs/format/vlog.md`, "Log blobs"), instead of copying
//! them into a blob file. A value then reaches the device once.
//!
//! The flush calls [`DbInner::link_log_values`] before it writes its tables. It reads the
//! records of the memtable's LSN range from the log, notes every separable value of a
//! single-record commit, links each segment where those values fill enough of the span the
//! memtable covers, and hands the notes of linked segments to the outputs
//! ([`crate::vlog::Separation::log`]). An output points at a note only if the memtable's
//! value has the note's length and crc32c; anything else is copied as before.

use super::*;
use crate::table_meta::{blob_file_name, BlobMeta, LogSpan};
use crate::vlog::{log_value_key, LogValue, LogValues, PassThrough};

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

/// What the flush read of one segment: the span of its records (first byte to end:
/// records never straddle two flushes, so spans of one segment are disjoint), and the
/// bytes and count of the values noted in it.
#[derive(Default)]
struct SegmentScan {
    span: Option<(u64, u64)>,
    bytes: u64,
    records: u64,
}

/// One noted value before linking: its segment, offset, length, crc.
struct Note {
    segment: u64,
    offset: u64,
    len: u32,
    crc: u32,
}

impl DbInner {
    /// Links the log segments holding the separable values of `mem` (LSNs below
    /// `boundary`) as log blobs, registering each link's id in `new` (so a failed flush
    /// removes it). Returns nothing to point at when key-value separation or
    /// [`DbBuilder::blob_from_log`] is off, or no segment qualifies.
    ///
    /// # Errors
    ///
    /// `Io` from reserving ids (a log that cannot be read back links nothing).
    pub(super) fn link_log_values(
        &self,
        mem: &Memtable,
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
        // Nothing to separate (small values only): no need to read the log back.
        if thresholds.values().all(|&t| mem.largest_value() < t as u64) {
            return Ok(out);
        }
        let first = mem.first_seqno();
        let s = self.wal.segment_bytes();
        let header = silt_wal::RECORD_HEADER_BYTES as u64;
        // Per column family: log_value_key(key, lsn) → note.
        type Notes = HashMap<u64, Note, std::hash::BuildHasherDefault<PassThrough>>;
        let mut notes: HashMap<u32, Notes> = HashMap::new();
        let mut segments: BTreeMap<u64, SegmentScan> = BTreeMap::new();
        // Pointing into the log is an optimisation: a log that cannot be read back here
        // (an I/O error, a damaged record) makes this flush copy, as before.
        let Ok(records) = self.wal.read_from(first) else {
            return Ok(out);
        };
        for rec in records {
            let Ok(rec) = rec else {
                return Ok(out);
            };
            if rec.lsn >= boundary {
                break;
            }
            let at = rec.lsn % s;
            let end = at + header + rec.payload.len() as u64;
            let scan = segments.entry(rec.lsn / s).or_default();
            let (from, to) = scan.span.get_or_insert((at, end));
            *from = (*from).min(at);
            *to = (*to).max(end);
            // A commit in parts is copied: its entries' seqno is the commit record's LSN,
            // not the LSN of the record holding their values.
            let Ok(batch::Record::Batch(entries)) = batch::decode_record(&rec.payload) else {
                continue;
            };
            let base = rec.payload.as_ptr() as usize;
            for e in entries {
                let Some(&t) = thresholds.get(&e.cf) else {
                    continue;
                };
                let skip = match e.kind {
                    key::Kind::Put => 0,
                    key::Kind::PutTtl => key::EXPIRY_BYTES,
                    _ => continue,
                };
                let Some(body) = e.value.get(skip..) else {
                    continue;
                };
                let Ok(len) = u32::try_from(body.len()) else {
                    continue;
                };
                if body.len() < t {
                    continue;
                }
                let in_payload = (body.as_ptr() as usize - base) as u64;
                let note = Note {
                    segment: rec.lsn / s,
                    offset: rec.lsn % s + header + in_payload,
                    len,
                    crc: crc32c::crc32c(body),
                };
                let seg = segments.entry(note.segment).or_default();
                seg.bytes += u64::from(len);
                seg.records += 1;
                // A later write to the same key in the batch wins: its note replaces this.
                if let Some(old) = notes
                    .entry(e.cf)
                    .or_default()
                    .insert(log_value_key(e.key, rec.lsn), note)
                {
                    let seg = segments.entry(old.segment).or_default();
                    seg.bytes -= u64::from(old.len);
                    seg.records -= 1;
                }
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
        if linked.is_empty() {
            return Ok(out);
        }
        for (cf, notes) in notes {
            let values: LogValues = notes
                .into_iter()
                .filter_map(|(k, n)| {
                    let blob = *linked.get(&n.segment)?;
                    Some((
                        k,
                        LogValue {
                            blob,
                            offset: n.offset,
                            len: n.len,
                            crc: n.crc,
                        },
                    ))
                })
                .collect();
            if !values.is_empty() {
                out.values.insert(cf, Arc::new(values));
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
