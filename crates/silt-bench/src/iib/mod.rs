//! The iibench table (seed 002): `queue_indexed` and `txn_batch_sweep` on each engine's
//! transactions.
//!
//! iibench's `purchases_index`: a row per `transactionid` (the primary key, ascending as
//! rows are inserted) with `dateandtime`, `cashregisterid`, `customerid`, `productid`,
//! `price` and `data`, and three secondary indexes maintained in the same transaction as
//! the row: `marketsegment` (price, customerid), `registersegment` (cashregisterid, price,
//! customerid) and `pdc` (price, dateandtime, customerid). Row `id`'s contents are a pure
//! function of `id` and the seed ([`Purchase::new`]), so a check can recompute what every
//! row and index entry must be.
//!
//! [`IibDb`] is one engine's table: insert rows (one transaction), delete the lowest rows
//! with their index entries (one transaction), and check it. Every engine but SQLite runs
//! it on the key-value transactions of `crate::tpcc::kv` ([`KvIib`], the keyspaces of
//! `Table::IIB`); SQLite has a real table with three real indexes (`sql`). The cells are
//! in `run/iib.rs`; how each engine maps it: docs/bench.md, "queue_indexed and
//! txn_batch_sweep".

#[cfg(feature = "sqlite")]
pub mod sql;

use std::ops::Range;

use crate::tpcc::kv::{KvStore, KvTxn, Table};
use crate::tpcc::{TxError, TxResult};

/// One iibench row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Purchase {
    pub id: u64,
    /// Seconds; rises with `id` (rows are inserted in time order).
    pub dateandtime: u64,
    /// 0..1000.
    pub cashregisterid: u32,
    /// 0..100,000.
    pub customerid: u32,
    /// 0..10,000.
    pub productid: u32,
    /// Cents, 0..50,000 (iibench's 0..500.00).
    pub price: u32,
    /// `data_bytes` bytes of printable text.
    pub data: Vec<u8>,
}

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Purchase {
    /// Row `id` of the table made with `seed`.
    pub fn new(id: u64, seed: u64, data_bytes: usize) -> Purchase {
        let h = mix(id ^ mix(seed));
        let g = mix(h);
        let mut data = Vec::with_capacity(data_bytes);
        let mut x = mix(g);
        while data.len() < data_bytes {
            for b in x.to_le_bytes() {
                if data.len() < data_bytes {
                    data.push(b'a' + b % 26);
                }
            }
            x = mix(x);
        }
        Purchase {
            id,
            dateandtime: 1_700_000_000 + id / 1000,
            cashregisterid: (h % 1000) as u32,
            customerid: ((h >> 16) % 100_000) as u32,
            productid: ((h >> 40) % 10_000) as u32,
            price: (g % 50_001) as u32,
            data,
        }
    }

    /// The primary key: `id`, 8 bytes big-endian (so key order is id order).
    pub fn pk(id: u64) -> [u8; 8] {
        id.to_be_bytes()
    }

    /// The id a primary key ([`Purchase::pk`]) holds; a key of another length is a fatal
    /// error.
    pub fn id_of(k: &[u8]) -> TxResult<u64> {
        <[u8; 8]>::try_from(k)
            .map(u64::from_be_bytes)
            .map_err(|_| TxError::Fatal(format!("iib: a primary key of {} bytes", k.len())))
    }

    /// The row as the primary keyspace's value.
    pub fn enc(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(24 + self.data.len());
        v.extend_from_slice(&self.dateandtime.to_le_bytes());
        v.extend_from_slice(&self.cashregisterid.to_le_bytes());
        v.extend_from_slice(&self.customerid.to_le_bytes());
        v.extend_from_slice(&self.productid.to_le_bytes());
        v.extend_from_slice(&self.price.to_le_bytes());
        v.extend_from_slice(&self.data);
        v
    }

    pub fn dec(id: u64, v: &[u8]) -> TxResult<Purchase> {
        if v.len() < 24 {
            return Err(TxError::Fatal(format!(
                "iib: row {id} is {} bytes, shorter than its encoding",
                v.len()
            )));
        }
        let u32_at = |i: usize| u32::from_le_bytes(v[i..i + 4].try_into().expect("4"));
        Ok(Purchase {
            id,
            dateandtime: u64::from_le_bytes(v[..8].try_into().expect("8")),
            cashregisterid: u32_at(8),
            customerid: u32_at(12),
            productid: u32_at(16),
            price: u32_at(20),
            data: v[24..].to_vec(),
        })
    }

    /// The row's entries in the three index keyspaces (big-endian fields, then the
    /// primary key, so each entry is unique and sorts as the SQL index does).
    pub fn index_keys(&self) -> [(Table, Vec<u8>); 3] {
        let be = |parts: &[&[u8]]| parts.concat();
        let (p, c, r) = (
            self.price.to_be_bytes(),
            self.customerid.to_be_bytes(),
            self.cashregisterid.to_be_bytes(),
        );
        let d = self.dateandtime.to_be_bytes();
        let id = Purchase::pk(self.id);
        [
            (Table::Marketsegment, be(&[&p, &c, &id])),
            (Table::Registersegment, be(&[&r, &p, &c, &id])),
            (Table::Pdc, be(&[&p, &d, &c, &id])),
        ]
    }
}

