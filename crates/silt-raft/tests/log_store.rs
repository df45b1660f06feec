//! The Raft log on silt-wal across reopens: entries, vote, committed id, truncation and
//! purge survive exactly; reads past the in-memory cache come back from the log; bad
//! appends are refused before they reach the disk.

use openraft::storage::{RaftLogStorage, RaftLogStorageExt};
use openraft::{CommittedLeaderId, EntryPayload, LogId, RaftLogReader, Vote};
use silt_raft::{Entry, LogStore, LogStoreOptions, Request};

fn id(term: u64, index: u64) -> LogId<u64> {
    LogId::new(CommittedLeaderId::new(term, 1), index)
}

fn put(term: u64, index: u64, bytes: usize) -> Entry {
    Entry {
        log_id: id(term, index),
        payload: EntryPayload::Normal(Request::Put {
            key: format!("key-{index}"),
            value: format!("{term}:{index}:").repeat(bytes / 8 + 1),
        }),
    }
}

fn opts() -> LogStoreOptions {
    LogStoreOptions {
        segment_bytes: 64 << 10,
        cache_bytes: 8 << 10,
        read_limit_bytes: 16 << 10,
    }
}

/// The oldest segment file's name (segments are named by zero-padded id).
fn oldest_segment(dir: &std::path::Path) -> String {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "wal"))
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .min()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopen_restores_entries_vote_committed_truncation_and_purge() {
    let dir = tempfile::tempdir().unwrap();
    let mut expected: Vec<Entry> = Vec::new();
    {
        let mut log = LogStore::open(dir.path(), opts()).unwrap();
        // The vote goes first, so the purge below drops the segment its record is in.
        log.save_vote(&Vote::new(1, 1)).await.unwrap();
        for i in 1..=200 {
            let e = put(1, i, 1000);
            log.blocking_append([e.clone()]).await.unwrap();
            expected.push(e);
        }
        // The callback fired: everything appended is durable.
        let st = log.stats();
        assert!(st.wal.durable_lsn >= st.wal.filled_lsn, "{st:?}");
        // A new leader replaces the suffix from 150 on.
        log.truncate(id(1, 150)).await.unwrap();
        expected.truncate(149);
        log.save_vote(&Vote::new_committed(2, 1)).await.unwrap();
        let batch: Vec<Entry> = (150..=180).map(|i| put(2, i, 500)).collect();
        log.blocking_append(batch.clone()).await.unwrap();
        expected.extend(batch);
        log.save_committed(Some(id(2, 170))).await.unwrap();
        let before = oldest_segment(dir.path());
        log.purge(id(1, 100)).await.unwrap();
        expected.retain(|e| e.log_id.index > 100);
        assert!(
            oldest_segment(dir.path()) > before,
            "the purge dropped no segment"
        );
        assert_eq!(log.try_get_log_entries(0..1000).await.unwrap(), expected);
    }
    let mut log = LogStore::open(dir.path(), opts()).unwrap();
    let state = log.get_log_state().await.unwrap();
    assert_eq!(state.last_purged_log_id, Some(id(1, 100)));
    assert_eq!(state.last_log_id, Some(id(2, 180)));
    assert_eq!(
        log.read_vote().await.unwrap(),
        Some(Vote::new_committed(2, 1))
    );
    assert_eq!(log.read_committed().await.unwrap(), Some(id(2, 170)));
    assert_eq!(log.try_get_log_entries(0..1000).await.unwrap(), expected);
    // And the log goes on from there.
    log.blocking_append([put(2, 181, 10)]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_past_the_cache_come_back_from_the_log_in_bounded_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = LogStore::open(dir.path(), opts()).unwrap();
    let all: Vec<Entry> = (1..=300).map(|i| put(1, i, 300)).collect();
    for chunk in all.chunks(7) {
        log.blocking_append(chunk.to_vec()).await.unwrap();
    }
    assert!(log.stats().cached_bytes <= 8 << 10);
    let mut reader = log.get_log_reader().await;
    let mut got = Vec::new();
    let mut next = 1;
    while next <= 300 {
        let part = reader.limited_get_log_entries(next, 301).await.unwrap();
        assert!(!part.is_empty());
        assert!(part.len() < 300, "the byte limit did not bound a read");
        next = part.last().unwrap().log_id.index + 1;
        got.extend(part);
    }
    assert_eq!(got, all);
    // A range from the middle, read again from scratch.
    assert_eq!(
        reader.try_get_log_entries(120..=125).await.unwrap(),
        all[119..125].to_vec()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hole_is_refused_and_nothing_reaches_the_disk() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut log = LogStore::open(dir.path(), opts()).unwrap();
        log.blocking_append([put(1, 1, 10), put(1, 2, 10)])
            .await
            .unwrap();
        assert!(log.blocking_append([put(1, 4, 10)]).await.is_err());
        assert!(log.blocking_append([put(1, 2, 10)]).await.is_err());
        // Below a purge: dropped, not an error (the snapshot has it).
        log.purge(id(1, 2)).await.unwrap();
        log.blocking_append([put(1, 1, 10)]).await.unwrap();
        log.blocking_append([put(1, 3, 10)]).await.unwrap();
    }
    let mut log = LogStore::open(dir.path(), opts()).unwrap();
    let got = log.try_get_log_entries(0..10).await.unwrap();
    assert_eq!(got, vec![put(1, 3, 10)]);
}
