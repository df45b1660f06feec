//! [`SimFs`]: an in-memory file system that models a machine's page cache against its disk,
//! for power-loss and I/O-error tests.
//!
//! Each file (an inode) has a *live* image — what reads see — and a *durable* image — what
//! survives a power loss. Writes change the live image at once and are queued, in issue
//! order, as the file's unsynced operations; `sync_data` makes the durable image equal to
//! the live one. The namespace works the same way: `create`, `rename` and `remove` change
//! the live directory at once and become durable at `sync_dir`.
//!
//! [`SimFs::crash`] returns the state after a simulated power loss: the durable namespace,
//! each file's durable image plus a subset of its unsynced operations chosen by
//! [`CrashMode`] (none, all, a prefix, independent 512-byte sectors, or a prefix with a
//! torn write). [`SimFs::fail_nth`] makes the N-th call of a kind fail with `EIO`; a failed
//! `sync_data` also reverts the file's live image to its durable one, as a kernel that
//! drops dirty pages after a writeback error does.
//!
//! Limits: directories are durable as soon as they are created; metadata other than names
//! and lengths is not modelled; a shared mapping is modelled as ordinary writes.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::{FileSystem, LogFile};

/// Which unsynced writes survive a simulated power loss.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashMode {
    /// None of them.
    DropAll,
    /// All of them (what a process crash looks like).
    KeepAll,
    /// A random prefix of each file's unsynced writes, in issue order.
    Prefix,
    /// Each 512-byte piece of each unsynced write independently, with probability 1/2
    /// (the kernel writes dirty pages back in any order).
    Sectors,
    /// A random prefix, then the next write torn: part of it lands and the rest of its
    /// sector is garbage.
    Tear,
}

/// The kinds of call [`SimFs::fail_nth`] can make fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailOp {
    /// `LogFile::sync_data`.
    Sync,
    /// `write_at`, `write_mapped` and `set_len`.
    Write,
    /// `FileSystem::sync_dir`.
    SyncDir,
    /// Every call except `list`, `len` and `read_at`.
    Any,
}

#[derive(Clone, Debug)]
enum Op {
    Write { offset: u64, data: Vec<u8> },
    SetLen(u64),
}

#[derive(Clone, Debug, Default)]
struct Inode {
    live: Vec<u8>,
    durable: Vec<u8>,
    unsynced: Vec<Op>,
}

#[derive(Debug, Default)]
struct Fault {
    op: Option<FailOp>,
    /// Calls of that kind left before the failing one (1 = the next call fails).
    countdown: u64,
    persistent: bool,
    fired: bool,
}

#[derive(Debug, Default)]
struct State {
    inodes: Vec<Inode>,
    live_names: BTreeMap<PathBuf, usize>,
    durable_names: BTreeMap<PathBuf, usize>,
    fault: Fault,
    syncs: u64,
    counts: [u64; 4],
}

fn kind_index(op: FailOp) -> usize {
    match op {
        FailOp::Sync => 0,
        FailOp::Write => 1,
        FailOp::SyncDir => 2,
        FailOp::Any => 3,
    }
}

fn eio() -> io::Error {
    io::Error::from_raw_os_error(5)
}

impl State {
    /// Counts a call of kind `op` and decides whether it fails.
    fn call(&mut self, op: FailOp) -> io::Result<()> {
        self.counts[kind_index(op)] += 1;
        self.counts[kind_index(FailOp::Any)] += 1;
        let f = &mut self.fault;
        let Some(kind) = f.op else {
            return Ok(());
        };
        if kind != op && kind != FailOp::Any {
            return Ok(());
        }
        if f.fired {
            return if f.persistent { Err(eio()) } else { Ok(()) };
        }
        f.countdown -= 1;
        if f.countdown == 0 {
            f.fired = true;
            return Err(eio());
        }
        Ok(())
    }
}

/// A tiny deterministic generator (splitmix64), so crash images depend only on the seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

fn apply(image: &mut Vec<u8>, op: &Op) {
    match op {
        Op::Write { offset, data } => {
            let end = *offset as usize + data.len();
            if image.len() < end {
                image.resize(end, 0);
            }
            image[*offset as usize..end].copy_from_slice(data);
        }
        Op::SetLen(n) => image.resize(*n as usize, 0),
    }
}

