//! Backups ([`BackupStore`]): incremental copies of a database into a store directory,
//! each file recorded with its length and CRC-32C, and verified restores. The layout and
//! the metadata format are `docs/format/backup.md`.
//!
//! Invariants:
//! * **B1** A backup exists once its metadata file does, and that file is renamed into
//!   place only after every file it names is synced in the store.
//! * **B2** A shared file's name carries its length and CRC-32C, so a file found under a
//!   name has those (unless damaged since, which restore detects): one copy serves every
//!   backup that holds the same table.
//! * **B3** A restored database appears (by rename) only after every file was copied,
//!   synced and matched its recorded length and checksum.
//! * **B4** Purging removes metadata before the files it names.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::checkpoint::{copy_file, remove_tree, sibling};
use super::*;

/// The metadata format's first line.
const META_MAGIC: &str = "silt-backup 1";

/// One backup in a store.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct BackupInfo {
    /// The backup's id (1, 2, …).
    pub id: u64,
    /// When it was made, in seconds since the Unix epoch.
    pub created_unix_secs: u64,
    /// Every write with a lower seqno is in the backup, and no other.
    pub seqno: u64,
    /// Files the backup holds.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Of those, files this backup added to the store (tables and blob files it did not
    /// already hold, plus its own manifest and log); set by `create`, 0 from `list`.
    pub new_files: u64,
    /// Bytes this backup added to the store.
    pub new_bytes: u64,
}

/// One file of a backup, as its metadata records it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct FileEntry {
    shared: bool,
    /// Relative to the database directory.
    path: PathBuf,
    len: u64,
    crc: u32,
}

/// A directory of backups (`docs/format/backup.md`).
///
/// # Examples
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let db = silt::Db::open(dir.path().join("db")).unwrap();
/// db.put(b"k", b"v").unwrap();
/// let store = silt::BackupStore::open(dir.path().join("backups")).unwrap();
/// let first = store.create(&db).unwrap();
/// db.put(b"k", b"w").unwrap();
/// store.create(&db).unwrap(); // copies only what changed
/// store.restore(first.id, dir.path().join("restored")).unwrap();
/// let old = silt::Db::open(dir.path().join("restored")).unwrap();
/// assert_eq!(old.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
/// ```
#[derive(Debug, Clone)]
pub struct BackupStore {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
}

impl BackupStore {
    /// Opens the store at `dir`, creating it if missing, on the OS file system.
    ///
    /// # Errors
    ///
    /// `Io` if its directories cannot be made.
    pub fn open(dir: impl AsRef<Path>) -> Result<BackupStore> {
        BackupStore::open_with(dir, OsFs::new())
    }

    /// As [`BackupStore::open`], on the file layer `fs`.
    ///
    /// # Errors
    ///
    /// As [`BackupStore::open`].
    pub fn open_with(dir: impl AsRef<Path>, fs: Arc<dyn FileSystem>) -> Result<BackupStore> {
        let dir = dir.as_ref().to_path_buf();
        for d in ["files", "private", "meta"] {
            let p = dir.join(d);
            fs.create_dir_all(&p)
                .map_err(|e| Error::io("create directory", Some(p), e))?;
        }
        Ok(BackupStore { fs, dir })
    }

