//! [`StateMachine`]: openraft's `RaftStateMachine` on a silt database (`docs/format/raft.md`,
//! "State machine keys" and "Snapshot file"; the design in `docs/design.md`, "silt-raft").
//! Here: open, apply, and the trait; `builder.rs` builds snapshots, `install.rs` installs
//! them, `handle.rs` serves reads, `snapshot_file.rs` is the file format, `meta.rs` the
//! bookkeeping keys.
//!
//! Invariants:
//! 1. Every apply writes its entries' user data, `last_applied` and (for membership entries)
//!    `membership` in one `WriteBatch`: after a crash, the database holds a prefix of the
//!    applied entries with the matching `last_applied`.
//! 2. User data lives in the column family `data-{gen}` that `data_cf` names; an install
//!    switches `gen` in one synced batch written after every batch that filled the new
//!    column family, so silt's prefix recovery makes the switch atomic.
//! 3. A snapshot is built from one silt snapshot (meta and data at the same seqno), and the
//!    database is synced before the snapshot is returned: openraft purges the log only up to
//!    a snapshot, so the state machine is durable past everything purged.
//! 4. Readers of the data column family hold the `data` lock for the read; an install takes
//!    it for writing to switch generations, so no reader sees a dropped column family.

mod builder;
mod handle;
mod install;
mod meta;
mod snapshot_file;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use openraft::storage::RaftStateMachine;
use openraft::{EntryPayload, ErrorSubject, ErrorVerb, LogId, StorageError, StoredMembership};
use parking_lot::{Mutex, RwLock};
use silt::{ColumnFamily, Db, SyncMode, WriteBatch, WriteOptions};
use tokio::io::AsyncWriteExt;

use crate::error::{IntoStorage, Result};
use crate::types::{Op, Request, Response};
use crate::{Entry, Node, NodeId, Snapshot, SnapshotMeta, TypeConfig};
pub use builder::SnapshotBuilder;
pub use handle::Digest;
use meta::{data_cf_name, parse_data_cf, META_CF};
use snapshot_file::SnapshotReader;

/// Applies are written to silt in batches of at most about this many bytes (each batch
/// atomic with its `last_applied`).
const APPLY_BATCH_BYTES: usize = 8 << 20;
/// An install copies the snapshot into silt in batches of about this many bytes.
const INSTALL_BATCH_BYTES: usize = 4 << 20;
const RECEIVING: &str = "receiving";

/// Options of a [`StateMachine`]'s silt database.
#[derive(Clone, Debug)]
pub struct StateMachineOptions {
    /// silt's log segment size for a new database (default 64 MiB).
    pub wal_segment_bytes: u64,
    /// silt's memtable size (default 64 MiB).
    pub memtable_bytes: u64,
}

impl Default for StateMachineOptions {
    fn default() -> Self {
        StateMachineOptions {
            wal_segment_bytes: 64 << 20,
            memtable_bytes: 64 << 20,
        }
    }
}

/// Counters of the state machine, for metrics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StateMachineStats {
    /// The last applied log id.
    pub last_applied: Option<LogId<NodeId>>,
    /// Snapshots built since open.
    pub snapshots_built: u64,
    /// Snapshots installed (received from a leader) since open.
    pub snapshots_installed: u64,
    /// How long the last build took, in milliseconds.
    pub last_build_ms: u64,
    /// How long the last install took (checking and copying into silt), in milliseconds.
    pub last_install_ms: u64,
    /// Size of the current snapshot file in bytes.
    pub snapshot_bytes: u64,
    /// Pairs in the current snapshot.
    pub snapshot_pairs: u64,
    /// The current snapshot's last log id.
    pub snapshot_last_log_id: Option<LogId<NodeId>>,
}

/// The last applied log id and membership.
pub type Applied = (Option<LogId<NodeId>>, StoredMembership<NodeId, Node>);

/// The data column family in use.
struct Data {
    gen: u64,
    cf: ColumnFamily,
}

/// The current snapshot file.
#[derive(Clone)]
struct Current {
    meta: SnapshotMeta,
    path: PathBuf,
}

pub(crate) struct SmShared {
    db: Db,
    meta_cf: ColumnFamily,
    data: RwLock<Data>,
    applied: RwLock<Applied>,
    snap_dir: PathBuf,
    next_snap: AtomicU64,
    current: Mutex<Option<Current>>,
    stats: Mutex<StateMachineStats>,
}