/// The simulated file system. Cheap to share: clone the `Arc`.
pub struct SimFs {
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for SimFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = self.state.lock();
        f.debug_struct("SimFs")
            .field("files", &st.live_names.len())
            .field("syncs", &st.syncs)
            .finish()
    }
}

impl SimFs {
    /// An empty file system.
    pub fn new() -> Arc<SimFs> {
        Arc::new(SimFs {
            state: Arc::new(Mutex::new(State::default())),
        })
    }

    /// The state after a power loss now, as a new, independent file system. Handles open
    /// on `self` do not reach it.
    pub fn crash(&self, mode: CrashMode, seed: u64) -> Arc<SimFs> {
        let st = self.state.lock();
        let mut rng = Rng(seed ^ 0x5157_4653);
        let mut out = State::default();
        for (name, &ino) in &st.durable_names {
            let inode = &st.inodes[ino];
            let mut image = inode.durable.clone();
            let ops = &inode.unsynced;
            match mode {
                CrashMode::DropAll => {}
                CrashMode::KeepAll => ops.iter().for_each(|op| apply(&mut image, op)),
                CrashMode::Prefix | CrashMode::Tear => {
                    let k = rng.below(ops.len() as u64 + 1) as usize;
                    ops[..k].iter().for_each(|op| apply(&mut image, op));
                    if mode == CrashMode::Tear {
                        if let Some(Op::Write { offset, data }) = ops.get(k) {
                            let keep = rng.below(data.len() as u64 + 1) as usize;
                            apply(
                                &mut image,
                                &Op::Write {
                                    offset: *offset,
                                    data: data[..keep].to_vec(),
                                },
                            );
                            // The rest of the sector the tear is in holds garbage.
                            let at = offset + keep as u64;
                            let sector_end = (at / 512 + 1) * 512;
                            let n = (sector_end - at).min((data.len() - keep) as u64);
                            let garbage: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                            apply(
                                &mut image,
                                &Op::Write {
                                    offset: at,
                                    data: garbage,
                                },
                            );
                        }
                    }
                }
                CrashMode::Sectors => {
                    for op in ops {
                        match op {
                            Op::SetLen(_) => {
                                if rng.below(2) == 0 {
                                    apply(&mut image, op);
                                }
                            }
                            Op::Write { offset, data } => {
                                let mut at = *offset;
                                let end = offset + data.len() as u64;
                                while at < end {
                                    let next = ((at / 512 + 1) * 512).min(end);
                                    if rng.below(2) == 0 {
                                        let s = (at - offset) as usize;
                                        let e = (next - offset) as usize;
                                        apply(
                                            &mut image,
                                            &Op::Write {
                                                offset: at,
                                                data: data[s..e].to_vec(),
                                            },
                                        );
                                    }
                                    at = next;
                                }
                            }
                        }
                    }
                }
            }
            let id = out.inodes.len();
            out.inodes.push(Inode {
                live: image.clone(),
                durable: image,
                unsynced: Vec::new(),
            });
            out.live_names.insert(name.clone(), id);
            out.durable_names.insert(name.clone(), id);
        }
        Arc::new(SimFs {
            state: Arc::new(Mutex::new(out)),
        })
    }

    /// Makes the `n`-th call of kind `op` from now on fail with `EIO` (`n = 1`: the next
    /// one); with `persistent`, every later call of that kind fails too. Replaces any
    /// earlier fault.
    pub fn fail_nth(&self, op: FailOp, n: u64, persistent: bool) {
        assert!(n >= 1, "n counts from 1");
        self.state.lock().fault = Fault {
            op: Some(op),
            countdown: n,
            persistent,
            fired: false,
        };
    }

    /// Removes the injected fault.
    pub fn clear_faults(&self) {
        self.state.lock().fault = Fault::default();
    }

    /// `sync_data` calls so far, failed ones included.
    pub fn sync_count(&self) -> u64 {
        self.state.lock().syncs
    }

    /// Calls of kind `op` so far, failed ones included.
    pub fn op_count(&self, op: FailOp) -> u64 {
        self.state.lock().counts[kind_index(op)]
    }

    /// Bytes written but not yet synced, over all files.
    pub fn unsynced_bytes(&self) -> u64 {
        let st = self.state.lock();
        st.inodes
            .iter()
            .flat_map(|i| &i.unsynced)
            .map(|op| match op {
                Op::Write { data, .. } => data.len() as u64,
                Op::SetLen(_) => 0,
            })
            .sum()
    }

