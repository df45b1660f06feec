//! [`SimFs`]: an in-memory file system that models a machine's page cache against its disk,
//! for power-loss and I/O-error tests.
//!
//! # The model
//!
//! * **Files are inodes.** A name maps to an inode id, so a rename keeps the content and a
//!   removed file that is still open keeps working (its writes go to the inode, which no
//!   name reaches any more). An inode is freed once no name, durable name or open handle
//!   refers to it.
//! * **Live vs. durable content.** Each inode has a *live* image (what reads see: the page
//!   cache) and a *durable* image (what survives a power loss: the disk). `write_at`,
//!   `write_mapped` (the same thing here) and `set_len` change the live image at once and are
//!   queued, in issue order, as the inode's *unsynced operations*. `sync_data` applies them to
//!   the durable image and empties the queue.
//! * **Live vs. durable names.** `create`, `rename` and `remove` change the live namespace at
//!   once; `sync_dir(dir)` makes the durable entries of `dir` equal to the live ones. So a
//!   file created in a directory that was never synced is gone after a crash, and an
//!   unsynced rename or remove is undone (a removed file comes back with its durable
//!   content).
//! * **Power loss.** [`SimFs::crash`] builds a new, independent file system from the durable
//!   namespace; each file holds its durable image plus a subset of its unsynced operations
//!   chosen by a [`CrashMode`] and a seed: none, all, a prefix, independent 512-byte sectors,
//!   or a prefix followed by one torn write. The same state and seed give the same image.
//! * **I/O errors.** [`SimFs::fail_nth`] makes the N-th call of a [`FailOp`] kind fail. A
//!   failed call changes nothing, except a failed `sync_data`, which also throws away the
//!   file's unsynced operations and reverts its live image to the durable one: the model of
//!   a kernel that drops dirty pages after a writeback error, so data that failed to sync is
//!   never read back as if it were safe.
//!
//! # Limits
//!
//! * Directories exist as soon as `create_dir_all` returns and are never lost or removed;
//!   `create`, `rename` and `list` need the directory to exist (`NotFound` otherwise).
//!   Paths are compared by their components after dropping `.`; `..` is not resolved and
//!   symbolic links do not exist.
//! * Only names, lengths and bytes are modelled: no permissions, times, hard links (beyond
//!   what an unsynced cross-directory rename leaves behind), holes or space limits. A file's
//!   length is simply the extent of the operations that were applied, so a crash image may
//!   hold a file whose length is neither the old nor the new one.
//! * A shared mapping is modelled as ordinary writes; `write_mapped` only checks that the
//!   bytes lie inside the current length, as the real mapping does.
//! * Real disks may tear a sector anywhere and may also lose a *synced* sector's neighbours
//!   on a torn write; here garbage stays inside the torn write's own byte range, so bytes
//!   that were durable before stay durable.
//! * Everything sits behind one mutex: simple and deterministic, not fast.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::{File, FileLock, FileSystem};

/// The unit in which [`CrashMode::Sectors`] persists writes and [`CrashMode::Tear`] fills
/// garbage.
const SECTOR: u64 = 512;

/// Which unsynced operations survive a simulated power loss ([`SimFs::crash`]).
///
/// Synced data and names always survive; these modes only choose among each file's
/// *unsynced* operations (writes and length changes issued since its last successful
/// `sync_data`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CrashMode {
    /// None of them: the disk holds exactly what was synced.
    DropAll,
    /// All of them, like a process crash: everything that reached the OS survives.
    KeepAll,
    /// For each file, a random prefix of its unsynced operations, in issue order (prefix
    /// length uniform in `0..=n`).
    Prefix,
    /// Every unsynced write is cut at 512-byte boundaries of the file, and each piece is
    /// kept independently with probability 1/2 (the kernel writes dirty pages back in any
    /// order). A `set_len` is one piece. Kept pieces are applied in issue order.
    Sectors,
    /// Like [`CrashMode::Prefix`], then the first operation not kept, if it is a write, is
    /// torn: a random number of its leading bytes (fewer than all) land, and the rest of the
    /// 512-byte sector in which it stops (within the write's range) holds random garbage.
    Tear,
}

/// The kinds of call that [`SimFs::fail_nth`] can make fail and [`SimFs::op_count`] counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FailOp {
    /// [`File::sync_data`].
    Sync,
    /// [`File::write_at`], [`File::write_mapped`] and [`File::set_len`].
    Write,
    /// [`FileSystem::sync_dir`].
    SyncDir,
    /// Every call of [`FileSystem`] and [`File`] except `list`, `len`, `is_empty` and
    /// `read_at`.
    Any,
}

impl FailOp {
    fn index(self) -> usize {
        match self {
            FailOp::Sync => 0,
            FailOp::Write => 1,
            FailOp::SyncDir => 2,
            FailOp::Any => 3,
        }
    }
}

/// The error an injected fault returns.
fn injected() -> io::Error {
    io::Error::other("injected EIO")
}

fn too_large() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        "SimFs: file offset too large for memory",
    )
}

/// `p` without `.` components, so `./a`, `a` and `a/.` name the same file.
fn norm(p: &Path) -> PathBuf {
    p.components().filter(|c| *c != Component::CurDir).collect()
}

/// Whether directory `d` (normalized) is a root: the empty relative root or `/`.
fn is_root(d: &Path) -> bool {
    d.parent().is_none()
}

type Ino = u64;

/// One change to a file's bytes, as issued.
#[derive(Clone, Debug)]
enum Op {
    Write { offset: u64, data: Vec<u8> },
    SetLen(u64),
}

impl Op {
    fn bytes(&self) -> u64 {
        match self {
            Op::Write { data, .. } => data.len() as u64,
            Op::SetLen(_) => 0,
        }
    }
}

/// Applies `op` to `image`. Offsets were checked to fit in memory when the op was issued.
fn apply(image: &mut Vec<u8>, op: &Op) {
    match op {
        Op::Write { offset, data } => write_bytes(image, *offset, data),
        Op::SetLen(n) => image.resize(*n as usize, 0),
    }
}

fn write_bytes(image: &mut Vec<u8>, offset: u64, data: &[u8]) {
    if data.is_empty() {
        return;
    }
    let start = offset as usize;
    let end = start + data.len();
    if image.len() < end {
        image.resize(end, 0);
    }
    image[start..end].copy_from_slice(data);
}

#[derive(Debug, Default)]
struct Inode {
    live: Vec<u8>,
    durable: Vec<u8>,
    unsynced: Vec<Op>,
    /// Open `SimFile` handles.
    handles: usize,
}

/// An armed fault: the call that brings `remaining` to zero fails; a persistent fault keeps
/// failing afterwards (it stays at zero), a one-shot fault is removed.
#[derive(Clone, Copy, Debug)]
struct Fault {
    remaining: u64,
    persistent: bool,
}

/// Counts one call against the fault in `slot`; whether the call fails.
fn tick(slot: &mut Option<Fault>) -> bool {
    let Some(f) = slot else {
        return false;
    };
    if f.remaining == 0 {
        return f.persistent;
    }
    f.remaining -= 1;
    if f.remaining == 0 {
        if !f.persistent {
            *slot = None;
        }
        return true;
    }
    false
}

