//! [`StateMachineHandle`]: the service's reads of the state machine (`get`, `scan`), the
//! [`Digest`] that compares replicas, and counters. Every read holds the `data` lock for
//! its duration (invariant 4 of `state_machine/mod.rs`).

use openraft::LogId;
use silt::{ColumnFamily, Read};

use super::meta;
use super::{Applied, StateMachineHandle, StateMachineStats};
use crate::error::{Error, Result};
use crate::NodeId;

/// A digest of the state machine's user data at one point, to compare replicas.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Digest {
    /// The last applied log id at that point.
    pub last_applied: Option<LogId<NodeId>>,
    /// Number of keys.
    pub keys: u64,
    /// xxh3-64 over every (key length, key, value length, value) in key order.
    pub hash: u64,
}

/// Iterating a whole column family through [`Read`].
pub(super) trait IterAll {
    fn iter_cf_all(&self, cf: &ColumnFamily) -> silt::Iter;
}

impl<R: Read> IterAll for R {
    fn iter_cf_all(&self, cf: &ColumnFamily) -> silt::Iter {
        self.range_cf::<&[u8], _>(cf, ..)
    }
}

impl StateMachineHandle {
    /// The value of `key`, from this node's state machine as it is (no Raft check: the
    /// service decides whether to confirm leadership first).
    ///
    /// # Errors
    ///
    /// `Db` if silt fails.
    pub fn get(&self, key: &str) -> Result<Option<String>> {
        let data = self.shared.data.read();
        let v = self.shared.db.get_cf(&data.cf, key.as_bytes())?;
        v.map(|v| {
            String::from_utf8(v)
                .map_err(|_| Error::Corruption(format!("the value of {key:?} is not UTF-8")))
        })
        .transpose()
    }

    /// Up to `limit` pairs with `start <= key < end` (`end` `None`: to the last key), in
    /// key order, from one consistent view.
    ///
    /// # Errors
    ///
    /// `Db` if silt fails.
    pub fn scan(
        &self,
        start: &str,
        end: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(String, String)>> {
        let data = self.shared.data.read();
        let view = self.shared.db.snapshot();
        let iter = match end {
            Some(e) => view.range_cf(&data.cf, start.as_bytes()..e.as_bytes()),
            None => view.range_cf(&data.cf, start.as_bytes()..),
        };
        let mut out = Vec::new();
        for kv in iter.take(limit) {
            let (k, v) = kv?;
            let k =
                String::from_utf8(k).map_err(|_| Error::Corruption("a key is not UTF-8".into()))?;
            let v = String::from_utf8(v)
                .map_err(|_| Error::Corruption("a value is not UTF-8".into()))?;
            out.push((k, v));
        }
        Ok(out)
    }

    /// A digest of every key and value with the last applied id, from one consistent view.
    ///
    /// # Errors
    ///
    /// `Db` if silt fails.
    pub fn digest(&self) -> Result<Digest> {
        let data = self.shared.data.read();
        let view = self.shared.db.snapshot();
        let m = meta::read(&view, &self.shared.meta_cf)?;
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        let mut keys = 0;
        for kv in view.iter_cf_all(&data.cf) {
            let (k, v) = kv?;
            h.update(&(k.len() as u32).to_le_bytes());
            h.update(&k);
            h.update(&(v.len() as u32).to_le_bytes());
            h.update(&v);
            keys += 1;
        }
        Ok(Digest {
            last_applied: m.last_applied,
            keys,
            hash: h.digest(),
        })
    }

    /// The last applied log id and membership.
    pub fn applied(&self) -> Applied {
        self.shared.applied.read().clone()
    }

    /// Counters.
    pub fn stats(&self) -> StateMachineStats {
        self.shared.stats.lock().clone()
    }

    /// The silt database's own counters (its log's `fdatasync`s, flushes, compactions).
    pub fn db_stats(&self) -> silt::Stats {
        self.shared.db.stats()
    }
}
