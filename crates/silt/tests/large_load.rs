//! The issue's scale check: 10 million 16-byte keys with 100-byte values load in random
//! order, survive a reopen, read back right (a full scan checks every pair, random gets a
//! sample), and after a full compaction the tables on disk are close to the logical size.
//!
//! It takes minutes and gigabytes, so it is ignored by default; run it in release:
//!
//! ```sh
//! cargo test --release -p silt --test large_load -- --ignored --nocapture
//! ```
//!
//! `SILT_LARGE_KEYS` changes the key count (default 10,000,000), `SILT_LARGE_DIR` the
//! parent directory of the database (default the system temp dir).

mod common;

use std::time::Instant;

use common::{dir_bytes, mix64};
use silt::{Db, SyncMode, WriteBatch, WriteOptions};

const VALUE_BYTES: usize = 100;
/// A prime that divides no key count used here, so `i * STRIDE mod n` is a permutation.
const STRIDE: u64 = 1_000_003;

fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&i.to_be_bytes());
    k[8..].copy_from_slice(&(i ^ 0x5a5a_5a5a_5a5a_5a5a).to_le_bytes());
    k
}

fn value(i: u64, out: &mut [u8; VALUE_BYTES]) {
    // splitmix64 stream seeded by the key index: incompressible and checkable.
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    for chunk in out.chunks_mut(8) {
        let z = mix64(x); // adds the increment, then mixes: the same stream as before
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        chunk.copy_from_slice(&z.to_le_bytes()[..chunk.len()]);
    }
}

fn open(path: &std::path::Path) -> Db {
    Db::builder(path).sync_mode(SyncMode::None).open().unwrap()
}

#[test]
#[ignore = "minutes and gigabytes: run with --release -- --ignored"]
fn ten_million_keys_load_reopen_read_back() {
    let n: u64 = std::env::var("SILT_LARGE_KEYS")
        .map(|s| s.parse().expect("SILT_LARGE_KEYS must be a number"))
        .unwrap_or(10_000_000);
    assert!(
        n % STRIDE != 0,
        "SILT_LARGE_KEYS must not be a multiple of {STRIDE}"
    );
    let parent = std::env::var("SILT_LARGE_DIR")
        .unwrap_or_else(|_| std::env::temp_dir().display().to_string());
    let tmp = tempfile::tempdir_in(parent).unwrap();
    let path = tmp.path().join("db");
    let logical = n * (16 + VALUE_BYTES as u64);

    // Load in a random order (a permutation of 0..n), in batches of 1000.
    let t = Instant::now();
    let db = open(&path);
    let mut v = [0u8; VALUE_BYTES];
    let mut batch = WriteBatch::new();
    for j in 0..n {
        let i = (j * STRIDE) % n;
        value(i, &mut v);
        batch.put(&key(i), &v);
        if batch.len() == 1000 || j + 1 == n {
            db.write(std::mem::take(&mut batch), WriteOptions::default())
                .unwrap();
        }
    }
    let load = t.elapsed();
    let s = db.stats();
    eprintln!(
        "loaded {n} keys in {:.1} s ({:.0} keys/s); write amp {:.2}, stalls {} ({} ms)",
        load.as_secs_f64(),
        n as f64 / load.as_secs_f64(),
        s.write_amp,
        s.stalls,
        s.stall_micros / 1000
    );
    db.close().unwrap();

    // Reopen: everything there, in order, byte for byte.
    let t = Instant::now();
    let db = open(&path);
    eprintln!("reopened in {:.2} s", t.elapsed().as_secs_f64());
    let t = Instant::now();
    let mut expect = 0u64;
    for kv in db.iter() {
        let (k, got) = kv.unwrap();
        assert_eq!(k, key(expect), "key #{expect} of the scan");
        value(expect, &mut v);
        assert_eq!(got, v, "value of key #{expect}");
        expect += 1;
    }
    assert_eq!(expect, n, "the scan saw {expect} keys of {n}");
    eprintln!("scanned {n} keys in {:.1} s", t.elapsed().as_secs_f64());
    let t = Instant::now();
    let gets = 200_000.min(n);
    for j in 0..gets {
        let i = (j.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 11) % n;
        value(i, &mut v);
        assert_eq!(
            db.get(&key(i)).unwrap().as_deref(),
            Some(&v[..]),
            "get #{i}"
        );
    }
    assert_eq!(db.get(&key(n)).unwrap(), None);
    eprintln!("{gets} random gets in {:.1} s", t.elapsed().as_secs_f64());

    // Full compaction: the space on disk is close to the logical size.
    let t = Instant::now();
    db.compact_range::<&[u8], _>(..).unwrap();
    db.close().unwrap();
    for e in std::fs::read_dir(&path).unwrap() {
        let e = e.unwrap();
        let md = e.metadata().unwrap();
        let (bytes, files) = if md.is_dir() {
            let files = std::fs::read_dir(e.path()).unwrap().count();
            (dir_bytes(&e.path()), files)
        } else {
            (md.len(), 1)
        };
        eprintln!("  {:?}: {bytes} bytes in {files} files", e.file_name());
    }
    let disk = dir_bytes(&path);
    let tables = dir_bytes(&path.join("tables"));
    let amp = tables as f64 / logical as f64;
    eprintln!(
        "compacted in {:.1} s: tables {tables} bytes for {logical} logical (space amp {amp:.3}); \
         {disk} bytes in all, with the log's preallocated segments",
        t.elapsed().as_secs_f64()
    );
    // Per entry the tables add an 8-byte seqno trailer, lengths, restarts, index and bloom
    // bits, less what prefix compression saves. The log is fixed-size preallocated segments
    // (two after a full flush: the live one and its recycled successor), not data.
    assert!(
        amp < 1.10,
        "space amplification {amp:.3} after a full compaction"
    );
    let db = open(&path);
    let mut count = 0u64;
    for kv in db.iter().rev() {
        let (k, _) = kv.unwrap();
        assert_eq!(k, key(n - 1 - count));
        count += 1;
    }
    assert_eq!(count, n);
    db.close().unwrap();
}