#[derive(Debug, Default)]
struct State {
    inodes: BTreeMap<Ino, Inode>,
    next_ino: Ino,
    /// Directories (normalized); durable as soon as they exist.
    dirs: BTreeSet<PathBuf>,
    /// The namespace reads see.
    live: BTreeMap<PathBuf, Ino>,
    /// The namespace that survives a crash.
    durable: BTreeMap<PathBuf, Ino>,
    /// One armed fault per `FailOp` kind.
    faults: [Option<Fault>; 4],
    /// Calls per `FailOp` kind (`Any` counts every countable call).
    counts: [u64; 4],
    /// Paths locked by a live [`FileSystem::lock`] guard. A crash image starts with none:
    /// a power loss ends every process.
    locks: BTreeSet<PathBuf>,
}

impl State {
    /// Counts a call of kind `kind` (`FailOp::Any` for calls that belong to no narrower
    /// kind) and decides whether it fails.
    fn call(&mut self, kind: FailOp) -> io::Result<()> {
        self.counts[kind.index()] += 1;
        let mut fail = tick(&mut self.faults[kind.index()]);
        if kind != FailOp::Any {
            self.counts[FailOp::Any.index()] += 1;
            fail |= tick(&mut self.faults[FailOp::Any.index()]);
        }
        if fail {
            Err(injected())
        } else {
            Ok(())
        }
    }

    fn dir_exists(&self, d: &Path) -> bool {
        is_root(d) || self.dirs.contains(d)
    }

    /// The parent of file path `p` (normalized), which must be an existing directory.
    fn parent_dir<'a>(&self, p: &'a Path) -> io::Result<&'a Path> {
        let parent = p
            .parent()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "SimFs: not a file path"))?;
        if self.dir_exists(parent) {
            Ok(parent)
        } else {
            Err(io::Error::new(
                io::ErrorKind::NotFound,
                "SimFs: no such directory",
            ))
        }
    }

    fn inode_mut(&mut self, ino: Ino) -> &mut Inode {
        self.inodes
            .get_mut(&ino)
            .expect("SimFs: an open or named inode exists")
    }

    fn new_inode(&mut self, inode: Inode) -> Ino {
        let ino = self.next_ino;
        self.next_ino += 1;
        self.inodes.insert(ino, inode);
        ino
    }

    /// Frees `ino` if nothing can reach it any more.
    fn reap(&mut self, ino: Ino) {
        let unreachable = self.inodes.get(&ino).is_some_and(|i| i.handles == 0)
            && !self.live.values().any(|&i| i == ino)
            && !self.durable.values().any(|&i| i == ino);
        if unreachable {
            self.inodes.remove(&ino);
        }
    }

    fn unsynced_bytes(&self) -> u64 {
        self.inodes
            .values()
            .flat_map(|i| &i.unsynced)
            .map(Op::bytes)
            .sum()
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

    /// Uniform in `0..n` (0 when `n == 0`).
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            // Widening multiply: unbiased enough for tests, and no division.
            ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
        }
    }

    fn coin(&mut self) -> bool {
        self.next() >> 63 == 1
    }
}

/// The end of the sector that holds byte `at`.
fn sector_end(at: u64) -> u64 {
    (at / SECTOR + 1) * SECTOR
}

/// The content `inode` has after a power loss in `mode`.
fn crash_image(inode: &Inode, mode: CrashMode, rng: &mut Rng) -> Vec<u8> {
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
                    if !data.is_empty() {
                        let keep = rng.below(data.len() as u64) as usize;
                        write_bytes(&mut image, *offset, &data[..keep]);
                        let at = offset + keep as u64;
                        let end = sector_end(at).min(offset + data.len() as u64);
                        let garbage: Vec<u8> = (at..end).map(|_| rng.next() as u8).collect();
                        write_bytes(&mut image, at, &garbage);
                    }
                }
            }
        }
        CrashMode::Sectors => {
            for op in ops {
                match op {
                    Op::SetLen(_) => {
                        if rng.coin() {
                            apply(&mut image, op);
                        }
                    }
                    Op::Write { offset, data } => {
                        let end = offset + data.len() as u64;
                        let mut at = *offset;
                        while at < end {
                            let next = sector_end(at).min(end);
                            if rng.coin() {
                                let piece = &data[(at - offset) as usize..(next - offset) as usize];
                                write_bytes(&mut image, at, piece);
                            }
                            at = next;
                        }
                    }
                }
            }
        }
    }
    image
}

/// An in-memory file system that keeps unsynced writes apart from durable ones, for
/// power-loss ([`SimFs::crash`]) and I/O-error ([`SimFs::fail_nth`]) tests.
///
/// Files are inodes with a *live* image (what reads see: the page cache) and a *durable*
/// image (the disk). `write_at`, `write_mapped` and `set_len` change the live image and are
/// queued as unsynced operations; `sync_data` makes them durable. Names work the same way:
/// `create`, `rename` and `remove` change the live namespace, `sync_dir` makes a
/// directory's entries durable. Directories are durable as soon as `create_dir_all`
/// returns, and `create`, `rename` and `list` need them to exist. A removed file that is
/// still open keeps working.
///
/// Every method takes `&self` and may be called from many threads; share it as
/// `Arc<SimFs>` (which coerces to `Arc<dyn FileSystem>`).
pub struct SimFs {
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for SimFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("SimFs");
        match self.state.try_lock() {
            Some(st) => d
                .field("files", &st.live.len())
                .field("inodes", &st.inodes.len())
                .field("unsynced_bytes", &st.unsynced_bytes())
                .field("syncs", &st.counts[FailOp::Sync.index()])
                .finish(),
            None => d.finish_non_exhaustive(),
        }
    }
}

impl SimFs {
    /// An empty file system (only the root directories `/` and `` exist).
    pub fn new() -> Arc<SimFs> {
        Arc::new(SimFs {
            state: Arc::new(Mutex::new(State::default())),
        })
    }

    /// The state after a power loss right now, as a new, independent file system.
    ///
    /// It holds every directory, the durable names, and for each file its durable image
    /// plus the unsynced operations that `mode` keeps (random choices come from `seed`
    /// only, so the same state and seed give the same image). In it everything is synced,
    /// no fault is armed and the counters are zero. `self` is unchanged and can be used
    /// further; handles open on `self` do not reach the new file system.
    pub fn crash(&self, mode: CrashMode, seed: u64) -> Arc<SimFs> {
        let st = self.state.lock();
        let mut rng = Rng(seed);
        let mut out = State {
            dirs: st.dirs.clone(),
            ..State::default()
        };
        // Old inode → new inode, so names sharing an inode still share it.
        let mut moved: BTreeMap<Ino, Ino> = BTreeMap::new();
        for (path, &ino) in &st.durable {
            let new = match moved.get(&ino) {
                Some(&n) => n,
                None => {
                    let image = crash_image(&st.inodes[&ino], mode, &mut rng);
                    let n = out.new_inode(Inode {
                        live: image.clone(),
                        durable: image,
                        ..Inode::default()
                    });
                    moved.insert(ino, n);
                    n
                }
            };
            out.live.insert(path.clone(), new);
            out.durable.insert(path.clone(), new);
        }
        Arc::new(SimFs {
            state: Arc::new(Mutex::new(out)),
        })
    }

    /// Arms a fault: counting the calls of kind `op` made after this one (`n = 1` is the
    /// very next), the `n`-th fails with an [`io::Error`] of kind `Other` and message
    /// `"injected EIO"`; with `persistent`, every later call of that kind fails too.
    ///
    /// Replaces an earlier fault of the same kind; faults of other kinds stay armed, and a
    /// call fails if any fault that covers it fires ([`FailOp::Any`] covers every counted
    /// call).
    ///
    /// A failed call changes nothing, except a failed `sync_data`: it also drops the file's
    /// unsynced operations and reverts its live image to the durable one, as a kernel that
    /// discards dirty pages after a writeback error does.
    ///
    /// # Panics
    ///
    /// If `n` is 0.
    pub fn fail_nth(&self, op: FailOp, n: u64, persistent: bool) {
        assert!(n >= 1, "SimFs::fail_nth: n counts from 1 (the next call)");
        self.state.lock().faults[op.index()] = Some(Fault {
            remaining: n,
            persistent,
        });
    }

