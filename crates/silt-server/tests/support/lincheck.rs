//! A linearizability checker for a key-value store seen as one register per key.
//!
//! Linearizability is compositional (Herlihy and Wing): a history is linearizable iff the
//! sub-history of each key is, so [`check_kv`] checks each key's operations on its own.
//! Each key is searched with Wing and Gong's algorithm as Lowe improved it: linearize some
//! operation that may come first (invoked before every pending operation's answer), apply it
//! to the register, recurse; backtrack when stuck; and remember every (set of linearized
//! operations, register value) already explored so that no configuration is searched twice.
//!
//! Writes whose outcome the client could not know (a timeout, a leader change after the
//! proposal) have no answer time: they may take effect at any point after they were
//! invoked, or never. The search succeeds once every operation that was answered is
//! linearized.
//!
//! Written here rather than taken from a crate: the Rust ones found (`todc-utils`, last
//! released 2023) need every call answered and check one object, not a map with
//! indeterminate writes.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// What an operation did to its key's register.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Call {
    /// Set the value (`None`: delete).
    Write(Option<String>),
    /// Read and saw this value (`None`: absent).
    Read(Option<String>),
}

/// One operation on one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Op {
    /// The key.
    pub key: String,
    /// What it did.
    pub call: Call,
    /// When it was invoked (any monotonic clock shared by all clients).
    pub invoke: u64,
    /// When it was answered; `None` for a write whose outcome is unknown.
    pub complete: Option<u64>,
    /// Who issued it, for reports.
    pub client: usize,
}

/// A key whose history is not linearizable, with its operations for the report.
#[derive(Debug)]
pub struct Violation {
    /// The key.
    pub key: String,
    /// Its operations, by invocation.
    pub ops: Vec<Op>,
}

/// Checks every key's history; returns the first violation found.
///
/// # Errors
///
/// The key whose operations admit no linearization.
pub fn check_kv(ops: &[Op]) -> Result<(), Violation> {
    let mut by_key: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
    for op in ops {
        by_key.entry(op.key.as_str()).or_default().push(op);
    }
    for (key, ops) in by_key {
        if !check_register(&ops) {
            let mut ops: Vec<Op> = ops.into_iter().cloned().collect();
            ops.sort_by_key(|o| o.invoke);
            return Err(Violation {
                key: key.into(),
                ops,
            });
        }
    }
    Ok(())
}

/// Whether one register's history (initially absent) is linearizable.
pub fn check_register(ops: &[&Op]) -> bool {
    // Values interned: the register's state is a small integer (0: absent).
    let mut ids: HashMap<String, u32> = HashMap::new();
    let mut intern = |v: &Option<String>| -> u32 {
        match v {
            None => 0,
            Some(s) => {
                let n = ids.len() as u32 + 1;
                *ids.entry(s.clone()).or_insert(n)
            }
        }
    };
    struct Item {
        write: bool,
        value: u32,
        invoke: u64,
        complete: u64,
        answered: bool,
    }
    let mut items: Vec<Item> = ops
        .iter()
        .map(|o| {
            let (write, value) = match &o.call {
                Call::Write(v) => (true, intern(v)),
                Call::Read(v) => (false, intern(v)),
            };
            Item {
                write,
                value,
                invoke: o.invoke,
                complete: o.complete.unwrap_or(u64::MAX),
                answered: o.complete.is_some(),
            }
        })
        .collect();
    items.sort_by_key(|i| i.invoke);
    let n = items.len();
    let words = n.div_ceil(64);
    let mut done = vec![0u64; words];
    let is_done = |d: &[u64], i: usize| d[i / 64] >> (i % 64) & 1 == 1;
    // The answers of the pending operations, earliest first.
    let mut pending: BTreeSet<(u64, usize)> = items
        .iter()
        .enumerate()
        .map(|(i, it)| (it.complete, i))
        .collect();
    let mut state = 0u32;
    let mut left = items.iter().filter(|i| i.answered).count();
    let mut seen: HashSet<(Vec<u64>, u32)> = HashSet::new();
    // The search stack: (item linearized, state before it).
    let mut stack: Vec<(usize, u32)> = Vec::new();
    let mut from = 0usize;
    loop {
        if left == 0 {
            return true;
        }
        // The two earliest answers among pending operations: an operation may go next iff
        // it was invoked before every *other* pending operation was answered.
        let mut it2 = pending.iter();
        let (min1, min1_at) = it2.next().copied().unwrap_or((u64::MAX, usize::MAX));
        let min2 = it2.next().map_or(u64::MAX, |p| p.0);
        // Operations before the first pending one are all linearized.
        let base = done
            .iter()
            .position(|w| *w != u64::MAX)
            .map_or(n, |w| w * 64 + done[w].trailing_ones() as usize);
        let start = from.max(base);
        let mut next = None;
        for (i, it) in items.iter().enumerate().skip(start) {
            let bound = if i == min1_at { min2 } else { min1 };
            // Sorted by invocation, and the earliest-answered item was invoked before its
            // answer: past the first other item invoked after that answer, none may go.
            if i != min1_at && it.invoke >= min1 {
                break;
            }
            if is_done(&done, i) || it.invoke >= bound {
                continue;
            }
            let after = if it.write {
                it.value
            } else if it.value == state {
                state
            } else {
                continue;
            };
            done[i / 64] |= 1 << (i % 64);
            if seen.insert((done.clone(), after)) {
                next = Some((i, after));
                break;
            }
            done[i / 64] &= !(1 << (i % 64));
        }
        match next {
            Some((i, after)) => {
                pending.remove(&(items[i].complete, i));
                stack.push((i, state));
                state = after;
                if items[i].answered {
                    left -= 1;
                }
                from = 0;
            }
            None => {
                let Some((i, before)) = stack.pop() else {
                    return false;
                };
                done[i / 64] &= !(1 << (i % 64));
                pending.insert((items[i].complete, i));
                state = before;
                if items[i].answered {
                    left += 1;
                }
                from = i + 1;
            }
        }
    }
}
