//! The maintenance commands: verify, compact, checkpoint, backup create|list|restore|
//! verify|purge, repair. Checkpoint and backup create open the database read-only (they
//! work beside a process that holds it); compact and repair take the lock.

use std::path::Path;
use std::process::ExitCode;

use serde_json::{json, Value};
use silt::BackupStore;

use crate::output::Report;
use crate::{describe, Ctx};

fn err(e: silt::Error) -> String {
    describe(&e)
}

pub fn verify(ctx: &Ctx) -> Result<ExitCode, String> {
    let r = silt::inspect::verify(ctx.db_path()?).map_err(|e| match e {
        silt::Error::Corruption {
            file,
            offset,
            reason,
        } => format!(
            "verify failed: {} at offset {offset}: {reason}",
            file.display()
        ),
        other => err(other),
    })?;
    let mut facts = vec![
        ("result", json!("ok")),
        ("manifest_records", json!(r.manifest_records)),
        ("tables", json!(r.tables)),
        ("entries", json!(r.entries)),
        ("blob_files", json!(r.blob_files)),
        ("log_records", json!(r.log_records)),
    ];
    if let Some((f, off)) = &r.log_torn_tail {
        facts.push((
            "log_torn_tail",
            json!(format!(
                "{} at offset {off} (an unfinished append; not damage)",
                f.display()
            )),
        ));
    }
    Report::default().facts("verify", facts).print(ctx.format);
    Ok(ExitCode::SUCCESS)
}

pub fn compact(ctx: &Ctx, from: Option<&str>, to: Option<&str>) -> Result<ExitCode, String> {
    let db = ctx.open_writable()?;
    let cf = ctx.cf(&db)?;
    let from = from.map(|s| ctx.parse(s)).transpose()?;
    let to = to.map(|s| ctx.parse(s)).transpose()?;
    use std::ops::Bound::*;
    let range = (
        from.map_or(Unbounded, Included),
        to.map_or(Unbounded, Excluded),
    );
    db.compact_range_cf::<Vec<u8>, _>(&cf, range).map_err(err)?;
    let s = db.stats();
    db.close().map_err(err)?;
    let rows = s
        .levels
        .iter()
        .enumerate()
        .map(|(i, l)| vec![json!(i), json!(l.tables), json!(l.bytes)])
        .collect();
    Report::default()
        .rows("levels", &["level", "tables", "bytes"], rows)
        .print(ctx.format);
    Ok(ExitCode::SUCCESS)
}

pub fn checkpoint(ctx: &Ctx, dir: &Path) -> Result<ExitCode, String> {
    let db = ctx.open_read_only()?;
    let i = db.checkpoint(dir).map_err(err)?;
    Report::default()
        .facts(
            "checkpoint",
            vec![
                ("dir", json!(i.dir.display().to_string())),
                ("seqno", json!(i.seqno)),
                ("files_linked", json!(i.files_linked)),
                ("files_copied", json!(i.files_copied)),
                ("bytes_copied", json!(i.bytes_copied)),
                ("log_segments", json!(i.log_segments)),
            ],
        )
        .print(ctx.format);
    Ok(ExitCode::SUCCESS)
}

fn backup_row(b: &silt::BackupInfo) -> Vec<Value> {
    vec![
        json!(b.id),
        json!(b.created_unix_secs),
        json!(b.seqno),
        json!(b.files),
        json!(b.bytes),
    ]
}

const BACKUP_HEADER: [&str; 5] = ["id", "created_unix", "seqno", "files", "bytes"];

pub fn backup_create(ctx: &Ctx, store: &Path) -> Result<ExitCode, String> {
    let db = ctx.open_read_only()?;
    let s = BackupStore::open(store).map_err(err)?;
    let b = s.create(&db).map_err(err)?;
    let mut row = backup_row(&b);
    row.extend([json!(b.new_files), json!(b.new_bytes)]);
    let mut h = BACKUP_HEADER.to_vec();
    h.extend(["new_files", "new_bytes"]);
    Report::default()
        .rows("backup", &h, vec![row])
        .print(ctx.format);
    Ok(ExitCode::SUCCESS)
}

pub fn backup_list(ctx: &Ctx, store: &Path) -> Result<ExitCode, String> {
    let s = BackupStore::open(store).map_err(err)?;
    let rows = s.list().map_err(err)?.iter().map(backup_row).collect();
    Report::default()
        .rows("backups", &BACKUP_HEADER, rows)
        .print(ctx.format);
    Ok(ExitCode::SUCCESS)
}

pub fn backup_restore(ctx: &Ctx, store: &Path, id: u64, to: &Path) -> Result<ExitCode, String> {
    let s = BackupStore::open(store).map_err(err)?;
    let b = s.restore(id, to).map_err(err)?;
    Report::default()
        .rows("restored", &BACKUP_HEADER, vec![backup_row(&b)])
        .print(ctx.format);
    Ok(ExitCode::SUCCESS)
}

pub fn backup_verify(ctx: &Ctx, store: &Path, id: u64) -> Result<ExitCode, String> {
    let s = BackupStore::open(store).map_err(err)?;
    let b = s.verify(id).map_err(err)?;
    Report::default()
        .rows("verified", &BACKUP_HEADER, vec![backup_row(&b)])
        .print(ctx.format);
    Ok(ExitCode::SUCCESS)
}

pub fn backup_purge(ctx: &Ctx, store: &Path, keep: usize) -> Result<ExitCode, String> {
    let s = BackupStore::open(store).map_err(err)?;
    let gone = s.purge_old(keep).map_err(err)?;
    Report::default()
        .facts("purge", vec![("removed", json!(gone))])
        .print(ctx.format);
    Ok(ExitCode::SUCCESS)
}

pub fn repair(ctx: &Ctx) -> Result<ExitCode, String> {
    let r = silt::Db::repair(ctx.db_path()?).map_err(err)?;
    let show = |v: &[(std::path::PathBuf, String)]| {
        json!(v
            .iter()
            .map(|(p, why)| format!("{}: {why}", p.display()))
            .collect::<Vec<_>>())
    };
    Report::default()
        .facts(
            "repair",
            vec![
                ("manifest_error", json!(r.manifest_error)),
                ("tables_recovered", json!(r.tables_recovered)),
                ("blob_files_recovered", json!(r.blob_files_recovered)),
                ("records_recovered", json!(r.records_recovered)),
                ("tables_written", json!(r.tables_written)),
                ("not_recovered", show(&r.damaged)),
                ("log_damage", json!(r.log_damage)),
                (
                    "tables_assumed_default_cf",
                    json!(r
                        .assumed_default
                        .iter()
                        .map(|p| p.display().to_string())
                        .collect::<Vec<_>>()),
                ),
                ("cfs_recreated", json!(r.cfs_recreated)),
            ],
        )
        .print(ctx.format);
    Ok(ExitCode::SUCCESS)
}