    /// Disarms every fault.
    pub fn clear_faults(&self) {
        self.state.lock().faults = [None; 4];
    }

    /// `sync_data` calls made so far on any file, failed ones included.
    pub fn sync_count(&self) -> u64 {
        self.op_count(FailOp::Sync)
    }

    /// Calls of kind `op` made so far, failed ones included ([`FailOp::Any`]: all counted
    /// calls).
    pub fn op_count(&self, op: FailOp) -> u64 {
        self.state.lock().counts[op.index()]
    }

    /// Bytes written but not yet synced, over all files (open removed files included);
    /// `set_len` counts as no bytes.
    pub fn unsynced_bytes(&self) -> u64 {
        self.state.lock().unsynced_bytes()
    }

    /// A new handle to `ino`; the caller holds the lock as `st`.
    fn handle(&self, st: &mut State, ino: Ino) -> Arc<dyn File> {
        st.inode_mut(ino).handles += 1;
        Arc::new(SimFile {
            state: self.state.clone(),
            ino,
        })
    }
}

/// The guard of a [`SimFs`] lock: releases the path when dropped.
struct SimLock {
    state: Arc<Mutex<State>>,
    path: PathBuf,
}

impl std::fmt::Debug for SimLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimLock").field("path", &self.path).finish()
    }
}

impl FileLock for SimLock {}

impl Drop for SimLock {
    fn drop(&mut self) {
        self.state.lock().locks.remove(&self.path);
    }
}

impl FileSystem for SimFs {
    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>> {
        let mut st = self.state.lock();
        st.call(FailOp::Any)?;
        let path = norm(path);
        st.parent_dir(&path)?;
        if st.locks.contains(&path) {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "SimFs: the lock is held by another handle",
            ));
        }
        if !st.live.contains_key(&path) {
            let ino = st.new_inode(Inode::default());
            st.live.insert(path.clone(), ino);
        }
        st.locks.insert(path.clone());
        Ok(Box::new(SimLock {
            state: self.state.clone(),
            path,
        }))
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        st.call(FailOp::Any)?;
        let dir = norm(dir);
        if dir.ancestors().any(|a| st.live.contains_key(a)) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "SimFs: a file is in the way",
            ));
        }
        for a in dir.ancestors().filter(|a| !is_root(a)) {
            st.dirs.insert(a.to_path_buf());
        }
        Ok(())
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        let st = self.state.lock();
        let d = norm(dir);
        if !st.dir_exists(&d) {
            return Err(io::ErrorKind::NotFound.into());
        }
        Ok(st
            .live
            .keys()
            .filter(|p| p.parent() == Some(&*d))
            .filter_map(|p| p.file_name())
            .map(|name| dir.join(name))
            .collect())
    }

    fn create(&self, path: &Path) -> io::Result<Arc<dyn File>> {
        let mut st = self.state.lock();
        st.call(FailOp::Any)?;
        let path = norm(path);
        st.parent_dir(&path)?;
        if st.live.contains_key(&path) || st.dirs.contains(&path) {
            return Err(io::ErrorKind::AlreadyExists.into());
        }
        let ino = st.new_inode(Inode::default());
        st.live.insert(path, ino);
        Ok(self.handle(&mut st, ino))
    }

    fn open(&self, path: &Path) -> io::Result<Arc<dyn File>> {
        let mut st = self.state.lock();
        st.call(FailOp::Any)?;
        let ino = *st.live.get(&norm(path)).ok_or(io::ErrorKind::NotFound)?;
        Ok(self.handle(&mut st, ino))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        st.call(FailOp::Any)?;
        let (from, to) = (norm(from), norm(to));
        let ino = *st.live.get(&from).ok_or(io::ErrorKind::NotFound)?;
        st.parent_dir(&to)?;
        if st.dirs.contains(&to) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "SimFs: cannot rename a file over a directory",
            ));
        }
        if from == to {
            return Ok(());
        }
        st.live.remove(&from);
        if let Some(old) = st.live.insert(to, ino) {
            st.reap(old);
        }
        Ok(())
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        st.call(FailOp::Any)?;
        let ino = st.live.remove(&norm(path)).ok_or(io::ErrorKind::NotFound)?;
        st.reap(ino);
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        st.call(FailOp::SyncDir)?;
        let d = norm(dir);
        if !st.dir_exists(&d) {
            return Err(io::ErrorKind::NotFound.into());
        }
        let in_dir = |p: &PathBuf| p.parent() == Some(&*d);
        let dropped: Vec<Ino> = st
            .durable
            .iter()
            .filter(|(p, _)| in_dir(p))
            .map(|(_, &i)| i)
            .collect();
        st.durable.retain(|p, _| !in_dir(p));
        let now: Vec<(PathBuf, Ino)> = st
            .live
            .iter()
            .filter(|(p, _)| in_dir(p))
            .map(|(p, &i)| (p.clone(), i))
            .collect();
        st.durable.extend(now);
        for ino in dropped {
            st.reap(ino);
        }
        Ok(())
    }
}

/// An open file of a [`SimFs`]: the shared state and an inode id.
struct SimFile {
    state: Arc<Mutex<State>>,
    ino: Ino,
}

impl std::fmt::Debug for SimFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimFile").field("ino", &self.ino).finish()
    }
}

impl Drop for SimFile {
    fn drop(&mut self) {
        let mut st = self.state.lock();
        st.inode_mut(self.ino).handles -= 1;
        st.reap(self.ino);
    }
}

impl SimFile {
    fn write(&self, bufs: &[&[u8]], offset: u64, mapped: bool) -> io::Result<()> {
        let mut st = self.state.lock();
        st.call(FailOp::Write)?;
        let total: u64 = bufs.iter().map(|b| b.len() as u64).sum();
        let end = offset
            .checked_add(total)
            .filter(|&e| usize::try_from(e).is_ok())
            .ok_or_else(too_large)?;
        let inode = st.inode_mut(self.ino);
        if mapped && end > inode.live.len() as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "write_mapped past the end of the file",
            ));
        }
        if total == 0 {
            // A zero-length write changes nothing, not even the length.
            return Ok(());
        }
        let op = Op::Write {
            offset,
            data: bufs.concat(),
        };
        apply(&mut inode.live, &op);
        inode.unsynced.push(op);
        Ok(())
    }
}

impl File for SimFile {
    fn len(&self) -> io::Result<u64> {
        Ok(self.state.lock().inode_mut(self.ino).live.len() as u64)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut st = self.state.lock();
        st.call(FailOp::Write)?;
        usize::try_from(len).map_err(|_| too_large())?;
        let inode = st.inode_mut(self.ino);
        let op = Op::SetLen(len);
        apply(&mut inode.live, &op);
        inode.unsynced.push(op);
        Ok(())
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let mut st = self.state.lock();
        let live = &st.inode_mut(self.ino).live;
        let start = usize::try_from(offset).map_err(|_| io::ErrorKind::UnexpectedEof)?;
        let src = start
            .checked_add(buf.len())
            .and_then(|end| live.get(start..end))
            .ok_or(io::ErrorKind::UnexpectedEof)?;
        buf.copy_from_slice(src);
        Ok(())
    }

