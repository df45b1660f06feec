//! [`Unlinker`]: removes obsolete files (tables and blob files whose last handle went,
//! version invariant 3) on a thread of its own, not in the thread that let go of the last
//! handle.
//!
//! That thread is often a reader or a committer: the super-version it dropped was the last
//! to name the file. A removal can take long there: ext4 frees the file's blocks at the
//! unlink, and with online discard it waits for the device to discard them — 30 ms for a
//! 64 MiB table while a flush was syncing, every writer of `queue_indexed` waiting behind
//! that insert (2026-11-28). RocksDB moves the same work off its foreground threads
//! (`avoid_unnecessary_blocking_io`).
//!
//! A removal that never happens leaves an orphan, which the next open removes (rule O2), so
//! a crash with removals queued loses nothing. [`Unlinker::close`] waits for the queued ones:
//! the database's shutdown calls it before letting go of the directory lock, so a reopen
//! never races a removal the background thread makes. After it, removals happen in the
//! caller's thread: an iterator that outlived its database removes the files only it held,
//! possibly under a reopened handle, as before this thread existed (harmless: those files
//! are no version's, and open's removal of orphans takes a missing file as removed).
//!
//! Space comes back a little later than when the last handle's thread removed the file: a
//! flush that finds the disk full right after a compaction waits for its retry.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::Mutex;
use silt_vfs::FileSystem;

/// Removes files on a background thread, started at the first removal.
pub(crate) struct Unlinker {
    fs: Arc<dyn FileSystem>,
    state: Mutex<State>,
    /// Removals queued and not yet made.
    pending: Arc<AtomicUsize>,
}

#[derive(Default)]
struct State {
    worker: Option<(mpsc::Sender<PathBuf>, JoinHandle<()>)>,
    closed: bool,
}

impl std::fmt::Debug for Unlinker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Unlinker").finish_non_exhaustive()
    }
}

impl Unlinker {
    pub(crate) fn new(fs: Arc<dyn FileSystem>) -> Unlinker {
        Unlinker {
            fs,
            state: Mutex::new(State::default()),
            pending: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Removes `path` soon, on the background thread. A failure leaves an orphan file,
    /// which the next open removes.
    pub(crate) fn remove(&self, path: PathBuf) {
        if let Err(path) = self.queue(path) {
            // No thread (it could not be started, or the database has shut down): here.
            let _ = self.fs.remove(&path);
        }
    }

    /// Hands `path` to the thread, started if need be; gives it back if there is none.
    fn queue(&self, path: PathBuf) -> Result<(), PathBuf> {
        let mut st = self.state.lock();
        if !st.closed && st.worker.is_none() {
            st.worker = self.spawn();
        }
        let Some((tx, _)) = &st.worker else {
            return Err(path);
        };
        self.pending.fetch_add(1, SeqCst);
        tx.send(path).map_err(|mpsc::SendError(path)| {
            self.pending.fetch_sub(1, SeqCst);
            path
        })
    }

    fn spawn(&self) -> Option<(mpsc::Sender<PathBuf>, JoinHandle<()>)> {
        let (tx, rx) = mpsc::channel::<PathBuf>();
        let fs = self.fs.clone();
        let pending = self.pending.clone();
        let thread = std::thread::Builder::new()
            .name("silt-unlink".into())
            .spawn(move || {
                // Counts a removal as made even if `remove` panics (a file system's
                // bug): `wait_for_compactions` must not wait for it for ever.
                struct Made<'a>(&'a AtomicUsize);
                impl Drop for Made<'_> {
                    fn drop(&mut self) {
                        self.0.fetch_sub(1, SeqCst);
                    }
                }
                // Ends when the sender is dropped and the queue is empty.
                for path in rx {
                    let _made = Made(&pending);
                    let _ = fs.remove(&path);
                }
            })
            .ok()?;
        Some((tx, thread))
    }

    /// Whether every removal queued so far was made (`Db::wait_for_compactions`: settled
    /// means the replaced files are gone).
    pub(crate) fn idle(&self) -> bool {
        self.pending.load(SeqCst) == 0
    }

    /// Waits until every queued removal was made; later removals happen in the caller's
    /// thread.
    pub(crate) fn close(&self) {
        let worker = {
            let mut st = self.state.lock();
            st.closed = true;
            st.worker.take()
        };
        if let Some((tx, thread)) = worker {
            drop(tx);
            let _ = thread.join();
        }
    }
}

impl Drop for Unlinker {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;
    use std::path::Path;
    use std::time::Duration;

    /// `OsFs` whose removals wait for a go-ahead, and say which thread made them.
    #[derive(Debug)]
    struct Gated {
        os: Arc<silt_vfs::OsFs>,
        go: Mutex<Option<mpsc::Receiver<()>>>,
        removed_by: Mutex<Vec<Option<String>>>,
    }

    impl FileSystem for Gated {
        fn create_dir_all(&self, d: &Path) -> io::Result<()> {
            self.os.create_dir_all(d)
        }
        fn list(&self, d: &Path) -> io::Result<Vec<PathBuf>> {
            self.os.list(d)
        }
        fn create(&self, p: &Path) -> io::Result<Arc<dyn silt_vfs::File>> {
            self.os.create(p)
        }
        fn open(&self, p: &Path) -> io::Result<Arc<dyn silt_vfs::File>> {
            self.os.open(p)
        }
        fn rename(&self, a: &Path, b: &Path) -> io::Result<()> {
            self.os.rename(a, b)
        }
        fn remove(&self, p: &Path) -> io::Result<()> {
            if let Some(go) = self.go.lock().as_ref() {
                let _ = go.recv_timeout(Duration::from_secs(10));
            }
            self.removed_by
                .lock()
                .push(std::thread::current().name().map(str::to_owned));
            self.os.remove(p)
        }
        fn sync_dir(&self, d: &Path) -> io::Result<()> {
            self.os.sync_dir(d)
        }
        fn lock(&self, p: &Path) -> io::Result<Box<dyn silt_vfs::FileLock>> {
            self.os.lock(p)
        }
    }

    #[test]
    fn a_removal_is_made_off_the_callers_thread_and_close_waits_for_it() {
        let dir = tempfile::tempdir().unwrap();
        let (go_tx, go_rx) = mpsc::channel();
        let fs = Arc::new(Gated {
            os: silt_vfs::OsFs::new(),
            go: Mutex::new(Some(go_rx)),
            removed_by: Mutex::new(Vec::new()),
        });
        let u = Unlinker::new(fs.clone());
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::write(&a, b"a").unwrap();
        std::fs::write(&b, b"b").unwrap();
        // The removal waits for the go-ahead: made here, `remove` would not return first.
        u.remove(a.clone());
        assert!(a.exists(), "removed in the caller's thread");
        assert!(!u.idle());
        go_tx.send(()).unwrap();
        u.close();
        assert!(u.idle());
        assert!(
            !a.exists(),
            "close returned before the queued removal was made"
        );
        assert_eq!(*fs.removed_by.lock(), vec![Some("silt-unlink".to_owned())]);
        // After close: in the caller's thread, at once.
        *fs.go.lock() = None;
        u.remove(b.clone());
        assert!(!b.exists());
        assert_eq!(fs.removed_by.lock().len(), 2);
        assert_ne!(fs.removed_by.lock()[1].as_deref(), Some("silt-unlink"));
    }
}
