//! The workloads `run` knows: db_bench's (`Workload`), the seeds' presets (`PRESETS`,
//! each a base workload with its own sizes and pattern), and key patterns (`Pattern`).
//! Owns names and parameters only; the timed loops are in `child.rs`.

use super::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    FillSeq,
    FillRandom,
    Overwrite,
    FillSync,
    ReadRandom,
    ReadSeq,
    SeekRandom,
    Scan,
    Delete,
    Queue,
    Mixed,
    YcsbA,
    YcsbB,
    YcsbC,
    YcsbD,
    YcsbE,
    YcsbF,
    /// TPC-C-like transactions (`crate::tpcc`).
    Tpcc,
    /// The queue on the iibench table with three secondary indexes, in transactions
    /// (`crate::iib`, `run/iib.rs`).
    QueueIndexed,
    /// Bulk insert into the iibench table at `--batch` rows per transaction.
    TxnBatchSweep,
}

impl Workload {
    pub fn parse(s: &str) -> Result<Workload, String> {
        Ok(match s {
            "fillseq" => Workload::FillSeq,
            "fillrandom" => Workload::FillRandom,
            "overwrite" => Workload::Overwrite,
            "fillsync" => Workload::FillSync,
            "readrandom" => Workload::ReadRandom,
            "readseq" => Workload::ReadSeq,
            "seekrandom" => Workload::SeekRandom,
            "scan" | "range" => Workload::Scan,
            "delete" => Workload::Delete,
            "queue" => Workload::Queue,
            "mixed" => Workload::Mixed,
            "ycsba" => Workload::YcsbA,
            "ycsbb" => Workload::YcsbB,
            "ycsbc" => Workload::YcsbC,
            "ycsbd" => Workload::YcsbD,
            "ycsbe" => Workload::YcsbE,
            "ycsbf" => Workload::YcsbF,
            "tpcc" => Workload::Tpcc,
            "queue_indexed" => Workload::QueueIndexed,
            "txn_batch_sweep" => Workload::TxnBatchSweep,
            other => {
                return Err(format!(
                    "--workloads: unknown {other:?} (fillseq, fillrandom, overwrite, fillsync, \
                     readrandom, readseq, seekrandom, scan, delete, queue, mixed, ycsba, \
                     ycsbb, ycsbc, ycsbd, ycsbe, ycsbf, tpcc, queue_indexed, txn_batch_sweep; the seed \
                     workloads {}; or `seeds` \
                     for all of those)",
                    PRESETS
                        .iter()
                        .map(|p| format!("{} ({})", p.name, p.about))
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            }
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Workload::FillSeq => "fillseq",
            Workload::FillRandom => "fillrandom",
            Workload::Overwrite => "overwrite",
            Workload::FillSync => "fillsync",
            Workload::ReadRandom => "readrandom",
            Workload::ReadSeq => "readseq",
            Workload::SeekRandom => "seekrandom",
            Workload::Scan => "scan",
            Workload::Delete => "delete",
            Workload::Queue => "queue",
            Workload::Mixed => "mixed",
            Workload::YcsbA => "ycsba",
            Workload::YcsbB => "ycsbb",
            Workload::YcsbC => "ycsbc",
            Workload::YcsbD => "ycsbd",
            Workload::YcsbE => "ycsbe",
            Workload::YcsbF => "ycsbf",
            Workload::Tpcc => "tpcc",
            Workload::QueueIndexed => "queue_indexed",
            Workload::TxnBatchSweep => "txn_batch_sweep",
        }
    }

    pub(super) fn fills(self) -> bool {
        matches!(
            self,
            Workload::FillSeq | Workload::FillRandom | Workload::Overwrite | Workload::FillSync
        )
    }

    /// Only writes (puts or deletes) in the timed phase: `found` is `null`.
    pub(super) fn writes(self) -> bool {
        self.fills()
            || matches!(
                self,
                Workload::Delete
                    | Workload::Queue
                    | Workload::QueueIndexed
                    | Workload::TxnBatchSweep
            )
    }

    /// Takes `--batch` (the others write one key at a time).
    pub(super) fn batched(self) -> bool {
        self.fills()
            || matches!(
                self,
                Workload::Delete | Workload::QueueIndexed | Workload::TxnBatchSweep
            )
    }

    /// Writes anything in the timed phase (then a final flush and settle follow it).
    pub(super) fn mutates(self) -> bool {
        self.writes()
            || matches!(self, Workload::Mixed | Workload::Tpcc)
            || (self.ycsb() && self != Workload::YcsbC)
    }

    pub(super) fn ycsb(self) -> bool {
        matches!(
            self,
            Workload::YcsbA
                | Workload::YcsbB
                | Workload::YcsbC
                | Workload::YcsbD
                | Workload::YcsbE
                | Workload::YcsbF
        )
    }

    pub(super) fn preloads(self) -> bool {
        !matches!(
            self,
            Workload::FillSeq | Workload::FillRandom | Workload::FillSync | Workload::TxnBatchSweep
        )
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Pattern {
    Sequential,
    Random,
    Zipfian,
    /// YCSB D's request distribution (not a `--pattern`).
    Latest,
}

impl Pattern {
    pub(super) fn parse(s: &str) -> Result<Pattern, String> {
        match s {
            "sequential" | "seq" => Ok(Pattern::Sequential),
            "random" | "uniform" => Ok(Pattern::Random),
            "zipfian" | "zipf" => Ok(Pattern::Zipfian),
            other => Err(format!(
                "--pattern: unknown {other:?} (sequential, random, zipfian)"
            )),
        }
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Pattern::Sequential => "sequential",
            Pattern::Random => "random",
            Pattern::Zipfian => "zipfian",
            Pattern::Latest => "latest",
        }
    }
}

/// A workload of seeds 000 and 003 (TidesDB's benchtool against RocksDB), by name: one of
/// `run`'s own workloads with a key pattern, sizes or a range length of its own. The
/// other flags (`--num`, `--threads`, `--batch`, `--sync`, …) apply as usual; its JSON
/// lines carry the name as `workload` and the workload it is built on as `base_workload`.
#[derive(Clone, Copy, Debug)]
pub struct Preset {
    pub name: &'static str,
    pub base: Workload,
    pub pattern: Option<&'static str>,
    pub key_bytes: Option<usize>,
    pub value_bytes: Option<usize>,
    pub range_size: Option<usize>,
    /// `mixed`'s share of gets (the seeds' mixes are 50/50 whatever `--read-percent` says).
    pub read_percent: Option<u32>,
    /// The seeds' name for it.
    pub about: &'static str,
}

pub(super) const fn preset(name: &'static str, base: Workload, about: &'static str) -> Preset {
    Preset {
        name,
        base,
        pattern: None,
        key_bytes: None,
        value_bytes: None,
        range_size: None,
        read_percent: None,
        about,
    }
}

pub(super) const fn with_pattern(mut p: Preset, pattern: &'static str) -> Preset {
    p.pattern = Some(pattern);
    p
}

/// The seed 000/003 matrix (`--workloads seeds` names them all).
pub const PRESETS: &[Preset] = &[
    preset("seq_write", Workload::FillSeq, "sequential write"),
    with_pattern(
        preset("random_write", Workload::FillRandom, "random write"),
        "random",
    ),
    with_pattern(
        preset(
            "random_read",
            Workload::ReadRandom,
            "random read (after load)",
        ),
        "random",
    ),
    Preset {
        read_percent: Some(50),
        ..with_pattern(
            preset("random_mixed", Workload::Mixed, "mixed 50/50 read/write"),
            "random",
        )
    },
    with_pattern(
        preset("zipf_write", Workload::FillRandom, "zipfian write"),
        "zipfian",
    ),
    Preset {
        read_percent: Some(50),
        ..with_pattern(
            preset("zipf_mixed", Workload::Mixed, "zipfian mixed 50/50"),
            "zipfian",
        )
    },
    with_pattern(
        preset("random_delete", Workload::Delete, "delete"),
        "random",
    ),
    Preset {
        key_bytes: Some(256),
        value_bytes: Some(4096),
        ..with_pattern(
            preset(
                "large_value",
                Workload::FillRandom,
                "large values (256 B keys, 4 KiB values)",
            ),
            "random",
        )
    },
    Preset {
        value_bytes: Some(64),
        ..with_pattern(
            preset("small_value", Workload::FillRandom, "small values (64 B)"),
            "random",
        )
    },
    with_pattern(
        preset("random_seek", Workload::SeekRandom, "random seek"),
        "random",
    ),
    with_pattern(
        preset("seq_seek", Workload::SeekRandom, "sequential seek"),
        "sequential",
    ),
    with_pattern(
        preset("zipf_seek", Workload::SeekRandom, "zipfian seek"),
        "zipfian",
    ),
    Preset {
        range_size: Some(100),
        ..with_pattern(
            preset("range100", Workload::Scan, "range scans of 100 keys"),
            "random",
        )
    },
    Preset {
        range_size: Some(1000),
        ..with_pattern(
            preset("range1000", Workload::Scan, "range scans of 1000 keys"),
            "random",
        )
    },
    Preset {
        range_size: Some(100),
        ..with_pattern(
            preset("seq_range", Workload::Scan, "sequential range (100 keys)"),
            "sequential",
        )
    },
    preset("iterate", Workload::ReadSeq, "full iteration"),
];

/// A `--workloads` entry: one of `run`'s workloads, or a seed workload with its settings.
pub(super) fn resolve(
    name: &str,
    a: &RunArgs,
) -> Result<(Workload, Option<&'static str>, RunArgs), String> {
    if let Ok(w) = Workload::parse(name) {
        return Ok((w, None, a.clone()));
    }
    let p = PRESETS
        .iter()
        .find(|p| p.name == name)
        .ok_or_else(|| Workload::parse(name).unwrap_err())?;
    let mut args = a.clone();
    if let Some(x) = p.pattern {
        args.pattern = x.into();
    }
    if let Some(x) = p.key_bytes {
        args.key_bytes = x;
    }
    if let Some(x) = p.value_bytes {
        args.value_bytes = x;
    }
    if let Some(x) = p.range_size {
        args.range_size = x;
    }
    if let Some(x) = p.read_percent {
        args.read_percent = x;
    }
    Ok((p.base, Some(p.name), args))
}

/// `--workloads` as a list, with `seeds` expanded to every seed workload.
pub(super) fn workload_names(a: &RunArgs) -> Vec<String> {
    names(&a.workloads)
        .into_iter()
        .flat_map(|w| {
            if w == "seeds" {
                PRESETS.iter().map(|p| p.name.to_string()).collect()
            } else {
                vec![w]
            }
        })
        .collect()
}
