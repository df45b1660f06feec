//! Column families: creating, dropping and naming them (the handle, [`ColumnFamily`], is
//! `cf.rs` at the crate root).

use super::*;

impl Db {
    // ---------------------------------------------------------------- column families

    /// The default column family.
    pub fn default_cf(&self) -> ColumnFamily {
        ColumnFamily::default_cf()
    }

    /// The column family named `name`.
    ///
    /// # Errors
    ///
    /// `ColumnFamilyNotFound` if there is none.
    pub fn cf(&self, name: &str) -> Result<ColumnFamily> {
        let sv = self.inner.super_version();
        sv.version
            .cfs
            .values()
            .find(|c| c.name == name)
            .map(|c| ColumnFamily {
                id: c.id,
                name: name.into(),
            })
            .ok_or_else(|| Error::ColumnFamilyNotFound(name.into()))
    }

    /// The names of every column family, in creation order.
    pub fn list_cfs(&self) -> Vec<String> {
        let sv = self.inner.super_version();
        sv.version.cfs.values().map(|c| c.name.clone()).collect()
    }

    /// Creates a column family (durably) and returns its handle; returns the existing one
    /// if `name` exists.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for an empty name; `Io`/`Poisoned` if the manifest write failed.
    pub fn create_cf(&self, name: &str) -> Result<ColumnFamily> {
        if name.is_empty() || name.len() > 255 {
            return Err(Error::invalid("a column family name has 1 to 255 bytes"));
        }
        self.inner.check_writable()?;
        self.inner.sync_before_ddl()?;
        let mut st = self.inner.state.lock();
        if let Some(c) = st.manifest.state().cfs.values().find(|c| c.name == name) {
            return Ok(ColumnFamily {
                id: c.id,
                name: name.into(),
            });
        }
        let id = st.manifest.state().next_cf_id;
        let r = st.manifest.log_and_apply(vec![Edit::CreateCf {
            id,
            name: name.to_string(),
        }]);
        if r.is_ok() {
            self.inner.cf_names.lock().insert(id, name.into());
        }
        self.inner.after_manifest(&mut st, r)?;
        Ok(ColumnFamily {
            id,
            name: name.into(),
        })
    }

    /// Drops a column family: its data is unreachable at once and its files are deleted
    /// when no reader uses them. The default column family cannot be dropped.
    ///
    /// # Errors
    ///
    /// `ColumnFamilyNotFound`; `InvalidArgument` for the default one; `Io`/`Poisoned`.
    pub fn drop_cf(&self, name: &str) -> Result<()> {
        if name == DEFAULT_CF {
            return Err(Error::invalid(
                "the default column family cannot be dropped",
            ));
        }
        self.inner.check_writable()?;
        self.inner.sync_before_ddl()?;
        let mut st = self.inner.state.lock();
        let id = st
            .manifest
            .state()
            .cfs
            .values()
            .find(|c| c.name == name)
            .map(|c| c.id)
            .ok_or_else(|| Error::ColumnFamilyNotFound(name.into()))?;
        let r = st.manifest.log_and_apply(vec![Edit::DropCf { id }]);
        self.inner.after_manifest(&mut st, r)
    }
}

impl DbInner {
    /// A read's part in family `cf`'s dead runs (`read/dead_runs.rs`), for an iterator
    /// starting at `lo`, registered if it may record one (invariant D1, rule 2): called
    /// before the read takes its super-version, or with the super-version it took
    /// (`pinned`), which must still be the current one after the registration — then every
    /// commit that touched before the registration is in it. `None` with
    /// `DbBuilder::dead_runs` off.
    pub(crate) fn dead_source(
        &self,
        cf: u32,
        lo: &std::ops::Bound<Vec<u8>>,
        pinned: Option<&Arc<SuperVersion>>,
    ) -> Option<crate::read::DeadSource> {
        use std::ops::Bound;
        if !self.opts.dead_runs {
            return None;
        }
        let table = self.dead_runs.clone();
        // No family armed yet: the read may arm its own, but neither seeks nor records.
        let runs = table.any_armed().then(|| table.family(cf));
        let ticket = runs
            .as_ref()
            .and_then(|runs| match lo {
                Bound::Included(k) => runs.register(k),
                Bound::Unbounded => runs.register(&[]),
                // Never recorded from (rule 3).
                Bound::Excluded(_) => None,
            })
            .filter(|_| pinned.is_none_or(|sv| Arc::ptr_eq(sv, &self.super_version())));
        Some(crate::read::DeadSource {
            table,
            cf,
            runs,
            ticket,
        })
    }

    /// Whether column family `cf` is in the manifest's current state (not dropped).
    pub(crate) fn cf_exists(&self, cf: u32) -> bool {
        self.state.lock().manifest.state().cfs.contains_key(&cf)
    }

    /// The name of column family `cf` for a message (`"(id N)"` if this handle never knew
    /// it).
    pub(crate) fn cf_name(&self, cf: u32) -> String {
        match self.cf_names.lock().get(&cf) {
            Some(name) => name.to_string(),
            None => format!("(id {cf})"),
        }
    }

    /// `ColumnFamilyNotFound` for family `cf`, by its name where this handle knew it.
    pub(crate) fn cf_not_found(&self, cf: u32) -> Error {
        match self.cf_names.lock().get(&cf) {
            Some(name) => Error::ColumnFamilyNotFound(name.to_string()),
            None => Error::ColumnFamilyNotFound(format!("(id {cf})")),
        }
    }

    /// Makes every write acknowledged so far durable before a column family is created or
    /// dropped: the manifest edit is durable at once, and must not survive a power loss
    /// that takes back writes acknowledged before it (what survives is a prefix of commit
    /// order, in every sync mode). Found by `silt-stress power-loss`.
    pub(super) fn sync_before_ddl(&self) -> Result<()> {
        self.wal.sync().map_err(|e| self.on_wal_error(e))
    }
}
