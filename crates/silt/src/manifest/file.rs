//! The manifest's files on disk: names, the file header, records (length, CRC, payload),
//! the snapshot file a rewrite starts, and `CURRENT`. Byte layout: `docs/format/manifest.md`.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use silt_vfs::{File, FileSystem};

use super::edit;
use super::*;
use crate::error::{Error, Result};

/// `MANIFEST-{number:06}`.
pub(super) fn manifest_name(number: u64) -> String {
    format!("{MANIFEST_PREFIX}{number:06}")
}

/// The number in a manifest file name written by [`manifest_name`], and only such a name.
pub(super) fn parse_manifest_name(name: &str) -> Option<u64> {
    let digits = name.strip_prefix(MANIFEST_PREFIX)?;
    if digits.len() < 6 || digits.len() > 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    (n >= 1 && manifest_name(n) == name).then_some(n)
}

pub(super) fn check_record_size(payload: &[u8]) -> Result<()> {
    if payload.len() > MAX_RECORD_BYTES as usize {
        return Err(Error::invalid(format!(
            "a manifest record of {} bytes is over the limit of {MAX_RECORD_BYTES}",
            payload.len()
        )));
    }
    Ok(())
}

/// The record's CRC-32C: over its file offset, its length and its payload. Mixing in the
/// offset means a record only validates where it was written, so stale or shifted bytes
/// never pass for a record.
pub(super) fn record_crc(offset: u64, payload: &[u8]) -> u32 {
    let c = crc32c::crc32c(&offset.to_le_bytes());
    let c = crc32c::crc32c_append(c, &(payload.len() as u32).to_le_bytes());
    crc32c::crc32c_append(c, payload)
}

/// The 8-byte header of a record written at `offset`. REQUIRES: `payload` has passed
/// [`check_record_size`].
pub(super) fn record_header(offset: u64, payload: &[u8]) -> [u8; RECORD_HEADER_BYTES as usize] {
    debug_assert!(!payload.is_empty() && payload.len() <= MAX_RECORD_BYTES as usize);
    let mut h = [0; RECORD_HEADER_BYTES as usize];
    h[..4].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    h[4..].copy_from_slice(&record_crc(offset, payload).to_le_bytes());
    h
}

/// Reads the record at `at`: `Ok(Ok(payload))` if it is whole and its checksum matches,
/// `Ok(Err(reason))` if not; `Err` only for an I/O failure. The length is checked against
/// the limit and against the bytes left in the file before anything is allocated.
pub(super) fn read_record(
    file: &dyn File,
    path: &Path,
    at: u64,
    file_bytes: u64,
) -> Result<std::result::Result<Vec<u8>, String>> {
    let left = file_bytes - at;
    if left < RECORD_HEADER_BYTES {
        return Ok(Err(format!("record header cut short ({left} bytes)")));
    }
    let mut h = [0; RECORD_HEADER_BYTES as usize];
    read_at(file, path, &mut h, at)?;
    let [l0, l1, l2, l3, c0, c1, c2, c3] = h;
    let len = u32::from_le_bytes([l0, l1, l2, l3]);
    let crc = u32::from_le_bytes([c0, c1, c2, c3]);
    if len == 0 {
        return Ok(Err("record of length 0".into()));
    }
    if len > MAX_RECORD_BYTES {
        return Ok(Err(format!("record length {len} is over the limit")));
    }
    if u64::from(len) > left - RECORD_HEADER_BYTES {
        return Ok(Err(format!(
            "record of {len} bytes runs past the end of the file"
        )));
    }
    let mut payload = vec![0; len as usize];
    read_at(file, path, &mut payload, at + RECORD_HEADER_BYTES)?;
    if record_crc(at, &payload) != crc {
        return Ok(Err("record checksum mismatch".into()));
    }
    Ok(Ok(payload))
}

