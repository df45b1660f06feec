//! The compaction driver: the background thread and `Db::compact_range` run the jobs that
//! `compaction::pick` and `compaction::manual_job` choose, write their tables through
//! `compaction::merge`, and install the result with one manifest edit (step 5 of the
//! algorithm in `compaction/mod.rs`).

use std::sync::Weak;

use super::*;
use crate::compaction::{self, EntryPolicy, Job, Manual, Shape, LAST};
use crate::sstable::TableIter;

impl DbInner {
    pub(super) fn shape(&self) -> Shape {
        Shape {
            l0_trigger: self.opts.l0_compaction_trigger,
            base_bytes: self.opts.level_base_bytes,
            ratio: self.opts.level_size_ratio,
            blob_gc_ratio: self.opts.blob_gc_garbage_ratio,
            l0_scan_ratio: self.opts.l0_scan_compaction_ratio,
        }
    }

    /// Whether no background work is running or due: no frozen memtable waits for a
    /// flush and no flush runs (its log purge comes after the version swap), no table is
    /// busy in a compaction, no job failed for want of space (it is retried), and the
    /// picker finds nothing to do in the current version.
    pub(super) fn background_idle(&self) -> bool {
        // The frozen memtables first, the flag second: the flush thread sets the flag
        // before its swap drops the memtable, so one of the two reads sees the flush.
        if self.sv.read().mems.len() > 1
            || self.flush_running.load(SeqCst)
            || self.no_space.lock().is_some()
        {
            return false;
        }
        // Lock order as in `compaction_loop`: busy, then the pointers.
        let busy = self.busy.lock();
        if !busy.is_empty() {
            return false;
        }
        let sv = self.super_version();
        let oldest = self.snapshot_list().first().copied().unwrap_or(Seqno::MAX);
        compaction::pick(
            &sv.version,
            self.shape(),
            &self.compact_pointer.lock(),
            &busy.ids,
            oldest,
        )
        .is_none()
            // Last: a job queues its replaced files' removal before it leaves `busy`.
            && self.tables.unlinker.idle()
    }

