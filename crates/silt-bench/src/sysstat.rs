//! Process resource figures for `silt-bench run`: CPU and peak RSS from `getrusage`, device
//! writes from `/proc/self/io`, directory sizes. Each returns `None` where the figure is
//! unavailable (never a made-up number).

use std::path::Path;

/// CPU time of the whole process (every thread, including the engine's background ones).
#[derive(Clone, Copy, Debug, Default)]
pub struct Cpu {
    pub user_s: f64,
    pub sys_s: f64,
}

fn rusage() -> Option<libc::rusage> {
    // SAFETY: `getrusage` fills the struct it is given; zeroed is a valid `rusage`.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        (libc::getrusage(libc::RUSAGE_SELF, &mut u) == 0).then_some(u)
    }
}

fn secs(t: libc::timeval) -> f64 {
    t.tv_sec as f64 + t.tv_usec as f64 / 1e6
}

pub fn cpu() -> Option<Cpu> {
    rusage().map(|u| Cpu {
        user_s: secs(u.ru_utime),
        sys_s: secs(u.ru_stime),
    })
}

pub fn cpu_seconds() -> Option<f64> {
    cpu().map(|c| c.user_s + c.sys_s)
}

/// Peak resident set size of this process so far, in bytes: `VmHWM` from
/// `/proc/self/status`, else `getrusage`'s `ru_maxrss` (KiB on Linux).
pub fn peak_rss_bytes() -> Option<u64> {
    if let Ok(s) = std::fs::read_to_string("/proc/self/status") {
        for line in s.lines() {
            if let Some(rest) = line.strip_prefix("VmHWM:") {
                let kib = rest.trim().trim_end_matches("kB").trim();
                if let Ok(k) = kib.parse::<u64>() {
                    return Some(k * 1024);
                }
            }
        }
    }
    if cfg!(target_os = "linux") {
        rusage().and_then(|u| u64::try_from(u.ru_maxrss).ok().map(|k| k * 1024))
    } else {
        None
    }
}

/// `/proc/self/io` counters (Linux with task I/O accounting).
#[derive(Clone, Copy, Debug, Default)]
pub struct Io {
    /// Bytes this process caused to be sent to the storage layer (counted when a page is
    /// dirtied, or at submission for direct I/O).
    pub write_bytes: u64,
    /// Of those, bytes whose dirty pages were dropped before writeback (truncated or
    /// deleted files).
    pub cancelled_write_bytes: u64,
    /// Bytes passed to write-type system calls (`wchar`), whatever the page cache did.
    pub wchar: u64,
}

pub fn io() -> Option<Io> {
    let s = std::fs::read_to_string("/proc/self/io").ok()?;
    let mut w = None;
    let mut c = None;
    let mut wchar = None;
    for line in s.lines() {
        let mut it = line.split(':');
        let (Some(k), Some(v)) = (it.next(), it.next()) else {
            continue;
        };
        let v = v.trim().parse::<u64>().ok();
        match k.trim() {
            "write_bytes" => w = v,
            "cancelled_write_bytes" => c = v,
            "wchar" => wchar = v,
            _ => {}
        }
    }
    Some(Io {
        write_bytes: w?,
        cancelled_write_bytes: c.unwrap_or(0),
        wchar: wchar?,
    })
}

/// Bytes written to the block device holding `dir` so far (sectors written × 512, from
/// `/sys/dev/block/MAJ:MIN/stat`): every process's writes, not only ours.
pub fn disk_written_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(dir).ok()?.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let s = std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/stat")).ok()?;
    // Fields: reads, merges, sectors read, ms, writes, merges, sectors written, ...
    let sectors: u64 = s.split_whitespace().nth(6)?.parse().ok()?;
    Some(sectors * 512)
}

/// Writes back every dirty page of the file system holding `dir` (`syncfs`), so the device
/// counter covers what was written; false if it failed.
pub fn syncfs(dir: &Path) -> bool {
    match std::fs::File::open(dir) {
        Ok(f) => rustix::fs::syncfs(&f).is_ok(),
        Err(_) => false,
    }
}

/// Total apparent size (sum of file lengths) and allocated size (blocks × 512) of every
/// file under `dir`, a file with several names (hard links: silt's log blobs) once, as `du`
/// counts it and as the disk holds it.
pub fn dir_bytes(dir: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let mut len = 0;
    let mut alloc = 0;
    let mut linked = std::collections::HashSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).ok()? {
            let e = e.ok()?;
            let m = match e.metadata() {
                Ok(m) => m,
                // A file deleted (by compaction) while we walk.
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
                Err(_) => return None,
            };
            if m.is_dir() {
                stack.push(e.path());
            } else if m.nlink() > 1 && !linked.insert((m.dev(), m.ino())) {
                // Another name of a file already counted.
            } else {
                len += m.len();
                alloc += m.blocks() * 512;
            }
        }
    }
    Some((len, alloc))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_with_two_names_counts_once() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a"), vec![1u8; 10_000]).unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        std::fs::hard_link(d.path().join("a"), d.path().join("sub/b")).unwrap();
        std::fs::write(d.path().join("c"), vec![1u8; 500]).unwrap();
        assert_eq!(dir_bytes(d.path()).unwrap().0, 10_500);
    }

    #[test]
    fn figures_are_present_on_linux() {
        if !cfg!(target_os = "linux") {
            return;
        }
        let c = cpu().unwrap();
        assert!(c.user_s >= 0.0 && c.sys_s >= 0.0);
        assert!(peak_rss_bytes().unwrap() > 1 << 20);
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/f"), vec![1u8; 10_000]).unwrap();
        std::fs::write(dir.path().join("g"), vec![1u8; 5]).unwrap();
        let (len, alloc) = dir_bytes(dir.path()).unwrap();
        assert_eq!(len, 10_005);
        assert!(alloc >= 10_000 || alloc == 0, "{alloc}");
    }
}
