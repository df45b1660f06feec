//! Checkpoints ([`Db::checkpoint`]): a directory that opens as a database holding exactly
//! this database's state at one seqno, made while writes continue. Also the two pieces
//! backups share with it: [`Capture`] (a consistent state, its files and its log range,
//! held against deletion and purge) and [`copy_file`].
//!
//! Invariants:
//! * **C1** The capture is taken under the state lock: the manifest state and the version
//!   installed with it name the same tables (every table-changing edit installs its
//!   version before the lock is released), and holding that version keeps every file it
//!   names from deletion (version invariant 3). The purge hold is taken under the same
//!   lock, so no flush's purge that follows an edit after the capture can remove a segment
//!   holding the state's log start.
//! * **C2** `upto` is read after the state: every write acknowledged before the call has a
//!   seqno below `visible` (a write returns once visible passes it), and every table of the
//!   state holds only seqnos below its log start, which is at most `visible` (a flush waits
//!   for visible to reach its boundary). So tables + log records `[log start, upto)` are
//!   exactly the seqno prefix `upto`, holding everything acknowledged before the call.
//! * **C3** A checkpoint is built in a temporary sibling directory and renamed into place
//!   once every file and directory is synced: `dir` either does not exist or is whole.

use super::*;
use crate::manifest::ManifestState;
use crate::table_meta::blob_file_name;
use crate::version::Version;

/// What [`Db::checkpoint`] made.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CheckpointInfo {
    /// The checkpoint's directory.
    pub dir: PathBuf,
    /// Every write with a seqno below this is in the checkpoint, and no other: it holds
    /// everything acknowledged before the call.
    pub seqno: u64,
    /// Table and blob files linked into the checkpoint (no bytes copied).
    pub files_linked: u64,
    /// Table and blob files copied (linking failed, for example across file systems).
    pub files_copied: u64,
    /// Bytes copied: files that could not be linked, the log segments, the manifest.
    pub bytes_copied: u64,
    /// Log segments copied (the records from the state's log start to `seqno`).
    pub log_segments: u64,
}

/// A consistent state of the database, its files held (C1), and the seqno it reaches (C2).
pub(crate) struct Capture {
    /// The manifest state.
    pub(crate) state: ManifestState,
    /// Keeps the state's table and blob files from deletion.
    _version: Arc<Version>,
    /// Keeps the log's segments from the state's log start from purges.
    _hold: silt_wal::PurgeHold,
    /// Everything below this seqno is in the state's tables or the log from its log start.
    pub(crate) upto: Seqno,
}

impl Capture {
    /// The files of the state, relative to the database directory (`tables/…`).
    pub(crate) fn files(&self) -> Vec<PathBuf> {
        let tables = self.state.table_ids().map(table_file_name);
        let blobs = self.state.blobs.keys().map(|&id| blob_file_name(id));
        tables
            .chain(blobs)
            .map(|n| Path::new("tables").join(n))
            .collect()
    }
}

impl DbInner {
    /// Takes a [`Capture`] (C1, C2).
    ///
    /// # Errors
    ///
    /// `Closed` after `close`.
    pub(crate) fn capture(&self) -> Result<Capture> {
        if self.closing.load(SeqCst) {
            return Err(Error::Closed);
        }
        let st = self.state.lock();
        let state = st.manifest.state().clone();
        let version = self.sv.read().version.clone();
        let hold = self.wal.hold_purge(state.log_start);
        drop(st);
        debug_assert_eq!(
            version
                .cfs
                .values()
                .flat_map(|c| c.levels.iter().flatten().map(|t| t.meta.id))
                .collect::<std::collections::BTreeSet<_>>(),
            state.table_ids().collect(),
            "C1: the version installed names the state's tables"
        );
        let upto = self.visible().max(state.log_start);
        Ok(Capture {
            state,
            _version: version,
            _hold: hold,
            upto,
        })
    }
}

