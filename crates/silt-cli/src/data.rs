//! The data commands: get, put, delete, scan, count, dump, load, cf list|create|drop.
//! Reads open the database read-only; writes take the lock and are durable
//! (`WriteOptions::durable`) before the command returns.

use std::io::{BufRead, Write};
use std::path::Path;
use std::process::ExitCode;

use serde_json::{json, Value};
use silt::{Db, WriteBatch, WriteOptions};

use crate::dumpfile::{self, Line};
use crate::output::Report;
use crate::{describe, Ctx, RangeArgs};

/// Key-value pairs from an iterator, either direction.
type Pairs = Box<dyn Iterator<Item = silt::Result<(Vec<u8>, Vec<u8>)>>>;

fn err(e: silt::Error) -> String {
    describe(&e)
}

/// The iterator over `range` in `--cf`.
fn iter(ctx: &Ctx, db: &Db, range: &RangeArgs) -> Result<silt::Iter, String> {
    let cf = ctx.cf(db)?;
    if let Some(p) = &range.prefix {
        return Ok(db.prefix_cf(&cf, &ctx.parse(p)?));
    }
    let from = range.from.as_deref().map(|s| ctx.parse(s)).transpose()?;
    let to = range.to.as_deref().map(|s| ctx.parse(s)).transpose()?;
    use std::ops::Bound::*;
    let lo = from.map_or(Unbounded, Included);
    let hi = to.map_or(Unbounded, Excluded);
    Ok(db.range_cf::<Vec<u8>, _>(&cf, (lo, hi)))
}

pub fn get(ctx: &Ctx, key: &str) -> Result<ExitCode, String> {
    let db = ctx.open_read_only()?;
    let cf = ctx.cf(&db)?;
    let k = ctx.parse(key)?;
    match db.get_cf(&cf, &k).map_err(err)? {
        Some(v) => {
            match ctx.format {
                crate::Format::Json => Report::default()
                    .facts(
                        "get",
                        vec![("key", json!(ctx.show(&k))), ("value", json!(ctx.show(&v)))],
                    )
                    .print(ctx.format),
                crate::Format::Table => crate::output::emit(ctx.show(&v)),
            }
            Ok(ExitCode::SUCCESS)
        }
        None => Err(format!("key {} not found", ctx.show(&k))),
    }
}

pub fn put(ctx: &Ctx, key: &str, value: &str, ttl: Option<u64>) -> Result<ExitCode, String> {
    let db = ctx.open_writable()?;
    let cf = ctx.cf(&db)?;
    let mut b = WriteBatch::new();
    match ttl {
        Some(s) => b.put_cf_with_ttl(
            &cf,
            &ctx.parse(key)?,
            &ctx.parse(value)?,
            std::time::Duration::from_secs(s),
        ),
        None => b.put_cf(&cf, &ctx.parse(key)?, &ctx.parse(value)?),
    };
    db.write(b, WriteOptions::durable()).map_err(err)?;
    db.close().map_err(err)?;
    Ok(ExitCode::SUCCESS)
}

pub fn delete(ctx: &Ctx, key: &str) -> Result<ExitCode, String> {
    let db = ctx.open_writable()?;
    let cf = ctx.cf(&db)?;
    let mut b = WriteBatch::new();
    b.delete_cf(&cf, &ctx.parse(key)?);
    db.write(b, WriteOptions::durable()).map_err(err)?;
    db.close().map_err(err)?;
    Ok(ExitCode::SUCCESS)
}

pub fn scan(
    ctx: &Ctx,
    range: &RangeArgs,
    limit: Option<u64>,
    reverse: bool,
) -> Result<ExitCode, String> {
    let db = ctx.open_read_only()?;
    let it = iter(ctx, &db, range)?;
    let it: Pairs = if reverse {
        Box::new(it.rev())
    } else {
        Box::new(it)
    };
    let mut rows = Vec::new();
    for kv in it.take(limit.unwrap_or(u64::MAX) as usize) {
        let (k, v) = kv.map_err(err)?;
        rows.push(vec![json!(ctx.show(&k)), json!(ctx.show(&v))]);
    }
    Report::default()
        .rows("entries", &["key", "value"], rows)
        .print(ctx.format);
    Ok(ExitCode::SUCCESS)
}

