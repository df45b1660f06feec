//! Internal keys: how a user key, a sequence number and an operation kind are laid out and
//! ordered everywhere below the public API (memtable, tables, compaction).
//!
//! ```text
//! internal key = user key (0..=64 KiB) ++ trailer (8 bytes)
//! trailer      = big-endian u64 of !(seqno << 8 | kind)
//! ```
//!
//! Order: user key ascending (bytewise), then seqno descending, then kind descending. The
//! trailer is stored inverted so that comparing trailers bytewise gives that order, but
//! whole internal keys must be compared with [`cmp_internal`]: a user key that is a prefix
//! of another must sort first whatever its trailer holds.
//!
//! The seqno of every entry of a batch is the LSN of the batch's log record (see
//! `docs/design.md`), so seqnos are unique per batch, increase in log order, and are below
//! 2^56.
//!
//! DO NOT CHANGE the [`Kind`] values: they are stored in tables and in the log.

use std::cmp::Ordering;

/// A sequence number: the LSN of the batch an entry came from.
pub type Seqno = u64;

/// The largest seqno that fits in a trailer.
pub const MAX_SEQNO: Seqno = (1 << 56) - 1;

/// Bytes of the trailer that follows the user key.
pub const TRAILER_BYTES: usize = 8;

/// The longest user key.
pub const MAX_KEY_BYTES: usize = 64 * 1024;

/// What an entry does to its key. Stored on disk: the values are fixed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Kind {
    /// A tombstone: the key has no value from this seqno on.
    Delete = 0,
    /// A value.
    Put = 1,
    /// A tombstone that cancels exactly one older `Put` in compaction (seed 002's single
    /// delete); both disappear when they meet.
    SingleDelete = 2,
    /// A value stored in a blob file; the entry's value is a pointer to it
    /// (`docs/format/vlog.md`). Only in tables, never in the log or the memtable.
    Blob = 3,
    /// A value that expires: the entry's value is the expiry time ([`EXPIRY_BYTES`],
    /// milliseconds since the Unix epoch, little-endian) followed by the user's value. From
    /// its expiry on, it reads as a `Delete` (see [`Expiry`]).
    PutTtl = 4,
    /// A `PutTtl` whose value is in a blob file: the entry's value is the expiry time
    /// followed by a blob pointer. Only in tables.
    BlobTtl = 5,
    /// A merge operand: folded by the column family's merge operator onto the value below
    /// it (`merge_op.rs`). Neither a value nor a tombstone: it hides nothing.
    Merge = 6,
}

/// Bytes of the expiry time in front of a `PutTtl` or `BlobTtl` entry's value.
pub const EXPIRY_BYTES: usize = 8;

/// The kind used in seek keys: sorts before every real kind of the same seqno.
pub const KIND_SEEK: u8 = 0xFF;

impl Kind {
    /// Decodes a stored kind byte.
    pub fn from_u8(b: u8) -> Option<Kind> {
        match b {
            0 => Some(Kind::Delete),
            1 => Some(Kind::Put),
            2 => Some(Kind::SingleDelete),
            3 => Some(Kind::Blob),
            4 => Some(Kind::PutTtl),
            5 => Some(Kind::BlobTtl),
            6 => Some(Kind::Merge),
            _ => None,
        }
    }

    /// Whether the entry hides older values of its key.
    pub fn is_tombstone(self) -> bool {
        matches!(self, Kind::Delete | Kind::SingleDelete)
    }

    /// Whether the entry gives its key a value (inline or in a blob file), at least until
    /// it expires.
    pub fn is_value(self) -> bool {
        matches!(self, Kind::Put | Kind::Blob | Kind::PutTtl | Kind::BlobTtl)
    }

    /// Whether the entry carries bytes (a value, a pointer or a merge operand) where a
    /// tombstone carries none.
    pub fn carries_value(self) -> bool {
        self.is_value() || self == Kind::Merge
    }

    /// Whether the entry's value is a pointer into a blob file (after the expiry, for
    /// `BlobTtl`).
    pub fn is_blob(self) -> bool {
        matches!(self, Kind::Blob | Kind::BlobTtl)
    }

    /// Whether the entry's value starts with an expiry time.
    pub fn expires(self) -> bool {
        matches!(self, Kind::PutTtl | Kind::BlobTtl)
    }
}

/// What an entry that gives its key a value says once its expiry is known: the read of
/// every value kind goes through [`Expiry::of`], so an expired entry reads as a delete
/// everywhere (point reads, iterators, compaction) and the expiry never reaches the user.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expiry<'a> {
    /// Live: the user's value (or blob pointer, for the blob kinds), expiry stripped.
    Live(&'a [u8]),
    /// Expired at or before `now`: the key reads as deleted from this entry down.
    Expired,
}