impl Db {
    /// Makes a checkpoint in `dir` (which must not exist): a directory that opens as a
    /// database (`Db::open(dir)`) holding this database's state at one seqno, which
    /// includes every write acknowledged before the call. Writes, flushes and compactions
    /// go on meanwhile.
    ///
    /// Table and blob files are hard links (their bytes never change: no bytes copied; a log
    /// blob's span never changes, `docs/format/vlog.md`), or copies where linking fails
    /// (another file system; a log blob's bytes past its span copied as zeros); the manifest is a new snapshot of the
    /// state; the log records from the state's log start are copied, with everything past
    /// the checkpoint's seqno zeroed. The directory appears whole or not at all: it is
    /// built beside `dir` and renamed into place once synced. On a read-only handle it
    /// checkpoints the handle's fixed state (a writer elsewhere that has deleted one of its
    /// files since makes it fail: reopen and retry). See `docs/design.md`, "Checkpoints".
    ///
    /// # Examples
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = silt::Db::open(dir.path().join("db")).unwrap();
    /// db.put(b"k", b"v").unwrap();
    /// let info = db.checkpoint(dir.path().join("ckpt")).unwrap();
    /// db.put(b"k", b"later").unwrap();
    /// let copy = silt::Db::open(&info.dir).unwrap();
    /// assert_eq!(copy.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    /// ```
    ///
    /// # Errors
    ///
    /// `InvalidArgument` if `dir` exists; `Io` if a file cannot be linked, copied or
    /// synced (the partial directory is removed where it can be); `Corruption` if a log
    /// segment was purged under a read-only handle; `Closed` after `close`.
    pub fn checkpoint(&self, dir: impl AsRef<Path>) -> Result<CheckpointInfo> {
        let inner = &*self.inner;
        let fs = &*inner.fs;
        let dir = dir.as_ref().to_path_buf();
        if fs.list(&dir).is_ok() || fs.open(&dir).is_ok() {
            return Err(Error::invalid(format!(
                "{} exists: a checkpoint goes into a new directory",
                dir.display()
            )));
        }
        let tmp = sibling(&dir, "checkpoint-tmp");
        let cap = inner.capture()?;
        let r = write_checkpoint(inner, &cap, &tmp).and_then(|info| {
            fs.rename(&tmp, &dir)
                .map_err(|e| Error::io("rename", Some(tmp.clone()), e))?;
            if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                fs.sync_dir(parent)
                    .map_err(|e| Error::io("fsync directory", Some(parent.to_path_buf()), e))?;
            }
            Ok(CheckpointInfo {
                dir: dir.clone(),
                ..info
            })
        });
        if r.is_err() {
            remove_tree(fs, &tmp);
        }
        r
    }
}

/// Writes the checkpoint of `cap` into `tmp` (C3: the caller renames it).
fn write_checkpoint(inner: &DbInner, cap: &Capture, tmp: &Path) -> Result<CheckpointInfo> {
    let fs = &*inner.fs;
    let tables = tmp.join("tables");
    fs.create_dir_all(&tables)
        .map_err(|e| Error::io("create directory", Some(tables.clone()), e))?;
    let mut info = CheckpointInfo {
        dir: tmp.to_path_buf(),
        seqno: cap.upto,
        files_linked: 0,
        files_copied: 0,
        bytes_copied: 0,
        log_segments: 0,
    };
    for rel in cap.files() {
        let (from, to) = (inner.dir.join(&rel), tmp.join(&rel));
        match fs.hard_link(&from, &to) {
            Ok(()) => info.files_linked += 1,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::io("link", Some(from), e));
            }
            Err(_) => {
                let upto = content_len(&cap.state, &rel);
                let (n, _) = copy_file(fs, &from, fs, &to, upto)?;
                info.files_copied += 1;
                info.bytes_copied += n;
            }
        }
    }
    fs.sync_dir(&tables)
        .map_err(|e| Error::io("fsync directory", Some(tables.clone()), e))?;
    let wal_dir = tmp.join("wal");
    let segs = inner
        .wal
        .copy_range(cap.state.log_start, cap.upto, &wal_dir, fs)?;
    info.log_segments = segs.len() as u64;
    info.bytes_copied += segs.len() as u64 * inner.wal.segment_bytes();
    let m = Manifest::install_state(fs, tmp, &cap.state)?;
    info.bytes_copied += fs.open(&m).and_then(|f| f.len()).unwrap_or(0);
    fs.sync_dir(tmp)
        .map_err(|e| Error::io("fsync directory", Some(tmp.to_path_buf()), e))?;
    Ok(info)
}

