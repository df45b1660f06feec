//! Version edits: what one manifest record says, how its payload is encoded, and the
//! [`ManifestState`] that replaying edits builds. The byte layout is specified in
//! `docs/format/manifest.md` ("Edits"); keep the two in step.
//!
//! ## Invariants of a [`ManifestState`] (checked by [`Applier`] before any edit is written,
//! and again when a manifest is replayed)
//!
//! 1. Column family ids are never reused: every id is below `next_cf_id`, and a new one must
//!    be at least `next_cf_id`. Id 0 ("default") exists and cannot be dropped.
//! 2. Live column family names are unique, 1 to [`MAX_CF_NAME_BYTES`] bytes.
//! 3. A table id appears at most once in the whole state, and is below `next_table_id`.
//! 4. Level 0 is ordered newest first (largest seqno descending, then id descending);
//!    levels 1.. are ordered by smallest key ([`key::cmp_internal`]) and their tables'
//!    user-key ranges are disjoint.
//! 5. Blob files: a blob id is unique among blob files and below `next_table_id`; a table
//!    references only blob files in the state, each once, for at most its value bytes; a
//!    blob file no table references leaves the state at the end of the record.
//! 6. `log_start` never decreases. `next_table_id` and `next_cf_id` are high-water marks:
//!    an edit that names a lower value leaves them where they are.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};

use crate::key::{self, cmp_internal, TRAILER_BYTES};
use crate::table_meta::{BlobMeta, BlobRef, TableMeta};

use super::{CfState, ManifestState};

/// Levels per column family: 0 (newest, overlapping tables) to 6.
pub(crate) const LEVELS: usize = 7;

/// The longest column family name, in bytes (the engine's own limit on names).
pub(crate) const MAX_CF_NAME_BYTES: usize = 255;

/// The id of the column family every database has.
pub(crate) const DEFAULT_CF_ID: u32 = 0;

/// Its name.
pub(crate) const DEFAULT_CF_NAME: &str = crate::cf::DEFAULT_CF;

/// The longest internal key a table boundary can hold.
const MAX_IKEY_BYTES: usize = key::MAX_KEY_BYTES + TRAILER_BYTES;

// Edit tags. DO NOT CHANGE THESE VALUES: they are stored in manifest files. Tag 0 is
// never valid, so a run of zero bytes cannot decode as an edit.
const TAG_CREATE_CF: u8 = 1;
const TAG_DROP_CF: u8 = 2;
const TAG_ADD_TABLE: u8 = 3;
const TAG_REMOVE_TABLE: u8 = 4;
const TAG_LOG_START: u8 = 5;
const TAG_NEXT_TABLE_ID: u8 = 6;
const TAG_NEXT_CF_ID: u8 = 7;
const TAG_ADD_BLOB: u8 = 8;
const TAG_ADD_TABLE_WITH_BLOBS: u8 = 9;
const TAG_ADD_LOG_BLOB: u8 = 10;

/// The most blob files one table may reference (bounds a decoder's allocation).
const MAX_TABLE_BLOB_REFS: u32 = 1 << 20;

/// One change to the [`ManifestState`]. A manifest record holds one or more edits, applied
/// in order and all or none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Edit {
    /// A new column family; `id` must be at least `next_cf_id` (which becomes `id + 1`).
    CreateCf {
        /// Its id, never reused.
        id: u32,
        /// Its name, unique among live column families.
        name: String,
    },
    /// Removes a column family and all its tables (not the default one).
    DropCf {
        /// The column family.
        id: u32,
    },
    /// Adds a table to a level. Raises `next_table_id` above `meta.id`.
    AddTable {
        /// The column family.
        cf: u32,
        /// The level, below [`LEVELS`].
        level: u8,
        /// The table.
        meta: TableMeta,
    },
    /// Removes a table that is in this level of this column family.
    RemoveTable {
        /// The column family.
        cf: u32,
        /// The level the table is in.
        level: u8,
        /// The table's id.
        id: u64,
    },
    /// WAL records below this LSN are fully in tables. Must not decrease.
    LogStart(u64),
    /// Table ids below this are taken (a high-water mark: a lower value is ignored).
    NextTableId(u64),
    /// Column family ids below this are taken (a high-water mark, like `NextTableId`).
    /// Written in snapshots, so that the id of a dropped column family is never reused.
    NextCfId(u32),
    /// A blob file joins the state; tables that point into it follow in the same record.
    /// Raises `next_table_id` above its id (blob ids come from the table-id space). A
    /// `BlobMeta` with a log span is a log blob, written with its own tag
    /// (`docs/format/vlog.md`, "Log blobs").
    AddBlob(BlobMeta),
}

