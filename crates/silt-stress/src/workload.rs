//! The workload: seeded random operations of every kind the engine has, each write
//! recorded in the expected state before it is issued and committed after it is
//! acknowledged. Reads during the run are checked on the spot against the expected state.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use silt::{Db, Error, WriteBatch, WriteOptions};

use crate::expected::{
    decode, encode, encode_big, key_bytes, slot, Change, Expected, CFS, CF_OP, MAX_PENDING,
    VOLATILE_CF,
};
use crate::modes::{state_of, Recorder};
use crate::verify::handles;

/// Whether key `k` is a write-once key: put only when absent and removed only with
/// `single_delete`, as the single-delete contract demands (seed 002's queue pattern). One
/// key in eight.
pub fn write_once(k: u32) -> bool {
    k % 8 == 7
}

/// Set by a crash run's child ([`crate::modes::child`]): each big write is announced on
/// stderr as it is issued (`big write`), because a killed child never prints its tally and
/// the parent would otherwise not know whether the cycle cut any commit in parts.
pub static ANNOUNCE_BIG_WRITES: AtomicBool = AtomicBool::new(false);

/// How a run stops.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Operations per thread (`u64::MAX`: until the time limit).
    pub ops: u64,
    /// Wall time.
    pub time: Duration,
}

/// What a run did.
#[derive(Debug, Default)]
pub struct Tally {
    /// Operations done, of every kind.
    pub ops: AtomicU64,
    /// Writes acknowledged.
    pub writes: AtomicU64,
    /// Reads checked on the spot.
    pub reads_checked: AtomicU64,
    /// Batches too large for one log record issued ([`Worker::big_write`]).
    pub big_writes: AtomicU64,
    /// Violations found during the run (reads that contradicted the expected state).
    pub violations: Mutex<Vec<String>>,
    /// The first error the engine returned (the run stops at it).
    pub error: Mutex<Option<String>>,
}

/// Runs the workload on `db` from `threads` threads (each owning the keys `k` with
/// `k % threads == t`), recording every write in `exp`. Stops at the limits, at the first
/// error from the engine (recorded in the tally; the write in flight stays pending in
/// `exp`, for the verifier), or at a violation.
pub fn run(db: &Db, exp: Arc<Mutex<Expected>>, seed: u64, limits: Limits) -> Tally {
    run_inner(db, exp, seed, limits, None)
}

/// [`run`] with one thread for `ops` operations, telling `recorder` the state after each
/// write (for power-loss checks, where any acknowledged prefix may be what survives).
pub fn run_recorded(
    db: &Db,
    exp: Arc<Mutex<Expected>>,
    seed: u64,
    ops: u64,
    recorder: &Recorder,
) -> Tally {
    let limits = Limits {
        ops,
        time: Duration::from_secs(600),
    };
    run_inner(db, exp, seed, limits, Some(recorder))
}

fn run_inner(
    db: &Db,
    exp: Arc<Mutex<Expected>>,
    seed: u64,
    limits: Limits,
    recorder: Option<&Recorder>,
) -> Tally {
    let tally = Arc::new(Tally::default());
    let stop = Arc::new(AtomicBool::new(false));
    let threads = exp.lock().expect("expected state").threads;
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let (exp, tally, stop) = (exp.clone(), tally.clone(), stop.clone());
            s.spawn(move || {
                let mut w = Worker {
                    db,
                    exp,
                    t,
                    threads,
                    rng: ChaCha8Rng::seed_from_u64(seed ^ (u64::from(t) << 48)),
                    tally: &tally,
                    recorder,
                };
                let mut n = 0;
                while n < limits.ops && start.elapsed() < limits.time && !stop.load(SeqCst) {
                    if let Err(e) = w.step() {
                        *tally.error.lock().expect("tally") = Some(e.to_string());
                        stop.store(true, SeqCst);
                        break;
                    }
                    if !tally.violations.lock().expect("tally").is_empty() {
                        stop.store(true, SeqCst);
                    }
                    n += 1;
                    tally.ops.fetch_add(1, SeqCst);
                }
            });
        }
    });
    Arc::try_unwrap(tally).unwrap_or_default()
}

