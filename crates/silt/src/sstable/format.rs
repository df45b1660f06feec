//! The fixed parts of the table format: varints, block handles, the block trailer
//! (compression byte + CRC-32C), compression itself, and the footer.
//!
//! The byte-level specification is `docs/format/sstable.md`; keep the two in step.
//! DO NOT CHANGE the compression byte values, the footer layout, [`TABLE_MAGIC`] or the
//! meaning of [`TABLE_VERSION`]: they are stored in every table file.
//!
//! Invariants kept here:
//! * every decoder is bounds-checked and returns `None`/`Err` on short or garbage input;
//! * a checksum is verified before a payload is decompressed or decoded;
//! * a decompressed size is bounded by [`MAX_BLOCK_BYTES`] before anything is allocated.

use std::cell::RefCell;
use std::path::Path;

use crate::error::{Error, Result};

/// The last 8 bytes of every table file: `"siltSST1"` read as a little-endian u64.
pub(crate) const TABLE_MAGIC: u64 = u64::from_le_bytes(*b"siltSST1");

/// The format version written in the footer; a table of any other version is refused.
pub(crate) const TABLE_VERSION: u32 = 1;

/// Bytes of the footer at the end of the file.
pub(crate) const FOOTER_BYTES: usize = 64;

/// Bytes that follow every block payload: 1 compression byte + 4 bytes of CRC-32C.
pub(crate) const BLOCK_TRAILER_BYTES: usize = 5;

/// The largest block payload (stored or decompressed). Larger claims are corruption; a
/// builder refuses to write a larger block.
pub(crate) const MAX_BLOCK_BYTES: usize = 1 << 30;

/// Stored compression byte values. DO NOT CHANGE.
const COMPRESSION_NONE: u8 = 0;
const COMPRESSION_LZ4: u8 = 1;
const COMPRESSION_ZSTD: u8 = 2;

/// How data blocks are compressed. Index, filter and properties blocks are always stored
/// uncompressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Compression {
    /// Blocks are stored as they are.
    #[default]
    None,
    /// LZ4 block format (`lz4_flex`): fast, modest ratio.
    Lz4,
    /// Zstandard at the given level (1..=22; negative levels are the fast modes).
    Zstd(i32),
}

// ---------------------------------------------------------------------------------------
// Varints (LEB128, little-endian groups of 7 bits).

/// Appends `v` as a varint (1..=10 bytes).
#[inline]
pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Decodes a varint at `*pos`, advancing it. `None` if truncated or longer than 10 bytes.
#[inline]
pub(crate) fn get_varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v: u64 = 0;
    let mut shift = 0u32;
    loop {
        let b = *buf.get(*pos)?;
        *pos += 1;
        if shift == 63 && b > 1 {
            return None; // would overflow u64
        }
        v |= u64::from(b & 0x7F) << shift;
        if b < 0x80 {
            return Some(v);
        }
        shift += 7;
        if shift > 63 {
            return None;
        }
    }
}

/// Decodes a varint that must fit in `u32`.
#[inline]
pub(crate) fn get_varint32(buf: &[u8], pos: &mut usize) -> Option<u32> {
    // Fast path: one byte (short keys, small shared prefixes).
    if let Some(&b) = buf.get(*pos) {
        if b < 0x80 {
            *pos += 1;
            return Some(u32::from(b));
        }
    }
    u32::try_from(get_varint(buf, pos)?).ok()
}

// ---------------------------------------------------------------------------------------
// Block handles.

/// Where a block is: the offset of its payload and the payload's stored length (the
/// 5-byte trailer follows and is not counted).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) struct BlockHandle {
    /// File offset of the first payload byte.
    pub offset: u64,
    /// Stored payload bytes (compressed size if compressed), trailer excluded.
    pub len: u64,
}

impl BlockHandle {
    /// Appends the handle as two varints (used in index entries).
    pub(crate) fn encode_to(&self, out: &mut Vec<u8>) {
        put_varint(out, self.offset);
        put_varint(out, self.len);
    }

    /// Decodes a handle written by [`BlockHandle::encode_to`]; the input must hold exactly
    /// the two varints.
    pub(crate) fn decode(buf: &[u8]) -> Option<BlockHandle> {
        let mut pos = 0;
        let offset = get_varint(buf, &mut pos)?;
        let len = get_varint(buf, &mut pos)?;
        (pos == buf.len()).then_some(BlockHandle { offset, len })
    }

    /// The offset just past the block's trailer, if it does not overflow.
    pub(crate) fn end(&self) -> Option<u64> {
        self.offset
            .checked_add(self.len)?
            .checked_add(BLOCK_TRAILER_BYTES as u64)
    }
}

