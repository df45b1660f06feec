//! The value log: blob files that hold values of at least a column family's blob threshold,
//! so that tables hold small pointers and compaction moves pointers instead of values
//! (key-value separation). The format and the rules are in `docs/format/vlog.md`.
//!
//! - `format`: the bytes of a blob file (header, record, footer);
//! - `writer`: [`BlobWriter`], which appends records and finishes a file;
//! - `reader`: [`BlobFiles`], the open blob files and the checked read of one value;
//! - `output`: [`Output`], a flush or compaction output: a table, and the blob file
//!   beside it that receives the values it separates or relocates.
//!
//! Below `db/`, `compaction` and `version`, beside `sstable` (whose table builder an
//! [`Output`] drives); it knows nothing of versions, the manifest or the database.

mod format;
mod output;
mod reader;
mod writer;

pub(crate) use output::{
    log_value_key, CheckedCopy, Finished, LogValue, LogValues, Output, PassThrough, Separation,
};
pub(crate) use reader::{check_file, read_meta, verify_records, BlobFiles};
pub(crate) use writer::BlobWriter;
