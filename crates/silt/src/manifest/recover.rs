//! Reading a manifest at open ([`Manifest::recover`]) without changing anything on disk,
//! and making what was read the live manifest ([`Recovered::commit`]), after which the
//! files it replaced are removed or set aside.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use silt_vfs::FileSystem;

use super::*;
use crate::error::{Error, Result};

impl Manifest {
    /// Reads the state of the database in `dir` without changing anything on disk: reads
    /// `CURRENT`, replays the manifest it names, and notes a torn last record (a crash
    /// during an append that was never acknowledged) and the other manifest files present.
    ///
    /// # Errors
    ///
    /// `Corruption { file, offset }` if `CURRENT` is missing or malformed, the manifest it
    /// names is missing, its header is wrong, a record other than the last is damaged, a
    /// record decodes to an unknown edit or to edits that do not fit the state, or no
    /// default column family results. `Io` if a call fails.
    pub(crate) fn recover(fs: Arc<dyn FileSystem>, dir: &Path) -> Result<Recovered> {
        let number = read_current(&*fs, dir)?;
        let path = dir.join(manifest_name(number));
        let file = fs.open(&path).map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                Error::corruption(&path, 0, "the manifest named by CURRENT is missing")
            } else {
                Error::io("open manifest", Some(path.clone()), e)
            }
        })?;
        let file_bytes = file
            .len()
            .map_err(|e| Error::io("stat manifest", Some(path.clone()), e))?;
        check_file_header(&*file, &path, file_bytes, number)?;

        let mut applier = Applier::new(ManifestState::empty());
        let mut at = FILE_HEADER_BYTES;
        let mut torn = None;
        while at < file_bytes {
            let payload = match read_record(&*file, &path, at, file_bytes)? {
                Ok(payload) => payload,
                Err(reason) => {
                    if valid_record_after(&*file, &path, at + 1, file_bytes)? {
                        return Err(Error::corruption(
                            &path,
                            at,
                            format!("{reason}, and valid records follow"),
                        ));
                    }
                    // A torn last record: its append was never acknowledged.
                    torn = Some(reason);
                    break;
                }
            };
            let edits = edit::decode(&payload).map_err(|r| Error::corruption(&path, at, r))?;
            for e in &edits {
                applier
                    .apply(e)
                    .map_err(|r| Error::corruption(&path, at, format!("bad edit: {r}")))?;
            }
            applier
                .finish_record()
                .map_err(|r| Error::corruption(&path, at, format!("bad edit: {r}")))?;
            at += RECORD_HEADER_BYTES + payload.len() as u64;
        }
        let state = applier.into_state();
        if !state.cfs.contains_key(&DEFAULT_CF_ID) {
            return Err(Error::corruption(
                &path,
                FILE_HEADER_BYTES,
                "the manifest holds no snapshot (no default column family)",
            ));
        }
        let mut others = Vec::new();
        let mut current_tmp = false;
        for p in fs
            .list(dir)
            .map_err(|e| Error::io("list directory", Some(dir.to_path_buf()), e))?
        {
            match p.file_name().and_then(|n| n.to_str()) {
                Some(CURRENT_TMP) => current_tmp = true,
                Some(name) => {
                    if let Some(n) = parse_manifest_name(name).filter(|&n| n != number) {
                        others.push((n, p));
                    }
                }
                None => {}
            }
        }
        others.sort();
        Ok(Recovered {
            fs,
            dir: dir.to_path_buf(),
            number,
            file,
            path,
            state,
            valid_bytes: at,
            file_bytes,
            torn,
            others,
            current_tmp,
        })
    }
}

