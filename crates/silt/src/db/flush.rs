//! Flushing frozen memtables to tables, of level 0 or (`compaction/flush_split.rs`) the base
//! level (invariant W3 in `db/mod.rs`), the table-id
//! reservation, and the user's `flush` and `compact_range`.

use super::*;
use crate::compaction::{self, FlushView};

impl Db {
    // ---------------------------------------------------------------- maintenance

    /// Writes the memtable to a table and waits for it (and any older frozen memtable).
    ///
    /// # Errors
    ///
    /// `Io`/`Corruption`/`Poisoned` from the flush.
    pub fn flush(&self) -> Result<()> {
        self.inner.check_writable()?;
        self.inner.rotate(true);
        // Wait for the memtables frozen until now, not for ones frozen later by writers.
        let upto = self.inner.sv.read().mems[0].first_seqno();
        self.inner.wait_flushed(upto)
    }

    /// Waits, at most `timeout`, until no flush or compaction is running or due, as
    /// RocksDB's `WaitForCompact`: every frozen memtable is flushed and the compaction
    /// picker finds nothing to do in any column family (levels within their targets, level
    /// 0 under its trigger, no blob file or tombstone-heavy table due). Returns `true` once
    /// the database got there, `false` if the timeout passed first. With writers still
    /// writing it reports a moment, not a promise: the next write may make work due again.
    ///
    /// For a benchmark's or a bulk load's "settled" state, and before measuring a read
    /// workload; does not flush the active memtable (call [`Db::flush`] first for that).
    /// A read-only handle has no background work and returns `true` at once.
    ///
    /// # Errors
    ///
    /// `Poisoned` if background work failed (before or while waiting), `Closed` if the
    /// database is closing.
    pub fn wait_for_compactions(&self, timeout: Duration) -> Result<bool> {
        let inner = &self.inner;
        let start = Instant::now();
        loop {
            if inner.poisoned.load(SeqCst) {
                return Err(Error::Poisoned);
            }
            if inner.closing.load(SeqCst) {
                return Err(Error::Closed);
            }
            if inner.opts.read_only || inner.background_idle() {
                return Ok(true);
            }
            let left = timeout.saturating_sub(start.elapsed());
            if left.is_zero() {
                return Ok(false);
            }
            // A finished flush or job wakes us; the threads re-pick on their own (after
            // each job, and every 50 ms). Waking them here would cut short the pause of a
            // job retrying for want of space.
            let mut g = inner.bg_lock.lock();
            inner
                .bg_cv
                .wait_for(&mut g, left.min(Duration::from_millis(10)));
        }
    }

    /// Compacts every table of the default column family overlapping `range` down to the
    /// last level, dropping overwritten values and tombstones no snapshot needs. Flushes
    /// first, so what was written before the call is compacted too. In a family with a
    /// compaction filter, a TTL or a merge operator, every table of the range is rewritten
    /// (those of the last level in place), so the filter and expiry reach all of it and
    /// merge operands are folded.
    ///
    /// # Errors
    ///
    /// As [`Db::flush`].
    pub fn compact_range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<()> {
        self.compact_range_cf(&self.default_cf(), range)
    }

    /// [`Db::compact_range`] in column family `cf`.
    ///
    /// # Errors
    ///
    /// As [`Db::flush`].
    pub fn compact_range_cf<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        cf: &ColumnFamily,
        range: R,
    ) -> Result<()> {
        self.flush()?;
        let b = Bounds::from_range(range);
        self.inner.compact_range(cf.id, &b)
    }
}

impl DbInner {
    /// Handles the result of a manifest write: on success installs the new version; on
    /// failure poisons the database (the manifest is poisoned too).
    pub(crate) fn after_manifest(&self, st: &mut State, r: Result<()>) -> Result<()> {
        match r {
            Ok(()) => {
                let v = Arc::new(st.builder.build(st.manifest.state()));
                let mut sv = self.sv.write();
                *sv = Arc::new(sv.with_version(v));
                Ok(())
            }
            Err(e) if e.is_no_space() => Err(e),
            Err(e) => {
                self.poison("manifest write failed", &e);
                Err(e)
            }
        }
    }

