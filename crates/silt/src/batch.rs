//! [`WriteBatch`]: a group of writes applied atomically, across column families, and its
//! encoding as one log record payload; and the part and commit records of a transaction too
//! large for one record. The format is `docs/format/batch.md`:
//!
//! ```text
//! payload = count: u32 LE, then `count` entries
//! entry   = kind: u8 | cf: u32 LE | key_len: u32 LE | key | (Put, PutTtl, Merge) value_len: u32 LE | value
//! part    = 0xFFFF_FFF0: u32 | txn: u64 | index: u32 | payload
//! commit  = 0xFFFF_FFF1: u32 | txn: u64 | parts: u32 | payload
//! ```
//!
//! The record's LSN is the seqno of every entry in it (see `docs/design.md`); the log's
//! checksum covers the payload. Decoding checks every length against the payload.

use crate::cf::ColumnFamily;
use crate::error::{Error, Result};
use std::time::Duration;

use crate::key::{expiry_of, Kind, EXPIRY_BYTES, MAX_KEY_BYTES};

/// The largest value the engine accepts (and a batch's total payload, bounded by the log).
pub const MAX_VALUE_BYTES: usize = 16 * 1024 * 1024;

/// A group of puts and deletes, applied all or nothing by [`crate::Db::write`].
///
/// Within a batch a later write to the same key wins.
///
/// # Examples
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let db = silt::Db::builder(dir.path()).open().unwrap();
/// let mut batch = silt::WriteBatch::new();
/// batch.put(b"a", b"1");
/// batch.delete(b"b");
/// db.write(batch, silt::WriteOptions::default()).unwrap();
/// assert_eq!(db.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteBatch {
    buf: Vec<u8>,
    count: u32,
    /// Whether some `PutTtl` entry holds a time to live (from [`WriteBatch::put_with_ttl`])
    /// where the log wants an expiry time: the engine stamps the batch before it logs it
    /// ([`WriteBatch::stamped`]).
    relative_ttl: bool,
    /// Whether the batch holds a merge operand (the engine checks its family has a merge
    /// operator, and folds operands onto earlier writes of their key in the batch).
    merges: bool,
}

