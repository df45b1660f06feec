//! What a database reports about itself: [`Stats`], [`LevelStats`], and the entries of one
//! key for diagnostics (feature `testing`).

use super::*;

impl Db {
    /// Every stored entry of `key` in `cf`, per source (memtables, then tables by level),
    /// for diagnostics: `"L{level} t{id}: seqno kind"`. Feature `testing`; not a stable
    /// interface.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub fn debug_entries(&self, cf: &ColumnFamily, key: &[u8]) -> Vec<String> {
        let sv = self.inner.super_version();
        let mut out = Vec::new();
        let mut dump = |name: String, it: &mut dyn crate::iter::InternalIterator| {
            it.seek(&key::seek_key(key, MAX_SEQNO + 1));
            while it.valid() {
                match key::parse(it.key()) {
                    Some(p) if p.user_key == key => out.push(format!(
                        "{name}: {} {:?} len {}",
                        p.seqno,
                        p.kind,
                        it.value().len()
                    )),
                    _ => break,
                }
                it.next();
            }
        };
        for (i, m) in sv.mems.iter().enumerate() {
            dump(
                format!("mem{i} (from {})", m.first_seqno()),
                &mut m.iter(cf.id),
            );
        }
        if let Some(cfv) = sv.version.cfs.get(&cf.id) {
            for (l, tables) in cfv.levels.iter().enumerate() {
                for t in tables {
                    if let Ok(table) = t.table() {
                        let mut it = crate::sstable::TableIter::new_with(&table, false);
                        dump(
                            format!(
                                "L{l} t{} [{}..{}]",
                                t.meta.id, t.meta.smallest_seqno, t.meta.largest_seqno
                            ),
                            &mut it,
                        );
                    }
                }
            }
        }
        out
    }

    /// Counters and sizes; see [`Stats`].
    pub fn stats(&self) -> Stats {
        self.inner.stats()
    }
}

/// Sizes of one level, summed over column families.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LevelStats {
    /// Tables in the level.
    pub tables: u64,
    /// Bytes of those tables.
    pub bytes: u64,
}