    /// Backs up `db`: its state at one seqno, including every write acknowledged before
    /// the call, while writes go on (captured as for [`Db::checkpoint`]). Tables and blob
    /// files already in the store (same name, length and CRC-32C) are not copied again.
    ///
    /// # Errors
    ///
    /// `Io` if a file cannot be read, copied or synced; `Closed` after `close`.
    pub fn create(&self, db: &Db) -> Result<BackupInfo> {
        let fs = &*self.fs;
        let inner = &*db.inner;
        let id = self.ids()?.last().map_or(1, |l| l + 1);
        let private = self.private_dir(id);
        if fs.list(&private).is_ok_and(|l| !l.is_empty()) {
            // Left by a create that crashed before its metadata: not a backup (B1).
            remove_tree(fs, &private);
        }
        let cap = inner.capture()?;
        let mut files = Vec::new();
        let mut new_files = 0;
        let mut new_bytes = 0;
        // Private files: the manifest of the state and the log range it needs.
        fs.create_dir_all(&private)
            .map_err(|e| Error::io("create directory", Some(private.clone()), e))?;
        Manifest::install_state(fs, &private, &cap.state)?;
        inner
            .wal
            .copy_range(cap.state.log_start, cap.upto, &private.join("wal"), fs)?;
        for sub in [PathBuf::new(), PathBuf::from("wal")] {
            for p in fs
                .list(&private.join(&sub))
                .map_err(|e| Error::io("list directory", Some(private.join(&sub)), e))?
            {
                let name = p.file_name().unwrap_or_default();
                let (len, crc) = file_crc(fs, &p, u64::MAX)?;
                new_files += 1;
                new_bytes += len;
                files.push(FileEntry {
                    shared: false,
                    path: sub.join(name),
                    len,
                    crc,
                });
            }
        }
        // Shared files: each table and blob file once in the store (B2).
        for rel in cap.files() {
            let src = inner.dir.join(&rel);
            // A log blob's segment may still take appends past its span: those bytes are
            // backed up as zeros, so its copy is the same at every backup.
            let upto = super::checkpoint::content_len(&cap.state, &rel);
            let (len, crc) = file_crc(&*inner.fs, &src, upto)?;
            let entry = FileEntry {
                shared: true,
                path: rel,
                len,
                crc,
            };
            let stored = self.stored_path(id, &entry);
            let present = fs.open(&stored).and_then(|f| f.len()).ok() == Some(len);
            if !present {
                let tmp = stored.with_extension("tmp");
                let _ = fs.remove(&tmp);
                let (n, c) = copy_file(&*inner.fs, &src, fs, &tmp, upto)?;
                if (n, c) != (len, crc) {
                    let _ = fs.remove(&tmp);
                    return Err(Error::corruption(
                        src,
                        0,
                        "the file changed while it was backed up (a table, and a log blob's span, never change)",
                    ));
                }
                fs.rename(&tmp, &stored)
                    .map_err(|e| Error::io("rename", Some(tmp.clone()), e))?;
                new_files += 1;
                new_bytes += len;
            }
            files.push(entry);
        }
        let seqno = cap.upto;
        drop(cap);
        self.sync(&self.dir.join("files"))?;
        let created = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let meta = encode_meta(id, created, seqno, &files);
        let path = self.meta_path(id);
        let tmp = path.with_extension("tmp");
        let _ = fs.remove(&tmp);
        let f = fs
            .create(&tmp)
            .map_err(|e| Error::io("create", Some(tmp.clone()), e))?;
        f.write_at(&[meta.as_bytes()], 0)
            .map_err(|e| Error::io("write", Some(tmp.clone()), e))?;
        f.sync_data()
            .map_err(|e| Error::io("fdatasync", Some(tmp.clone()), e))?;
        fs.rename(&tmp, &path)
            .map_err(|e| Error::io("rename", Some(tmp.clone()), e))?;
        self.sync(&self.dir.join("meta"))?;
        let mut info = self.read_meta(id)?.0;
        info.new_files = new_files;
        info.new_bytes = new_bytes;
        Ok(info)
    }

    /// Every backup in the store, oldest first.
    ///
    /// # Errors
    ///
    /// `Corruption` naming a damaged metadata file; `Io` if one cannot be read.
    pub fn list(&self) -> Result<Vec<BackupInfo>> {
        self.ids()?
            .into_iter()
            .map(|id| Ok(self.read_meta(id)?.0))
            .collect()
    }

