//! The snapshot file (`docs/format/raft.md`, "Snapshot file"): [`SnapshotWriter`] writes
//! one from a sorted stream of pairs, [`SnapshotReader`] reads one back and checks every
//! length, the pair count and the CRC-32C as it goes. Reading never panics on bad bytes.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;

use crate::error::{Error, Result};
use crate::SnapshotMeta;

const MAGIC: &[u8; 8] = b"SILTSNAP";
const VERSION: u32 = 1;
const END: u32 = u32::MAX;
/// A meta JSON larger than this is refused as corrupt (memberships are small).
const MAX_META_BYTES: u32 = 16 << 20;

/// Writes a snapshot file: header, pairs in key order, end marker and checksum.
pub(crate) struct SnapshotWriter {
    out: BufWriter<File>,
    crc: u32,
    pairs: u64,
    bytes: u64,
}

impl SnapshotWriter {
    /// Creates `path` (truncating it) and writes the header.
    pub(crate) fn create(path: &Path, meta: &SnapshotMeta) -> Result<Self> {
        let file = File::create(path)?;
        let mut w = SnapshotWriter {
            out: BufWriter::with_capacity(1 << 20, file),
            crc: 0,
            pairs: 0,
            bytes: 0,
        };
        let meta = serde_json::to_vec(meta)
            .map_err(|e| Error::InvalidArgument(format!("snapshot meta: {e}")))?;
        w.put(MAGIC)?;
        w.put(&VERSION.to_le_bytes())?;
        w.put(&(meta.len() as u32).to_le_bytes())?;
        w.put(&meta)?;
        Ok(w)
    }

    fn put(&mut self, b: &[u8]) -> Result<()> {
        self.crc = crc32c::crc32c_append(self.crc, b);
        self.bytes += b.len() as u64;
        self.out.write_all(b)?;
        Ok(())
    }

    /// Appends one pair (keys must come in ascending order; the caller iterates silt).
    pub(crate) fn pair(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.put(&(key.len() as u32).to_le_bytes())?;
        self.put(&(value.len() as u32).to_le_bytes())?;
        self.put(key)?;
        self.put(value)?;
        self.pairs += 1;
        Ok(())
    }

    /// Writes the end, syncs the file and returns (pairs, file bytes).
    pub(crate) fn finish(mut self) -> Result<(u64, u64)> {
        self.put(&END.to_le_bytes())?;
        let pairs = self.pairs;
        self.put(&pairs.to_le_bytes())?;
        let crc = self.crc;
        self.out.write_all(&crc.to_le_bytes())?;
        let file = self.out.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        Ok((pairs, self.bytes + 4))
    }
}

/// Reads a snapshot file, checking it as it goes.
pub(crate) struct SnapshotReader {
    input: BufReader<File>,
    crc: u32,
    pairs: u64,
    meta: SnapshotMeta,
    done: bool,
}

impl SnapshotReader {
    /// Opens `path` and reads its header.
    ///
    /// # Errors
    ///
    /// `Io` if the file cannot be read, `Corruption` if the header is not a snapshot's.
    pub(crate) fn open(path: &Path) -> Result<Self> {
        Self::from_file(File::open(path)?).map_err(|e| match e {
            Error::Corruption(m) => corrupt(path, &m),
            e => e,
        })
    }

    /// Reads the snapshot in `file` from its start.
    ///
    /// # Errors
    ///
    /// As [`SnapshotReader::open`].
    pub(crate) fn from_file(mut file: File) -> Result<Self> {
        file.seek(SeekFrom::Start(0))?;
        let mut r = SnapshotReader {
            input: BufReader::with_capacity(1 << 20, file),
            crc: 0,
            pairs: 0,
            meta: SnapshotMeta::default(),
            done: false,
        };
        let mut magic = [0u8; 8];
        r.take(&mut magic)?;
        if &magic != MAGIC {
            return Err(Error::Corruption("not a snapshot file (bad magic)".into()));
        }
        let version = r.u32()?;
        if version != VERSION {
            return Err(Error::Corruption(format!(
                "snapshot version {version}, expected {VERSION}"
            )));
        }
        let len = r.u32()?;
        if len > MAX_META_BYTES {
            return Err(Error::Corruption(format!("snapshot meta of {len} bytes")));
        }
        let mut meta = vec![0u8; len as usize];
        r.take(&mut meta)?;
        r.meta = serde_json::from_slice(&meta)
            .map_err(|e| Error::Corruption(format!("snapshot meta: {e}")))?;
        Ok(r)
    }

