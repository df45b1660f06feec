//! Appends in two steps: reserve a record's place (and so learn its LSN), then write it or
//! abandon it ([`Reservation`]); and wait for the acknowledgement separately ([`Appended`]).
//!
//! This is what a database needs when the decision to commit depends on the commit's own
//! position in the log: a transaction validated at its commit point learns its LSN (its
//! seqno), checks that nothing it read changed below it, and only then writes its record —
//! or a Void record of the same size (`docs/format/wal.md`, "Void"), so the log keeps no
//! trace of it. It also lets the caller do work between the write and the acknowledgement
//! (apply the batch to a memtable while the group's `fdatasync` runs).
//!
//! Invariants:
//! 1. A reservation is always finished: written, abandoned, or (when dropped unfinished)
//!    abandoned by `Drop`. Until then `filled` cannot pass it, so no later record is
//!    acknowledged: the caller must decide quickly and must not wait, while holding it, for
//!    anything that waits for the log to move past it (a later append's acknowledgement,
//!    `Wal::sync`).
//! 2. Reservation order = LSN order = the order in which records (and Void records) sit in
//!    the log, exactly as for [`crate::Wal::append`]; the acknowledgement rules are the same.

use crate::commit::Inner;
use crate::error::{Error, Result};
use crate::format::record_bytes;
use crate::options::{AppendOptions, Strategy};
use crate::Lsn;

/// A record's place in the log, reserved by [`crate::Wal::reserve`] but not written yet.
/// Finish it with [`Reservation::write`] or [`Reservation::abandon`]; dropping it abandons
/// it.
#[must_use = "a reservation holds back every later acknowledgement until it is finished"]
pub struct Reservation<'a> {
    inner: &'a Inner,
    cur: u64,
    start: u64,
    len: usize,
    want_sync: bool,
    done: bool,
}

/// A record written to the log but perhaps not yet acknowledged: [`Appended::wait`] waits
/// as [`crate::Wal::append`] would have.
#[must_use = "a record is not acknowledged until `wait` returns"]
pub struct Appended<'a> {
    inner: &'a Inner,
    lsn: Lsn,
    end: u64,
    want_sync: bool,
}

impl Inner {
    pub(crate) fn reserve_record(
        &self,
        len: usize,
        opts: AppendOptions,
    ) -> Result<Reservation<'_>> {
        if len > self.max_payload {
            return Err(Error::InvalidArgument(format!(
                "payload of {len} bytes is over this log's limit of {} bytes",
                self.max_payload
            )));
        }
        self.check_open()?;
        if !matches!(self.strategy, Strategy::Pipelined) {
            return Err(Error::InvalidArgument(
                "reservations need the Pipelined strategy".into(),
            ));
        }
        let want_sync = self.needs_sync(opts);
        let (cur, start) = self.reserve(record_bytes(len));
        Ok(Reservation {
            inner: self,
            cur,
            start,
            len,
            want_sync,
            done: false,
        })
    }
}

impl<'a> Reservation<'a> {
    /// The LSN the record will have (or that its Void record takes if it is abandoned).
    pub fn lsn(&self) -> Lsn {
        self.start
    }

    /// The payload length this reservation was made for.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the reservation is for an empty payload.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Writes `payload` at the reserved place and publishes it. Does not wait for the
    /// acknowledgement: [`Appended::wait`] does.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` if `payload` is not exactly the reserved length (the reservation is
    /// then abandoned); `Io` if the write failed (the log is then poisoned); `Poisoned` or
    /// `Closed` if the log stopped while this waited for the fill window.
    pub fn write(mut self, payload: &[u8]) -> Result<Appended<'a>> {
        if payload.len() != self.len {
            let reserved = self.len;
            self.finish(None)?;
            return Err(Error::InvalidArgument(format!(
                "payload of {} bytes written into a reservation of {reserved}",
                payload.len()
            )));
        }
        let (lsn, end) = self.finish(Some(payload))?;
        Ok(Appended {
            inner: self.inner,
            lsn,
            end,
            want_sync: self.want_sync,
        })
    }

    /// Gives the place up: a Void record of the same size fills it, which readers and
    /// recovery skip (`docs/format/wal.md`, "Void").
    ///
    /// # Errors
    ///
    /// As [`Reservation::write`].
    pub fn abandon(mut self) -> Result<()> {
        self.finish(None).map(|_| ())
    }

    fn finish(&mut self, payload: Option<&[u8]>) -> Result<(Lsn, u64)> {
        self.done = true;
        let via = self.inner.via(self.want_sync, self.len);
        self.inner
            .finish_record(self.cur, self.start, payload, self.len, via)
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if !self.done && !self.inner.is_poisoned() {
            // Invariant 1: never leave the fill watermark stuck behind an unwritten place.
            let _ = self.finish(None);
        }
    }
}

impl Appended<'_> {
    /// The record's LSN.
    pub fn lsn(&self) -> Lsn {
        self.lsn
    }

    /// Waits until the record is acknowledged: in the OS with every record before it
    /// (`None`, `Interval`), or durable (`Full`, or `sync: Some(true)`), exactly as
    /// [`crate::Wal::append_with`] would have returned.
    ///
    /// # Errors
    ///
    /// `Poisoned` if an earlier write or sync failed; `Io` if the sync this call ran failed.
    pub fn wait(self) -> Result<()> {
        self.inner.acknowledge(self.end, self.want_sync)
    }
}