    /// Runs one job and installs its result.
    fn run_compaction(&self, job: &Job) -> Result<()> {
        if job.for_tombstones {
            self.counters.tombstone_compactions.fetch_add(1, SeqCst);
        }
        if job.for_scans {
            self.counters.scan_compactions.fetch_add(1, SeqCst);
        }
        // The lower tables merged; the others of the job's range stay, as fences.
        let (lower, fences) = self.lower_with_keys(job)?;
        let mut edits = Vec::new();
        for t in job.inputs.iter() {
            edits.push(Edit::RemoveTable {
                cf: job.cf,
                level: job.level as u8,
                id: t.meta.id,
            });
        }
        for t in &lower {
            edits.push(Edit::RemoveTable {
                cf: job.cf,
                level: job.output_level as u8,
                id: t.meta.id,
            });
        }
        let mut new = NewTables::new(self);
        let mut written = 0u64;
        let mut read = 0u64;
        if job.is_trivial_move() {
            for t in &job.inputs {
                edits.push(Edit::AddTable {
                    cf: job.cf,
                    level: job.output_level as u8,
                    meta: t.meta.clone(),
                });
            }
        } else {
            let tables: Vec<_> = job.inputs.iter().chain(&lower).cloned().collect();
            read = tables.iter().map(|t| t.meta.size_bytes).sum();
            let snapshots = self.snapshot_list();
            // `pinned` holds the blob files the job may read (those it relocates) until the
            // job is done: the job's inputs keep them in the manifest's state only while
            // the family lives, and a `drop_cf` meanwhile drops the last version naming them.
            let (sep, pinned) = self.compaction_separation(job);
            let sep = Arc::new(sep);
            // Expiry as of now, and the family's filter (which reads separated values
            // through the same pinned version).
            let filter = self.compaction_filter(job.cf);
            let merge = self.merge_operator(job.cf);
            let read_blob = |user_key: &[u8], ptr: &[u8]| pinned.version.read_blob(user_key, ptr);
            let policy = EntryPolicy {
                now_ms: self.opts.clock.now_millis(),
                filter: filter.as_deref(),
                level: job.output_level,
                read_blob: &read_blob,
                merge: merge.as_deref(),
            };
            let policy = &policy;
            let bounds = self.subcompaction_bounds(&tables, read)?;
            let outputs = if bounds.is_empty() {
                self.merge_range(
                    job, &tables, None, None, &snapshots, &fences, &sep, policy, &mut new,
                )?
            } else {
                // Sub-compactions: the key range cut at `bounds`, each share merged on a
                // thread of its own, their outputs in key order. A failed share fails the
                // job, and every share's tables are removed (their `NewTables` drop).
                self.counters.split_compactions.fetch_add(1, SeqCst);
                let mut lows = vec![None];
                lows.extend(bounds.iter().cloned().map(Some));
                let mut highs: Vec<Option<Vec<u8>>> = bounds.into_iter().map(Some).collect();
                highs.push(None);
                let results: Vec<Result<(Vec<crate::vlog::Finished>, Vec<u64>)>> =
                    std::thread::scope(|scope| {
                        let handles: Vec<_> = lows
                            .into_iter()
                            .zip(highs)
                            .map(|(lo, hi)| {
                                let (tables, snapshots, fences, sep) =
                                    (&tables, &snapshots, &fences, &sep);
                                scope.spawn(move || {
                                    let mut mine = NewTables::new(self);
                                    let out = self.merge_range(
                                        job, tables, lo, hi, snapshots, fences, sep, policy,
                                        &mut mine,
                                    )?;
                                    Ok((out, std::mem::take(&mut mine.ids)))
                                })
                            })
                            .collect();
                        handles
                            .into_iter()
                            .map(|h| {
                                h.join().unwrap_or_else(|_| {
                                    Err(Error::invalid("a sub-compaction thread panicked"))
                                })
                            })
                            .collect()
                    });
                let mut outputs = Vec::new();
                let mut failed = None;
                for r in results {
                    match r {
                        Ok((out, ids)) => {
                            new.ids.extend(ids);
                            outputs.extend(out);
                        }
                        Err(e) => failed = failed.or(Some(e)),
                    }
                }
                if let Some(e) = failed {
                    return Err(e); // `new` removes every share's tables
                }
                outputs
            };
            if !outputs.is_empty() {
                self.sync_tables_dir()?;
            }
            for out in outputs {
                written += out.table.size_bytes;
                if let Some(b) = out.blob {
                    written += b.size_bytes;
                    self.counters
                        .blob_write_bytes
                        .fetch_add(b.size_bytes, SeqCst);
                    edits.push(Edit::AddBlob(b));
                }
                edits.push(Edit::AddTable {
                    cf: job.cf,
                    level: job.output_level as u8,
                    meta: out.table,
                });
            }
        }
        edits.push(Edit::NextTableId(self.next_table_id.load(SeqCst)));
        crate::kill_point::hit("compaction: outputs written, before the manifest edit");
        let mut st = self.state.lock();
        if !st.manifest.state().cfs.contains_key(&job.cf) {
            // Dropped meanwhile: the outputs are orphans, removed with `new`.
            return Ok(());
        }
        let r = st.manifest.log_and_apply(edits);
        match &r {
            Err(e) if Self::manifest_edit_surely_lost(e) => {} // `new` removes the outputs
            // Recorded, or perhaps recorded (an ambiguous failure, which poisons).
            _ => new.keep(),
        }
        self.after_manifest(&mut st, r)?;
        drop(st);
        if job.level > 0 {
            let (_, hi) = compaction::key_range(&job.inputs);
            self.compact_pointer.lock().insert((job.cf, job.level), hi);
        }
        self.counters.compactions.fetch_add(1, SeqCst);
        self.counters.compaction_read_bytes.fetch_add(read, SeqCst);
        self.counters
            .compaction_write_bytes
            .fetch_add(written, SeqCst);
        Ok(())
    }

