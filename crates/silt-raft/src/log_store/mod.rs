//! [`LogStore`]: openraft's `RaftLogStorage` on a silt-wal log (`docs/format/raft.md`, the
//! design in `docs/design.md`, "silt-raft").
//!
//! - **Append**: each entry is one silt-wal record written at once (a `pwrite`, no sync) and
//!   indexed (index → LSN, plus the entry itself in a bounded cache), so it is readable when
//!   `append` returns. A task awaits `Wal::wait_durable_async` for the last record and then
//!   fires openraft's `LogFlushed` callback: the `fdatasync` runs in silt-wal's sync stream
//!   (its sync-service thread, or a committer that is syncing anyway), shared with every
//!   record filled by then, never on a runtime worker.
//! - **Vote, truncate, purge**: records appended with `sync: Some(true)` and awaited
//!   asynchronously before the call returns, so they are durable, in log order with the
//!   entries (openraft requires all log I/O to be serialized; the single log gives that).
//! - **Purge** asks silt-wal to drop whole segments below the first entry kept (and below the
//!   purge record, which carries the vote: see `docs/format/raft.md`).
//!
//! Invariant: only this type writes to its silt-wal log, and openraft calls its writing
//! methods one at a time (`&mut self`); so the index checked before a write is still the
//! index after it.

mod index;
mod reader;
mod replay;

use std::fmt::Debug;
use std::ops::RangeBounds;
use std::path::Path;
use std::sync::Arc;

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{ErrorSubject, ErrorVerb, LogId, RaftLogReader, StorageError, Vote};
use parking_lot::RwLock;
use silt_wal::{AppendOptions, Options, SyncMode, Wal, WalStats};

use crate::codec::{self, LogRecord};
use crate::error::{IntoStorage, Result};
use crate::{Entry, NodeId, TypeConfig};
use index::LogIndex;
pub use reader::LogReader;
pub use replay::ReplayStats;

/// Options of a [`LogStore`].
#[derive(Clone, Debug)]
pub struct LogStoreOptions {
    /// The silt-wal segment size for a new log (default 64 MiB: a record never spans
    /// segments, and a command may be up to 16 MiB).
    pub segment_bytes: u64,
    /// The most bytes of recent entries kept in memory for replication and apply (default
    /// 64 MiB); older entries are read back from the log.
    pub cache_bytes: usize,
    /// The most bytes of entries one read for replication returns (default 4 MiB; at least
    /// one entry is always returned).
    pub read_limit_bytes: usize,
}

impl Default for LogStoreOptions {
    fn default() -> Self {
        LogStoreOptions {
            segment_bytes: 64 << 20,
            cache_bytes: 64 << 20,
            read_limit_bytes: 4 << 20,
        }
    }
}

/// What the log store has done, for metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LogStoreStats {
    /// The silt-wal log's counters (appends, bytes, `fdatasync`s).
    pub wal: WalStats,
    /// Calls to `append` since open.
    pub append_calls: u64,
    /// Entries appended since open.
    pub entries_appended: u64,
    /// Records written for votes, truncations, purges and committed ids since open.
    pub other_records: u64,
    /// The last committed log id saved by openraft.
    pub committed: Option<LogId<NodeId>>,
    /// The last log id in the log.
    pub last_log_id: Option<LogId<NodeId>>,
    /// The last purged log id.
    pub purged: Option<LogId<NodeId>>,
    /// Bytes of entries cached in memory.
    pub cached_bytes: usize,
    /// What replay found at open.
    pub replay: ReplayStats,
}

pub(crate) struct Shared {
    pub(crate) wal: Arc<Wal>,
    pub(crate) index: RwLock<LogIndex>,
    pub(crate) opts: LogStoreOptions,
    counters: parking_lot::Mutex<(u64, u64, u64)>,
    replay: ReplayStats,
}

/// The Raft log on silt-wal. Cloning gives another handle on the same log (for metrics);
/// openraft must own exactly one as its `RaftLogStorage`.
#[derive(Clone)]
pub struct LogStore {
    shared: Arc<Shared>,
    reader: LogReader,
}

impl Debug for LogStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogStore")
            .field("stats", &self.stats())
            .finish()
    }
}

impl LogStore {
    /// Opens (or creates) the log in `dir` and replays it. Blocking: call it from
    /// `spawn_blocking` or before the runtime's work starts.
    ///
    /// # Errors
    ///
    /// `Wal` if silt-wal cannot open or read the log, `Corruption` if a record is not a
    /// record of `docs/format/raft.md` or the entries have a hole.
    pub fn open(dir: impl AsRef<Path>, opts: LogStoreOptions) -> Result<LogStore> {
        let wal = Wal::open(
            dir,
            Options::default()
                .sync(SyncMode::Full)
                .segment_bytes(opts.segment_bytes),
        )?;
        let (index, replay) = replay::replay(&wal, opts.cache_bytes)?;
        let shared = Arc::new(Shared {
            wal: Arc::new(wal),
            index: RwLock::new(index),
            opts,
            counters: parking_lot::Mutex::new((0, 0, 0)),
            replay,
        });
        Ok(LogStore {
            reader: LogReader::new(shared.clone()),
            shared,
        })
    }

    /// The largest command an entry of this log can carry: a quarter of a silt-wal record
    /// (a record never spans segments), at most [`crate::MAX_BATCH_BYTES`]. The quarter
    /// leaves room for the entry's header and for the state machine's batch, whose silt
    /// log has segments of the same size.
    pub fn max_command_bytes(&self) -> usize {
        (self.shared.wal.max_payload_bytes() / 4).min(crate::MAX_BATCH_BYTES)
    }

