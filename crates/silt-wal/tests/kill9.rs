//! Real process crashes: a child process appends from several threads and reports each
//! acknowledgement to a file outside the log directory; the parent kills it with SIGKILL at
//! a random moment, reopens the log and checks that every acknowledged commit is there, in
//! order, with no holes and no duplicates. Cycles per mode: `SILT_KILL9_CYCLES` (default
//! 300).
//!
//! The child is this same test binary, re-run with `SILT_KILL9_CHILD` set.
//!
//! Each writer thread reports to a file of its own. A kill can land inside the `write(2)` of
//! a report (the kernel stops copying between pages when a fatal signal is pending), so the
//! last line of a file may be cut short: only complete lines are acknowledgements, and a cut
//! line can only be a file's last, because its writer never writes again.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use rand::{Rng, SeedableRng};
use silt_wal::{Options, Strategy, SyncMode, Wal};

const THREADS: u64 = 4;

fn mode_by_name(name: &str) -> SyncMode {
    match name {
        "none" => SyncMode::None,
        "interval" => SyncMode::Interval(Duration::from_millis(1)),
        "full" => SyncMode::Full,
        _ => panic!("unknown mode {name}"),
    }
}

fn opts(mode: &str) -> Options {
    Options::default()
        .sync(mode_by_name(mode))
        .strategy(Strategy::Pipelined)
        .segment_bytes(256 << 10)
}

/// The child's work: append forever from `THREADS` threads, logging acknowledgements.
#[test]
fn kill9_child_entry() {
    let Ok(spec) = std::env::var("SILT_KILL9_CHILD") else {
        return; // not the child
    };
    let mut parts = spec.split(';');
    let (dir, acks, mode, cycle) = (
        parts.next().unwrap().to_string(),
        parts.next().unwrap().to_string(),
        parts.next().unwrap().to_string(),
        parts.next().unwrap().parse::<u64>().unwrap(),
    );
    let wal = Arc::new(Wal::open(&dir, opts(&mode)).unwrap());
    std::fs::create_dir_all(&acks).unwrap();
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let wal = wal.clone();
            let writer = cycle * THREADS + t;
            let mut ack_file =
                std::fs::File::create_new(Path::new(&acks).join(writer.to_string())).unwrap();
            std::thread::spawn(move || {
                for i in 0.. {
                    let lsn = wal.append(&payload(writer, i)).unwrap();
                    // One write(2) per acknowledgement: it is in the OS when this returns.
                    ack_file
                        .write_all(format!("{writer} {i} {lsn}\n").as_bytes())
                        .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

fn run_cycles(mode: &str, cycles: u64, seed: u64) {
    let exe = std::env::current_exe().unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let root = tempfile::tempdir().unwrap();
    let mut checked = 0u64;
    let mut cut_reports = 0u64;
    let mut dir_no = 0;
    for cycle in 0..cycles {
        if cycle % 25 == 0 {
            dir_no += 1;
        }
        let dir = root.path().join(format!("log{dir_no}"));
        let acks = root.path().join(format!("acks{dir_no}"));
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "kill9_child_entry",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(
                "SILT_KILL9_CHILD",
                format!("{};{};{mode};{cycle}", dir.display(), acks.display()),
            )
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_micros(rng.random_range(2_000..40_000)));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();

        // What was acknowledged, in any cycle of this directory.
        let (acked, cut) = read_acks(&acks);
        cut_reports += cut;
        let wal = Wal::open(&dir, opts(mode)).unwrap_or_else(|e| {
            panic!("mode {mode} seed {seed} cycle {cycle}: reopen failed: {e}")
        });
        let got = read_all(&wal);
        let mut next: BTreeMap<u64, u64> = BTreeMap::new();
        let mut last_lsn = 0;
        for r in &got {
            assert!(r.lsn > last_lsn, "LSNs out of order");
            last_lsn = r.lsn;
            let (w, i) = parse(&r.payload);
            assert_eq!(r.payload, payload(w, i), "payload damaged");
            let n = next.entry(w).or_insert(0);
            assert_eq!(
                *n, i,
                "mode {mode} seed {seed} cycle {cycle}: writer {w} has a hole"
            );
            *n += 1;
            if let Some(&lsn) = acked.get(&(w, i)) {
                assert_eq!(lsn, r.lsn);
            }
        }
        for (&(w, i), _) in acked.iter() {
            assert!(
                next.get(&w).is_some_and(|&n| i < n),
                "mode {mode} seed {seed} cycle {cycle}: acknowledged commit {w}/{i} lost"
            );
            checked += 1;
        }
        drop(wal);
    }
    eprintln!(
        "kill -9 mode {mode}: {cycles} cycles, {checked} acknowledgement checks, 0 lost; \
         {cut_reports} report files ended in a line the kill cut"
    );
}

/// Every complete line of every writer's report file, as `(writer, i) -> lsn`. A line is
/// complete when its newline was written; only the last line of a file can be incomplete,
/// and any other malformed line fails the test. Also returns how many files end in a cut
/// line.
fn read_acks(dir: &Path) -> (HashMap<(u64, u64), u64>, u64) {
    let mut acked = HashMap::new();
    let mut cut = 0;
    let Ok(rd) = std::fs::read_dir(dir) else {
        return (acked, cut); // the child was killed before it made the directory
    };
    for entry in rd {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let complete = text.rfind('\n').map_or("", |end| &text[..end]);
        if !text.is_empty() && !text.ends_with('\n') {
            cut += 1;
        }
        for line in complete.lines() {
            let f: Vec<u64> = line
                .split(' ')
                .map(|x| x.parse())
                .collect::<Result<_, _>>()
                .unwrap_or_else(|e| panic!("{}: line {line:?}: {e}", path.display()));
            assert_eq!(f.len(), 3, "{}: line {line:?}", path.display());
            acked.insert((f[0], f[1]), f[2]);
        }
    }
    (acked, cut)
}

fn cycles() -> u64 {
    std::env::var("SILT_KILL9_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300)
}

#[test]
fn kill9_none() {
    if std::env::var("SILT_KILL9_CHILD").is_err() {
        run_cycles("none", cycles(), 1);
    }
}

#[test]
fn kill9_interval() {
    if std::env::var("SILT_KILL9_CHILD").is_err() {
        run_cycles("interval", cycles(), 2);
    }
}

#[test]
fn kill9_full() {
    if std::env::var("SILT_KILL9_CHILD").is_err() {
        run_cycles("full", cycles(), 3);
    }
}
