//! Creating or dropping a column family is durable at once (a manifest edit): it must not
//! survive a power loss that takes back writes acknowledged before it, or what survives is
//! no prefix of commit order. Found by `silt-stress power-loss`; failed before the fix.

use std::sync::Arc;

use silt::{Db, SyncMode};
use silt_vfs::{CrashMode, FileSystem, SimFs};

fn open(fs: &Arc<SimFs>) -> Db {
    let fs: Arc<dyn FileSystem> = fs.clone();
    Db::builder("/db")
        .file_system(fs)
        .sync_mode(SyncMode::None)
        .wal_segment_bytes(1 << 20)
        .open()
        .unwrap()
}

#[test]
fn a_column_family_change_never_survives_the_writes_before_it() {
    for (i, drop_it) in [(0, false), (1, true)] {
        let fs = SimFs::new();
        let db = open(&fs);
        db.create_cf("victim").unwrap();
        // Acknowledged (in the OS, not synced), then a durable manifest edit.
        db.put(b"before", b"1").unwrap();
        if drop_it {
            db.drop_cf("victim").unwrap();
        } else {
            db.create_cf("new").unwrap();
        }
        let image = fs.crash(CrashMode::DropAll, i);
        drop(db);
        let db = open(&image);
        let changed = if drop_it {
            db.cf("victim").is_err()
        } else {
            db.cf("new").is_ok()
        };
        if changed {
            assert_eq!(
                db.get(b"before").unwrap().as_deref(),
                Some(&b"1"[..]),
                "the column family change survived, the write before it did not"
            );
        }
    }
}