// ---------------------------------------------------------------------------------------
// Block trailer and compression.

/// The checksum stored in a block trailer: CRC-32C over the payload then the compression
/// byte.
pub(crate) fn block_crc(payload: &[u8], compression_byte: u8) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(payload), &[compression_byte])
}

/// Compresses `raw` into `scratch` if that pays off, and returns the payload to store with
/// its compression byte. A compressed payload must be smaller than 7/8 of `raw`, or `raw` is
/// stored as is (compression byte 0).
pub(crate) fn compress_block<'a>(
    raw: &'a [u8],
    compression: Compression,
    zstd: &mut Option<zstd::bulk::Compressor<'static>>,
    scratch: &'a mut Vec<u8>,
) -> (&'a [u8], u8) {
    let limit = raw.len() - raw.len() / 8;
    scratch.clear();
    let byte = match compression {
        Compression::None => return (raw, COMPRESSION_NONE),
        Compression::Lz4 => {
            put_varint(scratch, raw.len() as u64);
            let start = scratch.len();
            scratch.resize(
                start + lz4_flex::block::get_maximum_output_size(raw.len()),
                0,
            );
            match lz4_flex::block::compress_into(raw, &mut scratch[start..]) {
                Ok(n) => scratch.truncate(start + n),
                Err(_) => return (raw, COMPRESSION_NONE),
            }
            COMPRESSION_LZ4
        }
        Compression::Zstd(level) => {
            if zstd.is_none() {
                match zstd::bulk::Compressor::new(level) {
                    Ok(c) => *zstd = Some(c),
                    Err(_) => return (raw, COMPRESSION_NONE),
                }
            }
            let Some(c) = zstd.as_mut() else {
                return (raw, COMPRESSION_NONE);
            };
            put_varint(scratch, raw.len() as u64);
            let start = scratch.len();
            scratch.reserve(zstd::zstd_safe::compress_bound(raw.len()));
            // The compressor writes after the varint: a cursor positioned past it.
            let mut cursor = std::io::Cursor::new(std::mem::take(scratch));
            cursor.set_position(start as u64);
            let res = c.compress_to_buffer(raw, &mut cursor);
            *scratch = cursor.into_inner();
            match res {
                Ok(n) if n > 0 && scratch.len() == start + n => {}
                _ => return (raw, COMPRESSION_NONE),
            }
            COMPRESSION_ZSTD
        }
    };
    if scratch.len() < limit {
        (&scratch[..], byte)
    } else {
        (raw, COMPRESSION_NONE)
    }
}

thread_local! {
    static ZSTD_DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { RefCell::new(None) };
}

/// Checks a block read from disk (`buf` = payload ++ trailer) and returns its decoded
/// contents. `offset` is the block's file offset, used in errors.
pub(crate) fn decode_block(mut buf: Vec<u8>, file: &Path, offset: u64) -> Result<Vec<u8>> {
    let corrupt = |reason: String| Error::corruption(file, offset, reason);
    if buf.len() < BLOCK_TRAILER_BYTES {
        return Err(corrupt(format!(
            "block of {} bytes has no trailer",
            buf.len()
        )));
    }
    let n = buf.len() - BLOCK_TRAILER_BYTES;
    let byte = buf[n];
    let stored = u32::from_le_bytes([buf[n + 1], buf[n + 2], buf[n + 3], buf[n + 4]]);
    let actual = block_crc(&buf[..n], byte);
    if stored != actual {
        return Err(corrupt(format!(
            "block checksum mismatch: stored {stored:#010x}, computed {actual:#010x}"
        )));
    }
    match byte {
        COMPRESSION_NONE => {
            buf.truncate(n);
            Ok(buf)
        }
        COMPRESSION_LZ4 | COMPRESSION_ZSTD => {
            let payload = &buf[..n];
            let mut pos = 0;
            let raw_len = get_varint(payload, &mut pos)
                .ok_or_else(|| corrupt("compressed block without a length".into()))?;
            if raw_len > MAX_BLOCK_BYTES as u64 {
                return Err(corrupt(format!(
                    "compressed block claims {raw_len} bytes, over the limit of {MAX_BLOCK_BYTES}"
                )));
            }
            let raw_len = raw_len as usize;
            let body = &payload[pos..];
            if byte == COMPRESSION_LZ4 {
                // LZ4 cannot expand more than 255:1; a larger claim is garbage.
                if raw_len > body.len().saturating_mul(255).saturating_add(16) {
                    return Err(corrupt(format!(
                        "lz4 block claims {raw_len} bytes from {} stored",
                        body.len()
                    )));
                }
                let mut out = vec![0u8; raw_len];
                match lz4_flex::block::decompress_into(body, &mut out) {
                    Ok(got) if got == raw_len => Ok(out),
                    Ok(got) => Err(corrupt(format!(
                        "lz4 block decompressed to {got} bytes, expected {raw_len}"
                    ))),
                    Err(e) => Err(corrupt(format!("lz4 block does not decompress: {e}"))),
                }
            } else {
                let mut out = Vec::with_capacity(raw_len);
                let res = ZSTD_DECOMPRESSOR.with(|cell| {
                    let mut slot = cell.borrow_mut();
                    if slot.is_none() {
                        *slot = Some(zstd::bulk::Decompressor::new()?);
                    }
                    match slot.as_mut() {
                        Some(d) => d.decompress_to_buffer(body, &mut out),
                        None => Err(std::io::Error::other("no zstd decompressor")),
                    }
                });
                match res {
                    Ok(got) if got == raw_len && out.len() == raw_len => Ok(out),
                    Ok(got) => Err(corrupt(format!(
                        "zstd block decompressed to {got} bytes, expected {raw_len}"
                    ))),
                    Err(e) => Err(corrupt(format!("zstd block does not decompress: {e}"))),
                }
            }
        }
        other => Err(corrupt(format!("unknown compression byte {other}"))),
    }
}