/// Whether a valid record starts anywhere in `from..file_bytes`: proof that a bad record
/// before `from` is damage in the middle of the log, not a torn last append. (After a
/// crash during an append, only bytes of that one record can follow the valid prefix, and
/// those never validate as a record of their own: the checksum covers the offset.)
pub(super) fn valid_record_after(
    file: &dyn File,
    path: &Path,
    from: u64,
    file_bytes: u64,
) -> Result<bool> {
    if from + RECORD_HEADER_BYTES >= file_bytes {
        return Ok(false);
    }
    // The tail is read once; its size is the file's, not a length read from the file.
    let mut tail = vec![0; (file_bytes - from) as usize];
    read_at(file, path, &mut tail, from)?;
    let h = RECORD_HEADER_BYTES as usize;
    for i in 0..tail.len() - h {
        let word = |j: usize| u32::from_le_bytes([tail[j], tail[j + 1], tail[j + 2], tail[j + 3]]);
        let len = word(i) as usize;
        if len == 0 || len > MAX_RECORD_BYTES as usize || len > tail.len() - i - h {
            continue;
        }
        if record_crc(from + i as u64, &tail[i + h..i + h + len]) == word(i + 4) {
            return Ok(true);
        }
    }
    Ok(false)
}

pub(super) fn read_at(file: &dyn File, path: &Path, buf: &mut [u8], at: u64) -> Result<()> {
    file.read_at(buf, at)
        .map_err(|e| Error::io("read manifest", Some(path.to_path_buf()), e))
}

/// Checks the 24-byte header of manifest `number`.
pub(super) fn check_file_header(
    file: &dyn File,
    path: &Path,
    file_bytes: u64,
    number: u64,
) -> Result<()> {
    if file_bytes < FILE_HEADER_BYTES {
        return Err(Error::corruption(
            path,
            0,
            format!("{file_bytes} bytes, shorter than the manifest header"),
        ));
    }
    let mut h = [0; FILE_HEADER_BYTES as usize];
    read_at(file, path, &mut h, 0)?;
    let bad = |reason: &str| Err(Error::corruption(path, 0, reason));
    if h[..8] != MAGIC {
        return bad("not a silt manifest (bad magic)");
    }
    let crc = u32::from_le_bytes([h[20], h[21], h[22], h[23]]);
    if crc32c::crc32c(&h[..20]) != crc {
        return bad("manifest header checksum mismatch");
    }
    let version = u32::from_le_bytes([h[8], h[9], h[10], h[11]]);
    if version != FORMAT_VERSION {
        return Err(Error::corruption(
            path,
            8,
            format!("unknown manifest format version {version}"),
        ));
    }
    let mut n = [0; 8];
    n.copy_from_slice(&h[12..20]);
    let found = u64::from_le_bytes(n);
    if found != number {
        return Err(Error::corruption(
            path,
            12,
            format!("the header says manifest {found}, the file name says {number}"),
        ));
    }
    Ok(())
}