pub fn count(ctx: &Ctx, range: &RangeArgs) -> Result<ExitCode, String> {
    let db = ctx.open_read_only()?;
    let mut n = 0u64;
    for kv in iter(ctx, &db, range)? {
        kv.map_err(err)?;
        n += 1;
    }
    match ctx.format {
        crate::Format::Json => Report::default()
            .facts("count", vec![("cf", json!(ctx.cf)), ("keys", json!(n))])
            .print(ctx.format),
        crate::Format::Table => crate::output::emit(n),
    }
    Ok(ExitCode::SUCCESS)
}

pub fn dump(ctx: &Ctx, output: Option<&Path>) -> Result<ExitCode, String> {
    let db = ctx.open_read_only()?;
    let mut out: Box<dyn Write> = match output {
        Some(p) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(p).map_err(|e| format!("create {}: {e}", p.display()))?,
        )),
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    let io = |e: std::io::Error| format!("write dump: {e}");
    writeln!(out, "{}", dumpfile::HEADER).map_err(io)?;
    let snap = db.snapshot();
    let names = if ctx.cf_given {
        vec![ctx.cf.clone()]
    } else {
        db.list_cfs()
    };
    for name in names {
        let cf = db.cf(&name).map_err(err)?;
        for kv in snap.range_cf::<&[u8], _>(&cf, ..) {
            let (k, v) = kv.map_err(err)?;
            writeln!(out, "{}", dumpfile::line(&name, &k, &v)).map_err(io)?;
        }
    }
    out.flush().map_err(io)?;
    Ok(ExitCode::SUCCESS)
}

pub fn load(ctx: &Ctx, input: Option<&Path>) -> Result<ExitCode, String> {
    let db = ctx.open_writable()?;
    let reader: Box<dyn BufRead> = match input {
        Some(p) => Box::new(std::io::BufReader::new(
            std::fs::File::open(p).map_err(|e| format!("open {}: {e}", p.display()))?,
        )),
        None => Box::new(std::io::BufReader::new(std::io::stdin().lock())),
    };
    let mut lines = reader.lines();
    match lines.next() {
        Some(Ok(h)) if h == dumpfile::HEADER => {}
        Some(Ok(h)) => {
            return Err(format!(
                "line 1: expected {:?}, found {h:?}",
                dumpfile::HEADER
            ))
        }
        Some(Err(e)) => return Err(format!("read dump: {e}")),
        None => return Err("the dump is empty (no header line)".into()),
    }
    let mut batch = WriteBatch::new();
    let mut cfs = std::collections::HashMap::new();
    let mut n = 0u64;
    for (i, l) in lines.enumerate() {
        let l = l.map_err(|e| format!("read dump: {e}"))?;
        let Line::Entry(cf, k, v) =
            dumpfile::parse_line(&l).map_err(|e| format!("line {}: {e}", i + 2))?
        else {
            continue;
        };
        if !cfs.contains_key(&cf) {
            let h = db.cf(&cf).or_else(|_| db.create_cf(&cf)).map_err(err)?;
            cfs.insert(cf.clone(), h);
        }
        batch.put_cf(&cfs[&cf], &k, &v);
        n += 1;
        if batch.len() >= 1000 {
            db.write(std::mem::take(&mut batch), WriteOptions::default())
                .map_err(|e| format!("line {}: {}", i + 2, err(e)))?;
        }
    }
    db.write(batch, WriteOptions::durable()).map_err(err)?;
    db.close().map_err(err)?;
    Report::default()
        .facts("load", vec![("entries", json!(n))])
        .print(ctx.format);
    Ok(ExitCode::SUCCESS)
}

pub fn cf_list(ctx: &Ctx) -> Result<ExitCode, String> {
    let db = ctx.open_read_only()?;
    let rows = db
        .list_cfs()
        .into_iter()
        .map(|n| vec![Value::from(n)])
        .collect();
    Report::default()
        .rows("column_families", &["name"], rows)
        .print(ctx.format);
    Ok(ExitCode::SUCCESS)
}

pub fn cf_create(ctx: &Ctx, name: &str) -> Result<ExitCode, String> {
    let db = ctx.open_writable()?;
    db.create_cf(name).map_err(err)?;
    db.close().map_err(err)?;
    Ok(ExitCode::SUCCESS)
}

pub fn cf_drop(ctx: &Ctx, name: &str) -> Result<ExitCode, String> {
    let db = ctx.open_writable()?;
    db.drop_cf(name).map_err(err)?;
    db.close().map_err(err)?;
    Ok(ExitCode::SUCCESS)
}
