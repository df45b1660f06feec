//! Model test: random operations against the engine and a `BTreeMap`, with flushes,
//! compactions, snapshots, scans both ways, clean reopens and simulated power loss
//! (`SimFs`). The seed is printed on failure; replay one with `SILT_MODEL_SEED=<seed>`.
//!
//! `SILT_MODEL_CASES` (default 24) sets how many seeds run, `SILT_MODEL_OPS` (default 600)
//! how many operations each, `SILT_MODEL_BASE` the first seed.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use common::debug_entries;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use silt::{
    Append, Clock, ColumnFamily, Compression, Db, ManualClock, Snapshot, SyncMode, WriteBatch,
    WriteOptions,
};
use silt_vfs::{CrashMode, SimFs};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// What the model's merge operator (`Append`) puts between a value and an operand.
const MERGE_SEP: &[u8] = b"+";

/// Where the model's clock starts (ms since the epoch).
const T0: u64 = 1_700_000_000_000;

/// A value written with a time to live carries its expiry in its own bytes (behind this
/// marker), so that every model state (current, snapshots, states since the last sync)
/// can drop it when the clock passes it, without a side table per state.
const TTL_MARK: &[u8] = b"\xffttl\xff";

fn ttl_value(rng: &mut ChaCha8Rng, expiry: u64) -> Vec<u8> {
    let mut v = TTL_MARK.to_vec();
    v.extend_from_slice(&expiry.to_be_bytes());
    let rest = value(rng);
    v.extend_from_slice(&rest);
    v
}

fn ttl_expiry(v: &[u8]) -> Option<u64> {
    let rest = v.strip_prefix(TTL_MARK)?;
    Some(u64::from_be_bytes(rest.get(..8)?.try_into().ok()?))
}

/// Drops from `m` every value whose expiry is at or before `now`: what the database reads.
fn expire(m: &mut BTreeMap<String, Model>, now: u64) {
    for cf in m.values_mut() {
        cf.retain(|_, v| ttl_expiry(v).is_none_or(|at| at > now));
    }
}

struct World {
    fs: Arc<SimFs>,
    /// The database's clock, which only the `advance clock` step moves.
    clock: Arc<ManualClock>,
    db: Db,
    sync: SyncMode,
    compression: Compression,
    /// Per column family name.
    model: BTreeMap<String, Model>,
    /// Writes since the last single delete, per (cf, key): a put counts 1, a delete counts
    /// 2. Single delete is defined only at exactly 1 (one put, nothing else).
    puts: BTreeMap<(String, Vec<u8>), u32>,
    snaps: Vec<(Snapshot, BTreeMap<String, Model>)>,
    /// Model states since the last point everything was durable (for `None` crashes).
    since_sync: Vec<BTreeMap<String, Model>>,
    stats_levels_seen: usize,
    log: Vec<String>,
}

fn open(fs: &Arc<SimFs>, sync: SyncMode, compression: Compression, clock: &Arc<ManualClock>) -> Db {
    Db::builder("/db")
        .file_system(fs.clone())
        .clock(clock.clone())
        .sync_mode(sync)
        .compression(compression)
        .memtable_bytes(8 << 10)
        // Scans over a few dead entries flush early, so flushes that drop single deletes
        // with their puts and overwritten versions (`FlushView`) happen often.
        .memtable_scan_flush_trigger(8)
        // The memtable filter, off by default, at its largest: 2 KiB for 8 KiB memtables,
        // so it answers both ways and sometimes wrongly.
        .memtable_bloom_ratio(0.25)
        .table_target_bytes(8 << 10)
        .level_base_bytes(16 << 10)
        .level_size_ratio(4)
        .l0_compaction_trigger(2)
        .block_size_bytes(512)
        .wal_segment_bytes(1 << 20)
        // Values of 24 bytes and more go to blob files: about half the small values and
        // every large one, so tables mix inline values and pointers.
        .blob_threshold_bytes(Some(24))
        .merge_operator(Arc::new(Append {
            separator: MERGE_SEP.to_vec(),
        }))
        .open()
        .expect("open")
}

