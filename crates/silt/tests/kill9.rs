//! Real process crashes of the engine: a child process writes batches from several threads
//! (across two column families, with overwrites and deletes) and reports each
//! acknowledgement to a file outside the database directory; the parent kills it with
//! SIGKILL at a random moment (in three cycles of four, a random moment after the child
//! reports its database open, so a slow open on a loaded machine still leaves most kills
//! landing while it writes), reopens the database in-process and checks that
//!
//! * no batch the child acknowledged is lost (under every sync mode: a process crash, unlike
//!   a power loss, loses nothing that reached the OS, and every mode puts a commit in the
//!   OS before acknowledging it);
//! * every batch is there completely or not at all, across column families (its put in
//!   each column family, its `last/{t}` overwrites, its deletes);
//! * each writer thread's recovered batches are a prefix `0..k` with no hole;
//! * commits respect real-time order across threads: a batch records, for every thread,
//!   how many of that thread's batches were acknowledged before it was submitted, and those
//!   must all be present whenever it is;
//! * nothing recovered by an earlier cycle disappears later.
//!
//! The same directory is reused from cycle to cycle, so the database grows and the small
//! memtable makes flushes, log purges and compactions happen (also while being killed).
//! Now and then the parent also scans everything in both directions and runs
//! `compact_range` before closing.
//!
//! Knobs: `SILT_KILL9_CYCLES` (cycles per sync mode, default 100) and `SILT_KILL9_SEED`
//! (the seed of the kill delays and of the checks' sampling; printed by every run and
//! every failure). The child is this same test binary, re-run with `SILT_KILL9_CHILD` set.

mod common;

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::mix64;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use silt::{ColumnFamily, Db, SyncMode, WriteBatch, WriteOptions};

const THREADS: usize = 4;
const AUX: &str = "aux";
const CHILD_ENV: &str = "SILT_KILL9_CHILD";
/// A child that was never killed (the parent died) stops writing after this.
const CHILD_MAX_RUN: Duration = Duration::from_secs(10);
/// Exit code of a child that found a violation itself (its reader thread).
const CHILD_FAILED: i32 = 3;
/// Batch `n` (when `n % 7 == 3`) deletes the key of batch `n - DELETE_BACK`.
const DELETE_BACK: u64 = 5;

const TAG_DEFAULT: u8 = b'd';
const TAG_AUX: u8 = b'a';
const TAG_LAST_DEFAULT: u8 = b'l';
const TAG_LAST_AUX: u8 = b'L';

type Deps = [u64; THREADS];

fn mode_by_name(name: &str) -> SyncMode {
    match name {
        "none" => SyncMode::None,
        "interval" => SyncMode::Interval(Duration::from_millis(2)),
        "full" => SyncMode::Full,
        _ => panic!("unknown mode {name}"),
    }
}

/// Small everything, so that a few hundred batches flush, purge log segments and compact.
fn open_db(dir: &Path, mode: &str) -> silt::Result<Db> {
    Db::builder(dir)
        .sync_mode(mode_by_name(mode))
        .memtable_bytes(128 << 10)
        .table_target_bytes(64 << 10)
        .level_base_bytes(256 << 10)
        .level_size_ratio(4)
        .l0_compaction_trigger(2)
        .block_size_bytes(1024)
        .block_cache_bytes(1 << 20)
        .wal_segment_bytes(64 << 10) // the smallest: many segment switches and recyclings
        .blob_threshold_bytes(Some(256)) // about half the values in blob files
        .open()
}

// ------------------------------------------------------------------ keys and values

fn key(t: usize, n: u64) -> Vec<u8> {
    format!("t{t}/{n:08}").into_bytes()
}

/// The exclusive upper bound of thread `t`'s keys (`'0'` follows `'/'`).
fn key_end(t: usize) -> Vec<u8> {
    format!("t{t}0").into_bytes()
}

fn last_key(t: usize) -> Vec<u8> {
    format!("last/{t}").into_bytes()
}

/// The key batch `n` deletes, if any.
fn deleted_by(n: u64) -> Option<u64> {
    (n >= DELETE_BACK && n % 7 == 3).then(|| n - DELETE_BACK)
}

/// Whether batch `j`'s key is deleted once batches `0..k` are applied.
fn is_deleted(j: u64, k: u64) -> bool {
    let m = j + DELETE_BACK;
    m < k && deleted_by(m) == Some(j)
}