    fn handle(&self, ino: usize) -> Arc<dyn LogFile> {
        Arc::new(SimFile {
            state: self.state.clone(),
            ino,
        })
    }
}

impl FileSystem for SimFs {
    fn create_dir_all(&self, _dir: &Path) -> io::Result<()> {
        self.state.lock().call(FailOp::Any)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        let st = self.state.lock();
        Ok(st
            .live_names
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .cloned()
            .collect())
    }

    fn create(&self, path: &Path) -> io::Result<Arc<dyn LogFile>> {
        let mut st = self.state.lock();
        st.call(FailOp::Any)?;
        if st.live_names.contains_key(path) {
            return Err(io::ErrorKind::AlreadyExists.into());
        }
        let ino = st.inodes.len();
        st.inodes.push(Inode::default());
        st.live_names.insert(path.to_path_buf(), ino);
        drop(st);
        Ok(self.handle(ino))
    }

    fn open(&self, path: &Path) -> io::Result<Arc<dyn LogFile>> {
        let mut st = self.state.lock();
        st.call(FailOp::Any)?;
        let ino = *st.live_names.get(path).ok_or(io::ErrorKind::NotFound)?;
        drop(st);
        Ok(self.handle(ino))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        st.call(FailOp::Any)?;
        let ino = st.live_names.remove(from).ok_or(io::ErrorKind::NotFound)?;
        st.live_names.insert(to.to_path_buf(), ino);
        Ok(())
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        st.call(FailOp::Any)?;
        st.live_names
            .remove(path)
            .map(|_| ())
            .ok_or(io::ErrorKind::NotFound.into())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        st.call(FailOp::SyncDir)?;
        let st = &mut *st;
        st.durable_names.retain(|p, _| p.parent() != Some(dir));
        for (p, &ino) in &st.live_names {
            if p.parent() == Some(dir) {
                st.durable_names.insert(p.clone(), ino);
            }
        }
        Ok(())
    }
}

struct SimFile {
    state: Arc<Mutex<State>>,
    ino: usize,
}

impl std::fmt::Debug for SimFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimFile").field("ino", &self.ino).finish()
    }
}

