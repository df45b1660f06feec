//! Real process crashes: a child process appends from several threads and reports each
//! acknowledgement to a file outside the log directory; the parent kills it with SIGKILL at
//! a random moment, reopens the log and checks that every acknowledged commit is there, in
//! order, with no holes and no duplicates. Cycles per mode: `SILT_KILL9_CYCLES` (default
//! 300).
//!
//! The child is this same test binary, re-run with `SILT_KILL9_CHILD` set.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
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
    let ack_file = Arc::new(
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&acks)
            .unwrap(),
    );
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let wal = wal.clone();
            let ack_file = ack_file.clone();
            std::thread::spawn(move || {
                let writer = cycle * THREADS + t;
                for i in 0.. {
                    let lsn = wal.append(&payload(writer, i)).unwrap();
                    // One write(2) per acknowledgement: it is in the OS when this returns.
                    (&*ack_file)
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
        let text = std::fs::read_to_string(&acks).unwrap_or_default();
        let mut acked: HashMap<(u64, u64), u64> = HashMap::new();
        for line in text.lines() {
            let f: Vec<u64> = line.split(' ').map(|x| x.parse().unwrap()).collect();
            if f.len() == 3 {
                acked.insert((f[0], f[1]), f[2]);
            }
        }
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
    eprintln!("kill -9 mode {mode}: {cycles} cycles, {checked} acknowledgement checks, 0 lost");
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
