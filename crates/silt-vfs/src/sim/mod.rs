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

mod file;

use file::{SimFile, SimLock};

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
    /// Calls of `write_mapped` (counted as `FailOp::Write` too).
    mapped_writes: u64,
    /// Unsynced operations discarded by failed `sync_data` calls, by the file's name then
    /// (every live name; a file with none is not counted: nothing can read it again).
    dropped_by_failed_syncs: BTreeMap<PathBuf, u64>,
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

    /// `write_mapped` calls made so far (they count as [`FailOp::Write`] too): how a
    /// caller's bytes would reach a real file, through a mapping or a system call.
    pub fn mapped_write_count(&self) -> u64 {
        self.state.lock().mapped_writes
    }

    /// Unsynced operations (writes and `set_len`s) that failed `sync_data` calls discarded,
    /// by the name the file had then: what a checker may excuse as lost to a failed
    /// `fdatasync` even where the engine reported an earlier error instead.
    pub fn dropped_by_failed_syncs(&self) -> BTreeMap<PathBuf, u64> {
        self.state.lock().dropped_by_failed_syncs.clone()
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

#[cfg(test)]
mod tests;