/// Applies edits to a state, checking each against the state it meets. An edit that fails
/// a check returns the reason and leaves the applier in an unspecified state: callers apply
/// to a copy and keep it only if every edit (and [`Applier::finish_record`]) passed.
pub(crate) struct Applier {
    state: ManifestState,
    /// Every table id in `state`, for the uniqueness check.
    live: HashSet<u64>,
    /// Levels (>= 1) that gained a table in the current record: their order and
    /// disjointness are checked once the whole record is applied, since a compaction removes
    /// and adds overlapping tables in one record.
    touched: Vec<(u32, usize)>,
    /// Per blob file in `state`, the tables referencing it.
    blob_users: HashMap<u64, u64>,
}

impl Applier {
    pub(crate) fn new(state: ManifestState) -> Applier {
        let live = state.table_ids().collect();
        let mut blob_users: HashMap<u64, u64> = state.blobs.keys().map(|id| (*id, 0)).collect();
        for t in state.cfs.values().flat_map(|c| c.levels.iter().flatten()) {
            for r in &t.blobs {
                *blob_users.entry(r.id).or_default() += 1;
            }
        }
        Applier {
            state,
            live,
            touched: Vec::new(),
            blob_users,
        }
    }

    pub(crate) fn state(&self) -> &ManifestState {
        &self.state
    }

    pub(crate) fn into_state(self) -> ManifestState {
        self.state
    }

    /// Checks `edit` against the current state and applies it; the reason if it does not fit.
    pub(crate) fn apply(&mut self, edit: &Edit) -> Result<(), String> {
        let st = &mut self.state;
        match edit {
            Edit::CreateCf { id, name } => {
                if st.cfs.contains_key(id) {
                    return Err(format!("column family {id} exists"));
                }
                if *id < st.next_cf_id {
                    return Err(format!(
                        "column family id {id} is below next_cf_id {} (ids are never reused)",
                        st.next_cf_id
                    ));
                }
                let next = id
                    .checked_add(1)
                    .ok_or_else(|| format!("column family id {id} is out of range"))?;
                check_cf_name(name)?;
                if st.cfs.values().any(|c| c.name == *name) {
                    return Err(format!("a column family named {name:?} exists"));
                }
                st.cfs.insert(*id, CfState::new(*id, name.clone()));
                st.next_cf_id = next;
            }
            Edit::DropCf { id } => {
                if *id == DEFAULT_CF_ID {
                    return Err("the default column family cannot be dropped".into());
                }
                let cf = st
                    .cfs
                    .remove(id)
                    .ok_or_else(|| format!("no column family {id} to drop"))?;
                for t in cf.levels.iter().flatten() {
                    self.live.remove(&t.id);
                    unref_blobs(&mut self.blob_users, &t.blobs);
                }
            }
            Edit::AddTable { cf, level, meta } => {
                let l = check_level(*level)?;
                check_meta(meta)?;
                let cfs = st
                    .cfs
                    .get_mut(cf)
                    .ok_or_else(|| format!("table {}: no column family {cf}", meta.id))?;
                let next = meta
                    .id
                    .checked_add(1)
                    .ok_or_else(|| format!("table id {} is out of range", meta.id))?;
                check_blob_refs(meta, &st.blobs)?;
                if !self.live.insert(meta.id) {
                    return Err(format!("table {} is already in the manifest", meta.id));
                }
                for r in &meta.blobs {
                    *self.blob_users.entry(r.id).or_default() += 1;
                }
                let tables = &mut cfs.levels[l];
                let at = tables.partition_point(|t| level_order(l, t, meta) == Ordering::Less);
                tables.insert(at, meta.clone());
                st.next_table_id = st.next_table_id.max(next);
                if l > 0 {
                    self.touched.push((*cf, l));
                }
            }
            Edit::RemoveTable { cf, level, id } => {
                let l = check_level(*level)?;
                let cfs = st
                    .cfs
                    .get_mut(cf)
                    .ok_or_else(|| format!("table {id}: no column family {cf}"))?;
                let tables = &mut cfs.levels[l];
                let at = tables.iter().position(|t| t.id == *id).ok_or_else(|| {
                    format!("table {id} is not in level {l} of column family {cf}")
                })?;
                let t = tables.remove(at);
                self.live.remove(id);
                unref_blobs(&mut self.blob_users, &t.blobs);
            }
            Edit::LogStart(lsn) => {
                if *lsn < st.log_start {
                    return Err(format!(
                        "log_start would move back from {} to {lsn}",
                        st.log_start
                    ));
                }
                st.log_start = *lsn;
            }
            Edit::NextTableId(n) => st.next_table_id = st.next_table_id.max(*n),
            Edit::NextCfId(n) => st.next_cf_id = st.next_cf_id.max(*n),
            Edit::AddBlob(b) => {
                if st.blobs.contains_key(&b.id) {
                    return Err(format!("blob file {} is already in the manifest", b.id));
                }
                let next =
                    b.id.checked_add(1)
                        .ok_or_else(|| format!("blob id {} is out of range", b.id))?;
                if b.value_bytes > b.size_bytes {
                    return Err(format!(
                        "blob file {}: more value bytes than file bytes",
                        b.id
                    ));
                }
                if let Some(l) = b.log {
                    if l.from < 64 || l.from >= l.to || l.to > b.size_bytes {
                        return Err(format!(
                            "log blob {}: span {}..{} is not inside its segment of {} bytes",
                            b.id, l.from, l.to, b.size_bytes
                        ));
                    }
                    if b.value_bytes != l.to - l.from {
                        return Err(format!(
                            "log blob {}: {} value bytes, but a span of {}",
                            b.id,
                            b.value_bytes,
                            l.to - l.from
                        ));
                    }
                }
                st.blobs.insert(b.id, b.clone());
                st.next_table_id = st.next_table_id.max(next);
                self.blob_users.insert(b.id, 0);
            }
        }
        Ok(())
    }

