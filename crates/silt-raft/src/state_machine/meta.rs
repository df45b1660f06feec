//! The state machine's bookkeeping keys in the `raft-meta` column family
//! (`docs/format/raft.md`, "State machine keys"): the last applied log id, the last
//! membership, and which `data-{gen}` column family holds the user data.

use openraft::{LogId, StoredMembership};
use silt::{ColumnFamily, Read, WriteBatch};

use crate::codec::{decode_log_id, put_log_id};
use crate::error::{Error, Result};
use crate::{Node, NodeId};

/// The column family of the bookkeeping keys.
pub(crate) const META_CF: &str = "raft-meta";
const KEY_LAST_APPLIED: &[u8] = b"last_applied";
const KEY_MEMBERSHIP: &[u8] = b"membership";
const KEY_DATA_CF: &[u8] = b"data_cf";

/// The name of the user-data column family of generation `gen`.
pub(crate) fn data_cf_name(gen: u64) -> String {
    format!("data-{gen}")
}

/// The generation of a user-data column family's name, if it is one.
pub(crate) fn parse_data_cf(name: &str) -> Option<u64> {
    name.strip_prefix("data-")?.parse().ok()
}

/// What the bookkeeping keys say.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Meta {
    pub(crate) last_applied: Option<LogId<NodeId>>,
    pub(crate) membership: StoredMembership<NodeId, Node>,
    pub(crate) data_gen: u64,
}

/// Reads the bookkeeping keys through `r` (the database or a snapshot of it).
pub(crate) fn read(r: &impl Read, cf: &ColumnFamily) -> Result<Meta> {
    let last_applied = match r.get_cf(cf, KEY_LAST_APPLIED)? {
        None => None,
        Some(b) => Some(
            decode_log_id(&b)
                .map_err(|e| Error::Corruption(format!("state machine last_applied: {e}")))?,
        ),
    };
    let membership = match r.get_cf(cf, KEY_MEMBERSHIP)? {
        None => StoredMembership::default(),
        Some(b) => serde_json::from_slice(&b)
            .map_err(|e| Error::Corruption(format!("state machine membership: {e}")))?,
    };
    let data_gen = match r.get_cf(cf, KEY_DATA_CF)? {
        None => 0,
        Some(b) => {
            let a: [u8; 8] = b.as_slice().try_into().map_err(|_| {
                Error::Corruption(format!("state machine data_cf of {} bytes", b.len()))
            })?;
            u64::from_le_bytes(a)
        }
    };
    Ok(Meta {
        last_applied,
        membership,
        data_gen,
    })
}

/// Adds the last applied id to a batch.
pub(crate) fn put_last_applied(b: &mut WriteBatch, cf: &ColumnFamily, id: &LogId<NodeId>) {
    let mut v = Vec::with_capacity(24);
    put_log_id(&mut v, id);
    b.put_cf(cf, KEY_LAST_APPLIED, &v);
}

/// Adds the membership to a batch.
pub(crate) fn put_membership(
    b: &mut WriteBatch,
    cf: &ColumnFamily,
    m: &StoredMembership<NodeId, Node>,
) -> Result<()> {
    let v = serde_json::to_vec(m)
        .map_err(|e| Error::InvalidArgument(format!("membership to JSON: {e}")))?;
    b.put_cf(cf, KEY_MEMBERSHIP, &v);
    Ok(())
}

/// Adds the data generation to a batch.
pub(crate) fn put_data_gen(b: &mut WriteBatch, cf: &ColumnFamily, gen: u64) {
    b.put_cf(cf, KEY_DATA_CF, &gen.to_le_bytes());
}