/// `dir` with `.{what}-{pid}` appended to its name: a sibling on the same file system, so
/// a rename moves it into place.
pub(crate) fn sibling(dir: &Path, what: &str) -> PathBuf {
    let mut name = dir.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{what}-{}", std::process::id()));
    dir.with_file_name(name)
}

/// Zeroes the bytes of `buf` (read at file offset `off`) at or past file offset `upto`.
pub(crate) fn zero_past(buf: &mut [u8], off: u64, upto: u64) {
    let from = upto.saturating_sub(off).min(buf.len() as u64) as usize;
    buf[from..].fill(0);
}

/// How many leading bytes of the state's file `rel` (`tables/…`) are its content: all of
/// them, but for a log blob only up to its span's end (`docs/format/vlog.md`, "Log
/// blobs"): the log may still be appending to that segment past the span, so a copy takes
/// those bytes as zeros, and is the same whenever it is made.
pub(crate) fn content_len(state: &crate::manifest::ManifestState, rel: &Path) -> u64 {
    let id = rel
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(".blob"))
        .and_then(|n| n.parse::<u64>().ok());
    match id.and_then(|id| state.blobs.get(&id)).and_then(|b| b.log) {
        Some(span) => span.to,
        None => u64::MAX,
    }
}

/// Copies `from` to the new file `to` (which must not exist) and syncs it, with the bytes
/// at or past `upto` written as zeros ([`content_len`]; `u64::MAX`: none). Returns the
/// bytes copied and the CRC-32C of what was written.
///
/// # Errors
///
/// `Io` if a call fails (`to` is then removed).
pub(crate) fn copy_file(
    from_fs: &dyn FileSystem,
    from: &Path,
    to_fs: &dyn FileSystem,
    to: &Path,
    upto: u64,
) -> Result<(u64, u32)> {
    const CHUNK: u64 = 1 << 20;
    let src = from_fs
        .open(from)
        .map_err(|e| Error::io("open", Some(from.to_path_buf()), e))?;
    let len = src
        .len()
        .map_err(|e| Error::io("stat", Some(from.to_path_buf()), e))?;
    let out = to_fs
        .create(to)
        .map_err(|e| Error::io("create", Some(to.to_path_buf()), e))?;
    let r = (|| {
        let mut buf = vec![0u8; CHUNK.min(len) as usize];
        let mut crc = 0u32;
        let mut off = 0;
        while off < len {
            let n = CHUNK.min(len - off) as usize;
            src.read_at(&mut buf[..n], off)
                .map_err(|e| Error::io("read", Some(from.to_path_buf()), e))?;
            zero_past(&mut buf[..n], off, upto);
            crc = crc32c::crc32c_append(crc, &buf[..n]);
            out.write_at(&[&buf[..n]], off)
                .map_err(|e| Error::io("write", Some(to.to_path_buf()), e))?;
            off += n as u64;
        }
        out.sync_data()
            .map_err(|e| Error::io("fdatasync", Some(to.to_path_buf()), e))?;
        Ok((len, crc))
    })();
    if r.is_err() {
        let _ = to_fs.remove(to);
    }
    r
}

/// Removes `dir`, its files and the files of its `tables/` and `wal/`, best effort: what a
/// failed checkpoint or restore left.
pub(crate) fn remove_tree(fs: &dyn FileSystem, dir: &Path) {
    for sub in [dir.join("tables"), dir.join("wal"), dir.to_path_buf()] {
        for f in fs.list(&sub).unwrap_or_default() {
            let _ = fs.remove(&f);
        }
        let _ = fs.remove_dir(&sub);
    }
}