    /// Waits until every frozen memtable holding seqnos below `upto` is flushed.
    pub(super) fn wait_flushed(&self, upto: Seqno) -> Result<()> {
        loop {
            if self.poisoned.load(SeqCst) {
                return Err(Error::Poisoned);
            }
            if self.sv.read().mems[1..]
                .iter()
                .all(|m| m.first_seqno() >= upto)
            {
                return Ok(());
            }
            self.notify_bg();
            let mut g = self.bg_lock.lock();
            self.bg_cv.wait_for(&mut g, Duration::from_millis(2));
        }
    }

    /// A new table id, durably reserved in the manifest before it is handed out
    /// (invariant O1 of `db/dir.rs`): ids are reserved [`TABLE_ID_RESERVE`] at a time.
    ///
    /// # Errors
    ///
    /// `Io`/`Poisoned` if the reservation could not be made durable (the database is then
    /// poisoned).
    pub(crate) fn alloc_table_id(&self) -> Result<u64> {
        let id = self.next_table_id.fetch_add(1, SeqCst);
        if id < self.table_ids_reserved.load(SeqCst) {
            return Ok(id);
        }
        let mut st = self.state.lock();
        if id >= st.manifest.state().next_table_id {
            let r = st
                .manifest
                .log_and_apply(vec![Edit::NextTableId(id.saturating_add(TABLE_ID_RESERVE))]);
            if let Err(e) = r {
                if !e.is_no_space() {
                    self.poison("manifest write failed", &e);
                }
                return Err(e);
            }
        }
        self.table_ids_reserved
            .fetch_max(st.manifest.state().next_table_id, SeqCst);
        Ok(id)
    }

    /// Flushes `mem` ([`DbInner::flush_memtable`]), lets go of it, then purges the log below
    /// the new log start. In that order because a memtable that reads values in the log
    /// keeps the log's segments from its first seqno on while it lives (memtable invariant
    /// 3): purged while the flush still held it, its own segments would stay until the next
    /// flush. A reader that still holds it keeps them: the purge is then owed, and the flush
    /// thread makes it once the reader lets go ([`DbInner::purge_if_owed`]).
    pub(super) fn flush_and_purge(&self, mem: Arc<Memtable>, boundary: Seqno) -> Result<()> {
        let log_start = self.flush_memtable(&mem, boundary)?;
        drop(mem);
        self.wal.purge_up_to(log_start)?;
        if self.wal.purge_held_below(log_start) {
            self.purge_owed.fetch_max(log_start, SeqCst);
        }
        self.notify_bg();
        Ok(())
    }

    /// Purges the log up to the log start a flush's purge stopped short of, once nothing
    /// holds it back any more (see `purge_owed`).
    ///
    /// # Errors
    ///
    /// As [`silt_wal::Wal::purge_up_to`].
    pub(super) fn purge_if_owed(&self) -> Result<()> {
        let owed = self.purge_owed.load(SeqCst);
        if owed == 0 || self.wal.purge_held_below(owed) {
            return Ok(());
        }
        self.wal.purge_up_to(owed)?;
        // A later flush may have raised it meanwhile: that one is still owed.
        let _ = self.purge_owed.compare_exchange(owed, 0, SeqCst, SeqCst);
        Ok(())
    }

