//! Encoding and decoding of the Raft log's records and of commands, exactly as
//! `docs/format/raft.md` specifies ("Log records", "Command"). Decoding never panics: every
//! length is checked, and bad bytes are `Error::Corruption` naming what was wrong.

use openraft::{CommittedLeaderId, EntryPayload, LogId, Membership, Vote};

use crate::error::{Error, Result};
use crate::types::{Op, Request};
use crate::{Entry, NodeId};

// Record tags: on disk, never renumber.
const TAG_ENTRY: u8 = 1;
const TAG_VOTE: u8 = 2;
const TAG_TRUNCATE: u8 = 3;
const TAG_PURGE: u8 = 4;
const TAG_COMMITTED: u8 = 5;

// Entry payload kinds: on disk, never renumber.
const KIND_BLANK: u8 = 0;
const KIND_NORMAL: u8 = 1;
const KIND_MEMBERSHIP: u8 = 2;

// Command kinds: on disk, never renumber.
const CMD_PUT: u8 = 1;
const CMD_DELETE: u8 = 2;
const CMD_BATCH: u8 = 3;

/// One record of the Raft log, decoded.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum LogRecord {
    /// A log entry.
    Entry(Entry),
    /// The vote, as saved by `save_vote`.
    Vote(Vote<NodeId>),
    /// Entries at index >= this one are gone.
    Truncate(u64),
    /// Entries up to this log id are gone; the vote and committed id at the time.
    Purge {
        /// The last purged log id.
        upto: LogId<NodeId>,
        /// The vote when the purge was made.
        vote: Option<Vote<NodeId>>,
        /// The committed log id when the purge was made.
        committed: Option<LogId<NodeId>>,
    },
    /// The committed log id, as saved by `save_committed`.
    Committed(Option<LogId<NodeId>>),
}

/// Appends an entry's record to `out`.
pub(crate) fn encode_entry(entry: &Entry, out: &mut Vec<u8>) -> Result<()> {
    out.push(TAG_ENTRY);
    put_log_id(out, &entry.log_id);
    match &entry.payload {
        EntryPayload::Blank => out.push(KIND_BLANK),
        EntryPayload::Normal(req) => {
            out.push(KIND_NORMAL);
            encode_request(req, out);
        }
        EntryPayload::Membership(m) => {
            out.push(KIND_MEMBERSHIP);
            serde_json::to_writer(&mut *out, m)
                .map_err(|e| Error::InvalidArgument(format!("membership to JSON: {e}")))?;
        }
    }
    Ok(())
}

/// Encodes any record other than an entry.
pub(crate) fn encode_record(rec: &LogRecord) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(64);
    match rec {
        LogRecord::Entry(e) => encode_entry(e, &mut out)?,
        LogRecord::Vote(v) => {
            out.push(TAG_VOTE);
            put_vote(&mut out, v);
        }
        LogRecord::Truncate(i) => {
            out.push(TAG_TRUNCATE);
            out.extend_from_slice(&i.to_le_bytes());
        }
        LogRecord::Purge {
            upto,
            vote,
            committed,
        } => {
            out.push(TAG_PURGE);
            put_log_id(&mut out, upto);
            match vote {
                None => out.push(0),
                Some(v) => {
                    out.push(1);
                    put_vote(&mut out, v);
                }
            }
            put_opt_log_id(&mut out, committed);
        }
        LogRecord::Committed(c) => {
            out.push(TAG_COMMITTED);
            put_opt_log_id(&mut out, c);
        }
    }
    Ok(out)
}

/// Decodes one record of the Raft log.
///
/// # Errors
///
/// `Corruption` if the bytes are not a record of `docs/format/raft.md`.
pub(crate) fn decode_record(bytes: &[u8]) -> Result<LogRecord> {
    let mut r = Cursor::new(bytes);
    let rec = match r.u8()? {
        TAG_ENTRY => {
            let log_id = r.log_id()?;
            let payload = match r.u8()? {
                KIND_BLANK => EntryPayload::Blank,
                KIND_NORMAL => EntryPayload::Normal(decode_request_from(&mut r)?),
                KIND_MEMBERSHIP => {
                    let m: Membership<NodeId, openraft::BasicNode> =
                        serde_json::from_slice(r.rest())
                            .map_err(|e| Error::Corruption(format!("membership JSON: {e}")))?;
                    EntryPayload::Membership(m)
                }
                k => return Err(Error::Corruption(format!("unknown entry kind {k}"))),
            };
            LogRecord::Entry(Entry { log_id, payload })
        }
        TAG_VOTE => LogRecord::Vote(r.vote()?),
        TAG_TRUNCATE => LogRecord::Truncate(r.u64()?),
        TAG_PURGE => {
            let upto = r.log_id()?;
            let vote = match r.u8()? {
                0 => None,
                1 => Some(r.vote()?),
                b => return Err(Error::Corruption(format!("bad vote flag {b}"))),
            };
            let committed = r.opt_log_id()?;
            LogRecord::Purge {
                upto,
                vote,
                committed,
            }
        }
        TAG_COMMITTED => LogRecord::Committed(r.opt_log_id()?),
        t => return Err(Error::Corruption(format!("unknown log record tag {t}"))),
    };
    r.finish()?;
    Ok(rec)
}

