//! The expected state: what the database must hold, kept outside its directory and updated
//! around every operation (RocksDB `db_stress`'s rule).
//!
//! Each (column family, key) has a **slot**: `version << 1 | present`. Versions only grow,
//! and every value written encodes its column family, key and version (see [`encode`]), so
//! any value read back can be placed exactly. Before a write, its thread records the write
//! as **pending** (every slot it changes, with the new slot value); after the database
//! acknowledges it, the slots take the new values and the pending record is cleared. So at
//! any crash each thread has at most one write in flight, and the verifier accepts for its
//! slots the old or the new values — all old or all new, a batch being atomic.
//!
//! The store is a file (`pwrite`s: a killed process loses nothing that reached the OS) or,
//! for in-process power-loss runs, memory.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;

/// The column families the workload uses. The last one is created and dropped by the
/// workload itself (by thread 0 only).
pub const CFS: [&str; 3] = ["default", "c1", "c2"];
/// The index in [`CFS`] of the family that comes and goes.
pub const VOLATILE_CF: usize = 2;
/// The most slots one write changes (a batch).
pub const MAX_PENDING: usize = 64;

const MAGIC: u64 = 0x5349_4c54_5354_5231; // "SILTSTR1"
/// magic, keys, threads, volatile family exists, writes acknowledged.
const HEADER: u64 = 40;
/// Per thread: state (8), count (8), then MAX_PENDING entries of (cf u32, key u32, slot u64).
const PENDING_BYTES: u64 = 16 + MAX_PENDING as u64 * 16;
/// `key` of a pending entry that creates (`slot` 1) or drops (`slot` 0) the volatile family.
pub const CF_OP: u32 = u32::MAX;

/// One slot a pending write changes: `key == CF_OP` for a create or drop of the volatile
/// family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Change {
    /// Index in [`CFS`].
    pub cf: u32,
    /// The key number, or [`CF_OP`].
    pub key: u32,
    /// The slot value after the write.
    pub slot: u64,
}

enum Store {
    File(File),
    Mem(Vec<u8>),
}

/// The expected state of a database with `keys` keys per column family, written by
/// `threads` threads.
pub struct Expected {
    store: Store,
    /// Keys per column family.
    pub keys: u32,
    /// Writer threads (thread `t` owns the keys `k` with `k % threads == t`).
    pub threads: u32,
}

impl Expected {
    /// Opens the expected-state file at `path`, creating it (everything absent, the volatile
    /// family existing) if missing.
    pub fn open(path: &Path, keys: u32, threads: u32) -> std::io::Result<Expected> {
        let new = !path.exists();
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let mut e = Expected {
            store: Store::File(f),
            keys,
            threads,
        };
        if new {
            e.init()?;
        } else {
            let (k, t) = (e.read_u64(8)?, e.read_u64(16)?);
            if e.read_u64(0)? != MAGIC || k != u64::from(keys) || t != u64::from(threads) {
                return Err(std::io::Error::other(format!(
                    "{} is not an expected-state file for {keys} keys and {threads} threads",
                    path.display()
                )));
            }
        }
        Ok(e)
    }

    /// A new expected state in memory.
    pub fn in_memory(keys: u32, threads: u32) -> Expected {
        let mut e = Expected {
            store: Store::Mem(Vec::new()),
            keys,
            threads,
        };
        e.init().expect("memory");
        e
    }

    fn init(&mut self) -> std::io::Result<()> {
        let len = self.slots_at() + CFS.len() as u64 * u64::from(self.keys) * 8;
        match &mut self.store {
            Store::File(f) => f.set_len(len)?,
            Store::Mem(v) => v.resize(len as usize, 0),
        }
        self.write_u64(0, MAGIC)?;
        self.write_u64(8, u64::from(self.keys))?;
        self.write_u64(16, u64::from(self.threads))?;
        self.write_u64(24, 1) // the volatile family exists
    }

    fn slots_at(&self) -> u64 {
        HEADER + u64::from(self.threads) * PENDING_BYTES
    }

    fn read_u64(&self, at: u64) -> std::io::Result<u64> {
        let mut b = [0u8; 8];
        match &self.store {
            Store::File(f) => f.read_exact_at(&mut b, at)?,
            Store::Mem(v) => b.copy_from_slice(&v[at as usize..at as usize + 8]),
        }
        Ok(u64::from_le_bytes(b))
    }

    fn write_u64(&mut self, at: u64, x: u64) -> std::io::Result<()> {
        match &mut self.store {
            Store::File(f) => f.write_all_at(&x.to_le_bytes(), at),
            Store::Mem(v) => {
                v[at as usize..at as usize + 8].copy_from_slice(&x.to_le_bytes());
                Ok(())
            }
        }
    }

    /// The slot of `key` in family `cf`.
    pub fn slot(&self, cf: usize, key: u32) -> u64 {
        let at = self.slots_at() + (cf as u64 * u64::from(self.keys) + u64::from(key)) * 8;
        self.read_u64(at).expect("expected-state read")
    }

    fn set_slot(&mut self, cf: usize, key: u32, slot: u64) {
        let at = self.slots_at() + (cf as u64 * u64::from(self.keys) + u64::from(key)) * 8;
        self.write_u64(at, slot).expect("expected-state write");
    }

    /// Whether the volatile family exists.
    pub fn volatile_exists(&self) -> bool {
        self.read_u64(24).expect("expected-state read") == 1
    }

