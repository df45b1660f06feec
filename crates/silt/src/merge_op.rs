//! [`MergeOperator`]: read-modify-write without the read. A merge writes an *operand*; a
//! read folds the operands written since the key's last put or delete onto that value, in
//! write order (RocksDB's associative merge operator). Compaction folds them early: runs
//! of operands into one (partial merge), and operands onto their base value into a put.
//!
//! Built in: [`Counter`] (a little-endian `i64` sum) and [`Append`] (concatenation with a
//! separator).

use std::fmt::Debug;

/// An associative merge: `merge(merge(v, a), b)` must equal `merge(v, merge_operands(a, b))`
/// for every value `v` (or none) and operands `a`, `b`, because compaction folds runs of
/// operands before it knows the value below them. Set per column family with
/// [`crate::DbBuilder::merge_operator`] or [`crate::DbBuilder::cf_merge_operator`].
///
/// The engine may call it any number of times, from several threads at once, on reads and
/// in compactions: it must be a pure function of its arguments.
pub trait MergeOperator: Send + Sync + Debug {
    /// `operand` applied to `existing` (`None`: the key has no value).
    ///
    /// # Errors
    ///
    /// A message if the operand or the value is not one this operator takes (a counter
    /// operand that is not 8 bytes, say). A read that meets it fails with
    /// `InvalidArgument`; a compaction keeps the operands as they are.
    fn merge(&self, key: &[u8], existing: Option<&[u8]>, operand: &[u8])
        -> Result<Vec<u8>, String>;
}

/// Folds `operands` (oldest first) onto `existing`.
pub(crate) fn fold(
    op: &dyn MergeOperator,
    key: &[u8],
    existing: Option<&[u8]>,
    operands: &[&[u8]],
) -> Result<Vec<u8>, String> {
    let mut acc: Option<Vec<u8>> = None;
    let mut cur = existing;
    for o in operands {
        let next = op.merge(key, cur, o)?;
        acc = Some(next);
        cur = acc.as_deref();
    }
    match acc {
        Some(v) => Ok(v),
        None => Ok(existing.unwrap_or_default().to_vec()),
    }
}

/// A signed 64-bit counter: values and operands are 8-byte little-endian `i64`s; a merge
/// adds (wrapping). A missing value counts as 0.
///
/// ```
/// use std::sync::Arc;
/// # let dir = tempfile::tempdir().unwrap();
/// let db = silt::Db::builder(dir.path())
///     .merge_operator(Arc::new(silt::Counter))
///     .open()
///     .unwrap();
/// db.merge(b"hits", &5i64.to_le_bytes()).unwrap();
/// db.merge(b"hits", &(-2i64).to_le_bytes()).unwrap();
/// assert_eq!(db.get(b"hits").unwrap(), Some(3i64.to_le_bytes().to_vec()));
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Counter;

impl MergeOperator for Counter {
    fn merge(
        &self,
        _key: &[u8],
        existing: Option<&[u8]>,
        operand: &[u8],
    ) -> Result<Vec<u8>, String> {
        let read = |b: &[u8], what: &str| -> Result<i64, String> {
            let a: [u8; 8] = b
                .try_into()
                .map_err(|_| format!("a counter {what} has {} bytes, not 8", b.len()))?;
            Ok(i64::from_le_bytes(a))
        };
        let base = match existing {
            Some(v) => read(v, "value")?,
            None => 0,
        };
        Ok(base
            .wrapping_add(read(operand, "operand")?)
            .to_le_bytes()
            .to_vec())
    }
}

/// Appends operands to the value, `separator` between them (none before the first).
#[derive(Clone, Debug, Default)]
pub struct Append {
    /// Bytes put between the value and each appended operand.
    pub separator: Vec<u8>,
}

impl MergeOperator for Append {
    fn merge(
        &self,
        _key: &[u8],
        existing: Option<&[u8]>,
        operand: &[u8],
    ) -> Result<Vec<u8>, String> {
        Ok(match existing {
            None => operand.to_vec(),
            Some(v) => {
                let mut out = Vec::with_capacity(v.len() + self.separator.len() + operand.len());
                out.extend_from_slice(v);
                out.extend_from_slice(&self.separator);
                out.extend_from_slice(operand);
                out
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_fold_and_are_associative() {
        let c = Counter;
        let n = |x: i64| x.to_le_bytes().to_vec();
        let ops = [n(1), n(2), n(-10)];
        let refs: Vec<&[u8]> = ops.iter().map(|o| o.as_slice()).collect();
        assert_eq!(fold(&c, b"k", Some(&n(100)), &refs).unwrap(), n(93));
        assert_eq!(fold(&c, b"k", None, &refs).unwrap(), n(-7));
        // Operands folded first, then onto the value: the same.
        let partial = fold(&c, b"k", Some(refs[0]), &refs[1..]).unwrap();
        assert_eq!(fold(&c, b"k", Some(&n(100)), &[&partial]).unwrap(), n(93));
        assert!(c.merge(b"k", None, b"short").is_err());
        let a = Append {
            separator: b",".to_vec(),
        };
        assert_eq!(fold(&a, b"k", None, &[b"x", b"y"]).unwrap(), b"x,y");
        assert_eq!(fold(&a, b"k", Some(b"v"), &[b"x", b"y"]).unwrap(), b"v,x,y");
        let partial = fold(&a, b"k", Some(b"x"), &[b"y"]).unwrap();
        assert_eq!(fold(&a, b"k", Some(b"v"), &[&partial]).unwrap(), b"v,x,y");
    }
}