/// Appends the encoding of a command to `out`.
pub(crate) fn encode_request(req: &Request, out: &mut Vec<u8>) {
    match req {
        Request::Put { key, value } => put_put(out, key, value),
        Request::Delete { key } => put_delete(out, key),
        Request::Batch { ops } => {
            out.push(CMD_BATCH);
            out.extend_from_slice(&(ops.len() as u32).to_le_bytes());
            for op in ops {
                match op {
                    Op::Put { key, value } => put_put(out, key, value),
                    Op::Delete { key } => put_delete(out, key),
                }
            }
        }
    }
}

fn put_put(out: &mut Vec<u8>, key: &str, value: &str) {
    out.push(CMD_PUT);
    put_bytes(out, key.as_bytes());
    put_bytes(out, value.as_bytes());
}

fn put_delete(out: &mut Vec<u8>, key: &str) {
    out.push(CMD_DELETE);
    put_bytes(out, key.as_bytes());
}

fn decode_request_from(r: &mut Cursor<'_>) -> Result<Request> {
    Ok(match r.u8()? {
        CMD_PUT => Request::Put {
            key: r.string()?,
            value: r.string()?,
        },
        CMD_DELETE => Request::Delete { key: r.string()? },
        CMD_BATCH => {
            let n = r.u32()? as usize;
            // Each op takes at least 5 bytes: bound the allocation by what is there.
            if n > r.remaining() / 5 {
                return Err(Error::Corruption(format!(
                    "batch of {n} ops in {} bytes",
                    r.remaining()
                )));
            }
            let mut ops = Vec::with_capacity(n);
            for _ in 0..n {
                ops.push(match r.u8()? {
                    CMD_PUT => Op::Put {
                        key: r.string()?,
                        value: r.string()?,
                    },
                    CMD_DELETE => Op::Delete { key: r.string()? },
                    k => return Err(Error::Corruption(format!("unknown batch op kind {k}"))),
                });
            }
            Request::Batch { ops }
        }
        k => return Err(Error::Corruption(format!("unknown command kind {k}"))),
    })
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

/// Appends a LogId (24 bytes).
pub(crate) fn put_log_id(out: &mut Vec<u8>, id: &LogId<NodeId>) {
    out.extend_from_slice(&id.index.to_le_bytes());
    out.extend_from_slice(&id.leader_id.term.to_le_bytes());
    out.extend_from_slice(&id.leader_id.node_id.to_le_bytes());
}

fn put_opt_log_id(out: &mut Vec<u8>, id: &Option<LogId<NodeId>>) {
    match id {
        None => out.push(0),
        Some(id) => {
            out.push(1);
            put_log_id(out, id);
        }
    }
}

fn put_vote(out: &mut Vec<u8>, v: &Vote<NodeId>) {
    out.extend_from_slice(&v.leader_id.term.to_le_bytes());
    out.extend_from_slice(&v.leader_id.node_id.to_le_bytes());
    out.push(u8::from(v.committed));
}

/// Decodes a LogId of exactly 24 bytes.
pub(crate) fn decode_log_id(bytes: &[u8]) -> Result<LogId<NodeId>> {
    let mut r = Cursor::new(bytes);
    let id = r.log_id()?;
    r.finish()?;
    Ok(id)
}

/// A checked reader over a byte slice.
pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Cursor { buf, pos: 0 }
    }

    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.remaining() < n {
            return Err(Error::Corruption(format!(
                "record ends at byte {} of {}, {n} more needed",
                self.buf.len(),
                self.pos
            )));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn rest(&mut self) -> &'a [u8] {
        let s = &self.buf[self.pos..];
        self.pos = self.buf.len();
        s
    }

    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    fn string(&mut self) -> Result<String> {
        let n = self.u32()? as usize;
        let b = self.take(n)?;
        String::from_utf8(b.to_vec())
            .map_err(|_| Error::Corruption("a key or value is not UTF-8".into()))
    }

    fn log_id(&mut self) -> Result<LogId<NodeId>> {
        let index = self.u64()?;
        let term = self.u64()?;
        let node = self.u64()?;
        Ok(LogId::new(CommittedLeaderId::new(term, node), index))
    }

    fn opt_log_id(&mut self) -> Result<Option<LogId<NodeId>>> {
        match self.u8()? {
            0 => Ok(None),
            1 => Ok(Some(self.log_id()?)),
            b => Err(Error::Corruption(format!("bad log id flag {b}"))),
        }
    }

    fn vote(&mut self) -> Result<Vote<NodeId>> {
        let term = self.u64()?;
        let node = self.u64()?;
        let committed = match self.u8()? {
            0 => false,
            1 => true,
            b => return Err(Error::Corruption(format!("bad vote committed flag {b}"))),
        };
        let mut v = Vote::new(term, node);
        v.committed = committed;
        Ok(v)
    }

    fn finish(&self) -> Result<()> {
        if self.remaining() != 0 {
            return Err(Error::Corruption(format!(
                "{} bytes left over after a record",
                self.remaining()
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;

    fn id(term: u64, node: u64, index: u64) -> LogId<NodeId> {
        LogId::new(CommittedLeaderId::new(term, node), index)
    }

    fn samples() -> Vec<LogRecord> {
        let mut nodes = BTreeMap::new();
        nodes.insert(1, openraft::BasicNode::new("127.0.0.1:1"));
        nodes.insert(2, openraft::BasicNode::new("127.0.0.1:2"));
        let m = Membership::new(vec![BTreeSet::from([1, 2])], nodes);
        vec![
            LogRecord::Entry(Entry {
                log_id: id(3, 1, 7),
                payload: EntryPayload::Blank,
            }),
            LogRecord::Entry(Entry {
                log_id: id(3, 1, 8),
                payload: EntryPayload::Normal(Request::Put {
                    key: "k".into(),
                    value: "v".repeat(300),
                }),
            }),
            LogRecord::Entry(Entry {
                log_id: id(4, 2, 9),
                payload: EntryPayload::Normal(Request::Batch {
                    ops: vec![
                        Op::Put {
                            key: "a".into(),
                            value: "".into(),
                        },
                        Op::Delete { key: "b".into() },
                    ],
                }),
            }),
            LogRecord::Entry(Entry {
                log_id: id(4, 2, 10),
                payload: EntryPayload::Normal(Request::Delete { key: "z".into() }),
            }),
            LogRecord::Entry(Entry {
                log_id: id(5, 2, 11),
                payload: EntryPayload::Membership(m),
            }),
            LogRecord::Vote(Vote::new_committed(9, 2)),
            LogRecord::Vote(Vote::new(10, 3)),
            LogRecord::Truncate(42),
            LogRecord::Purge {
                upto: id(2, 1, 5),
                vote: Some(Vote::new(3, 1)),
                committed: Some(id(2, 1, 6)),
            },
            LogRecord::Purge {
                upto: id(0, 0, 0),
                vote: None,
                committed: None,
            },
            LogRecord::Committed(Some(id(1, 1, 1))),
            LogRecord::Committed(None),
        ]
    }

    #[test]
    fn every_record_round_trips() {
        for rec in samples() {
            let bytes = encode_record(&rec).unwrap();
            assert_eq!(decode_record(&bytes).unwrap(), rec);
        }
    }

    #[test]
    fn truncations_and_extensions_are_corruption_not_panics() {
        for rec in samples() {
            let bytes = encode_record(&rec).unwrap();
            let is_membership = matches!(
                &rec,
                LogRecord::Entry(Entry {
                    payload: EntryPayload::Membership(_),
                    ..
                })
            );
            for cut in 0..bytes.len() {
                assert!(
                    matches!(decode_record(&bytes[..cut]), Err(Error::Corruption(_))),
                    "{rec:?} cut at {cut}"
                );
            }
            if !is_membership {
                let mut longer = bytes.clone();
                longer.push(0);
                assert!(matches!(decode_record(&longer), Err(Error::Corruption(_))));
            }
        }
    }

    #[test]
    fn unknown_tags_and_kinds_are_corruption() {
        assert!(decode_record(&[9]).is_err());
        let mut e = vec![TAG_ENTRY];
        put_log_id(&mut e, &id(1, 1, 1));
        e.push(7);
        assert!(matches!(decode_record(&e), Err(Error::Corruption(_))));
        let mut huge = vec![TAG_ENTRY];
        put_log_id(&mut huge, &id(1, 1, 1));
        huge.extend_from_slice(&[KIND_NORMAL, CMD_BATCH, 0xff, 0xff, 0xff, 0xff]);
        assert!(matches!(decode_record(&huge), Err(Error::Corruption(_))));
    }
}