impl LogFile for SimFile {
    fn len(&self) -> io::Result<u64> {
        Ok(self.state.lock().inodes[self.ino].live.len() as u64)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut st = self.state.lock();
        st.call(FailOp::Write)?;
        let inode = &mut st.inodes[self.ino];
        let op = Op::SetLen(len);
        apply(&mut inode.live, &op);
        inode.unsynced.push(op);
        Ok(())
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let st = self.state.lock();
        let live = &st.inodes[self.ino].live;
        let end = offset as usize + buf.len();
        if end > live.len() {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf.copy_from_slice(&live[offset as usize..end]);
        Ok(())
    }

    fn write_at(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()> {
        let mut st = self.state.lock();
        st.call(FailOp::Write)?;
        let data = bufs.concat();
        let inode = &mut st.inodes[self.ino];
        let op = Op::Write { offset, data };
        apply(&mut inode.live, &op);
        inode.unsynced.push(op);
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        let mut st = self.state.lock();
        st.syncs += 1;
        if let Err(e) = st.call(FailOp::Sync) {
            // The kernel may drop dirty pages after a failed writeback.
            let inode = &mut st.inodes[self.ino];
            inode.live = inode.durable.clone();
            inode.unsynced.clear();
            return Err(e);
        }
        let inode = &mut st.inodes[self.ino];
        inode.durable = inode.live.clone();
        inode.unsynced.clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    fn read(fs: &SimFs, path: &str) -> Vec<u8> {
        let f = fs.open(&p(path)).unwrap();
        let mut b = vec![0; f.len().unwrap() as usize];
        f.read_at(&mut b, 0).unwrap();
        b
    }

    #[test]
    fn synced_data_survives_and_unsynced_data_is_dropped() {
        let fs = SimFs::new();
        let f = fs.create(&p("/d/a")).unwrap();
        fs.sync_dir(&p("/d")).unwrap();
        f.write_at(&[b"hello"], 0).unwrap();
        f.sync_data().unwrap();
        f.write_at(&[b" world"], 5).unwrap();
        assert_eq!(fs.unsynced_bytes(), 6);
        assert_eq!(read(&fs, "/d/a"), b"hello world");
        assert_eq!(read(&fs.crash(CrashMode::DropAll, 1), "/d/a"), b"hello");
        assert_eq!(
            read(&fs.crash(CrashMode::KeepAll, 1), "/d/a"),
            b"hello world"
        );
    }

    #[test]
    fn prefix_and_tear_keep_a_prefix_of_the_writes() {
        let fs = SimFs::new();
        let f = fs.create(&p("/d/a")).unwrap();
        fs.sync_dir(&p("/d")).unwrap();
        for i in 0..10u8 {
            f.write_at(&[&[i + 1; 100]], i as u64 * 100).unwrap();
        }
        for seed in 0..50 {
            let img = read(&fs.crash(CrashMode::Prefix, seed), "/d/a");
            let k = img.len() / 100;
            assert!(img
                .iter()
                .enumerate()
                .all(|(j, &b)| b == (j / 100) as u8 + 1));
            assert!(k <= 10);
            let torn = read(&fs.crash(CrashMode::Tear, seed), "/d/a");
            assert!(torn.len() <= 1000);
        }
    }

    #[test]
    fn sectors_mode_keeps_whole_sectors_independently() {
        let fs = SimFs::new();
        let f = fs.create(&p("/d/a")).unwrap();
        f.set_len(4096).unwrap();
        f.sync_data().unwrap();
        fs.sync_dir(&p("/d")).unwrap();
        f.write_at(&[&[7u8; 4096]], 0).unwrap();
        let mut kept_some = false;
        let mut dropped_some = false;
        for seed in 0..20 {
            let img = read(&fs.crash(CrashMode::Sectors, seed), "/d/a");
            for s in img.chunks(512) {
                assert!(s.iter().all(|&b| b == 7) || s.iter().all(|&b| b == 0));
                kept_some |= s[0] == 7;
                dropped_some |= s[0] == 0;
            }
        }
        assert!(kept_some && dropped_some);
    }

    #[test]
    fn names_are_durable_only_after_sync_dir() {
        let fs = SimFs::new();
        fs.create(&p("/d/new")).unwrap();
        let old = fs.create(&p("/d/old")).unwrap();
        old.sync_data().unwrap();
        assert!(fs.crash(CrashMode::KeepAll, 0).open(&p("/d/new")).is_err());
        fs.sync_dir(&p("/d")).unwrap();
        fs.rename(&p("/d/old"), &p("/d/renamed")).unwrap();
        fs.remove(&p("/d/new")).unwrap();
        let c = fs.crash(CrashMode::KeepAll, 0);
        assert!(c.open(&p("/d/old")).is_ok(), "an unsynced rename is undone");
        assert!(c.open(&p("/d/new")).is_ok(), "an unsynced remove is undone");
        fs.sync_dir(&p("/d")).unwrap();
        let c = fs.crash(CrashMode::KeepAll, 0);
        assert!(c.open(&p("/d/renamed")).is_ok());
        assert!(c.open(&p("/d/old")).is_err());
        assert_eq!(c.list(&p("/d")).unwrap(), vec![p("/d/renamed")]);
        assert!(fs.create(&p("/d/renamed")).is_err());
    }

    #[test]
    fn injected_failures_once_and_persistent() {
        let fs = SimFs::new();
        let f = fs.create(&p("/d/a")).unwrap();
        fs.fail_nth(FailOp::Sync, 2, false);
        f.sync_data().unwrap();
        f.write_at(&[b"abc"], 0).unwrap();
        assert!(f.sync_data().is_err());
        assert_eq!(
            read(&fs, "/d/a"),
            b"",
            "a failed sync drops the dirty pages"
        );
        f.sync_data().unwrap();
        fs.fail_nth(FailOp::Write, 1, true);
        assert!(f.write_at(&[b"x"], 0).is_err());
        assert!(f.set_len(3).is_err());
        f.sync_data().unwrap();
        fs.fail_nth(FailOp::SyncDir, 1, false);
        assert!(fs.sync_dir(&p("/d")).is_err());
        fs.sync_dir(&p("/d")).unwrap();
        fs.fail_nth(FailOp::Any, 1, false);
        assert!(fs.open(&p("/d/a")).is_err());
        fs.clear_faults();
        f.write_at(&[b"ok"], 0).unwrap();
        assert_eq!(fs.sync_count(), 4);
        assert!(fs.op_count(FailOp::Write) >= 4);
    }
}
