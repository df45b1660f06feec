//! The on-disk format of segments and records. Specified in `docs/format/wal.md`; keep the
//! two in step. DO NOT CHANGE the constants or the record type values: they are on disk.
//!
//! Every decoder here checks lengths before reading and the checksum before trusting a field.

/// Magic bytes at the start of every segment file.
pub const SEGMENT_MAGIC: [u8; 8] = *b"SILTWAL\0";
/// Format version written in the segment header.
pub const FORMAT_VERSION: u32 = 1;
/// Bytes of the segment header; the first record starts here.
pub const SEGMENT_HEADER_BYTES: u64 = 64;
/// Bytes of a record header.
pub const RECORD_HEADER_BYTES: usize = 40;
/// Records start on multiples of this many bytes.
pub const RECORD_ALIGN: u64 = 8;
/// The largest payload any log accepts (a log with small segments accepts less; see
/// [`max_payload_bytes`]).
pub const MAX_PAYLOAD_BYTES: usize = 32 << 20;
/// The smallest segment size a log may be created with.
pub const MIN_SEGMENT_BYTES: u64 = 64 << 10;

/// What a record holds. Values are on disk: never renumber.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum RecordType {
    /// A caller's payload.
    Data = 1,
    /// Filler from here to the end of the segment; the next record starts in the next segment.
    Padding = 2,
    /// A reservation its writer abandoned (`docs/format/wal.md`, "Void"): the bytes a data
    /// record of `len` would occupy, never read; the crc covers the header only.
    Void = 3,
}

impl RecordType {
    fn from_u8(v: u8) -> Option<Self> {
        match v {
            1 => Some(RecordType::Data),
            2 => Some(RecordType::Padding),
            3 => Some(RecordType::Void),
            _ => None,
        }
    }
}

/// The largest payload a log with `segment_bytes` segments accepts: one record must fit in a
/// segment after its header.
pub fn max_payload_bytes(segment_bytes: u64) -> usize {
    let room = segment_bytes - SEGMENT_HEADER_BYTES - RECORD_HEADER_BYTES as u64;
    MAX_PAYLOAD_BYTES.min(room as usize)
}

/// Bytes a record with a payload of `len` bytes occupies, padding included.
pub fn record_bytes(len: usize) -> u64 {
    (RECORD_HEADER_BYTES as u64 + len as u64).next_multiple_of(RECORD_ALIGN)
}

/// The fixed fields of a segment file's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentHeader {
    /// Size of every segment of this log, in bytes.
    pub segment_bytes: u64,
    /// This segment's id: it covers LSNs `id * segment_bytes .. (id + 1) * segment_bytes`.
    pub segment_id: u64,
}

impl SegmentHeader {
    /// Encodes the header into its 64 on-disk bytes.
    pub fn encode(&self) -> [u8; SEGMENT_HEADER_BYTES as usize] {
        let mut b = [0u8; SEGMENT_HEADER_BYTES as usize];
        b[0..8].copy_from_slice(&SEGMENT_MAGIC);
        b[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&(SEGMENT_HEADER_BYTES as u32).to_le_bytes());
        b[16..24].copy_from_slice(&self.segment_bytes.to_le_bytes());
        b[24..32].copy_from_slice(&self.segment_id.to_le_bytes());
        let crc = crc32c::crc32c(&b[..60]);
        b[60..64].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes and checks a segment header. The error says which check failed.
    pub fn decode(b: &[u8]) -> Result<SegmentHeader, &'static str> {
        if b.len() < SEGMENT_HEADER_BYTES as usize {
            return Err("segment header is truncated");
        }
        if b[0..8] != SEGMENT_MAGIC {
            return Err("bad segment magic (not a silt-wal segment)");
        }
        let crc = u32::from_le_bytes(b[60..64].try_into().expect("4 bytes"));
        if crc32c::crc32c(&b[..60]) != crc {
            return Err("segment header checksum mismatch");
        }
        let version = u32::from_le_bytes(b[8..12].try_into().expect("4 bytes"));
        if version != FORMAT_VERSION {
            return Err("unsupported segment format version");
        }
        let header_len = u32::from_le_bytes(b[12..16].try_into().expect("4 bytes"));
        if header_len as u64 != SEGMENT_HEADER_BYTES {
            return Err("unsupported segment header length");
        }
        let segment_bytes = u64::from_le_bytes(b[16..24].try_into().expect("8 bytes"));
        let segment_id = u64::from_le_bytes(b[24..32].try_into().expect("8 bytes"));
        if segment_bytes < MIN_SEGMENT_BYTES || segment_bytes % 4096 != 0 {
            return Err("segment size in header is invalid");
        }
        if segment_id.checked_mul(segment_bytes).is_none() {
            return Err("segment id in header is out of range");
        }
        Ok(SegmentHeader {
            segment_bytes,
            segment_id,
        })
    }
}

