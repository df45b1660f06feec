//! Concurrency: writers, readers, iterators, snapshots and background flushes and
//! compactions together for a while, checked against what was acknowledged.
//!
//! Every key has one writer at a time, and each write to a key carries the next number of
//! that key's history (1, 2, 3, ...), so a reader can tell exactly which states a read may
//! return: after loading `acked` (the number of the last acknowledged write) before the read
//! and again after it, a read must return the state of some write numbered between the
//! first load and the second load plus one (the write in flight). That checks "an
//! acknowledged write is seen, or something newer" and "a value never goes backwards".
//!
//! * Writers: each has private keys `p/{w}/{i}` (puts, and a delete every fifth write of a
//!   key), takes turns on shared keys `s/{j}` (a per-key lock orders their writes, so the
//!   values grow), and writes *pair batches*: `pair/{w}/{a,b,..}`, spread over every
//!   column family, all set to the same number in one batch.
//! * Readers: `get`s of every kind of key, checked as above.
//! * Iterators: forward, reverse and prefix scans of private ranges (order, no duplicates,
//!   bounds, every key's state checked as above, including keys that must be present);
//!   full scans; pair scans through one snapshot in every column family and through one
//!   iterator (a batch is never seen half-applied); both ends of one iterator consumed
//!   alternately; a cursor moved at random on a snapshot, against the snapshot's scan.
//! * Snapshot holders: keep a few snapshots for a while and re-read them: identical
//!   results, and gets agree with scans.
//! * Maintenance: `flush`, `compact_range` (whole and partial) and `sync`, while tiny
//!   memtables and tables keep background flushes and compactions busy.
//!
//! Then everything is stopped, the database closed and reopened, and every key must hold
//! its last acknowledged state.
//!
//! Variants: `SyncMode::None` and `SyncMode::Full`, with one, two and three column
//! families. `SILT_CONCURRENCY_SECS` (default 10) is the total load time, shared by the
//! variants (which run one after another; a variant runs longer, up to a limit, until
//! enough writes, flushes, compactions, scans and snapshot re-reads happened to mean
//! something). `SILT_CONCURRENCY_SEED` fixes the random choices (printed with every
//! result); thread interleavings still differ from run to run.
//!
//! The `repro_*` tests are minimal reproducers of engine bugs this test found, kept as
//! regressions.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::{debug_entries, engine_panics, install_engine_panic_hook, show};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use silt::{ColumnFamily, Db, DbBuilder, Snapshot, SyncMode, WriteBatch, WriteOptions};

const WRITERS: usize = 3;
const PRIVATE_KEYS: usize = 120;
const SHARED_KEYS: usize = 12;
const VARIANTS: u64 = 4;

/// Pair keys of writer `w`: one per column family, and a second one in the first.
fn pair_keys(w: usize, ncf: usize) -> Vec<(usize, Vec<u8>)> {
    let mut v: Vec<(usize, Vec<u8>)> = (0..ncf)
        .map(|c| {
            (
                c,
                format!("pair/{w}/{}", (b'a' + c as u8) as char).into_bytes(),
            )
        })
        .collect();
    v.push((0, format!("pair/{w}/z").into_bytes()));
    v
}

fn private_key(w: usize, i: usize) -> Vec<u8> {
    format!("p/{w}/{i:04}").into_bytes()
}

fn shared_key(j: usize) -> Vec<u8> {
    format!("s/{j:03}").into_bytes()
}

/// The column family of private key `i` / shared key `j`.
fn cf_of(i: usize, ncf: usize) -> usize {
    i % ncf
}

/// Write number `n` of a private key is a delete every fifth time.
fn is_delete(n: u64) -> bool {
    n % 5 == 0
}

/// The value of write `n` to `key`: the key, the number, and padding of varying length
/// (now and then a large one, so some blocks hold a single entry).
fn value(key: &[u8], n: u64) -> Vec<u8> {
    let mut v = format!("{}|{n:010}|", String::from_utf8_lossy(key)).into_bytes();
    let h = key.iter().fold(n.wrapping_mul(0x9E37_79B9), |a, b| {
        a.wrapping_mul(31) ^ u64::from(*b)
    });
    let pad = if h % 50 == 0 {
        3000
    } else {
        (h % 120) as usize
    };
    v.resize(v.len() + pad, b'.');
    v
}

/// The number in a value, checking that it names `key`.
fn number(key: &[u8], v: &[u8]) -> Result<u64, String> {
    let s = std::str::from_utf8(v).map_err(|_| format!("value of {key:?} is not UTF-8"))?;
    let mut parts = s.splitn(3, '|');
    let k = parts.next().unwrap_or_default();
    let n = parts.next().unwrap_or_default();
    if k.as_bytes() != key {
        return Err(format!(
            "key {} holds a value written for {k:?}",
            String::from_utf8_lossy(key)
        ));
    }
    let n: u64 = n
        .parse()
        .map_err(|_| format!("bad value for {}", String::from_utf8_lossy(key)))?;
    if v != value(key, n).as_slice() {
        return Err(format!(
            "value of {} (write {n}) is damaged",
            String::from_utf8_lossy(key)
        ));
    }
    Ok(n)
}

/// Whether a read returning `got` (a write number, or absent) is allowed for a key whose
/// acknowledged write number was `before` when the read started and `after` when it ended,
/// where deletes are the writes for which `deletes` holds.
fn allowed(got: Option<u64>, before: u64, after: u64, deletes: fn(u64) -> bool) -> bool {
    match got {
        Some(n) => n >= before && n <= after + 1 && n >= 1 && !deletes(n),
        None => before == 0 || (before..=after + 1).any(|m| m >= 1 && deletes(m)),
    }
}

fn never(_: u64) -> bool {
    false
}

