//! The crash drivers: black-box kills of a child process, white-box kill points inside it,
//! simulated power losses on the crash simulator, and SQLite-style I/O-error loops. Each
//! cycle ends in a verification against the expected state; any violation stops the run
//! with the seed and the command that replays it.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use silt::{Db, DbBuilder, Error, SyncMode};
use silt_vfs::{CrashMode, FailOp, FileSystem, SimFs};

use crate::expected::Expected;
use crate::verify::{ensure_cfs, verify};
use crate::workload::{self, Limits};

/// The engine's options for stress: small memtables, tables, levels and log segments, so
/// that flushes, compactions, log purges and segment recycling happen within milliseconds.
pub fn options(b: DbBuilder, sync: SyncMode) -> DbBuilder {
    b.sync_mode(sync)
        .memtable_bytes(64 << 10)
        .table_target_bytes(32 << 10)
        .level_base_bytes(128 << 10)
        .level_size_ratio(4)
        .l0_compaction_trigger(2)
        .block_size_bytes(1024)
        .wal_segment_bytes(256 << 10)
        // About half the values go to blob files (`docs/format/vlog.md`).
        .blob_threshold_bytes(Some(64))
}

/// A sync mode by name: `none`, `interval`, `full`.
pub fn sync_mode(name: &str) -> Option<SyncMode> {
    Some(match name {
        "none" => SyncMode::None,
        "interval" => SyncMode::Interval(Duration::from_millis(5)),
        "full" => SyncMode::Full,
        _ => return None,
    })
}

/// What a crash run reports.
#[derive(Debug, Default)]
pub struct Summary {
    /// Cycles completed (each a crash, a reopen and a verification).
    pub cycles: u64,
    /// Operations the workload did.
    pub ops: u64,
    /// Writes acknowledged.
    pub writes: u64,
    /// In-process modes: batches too large for one log record issued (committed in parts).
    pub big_writes: u64,
    /// Keys checked by the verifications and reads checked during the runs.
    pub verified: u64,
    /// Violations: must be zero.
    pub violations: Vec<String>,
    /// White-box: how often each kill point fired; `(none)` for cycles no point ended.
    pub kill_points: BTreeMap<String, u64>,
    /// Power loss with `SyncMode::None`: cycles whose recovered state was a strict prefix
    /// of what was acknowledged (the proof that the simulator does drop unsynced data).
    pub prefix_losses: u64,
    /// I/O-error loop: fault positions tried.
    pub faults_injected: u64,
    /// Seconds of wall time.
    pub seconds: f64,
}

impl Summary {
    /// One JSON object.
    pub fn json(&self, mode: &str, seed: u64) -> serde_json::Value {
        serde_json::json!({
            "mode": mode,
            "seed": seed,
            "cycles": self.cycles,
            "ops": self.ops,
            "writes": self.writes,
            "big_writes": self.big_writes,
            "verified": self.verified,
            "violations": self.violations.len(),
            "first_violations": self.violations.iter().take(5).collect::<Vec<_>>(),
            "kill_points": self.kill_points,
            "prefix_losses": self.prefix_losses,
            "faults_injected": self.faults_injected,
            "seconds": self.seconds,
            "seconds_per_cycle": if self.cycles > 0 { self.seconds / self.cycles as f64 } else { 0.0 },
        })
    }
}

/// Settings of a process-crash run (black-box or white-box).
#[derive(Clone, Debug)]
pub struct CrashRun {
    /// The database directory.
    pub db: PathBuf,
    /// The expected-state file (outside `db`).
    pub expected: PathBuf,
    /// Keys per column family.
    pub keys: u32,
    /// Writer threads in the child.
    pub threads: u32,
    /// Sync mode name.
    pub sync: String,
    /// Cycles.
    pub cycles: u64,
    /// Seed of everything random.
    pub seed: u64,
    /// Black-box: the child is killed after a random time in this range (ms).
    pub kill_after_ms: (u64, u64),
    /// White-box: each kill point fires with odds 1 in this (0: black-box).
    pub kill_odds: u64,
}

