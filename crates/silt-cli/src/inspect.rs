//! The inspection commands: wal dump, sst dump, manifest dump, stats. Each reads through
//! `silt::inspect` (the engine's decoders) or a read-only open; none changes a file.

use std::path::Path;
use std::process::ExitCode;

use serde_json::{json, Value};

use crate::output::Report;
use crate::{describe, Ctx, SstCommand};

fn err(e: silt::Error) -> String {
    describe(&e)
}

fn entry_row(ctx: &Ctx, e: &silt::inspect::Entry) -> Vec<Value> {
    let value = match e.blob_pointer() {
        Some((id, off, len)) => format!("-> blob {id} offset {off} ({len} bytes)"),
        None => ctx.show(&e.value),
    };
    vec![
        json!(e.seqno),
        json!(silt::inspect::kind_name(e.kind)),
        json!(ctx.show(&e.key)),
        json!(value),
    ]
}

pub fn wal_dump(ctx: &Ctx) -> Result<ExitCode, String> {
    let d = silt::inspect::wal(ctx.db_path()?).map_err(err)?;
    let mut rows = Vec::new();
    for r in &d.records {
        if let Some(txn) = &r.txn {
            rows.push(vec![
                json!(r.lsn),
                Value::Null,
                Value::Null,
                json!("transaction"),
                Value::Null,
                json!(txn),
            ]);
        }
        match &r.entries {
            Ok(es) => {
                for (i, e) in es.iter().enumerate() {
                    let mut row = vec![json!(r.lsn), json!(i), json!(e.cf)];
                    row.extend(entry_row(ctx, e).into_iter().skip(1));
                    rows.push(row);
                }
            }
            Err(why) => rows.push(vec![
                json!(r.lsn),
                Value::Null,
                Value::Null,
                json!("bad batch"),
                Value::Null,
                json!(why),
            ]),
        }
    }
    let i = &d.info;
    let mut facts = vec![
        ("first_lsn", json!(i.first_lsn)),
        ("tail_lsn", json!(i.tail_lsn)),
        ("records", json!(d.records.len())),
    ];
    match &i.cut {
        Some(c) => {
            facts.push((
                "end",
                json!(format!("{:?}", c.kind)
                    .to_lowercase()
                    .replace("durablelost", "durable_lost")),
            ));
            facts.push(("bad_file", json!(c.file.display().to_string())));
            facts.push(("bad_offset", json!(c.offset)));
            facts.push(("bad_lsn", json!(c.lsn)));
            facts.push(("reason", json!(c.reason)));
            facts.push(("bytes_after", json!(c.bytes)));
            facts.push(("valid_records_after", json!(c.records_after)));
        }
        None => facts.push(("end", json!("clean"))),
    }
    if let Some(e) = &d.error {
        facts.push(("error", json!(e)));
    }
    Report::default()
        .facts("log", facts)
        .rows(
            "records",
            &["lsn", "entry", "cf", "kind", "key", "value"],
            rows,
        )
        .print(ctx.format);
    Ok(ExitCode::SUCCESS)
}

pub fn sst_dump(ctx: &Ctx, file: &Path, command: SstCommand) -> Result<ExitCode, String> {
    let t = silt::inspect::SstFile::open(file).map_err(err)?;
    let mut r = Report::default();
    match command {
        SstCommand::Properties => {
            let p = t.properties();
            let mut facts = vec![
                ("file", json!(file.display().to_string())),
                ("size_bytes", json!(p.size_bytes)),
                ("entries", json!(p.entries)),
                ("tombstones", json!(p.tombstones)),
                ("smallest_seqno", json!(p.seqnos.0)),
                ("largest_seqno", json!(p.seqnos.1)),
                ("data_blocks", json!(p.data_blocks)),
                ("raw_key_bytes", json!(p.raw_key_bytes)),
                ("raw_value_bytes", json!(p.raw_value_bytes)),
                ("data_bytes", json!(p.data_bytes)),
                ("smallest_key", json!(ctx.show(&p.smallest))),
                ("largest_key", json!(ctx.show(&p.largest))),
                ("blob_refs", json!(format!("{:?}", p.blobs))),
            ];
            match t.bloom().map_err(err)? {
                Some(b) => {
                    facts.push(("bloom_bytes", json!(b.bytes)));
                    facts.push(("bloom_probes", json!(b.probes)));
                    facts.push((
                        "bloom_bits_per_entry",
                        json!(format!("{:.2}", b.bits_per_entry)),
                    ));
                }
                None => facts.push(("bloom_bytes", json!(0))),
            }
            r.facts("properties", facts);
        }
        SstCommand::Scan => {
            let mut rows = Vec::new();
            for e in t.entries() {
                rows.push(entry_row(ctx, &e.map_err(err)?));
            }
            r.rows("entries", &["seqno", "kind", "key", "value"], rows);
        }
        SstCommand::Index => {
            let rows = t
                .index()
                .map_err(err)?
                .iter()
                .map(|e| vec![json!(ctx.show(&e.user_key)), json!(e.offset), json!(e.len)])
                .collect();
            r.rows("index", &["separator", "offset", "length"], rows);
        }
        SstCommand::Raw => {
            let blocks = t.blocks().map_err(err)?;
            let rows = blocks
                .iter()
                .map(|b| {
                    vec![
                        json!(b.role),
                        json!(b.offset),
                        json!(b.len),
                        json!(match b.compression {
                            0 => "none",
                            1 => "lz4",
                            2 => "zstd",
                            _ => "unknown",
                        }),
                        json!(b.error.clone().unwrap_or_else(|| "ok".into())),
                    ]
                })
                .collect();
            r.rows(
                "blocks",
                &["block", "offset", "length", "compression", "check"],
                rows,
            );
        }
        SstCommand::Verify => {
            let n = t.verify().map_err(err)?;
            r.facts(
                "verify",
                vec![
                    ("file", json!(file.display().to_string())),
                    ("entries", json!(n)),
                    ("result", json!("ok")),
                ],
            );
        }
    }
    r.print(ctx.format);
    Ok(ExitCode::SUCCESS)
}

