//! The child process of `run`: one cell. Opens the engine, loads what the workload needs
//! (untimed), runs the timed phase on worker threads with per-operation latencies, settles
//! (flush, compaction), and prints the cell's result as one JSON line.

use super::*;
use super::{keys::*, parent::*, worker::*, workload::*};

/// The hidden `cell` subcommand: runs one cell and prints its JSON line (a `failed` line if
/// it could not).
pub fn cell(c: CellArgs) -> Result<(), String> {
    let spec: CellSpec = serde_json::from_str(&c.spec).map_err(|e| format!("--spec: {e}"))?;
    let r = match run_cell(&spec) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("silt-bench cell {} {}: {e}", spec.engine, spec.workload);
            not_run(&spec, "failed", e)
        }
    };
    println!("{}", engine_json_line(&r));
    Ok(())
}

/// What the timed phase shares between workers.
pub(super) struct Ctx<'a> {
    pub(super) engine: &'a dyn Engine,
    pub(super) w: Workload,
    pub(super) pattern: Pattern,
    pub(super) zipf: Option<Arc<Zipf>>,
    pub(super) num: u64,
    pub(super) threads: usize,
    pub(super) key_bytes: usize,
    pub(super) batch: usize,
    pub(super) range_size: usize,
    /// `mixed`: percent of operations that are gets.
    pub(super) read_percent: u32,
    pub(super) values: &'a Values,
    pub(super) seed: u64,
    /// `delete` with `--pattern random`: the order keys are deleted in.
    pub(super) perm: Option<Perm>,
    /// `queue`: inserts done (the deleter's allowance); YCSB D/E: one past the newest
    /// inserted key (`latest`'s reference point).
    pub(super) progress: AtomicU64,
    /// YCSB D/E: the next new key to insert.
    pub(super) next_insert: AtomicU64,
    /// Set by a worker that failed, so a waiting partner gives up.
    pub(super) abort: AtomicBool,
}

impl Ctx<'_> {
    /// Thread `t`'s key stream.
    pub(super) fn keygen(&self, t: usize) -> KeyGen {
        let seed = self.seed.wrapping_mul(1_000_003).wrapping_add(t as u64);
        if let Some(perm) = self.perm {
            let (lo, hi) = slice(self.num, self.threads, t);
            let (lo, len) = if hi > lo {
                (lo, hi - lo)
            } else {
                (0, self.num)
            };
            return KeyGen::Perm {
                perm,
                lo,
                len,
                i: 0,
            };
        }
        match self.pattern {
            Pattern::Sequential => {
                let (lo, hi) = slice(self.num, self.threads, t);
                if hi > lo {
                    KeyGen::Seq {
                        lo,
                        len: hi - lo,
                        i: 0,
                    }
                } else {
                    KeyGen::Seq {
                        lo: 0,
                        len: self.num,
                        i: 0,
                    }
                }
            }
            Pattern::Random => KeyGen::Uniform {
                rng: Rng::new(seed),
                n: self.num,
            },
            Pattern::Zipfian | Pattern::Latest => KeyGen::Zipf {
                rng: Rng::new(seed),
                z: self.zipf.clone().expect("a zipf table for zipfian"),
            },
        }
    }
}

pub(super) fn load(
    engine: &dyn Engine,
    a: &RunArgs,
    values: &Values,
    pb: &indicatif::ProgressBar,
) -> Result<(), String> {
    const LOAD_BATCH: usize = 1000;
    let kb = a.key_bytes;
    let salt = a.seed ^ 0x10ad;
    let order: Box<dyn Iterator<Item = u64>> = if a.load_order == "sequential" {
        Box::new(0..a.num)
    } else {
        Box::new(permutation(a.num, a.seed))
    };
    let mut keybuf = vec![0u8; kb * LOAD_BATCH];
    let mut ids = Vec::with_capacity(LOAD_BATCH);
    let mut order = order.peekable();
    while order.peek().is_some() {
        ids.clear();
        ids.extend(order.by_ref().take(LOAD_BATCH));
        for (j, &i) in ids.iter().enumerate() {
            make_key(i, &mut keybuf[j * kb..(j + 1) * kb]);
        }
        let kvs: Vec<(&[u8], &[u8])> = ids
            .iter()
            .enumerate()
            .map(|(j, &i)| (&keybuf[j * kb..(j + 1) * kb], values.get(i, salt)))
            .collect();
        engine.write(&kvs)?;
        pb.inc(ids.len() as u64);
    }
    Ok(())
}

