//! The keyword options of `silt.Db(path, **options)`, turned into a `silt::DbBuilder`.
//!
//! Invariants:
//! * every option is a `DbBuilder` knob of the same name (units last, as in Rust), plus
//!   `sync_interval` (seconds, for `sync="interval"`) and `str_keys` (this binding's own);
//!   an unknown name is a `TypeError`, as for any Python call, and a bad value an
//!   `InvalidArgumentError` (a `ValueError`) naming the option: nothing is opened;
//! * the defaults are the engine's (`DbBuilder` documents each and why), except none.

use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use crate::errors;

/// What `silt.Db(path, **options)` opens, and the binding's own option.
pub(crate) struct Parsed {
    pub(crate) builder: silt::DbBuilder,
    pub(crate) str_keys: bool,
    /// Opened read-only (the option `read_only`, also a `DbBuilder` knob).
    pub(crate) read_only: bool,
}

/// The option names, for the error message of an unknown one.
const NAMES: &[&str] = &[
    "sync",
    "sync_interval",
    "str_keys",
    "read_only",
    "create_if_missing",
    "paranoid_checks",
    "memtable_bytes",
    "immutable_memtables_max",
    "memtable_scan_flush_trigger",
    "memtable_bloom_ratio",
    "block_cache_bytes",
    "table_cache_tables",
    "block_size_bytes",
    "bloom_bits_per_key",
    "compression",
    "level_size_ratio",
    "level_base_bytes",
    "table_target_bytes",
    "l0_compaction_trigger",
    "l0_stall_tables",
    "l0_slowdown_tables",
    "background_threads",
    "wal_segment_bytes",
    "blob_threshold_bytes",
    "blob_gc_garbage_ratio",
    "stats_dump_period",
];

