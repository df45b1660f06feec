//! What several of silt's integration tests share, written once: the hook that records
//! panics on the engine's own threads, the splitmix64 step, the size of a directory tree,
//! a printable key, and the stored entries of a key for a failure message.
//!
//! Each test binary compiles this module and uses part of it.
#![allow(dead_code)]

use std::path::Path;
use std::sync::{Mutex, Once};

use silt::{ColumnFamily, Db};

/// Panics on the engine's threads (all named `silt-...`), which nothing else would report:
/// a background thread's panic does not fail the test that caused it.
static ENGINE_PANICS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Installs (once per process) a panic hook that records panics on `silt-*` threads, then
/// calls the previous hook.
pub fn install_engine_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let name = std::thread::current().name().unwrap_or("?").to_string();
            if name.starts_with("silt-") {
                ENGINE_PANICS
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(format!("thread {name}: {info}"));
            }
            prev(info);
        }));
    });
}

/// Every engine-thread panic recorded so far, oldest first.
pub fn engine_panics() -> Vec<String> {
    ENGINE_PANICS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
}

/// One step of SplitMix64: a well-mixed 64-bit value from `x` (a counter, an index, a seed).
pub fn mix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Bytes of every file under `path` (apparent sizes).
pub fn dir_bytes(path: &Path) -> u64 {
    let mut total = 0;
    for e in std::fs::read_dir(path).unwrap() {
        let e = e.unwrap();
        let md = e.metadata().unwrap();
        total += if md.is_dir() {
            dir_bytes(&e.path())
        } else {
            md.len()
        };
    }
    total
}

/// A key for a message.
pub fn show(k: &[u8]) -> String {
    String::from_utf8_lossy(k).into_owned()
}

/// Every stored entry of `key`, for a failure's diagnostics (`Db::debug_entries`, feature
/// `testing`, which `scripts/test.sh` turns on with `--all-features`).
pub fn debug_entries(db: &Db, cf: &ColumnFamily, key: &[u8]) -> Vec<String> {
    #[cfg(feature = "testing")]
    return db.debug_entries(cf, key);
    #[cfg(not(feature = "testing"))]
    {
        let _ = (db, cf, key);
        vec!["(run with --features testing to list the stored entries)".into()]
    }
}

/// Every file under `path` (recursively) with its length, modification time and a hash of
/// its content: two listings are equal only if no file was created, removed, renamed or
/// written.
pub fn listing(
    path: &Path,
) -> std::collections::BTreeMap<std::path::PathBuf, (u64, std::time::SystemTime, u64)> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![path.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            // A file renamed or removed while the listing runs is not in it.
            let Ok(md) = e.metadata() else { continue };
            if md.is_dir() {
                stack.push(e.path());
                continue;
            }
            // A writer's STATS dump (rewritten every few seconds by an open handle) is a view
            // of its counters, not state: a listing that compares states leaves it out.
            if e.file_name() == "STATS" || e.file_name() == "STATS.tmp" {
                continue;
            }
            // The lock file is never opened: closing a descriptor of it would release the
            // POSIX lock a database handle of this process holds. Its size and time count.
            let data = if e.file_name() == "LOCK" {
                Vec::new()
            } else {
                match std::fs::read(e.path()) {
                    Ok(d) => d,
                    Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(err) => panic!("read {}: {err}", e.path().display()),
                }
            };
            let hash = data.chunks(8).fold(md.len(), |h, c| {
                mix64(h ^ c.iter().fold(0u64, |a, &b| a << 8 | b as u64))
            });
            out.insert(e.path(), (md.len(), md.modified().unwrap(), hash));
        }
    }
    out
}
