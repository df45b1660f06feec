//! Opening a database: the directory checks (`dir.rs`), the manifest and the log
//! recovered, the log replayed into memtables, the background threads started.

use super::flush::flush_loop;
use super::write::apply;
use super::*;

impl DbBuilder {
    /// Opens (or creates) the database, recovering it after a crash.
    ///
    /// # Errors
    ///
    /// `Io` if the directory cannot be read or written; `Locked` if another handle (of
    /// this process or another) has the database open; `Corruption` if the manifest, a
    /// table or the log is damaged where acknowledged data lived, a table the manifest
    /// names is missing or cut, or a table file is newer than the manifest;
    /// `InvalidArgument` for a bad option, a path that is not a directory, or a missing
    /// database with `create_if_missing(false)`. What open found and did is in
    /// [`Db::recovery_report`].
    pub fn open(self) -> Result<Db> {
        Db::open_with(self)
    }
}

impl Db {
    /// Opens (or creates) the database at `path` with default options.
    ///
    /// # Errors
    ///
    /// As [`DbBuilder::open`].
    pub fn open(path: impl AsRef<Path>) -> Result<Db> {
        Db::builder(path).open()
    }

    /// Opens the database: see `docs/design.md`, "What open does with the directory", for
    /// the order of the steps and why nothing is changed on disk before every check passed.
    pub(crate) fn open_with(opts: DbBuilder) -> Result<Db> {
        if opts.read_only {
            return Db::open_read_only(opts);
        }
        let fs: Arc<dyn FileSystem> = opts.fs.clone().unwrap_or_else(|| OsFs::new());
        let dir = opts.path.clone();
        let tables_dir = dir.join("tables");
        let wal_dir = dir.join("wal");
        dir::make_dir(&*fs, &dir)?;
        let lock = dir::lock(&*fs, &dir)?;
        let recovered = if Manifest::exists(&*fs, &dir)? {
            Some(Manifest::recover(fs.clone(), &dir)?)
        } else if let Some(f) = database_files(&*fs, &tables_dir, &wal_dir) {
            // `create` installs `CURRENT` before any table or log segment exists, so these
            // belong to a database whose `CURRENT` was lost: creating a new one would delete
            // them.
            return Err(Error::corruption(
                dir.join("CURRENT"),
                0,
                format!(
                    "CURRENT is missing, but {} belongs to a database; restore CURRENT \
                     (it names the newest MANIFEST-* file)",
                    f.display()
                ),
            ));
        } else if opts.create_if_missing {
            None
        } else {
            return Err(Error::invalid(format!(
                "no database at {}; use create_if_missing(true) to create one",
                dir.display()
            )));
        };

        // Checks, before anything on disk changes: every table the recovered version names
        // is whole, and no table file is newer than the manifest (invariant O1 of `db/dir.rs`).
        let mut tables_checked = 0;
        let mut garbage = Vec::new();
        if let Some(r) = &recovered {
            tables_checked = dir::check_tables(&*fs, &tables_dir, r.state(), opts.paranoid_checks)?;
            let u = dir::unreferenced_tables(&*fs, &tables_dir, r.state())?;
            if !u.newer.is_empty() {
                return Err(dir::newer_tables_error(r.path(), r.state(), &u.newer));
            }
            garbage = u.garbage;
        }
        let log_start = recovered.as_ref().map_or(0, |r| r.state().log_start);
        // A new database gets its manifest before any log segment exists, so that a crash
        // never leaves segments without `CURRENT` (which open refuses, above).
        let created = match recovered {
            Some(_) => None,
            None => {
                for d in [&tables_dir, &wal_dir] {
                    fs.create_dir_all(d)
                        .map_err(|e| Error::io("create directory", Some(d.clone()), e))?;
                }
                Some(Manifest::create(fs.clone(), &dir)?)
            }
        };
        let wal = Wal::open(
            &wal_dir,
            silt_wal::Options::default()
                .sync(opts.sync)
                .segment_bytes(opts.log_segment_bytes())
                // A new segment (none purged to reuse: a load whose segments became log
                // blobs) is allocated, not zero-filled, unless most commits are synced:
                // zeros would write a linked value's bytes a second time (`wal.md`).
                .preallocate(if opts.sync == silt_wal::SyncMode::Full {
                    silt_wal::Preallocate::Recycle
                } else {
                    silt_wal::Preallocate::RecycleElseAllocate
                })
                // Records below log start are in tables: damage there loses nothing.
                .required_from(log_start)
                .fs(fs.clone()),
        )?;
        // A flush purges about a memtable's worth of segments: keep them all for reuse, so
        // the next memtable's segments are not zero-filled again (the pool is emptied once
        // a purge reaches the log's end). Counted in the log's own segment size, which an
        // existing log keeps whatever `wal_segment_bytes` says now.
        wal.set_recycle_segments(
            opts.memtable_bytes
                .div_ceil(wal.segment_bytes())
                .max(2)
                .try_into()
                .unwrap_or(usize::MAX),
        );
        let first = wal.recovery().first_lsn;
        if first / wal.segment_bytes() > log_start / wal.segment_bytes() {
            // Flushes never purge the segment holding `log_start` (W3): records from
            // `log_start` on are gone, so replay would silently skip acknowledged writes.
            return Err(Error::corruption(
                wal_dir.clone(),
                log_start,
                format!(
                    "the manifest says replay starts at LSN {log_start}, but the log's oldest \
                     record is at LSN {first}: the manifest is older than the log"
                ),
            ));
        }
        if wal.reserved_lsn() < log_start {
            // The manifest says the log was durable up to `log_start` (invariant W3); a log
            // ending before it lost durable records, and new writes would reuse seqnos
            // below data already in tables.
            return Err(Error::corruption(
                wal_dir.clone(),
                wal.reserved_lsn(),
                format!(
                    "the log ends at LSN {} but the manifest has tables up to LSN {log_start}",
                    wal.reserved_lsn(),
                ),
            ));
        }

        // Every check passed: make the recovered state the live manifest (a new, durable
        // file), and only then dispose of what it makes garbage (invariant O3).
        let manifest_path = recovered.as_ref().map(|r| r.path().to_path_buf());
        let manifest_torn_tail = recovered
            .as_ref()
            .and_then(|r| r.torn_tail())
            .map(|(at, n, why)| (at, n, why.to_string()));
        let (manifest, mut disposal) = match (recovered, created) {
            (Some(r), _) => r.commit()?,
            (None, Some(m)) => (m, Default::default()),
            (None, None) => unreachable!("a database is either recovered or created"),
        };
        fs.create_dir_all(&tables_dir)
            .map_err(|e| Error::io("create directory", Some(tables_dir.clone()), e))?;
        crate::kill_point::hit("open: new manifest durable, before removing garbage tables");
        for f in garbage {
            // After a torn manifest tail, the torn record may have named these tables (a
            // crash mid-append, or a cut that looks like one): their data is also in named
            // tables or in the log replayed below (see `db/dir.rs`), but keep them as evidence.
            if manifest_torn_tail.is_some() {
                let to = crate::lost::set_aside(&*fs, &dir, &f)?;
                disposal.set_aside.push((f, to));
                continue;
            }
            match fs.remove(&f) {
                Ok(()) => disposal.removed.push(f),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io("remove garbage table", Some(f), e)),
            }
        }
        let report = RecoveryReport {
            created: manifest_path.is_none(),
            manifest: manifest_path,
            manifest_torn_tail,
            tables_checked,
            wal: wal.recovery().clone(),
            records_replayed: 0,
            removed: disposal.removed,
            set_aside: disposal.set_aside,
        };