/// What the threads share: the acknowledged state of every key.
struct World {
    db: Db,
    cfs: Vec<ColumnFamily>,
    /// `[writer][i]`: number of the last acknowledged write of private key `i`.
    private: Vec<Vec<AtomicU64>>,
    /// Per shared key: the lock writers take, holding the last acknowledged number.
    shared_lock: Vec<Mutex<u64>>,
    /// Per shared key: the last acknowledged number (readable without the lock).
    shared: Vec<AtomicU64>,
    /// Per writer: the last acknowledged pair batch number.
    pairs: Vec<AtomicU64>,
    stop: AtomicBool,
    failure: Mutex<Vec<String>>,
    counts: Counts,
}

#[derive(Default)]
struct Counts {
    writes: AtomicU64,
    gets: AtomicU64,
    scans: AtomicU64,
    scanned: AtomicU64,
    pair_checks: AtomicU64,
    snapshot_rereads: AtomicU64,
    flushes: AtomicU64,
    compact_ranges: AtomicU64,
    /// The longest `flush` and `compact_range` calls, in milliseconds (reported only).
    flush_max_ms: AtomicU64,
    compact_max_ms: AtomicU64,
}

impl World {
    fn fail(&self, msg: String) {
        self.failure.lock().unwrap().push(msg);
        self.stop.store(true, SeqCst);
    }

    fn stopped(&self) -> bool {
        self.stop.load(SeqCst)
    }

    fn ncf(&self) -> usize {
        self.cfs.len()
    }
}

type Check = Result<(), String>;

// ------------------------------------------------------------------------------ writers

fn writer(world: &World, w: usize, mut rng: ChaCha8Rng) -> Check {
    let ncf = world.ncf();
    let pairs = pair_keys(w, ncf);
    while !world.stopped() {
        let r = rng.random_range(0..100);
        if r < 60 {
            // A private key: the next write of its history.
            let i = rng.random_range(0..PRIVATE_KEYS);
            let n = world.private[w][i].load(SeqCst) + 1;
            let k = private_key(w, i);
            let cf = &world.cfs[cf_of(i, ncf)];
            let res = if is_delete(n) {
                world.db.delete_cf(cf, &k)
            } else if rng.random_bool(0.5) {
                world.db.put_cf(cf, &k, &value(&k, n))
            } else {
                // Through a batch that writes the key twice: the last write wins.
                let mut b = WriteBatch::new();
                b.put_cf(cf, &k, b"overwritten in the same batch")
                    .put_cf(cf, &k, &value(&k, n));
                world.db.write(b, WriteOptions::default())
            };
            res.map_err(|e| format!("writer {w}: write {n} of {}: {e}", show(&k)))?;
            world.private[w][i].store(n, SeqCst);
        } else if r < 80 {
            // A shared key, under its lock so its numbers grow in commit order.
            let j = rng.random_range(0..SHARED_KEYS);
            let mut g = world.shared_lock[j].lock().unwrap();
            let n = *g + 1;
            let k = shared_key(j);
            world
                .db
                .put_cf(&world.cfs[cf_of(j, ncf)], &k, &value(&k, n))
                .map_err(|e| format!("writer {w}: write {n} of {}: {e}", show(&k)))?;
            *g = n;
            world.shared[j].store(n, SeqCst);
        } else {
            // A pair batch: every pair key of this writer, in every column family.
            let n = world.pairs[w].load(SeqCst) + 1;
            let mut b = WriteBatch::new();
            for (c, k) in &pairs {
                b.put_cf(&world.cfs[*c], k, &value(k, n));
            }
            let opts = if rng.random_bool(0.1) {
                WriteOptions::durable()
            } else {
                WriteOptions::default()
            };
            world
                .db
                .write(b, opts)
                .map_err(|e| format!("writer {w}: pair batch {n}: {e}"))?;
            world.pairs[w].store(n, SeqCst);
        }
        world.counts.writes.fetch_add(1, SeqCst);
    }
    Ok(())
}

// ------------------------------------------------------------------------------ readers

/// Checks one read of `key` against the window `before..=after + 1`, and against the
/// highest number this thread saw before for it (`seen`).
fn check_read(
    key: &[u8],
    got: Option<&[u8]>,
    before: u64,
    after: u64,
    deletes: fn(u64) -> bool,
    seen: Option<&mut u64>,
) -> Check {
    let n = match got {
        Some(v) => Some(number(key, v)?),
        None => None,
    };
    let mut lo = before;
    if let Some(s) = &seen {
        lo = lo.max(**s);
    }
    if !allowed(n, lo, after.max(lo), deletes) {
        return Err(format!(
            "{}: read {n:?}, but write {before} was acknowledged before the read \
             (highest seen by this thread {lo}) and {after} after it",
            show(key)
        ));
    }
    if let (Some(s), Some(n)) = (seen, n) {
        *s = (*s).max(n);
    }
    Ok(())
}