fn value_seed(t: usize, n: u64, tag: u8) -> u64 {
    mix64(((t as u64) << 56) ^ ((tag as u64) << 48) ^ n)
}

/// Padding length: mostly 40–400 bytes, one value in 64 of 4–12 KiB (several blocks).
fn pad_len(t: usize, n: u64, tag: u8) -> usize {
    let h = value_seed(t, n, tag);
    match tag {
        TAG_LAST_DEFAULT | TAG_LAST_AUX => (h % 16) as usize,
        _ if h % 64 == 0 => 4096 + ((h >> 8) % 8192) as usize,
        _ => 40 + ((h >> 8) % 360) as usize,
    }
}

fn pad(t: usize, n: u64, tag: u8) -> Vec<u8> {
    let base = value_seed(t, n, tag);
    let len = pad_len(t, n, tag);
    let mut out = Vec::with_capacity(len + 8);
    let mut i = 0u64;
    while out.len() < len {
        out.extend_from_slice(&mix64(base ^ i).to_le_bytes());
        i += 1;
    }
    out.truncate(len);
    out
}

/// `tag | t | n | deps | pad_len | pad | crc32c of everything before`.
fn encode(t: usize, n: u64, tag: u8, deps: &Deps) -> Vec<u8> {
    let p = pad(t, n, tag);
    let mut v = Vec::with_capacity(2 + 8 + 8 * THREADS + 4 + p.len() + 4);
    v.push(tag);
    v.push(t as u8);
    v.extend_from_slice(&n.to_le_bytes());
    for d in deps {
        v.extend_from_slice(&d.to_le_bytes());
    }
    v.extend_from_slice(&(p.len() as u32).to_le_bytes());
    v.extend_from_slice(&p);
    let crc = crc32c::crc32c(&v);
    v.extend_from_slice(&crc.to_le_bytes());
    v
}

/// Checks a value written by thread `t` with `tag` (and, if given, batch `n`); returns its
/// batch number and dependencies.
fn decode(v: &[u8], t: usize, n: Option<u64>, tag: u8) -> Result<(u64, Deps), String> {
    let head = 2 + 8 + 8 * THREADS + 4;
    if v.len() < head + 4 {
        return Err(format!("value of {} bytes is too short", v.len()));
    }
    let (body, crc) = v.split_at(v.len() - 4);
    if crc32c::crc32c(body).to_le_bytes() != crc {
        return Err("value checksum mismatch".into());
    }
    let u64_at = |i: usize| u64::from_le_bytes(body[i..i + 8].try_into().unwrap());
    let got_n = u64_at(2);
    if body[0] != tag || body[1] as usize != t || n.is_some_and(|n| n != got_n) {
        return Err(format!(
            "value of ({}, t{}, n{got_n}) where ({}, t{t}, n{n:?}) was expected",
            body[0] as char, body[1], tag as char
        ));
    }
    let mut deps = [0; THREADS];
    for (u, d) in deps.iter_mut().enumerate() {
        *d = u64_at(10 + 8 * u);
    }
    let len = u32::from_le_bytes(body[head - 4..head].try_into().unwrap()) as usize;
    if len != body.len() - head || body[head..] != pad(t, got_n, tag)[..] {
        return Err(format!("padding of t{t} n{got_n} is wrong"));
    }
    Ok((got_n, deps))
}

// ------------------------------------------------------------------ the child

/// The child's work: write batches forever from `THREADS` threads, logging each
/// acknowledgement, while a reader checks that no snapshot shows half a batch.
#[test]
fn kill9_child_entry() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return; // not the child
    };
    child_main(&spec);
}

fn child_fail(msg: String) -> ! {
    eprintln!("kill9 child: {msg}");
    std::process::exit(CHILD_FAILED);
}

/// The file a child creates once its database is open (the parent times most kills from
/// it, so a slow open on a loaded machine does not turn every cycle into a kill during open).
fn ready_path(acks: &Path) -> PathBuf {
    acks.with_extension("ready")
}

