//! Every record of the live manifest, decoded, for tools (`silt::inspect::manifest`):
//! read with the same checks as [`Manifest::recover`], changing nothing.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use silt_vfs::FileSystem;

use super::*;
use crate::error::Result;

/// One record of a manifest: where it starts and its edits.
pub(crate) struct DumpRecord {
    pub(crate) offset: u64,
    pub(crate) edits: Vec<Edit>,
}

/// The live manifest's records, the torn tail if any, and the state they build.
pub(crate) struct Dump {
    pub(crate) path: PathBuf,
    pub(crate) records: Vec<DumpRecord>,
    pub(crate) torn: Option<(u64, String)>,
    pub(crate) state: ManifestState,
}

/// Reads the manifest `CURRENT` names in `dir`, record by record.
///
/// # Errors
///
/// As [`Manifest::recover`].
pub(crate) fn dump(fs: Arc<dyn FileSystem>, dir: &Path) -> Result<Dump> {
    // The checks (header, damage with valid records after it, edits that do not apply)
    // are recover's; then the records are read again, one by one, for their edits.
    let recovered = Manifest::recover(fs.clone(), dir)?;
    let path = recovered.path().to_path_buf();
    let torn = recovered
        .torn_tail()
        .map(|(at, _, why)| (at, why.to_string()));
    let end = torn.as_ref().map(|(at, _)| *at);
    let file = fs
        .open(&path)
        .map_err(|e| Error::io("open manifest", Some(path.clone()), e))?;
    let file_bytes = file
        .len()
        .map_err(|e| Error::io("stat manifest", Some(path.clone()), e))?;
    let stop = end.unwrap_or(file_bytes).min(file_bytes);
    let mut records = Vec::new();
    let mut at = FILE_HEADER_BYTES;
    while at < stop {
        let payload = match read_record(&*file, &path, at, file_bytes)? {
            Ok(p) => p,
            Err(reason) => return Err(Error::corruption(&path, at, reason)),
        };
        let edits = edit::decode(&payload).map_err(|r| Error::corruption(&path, at, r))?;
        records.push(DumpRecord { offset: at, edits });
        at += RECORD_HEADER_BYTES + payload.len() as u64;
    }
    Ok(Dump {
        path,
        records,
        torn,
        state: recovered.state().clone(),
    })
}