/// One decoded batch entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BatchEntry<'a> {
    pub kind: Kind,
    pub cf: u32,
    pub key: &'a [u8],
    pub value: &'a [u8],
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> WriteBatch {
        WriteBatch {
            buf: vec![0; 4],
            count: 0,
            relative_ttl: false,
            merges: false,
        }
    }

    /// Writes `value` under `key` in the default column family.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> &mut Self {
        self.push(Kind::Put, 0, key, Some(value))
    }

    /// Deletes `key` from the default column family.
    pub fn delete(&mut self, key: &[u8]) -> &mut Self {
        self.push(Kind::Delete, 0, key, None)
    }

    /// Deletes `key` for a write-once key (seed 002's queue pattern): the tombstone and the
    /// put cancel out in compaction, leaving nothing behind.
    ///
    /// Defined only if, since the key's previous single delete (or ever), it was put exactly
    /// once and never removed with [`WriteBatch::delete`] — as in RocksDB. Otherwise an
    /// older value may reappear.
    pub fn single_delete(&mut self, key: &[u8]) -> &mut Self {
        self.push(Kind::SingleDelete, 0, key, None)
    }

    /// [`WriteBatch::put`] in column family `cf`.
    pub fn put_cf(&mut self, cf: &ColumnFamily, key: &[u8], value: &[u8]) -> &mut Self {
        self.push(Kind::Put, cf.id, key, Some(value))
    }

    /// Merges `operand` into `key` in the default column family: reads fold it onto the
    /// key's value with the family's merge operator ([`crate::DbBuilder::merge_operator`]).
    /// Writing it to a family without one fails the whole batch with `InvalidArgument`.
    pub fn merge(&mut self, key: &[u8], operand: &[u8]) -> &mut Self {
        self.merges = true;
        self.push(Kind::Merge, 0, key, Some(operand))
    }

    /// [`WriteBatch::merge`] in column family `cf`.
    pub fn merge_cf(&mut self, cf: &ColumnFamily, key: &[u8], operand: &[u8]) -> &mut Self {
        self.merges = true;
        self.push(Kind::Merge, cf.id, key, Some(operand))
    }

    /// Whether the batch holds a merge operand.
    pub(crate) fn has_merges(&self) -> bool {
        self.merges
    }

    /// Writes `value` under `key` in the default column family for `ttl`: from the write's
    /// commit time plus `ttl` on (by the database's [`crate::Clock`]), the key reads as
    /// deleted, and compaction drops the entry. Overrides the family's TTL
    /// ([`crate::DbBuilder::ttl`]) for this write. A `ttl` beyond the year 2^64 ms is
    /// capped there.
    pub fn put_with_ttl(&mut self, key: &[u8], value: &[u8], ttl: Duration) -> &mut Self {
        self.push_ttl(0, key, value, ttl)
    }

    /// [`WriteBatch::put_with_ttl`] in column family `cf`.
    pub fn put_cf_with_ttl(
        &mut self,
        cf: &ColumnFamily,
        key: &[u8],
        value: &[u8],
        ttl: Duration,
    ) -> &mut Self {
        self.push_ttl(cf.id, key, value, ttl)
    }

    fn push_ttl(&mut self, cf: u32, key: &[u8], value: &[u8], ttl: Duration) -> &mut Self {
        let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        let mut v = Vec::with_capacity(EXPIRY_BYTES + value.len());
        v.extend_from_slice(&ms.to_le_bytes());
        v.extend_from_slice(value);
        self.relative_ttl = true;
        self.push(Kind::PutTtl, cf, key, Some(&v))
    }

    /// Whether the batch holds a time to live still to be stamped.
    pub(crate) fn has_relative_ttl(&self) -> bool {
        self.relative_ttl
    }

    /// This batch as the log must hold it, if that differs: every time to live of
    /// [`WriteBatch::put_with_ttl`] turned into an expiry time (`now_ms` plus it), and
    /// every plain put into a family with a TTL (`family_ttl_ms`) into an expiring one.
    /// `None` if there is nothing to stamp (the common case, which costs one pass only when
    /// some family has a TTL).
    pub(crate) fn stamped(
        &self,
        now_ms: u64,
        family_ttl_ms: &dyn Fn(u32) -> Option<u64>,
        any_family_ttl: bool,
    ) -> Result<Option<WriteBatch>> {
        if !self.relative_ttl && !any_family_ttl {
            return Ok(None);
        }
        let entries = decode(&self.buf).map_err(|_| Error::invalid("malformed write batch"))?;
        if !self.relative_ttl
            && !entries
                .iter()
                .any(|e| e.kind == Kind::Put && family_ttl_ms(e.cf).is_some())
        {
            return Ok(None);
        }
        let mut out = WriteBatch::new();
        let mut v = Vec::new();
        for e in &entries {
            let ttl = match e.kind {
                Kind::PutTtl => Some((expiry_of(e.value).unwrap_or(0), &e.value[EXPIRY_BYTES..])),
                Kind::Put => family_ttl_ms(e.cf).map(|t| (t, e.value)),
                _ => None,
            };
            match ttl {
                Some((ttl, value)) => {
                    v.clear();
                    v.extend_from_slice(&now_ms.saturating_add(ttl).to_le_bytes());
                    v.extend_from_slice(value);
                    out.push(Kind::PutTtl, e.cf, e.key, Some(&v));
                }
                None => {
                    let value = e.kind.carries_value().then_some(e.value);
                    out.push(e.kind, e.cf, e.key, value);
                }
            }
        }
        Ok(Some(out))
    }

    /// [`WriteBatch::delete`] in column family `cf`.
    pub fn delete_cf(&mut self, cf: &ColumnFamily, key: &[u8]) -> &mut Self {
        self.push(Kind::Delete, cf.id, key, None)
    }

    /// [`WriteBatch::single_delete`] in column family `cf`.
    pub fn single_delete_cf(&mut self, cf: &ColumnFamily, key: &[u8]) -> &mut Self {
        self.push(Kind::SingleDelete, cf.id, key, None)
    }

    /// Writes in the batch.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// Whether the batch holds no writes.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes of the encoded batch.
    pub fn encoded_bytes(&self) -> usize {
        self.buf.len()
    }

    /// Removes every write.
    pub fn clear(&mut self) {
        // `WriteBatch::default()` has no count bytes yet: this must not index them.
        self.buf.clear();
        self.buf.resize(4, 0);
        self.count = 0;
        self.relative_ttl = false;
        self.merges = false;
    }

    pub(crate) fn push(
        &mut self,
        kind: Kind,
        cf: u32,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> &mut Self {
        if self.buf.len() < 4 {
            self.buf.resize(4, 0);
        }
        self.merges |= kind == Kind::Merge;
        self.buf.push(kind as u8);
        self.buf.extend_from_slice(&cf.to_le_bytes());
        // Oversized keys and values are kept (lengths saturate) and rejected by `validate`
        // when the batch is written, so the builder methods stay infallible.
        self.buf
            .extend_from_slice(&u32::try_from(key.len()).unwrap_or(u32::MAX).to_le_bytes());
        self.buf.extend_from_slice(key);
        if let Some(v) = value {
            self.buf
                .extend_from_slice(&u32::try_from(v.len()).unwrap_or(u32::MAX).to_le_bytes());
            self.buf.extend_from_slice(v);
        }
        self.count += 1;
        self.buf[..4].copy_from_slice(&self.count.to_le_bytes());
        self
    }

    /// The batch's entries, decoded once for the whole write: the engine checks their sizes
    /// and column families and then applies these same entries after the log append.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for a key over [`MAX_KEY_BYTES`] or a value over
    /// [`MAX_VALUE_BYTES`] (nothing is written).
    pub(crate) fn entries(&self) -> Result<Vec<BatchEntry<'_>>> {
        let entries = decode(&self.buf).map_err(|_| Error::invalid("malformed write batch"))?;
        for e in &entries {
            if e.key.len() > MAX_KEY_BYTES {
                return Err(Error::invalid(format!(
                    "a key of {} bytes is over the limit of {MAX_KEY_BYTES} bytes",
                    e.key.len()
                )));
            }
            let user_len = e.value.len() - if e.kind.expires() { EXPIRY_BYTES } else { 0 };
            if user_len > MAX_VALUE_BYTES {
                return Err(Error::invalid(format!(
                    "a value of {user_len} bytes is over the limit of {MAX_VALUE_BYTES} bytes"
                )));
            }
        }
        Ok(entries)
    }

    pub(crate) fn payload(&self) -> &[u8] {
        &self.buf
    }
}