        let inner = DbInner::assemble(
            opts,
            fs,
            dir,
            tables_dir,
            wal,
            manifest,
            &report,
            Some(lock),
        );
        let records_replayed = inner.replay(log_start)?;
        *inner.report.lock() = RecoveryReport {
            records_replayed,
            ..report
        };
        inner.visible.store(inner.wal.reserved_lsn(), SeqCst);
        DbInner::start_threads(&inner)?;
        Ok(Db { inner })
    }
}

impl DbInner {
    /// The shared state of a database opened from `manifest` and `wal`: caches, the first
    /// version and super-version (one empty memtable at the manifest's log start), the
    /// counters. Read-write and read-only opens both build it here.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn assemble(
        opts: DbBuilder,
        fs: Arc<dyn FileSystem>,
        dir: PathBuf,
        tables_dir: PathBuf,
        wal: Wal,
        manifest: Manifest,
        report: &RecoveryReport,
        lock: Option<Box<dyn FileLock>>,
    ) -> Arc<DbInner> {
        let blocks = Arc::new(BlockCache::new(opts.block_cache_bytes));
        let unlinker = Arc::new(crate::unlink::Unlinker::new(fs.clone()));
        let tables = Arc::new(TableCache::new(
            fs.clone(),
            tables_dir.clone(),
            opts.table_cache_tables,
            blocks,
            unlinker.clone(),
        ));
        let blob_files = Arc::new(crate::vlog::BlobFiles::new(
            fs.clone(),
            tables_dir.clone(),
            opts.table_cache_tables,
            unlinker,
        ));
        let mut builder = VersionBuilder::new(tables.clone(), blob_files.clone());
        let version = Arc::new(builder.build(manifest.state()));
        let log_start = manifest.state().log_start;
        let next_table_id = manifest.state().next_table_id;
        let table_opts = TableOptions {
            block_size_bytes: opts.block_size_bytes,
            bloom_bits_per_key: opts.bloom_bits_per_key,
            compression: opts.compression,
            ..TableOptions::default()
        };
        let cf_names = manifest
            .state()
            .cfs
            .values()
            .map(|c| (c.id, Arc::from(c.name.as_str())))
            .collect();
        // A memtable's worth of chunks of flushed memtables, for the next ones.
        let memtable_chunks = Arc::new(ChunkPool::new(opts.memtable_bytes));
        let first = Arc::new(super::write::new_memtable(
            &opts,
            &memtable_chunks,
            log_start,
        ));
        Arc::new(DbInner {
            fs,
            dir,
            tables_dir,
            wal,
            sv: RwLock::new(Arc::new(SuperVersion::new(first, version))),
            state: Mutex::new(State { manifest, builder }),
            inflight: Mutex::new(Inflight::default()),
            parking: super::Parking::default(),
            visible: AtomicU64::new(log_start),
            snapshots: Mutex::new(BTreeMap::new()),
            tables,
            blob_files,
            table_opts,
            next_table_id: AtomicU64::new(next_table_id),
            table_ids_reserved: AtomicU64::new(next_table_id),
            report: Mutex::new(report.clone()),
            cf_names: Mutex::new(cf_names),
            dir_lock: Mutex::new(lock.map(Arc::from)),
            purge_owed: AtomicU64::new(0),
            rotating: Mutex::new(()),
            bg_lock: Mutex::new(()),
            bg_cv: Condvar::new(),
            busy: Mutex::new(Default::default()),
            flush_running: AtomicBool::new(false),
            compact_pointer: Mutex::new(BTreeMap::new()),
            poisoned: AtomicBool::new(false),
            no_space: Mutex::new(None),
            bg_error: Mutex::new(None),
            stats_dump: Mutex::new(Default::default()),
            closing: AtomicBool::new(false),
            counters: Counters::default(),
            threads: Mutex::new(Vec::new()),
            handles: std::sync::atomic::AtomicUsize::new(1),
            throttle: Default::default(),
            locks: Default::default(),
            next_txn_id: AtomicU64::new(1),
            log_pins: Mutex::new(BTreeMap::new()),
            next_pin: AtomicU64::new(1),
            dead_runs: Arc::default(),
            memtable_chunks,
            opts,
        })
    }

    /// Replays the log from `log_start` into memtables, flushing when one fills. Returns
    /// the number of records replayed.
    pub(super) fn replay(&self, log_start: Seqno) -> Result<u64> {
        let mut replayed = 0;
        let (live, next_cf_id): (HashSet<u32>, u32) = {
            let st = self.state.lock();
            let s = st.manifest.state();
            (s.cfs.keys().copied().collect(), s.next_cf_id)
        };
        let reader = self.wal.read_from(log_start)?;
        let corrupt = |lsn: u64, reason: String| Error::Corruption {
            file: self.dir.join("wal"),
            offset: lsn,
            reason,
        };
        // The parts of transactions whose commit record is still ahead
        // (`docs/format/batch.md`): payloads by transaction id, in index order.
        let mut parts: HashMap<u64, Vec<Vec<u8>>> = HashMap::new();
        for rec in reader {
            let rec = rec?;
            let record = batch::decode_record(&rec.payload).map_err(|e| {
                corrupt(
                    rec.lsn,
                    format!("log record at LSN {} holds a bad batch: {}", rec.lsn, e.0),
                )
            })?;
            // A transaction whose first part lies before the log start was either committed
            // and flushed (its pin held the log start at its first part until then, T4; its
            // commit record may still lie after the start, held there by another
            // transaction's pin) or never committed (its commit failed and unpinned it): its
            // later parts, and its commit record if any, are not replayed.
            if matches!(
                record,
                batch::Record::Part { txn, .. } | batch::Record::Commit { txn, .. }
                    if txn < log_start
            ) {
                continue;
            }
            let (entries, done) = match record {
                batch::Record::Batch(entries) => (entries, Vec::new()),
                batch::Record::Part { txn, index, .. } => {
                    let seen = parts.entry(txn).or_default();
                    if seen.len() != index as usize {
                        return Err(corrupt(
                            rec.lsn,
                            format!(
                                "log record at LSN {} is part {index} of transaction {txn}, \
                                 after {} of its parts",
                                rec.lsn,
                                seen.len()
                            ),
                        ));
                    }
                    if index == 0 {
                        // T4 during replay too: a flush below must not move the log start
                        // past these parts before their commit is in a table.
                        self.log_pins.lock().insert((rec.lsn, 0), None);
                    }
                    seen.push(rec.payload);
                    continue;
                }
                batch::Record::Commit {
                    txn,
                    parts: n,
                    entries,
                } => {
                    let done = parts.remove(&txn).unwrap_or_default();
                    if let Some(pin) = self.log_pins.lock().get_mut(&(txn, 0)) {
                        *pin = Some(rec.lsn);
                    }
                    if done.len() != n as usize {
                        return Err(corrupt(
                            rec.lsn,
                            format!(
                                "log record at LSN {} commits transaction {txn} of {n} parts, \
                                 but replay found {} of them",
                                rec.lsn,
                                done.len()
                            ),
                        ));
                    }
                    (entries, done)
                }
            };
            let mut all = Vec::new();
            for p in &done {
                match batch::decode_record(p) {
                    Ok(batch::Record::Part { entries, .. }) => all.extend(entries),
                    _ => unreachable!("parts were decoded when they were read"),
                }
            }
            all.extend(entries);
            // A dropped column family's writes are skipped; one the manifest never created
            // (an id at or above `next_cf_id`) means the manifest lost its creation.
            if let Some(e) = all.iter().find(|e| e.cf >= next_cf_id) {
                return Err(corrupt(
                    rec.lsn,
                    format!(
                        "log record at LSN {} writes to column family {}, which the manifest \
                         never created (next id {next_cf_id}): the manifest is older than \
                         the log",
                        rec.lsn, e.cf
                    ),
                ));
            }
            let mem = self.sv.read().mems[0].clone();
            // Replayed values are copied: the record is in the reader's buffer.
            apply(
                &mem,
                rec.lsn,
                &all,
                Some(&rec.payload),
                |cf| live.contains(&cf),
                None,
            );
            replayed += 1;
            // A read-only handle keeps everything it replays in memory: it writes nothing.
            if mem.approx_bytes() >= self.opts.memtable_bytes && !self.opts.read_only {
                let boundary = rec.lsn + 1;
                {
                    let mut sv = self.sv.write();
                    *sv = Arc::new(sv.rotated(Arc::new(self.new_memtable(boundary))));
                }
                self.flush_and_purge(mem, boundary)?;
            }
        }
        // Parts no commit record followed are dropped: nothing of them is applied.
        let mut pins = self.log_pins.lock();
        for txn in parts.keys() {
            pins.remove(&(*txn, 0));
        }
        Ok(replayed)
    }

    pub(super) fn start_threads(inner: &Arc<DbInner>) -> Result<()> {
        let mut threads = inner.threads.lock();
        let w = Arc::downgrade(inner);
        threads.push(spawn("silt-flush", move || flush_loop(w))?);
        for i in 1..inner.opts.background_threads {
            let w = Arc::downgrade(inner);
            threads.push(spawn(&format!("silt-compact-{i}"), move || {
                super::compact::compaction_loop(w)
            })?);
        }
        Ok(())
    }
}

pub(super) fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .map_err(|e| Error::io("spawn thread", None, e))
}

/// A table file or log segment in the directories of a database, if there is one.
pub(super) fn database_files(
    fs: &dyn FileSystem,
    tables_dir: &Path,
    wal_dir: &Path,
) -> Option<PathBuf> {
    [(tables_dir, ".sst"), (wal_dir, ".wal")]
        .into_iter()
        .filter_map(|(d, ext)| fs.list(d).ok().map(|files| (files, ext)))
        .find_map(|(files, ext)| {
            files
                .into_iter()
                .find(|f| f.to_str().is_some_and(|n| n.ends_with(ext)))
        })
}