fn child_main(spec: &str) {
    let mut parts = spec.split(';');
    let dir = PathBuf::from(parts.next().unwrap());
    let acks = PathBuf::from(parts.next().unwrap());
    let mode = parts.next().unwrap().to_string();
    let deadline = Instant::now() + CHILD_MAX_RUN;

    let db = open_db(&dir, &mode).unwrap_or_else(|e| child_fail(format!("open: {e}")));
    let aux = db
        .create_cf(AUX)
        .unwrap_or_else(|e| child_fail(format!("create_cf: {e}")));
    // Resume each thread after what was recovered. What was recovered counts as
    // acknowledged for the dependencies of new batches: it must never go away.
    let acked: Arc<Vec<AtomicU64>> = Arc::new(
        (0..THREADS)
            .map(|t| {
                let next = match db.get(&last_key(t)) {
                    Ok(Some(v)) => match decode(&v, t, None, TAG_LAST_DEFAULT) {
                        Ok((n, _)) => n + 1,
                        Err(e) => child_fail(format!("last/{t} at start: {e}")),
                    },
                    Ok(None) => 0,
                    Err(e) => child_fail(format!("get last/{t}: {e}")),
                };
                AtomicU64::new(next)
            })
            .collect(),
    );
    let ack_file = Arc::new(
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(&acks)
            .unwrap_or_else(|e| child_fail(format!("open ack file: {e}"))),
    );
    // Tell the parent the database is open and writing starts now.
    let _ = std::fs::write(ready_path(&acks), b"");

    let mut threads = Vec::new();
    for t in 0..THREADS {
        let (db, aux, acked, ack_file) = (db.clone(), aux.clone(), acked.clone(), ack_file.clone());
        let dir = dir.clone();
        threads.push(std::thread::spawn(move || {
            let mut n = acked[t].load(SeqCst);
            while Instant::now() < deadline {
                let mut deps = [0; THREADS];
                for (u, d) in deps.iter_mut().enumerate() {
                    *d = acked[u].load(SeqCst);
                }
                let k = key(t, n);
                let mut b = WriteBatch::new();
                if n % 5 == 0 {
                    b.put(&last_key(t), b"overwritten later in the same batch");
                }
                b.put(&k, &encode(t, n, TAG_DEFAULT, &deps));
                b.put(&last_key(t), &encode(t, n, TAG_LAST_DEFAULT, &deps));
                b.put_cf(&aux, &k, &encode(t, n, TAG_AUX, &deps));
                b.put_cf(&aux, &last_key(t), &encode(t, n, TAG_LAST_AUX, &deps));
                if let Some(j) = deleted_by(n) {
                    b.delete(&key(t, j));
                    b.delete_cf(&aux, &key(t, j));
                }
                let mut opts = WriteOptions::default();
                match mix64(n ^ ((t as u64) << 40)) % 16 {
                    0 => opts.sync = Some(true),
                    1 => opts.sync = Some(false),
                    _ => {}
                }
                if let Err(e) = db.write(b, opts) {
                    child_fail(format!(
                        "write t{t} n{n}: {e} (background error: {:?}; log directory: {:?})",
                        db.background_error(),
                        list_dir(&dir.join("wal"))
                    ));
                }
                acked[t].store(n + 1, SeqCst);
                // One write(2) per acknowledgement: in the OS when it returns.
                if let Err(e) = (&*ack_file).write_all(format!("{t} {n}\n").as_bytes()) {
                    child_fail(format!("ack file: {e}"));
                }
                n += 1;
            }
        }));
    }
    {
        let (db, aux) = (db.clone(), aux.clone());
        threads.push(std::thread::spawn(move || {
            while Instant::now() < deadline {
                child_check_snapshot(&db, &aux);
                std::thread::sleep(Duration::from_millis(1));
            }
        }));
    }
    for t in threads {
        t.join().unwrap();
    }
}

