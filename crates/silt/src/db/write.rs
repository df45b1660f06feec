//! The commit path: a batch validated, logged, applied to the memtable that owns its seqno,
//! made visible in commit order (invariants W1, W2, M1 in `db/mod.rs`); write stalls and
//! memtable rotation.

use super::*;
use crate::key::Kind;

impl Db {
    // ---------------------------------------------------------------- writes

    /// Writes `value` under `key` in the default column family.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for a key over 64 KiB or a value over 16 MiB; `Poisoned` after a
    /// failed fdatasync; `Io` if this write's log write or sync failed; `Closed`.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.put(key, value);
        self.write(b, WriteOptions::default())
    }

    /// Deletes `key` from the default column family.
    ///
    /// # Errors
    ///
    /// As [`Db::put`].
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete(key);
        self.write(b, WriteOptions::default())
    }

    /// Deletes `key`, which was put at most once since it was last deleted (see
    /// [`WriteBatch::single_delete`]).
    ///
    /// # Errors
    ///
    /// As [`Db::put`].
    pub fn single_delete(&self, key: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.single_delete(key);
        self.write(b, WriteOptions::default())
    }

    /// [`Db::put`] in column family `cf`.
    ///
    /// # Errors
    ///
    /// As [`Db::put`], and `ColumnFamilyNotFound` if `cf` was dropped.
    pub fn put_cf(&self, cf: &ColumnFamily, key: &[u8], value: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.put_cf(cf, key, value);
        self.write(b, WriteOptions::default())
    }

    /// Merges `operand` into `key` in the default column family (see
    /// [`WriteBatch::merge`]).
    ///
    /// # Errors
    ///
    /// As [`Db::put`], and `InvalidArgument` if the family has no merge operator.
    pub fn merge(&self, key: &[u8], operand: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.merge(key, operand);
        self.write(b, WriteOptions::default())
    }

    /// [`Db::merge`] in column family `cf`.
    ///
    /// # Errors
    ///
    /// As [`Db::merge`], and `ColumnFamilyNotFound`.
    pub fn merge_cf(&self, cf: &ColumnFamily, key: &[u8], operand: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.merge_cf(cf, key, operand);
        self.write(b, WriteOptions::default())
    }

    /// [`Db::delete`] in column family `cf`.
    ///
    /// # Errors
    ///
    /// As [`Db::put_cf`].
    pub fn delete_cf(&self, cf: &ColumnFamily, key: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete_cf(cf, key);
        self.write(b, WriteOptions::default())
    }

    /// Applies a batch atomically: after a crash, either all of it or none of it is there,
    /// and no reader ever sees part of it.
    ///
    /// # Errors
    ///
    /// As [`Db::put_cf`]. On error nothing of the batch is visible (until a reopen replays
    /// the log, if the record reached it: an `Io` error on sync does not mean the batch is
    /// absent after a crash).
    pub fn write(&self, batch: WriteBatch, opts: WriteOptions) -> Result<()> {
        self.inner.write(&batch, opts)
    }

    /// Makes every acknowledged write durable (one shared fdatasync).
    ///
    /// # Errors
    ///
    /// `Io`/`Poisoned` if the sync failed.
    pub fn sync(&self) -> Result<()> {
        self.inner
            .wal
            .sync()
            .map_err(|e| self.inner.on_wal_error(e))
    }
}

/// A transaction's check at its commit's own seqno (step 3 of `db/mod.rs`), given the
/// seqno and the committing writer's slot.
pub(crate) type Validate<'a> = dyn FnMut(Seqno, &Arc<Writer>) -> Result<()> + 'a;

impl DbInner {
    /// `batch` with its times to live and its families' TTLs turned into expiry times as of
    /// now (`WriteBatch::stamped`), or `None` if it has none.
    fn stamp(&self, batch: &WriteBatch) -> Result<Option<WriteBatch>> {
        let any = self.opts.any_ttl();
        if !any && !batch.has_relative_ttl() {
            return Ok(None);
        }
        let names = self.cf_names.lock();
        let ttl = |cf: u32| names.get(&cf).and_then(|n| self.opts.ttl_ms_for(n));
        batch.stamped(self.opts.clock.now_millis(), &ttl, any)
    }