/// The table's parameters.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub seed: u64,
    /// Bytes of each row's `data`.
    pub data_bytes: usize,
}

impl Shape {
    pub fn row(&self, id: u64) -> Purchase {
        Purchase::new(id, self.seed, self.data_bytes)
    }
}

/// One engine's iibench table, shared by the inserter and the deleter.
pub trait IibDb: Send + Sync {
    /// Stores rows `ids` untimed (not necessarily in one transaction).
    fn load(&self, ids: Range<u64>) -> Result<(), String>;
    /// One transaction: rows `ids` and their three index entries each.
    fn insert(&self, ids: Range<u64>) -> TxResult<()>;
    /// One transaction: finds the (up to) `n` lowest rows in `from..below` (`below`: the
    /// rows known to be committed; the deleter never reads past them, so it does not
    /// conflict with the inserter's newer rows), and deletes each with its three index
    /// entries; returns their ids, ascending. iibench's `DELETE … WHERE transactionid >=
    /// min_trxid ORDER BY transactionid LIMIT n`.
    fn delete_lowest(&self, n: usize, from: u64, below: u64) -> TxResult<Vec<u64>>;
    /// The lowest row below `below`, read from the start of the table in one read
    /// transaction (iibench's `get_min_trxid`, `SELECT min(transactionid)`).
    fn lowest(&self, below: u64) -> TxResult<Option<u64>>;
    /// The consistency check, in one consistent view: the rows are exactly `live`, each as
    /// [`Shape::row`] makes it, every index entry belongs to a live row and every live row
    /// has its three. The violations, each a sentence (empty: consistent).
    fn check(&self, live: Range<u64>) -> Result<Vec<String>, String>;
    /// The engine's transactions, for the JSON line.
    fn mode(&self) -> String;
    /// Whether deletes are the engine's single deletes.
    fn single_delete(&self) -> bool;
    /// Flush and wait for the engine to settle (untimed).
    fn settle(&self) -> Result<(), String> {
        Ok(())
    }
    fn stats(&self) -> Option<serde_json::Value> {
        None
    }
}

/// The iibench table on a transactional key-value store: the row in `purchases_index`
/// under its 8-byte primary key, and an empty value under each index key.
pub struct KvIib<S: KvStore> {
    pub store: S,
    pub shape: Shape,
}

const HI: [u8; 64] = [0xff; 64];

impl<S: KvStore> IibDb for KvIib<S> {
    fn load(&self, ids: Range<u64>) -> Result<(), String> {
        let mut kvs = Vec::with_capacity(4 * (ids.end - ids.start) as usize);
        for id in ids {
            let r = self.shape.row(id);
            kvs.push((Table::Purchases, Purchase::pk(id).to_vec(), r.enc()));
            for (t, k) in r.index_keys() {
                kvs.push((t, k, Vec::new()));
            }
        }
        self.store.load(&kvs)
    }