/// The fields of a record header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordHeader {
    /// Payload length in bytes (for padding: bytes after the header to the segment's end).
    pub len: u32,
    /// What the record holds.
    pub kind: RecordType,
    /// The segment the record was written into (rejects stale bytes of a recycled segment).
    pub segment_id: u64,
    /// The record's LSN: its byte position in the log.
    pub lsn: u64,
    /// The log's durable watermark when the record was written: every byte below it had been
    /// made durable before this record existed.
    pub durable: u64,
}

impl RecordHeader {
    /// Encodes the header; `payload` is the bytes covered by the checksum (empty for padding).
    pub fn encode(&self, payload: &[u8]) -> [u8; RECORD_HEADER_BYTES] {
        let mut b = [0u8; RECORD_HEADER_BYTES];
        b[4..8].copy_from_slice(&self.len.to_le_bytes());
        b[8] = self.kind as u8;
        b[16..24].copy_from_slice(&self.segment_id.to_le_bytes());
        b[24..32].copy_from_slice(&self.lsn.to_le_bytes());
        b[32..40].copy_from_slice(&self.durable.to_le_bytes());
        let crc = crc32c::crc32c_append(crc32c::crc32c(&b[4..]), payload);
        b[0..4].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes a header without checking its checksum (that needs the payload; see
    /// [`RecordHeader::verify`]). Rejects a zero or unknown type, non-zero reserved bytes,
    /// and lengths that cannot be right. `expect_lsn` and `segment_id` are where the reader
    /// stands: a header claiming another position is stale or misplaced.
    pub fn decode(
        b: &[u8],
        expect_lsn: u64,
        segment_id: u64,
        room: u64,
    ) -> Result<RecordHeader, &'static str> {
        if b.len() < RECORD_HEADER_BYTES {
            return Err("record header is truncated");
        }
        let kind = RecordType::from_u8(b[8]).ok_or("bad record type")?;
        if b[9..16].iter().any(|&x| x != 0) {
            return Err("reserved header bytes are not zero");
        }
        let len = u32::from_le_bytes(b[4..8].try_into().expect("4 bytes"));
        let segment = u64::from_le_bytes(b[16..24].try_into().expect("8 bytes"));
        let lsn = u64::from_le_bytes(b[24..32].try_into().expect("8 bytes"));
        let durable = u64::from_le_bytes(b[32..40].try_into().expect("8 bytes"));
        if segment != segment_id {
            return Err("record belongs to another segment");
        }
        if lsn != expect_lsn {
            return Err("record LSN does not match its position");
        }
        if len as usize > MAX_PAYLOAD_BYTES {
            return Err("record length over the format limit");
        }
        let need = match kind {
            RecordType::Data | RecordType::Void => record_bytes(len as usize),
            RecordType::Padding => RECORD_HEADER_BYTES as u64 + len as u64,
        };
        if need > room {
            return Err("record runs past the end of its segment");
        }
        if kind == RecordType::Padding && need != room {
            return Err("padding does not end at the segment's end");
        }
        Ok(RecordHeader {
            len,
            kind,
            segment_id: segment,
            lsn,
            durable,
        })
    }

    /// The encoded header of a data record holding `payload` at `lsn`, written when the
    /// durable watermark was `durable`.
    pub fn data(
        payload: &[u8],
        lsn: u64,
        segment_bytes: u64,
        durable: u64,
    ) -> [u8; RECORD_HEADER_BYTES] {
        RecordHeader {
            len: payload.len() as u32,
            kind: RecordType::Data,
            segment_id: lsn / segment_bytes,
            lsn,
            durable,
        }
        .encode(payload)
    }

    /// Checks the header's checksum over its own bytes `b` and the `payload` (empty for
    /// padding).
    pub fn verify(b: &[u8], payload: &[u8]) -> bool {
        if b.len() < RECORD_HEADER_BYTES {
            return false;
        }
        let crc = u32::from_le_bytes(b[0..4].try_into().expect("4 bytes"));
        crc32c::crc32c_append(crc32c::crc32c(&b[4..RECORD_HEADER_BYTES]), payload) == crc
    }

    /// Bytes this record occupies in the log.
    pub fn span(&self) -> u64 {
        match self.kind {
            RecordType::Data | RecordType::Void => record_bytes(self.len as usize),
            RecordType::Padding => RECORD_HEADER_BYTES as u64 + self.len as u64,
        }
    }
}

/// Checks every record in bytes `from..to` of a file holding segment `header` (a second
/// name of a segment: the engine's log blobs, `docs/format/wal.md`, "Other names"): each
/// header is valid for its position and each checksum matches. `from` must be a record's
/// first byte and `to` at most the segment's size; the walk stops at the first record
/// starting at or past `to`. Returns the records checked, or the offset of the first bad
/// one and why.
///
/// # Errors
///
/// `(offset, reason)`; an I/O error reads as a reason too.
pub fn verify_span(
    file: &dyn silt_vfs::File,
    header: SegmentHeader,
    from: u64,
    to: u64,
) -> std::result::Result<u64, (u64, String)> {
    let s = header.segment_bytes;
    if from < SEGMENT_HEADER_BYTES || to > s {
        return Err((
            from,
            format!("span {from}..{to} is outside a segment of {s} bytes"),
        ));
    }
    let mut at = from;
    let mut n = 0;
    let mut b = [0u8; RECORD_HEADER_BYTES];
    let mut payload = Vec::new();
    while at < to {
        let io = |e: std::io::Error| (at, format!("read: {e}"));
        file.read_at(&mut b, at).map_err(io)?;
        let h = RecordHeader::decode(&b, header.segment_id * s + at, header.segment_id, s - at)
            .map_err(|r| (at, r.to_string()))?;
        let covered: &[u8] = if h.kind == RecordType::Data {
            payload.resize(h.len as usize, 0);
            file.read_at(&mut payload, at + RECORD_HEADER_BYTES as u64)
                .map_err(io)?;
            &payload
        } else {
            &[]
        };
        if !RecordHeader::verify(&b, covered) {
            return Err((at, "record checksum mismatch".into()));
        }
        n += 1;
        at += h.span();
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_header_round_trip_and_every_flip_is_caught() {
        let h = SegmentHeader {
            segment_bytes: 1 << 20,
            segment_id: 7,
        };
        let b = h.encode();
        assert_eq!(SegmentHeader::decode(&b), Ok(h));
        for i in 0..b.len() {
            for bit in 0..8 {
                let mut c = b;
                c[i] ^= 1 << bit;
                assert!(SegmentHeader::decode(&c).is_err(), "flip at {i}.{bit}");
            }
        }
        for n in 0..b.len() {
            assert!(SegmentHeader::decode(&b[..n]).is_err());
        }
    }

    #[test]
    fn record_header_round_trip() {
        let payload = b"hello world";
        let h = RecordHeader {
            len: payload.len() as u32,
            kind: RecordType::Data,
            segment_id: 3,
            lsn: 3 * 65536 + 64,
            durable: 100,
        };
        let b = h.encode(payload);
        let d = RecordHeader::decode(&b, h.lsn, 3, 65536 - 64).unwrap();
        assert_eq!(d, h);
        assert!(RecordHeader::verify(&b, payload));
        assert!(!RecordHeader::verify(&b, b"hello worle"));
        assert!(RecordHeader::decode(&b, h.lsn + 8, 3, 65536).is_err());
        assert!(RecordHeader::decode(&b, h.lsn, 4, 65536).is_err());
        assert!(RecordHeader::decode(&b, h.lsn, 3, 8).is_err());
    }

    #[test]
    fn zeroes_are_never_a_record() {
        let b = [0u8; RECORD_HEADER_BYTES];
        assert!(RecordHeader::decode(&b, 0, 0, 1 << 20).is_err());
    }

    #[test]
    fn max_payload_follows_segment_size() {
        assert_eq!(max_payload_bytes(64 << 20), MAX_PAYLOAD_BYTES);
        assert_eq!(
            max_payload_bytes(MIN_SEGMENT_BYTES),
            (MIN_SEGMENT_BYTES - 64 - 40) as usize
        );
        assert_eq!(record_bytes(0), 40);
        assert_eq!(record_bytes(1), 48);
        assert_eq!(record_bytes(8), 48);
    }
}
