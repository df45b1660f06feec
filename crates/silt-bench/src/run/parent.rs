//! The parent process of `run`: validates the flags, expands the matrix into cells and runs
//! each in a child process of its own (so its RSS, CPU and I/O counters are its own),
//! printing results as they come. Knows nothing of how a cell is timed.

use super::workload::*;
use super::*;

pub(super) fn validate(a: &RunArgs) -> Result<(), String> {
    if !["table", "json", "csv"].contains(&a.format.as_str()) {
        return Err(format!(
            "--format: {:?} is not table, json or csv",
            a.format
        ));
    }
    if a.num == 0 {
        return Err("--num must be positive".into());
    }
    if a.key_bytes == 0 || (a.key_bytes < 8 && a.num > 1u64 << (8 * a.key_bytes)) {
        return Err(format!(
            "--key-bytes {} cannot hold {} distinct keys",
            a.key_bytes, a.num
        ));
    }
    if a.range_size == 0 || a.reads == Some(0) {
        return Err("--range-size and --reads must be positive".into());
    }
    for b in names(&a.batch) {
        match b.parse::<usize>() {
            Ok(n) if n > 0 => {}
            _ => return Err(format!("--batch: {b:?} is not a positive count")),
        }
    }
    Pattern::parse(&a.pattern)?;
    if !(a.zipf_theta > 0.0 && a.zipf_theta < 1.0) {
        return Err("--zipf-theta must be in (0, 1)".into());
    }
    if a.load_order != "random" && a.load_order != "sequential" {
        return Err("--load-order: random or sequential".into());
    }
    if a.fsync_delay_model != "merged" && a.fsync_delay_model != "serial" {
        return Err("--fsync-delay-model: merged or serial".into());
    }
    for s in names(&a.sync) {
        if s != "none" && s != "full" {
            return Err(format!("--sync: unknown mode {s:?} (none, full)"));
        }
    }
    for t in names(&a.threads) {
        match t.parse::<usize>() {
            Ok(n) if n > 0 => {}
            _ => return Err(format!("--threads: {t:?} is not a positive count")),
        }
    }
    for w in workload_names(a) {
        let (_, _, args) = resolve(&w, a)?;
        if args.key_bytes < 8 && a.num > 1u64 << (8 * args.key_bytes) {
            return Err(format!("{w}: --key-bytes too small for --num"));
        }
    }
    if a.warehouses == 0 || a.warehouses > 10_000 {
        return Err("--warehouses must be in 1..=10000".into());
    }
    if a.duration.is_nan() || a.duration <= 0.0 {
        return Err("--duration must be positive".into());
    }
    if a.tpcc_scale.is_nan() || a.tpcc_scale <= 0.0 || a.tpcc_scale > 1.0 {
        return Err("--tpcc-scale must be in (0, 1]".into());
    }
    if a.read_percent > 100 {
        return Err("--read-percent must be in 0..=100".into());
    }
    if names(&a.engines).is_empty() || names(&a.workloads).is_empty() || names(&a.batch).is_empty()
    {
        return Err("--engines, --workloads and --batch must name at least one".into());
    }
    Ok(())
}

/// A result for a cell that did not run (or whose child failed).
pub(super) fn not_run(spec: &CellSpec, status: &str, error: String) -> EngineResult {
    let a = &spec.args;
    let w = Workload::parse(&spec.workload).ok();
    let base = w.map_or(spec.workload.clone(), |w| w.name().to_string());
    EngineResult {
        engine: spec.engine.clone(),
        workload: spec.label.clone().unwrap_or_else(|| base.clone()),
        status: status.into(),
        error: Some(error),
        threads: spec.threads,
        batch: spec.batch,
        sync: if w == Some(Workload::FillSync) {
            "full".into()
        } else {
            spec.sync.clone()
        },
        pattern: pattern_of(w, a).map_or(a.pattern.clone(), |p| p.name().to_string()),
        num: a.num,
        key_bytes: a.key_bytes,
        value_bytes: a.value_bytes,
        range_size: matches!(w, Some(Workload::Scan | Workload::YcsbE)).then_some(a.range_size),
        cache_bytes: a.cache_bytes,
        fsync_delay_us: a.fsync_delay_us,
        ops: None,
        found: None,
        seconds: None,
        ops_per_sec: None,
        p50_us: None,
        p95_us: None,
        p99_us: None,
        p999_us: None,
        max_us: None,
        cpu_user_s: None,
        cpu_sys_s: None,
        peak_rss_bytes: None,
        device_write_bytes: None,
        proc_write_bytes: None,
        cancelled_write_bytes: None,
        syscall_write_bytes: None,
        disk_write_bytes: None,
        logical_write_bytes: None,
        live_bytes: None,
        db_bytes: None,
        db_alloc_bytes: None,
        write_amp: None,
        space_amp: None,
        syscall_write_amp: None,
        disk_write_amp: None,
        load_seconds: None,
        post_seconds: None,
        post_cpu_s: None,
        repeat: spec.repeat,
        date: spec.date.clone(),
        engine_stats: None,
        inserted: None,
        deleted: None,
        worst_delete_us_per_sec: None,
        max_delete_us: None,
        base_workload: spec.label.is_some().then_some(base),
        read_percent: (w == Some(Workload::Mixed)).then_some(a.read_percent),
        delayed_fsyncs: None,
        load_from_image: None,
        warehouses: (w == Some(Workload::Tpcc)).then_some(a.warehouses),
        tpmc: None,
        nopm: None,
        abort_rate: None,
        tpcc: None,
        inserted_per_sec: None,
        txn: None,
    }
}