    /// Checks what only holds for a whole record: the levels >= 1 that gained tables are
    /// disjoint. Call after the last edit of each record.
    pub(crate) fn finish_record(&mut self) -> Result<(), String> {
        // Blob files no table points into any more are garbage from this record on.
        let st = &mut self.state;
        self.blob_users.retain(|id, users| {
            if *users == 0 {
                st.blobs.remove(id);
            }
            *users > 0
        });
        self.touched.sort_unstable();
        self.touched.dedup();
        for (cf, l) in self.touched.drain(..) {
            // The column family may have been dropped later in the same record.
            let Some(c) = self.state.cfs.get(&cf) else {
                continue;
            };
            for pair in c.levels[l].windows(2) {
                let (a, b) = (&pair[0], &pair[1]);
                if key::user_key(&a.largest) >= key::user_key(&b.smallest) {
                    return Err(format!(
                        "tables {} and {} overlap in level {l} of column family {cf}",
                        a.id, b.id
                    ));
                }
            }
        }
        Ok(())
    }
}

fn check_level(level: u8) -> Result<usize, String> {
    let l = usize::from(level);
    if l < LEVELS {
        Ok(l)
    } else {
        Err(format!("level {level} is not below {LEVELS}"))
    }
}

fn check_cf_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_CF_NAME_BYTES {
        return Err(format!(
            "a column family name has 1 to {MAX_CF_NAME_BYTES} bytes, not {}",
            name.len()
        ));
    }
    Ok(())
}

/// A table's blob references: ascending ids, each a blob file of `blobs`, for at most its
/// value bytes.
fn check_blob_refs(
    m: &TableMeta,
    blobs: &std::collections::BTreeMap<u64, BlobMeta>,
) -> Result<(), String> {
    for (i, r) in m.blobs.iter().enumerate() {
        if i > 0 && m.blobs[i - 1].id >= r.id {
            return Err(format!(
                "table {}: blob references are not in ascending id order",
                m.id
            ));
        }
        let b = blobs.get(&r.id).ok_or_else(|| {
            format!(
                "table {} points into blob file {}, which is not in the manifest",
                m.id, r.id
            )
        })?;
        if r.bytes > b.value_bytes {
            return Err(format!(
                "table {} points at {} bytes of blob file {}, which holds {}",
                m.id, r.bytes, r.id, b.value_bytes
            ));
        }
    }
    Ok(())
}

fn unref_blobs(users: &mut HashMap<u64, u64>, refs: &[BlobRef]) {
    for r in refs {
        if let Some(n) = users.get_mut(&r.id) {
            *n = n.saturating_sub(1);
        }
    }
}