    /// Checks every file of backup `id` against its recorded length and CRC-32C, without
    /// restoring it.
    ///
    /// # Errors
    ///
    /// `Corruption` naming the first file that differs (or is missing, or the metadata);
    /// `InvalidArgument` if there is no such backup.
    pub fn verify(&self, id: u64) -> Result<BackupInfo> {
        let (info, files) = self.read_meta(id)?;
        for e in &files {
            let p = self.stored_path(id, e);
            let (len, crc) = file_crc(&*self.fs, &p, u64::MAX).map_err(|err| missing(&p, err))?;
            check_entry(&p, e, len, crc)?;
        }
        Ok(info)
    }

    /// Restores backup `id` into `target` (which must not exist) as a database directory,
    /// checking every file's length and CRC-32C as it is copied; the directory appears
    /// only once all matched (B3).
    ///
    /// # Errors
    ///
    /// `Corruption` naming the store's file that is damaged or missing (nothing is left
    /// at `target`); `InvalidArgument` if there is no such backup or `target` exists;
    /// `Io` if a call fails.
    pub fn restore(&self, id: u64, target: impl AsRef<Path>) -> Result<BackupInfo> {
        let fs = &*self.fs;
        let target = target.as_ref().to_path_buf();
        if fs.list(&target).is_ok() || fs.open(&target).is_ok() {
            return Err(Error::invalid(format!(
                "{} exists: restore into a new directory",
                target.display()
            )));
        }
        let (info, files) = self.read_meta(id)?;
        let tmp = sibling(&target, "restore-tmp");
        remove_tree(fs, &tmp);
        let r = (|| {
            for sub in ["tables", "wal"] {
                let d = tmp.join(sub);
                fs.create_dir_all(&d)
                    .map_err(|e| Error::io("create directory", Some(d), e))?;
            }
            for e in &files {
                let src = self.stored_path(id, e);
                let (len, crc) = copy_file(fs, &src, fs, &tmp.join(&e.path), u64::MAX)
                    .map_err(|err| missing(&src, err))?;
                check_entry(&src, e, len, crc)?;
            }
            for sub in ["tables", "wal", ""] {
                self.sync(&tmp.join(sub))?;
            }
            fs.rename(&tmp, &target)
                .map_err(|e| Error::io("rename", Some(tmp.clone()), e))?;
            if let Some(parent) = target.parent().filter(|p| !p.as_os_str().is_empty()) {
                self.sync(parent)?;
            }
            Ok(info)
        })();
        if r.is_err() {
            remove_tree(fs, &tmp);
        }
        r
    }

    /// Removes all but the newest `keep` backups, then the files no remaining backup
    /// needs (B4). Returns the ids removed.
    ///
    /// # Errors
    ///
    /// `Io` if a file cannot be removed; `Corruption` if a remaining backup's metadata is
    /// damaged (then no shared file is removed).
    pub fn purge_old(&self, keep: usize) -> Result<Vec<u64>> {
        let fs = &*self.fs;
        let ids = self.ids()?;
        let gone: Vec<u64> = ids[..ids.len().saturating_sub(keep)].to_vec();
        for &id in &gone {
            let p = self.meta_path(id);
            fs.remove(&p).map_err(|e| Error::io("remove", Some(p), e))?;
        }
        self.sync(&self.dir.join("meta"))?;
        let mut needed = BTreeSet::new();
        let mut live_private = BTreeSet::new();
        for id in self.ids()? {
            live_private.insert(self.private_dir(id));
            for e in self.read_meta(id)?.1 {
                needed.insert(self.stored_path(id, &e));
            }
        }
        for id in gone.iter().copied().chain(self.private_ids()?) {
            let d = self.private_dir(id);
            if !live_private.contains(&d) {
                remove_tree(fs, &d);
            }
        }
        let shared = self.dir.join("files");
        for p in fs
            .list(&shared)
            .map_err(|e| Error::io("list directory", Some(shared.clone()), e))?
        {
            if !needed.contains(&p) {
                fs.remove(&p).map_err(|e| Error::io("remove", Some(p), e))?;
            }
        }
        self.sync(&shared)?;
        Ok(gone)
    }

