//! The `async` API (feature `tokio`): appends whose durability is awaited, never run on a
//! runtime worker thread.
//!
//! An async append reserves, encodes and copies its record on the calling task (a `memcpy`,
//! no system call), then awaits a future that completes when the durable (or filled)
//! watermark passes it. `fdatasync` runs on a dedicated "sync service" thread that the
//! futures wake, or on whichever blocking committer is syncing anyway: one sync covers every
//! task that arrived before it started. Strategies other than `Pipelined` have no native
//! async path; they run their blocking append under `tokio::task::spawn_blocking`.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::task::{Context, Poll, Waker};

use parking_lot::{Condvar, Mutex};

use crate::commit::Inner;
use crate::error::{Error, Result};
use crate::options::{AppendOptions, Strategy};
use crate::{Lsn, Wal};

#[derive(Default)]
pub(crate) struct Waiters {
    registered: AtomicUsize,
    lists: Mutex<Lists>,
    service: Mutex<Service>,
    service_cv: Condvar,
}

#[derive(Default)]
struct Lists {
    filled: Vec<(u64, Waker)>,
    durable: Vec<(u64, Waker)>,
}

#[derive(Default)]
struct Service {
    requested: u64,
    shutdown: bool,
}

impl Waiters {
    fn register(&self, durable: bool, target: u64, waker: &Waker) {
        let mut l = self.lists.lock();
        let list = if durable {
            &mut l.durable
        } else {
            &mut l.filled
        };
        list.push((target, waker.clone()));
        self.registered.fetch_add(1, SeqCst);
    }

    fn wake(&self, durable: bool, value: u64) {
        if self.registered.load(SeqCst) == 0 {
            return;
        }
        let mut ready = Vec::new();
        {
            let mut l = self.lists.lock();
            let list = if durable {
                &mut l.durable
            } else {
                &mut l.filled
            };
            list.retain(|(t, w)| {
                if *t <= value {
                    ready.push(w.clone());
                    false
                } else {
                    true
                }
            });
            self.registered.fetch_sub(ready.len(), SeqCst);
        }
        for w in ready {
            w.wake();
        }
    }

    pub(crate) fn wake_filled(&self, value: u64) {
        self.wake(false, value);
    }

    pub(crate) fn wake_durable(&self, value: u64) {
        self.wake(true, value);
    }

    pub(crate) fn wake_all(&self) {
        self.wake(false, u64::MAX);
        self.wake(true, u64::MAX);
    }

    fn request_sync(&self, need: u64) {
        let mut s = self.service.lock();
        if s.requested < need {
            s.requested = need;
            self.service_cv.notify_one();
        }
    }

    pub(crate) fn shutdown(&self) {
        self.service.lock().shutdown = true;
        self.service_cv.notify_all();
        self.wake_all();
    }
}

/// Starts the sync service thread (see [`run_sync_service`]) for a log being opened.
pub(crate) fn start_sync_service(
    inner: &std::sync::Arc<Inner>,
    threads: &mut Vec<std::thread::JoinHandle<()>>,
) -> Result<()> {
    let i = inner.clone();
    threads.push(crate::wal::spawn("silt-wal-async-sync", move || {
        run_sync_service(&i)
    })?);
    Ok(())
}

/// The sync service thread: syncs whenever a future asked for more than is durable.
fn run_sync_service(inner: &Inner) {
    let mut s = inner.waiters.service.lock();
    loop {
        while !s.shutdown && (s.requested <= inner.stream.durable() || inner.is_poisoned()) {
            inner.waiters.service_cv.wait(&mut s);
        }
        if s.shutdown {
            return;
        }
        let need = s.requested;
        drop(s);
        // Errors reach the futures through the poisoned flag (poison wakes them all).
        let _ = inner.sync_to(need);
        s = inner.waiters.service.lock();
    }
}

/// Completes when the filled (or durable) watermark reaches `target`.
struct Watermark<'a> {
    inner: &'a Inner,
    target: u64,
    durable: bool,
}

impl Watermark<'_> {
    fn reached(&self) -> bool {
        if self.durable {
            self.inner.stream.durable() >= self.target
        } else {
            self.inner.ring.filled() >= self.target
        }
    }
}

impl Future for Watermark<'_> {
    type Output = Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        if self.reached() {
            return Poll::Ready(Ok(()));
        }
        if self.inner.is_poisoned() {
            return Poll::Ready(Err(Error::Poisoned));
        }
        self.inner
            .waiters
            .register(self.durable, self.target, cx.waker());
        // Re-check after registering: a wake between the first check and the registration
        // would otherwise be lost.
        if self.reached() {
            return Poll::Ready(Ok(()));
        }
        if self.inner.is_poisoned() {
            return Poll::Ready(Err(Error::Poisoned));
        }
        if self.durable {
            self.inner.waiters.request_sync(self.target);
        }
        Poll::Pending
    }
}

impl Wal {
    /// Appends one record; the future completes when it is acknowledged per the log's
    /// [`crate::SyncMode`]. The record is copied into the log before the first `.await`
    /// point; `fdatasync` never runs on the runtime's threads.
    ///
    /// # Errors
    ///
    /// As [`Wal::append`].
    pub async fn append_async(&self, payload: &[u8]) -> Result<Lsn> {
        self.append_async_with(payload, AppendOptions::default())
            .await
    }

    /// [`Wal::append_async`] with per-commit options.
    ///
    /// # Errors
    ///
    /// As [`Wal::append`].
    pub async fn append_async_with(&self, payload: &[u8], opts: AppendOptions) -> Result<Lsn> {
        let inner = &self.inner;
        if inner.strategy != Strategy::Pipelined {
            let inner = inner.clone();
            let payload = payload.to_vec();
            return tokio::task::spawn_blocking(move || inner.append(&payload, opts))
                .await
                .map_err(|e| Error::io("spawn_blocking", None, std::io::Error::other(e)))?;
        }
        inner.check_payload(payload)?;
        inner.check_open()?;
        let want_sync = inner.needs_sync(opts);
        let (lsn, end) = inner.write_record(payload, inner.via(want_sync, payload.len()))?;
        Watermark {
            inner,
            target: end,
            durable: want_sync,
        }
        .await?;
        Ok(lsn)
    }

    /// Completes when the record at `lsn` (and everything before it) is durable.
    ///
    /// # Errors
    ///
    /// `Poisoned` if a sync failed.
    pub async fn wait_durable_async(&self, lsn: Lsn) -> Result<()> {
        Watermark {
            inner: &self.inner,
            target: lsn + 1,
            durable: true,
        }
        .await
    }
}