/// File names in `dir`, sorted (for failure messages).
fn list_dir(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// No reader sees half a batch: in one snapshot, `last/{t}` agrees across column families
/// and batch `last`'s keys are there, batch `last + 1`'s are not.
fn child_check_snapshot(db: &Db, aux: &ColumnFamily) {
    let snap = db.snapshot();
    let get = |cf: Option<&ColumnFamily>, k: &[u8]| {
        let r = match cf {
            Some(cf) => snap.get_cf(cf, k),
            None => snap.get(k),
        };
        r.unwrap_or_else(|e| child_fail(format!("snapshot read: {e}")))
    };
    for t in 0..THREADS {
        let d = get(None, &last_key(t));
        let a = get(Some(aux), &last_key(t));
        let n = match (d, a) {
            (None, None) => continue,
            (Some(d), Some(a)) => {
                let d = decode(&d, t, None, TAG_LAST_DEFAULT).unwrap_or_else(|e| child_fail(e));
                let a = decode(&a, t, Some(d.0), TAG_LAST_AUX).unwrap_or_else(|e| {
                    child_fail(format!("snapshot {}: last/{t}: {e}", snap.seqno()))
                });
                a.0
            }
            (d, a) => child_fail(format!(
                "snapshot {}: last/{t} in default {:?} but in aux {:?}",
                snap.seqno(),
                d.is_some(),
                a.is_some()
            )),
        };
        for (cf, tag) in [(None, TAG_DEFAULT), (Some(aux), TAG_AUX)] {
            match get(cf, &key(t, n)) {
                Some(v) => {
                    if let Err(e) = decode(&v, t, Some(n), tag) {
                        child_fail(format!("snapshot {}: {e}", snap.seqno()));
                    }
                }
                None => child_fail(format!(
                    "snapshot {}: last/{t} = {n} but its key in {} is missing",
                    snap.seqno(),
                    tag as char
                )),
            }
            if get(cf, &key(t, n + 1)).is_some() {
                child_fail(format!(
                    "snapshot {}: last/{t} = {n} but batch {} is visible in {}",
                    snap.seqno(),
                    n + 1,
                    tag as char
                ));
            }
        }
    }
}

// ------------------------------------------------------------------ the parent

/// What one sync mode's run saw, to show the test is not vacuous.
#[derive(Debug, Default)]
struct Report {
    acks: u64,
    cycles_with_new_acks: u64,
    batches: u64,
    full_checks: u64,
    early_exits: u64,
    max_sst_files: usize,
    max_table_id: u64,
    deepest_level: usize,
    wal_purged: bool,
    verify_time: Duration,
}

/// Acknowledged batches per thread (`n + 1` of the highest acknowledged `n`) and lines.
fn read_acks(path: &Path) -> (Deps, u64) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut acked = [0; THREADS];
    let mut lines = 0;
    for line in text.lines() {
        let mut f = line.split(' ').map(|x| x.parse::<u64>());
        if let (Some(Ok(t)), Some(Ok(n)), None) = (f.next(), f.next(), f.next()) {
            let t = t as usize;
            assert!(t < THREADS, "ack file line {line:?}");
            acked[t] = acked[t].max(n + 1);
            lines += 1;
        }
    }
    (acked, lines)
}

/// Table files in the database directory (count, highest id), and whether the log's first
/// segment has been purged.
fn inspect_dir(dir: &Path) -> (usize, u64, bool) {
    let mut ssts = 0;
    let mut max_id = 0;
    if let Ok(rd) = std::fs::read_dir(dir.join("tables")) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(id) = name.strip_suffix(".sst").and_then(|s| s.parse().ok()) {
                ssts += 1;
                max_id = max_id.max(id);
            }
        }
    }
    let purged = std::fs::read_dir(dir.join("wal")).is_ok_and(|rd| {
        let ids: Vec<u64> = rd
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.strip_suffix(".wal").and_then(|s| s.parse().ok())
            })
            .collect();
        !ids.is_empty() && !ids.contains(&0)
    });
    (ssts, max_id, purged)
}

