//! The state machine on silt: applies survive a reopen with their last-applied id and
//! membership; a snapshot built on one node installs on another, atomically, and survives
//! a reopen; a damaged snapshot is refused and changes nothing.

use std::collections::{BTreeMap, BTreeSet};

use openraft::storage::RaftStateMachine;
use openraft::{CommittedLeaderId, EntryPayload, LogId, Membership, RaftSnapshotBuilder};
use silt_raft::{Entry, Op, Request, StateMachine, StoreOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn id(index: u64) -> LogId<u64> {
    LogId::new(CommittedLeaderId::new(1, 1), index)
}

fn normal(index: u64, req: Request) -> Entry {
    Entry {
        log_id: id(index),
        payload: EntryPayload::Normal(req),
    }
}

fn membership(index: u64) -> Entry {
    let mut nodes = BTreeMap::new();
    nodes.insert(1, openraft::BasicNode::new("127.0.0.1:1"));
    Entry {
        log_id: id(index),
        payload: EntryPayload::Membership(Membership::new(vec![BTreeSet::from([1])], nodes)),
    }
}

fn open(dir: &std::path::Path) -> StateMachine {
    StateMachine::open(dir, &StoreOptions::small().sm).unwrap()
}

async fn load(sm: &mut StateMachine, n: u64) {
    let mut entries = vec![membership(1)];
    for i in 2..n {
        entries.push(normal(
            i,
            Request::Put {
                key: format!("k{:05}", i % 500),
                value: format!("v{i}"),
            },
        ));
    }
    entries.push(normal(
        n,
        Request::Batch {
            ops: vec![
                Op::Delete {
                    key: "k00003".into(),
                },
                Op::Put {
                    key: "batch".into(),
                    value: "b".into(),
                },
            ],
        },
    ));
    let replies = sm.apply(entries).await.unwrap();
    assert_eq!(replies.len() as u64, n);
    assert_eq!(replies.last().unwrap().writes, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn applies_survive_a_reopen_with_last_applied_and_membership() {
    let dir = tempfile::tempdir().unwrap();
    let digest = {
        let mut sm = open(dir.path());
        load(&mut sm, 1000).await;
        let h = sm.handle();
        assert_eq!(h.get("k00003").unwrap(), None);
        assert_eq!(h.get("k00004").unwrap().as_deref(), Some("v504"));
        let scan = h.scan("k00010", Some("k00013"), 10).unwrap();
        assert_eq!(
            scan.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
            ["k00010", "k00011", "k00012"]
        );
        assert_eq!(h.scan("a", None, 2).unwrap().len(), 2);
        h.digest().unwrap()
    };
    let mut sm = open(dir.path());
    let (applied, m) = sm.applied_state().await.unwrap();
    assert_eq!(applied, Some(id(1000)));
    assert_eq!(m.log_id(), &Some(id(1)));
    assert_eq!(sm.handle().digest().unwrap(), digest);
    assert_eq!(
        digest.keys, 500,
        "499 keys left of 500 after the delete, plus 'batch'"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_installs_on_another_node_and_survives_a_reopen() {
    let leader_dir = tempfile::tempdir().unwrap();
    let follower_dir = tempfile::tempdir().unwrap();
    let mut leader = open(leader_dir.path());
    load(&mut leader, 3000).await;
    let snap = leader
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .unwrap();
    assert_eq!(snap.meta.last_log_id, Some(id(3000)));
    let mut bytes = Vec::new();
    let mut data = snap.snapshot;
    data.read_to_end(&mut bytes).await.unwrap();

    let mut follower = open(follower_dir.path());
    // Something the snapshot must replace, not merge with.
    follower
        .apply([normal(
            1,
            Request::Put {
                key: "stale".into(),
                value: "x".into(),
            },
        )])
        .await
        .unwrap();
    // Stream it in in chunks, as openraft does.
    let mut recv = follower.begin_receiving_snapshot().await.unwrap();
    for chunk in bytes.chunks(1000) {
        recv.write_all(chunk).await.unwrap();
    }
    follower.install_snapshot(&snap.meta, recv).await.unwrap();
    let want = leader.handle().digest().unwrap();
    assert_eq!(follower.handle().digest().unwrap(), want);
    assert_eq!(follower.handle().get("stale").unwrap(), None);
    let current = follower.get_current_snapshot().await.unwrap().unwrap();
    assert_eq!(current.meta, snap.meta);
    drop(follower);
    let mut follower = open(follower_dir.path());
    assert_eq!(follower.handle().digest().unwrap(), want);
    assert_eq!(follower.applied_state().await.unwrap().0, Some(id(3000)));
    assert_eq!(
        follower.get_current_snapshot().await.unwrap().unwrap().meta,
        snap.meta
    );
    drop(follower);
    // The replaced generation is gone; the new one holds the data.
    let db = silt::Db::builder(follower_dir.path().join("sm"))
        .open()
        .unwrap();
    let cfs = db.list_cfs();
    assert!(
        cfs.contains(&"data-1".to_string()) && !cfs.contains(&"data-0".to_string()),
        "{cfs:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_snapshot_is_refused_and_changes_nothing() {
    let leader_dir = tempfile::tempdir().unwrap();
    let follower_dir = tempfile::tempdir().unwrap();
    let mut leader = open(leader_dir.path());
    load(&mut leader, 200).await;
    let snap = leader
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .unwrap();
    let mut bytes = Vec::new();
    let mut data = snap.snapshot;
    data.read_to_end(&mut bytes).await.unwrap();

    let mut follower = open(follower_dir.path());
    load(&mut follower, 50).await;
    let before = follower.handle().digest().unwrap();
    for damage in [bytes.len() / 2, bytes.len() - 3] {
        let mut bad = bytes.clone();
        bad[damage] ^= 1;
        let mut recv = follower.begin_receiving_snapshot().await.unwrap();
        recv.write_all(&bad).await.unwrap();
        assert!(follower.install_snapshot(&snap.meta, recv).await.is_err());
        assert_eq!(follower.handle().digest().unwrap(), before);
    }
    let mut recv = follower.begin_receiving_snapshot().await.unwrap();
    recv.write_all(&bytes[..bytes.len() - 100]).await.unwrap();
    assert!(follower.install_snapshot(&snap.meta, recv).await.is_err());
    drop(follower);
    let follower = open(follower_dir.path());
    assert_eq!(follower.handle().digest().unwrap(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_install_cut_short_by_a_crash_leaves_the_old_state() {
    let dir = tempfile::tempdir().unwrap();
    let before = {
        let mut sm = open(dir.path());
        load(&mut sm, 100).await;
        sm.handle().digest().unwrap()
    };
    // What a crash in the middle of an install leaves: the next generation's column
    // family, partly filled, and `data_cf` still naming the old one.
    {
        let db = silt::Db::builder(dir.path().join("sm")).open().unwrap();
        let cf = db.create_cf("data-1").unwrap();
        db.put_cf(&cf, b"half", b"installed").unwrap();
        db.close().unwrap();
    }
    let sm = open(dir.path());
    assert_eq!(sm.handle().digest().unwrap(), before);
    assert_eq!(sm.handle().get("half").unwrap(), None);
    drop(sm);
    let db = silt::Db::builder(dir.path().join("sm")).open().unwrap();
    assert!(
        !db.list_cfs().contains(&"data-1".to_string()),
        "the half install was not dropped"
    );
}