    /// Records `changes` as thread `t`'s write in flight.
    pub fn begin(&mut self, t: u32, changes: &[Change]) {
        assert!(changes.len() <= MAX_PENDING);
        let base = HEADER + u64::from(t) * PENDING_BYTES;
        for (i, c) in changes.iter().enumerate() {
            let at = base + 16 + i as u64 * 16;
            self.write_u64(at, u64::from(c.cf) << 32 | u64::from(c.key))
                .expect("expected-state write");
            self.write_u64(at + 8, c.slot)
                .expect("expected-state write");
        }
        self.write_u64(base + 8, changes.len() as u64)
            .expect("expected-state write");
        self.write_u64(base, 1).expect("expected-state write");
    }

    /// Thread `t`'s write was acknowledged: apply it.
    pub fn commit(&mut self, t: u32) {
        for c in self.pending(t) {
            self.apply(c);
        }
        let n = self.read_u64(32).expect("expected-state read");
        self.write_u64(32, n + 1).expect("expected-state write");
        self.clear(t);
    }

    /// Writes committed into this expected state (acknowledged, or found applied by a
    /// verification), over its whole life.
    pub fn writes(&self) -> u64 {
        self.read_u64(32).expect("expected-state read")
    }

    /// Thread `t`'s write failed with nothing applied (a refused write): forget it.
    pub fn clear(&mut self, t: u32) {
        let base = HEADER + u64::from(t) * PENDING_BYTES;
        self.write_u64(base, 0).expect("expected-state write");
    }

    fn apply(&mut self, c: Change) {
        if c.key == CF_OP {
            self.write_u64(24, c.slot).expect("expected-state write");
            if c.slot == 0 {
                for k in 0..self.keys {
                    self.set_slot(c.cf as usize, k, 0);
                }
            }
        } else {
            self.set_slot(c.cf as usize, c.key, c.slot);
        }
    }

    /// Thread `t`'s write in flight, if any.
    pub fn pending(&self, t: u32) -> Vec<Change> {
        let base = HEADER + u64::from(t) * PENDING_BYTES;
        if self.read_u64(base).expect("expected-state read") != 1 {
            return Vec::new();
        }
        let n = self.read_u64(base + 8).expect("expected-state read") as usize;
        (0..n.min(MAX_PENDING))
            .map(|i| {
                let at = base + 16 + i as u64 * 16;
                let ck = self.read_u64(at).expect("expected-state read");
                Change {
                    cf: (ck >> 32) as u32,
                    key: ck as u32,
                    slot: self.read_u64(at + 8).expect("expected-state read"),
                }
            })
            .collect()
    }

    /// After a verification chose, per thread, whether its write in flight was applied:
    /// make that the expected state.
    pub fn resolve(&mut self, t: u32, applied: bool) {
        if applied {
            self.commit(t);
        } else {
            self.clear(t);
        }
    }
}

impl Expected {
    /// Makes `state` (as seen from outside: see `modes::State`) the expected state. Absent
    /// keys keep their version counter, so versions only grow.
    pub fn restore(&mut self, state: &[Option<Vec<Option<u64>>>]) {
        for (cf, keys) in state.iter().enumerate() {
            if cf == VOLATILE_CF {
                self.write_u64(24, u64::from(keys.is_some()))
                    .expect("expected-state write");
            }
            for k in 0..self.keys {
                let seen = keys.as_ref().and_then(|v| v[k as usize]);
                let s = match seen {
                    Some(s) => s,
                    None => self.slot(cf, k) & !1,
                };
                self.set_slot(cf, k, s);
            }
        }
        for t in 0..self.threads {
            self.clear(t);
        }
    }
}

/// A slot value.
pub fn slot(version: u64, present: bool) -> u64 {
    version << 1 | u64::from(present)
}

/// The value written for `key` of family `cf` at `version`: it names all three, then
/// filler (usually short, now and then 4–32 KiB, so tables and blocks vary).
pub fn encode(cf: usize, key: u32, version: u64) -> Vec<u8> {
    let mut v = format!("{cf}:{key}:{version}:").into_bytes();
    let h = version.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(key) << 7;
    let fill = if h % 61 == 0 {
        4096 + (h >> 8) as usize % (28 << 10)
    } else {
        (h >> 8) as usize % 120
    };
    v.extend((0..fill).map(|i| b'a' + ((i as u64 + h) % 26) as u8));
    v
}

/// Values of [`encode_big`] are at least this long; [`encode`]'s are shorter.
const BIG_BYTES: usize = 64 << 10;

/// A large value for `key` of family `cf` at `version` (64–100 KiB): a few of them make a
/// batch larger than one log record of the stress options' log, which the engine commits
/// in parts (`docs/format/batch.md`). Names all three, as [`encode`] does.
pub fn encode_big(cf: usize, key: u32, version: u64) -> Vec<u8> {
    let mut v = format!("{cf}:{key}:{version}:").into_bytes();
    let h = version.wrapping_mul(0xC2B2_AE3D_27D4_EB4F) ^ u64::from(key) << 9;
    let fill = BIG_BYTES + (h >> 8) as usize % (36 << 10);
    v.extend((0..fill).map(|i| b'A' + ((i as u64 + h) % 26) as u8));
    v
}

/// The (family, key, version) a value names, if it is one [`encode`] or [`encode_big`]
/// wrote — filler included.
pub fn decode(v: &[u8]) -> Option<(usize, u32, u64)> {
    let s = std::str::from_utf8(v).ok()?;
    let mut it = s.splitn(4, ':');
    let cf = it.next()?.parse().ok()?;
    let key = it.next()?.parse().ok()?;
    let version = it.next()?.parse().ok()?;
    let want = if v.len() >= BIG_BYTES {
        encode_big(cf, key, version)
    } else {
        encode(cf, key, version)
    };
    (want == v).then_some((cf, key, version))
}

/// The key bytes of key number `k` (fixed width, so key order is number order).
pub fn key_bytes(k: u32) -> Vec<u8> {
    format!("key{k:08}").into_bytes()
}
