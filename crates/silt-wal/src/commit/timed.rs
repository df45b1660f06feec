//! `Strategy::TimedGroups`: MuopDB's leader/follower write groups (seed 001), reproduced so
//! it can be measured beside `Pipelined` on the same disk.
//!
//! The first committer to find no open group opens one and leads it. Followers join until
//! the group has `max_entries` commits or `max_wait` has passed since it opened; then the
//! leader closes it, writes every record with one `pwrite` per contiguous run, issues one
//! `fdatasync` if any member needs durability, and wakes the followers. A lone writer
//! therefore always waits out the timer — the cost the seed paid and `Pipelined` avoids.
//! Records still go through the shared reservation and filled watermark, so the recovery
//! guarantees are the same as for the other strategies.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::{Inner, WriteVia};
use crate::error::{Error, Result};
use crate::format::{record_bytes, RecordHeader};
use crate::Lsn;

#[derive(Default)]
pub(crate) struct Groups {
    open: Mutex<Option<Arc<Group>>>,
}

struct Group {
    state: Mutex<GroupState>,
    cv: Condvar,
}

struct GroupState {
    opened: Instant,
    entries: Vec<Vec<u8>>,
    want_sync: bool,
    closed: bool,
    /// Set by the leader when the group is written: each member's LSN, or the error.
    result: Option<std::result::Result<Vec<Lsn>, (std::io::ErrorKind, String)>>,
}

impl Groups {
    pub(crate) fn poison(&self) {
        if let Some(g) = self.open.lock().as_ref() {
            g.cv.notify_all();
        }
    }
}

pub(crate) fn append(
    inner: &Inner,
    payload: &[u8],
    want_sync: bool,
    max_entries: usize,
    max_wait: Duration,
) -> Result<Lsn> {
    let (group, index, leader) = {
        let mut open = inner.timed.open.lock();
        // Join the open group only if it is still open, checked and joined under one hold
        // of its state lock: its leader may time out and take the entries at any moment,
        // and an entry pushed after that would never be written (yet acknowledged, with
        // another member's LSN).
        let mut joined = None;
        if let Some(g) = open.as_ref() {
            let mut st = g.state.lock();
            if !st.closed {
                st.entries.push(payload.to_vec());
                st.want_sync |= want_sync;
                joined = Some((g.clone(), st.entries.len() - 1));
            }
        }
        let (group, index, leader) = match joined {
            Some((g, index)) => (g, index, false),
            None => {
                let g = Arc::new(Group {
                    state: Mutex::new(GroupState {
                        opened: Instant::now(),
                        entries: vec![payload.to_vec()],
                        want_sync,
                        closed: false,
                        result: None,
                    }),
                    cv: Condvar::new(),
                });
                *open = Some(g.clone());
                (g, 0, true)
            }
        };
        let mut st = group.state.lock();
        if !st.closed && st.entries.len() >= max_entries {
            st.closed = true;
            *open = None;
            group.cv.notify_all();
        }
        drop(st);
        (group, index, leader)
    };

    if leader {
        let (entries, sync) = {
            let mut st = group.state.lock();
            let deadline = st.opened + max_wait;
            while !st.closed && !inner.is_poisoned() {
                if group.cv.wait_until(&mut st, deadline).timed_out() {
                    break;
                }
            }
            st.closed = true;
            (std::mem::take(&mut st.entries), st.want_sync)
        };
        {
            let mut open = inner.timed.open.lock();
            if open.as_ref().is_some_and(|g| Arc::ptr_eq(g, &group)) {
                *open = None;
            }
        }
        let result = write_group(inner, &entries, sync);
        let mut st = group.state.lock();
        st.result = Some(match &result {
            Ok(lsns) => Ok(lsns.clone()),
            Err(Error::Io { source, .. }) => Err((source.kind(), source.to_string())),
            Err(e) => Err((std::io::ErrorKind::Other, e.to_string())),
        });
        group.cv.notify_all();
        drop(st);
        return result.map(|lsns| lsns[index]);
    }

    let mut st = group.state.lock();
    while st.result.is_none() {
        group.cv.wait(&mut st);
    }
    match st.result.as_ref().expect("checked above") {
        Ok(lsns) => Ok(lsns[index]),
        Err(_) if inner.is_poisoned() => Err(Error::Poisoned),
        Err((kind, msg)) => Err(Error::io(
            "write group",
            None,
            std::io::Error::new(*kind, msg.clone()),
        )),
    }
}

