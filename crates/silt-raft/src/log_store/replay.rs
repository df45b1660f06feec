//! Reading the Raft log back at open: every silt-wal record, in LSN order, decoded and fed
//! to a [`LogIndex`] by the rules of `docs/format/raft.md` ("Reading the log back").

use silt_wal::Wal;

use super::index::LogIndex;
use crate::codec::{decode_record, LogRecord};
use crate::error::{Error, Result};

/// What replay found, for the node's startup report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplayStats {
    /// Records read.
    pub records: u64,
    /// Entry records read (including ones later truncated or purged).
    pub entries: u64,
}

/// Replays every record of `wal` into a fresh index.
///
/// # Errors
///
/// `Wal` if silt-wal cannot read a record, `Corruption` if a record does not decode or an
/// entry would leave a hole in the log.
pub(crate) fn replay(wal: &Wal, cache_limit_bytes: usize) -> Result<(LogIndex, ReplayStats)> {
    let mut index = LogIndex::new(cache_limit_bytes);
    let mut stats = ReplayStats::default();
    for rec in wal.read_from(0)? {
        let rec = rec?;
        stats.records += 1;
        let at = |e: Error| match e {
            Error::Corruption(m) | Error::InvalidArgument(m) => {
                Error::Corruption(format!("raft log record at LSN {}: {m}", rec.lsn))
            }
            e => e,
        };
        match decode_record(&rec.payload).map_err(at)? {
            LogRecord::Entry(entry) => {
                stats.entries += 1;
                let bytes = rec.payload.len();
                let log_id = entry.log_id;
                index
                    .push(log_id, rec.lsn, Some(entry), bytes)
                    .map_err(at)?;
            }
            LogRecord::Vote(v) => index.vote = Some(v),
            LogRecord::Committed(c) => index.committed = c,
            LogRecord::Truncate(since) => index.truncate(since),
            LogRecord::Purge {
                upto,
                vote,
                committed,
            } => {
                index.purge(upto);
                // The purge record carries the state of its time; newer records (later in
                // the log) replace it as they are replayed.
                if vote.is_some() {
                    index.vote = vote;
                }
                if committed.is_some() {
                    index.committed = committed;
                }
            }
        }
    }
    Ok((index, stats))
}