fn reader(world: &World, id: usize, mut rng: ChaCha8Rng) -> Check {
    let ncf = world.ncf();
    let mut seen_private = vec![vec![0u64; PRIVATE_KEYS]; WRITERS];
    let mut seen_shared = [0u64; SHARED_KEYS];
    let mut seen_pairs = vec![vec![0u64; ncf + 1]; WRITERS];
    while !world.stopped() {
        let r = rng.random_range(0..10);
        if r < 6 {
            let (w, i) = (
                rng.random_range(0..WRITERS),
                rng.random_range(0..PRIVATE_KEYS),
            );
            let k = private_key(w, i);
            let before = world.private[w][i].load(SeqCst);
            let got = world
                .db
                .get_cf(&world.cfs[cf_of(i, ncf)], &k)
                .map_err(|e| format!("reader {id}: get {}: {e}", show(&k)))?;
            let after = world.private[w][i].load(SeqCst);
            let seen = &mut seen_private[w][i];
            // A delete hides every older value, so "highest seen" is only a bound for puts.
            let seen = if got.is_some() { Some(seen) } else { None };
            check_read(&k, got.as_deref(), before, after, is_delete, seen)
                .map_err(|e| format!("reader {id}: {e}"))?;
        } else if r < 8 {
            let j = rng.random_range(0..SHARED_KEYS);
            let k = shared_key(j);
            let before = world.shared[j].load(SeqCst);
            let got = world
                .db
                .get_cf(&world.cfs[cf_of(j, ncf)], &k)
                .map_err(|e| format!("reader {id}: get {}: {e}", show(&k)))?;
            let after = world.shared[j].load(SeqCst);
            check_read(
                &k,
                got.as_deref(),
                before,
                after,
                never,
                Some(&mut seen_shared[j]),
            )
            .map_err(|e| format!("reader {id}: {e}"))?;
        } else {
            let w = rng.random_range(0..WRITERS);
            let pairs = pair_keys(w, ncf);
            let p = rng.random_range(0..pairs.len());
            let (c, k) = &pairs[p];
            let before = world.pairs[w].load(SeqCst);
            let got = world
                .db
                .get_cf(&world.cfs[*c], k)
                .map_err(|e| format!("reader {id}: get {}: {e}", show(k)))?;
            let after = world.pairs[w].load(SeqCst);
            let seen = Some(&mut seen_pairs[w][p]);
            check_read(k, got.as_deref(), before, after, never, seen)
                .map_err(|e| format!("reader {id}: {e}"))?;
        }
        if world.counts.gets.fetch_add(1, SeqCst) % 16 == 0 {
            // Leave the (two) cores to the writers now and then.
            thread::sleep(Duration::from_millis(1));
        }
    }
    Ok(())
}

// ------------------------------------------------------------------------------ iterators

type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

fn collect(it: impl Iterator<Item = silt::Result<(Vec<u8>, Vec<u8>)>>) -> Result<Pairs, String> {
    it.collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("scan: {e}"))
}

/// Keys strictly increasing (or decreasing), each inside `[lo, hi)`.
fn check_order(got: &Pairs, reverse: bool, lo: &[u8], hi: Option<&[u8]>) -> Check {
    for w in got.windows(2) {
        let ok = if reverse {
            w[0].0 > w[1].0
        } else {
            w[0].0 < w[1].0
        };
        if !ok {
            return Err(format!(
                "scan ({}) out of order or duplicated: {} then {}",
                if reverse { "reverse" } else { "forward" },
                show(&w[0].0),
                show(&w[1].0)
            ));
        }
    }
    for (k, _) in got {
        if k.as_slice() < lo || hi.is_some_and(|h| k.as_slice() >= h) {
            return Err(format!(
                "scan of [{}, {:?}) returned {}",
                show(lo),
                hi.map(show),
                show(k)
            ));
        }
    }
    Ok(())
}

/// A scan of writer `w`'s private keys `lo..hi` (indices) in column family `c`: order,
/// bounds, and every key's state, present or not, against the acknowledged numbers.
fn scan_private(world: &World, rng: &mut ChaCha8Rng) -> Check {
    let ncf = world.ncf();
    let w = rng.random_range(0..WRITERS);
    let c = rng.random_range(0..ncf);
    let cf = &world.cfs[c];
    let kind = rng.random_range(0..4);
    let (lo, hi) = match kind {
        // A prefix: `p/{w}/` or `p/{w}/00` (indices 0..100).
        0 => (0, PRIVATE_KEYS),
        1 => (0, 100.min(PRIVATE_KEYS)),
        _ => {
            let a = rng.random_range(0..PRIVATE_KEYS);
            let b = rng.random_range(a..=PRIVATE_KEYS);
            (a, b)
        }
    };
    let lo_key = private_key(w, lo);
    let hi_key = (hi < PRIVATE_KEYS).then(|| private_key(w, hi));
    let before: Vec<u64> = world.private[w].iter().map(|a| a.load(SeqCst)).collect();
    let reverse = rng.random_bool(0.5);
    let got = match kind {
        0 => {
            let it = world.db.prefix_cf(cf, format!("p/{w}/").as_bytes());
            if reverse {
                collect(it.rev())?
            } else {
                collect(it)?
            }
        }
        1 => {
            let it = world.db.prefix_cf(cf, format!("p/{w}/00").as_bytes());
            if reverse {
                collect(it.rev())?
            } else {
                collect(it)?
            }
        }
        _ => {
            let hi_b = match &hi_key {
                Some(h) => Bound::Excluded(h.clone()),
                None => Bound::Included(format!("p/{w}/9999").into_bytes()),
            };
            let it = world
                .db
                .range_cf(cf, (Bound::Included(lo_key.clone()), hi_b));
            if reverse {
                collect(it.rev())?
            } else {
                collect(it)?
            }
        }
    };
    let after: Vec<u64> = world.private[w].iter().map(|a| a.load(SeqCst)).collect();
    check_order(&got, reverse, &lo_key, hi_key.as_deref())?;
    let mut found: BTreeMap<Vec<u8>, &Vec<u8>> = BTreeMap::new();
    for (k, v) in &got {
        found.insert(k.clone(), v);
    }
    for i in (lo..hi).filter(|i| cf_of(*i, ncf) == c) {
        let k = private_key(w, i);
        check_read(
            &k,
            found.remove(&k).map(|v| v.as_slice()),
            before[i],
            after[i],
            is_delete,
            None,
        )
        .map_err(|e| format!("scan of p/{w}/{lo}..{hi} in cf {c}: {e}"))?;
    }
    if let Some(k) = found.keys().next() {
        return Err(format!(
            "scan of p/{w}/{lo}..{hi} in cf {c} returned {}, not a key of that column family",
            show(k)
        ));
    }
    world.counts.scanned.fetch_add(got.len() as u64, SeqCst);
    Ok(())
}