fn run_cycles(mode: &str, cycles: u64, seed: u64) -> Report {
    eprintln!("kill -9 mode {mode}: seed {seed} (SILT_KILL9_SEED), {cycles} cycles");
    let exe = std::env::current_exe().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("db");
    let acks = root.path().join("acks");
    let stderr_path = root.path().join("child.stderr");
    let mut report = Report::default();
    let mut recovered = [0u64; THREADS];
    let mut ack_lines = 0;
    for cycle in 0..cycles {
        let ctx = |what: &str| format!("kill9 mode {mode} seed {seed} cycle {cycle}: {what}");
        let _ = std::fs::remove_file(ready_path(&acks));
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "kill9_child_entry",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(
                CHILD_ENV,
                format!("{};{};{mode}", dir.display(), acks.display()),
            )
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr_path).unwrap())
            .spawn()
            .unwrap();
        // Three cycles in four time the kill from the moment the child has opened the
        // database (killed while writing, however long the open took); the fourth from
        // the spawn, so some kills land during open and recovery.
        if rng.random_ratio(3, 4) {
            let started = Instant::now();
            while !ready_path(&acks).exists()
                && child.try_wait().unwrap().is_none()
                && started.elapsed() < Duration::from_secs(60)
            {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        std::thread::sleep(Duration::from_millis(rng.random_range(5..=150)));
        let status = match child.try_wait().unwrap() {
            Some(status) => {
                report.early_exits += 1;
                status
            }
            None => {
                child.kill().unwrap(); // SIGKILL
                child.wait().unwrap()
            }
        };
        // A child that found a problem (or panicked) just before the kill is a failure too.
        let err = std::fs::read_to_string(&stderr_path).unwrap_or_default();
        if (status.signal() != Some(9) && !status.success())
            || err.contains("kill9 child:")
            || err.contains("panicked")
        {
            panic!("{}", ctx(&format!("the child failed ({status}):\n{err}")));
        }

        let (ssts, max_id, purged) = inspect_dir(&dir);
        report.max_sst_files = report.max_sst_files.max(ssts);
        report.max_table_id = report.max_table_id.max(max_id);
        report.wal_purged |= purged;

        let (acked, lines) = read_acks(&acks);
        if lines > ack_lines {
            report.cycles_with_new_acks += 1;
        }
        ack_lines = lines;

        let full = rng.random_bool(0.06) || cycle + 1 == cycles;
        let started = Instant::now();
        let deepest = verify(&dir, mode, &mut recovered, &acked, full, &mut rng, &ctx);
        report.verify_time += started.elapsed();
        report.deepest_level = report.deepest_level.max(deepest);
        report.full_checks += full as u64;
    }
    report.acks = ack_lines;
    report.batches = recovered.iter().sum();
    eprintln!("kill -9 mode {mode}: seed {seed}, 0 lost: {report:?}");
    if cycles >= 20 {
        assert!(
            report.cycles_with_new_acks >= cycles / 4,
            "mode {mode} seed {seed}: too few cycles were killed while writing: {report:?}"
        );
        assert!(
            report.max_sst_files > 0 && report.max_table_id > 4 && report.wal_purged,
            "mode {mode} seed {seed}: nothing was flushed or purged: {report:?}"
        );
    }
    report
}

