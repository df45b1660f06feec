//! The consistency check can fail: TPC-C's conditions 1–4 on hand-made totals, and
//! [`KvTpcc::totals`] on a loaded silt database tampered with one way at a time (a column
//! of the wrong length, a stray key, a changed D_YTD, a missing order line or new order).

use super::*;

fn consistent() -> Totals {
    Totals {
        w_ytd: vec![(1, 30_000_000, 30_000_000)],
        districts: (1..=DISTRICTS)
            .map(|d| DistrictTotals {
                w: 1,
                d,
                next_o_id: 31,
                max_o_id: 30,
                max_no_o_id: 30,
                min_no_o_id: 22,
                new_orders: 9,
                sum_ol_cnt: 300,
                order_lines: 300,
            })
            .collect(),
    }
}

fn only(bad: Vec<String>, what: &str) {
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert!(bad[0].contains(what), "{bad:?} should say {what:?}");
}

#[test]
fn each_condition_is_checked() {
    assert_eq!(check(&consistent(), 1), Vec::<String>::new());
    let mut t = consistent();
    t.w_ytd[0].1 += 1;
    only(check(&t, 1), "condition 1");
    let mut t = consistent();
    t.districts[4].next_o_id += 1;
    only(check(&t, 1), "condition 2");
    let mut t = consistent();
    t.districts[4].max_no_o_id = 29;
    // Both: max(NO_O_ID) is not max(O_ID), and the range no longer counts the rows.
    assert_eq!(check(&t, 1).len(), 2);
    let mut t = consistent();
    t.districts[4].new_orders = 8;
    only(check(&t, 1), "condition 3");
    let mut t = consistent();
    t.districts[9].order_lines -= 1;
    only(check(&t, 1), "condition 4");
    let mut t = consistent();
    t.districts.pop();
    only(check(&t, 1), "9 districts read");
    let bad = check(&consistent(), 2);
    assert_eq!(
        bad,
        [
            "1 warehouses read, 2 expected",
            "10 districts read, 20 expected"
        ]
    );
}

fn loaded(dir: &std::path::Path) -> KvTpcc<SiltStore> {
    let cfg = crate::engine::EngineConfig::for_test(dir, 1);
    let db = KvTpcc {
        store: SiltStore::open(
            &cfg,
            &Table::TPCC,
            silt::IsolationLevel::Serializable,
            silt::Concurrency::Optimistic,
        )
        .unwrap(),
    };
    population(1, Sizes::scaled(0.01), 7, 4096, &mut |rows| db.load(rows)).unwrap();
    db
}

/// Writes (`Some`) or deletes (`None`) one key in one transaction.
fn set(db: &KvTpcc<SiltStore>, t: Table, k: &[u8], v: Option<&[u8]>) {
    let mut x = db.store.begin(false).unwrap();
    match v {
        Some(v) => x.put(t, k, v).unwrap(),
        None => x.delete(t, k).unwrap(),
    }
    x.commit().unwrap();
}

fn get(db: &KvTpcc<SiltStore>, t: Table, k: &[u8]) -> Vec<u8> {
    db.store.begin(true).unwrap().get(t, k).unwrap().unwrap()
}

fn violations(db: &KvTpcc<SiltStore>) -> Vec<String> {
    check(&db.totals(1).unwrap(), 1)
}

#[test]
fn a_tampered_database_fails_the_check() {
    let dir = tempfile::tempdir().unwrap();
    let db = loaded(dir.path());
    assert_eq!(violations(&db), Vec::<String>::new());

    // Condition 1: one district's D_YTD a cent off.
    let dy = column_key(&[1, 3], YTD);
    let before = get(&db, Table::District, &dy);
    let off = i64::from_le_bytes(before.as_slice().try_into().unwrap()) + 1;
    set(&db, Table::District, &dy, Some(&off.to_le_bytes()));
    only(violations(&db), "condition 1");
    set(&db, Table::District, &dy, Some(&before));

    // Condition 2: D_NEXT_O_ID moved on without an order.
    let nk = column_key(&[1, 5], NEXT_O_ID);
    let before = get(&db, Table::District, &nk);
    let next = u32::from_le_bytes(before.as_slice().try_into().unwrap()) + 1;
    set(&db, Table::District, &nk, Some(&next.to_le_bytes()));
    only(violations(&db), "condition 2");
    set(&db, Table::District, &nk, Some(&before));

    // Condition 3: a new order from the middle of the district's range gone.
    let o_id = Sizes::scaled(0.01).customers - 1;
    let nok = key(&[1, 7, o_id]);
    set(&db, Table::NewOrder, &nok, None);
    only(violations(&db), "condition 3");
    set(&db, Table::NewOrder, &nok, Some(&[]));

    // Condition 4: one order line gone.
    let olk = key(&[1, 2, 1, 1]);
    let line = get(&db, Table::OrderLine, &olk);
    set(&db, Table::OrderLine, &olk, None);
    only(violations(&db), "condition 4");
    set(&db, Table::OrderLine, &olk, Some(&line));
    assert_eq!(violations(&db), Vec::<String>::new());

    // A column of the wrong length, and a key that is neither a row nor a column: the
    // check refuses to read the database at all.
    let wy = column_key(&[1], YTD);
    let before = get(&db, Table::Warehouse, &wy);
    set(&db, Table::Warehouse, &wy, Some(&[1, 2, 3]));
    let e = db.totals(1).unwrap_err();
    assert!(e.contains("w_ytd: 3 bytes, not 8"), "{e}");
    set(&db, Table::Warehouse, &wy, Some(&before));
    let stray = column_key(&[1, 4], b'z');
    set(&db, Table::District, &stray, Some(&[0; 4]));
    let e = db.totals(1).unwrap_err();
    assert!(e.contains("district: a stray key"), "{e}");
    set(&db, Table::District, &stray, None);
    assert_eq!(violations(&db), Vec::<String>::new());
}