    fn meta_path(&self, id: u64) -> PathBuf {
        self.dir.join("meta").join(format!("{id:06}"))
    }

    fn private_dir(&self, id: u64) -> PathBuf {
        self.dir.join("private").join(format!("{id:06}"))
    }

    /// Where the store keeps `e` of backup `id`.
    fn stored_path(&self, id: u64, e: &FileEntry) -> PathBuf {
        if e.shared {
            let name = e.path.file_name().unwrap_or_default().to_string_lossy();
            self.dir
                .join("files")
                .join(format!("{name}-{}-{:08x}", e.len, e.crc))
        } else {
            self.private_dir(id).join(&e.path)
        }
    }

    /// The ids with metadata, ascending.
    fn ids(&self) -> Result<Vec<u64>> {
        let d = self.dir.join("meta");
        let mut ids: Vec<u64> = self
            .fs
            .list(&d)
            .map_err(|e| Error::io("list directory", Some(d), e))?
            .iter()
            .filter_map(|p| p.file_name()?.to_str()?.parse().ok())
            .collect();
        ids.sort_unstable();
        Ok(ids)
    }

    /// The ids of private directories that hold files (with or without metadata).
    fn private_ids(&self) -> Result<Vec<u64>> {
        // The file layer lists files, not directories: probe the ids up to the largest
        // metadata id plus a margin for creates that crashed.
        let max = self.ids()?.last().copied().unwrap_or(0) + 16;
        Ok((1..=max)
            .filter(|&id| self.fs.list(&self.private_dir(id)).is_ok())
            .collect())
    }

    fn sync(&self, dir: &Path) -> Result<()> {
        self.fs
            .sync_dir(dir)
            .map_err(|e| Error::io("fsync directory", Some(dir.to_path_buf()), e))
    }

    /// Reads and checks backup `id`'s metadata.
    fn read_meta(&self, id: u64) -> Result<(BackupInfo, Vec<FileEntry>)> {
        let path = self.meta_path(id);
        let f = self.fs.open(&path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Error::invalid(format!("no backup {id} in {}", self.dir.display()))
            } else {
                Error::io("open", Some(path.clone()), e)
            }
        })?;
        let len = f
            .len()
            .map_err(|e| Error::io("stat", Some(path.clone()), e))?;
        if len > 64 << 20 {
            return Err(Error::corruption(&path, 0, "backup metadata over 64 MiB"));
        }
        let mut buf = vec![0u8; len as usize];
        f.read_at(&mut buf, 0)
            .map_err(|e| Error::io("read", Some(path.clone()), e))?;
        decode_meta(&buf).map_err(|(offset, why)| Error::corruption(&path, offset, why))
    }
}

fn check_entry(path: &Path, e: &FileEntry, len: u64, crc: u32) -> Result<()> {
    if len != e.len || crc != e.crc {
        return Err(Error::corruption(
            path,
            0,
            format!(
                "backup file differs from its record: {len} bytes with CRC-32C {crc:08x}, \
                 recorded {} bytes with {:08x}; the backup is damaged",
                e.len, e.crc
            ),
        ));
    }
    Ok(())
}

/// A store file that cannot be opened is a damaged backup, not an I/O failure.
fn missing(path: &Path, err: Error) -> Error {
    match err {
        Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            Error::corruption(path, 0, "a file of the backup is missing from the store")
        }
        other => other,
    }
}