/// Opens the database of a crash run, verifies it, settles the writes in flight as found,
/// and closes it. Returns the keys checked, or the violations.
pub fn reopen_and_verify(builder: DbBuilder, exp: &mut Expected) -> Result<u64, Vec<String>> {
    let db = builder
        .open()
        .map_err(|e| vec![format!("open failed: {e}")])?;
    let out = verify(&db, exp);
    if !out.violations.is_empty() {
        if std::env::var_os("SILT_STRESS_DEBUG").is_some() {
            eprintln!("report: {:?}", db.recovery_report());
            eprintln!("cfs: {:?}; stats {:?}", db.list_cfs(), db.stats().levels);
        }
        return Err(out.violations);
    }
    for t in 0..exp.threads {
        if std::env::var_os("SILT_STRESS_DEBUG").is_some() {
            eprintln!(
                "resolve thread {t}: {:?} applied {}",
                exp.pending(t),
                out.applied[t as usize]
            );
        }
        exp.resolve(t, out.applied[t as usize]);
    }
    if std::env::var_os("SILT_STRESS_DEBUG").is_some() {
        eprintln!(
            "verified: c2 {:?}, expected exists {}",
            db.cf(crate::expected::CFS[2]).ok(),
            exp.volatile_exists()
        );
    }
    ensure_cfs(&db, exp).map_err(|e| vec![format!("create column families failed: {e}")])?;
    db.close().map_err(|e| vec![format!("close failed: {e}")])?;
    Ok(out.keys_checked)
}

/// Black-box (`kill_odds == 0`) or white-box crash cycles, each in a child process running
/// `exe run …`.
pub fn crash(exe: &Path, run: &CrashRun) -> Summary {
    let start = Instant::now();
    let mut sum = Summary::default();
    let mut rng = ChaCha8Rng::seed_from_u64(run.seed);
    let sync = sync_mode(&run.sync).unwrap_or(SyncMode::None);
    let mut exp = match Expected::open(&run.expected, run.keys, run.threads) {
        Ok(e) => e,
        Err(e) => {
            sum.violations.push(format!("expected state: {e}"));
            return sum;
        }
    };
    let writes_before = exp.writes();
    // The families exist before the first child runs. A child killed before it created
    // them (its open takes longer than the shortest kill delay on a loaded machine) left a
    // database without them, which the verifier, expecting them, took for a lost write.
    let made = options(Db::builder(&run.db), sync)
        .open()
        .and_then(|db| ensure_cfs(&db, &exp).and_then(|()| db.close()));
    if let Err(e) = made {
        sum.violations
            .push(format!("create the database and its column families: {e}"));
        return sum;
    }
    for cycle in 0..run.cycles {
        let cycle_seed = rng.random::<u64>();
        let mut cmd = Command::new(exe);
        cmd.arg("run")
            .arg("--db")
            .arg(&run.db)
            .arg("--expected")
            .arg(&run.expected)
            .args(["--keys", &run.keys.to_string()])
            .args(["--threads", &run.threads.to_string()])
            .args(["--sync", &run.sync])
            .args(["--seed", &cycle_seed.to_string()])
            .args(["--seconds", "20"])
            .args(["--kill-odds", &run.kill_odds.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                sum.violations.push(format!("spawn {}: {e}", exe.display()));
                break;
            }
        };
        let stderr = child.stderr.take();
        let reader = std::thread::spawn(move || {
            let mut lines = Vec::new();
            if let Some(s) = stderr {
                for l in BufReader::new(s).lines().map_while(Result::ok) {
                    lines.push(l);
                }
            }
            lines
        });
        if run.kill_odds == 0 {
            let ms = rng.random_range(run.kill_after_ms.0..=run.kill_after_ms.1);
            std::thread::sleep(Duration::from_millis(ms));
            kill(&mut child);
        } else {
            wait_or_kill(&mut child, Duration::from_secs(10));
        }
        let lines = reader.join().unwrap_or_default();
        if run.kill_odds != 0 {
            let point = lines
                .iter()
                .find_map(|l| l.strip_prefix("silt kill point: "))
                .map(|p| p.rsplit_once(" (hit").map_or(p, |(n, _)| n).to_string())
                .unwrap_or_else(|| "(none)".into());
            *sum.kill_points.entry(point).or_default() += 1;
        }
        if let Some(v) = lines.iter().find(|l| l.starts_with("violation:")) {
            sum.violations
                .push(format!("cycle {cycle}: the child found {v}"));
        }
        if std::env::var_os("SILT_STRESS_DEBUG").is_some() {
            let pending: Vec<_> = (0..exp.threads).map(|t| exp.pending(t)).collect();
            eprintln!(
                "cycle {cycle}: child said {:?}; pending {pending:?}; c2 exists {}",
                lines
                    .iter()
                    .filter(|l| !l.starts_with("ops:"))
                    .collect::<Vec<_>>(),
                exp.volatile_exists()
            );
        }
        match reopen_and_verify(options(Db::builder(&run.db), sync), &mut exp) {
            Ok(n) => sum.verified += n,
            Err(v) => sum.violations.extend(
                v.into_iter()
                    .map(|v| format!("cycle {cycle} (seed {cycle_seed}): {v}")),
            ),
        }
        for l in &lines {
            if let Some(n) = l.strip_prefix("ops: ") {
                sum.ops += n.trim().parse::<u64>().unwrap_or(0);
            } else if l == "big write" {
                sum.big_writes += 1;
            }
        }
        sum.cycles += 1;
        if !sum.violations.is_empty() {
            break;
        }
    }
    sum.writes = exp.writes() - writes_before;
    sum.seconds = start.elapsed().as_secs_f64();
    sum
}