/// Reopens the database and checks it against what was acknowledged and what earlier
/// cycles recovered (updated to what this one recovered). Returns the deepest non-empty
/// level.
fn verify(
    dir: &Path,
    mode: &str,
    recovered: &mut Deps,
    acked: &Deps,
    full: bool,
    rng: &mut ChaCha8Rng,
    ctx: &dyn Fn(&str) -> String,
) -> usize {
    if !dir.join("tables").exists() && acked.iter().all(|&a| a == 0) {
        return 0; // killed before the database existed
    }
    let db = open_db(dir, mode).unwrap_or_else(|e| panic!("{}", ctx(&format!("reopen: {e}"))));
    let mut problems: Vec<String> = Vec::new();
    let aux = match db.cf(AUX) {
        Ok(aux) => aux,
        Err(e) => {
            // Killed before `create_cf` was durable: then nothing was written.
            assert!(
                acked.iter().chain(recovered.iter()).all(|&a| a == 0),
                "{}",
                ctx(&format!("column family {AUX} lost: {e}"))
            );
            db.close().unwrap();
            return 0;
        }
    };
    let cfs = [
        (db.default_cf(), TAG_DEFAULT, TAG_LAST_DEFAULT),
        (aux.clone(), TAG_AUX, TAG_LAST_AUX),
    ];
    let get = |cf: &ColumnFamily, k: &[u8]| {
        db.get_cf(cf, k)
            .unwrap_or_else(|e| panic!("{}", ctx(&format!("get: {e}"))))
    };

    // How many batches of each thread survived, from `last/{t}` (checked across cfs).
    let mut k = [0u64; THREADS];
    let mut last_deps = [[0u64; THREADS]; THREADS];
    for t in 0..THREADS {
        let d = get(&cfs[0].0, &last_key(t));
        let a = get(&cfs[1].0, &last_key(t));
        match (&d, &a) {
            (None, None) => {}
            (Some(d), Some(a)) => match decode(d, t, None, TAG_LAST_DEFAULT) {
                Ok((n, deps)) => {
                    k[t] = n + 1;
                    last_deps[t] = deps;
                    if let Err(e) = decode(a, t, Some(n), TAG_LAST_AUX) {
                        problems.push(format!("last/{t} in aux vs default ({n}): {e}"));
                    }
                }
                Err(e) => problems.push(format!("last/{t} in default: {e}")),
            },
            _ => problems.push(format!(
                "half a batch: last/{t} present in default: {}, in aux: {}",
                d.is_some(),
                a.is_some()
            )),
        }
    }
    for t in 0..THREADS {
        if acked[t] > k[t] {
            problems.push(format!(
                "thread {t}: acknowledged batches {}..{} lost (recovered {})",
                k[t], acked[t], k[t]
            ));
        }
        if recovered[t] > k[t] {
            problems.push(format!(
                "thread {t}: batches {}..{} recovered by an earlier cycle are gone",
                k[t], recovered[t]
            ));
        }
        for u in 0..THREADS {
            if k[t] > 0 && last_deps[t][u] > k[u] {
                problems.push(format!(
                    "not a prefix: thread {t} batch {} is there, but it was submitted after \
                     thread {u}'s batch {} was acknowledged, which is gone (thread {u} has {})",
                    k[t] - 1,
                    last_deps[t][u] - 1,
                    k[u]
                ));
            }
        }
    }

    let check_value = |problems: &mut Vec<String>, t: usize, j: u64, tag: u8, v: &[u8]| match decode(
        v,
        t,
        Some(j),
        tag,
    ) {
        Ok((_, deps)) => {
            for u in 0..THREADS {
                if deps[u] > k[u] {
                    problems.push(format!(
                        "not a prefix: thread {t} batch {j} depends on thread {u}'s batch {}, gone",
                        deps[u] - 1
                    ));
                }
            }
        }
        Err(e) => problems.push(format!("t{t} n{j} ({}): {e}", tag as char)),
    };

    // The batches new since the last cycle (and a margin for deletes), exactly, by a range
    // scan per thread and column family; it also finds anything past the prefix.
    for t in 0..THREADS {
        let from = recovered[t].saturating_sub(DELETE_BACK + 3);
        for (cf, tag, _) in &cfs {
            let got: Vec<(Vec<u8>, Vec<u8>)> = db
                .range_cf(cf, key(t, from)..key_end(t))
                .collect::<silt::Result<_>>()
                .unwrap_or_else(|e| panic!("{}", ctx(&format!("range: {e}"))));
            let missing = |cf: &ColumnFamily, t: usize, j: u64| {
                format!(
                    "cf {}: {} missing (thread {t} recovered {}, deleted: {})",
                    cf.name(),
                    String::from_utf8_lossy(&key(t, j)),
                    k[t],
                    is_deleted(j, k[t])
                )
            };
            let mut want = (from..k[t]).filter(|&j| !is_deleted(j, k[t])).peekable();
            let mut got = got.into_iter().peekable();
            loop {
                match (want.peek().copied(), got.peek()) {
                    (None, None) => break,
                    (Some(j), Some((gk, gv))) if *gk == key(t, j) => {
                        check_value(&mut problems, t, j, *tag, gv);
                        want.next();
                        got.next();
                    }
                    (Some(j), None) => {
                        problems.push(missing(cf, t, j));
                        want.next();
                    }
                    (Some(j), Some((gk, _))) if *gk > key(t, j) => {
                        problems.push(missing(cf, t, j));
                        want.next();
                    }
                    (_, Some((gk, _))) => {
                        problems.push(format!(
                            "cf {}: unexpected {} (thread {t} recovered {}): half a batch, \
                             a hole, or a lost delete",
                            cf.name(),
                            String::from_utf8_lossy(gk),
                            k[t]
                        ));
                        got.next();
                    }
                }
            }
        }
        // Older batches: a sample, by point reads.
        for _ in 0..if from > 0 { 24 } else { 0 } {
            let j = rng.random_range(0..from);
            for (cf, tag, _) in &cfs {
                match get(cf, &key(t, j)) {
                    Some(v) if !is_deleted(j, k[t]) => check_value(&mut problems, t, j, *tag, &v),
                    None if is_deleted(j, k[t]) => {}
                    v => problems.push(format!(
                        "cf {}: t{t} n{j} present: {}, deleted: {} (recovered {})",
                        cf.name(),
                        v.is_some(),
                        is_deleted(j, k[t]),
                        k[t]
                    )),
                }
            }
        }
    }

    if full && problems.is_empty() {
        for (cf, tag, last_tag) in &cfs {
            full_scan(&db, cf, *tag, *last_tag, &k, &mut problems, ctx);
            if !problems.is_empty() {
                break;
            }
            db.compact_range_cf::<&[u8], _>(cf, ..)
                .unwrap_or_else(|e| panic!("{}", ctx(&format!("compact_range: {e}"))));
            full_scan(&db, cf, *tag, *last_tag, &k, &mut problems, ctx);
        }
    }

    if !problems.is_empty() {
        let n = problems.len();
        problems.truncate(20);
        panic!(
            "{}",
            ctx(&format!(
                "{n} problems (recovered {k:?}, acknowledged {acked:?}, earlier {recovered:?}):\n  {}",
                problems.join("\n  ")
            ))
        );
    }
    *recovered = k;
    let deepest = db
        .stats()
        .levels
        .iter()
        .rposition(|l| l.tables > 0)
        .unwrap_or(0);
    db.close()
        .unwrap_or_else(|e| panic!("{}", ctx(&format!("close: {e}"))));
    deepest
}