/// The CRC-32C and length of the file at `path`.
/// The length of `path` and the CRC-32C of its bytes, those at or past `upto` taken as zeros
/// (`checkpoint::content_len`).
fn file_crc(fs: &dyn FileSystem, path: &Path, upto: u64) -> Result<(u64, u32)> {
    const CHUNK: u64 = 1 << 20;
    let f = fs
        .open(path)
        .map_err(|e| Error::io("open", Some(path.to_path_buf()), e))?;
    let len = f
        .len()
        .map_err(|e| Error::io("stat", Some(path.to_path_buf()), e))?;
    let mut buf = vec![0u8; CHUNK.min(len) as usize];
    let mut crc = 0u32;
    let mut off = 0;
    while off < len {
        let n = CHUNK.min(len - off) as usize;
        f.read_at(&mut buf[..n], off)
            .map_err(|e| Error::io("read", Some(path.to_path_buf()), e))?;
        super::checkpoint::zero_past(&mut buf[..n], off, upto);
        crc = crc32c::crc32c_append(crc, &buf[..n]);
        off += n as u64;
    }
    Ok((len, crc))
}

fn encode_meta(id: u64, created: u64, seqno: u64, files: &[FileEntry]) -> String {
    let mut s = format!("{META_MAGIC}\nid {id}\ncreated {created}\nseqno {seqno}\n");
    for e in files {
        let _ = writeln!(
            s,
            "file {} {} {} {:08x}",
            if e.shared { "shared" } else { "private" },
            e.path.display(),
            e.len,
            e.crc
        );
    }
    let crc = crc32c::crc32c(s.as_bytes());
    let _ = writeln!(s, "crc {crc:08x}");
    s
}

/// Decodes a metadata file; on failure the byte offset of the bad line and why.
fn decode_meta(buf: &[u8]) -> std::result::Result<(BackupInfo, Vec<FileEntry>), (u64, String)> {
    let text =
        std::str::from_utf8(buf).map_err(|e| (e.valid_up_to() as u64, "not UTF-8".into()))?;
    let mut info = BackupInfo {
        id: 0,
        created_unix_secs: 0,
        seqno: 0,
        files: 0,
        bytes: 0,
        new_files: 0,
        new_bytes: 0,
    };
    let mut files = Vec::new();
    let mut at = 0usize;
    let mut sealed = false;
    for (n, line) in text.split_inclusive('\n').enumerate() {
        let bad = |why: &str| (at as u64, format!("line {}: {why}", n + 1));
        let body = line
            .strip_suffix('\n')
            .ok_or_else(|| bad("not ended by a newline"))?;
        let f: Vec<&str> = body.split(' ').collect();
        let num = |s: &str| s.parse::<u64>().map_err(|_| bad("not a number"));
        let hex = |s: &str| {
            u32::from_str_radix(s, 16)
                .ok()
                .filter(|_| s.len() == 8)
                .ok_or_else(|| bad("not 8 hex digits"))
        };
        if sealed {
            return Err(bad("text after the crc line"));
        }
        match f.as_slice() {
            _ if n == 0 => {
                if body != META_MAGIC {
                    return Err(bad("not a silt backup metadata file (version 1)"));
                }
            }
            ["id", v] => info.id = num(v)?,
            ["created", v] => info.created_unix_secs = num(v)?,
            ["seqno", v] => info.seqno = num(v)?,
            ["file", kind, path, len, crc] => {
                let shared = match *kind {
                    "shared" => true,
                    "private" => false,
                    _ => return Err(bad("file kind is neither shared nor private")),
                };
                let path = PathBuf::from(path);
                if path.is_absolute() || path.components().any(|c| c.as_os_str() == "..") {
                    return Err(bad("file path leaves the database directory"));
                }
                let e = FileEntry {
                    shared,
                    path,
                    len: num(len)?,
                    crc: hex(crc)?,
                };
                info.files += 1;
                info.bytes += e.len;
                files.push(e);
            }
            ["crc", v] => {
                if crc32c::crc32c(&buf[..at]) != hex(v)? {
                    return Err(bad("metadata checksum mismatch"));
                }
                sealed = true;
            }
            _ => return Err(bad("unknown line")),
        }
        at += line.len();
    }
    if !sealed {
        return Err((at as u64, "the crc line is missing (file cut short)".into()));
    }
    Ok((info, files))
}