/// What [`Db::stats`] reports.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Stats {
    /// Per level (0 to 6), over every column family.
    pub levels: Vec<LevelStats>,
    /// Bytes in memtables (active and frozen).
    pub memtable_bytes: u64,
    /// Frozen memtables waiting for flush.
    pub immutable_memtables: u64,
    /// Memory of flushed memtables kept (resident) for the next ones, at most
    /// `memtable_bytes` of the options: a new memtable's pages then need no zeroing by the
    /// kernel.
    pub memtable_pool_bytes: u64,
    /// Block cache hits and misses.
    pub cache_hits: u64,
    /// Block cache misses.
    pub cache_misses: u64,
    /// Key and value bytes written by users since open.
    pub user_bytes: u64,
    /// Bytes appended to the log since open.
    pub wal_bytes: u64,
    /// fdatasync calls of the log since open.
    pub wal_fsyncs: u64,
    /// Bytes of tables and blob files written by flushes since open.
    pub flush_bytes: u64,
    /// Bytes of tables read and written by compactions since open.
    pub compaction_read_bytes: u64,
    /// Bytes of tables and blob files written by compactions since open.
    pub compaction_write_bytes: u64,
    /// Blob files (key-value separation) in the current version.
    pub blob_files: u64,
    /// Bytes of those files (of a log blob, a linked log segment: the span it owns,
    /// `docs/format/vlog.md`, "Log blobs").
    pub blob_file_bytes: u64,
    /// Value bytes in those files that some table still points at (the rest is garbage
    /// that collection reclaims: `docs/format/vlog.md`).
    pub blob_live_bytes: u64,
    /// Bytes written to blob files (by flushes and compactions) since open; included in
    /// `flush_bytes` and `compaction_write_bytes`.
    pub blob_write_bytes: u64,
    /// Flushes and compactions since open.
    pub flushes: u64,
    /// Compactions since open.
    pub compactions: u64,
    /// Of those, the ones split into sub-compactions (`DbBuilder::subcompactions`).
    pub split_compactions: u64,
    /// Of those, the ones run because a table was mostly deletes (`compaction/mod.rs`).
    pub tombstone_compactions: u64,
    /// Of those, the ones of level 0 run early because reads passed over
    /// `DbBuilder::l0_scan_compaction_ratio` times the entries the job would read.
    pub scan_compactions: u64,
    /// Memtables flushed before they were full because a read step passed over
    /// `DbBuilder::memtable_scan_flush_trigger` of their entries.
    pub scan_flushes: u64,
    /// Dead runs recorded: key ranges an iterator found to hold no live key
    /// (`DbBuilder::dead_runs`).
    pub dead_run_records: u64,
    /// Iterators that seeked past a dead run instead of walking it.
    pub dead_run_jumps: u64,
    /// Entries flushes left out of their tables because no reader could see them: a single
    /// delete with the put it deletes, and versions overwritten within a snapshot stripe.
    pub flush_dropped_entries: u64,
    /// Tables flushes wrote straight to the base level instead of level 0, because they
    /// overlapped nothing there (`compaction/flush_split.rs`).
    pub flush_tables_below_l0: u64,
    /// Values the memtable left where the log holds them instead of copying them
    /// (`DbBuilder::memtable_values_in_log`).
    pub memtable_values_in_log: u64,
    /// `(log + flush + compaction bytes) / user bytes` since open.
    pub write_amp: f64,
    /// Writes that had to wait for flush or compaction, and how long in total.
    pub stalls: u64,
    /// Microseconds writers spent stalled.
    pub stall_micros: u64,
    /// Writes slowed down (not stopped) because flushes or level-0 compactions fell
    /// behind, and the time they waited in total (`DbBuilder::l0_slowdown_tables`).
    pub delayed_writes: u64,
    /// Microseconds those writes waited, in total.
    pub delay_micros: u64,
    /// The measured flush rate the slowdown is based on, in bytes per second.
    pub flush_rate_bytes_per_sec: u64,
    /// The level-0 table count at which a compaction is due (the option
    /// `l0_compaction_trigger`): with `levels[0].tables` below it, level 0 waits for more.
    pub l0_compaction_trigger: u64,
    /// Writes of the `STATS` file that failed (`DbBuilder::stats_dump_period`); they never
    /// fail anything else.
    pub stats_dump_failures: u64,
}