struct Worker<'a> {
    db: &'a Db,
    exp: Arc<Mutex<Expected>>,
    t: u32,
    threads: u32,
    rng: ChaCha8Rng,
    tally: &'a Tally,
    recorder: Option<&'a Recorder>,
}

impl Worker<'_> {
    fn key(&mut self) -> u32 {
        let keys = self.exp.lock().expect("expected state").keys;
        let n = keys.div_ceil(self.threads).max(1);
        let k = self.rng.random_range(0..n) * self.threads + self.t;
        if k < keys {
            k
        } else {
            self.t
        }
    }

    /// A family for a data write: the volatile one only from thread 0 (which alone creates
    /// and drops it), and only while it exists.
    fn cf(&mut self) -> usize {
        let n = if self.t == 0 && self.exp.lock().expect("expected state").volatile_exists() {
            CFS.len()
        } else {
            VOLATILE_CF
        };
        self.rng.random_range(0..n)
    }

    fn step(&mut self) -> Result<(), Error> {
        match self.rng.random_range(0..1000) {
            0..450 => self.write(1, false),
            450..600 => self.write(1, true),
            600..645 => self.single_delete(),
            645..650 if std::env::var_os("SILT_STRESS_NO_BIG_WRITES").is_none() => self.big_write(),
            650..800 => {
                let n = self.rng.random_range(2..12);
                let deletes = self.rng.random_bool(0.2);
                self.write(n, deletes)
            }
            800..900 => self.check_reads(),
            900..950 => self.check_snapshot(),
            950..975 => self.db.flush(),
            975..985 => self.db.compact_range::<&[u8], _>(..),
            985..1000 if self.t == 0 && std::env::var_os("SILT_STRESS_NO_CF_OPS").is_none() => {
                self.cf_op()
            }
            _ => self.check_reads(),
        }
    }

    /// A batch of `n` puts (or, with `deletes`, some deletes) on this thread's keys.
    /// Write-once keys ([`write_once`]) follow the single-delete contract instead: put when
    /// absent, single-deleted when present, never overwritten or deleted otherwise.
    fn write(&mut self, n: usize, deletes: bool) -> Result<(), Error> {
        let cfs = handles(self.db)?;
        let mut changes: Vec<Change> = Vec::new();
        let mut batch = WriteBatch::new();
        for _ in 0..n.min(MAX_PENDING) {
            let (cf, k) = (self.cf(), self.key());
            if changes.iter().any(|c| c.cf == cf as u32 && c.key == k) {
                continue; // one change per slot per write
            }
            let Some(h) = &cfs[cf] else { continue };
            let old = self.exp.lock().expect("expected state").slot(cf, k);
            let version = (old >> 1) + 1;
            let present = old & 1 == 1;
            let delete = if write_once(k) {
                present
            } else {
                deletes && self.rng.random_bool(0.5)
            };
            if delete && write_once(k) {
                batch.single_delete_cf(h, &key_bytes(k));
            } else if delete {
                batch.delete_cf(h, &key_bytes(k));
            } else {
                batch.put_cf(h, &key_bytes(k), &encode(cf, k, version));
            }
            changes.push(Change {
                cf: cf as u32,
                key: k,
                slot: slot(version, !delete),
            });
        }
        if changes.is_empty() {
            return Ok(());
        }
        self.issue(changes, batch)
    }

    /// Unless `SILT_STRESS_NO_BIG_WRITES` is set (inherited by the crash modes' children): a
    /// batch of 4–7 puts of 64–100 KiB values ([`encode_big`]) on this thread's keys
    /// (not write-once ones): always larger than one record of the stress options' log
    /// (256 KiB segments), so the engine writes it as part records and a commit record,
    /// which kills, power losses and flushes between the parts must leave all or nothing of.
    fn big_write(&mut self) -> Result<(), Error> {
        let cfs = handles(self.db)?;
        let n = self.rng.random_range(4..8);
        let mut changes: Vec<Change> = Vec::new();
        let mut batch = WriteBatch::new();
        for _ in 0..n * 4 {
            if changes.len() == n {
                break;
            }
            let (cf, k) = (self.cf(), self.key());
            if write_once(k) || changes.iter().any(|c| c.cf == cf as u32 && c.key == k) {
                continue;
            }
            let Some(h) = &cfs[cf] else { continue };
            let version = (self.exp.lock().expect("expected state").slot(cf, k) >> 1) + 1;
            batch.put_cf(h, &key_bytes(k), &encode_big(cf, k, version));
            changes.push(Change {
                cf: cf as u32,
                key: k,
                slot: slot(version, true),
            });
        }
        if changes.is_empty() {
            return Ok(());
        }
        self.tally.big_writes.fetch_add(1, SeqCst);
        if ANNOUNCE_BIG_WRITES.load(SeqCst) {
            eprintln!("big write");
        }
        self.issue(changes, batch)
    }

    /// A write of one write-once key: its put, or its single delete.
    fn single_delete(&mut self) -> Result<(), Error> {
        for _ in 0..8 {
            let k = self.key();
            if write_once(k) {
                let cfs = handles(self.db)?;
                let cf = self.cf();
                let Some(h) = &cfs[cf] else { return Ok(()) };
                let old = self.exp.lock().expect("expected state").slot(cf, k);
                let present = old & 1 == 1;
                let mut batch = WriteBatch::new();
                if present {
                    batch.single_delete_cf(h, &key_bytes(k));
                } else {
                    batch.put_cf(h, &key_bytes(k), &encode(cf, k, (old >> 1) + 1));
                }
                let change = Change {
                    cf: cf as u32,
                    key: k,
                    slot: slot((old >> 1) + 1, !present),
                };
                return self.issue(vec![change], batch);
            }
        }
        Ok(())
    }

    /// Tells the recorder, if any, the state `changes` make.
    fn record(&self, changes: &[Change]) {
        let Some(r) = self.recorder else { return };
        let mut state = state_of(&self.exp.lock().expect("expected state"));
        for c in changes {
            if c.key == CF_OP {
                state[c.cf as usize] =
                    (c.slot == 1).then(|| vec![None; state[0].as_ref().map_or(0, Vec::len)]);
            } else if let Some(keys) = &mut state[c.cf as usize] {
                keys[c.key as usize] = (c.slot & 1 == 1).then_some(c.slot);
            }
        }
        r.begin(state);
    }

    fn issue(&mut self, changes: Vec<Change>, batch: WriteBatch) -> Result<(), Error> {
        self.record(&changes);
        self.exp
            .lock()
            .expect("expected state")
            .begin(self.t, &changes);
        let sync = self.rng.random_ratio(1, 50);
        let opts = if sync {
            WriteOptions::durable()
        } else {
            WriteOptions::default()
        };
        match self.db.write(batch, opts) {
            Ok(()) => {
                self.exp.lock().expect("expected state").commit(self.t);
                self.tally.writes.fetch_add(1, SeqCst);
                if let Some(r) = self.recorder {
                    r.commit(sync);
                }
                Ok(())
            }
            // Refused before anything was written: forget it.
            Err(e @ (Error::InvalidArgument(_) | Error::ColumnFamilyNotFound(_))) => {
                self.exp.lock().expect("expected state").clear(self.t);
                if let Some(r) = self.recorder {
                    r.abandon();
                }
                Err(e)
            }
            // Anything else may or may not have reached the log: it stays pending.
            Err(e) => Err(e),
        }
    }

    /// Creates or drops the volatile family (thread 0 only).
    fn cf_op(&mut self) -> Result<(), Error> {
        let exists = self.exp.lock().expect("expected state").volatile_exists();
        let change = Change {
            cf: VOLATILE_CF as u32,
            key: CF_OP,
            slot: u64::from(!exists),
        };
        self.record(&[change]);
        self.exp
            .lock()
            .expect("expected state")
            .begin(self.t, &[change]);
        let r = if exists {
            self.db.drop_cf(CFS[VOLATILE_CF])
        } else {
            self.db.create_cf(CFS[VOLATILE_CF]).map(|_| ())
        };
        r?;
        if std::env::var_os("SILT_STRESS_DEBUG").is_some() {
            eprintln!(
                "cfop: {} -> {:?}",
                if exists { "drop" } else { "create" },
                self.db.cf(CFS[VOLATILE_CF]).ok()
            );
        }
        self.exp.lock().expect("expected state").commit(self.t);
        if let Some(r) = self.recorder {
            r.commit(true); // the log is synced before a column family changes
        }
        Ok(())
    }

    /// Point reads and a range scan of this thread's keys, against the expected state
    /// (exact: no other thread writes them).
    fn check_reads(&mut self) -> Result<(), Error> {
        let cfs = handles(self.db)?;
        let cf = self.rng.random_range(0..VOLATILE_CF);
        let Some(h) = &cfs[cf] else { return Ok(()) };
        for _ in 0..8 {
            let k = self.key();
            let got = self.db.get_cf(h, &key_bytes(k))?;
            let want = self.exp.lock().expect("expected state").slot(cf, k);
            self.check(cf, k, got.as_deref(), want);
        }
        let lo = self.key();
        let hi = lo + self.rng.random_range(1..200);
        let reverse = self.rng.random_bool(0.5);
        let it = self.db.range_cf(h, key_bytes(lo)..key_bytes(hi));
        let items: Vec<_> = if reverse {
            it.rev().collect()
        } else {
            it.collect()
        };
        let mut seen = 0;
        for item in items {
            let (kb, v) = item?;
            let Some((_, k, _)) = decode(&v) else {
                self.violation(format!("scan of {} returned a garbled value", CFS[cf]));
                continue;
            };
            if kb != key_bytes(k) {
                self.violation(format!("scan of {}: key and value disagree", CFS[cf]));
            }
            if k % self.threads == self.t {
                seen += 1;
                let want = self.exp.lock().expect("expected state").slot(cf, k);
                self.check(cf, k, Some(&v), want);
            }
        }
        // Every present key of this thread in the range was seen.
        let keys = self.exp.lock().expect("expected state").keys;
        let want = (lo..hi.min(keys))
            .filter(|k| k % self.threads == self.t)
            .filter(|&k| self.exp.lock().expect("expected state").slot(cf, k) & 1 == 1)
            .count();
        if seen != want {
            self.violation(format!(
                "scan of {} [{lo}, {hi}) saw {seen} of this thread's keys, expected {want}",
                CFS[cf]
            ));
        }
        Ok(())
    }

    /// A snapshot keeps its view while this thread overwrites keys under it.
    fn check_snapshot(&mut self) -> Result<(), Error> {
        let cf = 0;
        let keys: Vec<u32> = (0..6).map(|_| self.key()).collect();
        let snap = self.db.snapshot();
        let before: Vec<u64> = {
            let exp = self.exp.lock().expect("expected state");
            keys.iter().map(|&k| exp.slot(cf, k)).collect()
        };
        self.write(4, true)?;
        for (&k, &want) in keys.iter().zip(&before) {
            let got = snap.get(&key_bytes(k))?;
            self.check(cf, k, got.as_deref(), want);
        }
        Ok(())
    }

    fn check(&mut self, cf: usize, k: u32, got: Option<&[u8]>, want: u64) {
        self.tally.reads_checked.fetch_add(1, SeqCst);
        let ok = match got {
            None => want & 1 == 0,
            Some(v) => decode(v) == Some((cf, k, want >> 1)) && want & 1 == 1,
        };
        if !ok {
            self.violation(format!(
                "read of {}/{k} during the run: got {:?}, expected slot {want:#x}",
                CFS[cf],
                got.map(|v| String::from_utf8_lossy(&v[..v.len().min(40)]).into_owned())
            ));
        }
    }

    fn violation(&self, what: String) {
        self.tally.violations.lock().expect("tally").push(what);
    }
}