    /// Counters and positions of the log.
    pub fn stats(&self) -> LogStoreStats {
        let (append_calls, entries_appended, other_records) = *self.shared.counters.lock();
        let idx = self.shared.index.read();
        LogStoreStats {
            wal: self.shared.wal.stats(),
            append_calls,
            entries_appended,
            other_records,
            committed: idx.committed,
            last_log_id: idx.last_log_id(),
            purged: idx.purged,
            cached_bytes: idx.cached_bytes(),
            replay: self.shared.replay,
        }
    }

    /// Appends one non-entry record and waits, without blocking the runtime, until it is
    /// durable.
    async fn append_durable(
        &self,
        rec: &LogRecord,
        subject: ErrorSubject<NodeId>,
    ) -> Result<u64, StorageError<NodeId>> {
        let bytes = codec::encode_record(rec).sto(subject.clone(), ErrorVerb::Write)?;
        let lsn = self
            .shared
            .wal
            .append_async_with(&bytes, AppendOptions { sync: Some(true) })
            .await
            .sto(subject, ErrorVerb::Write)?;
        self.shared.counters.lock().2 += 1;
        Ok(lsn)
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError<NodeId>> {
        self.reader.try_get_log_entries(range).await
    }

    async fn limited_get_log_entries(
        &mut self,
        start: u64,
        end: u64,
    ) -> Result<Vec<Entry>, StorageError<NodeId>> {
        self.reader.limited_get_log_entries(start, end).await
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogReader;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError<NodeId>> {
        let idx = self.shared.index.read();
        Ok(LogState {
            last_purged_log_id: idx.purged,
            last_log_id: idx.last_log_id(),
        })
    }

    async fn get_log_reader(&mut self) -> LogReader {
        LogReader::new(self.shared.clone())
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError<NodeId>> {
        self.append_durable(&LogRecord::Vote(*vote), ErrorSubject::Vote)
            .await?;
        self.shared.index.write().vote = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError<NodeId>> {
        Ok(self.shared.index.read().vote)
    }

    async fn save_committed(
        &mut self,
        committed: Option<LogId<NodeId>>,
    ) -> Result<(), StorageError<NodeId>> {
        // Not synced: a committed id lost in a machine crash only means entries are
        // re-applied later, once a leader says they are committed again.
        let bytes = codec::encode_record(&LogRecord::Committed(committed))
            .sto(ErrorSubject::Store, ErrorVerb::Write)?;
        self.shared
            .wal
            .append_with(&bytes, AppendOptions { sync: Some(false) })
            .sto(ErrorSubject::Store, ErrorVerb::Write)?;
        self.shared.counters.lock().2 += 1;
        self.shared.index.write().committed = committed;
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<NodeId>>, StorageError<NodeId>> {
        Ok(self.shared.index.read().committed)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let mut last_lsn = None;
        let mut count = 0;
        let mut buf = Vec::new();
        for entry in entries {
            let subject = ErrorSubject::Log(entry.log_id);
            {
                let idx = self.shared.index.read();
                if idx.is_purged(entry.log_id.index) {
                    continue;
                }
                // Checked before the write: a record that breaks the log's order must
                // never reach the disk, where replay would refuse it.
                idx.check_next(entry.log_id.index)
                    .sto(subject.clone(), ErrorVerb::Write)?;
            }
            buf.clear();
            codec::encode_entry(&entry, &mut buf).sto(subject.clone(), ErrorVerb::Write)?;
            // A ticket: the record is in the log (readable) now, durable later.
            let lsn = self
                .shared
                .wal
                .append_with(&buf, AppendOptions { sync: Some(false) })
                .sto(subject.clone(), ErrorVerb::Write)?;
            let log_id = entry.log_id;
            self.shared
                .index
                .write()
                .push(log_id, lsn, Some(entry), buf.len())
                .sto(subject, ErrorVerb::Write)?;
            last_lsn = Some(lsn);
            count += 1;
        }
        {
            let mut c = self.shared.counters.lock();
            c.0 += 1;
            c.1 += count;
        }
        match last_lsn {
            None => callback.log_io_completed(Ok(())),
            Some(lsn) => {
                let wal = self.shared.wal.clone();
                tokio::spawn(async move {
                    let r = wal
                        .wait_durable_async(lsn)
                        .await
                        .map_err(std::io::Error::other);
                    callback.log_io_completed(r);
                });
            }
        }
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        self.append_durable(&LogRecord::Truncate(log_id.index), ErrorSubject::Logs)
            .await?;
        self.shared.index.write().truncate(log_id.index);
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        let (vote, committed) = {
            let idx = self.shared.index.read();
            (idx.vote, idx.committed)
        };
        let rec = LogRecord::Purge {
            upto: log_id,
            vote,
            committed,
        };
        let purge_lsn = self.append_durable(&rec, ErrorSubject::Logs).await?;
        let keep_from = {
            let mut idx = self.shared.index.write();
            idx.purge(log_id);
            idx.first_lsn().map_or(purge_lsn, |l| l.min(purge_lsn))
        };
        // Removing files is blocking work: off the runtime's workers.
        let wal = self.shared.wal.clone();
        tokio::task::spawn_blocking(move || wal.purge_up_to(keep_from))
            .await
            .map_err(std::io::Error::other)
            .sto(ErrorSubject::Logs, ErrorVerb::Delete)?
            .sto(ErrorSubject::Logs, ErrorVerb::Delete)?;
        Ok(())
    }
}