// ---------------------------------------------------------------------------------------
// Footer.

/// The fixed-size record at the end of the file that locates the metadata blocks.
///
/// ```text
///  0        8        16       24       32       40       48      52      56       64
///  +--------+--------+--------+--------+--------+--------+-------+-------+--------+
///  | index  | index  | filter | filter | props  | props  |version| crc32c| magic  |
///  | offset | len    | offset | len    | offset | len    | u32   | 0..52 | u64    |
///  +--------+--------+--------+--------+--------+--------+-------+-------+--------+
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Footer {
    /// The index block.
    pub index: BlockHandle,
    /// The bloom filter block; `len == 0` and `offset == 0` when the table has none.
    pub filter: BlockHandle,
    /// The properties block.
    pub props: BlockHandle,
}

impl Footer {
    /// Encodes the footer (little-endian fixed-width fields).
    pub(crate) fn encode(&self) -> [u8; FOOTER_BYTES] {
        let mut out = [0u8; FOOTER_BYTES];
        let fields = [
            self.index.offset,
            self.index.len,
            self.filter.offset,
            self.filter.len,
            self.props.offset,
            self.props.len,
        ];
        for (i, f) in fields.iter().enumerate() {
            out[i * 8..i * 8 + 8].copy_from_slice(&f.to_le_bytes());
        }
        out[48..52].copy_from_slice(&TABLE_VERSION.to_le_bytes());
        let crc = crc32c::crc32c(&out[..52]);
        out[52..56].copy_from_slice(&crc.to_le_bytes());
        out[56..64].copy_from_slice(&TABLE_MAGIC.to_le_bytes());
        out
    }

    /// Decodes and checks a footer read at `offset` of `file`: magic, version, checksum.
    pub(crate) fn decode(buf: &[u8; FOOTER_BYTES], file: &Path, offset: u64) -> Result<Footer> {
        let corrupt = |reason: String| Error::corruption(file, offset, reason);
        let u64_at = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&buf[i..i + 8]);
            u64::from_le_bytes(b)
        };
        let u32_at = |i: usize| {
            let mut b = [0u8; 4];
            b.copy_from_slice(&buf[i..i + 4]);
            u32::from_le_bytes(b)
        };
        let magic = u64_at(56);
        if magic != TABLE_MAGIC {
            return Err(corrupt(format!(
                "bad table magic {magic:#018x}; not a silt table, or truncated"
            )));
        }
        let crc = u32_at(52);
        let actual = crc32c::crc32c(&buf[..52]);
        if crc != actual {
            return Err(corrupt(format!(
                "footer checksum mismatch: stored {crc:#010x}, computed {actual:#010x}"
            )));
        }
        let version = u32_at(48);
        if version != TABLE_VERSION {
            return Err(corrupt(format!(
                "table format version {version} is not supported (this build reads {TABLE_VERSION})"
            )));
        }
        let h = |i: usize| BlockHandle {
            offset: u64_at(i),
            len: u64_at(i + 8),
        };
        Ok(Footer {
            index: h(0),
            filter: h(16),
            props: h(32),
        })
    }
}

// ---------------------------------------------------------------------------------------
// Properties block.