impl Stats {
    /// Every counter as `(name, value)`, in the order and with the names of the `STATS`
    /// file (`docs/format/stats.md`): the field names, and `level.{n}.tables` /
    /// `level.{n}.bytes` per level.
    pub fn counters(&self) -> Vec<(String, String)> {
        // Destructured, so a new field cannot be left out of the file.
        let Stats {
            levels,
            memtable_bytes,
            immutable_memtables,
            memtable_pool_bytes,
            cache_hits,
            cache_misses,
            user_bytes,
            wal_bytes,
            wal_fsyncs,
            flush_bytes,
            compaction_read_bytes,
            compaction_write_bytes,
            blob_files,
            blob_file_bytes,
            blob_live_bytes,
            blob_write_bytes,
            flushes,
            compactions,
            split_compactions,
            tombstone_compactions,
            scan_compactions,
            scan_flushes,
            dead_run_records,
            dead_run_jumps,
            flush_dropped_entries,
            flush_tables_below_l0,
            memtable_values_in_log,
            write_amp,
            stalls,
            stall_micros,
            delayed_writes,
            delay_micros,
            flush_rate_bytes_per_sec,
            l0_compaction_trigger,
            stats_dump_failures,
        } = self;
        let mut out = Vec::new();
        for (i, l) in levels.iter().enumerate() {
            out.push((format!("level.{i}.tables"), l.tables.to_string()));
            out.push((format!("level.{i}.bytes"), l.bytes.to_string()));
        }
        let ints = [
            ("memtable_bytes", memtable_bytes),
            ("immutable_memtables", immutable_memtables),
            ("memtable_pool_bytes", memtable_pool_bytes),
            ("cache_hits", cache_hits),
            ("cache_misses", cache_misses),
            ("user_bytes", user_bytes),
            ("wal_bytes", wal_bytes),
            ("wal_fsyncs", wal_fsyncs),
            ("flush_bytes", flush_bytes),
            ("compaction_read_bytes", compaction_read_bytes),
            ("compaction_write_bytes", compaction_write_bytes),
            ("blob_files", blob_files),
            ("blob_file_bytes", blob_file_bytes),
            ("blob_live_bytes", blob_live_bytes),
            ("blob_write_bytes", blob_write_bytes),
            ("flushes", flushes),
            ("compactions", compactions),
            ("split_compactions", split_compactions),
            ("tombstone_compactions", tombstone_compactions),
            ("scan_compactions", scan_compactions),
            ("scan_flushes", scan_flushes),
            ("dead_run_records", dead_run_records),
            ("dead_run_jumps", dead_run_jumps),
            ("flush_dropped_entries", flush_dropped_entries),
            ("flush_tables_below_l0", flush_tables_below_l0),
            ("memtable_values_in_log", memtable_values_in_log),
            ("stalls", stalls),
            ("stall_micros", stall_micros),
            ("delayed_writes", delayed_writes),
            ("delay_micros", delay_micros),
            ("flush_rate_bytes_per_sec", flush_rate_bytes_per_sec),
            ("l0_compaction_trigger", l0_compaction_trigger),
            ("stats_dump_failures", stats_dump_failures),
        ];
        for (name, v) in ints {
            out.push((name.to_string(), v.to_string()));
        }
        out.push(("write_amp".to_string(), format!("{write_amp:.3}")));
        out
    }
}

/// The file a writable handle keeps its counters in for other processes
/// (`docs/format/stats.md`), and the name it is written under first.
pub(crate) const STATS_FILE: &str = "STATS";
pub(crate) const STATS_TMP: &str = "STATS.tmp";
const STATS_MAGIC: &str = "silt-stats 1";

/// A `STATS` file read back (`docs/format/stats.md`): which process wrote it, when, and
/// its counters. From [`crate::inspect::live_stats`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct StatsFile {
    /// The writing process.
    pub pid: u32,
    /// When the dump was made, in milliseconds since the Unix epoch.
    pub written_unix_ms: u64,
    /// The writer's dump period in milliseconds.
    pub period_ms: u64,
    /// Every counter, in file order: its name and its value as written.
    pub counters: Vec<(String, String)>,
}

impl StatsFile {
    /// The file's bytes for `stats`.
    pub(crate) fn render(stats: &Stats, pid: u32, written_unix_ms: u64, period_ms: u64) -> String {
        let mut t = format!(
            "{STATS_MAGIC}\npid {pid}\nwritten_unix_ms {written_unix_ms}\nperiod_ms {period_ms}\n"
        );
        for (name, value) in stats.counters() {
            t.push_str(&name);
            t.push(' ');
            t.push_str(&value);
            t.push('\n');
        }
        let crc = crc32c::crc32c(t.as_bytes());
        t.push_str(&format!("crc32c {crc:08x}\n"));
        t
    }