/// The tag of a transaction's part record (`docs/format/batch.md`).
pub(crate) const TAG_PART: u32 = 0xFFFF_FFF0;
/// The tag of the commit record that follows a transaction's parts.
pub(crate) const TAG_COMMIT: u32 = 0xFFFF_FFF1;
/// Bytes a part or commit record adds in front of its batch.
pub(crate) const TXN_HEADER_BYTES: usize = 16;

/// A decoded log record payload (`docs/format/batch.md`).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Record<'a> {
    /// A batch: applied at the record's LSN.
    Batch(Vec<BatchEntry<'a>>),
    /// Part `index` of transaction `txn`: applied only with its commit.
    Part {
        txn: u64,
        index: u32,
        entries: Vec<BatchEntry<'a>>,
    },
    /// The commit of transaction `txn`, after its `parts` parts: everything at this LSN.
    Commit {
        txn: u64,
        parts: u32,
        entries: Vec<BatchEntry<'a>>,
    },
}

/// A part or commit record: `tag`, `txn`, `n` (the part's index or the part count), then
/// `batch`'s payload.
pub(crate) fn encode_txn_record(tag: u32, txn: u64, n: u32, batch: &WriteBatch) -> Vec<u8> {
    debug_assert!(tag == TAG_PART || tag == TAG_COMMIT);
    let mut out = Vec::with_capacity(TXN_HEADER_BYTES + batch.buf.len());
    out.extend_from_slice(&tag.to_le_bytes());
    out.extend_from_slice(&txn.to_le_bytes());
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(&batch.buf);
    out
}