    /// For a batch with merge operands: checks that each one's family has a merge operator,
    /// and folds an operand onto an earlier write of its key in the same batch (they share
    /// the batch's seqno, and only one entry per key and seqno survives: M2 in
    /// `docs/design.md`, "Merge operators"). `None` if nothing needed folding.
    fn fold_batch_merges(&self, batch: &WriteBatch) -> Result<Option<WriteBatch>> {
        if !batch.has_merges() {
            return Ok(None);
        }
        let entries = batch.entries()?;
        let mut ops: HashMap<u32, Arc<dyn crate::MergeOperator>> = HashMap::new();
        let mut seen = HashSet::with_capacity(entries.len());
        let mut fold = false;
        for e in &entries {
            if e.kind == Kind::Merge && !ops.contains_key(&e.cf) {
                let op = self
                    .merge_operator(e.cf)
                    .ok_or_else(|| self.no_merge_operator(e.cf))?;
                ops.insert(e.cf, op);
            }
            if !seen.insert((e.cf, e.key)) && e.kind == Kind::Merge {
                fold = true;
            }
        }
        if !fold {
            return Ok(None);
        }
        let bad = |cf: u32, e: String| {
            Error::invalid(format!(
                "the merge operator of column family {}: {e}",
                self.cf_name(cf)
            ))
        };
        // One entry per key, in first-write order: (kind, cf, key, value).
        let mut out: Vec<(Kind, u32, &[u8], Vec<u8>)> = Vec::with_capacity(entries.len());
        let mut at: HashMap<(u32, &[u8]), usize> = HashMap::with_capacity(entries.len());
        for e in &entries {
            let Some(&i) = at.get(&(e.cf, e.key)) else {
                at.insert((e.cf, e.key), out.len());
                out.push((e.kind, e.cf, e.key, e.value.to_vec()));
                continue;
            };
            if e.kind != Kind::Merge {
                out[i] = (e.kind, e.cf, e.key, e.value.to_vec()); // a later write wins
                continue;
            }
            let op = &ops[&e.cf];
            let prev = &mut out[i];
            match prev.0 {
                // Onto a value (an expiring one keeps its expiry), or onto an earlier operand
                // (associative: the two operands become one).
                Kind::Put | Kind::Merge | Kind::PutTtl => {
                    let skip = if prev.0 == Kind::PutTtl {
                        key::EXPIRY_BYTES
                    } else {
                        0
                    };
                    let merged = op
                        .merge(e.key, Some(&prev.3[skip..]), e.value)
                        .map_err(|m| bad(e.cf, m))?;
                    prev.3.truncate(skip);
                    prev.3.extend_from_slice(&merged);
                }
                // Onto a delete: the key's value is the operand folded onto nothing.
                _ => {
                    let merged = op.merge(e.key, None, e.value).map_err(|m| bad(e.cf, m))?;
                    *prev = (Kind::Put, e.cf, e.key, merged);
                }
            }
        }
        let mut b = WriteBatch::new();
        for (kind, cf, k, v) in &out {
            b.push(*kind, *cf, k, kind.carries_value().then_some(v.as_slice()));
        }
        Ok(Some(b))
    }