    /// Writes each column family's entries of `mem` (seqno below `boundary`) into tables,
    /// cut at gaps in the key space, then records them, each in level 0 or the base level,
    /// and `log_start = boundary` in the manifest. Returns that log start, below which the
    /// log may be purged.
    fn flush_memtable(&self, mem: &Arc<Memtable>, boundary: Seqno) -> Result<Seqno> {
        let live_cfs: Vec<u32> = {
            let st = self.state.lock();
            st.manifest.state().cfs.keys().copied().collect()
        };
        let mut edits = Vec::new();
        let mut bytes = 0;
        let mut new = NewTables::new(self);
        let snapshots = self.snapshot_list();
        let version = self.sv.read().version.clone();
        let mut log_blobs = Vec::new();
        // The tables of families whose entries were cut at a gap: only they may go below
        // level 0 (`compaction/flush_split.rs`).
        let mut cut = HashSet::new();
        let shape = self.shape();
        let below_l0 = self.opts.flush_below_l0;
        let min_piece = self.opts.table_target_bytes / compaction::MIN_PIECE_DIVISOR;
        // The log must be durable up to the boundary before the manifest says replay starts
        // there: otherwise a crash could cut the log below the boundary, and new writes
        // would get seqnos (LSNs) below data already in tables, and be skipped by replay.
        // (And the log blobs' values are the log's bytes.) That sync is the flush's largest
        // wait when values are large (the memtable's whole log range goes to the device),
        // so it runs beside the table writing rather than after it.
        let mut write = || -> Result<()> {
            // Large values the log holds are pointed at there, not copied (log blobs).
            let linked = self.link_log_values(mem, boundary, &version, &mut new)?;
            for cf in mem.cfs() {
                if !live_cfs.contains(&cf) {
                    continue; // dropped
                }
                // Puts at or below what the family's tables hold may be replayed copies of
                // theirs (`FlushView`).
                let pair_floor = version.cfs.get(&cf).map_or(0, |c| {
                    c.levels
                        .iter()
                        .flatten()
                        .map(|t| t.meta.largest_seqno + 1)
                        .max()
                        .unwrap_or(0)
                });
                let mut it = FlushView::new(mem.iter(cf), snapshots.clone(), pair_floor);
                let sep = Arc::new(Separation {
                    threshold: self.blob_threshold(cf),
                    relocate: Default::default(),
                    files: Some(self.blob_files.clone()),
                    log: linked.values.get(&cf).cloned(),
                });
                // A table may end at a gap in the key space where what it holds so far
                // could go below level 0 (`compaction/flush_split.rs`).
                let may_cut = |lo: &[u8], hi: &[u8]| {
                    below_l0 && compaction::flush_level(&version, cf, shape, lo, hi, &[]) != 0
                };
                let outs = self.write_tables(&mut it, &mut new, &sep, min_piece, &may_cut)?;
                self.counters
                    .flush_dropped_entries
                    .fetch_add(it.dropped, SeqCst);
                if outs.len() > 1 {
                    cut.extend(outs.iter().map(|o| o.table.id));
                }
                for out in outs {
                    bytes += out.table.size_bytes;
                    if let Some(b) = out.blob {
                        bytes += b.size_bytes;
                        self.counters
                            .blob_write_bytes
                            .fetch_add(b.size_bytes, SeqCst);
                        edits.push(Edit::AddBlob(b));
                    }
                    edits.push(Edit::AddTable {
                        cf,
                        level: 0,
                        meta: out.table,
                    });
                }
            }
            if !edits.is_empty() {
                self.sync_tables_dir()?;
            }
            log_blobs = linked.blobs;
            Ok(())
        };
        let durable = || {
            self.wal
                .wait_durable(boundary.saturating_sub(1))
                .map_err(|e| self.on_wal_error(e))
        };
        std::thread::scope(|sc| {
            let syncer = std::thread::Builder::new()
                .name("silt-flush-sync".into())
                .spawn_scoped(sc, durable);
            let wrote = write();
            let synced = match syncer {
                Ok(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
                Err(_) => durable(), // no thread to spare: sync after
            };
            wrote.and(synced)
        })?;
        crate::kill_point::hit("flush: tables written and log synced, before the manifest edit");
        let log_start = self.log_start_for(boundary);
        edits.push(Edit::LogStart(log_start));
        edits.push(Edit::NextTableId(self.next_table_id.load(SeqCst)));
        let mut st = self.state.lock();
        // A column family dropped while we wrote: leave its table out (`new` deletes it),
        // and the blob file born with it.
        let dropped: Vec<u64> = edits
            .iter()
            .filter_map(|e| match e {
                Edit::AddTable { cf, meta, .. } if !st.manifest.state().cfs.contains_key(cf) => {
                    Some(meta.id)
                }
                _ => None,
            })
            .collect();
        edits.retain(|e| match e {
            Edit::AddTable { meta, .. } => !dropped.contains(&meta.id),
            Edit::AddBlob(b) => !dropped.contains(&b.id),
            _ => true,
        });
        // The log blobs some recorded table points into join the state first; the others
        // (no value ended up pointing there) are unlinked with `new`.
        let pointed: HashSet<u64> = edits
            .iter()
            .filter_map(|e| match e {
                Edit::AddTable { meta, .. } => Some(meta.blobs.iter().map(|b| b.id)),
                _ => None,
            })
            .flatten()
            .collect();
        let log_blobs: Vec<Edit> = log_blobs
            .into_iter()
            .filter(|b| pointed.contains(&b.id))
            .map(Edit::AddBlob)
            .collect();
        let mut recorded: Vec<u64> = log_blobs
            .iter()
            .filter_map(|e| match e {
                Edit::AddBlob(b) => Some(b.id),
                _ => None,
            })
            .collect();
        edits.splice(0..0, log_blobs);
        // Tables of a family cut at a gap that overlap no table at any level, nor where a
        // running compaction may write, go to the base level. The busy lock is held until
        // the new version is in place, so no job is picked meanwhile from a version without
        // them (lock order: state, then busy).
        let busy = self.busy.lock();
        let current = self.sv.read().version.clone();
        let mut placed = 0u64;
        for e in edits.iter_mut() {
            if let Edit::AddTable { cf, level, meta } = e {
                if !cut.contains(&meta.id) {
                    continue;
                }
                let (lo, hi) = (key::user_key(&meta.smallest), key::user_key(&meta.largest));
                let l = compaction::flush_level(&current, *cf, shape, lo, hi, &busy.spans);
                if l > 0 {
                    *level = u8::try_from(l).expect("a level below LEVELS");
                    placed += 1;
                }
            }
        }
        recorded.extend(edits.iter().filter_map(|e| match e {
            Edit::AddTable { meta, .. } => Some(meta.id),
            _ => None,
        }));
        let r = st.manifest.log_and_apply(edits);
        let r = match r {
            Ok(()) => {
                new.keep_only(&recorded);
                // Counted before the new version is installed: `Db::flush` returns once it
                // is, and its caller's `stats()` must include this flush.
                self.counters.flush_bytes.fetch_add(bytes, SeqCst);
                self.counters.flushes.fetch_add(1, SeqCst);
                self.counters
                    .flush_tables_below_l0
                    .fetch_add(placed, SeqCst);
                let s = &mut *st;
                let v = Arc::new(s.builder.build(s.manifest.state()));
                let mut sv = self.sv.write();
                *sv = Arc::new(sv.flushed(mem, v));
                Ok(())
            }
            Err(e) if Self::manifest_edit_surely_lost(&e) => Err(e),
            Err(e) => {
                // Perhaps recorded: the tables the edit names must stay.
                new.keep_only(&recorded);
                self.poison("manifest write failed", &e);
                Err(e)
            }
        };
        drop(busy);
        drop(st);
        // Removes whatever no edit names (a dropped family's table; everything if the edit
        // surely failed).
        drop(new);
        r?;
        crate::kill_point::hit("flush: manifest edit durable, before purging the log");
        Ok(log_start)
    }

    /// Creates a new output (table file and builder, and the blob file beside it when it
    /// separates a value), registered in `new` so that both are removed if the job fails
    /// before recording them. The one place a flush or compaction output is opened.
    pub(crate) fn new_output(
        &self,
        new: &mut NewTables<'_>,
        sep: &Arc<Separation>,
    ) -> Result<Output> {
        let id = self.alloc_table_id()?;
        let path = self.tables_dir.join(table_file_name(id));
        let file = self
            .fs
            .create(&path)
            .map_err(|e| Error::io("create table", Some(path.clone()), e))?;
        new.ids.push(id);
        Ok(Output::new(
            TableBuilder::new(id, path, file, &self.table_opts),
            sep.clone(),
        ))
    }

    /// A per-family setting of column family `cf`: `f` of its name, or `unknown` for a
    /// family this handle never knew.
    fn cf_setting<T>(&self, cf: u32, f: impl FnOnce(&str) -> T, unknown: T) -> T {
        match self.cf_names.lock().get(&cf) {
            Some(name) => f(name),
            None => unknown,
        }
    }

    /// The compaction filter of column family `cf`, if it has one.
    pub(crate) fn compaction_filter(&self, cf: u32) -> Option<Arc<dyn crate::CompactionFilter>> {
        let default = self.opts.compaction_filter.clone();
        self.cf_setting(cf, |n| self.opts.compaction_filter_for(n), default)
    }

    /// The merge operator of column family `cf`, if it has one.
    pub(crate) fn merge_operator(&self, cf: u32) -> Option<Arc<dyn crate::MergeOperator>> {
        let default = self.opts.merge_operator.clone();
        self.cf_setting(cf, |n| self.opts.merge_operator_for(n), default)
    }

    /// [`DbInner::merge_operator`], without a lock when no family has one (every iterator
    /// asks).
    pub(crate) fn merge_operator_if_any(&self, cf: u32) -> Option<Arc<dyn crate::MergeOperator>> {
        if self.opts.merge_operator.is_none() && self.opts.cf_merge_operator.is_empty() {
            return None;
        }
        self.merge_operator(cf)
    }

    /// The error of a merge in family `cf`, which has no merge operator.
    pub(crate) fn no_merge_operator(&self, cf: u32) -> Error {
        Error::invalid(format!(
            "column family {} holds or was sent merge operands but has no merge operator \
             (DbBuilder::merge_operator)",
            self.cf_name(cf)
        ))
    }

    /// The TTL of column family `cf` in milliseconds, if it has one.
    pub(crate) fn ttl_ms(&self, cf: u32) -> Option<u64> {
        self.cf_setting(cf, |n| self.opts.ttl_ms_for(n), None)
    }

    /// The blob threshold of column family `cf` (`DbBuilder::blob_threshold_bytes`).
    pub(crate) fn blob_threshold(&self, cf: u32) -> Option<usize> {
        let default = self.opts.blob_threshold_bytes;
        self.cf_setting(cf, |n| self.opts.blob_threshold_for(n), default)
    }

    /// Whether a failed manifest write leaves its edits not durable for sure: only a write
    /// that failed for want of space (see `Manifest::log_and_apply`). After any other
    /// failure the edits may be durable, so the tables they name must stay.
    pub(super) fn manifest_edit_surely_lost(e: &Error) -> bool {
        e.is_no_space()
    }

    pub(crate) fn sync_tables_dir(&self) -> Result<()> {
        self.fs
            .sync_dir(&self.tables_dir)
            .map_err(|e| Error::io("fsync directory", Some(self.tables_dir.clone()), e))
    }

    /// Writes every entry of `it` (from its position) into new tables (and their blob
    /// files), in key order. A table ends, between user keys, at a gap in the key space
    /// (`compaction::GapDetector`) once it holds at least `min_piece` bytes and
    /// `may_cut(first, last)` of its user keys says it could go below level 0.
    pub(crate) fn write_tables(
        &self,
        it: &mut FlushView,
        new: &mut NewTables<'_>,
        sep: &Arc<Separation>,
        min_piece: u64,
        may_cut: &dyn Fn(&[u8], &[u8]) -> bool,
    ) -> Result<Vec<Finished>> {
        let mut outs = Vec::new();
        if !it.valid() {
            return Ok(outs);
        }
        let mut b = self.new_output(new, sep)?;
        let mut gaps = compaction::GapDetector::default();
        // Whether the table could still go below level 0: once `may_cut` says no, it says no
        // for every longer range, so it is not asked again (it scans every level's tables).
        let mut could = true;
        // The table's first user key and the last one added.
        let mut first: Vec<u8> = key::user_key(it.key()).to_vec();
        let mut last: Vec<u8> = first.clone();
        while it.valid() {
            let user = key::user_key(it.key());
            if user != last.as_slice() {
                if gaps.is_gap(&last, user) && could && b.estimated_size_bytes() >= min_piece {
                    could = may_cut(&first, &last);
                    if could {
                        let done = std::mem::replace(&mut b, self.new_output(new, sep)?);
                        outs.push(done.finish()?);
                        gaps.restart();
                        first.clear();
                        first.extend_from_slice(user);
                    }
                }
                last.clear();
                last.extend_from_slice(user);
            }
            b.add(it.key(), it.value())?;
            it.next();
        }
        outs.push(b.finish()?);
        Ok(outs)
    }
}

impl DbInner {
    /// Where replay must start once everything below `boundary` is in tables: at
    /// `boundary`, or earlier, at the first part record of a transaction written in parts
    /// whose commit is not below `boundary` (invariant T4 of `txn/mod.rs`). Pins whose
    /// commit is below `boundary` are done and dropped.
    pub(crate) fn log_start_for(&self, boundary: Seqno) -> Seqno {
        let mut pins = self.log_pins.lock();
        pins.retain(|_, commit| commit.is_none_or(|c| c >= boundary));
        pins.keys()
            .next()
            .map_or(boundary, |&(first, _)| first.min(boundary))
    }
}

pub(super) fn flush_loop(w: std::sync::Weak<DbInner>) {
    loop {
        let Some(db) = w.upgrade() else { return };
        if db.poisoned.load(SeqCst) {
            return;
        }
        db.maybe_dump_stats();
        let job = {
            let sv = db.sv.read();
            if sv.mems.len() > 1 {
                let n = sv.mems.len();
                Some((sv.mems[n - 1].clone(), sv.mems[n - 2].first_seqno()))
            } else {
                None
            }
        };
        match job {
            Some((mem, boundary)) => {
                // Writers owning seqnos below the boundary may still be inserting.
                db.flush_running.store(true, SeqCst);
                if db.wait_visible(boundary).is_err() {
                    // Poisoned while a writer below the boundary was still inserting:
                    // flushing now would write the memtable without its entries and move
                    // the log start past its record. Nothing is flushed any more.
                    db.flush_running.store(false, SeqCst);
                    return;
                }
                let started = Instant::now();
                let bytes = mem.approx_bytes();
                let r = db.flush_and_purge(mem, boundary);
                db.flush_running.store(false, SeqCst);
                match r {
                    Ok(()) => {
                        db.throttle.note_flush(bytes, started.elapsed());
                        db.set_no_space(None)
                    }
                    Err(e) if e.is_no_space() => {
                        // Nothing changed (the tables written are removed): retry after a
                        // pause, as space may free. Writers that would stall meanwhile get
                        // `NoSpace`.
                        db.set_no_space(Some(format!("flush: {e}")));
                        let mut g = db.bg_lock.lock();
                        db.bg_cv.wait_for(&mut g, NO_SPACE_RETRY);
                    }
                    Err(e) => {
                        db.poison("flush failed", &e);
                        return;
                    }
                }
            }
            None => {
                if db.closing.load(SeqCst) {
                    return;
                }
                if let Err(e) = db.purge_if_owed() {
                    db.poison("log purge failed", &e);
                    return;
                }
                let mut g = db.bg_lock.lock();
                db.bg_cv.wait_for(&mut g, Duration::from_millis(50));
            }
        }
    }
}

/// Table files a flush or compaction created and has not recorded in the manifest yet.
/// Dropped without [`NewTables::keep`], it removes them: a failed job must not leave them
/// to fill the disk, least of all when it failed for want of space. (Open would remove them
/// too: their ids are below the reserved mark, O2 of `db/dir.rs`.)
pub(crate) struct NewTables<'a> {
    db: &'a DbInner,
    pub(crate) ids: Vec<u64>,
}

impl<'a> NewTables<'a> {
    pub(crate) fn new(db: &'a DbInner) -> NewTables<'a> {
        NewTables {
            db,
            ids: Vec::new(),
        }
    }

    /// Keeps the files: the manifest names them, or may (after an ambiguous failure).
    pub(crate) fn keep(&mut self) {
        self.ids.clear();
    }

    /// Keeps the files of `ids` (the tables an edit names); the rest are removed on drop.
    pub(crate) fn keep_only(&mut self, ids: &[u64]) {
        self.ids.retain(|id| !ids.contains(id));
    }
}

impl Drop for NewTables<'_> {
    fn drop(&mut self) {
        for id in self.ids.drain(..) {
            self.db.tables.evict(id);
            let _ = self
                .db
                .fs
                .remove(&self.db.tables_dir.join(table_file_name(id)));
            // The blob file born with the table, if it separated a value.
            let _ = self.db.fs.remove(&self.db.blob_files.path(id));
        }
    }
}
