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
}

/// The file name of table `id` inside the database's `tables/` directory.
pub(crate) fn table_file_name(id: u64) -> String {
    format!("{id:06}.sst")
}