/// Every pair key of every writer, read through one snapshot in every column family: all
/// of a writer's pair keys hold the same number, at least the one acknowledged before.
fn check_pairs_at(world: &World, snap: &Snapshot, before: &[u64]) -> Result<Vec<u64>, String> {
    let ncf = world.ncf();
    let mut by_key: BTreeMap<(usize, Vec<u8>), Vec<u8>> = BTreeMap::new();
    for (c, cf) in world.cfs.iter().enumerate() {
        let got = collect(snap.range_cf(cf, &b"pair/"[..]..&b"pair0"[..]))?;
        for (k, v) in got {
            by_key.insert((c, k), v);
        }
    }
    let mut out = Vec::new();
    for (w, before) in before.iter().enumerate() {
        let mut nums = Vec::new();
        for (c, k) in pair_keys(w, ncf) {
            let n = match by_key.get(&(c, k.clone())) {
                Some(v) => number(&k, v)?,
                None => 0,
            };
            nums.push(n);
        }
        if nums.iter().any(|n| *n != nums[0]) {
            return Err(format!(
                "writer {w}'s pair batch seen half-applied through snapshot {}: {nums:?}",
                snap.seqno()
            ));
        }
        if nums[0] < *before {
            return Err(format!(
                "writer {w}'s pair batch {before} was acknowledged before snapshot {}, \
                 which sees {}",
                snap.seqno(),
                nums[0]
            ));
        }
        out.push(nums[0]);
    }
    world.counts.pair_checks.fetch_add(1, SeqCst);
    Ok(out)
}

/// One iterator over the default column family's pair keys: pairs `a` and `z` of each
/// writer (both in that column family) are equal.
fn check_pairs_one_iterator(world: &World) -> Check {
    let before: Vec<u64> = world.pairs.iter().map(|a| a.load(SeqCst)).collect();
    let got = collect(world.db.prefix_cf(&world.cfs[0], b"pair/"))?;
    check_order(&got, false, b"pair/", Some(b"pair0"))?;
    let m: BTreeMap<Vec<u8>, Vec<u8>> = got.into_iter().collect();
    for (w, before) in before.iter().enumerate() {
        let (a, z) = (
            format!("pair/{w}/a").into_bytes(),
            format!("pair/{w}/z").into_bytes(),
        );
        let na = m.get(&a).map(|v| number(&a, v)).transpose()?.unwrap_or(0);
        let nz = m.get(&z).map(|v| number(&z, v)).transpose()?.unwrap_or(0);
        if na != nz || na < *before {
            return Err(format!(
                "one iterator saw writer {w}'s pair as a={na}, z={nz} \
                 (batch {before} acknowledged before it was created)"
            ));
        }
    }
    world.counts.pair_checks.fetch_add(1, SeqCst);
    Ok(())
}

/// A full scan of a column family: strictly ordered, every value belongs to its key, and
/// shared keys at least at their acknowledged numbers.
fn full_scan(world: &World, rng: &mut ChaCha8Rng) -> Check {
    let c = rng.random_range(0..world.ncf());
    let before: Vec<u64> = world.shared.iter().map(|a| a.load(SeqCst)).collect();
    let reverse = rng.random_bool(0.5);
    let it = world.db.range_cf::<&[u8], _>(&world.cfs[c], ..);
    let got = if reverse {
        collect(it.rev())?
    } else {
        collect(it)?
    };
    check_order(&got, reverse, b"", None)?;
    for (k, v) in &got {
        let n = number(k, v)?;
        if let Some(j) = k
            .strip_prefix(b"s/")
            .and_then(|s| std::str::from_utf8(s).ok()?.parse::<usize>().ok())
        {
            if n < before[j] {
                return Err(format!(
                    "full scan of cf {c} ({}): {} at {n}, but {} was acknowledged before \
                     the scan; where its versions are now: {:?}",
                    if reverse { "reverse" } else { "forward" },
                    show(k),
                    before[j],
                    debug_entries(&world.db, &world.cfs[c], k)
                ));
            }
        }
    }
    world.counts.scanned.fetch_add(got.len() as u64, SeqCst);
    Ok(())
}

/// Both ends of one iterator, consumed alternately, meet exactly: together they are the
/// forward scan of the same snapshot.
fn both_ends(world: &World, rng: &mut ChaCha8Rng) -> Check {
    let cf = &world.cfs[rng.random_range(0..world.ncf())];
    let snap = world.db.snapshot();
    let w = rng.random_range(0..WRITERS);
    let lo = format!("p/{w}/").into_bytes();
    let hi = format!("p/{w}0").into_bytes();
    let forward = collect(snap.range_cf(cf, lo.as_slice()..hi.as_slice()))?;
    let mut it = snap.range_cf(cf, lo.as_slice()..hi.as_slice());
    let (mut front, mut back) = (Vec::new(), Vec::new());
    loop {
        let item = if rng.random_bool(0.5) {
            it.next().map(|r| r.map(|p| front.push(p)))
        } else {
            it.next_back().map(|r| r.map(|p| back.push(p)))
        };
        match item {
            None => break,
            Some(Err(e)) => return Err(format!("both ends: {e}")),
            Some(Ok(())) => {}
        }
    }
    back.reverse();
    front.extend(back);
    if front != forward {
        return Err(format!(
            "both ends of one iterator gave {} pairs, the forward scan {} (snapshot {})",
            front.len(),
            forward.len(),
            snap.seqno()
        ));
    }
    Ok(())
}

