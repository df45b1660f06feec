//! The lock table's rules: the compatibility matrix, upgrades, timeouts, deadlock
//! detection, range locks; and property tests of mutual exclusion, no lost wake-ups and
//! deadlocks found at once under random concurrent scripts.

use super::*;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

use proptest::prelude::*;

const LONG: Duration = Duration::from_secs(10);
const SHORT: Duration = Duration::from_millis(30);

fn k(s: &str) -> LockKey {
    (0, s.as_bytes().to_vec())
}

fn inc(s: &str) -> Bound<Vec<u8>> {
    Bound::Included(s.as_bytes().to_vec())
}

#[test]
fn compatibility_matrix() {
    let t = LockTable::default();
    // S + S share; X waits for S and X.
    t.lock(1, &k("a"), Mode::Shared, SHORT).unwrap();
    t.lock(2, &k("a"), Mode::Shared, SHORT).unwrap();
    assert!(matches!(
        t.lock(3, &k("a"), Mode::Exclusive, SHORT),
        Err(LockError::Timeout { .. })
    ));
    t.lock(3, &k("b"), Mode::Exclusive, SHORT).unwrap();
    assert!(matches!(
        t.lock(1, &k("b"), Mode::Shared, SHORT),
        Err(LockError::Timeout { .. })
    ));
    // Ranges share with S and with ranges, not with an X inside them.
    t.lock_range(4, 0, &inc("a"), &inc("az"), SHORT).unwrap();
    t.lock_range(5, 0, &inc("a"), &inc("az"), SHORT).unwrap();
    assert!(matches!(
        t.lock_range(4, 0, &inc("a"), &inc("c"), SHORT),
        Err(LockError::Timeout { .. })
    ));
    assert!(matches!(
        t.lock(6, &k("ab"), Mode::Exclusive, SHORT),
        Err(LockError::Timeout { .. })
    ));
    // Outside the range, and in another column family, an X is granted.
    t.lock(6, &k("c"), Mode::Exclusive, SHORT).unwrap();
    t.lock(6, &(1, b"ab".to_vec()), Mode::Exclusive, SHORT)
        .unwrap();
    // Releasing frees everything.
    t.release_all(3);
    t.lock(1, &k("b"), Mode::Shared, SHORT).unwrap();
    t.release_all(4);
    t.release_all(5);
    t.lock(6, &k("ab"), Mode::Exclusive, SHORT).unwrap();
    assert_eq!(t.held_by(6), (3, 0));
}

#[test]
fn own_locks_never_conflict_and_shared_upgrades_when_alone() {
    let t = LockTable::default();
    t.lock(1, &k("a"), Mode::Shared, SHORT).unwrap();
    t.lock(1, &k("a"), Mode::Shared, SHORT).unwrap();
    t.lock(1, &k("a"), Mode::Exclusive, SHORT).unwrap();
    t.lock(1, &k("a"), Mode::Shared, SHORT).unwrap();
    t.lock_range(1, 0, &Bound::Unbounded, &Bound::Unbounded, SHORT)
        .unwrap();
    assert_eq!(t.held_by(1), (1, 1));
    t.lock(2, &k("b"), Mode::Shared, SHORT).unwrap();
    t.lock(1, &k("b"), Mode::Shared, SHORT).unwrap();
    assert!(matches!(
        t.lock(1, &k("b"), Mode::Exclusive, SHORT),
        Err(LockError::Timeout { .. })
    ));
    t.release_all(2);
    t.lock(1, &k("b"), Mode::Exclusive, SHORT).unwrap();
}

#[test]
fn a_waiter_is_granted_when_the_holder_releases() {
    let t = Arc::new(LockTable::default());
    t.lock(1, &k("a"), Mode::Exclusive, SHORT).unwrap();
    // Timed from before the spawn: the release comes 50 ms after this however late the
    // waiter's thread starts, so the grant cannot come sooner.
    let start = Instant::now();
    let w = {
        let t = t.clone();
        std::thread::spawn(move || {
            t.lock(2, &k("a"), Mode::Exclusive, LONG).unwrap();
            start.elapsed()
        })
    };
    std::thread::sleep(Duration::from_millis(50));
    t.release_all(1);
    let waited = w.join().unwrap();
    assert!(
        waited >= Duration::from_millis(50) && waited < LONG,
        "{waited:?}"
    );
}

