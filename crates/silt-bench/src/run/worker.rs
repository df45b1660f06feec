//! The timed phase of a cell: one worker per thread runs its quota of the workload's
//! operations against the engine, recording each operation's latency, and the progress
//! bar that shows them.

use super::*;
use super::{child::*, keys::*, workload::*};

/// What one worker measured.
pub(super) struct Part {
    pub(super) hist: Histogram<u64>,
    pub(super) ops: u64,
    pub(super) found: u64,
    pub(super) inserts: u64,
    pub(super) deletes: u64,
    /// Logical bytes written: key + value per put, key per delete.
    pub(super) wbytes: u64,
    /// `queue`'s deleter: the worst delete latency (ns) in each elapsed second.
    pub(super) worst_ns: Vec<u64>,
    pub(super) start: Instant,
    pub(super) end: Instant,
}

pub(super) fn record(hist: &mut Histogram<u64>, t0: &mut Instant) {
    let t1 = Instant::now();
    hist.saturating_record((t1.duration_since(*t0).as_nanos() as u64).max(1));
    *t0 = t1;
    tick();
}

/// Operations recorded so far by this (cell) process's workers, for the progress bar;
/// each worker adds its count every 1024 operations, so the bar costs no shared write per
/// operation.
pub(super) static RECORDED: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static PENDING: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

pub(super) fn tick() {
    PENDING.with(|p| {
        let n = p.get() + 1;
        if n >= 1024 {
            RECORDED.fetch_add(n, Ordering::Relaxed);
            p.set(0);
        } else {
            p.set(n);
        }
    });
}

pub(super) fn flush_ticks() {
    PENDING.with(|p| RECORDED.fetch_add(p.replace(0), Ordering::Relaxed));
}

/// A progress bar on stderr for one phase of a cell (hidden when stderr is not a
/// terminal, so logs and tests see none).
pub(super) fn bar(spec: &CellSpec, phase: &str, len: u64) -> indicatif::ProgressBar {
    let target = if spec.args.quiet {
        indicatif::ProgressDrawTarget::hidden()
    } else {
        indicatif::ProgressDrawTarget::stderr_with_hz(4)
    };
    let pb = indicatif::ProgressBar::with_draw_target(Some(len), target);
    pb.set_style(
        indicatif::ProgressStyle::with_template(
            "{prefix} {wide_bar} {human_pos}/{human_len} {per_sec} eta {eta}",
        )
        .expect("a valid template"),
    );
    pb.set_prefix(format!(
        "[{}/{}] {} {} {phase}",
        spec.place.0,
        spec.place.1,
        spec.engine,
        spec.label.as_deref().unwrap_or(&spec.workload)
    ));
    pb
}

pub(super) fn worker(
    ctx: &Ctx<'_>,
    t: usize,
    quota: u64,
    barrier: &Barrier,
) -> Result<Part, String> {
    let r = worker_inner(ctx, t, quota, barrier);
    flush_ticks();
    if r.is_err() {
        ctx.abort.store(true, Ordering::Release);
    }
    r
}

/// YCSB's operations.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    Read,
    Update,
    Insert,
    Scan,
    ReadModifyWrite,
}

/// The operation of YCSB workload `w` for a uniform draw `u` in `[0, 1)`.
pub(super) fn ycsb_op(w: Workload, u: f64) -> Op {
    let (first, p, second) = match w {
        Workload::YcsbA => (Op::Read, 0.5, Op::Update),
        Workload::YcsbB => (Op::Read, 0.95, Op::Update),
        Workload::YcsbC => (Op::Read, 1.0, Op::Read),
        Workload::YcsbD => (Op::Read, 0.95, Op::Insert),
        Workload::YcsbE => (Op::Scan, 0.95, Op::Insert),
        Workload::YcsbF => (Op::Read, 0.5, Op::ReadModifyWrite),
        other => unreachable!("{other:?} is not YCSB"),
    };
    if u < p {
        first
    } else {
        second
    }
}