fn key(rng: &mut ChaCha8Rng) -> Vec<u8> {
    let n: u32 = rng.random_range(0..300);
    let mut k = format!("k{n:04}").into_bytes();
    if rng.random_bool(0.1) {
        k.push(rng.random()); // keys that are prefixes of others
    }
    k
}

fn value(rng: &mut ChaCha8Rng) -> Vec<u8> {
    let len = if rng.random_bool(0.02) {
        rng.random_range(2000..6000)
    } else {
        rng.random_range(0..60)
    };
    (0..len).map(|_| rng.random()).collect()
}

fn bound(rng: &mut ChaCha8Rng) -> Bound<Vec<u8>> {
    match rng.random_range(0..3) {
        0 => Bound::Unbounded,
        1 => Bound::Included(key(rng)),
        _ => Bound::Excluded(key(rng)),
    }
}

fn model_range(m: &Model, lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> Vec<(Vec<u8>, Vec<u8>)> {
    let ok_lo = |k: &Vec<u8>| match lo {
        Bound::Included(b) => k >= b,
        Bound::Excluded(b) => k > b,
        Bound::Unbounded => true,
    };
    let ok_hi = |k: &Vec<u8>| match hi {
        Bound::Included(b) => k <= b,
        Bound::Excluded(b) => k < b,
        Bound::Unbounded => true,
    };
    m.iter()
        .filter(|(k, _)| ok_lo(k) && ok_hi(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

impl World {
    fn cf(&self, name: &str) -> ColumnFamily {
        self.db.cf(name).expect("cf")
    }

    fn full_state(&self) -> BTreeMap<String, Model> {
        let mut out = BTreeMap::new();
        for name in self.db.list_cfs() {
            let cf = self.cf(&name);
            let m: Model = self
                .db
                .range_cf::<&[u8], _>(&cf, ..)
                .map(|r| r.expect("scan"))
                .collect();
            out.insert(name, m);
        }
        out
    }

    fn check_all(&self, why: &str) {
        let got = self.full_state();
        let mut want = self.model.clone();
        want.retain(|_, _| true);
        assert_eq!(
            got.keys().collect::<Vec<_>>(),
            want.keys().collect::<Vec<_>>(),
            "{why}: cfs"
        );
        for (name, m) in &want {
            if got[name] != *m {
                let g = &got[name];
                let missing: Vec<_> = m.keys().filter(|k| !g.contains_key(*k)).take(5).collect();
                let extra: Vec<_> = g.keys().filter(|k| !m.contains_key(*k)).take(5).collect();
                let changed: Vec<_> = m
                    .iter()
                    .filter(|(k, v)| g.get(*k).is_some_and(|x| x != *v))
                    .map(|(k, _)| k)
                    .take(5)
                    .collect();
                if let Some(k) = extra.first().or(missing.first()).or(changed.first()) {
                    let ks = format!("{k:?}");
                    for l in debug_entries(&self.db, &self.cf(name), k) {
                        eprintln!("  entry {l}");
                    }
                    for l in self
                        .log
                        .iter()
                        .filter(|l| l.contains(&ks) || !l.contains('['))
                    {
                        eprintln!("  {l}");
                    }
                }
                panic!(
                    "{why}: contents of {name} differ: {} vs {} keys; missing {missing:?}, \
                     extra {extra:?}, changed {changed:?}",
                    g.len(),
                    m.len()
                );
            }
        }
    }

    fn step(&mut self, rng: &mut ChaCha8Rng, step: usize) {
        let names: Vec<String> = self.model.keys().cloned().collect();
        let name = names[rng.random_range(0..names.len())].clone();
        let cf = self.cf(&name);
        let durable = matches!(self.sync, SyncMode::Full);
        match rng.random_range(0..100) {
            30..=34 => {
                // A put with a time to live of up to about five clock steps.
                let k = key(rng);
                let ttl = rng.random_range(1..5000u64);
                let v = ttl_value(rng, self.clock.now_millis() + ttl);
                let mut b = WriteBatch::new();
                b.put_cf_with_ttl(&cf, &k, &v, std::time::Duration::from_millis(ttl));
                if let Err(e) = self.db.write(b, WriteOptions::default()) {
                    panic!(
                        "step {step}: put ttl: {e} ({:?})",
                        self.db.background_error()
                    );
                }
                self.log.push(format!(
                    "{step} put_ttl {name} {k:?} ttl {ttl} len {}",
                    v.len()
                ));
                *self.puts.entry((name.clone(), k.clone())).or_default() += 1;
                self.model.get_mut(&name).unwrap().insert(k, v);
            }
            0..=29 => {
                let (k, v) = (key(rng), value(rng));
                if let Err(e) = self.db.put_cf(&cf, &k, &v) {
                    panic!("step {step}: put: {e} ({:?})", self.db.background_error());
                }
                self.log
                    .push(format!("{step} put {name} {k:?} len {}", v.len()));
                *self.puts.entry((name.clone(), k.clone())).or_default() += 1;
                self.model.get_mut(&name).unwrap().insert(k, v);
            }
            39..=42 => {
                // A merge operand, folded by `Append`: the model folds it the same way. Not
                // onto a value with a time to live (a read folds onto it while it lives and
                // onto nothing after, which this model's values cannot say). On a few keys,
                // so that runs of operands meet in compactions.
                let k = format!("k{:04}", rng.random_range(0..8u32)).into_bytes();
                let cur = self.model[&name].get(&k).cloned();
                if cur.as_deref().is_some_and(|v| ttl_expiry(v).is_some()) {
                    return;
                }
                let operand: Vec<u8> = (0..rng.random_range(0..12)).map(|_| rng.random()).collect();
                if let Err(e) = self.db.merge_cf(&cf, &k, &operand) {
                    panic!("step {step}: merge: {e} ({:?})", self.db.background_error());
                }
                self.log
                    .push(format!("{step} merge {name} {k:?} len {}", operand.len()));
                // Single delete is undefined over operands.
                self.puts.insert((name.clone(), k.clone()), 2);
                let new = match cur {
                    None => operand,
                    Some(mut v) => {
                        v.extend_from_slice(MERGE_SEP);
                        v.extend_from_slice(&operand);
                        v
                    }
                };
                self.model.get_mut(&name).unwrap().insert(k, new);
            }
            35..=38 => {
                let k = key(rng);
                self.db.delete_cf(&cf, &k).expect("delete");
                *self.puts.entry((name.clone(), k.clone())).or_default() += 2;
                self.log.push(format!("{step} delete {name} {k:?}"));
                self.model.get_mut(&name).unwrap().remove(&k);
            }
            43..=47 => {
                // Single delete, only where it is defined: exactly one put since the last
                // delete.
                let legal: Vec<Vec<u8>> = self
                    .puts
                    .iter()
                    .filter(|((n, _), c)| *n == name && **c == 1)
                    .map(|((_, k), _)| k.clone())
                    .collect();
                if let Some(k) = legal.get(rng.random_range(0..legal.len().max(1))) {
                    let mut b = WriteBatch::new();
                    b.single_delete_cf(&cf, k);
                    self.db
                        .write(b, WriteOptions::default())
                        .expect("single delete");
                    self.log.push(format!("{step} single_delete {name} {k:?}"));
                    self.puts.remove(&(name.clone(), k.clone()));
                    self.model.get_mut(&name).unwrap().remove(k);
                }
            }
            48..=55 => {
                let mut b = WriteBatch::new();
                let mut next = self.model.clone();
                for _ in 0..rng.random_range(1..20) {
                    let n2 = names[rng.random_range(0..names.len())].clone();
                    let c2 = self.cf(&n2);
                    let k = key(rng);
                    if rng.random_bool(0.8) {
                        let v = value(rng);
                        b.put_cf(&c2, &k, &v);
                        self.log
                            .push(format!("{step} batch put {n2} {k:?} len {}", v.len()));
                        *self.puts.entry((n2.clone(), k.clone())).or_default() += 1;
                        next.get_mut(&n2).unwrap().insert(k, v);
                    } else {
                        b.delete_cf(&c2, &k);
                        *self.puts.entry((n2.clone(), k.clone())).or_default() += 2;
                        self.log.push(format!("{step} batch delete {n2} {k:?}"));
                        next.get_mut(&n2).unwrap().remove(&k);
                    }
                }
                let opts = if rng.random_bool(0.3) {
                    WriteOptions::durable()
                } else {
                    WriteOptions::default()
                };
                self.db.write(b, opts).expect("batch");
                self.model = next;
                if opts.sync == Some(true) {
                    self.since_sync.clear();
                }
            }
            56..=67 => {
                let k = key(rng);
                let (got, want) = if !self.snaps.is_empty() && rng.random_bool(0.4) {
                    let (s, m) = &self.snaps[rng.random_range(0..self.snaps.len())];
                    if !m.contains_key(&name) {
                        return;
                    }
                    (
                        s.get_cf(&cf, &k).expect("snap get"),
                        m[&name].get(&k).cloned(),
                    )
                } else {
                    (
                        self.db.get_cf(&cf, &k).expect("get"),
                        self.model[&name].get(&k).cloned(),
                    )
                };
                assert_eq!(got, want, "step {step}: get {k:?} in {name}");
            }
            68..=77 => {
                let (lo, hi) = (bound(rng), bound(rng));
                let reverse = rng.random_bool(0.5);
                let (snap, m) = if !self.snaps.is_empty() && rng.random_bool(0.3) {
                    let i = rng.random_range(0..self.snaps.len());
                    (Some(i), self.snaps[i].1.get(&name).cloned())
                } else {
                    (None, self.model.get(&name).cloned())
                };
                let Some(m) = m else { return };
                let mut want = model_range(&m, &lo, &hi);
                let it = match snap {
                    Some(i) => self.snaps[i].0.range_cf(&cf, (lo.clone(), hi.clone())),
                    None => self.db.range_cf(&cf, (lo.clone(), hi.clone())),
                };
                let got: Vec<_> = if reverse {
                    want.reverse();
                    it.rev().map(|r| r.expect("scan")).collect()
                } else {
                    it.map(|r| r.expect("scan")).collect()
                };
                if got != want {
                    let gk: std::collections::BTreeSet<_> =
                        got.iter().map(|(k, _)| k.clone()).collect();
                    let wk: std::collections::BTreeSet<_> =
                        want.iter().map(|(k, _)| k.clone()).collect();
                    let d: Vec<_> = gk.symmetric_difference(&wk).take(3).collect();
                    eprintln!("diff keys {d:?}");
                    if let Some(k) = d.first() {
                        let fwd = self.db.range_cf::<&[u8], _>(&cf, ..).count();
                        eprintln!(
                            "forward count {fwd}; get {:?}",
                            self.db.get_cf(&cf, k).map(|v| v.map(|v| v.len()))
                        );
                        for l in debug_entries(&self.db, &cf, k) {
                            eprintln!("  entry {l}");
                        }
                    }
                    if let Some(k) = d.first() {
                        let ks = format!("{k:?}");
                        for l in self
                            .log
                            .iter()
                            .filter(|l| l.contains(&ks) || !l.contains('['))
                        {
                            eprintln!("  {l}");
                        }
                    }
                }
                assert!(
                    got == want,
                    "step {step}: range {lo:?}..{hi:?} rev={reverse} in {name}: got {} want {}",
                    got.len(),
                    want.len()
                );
            }
            78..=80 => {
                // Both ends at once until they meet.
                let m = self.model[&name].clone();
                let want: Vec<_> = m.into_iter().collect();
                let mut it = self.db.range_cf::<&[u8], _>(&cf, ..);
                let (mut front, mut back) = (Vec::new(), Vec::new());
                loop {
                    if rng.random_bool(0.5) {
                        match it.next() {
                            None => break,
                            Some(r) => front.push(r.expect("scan front")),
                        }
                    } else {
                        match it.next_back() {
                            None => break,
                            Some(r) => back.push(r.expect("scan back")),
                        }
                    }
                }
                back.reverse();
                front.extend(back);
                assert!(front == want, "step {step}: double-ended scan of {name}");
            }
            81..=83 => {
                let p = key(rng)[..3].to_vec();
                let want: Vec<_> = self.model[&name]
                    .iter()
                    .filter(|(k, _)| k.starts_with(&p))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                let got: Vec<_> = self
                    .db
                    .prefix_cf(&cf, &p)
                    .map(|r| r.expect("prefix"))
                    .collect();
                assert!(got == want, "step {step}: prefix {p:?}");
            }
            84..=86 => {
                self.log
                    .push(format!("{step} snapshot op ({} live)", self.snaps.len()));
                if self.snaps.len() < 4 {
                    self.snaps.push((self.db.snapshot(), self.model.clone()));
                } else {
                    self.snaps.remove(rng.random_range(0..self.snaps.len()));
                }
            }
            87..=88 => {
                self.db.flush().expect("flush");
                self.log.push(format!("{step} flush"));
            }
            89 => {
                if let Err(e) = self.db.compact_range_cf::<&[u8], _>(&cf, ..) {
                    let recent: Vec<&String> = self
                        .log
                        .iter()
                        .filter(|l| !l.contains('['))
                        .rev()
                        .take(12)
                        .collect();
                    panic!(
                        "step {step}: compact {name}: {e} (background error: {:?}; \
                         recent steps, newest first: {recent:?})",
                        self.db.background_error()
                    );
                }
                self.log.push(format!("{step} compact {name}"));
            }
            90 => {
                if self.model.len() < 3 && rng.random_bool(0.5) {
                    let n = format!("cf{}", rng.random_range(0..5));
                    self.db.create_cf(&n).expect("create cf");
                    self.model.entry(n.clone()).or_default();
                    // Durable at once (a manifest edit), unlike the data writes before it.
                    for st in self.since_sync.iter_mut() {
                        st.entry(n.clone()).or_default();
                    }
                } else if name != "default" {
                    self.db.drop_cf(&name).expect("drop cf");
                    self.model.remove(&name);
                    self.puts.retain(|(n, _), _| *n != name);
                    for (_, m) in self.snaps.iter_mut() {
                        m.remove(&name);
                    }
                    for st in self.since_sync.iter_mut() {
                        st.remove(&name);
                    }
                }
            }
            91..=93 => {
                self.log.push(format!("{step} reopen"));
                if std::env::var_os("SILT_DEBUG_COMPACTION").is_some() {
                    eprintln!("step {step} reopen");
                }
                self.reopen(rng, step)
            }
            94..=96 => {
                self.log.push(format!("{step} crash"));
                self.crash(rng, step)
            }
            97 => {
                let d = rng.random_range(0..3000u64);
                self.clock.advance(std::time::Duration::from_millis(d));
                self.log.push(format!("{step} advance clock {d} ms"));
                self.expire_models();
            }
            _ => {
                let s = self.db.stats();
                let levels = s.levels.iter().filter(|l| l.tables > 0).count();
                self.stats_levels_seen = self.stats_levels_seen.max(levels);
            }
        }
        if durable {
            self.since_sync.clear();
        }
        self.since_sync.push(self.model.clone());
    }

    /// The clock moved: every model state drops what expired, and a key whose value
    /// expired no longer allows a single delete (its put is still in the database).
    fn expire_models(&mut self) {
        let now = self.clock.now_millis();
        for (name, m) in &self.model {
            for (k, v) in m {
                if ttl_expiry(v).is_some_and(|at| at <= now) {
                    self.puts.insert((name.clone(), k.clone()), 2);
                }
            }
        }
        expire(&mut self.model, now);
        for (_, m) in self.snaps.iter_mut() {
            expire(m, now);
        }
        for st in self.since_sync.iter_mut() {
            expire(st, now);
        }
    }

    fn reopen(&mut self, _rng: &mut ChaCha8Rng, step: usize) {
        self.snaps.clear();
        let db = std::mem::replace(
            &mut self.db,
            open(&SimFs::new(), self.sync, self.compression, &self.clock),
        );
        db.close().expect("close");
        self.db = open(&self.fs, self.sync, self.compression, &self.clock);
        self.check_all(&format!("step {step}: after reopen"));
    }

    fn crash(&mut self, rng: &mut ChaCha8Rng, step: usize) {
        self.snaps.clear();
        let mode = match rng.random_range(0..5) {
            0 => CrashMode::DropAll,
            1 => CrashMode::KeepAll,
            2 => CrashMode::Prefix,
            3 => CrashMode::Sectors,
            _ => CrashMode::Tear,
        };
        let image = self.fs.crash(mode, rng.random());
        if std::env::var_os("SILT_DEBUG_COMPACTION").is_some() {
            eprintln!("step {step} crash");
        }
        self.log
            .push(format!("{step} crash mode {mode:?} sync {:?}", self.sync));
        let old = std::mem::replace(
            &mut self.db,
            open(&SimFs::new(), self.sync, self.compression, &self.clock),
        );
        drop(old);
        self.fs = image;
        self.db = open(&self.fs, self.sync, self.compression, &self.clock);
        let got = self.full_state();
        if matches!(self.sync, SyncMode::Full) {
            self.check_all(&format!("step {step}: after crash ({mode:?})"));
        } else {
            // A prefix: one of the states since everything was last durable.
            let found = self.since_sync.iter().rev().position(|s| *s == got);
            if found.is_none() {
                let last = self.since_sync.last().cloned().unwrap_or_default();
                for (n, m) in &last {
                    let g = got.get(n).cloned().unwrap_or_default();
                    let diff: Vec<_> = m
                        .keys()
                        .chain(g.keys())
                        .filter(|k| m.get(*k) != g.get(*k))
                        .take(4)
                        .collect();
                    eprintln!(
                        "cf {n}: {} keys recovered, {} in the newest candidate, differing {diff:?}",
                        g.len(),
                        m.len()
                    );
                    for k in diff {
                        let ks = format!("{k:?}");
                        for l in self
                            .log
                            .iter()
                            .filter(|l| l.contains(&ks) || !l.contains('['))
                            .rev()
                            .take(25)
                        {
                            eprintln!("  {l}");
                        }
                    }
                }
            }
            assert!(
                found.is_some(),
                "step {step}: after crash ({mode:?}) the state is not a prefix of the history \
                 ({} candidates)",
                self.since_sync.len()
            );
            let i = self.since_sync.len() - 1 - found.unwrap_or(0);
            self.model = self.since_sync[i].clone();
            // Which writes survived is unknown: single delete is undefined for every key
            // written so far.
            // A key the recovered state holds may have lost a single delete: the put
            // under it may be its second since.
            for c in self.puts.values_mut() {
                *c = 2;
            }
            for (n, m) in &self.model {
                for k in m.keys() {
                    self.puts.insert((n.clone(), k.clone()), 2);
                }
            }
        }
        self.since_sync.clear();
        self.since_sync.push(self.model.clone());
    }
}

fn run(seed: u64, ops: usize) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let sync = if rng.random_bool(0.5) {
        SyncMode::Full
    } else {
        SyncMode::None
    };
    // From the seed without drawing from the generator, so older seeds replay unchanged.
    let compression =
        [Compression::None, Compression::Lz4, Compression::Zstd(1)][(seed % 3) as usize];
    let fs = SimFs::new();
    let clock = Arc::new(ManualClock::new(T0));
    let db = open(&fs, sync, compression, &clock);
    let mut model = BTreeMap::new();
    model.insert("default".to_string(), Model::new());
    let mut w = World {
        fs,
        clock,
        db,
        sync,
        compression,
        model: model.clone(),
        puts: BTreeMap::new(),
        snaps: Vec::new(),
        since_sync: vec![model],
        stats_levels_seen: 0,
        log: Vec::new(),
    };
    let watch = std::env::var("SILT_MODEL_WATCH").ok();
    for step in 0..ops {
        w.step(&mut rng, step);
        if let Some(spec) = &watch {
            let (cfname, k) = spec.split_once(':').unwrap_or(("default", spec));
            let Ok(cf) = w.db.cf(cfname) else { continue };
            let got = w.db.get_cf(&cf, k.as_bytes()).unwrap();
            let want = w
                .model
                .get(cfname)
                .and_then(|m| m.get(k.as_bytes()).cloned());
            if got != want {
                for l in debug_entries(&w.db, &cf, k.as_bytes()) {
                    eprintln!("  entry {l}");
                }
                panic!(
                    "step {step}: watched key {k} diverged: got {:?} want {:?}",
                    got.map(|v| v.len()),
                    want.map(|v| v.len())
                );
            }
            eprintln!(
                "step {step} {k}: {:?}",
                debug_entries(&w.db, &cf, k.as_bytes())
            );
        }
    }
    w.check_all("end");
}

#[test]
fn model_with_flush_compaction_reopen_and_crash() {
    let cases: u64 = std::env::var("SILT_MODEL_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(24);
    let ops: usize = std::env::var("SILT_MODEL_OPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(600);
    let seeds: Vec<u64> = match std::env::var("SILT_MODEL_SEED") {
        Ok(s) => vec![s.parse().expect("SILT_MODEL_SEED must be a number")],
        Err(_) => {
            let base: u64 = std::env::var("SILT_MODEL_BASE")
                .map(|s| s.parse().expect("SILT_MODEL_BASE must be a number"))
                .unwrap_or(0x5117_0000);
            (0..cases).map(|i| base + i).collect()
        }
    };
    for seed in seeds {
        let r = std::panic::catch_unwind(|| run(seed, ops));
        if let Err(e) = r {
            eprintln!("model test failed with seed {seed} (replay: SILT_MODEL_SEED={seed})");
            std::panic::resume_unwind(e);
        }
    }
}

#[test]
fn model_reaches_deep_levels() {
    // Enough writes that compaction moves data below the base level and reads cross levels.
    let fs = SimFs::new();
    let db = open(
        &fs,
        SyncMode::None,
        Compression::Lz4,
        &Arc::new(ManualClock::new(T0)),
    );
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut m = Model::new();
    for i in 0..20_000u32 {
        let k = format!("key{:06}", rng.random_range(0..5000u32)).into_bytes();
        let v = format!("v{i}").into_bytes();
        db.put(&k, &v).unwrap();
        m.insert(k, v);
    }
    db.flush().unwrap();
    let s = db.stats();
    let levels = s.levels.iter().filter(|l| l.tables > 0).count();
    assert!(levels >= 2, "expected several levels, got {:?}", s.levels);
    for (k, v) in &m {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v));
    }
    let got: Model = db.range::<&[u8], _>(..).map(|r| r.unwrap()).collect();
    assert!(got == m);
    db.compact_range::<&[u8], _>(..).unwrap();
    let s = db.stats();
    assert_eq!(
        s.levels[..6].iter().map(|l| l.tables).sum::<u64>(),
        0,
        "{:?}",
        s.levels
    );
    let got: Model = db.range::<&[u8], _>(..).rev().map(|r| r.unwrap()).collect();
    assert!(got == m);
}