/// Writes a closed group: reservations in order, one `pwrite` per contiguous run inside one
/// segment, then one `fdatasync` when a member asked for durability.
fn write_group(inner: &Inner, entries: &[Vec<u8>], sync: bool) -> Result<Vec<Lsn>> {
    inner.check_open()?;
    let r = write_runs(inner, entries);
    let (lsns, last_end) = match r {
        Ok(v) => v,
        Err(e) => {
            inner.poison();
            return Err(e);
        }
    };
    inner.wait_filled(last_end)?;
    if sync {
        inner.sync_own(last_end)?;
    }
    Ok(lsns)
}

/// A run of records contiguous in one segment, written with one `pwrite`.
struct Run {
    seg: u64,
    offset: u64,
    buf: Vec<u8>,
    /// `(cursor, end)` of each record, published once the run is written.
    spans: Vec<(u64, u64)>,
}

impl Run {
    fn end(&self, segment_bytes: u64) -> u64 {
        self.seg * segment_bytes + self.offset + self.buf.len() as u64
    }
}

fn flush(inner: &Inner, run: &mut Option<Run>) -> Result<()> {
    let Some(run) = run.take() else {
        return Ok(());
    };
    let file = inner.segments.get(run.seg)?;
    file.write_at(&[&run.buf], run.offset)
        .map_err(|e| Error::io("pwrite", Some(inner.segments.path(run.seg)), e))?;
    let mut moved = false;
    for (cur, end) in run.spans {
        moved |= inner.ring.publish(cur, end);
    }
    if moved {
        inner.on_filled();
    }
    Ok(())
}

fn write_runs(inner: &Inner, entries: &[Vec<u8>]) -> Result<(Vec<Lsn>, u64)> {
    let s = inner.seg_bytes;
    let durable = inner.stream.durable();
    let mut lsns = Vec::with_capacity(entries.len());
    let mut last_end = 0;
    let mut run: Option<Run> = None;
    for payload in entries {
        let total = record_bytes(payload.len());
        let (cur, start) = inner.reserve(total);
        let end = start + total;
        if !inner.ring.in_window(cur) {
            // The window may be waiting for this group's own earlier records.
            flush(inner, &mut run)?;
            inner.filled_ev.wait(inner.backoff, || {
                inner.ring.in_window(cur) || inner.is_poisoned()
            });
            inner.check_open()?;
        }
        let contiguous = run
            .as_ref()
            .is_some_and(|r| cur == start && r.end(s) == start);
        if !contiguous {
            flush(inner, &mut run)?;
            if cur != start && cur % s != 0 {
                inner.write_padding(cur, durable, WriteVia::Pwrite)?;
            }
            run = Some(Run {
                seg: start / s,
                offset: start % s,
                buf: Vec::new(),
                spans: Vec::new(),
            });
        }
        inner.prepare_next_if_due(start);
        let header = RecordHeader::data(payload, start, s, durable);
        let r = run.as_mut().expect("a run is open");
        r.buf.extend_from_slice(&header);
        r.buf.extend_from_slice(payload);
        r.buf.resize(
            r.buf.len() + (total as usize - header.len() - payload.len()),
            0,
        );
        r.spans.push((cur, end));
        lsns.push(start);
        last_end = end;
        inner.count_append(payload.len());
    }
    flush(inner, &mut run)?;
    Ok((lsns, last_end))
}