    pub(super) fn write(&self, batch: &WriteBatch, opts: WriteOptions) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        // Expiry times are fixed before the log sees the batch, so replay gives the same.
        let stamped = self.stamp(batch)?;
        let batch = stamped.as_ref().unwrap_or(batch);
        let folded = self.fold_batch_merges(batch)?;
        let batch = folded.as_ref().unwrap_or(batch);
        // Decoded once: checked here, applied below.
        let entries = batch.entries()?;
        self.check_writable()?;
        {
            let sv = self.super_version();
            let mut checked = u32::MAX;
            for e in &entries {
                // Batches usually write one family, or runs of one: skip repeats cheaply.
                if e.cf != checked {
                    if !sv.version.cfs.contains_key(&e.cf) {
                        return Err(self.cf_not_found(e.cf));
                    }
                    checked = e.cf;
                }
            }
        }
        self.maybe_stall(batch.encoded_bytes() as u64)?;
        if batch.encoded_bytes() <= self.wal.max_payload_bytes() {
            self.commit(batch.payload(), &entries, opts.sync, None)?;
        } else {
            // Larger than one log record: written in parts, committed by the last
            // (`docs/format/batch.md`), atomic all the same.
            let chunk = self.wal.max_payload_bytes() - batch::TXN_HEADER_BYTES;
            let chunks = batch::split(&entries, chunk);
            self.commit_chunks(&chunks, opts.sync, None, || Ok(()))?;
        }
        Ok(())
    }

    /// A commit of one or more batches: one record if there is one, else part records and
    /// a commit record (`docs/format/batch.md`), every entry applied at the commit record's
    /// seqno (the entries of all batches, in order, as one batch: a later write to a key
    /// wins). The parts are pinned in the log until the commit is in a table (invariant T4
    /// of `txn/mod.rs`). `before_commit` runs after the parts, if any, and before the
    /// commit record is reserved (a transaction's first check); if it fails, nothing is
    /// committed. `validate` as in [`DbInner::commit`].
    pub(crate) fn commit_chunks(
        &self,
        chunks: &[WriteBatch],
        sync: Option<bool>,
        validate: Option<&mut Validate<'_>>,
        before_commit: impl FnOnce() -> Result<()>,
    ) -> Result<Seqno> {
        // A transaction's puts into a family with a TTL expire as a batch's do. (A batch
        // from `write` is stamped already: stamping it again finds nothing to do.)
        let stamped: Vec<Option<WriteBatch>> = chunks
            .iter()
            .map(|c| self.stamp(c))
            .collect::<Result<_>>()?;
        let owned: Vec<WriteBatch>;
        let chunks: &[WriteBatch] = if stamped.iter().any(Option::is_some) {
            owned = chunks
                .iter()
                .zip(stamped)
                .map(|(c, s)| s.unwrap_or_else(|| c.clone()))
                .collect();
            &owned
        } else {
            chunks
        };
        let mut entries = Vec::new();
        for c in chunks {
            entries.extend(c.entries()?);
        }
        if chunks.len() == 1 {
            before_commit()?;
            return self.commit(chunks[0].payload(), &entries, sync, validate);
        }
        let (txn, pin) = self.write_parts(&chunks[..chunks.len() - 1])?;
        if let Err(e) = before_commit() {
            // (`visible` is past the parts already: `write_parts` moved it.)
            self.log_pins.lock().remove(&pin);
            return Err(e);
        }
        let last = chunks.last().expect("at least two chunks");
        let payload =
            batch::encode_txn_record(batch::TAG_COMMIT, txn, (chunks.len() - 1) as u32, last);
        let r = self.commit(&payload, &entries, sync, validate);
        let mut pins = self.log_pins.lock();
        match &r {
            Ok(c) => {
                pins.insert(pin, Some(*c));
            }
            Err(_) => {
                pins.remove(&pin);
            }
        }
        r
    }

    /// Writes the part records of a commit too large for one record, pinned first (T4).
    /// Returns the commit's transaction id (the first part's LSN) and the pin.
    fn write_parts(&self, parts: &[WriteBatch]) -> Result<(u64, (u64, u64))> {
        let wal_err = |e| self.on_wal_error(e);
        let no_sync = AppendOptions { sync: Some(false) };
        // Pinned at or below the first part's LSN before it exists: no flush can move the
        // log start past it meanwhile.
        let pin = (self.wal.reserved_lsn(), self.next_pin.fetch_add(1, SeqCst));
        self.log_pins.lock().insert(pin, None);
        crate::kill_point::hit("commit: log start pinned, before the first part");
        let unpin = |e: Error| {
            self.log_pins.lock().remove(&pin);
            e
        };
        let first_len = batch::TXN_HEADER_BYTES + parts[0].encoded_bytes();
        let res = self
            .wal
            .reserve(first_len, no_sync)
            .map_err(wal_err)
            .map_err(unpin)?;
        let txn = res.lsn();
        let p0 = batch::encode_txn_record(batch::TAG_PART, txn, 0, &parts[0]);
        res.write(&p0)
            .and_then(|a| a.wait())
            .map_err(wal_err)
            .map_err(unpin)?;
        // A part's reservation has no writer to move `visible` past it when it completes:
        // move it here, or a flush whose boundary lies past the part waits until some later
        // commit completes (for ever, if none comes while this one is between parts).
        self.advance_visible(&self.inflight.lock());
        for (i, p) in parts.iter().enumerate().skip(1) {
            crate::kill_point::hit("commit: a part record written, more to come");
            let rec = batch::encode_txn_record(batch::TAG_PART, txn, i as u32, p);
            self.wal
                .append_with(&rec, no_sync)
                .map_err(wal_err)
                .map_err(unpin)?;
            self.advance_visible(&self.inflight.lock());
        }
        Ok((txn, pin))
    }

    /// The commit path of batches and transactions (steps 1-8 in `db/mod.rs`): logs
    /// `payload` (whose decoded entries are `entries`) as one record, applies it at its
    /// seqno, and returns the seqno once it is acknowledged and visible. `validate`, a
    /// transaction's check, runs at step 3 with the commit's seqno and its writer slot;
    /// if it fails, nothing is written (the reservation becomes a Void record) and its error
    /// is returned.
    pub(crate) fn commit(
        &self,
        payload: &[u8],
        entries: &[batch::BatchEntry<'_>],
        sync: Option<bool>,
        validate: Option<&mut Validate<'_>>,
    ) -> Result<Seqno> {
        let w = self.register();
        let res = match self.wal.reserve(payload.len(), AppendOptions { sync }) {
            Ok(r) => r,
            Err(e) => {
                self.complete(w);
                return Err(self.on_wal_error(e));
            }
        };
        let lsn = res.lsn();
        w.set_lsn(lsn);
        self.parking.notify();
        // OVERLAY_SEQNO (MAX_SEQNO) marks a transaction's own writes in its reads: no real
        // entry may carry it.
        if lsn >= MAX_SEQNO {
            drop(res);
            self.complete(w);
            self.poison(
                "the log outgrew the 56-bit seqno space",
                &Error::invalid(format!("log position {lsn} is past the largest seqno")),
            );
            return Err(Error::Poisoned);
        }
        if let Some(validate) = validate {
            if let Err(e) = validate(lsn, &w) {
                let abandoned = res.abandon();
                self.complete(w);
                abandoned.map_err(|e| self.on_wal_error(e))?;
                return Err(e);
            }
        }
        let appended = match res.write(payload) {
            Ok(a) => a,
            Err(e) => {
                self.complete(w);
                return Err(self.on_wal_error(e));
            }
        };
        {
            let sv = self.sv.read();
            let mem = mem_for(&sv.mems, lsn);
            let in_place = self.apply_committed(mem, lsn, payload, entries);
            if in_place > 0 {
                self.counters
                    .memtable_values_in_log
                    .fetch_add(in_place, SeqCst);
            }
        }
        // Invariant D1, rule 1 (`read/dead_runs.rs`): in the memtable, not yet visible.
        self.dead_runs.touch(
            entries
                .iter()
                .map(|e| (e.cf, e.key, e.kind.carries_value())),
        );
        w.set_applied();
        self.parking.notify();
        if let Err(e) = appended.wait() {
            // W2: never complete, so `visible` never passes entries that were applied but
            // not acknowledged (the log is poisoned: no write is acknowledged any more).
            return Err(self.on_wal_error(e));
        }
        self.complete(w);
        self.counters
            .user_bytes
            .fetch_add(payload.len() as u64, SeqCst);
        // Poisoned meanwhile: the commit is in the log, but not yet readable.
        self.wait_visible(lsn + 1)?;
        self.maybe_rotate();
        Ok(lsn)
    }

    /// Step 5 of a commit whose record (`payload`, at `lsn`) was written: [`apply`], leaving
    /// large values where the log holds them when `DbBuilder::memtable_values_in_log` allows
    /// and the log is mapped (memtable invariant 3: the mapping and a purge hold are pinned
    /// first). Returns how many values were left in the log.
    fn apply_committed(
        &self,
        mem: &Memtable,
        lsn: Seqno,
        payload: &[u8],
        entries: &[batch::BatchEntry<'_>],
    ) -> u64 {
        // The same conditions as a flush's pointing into the log (`log_blob.rs`): a value
        // left in the log and then copied by the flush would be read back cold.
        // Small values only (most commits): no family's threshold to look up (a lock).
        let longest = entries.iter().map(|e| e.value.len()).max().unwrap_or(0);
        let eligible = self.opts.memtable_values_in_log
            && self.opts.blob_from_log
            && self.opts.sync != silt_wal::SyncMode::Full
            && self
                .opts
                .smallest_blob_threshold()
                .is_some_and(|t| longest >= t);
        // A batch is usually of one family: one lookup of its threshold (a lock) per run.
        let last = std::cell::Cell::new((u32::MAX, None));
        let threshold = |cf: u32| -> Option<usize> {
            let (c, t) = last.get();
            if c == cf {
                return t;
            }
            let t = self.blob_threshold(cf);
            last.set((cf, t));
            t
        };
        let wanted = eligible && entries.iter().any(|e| leaves_in_log(e, &threshold));
        let placed = wanted
            .then(|| self.wal.payload_in_place(lsn))
            .flatten()
            .filter(|(map, at)| at + payload.len() <= map.len());
        let Some((map, at)) = placed else {
            return apply(mem, lsn, entries, Some(payload), |_| true, None);
        };
        // What keeps the segments from a memtable's first seqno: the log's purge hold, and
        // the directory lock, so that a reader outliving this handle keeps any other handle
        // from opening (and recycling) the log.
        let keep = |first: Seqno| -> Box<dyn std::any::Any + Send + Sync> {
            Box::new((self.wal.hold_purge(first), self.dir_lock.lock().clone()))
        };
        // SAFETY: the record at `lsn` was written (`payload`, whole within its segment:
        // `at + payload.len()` is inside the mapping, checked above), and the log rewrites
        // a segment's bytes only once it is purged (recycled), which the purge hold `keep`
        // makes, or another handle after this one, which the lock forbids, prevent.
        let in_log = unsafe { InLog::new(map.as_ptr().add(at), &map, &keep, &threshold) };
        apply(mem, lsn, entries, Some(payload), |_| true, Some(&in_log))
    }

    /// Step 1: a slot for a writer, registered at the log's reservation watermark.
    pub(super) fn register(&self) -> Arc<Writer> {
        let mut f = self.inflight.lock();
        let r0 = self.wal.reserved_lsn();
        let t = f.next_ticket;
        f.next_ticket += 1;
        let w = f.spare.pop().unwrap_or_else(|| Arc::new(Writer::new()));
        w.key.store(r0, SeqCst);
        w.ticket.store(t, SeqCst);
        f.writers.insert((r0, t), w.clone());
        w
    }

    /// Step 7: the writer leaves; `visible` moves to the oldest writer still registered.
    /// A writer that completes has nothing left to apply (W5).
    pub(super) fn complete(&self, w: Arc<Writer>) {
        w.set_applied();
        let mut f = self.inflight.lock();
        f.writers.remove(&w.reg_key());
        self.advance_visible(&f);
        // Reuse the slot only if no validating transaction still looks at it: clones are
        // taken under this lock, so the count cannot grow behind our back.
        if Arc::strong_count(&w) == 1 && f.spare.len() < 64 {
            w.lsn.store(NO_LSN, SeqCst);
            w.applied.store(false, SeqCst);
            f.spare.push(w);
        }
    }

    /// Moves `visible` to the oldest writer still registered, or with none to the log's
    /// reservation watermark. `f` is the locked in-flight set: a writer registers under
    /// that lock at the watermark it reads there, so none can hold an LSN below the value
    /// taken. Reservations no writer holds are a transaction's part records, which carry
    /// nothing to apply (the commit record applies them).
    fn advance_visible(&self, f: &Inflight) {
        let v = match f.writers.keys().next() {
            Some((r0, _)) => *r0,
            None => self.wal.reserved_lsn(),
        };
        self.visible.fetch_max(v, SeqCst);
        self.parking.notify();
    }

    /// Waits until every writer with an LSN below `below` has applied its entries (W5),
    /// `me` excepted. A writer not yet reserved will reserve above `below` (the caller holds
    /// the reservation at `below`) or is about to publish an LSN below it; neither waits on
    /// the caller.
    ///
    /// # Errors
    ///
    /// `Poisoned` if the database was poisoned before they all applied: a check on what
    /// they left half-applied would miss conflicts.
    pub(crate) fn wait_applied_below(&self, below: Seqno, me: Option<&Arc<Writer>>) -> Result<()> {
        let pending: Vec<Arc<Writer>> = {
            let f = self.inflight.lock();
            f.writers
                .range(..(below, 0))
                .map(|(_, w)| w)
                .filter(|w| me.is_none_or(|me| !Arc::ptr_eq(w, me)))
                .cloned()
                .collect()
        };
        for w in pending {
            self.wait_unpoisoned(|| {
                let lsn = w.lsn.load(SeqCst);
                w.applied.load(SeqCst) || (lsn != NO_LSN && lsn > below)
            })?;
        }
        Ok(())
    }

    /// Waits until `visible >= v`: writers registered before us finish in microseconds
    /// (they only insert into a memtable), so spin briefly, yield, then sleep (`Parking`).
    ///
    /// # Errors
    ///
    /// `Poisoned` if the database was poisoned before `visible` reached `v`: a writer below
    /// it may never finish, and what it applied is not all there.
    pub(super) fn wait_visible(&self, v: Seqno) -> Result<()> {
        self.wait_unpoisoned(|| self.visible() >= v)
    }

    /// Waits in `parking` until `ready()`; `Poisoned` if poisoning ended the wait first.
    fn wait_unpoisoned(&self, ready: impl Fn() -> bool) -> Result<()> {
        if self.parking.wait(ready, || self.poisoned.load(SeqCst)) {
            Ok(())
        } else {
            Err(Error::Poisoned)
        }
    }

    /// Before a write of `bytes`: waits while background work is too far behind — slowed
    /// down in proportion to `bytes` in the zone before the limits (`db/throttle.rs`), and
    /// stopped at them (too many frozen memtables with the active one full, or
    /// `l0_stall_tables` level-0 tables).
    pub(crate) fn maybe_stall(&self, bytes: u64) -> Result<()> {
        let mut started: Option<Instant> = None;
        loop {
            self.check_writable()?;
            let sv = self.super_version();
            let frozen = sv.mems.len() - 1;
            let active_full = sv.mems[0].approx_bytes() >= self.opts.memtable_bytes;
            let l0 = sv
                .version
                .cfs
                .values()
                .map(|c| c.l0_runs())
                .max()
                .unwrap_or(0);
            let stall = (frozen >= self.opts.immutable_memtables_max && active_full)
                || l0 >= self.opts.l0_stall_tables;
            if !stall {
                if started.is_none() {
                    self.maybe_delay(bytes, frozen, l0);
                }
                break;
            }
            if let Some(why) = self.no_space.lock().clone() {
                // The flush or compaction this write waits for cannot write: fail now rather
                // than stall until space frees. Nothing of this write was applied.
                return Err(Error::NoSpace {
                    op: "write (stalled: background work cannot write)",
                    path: None,
                    source: std::io::Error::new(std::io::ErrorKind::StorageFull, why),
                });
            }
            if started.is_none() {
                started = Some(Instant::now());
                self.counters.stalls.fetch_add(1, SeqCst);
            }
            self.notify_bg();
            let mut g = self.bg_lock.lock();
            self.bg_cv.wait_for(&mut g, STALL_WAIT);
        }
        if let Some(s) = started {
            self.counters
                .stall_micros
                .fetch_add(s.elapsed().as_micros() as u64, SeqCst);
        }
        Ok(())
    }

    /// The slowdown before a stall. With every frozen memtable slot taken (the next freeze
    /// would wait), writers may fill the active memtable only as fast as flushes drain
    /// (four fifths of the measured flush rate, so the flush finishes first); with level 0
    /// between `l0_slowdown_tables` and `l0_stall_tables`, the rate falls linearly from the
    /// flush rate toward zero at the stall.
    fn maybe_delay(&self, bytes: u64, frozen: usize, l0: usize) {
        let flush = self.throttle.flush_rate();
        let mut rate = u64::MAX;
        if frozen >= self.opts.immutable_memtables_max {
            rate = rate.min(flush / 5 * 4);
        }
        let (slow, stop) = (self.opts.l0_slowdown_tables, self.opts.l0_stall_tables);
        if l0 >= slow && stop > slow {
            let left = (stop - l0.min(stop)) as u64;
            rate = rate.min(flush / (stop - slow) as u64 * left);
        }
        if rate == u64::MAX {
            return;
        }
        let wait = self.throttle.delay(bytes, rate);
        self.counters.delayed_writes.fetch_add(1, SeqCst);
        if !wait.is_zero() {
            std::thread::sleep(wait);
            self.counters
                .delay_micros
                .fetch_add(wait.as_micros() as u64, SeqCst);
        }
    }

    pub(super) fn maybe_rotate(&self) {
        if self.wants_rotation(&self.sv.read().mems[0]) {
            self.rotate(false);
        }
    }

    /// Whether the active memtable `m` should be frozen: it is full, or a read step passed
    /// over enough of its entries to ask for a flush (`Memtable::note_scan`).
    fn wants_rotation(&self, m: &Memtable) -> bool {
        m.approx_bytes() >= self.opts.memtable_bytes || m.flush_requested()
    }

    /// Freezes the active memtable (if it is full, or `force` and it is not empty) and
    /// starts a new one at the log's reservation watermark. Returns whether it did.
    pub(crate) fn rotate(&self, force: bool) -> bool {
        let _r = self.rotating.lock();
        {
            let mut sv = self.sv.write();
            let active = &sv.mems[0];
            let full = active.approx_bytes() >= self.opts.memtable_bytes;
            let asked = !full && active.flush_requested();
            if !(full || asked || (force && !active.is_empty())) {
                return false;
            }
            if !force && sv.mems.len() > self.opts.immutable_memtables_max {
                return false;
            }
            if asked && !force {
                self.counters.scan_flushes.fetch_add(1, SeqCst);
            }
            // Every writer holding the read lock got its LSN before we got the write lock,
            // so below this; every later writer gets one at or above it.
            let boundary = self.wal.reserved_lsn();
            *sv = Arc::new(sv.rotated(Arc::new(self.new_memtable(boundary))));
        }
        self.notify_bg();
        true
    }
}

impl DbInner {
    /// A new active memtable owning seqnos from `first_seqno`, with this database's
    /// options.
    pub(crate) fn new_memtable(&self, first_seqno: Seqno) -> Memtable {
        new_memtable(&self.opts, &self.memtable_chunks, first_seqno)
    }
}

/// A memtable owning seqnos from `first_seqno`, with the options `opts` give it and its
/// memory from `pool` (also the first one, made before the `DbInner` exists).
pub(crate) fn new_memtable(
    opts: &DbBuilder,
    pool: &Arc<ChunkPool>,
    first_seqno: Seqno,
) -> Memtable {
    Memtable::new_in(first_seqno, Some(pool.clone()))
        .with_scan_flush_trigger(opts.memtable_scan_flush_trigger)
        .with_bloom_bytes(opts.memtable_bloom_bytes())
}

/// The memtable owning `seqno`: the newest whose first seqno is at or below it.
pub(super) fn mem_for(mems: &[Arc<Memtable>], seqno: Seqno) -> &Arc<Memtable> {
    mems.iter()
        .find(|m| m.first_seqno() <= seqno)
        .unwrap_or_else(|| &mems[mems.len() - 1])
}

/// Where a commit's payload lies in the log's mapping, for [`apply`] to leave values there
/// (`DbBuilder::memtable_values_in_log`): `at` is the payload's first byte in the mapping
/// (the memtable has pinned it: memtable invariant 3), `threshold` a column family's
/// separation threshold (values at least that long are left in the log).
pub(super) struct InLog<'a> {
    at: *const u8,
    map: &'a Arc<silt_vfs::ReadMap>,
    keep: &'a dyn Fn(Seqno) -> Box<dyn std::any::Any + Send + Sync>,
    threshold: &'a dyn Fn(u32) -> Option<usize>,
}

