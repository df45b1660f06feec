//! `Strategy::TimedGroups` under racing joins: a committer that finds the open group just as
//! its leader times out must not join the closed group (its entry would never be written,
//! yet acknowledged with another member's LSN). Many threads, a tiny `max_wait` so leaders
//! time out constantly; every acknowledged LSN must read back as that commit's payload.

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use silt_wal::{Options, Strategy, SyncMode, Wal};

#[test]
fn every_acknowledged_commit_is_its_own_record_when_leaders_time_out() {
    for round in 0..20u64 {
        let dir = tempfile::tempdir().unwrap();
        let opts = Options::default()
            .sync(SyncMode::None)
            .strategy(Strategy::TimedGroups {
                max_entries: 4,
                max_wait: Duration::from_micros(1 + round % 5),
            });
        let wal = Arc::new(Wal::open(dir.path(), opts.clone()).unwrap());
        let acked: Vec<(u64, Vec<u8>)> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..6u64)
                .map(|w| {
                    let wal = wal.clone();
                    s.spawn(move || {
                        (0..300u64)
                            .map(|i| {
                                let p = payload(w, i);
                                (wal.append(&p).unwrap(), p)
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
        });
        drop(Arc::try_unwrap(wal).ok().unwrap());
        let wal = Wal::open(dir.path(), opts).unwrap();
        let got: HashMap<u64, Vec<u8>> = read_all(&wal)
            .into_iter()
            .map(|r| (r.lsn, r.payload))
            .collect();
        assert_eq!(got.len(), acked.len(), "round {round}");
        for (lsn, p) in &acked {
            assert_eq!(got.get(lsn), Some(p), "round {round}: LSN {lsn}");
        }
    }
}