/// What must hold of any table's description.
fn check_meta(m: &TableMeta) -> Result<(), String> {
    let id = m.id;
    for (what, k) in [("smallest", &m.smallest), ("largest", &m.largest)] {
        if k.len() < TRAILER_BYTES || k.len() > MAX_IKEY_BYTES {
            return Err(format!(
                "table {id}: {what} key has {} bytes, not {TRAILER_BYTES}..={MAX_IKEY_BYTES}",
                k.len()
            ));
        }
    }
    if cmp_internal(&m.smallest, &m.largest) == Ordering::Greater {
        return Err(format!("table {id}: smallest key is above largest key"));
    }
    if m.smallest_seqno > m.largest_seqno {
        return Err(format!("table {id}: smallest seqno is above largest seqno"));
    }
    if m.tombstones > m.entries {
        return Err(format!("table {id}: more tombstones than entries"));
    }
    Ok(())
}

/// The order of tables inside level `l` (invariant 4); ties broken by id so it is total.
fn level_order(l: usize, a: &TableMeta, b: &TableMeta) -> Ordering {
    if l == 0 {
        b.largest_seqno
            .cmp(&a.largest_seqno)
            .then_with(|| b.id.cmp(&a.id))
    } else {
        cmp_internal(&a.smallest, &b.smallest).then_with(|| a.id.cmp(&b.id))
    }
}

// ---- encoding ---------------------------------------------------------------------------

/// Appends the payload of a record holding `edits` to `out`.
pub(crate) fn encode(edits: &[Edit], out: &mut Vec<u8>) {
    for e in edits {
        match e {
            Edit::CreateCf { id, name } => {
                out.push(TAG_CREATE_CF);
                out.extend_from_slice(&id.to_le_bytes());
                put_bytes(out, name.as_bytes());
            }
            Edit::DropCf { id } => {
                out.push(TAG_DROP_CF);
                out.extend_from_slice(&id.to_le_bytes());
            }
            Edit::AddTable { cf, level, meta } => {
                out.push(if meta.blobs.is_empty() {
                    TAG_ADD_TABLE
                } else {
                    TAG_ADD_TABLE_WITH_BLOBS
                });
                out.extend_from_slice(&cf.to_le_bytes());
                out.push(*level);
                for n in [
                    meta.id,
                    meta.size_bytes,
                    meta.entries,
                    meta.tombstones,
                    meta.smallest_seqno,
                    meta.largest_seqno,
                ] {
                    out.extend_from_slice(&n.to_le_bytes());
                }
                put_bytes(out, &meta.smallest);
                put_bytes(out, &meta.largest);
                if !meta.blobs.is_empty() {
                    out.extend_from_slice(&(meta.blobs.len() as u32).to_le_bytes());
                    for r in &meta.blobs {
                        out.extend_from_slice(&r.id.to_le_bytes());
                        out.extend_from_slice(&r.bytes.to_le_bytes());
                    }
                }
            }
            Edit::AddBlob(b) => {
                out.push(if b.log.is_some() {
                    TAG_ADD_LOG_BLOB
                } else {
                    TAG_ADD_BLOB
                });
                for n in [b.id, b.size_bytes, b.records, b.value_bytes] {
                    out.extend_from_slice(&n.to_le_bytes());
                }
                if let Some(l) = b.log {
                    for n in [l.segment, l.from, l.to] {
                        out.extend_from_slice(&n.to_le_bytes());
                    }
                }
            }
            Edit::RemoveTable { cf, level, id } => {
                out.push(TAG_REMOVE_TABLE);
                out.extend_from_slice(&cf.to_le_bytes());
                out.push(*level);
                out.extend_from_slice(&id.to_le_bytes());
            }
            Edit::LogStart(n) => {
                out.push(TAG_LOG_START);
                out.extend_from_slice(&n.to_le_bytes());
            }
            Edit::NextTableId(n) => {
                out.push(TAG_NEXT_TABLE_ID);
                out.extend_from_slice(&n.to_le_bytes());
            }
            Edit::NextCfId(n) => {
                out.push(TAG_NEXT_CF_ID);
                out.extend_from_slice(&n.to_le_bytes());
            }
        }
    }
}

/// A length-prefixed byte string. Every caller's bytes are bounded far below `u32::MAX`
/// (names by [`MAX_CF_NAME_BYTES`], keys by [`MAX_IKEY_BYTES`], both checked before a
/// record is written).
fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    debug_assert!(b.len() <= MAX_IKEY_BYTES);
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

