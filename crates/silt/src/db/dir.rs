//! What `Db::open` does with the database directory before it trusts it: takes the
//! directory lock, checks every table the recovered manifest names, and sorts the table
//! files it finds into live, provable garbage and files it must not touch. The rules, and
//! why each is safe, are in `docs/design.md` ("What open does with the directory"); this
//! module states them once and applies them.
//!
//! ## Invariants relied on
//!
//! * **O1** No file is created under a table id the manifest has not durably reserved
//!   (`DbInner::alloc_table_id` logs `NextTableId` before handing out an id at or above the
//!   reserved mark). So every table file a crash leaves behind has an id below the
//!   manifest's `next_table_id`, and a table file at or above it can only exist if the
//!   manifest lost durable records (or the file came from elsewhere).
//! * **O2** Table ids are never reused, and every table the manifest ever named had an id
//!   below the `next_table_id` of that state. So a file whose id is below the recovered
//!   `next_table_id` and which the recovered version does not name was removed from the
//!   database by a durable edit: it is garbage in this state and in every later one.
//! * **O3** Nothing is deleted before the manifest that makes it garbage is durable, and
//!   nothing is deleted that O2 does not prove garbage.

use std::io;
use std::path::{Path, PathBuf};

use silt_vfs::{FileLock, FileSystem};

use crate::error::{Error, Result};
use crate::manifest::ManifestState;
use crate::sstable::format::{Footer, FOOTER_BYTES};
use crate::table_meta::table_file_name;

/// The lock file, held for the life of a handle.
pub(crate) const LOCK_FILE: &str = "LOCK";

/// What [`crate::Db::open`] found in the directory and did about it; from
/// [`crate::Db::recovery_report`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecoveryReport {
    /// Whether open created a new database.
    pub created: bool,
    /// The manifest file the state was read from.
    pub manifest: Option<PathBuf>,
    /// A torn last record of that manifest, left out of the state (a crash during an
    /// append that was never acknowledged): its offset, its length in bytes, and why it is
    /// not a whole record. The file itself was moved into `lost/`.
    pub manifest_torn_tail: Option<(u64, u64, String)>,
    /// Tables of the recovered version checked: present, of the size the manifest records,
    /// and (with `paranoid_checks`, the default) with a valid footer.
    pub tables_checked: u64,
    /// What recovering the log found and did: records, a cut tail, damage and where its
    /// evidence went.
    pub wal: silt_wal::RecoveryInfo,
    /// Log records replayed into memtables.
    pub records_replayed: u64,
    /// Files deleted as provable garbage (tables removed by a durable edit, superseded
    /// manifests).
    pub removed: Vec<PathBuf>,
    /// Files moved into `lost/` rather than deleted: not used, and not provably garbage.
    /// `(from, to)`.
    pub set_aside: Vec<(PathBuf, PathBuf)>,
}

/// Creates the database directory if missing, or checks that `dir` is one.
///
/// # Errors
///
/// `InvalidArgument` if `dir` (or a parent) is a regular file; `Io` otherwise.
pub(crate) fn make_dir(fs: &dyn FileSystem, dir: &Path) -> Result<()> {
    fs.create_dir_all(dir).map_err(|e| {
        // `create_dir_all` on a file says "File exists"; a file among the parents says
        // "Not a directory".
        if matches!(
            e.kind(),
            io::ErrorKind::AlreadyExists | io::ErrorKind::NotADirectory
        ) {
            Error::invalid(format!(
                "{} is not a directory: a database is a directory",
                dir.display()
            ))
        } else {
            Error::io("create directory", Some(dir.to_path_buf()), e)
        }
    })
}

/// Takes the directory lock: `dir/LOCK`, exclusive, for as long as the guard lives.
///
/// # Errors
///
/// `Locked`, naming the holder's process id where the lock file says it, if another
/// handle (of this process or another) holds it; `Io` if the lock file cannot be made.
pub(crate) fn lock(fs: &dyn FileSystem, dir: &Path) -> Result<Box<dyn FileLock>> {
    let path = dir.join(LOCK_FILE);
    match fs.lock(&path) {
        Ok(guard) => Ok(guard),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
            // The file layer says who holds it where it can (OsFs must: opening the lock file
            // to read it would release this process's POSIX lock when closed).
            let holder = match silt_vfs::LockHeld::of(&e) {
                Some(h) => h.holder,
                None => read_holder(fs, &path),
            };
            Err(Error::Locked { path, holder })
        }
        Err(e) => Err(Error::io("lock", Some(path), e)),
    }
}

/// The process id the holder of the lock file wrote into it, if it can be read.
fn read_holder(fs: &dyn FileSystem, path: &Path) -> Option<u32> {
    let f = fs.open(path).ok()?;
    let len = f.len().ok()?.min(32) as usize;
    let mut buf = vec![0; len];
    f.read_at(&mut buf, 0).ok()?;
    std::str::from_utf8(&buf).ok()?.trim().parse().ok()
}

