//! The replicated key-value service's commands ([`Request`], the Raft log's application
//! data) and their results ([`Response`]). Keys and values are UTF-8 text: the service's
//! API is HTTP/JSON (`docs/format/raft.md`, "Command").

use serde::{Deserialize, Serialize};

/// One write in a [`Request::Batch`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    /// Sets `key` to `value`.
    Put {
        /// The key.
        key: String,
        /// The value.
        value: String,
    },
    /// Removes `key` (absent keys are not an error).
    Delete {
        /// The key.
        key: String,
    },
}

impl Op {
    /// The key this operation writes.
    pub fn key(&self) -> &str {
        match self {
            Op::Put { key, .. } | Op::Delete { key } => key,
        }
    }
}

/// A command of the state machine: what a client's write becomes in the Raft log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Request {
    /// Sets `key` to `value`.
    Put {
        /// The key.
        key: String,
        /// The value.
        value: String,
    },
    /// Removes `key`.
    Delete {
        /// The key.
        key: String,
    },
    /// Several writes applied atomically: a reader sees all of them or none.
    Batch {
        /// The writes, applied in order (a later write to the same key wins).
        ops: Vec<Op>,
    },
}

impl Request {
    /// The writes of this command, in order.
    pub fn ops(&self) -> Vec<Op> {
        match self {
            Request::Put { key, value } => vec![Op::Put {
                key: key.clone(),
                value: value.clone(),
            }],
            Request::Delete { key } => vec![Op::Delete { key: key.clone() }],
            Request::Batch { ops } => ops.clone(),
        }
    }

    /// Checks the sizes the log and the state machine will accept, so that a bad command is
    /// refused before it enters the log (an entry the log or the state machine cannot take
    /// would stop every node). `max_bytes` is the most a command may encode to: at most
    /// [`MAX_BATCH_BYTES`], and less with small log segments
    /// ([`crate::LogStore::max_command_bytes`]).
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for an empty or over-long key, an over-long value, an empty batch,
    /// or a command over `max_bytes`.
    pub fn validate(&self, max_bytes: usize) -> crate::Result<()> {
        let max_bytes = max_bytes.min(MAX_BATCH_BYTES);
        let check = |op: &Op| -> crate::Result<usize> {
            let (key, value) = match op {
                Op::Put { key, value } => (key, Some(value)),
                Op::Delete { key } => (key, None),
            };
            if key.is_empty() || key.len() > silt::MAX_KEY_BYTES {
                return Err(crate::Error::InvalidArgument(format!(
                    "a key must have 1 to {} bytes, got {}",
                    silt::MAX_KEY_BYTES,
                    key.len()
                )));
            }
            let vlen = value.map_or(0, |v| v.len());
            if vlen > silt::MAX_VALUE_BYTES {
                return Err(crate::Error::InvalidArgument(format!(
                    "a value must have at most {} bytes, got {vlen}",
                    silt::MAX_VALUE_BYTES
                )));
            }
            Ok(key.len() + vlen + 16)
        };
        let total = match self {
            Request::Put { key, value } => check(&Op::Put {
                key: key.clone(),
                value: value.clone(),
            })?,
            Request::Delete { key } => check(&Op::Delete { key: key.clone() })?,
            Request::Batch { ops } => {
                if ops.is_empty() {
                    return Err(crate::Error::InvalidArgument("an empty batch".into()));
                }
                let mut sum = 0;
                for op in ops {
                    sum += check(op)?;
                }
                sum
            }
        };
        if total > max_bytes {
            return Err(crate::Error::InvalidArgument(format!(
                "a command must encode to at most {max_bytes} bytes, got about {total}"
            )));
        }
        Ok(())
    }
}

/// The largest command accepted, in encoded bytes: well under silt-wal's largest record
/// (32 MiB), so that an entry always fits one log record and one state-machine batch.
pub const MAX_BATCH_BYTES: usize = 16 << 20;

/// The result of applying one log entry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Response {
    /// How many key writes the entry carried (0 for blank and membership entries).
    pub writes: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validate_refuses_what_the_log_or_the_engine_cannot_take() {
        let put = |k: usize, v: usize| Request::Put {
            key: "k".repeat(k),
            value: "v".repeat(v),
        };
        assert!(put(1, 10).validate(1 << 20).is_ok());
        assert!(put(0, 10).validate(1 << 20).is_err(), "empty key");
        assert!(put(silt::MAX_KEY_BYTES + 1, 0)
            .validate(usize::MAX)
            .is_err());
        assert!(put(1, 2000).validate(1000).is_err(), "over the log's limit");
        assert!(Request::Batch { ops: vec![] }.validate(1 << 20).is_err());
        let big = Request::Batch {
            ops: (0..100)
                .map(|i| Op::Put {
                    key: format!("k{i}"),
                    value: "v".repeat(300_000),
                })
                .collect(),
        };
        assert!(big.validate(usize::MAX).is_err(), "over MAX_BATCH_BYTES");
    }
}
