//! The bytes of a blob file (`docs/format/vlog.md`, "File"): every length is checked and
//! every checksum verified before a byte is trusted.

/// First bytes of the header and of the footer.
pub(crate) const MAGIC: [u8; 8] = *b"SILTBLB\0";
/// The format version in the header.
pub(crate) const FORMAT_VERSION: u32 = 1;
/// magic (8) + version (4) + reserved (4).
pub(crate) const HEADER_BYTES: u64 = 16;
/// crc32c (4) + key_len (4) + value_len (4).
pub(crate) const RECORD_HEADER_BYTES: usize = 12;
/// magic (8) + records (8) + value_bytes (8) + crc32c (4).
pub(crate) const FOOTER_BYTES: u64 = 28;

/// The file header.
pub(crate) fn header() -> [u8; HEADER_BYTES as usize] {
    let mut b = [0u8; HEADER_BYTES as usize];
    b[..8].copy_from_slice(&MAGIC);
    b[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    b
}

/// Checks a file header; the reason if it is not one.
pub(crate) fn check_header(b: &[u8]) -> Result<(), String> {
    if b.len() < HEADER_BYTES as usize || b[..8] != MAGIC {
        return Err("not a blob file (bad header magic)".into());
    }
    let v = u32::from_le_bytes(b[8..12].try_into().expect("4 bytes"));
    if v != FORMAT_VERSION {
        return Err(format!(
            "blob format version {v}, expected {FORMAT_VERSION}"
        ));
    }
    Ok(())
}

/// Bytes of the record holding a key of `key_len` and a value of `value_len` bytes.
pub(crate) fn record_bytes(key_len: usize, value_len: usize) -> u64 {
    (RECORD_HEADER_BYTES + key_len + value_len) as u64
}

/// The record header of `key` and `value`.
pub(crate) fn record_header(key: &[u8], value: &[u8]) -> [u8; RECORD_HEADER_BYTES] {
    let mut h = [0u8; RECORD_HEADER_BYTES];
    h[4..8].copy_from_slice(&(key.len() as u32).to_le_bytes());
    h[8..12].copy_from_slice(&(value.len() as u32).to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c_append(crc32c::crc32c(&h[4..]), key), value);
    h[..4].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Checks a whole record read from a pointer: its lengths are the ones expected, its key
/// is `key`, its checksum matches. Returns the value's bytes within `rec`.
pub(crate) fn check_record<'a>(
    rec: &'a [u8],
    key: &[u8],
    value_len: usize,
) -> Result<&'a [u8], String> {
    if rec.len() != RECORD_HEADER_BYTES + key.len() + value_len {
        return Err("record cut short".into());
    }
    let klen = u32::from_le_bytes(rec[4..8].try_into().expect("4 bytes")) as usize;
    let vlen = u32::from_le_bytes(rec[8..12].try_into().expect("4 bytes")) as usize;
    if klen != key.len() || vlen != value_len {
        return Err(format!(
            "record lengths ({klen}, {vlen}) are not the pointer's ({}, {value_len})",
            key.len()
        ));
    }
    let stored = u32::from_le_bytes(rec[..4].try_into().expect("4 bytes"));
    if crc32c::crc32c(&rec[4..]) != stored {
        return Err("record checksum mismatch".into());
    }
    let (k, v) = rec[RECORD_HEADER_BYTES..].split_at(klen);
    if k != key {
        return Err("record holds another key than the pointer's".into());
    }
    Ok(v)
}

/// The footer of a file of `records` values totalling `value_bytes`.
pub(crate) fn footer(records: u64, value_bytes: u64) -> [u8; FOOTER_BYTES as usize] {
    let mut b = [0u8; FOOTER_BYTES as usize];
    b[..8].copy_from_slice(&MAGIC);
    b[8..16].copy_from_slice(&records.to_le_bytes());
    b[16..24].copy_from_slice(&value_bytes.to_le_bytes());
    let crc = crc32c::crc32c(&b[..24]);
    b[24..].copy_from_slice(&crc.to_le_bytes());
    b
}

/// Decodes a footer: `(records, value_bytes)`, or the reason it is not one.
pub(crate) fn decode_footer(b: &[u8]) -> Result<(u64, u64), String> {
    if b.len() != FOOTER_BYTES as usize || b[..8] != MAGIC {
        return Err("bad footer magic".into());
    }
    let stored = u32::from_le_bytes(b[24..].try_into().expect("4 bytes"));
    if crc32c::crc32c(&b[..24]) != stored {
        return Err("footer checksum mismatch".into());
    }
    Ok((
        u64::from_le_bytes(b[8..16].try_into().expect("8 bytes")),
        u64::from_le_bytes(b[16..24].try_into().expect("8 bytes")),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_round_trip_and_every_damage() {
        let (k, v) = (&b"key"[..], &b"a value of some length"[..]);
        let mut rec = record_header(k, v).to_vec();
        rec.extend_from_slice(k);
        rec.extend_from_slice(v);
        assert_eq!(check_record(&rec, k, v.len()).unwrap(), v);
        assert!(check_record(&rec, b"kez", v.len()).is_err());
        assert!(check_record(&rec, k, v.len() - 1).is_err());
        for i in 0..rec.len() {
            let mut bad = rec.clone();
            bad[i] ^= 0x10;
            assert!(
                check_record(&bad, k, v.len()).is_err(),
                "flip at {i} passed"
            );
        }
    }

    #[test]
    fn footer_round_trip_and_damage() {
        let f = footer(7, 12345);
        assert_eq!(decode_footer(&f).unwrap(), (7, 12345));
        for i in 0..f.len() {
            let mut bad = f;
            bad[i] ^= 1;
            assert!(decode_footer(&bad).is_err());
        }
        assert!(check_header(&header()).is_ok());
        assert!(check_header(&footer(0, 0)[..16]).is_err());
    }
}