/// A manifest read by [`Manifest::recover`]: the state it holds, and what else lies in the
/// directory. Nothing on disk has changed yet; [`Recovered::commit`] makes it the live
/// manifest.
pub(crate) struct Recovered {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    number: u64,
    file: Arc<dyn silt_vfs::File>,
    path: PathBuf,
    state: ManifestState,
    /// The end of the last valid record.
    valid_bytes: u64,
    file_bytes: u64,
    /// Why the record at `valid_bytes` is not whole, if the file goes on past it.
    torn: Option<String>,
    /// Manifest files other than `number`, by number.
    others: Vec<(u64, PathBuf)>,
    current_tmp: bool,
}

/// What [`Recovered::commit`] did with the files it replaced.
#[derive(Debug, Default)]
pub(crate) struct Disposal {
    /// Files deleted: each provably garbage.
    pub removed: Vec<PathBuf>,
    /// Files moved into `lost/` (from, to): not used, not provably garbage.
    pub set_aside: Vec<(PathBuf, PathBuf)>,
}

impl Recovered {
    /// The state the manifest holds.
    pub(crate) fn state(&self) -> &ManifestState {
        &self.state
    }

    /// The manifest file read.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// A torn last record that [`Recovered::commit`] will leave out: its offset, the bytes
    /// from there to the end of the file, and why it is not a record.
    pub(crate) fn torn_tail(&self) -> Option<(u64, u64, &str)> {
        self.torn
            .as_deref()
            .map(|why| (self.valid_bytes, self.file_bytes - self.valid_bytes, why))
    }

    /// The recovered state as a manifest that never writes (it is poisoned: every
    /// `log_and_apply` returns `Poisoned`), for a read-only handle. Nothing on disk
    /// changes; a torn tail and other manifest files are left as they are.
    pub(crate) fn into_read_only(self) -> Manifest {
        let mut m = Manifest::fresh(
            self.fs,
            self.dir,
            self.number,
            self.path,
            self.file,
            self.valid_bytes,
            self.state,
        );
        m.poisoned = true;
        m
    }

    /// Makes the recovered state the live manifest: writes it as the snapshot of a new
    /// manifest file (numbered above every manifest file present), switches `CURRENT` to
    /// it, and only then disposes of the files it replaces. Manifests older than the one
    /// read are removed (`CURRENT` only moves forward, so they are superseded); the one read
    /// is removed, or moved into `lost/` if its tail was torn; newer ones — a rewrite that
    /// crashed before switching `CURRENT`, or a `CURRENT` rolled back — are moved into
    /// `lost/`, never removed.
    ///
    /// # Errors
    ///
    /// `Io` if a call fails; the directory then still opens as before.
    pub(crate) fn commit(self) -> Result<(Manifest, Disposal)> {
        let fs = self.fs;
        let dir = self.dir;
        let newest = self.others.iter().map(|&(n, _)| n).max().unwrap_or(0);
        let number = self.number.max(newest) + 1;
        let (path, file, end_bytes) = write_snapshot_file(&*fs, &dir, number, &self.state)?;
        sync_dir(&*fs, &dir)?;
        crate::kill_point::hit("manifest: open, new snapshot written, before CURRENT");
        install_current(&*fs, &dir, number)?;
        crate::kill_point::hit("manifest: open, CURRENT switched, before disposal");
        let mut out = Disposal::default();
        let mut garbage = Vec::new();
        if self.torn.is_some() {
            let to = crate::lost::set_aside(&*fs, &dir, &self.path)?;
            out.set_aside.push((self.path, to));
        } else {
            garbage.push(self.path);
        }
        for (n, p) in self.others {
            if n < self.number {
                garbage.push(p);
            } else {
                let to = crate::lost::set_aside(&*fs, &dir, &p)?;
                out.set_aside.push((p, to));
            }
        }
        if self.current_tmp {
            garbage.push(dir.join(CURRENT_TMP));
        }
        for p in garbage {
            remove_if_exists(&*fs, &p)?;
            out.removed.push(p);
        }
        if !out.removed.is_empty() {
            sync_dir(&*fs, &dir)?;
        }
        let m = Manifest::fresh(fs, dir, number, path, file, end_bytes, self.state);
        Ok((m, out))
    }
}
