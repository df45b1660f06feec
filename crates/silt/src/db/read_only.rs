//! Opening a database read-only ([`DbBuilder::read_only`]): for tools, and for a second
//! process that reads a database another process writes. The rules and why are in
//! `docs/design.md`, "Read-only open".
//!
//! Invariants:
//! * **R1** Nothing under the database directory is created, written, renamed or removed:
//!   no lock file is taken, the manifest is read with [`Manifest::recover`] (which only
//!   reads) and never committed, the log is read with [`Wal::open_read_only`], replayed
//!   records stay in memory (no flush), no background thread runs, and every write path
//!   returns [`Error::ReadOnly`] (`DbInner::check_writable`).
//! * **R2** The handle reads one fixed state: the manifest as it was when read, and the
//!   log from its log start to the first record not yet whole. That is a seqno prefix of
//!   the writer's history (the log's prefix rule, and W3: tables hold only seqnos below
//!   log start), containing every write acknowledged before the open began.
//! * **R3** A live writer elsewhere may move on while this opens: rewrite the manifest,
//!   flush and purge log segments, compact tables away. Each such race shows as a missing
//!   file or a failed consistency check; open then retries from the start if the
//!   directory changed meanwhile ([`Fingerprint`]), and returns the error if it did not
//!   (real damage). After the replay, the log segments it read are checked to still be
//!   there ([`Wal::check_unpurged`]: names are never reused, so none was recycled under it).
//! * **R4** The tables (and blob files) of the state are opened at open and kept open, up
//!   to `table_cache_tables` of them, so a writer compacting them away later does not take
//!   them from this handle. Beyond that bound they are opened on demand, and a read of a
//!   table deleted since fails with `Io` naming it (as RocksDB's read-only instances).

use super::open::database_files;
use super::*;

/// How many times open retries after the directory changed under it.
const ATTEMPTS_MAX: usize = 20;

/// The names and lengths of the files of a database directory (top, `tables/`, `wal/`):
/// a writer that moved on between two readings changed it.
#[derive(PartialEq, Eq)]
struct Fingerprint(Vec<(PathBuf, u64)>);

impl Fingerprint {
    fn take(fs: &dyn FileSystem, dir: &Path) -> Fingerprint {
        let mut out = Vec::new();
        for d in [dir.to_path_buf(), dir.join("tables"), dir.join("wal")] {
            for p in fs.list(&d).unwrap_or_default() {
                // Never open the lock file: with POSIX locks, closing any descriptor of it
                // would release the lock a writer in this process holds.
                if p.file_name() == Some(dir::LOCK_FILE.as_ref()) {
                    continue;
                }
                // A writer's STATS dump is a view, not state (docs/format/stats.md): its
                // rewrites every few seconds are no reason to read the state again.
                if p.file_name()
                    .is_some_and(|n| n == super::stats::STATS_FILE || n == super::stats::STATS_TMP)
                {
                    continue;
                }
                let len = fs.open(&p).and_then(|f| f.len()).unwrap_or(u64::MAX);
                out.push((p, len));
            }
        }
        Fingerprint(out)
    }
}

impl Db {
    /// Opens read-only (R1–R4), retrying while a writer elsewhere changes the directory.
    pub(super) fn open_read_only(mut opts: DbBuilder) -> Result<Db> {
        // A read-only handle never syncs its (closed) log.
        opts.sync = silt_wal::SyncMode::None;
        let fs: Arc<dyn FileSystem> = opts.fs.clone().unwrap_or_else(|| OsFs::new());
        let mut attempt = 0;
        loop {
            let before = Fingerprint::take(&*fs, &opts.path);
            match Db::try_open_read_only(opts.clone(), fs.clone()) {
                Ok(db) => return Ok(db),
                Err(e) => {
                    attempt += 1;
                    let racy = matches!(e, Error::Corruption { .. } | Error::Io { .. });
                    if !racy
                        || attempt >= ATTEMPTS_MAX
                        || Fingerprint::take(&*fs, &opts.path) == before
                    {
                        return Err(e);
                    }
                    std::thread::sleep(Duration::from_millis(attempt as u64));
                }
            }
        }
    }

    fn try_open_read_only(opts: DbBuilder, fs: Arc<dyn FileSystem>) -> Result<Db> {
        let dir = opts.path.clone();
        let tables_dir = dir.join("tables");
        let wal_dir = dir.join("wal");
        if !Manifest::exists(&*fs, &dir)? {
            if let Some(f) = database_files(&*fs, &tables_dir, &wal_dir) {
                return Err(Error::corruption(
                    dir.join("CURRENT"),
                    0,
                    format!(
                        "CURRENT is missing, but {} belongs to a database; restore CURRENT, \
                         or run repair",
                        f.display()
                    ),
                ));
            }
            return Err(Error::invalid(format!(
                "no database at {} (a read-only open creates none)",
                dir.display()
            )));
        }
        let recovered = Manifest::recover(fs.clone(), &dir)?;
        let tables_checked =
            dir::check_tables(&*fs, &tables_dir, recovered.state(), opts.paranoid_checks)?;
        // Table files newer than the state read are not refused here (as a read-write open
        // does): a live writer creates them after reserving their ids in a manifest record
        // this handle may not have read. Read-only, nothing is deleted on their account.
        let log_start = recovered.state().log_start;
        let wal = Wal::open_read_only(
            &wal_dir,
            silt_wal::Options::default()
                .sync(silt_wal::SyncMode::None)
                .segment_bytes(opts.log_segment_bytes())
                .required_from(log_start)
                .fs(fs.clone()),
        )?;
        if let Some(d) = &wal.recovery().cut {
            if d.kind == silt_wal::DamageKind::DurableLost {
                return Err(Error::corruption(
                    d.file.clone(),
                    d.offset,
                    format!(
                        "{}, below the durable watermark a later record carries: synced \
                         records are damaged",
                        d.reason
                    ),
                ));
            }
        }
        let first = wal.recovery().first_lsn;
        if first / wal.segment_bytes() > log_start / wal.segment_bytes() {
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
            return Err(Error::corruption(
                wal_dir.clone(),
                wal.reserved_lsn(),
                format!(
                    "the log ends at LSN {} but the manifest has tables up to LSN {log_start}",
                    wal.reserved_lsn(),
                ),
            ));
        }
        let report = RecoveryReport {
            created: false,
            manifest: Some(recovered.path().to_path_buf()),
            manifest_torn_tail: recovered
                .torn_tail()
                .map(|(at, n, why)| (at, n, why.to_string())),
            tables_checked,
            wal: wal.recovery().clone(),
            records_replayed: 0,
            removed: Vec::new(),
            set_aside: Vec::new(),
        };
        let manifest = recovered.into_read_only();
        let pin_max = opts.table_cache_tables;
        let table_ids: Vec<u64> = manifest.state().table_ids().take(pin_max).collect();
        let blob_ids: Vec<u64> = manifest
            .state()
            .blobs
            .keys()
            .copied()
            .take(pin_max)
            .collect();
        let inner = DbInner::assemble(opts, fs, dir, tables_dir, wal, manifest, &report, None);
        inner.tables.pin(table_ids.into_iter())?;
        inner.blob_files.pin(blob_ids.into_iter())?;
        let records_replayed = inner.replay(log_start)?;
        let tail = inner.wal.reserved_lsn();
        inner.wal.check_unpurged(log_start, tail)?;
        *inner.report.lock() = RecoveryReport {
            records_replayed,
            ..report
        };
        inner.visible.store(tail, SeqCst);
        Ok(Db { inner })
    }
}