/// `entries` as batches of at most about `chunk_bytes` encoded bytes each (one entry alone
/// may be larger), in order.
pub(crate) fn split(entries: &[BatchEntry<'_>], chunk_bytes: usize) -> Vec<WriteBatch> {
    let mut out = Vec::new();
    let mut b = WriteBatch::new();
    for e in entries {
        let need = 13 + e.key.len() + e.value.len() + 4;
        if !b.is_empty() && b.encoded_bytes() + need > chunk_bytes {
            out.push(std::mem::take(&mut b));
            b = WriteBatch::new();
        }
        let value = e.kind.carries_value().then_some(e.value);
        b.push(e.kind, e.cf, e.key, value);
    }
    if !b.is_empty() || out.is_empty() {
        out.push(b);
    }
    out
}

/// Decodes any log record payload, checking every length.
pub(crate) fn decode_record(payload: &[u8]) -> Result<Record<'_>, BadBatch> {
    let mut p = payload;
    let tag = take_u32(&mut p)?;
    if tag != TAG_PART && tag != TAG_COMMIT {
        return decode(payload).map(Record::Batch);
    }
    let txn = u64::from_le_bytes(take(&mut p, 8)?.try_into().expect("8 bytes"));
    let n = take_u32(&mut p)?;
    let entries = decode(p)?;
    Ok(if tag == TAG_PART {
        Record::Part {
            txn,
            index: n,
            entries,
        }
    } else {
        Record::Commit {
            txn,
            parts: n,
            entries,
        }
    })
}

/// Why a payload did not decode.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct BadBatch(pub &'static str);

fn take<'a>(p: &mut &'a [u8], n: usize) -> Result<&'a [u8], BadBatch> {
    if p.len() < n {
        return Err(BadBatch("entry runs past the end of the batch"));
    }
    let (a, b) = p.split_at(n);
    *p = b;
    Ok(a)
}