impl<'a> Expiry<'a> {
    /// The entry of `kind` (a value kind) with stored value `value`, as of `now_ms()`
    /// (called only for an expiring kind). `None` if an expiring kind's value is too short
    /// to hold its expiry (damage).
    #[inline]
    pub fn of(kind: Kind, value: &'a [u8], now_ms: impl FnOnce() -> u64) -> Option<Expiry<'a>> {
        if !kind.expires() {
            return Some(Expiry::Live(value));
        }
        let at = expiry_of(value)?;
        Some(if at <= now_ms() {
            Expiry::Expired
        } else {
            Expiry::Live(&value[EXPIRY_BYTES..])
        })
    }
}

/// The expiry time in front of an expiring entry's value; `None` if it is too short.
#[inline]
pub fn expiry_of(value: &[u8]) -> Option<u64> {
    let b: [u8; EXPIRY_BYTES] = value.get(..EXPIRY_BYTES)?.try_into().ok()?;
    Some(u64::from_le_bytes(b))
}

/// Packs a seqno and a kind byte into a trailer.
#[inline]
pub fn trailer(seqno: Seqno, kind: u8) -> [u8; TRAILER_BYTES] {
    debug_assert!(seqno <= MAX_SEQNO);
    (!((seqno << 8) | kind as u64)).to_be_bytes()
}

/// Builds an internal key.
pub fn make_internal(user_key: &[u8], seqno: Seqno, kind: Kind) -> Vec<u8> {
    let mut k = Vec::with_capacity(user_key.len() + TRAILER_BYTES);
    k.extend_from_slice(user_key);
    k.extend_from_slice(&trailer(seqno, kind as u8));
    k
}

/// The internal key that sorts first among the entries of `user_key` visible at `snapshot`
/// (those with `seqno < snapshot`). `snapshot` must be at least 1.
pub fn seek_key(user_key: &[u8], snapshot: Seqno) -> Vec<u8> {
    let mut k = Vec::with_capacity(user_key.len() + TRAILER_BYTES);
    k.extend_from_slice(user_key);
    k.extend_from_slice(&seek_trailer(snapshot));
    k
}

/// The trailer of a seek key at `snapshot`: it sorts before every entry with a seqno below
/// `snapshot` and after every newer one.
fn seek_trailer(snapshot: Seqno) -> [u8; TRAILER_BYTES] {
    trailer(snapshot.saturating_sub(1).min(MAX_SEQNO), KIND_SEEK)
}

/// A point read's search key, built once per read and used by every memtable and table the
/// read visits (LevelDB's `LookupKey`): `cf` (4 bytes, big-endian) ++ the
/// seek key of `user_key` at `snapshot` (user key ++ [`seek_trailer`]). The memtable, whose keys carry the column
/// family in front, seeks with all of it; a table (one column family) with the internal key
/// after the first four bytes. Built by hand rather than from `seek_key`, to allocate once.
pub struct LookupKey {
    /// Inline for keys up to 52 bytes, as LevelDB's `LookupKey` keeps a short key on the
    /// stack: every point read builds one.
    buf: smallvec::SmallVec<[u8; 64]>,
    snapshot: Seqno,
}

impl LookupKey {
    /// The search key of `user_key` in column family `cf` as of `snapshot` (at least 1).
    pub fn new(cf: u32, user_key: &[u8], snapshot: Seqno) -> LookupKey {
        let mut buf = smallvec::SmallVec::with_capacity(4 + user_key.len() + TRAILER_BYTES);
        buf.extend_from_slice(&cf.to_be_bytes());
        buf.extend_from_slice(user_key);
        buf.extend_from_slice(&seek_trailer(snapshot));
        LookupKey { buf, snapshot }
    }

    /// Column family ++ internal key: the memtable's search key.
    pub fn memtable_key(&self) -> &[u8] {
        &self.buf
    }

    /// The internal key: a table's search key.
    pub fn internal_key(&self) -> &[u8] {
        &self.buf[4..]
    }

    /// The user key.
    pub fn user_key(&self) -> &[u8] {
        &self.buf[4..self.buf.len() - TRAILER_BYTES]
    }

    /// The column family.
    pub fn cf(&self) -> u32 {
        u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]])
    }

    /// The read's seqno: entries with a smaller seqno are visible.
    pub fn snapshot(&self) -> Seqno {
        self.snapshot
    }
}

/// A decoded view of an internal key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParsedKey<'a> {
    /// The user's key.
    pub user_key: &'a [u8],
    /// The seqno of the batch that wrote it.
    pub seqno: Seqno,
    /// What it does.
    pub kind: Kind,
}

/// Splits and checks an internal key; `None` if it is too short or its kind is unknown.
pub fn parse(ikey: &[u8]) -> Option<ParsedKey<'_>> {
    if ikey.len() < TRAILER_BYTES {
        return None;
    }
    let (user_key, t) = ikey.split_at(ikey.len() - TRAILER_BYTES);
    let packed = !u64::from_be_bytes(t.try_into().ok()?);
    Some(ParsedKey {
        user_key,
        seqno: packed >> 8,
        kind: Kind::from_u8((packed & 0xFF) as u8)?,
    })
}