/// What a table holds, stored in its properties block so a table can be described (and a
/// [`crate::table_meta::TableMeta`] rebuilt) from the file alone.
///
/// Encoding: the eight counters as varints in field order, then the smallest and the
/// largest internal key, each as a varint length and the bytes. Trailing bytes are ignored
/// (room for later fields).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct TableProps {
    /// Entries (puts and tombstones).
    pub entries: u64,
    /// `Delete` and `SingleDelete` entries.
    pub tombstones: u64,
    /// Smallest seqno of any entry (0 for an empty table).
    pub smallest_seqno: u64,
    /// Largest seqno of any entry.
    pub largest_seqno: u64,
    /// Data blocks.
    pub data_blocks: u64,
    /// Sum of the internal key lengths.
    pub raw_key_bytes: u64,
    /// Sum of the value lengths.
    pub raw_value_bytes: u64,
    /// Bytes of the data blocks as stored (payloads and trailers).
    pub data_bytes: u64,
    /// Smallest internal key (empty for an empty table).
    pub smallest: Vec<u8>,
    /// Largest internal key.
    pub largest: Vec<u8>,
    /// The blob files the table's `Blob` entries point into, by id ascending, with the
    /// value bytes they cover (`vlog.md`). Encoded after `largest` only when not empty, so
    /// tables written before key-value separation decode unchanged.
    pub blobs: Vec<crate::table_meta::BlobRef>,
}