pub fn manifest_dump(ctx: &Ctx) -> Result<ExitCode, String> {
    let m = silt::inspect::manifest(ctx.db_path()?).map_err(err)?;
    let mut edits = Vec::new();
    for rec in &m.records {
        for e in &rec.edits {
            edits.push(vec![json!(rec.offset), json!(e)]);
        }
    }
    let tables = m
        .tables
        .iter()
        .map(|t| {
            vec![
                json!(t.cf),
                json!(t.level),
                json!(t.id),
                json!(t.size_bytes),
                json!(t.entries),
                json!(ctx.show(&t.smallest)),
                json!(ctx.show(&t.largest)),
            ]
        })
        .collect();
    let mut facts = vec![
        ("file", json!(m.path.display().to_string())),
        ("records", json!(m.records.len())),
        ("log_start", json!(m.log_start)),
        ("next_table_id", json!(m.next_table_id)),
        ("next_cf_id", json!(m.next_cf_id)),
        ("column_families", json!(format!("{:?}", m.cfs))),
        ("blob_files", json!(m.blobs.len())),
    ];
    if let Some((at, why)) = &m.torn_tail {
        facts.push(("torn_tail", json!(format!("at offset {at}: {why}"))));
    }
    Report::default()
        .facts("manifest", facts)
        .rows("edits", &["record_offset", "edit"], edits)
        .rows(
            "version",
            &[
                "cf", "level", "table", "bytes", "entries", "smallest", "largest",
            ],
            tables,
        )
        .print(ctx.format);
    Ok(ExitCode::SUCCESS)
}

pub fn stats(ctx: &Ctx) -> Result<ExitCode, String> {
    let db = ctx.open_read_only()?;
    let live_counters = live_facts(ctx)?;
    let s = db.stats();
    let live: u64 = s.levels.iter().map(|l| l.bytes).sum::<u64>() + s.blob_file_bytes;
    let last = s
        .levels
        .iter()
        .rev()
        .find(|l| l.bytes > 0)
        .map_or(0, |l| l.bytes);
    let rows = s
        .levels
        .iter()
        .enumerate()
        .map(|(i, l)| vec![json!(i), json!(l.tables), json!(l.bytes)])
        .collect();
    let space_amp = if last == 0 {
        Value::Null
    } else {
        json!(format!(
            "{:.2}",
            (live - s.blob_file_bytes) as f64 / last as f64
        ))
    };
    Report::default()
        .rows("levels", &["level", "tables", "bytes"], rows)
        .facts(
            "totals",
            vec![
                ("table_bytes", json!(live - s.blob_file_bytes)),
                ("blob_files", json!(s.blob_files)),
                ("blob_file_bytes", json!(s.blob_file_bytes)),
                ("blob_live_bytes", json!(s.blob_live_bytes)),
                ("memtable_bytes", json!(s.memtable_bytes)),
                ("space_amp", space_amp),
                ("write_amp", json!(s.write_amp)),
                ("cache_hits", json!(s.cache_hits)),
                ("cache_misses", json!(s.cache_misses)),
                ("stalls", json!(s.stalls)),
                ("stall_micros", json!(s.stall_micros)),
                (
                    "records_replayed",
                    json!(db.recovery_report().records_replayed),
                ),
            ],
        )
        .facts(
            "live",
            live_counters
                .iter()
                .map(|(k, v)| (k.as_str(), v.clone()))
                .collect(),
        )
        .print(ctx.format);
    Ok(ExitCode::SUCCESS)
}

/// The counters of the handle that holds the database, from its `STATS` file
/// (`docs/format/stats.md`), with how old they are and whether its process still runs.
fn live_facts(ctx: &Ctx) -> Result<Vec<(String, Value)>, String> {
    let Some(f) = silt::inspect::live_stats(ctx.db_path()?).map_err(err)? else {
        return Ok(vec![(
            "status".to_string(),
            json!(
                "absent: no open handle has written STATS (none holds the database, its \
                   dumps are off, or it opened less than one period ago)"
            ),
        )]);
    };
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let age_ms = now_ms.saturating_sub(f.written_unix_ms);
    let running = f.writer_running();
    // Live: its writer runs and it is at most three periods old.
    let status = match running {
        Some(false) => "stale: the process that wrote it is gone",
        _ if age_ms > 3 * f.period_ms.max(1) => "stale: older than three dump periods",
        _ => "live",
    };
    let mut facts: Vec<(String, Value)> = [
        ("status", json!(status)),
        ("pid", json!(f.pid)),
        ("writer_running", json!(running)),
        ("age_ms", json!(age_ms)),
        ("period_ms", json!(f.period_ms)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    for (name, value) in &f.counters {
        let v = value
            .parse::<u64>()
            .map(Value::from)
            .or_else(|_| value.parse::<f64>().map(Value::from))
            .unwrap_or_else(|_| json!(value));
        facts.push((name.clone(), v));
    }
    Ok(facts)
}