/// Decodes a record payload: one or more edits filling it exactly. The error says what is
/// wrong and at which offset of the payload.
pub(crate) fn decode(payload: &[u8]) -> Result<Vec<Edit>, String> {
    let mut r = Reader {
        buf: payload,
        pos: 0,
    };
    let mut edits = Vec::new();
    while r.pos < payload.len() {
        let at = r.pos;
        let tag = r.u8()?;
        let edit = match tag {
            TAG_CREATE_CF => {
                let id = r.u32()?;
                let name = r.bytes(MAX_CF_NAME_BYTES, "column family name")?;
                let name = String::from_utf8(name.to_vec()).map_err(|_| {
                    format!("column family name at payload offset {at} is not UTF-8")
                })?;
                Edit::CreateCf { id, name }
            }
            TAG_DROP_CF => Edit::DropCf { id: r.u32()? },
            TAG_ADD_TABLE | TAG_ADD_TABLE_WITH_BLOBS => {
                let cf = r.u32()?;
                let level = r.u8()?;
                let id = r.u64()?;
                let size_bytes = r.u64()?;
                let entries = r.u64()?;
                let tombstones = r.u64()?;
                let smallest_seqno = r.u64()?;
                let largest_seqno = r.u64()?;
                let smallest = r.bytes(MAX_IKEY_BYTES, "smallest key")?.to_vec();
                let largest = r.bytes(MAX_IKEY_BYTES, "largest key")?.to_vec();
                let mut blobs = Vec::new();
                if tag == TAG_ADD_TABLE_WITH_BLOBS {
                    let n = r.u32()?;
                    if n == 0 || n > MAX_TABLE_BLOB_REFS {
                        return Err(format!(
                            "table {id} at payload offset {at} has {n} blob references, not 1..={MAX_TABLE_BLOB_REFS}"
                        ));
                    }
                    for _ in 0..n {
                        blobs.push(BlobRef {
                            id: r.u64()?,
                            bytes: r.u64()?,
                        });
                    }
                }
                Edit::AddTable {
                    cf,
                    level,
                    meta: TableMeta {
                        id,
                        size_bytes,
                        entries,
                        tombstones,
                        smallest,
                        largest,
                        smallest_seqno,
                        largest_seqno,
                        blobs,
                    },
                }
            }
            TAG_ADD_BLOB | TAG_ADD_LOG_BLOB => Edit::AddBlob(BlobMeta {
                id: r.u64()?,
                size_bytes: r.u64()?,
                records: r.u64()?,
                value_bytes: r.u64()?,
                log: if tag == TAG_ADD_LOG_BLOB {
                    Some(crate::table_meta::LogSpan {
                        segment: r.u64()?,
                        from: r.u64()?,
                        to: r.u64()?,
                    })
                } else {
                    None
                },
            }),
            TAG_REMOVE_TABLE => Edit::RemoveTable {
                cf: r.u32()?,
                level: r.u8()?,
                id: r.u64()?,
            },
            TAG_LOG_START => Edit::LogStart(r.u64()?),
            TAG_NEXT_TABLE_ID => Edit::NextTableId(r.u64()?),
            TAG_NEXT_CF_ID => Edit::NextCfId(r.u32()?),
            other => return Err(format!("unknown edit tag {other} at payload offset {at}")),
        };
        edits.push(edit);
    }
    if edits.is_empty() {
        return Err("record holds no edit".into());
    }
    Ok(edits)
}

/// A bounds-checked cursor over a payload.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let rest = &self.buf[self.pos..];
        if rest.len() < n {
            return Err(format!(
                "edit cut short at payload offset {}: {n} bytes needed, {} left",
                self.pos,
                rest.len()
            ));
        }
        self.pos += n;
        Ok(&rest[..n])
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let b = self.take(N)?;
        let mut a = [0; N];
        a.copy_from_slice(b);
        Ok(a)
    }

    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.array::<1>()?[0])
    }

    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// A length-prefixed byte string of at most `max` bytes; the length is checked against
    /// `max` and against what is left before anything is sliced.
    fn bytes(&mut self, max: usize, what: &str) -> Result<&'a [u8], String> {
        let at = self.pos;
        let n = self.u32()? as usize;
        if n > max {
            return Err(format!(
                "{what} at payload offset {at} has {n} bytes, more than {max}"
            ));
        }
        self.take(n)
    }
}

#[cfg(test)]
pub(crate) mod tests;