    /// Merges the part of `tables` with user keys in `lo..hi` (unbounded where `None`) into
    /// output tables (step 4 of the algorithm).
    #[allow(clippy::too_many_arguments)]
    fn merge_range(
        &self,
        job: &Job,
        tables: &[Arc<crate::version::TableHandle>],
        lo: Option<Vec<u8>>,
        hi: Option<Vec<u8>>,
        snapshots: &[Seqno],
        fences: &compaction::Fences,
        sep: &Arc<Separation>,
        policy: &EntryPolicy<'_>,
        new: &mut NewTables<'_>,
    ) -> Result<Vec<crate::vlog::Finished>> {
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
        for t in tables {
            let outside = lo.as_deref().is_some_and(|lo| t.user_largest() < lo)
                || hi.as_deref().is_some_and(|hi| t.user_smallest() >= hi);
            if !outside {
                children.push(Box::new(TableIter::new_with(&t.table()?, false)));
            }
        }
        let mut m = crate::iter::MergingIter::new(children);
        match &lo {
            Some(lo) => m.seek(&key::seek_key(lo, key::MAX_SEQNO)),
            None => m.seek_to_first(),
        }
        let mut bounded = crate::iter::UpperBounded::new(&mut m, hi);
        compaction::merge(
            &mut bounded,
            snapshots,
            job.bottommost,
            self.opts.table_target_bytes,
            fences,
            policy,
            &mut || self.new_output(new, sep),
        )
    }

    /// Where to cut a compaction of `tables` (`bytes` in all) into sub-compactions: user
    /// keys splitting their data blocks into `subcompactions` shares of about equal size,
    /// or none if the job is under four output tables' worth (a thread is not worth it).
    fn subcompaction_bounds(
        &self,
        tables: &[Arc<crate::version::TableHandle>],
        bytes: u64,
    ) -> Result<Vec<Vec<u8>>> {
        let n = self.opts.subcompactions;
        if n < 2 || bytes < 4 * self.opts.table_target_bytes {
            return Ok(Vec::new());
        }
        // Each data block's boundary key stands for about the same bytes.
        let mut keys = Vec::new();
        for t in tables {
            keys.extend(t.table()?.block_boundaries()?);
        }
        keys.sort();
        let mut bounds: Vec<Vec<u8>> = Vec::new();
        for i in 1..n {
            let k = &keys[keys.len() * i / n];
            if bounds.last().is_none_or(|b| b < k) && keys.first().is_some_and(|f| f < k) {
                bounds.push(k.clone());
            }
        }
        Ok(bounds)
    }

    /// What a compaction's outputs do with values: separate those of at least the column
    /// family's blob threshold (values written before separation was on, or under a higher
    /// threshold), and relocate those in blob files due for collection
    /// (`docs/format/vlog.md`, "Garbage and its collection"). Returns the super-version
    /// it chose from, which the caller holds while it reads them: a blob file is deleted
    /// when the last version naming it goes (version invariant 3).
    fn compaction_separation(&self, job: &Job) -> (Separation, Arc<SuperVersion>) {
        let sv = self.super_version();
        let ratio = self.opts.blob_gc_garbage_ratio;
        let due = sv.version.blob_collection_due(ratio);
        let relocate = sv
            .version
            .blobs
            .values()
            .filter(|b| (due && b.garbage_ratio() >= ratio) || job.collect_blob == Some(b.meta.id))
            .map(|b| (b.meta.id, b.meta.clone()))
            .collect();
        let sep = Separation {
            threshold: self.blob_threshold(job.cf),
            relocate,
            files: Some(self.blob_files.clone()),
            log: None,
        };
        (sep, sv)
    }

    /// Splits `job.lower` (the output level's tables in the inputs' key range) into those
    /// that hold keys among the inputs' keys, which are merged, and the rest, which stay
    /// where they are as fences the outputs are cut around (their user-key ranges, sorted).
    ///
    /// Why: the range is a hull. Two writers loading their own key ranges sequentially
    /// flush level-0 tables that each span both ranges, so the hull covers all the data
    /// loaded so far between them, and merging it all rewrote that data on every level-0
    /// compaction. A table holds a key of an input iff seeking the input to the table's
    /// smallest key lands at or before its largest: one index search per pair.
    fn lower_with_keys(
        &self,
        job: &Job,
    ) -> Result<(Vec<Arc<crate::version::TableHandle>>, compaction::Fences)> {
        let mut lower = Vec::new();
        let mut fences = Vec::new();
        if job.lower.is_empty() {
            return Ok((lower, fences));
        }
        let mut inputs = Vec::new();
        for t in &job.inputs {
            inputs.push(TableIter::new_with(&t.table()?, false));
        }
        for t in &job.lower {
            let (lo, hi) = (t.user_smallest(), t.user_largest());
            let target = key::seek_key(lo, Seqno::MAX);
            let mut hit = false;
            for it in inputs.iter_mut() {
                it.seek(&target);
                if let Some(e) = it.take_error() {
                    return Err(e);
                }
                if it.valid() && key::user_key(it.key()) <= hi {
                    hit = true;
                    break;
                }
            }
            if hit {
                lower.push(t.clone());
            } else {
                fences.push((lo.to_vec(), hi.to_vec()));
            }
        }
        fences.sort();
        Ok((lower, fences))
    }

