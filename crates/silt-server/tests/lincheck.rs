//! The linearizability checker itself, tested: histories known to be linearizable pass,
//! known violations (a stale read, a lost acknowledged write, a new-then-old read
//! inversion, a value never written) fail, and on thousands of random small histories it
//! agrees with a brute-force search over every order.

mod support;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use support::lincheck::{check_kv, check_register, Call, Op};

fn op(client: usize, call: Call, invoke: u64, complete: Option<u64>) -> Op {
    Op {
        key: "k".into(),
        call,
        invoke,
        complete,
        client,
    }
}

fn w(v: &str) -> Call {
    Call::Write(Some(v.into()))
}

fn r(v: Option<&str>) -> Call {
    Call::Read(v.map(String::from))
}

fn check(ops: &[Op]) -> bool {
    check_kv(ops).is_ok()
}

#[test]
fn sequential_and_concurrent_histories_that_are_linearizable_pass() {
    // write a, read a, write b, read b: one after another.
    assert!(check(&[
        op(0, w("a"), 0, Some(1)),
        op(1, r(Some("a")), 2, Some(3)),
        op(0, w("b"), 4, Some(5)),
        op(1, r(Some("b")), 6, Some(7)),
    ]));
    // A read concurrent with a write may see either value.
    for seen in [None, Some("a")] {
        assert!(check(&[
            op(0, w("a"), 0, Some(10)),
            op(1, r(seen), 5, Some(6))
        ]));
    }
    // Delete is a write of "absent".
    assert!(check(&[
        op(0, w("a"), 0, Some(1)),
        op(0, Call::Write(None), 2, Some(3)),
        op(1, r(None), 4, Some(5)),
    ]));
}

#[test]
fn a_stale_read_fails() {
    assert!(!check(&[
        op(0, w("a"), 0, Some(1)),
        op(1, r(None), 2, Some(3))
    ]));
}

#[test]
fn a_lost_acknowledged_write_fails() {
    assert!(!check(&[
        op(0, w("a"), 0, Some(1)),
        op(0, w("b"), 2, Some(3)),
        op(1, r(Some("a")), 4, Some(5)),
    ]));
}

#[test]
fn a_new_then_old_read_inversion_fails() {
    // Both reads overlap the write, but the second starts after the first saw the new
    // value: it must not see the old one.
    assert!(!check(&[
        op(0, w("a"), 0, Some(1)),
        op(0, w("b"), 2, Some(20)),
        op(1, r(Some("b")), 3, Some(4)),
        op(2, r(Some("a")), 5, Some(6)),
    ]));
}

#[test]
fn a_value_never_written_fails_and_unknown_writes_may_or_may_not_happen() {
    assert!(!check(&[op(1, r(Some("x")), 0, Some(1))]));
    // An unknown write may be seen, or not, at any point after its invocation...
    assert!(check(&[
        op(0, w("x"), 0, None),
        op(1, r(Some("x")), 10, Some(11))
    ]));
    assert!(check(&[
        op(0, w("x"), 0, None),
        op(1, r(None), 10, Some(11))
    ]));
    // ...but not before it was invoked.
    assert!(!check(&[
        op(1, r(Some("x")), 0, Some(1)),
        op(0, w("x"), 5, None)
    ]));
    // And once seen and overwritten it cannot come back.
    assert!(!check(&[
        op(0, w("x"), 0, None),
        op(1, r(Some("x")), 10, Some(11)),
        op(1, w("y"), 12, Some(13)),
        op(1, r(Some("x")), 14, Some(15)),
    ]));
}

#[test]
fn keys_are_checked_independently() {
    let mut a = op(0, w("1"), 0, Some(1));
    a.key = "a".into();
    let mut b = op(1, r(Some("1")), 2, Some(3));
    b.key = "b".into();
    let v = check_kv(&[a, b]).unwrap_err();
    assert_eq!(v.key, "b");
}

/// Brute force: some order of the answered operations plus a subset of the unknown ones,
/// respecting real time, is a legal register history.
fn brute(ops: &[Op]) -> bool {
    fn go(ops: &[Op], used: &mut Vec<bool>, state: Option<String>, last_lin: u64) -> bool {
        if ops
            .iter()
            .zip(used.iter())
            .all(|(o, u)| *u || o.complete.is_none())
        {
            return true;
        }
        let _ = last_lin;
        for i in 0..ops.len() {
            if used[i] {
                continue;
            }
            // i may go next only if no pending op was answered before i was invoked.
            let blocked = ops
                .iter()
                .enumerate()
                .any(|(j, o)| j != i && !used[j] && o.complete.is_some_and(|c| c <= ops[i].invoke));
            if blocked {
                continue;
            }
            let next = match &ops[i].call {
                Call::Write(v) => v.clone(),
                Call::Read(v) => {
                    if *v != state {
                        continue;
                    }
                    state.clone()
                }
            };
            used[i] = true;
            if go(ops, used, next, 0) {
                used[i] = false;
                return true;
            }
            used[i] = false;
        }
        false
    }
    go(ops, &mut vec![false; ops.len()], None, 0)
}

#[test]
fn agrees_with_brute_force_on_random_small_histories() {
    let mut rng = ChaCha8Rng::seed_from_u64(15);
    let (mut yes, mut no) = (0, 0);
    for case in 0..4000 {
        let n = rng.random_range(1..=7);
        let ops: Vec<Op> = (0..n)
            .map(|c| {
                let invoke = rng.random_range(0..20u64);
                let complete = if rng.random_bool(0.15) {
                    None
                } else {
                    Some(invoke + rng.random_range(1..10))
                };
                let v = ["a", "b", "c"][rng.random_range(0..3)];
                let call = match rng.random_range(0..4) {
                    0 => Call::Write(None),
                    1 => w(v),
                    2 => r(None),
                    _ => r(Some(v)),
                };
                let complete = match call {
                    Call::Read(_) => complete.or(Some(invoke + 1)),
                    _ => complete,
                };
                op(c, call, invoke, complete)
            })
            .collect();
        let refs: Vec<&Op> = ops.iter().collect();
        let want = brute(&ops);
        assert_eq!(check_register(&refs), want, "case {case}: {ops:#?}");
        if want {
            yes += 1;
        } else {
            no += 1;
        }
    }
    // Both kinds were exercised.
    assert!(yes > 500 && no > 500, "{yes} linearizable, {no} not");
}

#[test]
fn a_long_linearizable_history_is_checked_quickly() {
    // 3,000 operations from 8 clients on one key, generated from a real sequential run
    // with each operation's interval stretched around its linearization point.
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut state: Option<String> = None;
    let mut ops = Vec::new();
    for i in 0..3000u64 {
        let at = i * 10;
        let invoke = at - rng.random_range(0..=at.min(40));
        let complete = at + rng.random_range(1..40);
        let call = if rng.random_bool(0.5) {
            let v = format!("v{i}");
            state = Some(v.clone());
            Call::Write(Some(v))
        } else {
            Call::Read(state.clone())
        };
        ops.push(op((i % 8) as usize, call, invoke, Some(complete)));
    }
    let started = std::time::Instant::now();
    assert!(check(&ops));
    assert!(started.elapsed().as_secs() < 10);
    // Change one read to an older value: no longer linearizable.
    let i = (1000..3000)
        .find(|&i| matches!(ops[i].call, Call::Read(Some(_))))
        .unwrap();
    ops[i].call = r(Some("v0"));
    assert!(!check(&ops));
}
