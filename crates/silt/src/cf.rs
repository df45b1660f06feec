//! [`ColumnFamily`]: the handle naming one column family, as writes, batches and reads
//! take it. Creating, dropping and looking families up is `db/cf.rs`.

use std::sync::Arc;

/// The name of the column family every database has.
pub const DEFAULT_CF: &str = "default";

/// A handle on one column family, from [`Db::cf`](crate::Db::cf) or
/// [`Db::create_cf`](crate::Db::create_cf).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnFamily {
    pub(crate) id: u32,
    pub(crate) name: Arc<str>,
}

impl ColumnFamily {
    /// The default column family.
    pub(crate) fn default_cf() -> ColumnFamily {
        ColumnFamily {
            id: 0,
            name: DEFAULT_CF.into(),
        }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }
}