/// Copies the directory tree `from` into `to` (created; regular files and directories only:
/// every engine's database directory is just that).
fn copy_dir(from: &Path, to: &Path) -> Result<(), String> {
    let err = |p: &Path, e: std::io::Error| format!("copy {}: {e}", p.display());
    std::fs::create_dir_all(to).map_err(|e| err(to, e))?;
    for entry in std::fs::read_dir(from).map_err(|e| err(from, e))? {
        let entry = entry.map_err(|e| err(from, e))?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().map_err(|e| err(&src, e))?;
        if kind.is_dir() {
            copy_dir(&src, &dst)?;
        } else if kind.is_file() {
            std::fs::copy(&src, &dst).map_err(|e| err(&src, e))?;
        }
    }
    Ok(())
}

/// How long a cell waits for background compaction to settle after a load or a fill.
pub(super) const SETTLE_MAX: Duration = Duration::from_secs(120);

pub(super) fn run_cell(spec: &CellSpec) -> Result<EngineResult, String> {
    let a = &spec.args;
    validate(a)?;
    let w = Workload::parse(&spec.workload)?;
    match w {
        Workload::Tpcc => return super::tpcc::cell(spec),
        Workload::QueueIndexed => return super::iib::queue_cell(spec),
        Workload::TxnBatchSweep => return super::iib::sweep_cell(spec),
        _ => {}
    }
    let pattern = pattern_of(Some(w), a).expect("validated");
    let sync_full = spec.sync == "full" || w == Workload::FillSync;
    let threads = if w == Workload::Queue {
        2
    } else {
        spec.threads
    };
    let mut r = not_run(spec, "ok", String::new());
    r.error = None;
    let cfg = EngineConfig {
        dir: spec.dir.clone(),
        sync_full,
        cache_bytes: a.cache_bytes,
        fsync_delay_us: a.fsync_delay_us,
        fsync_delay_model: a.fsync_delay_model.clone(),
        threads,
    };
    let values = Values::new(a.seed, a.value_bytes);
    let entry_bytes = (a.key_bytes + a.value_bytes) as u64;
    // A load image (`--load-cache`): this cell's preload, already done by an earlier cell.
    let image = match &a.load_cache {
        Some(cache) if w.preloads() => Some(cache.join(format!(
            "{}-n{}-k{}-v{}-seed{}-{}-{}",
            spec.engine, a.num, a.key_bytes, a.value_bytes, a.seed, a.load_order, spec.sync
        ))),
        _ => None,
    };
    let t = Instant::now();
    let from_image = match &image {
        Some(img) if img.is_dir() => {
            copy_dir(img, &spec.dir)?;
            true
        }
        _ => false,
    };
    let mut engine = engine::open(&spec.engine, &cfg)?;

    if w.preloads() {
        if !from_image {
            let pb = bar(spec, "load", a.num);
            load(&*engine, a, &values, &pb)?;
            pb.set_message("flush");
            engine.flush()?;
            engine.wait_idle(SETTLE_MAX);
            pb.finish_and_clear();
            if let Some(img) = &image {
                // Closed, so the directory is a consistent database; then reopened, as a
                // cell that copies the image will be.
                drop(engine);
                let tmp = img.with_extension("tmp");
                let _ = std::fs::remove_dir_all(&tmp);
                copy_dir(&spec.dir, &tmp)?;
                std::fs::rename(&tmp, img)
                    .map_err(|e| format!("load image {}: {e}", img.display()))?;
                engine = engine::open(&spec.engine, &cfg)?;
            }
        }
        r.load_seconds = Some(t.elapsed().as_secs_f64());
        r.load_from_image = Some(from_image);
    }

    let ops_total = match w {
        Workload::FillSync => (a.num / 100).max(1),
        Workload::FillSeq | Workload::FillRandom | Workload::Overwrite => a.num,
        Workload::ReadRandom | Workload::SeekRandom | Workload::Scan | Workload::Mixed => {
            a.reads.unwrap_or(a.num)
        }
        Workload::ReadSeq => a.num, // informational: readseq reads what is there
        Workload::Delete => a.num,
        Workload::Queue => 2 * a.num,
        _ => a.reads.unwrap_or(a.num), // YCSB
    };
    let zipf = (matches!(pattern, Pattern::Zipfian | Pattern::Latest))
        .then(|| Arc::new(Zipf::new(a.num, a.zipf_theta)));
    let ctx = Ctx {
        engine: &*engine,
        w,
        pattern,
        zipf,
        num: a.num,
        threads,
        key_bytes: a.key_bytes,
        batch: if w.batched() { spec.batch } else { 1 },
        range_size: a.range_size,
        read_percent: a.read_percent,
        values: &values,
        seed: a.seed,
        perm: (w == Workload::Delete && pattern == Pattern::Random)
            .then(|| Perm::new(a.num, a.seed ^ 0xde1e_7e00)),
        progress: AtomicU64::new(if w == Workload::Queue { 0 } else { a.num }),
        next_insert: AtomicU64::new(a.num),
        abort: AtomicBool::new(false),
    };
    let quotas = if w == Workload::Queue {
        vec![a.num, a.num]
    } else {
        split(ops_total, threads)
    };
    let barrier = Barrier::new(quotas.len() + 1);
    // What the workers will `record`: one per write batch, else one per operation (the
    // queue's deleter records none).
    let expected_records: u64 = match w {
        Workload::Queue => a.num,
        _ => quotas.iter().map(|q| q.div_ceil(ctx.batch as u64)).sum(),
    };
    let (io0, disk0, cpu0, parts, cpu1) = std::thread::scope(|s| {
        let handles: Vec<_> = quotas
            .iter()
            .enumerate()
            .map(|(t, &q)| {
                let (ctx, barrier) = (&ctx, &barrier);
                s.spawn(move || worker(ctx, t, q, barrier))
            })
            .collect();
        let io0 = sysstat::io();
        let disk0 = sysstat::disk_written_bytes(&spec.dir);
        let cpu0 = sysstat::cpu();
        barrier.wait();
        let pb = bar(spec, "run", expected_records);
        while !handles.iter().all(|h| h.is_finished()) {
            pb.set_position(RECORDED.load(Ordering::Relaxed));
            std::thread::sleep(Duration::from_millis(100));
        }
        pb.finish_and_clear();
        let parts: Vec<Result<Part, String>> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("a worker panicked".into())))
            .collect();
        let cpu1 = sysstat::cpu();
        (io0, disk0, cpu0, parts, cpu1)
    });
    let parts = parts.into_iter().collect::<Result<Vec<_>, _>>()?;
    let inserts: u64 = parts.iter().map(|p| p.inserts).sum();
    let deletes: u64 = parts.iter().map(|p| p.deletes).sum();
    let wbytes: u64 = parts.iter().map(|p| p.wbytes).sum();

    let mut synced = true;
    if w.mutates() {
        let t = Instant::now();
        engine.flush()?;
        engine.wait_idle(SETTLE_MAX);
        synced = sysstat::syncfs(&spec.dir);
        r.post_seconds = Some(t.elapsed().as_secs_f64());
        r.post_cpu_s = match (sysstat::cpu_seconds(), cpu1) {
            (Some(b), Some(a)) => Some(b - a.user_s - a.sys_s),
            _ => None,
        };
    }
    let io1 = sysstat::io();
    let disk1 = sysstat::disk_written_bytes(&spec.dir);
    let db = sysstat::dir_bytes(&spec.dir);
    r.engine_stats = engine.stats();
    let live_keys = match w {
        Workload::Delete => a.num - distinct_keys(&ctx, &quotas),
        Workload::Queue => a.num + inserts - deletes,
        _ if w.preloads() => a.num + inserts,
        _ => distinct_keys(&ctx, &quotas),
    };
    drop(ctx);
    engine.close()?;

    let mut hist = latency_histogram();
    let mut ops = 0;
    let mut found = 0;
    for p in &parts {
        hist.add(&p.hist).map_err(|e| format!("histogram: {e}"))?;
        ops += p.ops;
        found += p.found;
    }
    let start = parts.iter().map(|p| p.start).min();
    let end = parts.iter().map(|p| p.end).max();
    let seconds = match (start, end) {
        (Some(s), Some(e)) => e.duration_since(s).as_secs_f64().max(1e-9),
        _ => 1e-9,
    };
    let us = |q: f64| Some(hist.value_at_quantile(q) as f64 / 1000.0);
    r.ops = Some(ops);
    r.found = (!w.writes()).then_some(found);
    r.seconds = Some(seconds);
    r.ops_per_sec = Some(ops as f64 / seconds);
    if !hist.is_empty() {
        r.p50_us = us(0.5);
        r.p95_us = us(0.95);
        r.p99_us = us(0.99);
        r.p999_us = us(0.999);
        r.max_us = Some(hist.max() as f64 / 1000.0);
    }
    if let (Some(c0), Some(c1)) = (cpu0, cpu1) {
        r.cpu_user_s = Some(c1.user_s - c0.user_s);
        r.cpu_sys_s = Some(c1.sys_s - c0.sys_s);
    }
    r.peak_rss_bytes = sysstat::peak_rss_bytes();
    if let (Some(i0), Some(i1)) = (io0, io1) {
        let w = i1.write_bytes.saturating_sub(i0.write_bytes);
        let c = i1
            .cancelled_write_bytes
            .saturating_sub(i0.cancelled_write_bytes);
        r.proc_write_bytes = Some(w);
        r.cancelled_write_bytes = Some(c);
        r.device_write_bytes = Some(w.saturating_sub(c));
        r.syscall_write_bytes = Some(i1.wchar.saturating_sub(i0.wchar));
    }
    if let (Some(d0), Some(d1), true) = (disk0, disk1, synced) {
        r.disk_write_bytes = Some(d1.saturating_sub(d0));
    }
    r.delayed_fsyncs = shim_delayed_calls();
    if matches!(w, Workload::Queue | Workload::YcsbD | Workload::YcsbE) {
        r.inserted = Some(inserts);
    }
    if matches!(w, Workload::Delete | Workload::Queue) {
        r.deleted = Some(deletes);
    }
    if w == Workload::Queue {
        let mut worst: Vec<u64> = Vec::new();
        for p in &parts {
            if worst.len() < p.worst_ns.len() {
                worst.resize(p.worst_ns.len(), 0);
            }
            for (w, &x) in worst.iter_mut().zip(&p.worst_ns) {
                *w = (*w).max(x);
            }
        }
        // One entry per elapsed (started) second of the timed phase.
        let secs = (seconds.ceil() as usize).max(1);
        if worst.len() < secs {
            worst.resize(secs, 0);
        }
        r.max_delete_us = Some(worst.iter().copied().max().unwrap_or(0) as f64 / 1000.0);
        r.worst_delete_us_per_sec = Some(worst.iter().map(|&x| x as f64 / 1000.0).collect());
    }
    let logical = wbytes;
    r.logical_write_bytes = Some(logical);
    r.live_bytes = Some(live_keys * entry_bytes);
    if let Some((len, alloc)) = db {
        r.db_bytes = Some(len);
        r.db_alloc_bytes = Some(alloc);
    }
    if logical > 0 {
        let amp = |b: Option<u64>| b.map(|d| d as f64 / logical as f64);
        r.write_amp = amp(r.device_write_bytes);
        r.syscall_write_amp = amp(r.syscall_write_bytes);
        r.disk_write_amp = amp(r.disk_write_bytes);
    }
    if live_keys > 0 {
        r.space_amp = r
            .db_bytes
            .map(|d| d as f64 / (live_keys * entry_bytes) as f64);
    }
    Ok(r)
}

/// Distinct keys a fill wrote: its key streams regenerated (after timing) into a bitmap.
pub(super) fn distinct_keys(ctx: &Ctx<'_>, quotas: &[u64]) -> u64 {
    let mut bits = vec![0u64; (ctx.num as usize).div_ceil(64)];
    for (t, &q) in quotas.iter().enumerate() {
        let mut g = ctx.keygen(t);
        for _ in 0..q {
            let k = g.next();
            bits[(k / 64) as usize] |= 1 << (k % 64);
        }
    }
    bits.iter().map(|w| u64::from(w.count_ones())).sum()
}