    /// Parses the bytes of the file at `path`, checksum first.
    ///
    /// # Errors
    ///
    /// `Corruption` naming `path` and the line: a bad checksum or none, another version,
    /// a missing header line, or a malformed line.
    pub fn parse(path: &Path, bytes: &[u8]) -> Result<StatsFile> {
        let bad = |line: usize, why: String| {
            Error::corruption(
                path.to_path_buf(),
                line as u64,
                format!("line {line}: {why}"),
            )
        };
        let text = std::str::from_utf8(bytes).map_err(|_| bad(0, "not ASCII text".into()))?;
        let body_end = text
            .trim_end_matches('\n')
            .rfind('\n')
            .map(|i| i + 1)
            .ok_or_else(|| bad(0, "no checksum line".into()))?;
        let last_line = text[..body_end].lines().count() + 1;
        let (body, last) = text.split_at(body_end);
        let want = last
            .strip_suffix('\n')
            .unwrap_or(last)
            .strip_prefix("crc32c ")
            .filter(|h| h.len() == 8)
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .ok_or_else(|| {
                bad(
                    last_line,
                    "the last line is not `crc32c` and 8 hex digits".into(),
                )
            })?;
        let got = crc32c::crc32c(body.as_bytes());
        if got != want {
            return Err(bad(
                last_line,
                format!("checksum mismatch: the file says {want:08x}, its bytes give {got:08x}"),
            ));
        }
        let mut lines = body.lines().enumerate().map(|(i, l)| (i + 1, l));
        match lines.next() {
            Some((_, STATS_MAGIC)) => {}
            Some((n, other)) => {
                return Err(bad(n, format!("expected `{STATS_MAGIC}`, found {other:?}")))
            }
            None => return Err(bad(1, "empty".into())),
        }
        let mut header = |name: &str| -> Result<u64> {
            let (n, l) = lines
                .next()
                .ok_or_else(|| bad(0, format!("no `{name}` line")))?;
            l.strip_prefix(name)
                .and_then(|r| r.strip_prefix(' '))
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(|| bad(n, format!("expected `{name}` and an integer, found {l:?}")))
        };
        let pid = header("pid")?;
        let written_unix_ms = header("written_unix_ms")?;
        let period_ms = header("period_ms")?;
        let pid = u32::try_from(pid).map_err(|_| bad(2, format!("pid {pid} out of range")))?;
        let mut counters = Vec::new();
        for (n, l) in lines {
            let (name, value) = l
                .split_once(' ')
                .ok_or_else(|| bad(n, format!("expected a name and a value, found {l:?}")))?;
            let name_ok = !name.is_empty()
                && name.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'.'
                });
            let value_ok = !value.is_empty()
                && value.bytes().all(|b| b.is_ascii_digit() || b == b'.')
                && value.parse::<f64>().is_ok();
            if !name_ok || !value_ok {
                return Err(bad(n, format!("malformed counter line {l:?}")));
            }
            counters.push((name.to_string(), value.to_string()));
        }
        Ok(StatsFile {
            pid,
            written_unix_ms,
            period_ms,
            counters,
        })
    }

    /// The value of counter `name`, as written.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.counters
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Whether the writing process still runs: `Some` on Linux (its `/proc` entry; a
    /// reused pid can make a stale file look live), `None` where that cannot be told.
    pub fn writer_running(&self) -> Option<bool> {
        if cfg!(target_os = "linux") {
            Some(Path::new(&format!("/proc/{}", self.pid)).exists())
        } else {
            None
        }
    }
}

/// When the next `STATS` dump is due, whether this handle has written one, and how many
/// failed.
#[derive(Debug, Default)]
pub(crate) struct StatsDump {
    next: Option<Instant>,
    written: bool,
    failures: u64,
}

impl DbInner {
    /// Writes `STATS` if a dump is due (`DbBuilder::stats_dump_period`); never for a
    /// read-only handle. Called from the flush thread's loop. A failure is counted, never
    /// raised: the file is a view for other processes, not state.
    pub(crate) fn maybe_dump_stats(&self) {
        let Some(period) = self.opts.stats_dump_every() else {
            return;
        };
        if self.opts.read_only {
            return;
        }
        let now = Instant::now();
        {
            let mut d = self.stats_dump.lock();
            match d.next {
                None => {
                    d.next = Some(now + period);
                    return;
                }
                Some(t) if now < t => return,
                Some(_) => d.next = Some(now + period),
            }
        }
        let written_unix_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let text = StatsFile::render(
            &self.stats(),
            std::process::id(),
            written_unix_ms,
            period.as_millis() as u64,
        );
        let (tmp, path) = (self.dir.join(STATS_TMP), self.dir.join(STATS_FILE));
        // `create` refuses an existing file: a crash (or a failed dump) can leave one.
        let _ = self.fs.remove(&tmp);
        let r = self
            .fs
            .create(&tmp)
            .and_then(|f| f.write_at(&[text.as_bytes()], 0))
            .and_then(|()| self.fs.rename(&tmp, &path));
        let mut d = self.stats_dump.lock();
        match r {
            Ok(()) => d.written = true,
            Err(_) => d.failures += 1,
        }
    }