    /// Manual compaction of `bounds` down to the last level (`Db::compact_range`). Under a
    /// compaction filter, a TTL or a merge operator every table of the range is rewritten,
    /// the last level's in place, so that they reach all of it (and operands are folded).
    pub(super) fn compact_range(&self, cf: u32, bounds: &Bounds) -> Result<()> {
        let lo = bounds.lo_key();
        let hi = bounds.hi_key();
        let rewrite = self.compaction_filter(cf).is_some()
            || self.ttl_ms(cf).is_some()
            || self.merge_operator(cf).is_some();
        let last = if rewrite { LAST + 1 } else { LAST };
        for level in 0..last {
            loop {
                self.check_writable()?;
                // Pick under the busy lock: a table that is in the current version and not
                // busy cannot be removed until we release it (compactions mark their inputs
                // busy before reading the version, and unmark them after installing theirs).
                let mut busy = self.busy.lock();
                let sv = self.super_version();
                let Some(cfv) = sv.version.cfs.get(&cf) else {
                    return Err(self.cf_not_found(cf));
                };
                let picked = if level == LAST {
                    compaction::manual_rewrite_last(cfv, lo, hi, &busy.ids)
                } else {
                    compaction::manual_job(cfv, level, lo, hi, &busy.ids)
                };
                let job = match picked {
                    Manual::Nothing => break,
                    Manual::Busy => {
                        drop(busy);
                        let mut g = self.bg_lock.lock();
                        self.bg_cv.wait_for(&mut g, Duration::from_millis(5));
                        continue;
                    }
                    Manual::Job(mut job) => {
                        job.rewrite |= rewrite;
                        job
                    }
                };
                let ids = job.ids();
                busy.start(&job);
                drop(busy);
                let r = self.run_compaction(&job);
                // As in `compaction_loop`: the job's handles (the last of a replaced
                // table queues its file's removal) go before its tables stop being busy.
                drop(job);
                self.busy.lock().finish(&ids);
                self.notify_bg();
                match r {
                    Err(_) if !self.cf_exists(cf) => return Err(self.cf_not_found(cf)),
                    r => r?,
                }
                break;
            }
        }
        Ok(())
    }
}

/// Background compaction thread.
pub(super) fn compaction_loop(w: Weak<DbInner>) {
    loop {
        let Some(db) = w.upgrade() else { return };
        if db.closing.load(SeqCst) || db.poisoned.load(SeqCst) {
            return;
        }
        let job = {
            let mut busy = db.busy.lock();
            let sv = db.super_version();
            let oldest = db.snapshot_list().first().copied().unwrap_or(Seqno::MAX);
            let job = compaction::pick(
                &sv.version,
                db.shape(),
                &db.compact_pointer.lock(),
                &busy.ids,
                oldest,
            );
            if let Some(j) = &job {
                busy.start(j);
            }
            job
        };
        match job {
            Some(job) => {
                let ids = job.ids();
                let cf = job.cf;
                let r = db.run_compaction(&job);
                // The job's handles go first: the last handle of a table the job replaced
                // queues its file's removal (`unlink.rs`), and `background_idle` counts the
                // job until `busy` is clear, then the removal until it is made.
                drop(job);
                db.busy.lock().finish(&ids);
                match r {
                    Ok(()) => db.set_no_space(None),
                    Err(e) if e.is_no_space() => {
                        // Nothing changed; retry after a pause, as space may free.
                        db.set_no_space(Some(format!("compaction: {e}")));
                        let mut g = db.bg_lock.lock();
                        db.bg_cv.wait_for(&mut g, NO_SPACE_RETRY);
                        continue;
                    }
                    Err(_) if !db.cf_exists(cf) => {
                        // The family was dropped while the job ran: whatever failed was
                        // reading files no version needs any more, and the outputs were
                        // removed with the job. Nothing the database holds is affected.
                    }
                    Err(e) => {
                        db.poison("compaction failed", &e);
                        return;
                    }
                }
                db.notify_bg();
            }
            None => {
                let mut g = db.bg_lock.lock();
                db.bg_cv.wait_for(&mut g, Duration::from_millis(50));
            }
        }
    }
}