pub(super) fn worker_inner(
    ctx: &Ctx<'_>,
    t: usize,
    quota: u64,
    barrier: &Barrier,
) -> Result<Part, String> {
    let mut hist = latency_histogram();
    let mut keys = ctx.keygen(t);
    let kb = ctx.key_bytes;
    let mut keybuf = vec![0u8; kb * ctx.batch];
    let mut seeker = match ctx.w {
        Workload::SeekRandom => Some(ctx.engine.seeker()?),
        _ => None,
    };
    let salt = ctx.seed ^ ctx.w as u64;
    let mut ops = 0u64;
    let mut found = 0u64;
    let mut inserts = 0u64;
    let mut deletes = 0u64;
    let mut wbytes = 0u64;
    let mut worst_ns: Vec<u64> = Vec::new();
    let entry_bytes = (kb + ctx.values.len) as u64;
    barrier.wait();
    let start = Instant::now();
    let mut t0 = start;
    let mut result = Ok(());
    match ctx.w {
        Workload::FillSeq | Workload::FillRandom | Workload::Overwrite | Workload::FillSync => {
            while ops < quota {
                let m = (quota - ops).min(ctx.batch as u64) as usize;
                let r = if m == 1 {
                    let i = keys.next();
                    make_key(i, &mut keybuf[..kb]);
                    ctx.engine
                        .write(&[(&keybuf[..kb], ctx.values.get(i, salt))])
                } else {
                    let ids: Vec<u64> = (0..m).map(|_| keys.next()).collect();
                    for (j, &i) in ids.iter().enumerate() {
                        make_key(i, &mut keybuf[j * kb..(j + 1) * kb]);
                    }
                    let kvs: Vec<(&[u8], &[u8])> = ids
                        .iter()
                        .enumerate()
                        .map(|(j, &i)| (&keybuf[j * kb..(j + 1) * kb], ctx.values.get(i, salt)))
                        .collect();
                    ctx.engine.write(&kvs)
                };
                if let Err(e) = r {
                    result = Err(e);
                    break;
                }
                record(&mut hist, &mut t0);
                ops += m as u64;
                wbytes += m as u64 * entry_bytes;
            }
        }
        Workload::Delete => {
            while ops < quota {
                let m = (quota - ops).min(ctx.batch as u64) as usize;
                for j in 0..m {
                    make_key(keys.next(), &mut keybuf[j * kb..(j + 1) * kb]);
                }
                let ks: Vec<&[u8]> = keybuf[..m * kb].chunks(kb).collect();
                if let Err(e) = ctx.engine.delete(&ks) {
                    result = Err(e);
                    break;
                }
                record(&mut hist, &mut t0);
                ops += m as u64;
                deletes += m as u64;
                wbytes += (m * kb) as u64;
            }
        }
        Workload::Queue if t == 0 => {
            // The inserter: num, num+1, … (after the preloaded 0..num).
            while ops < quota {
                let i = ctx.num + ops;
                make_key(i, &mut keybuf[..kb]);
                if let Err(e) = ctx
                    .engine
                    .write(&[(&keybuf[..kb], ctx.values.get(i, salt))])
                {
                    result = Err(e);
                    break;
                }
                record(&mut hist, &mut t0);
                ops += 1;
                inserts += 1;
                wbytes += entry_bytes;
                ctx.progress.store(ops, Ordering::Release);
            }
        }
        Workload::Queue => {
            // The deleter: 0, 1, …, its d-th delete only after the inserter's d-th insert.
            'outer: while ops < quota {
                let mut spins = 0u32;
                while ctx.progress.load(Ordering::Acquire) <= ops {
                    if ctx.abort.load(Ordering::Acquire) {
                        break 'outer;
                    }
                    spins += 1;
                    if spins < 64 {
                        std::hint::spin_loop();
                    } else {
                        std::thread::yield_now();
                    }
                }
                make_key(ops, &mut keybuf[..kb]);
                t0 = Instant::now();
                if let Err(e) = ctx.engine.single_delete(&[&keybuf[..kb]]) {
                    result = Err(e);
                    break;
                }
                let now = Instant::now();
                let ns = (now.duration_since(t0).as_nanos() as u64).max(1);
                hist.saturating_record(ns);
                let sec = now.duration_since(start).as_secs() as usize;
                if worst_ns.len() <= sec {
                    worst_ns.resize(sec + 1, 0);
                }
                worst_ns[sec] = worst_ns[sec].max(ns);
                ops += 1;
                deletes += 1;
                wbytes += kb as u64;
            }
        }
        w if w.ycsb() => {
            let z = ctx.zipf.clone().expect("a zipf table for YCSB");
            let mut rng = Rng::new(ctx.seed ^ 0x7c5b ^ (t as u64).wrapping_mul(0x9e37));
            while ops < quota {
                let op = ycsb_op(w, rng.unit());
                let k = match op {
                    Op::Insert => ctx.next_insert.fetch_add(1, Ordering::Relaxed),
                    _ if w == Workload::YcsbD => {
                        // latest: rank r is the r-th newest record.
                        let newest = ctx.progress.load(Ordering::Acquire).max(1) - 1;
                        newest - z.rank(rng.unit()).min(newest)
                    }
                    _ => scrambled(&z, &mut rng),
                };
                make_key(k, &mut keybuf[..kb]);
                let key = &keybuf[..kb];
                let r = match op {
                    Op::Read => ctx.engine.get(key).map(|v| found += u64::from(v.is_some())),
                    Op::Update => ctx
                        .engine
                        .write(&[(key, ctx.values.get(k, salt ^ ops))])
                        .map(|()| wbytes += entry_bytes),
                    Op::Insert => ctx
                        .engine
                        .write(&[(key, ctx.values.get(k, salt))])
                        .map(|()| {
                            wbytes += entry_bytes;
                            inserts += 1;
                            ctx.progress.fetch_max(k + 1, Ordering::AcqRel);
                        }),
                    Op::Scan => {
                        let len = 1 + rng.below(ctx.range_size as u64) as usize;
                        ctx.engine.scan(key, len).map(|n| found += n as u64)
                    }
                    Op::ReadModifyWrite => ctx.engine.get(key).and_then(|v| {
                        found += u64::from(v.is_some());
                        wbytes += entry_bytes;
                        ctx.engine.write(&[(key, ctx.values.get(k, salt ^ ops))])
                    }),
                };
                if let Err(e) = r {
                    result = Err(e);
                    break;
                }
                record(&mut hist, &mut t0);
                ops += 1;
            }
        }
        Workload::Mixed => {
            let mut rng = Rng::new(ctx.seed ^ 0x3d1c ^ (t as u64).wrapping_mul(0x9e37));
            while ops < quota {
                let i = keys.next();
                make_key(i, &mut keybuf[..kb]);
                let key = &keybuf[..kb];
                let r = if rng.below(100) < u64::from(ctx.read_percent) {
                    ctx.engine.get(key).map(|v| found += u64::from(v.is_some()))
                } else {
                    ctx.engine
                        .write(&[(key, ctx.values.get(i, salt ^ ops))])
                        .map(|()| wbytes += entry_bytes)
                };
                if let Err(e) = r {
                    result = Err(e);
                    break;
                }
                record(&mut hist, &mut t0);
                ops += 1;
            }
        }
        Workload::ReadRandom => {
            while ops < quota {
                make_key(keys.next(), &mut keybuf[..kb]);
                match ctx.engine.get(&keybuf[..kb]) {
                    Ok(v) => found += u64::from(v.is_some()),
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                }
                record(&mut hist, &mut t0);
                ops += 1;
            }
        }
        Workload::SeekRandom => {
            let s = seeker.as_mut().expect("made above");
            while ops < quota {
                make_key(keys.next(), &mut keybuf[..kb]);
                match s.seek(&keybuf[..kb]) {
                    Ok(hit) => found += u64::from(hit),
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                }
                record(&mut hist, &mut t0);
                ops += 1;
            }
        }
        Workload::Scan => {
            while ops < quota {
                make_key(keys.next(), &mut keybuf[..kb]);
                match ctx.engine.scan(&keybuf[..kb], ctx.range_size) {
                    Ok(n) => found += n as u64,
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                }
                record(&mut hist, &mut t0);
                ops += 1;
            }
        }
        Workload::ReadSeq => {
            let (lo, hi) = slice(ctx.num, ctx.threads, t);
            if hi > lo {
                let lo_key = (t > 0).then(|| key(lo, kb));
                let hi_key = (t + 1 < ctx.threads).then(|| key(hi, kb));
                let r = ctx
                    .engine
                    .for_each(lo_key.as_deref(), hi_key.as_deref(), &mut |_, _| {
                        record(&mut hist, &mut t0)
                    });
                match r {
                    Ok(n) => {
                        ops = n;
                        found = n;
                    }
                    Err(e) => result = Err(e),
                }
            }
        }
        w => unreachable!("{w:?} has an arm above"),
    }
    let end = Instant::now();
    drop(seeker);
    result?;
    Ok(Part {
        hist,
        ops,
        found,
        inserts,
        deletes,
        wbytes,
        worst_ns,
        start,
        end,
    })
}