#[test]
fn a_cycle_is_refused_at_once_and_the_survivor_proceeds() {
    let t = Arc::new(LockTable::default());
    t.lock(1, &k("a"), Mode::Exclusive, SHORT).unwrap();
    t.lock(2, &k("b"), Mode::Exclusive, SHORT).unwrap();
    let w = {
        let t = t.clone();
        std::thread::spawn(move || t.lock(1, &k("b"), Mode::Exclusive, LONG))
    };
    // Wait until 1 is blocked, then close the cycle.
    while !t.state.lock().waits.contains_key(&1) {
        std::thread::yield_now();
    }
    let start = Instant::now();
    assert_eq!(
        t.lock(2, &k("a"), Mode::Exclusive, LONG),
        Err(LockError::Deadlock)
    );
    assert!(start.elapsed() < Duration::from_secs(1));
    t.release_all(2); // the victim rolls back
    w.join().unwrap().unwrap();
}

#[test]
fn a_range_request_and_a_key_writer_can_deadlock_too() {
    let t = Arc::new(LockTable::default());
    t.lock_range(1, 0, &inc("a"), &inc("m"), SHORT).unwrap();
    t.lock(2, &k("z"), Mode::Exclusive, SHORT).unwrap();
    let w = {
        let t = t.clone();
        std::thread::spawn(move || t.lock(2, &k("c"), Mode::Exclusive, LONG))
    };
    while !t.state.lock().waits.contains_key(&2) {
        std::thread::yield_now();
    }
    assert_eq!(
        t.lock(1, &k("z"), Mode::Shared, LONG),
        Err(LockError::Deadlock)
    );
    t.release_all(1);
    w.join().unwrap().unwrap();
}

/// One thread's script: lock keys in the given order and modes, then release all.
#[derive(Clone, Debug)]
struct Script {
    steps: Vec<(u8, bool)>,
}

fn scripts() -> impl Strategy<Value = Vec<Script>> {
    proptest::collection::vec(
        proptest::collection::vec((0u8..6, any::<bool>()), 1..5).prop_map(|steps| Script { steps }),
        2..6,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Random concurrent scripts: at every grant, no other owner holds a conflicting lock
    /// (checked against a model kept beside the table); every request ends (granted,
    /// deadlock or timeout), so no waiter is left behind by a release; and a script that
    /// gets `Deadlock` gets it long before its timeout.
    #[test]
    fn random_scripts_keep_mutual_exclusion_and_always_finish(scripts in scripts()) {
        let t = Arc::new(LockTable::default());
        // Model: per key, count of exclusive and shared holders.
        let model = Arc::new(Mutex::new(HashMap::<u8, (usize, usize)>::new()));
        let violations = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = scripts
            .into_iter()
            .enumerate()
            .map(|(i, script)| {
                let (t, model, violations) = (t.clone(), model.clone(), violations.clone());
                std::thread::spawn(move || {
                    let owner = i as Owner + 1;
                    let mut mine: HashMap<u8, bool> = HashMap::new();
                    for (key, exclusive) in script.steps {
                        let mode = if exclusive { Mode::Exclusive } else { Mode::Shared };
                        let start = Instant::now();
                        match t.lock(owner, &(0, vec![key]), mode, Duration::from_secs(5)) {
                            Ok(()) => {
                                let mut m = model.lock();
                                let e = m.entry(key).or_default();
                                let had = mine.get(&key).copied();
                                // Take our own hold out of the counts, then check others'.
                                match had {
                                    Some(true) => e.0 -= 1,
                                    Some(false) => e.1 -= 1,
                                    None => {}
                                }
                                let now_x = exclusive || had == Some(true);
                                if e.0 > 0 || (now_x && e.1 > 0) {
                                    violations.fetch_add(1, SeqCst);
                                }
                                if now_x { e.0 += 1 } else { e.1 += 1 }
                                mine.insert(key, now_x);
                            }
                            Err(LockError::Deadlock) => {
                                if start.elapsed() > Duration::from_secs(4) {
                                    violations.fetch_add(1000, SeqCst);
                                }
                                break;
                            }
                            Err(LockError::Timeout { .. }) => {
                                // Only possible if some owner held on past its script: a
                                // lost wake-up or an undetected cycle.
                                violations.fetch_add(1_000_000, SeqCst);
                                break;
                            }
                        }
                        std::thread::yield_now();
                    }
                    {
                        let mut m = model.lock();
                        for (key, x) in mine.drain() {
                            let e = m.get_mut(&key).unwrap();
                            if x { e.0 -= 1 } else { e.1 -= 1 }
                        }
                    }
                    t.release_all(owner);
                })
            })
            .collect();
        for th in threads {
            th.join().unwrap();
        }
        prop_assert_eq!(violations.load(SeqCst), 0);
        prop_assert!(t.state.lock().keys.is_empty());
        prop_assert!(t.state.lock().waits.is_empty());
    }
}