    fn insert(&self, ids: Range<u64>) -> TxResult<()> {
        let mut t = self.store.begin(false)?;
        for id in ids {
            let r = self.shape.row(id);
            t.put(Table::Purchases, &Purchase::pk(id), &r.enc())?;
            for (table, k) in r.index_keys() {
                t.put(table, &k, &[])?;
            }
        }
        t.commit()
    }

    fn lowest(&self, below: u64) -> TxResult<Option<u64>> {
        let mut t = self.store.begin(true)?;
        // From the start of the table: an LSM walks the tombstones of the rows deleted
        // before, until compaction drops them.
        let mut first = None;
        let mut bad = None;
        t.scan(
            Table::Purchases,
            &[],
            &Purchase::pk(below),
            1,
            false,
            &mut |k, _| match Purchase::id_of(k) {
                Ok(id) => first = Some(id),
                Err(e) => bad = Some(e),
            },
        )?;
        if let Some(e) = bad {
            return Err(e);
        }
        t.commit()?;
        Ok(first)
    }

    fn delete_lowest(&self, n: usize, from: u64, below: u64) -> TxResult<Vec<u64>> {
        let mut t = self.store.begin(false)?;
        let mut rows = Vec::with_capacity(n);
        let mut bad = None;
        t.scan(
            Table::Purchases,
            &Purchase::pk(from),
            &Purchase::pk(below),
            n,
            false,
            &mut |k, v| match Purchase::id_of(k).and_then(|id| Purchase::dec(id, v)) {
                Ok(r) => rows.push(r),
                Err(e) => bad = Some(e),
            },
        )?;
        if let Some(e) = bad {
            return Err(e);
        }
        for r in &rows {
            t.single_delete(Table::Purchases, &Purchase::pk(r.id))?;
            for (table, k) in r.index_keys() {
                t.single_delete(table, &k)?;
            }
        }
        t.commit()?;
        Ok(rows.into_iter().map(|r| r.id).collect())
    }

    fn check(&self, live: Range<u64>) -> Result<Vec<String>, String> {
        let e = |e: TxError| format!("iib check: {e:?}");
        let mut t = self.store.begin(true).map_err(e)?;
        let mut bad = Vec::new();
        let note = |bad: &mut Vec<String>, s: String| {
            if bad.len() < 10 {
                bad.push(s);
            }
        };
        // The rows: exactly `live`, in order, each as generated.
        let mut next = live.start;
        let mut rows = 0u64;
        t.scan(
            Table::Purchases,
            &[],
            &HI,
            usize::MAX,
            false,
            &mut |k, v| {
                rows += 1;
                let Ok(id) = <[u8; 8]>::try_from(k) else {
                    note(&mut bad, format!("a primary key of {} bytes", k.len()));
                    return;
                };
                let id = u64::from_be_bytes(id);
                if id != next {
                    note(
                        &mut bad,
                        format!("row {id} where row {next} was expected (live rows {live:?})"),
                    );
                }
                next = id + 1;
                match Purchase::dec(id, v) {
                    Ok(r) if r == self.shape.row(id) => {}
                    Ok(_) => note(&mut bad, format!("row {id} is not the row inserted")),
                    Err(x) => note(&mut bad, format!("{x:?}")),
                }
            },
        )
        .map_err(e)?;
        let expected = live.end - live.start;
        if rows != expected {
            note(
                &mut bad,
                format!("{rows} rows, {expected} expected (live rows {live:?})"),
            );
        }
        // Each index: one entry per live row, each the entry its row makes.
        for (i, table) in [Table::Marketsegment, Table::Registersegment, Table::Pdc]
            .into_iter()
            .enumerate()
        {
            let mut entries = 0u64;
            t.scan(table, &[], &HI, usize::MAX, false, &mut |k, _| {
                entries += 1;
                let Some(id) = k.len().checked_sub(8).map(|at| &k[at..]) else {
                    note(
                        &mut bad,
                        format!("{}: a key of {} bytes", table.name(), k.len()),
                    );
                    return;
                };
                let id = u64::from_be_bytes(id.try_into().expect("8"));
                if !live.contains(&id) {
                    note(
                        &mut bad,
                        format!("{}: an entry for row {id}, not live", table.name()),
                    );
                } else if self.shape.row(id).index_keys()[i].1 != k {
                    note(
                        &mut bad,
                        format!("{}: row {id}'s entry is not its row's", table.name()),
                    );
                }
            })
            .map_err(e)?;
            if entries != expected {
                note(
                    &mut bad,
                    format!(
                        "{}: {entries} entries for {expected} live rows",
                        table.name()
                    ),
                );
            }
        }
        drop(t);
        Ok(bad)
    }