/// How many fsyncs the preloaded fsync-delay shim delayed in this process (`None` without
/// the shim).
pub(super) fn shim_delayed_calls() -> Option<u64> {
    // SAFETY: dlsym with a NUL-terminated name; the symbol, when the shim is preloaded, is
    // `uint64_t silt_fsync_delay_calls(void)`.
    unsafe {
        let f = libc::dlsym(libc::RTLD_DEFAULT, c"silt_fsync_delay_calls".as_ptr());
        if f.is_null() {
            return None;
        }
        let f: extern "C" fn() -> u64 = std::mem::transmute(f);
        Some(f())
    }
}

pub(super) fn pattern_of(w: Option<Workload>, a: &RunArgs) -> Option<Pattern> {
    match w? {
        Workload::FillSeq
        | Workload::ReadSeq
        | Workload::Queue
        | Workload::QueueIndexed
        | Workload::TxnBatchSweep => Some(Pattern::Sequential),
        Workload::YcsbD => Some(Pattern::Latest),
        w if w.ycsb() => Some(Pattern::Zipfian),
        _ => Pattern::parse(&a.pattern).ok(),
    }
}

pub fn run(a: RunArgs) -> Result<(), String> {
    validate(&a)?;
    if a.format == "csv" {
        println!("{}", csv_header());
    }
    let format = a.format.clone();
    let results = run_matrix(&a, &mut |r| match format.as_str() {
        "json" => println!("{}", engine_json_line(r)),
        "csv" => println!("{}", csv_row(r)),
        _ => {}
    })?;
    if a.format == "table" {
        println!("{}", engine_table(&results));
    }
    let failed = results.iter().filter(|r| r.status == "failed").count();
    if failed > 0 {
        return Err(format!("{failed} cell(s) failed"));
    }
    Ok(())
}

/// The fsync-delay shim (`shim/fsync_delay.c`, built by `build.rs`).
pub(super) const FSYNC_DELAY_SHIM: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/fsync_delay.so"));

/// Runs every cell of `a` (each in a child process), calling `each` with each result as it
/// arrives; returns them all. Failed cells are results (`status` "failed"), not errors.
pub fn run_matrix(
    a: &RunArgs,
    each: &mut dyn FnMut(&EngineResult),
) -> Result<Vec<EngineResult>, String> {
    run_matrix_except(a, &|_| false, each)
}

/// A cell of a matrix, as its result line names it: `workload` is the preset's name where
/// there is one (`EngineResult::workload`).
#[derive(Clone, Copy, Debug)]
pub struct CellKey<'a> {
    pub engine: &'a str,
    pub workload: &'a str,
    pub sync: &'a str,
    pub threads: usize,
    pub batch: usize,
}