    /// Removes the `STATS` file this handle wrote (at close: a file without a live writer
    /// would be stale).
    pub(crate) fn remove_stats_file(&self) {
        let written = std::mem::take(&mut self.stats_dump.lock().written);
        if written {
            let _ = self.fs.remove(&self.dir.join(STATS_FILE));
        }
    }
}

impl DbInner {
    pub(super) fn stats(&self) -> Stats {
        let sv = self.super_version();
        let mut levels = vec![LevelStats::default(); LEVELS];
        for cf in sv.version.cfs.values() {
            for (l, tables) in cf.levels.iter().enumerate() {
                levels[l].tables += tables.len() as u64;
                levels[l].bytes += tables.iter().map(|t| t.meta.size_bytes).sum::<u64>();
            }
        }
        let w = self.wal.stats();
        let c = &self.counters;
        let user = c.user_bytes.load(SeqCst);
        let flush = c.flush_bytes.load(SeqCst);
        let cw = c.compaction_write_bytes.load(SeqCst);
        Stats {
            levels,
            memtable_bytes: sv.mems.iter().map(|m| m.approx_bytes()).sum(),
            immutable_memtables: sv.mems.len() as u64 - 1,
            memtable_pool_bytes: self.memtable_chunks.bytes() as u64,
            cache_hits: self.tables.blocks.hits(),
            cache_misses: self.tables.blocks.misses(),
            user_bytes: user,
            wal_bytes: w.bytes,
            wal_fsyncs: w.fsyncs,
            flush_bytes: flush,
            compaction_read_bytes: c.compaction_read_bytes.load(SeqCst),
            compaction_write_bytes: cw,
            blob_files: sv.version.blobs.len() as u64,
            blob_file_bytes: sv.version.blobs.values().map(|b| b.meta.disk_bytes()).sum(),
            blob_live_bytes: sv.version.blobs.values().map(|b| b.live_bytes()).sum(),
            blob_write_bytes: c.blob_write_bytes.load(SeqCst),
            flushes: c.flushes.load(SeqCst),
            compactions: c.compactions.load(SeqCst),
            write_amp: if user == 0 {
                0.0
            } else {
                (w.bytes + flush + cw) as f64 / user as f64
            },
            stalls: c.stalls.load(SeqCst),
            stall_micros: c.stall_micros.load(SeqCst),
            split_compactions: c.split_compactions.load(SeqCst),
            tombstone_compactions: c.tombstone_compactions.load(SeqCst),
            scan_compactions: c.scan_compactions.load(SeqCst),
            scan_flushes: c.scan_flushes.load(SeqCst),
            dead_run_records: self.dead_runs.counters().records.load(SeqCst),
            dead_run_jumps: self.dead_runs.counters().jumps.load(SeqCst),
            flush_dropped_entries: c.flush_dropped_entries.load(SeqCst),
            flush_tables_below_l0: c.flush_tables_below_l0.load(SeqCst),
            memtable_values_in_log: c.memtable_values_in_log.load(SeqCst),
            delayed_writes: c.delayed_writes.load(SeqCst),
            delay_micros: c.delay_micros.load(SeqCst),
            flush_rate_bytes_per_sec: self.throttle.flush_rate(),
            l0_compaction_trigger: self.opts.l0_compaction_trigger as u64,
            stats_dump_failures: self.stats_dump.lock().failures,
        }
    }
}