/// Parses `options` for the database at `path`.
pub(crate) fn parse(
    py: Python<'_>,
    path: std::path::PathBuf,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<Parsed> {
    let mut b = silt::Db::builder(path);
    let mut str_keys = false;
    let mut read_only = false;
    let mut sync: Option<String> = None;
    let mut interval: Option<f64> = None;
    if let Some(options) = options {
        for (name, v) in options.iter() {
            let name: String = name.extract()?;
            let bad = |what: &str| errors::invalid(py, format!("option {name}: {what}"));
            let int = |v: &Bound<'_, PyAny>| -> PyResult<u64> {
                if v.is_instance_of::<pyo3::types::PyBool>() {
                    return Err(bad("expected an int, got a bool"));
                }
                v.extract::<u64>()
                    .map_err(|_| bad("expected a non-negative int"))
            };
            let flag = |v: &Bound<'_, PyAny>| -> PyResult<bool> {
                v.extract::<bool>().map_err(|_| bad("expected a bool"))
            };
            let size = |v: &Bound<'_, PyAny>| -> PyResult<usize> {
                usize::try_from(int(v)?).map_err(|_| bad("too large"))
            };
            b = match name.as_str() {
                "sync" => {
                    sync = Some(
                        v.cast::<PyString>()
                            .map_err(|_| bad("expected \"none\", \"interval\" or \"full\""))?
                            .to_cow()?
                            .into_owned(),
                    );
                    b
                }
                "sync_interval" => {
                    let s: f64 = v
                        .extract()
                        .map_err(|_| bad("expected seconds as a number"))?;
                    if !(s.is_finite() && s > 0.0 && s <= 3600.0) {
                        return Err(bad("expected seconds in (0, 3600]"));
                    }
                    interval = Some(s);
                    b
                }
                "str_keys" => {
                    str_keys = flag(&v)?;
                    b
                }
                "read_only" => {
                    read_only = flag(&v)?;
                    b.read_only(read_only)
                }
                "create_if_missing" => b.create_if_missing(flag(&v)?),
                "paranoid_checks" => b.paranoid_checks(flag(&v)?),
                "memtable_bytes" => b.memtable_bytes(int(&v)?),
                "immutable_memtables_max" => b.immutable_memtables_max(size(&v)?),
                "memtable_scan_flush_trigger" => b.memtable_scan_flush_trigger(int(&v)?),
                "memtable_bloom_ratio" => {
                    let r: f64 = v.extract().map_err(|_| bad("expected a number"))?;
                    if !(0.0..=0.25).contains(&r) {
                        return Err(bad("expected a fraction in [0, 0.25]"));
                    }
                    b.memtable_bloom_ratio(r)
                }
                "block_cache_bytes" => b.block_cache_bytes(int(&v)?),
                "table_cache_tables" => b.table_cache_tables(size(&v)?),
                "block_size_bytes" => b.block_size_bytes(size(&v)?),
                "bloom_bits_per_key" => {
                    b.bloom_bits_per_key(u32::try_from(int(&v)?).map_err(|_| bad("too large"))?)
                }
                "compression" => b.compression(compression(&v).map_err(|m| bad(&m))?),
                "level_size_ratio" => b.level_size_ratio(int(&v)?),
                "level_base_bytes" => b.level_base_bytes(int(&v)?),
                "table_target_bytes" => b.table_target_bytes(int(&v)?),
                "l0_compaction_trigger" => b.l0_compaction_trigger(size(&v)?),
                "l0_stall_tables" => b.l0_stall_tables(size(&v)?),
                "l0_slowdown_tables" => b.l0_slowdown_tables(size(&v)?),
                "background_threads" => b.background_threads(size(&v)?),
                "wal_segment_bytes" => b.wal_segment_bytes(int(&v)?),
                "blob_threshold_bytes" => {
                    if v.is_none() {
                        b.blob_threshold_bytes(None)
                    } else {
                        b.blob_threshold_bytes(Some(size(&v)?))
                    }
                }
                "blob_gc_garbage_ratio" => {
                    let r: f64 = v.extract().map_err(|_| bad("expected a number"))?;
                    b.blob_gc_garbage_ratio(r)
                }
                "stats_dump_period" => {
                    if v.is_none() {
                        b.stats_dump_period(None)
                    } else {
                        let s: f64 = v
                            .extract()
                            .map_err(|_| bad("expected seconds as a number, or None"))?;
                        if !(s.is_finite() && s > 0.0 && s <= 86400.0) {
                            return Err(bad("expected seconds in (0, 86400], or None"));
                        }
                        b.stats_dump_period(Some(Duration::from_secs_f64(s)))
                    }
                }
                _ => {
                    return Err(errors::type_error(format!(
                        "silt.Db() got an unexpected keyword argument {name:?}; the options \
                         are: {}",
                        NAMES.join(", ")
                    )))
                }
            };
        }
    }
    let mode = match (sync.as_deref(), interval) {
        (None | Some("none"), None) => silt::SyncMode::None,
        (Some("full"), None) => silt::SyncMode::Full,
        (Some("interval"), s) => silt::SyncMode::Interval(
            s.map(Duration::from_secs_f64)
                .unwrap_or(silt::SyncMode::DEFAULT_INTERVAL),
        ),
        (_, Some(_)) => {
            return Err(errors::invalid(
                py,
                "option sync_interval: only with sync=\"interval\"",
            ))
        }
        (Some(other), None) => {
            return Err(errors::invalid(
                py,
                format!("option sync: expected \"none\", \"interval\" or \"full\", got {other:?}"),
            ))
        }
    };
    Ok(Parsed {
        builder: b.sync_mode(mode),
        str_keys,
        read_only,
    })
}

/// `"none"`, `"lz4"`, `"zstd"` (level 3) or `"zstd:N"`.
fn compression(v: &Bound<'_, PyAny>) -> Result<silt::Compression, String> {
    let expected = "expected \"none\", \"lz4\", \"zstd\" or \"zstd:LEVEL\"";
    let s: String = v.extract().map_err(|_| expected.to_string())?;
    match s.as_str() {
        "none" => Ok(silt::Compression::None),
        "lz4" => Ok(silt::Compression::Lz4),
        "zstd" => Ok(silt::Compression::Zstd(3)),
        other => match other.strip_prefix("zstd:").map(str::parse::<i32>) {
            // zstd's levels: ZSTD_minCLevel() (-131072) to ZSTD_maxCLevel() (22).
            Some(Ok(level)) if (-131_072..=22).contains(&level) => {
                Ok(silt::Compression::Zstd(level))
            }
            _ => Err(format!("{expected}, got {other:?}")),
        },
    }
}