/// [`run_matrix`] without the cells `skip` names (a resumed suite's finished ones): they
/// are neither run nor reported.
pub fn run_matrix_except(
    a: &RunArgs,
    skip: &dyn Fn(&CellKey<'_>) -> bool,
    each: &mut dyn FnMut(&EngineResult),
) -> Result<Vec<EngineResult>, String> {
    validate(a)?;
    let engines = names(&a.engines);
    let workloads = workload_names(a);
    let syncs = names(&a.sync);
    let threads: Vec<usize> = names(&a.threads)
        .iter()
        .map(|t| t.parse().expect("validated"))
        .collect();
    let batches: Vec<usize> = names(&a.batch)
        .iter()
        .map(|b| b.parse().expect("validated"))
        .collect();
    let _tmp;
    let base = match &a.dir {
        Some(d) => {
            std::fs::create_dir_all(d).map_err(|e| format!("--dir {}: {e}", d.display()))?;
            d.clone()
        }
        None => {
            let t = tempfile::Builder::new()
                .prefix("silt-bench-run-")
                .tempdir()
                .map_err(|e| format!("temporary directory: {e}"))?;
            let p = t.path().to_path_buf();
            _tmp = t;
            p
        }
    };
    // Peers get --fsync-delay-us through the LD_PRELOAD shim (silt through DelayFs).
    let shim = if a.fsync_delay_us > 0 && engines.iter().any(|e| e != "silt") {
        if FSYNC_DELAY_SHIM.is_empty() {
            return Err(
                "--fsync-delay-us for peer engines needs the LD_PRELOAD shim, which \
                        is only built on Linux"
                    .into(),
            );
        }
        let path = base.join(format!("fsync_delay-{}.so", std::process::id()));
        std::fs::write(&path, FSYNC_DELAY_SHIM)
            .map_err(|e| format!("write {}: {e}", path.display()))?;
        Some(path)
    } else {
        None
    };
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let date = crate::output::today();
    let mut cells = Vec::new();
    for repeat in 0..a.repeat.max(1) {
        for e in &engines {
            for w in &workloads {
                let (wl, label, args) = resolve(w, a)?;
                // queue and queue_indexed are always one inserter and one deleter, and
                // txn_batch_sweep one inserter; only the fills, delete, queue_indexed and
                // txn_batch_sweep take --batch.
                let ts = match wl {
                    Workload::Queue | Workload::QueueIndexed => vec![2],
                    Workload::TxnBatchSweep => vec![1],
                    _ => threads.clone(),
                };
                let bs = if wl.batched() {
                    batches.clone()
                } else {
                    vec![1]
                };
                for s in &syncs {
                    for &t in &ts {
                        for &b in &bs {
                            let key = CellKey {
                                engine: e,
                                workload: label.unwrap_or(wl.name()),
                                sync: s,
                                threads: t,
                                batch: b,
                            };
                            if skip(&key) {
                                continue;
                            }
                            cells.push(CellSpec {
                                args: args.clone(),
                                engine: e.clone(),
                                workload: wl.name().to_string(),
                                sync: s.clone(),
                                threads: t,
                                batch: b,
                                dir: PathBuf::new(),
                                repeat,
                                date: date.clone(),
                                label: label.map(String::from),
                                place: (0, 0),
                                shim: (e != "silt").then(|| shim.clone()).flatten(),
                            });
                        }
                    }
                }
            }
        }
    }
    let mut results = Vec::new();
    let mut warned = std::collections::HashSet::new();
    let total = cells.len();
    for (i, mut spec) in cells.into_iter().enumerate() {
        spec.place = (i + 1, total);
        let r = match engine::availability(&spec.engine) {
            Err(why) => {
                if warned.insert(spec.engine.clone()) {
                    eprintln!("silt-bench run: {} unavailable: {why}", spec.engine);
                }
                not_run(&spec, "unavailable", why)
            }
            Ok(()) => {
                spec.dir = base.join(format!(
                    "{}-{}-{}-t{}-b{}-r{}-{}",
                    spec.engine,
                    spec.label.as_deref().unwrap_or(&spec.workload),
                    spec.sync,
                    spec.threads,
                    spec.batch,
                    spec.repeat,
                    std::process::id()
                ));
                let _ = std::fs::remove_dir_all(&spec.dir);
                let r = run_child(&exe, &spec);
                if !a.keep {
                    let _ = std::fs::remove_dir_all(&spec.dir);
                }
                r
            }
        };
        if r.status != "unavailable" && !a.quiet {
            eprintln!("[{}/{}] {}", i + 1, total, progress(&r));
        }
        each(&r);
        results.push(r);
    }
    if let Some(p) = shim {
        let _ = std::fs::remove_file(p);
    }
    Ok(results)
}

pub fn progress(r: &EngineResult) -> String {
    let head = format!(
        "{} {} sync={} threads={} batch={}",
        r.engine, r.workload, r.sync, r.threads, r.batch
    );
    if r.status != "ok" {
        return format!(
            "{head}: {} ({})",
            r.status,
            r.error.as_deref().unwrap_or("")
        );
    }
    let f = |x: Option<f64>, d: usize| x.map_or("null".into(), |v| format!("{v:.d$}"));
    format!(
        "{head}: {} ops in {} s, {} ops/s, p50 {} µs, p99 {} µs, max {} µs, cpu {}+{} s, \
         write amp {}, space amp {}",
        r.ops.unwrap_or(0),
        f(r.seconds, 2),
        f(r.ops_per_sec, 0),
        f(r.p50_us, 1),
        f(r.p99_us, 1),
        f(r.max_us, 0),
        f(r.cpu_user_s, 2),
        f(r.cpu_sys_s, 2),
        f(r.write_amp, 2),
        f(r.space_amp, 2),
    )
}

pub(super) fn run_child(exe: &Path, spec: &CellSpec) -> EngineResult {
    let json = serde_json::to_string(spec).expect("a spec serializes");
    let mut cmd = Command::new(exe);
    cmd.arg("cell")
        .arg("--spec")
        .arg(&json)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if let Some(shim) = &spec.shim {
        cmd.env("LD_PRELOAD", shim)
            .env("SILT_FSYNC_DELAY_US", spec.args.fsync_delay_us.to_string())
            .env("SILT_FSYNC_DELAY_MODEL", &spec.args.fsync_delay_model);
    }
    let out = cmd.output();
    let out = match out {
        Ok(o) => o,
        Err(e) => {
            return not_run(
                spec,
                "failed",
                format!("cannot start {}: {e}", exe.display()),
            )
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'));
    match line.map(serde_json::from_str::<EngineResult>) {
        Some(Ok(r)) => r,
        Some(Err(e)) => not_run(spec, "failed", format!("unreadable result line: {e}")),
        None => not_run(
            spec,
            "failed",
            format!("the cell process exited with {} and no result", out.status),
        ),
    }
}