/// The user key of an internal key. REQUIRES: `ikey.len() >= TRAILER_BYTES`.
#[inline]
pub fn user_key(ikey: &[u8]) -> &[u8] {
    &ikey[..ikey.len() - TRAILER_BYTES]
}

/// The seqno of an internal key. REQUIRES: `ikey.len() >= TRAILER_BYTES`.
#[inline]
#[cfg(any(test, feature = "fuzzing"))]
pub fn seqno(ikey: &[u8]) -> Seqno {
    let t: [u8; 8] = ikey[ikey.len() - TRAILER_BYTES..]
        .try_into()
        .unwrap_or([0xFF; 8]);
    (!u64::from_be_bytes(t)) >> 8
}

/// Compares two internal keys: user key ascending, then seqno and kind descending.
/// Keys shorter than a trailer (never produced by the engine) sort by their bytes.
#[inline]
pub fn cmp_internal(a: &[u8], b: &[u8]) -> Ordering {
    if a.len() < TRAILER_BYTES || b.len() < TRAILER_BYTES {
        return a.cmp(b);
    }
    let (ua, ta) = a.split_at(a.len() - TRAILER_BYTES);
    let (ub, tb) = b.split_at(b.len() - TRAILER_BYTES);
    ua.cmp(ub).then_with(|| ta.cmp(tb))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_is_read_from_the_value_and_hides_it_from_then_on() {
        let mut v = 1000u64.to_le_bytes().to_vec();
        v.extend_from_slice(b"value");
        assert_eq!(
            Expiry::of(Kind::PutTtl, &v, || 999),
            Some(Expiry::Live(&b"value"[..]))
        );
        assert_eq!(Expiry::of(Kind::PutTtl, &v, || 1000), Some(Expiry::Expired));
        assert_eq!(
            Expiry::of(Kind::BlobTtl, &v, || 5000),
            Some(Expiry::Expired)
        );
        let never = || -> u64 { panic!("a plain put needs no clock") };
        assert_eq!(Expiry::of(Kind::Put, &v, never), Some(Expiry::Live(&v[..])));
        assert_eq!(Expiry::of(Kind::PutTtl, b"short", || 0), None);
        for k in [Kind::PutTtl, Kind::BlobTtl] {
            assert_eq!(Kind::from_u8(k as u8), Some(k));
            assert!(k.is_value() && k.expires() && !k.is_tombstone());
        }
        assert!(Kind::BlobTtl.is_blob() && Kind::Blob.is_blob() && !Kind::PutTtl.is_blob());
    }

    #[test]
    fn order_is_user_key_then_newest_first() {
        let a1 = make_internal(b"a", 1, Kind::Put);
        let a9 = make_internal(b"a", 9, Kind::Put);
        let ab = make_internal(b"ab", 100, Kind::Delete);
        let b0 = make_internal(b"b", 0, Kind::Put);
        let mut v = vec![b0.clone(), a1.clone(), ab.clone(), a9.clone()];
        v.sort_by(|x, y| cmp_internal(x, y));
        assert_eq!(v, vec![a9, a1, ab, b0]);
    }

    #[test]
    fn seek_key_sorts_before_visible_entries_only() {
        let k5 = make_internal(b"k", 5, Kind::Put);
        let k6 = make_internal(b"k", 6, Kind::Put);
        let s = seek_key(b"k", 6); // sees seqno < 6
        assert_eq!(cmp_internal(&s, &k6), Ordering::Greater);
        assert_eq!(cmp_internal(&s, &k5), Ordering::Less);
    }

    #[test]
    fn parse_round_trips_and_rejects_garbage() {
        let k = make_internal(b"key", MAX_SEQNO, Kind::SingleDelete);
        let lk = LookupKey::new(7, b"key", 10);
        assert_eq!(lk.cf(), 7);
        assert_eq!(lk.user_key(), b"key");
        assert_eq!(lk.internal_key(), &seek_key(b"key", 10)[..]);
        assert_eq!(&lk.memtable_key()[4..], lk.internal_key());
        let p = parse(&k).unwrap();
        assert_eq!(p.user_key, b"key");
        assert_eq!(p.seqno, MAX_SEQNO);
        assert_eq!(p.kind, Kind::SingleDelete);
        assert_eq!(seqno(&k), MAX_SEQNO);
        assert!(parse(b"short").is_none());
        let mut bad = k.clone();
        let n = bad.len();
        bad[n - 1] = !7; // kind byte 7 (inverted on disk)
        assert!(parse(&bad).is_none());
        bad[n - 1] = !6;
        assert_eq!(parse(&bad).map(|p| p.kind), Some(Kind::Merge));
    }
}
