//! Put latency around memtable flushes: 2M sequential 16-byte keys with 100-byte values,
//! reporting the total time, the worst gap between two acknowledged puts and how many
//! gaps exceeded 10 ms. `cargo run --release -p silt --example put_stalls`; to compare
//! two versions, build each and run them alternately (A B A B).

use std::time::{Duration, Instant};
fn main() {
    let dir = tempfile::tempdir().unwrap();
    let db = silt::Db::builder(dir.path()).open().unwrap();
    let val = vec![7u8; 100];
    let mut key = [b'0'; 16];
    let mut last = Instant::now();
    let mut worst = Duration::ZERO;
    let mut over10 = 0;
    let t = Instant::now();
    for i in 0..2_000_000u64 {
        key[..8].copy_from_slice(&i.to_be_bytes());
        db.put(&key, &val).unwrap();
        let now = Instant::now();
        let d = now - last;
        if d > worst {
            worst = d;
        }
        if d >= Duration::from_millis(10) {
            over10 += 1;
        }
        last = now;
    }
    println!(
        "2M puts in {:.2}s; worst {:?}; puts over 10 ms: {over10}; flushes {}",
        t.elapsed().as_secs_f64(),
        worst,
        db.stats().flushes
    );
}