/// Checks every table `state` names: the file exists and has the size the manifest
/// records, and, if `footers`, its footer decodes (magic and checksum). Returns how many
/// were checked.
///
/// # Errors
///
/// `Corruption` naming the first table that fails, with what is wrong: a database whose
/// manifest names a missing or cut table has lost data, and opening it would only defer the
/// error to the first read that reaches it.
pub(crate) fn check_tables(
    fs: &dyn FileSystem,
    tables_dir: &Path,
    state: &ManifestState,
    footers: bool,
) -> Result<u64> {
    let mut checked = 0;
    for cf in state.cfs.values() {
        for (level, tables) in cf.levels.iter().enumerate() {
            for meta in tables {
                let path = tables_dir.join(table_file_name(meta.id));
                let f = match fs.open(&path) {
                    Ok(f) => f,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {
                        return Err(Error::corruption(
                            &path,
                            0,
                            format!(
                                "table {} of column family {:?} (level {level}) is missing: \
                                 the manifest names it, so its data is lost unless the file \
                                 is restored",
                                meta.id, cf.name
                            ),
                        ))
                    }
                    Err(e) => return Err(Error::io("open table", Some(path), e)),
                };
                let len = f
                    .len()
                    .map_err(|e| Error::io("stat table", Some(path.clone()), e))?;
                if len != meta.size_bytes {
                    return Err(Error::corruption(
                        &path,
                        len.min(meta.size_bytes),
                        format!(
                            "table {} has {len} bytes, but the manifest records {}: the file \
                             was cut or replaced",
                            meta.id, meta.size_bytes
                        ),
                    ));
                }
                if footers {
                    // `len == size_bytes >= FOOTER_BYTES`: the manifest only records whole
                    // tables (checked when the edit was applied).
                    let at = len.saturating_sub(FOOTER_BYTES as u64);
                    let mut buf = [0u8; FOOTER_BYTES];
                    f.read_at(&mut buf, at)
                        .map_err(|e| Error::io("read table footer", Some(path.clone()), e))?;
                    Footer::decode(&buf, &path, at)?;
                }
                checked += 1;
            }
        }
    }
    for meta in state.blobs.values() {
        crate::vlog::check_file(fs, tables_dir, meta, footers)?;
        checked += 1;
    }
    Ok(checked)
}

/// The table files in `tables_dir` that are not in `state`, sorted by O1 and O2.
#[derive(Debug, Default)]
pub(crate) struct Unreferenced {
    /// Ids below `next_table_id`: garbage (O2).
    pub garbage: Vec<PathBuf>,
    /// Ids at or above `next_table_id`: newer than the state (O1).
    pub newer: Vec<PathBuf>,
}

/// Lists the table and blob files `state` does not name. Names that are not `{id}.sst` or
/// `{id}.blob` are left alone (not ours to judge).
///
/// # Errors
///
/// `Io` if the directory cannot be listed.
pub(crate) fn unreferenced_tables(
    fs: &dyn FileSystem,
    tables_dir: &Path,
    state: &ManifestState,
) -> Result<Unreferenced> {
    let live: std::collections::BTreeSet<u64> = state.table_ids().collect();
    let live_blobs: std::collections::BTreeSet<u64> = state.blobs.keys().copied().collect();
    let files = match fs.list(tables_dir) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
        Err(e) => {
            return Err(Error::io(
                "list directory",
                Some(tables_dir.to_path_buf()),
                e,
            ))
        }
    };
    let mut out = Unreferenced::default();
    for f in files {
        let name = f.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        // Blob files take their ids from the table-id space, so O1 and O2 sort them too.
        let (id, live) = match (name.strip_suffix(".sst"), name.strip_suffix(".blob")) {
            (Some(s), _) => (s.parse::<u64>().ok(), &live),
            (_, Some(s)) => (s.parse::<u64>().ok(), &live_blobs),
            _ => (None, &live),
        };
        let Some(id) = id else {
            continue;
        };
        if live.contains(&id) {
            continue;
        }
        if id < state.next_table_id {
            out.garbage.push(f);
        } else {
            out.newer.push(f);
        }
    }
    Ok(out)
}

/// The `Corruption` for table files newer than the manifest (O1): the manifest lost
/// durable records, or the files do not belong to this database.
pub(crate) fn newer_tables_error(
    manifest: &Path,
    state: &ManifestState,
    newer: &[PathBuf],
) -> Error {
    let names: Vec<String> = newer
        .iter()
        .take(5)
        .map(|p| p.display().to_string())
        .collect();
    Error::corruption(
        manifest,
        0,
        format!(
            "{} table file(s) ({}{}) have ids at or above the manifest's next table id {}: \
             the manifest lost records it had made durable (it was cut or replaced by an \
             older copy), or the files belong elsewhere. Nothing was changed; restore the \
             manifest, or move the files out of the tables directory to open without them",
            newer.len(),
            names.join(", "),
            if newer.len() > 5 { ", …" } else { "" },
            state.next_table_id
        ),
    )
}
