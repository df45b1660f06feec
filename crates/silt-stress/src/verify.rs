//! Checks a database against its expected state: every key of every column family holds
//! exactly what the expected state says (or, for a write in flight at the crash, the new
//! values — all of that write's, never part), iteration agrees with point reads, and no
//! value is foreign or garbled.

use std::collections::BTreeMap;

use silt::{ColumnFamily, Db, Error};

use crate::expected::{decode, key_bytes, slot, Expected, CFS, CF_OP, VOLATILE_CF};

/// What a verification found.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Keys checked (point reads plus keys seen by full scans).
    pub keys_checked: u64,
    /// Every violation, described.
    pub violations: Vec<String>,
    /// Per thread: whether its write in flight turned out applied.
    pub applied: Vec<bool>,
}

/// The column-family handles of the database; `None` for the volatile family if it does
/// not exist.
pub fn handles(db: &Db) -> Result<Vec<Option<ColumnFamily>>, Error> {
    let mut out = Vec::new();
    for (i, name) in CFS.iter().enumerate() {
        match db.cf(name) {
            Ok(cf) => out.push(Some(cf)),
            Err(Error::ColumnFamilyNotFound(_)) if i == VOLATILE_CF => out.push(None),
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// Opens (creating) the column families the workload needs, as the expected state says.
pub fn ensure_cfs(db: &Db, exp: &Expected) -> Result<(), Error> {
    for (i, name) in CFS.iter().enumerate() {
        if i != VOLATILE_CF || exp.volatile_exists() {
            db.create_cf(name)?;
        }
    }
    Ok(())
}

/// What a slot looks like from outside: deleted keys show no version.
fn observable(s: u64) -> Option<u64> {
    (s & 1 == 1).then_some(s)
}

/// Verifies `db` against `exp`. Errors from the database are violations too (a
/// verification must read everything it needs).
pub fn verify(db: &Db, exp: &Expected) -> Outcome {
    let mut out = Outcome {
        applied: vec![false; exp.threads as usize],
        ..Outcome::default()
    };
    let cfs = match handles(db) {
        Ok(c) => c,
        Err(e) => {
            out.violations
                .push(format!("listing column families failed: {e}"));
            return out;
        }
    };
    // Writes in flight, by slot.
    let mut pending: BTreeMap<(u32, u32), (u32, u64)> = BTreeMap::new();
    let mut cf_op = None;
    for t in 0..exp.threads {
        for c in exp.pending(t) {
            if c.key == CF_OP {
                cf_op = Some((t, c.slot == 1));
            } else {
                pending.insert((c.cf, c.key), (t, c.slot));
            }
        }
    }
    // The volatile family. A create or drop in flight took effect if the family is as it
    // would leave it: then it is settled as applied (again, if the crash came while the
    // expected state was being updated — applying is idempotent).
    let exists = cfs[VOLATILE_CF].is_some();
    let want = exp.volatile_exists();
    if let Some((t, new)) = cf_op {
        if new == exists {
            out.applied[t as usize] = true;
        }
    }
    if exists != want {
        match cf_op {
            Some((_, new)) if new == exists => {}
            _ => out.violations.push(format!(
                "column family {} {} but the expected state says it {}",
                CFS[VOLATILE_CF],
                if exists { "exists" } else { "is missing" },
                if want { "exists" } else { "was dropped" }
            )),
        }
    }
    // Per thread, per slot of its write in flight: did it show the old or the new value?
    let mut shows: BTreeMap<u32, (bool, bool)> = BTreeMap::new();
    for (i, cf) in cfs.iter().enumerate() {
        let Some(cf) = cf else { continue };
        for k in 0..exp.keys {
            out.keys_checked += 1;
            let got = match db.get_cf(cf, &key_bytes(k)) {
                Ok(v) => v,
                Err(e) => {
                    out.violations
                        .push(format!("get {}/{k} failed: {e}", CFS[i]));
                    continue;
                }
            };
            let observed = match &got {
                None => None,
                Some(v) => match decode(v) {
                    Some((vcf, vkey, ver)) if vcf == i && vkey == k => Some(slot(ver, true)),
                    _ => {
                        out.violations.push(format!(
                            "{}/{k} holds a foreign or garbled value ({} bytes: {:?}…)",
                            CFS[i],
                            v.len(),
                            String::from_utf8_lossy(&v[..v.len().min(40)])
                        ));
                        continue;
                    }
                },
            };
            // A family dropped and created again starts empty: if the drop is the write in
            // flight and was applied, every slot is expected absent.
            let dropped_now = i == VOLATILE_CF && cf_op.is_some_and(|(_, new)| !new) && !exists;
            let old = if dropped_now { 0 } else { exp.slot(i, k) };
            let is_old = observed == observable(old);
            let new = pending.get(&(i as u32, k));
            let is_new = new.is_some_and(|&(_, s)| observed == observable(s));
            if let Some(&(t, _)) = new {
                let e = shows.entry(t).or_default();
                if is_old && !is_new {
                    e.0 = true;
                }
                if is_new && !is_old {
                    e.1 = true;
                }
            }
            if !is_old && !is_new {
                out.violations.push(format!(
                    "{}/{k}: found {}, expected {}{}",
                    CFS[i],
                    describe(observed),
                    describe(observable(old)),
                    match new {
                        Some(&(t, s)) => format!(
                            " or {} (thread {t}'s write in flight)",
                            describe(observable(s))
                        ),
                        None => String::new(),
                    }
                ));
            }
        }
    }
    for (t, (old, new)) in shows {
        if old && new {
            out.violations.push(format!(
                "thread {t}'s write in flight is half applied: some of its keys show the new \
                 values, others the old"
            ));
        }
        if new {
            out.applied[t as usize] = true;
        }
    }
    // Iteration agrees with point reads, in both directions.
    for (i, cf) in cfs.iter().enumerate() {
        let Some(cf) = cf else { continue };
        for reverse in [false, true] {
            let it = db.range_cf::<&[u8], _>(cf, ..);
            let items: Vec<_> = if reverse {
                it.rev().collect()
            } else {
                it.collect()
            };
            let mut prev: Option<Vec<u8>> = None;
            for item in items {
                let (k, v) = match item {
                    Ok(kv) => kv,
                    Err(e) => {
                        out.violations
                            .push(format!("scan of {} failed: {e}", CFS[i]));
                        break;
                    }
                };
                out.keys_checked += 1;
                if let Some(p) = &prev {
                    if (p >= &k) != reverse || p == &k {
                        out.violations
                            .push(format!("scan of {} is out of order", CFS[i]));
                    }
                }
                match db.get_cf(cf, &k) {
                    Ok(Some(g)) if g == v => {}
                    other => out.violations.push(format!(
                        "scan of {} returned {:?} with a value that get does not ({:?})",
                        CFS[i],
                        String::from_utf8_lossy(&k),
                        other.map(|o| o.map(|g| g.len()))
                    )),
                }
                prev = Some(k);
            }
        }
    }
    out
}

fn describe(s: Option<u64>) -> String {
    match s {
        None => "absent".into(),
        Some(s) => format!("version {}", s >> 1),
    }
}

/// The database's whole state as seen from outside, in the shape of `modes::State`: per
/// column family (`None` if the volatile one is missing), per key, the slot its value names
/// (`Some(u64::MAX)` for a value that names something else, which matches no state).
pub fn read_state(db: &Db, keys: u32) -> crate::modes::State {
    let cfs = handles(db).unwrap_or_default();
    (0..CFS.len())
        .map(|i| {
            let cf = cfs.get(i)?.as_ref()?;
            Some(
                (0..keys)
                    .map(|k| match db.get_cf(cf, &key_bytes(k)) {
                        Ok(None) => None,
                        Ok(Some(v)) => match decode(&v) {
                            Some((vcf, vk, ver)) if vcf == i && vk == k => Some(slot(ver, true)),
                            _ => Some(u64::MAX),
                        },
                        Err(_) => Some(u64::MAX),
                    })
                    .collect(),
            )
        })
        .collect()
}
