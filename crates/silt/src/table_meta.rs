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
    /// Sum of the values' lengths.
    pub value_bytes: u64,
}

/// The file name of table `id` inside the database's `tables/` directory.
pub(crate) fn table_file_name(id: u64) -> String {
    format!("{id:06}.sst")
}

/// The file name of blob file `id` inside the database's `tables/` directory.
pub(crate) fn blob_file_name(id: u64) -> String {
    format!("{id:06}.blob")
}

/// A `Blob` entry's value: where its value lies (`docs/format/vlog.md`, "Value pointer").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BlobPointer {
    /// The blob file.
    pub id: u64,
    /// The record's offset in the file.
    pub offset: u64,
    /// The value's length.
    pub len: u32,
}

/// Bytes of an encoded [`BlobPointer`].
pub(crate) const BLOB_POINTER_BYTES: usize = 20;

impl BlobPointer {
    /// The pointer's bytes.
    pub(crate) fn encode(&self) -> [u8; BLOB_POINTER_BYTES] {
        let mut b = [0u8; BLOB_POINTER_BYTES];
        b[..8].copy_from_slice(&self.id.to_le_bytes());
        b[8..16].copy_from_slice(&self.offset.to_le_bytes());
        b[16..].copy_from_slice(&self.len.to_le_bytes());
        b
    }

    /// Decodes a pointer; `None` unless `b` is exactly one.
    pub(crate) fn decode(b: &[u8]) -> Option<BlobPointer> {
        if b.len() != BLOB_POINTER_BYTES {
            return None;
        }
        Some(BlobPointer {
            id: u64::from_le_bytes(b[..8].try_into().ok()?),
            offset: u64::from_le_bytes(b[8..16].try_into().ok()?),
            len: u32::from_le_bytes(b[16..].try_into().ok()?),
        })
    }
}