/// The state machine on silt. openraft owns it; [`StateMachine::handle`] gives the
/// service a handle for reads.
pub struct StateMachine {
    shared: Arc<SmShared>,
}

/// A handle for reading the state machine (the service's `get` and `scan`, digests,
/// metrics). Cheap to clone.
#[derive(Clone)]
pub struct StateMachineHandle {
    shared: Arc<SmShared>,
}

impl StateMachine {
    /// Opens (or creates) the state machine: the silt database in `dir/sm` and snapshot
    /// files in `dir/snapshots`. Blocking.
    ///
    /// # Errors
    ///
    /// `Db` if silt fails to open, `Corruption` if a bookkeeping key or the current
    /// snapshot's header is damaged, `Io` for the snapshot directory.
    pub fn open(dir: impl AsRef<Path>, opts: &StateMachineOptions) -> Result<StateMachine> {
        let dir = dir.as_ref();
        // Applies are not synced one by one: the Raft log is the durable record of every
        // committed entry; silt is synced before any of that log is purged (invariant 3).
        let db = Db::builder(dir.join("sm"))
            .sync_mode(SyncMode::None)
            .wal_segment_bytes(opts.wal_segment_bytes)
            .memtable_bytes(opts.memtable_bytes)
            .open()?;
        let meta_cf = db.create_cf(META_CF)?;
        let m = meta::read(&db, &meta_cf)?;
        let cf = db.create_cf(&data_cf_name(m.data_gen))?;
        // Generations other than the current one: an install that did not finish, or the
        // generation an install replaced before it could drop it.
        for name in db.list_cfs() {
            if parse_data_cf(&name).is_some_and(|g| g != m.data_gen) {
                db.drop_cf(&name)?;
            }
        }
        let snap_dir = dir.join("snapshots");
        std::fs::create_dir_all(&snap_dir)?;
        let (current, next) = scan_snapshots(&snap_dir)?;
        let mut stats = StateMachineStats {
            last_applied: m.last_applied,
            ..Default::default()
        };
        if let Some(c) = &current {
            stats.snapshot_last_log_id = c.meta.last_log_id;
            stats.snapshot_bytes = std::fs::metadata(&c.path).map(|m| m.len()).unwrap_or(0);
        }
        Ok(StateMachine {
            shared: Arc::new(SmShared {
                db,
                meta_cf,
                data: RwLock::new(Data {
                    gen: m.data_gen,
                    cf,
                }),
                applied: RwLock::new((m.last_applied, m.membership)),
                snap_dir,
                next_snap: AtomicU64::new(next),
                current: Mutex::new(current),
                stats: Mutex::new(stats),
            }),
        })
    }

    /// A handle for reads.
    pub fn handle(&self) -> StateMachineHandle {
        StateMachineHandle {
            shared: self.shared.clone(),
        }
    }
}

/// Finds the current snapshot (the highest number) and removes leftovers.
fn scan_snapshots(dir: &Path) -> Result<(Option<Current>, u64)> {
    let mut best: Option<(u64, PathBuf)> = None;
    let mut all = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let path = e?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name == RECEIVING || name.ends_with(".tmp") {
            std::fs::remove_file(&path)?;
            continue;
        }
        if let Some(n) = name
            .strip_suffix(".snap")
            .and_then(|n| n.parse::<u64>().ok())
        {
            all.push(path.clone());
            if best.as_ref().is_none_or(|(b, _)| n > *b) {
                best = Some((n, path));
            }
        }
    }
    let Some((n, path)) = best else {
        return Ok((None, 1));
    };
    for p in all {
        if p != path {
            std::fs::remove_file(&p)?;
        }
    }
    let meta = SnapshotReader::open(&path)?.meta().clone();
    Ok((Some(Current { meta, path }), n + 1))
}

/// Runs blocking database work: in place on a multi-threaded runtime (telling it to move
/// other tasks away), directly otherwise.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