impl TableProps {
    /// Encodes the properties.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(80 + self.smallest.len() + self.largest.len());
        for v in [
            self.entries,
            self.tombstones,
            self.smallest_seqno,
            self.largest_seqno,
            self.data_blocks,
            self.raw_key_bytes,
            self.raw_value_bytes,
            self.data_bytes,
        ] {
            put_varint(&mut out, v);
        }
        for k in [&self.smallest, &self.largest] {
            put_varint(&mut out, k.len() as u64);
            out.extend_from_slice(k);
        }
        if !self.blobs.is_empty() {
            put_varint(&mut out, self.blobs.len() as u64);
            for b in &self.blobs {
                put_varint(&mut out, b.id);
                put_varint(&mut out, b.bytes);
            }
        }
        out
    }

    /// Decodes properties; `None` if truncated.
    pub(crate) fn decode(buf: &[u8]) -> Option<TableProps> {
        let mut pos = 0;
        let mut v = [0u64; 8];
        for slot in &mut v {
            *slot = get_varint(buf, &mut pos)?;
        }
        let mut key = || -> Option<Vec<u8>> {
            let n = usize::try_from(get_varint(buf, &mut pos)?).ok()?;
            let end = pos.checked_add(n)?;
            let k = buf.get(pos..end)?.to_vec();
            pos = end;
            Some(k)
        };
        let smallest = key()?;
        let largest = key()?;
        let mut blobs = Vec::new();
        if pos < buf.len() {
            let n = get_varint(buf, &mut pos)?;
            // Each reference takes at least 2 bytes: do not trust `n` for the allocation.
            blobs.reserve((n as usize).min(buf.len() / 2));
            for _ in 0..n {
                let id = get_varint(buf, &mut pos)?;
                let bytes = get_varint(buf, &mut pos)?;
                blobs.push(crate::table_meta::BlobRef { id, bytes });
            }
        }
        Some(TableProps {
            entries: v[0],
            tombstones: v[1],
            smallest_seqno: v[2],
            largest_seqno: v[3],
            data_blocks: v[4],
            raw_key_bytes: v[5],
            raw_value_bytes: v[6],
            data_bytes: v[7],
            smallest,
            largest,
            blobs,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_round_trip_and_garbage() {
        let vals = [
            0u64,
            1,
            127,
            128,
            300,
            u32::MAX as u64,
            u64::MAX - 1,
            u64::MAX,
        ];
        let mut buf = Vec::new();
        for v in vals {
            put_varint(&mut buf, v);
        }
        let mut pos = 0;
        for v in vals {
            assert_eq!(get_varint(&buf, &mut pos), Some(v));
        }
        assert_eq!(pos, buf.len());
        // Truncated.
        let mut pos = 0;
        assert_eq!(get_varint(&[0x80, 0x80], &mut pos), None);
        // Too long / overflowing.
        let mut pos = 0;
        assert_eq!(get_varint(&[0xFF; 11], &mut pos), None);
        let mut pos = 0;
        assert_eq!(
            get_varint(
                &[0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02],
                &mut pos
            ),
            None
        );
        let mut pos = 0;
        let mut b = Vec::new();
        put_varint(&mut b, u32::MAX as u64 + 1);
        assert_eq!(get_varint32(&b, &mut pos), None);
    }

    #[test]
    fn props_round_trip() {
        let p = TableProps {
            entries: 5,
            tombstones: 1,
            smallest_seqno: 3,
            largest_seqno: 1 << 50,
            data_blocks: 2,
            raw_key_bytes: 100,
            raw_value_bytes: 1000,
            data_bytes: 900,
            smallest: b"a12345678".to_vec(),
            largest: b"z12345678".to_vec(),
            blobs: Vec::new(),
        };
        let enc = p.encode();
        assert_eq!(TableProps::decode(&enc), Some(p.clone()));
        for n in 0..enc.len() {
            assert_eq!(TableProps::decode(&enc[..n]), None);
        }
        // Blob references follow; a table without them decodes as before.
        let with = TableProps {
            blobs: vec![
                crate::table_meta::BlobRef {
                    id: 3,
                    bytes: 1 << 40,
                },
                crate::table_meta::BlobRef { id: 9, bytes: 7 },
            ],
            ..p.clone()
        };
        let enc2 = with.encode();
        assert_eq!(TableProps::decode(&enc2), Some(with));
        assert_eq!(&enc2[..enc.len()], &enc[..]);
        for n in enc.len() + 1..enc2.len() {
            assert_eq!(TableProps::decode(&enc2[..n]), None, "cut at {n}");
        }
    }

    #[test]
    fn handle_round_trip() {
        let h = BlockHandle {
            offset: 123_456_789,
            len: 4096,
        };
        let mut b = Vec::new();
        h.encode_to(&mut b);
        assert_eq!(BlockHandle::decode(&b), Some(h));
        b.push(0);
        assert_eq!(BlockHandle::decode(&b), None);
        assert_eq!(BlockHandle::decode(&[]), None);
    }

    #[test]
    fn footer_round_trip_and_checks() {
        let f = Footer {
            index: BlockHandle {
                offset: 10,
                len: 20,
            },
            filter: BlockHandle { offset: 0, len: 0 },
            props: BlockHandle {
                offset: 30,
                len: 40,
            },
        };
        let enc = f.encode();
        let p = Path::new("t.sst");
        assert_eq!(Footer::decode(&enc, p, 7).unwrap(), f);
        for i in 0..FOOTER_BYTES {
            let mut bad = enc;
            bad[i] ^= 0x10;
            match Footer::decode(&bad, p, 7) {
                Err(Error::Corruption { file, offset, .. }) => {
                    assert_eq!(file, p);
                    assert_eq!(offset, 7);
                }
                other => panic!("flip at {i}: {other:?}"),
            }
        }
    }

    fn round_trip(raw: &[u8], c: Compression) -> u8 {
        let mut z = None;
        let mut scratch = Vec::new();
        let (payload, byte) = compress_block(raw, c, &mut z, &mut scratch);
        let mut buf = payload.to_vec();
        buf.push(byte);
        buf.extend_from_slice(&block_crc(payload, byte).to_le_bytes());
        let p = Path::new("x");
        assert_eq!(decode_block(buf.clone(), p, 0).unwrap(), raw);
        for i in 0..buf.len().min(64) {
            let mut bad = buf.clone();
            bad[i] ^= 1;
            assert!(matches!(
                decode_block(bad, p, 0),
                Err(Error::Corruption { .. })
            ));
        }
        byte
    }

    #[test]
    fn compression_round_trip_and_fallback() {
        let compressible: Vec<u8> = (0..10_000u32).map(|i| (i % 7) as u8).collect();
        assert_eq!(
            round_trip(&compressible, Compression::None),
            COMPRESSION_NONE
        );
        assert_eq!(round_trip(&compressible, Compression::Lz4), COMPRESSION_LZ4);
        assert_eq!(
            round_trip(&compressible, Compression::Zstd(3)),
            COMPRESSION_ZSTD
        );
        // Incompressible data falls back to raw.
        let mut x = 0x1234_5678_9abc_def0u64;
        let noise: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        assert_eq!(round_trip(&noise, Compression::Lz4), COMPRESSION_NONE);
        assert_eq!(round_trip(&noise, Compression::Zstd(1)), COMPRESSION_NONE);
        assert_eq!(round_trip(&[], Compression::Lz4), COMPRESSION_NONE);
    }

    #[test]
    fn unknown_compression_byte_is_corruption() {
        let payload = b"hello";
        let mut buf = payload.to_vec();
        buf.push(9);
        buf.extend_from_slice(&block_crc(payload, 9).to_le_bytes());
        let err = decode_block(buf, Path::new("y"), 5).unwrap_err();
        assert!(err.to_string().contains("unknown compression byte 9"));
    }
}