pub(super) fn file_header(number: u64) -> [u8; FILE_HEADER_BYTES as usize] {
    let mut h = [0; FILE_HEADER_BYTES as usize];
    h[..8].copy_from_slice(&MAGIC);
    h[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    h[12..20].copy_from_slice(&number.to_le_bytes());
    let crc = crc32c::crc32c(&h[..20]);
    h[20..].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Creates manifest `number` in `dir` holding the header and one snapshot record of
/// `state`, and syncs it (not the directory). Returns its path, handle and length.
pub(super) fn write_snapshot_file(
    fs: &dyn FileSystem,
    dir: &Path,
    number: u64,
    state: &ManifestState,
) -> Result<(PathBuf, Arc<dyn File>, u64)> {
    let mut payload = Vec::new();
    edit::encode(&state.snapshot(), &mut payload);
    check_record_size(&payload)?;
    let path = dir.join(manifest_name(number));
    remove_if_exists(fs, &path)?;
    let file = fs
        .create(&path)
        .map_err(|e| Error::io("create manifest", Some(path.clone()), e))?;
    let header = file_header(number);
    let rec = record_header(FILE_HEADER_BYTES, &payload);
    file.write_at(&[&header, &rec, &payload], 0)
        .map_err(|e| Error::io("write manifest", Some(path.clone()), e))?;
    file.sync_data()
        .map_err(|e| Error::io("fdatasync", Some(path.clone()), e))?;
    let end = FILE_HEADER_BYTES + RECORD_HEADER_BYTES + payload.len() as u64;
    Ok((path, file, end))
}

/// Points `CURRENT` at manifest `number`: write and sync `CURRENT.tmp`, rename it over
/// `CURRENT`, sync the directory. The rename is atomic, so `CURRENT` always names a whole
/// manifest file, the old one or the new one.
pub(super) fn install_current(fs: &dyn FileSystem, dir: &Path, number: u64) -> Result<()> {
    let tmp = dir.join(CURRENT_TMP);
    remove_if_exists(fs, &tmp)?;
    let file = fs
        .create(&tmp)
        .map_err(|e| Error::io("create", Some(tmp.clone()), e))?;
    let content = format!("{}\n", manifest_name(number));
    file.write_at(&[content.as_bytes()], 0)
        .map_err(|e| Error::io("write", Some(tmp.clone()), e))?;
    file.sync_data()
        .map_err(|e| Error::io("fdatasync", Some(tmp.clone()), e))?;
    let current = dir.join(CURRENT);
    crate::kill_point::hit("manifest: CURRENT.tmp synced, before rename");
    fs.rename(&tmp, &current)
        .map_err(|e| Error::io("rename", Some(current.clone()), e))?;
    sync_dir(fs, dir)
}

/// The manifest number `CURRENT` names.
pub(super) fn read_current(fs: &dyn FileSystem, dir: &Path) -> Result<u64> {
    let path = dir.join(CURRENT);
    let file = fs.open(&path).map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            Error::corruption(&path, 0, "CURRENT is missing")
        } else {
            Error::io("open", Some(path.clone()), e)
        }
    })?;
    let len = file
        .len()
        .map_err(|e| Error::io("stat", Some(path.clone()), e))?;
    if len > CURRENT_MAX_BYTES {
        return Err(Error::corruption(
            &path,
            0,
            format!("CURRENT has {len} bytes, too many for a manifest name"),
        ));
    }
    let mut buf = vec![0; len as usize];
    file.read_at(&mut buf, 0)
        .map_err(|e| Error::io("read", Some(path.clone()), e))?;
    std::str::from_utf8(&buf)
        .ok()
        .and_then(|s| s.strip_suffix('\n'))
        .and_then(parse_manifest_name)
        .ok_or_else(|| {
            Error::corruption(
                &path,
                0,
                format!(
                    "CURRENT does not hold a manifest name and a newline: {:?}",
                    String::from_utf8_lossy(&buf)
                ),
            )
        })
}

/// Removes manifest files other than `keep` and `CURRENT.tmp`: what a crash during a
/// rewrite (or during `create`) left behind. The directory is synced first, so the removals
/// can never become durable before the `CURRENT` that makes them garbage.
pub(super) fn remove_leftovers(fs: &dyn FileSystem, dir: &Path, keep: Option<u64>) -> Result<()> {
    let files = fs
        .list(dir)
        .map_err(|e| Error::io("list directory", Some(dir.to_path_buf()), e))?;
    let garbage: Vec<PathBuf> = files
        .into_iter()
        .filter(|p| match p.file_name().and_then(|n| n.to_str()) {
            Some(CURRENT_TMP) => true,
            Some(name) => parse_manifest_name(name).is_some_and(|n| Some(n) != keep),
            None => false,
        })
        .collect();
    if garbage.is_empty() {
        return Ok(());
    }
    sync_dir(fs, dir)?;
    for p in garbage {
        remove_if_exists(fs, &p)?;
    }
    Ok(())
}

pub(super) fn remove_if_exists(fs: &dyn FileSystem, path: &Path) -> Result<()> {
    match fs.remove(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io("remove", Some(path.to_path_buf()), e)),
    }
}

pub(super) fn sync_dir(fs: &dyn FileSystem, dir: &Path) -> Result<()> {
    fs.sync_dir(dir)
        .map_err(|e| Error::io("sync directory", Some(dir.to_path_buf()), e))
}