impl SmShared {
    fn apply_entries(&self, entries: Vec<Entry>) -> Result<Vec<Response>> {
        let mut out = Vec::with_capacity(entries.len());
        let data = self.data.read();
        let mut batch = WriteBatch::new();
        let mut last: Option<LogId<NodeId>> = None;
        let mut membership: Option<StoredMembership<NodeId, Node>> = None;
        for entry in entries {
            let writes = match entry.payload {
                EntryPayload::Blank => 0,
                EntryPayload::Normal(req) => put_request(&mut batch, &data.cf, req),
                EntryPayload::Membership(m) => {
                    membership = Some(StoredMembership::new(Some(entry.log_id), m));
                    0
                }
            };
            out.push(Response { writes });
            last = Some(entry.log_id);
            if batch.encoded_bytes() >= APPLY_BATCH_BYTES {
                self.commit_apply(&mut batch, last, membership.take())?;
            }
        }
        self.commit_apply(&mut batch, last, membership)?;
        Ok(out)
    }

    fn commit_apply(
        &self,
        batch: &mut WriteBatch,
        last: Option<LogId<NodeId>>,
        membership: Option<StoredMembership<NodeId, Node>>,
    ) -> Result<()> {
        let Some(last) = last else { return Ok(()) };
        meta::put_last_applied(batch, &self.meta_cf, &last);
        if let Some(m) = &membership {
            meta::put_membership(batch, &self.meta_cf, m)?;
        }
        let b = std::mem::take(batch);
        self.db.write(b, WriteOptions::default())?;
        let mut a = self.applied.write();
        a.0 = Some(last);
        if let Some(m) = membership {
            a.1 = m;
        }
        self.stats.lock().last_applied = Some(last);
        Ok(())
    }

    /// Makes `c` the current snapshot and deletes the previous file.
    fn set_current(&self, c: Current) -> Result<()> {
        let old = self.current.lock().replace(c);
        if let Some(old) = old {
            match std::fs::remove_file(&old.path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }
}

/// Adds a command's writes to a batch; returns how many.
fn put_request(batch: &mut WriteBatch, cf: &ColumnFamily, req: Request) -> u32 {
    let mut put = |op: &Op| match op {
        Op::Put { key, value } => {
            batch.put_cf(cf, key.as_bytes(), value.as_bytes());
        }
        Op::Delete { key } => {
            batch.delete_cf(cf, key.as_bytes());
        }
    };
    match req {
        Request::Put { key, value } => {
            put(&Op::Put { key, value });
            1
        }
        Request::Delete { key } => {
            put(&Op::Delete { key });
            1
        }
        Request::Batch { ops } => {
            for op in &ops {
                put(op);
            }
            ops.len() as u32
        }
    }
}

fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(&mut self) -> Result<Applied, StorageError<NodeId>> {
        Ok(self.shared.applied.read().clone())
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Response>, StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        blocking(|| self.shared.apply_entries(entries))
            .sto(ErrorSubject::StateMachine, ErrorVerb::Write)
    }

    async fn get_snapshot_builder(&mut self) -> SnapshotBuilder {
        SnapshotBuilder::new(self.shared.clone())
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<tokio::fs::File>, StorageError<NodeId>> {
        let path = self.shared.snap_dir.join(RECEIVING);
        // Read and write: install reads the same handle back.
        let f = tokio::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .await
            .sto(ErrorSubject::Snapshot(None), ErrorVerb::Write)?;
        Ok(Box::new(f))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        mut snapshot: Box<tokio::fs::File>,
    ) -> Result<(), StorageError<NodeId>> {
        let subject = ErrorSubject::Snapshot(Some(meta.signature()));
        snapshot
            .flush()
            .await
            .sto(subject.clone(), ErrorVerb::Write)?;
        snapshot
            .sync_all()
            .await
            .sto(subject.clone(), ErrorVerb::Write)?;
        let file = snapshot.into_std().await;
        let shared = self.shared.clone();
        let meta = meta.clone();
        tokio::task::spawn_blocking(move || shared.install(&meta, file))
            .await
            .map_err(std::io::Error::other)
            .sto(subject.clone(), ErrorVerb::Write)?
            .sto(subject, ErrorVerb::Write)
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, StorageError<NodeId>> {
        let current = self.shared.current.lock().clone();
        let Some(c) = current else { return Ok(None) };
        let subject = ErrorSubject::Snapshot(Some(c.meta.signature()));
        let f = tokio::fs::File::open(&c.path)
            .await
            .sto(subject, ErrorVerb::Read)?;
        Ok(Some(Snapshot {
            meta: c.meta,
            snapshot: Box::new(f),
        }))
    }
}