    /// The snapshot's meta (last log id, membership, id).
    pub(crate) fn meta(&self) -> &SnapshotMeta {
        &self.meta
    }

    fn take(&mut self, buf: &mut [u8]) -> Result<()> {
        self.input.read_exact(buf).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                Error::Corruption("snapshot file ends early".into())
            } else {
                Error::Io(e)
            }
        })?;
        self.crc = crc32c::crc32c_append(self.crc, buf);
        Ok(())
    }

    fn u32(&mut self) -> Result<u32> {
        let mut b = [0u8; 4];
        self.take(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    /// The next pair, or `None` after the last one once the end marker, count and checksum
    /// have been checked (and that nothing follows them).
    ///
    /// # Errors
    ///
    /// `Corruption` for a bad length, count or checksum, or bytes after the end.
    pub(crate) fn next_pair(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        if self.done {
            return Ok(None);
        }
        let klen = self.u32()?;
        if klen == END {
            let mut n = [0u8; 8];
            self.take(&mut n)?;
            let count = u64::from_le_bytes(n);
            let want = self.crc;
            let mut c = [0u8; 4];
            self.input
                .read_exact(&mut c)
                .map_err(|_| Error::Corruption("snapshot file ends before its checksum".into()))?;
            if u32::from_le_bytes(c) != want {
                return Err(Error::Corruption("snapshot checksum mismatch".into()));
            }
            if count != self.pairs {
                return Err(Error::Corruption(format!(
                    "snapshot says {count} pairs, holds {}",
                    self.pairs
                )));
            }
            let mut extra = [0u8; 1];
            if self.input.read(&mut extra)? != 0 {
                return Err(Error::Corruption(
                    "bytes after the snapshot's checksum".into(),
                ));
            }
            self.done = true;
            return Ok(None);
        }
        let vlen = self.u32()?;
        if klen as usize > silt::MAX_KEY_BYTES || vlen as usize > silt::MAX_VALUE_BYTES {
            return Err(Error::Corruption(format!(
                "snapshot pair {} has a key of {klen} or value of {vlen} bytes",
                self.pairs
            )));
        }
        let mut key = vec![0u8; klen as usize];
        self.take(&mut key)?;
        let mut value = vec![0u8; vlen as usize];
        self.take(&mut value)?;
        self.pairs += 1;
        Ok(Some((key, value)))
    }
}

fn corrupt(path: &Path, why: &str) -> Error {
    Error::Corruption(format!("{}: {why}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, n: usize) -> SnapshotMeta {
        let meta = SnapshotMeta {
            snapshot_id: "1-2-3".into(),
            ..Default::default()
        };
        let mut w = SnapshotWriter::create(path, &meta).unwrap();
        for i in 0..n {
            w.pair(
                format!("k{i:04}").as_bytes(),
                format!("value {i}").as_bytes(),
            )
            .unwrap();
        }
        w.finish().unwrap();
        meta
    }

    type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

    fn read_all(path: &Path) -> Result<(SnapshotMeta, Pairs)> {
        let mut r = SnapshotReader::open(path)?;
        let mut v = Vec::new();
        while let Some(p) = r.next_pair()? {
            v.push(p);
        }
        Ok((r.meta().clone(), v))
    }

    #[test]
    fn round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s");
        let meta = write(&p, 100);
        let (m, pairs) = read_all(&p).unwrap();
        assert_eq!(m, meta);
        assert_eq!(pairs.len(), 100);
        assert_eq!(pairs[7].0, b"k0007");
    }

    #[test]
    fn every_truncation_and_every_flipped_byte_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s");
        write(&p, 5);
        let good = std::fs::read(&p).unwrap();
        let q = dir.path().join("bad");
        for cut in 0..good.len() {
            std::fs::write(&q, &good[..cut]).unwrap();
            assert!(read_all(&q).is_err(), "cut at {cut}");
        }
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x10;
            std::fs::write(&q, &bad).unwrap();
            assert!(read_all(&q).is_err(), "flip at {i}");
        }
        let mut longer = good.clone();
        longer.push(0);
        std::fs::write(&q, &longer).unwrap();
        assert!(read_all(&q).is_err());
    }
}
