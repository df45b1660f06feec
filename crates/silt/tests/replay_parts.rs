//! A rare interleaving made to happen every time through the kill points' test hook
//! (`silt::kill_point::set_hook`, feature `kill-points`): a flush moves the log start to a
//! boundary between the part records of a transaction that then fails its check, and the
//! database must reopen. The hook is process-wide, so this binary holds this one test.

#![cfg(feature = "kill-points")]

use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Mutex};

use silt::vfs::{CrashMode, SimFs};
use silt::{Db, Error, SyncMode, TxnOptions};

const PART_POINT: &str = "commit: a part record written, more to come";
const FLUSH_POINT: &str = "flush: tables written and log synced, before the manifest edit";

/// Scenario (seen once in CI as "part 10 of transaction X, after 0 of its parts" at reopen):
/// 1. a large transaction writes its first parts (pinned in the log, T4 of `txn/mod.rs`);
/// 2. a flush rotates the memtable there: its boundary lies between the parts;
/// 3. the transaction writes its other parts, fails its check and drops its pin;
/// 4. the flush, slow to finish, only now picks the log start: the boundary, as no pin
///    holds it back.
///
/// Replay then starts between the dead transaction's parts and must skip them.
#[test]
fn a_log_start_between_the_parts_of_a_failed_transaction_reopens() {
    let fs = SimFs::new();
    let open = |fs: Arc<SimFs>| {
        Db::builder("/db")
            .file_system(fs)
            .wal_segment_bytes(64 << 10)
            .sync_mode(SyncMode::Full)
            .open()
            .unwrap()
    };
    let db = open(fs.clone());
    db.put(b"conflict", b"0").unwrap();
    let mut loser = db.begin(TxnOptions::default());
    for i in 0..1000u32 {
        loser
            .put(format!("lost{i:06}").as_bytes(), &[7u8; 300])
            .unwrap();
    }
    loser.put(b"conflict", b"loser").unwrap();
    db.put(b"conflict", b"winner").unwrap();

    // The hook's state: which part the committing thread is at, the flush thread's signal
    // that it reached its point, and the test's signal that the transaction failed.
    let parts = Arc::new(AtomicU32::new(0));
    let (at_flush_tx, at_flush_rx) = mpsc::channel::<()>();
    let (failed_tx, failed_rx) = mpsc::channel::<()>();
    let failed_rx = Mutex::new(failed_rx);
    let at_flush_tx = Mutex::new(at_flush_tx);
    let at_flush_rx = Mutex::new(at_flush_rx);
    let flusher: Arc<Mutex<Option<std::thread::JoinHandle<()>>>> = Default::default();
    let hook = {
        let (db, parts, flusher) = (db.clone(), parts.clone(), flusher.clone());
        move |name: &'static str| {
            if name == PART_POINT && parts.fetch_add(1, SeqCst) == 1 {
                // Between parts 1 and 2: something for the memtable to hold, then a
                // flush, held at its point until the transaction has failed.
                db.put(b"between", b"parts").unwrap();
                let db = db.clone();
                *flusher.lock().unwrap() = Some(std::thread::spawn(move || db.flush().unwrap()));
                at_flush_rx.lock().unwrap().recv().unwrap();
            } else if name == FLUSH_POINT {
                at_flush_tx.lock().unwrap().send(()).unwrap();
                failed_rx.lock().unwrap().recv().unwrap();
            }
        }
    };
    silt::kill_point::set_hook(Some(Arc::new(hook)));
    let r = loser.commit();
    failed_tx.send(()).unwrap();
    let flusher = flusher
        .lock()
        .unwrap()
        .take()
        .expect("the transaction wrote parts");
    flusher.join().unwrap();
    silt::kill_point::set_hook(None);
    assert!(matches!(r, Err(Error::Conflict { .. })), "{r:?}");
    assert!(
        parts.load(SeqCst) > 2,
        "the transaction wrote more parts after the flush"
    );

    db.put(b"after", b"flush").unwrap();
    let check = |db: &Db| {
        assert_eq!(db.prefix(b"lost").count(), 0);
        assert_eq!(
            db.get(b"conflict").unwrap().as_deref(),
            Some(&b"winner"[..])
        );
        assert_eq!(db.get(b"between").unwrap().as_deref(), Some(&b"parts"[..]));
        assert_eq!(db.get(b"after").unwrap().as_deref(), Some(&b"flush"[..]));
    };
    check(&db);
    // A process crash: the log's records from the log start on are replayed, the dead
    // transaction's later parts among them.
    let crashed = fs.crash(CrashMode::KeepAll, 1);
    drop(db);
    let db = open(crashed);
    check(&db);
}