fn kill(child: &mut Child) {
    let _ = child.kill(); // SIGKILL
    let _ = child.wait();
}

fn wait_or_kill(child: &mut Child, max: Duration) {
    let start = Instant::now();
    while start.elapsed() < max {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    kill(child);
}

/// The child of a crash run: runs the workload until killed (or `seconds` pass), printing
/// its operation count on stderr every few hundred milliseconds.
pub fn child(run: &CrashRun, seconds: u64) -> Result<(), String> {
    let sync = sync_mode(&run.sync).ok_or("bad --sync")?;
    let exp = Expected::open(&run.expected, run.keys, run.threads).map_err(|e| e.to_string())?;
    let db = options(Db::builder(&run.db), sync)
        .open()
        .map_err(|e| format!("open: {e}"))?;
    ensure_cfs(&db, &exp).map_err(|e| format!("create column families: {e}"))?;
    if run.kill_odds > 0 {
        silt::kill_point::arm(run.seed, run.kill_odds);
    }
    workload::ANNOUNCE_BIG_WRITES.store(true, std::sync::atomic::Ordering::SeqCst);
    let exp = Arc::new(Mutex::new(exp));
    let tally = workload::run(
        &db,
        exp,
        run.seed,
        Limits {
            ops: u64::MAX,
            time: Duration::from_secs(seconds),
        },
    );
    eprintln!("ops: {}", tally.ops.into_inner());
    for v in tally.violations.into_inner().unwrap_or_default() {
        eprintln!("violation: {v}");
    }
    if let Some(e) = tally.error.into_inner().unwrap_or_default() {
        return Err(format!("engine error: {e}"));
    }
    Ok(())
}

/// Simulated power losses on the crash simulator, in-process: each cycle runs the workload
/// (one thread, so commit order is operation order) for a random number of operations,
/// cuts the power with a random [`CrashMode`], reopens on the crash image and checks that
/// what survived is everything acknowledged (`SyncMode::Full`) or a prefix of it (`None`),
/// never a newer write without an older one, never half a batch.
pub fn power_loss(cycles: u64, seed: u64, keys: u32) -> Summary {
    let start = Instant::now();
    let mut sum = Summary::default();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut fs = SimFs::new();
    let mut exp = Expected::in_memory(keys, 1);
    let modes = [
        CrashMode::DropAll,
        CrashMode::KeepAll,
        CrashMode::Prefix,
        CrashMode::Sectors,
        CrashMode::Tear,
    ];
    for cycle in 0..cycles {
        let full = rng.random_bool(0.5);
        let sync = if full { SyncMode::Full } else { SyncMode::None };
        let dynfs: Arc<dyn FileSystem> = fs.clone();
        let db = match options(Db::builder("/db").file_system(dynfs), sync).open() {
            Ok(db) => db,
            Err(e) => {
                sum.violations
                    .push(format!("cycle {cycle}: open failed: {e}"));
                break;
            }
        };
        if let Err(e) = ensure_cfs(&db, &exp) {
            sum.violations.push(format!("cycle {cycle}: {e}"));
            break;
        }
        // Run, keeping the expected state of every acknowledged prefix.
        let base = snapshot_state(&exp);
        let shared = Arc::new(Mutex::new(std::mem::replace(
            &mut exp,
            Expected::in_memory(keys, 1),
        )));
        let ops = rng.random_range(1..300);
        let recorder = Recorder::new(base.clone());
        let tally = workload::run_recorded(&db, shared.clone(), rng.random(), ops, &recorder);
        exp = Arc::try_unwrap(shared)
            .ok()
            .and_then(|m| m.into_inner().ok())
            .expect("the workload has ended");
        sum.ops += tally.ops.into_inner();
        sum.writes += tally.writes.into_inner();
        sum.big_writes += tally.big_writes.into_inner();
        sum.violations
            .extend(tally.violations.into_inner().unwrap_or_default());
        let mode = modes[rng.random_range(0..modes.len())];
        let image = fs.crash(mode, rng.random());
        drop(db);
        fs = image;
        let dynfs: Arc<dyn FileSystem> = fs.clone();
        let db = match options(Db::builder("/db").file_system(dynfs), sync).open() {
            Ok(db) => db,
            Err(e) => {
                sum.violations.push(format!(
                    "cycle {cycle} ({mode:?}, {}): reopen failed: {e}",
                    if full { "full" } else { "none" }
                ));
                break;
            }
        };
        // The recovered state must be one of the recorded prefixes: all of them under
        // Full (or all but the write in flight), any under None.
        let states = recorder.states();
        let acked = states.len() - 1 - usize::from(recorder.in_flight());
        let found = crate::verify::read_state(&db, keys);
        match states.iter().rposition(|s| *s == found) {
            Some(i) => {
                if std::env::var_os("SILT_STRESS_DEBUG").is_some() {
                    eprintln!("cycle {cycle} {mode:?} full={full}: state {i} of {acked}");
                }
                if full && i < acked {
                    sum.violations.push(format!(
                        "cycle {cycle} ({mode:?}, full): recovered the state after write {i} \
                         of {acked} acknowledged: acknowledged writes were lost"
                    ));
                }
                if !full && i < recorder.durable() {
                    sum.violations.push(format!(
                        "cycle {cycle} ({mode:?}, none): recovered the state after write {i}, \
                         but write {} was acknowledged as synced",
                        recorder.durable()
                    ));
                }
                if !full && i < acked {
                    sum.prefix_losses += 1;
                }
                restore_state(&mut exp, &states[i]);
                sum.verified += u64::from(keys) * 3;
            }
            None => {
                let closest = closest(&states, &found);
                if std::env::var_os("SILT_STRESS_DEBUG").is_some() {
                    eprintln!("report: {:?}", db.recovery_report());
                    for (i, w) in states.windows(2).enumerate() {
                        eprintln!("write {i}: {}", closest_pair(&w[0], &w[1]));
                    }
                }
                sum.violations.push(format!(
                    "cycle {cycle} ({mode:?}, {}): the recovered state is no prefix of the \
                     acknowledged writes (a newer write without an older one, or half a \
                     batch); closest is the state after write {} of {acked}, which differs in \
                     {}",
                    if full { "full" } else { "none" },
                    closest.0,
                    closest.1
                ));
            }
        }
        let out = verify(&db, &exp);
        sum.verified += out.keys_checked;
        sum.violations.extend(
            out.violations
                .into_iter()
                .map(|v| format!("cycle {cycle} ({mode:?}): {v}")),
        );
        drop(db);
        sum.cycles += 1;
        if !sum.violations.is_empty() {
            break;
        }
    }
    sum.seconds = start.elapsed().as_secs_f64();
    sum
}

/// The whole observable state: per column family (volatile one: `None` if dropped), per
/// key, the slot as seen from outside (`None` for absent).
pub type State = Vec<Option<Vec<Option<u64>>>>;

fn snapshot_state(exp: &Expected) -> State {
    crate::expected::CFS
        .iter()
        .enumerate()
        .map(|(i, _)| {
            (i != crate::expected::VOLATILE_CF || exp.volatile_exists()).then(|| {
                (0..exp.keys)
                    .map(|k| {
                        let s = exp.slot(i, k);
                        (s & 1 == 1).then_some(s)
                    })
                    .collect()
            })
        })
        .collect()
}

/// The recorded state nearest `found` (fewest differing slots) and how it differs.
fn closest(states: &[State], found: &State) -> (usize, String) {
    let mut best = (usize::MAX, 0, String::new());
    for (i, s) in states.iter().enumerate() {
        let mut diffs = Vec::new();
        for (cf, (a, b)) in s.iter().zip(found).enumerate() {
            match (a, b) {
                (Some(a), Some(b)) => {
                    for (k, (x, y)) in a.iter().zip(b).enumerate() {
                        if x != y {
                            diffs.push(format!(
                                "{}/{k}: {} recovered, {} expected",
                                crate::expected::CFS[cf],
                                show(*y),
                                show(*x)
                            ));
                        }
                    }
                }
                (a, b) if a.is_some() != b.is_some() => diffs.push(format!(
                    "family {} exists: {}",
                    crate::expected::CFS[cf],
                    b.is_some()
                )),
                _ => {}
            }
        }
        if diffs.len() <= best.0 {
            best = (diffs.len(), i, diffs.join(", "));
        }
    }
    (best.1, best.2)
}

fn closest_pair(a: &State, b: &State) -> String {
    closest(std::slice::from_ref(a), b).1
}

fn show(s: Option<u64>) -> String {
    match s {
        None => "absent".into(),
        Some(u64::MAX) => "a foreign value".into(),
        Some(s) => format!("version {}", s >> 1),
    }
}

fn restore_state(exp: &mut Expected, state: &State) {
    exp.restore(state);
}

/// Records the expected state after every acknowledged write of a one-thread run (and
/// the state the write in flight would make).
pub struct Recorder {
    states: Mutex<Vec<State>>,
    in_flight: Mutex<bool>,
    /// The index of the last state a durable (synced) write made.
    durable: Mutex<usize>,
}

impl Recorder {
    fn new(base: State) -> Recorder {
        Recorder {
            states: Mutex::new(vec![base]),
            in_flight: Mutex::new(false),
            durable: Mutex::new(0),
        }
    }

    /// A write is about to be issued; `after` is the state it makes.
    pub fn begin(&self, after: State) {
        self.states.lock().expect("recorder").push(after);
        *self.in_flight.lock().expect("recorder") = true;
    }

    /// The write was acknowledged (`durable`: as synced).
    pub fn commit(&self, durable: bool) {
        *self.in_flight.lock().expect("recorder") = false;
        if durable {
            *self.durable.lock().expect("recorder") =
                self.states.lock().expect("recorder").len() - 1;
        }
    }

    fn durable(&self) -> usize {
        *self.durable.lock().expect("recorder")
    }

    /// It failed before anything was written.
    pub fn abandon(&self) {
        self.states.lock().expect("recorder").pop();
        *self.in_flight.lock().expect("recorder") = false;
    }

    fn states(&self) -> Vec<State> {
        self.states.lock().expect("recorder").clone()
    }

    fn in_flight(&self) -> bool {
        *self.in_flight.lock().expect("recorder")
    }
}

/// Snapshot of the expected state, for [`Recorder`].
pub fn state_of(exp: &Expected) -> State {
    snapshot_state(exp)
}

/// The SQLite-style I/O-error loop: for a fixed short workload on the crash simulator, fail
/// the `n`-th file-system call (once, then in a second pass persistently), for n = 1, 2, …
/// until the workload finishes without reaching call `n`. Each time the engine must fail
/// safe — a typed error, never a panic or a wrong read — and the database must then reopen
/// (on a copy of what reached the OS) with every acknowledged write and nothing half done.
pub fn io_errors(seed: u64, keys: u32, ops: u64, max_n: u64) -> Summary {
    let start = Instant::now();
    let mut sum = Summary::default();
    for persistent in [false, true] {
        let mut n = 1;
        while n <= max_n {
            let fs = SimFs::new();
            let exp = Expected::in_memory(keys, 1);
            let dynfs: Arc<dyn FileSystem> = fs.clone();
            fs.fail_nth(FailOp::Any, n, persistent);
            let reached_end;
            match options(Db::builder("/db").file_system(dynfs), SyncMode::None).open() {
                Err(e) => {
                    reached_end = false;
                    if !typed(&e) {
                        sum.violations
                            .push(format!("n={n}: open failed with {e:?}"));
                    }
                }
                Ok(db) => {
                    let ensured = ensure_cfs(&db, &exp);
                    let setup_ok = ensured.is_ok();
                    let recorder = Recorder::new(snapshot_state(&exp));
                    let shared = Arc::new(Mutex::new(exp));
                    let tally = match ensured {
                        Ok(()) => workload::run_recorded(&db, shared.clone(), seed, ops, &recorder),
                        Err(e) => {
                            let t = workload::Tally::default();
                            *t.error.lock().expect("tally") = Some(e.to_string());
                            t
                        }
                    };
                    let error = tally.error.lock().expect("tally").clone();
                    reached_end = error.is_none();
                    let background = db.background_error();
                    if std::env::var_os("SILT_STRESS_DEBUG").is_some() {
                        eprintln!("n={n} persistent={persistent}: {error:?}; {background:?}");
                    }
                    if let Some(e) = &error {
                        if e.contains("panicked") {
                            sum.violations.push(format!("n={n}: {e}"));
                        }
                    }
                    sum.ops += tally.ops.into_inner();
                    sum.writes += tally.writes.into_inner();
                    sum.big_writes += tally.big_writes.into_inner();
                    sum.violations.extend(
                        tally
                            .violations
                            .into_inner()
                            .unwrap_or_default()
                            .into_iter()
                            .map(|v| format!("n={n} persistent={persistent}: {v}")),
                    );
                    drop(shared);
                    // Close, not drop: a background job still running (a flush syncing the
                    // log, say) may meet the fault after the workload ended, and only close
                    // reports that failure. A failed fdatasync there drops dirty pages too.
                    let closed = db.close().err().map(|e| e.to_string());
                    if std::env::var_os("SILT_STRESS_DEBUG").is_some() {
                        eprintln!("n={n} persistent={persistent}: close: {closed:?}");
                    }
                    // A process crash after the failure: everything that reached the OS
                    // survives, except what a failed fdatasync dropped (the kernel drops
                    // dirty pages after a failed writeback); the faults are gone.
                    // What excuses losing acknowledged, unsynced writes: the engine reported
                    // a failure (so it noticed), and a sync that dropped pages of a log
                    // segment failed, or a sync of the log's directory did (a segment's name
                    // then may not survive). The engine reports its first error only: a
                    // sync that failed beside it (a flush syncing the log while a write
                    // fails, say) is known to the file system alone. A failed sync of a
                    // table, the manifest or a segment still being prepared excuses nothing:
                    // the log still holds those writes.
                    let reported = [error.as_deref(), background.as_deref(), closed.as_deref()];
                    let log_dropped = fs.dropped_by_failed_syncs().keys().any(|p| {
                        p.starts_with("/db/wal") && p.extension().is_some_and(|e| e == "wal")
                    });
                    let log_dir_sync_failed = reported
                        .into_iter()
                        .flatten()
                        .any(|e| e.contains("fsync directory on /db/wal "));
                    let sync_failed = reported.iter().any(Option::is_some)
                        && (log_dropped || log_dir_sync_failed);
                    let image = fs.crash(CrashMode::KeepAll, n);
                    let dynfs: Arc<dyn FileSystem> = image.clone();
                    match options(Db::builder("/db").file_system(dynfs), SyncMode::None).open() {
                        Ok(db) => {
                            // A family whose creation the fault stopped holds nothing yet
                            // (the volatile one is part of the state: not recreated).
                            if let Err(e) = db.create_cf(crate::expected::CFS[1]) {
                                sum.violations.push(format!("n={n}: create families: {e}"));
                            }
                            let states = recorder.states();
                            let acked = states.len() - 1 - usize::from(recorder.in_flight());
                            let found = crate::verify::read_state(&db, keys);
                            if !setup_ok {
                                // The fault stopped the setup (creating the families): no
                                // write was made; the database must just open and read.
                                if found.iter().flatten().flatten().any(|s| s.is_some()) {
                                    sum.violations.push(format!(
                                        "n={n}: data in a database no write reached"
                                    ));
                                }
                            } else {
                                match states.iter().rposition(|s| *s == found) {
                                    Some(i)
                                        if i >= acked
                                            || (sync_failed && i >= recorder.durable()) =>
                                    {
                                        sum.verified += u64::from(keys) * 3;
                                    }
                                    Some(i) => sum.violations.push(format!(
                                        "n={n} persistent={persistent}: recovered the state after \
                                     write {i} of {acked} acknowledged ({} synced; a sync \
                                     failed: {sync_failed})",
                                        recorder.durable()
                                    )),
                                    None => {
                                        let (i, diff) = closest(&states, &found);
                                        sum.violations.push(format!(
                                        "n={n} persistent={persistent}: the recovered state is \
                                         no prefix of the acknowledged writes; closest is after \
                                         write {i} of {acked}: {diff}"
                                    ));
                                    }
                                }
                            }
                        }
                        Err(e) => sum.violations.push(format!(
                            "n={n} persistent={persistent}: reopen after the fault failed: {e}"
                        )),
                    }
                }
            }
            sum.faults_injected += 1;
            sum.cycles += 1;
            if !sum.violations.is_empty() || (reached_end && fs.op_count(FailOp::Any) < n) {
                break;
            }
            n += 1;
        }
        if !sum.violations.is_empty() {
            break;
        }
    }
    sum.seconds = start.elapsed().as_secs_f64();
    sum
}

/// Whether an error from a failed I/O is one of the typed kinds a caller can act on.
fn typed(e: &Error) -> bool {
    matches!(
        e,
        Error::Io { .. } | Error::Poisoned | Error::NoSpace { .. } | Error::Corruption { .. }
    )
}