/// Everything in `cf`, forwards and backwards, against the expected contents.
fn full_scan(
    db: &Db,
    cf: &ColumnFamily,
    tag: u8,
    last_tag: u8,
    k: &Deps,
    problems: &mut Vec<String>,
    ctx: &dyn Fn(&str) -> String,
) {
    let fwd: Vec<(Vec<u8>, Vec<u8>)> = db
        .range_cf::<&[u8], _>(cf, ..)
        .collect::<silt::Result<_>>()
        .unwrap_or_else(|e| panic!("{}", ctx(&format!("scan: {e}"))));
    let mut bwd: Vec<(Vec<u8>, Vec<u8>)> = db
        .range_cf::<&[u8], _>(cf, ..)
        .rev()
        .collect::<silt::Result<_>>()
        .unwrap_or_else(|e| panic!("{}", ctx(&format!("reverse scan: {e}"))));
    bwd.reverse();
    if fwd != bwd {
        let i = fwd.iter().zip(&bwd).position(|(a, b)| a != b);
        problems.push(format!(
            "cf {}: forward scan ({} entries) and backward scan ({}) differ (first at {i:?})",
            cf.name(),
            fwd.len(),
            bwd.len()
        ));
    }
    // `last/*` sorts before `t*/*`.
    let mut want: Vec<(Vec<u8>, usize, u64, u8)> = Vec::new();
    for (t, &kt) in k.iter().enumerate() {
        if kt > 0 {
            want.push((last_key(t), t, kt - 1, last_tag));
        }
    }
    for (t, &kt) in k.iter().enumerate() {
        for j in (0..kt).filter(|&j| !is_deleted(j, kt)) {
            want.push((key(t, j), t, j, tag));
        }
    }
    if fwd.len() != want.len() {
        problems.push(format!(
            "cf {}: full scan has {} entries, {} expected",
            cf.name(),
            fwd.len(),
            want.len()
        ));
    }
    for ((gk, gv), (wk, t, j, tag)) in fwd.iter().zip(&want) {
        if gk != wk {
            problems.push(format!(
                "cf {}: full scan has {} where {} was expected",
                cf.name(),
                String::from_utf8_lossy(gk),
                String::from_utf8_lossy(wk)
            ));
            return;
        }
        if let Err(e) = decode(gv, *t, Some(*j), *tag) {
            problems.push(format!("cf {}: full scan: {e}", cf.name()));
        }
    }
}

fn cycles() -> u64 {
    std::env::var("SILT_KILL9_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100)
}

fn seed(mode_no: u64) -> u64 {
    match std::env::var("SILT_KILL9_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        Some(s) => s,
        None => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap();
            mix64(now.as_nanos() as u64 ^ mode_no)
        }
    }
}

#[test]
fn kill9_none() {
    if std::env::var(CHILD_ENV).is_err() {
        run_cycles("none", cycles(), seed(1));
    }
}

#[test]
fn kill9_interval() {
    if std::env::var(CHILD_ENV).is_err() {
        run_cycles("interval", cycles(), seed(2));
    }
}

#[test]
fn kill9_full() {
    if std::env::var(CHILD_ENV).is_err() {
        run_cycles("full", cycles(), seed(3));
    }
}