/// A cursor on a snapshot, moved at random (seeks both ways, steps both ways), lands where
/// the snapshot's scan says: an unpositioned cursor steps to the first (or last) pair.
fn cursor_walk(world: &World, rng: &mut ChaCha8Rng) -> Check {
    let cf = &world.cfs[rng.random_range(0..world.ncf())];
    let snap = world.db.snapshot();
    let all = collect(snap.range_cf::<&[u8], _>(cf, ..))?;
    let mut cur = snap.cursor_cf(cf);
    let mut pos: Option<usize> = None;
    let n = all.len();
    let mut trail = Vec::new();
    for _ in 0..12 {
        let target = if rng.random_bool(0.8) {
            private_key(
                rng.random_range(0..WRITERS),
                rng.random_range(0..PRIVATE_KEYS),
            )
        } else {
            shared_key(rng.random_range(0..SHARED_KEYS))
        };
        let (what, got) = match rng.random_range(0..6) {
            0 => {
                let i = all.partition_point(|(k, _)| *k < target);
                pos = (i < n).then_some(i);
                (format!("seek {}", show(&target)), cur.seek(&target))
            }
            1 => {
                let i = all.partition_point(|(k, _)| *k <= target);
                pos = i.checked_sub(1);
                (
                    format!("seek_for_prev {}", show(&target)),
                    cur.seek_for_prev(&target),
                )
            }
            2 | 3 => {
                pos = match pos {
                    None => (n > 0).then_some(0),
                    Some(i) => (i + 1 < n).then_some(i + 1),
                };
                ("next".to_string(), cur.next())
            }
            _ => {
                pos = match pos {
                    None => n.checked_sub(1),
                    Some(i) => i.checked_sub(1),
                };
                ("prev".to_string(), cur.prev())
            }
        };
        trail.push(what);
        let got = got.map_err(|e| format!("cursor {trail:?}: {e}"))?;
        let want = pos.map(|i| &all[i]);
        if got.as_ref() != want {
            return Err(format!(
                "cursor on snapshot {} after {trail:?}: at {:?}, the scan says {:?}",
                snap.seqno(),
                got.map(|(k, _)| show(&k)),
                want.map(|(k, _)| show(k))
            ));
        }
    }
    Ok(())
}