fn take_u32(p: &mut &[u8]) -> Result<u32, BadBatch> {
    let b = take(p, 4)?;
    Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// Decodes a batch payload, checking every length.
pub(crate) fn decode(payload: &[u8]) -> Result<Vec<BatchEntry<'_>>, BadBatch> {
    let mut p = payload;
    let count = take_u32(&mut p)?;
    if count >= TAG_PART {
        return Err(BadBatch("a transaction record where a batch was expected"));
    }
    // Each entry takes at least 9 bytes: do not trust `count` for the allocation.
    let mut out = Vec::with_capacity((count as usize).min(p.len() / 9));
    for _ in 0..count {
        let kind = take(&mut p, 1)?[0];
        let kind = Kind::from_u8(kind)
            .filter(|k| !k.is_blob()) // pointers exist only in tables
            .ok_or(BadBatch("unknown entry kind"))?;
        let cf = take_u32(&mut p)?;
        let klen = take_u32(&mut p)? as usize;
        let key = take(&mut p, klen)?;
        let value = if kind.carries_value() {
            let vlen = take_u32(&mut p)? as usize;
            take(&mut p, vlen)?
        } else {
            &[]
        };
        if kind == Kind::PutTtl && value.len() < EXPIRY_BYTES {
            return Err(BadBatch("an expiring put without its expiry time"));
        }
        out.push(BatchEntry {
            kind,
            cf,
            key,
            value,
        });
    }
    if !p.is_empty() {
        return Err(BadBatch("bytes after the last entry"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_default_batch_clears_without_panicking() {
        let mut b = WriteBatch::default();
        b.clear();
        assert!(b.is_empty());
        b.put(b"k", b"v");
        assert_eq!(b.entries().unwrap().len(), 1);
    }

    #[test]
    fn stamping_turns_ttls_into_expiry_times_and_family_ttls_into_expiring_puts() {
        let mut b = WriteBatch::new();
        b.put(b"plain", b"p");
        b.put_with_ttl(b"own", b"o", Duration::from_millis(250));
        b.delete(b"gone");
        b.push(Kind::Put, 7, b"fam", Some(b"f"));
        let fam = |cf: u32| (cf == 7).then_some(1000u64);
        let s = b.stamped(10_000, &fam, true).unwrap().unwrap();
        let e = s.entries().unwrap();
        assert_eq!((e[0].kind, e[0].value), (Kind::Put, &b"p"[..]));
        assert_eq!(e[1].kind, Kind::PutTtl);
        assert_eq!(expiry_of(e[1].value), Some(10_250));
        assert_eq!(&e[1].value[EXPIRY_BYTES..], b"o");
        assert_eq!(e[2].kind, Kind::Delete);
        assert_eq!(expiry_of(e[3].value), Some(11_000));
        assert_eq!(&e[3].value[EXPIRY_BYTES..], b"f");
        // Nothing to stamp: no copy.
        let mut plain = WriteBatch::new();
        plain.put(b"a", b"b");
        assert!(plain.stamped(1, &fam, true).unwrap().is_none());
        assert!(plain.stamped(1, &|_| None, false).unwrap().is_none());
        // A stamped put decodes from the log; a short one does not.
        assert!(decode(s.payload()).is_ok());
        let mut bad = WriteBatch::new();
        bad.push(Kind::PutTtl, 0, b"k", Some(b"1234567"));
        assert!(decode(bad.payload()).is_err());
    }

    #[test]
    fn round_trip() {
        let mut b = WriteBatch::new();
        b.put(b"k", b"v").delete(b"d").single_delete(b"s");
        let e = decode(b.payload()).unwrap();
        assert_eq!(e.len(), 3);
        assert_eq!(
            (e[0].kind, e[0].key, e[0].value),
            (Kind::Put, &b"k"[..], &b"v"[..])
        );
        assert_eq!(e[1].kind, Kind::Delete);
        assert_eq!(e[2].kind, Kind::SingleDelete);
        b.clear();
        assert!(b.is_empty());
        assert_eq!(decode(b.payload()).unwrap(), vec![]);
    }

    #[test]
    fn transaction_records_round_trip_and_are_told_from_batches() {
        let mut b = WriteBatch::new();
        b.put(b"a", b"1").delete(b"b");
        assert_eq!(
            decode_record(b.payload()).unwrap(),
            Record::Batch(decode(b.payload()).unwrap())
        );
        let part = encode_txn_record(TAG_PART, 7, 2, &b);
        match decode_record(&part).unwrap() {
            Record::Part {
                txn,
                index,
                entries,
            } => {
                assert_eq!((txn, index, entries.len()), (7, 2, 2));
            }
            other => panic!("{other:?}"),
        }
        let commit = encode_txn_record(TAG_COMMIT, 7, 3, &WriteBatch::new());
        assert_eq!(
            decode_record(&commit).unwrap(),
            Record::Commit {
                txn: 7,
                parts: 3,
                entries: vec![]
            }
        );
        // A part is never taken for a batch, and a cut header is an error.
        assert!(decode(&part).is_err());
        for cut in 0..TXN_HEADER_BYTES + 4 {
            assert!(decode_record(&part[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn oversized_key_is_invalid_argument() {
        let mut b = WriteBatch::new();
        b.put(&vec![0; MAX_KEY_BYTES + 1], b"");
        assert!(matches!(b.entries(), Err(Error::InvalidArgument(_))));
    }

    proptest! {
        #[test]
        fn truncations_and_flips_never_panic(
            keys in proptest::collection::vec((any::<Vec<u8>>(), any::<Vec<u8>>()), 0..8),
            cut in any::<usize>(), flip in any::<(usize, u8)>())
        {
            let mut b = WriteBatch::new();
            for (k, v) in &keys { b.put(k, v); }
            let p = b.payload().to_vec();
            prop_assert_eq!(decode(&p).unwrap().len(), keys.len());
            let _ = decode(&p[..cut % (p.len() + 1)]);
            let mut q = p.clone();
            let i = flip.0 % q.len();
            q[i] ^= flip.1;
            let _ = decode(&q);
        }
    }
}