impl<'a> InLog<'a> {
    /// The payload [`apply`] is given lies at `at` in `map`; `keep(first seqno)` returns
    /// what keeps the log's segments from a memtable's first seqno on (memtable invariant
    /// 3), pinned by the memtable before its first value left in the log.
    ///
    /// # Safety
    ///
    /// The payload `apply` is then called with is the bytes at `at`, all within `map`, and
    /// `map`'s bytes there stay unchanged while `keep`'s value lives.
    pub(super) unsafe fn new(
        at: *const u8,
        map: &'a Arc<silt_vfs::ReadMap>,
        keep: &'a dyn Fn(Seqno) -> Box<dyn std::any::Any + Send + Sync>,
        threshold: &'a dyn Fn(u32) -> Option<usize>,
    ) -> InLog<'a> {
        InLog {
            at,
            map,
            keep,
            threshold,
        }
    }
}

/// Whether the memtable leaves `e`'s value in the log (when it knows where): a `Put` whose
/// value is at least its family's threshold.
fn leaves_in_log(e: &batch::BatchEntry<'_>, threshold: &dyn Fn(u32) -> Option<usize>) -> bool {
    e.kind == Kind::Put && threshold(e.cf).is_some_and(|t| e.value.len() >= t)
}

/// Inserts a batch's entries at `seqno`; within a batch the last write to a key wins, so
/// each (cf, key) gets one entry. A batch already in (cf, key) order — a bulk load's — has no
/// duplicates to drop and is inserted in that order with one splice, about two key
/// comparisons per entry; any other is sorted first (its duplicates then side by side) and
/// inserted in that order the same way.
///
/// `payload` is the log record at `seqno` when the entries were decoded from it: each entry
/// whose value lies in it is inserted with the value's offset there, so a flush can point at
/// the value in the log without reading the log back (`db/log_blob.rs`). Entries whose value
/// lies elsewhere (a commit's parts) are inserted without. With `in_log` (the payload is
/// `payload`'s bytes in the log's mapping), a `Put` whose value is at least its family's
/// threshold is left there ([`Memtable::insert_in_log`]). Returns how many were.
pub(super) fn apply(
    mem: &Memtable,
    seqno: Seqno,
    entries: &[batch::BatchEntry<'_>],
    payload: Option<&[u8]>,
    keep: impl Fn(u32) -> bool,
    in_log: Option<&InLog<'_>>,
) -> u64 {
    let logged = |e: &batch::BatchEntry<'_>| -> u32 {
        let Some(p) = payload else { return 0 };
        let (base, at) = (p.as_ptr() as usize, e.value.as_ptr() as usize);
        match at.checked_sub(base) {
            Some(off) if off + e.value.len() <= p.len() && !e.value.is_empty() => {
                u32::try_from(off)
                    .ok()
                    .and_then(|o| o.checked_add(1))
                    .unwrap_or(0)
            }
            _ => 0,
        }
    };
    let mut in_place = 0;
    let mut pinned = false;
    let mut insert = |splice: &mut Splice, e: &batch::BatchEntry<'_>| {
        let at = logged(e);
        if let Some(il) = in_log {
            if at != 0 && leaves_in_log(e, il.threshold) {
                if !pinned {
                    // Memtable invariant 3: before the first value left in the log.
                    mem.pin_log(il.map, |first| (il.keep)(first));
                    pinned = true;
                }
                // SAFETY: `at - 1` is the value's offset in the payload (`logged`), whose
                // bytes lie at `il.at` in the mapping just pinned, unchanged while the
                // memtable lives (`InLog::new`'s contract).
                let inserted = unsafe {
                    let v = il.at.add(at as usize - 1);
                    mem.insert_in_log(splice, e.cf, e.key, seqno, e.kind, e.value, v, at)
                };
                if inserted {
                    in_place += 1;
                }
                return;
            }
        }
        mem.insert_with(splice, e.cf, e.key, seqno, e.kind, e.value, at);
    };
    let mut splice = Splice::default();
    if entries.len() == 1 {
        let e = &entries[0];
        if keep(e.cf) {
            insert(&mut splice, e);
        }
        return in_place;
    }
    let sorted = entries
        .windows(2)
        .all(|w| (w[0].cf, w[0].key) < (w[1].cf, w[1].key));
    if sorted {
        for e in entries {
            if keep(e.cf) {
                insert(&mut splice, e);
            }
        }
        return in_place;
    }
    // In (cf, key) order, the last write to each key first among its equals: the others
    // are dropped, and the rest go in with one splice, each a finger search from the last.
    let mut order: Vec<usize> = (0..entries.len()).collect();
    order.sort_unstable_by(|&a, &b| {
        let (x, y) = (&entries[a], &entries[b]);
        (x.cf, x.key).cmp(&(y.cf, y.key)).then(b.cmp(&a))
    });
    let mut prev: Option<&batch::BatchEntry<'_>> = None;
    for &i in &order {
        let e = &entries[i];
        if prev.is_some_and(|p| (p.cf, p.key) == (e.cf, e.key)) {
            continue;
        }
        prev = Some(e);
        if keep(e.cf) {
            insert(&mut splice, e);
        }
    }
    in_place
}