    fn write_at(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()> {
        self.write(bufs, offset, false)
    }

    fn write_mapped(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()> {
        self.write(bufs, offset, true)
    }

    fn sync_data(&self) -> io::Result<()> {
        let mut st = self.state.lock();
        let res = st.call(FailOp::Sync);
        let inode = st.inode_mut(self.ino);
        match res {
            Err(e) => {
                // The kernel drops dirty pages after a failed writeback.
                inode.live = inode.durable.clone();
                inode.unsynced.clear();
                Err(e)
            }
            Ok(()) => {
                // Durable + every unsynced op == live; cheaper than copying the whole file.
                let Inode {
                    durable, unsynced, ..
                } = inode;
                for op in unsynced.drain(..) {
                    apply(durable, &op);
                }
                debug_assert_eq!(inode.durable.len(), inode.live.len());
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    /// A fresh file system with directory `/d`.
    fn fs_with_dir() -> Arc<SimFs> {
        let fs = SimFs::new();
        fs.create_dir_all(&p("/d")).unwrap();
        fs
    }

    fn read(fs: &SimFs, path: &str) -> Vec<u8> {
        let f = fs.open(&p(path)).unwrap();
        read_file(&*f)
    }

    fn read_file(f: &dyn File) -> Vec<u8> {
        let mut b = vec![0; f.len().unwrap() as usize];
        f.read_at(&mut b, 0).unwrap();
        b
    }

    fn exists(fs: &SimFs, path: &str) -> bool {
        match fs.open(&p(path)) {
            Ok(_) => true,
            Err(e) if e.kind() == io::ErrorKind::NotFound => false,
            Err(e) => panic!("open {path}: {e}"),
        }
    }

    fn is_injected(e: &io::Error) -> bool {
        e.kind() == io::ErrorKind::Other && e.to_string() == "injected EIO"
    }

    /// A durable, synced, empty file `/d/a`.
    fn durable_file(fs: &SimFs) -> Arc<dyn File> {
        let f = fs.create(&p("/d/a")).unwrap();
        f.sync_data().unwrap();
        fs.sync_dir(&p("/d")).unwrap();
        f
    }

    // ---- live vs. durable ----------------------------------------------------------------

    #[test]
    fn reads_see_live_data_and_only_synced_data_is_durable() {
        let fs = fs_with_dir();
        let f = durable_file(&fs);
        f.write_at(&[b"hel", b"lo"], 0).unwrap();
        assert_eq!(read_file(&*f), b"hello");
        assert_eq!(f.len().unwrap(), 5);
        assert!(!f.is_empty().unwrap());
        assert_eq!(read(&fs.crash(CrashMode::DropAll, 0), "/d/a"), b"");
        f.sync_data().unwrap();
        assert_eq!(fs.unsynced_bytes(), 0);
        assert_eq!(read(&fs.crash(CrashMode::DropAll, 0), "/d/a"), b"hello");
        f.write_at(&[b"J"], 0).unwrap();
        assert_eq!(read(&fs, "/d/a"), b"Jello");
        assert_eq!(read(&fs.crash(CrashMode::DropAll, 0), "/d/a"), b"hello");
    }

    #[test]
    fn unsynced_data_is_dropped_by_drop_all_and_kept_by_keep_all() {
        let fs = fs_with_dir();
        let f = durable_file(&fs);
        f.write_at(&[b"hello"], 0).unwrap();
        f.sync_data().unwrap();
        f.write_at(&[b" world"], 5).unwrap();
        f.write_at(&[b"W"], 6).unwrap();
        assert_eq!(fs.unsynced_bytes(), 7, "the unsynced writes are pending");
        assert_eq!(read(&fs.crash(CrashMode::DropAll, 1), "/d/a"), b"hello");
        assert_eq!(
            read(&fs.crash(CrashMode::KeepAll, 1), "/d/a"),
            b"hello World"
        );
        // Taking a crash image changes nothing in the original.
        assert_eq!(fs.unsynced_bytes(), 7);
        assert_eq!(read(&fs, "/d/a"), b"hello World");
    }

    #[test]
    fn set_len_extends_with_zeros_shrinks_and_is_durable_after_sync() {
        let fs = fs_with_dir();
        let f = durable_file(&fs);
        f.set_len(4).unwrap();
        assert_eq!(read_file(&*f), [0; 4]);
        f.write_at(&[b"abcdef"], 2).unwrap();
        f.set_len(5).unwrap();
        assert_eq!(read_file(&*f), b"\0\0abc");
        assert_eq!(read(&fs.crash(CrashMode::DropAll, 0), "/d/a"), b"");
        assert_eq!(read(&fs.crash(CrashMode::KeepAll, 0), "/d/a"), b"\0\0abc");
        f.sync_data().unwrap();
        assert_eq!(read(&fs.crash(CrashMode::DropAll, 0), "/d/a"), b"\0\0abc");
    }

    #[test]
    fn writes_past_the_end_leave_a_zero_gap_and_empty_writes_change_nothing() {
        let fs = fs_with_dir();
        let f = durable_file(&fs);
        f.write_at(&[b"x"], 3).unwrap();
        assert_eq!(read_file(&*f), b"\0\0\0x");
        f.write_at(&[], 100).unwrap();
        f.write_at(&[b"", b""], 100).unwrap();
        assert_eq!(f.len().unwrap(), 4);
        assert_eq!(fs.unsynced_bytes(), 1);
    }

    #[test]
    fn read_past_the_end_is_unexpected_eof() {
        let fs = fs_with_dir();
        let f = durable_file(&fs);
        f.write_at(&[b"abc"], 0).unwrap();
        let mut b = [0u8; 2];
        f.read_at(&mut b, 1).unwrap();
        assert_eq!(&b, b"bc");
        let e = f.read_at(&mut b, 2).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        let e = f.read_at(&mut b, u64::MAX).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        f.read_at(&mut [], 3).unwrap();
    }

    #[test]
    fn write_mapped_is_a_write_inside_the_current_length() {
        let fs = fs_with_dir();
        let f = durable_file(&fs);
        f.set_len(8).unwrap();
        f.write_mapped(&[b"ab", b"cd"], 4).unwrap();
        assert_eq!(read_file(&*f), b"\0\0\0\0abcd");
        let e = f.write_mapped(&[b"xyz"], 6).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(
            read_file(&*f),
            b"\0\0\0\0abcd",
            "a refused write changes nothing"
        );
        assert_eq!(
            read(&fs.crash(CrashMode::KeepAll, 0), "/d/a"),
            b"\0\0\0\0abcd"
        );
        assert_eq!(read(&fs.crash(CrashMode::DropAll, 0), "/d/a"), b"");
    }

    #[test]
    fn huge_offsets_are_refused() {
        let fs = fs_with_dir();
        let f = durable_file(&fs);
        assert!(f.write_at(&[b"x"], u64::MAX).is_err());
        assert_eq!(f.len().unwrap(), 0);
        assert_eq!(fs.unsynced_bytes(), 0);
    }

    // ---- crash modes ---------------------------------------------------------------------

    /// `/d/a` durable and empty, then `n` unsynced writes of 100 bytes of value `i + 1` at
    /// offset `i * 100`.
    fn hundred_byte_writes(n: u8) -> (Arc<SimFs>, Arc<dyn File>) {
        let fs = fs_with_dir();
        let f = durable_file(&fs);
        for i in 0..n {
            f.write_at(&[&[i + 1; 100]], u64::from(i) * 100).unwrap();
        }
        (fs, f)
    }

    /// The image of the first `k` of `hundred_byte_writes`.
    fn prefix_image(k: usize) -> Vec<u8> {
        (0..k * 100).map(|j| (j / 100) as u8 + 1).collect()
    }

    #[test]
    fn prefix_keeps_a_uniform_prefix_of_the_writes() {
        let (fs, _f) = hundred_byte_writes(4);
        let mut seen = [0u32; 5];
        for seed in 0..400 {
            let img = read(&fs.crash(CrashMode::Prefix, seed), "/d/a");
            let k = img.len() / 100;
            assert_eq!(img, prefix_image(k), "seed {seed}");
            seen[k] += 1;
            let again = read(&fs.crash(CrashMode::Prefix, seed), "/d/a");
            assert_eq!(img, again, "seed {seed}: not deterministic");
        }
        // Every prefix length 0..=4 shows up, about equally often (expected 80 each).
        assert!(seen.iter().all(|&c| (40..=120).contains(&c)), "{seen:?}");
    }

    #[test]
    fn prefix_applies_set_len_in_order() {
        let fs = fs_with_dir();
        let f = durable_file(&fs);
        f.write_at(&[b"abcd"], 0).unwrap();
        f.set_len(2).unwrap();
        f.write_at(&[b"Z"], 3).unwrap();
        let allowed: [&[u8]; 4] = [b"", b"abcd", b"ab", b"ab\0Z"];
        let mut seen = BTreeSet::new();
        for seed in 0..200 {
            let img = read(&fs.crash(CrashMode::Prefix, seed), "/d/a");
            assert!(allowed.contains(&&img[..]), "seed {seed}: {img:?}");
            seen.insert(img);
        }
        assert_eq!(seen.len(), 4);
    }

    #[test]
    fn each_file_gets_its_own_prefix() {
        let fs = fs_with_dir();
        let a = fs.create(&p("/d/a")).unwrap();
        let b = fs.create(&p("/d/b")).unwrap();
        fs.sync_dir(&p("/d")).unwrap();
        for i in 0..4u8 {
            a.write_at(&[&[i + 1; 100]], u64::from(i) * 100).unwrap();
            b.write_at(&[&[i + 1; 100]], u64::from(i) * 100).unwrap();
        }
        let mut differ = false;
        for seed in 0..50 {
            let c = fs.crash(CrashMode::Prefix, seed);
            let (x, y) = (read(&c, "/d/a"), read(&c, "/d/b"));
            assert_eq!(x, prefix_image(x.len() / 100));
            assert_eq!(y, prefix_image(y.len() / 100));
            differ |= x.len() != y.len();
        }
        assert!(differ, "the two files always kept the same prefix");
    }

    #[test]
    fn sectors_keeps_aligned_pieces_independently() {
        let fs = fs_with_dir();
        let f = durable_file(&fs);
        f.set_len(4096).unwrap();
        f.sync_data().unwrap();
        // One unaligned write over 300..3800: pieces 300..512, 512..1024, ..., 3584..3800.
        f.write_at(&[&[7u8; 3500]], 300).unwrap();
        let (mut kept, mut dropped, mut mixed) = (0, 0, 0);
        for seed in 0..64 {
            let img = read(&fs.crash(CrashMode::Sectors, seed), "/d/a");
            assert_eq!(img.len(), 4096);
            assert!(img[..300].iter().all(|&b| b == 0));
            assert!(img[3800..].iter().all(|&b| b == 0));
            let mut states = BTreeSet::new();
            for (s, chunk) in img.chunks(512).enumerate() {
                let lo = if s == 0 { 300 } else { 0 };
                let hi = if s == 7 { 3800 - 3584 } else { 512 };
                let piece = &chunk[lo..hi];
                let all7 = piece.iter().all(|&b| b == 7);
                assert!(
                    all7 || piece.iter().all(|&b| b == 0),
                    "seed {seed}: sector {s}"
                );
                states.insert(all7);
                if all7 {
                    kept += 1;
                } else {
                    dropped += 1;
                }
            }
            if states.len() == 2 {
                mixed += 1;
            }
        }
        assert!(
            kept > 150 && dropped > 150,
            "kept {kept}, dropped {dropped}"
        );
        assert!(mixed > 50, "a write was rarely split: {mixed}");
    }

    #[test]
    fn sectors_applies_kept_pieces_in_issue_order() {
        let fs = fs_with_dir();
        let f = durable_file(&fs);
        f.write_at(&[&[1u8; 512]], 0).unwrap();
        f.write_at(&[&[2u8; 512]], 0).unwrap();
        let mut seen = BTreeSet::new();
        for seed in 0..100 {
            let img = read(&fs.crash(CrashMode::Sectors, seed), "/d/a");
            // Both kept: the later write wins.
            seen.insert(img.first().copied());
            assert!(img.is_empty() || img.iter().all(|&b| b == img[0]));
        }
        let want: BTreeSet<_> = [None, Some(1), Some(2)].into_iter().collect();
        assert_eq!(seen, want);
    }

    #[test]
    fn sectors_keeps_or_drops_set_len_as_one_piece() {
        let fs = fs_with_dir();
        let f = durable_file(&fs);
        f.set_len(1000).unwrap();
        let mut lens = BTreeSet::new();
        for seed in 0..50 {
            lens.insert(read(&fs.crash(CrashMode::Sectors, seed), "/d/a").len());
        }
        assert_eq!(lens, [0, 1000].into_iter().collect());
    }

    #[test]
    fn tear_keeps_a_prefix_then_part_of_one_write_and_garbage_in_its_sector() {
        let (fs, _f) = hundred_byte_writes(10);
        let full = prefix_image(10);
        let (mut torn_mid, mut garbage) = (0, 0);
        for seed in 0..500 {
            let img = read(&fs.crash(CrashMode::Tear, seed), "/d/a");
            assert!(img.len() <= full.len(), "seed {seed}");
            // The first byte that differs from the full image, or none.
            let Some(diff) = (0..img.len()).find(|&j| img[j] != full[j]) else {
                // A clean prefix (possibly with an invisible tear).
                continue;
            };
            let k = diff / 100; // the torn write
            let write_end = (k + 1) * 100;
            let limit = (sector_end(diff as u64) as usize).min(write_end);
            // Nothing past the torn write's sector or range, and no later write.
            assert!(img.len() <= limit, "seed {seed}: {} > {limit}", img.len());
            garbage += 1;
            if diff % 100 != 0 {
                torn_mid += 1;
            }
        }
        assert!(garbage > 100, "too few torn writes: {garbage}");
        assert!(torn_mid > 50, "too few writes torn mid-way: {torn_mid}");
    }

    #[test]
    fn tear_garbage_stays_inside_the_write_and_its_sector() {
        let fs = fs_with_dir();
        let f = durable_file(&fs);
        f.write_at(&[&[9u8; 4096]], 0).unwrap();
        f.sync_data().unwrap();
        f.write_at(&[&[1u8; 2000]], 100).unwrap();
        let mut lens = BTreeSet::new();
        for seed in 0..300 {
            let img = read(&fs.crash(CrashMode::Tear, seed), "/d/a");
            assert_eq!(img.len(), 4096);
            assert!(img[..100].iter().all(|&b| b == 9));
            assert!(img[2100..].iter().all(|&b| b == 9), "seed {seed}");
            let Some(diff) = (100..2100).find(|&j| img[j] != 1) else {
                continue;
            };
            // Before the tear: the new bytes; after the tear's sector: the old ones.
            let end = sector_end(diff as u64) as usize;
            assert!(
                img[end.min(2100)..2100].iter().all(|&b| b == 9),
                "seed {seed}"
            );
            lens.insert(diff);
        }
        assert!(
            lens.len() > 50,
            "tear points are not spread: {}",
            lens.len()
        );
    }

    #[test]
    fn tear_of_set_len_keeps_just_the_prefix() {
        let fs = fs_with_dir();
        let f = durable_file(&fs);
        f.write_at(&[b"abcd"], 0).unwrap();
        f.sync_data().unwrap();
        f.set_len(2).unwrap();
        for seed in 0..30 {
            let img = read(&fs.crash(CrashMode::Tear, seed), "/d/a");
            assert!(img == b"abcd" || img == b"ab", "seed {seed}: {img:?}");
        }
    }

    #[test]
    fn crash_images_are_deterministic_per_seed() {
        let (fs, _f) = hundred_byte_writes(20);
        for mode in [CrashMode::Prefix, CrashMode::Sectors, CrashMode::Tear] {
            let mut distinct = BTreeSet::new();
            for seed in 0..20 {
                let a = read(&fs.crash(mode, seed), "/d/a");
                assert_eq!(a, read(&fs.crash(mode, seed), "/d/a"), "{mode:?} {seed}");
                distinct.insert(a);
            }
            assert!(distinct.len() > 5, "{mode:?}: seeds barely matter");
        }
    }

    #[test]
    fn a_crash_image_is_independent_and_fully_synced() {
        let (fs, f) = hundred_byte_writes(3);
        fs.fail_nth(FailOp::Any, 1, true);
        let c = fs.crash(CrashMode::KeepAll, 0);
        fs.clear_faults();
        // Old handles do not reach the new file system, and vice versa.
        f.write_at(&[b"old"], 0).unwrap();
        assert_eq!(read(&c, "/d/a"), prefix_image(3));
        let g = c.open(&p("/d/a")).unwrap();
        g.write_at(&[b"new"], 0).unwrap();
        assert_eq!(&read(&fs, "/d/a")[..3], b"old");
        // Counters start at zero, no fault is armed, everything is durable.
        let c = fs.crash(CrashMode::KeepAll, 0);
        assert_eq!(c.unsynced_bytes(), 0);
        assert_eq!(c.sync_count(), 0);
        assert_eq!(c.op_count(FailOp::Any), 0);
        assert_eq!(
            read(&c.crash(CrashMode::DropAll, 0), "/d/a"),
            read(&c, "/d/a")
        );
        // Directories survive, even empty ones.
        fs.create_dir_all(&p("/e/f")).unwrap();
        let c = fs.crash(CrashMode::DropAll, 0);
        assert_eq!(c.list(&p("/e/f")).unwrap(), Vec::<PathBuf>::new());
        assert_eq!(c.list(&p("/d")).unwrap(), vec![p("/d/a")]);
    }

    // ---- names ---------------------------------------------------------------------------

    #[test]
    fn a_created_file_needs_sync_dir_to_survive() {
        let fs = fs_with_dir();
        let f = fs.create(&p("/d/new")).unwrap();
        f.write_at(&[b"data"], 0).unwrap();
        f.sync_data().unwrap();
        assert!(exists(&fs, "/d/new"));
        assert!(!exists(&fs.crash(CrashMode::KeepAll, 0), "/d/new"));
        fs.sync_dir(&p("/d")).unwrap();
        assert_eq!(read(&fs.crash(CrashMode::DropAll, 0), "/d/new"), b"data");
    }

    #[test]
    fn an_unsynced_rename_is_undone_and_a_synced_one_keeps_the_content() {
        let fs = fs_with_dir();
        let f = durable_file(&fs);
        f.write_at(&[b"content"], 0).unwrap();
        f.sync_data().unwrap();
        fs.rename(&p("/d/a"), &p("/d/b")).unwrap();
        assert!(!exists(&fs, "/d/a"));
        assert_eq!(read(&fs, "/d/b"), b"content");
        let c = fs.crash(CrashMode::KeepAll, 0);
        assert_eq!(read(&c, "/d/a"), b"content", "an unsynced rename is undone");
        assert!(!exists(&c, "/d/b"));
        fs.sync_dir(&p("/d")).unwrap();
        let c = fs.crash(CrashMode::DropAll, 0);
        assert!(!exists(&c, "/d/a"));
        assert_eq!(read(&c, "/d/b"), b"content");
        // The handle still writes to the renamed file.
        f.write_at(&[b"C"], 0).unwrap();
        assert_eq!(read(&fs, "/d/b"), b"Content");
    }

    #[test]
    fn rename_replaces_the_target() {
        let fs = fs_with_dir();
        let a = fs.create(&p("/d/a")).unwrap();
        a.write_at(&[b"new"], 0).unwrap();
        a.sync_data().unwrap();
        let b = fs.create(&p("/d/b")).unwrap();
        b.write_at(&[b"old"], 0).unwrap();
        b.sync_data().unwrap();
        fs.sync_dir(&p("/d")).unwrap();
        fs.rename(&p("/d/a"), &p("/d/b")).unwrap();
        assert_eq!(fs.list(&p("/d")).unwrap(), vec![p("/d/b")]);
        assert_eq!(read(&fs, "/d/b"), b"new");
        let c = fs.crash(CrashMode::KeepAll, 0);
        assert_eq!(read(&c, "/d/a"), b"new");
        assert_eq!(read(&c, "/d/b"), b"old", "the replaced file is back");
        fs.sync_dir(&p("/d")).unwrap();
        let c = fs.crash(CrashMode::KeepAll, 0);
        assert_eq!(c.list(&p("/d")).unwrap(), vec![p("/d/b")]);
        assert_eq!(read(&c, "/d/b"), b"new");
        // Renaming onto itself changes nothing; a missing source is NotFound.
        fs.rename(&p("/d/b"), &p("/d/b")).unwrap();
        assert_eq!(read(&fs, "/d/b"), b"new");
        let e = fs.rename(&p("/d/zz"), &p("/d/b")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn a_rename_across_directories_needs_both_synced() {
        let fs = fs_with_dir();
        fs.create_dir_all(&p("/e")).unwrap();
        let f = durable_file(&fs);
        f.write_at(&[b"x"], 0).unwrap();
        f.sync_data().unwrap();
        fs.rename(&p("/d/a"), &p("/e/a")).unwrap();
        fs.sync_dir(&p("/e")).unwrap();
        // Only the target directory synced: both names survive, sharing one inode.
        let c = fs.crash(CrashMode::DropAll, 0);
        assert!(exists(&c, "/d/a") && exists(&c, "/e/a"));
        c.open(&p("/e/a")).unwrap().write_at(&[b"y"], 0).unwrap();
        assert_eq!(read(&c, "/d/a"), b"y");
        fs.sync_dir(&p("/d")).unwrap();
        let c = fs.crash(CrashMode::DropAll, 0);
        assert!(!exists(&c, "/d/a") && exists(&c, "/e/a"));
    }

    #[test]
    fn an_unsynced_remove_is_undone_with_the_durable_content() {
        let fs = fs_with_dir();
        let f = durable_file(&fs);
        f.write_at(&[b"synced"], 0).unwrap();
        f.sync_data().unwrap();
        f.write_at(&[b"S"], 0).unwrap();
        drop(f);
        fs.remove(&p("/d/a")).unwrap();
        assert!(!exists(&fs, "/d/a"));
        assert_eq!(fs.list(&p("/d")).unwrap(), Vec::<PathBuf>::new());
        let c = fs.crash(CrashMode::DropAll, 0);
        assert_eq!(read(&c, "/d/a"), b"synced", "an unsynced remove is undone");
        let c = fs.crash(CrashMode::KeepAll, 0);
        assert_eq!(read(&c, "/d/a"), b"Synced");
        fs.sync_dir(&p("/d")).unwrap();
        assert!(!exists(&fs.crash(CrashMode::KeepAll, 0), "/d/a"));
        assert_eq!(fs.unsynced_bytes(), 0, "the unreachable inode was freed");
        let e = fs.remove(&p("/d/a")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn a_removed_open_file_keeps_working_by_inode() {
        let fs = fs_with_dir();
        let f = durable_file(&fs);
        fs.remove(&p("/d/a")).unwrap();
        f.write_at(&[b"ghost"], 0).unwrap();
        assert_eq!(read_file(&*f), b"ghost");
        assert_eq!(fs.unsynced_bytes(), 5);
        // A new file of the same name is a different inode.
        let g = fs.create(&p("/d/a")).unwrap();
        assert_eq!(g.len().unwrap(), 0);
        f.sync_data().unwrap();
        assert_eq!(read_file(&*f), b"ghost");
        assert_eq!(read(&fs, "/d/a"), b"");
        // The durable name still points at the old inode, which was synced.
        assert_eq!(read(&fs.crash(CrashMode::DropAll, 0), "/d/a"), b"ghost");
        fs.sync_dir(&p("/d")).unwrap();
        assert_eq!(read(&fs.crash(CrashMode::DropAll, 0), "/d/a"), b"");
        // Dropping the last handle frees the inode.
        drop(f);
        assert_eq!(fs.state.lock().inodes.len(), 1);
    }

    #[test]
    fn create_open_and_list_errors_and_order() {
        let fs = fs_with_dir();
        let e = fs.open(&p("/d/missing")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        fs.create(&p("/d/b")).unwrap();
        let e = fs.create(&p("/d/b")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        let e = fs.create(&p("/nodir/x")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        let e = fs.list(&p("/nodir")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        let e = fs.sync_dir(&p("/nodir")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        let e = fs.rename(&p("/d/b"), &p("/nodir/b")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        fs.create(&p("/d/a")).unwrap();
        fs.create(&p("/d/c.tmp")).unwrap();
        fs.create_dir_all(&p("/d/sub/deeper")).unwrap();
        fs.create(&p("/d/sub/x")).unwrap();
        assert_eq!(
            fs.list(&p("/d")).unwrap(),
            vec![p("/d/a"), p("/d/b"), p("/d/c.tmp")],
            "regular files directly inside, sorted"
        );
        assert_eq!(fs.list(&p("/d/sub")).unwrap(), vec![p("/d/sub/x")]);
        // Paths are joined onto the directory as given.
        assert_eq!(fs.list(&p("/d/sub/")).unwrap(), vec![p("/d/sub/x")]);
        let e = fs.create(&p("/d/sub")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert!(
            fs.create_dir_all(&p("/d/a/b")).is_err(),
            "a file is in the way"
        );
    }

    #[test]
    fn relative_paths_work_too() {
        let fs = SimFs::new();
        fs.create_dir_all(&p("log")).unwrap();
        fs.create(&p("./log/a"))
            .unwrap()
            .write_at(&[b"1"], 0)
            .unwrap();
        assert_eq!(read(&fs, "log/a"), b"1");
        assert_eq!(fs.list(&p("log")).unwrap(), vec![p("log/a")]);
        fs.sync_dir(&p("./log")).unwrap();
        assert_eq!(read(&fs.crash(CrashMode::KeepAll, 0), "log/a"), b"1");
        fs.create(&p("top")).unwrap();
        assert_eq!(fs.list(&p("")).unwrap(), vec![p("top")]);
    }

    // ---- faults --------------------------------------------------------------------------

    #[test]
    fn sync_fails_once_at_the_nth_call() {
        let fs = fs_with_dir();
        let f = durable_file(&fs);
        f.sync_data().unwrap(); // before fail_nth: not counted
        fs.fail_nth(FailOp::Sync, 2, false);
        f.write_at(&[b"a"], 0).unwrap(); // other kinds do not count
        f.sync_data().unwrap();
        f.write_at(&[b"b"], 1).unwrap();
        let e = f.sync_data().unwrap_err();
        assert!(is_injected(&e), "{e:?}");
        f.write_at(&[b"c"], 1).unwrap();
        f.sync_data().unwrap();
        f.sync_data().unwrap();
        assert_eq!(read(&fs.crash(CrashMode::DropAll, 0), "/d/a"), b"ac");
    }

    #[test]
    fn sync_fails_persistently() {
        let fs = fs_with_dir();
        let f = durable_file(&fs);
        fs.fail_nth(FailOp::Sync, 1, true);
        for _ in 0..5 {
            f.write_at(&[b"x"], 0).unwrap();
            assert!(is_injected(&f.sync_data().unwrap_err()));
        }
        fs.sync_dir(&p("/d")).unwrap();
        fs.clear_faults();
        f.sync_data().unwrap();
    }

    #[test]
    fn a_failed_sync_reverts_the_live_image_to_the_durable_one() {
        let fs = fs_with_dir();
        let f = durable_file(&fs);
        f.write_at(&[b"safe"], 0).unwrap();
        f.sync_data().unwrap();
        f.write_at(&[b"lost and longer"], 0).unwrap();
        fs.fail_nth(FailOp::Sync, 1, false);
        assert!(f.sync_data().is_err());
        assert_eq!(
            read_file(&*f),
            b"safe",
            "a failed sync drops the dirty pages"
        );
        assert_eq!(fs.unsynced_bytes(), 0);
        assert_eq!(read(&fs.crash(CrashMode::KeepAll, 0), "/d/a"), b"safe");
        // Only that file is affected.
        let g = fs.create(&p("/d/g")).unwrap();
        g.write_at(&[b"g"], 0).unwrap();
        fs.fail_nth(FailOp::Sync, 1, false);
        assert!(f.sync_data().is_err());
        assert_eq!(read_file(&*g), b"g");
        assert_eq!(fs.unsynced_bytes(), 1);
    }

    #[test]
    fn write_fails_once_and_changes_nothing() {
        let fs = fs_with_dir();
        let f = durable_file(&fs);
        f.set_len(10).unwrap();
        fs.fail_nth(FailOp::Write, 3, false);
        f.write_at(&[b"a"], 0).unwrap();
        f.sync_data().unwrap(); // not a write
        f.write_mapped(&[b"b"], 1).unwrap();
        let before = fs.unsynced_bytes();
        assert!(is_injected(&f.write_at(&[b"ccc"], 2).unwrap_err()));
        assert_eq!(fs.unsynced_bytes(), before);
        assert_eq!(&read_file(&*f)[..4], b"ab\0\0");
        f.write_at(&[b"d"], 2).unwrap();
        assert_eq!(&read_file(&*f)[..4], b"abd\0");
    }

    #[test]
    fn write_fails_persistently_for_every_write_kind() {
        let fs = fs_with_dir();
        let f = durable_file(&fs);
        f.set_len(10).unwrap();
        fs.fail_nth(FailOp::Write, 1, true);
        assert!(is_injected(&f.write_at(&[b"x"], 0).unwrap_err()));
        assert!(is_injected(&f.write_mapped(&[b"x"], 0).unwrap_err()));
        assert!(is_injected(&f.set_len(3).unwrap_err()));
        assert_eq!(read_file(&*f), [0; 10]);
        f.sync_data().unwrap();
        fs.create(&p("/d/other")).unwrap();
        assert_eq!(fs.op_count(FailOp::Write), 4);
        fs.clear_faults();
        f.set_len(3).unwrap();
        assert_eq!(f.len().unwrap(), 3);
    }

    #[test]
    fn sync_dir_fails_once_and_persistently_without_making_names_durable() {
        let fs = fs_with_dir();
        fs.create(&p("/d/a")).unwrap();
        fs.fail_nth(FailOp::SyncDir, 1, false);
        assert!(is_injected(&fs.sync_dir(&p("/d")).unwrap_err()));
        assert!(!exists(&fs.crash(CrashMode::KeepAll, 0), "/d/a"));
        fs.sync_dir(&p("/d")).unwrap();
        assert!(exists(&fs.crash(CrashMode::KeepAll, 0), "/d/a"));
        fs.create(&p("/d/b")).unwrap();
        fs.fail_nth(FailOp::SyncDir, 2, true);
        fs.sync_dir(&p("/d")).unwrap();
        fs.create(&p("/d/c")).unwrap();
        for _ in 0..3 {
            assert!(is_injected(&fs.sync_dir(&p("/d")).unwrap_err()));
        }
        let c = fs.crash(CrashMode::KeepAll, 0);
        assert!(exists(&c, "/d/b") && !exists(&c, "/d/c"));
    }

    #[test]
    fn any_counts_every_call_but_list_len_and_read_at() {
        let fs = fs_with_dir();
        let f = durable_file(&fs);
        f.write_at(&[b"abc"], 0).unwrap();
        fs.fail_nth(FailOp::Any, 4, false);
        fs.list(&p("/d")).unwrap();
        f.len().unwrap();
        f.is_empty().unwrap();
        f.read_at(&mut [0; 3], 0).unwrap();
        fs.create_dir_all(&p("/e")).unwrap(); // 1
        f.sync_data().unwrap(); // 2
        fs.sync_dir(&p("/d")).unwrap(); // 3
        assert!(is_injected(&fs.open(&p("/d/a")).unwrap_err())); // 4
        fs.open(&p("/d/a")).unwrap();
        // Persistent: every kind of call fails from the n-th on.
        fs.fail_nth(FailOp::Any, 1, true);
        assert!(is_injected(&fs.create_dir_all(&p("/f")).unwrap_err()));
        assert!(is_injected(&fs.create(&p("/d/n")).unwrap_err()));
        assert!(is_injected(&fs.open(&p("/d/a")).unwrap_err()));
        assert!(is_injected(&fs.rename(&p("/d/a"), &p("/d/b")).unwrap_err()));
        assert!(is_injected(&fs.remove(&p("/d/a")).unwrap_err()));
        assert!(is_injected(&fs.sync_dir(&p("/d")).unwrap_err()));
        assert!(is_injected(&f.set_len(0).unwrap_err()));
        assert!(is_injected(&f.write_at(&[b"x"], 0).unwrap_err()));
        assert!(is_injected(&f.write_mapped(&[b"x"], 0).unwrap_err()));
        assert!(is_injected(&f.sync_data().unwrap_err()));
        // Failed calls changed nothing (the failed sync had nothing to drop).
        assert!(!fs.list(&p("/")).unwrap().contains(&p("/d/n")));
        assert_eq!(fs.list(&p("/d")).unwrap(), vec![p("/d/a")]);
        assert_eq!(read_file(&*f), b"abc");
        fs.clear_faults();
        fs.remove(&p("/d/a")).unwrap();
    }

    #[test]
    fn faults_of_different_kinds_are_armed_independently() {
        let fs = fs_with_dir();
        let f = durable_file(&fs);
        fs.fail_nth(FailOp::Sync, 1, true);
        fs.fail_nth(FailOp::Write, 2, false);
        f.write_at(&[b"a"], 0).unwrap();
        assert!(f.write_at(&[b"b"], 0).is_err());
        assert!(f.sync_data().is_err());
        // Re-arming a kind replaces its fault.
        fs.fail_nth(FailOp::Sync, 3, false);
        f.sync_data().unwrap();
        f.sync_data().unwrap();
        assert!(f.sync_data().is_err());
        f.sync_data().unwrap();
        fs.fail_nth(FailOp::SyncDir, 1, true);
        fs.clear_faults();
        fs.sync_dir(&p("/d")).unwrap();
    }

    #[test]
    #[should_panic(expected = "n counts from 1")]
    fn fail_nth_zero_panics() {
        SimFs::new().fail_nth(FailOp::Sync, 0, false);
    }

    #[test]
    fn counters_count_successful_and_failed_calls() {
        let fs = fs_with_dir(); // create_dir_all: Any
        let f = fs.create(&p("/d/a")).unwrap(); // Any
        f.write_at(&[b"x"], 0).unwrap(); // Write
        f.write_mapped(&[b"y"], 0).unwrap(); // Write
        f.set_len(2).unwrap(); // Write
        f.sync_data().unwrap(); // Sync
        fs.fail_nth(FailOp::Sync, 1, false);
        assert!(f.sync_data().is_err()); // Sync
        fs.sync_dir(&p("/d")).unwrap(); // SyncDir
        fs.list(&p("/d")).unwrap();
        f.len().unwrap();
        f.read_at(&mut [0; 1], 0).unwrap();
        assert_eq!(fs.sync_count(), 2);
        assert_eq!(fs.op_count(FailOp::Sync), 2);
        assert_eq!(fs.op_count(FailOp::Write), 3);
        assert_eq!(fs.op_count(FailOp::SyncDir), 1);
        assert_eq!(fs.op_count(FailOp::Any), 8);
    }

    // ---- misc ----------------------------------------------------------------------------

    #[test]
    fn concurrent_writers_to_disjoint_ranges() {
        let fs = fs_with_dir();
        let f = durable_file(&fs);
        f.set_len(8 * 1000).unwrap();
        std::thread::scope(|s| {
            for t in 0..8u8 {
                let f = f.clone();
                s.spawn(move || {
                    for i in 0..100u64 {
                        f.write_at(&[&[t; 10]], u64::from(t) * 1000 + i * 10)
                            .unwrap();
                        if i % 10 == 0 {
                            f.sync_data().unwrap();
                        }
                    }
                });
            }
        });
        f.sync_data().unwrap();
        let img = read(&fs.crash(CrashMode::DropAll, 0), "/d/a");
        for (j, b) in img.iter().enumerate() {
            assert_eq!(*b as usize, j / 1000);
        }
    }

    #[test]
    fn debug_is_short() {
        let fs = fs_with_dir();
        let f = durable_file(&fs);
        f.write_at(&[&[0u8; 10_000]], 0).unwrap();
        let s = format!("{fs:?} {f:?}");
        assert!(s.len() < 200, "{s}");
        assert!(s.contains("unsynced_bytes: 10000"), "{s}");
        let _held = fs.state.lock();
        assert!(format!("{fs:?}").starts_with("SimFs"));
    }

    #[test]
    fn usable_as_a_dyn_file_system() {
        let fs: Arc<dyn FileSystem> = fs_with_dir();
        let f = fs.create(&p("/d/a")).unwrap();
        f.write_at(&[b"ok"], 0).unwrap();
        assert_eq!(read_file(&*fs.open(&p("/d/a")).unwrap()), b"ok");
    }
}