    fn mode(&self) -> String {
        self.store.mode()
    }

    fn single_delete(&self) -> bool {
        self.store.has_single_delete()
    }

    fn settle(&self) -> Result<(), String> {
        self.store.settle()
    }

    fn stats(&self) -> Option<serde_json::Value> {
        self.store.stats()
    }
}

/// The engine names `queue_indexed` and `txn_batch_sweep` know: `tpcc`'s
/// (`crate::tpcc::ENGINES`).
pub use crate::tpcc::ENGINES;

/// Opens engine `name`'s iibench table in `cfg.dir`. silt's transactions may buffer up to
/// `max_txn_bytes` (`TxnOptions::max_bytes`).
pub fn open(
    name: &str,
    cfg: &crate::engine::EngineConfig,
    shape: Shape,
    max_txn_bytes: u64,
) -> Result<Box<dyn IibDb>, String> {
    use crate::tpcc::kv;
    use silt::{Concurrency as C, IsolationLevel as I};
    let t = &Table::IIB;
    let silt = |i, c| -> Result<Box<dyn IibDb>, String> {
        Ok(Box::new(KvIib {
            store: kv::SiltStore::open(cfg, t, i, c)?.max_txn_bytes(max_txn_bytes),
            shape,
        }))
    };
    match name {
        "silt" => silt(I::Serializable, C::Optimistic),
        "silt-si" => silt(I::Snapshot, C::Optimistic),
        "silt-pess" => silt(I::Serializable, C::Pessimistic),
        "silt-pess-si" => silt(I::Snapshot, C::Pessimistic),
        #[cfg(feature = "sqlite")]
        "sqlite" => Ok(Box::new(sql::SqliteIib::open(cfg, shape)?)),
        #[cfg(feature = "fjall")]
        "fjall" => Ok(Box::new(KvIib {
            store: crate::tpcc::fj::FjallStore::open(cfg, t)?,
            shape,
        })),
        #[cfg(feature = "tidesdb")]
        "tidesdb" => Ok(Box::new(KvIib {
            store: crate::tpcc::tides::TidesStore::open(cfg, t)?,
            shape,
        })),
        #[cfg(feature = "redb")]
        "redb" => Ok(Box::new(KvIib {
            store: crate::tpcc::rd::RedbStore::open(cfg, t)?,
            shape,
        })),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => Ok(Box::new(KvIib {
            store: crate::tpcc::rocks::RocksStore::open(cfg, t, false)?,
            shape,
        })),
        #[cfg(feature = "rocksdb")]
        "rocksdb-occ" => Ok(Box::new(KvIib {
            store: crate::tpcc::rocks::RocksStore::open(cfg, t, true)?,
            shape,
        })),
        other => Err(format!(
            "queue_indexed and txn_batch_sweep have no adapter for engine {other:?} (their \
             engines: {})",
            ENGINES
                .iter()
                .map(|(n, about)| format!("{n} ({about})"))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip_and_index_keys_sort_as_the_columns() {
        let s = Shape {
            seed: 7,
            data_bytes: 40,
        };
        for id in [0, 1, 999, 1 << 40] {
            let r = s.row(id);
            assert_eq!(r, s.row(id));
            assert_eq!(Purchase::dec(id, &r.enc()).unwrap(), r);
            assert_eq!(r.data.len(), 40);
            assert!(r.cashregisterid < 1000 && r.customerid < 100_000 && r.price <= 50_000);
            for (_, k) in r.index_keys() {
                assert_eq!(&k[k.len() - 8..], &Purchase::pk(id));
            }
        }
        let (a, b) = (s.row(1), s.row(2));
        let ka = &a.index_keys()[0].1;
        let kb = &b.index_keys()[0].1;
        assert_eq!(ka < kb, (a.price, a.customerid) < (b.price, b.customerid));
    }

    /// Every engine of the default build: the queue's transactions keep the table
    /// consistent, and the check finds a missing index entry and a stray one.
    #[test]
    fn the_check_passes_after_the_queue_and_fails_on_a_broken_index() {
        let shape = Shape {
            seed: 3,
            data_bytes: 16,
        };
        let mut names = vec!["silt", "silt-pess"];
        if cfg!(feature = "fjall") {
            names.push("fjall");
        }
        if cfg!(feature = "redb") {
            names.push("redb");
        }
        if cfg!(feature = "sqlite") {
            names.push("sqlite");
        }
        for name in names {
            let dir = tempfile::tempdir().unwrap();
            let db = open(
                name,
                &crate::engine::EngineConfig::for_test(dir.path(), 2),
                shape,
                1 << 30,
            )
            .unwrap();
            db.load(0..100).unwrap();
            db.insert(100..110).unwrap();
            assert_eq!(db.lowest(110).unwrap(), Some(0), "{name}");
            assert_eq!(
                db.delete_lowest(3, 0, 110).unwrap(),
                vec![0, 1, 2],
                "{name}"
            );
            assert_eq!(db.lowest(110).unwrap(), Some(3), "{name}");
            assert_eq!(db.delete_lowest(1, 3, 110).unwrap(), vec![3], "{name}");
            // From a lower bound: the rows below it stay; and never past `below`.
            assert_eq!(
                db.delete_lowest(2, 50, 110).unwrap(),
                vec![50, 51],
                "{name}"
            );
            assert_eq!(
                db.delete_lowest(5, 108, 110).unwrap(),
                vec![108, 109],
                "{name}"
            );
            assert_eq!(
                db.delete_lowest(5, 110, 110).unwrap(),
                Vec::<u64>::new(),
                "{name}"
            );
            assert_eq!(db.lowest(110).unwrap(), Some(4), "{name}");
            assert_eq!(db.lowest(4).unwrap(), None, "{name}");
            db.insert(50..52).unwrap();
            db.insert(108..110).unwrap();
            assert!(db.check(4..110).unwrap().is_empty(), "{name}");
            // The wrong expectation is reported.
            assert!(!db.check(3..110).unwrap().is_empty(), "{name}");
            assert!(!db.check(4..111).unwrap().is_empty(), "{name}");
        }
        // A missing and a stray index entry, written behind the table's back.
        let dir = tempfile::tempdir().unwrap();
        let store = crate::tpcc::kv::SiltStore::open(
            &crate::engine::EngineConfig::for_test(dir.path(), 2),
            &Table::IIB,
            silt::IsolationLevel::Serializable,
            silt::Concurrency::Optimistic,
        )
        .unwrap();
        let db = KvIib { store, shape };
        db.load(0..50).unwrap();
        assert!(db.check(0..50).unwrap().is_empty());
        let mut t = db.store.begin(false).unwrap();
        let (table, k) = shape.row(7).index_keys()[1].clone();
        t.delete(table, &k).unwrap();
        t.commit().unwrap();
        let bad = db.check(0..50).unwrap();
        assert!(
            bad.iter()
                .any(|b| b.contains("registersegment: 49 entries")),
            "{bad:?}"
        );
        let mut t = db.store.begin(false).unwrap();
        t.put(table, &k, &[]).unwrap();
        t.put(Table::Pdc, &shape.row(60).index_keys()[2].1, &[])
            .unwrap();
        t.commit().unwrap();
        let bad = db.check(0..50).unwrap();
        assert!(
            bad.iter().any(|b| b.contains("pdc: an entry for row 60")),
            "{bad:?}"
        );
    }
}