fn iterator_thread(world: &World, id: usize, mut rng: ChaCha8Rng) -> Check {
    while !world.stopped() {
        let r = rng.random_range(0..11);
        let res = match r {
            0..=4 => scan_private(world, &mut rng),
            5 => full_scan(world, &mut rng),
            6 => check_pairs_one_iterator(world),
            7 | 8 => {
                let before: Vec<u64> = world.pairs.iter().map(|a| a.load(SeqCst)).collect();
                let snap = world.db.snapshot();
                check_pairs_at(world, &snap, &before).map(|_| ())
            }
            9 => both_ends(world, &mut rng),
            _ => cursor_walk(world, &mut rng),
        };
        res.map_err(|e| format!("iterator thread {id}: {e}"))?;
        world.counts.scans.fetch_add(1, SeqCst);
        thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

// ------------------------------------------------------------------------------ snapshots

/// What was read through a snapshot: every column family's full scan.
struct Held {
    snap: Snapshot,
    scans: Vec<Pairs>,
    until: Instant,
}

fn read_snapshot(world: &World, snap: &Snapshot) -> Result<Vec<Pairs>, String> {
    world
        .cfs
        .iter()
        .map(|cf| collect(snap.range_cf::<&[u8], _>(cf, ..)))
        .collect()
}

fn snapshot_thread(world: &World, mut rng: ChaCha8Rng) -> Check {
    let mut held: Vec<Held> = Vec::new();
    while !world.stopped() || !held.is_empty() {
        if held.len() < 3 && !world.stopped() {
            let before: Vec<u64> = world.pairs.iter().map(|a| a.load(SeqCst)).collect();
            let snap = world.db.snapshot();
            check_pairs_at(world, &snap, &before)?;
            let scans = read_snapshot(world, &snap)?;
            let hold = Duration::from_millis(rng.random_range(20..400));
            held.push(Held {
                snap,
                scans,
                until: Instant::now() + hold,
            });
        }
        thread::sleep(Duration::from_millis(5));
        let now = Instant::now();
        let mut i = 0;
        while i < held.len() {
            if held[i].until > now && !world.stopped() {
                i += 1;
                continue;
            }
            let h = held.swap_remove(i);
            let again = read_snapshot(world, &h.snap)?;
            for (c, (a, b)) in h.scans.iter().zip(&again).enumerate() {
                if a != b {
                    let diff = a
                        .iter()
                        .zip(b)
                        .position(|(x, y)| x != y)
                        .unwrap_or(a.len().min(b.len()));
                    return Err(format!(
                        "snapshot {} re-read differs in cf {c}: {} then {} pairs, first \
                         difference at {diff}: {:?} vs {:?}",
                        h.snap.seqno(),
                        a.len(),
                        b.len(),
                        a.get(diff).map(|p| show(&p.0)),
                        b.get(diff).map(|p| show(&p.0))
                    ));
                }
            }
            // Backwards, and by gets: the same.
            let c = rng.random_range(0..world.ncf());
            let mut rev = collect(h.snap.range_cf::<&[u8], _>(&world.cfs[c], ..).rev())?;
            rev.reverse();
            if rev != h.scans[c] {
                return Err(format!(
                    "snapshot {}: reverse scan of cf {c} differs from the forward one",
                    h.snap.seqno()
                ));
            }
            for _ in 0..20 {
                if h.scans[c].is_empty() {
                    break;
                }
                let (k, v) = &h.scans[c][rng.random_range(0..h.scans[c].len())];
                let got = h
                    .snap
                    .get_cf(&world.cfs[c], k)
                    .map_err(|e| format!("snapshot get: {e}"))?;
                if got.as_ref() != Some(v) {
                    return Err(format!(
                        "snapshot {}: get {} disagrees with its scan",
                        h.snap.seqno(),
                        show(k)
                    ));
                }
            }
            world.counts.snapshot_rereads.fetch_add(1, SeqCst);
        }
    }
    Ok(())
}

// ------------------------------------------------------------------------------ maintenance

fn maintenance(world: &World, mut rng: ChaCha8Rng) -> Check {
    while !world.stopped() {
        thread::sleep(Duration::from_millis(rng.random_range(10..120)));
        let cf = &world.cfs[rng.random_range(0..world.ncf())];
        let t = Instant::now();
        let ms = || t.elapsed().as_millis() as u64;
        match rng.random_range(0..10) {
            0..=3 => {
                world.db.flush().map_err(|e| format!("flush: {e}"))?;
                world.counts.flushes.fetch_add(1, SeqCst);
                world.counts.flush_max_ms.fetch_max(ms(), SeqCst);
            }
            4..=5 => {
                world
                    .db
                    .compact_range_cf::<&[u8], _>(cf, ..)
                    .map_err(|e| format!("compact_range(..): {e}"))?;
                world.counts.compact_ranges.fetch_add(1, SeqCst);
                world.counts.compact_max_ms.fetch_max(ms(), SeqCst);
            }
            6..=8 => {
                let w = rng.random_range(0..WRITERS);
                let a = private_key(w, rng.random_range(0..PRIVATE_KEYS));
                let b = private_key(w, rng.random_range(0..PRIVATE_KEYS));
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                world
                    .db
                    .compact_range_cf(cf, lo.as_slice()..=hi.as_slice())
                    .map_err(|e| format!("compact_range({}..={}): {e}", show(&lo), show(&hi)))?;
                world.counts.compact_ranges.fetch_add(1, SeqCst);
                world.counts.compact_max_ms.fetch_max(ms(), SeqCst);
            }
            _ => world.db.sync().map_err(|e| format!("sync: {e}"))?,
        }
    }
    Ok(())
}

// ------------------------------------------------------------------------------ the run

fn builder(dir: &std::path::Path, sync: SyncMode) -> DbBuilder {
    Db::builder(dir)
        .sync_mode(sync)
        .memtable_bytes(4 << 10)
        .table_target_bytes(4 << 10)
        .level_base_bytes(16 << 10)
        .level_size_ratio(4)
        .l0_compaction_trigger(2)
        .block_size_bytes(512)
        .block_cache_bytes(64 << 10)
        .wal_segment_bytes(64 << 10)
}

fn cf_names(ncf: usize) -> Vec<String> {
    (0..ncf)
        .map(|c| {
            if c == 0 {
                silt::DEFAULT_CF.to_string()
            } else {
                format!("cf{c}")
            }
        })
        .collect()
}

/// Every key's last acknowledged state, per column family.
fn expected(world: &World) -> Vec<BTreeMap<Vec<u8>, Vec<u8>>> {
    let ncf = world.ncf();
    let mut m = vec![BTreeMap::new(); ncf];
    for w in 0..WRITERS {
        for i in 0..PRIVATE_KEYS {
            let n = world.private[w][i].load(SeqCst);
            if n > 0 && !is_delete(n) {
                let k = private_key(w, i);
                m[cf_of(i, ncf)].insert(k.clone(), value(&k, n));
            }
        }
        let n = world.pairs[w].load(SeqCst);
        if n > 0 {
            for (c, k) in pair_keys(w, ncf) {
                m[c].insert(k.clone(), value(&k, n));
            }
        }
    }
    for j in 0..SHARED_KEYS {
        let n = world.shared[j].load(SeqCst);
        if n > 0 {
            let k = shared_key(j);
            m[cf_of(j, ncf)].insert(k.clone(), value(&k, n));
        }
    }
    m
}

/// The database holds exactly `expect`: by full scans both ways and by gets.
fn verify(db: &Db, cfs: &[ColumnFamily], expect: &[BTreeMap<Vec<u8>, Vec<u8>>], when: &str) {
    for (c, cf) in cfs.iter().enumerate() {
        let got: BTreeMap<Vec<u8>, Vec<u8>> = db
            .range_cf::<&[u8], _>(cf, ..)
            .collect::<Result<_, _>>()
            .unwrap_or_else(|e| panic!("{when}: scan of cf {c}: {e}"));
        if got != expect[c] {
            let missing: Vec<_> = expect[c]
                .keys()
                .filter(|k| got.get(*k) != expect[c].get(*k))
                .take(5)
                .map(|k| (show(k), got.get(k).map(|v| show(v))))
                .collect();
            let extra: Vec<_> = got
                .keys()
                .filter(|k| !expect[c].contains_key(*k))
                .take(5)
                .map(|k| show(k))
                .collect();
            panic!(
                "{when}: cf {c} holds {} keys, {} acknowledged; wrong or missing (key, found): \
                 {missing:?}; extra: {extra:?}",
                got.len(),
                expect[c].len()
            );
        }
        let rev: Vec<Vec<u8>> = db
            .range_cf::<&[u8], _>(cf, ..)
            .rev()
            .map(|r| r.map(|(k, _)| k))
            .collect::<Result<_, _>>()
            .unwrap_or_else(|e| panic!("{when}: reverse scan of cf {c}: {e}"));
        assert!(
            rev.iter().rev().eq(expect[c].keys()),
            "{when}: reverse scan of cf {c} differs"
        );
        for (k, v) in &expect[c] {
            let got = db
                .get_cf(cf, k)
                .unwrap_or_else(|e| panic!("{when}: get {}: {e}", show(k)));
            assert_eq!(got.as_ref(), Some(v), "{when}: get {}", show(k));
        }
    }
    // Keys never acknowledged as present read as absent.
    let ncf = cfs.len();
    for w in 0..WRITERS {
        for i in 0..PRIVATE_KEYS {
            let k = private_key(w, i);
            let c = cf_of(i, ncf);
            if !expect[c].contains_key(&k) {
                let got = db.get_cf(&cfs[c], &k).unwrap();
                assert!(got.is_none(), "{when}: {} reads {:?}", show(&k), got);
            }
        }
    }
}

fn secs() -> f64 {
    std::env::var("SILT_CONCURRENCY_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10.0)
}

fn seed() -> u64 {
    std::env::var("SILT_CONCURRENCY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        })
}

/// The variants run one after another: each gets the machine, and the total time is
/// what `SILT_CONCURRENCY_SECS` says.
static SERIAL: Mutex<()> = Mutex::new(());

fn run(sync: SyncMode, ncf: usize) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    install_engine_panic_hook();
    let seed = seed();
    let label = format!("{sync:?}, {ncf} column families, seed {seed}");
    let duration = Duration::from_secs_f64(secs() / VARIANTS as f64);
    let dir = tempfile::tempdir().unwrap();
    let db = builder(dir.path(), sync).open().unwrap();
    let cfs: Vec<ColumnFamily> = cf_names(ncf)
        .iter()
        .map(|n| db.create_cf(n).unwrap())
        .collect();
    let world = Arc::new(World {
        db,
        cfs,
        private: (0..WRITERS)
            .map(|_| (0..PRIVATE_KEYS).map(|_| AtomicU64::new(0)).collect())
            .collect(),
        shared_lock: (0..SHARED_KEYS).map(|_| Mutex::new(0)).collect(),
        shared: (0..SHARED_KEYS).map(|_| AtomicU64::new(0)).collect(),
        pairs: (0..WRITERS).map(|_| AtomicU64::new(0)).collect(),
        stop: AtomicBool::new(false),
        failure: Mutex::new(Vec::new()),
        counts: Counts::default(),
    });

    type Job = Box<dyn FnOnce(&World, ChaCha8Rng) -> Check + Send>;
    let mut jobs: Vec<(String, Job)> = Vec::new();
    for w in 0..WRITERS {
        jobs.push((
            format!("writer {w}"),
            Box::new(move |wd, r| writer(wd, w, r)),
        ));
    }
    for id in 0..2 {
        jobs.push((
            format!("reader {id}"),
            Box::new(move |wd, r| reader(wd, id, r)),
        ));
        jobs.push((
            format!("iterator {id}"),
            Box::new(move |wd, r| iterator_thread(wd, id, r)),
        ));
    }
    jobs.push(("snapshots".into(), Box::new(snapshot_thread)));
    jobs.push(("maintenance".into(), Box::new(maintenance)));
    let handles: Vec<_> = jobs
        .into_iter()
        .enumerate()
        .map(|(t, (name, job))| {
            let world = world.clone();
            let rng =
                ChaCha8Rng::seed_from_u64(seed ^ (t as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            thread::Builder::new()
                .name(format!("test-{name}"))
                .spawn(move || {
                    let r =
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(&world, rng)));
                    match r {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => world.fail(e),
                        Err(p) => {
                            let msg = p
                                .downcast_ref::<String>()
                                .cloned()
                                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                                .unwrap_or_default();
                            world.fail(format!("{name} panicked: {msg}"))
                        }
                    }
                })
                .unwrap()
        })
        .collect();
    // Run for the allotted time, and on a slow or busy machine longer, until everything
    // has happened enough times to mean something (up to a limit, past which the
    // assertions below report what did not happen).
    let enough = |w: &World| {
        let (c, s) = (&w.counts, w.db.stats());
        c.writes.load(SeqCst) >= 500
            && c.gets.load(SeqCst) >= 200
            && c.scans.load(SeqCst) >= 20
            && c.snapshot_rereads.load(SeqCst) >= 3
            && c.pair_checks.load(SeqCst) >= 5
            && s.compaction_write_bytes > 0
            && s.flushes >= 5
            && s.compactions >= 2
            && s.levels[1..].iter().any(|l| l.tables > 0)
    };
    let start = Instant::now();
    let limit = duration * 10 + Duration::from_secs(20);
    while !world.stopped()
        && (start.elapsed() < duration || (!enough(&world) && start.elapsed() < limit))
    {
        thread::sleep(Duration::from_millis(20));
    }
    world.stop.store(true, SeqCst);
    let ran = start.elapsed();
    // Every thread finishes its operation in flight and stops; if they do not within two
    // minutes, something in the engine is stuck, and nothing else would end the test.
    let joined = Arc::new(AtomicBool::new(false));
    {
        let (joined, label) = (joined.clone(), label.clone());
        thread::spawn(move || {
            let t = Instant::now();
            while !joined.load(SeqCst) {
                if t.elapsed() > Duration::from_secs(120) {
                    eprintln!("{label}: the threads did not stop within 120 s (deadlock?)");
                    std::process::abort();
                }
                thread::sleep(Duration::from_millis(50));
            }
        });
    }
    for h in handles {
        h.join().unwrap();
    }
    joined.store(true, SeqCst);
    let failures = world.failure.lock().unwrap().clone();
    assert!(failures.is_empty(), "{label}: {failures:#?}");
    assert!(
        engine_panics().is_empty(),
        "{label}: {:#?}",
        engine_panics()
    );
    if let Some(e) = world.db.background_error() {
        panic!("{label}: background error: {e}");
    }

    // Not vacuous: everything happened, many times.
    let c = &world.counts;
    let stats = world.db.stats();
    let summary = format!(
        "{label}: {ran:.1?}: {} writes, {} gets, {} scans ({} pairs), {} pair checks, {} snapshot \
         re-reads, {} flush calls (longest {} ms), {} compact_range calls (longest {} ms); engine: {} flushes, {} \
         compactions ({} bytes written), tables per level {:?}, {} stalls",
        c.writes.load(SeqCst),
        c.gets.load(SeqCst),
        c.scans.load(SeqCst),
        c.scanned.load(SeqCst),
        c.pair_checks.load(SeqCst),
        c.snapshot_rereads.load(SeqCst),
        c.flushes.load(SeqCst),
        c.flush_max_ms.load(SeqCst),
        c.compact_ranges.load(SeqCst),
        c.compact_max_ms.load(SeqCst),
        stats.flushes,
        stats.compactions,
        stats.compaction_write_bytes,
        stats.levels.iter().map(|l| l.tables).collect::<Vec<_>>(),
        stats.stalls,
    );
    eprintln!("{summary}");
    assert!(c.writes.load(SeqCst) >= 500, "{summary}");
    assert!(c.gets.load(SeqCst) >= 200, "{summary}");
    assert!(c.scans.load(SeqCst) >= 20, "{summary}");
    assert!(c.pair_checks.load(SeqCst) >= 5, "{summary}");
    assert!(c.snapshot_rereads.load(SeqCst) >= 3, "{summary}");
    assert!(stats.flushes >= 5, "{summary}");
    assert!(stats.compactions >= 2, "{summary}");
    assert!(stats.compaction_write_bytes > 0, "{summary}");
    assert!(stats.levels[1..].iter().any(|l| l.tables > 0), "{summary}");

    // Quiet now: the database holds exactly the acknowledged state; then again after a
    // clean reopen.
    let expect = expected(&world);
    assert!(expect.iter().all(|m| !m.is_empty()), "{summary}");
    verify(
        &world.db,
        &world.cfs,
        &expect,
        &format!("{label}, before close"),
    );
    let world = Arc::try_unwrap(world).unwrap_or_else(|_| panic!("threads still hold the world"));
    world
        .db
        .close()
        .unwrap_or_else(|e| panic!("{label}: close: {e}"));
    let db = builder(dir.path(), sync).open().unwrap();
    let cfs: Vec<ColumnFamily> = cf_names(ncf).iter().map(|n| db.cf(n).unwrap()).collect();
    assert_eq!(db.list_cfs(), cf_names(ncf), "{label}");
    verify(&db, &cfs, &expect, &format!("{label}, after reopen"));
    db.close().unwrap();
    assert!(
        engine_panics().is_empty(),
        "{label}: {:#?}",
        engine_panics()
    );
}

#[test]
fn sync_none_one_column_family() {
    run(SyncMode::None, 1);
}

#[test]
fn sync_full_one_column_family() {
    run(SyncMode::Full, 1);
}

#[test]
fn sync_none_three_column_families() {
    run(SyncMode::None, 3);
}

#[test]
fn sync_full_two_column_families() {
    run(SyncMode::Full, 2);
}

/// Reproducer: a read takes its seqno (`visible`) before it pins the super-version; a
/// flush and a compaction in between can drop the version it should see.
#[test]
fn repro_read_sees_an_older_version_than_acknowledged() {
    let fs = silt_vfs::SimFs::new();
    let db = Db::builder("/db")
        .file_system(fs)
        .memtable_bytes(4096)
        .l0_compaction_trigger(1)
        .open()
        .unwrap();
    let acked = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let k = b"k".to_vec();
    let writer = {
        let (db, acked, stop, k) = (db.clone(), acked.clone(), stop.clone(), k.clone());
        thread::spawn(move || {
            let mut n = 0;
            while !stop.load(SeqCst) {
                n += 1;
                db.put(&k, &value(&k, n)).unwrap();
                acked.store(n, SeqCst);
                if n % 8 == 0 {
                    db.flush().unwrap();
                }
            }
        })
    };
    let readers: Vec<_> = (0..6)
        .map(|r| {
            let (db, acked, stop, k) = (db.clone(), acked.clone(), stop.clone(), k.clone());
            thread::spawn(move || -> Result<u64, String> {
                let mut reads = 0;
                while !stop.load(SeqCst) {
                    let before = acked.load(SeqCst);
                    let got = if r % 2 == 0 {
                        db.get(&k).unwrap()
                    } else {
                        db.iter().next().transpose().unwrap().map(|(_, v)| v)
                    };
                    let n = got.as_ref().map(|v| number(&k, v).unwrap());
                    if n.unwrap_or(0) < before {
                        return Err(format!(
                            "reader {r}: write {before} of k was acknowledged, then a {} \
                             returned {n:?}",
                            if r % 2 == 0 { "get" } else { "scan" }
                        ));
                    }
                    reads += 1;
                }
                Ok(reads)
            })
        })
        .collect();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(3) && !readers.iter().any(|r| r.is_finished()) {
        thread::sleep(Duration::from_millis(10));
    }
    stop.store(true, SeqCst);
    writer.join().unwrap();
    let results: Vec<_> = readers.into_iter().map(|r| r.join().unwrap()).collect();
    let stats = db.stats();
    for r in &results {
        if let Err(e) = r {
            panic!(
                "{e} (after {:?}; {} compactions)",
                start.elapsed(),
                stats.compactions
            );
        }
    }
}

/// Reproducer: `flush` waits until no frozen memtable is left at all, including the ones
/// frozen after it was called, so under a steady stream of writes it returns only when the
/// flush thread happens to catch up: seconds with 4 KiB memtables (0.2 to 10 s measured
/// here), unbounded in principle.
#[test]
fn repro_flush_returns_while_writes_continue() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::builder(dir.path()).memtable_bytes(4096).open().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..3)
        .map(|w| {
            let (db, stop) = (db.clone(), stop.clone());
            thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(SeqCst) {
                    n += 1;
                    let k = format!("w{w}/{}", n % 500).into_bytes();
                    db.put(&k, &value(&k, n)).unwrap();
                }
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(200));
    // Writes go on for at most 10 s; five flushes (of 4 KiB memtables: milliseconds each)
    // must all return before that.
    let done = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let (stop, done) = (stop.clone(), done.clone());
        thread::spawn(move || {
            let t = Instant::now();
            while t.elapsed() < Duration::from_secs(10) && !done.load(SeqCst) {
                thread::sleep(Duration::from_millis(5));
            }
            stop.store(true, SeqCst);
        })
    };
    let mut took = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        db.flush().unwrap();
        took.push(t.elapsed());
    }
    let returned_with_writes_running = !stop.load(SeqCst);
    done.store(true, SeqCst);
    watchdog.join().unwrap();
    for w in writers {
        w.join().unwrap();
    }
    assert!(
        returned_with_writes_running,
        "five flushes took {took:?}: they returned only once the writes stopped"
    );
}
