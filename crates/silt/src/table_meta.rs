//! [`TableMeta`]: what the manifest and the version know about one table file.

use crate::key::Seqno;

/// The description of one table, written by the table builder and kept in the manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TableMeta {
    /// Unique per database; the file is `tables/{id:06}.sst`.
    pub id: u64,
    /// File length.
    pub size_bytes: u64,
    /// Entries (puts and tombstones).
    pub entries: u64,
    /// Tombstones (`Delete` and `SingleDelete`) among the entries.
    pub tombstones: u64,
    /// Smallest internal key.
    pub smallest: Vec<u8>,
    /// Largest internal key.
    pub largest: Vec<u8>,
    /// Smallest seqno of any entry.
    pub smallest_seqno: Seqno,
    /// Largest seqno of any entry.
    pub largest_seqno: Seqno,
    /// The blob files this table points into, by id ascending, with the value bytes it
    /// points at in each (`docs/format/vlog.md`). Empty for a table without pointers.
    pub blobs: Vec<BlobRef>,
}

/// One blob file a table points into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BlobRef {
    /// The blob file's id.
    pub id: u64,
    /// The value bytes the table's pointers cover in that file.
    pub bytes: u64,
}

/// What the manifest knows of one blob file (`docs/format/vlog.md`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BlobMeta {
    /// Unique among blob files, from the table-id space; the file is `tables/{id:06}.blob`.
    pub id: u64,
    /// File length.
    pub size_bytes: u64,
    /// Records (values) in the file.
    pub records: u64,
    /// Sum of the values' lengths (a log blob: its span's length, `docs/format/vlog.md`).
    pub value_bytes: u64,
    /// `Some` for a log blob: a log segment linked as this blob file, and the span of it
    /// that this file's pointers may point into.
    pub log: Option<LogSpan>,
}

/// The part of a linked log segment a log blob owns (`docs/format/vlog.md`, "Log blobs").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LogSpan {
    /// The log segment's id (its LSNs are `segment * size_bytes ..`).
    pub segment: u64,
    /// First byte of the span, an offset in the segment file.
    pub from: u64,
    /// End of the span (exclusive).
    pub to: u64,
}

impl BlobMeta {
    /// The bytes this blob file accounts for on disk: the file's length, or a log blob's
    /// span (several log blobs may name one segment, with disjoint spans).
    pub(crate) fn disk_bytes(&self) -> u64 {
        match self.log {
            Some(s) => s.to - s.from,
            None => self.size_bytes,
        }
    }
}

/// The file name of table `id` inside the database's `tables/` directory.
pub(crate) fn table_file_name(id: u64) -> String {
    format!("{id:06}.sst")
}

/// The file name of blob file `id` inside the database's `tables/` directory.
pub(crate) fn blob_file_name(id: u64) -> String {
    format!("{id:06}.blob")
}

/// A `Blob` entry's value: where its value lies (`docs/format/vlog.md`, "Value pointer" and
/// "Log blobs").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BlobPointer {
    /// The blob file.
    pub id: u64,
    /// The record's offset in a blob file; the value's offset in a log blob.
    pub offset: u64,
    /// The value's length.
    pub len: u32,
    /// A log pointer's CRC-32C of the value (`None`: a pointer into a blob file, whose
    /// record carries its own).
    pub crc: Option<u32>,
}

/// Bytes of an encoded [`BlobPointer`] into a blob file.
pub(crate) const BLOB_POINTER_BYTES: usize = 20;
/// Bytes of an encoded [`BlobPointer`] into a log blob (the value's crc32c added).
pub(crate) const LOG_POINTER_BYTES: usize = 24;

impl BlobPointer {
    /// Appends the pointer's bytes to `out`.
    pub(crate) fn encode_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.id.to_le_bytes());
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&self.len.to_le_bytes());
        if let Some(c) = self.crc {
            out.extend_from_slice(&c.to_le_bytes());
        }
    }

    /// Decodes a pointer; `None` unless `b` is exactly one (of either length).
    pub(crate) fn decode(b: &[u8]) -> Option<BlobPointer> {
        if b.len() != BLOB_POINTER_BYTES && b.len() != LOG_POINTER_BYTES {
            return None;
        }
        Some(BlobPointer {
            id: u64::from_le_bytes(b[..8].try_into().ok()?),
            offset: u64::from_le_bytes(b[8..16].try_into().ok()?),
            len: u32::from_le_bytes(b[16..20].try_into().ok()?),
            crc: match b.get(20..24) {
                Some(c) => Some(u32::from_le_bytes(c.try_into().ok()?)),
                None => None,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_of_both_kinds_round_trip_and_other_lengths_are_refused() {
        for crc in [None, Some(0xDEAD_BEEF)] {
            let p = BlobPointer {
                id: 7,
                offset: 1 << 40,
                len: 4096,
                crc,
            };
            let mut b = Vec::new();
            p.encode_into(&mut b);
            assert_eq!(b.len(), if crc.is_some() { 24 } else { 20 });
            assert_eq!(BlobPointer::decode(&b), Some(p));
        }
        for n in [0, 19, 21, 23, 25, 28] {
            assert_eq!(BlobPointer::decode(&vec![1u8; n]), None, "{n} bytes");
        }
    }
}
