//! The README's engine demo: `cargo run -p silt --example demo`.

use silt::{Db, SyncMode, WriteBatch, WriteOptions};

fn main() -> silt::Result<()> {
    let path = std::env::temp_dir().join("silt-demo");
    let db = Db::builder(&path).sync_mode(SyncMode::Full).open()?;

    // Column families share one log: a batch is atomic across them.
    let users = db.cf("users").or_else(|_| db.create_cf("users"))?;
    let mut batch = WriteBatch::new();
    batch
        .put_cf(&users, b"user/1", b"ada")
        .put_cf(&users, b"user/2", b"grace")
        .put(b"users/count", b"2");
    db.write(batch, WriteOptions::default())?; // durable when this returns (SyncMode::Full)

    let before = db.snapshot(); // a consistent view, unaffected by later writes
    db.delete_cf(&users, b"user/1")?;
    assert_eq!(
        before.get_cf(&users, b"user/1")?.as_deref(),
        Some(&b"ada"[..])
    );
    assert_eq!(db.get_cf(&users, b"user/1")?, None);

    for kv in db.prefix_cf(&users, b"user/").rev() {
        let (key, value) = kv?;
        println!(
            "{} = {}",
            String::from_utf8_lossy(&key),
            String::from_utf8_lossy(&value)
        );
    }

    db.flush()?; // memtable -> SSTable (also done in the background)
    let stats = db.stats();
    println!(
        "level 0 tables: {}, write amplification {:.2}",
        stats.levels[0].tables, stats.write_amp
    );
    db.close() // waits for background work; nothing acknowledged is lost
}
