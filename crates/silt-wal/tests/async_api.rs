//! The `async` API: many tasks under every strategy and sync mode; acknowledged means
//! readable after reopen; a durable append is durable when its future completes.
#![cfg(feature = "tokio")]

mod common;

use std::sync::Arc;

use common::*;
use silt_wal::{AppendOptions, Options, SyncMode, Wal};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_tasks_every_strategy_and_mode() {
    for strategy in strategies() {
        for sync in modes() {
            let dir = tempfile::tempdir().unwrap();
            let opts = small(Options::default().sync(sync).strategy(strategy));
            let wal = Arc::new(Wal::open(dir.path(), opts.clone()).unwrap());
            let tasks: Vec<_> = (0..1000u64)
                .map(|t| {
                    let wal = wal.clone();
                    tokio::spawn(async move {
                        let lsn = wal.append_async(&payload(t, 0)).await.unwrap();
                        if sync == SyncMode::Full {
                            assert!(wal.durable_lsn() > lsn);
                        }
                        (lsn, t)
                    })
                })
                .collect();
            let mut acked = Vec::new();
            for t in tasks {
                acked.push(t.await.unwrap());
            }
            acked.sort();
            drop(Arc::try_unwrap(wal).unwrap());
            let wal = Wal::open(dir.path(), opts).unwrap();
            let got = read_all(&wal);
            assert_eq!(got.len(), 1000, "{strategy:?} {sync:?}");
            for (r, (lsn, t)) in got.iter().zip(&acked) {
                assert_eq!(r.lsn, *lsn);
                assert_eq!(r.payload, payload(*t, 0));
            }
        }
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_single_threaded_runtime_is_never_blocked_by_fdatasync() {
    // On a current-thread runtime a blocking fdatasync on the runtime thread would still
    // work, but a design that needed another task to make progress would hang: every
    // durable append here completes while all tasks share one thread.
    let dir = tempfile::tempdir().unwrap();
    let wal = Arc::new(Wal::open(dir.path(), Options::default()).unwrap());
    let mut set = tokio::task::JoinSet::new();
    for t in 0..200u64 {
        let wal = wal.clone();
        set.spawn(async move { wal.append_async(&payload(t, 0)).await.unwrap() });
    }
    let mut n = 0;
    while let Some(lsn) = set.join_next().await {
        assert!(wal.durable_lsn() > lsn.unwrap());
        n += 1;
    }
    assert_eq!(n, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tickets_can_be_awaited_later() {
    let dir = tempfile::tempdir().unwrap();
    let wal = Wal::open(dir.path(), Options::default().sync(SyncMode::None)).unwrap();
    let mut lsns = Vec::new();
    for i in 0..100 {
        lsns.push(
            wal.append_async_with(&payload(9, i), AppendOptions { sync: Some(false) })
                .await
                .unwrap(),
        );
    }
    let last = *lsns.last().unwrap();
    wal.wait_durable_async(last).await.unwrap();
    assert!(wal.durable_lsn() > last);
    let l = wal
        .append_async_with(b"sync me", AppendOptions { sync: Some(true) })
        .await
        .unwrap();
    assert!(wal.durable_lsn() > l);
}
