//! The `lost/` directory: where open puts files it will not trust and must not destroy.
//!
//! Open deletes only what it can prove is garbage (see `docs/design.md`, "What open does
//! with the directory"). Anything else it does not use — a manifest newer than the one
//! `CURRENT` names, a manifest whose tail was cut off — is moved here, under its own name
//! (with `.1`, `.2`, … appended if that name is taken), so an operator can inspect or
//! restore it. Nothing in `lost/` is ever read or removed by the engine.

use std::path::{Path, PathBuf};

use silt_vfs::FileSystem;

use crate::error::{Error, Result};

/// The directory's name inside the database directory.
pub(crate) const LOST_DIR: &str = "lost";

/// Moves `file` (inside `dir`, the database directory, or one of its subdirectories) into
/// `dir/lost/` and makes the move durable: the new name is synced before the old one's
/// removal can be. Returns the new path.
pub(crate) fn set_aside(fs: &dyn FileSystem, dir: &Path, file: &Path) -> Result<PathBuf> {
    let lost = dir.join(LOST_DIR);
    fs.create_dir_all(&lost)
        .map_err(|e| Error::io("create directory", Some(lost.clone()), e))?;
    let taken = fs
        .list(&lost)
        .map_err(|e| Error::io("list directory", Some(lost.clone()), e))?;
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "unnamed".into());
    let mut to = lost.join(&name);
    let mut n = 0;
    while taken.contains(&to) {
        n += 1;
        to = lost.join(format!("{name}.{n}"));
    }
    fs.rename(file, &to)
        .map_err(|e| Error::io("move aside into lost/", Some(file.to_path_buf()), e))?;
    fs.sync_dir(&lost)
        .map_err(|e| Error::io("sync directory", Some(lost.clone()), e))?;
    if let Some(parent) = file.parent() {
        fs.sync_dir(parent)
            .map_err(|e| Error::io("sync directory", Some(parent.to_path_buf()), e))?;
    }
    Ok(to)
}
