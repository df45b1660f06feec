//! `tpcc`: a TPC-C-like workload on each engine's transactions.
//!
//! The nine TPC-C tables (warehouse, district, customer, history, new-order, order,
//! order-line, item, stock) with TPC-C's row contents, the customer-by-last-name index,
//! and the five transactions in the standard mix (New-Order 45%, Payment 43%, Order-Status
//! 4%, Delivery 4%, Stock-Level 4%), run by `--threads` terminals for `--duration` seconds
//! with no keying or think time. Every terminal has a home warehouse (terminal `t` serves
//! warehouse `t % W + 1`). A transaction that fails with the engine's retryable error (a
//! conflict, a deadlock, a lock timeout, SQLite's busy) is rolled back and run again with
//! the same input until it commits; those failed attempts are the `abort_rate`. New-Order's
//! 1% of orders with an unknown item roll back by design (TPC-C 2.4.1.4): counted apart
//! (`rollbacks`), and as completed, as TPC-C counts them.
//!
//! Sizes: TPC-C's per warehouse (100,000 items, 10 districts, 3,000 customers and orders
//! per district, the last 900 orders of each undelivered) times `--tpcc-scale` (default 1;
//! the tests use 0.01), except the ten districts, which stay. With fewer than 1,000
//! customers per district the last names drawn are those `0..customers` (every one exists).
//!
//! How each engine maps the tables (key encodings, isolation) and the consistency checks:
//! `docs/bench.md`, "tpcc". Modules: [`gen`] (the data and the inputs), [`kv`] (the
//! transactions on a transactional key-value store, and silt's adapter), `fj` (fjall's
//! optimistic transactions on [`kv`]), `rd` (redb on [`kv`]), `tides` (TidesDB's
//! transactions on [`kv`]), `rocks`
//! (RocksDB's two transaction databases on [`kv`]), `sql` (SQLite, in SQL).

#[cfg(feature = "fjall")]
pub mod fj;
pub mod gen;
pub mod kv;
#[cfg(feature = "redb")]
pub mod rd;
#[cfg(feature = "rocksdb")]
pub mod rocks;
#[cfg(feature = "sqlite")]
pub mod sql;
#[cfg(feature = "tidesdb")]
pub mod tides;

use std::time::Duration;

pub use gen::*;

/// How a transaction attempt failed.
#[derive(Debug)]
pub enum TxError {
    /// The engine refused it in a way worth retrying (conflict, deadlock, lock timeout,
    /// busy): nothing was written; run it again.
    Retry(String),
    /// Anything else: the run fails.
    Fatal(String),
}

pub type TxResult<T> = Result<T, TxError>;

/// One engine's TPC-C: its load and its five transactions, each one whole transaction
/// (commit included); shared by every terminal thread.
pub trait TpccDb: Send + Sync {
    /// Stores rows of the initial population (untimed; not necessarily one transaction).
    fn load(&self, rows: &[Row]) -> Result<(), String>;
    /// After the load: make it durable and settle (flush, compaction), untimed.
    fn after_load(&self) -> Result<(), String> {
        Ok(())
    }
    /// `Ok(true)`: committed; `Ok(false)`: rolled back by TPC-C's unknown-item rule.
    fn new_order(&self, x: &NewOrderIn) -> TxResult<bool>;
    fn payment(&self, x: &PaymentIn) -> TxResult<()>;
    fn order_status(&self, x: &OrderStatusIn) -> TxResult<()>;
    fn delivery(&self, x: &DeliveryIn) -> TxResult<()>;
    /// The count of low-stock items.
    fn stock_level(&self, x: &StockLevelIn) -> TxResult<u32>;
    /// The totals the consistency conditions compare, read in one consistent view.
    fn totals(&self, warehouses: u32) -> Result<Totals, String>;
    /// What the engine's transactions are, for the JSON line (`tpcc.mode`).
    fn mode(&self) -> String;
    /// Engine counters for `engine_stats`, if any.
    fn stats(&self) -> Option<serde_json::Value> {
        None
    }
    /// Flush (after the run, before sizes are measured), and wait for the engine to settle.
    fn settle(&self) -> Result<(), String> {
        Ok(())
    }
}

/// Per district (and per warehouse), the figures TPC-C's consistency conditions 1–4
/// compare (clause 3.3.2).
#[derive(Debug, Default, Clone)]
pub struct Totals {
    /// Per warehouse: W_YTD, and the sum of its districts' D_YTD (cents).
    pub w_ytd: Vec<(u32, i64, i64)>,
    pub districts: Vec<DistrictTotals>,
}

#[derive(Debug, Default, Clone)]
pub struct DistrictTotals {
    pub w: u32,
    pub d: u32,
    pub next_o_id: u32,
    /// max(O_ID) over the district's orders (0: none).
    pub max_o_id: u32,
    /// max and min NO_O_ID and the count of NEW-ORDER rows (0, 0, 0: none).
    pub max_no_o_id: u32,
    pub min_no_o_id: u32,
    pub new_orders: u64,
    /// sum(O_OL_CNT) and the count of ORDER-LINE rows.
    pub sum_ol_cnt: u64,
    pub order_lines: u64,
}

/// TPC-C's consistency conditions 1–4 on `t`; the violations, each as a sentence (empty:
/// consistent).
pub fn check(t: &Totals, warehouses: u32) -> Vec<String> {
    let mut bad = Vec::new();
    if t.w_ytd.len() != warehouses as usize {
        bad.push(format!(
            "{} warehouses read, {warehouses} expected",
            t.w_ytd.len()
        ));
    }
    if t.districts.len() != (warehouses * DISTRICTS) as usize {
        bad.push(format!(
            "{} districts read, {} expected",
            t.districts.len(),
            warehouses * DISTRICTS
        ));
    }
    for &(w, ytd, sum) in &t.w_ytd {
        if ytd != sum {
            bad.push(format!(
                "condition 1: warehouse {w}: W_YTD {ytd} != sum(D_YTD) {sum}"
            ));
        }
    }
    for d in &t.districts {
        let at = format!("warehouse {} district {}", d.w, d.d);
        if d.next_o_id.wrapping_sub(1) != d.max_o_id
            || (d.new_orders > 0 && d.max_no_o_id != d.max_o_id)
        {
            bad.push(format!(
                "condition 2: {at}: D_NEXT_O_ID - 1 = {}, max(O_ID) = {}, max(NO_O_ID) = {}",
                d.next_o_id.wrapping_sub(1),
                d.max_o_id,
                d.max_no_o_id
            ));
        }
        if d.new_orders > 0 && u64::from(d.max_no_o_id - d.min_no_o_id + 1) != d.new_orders {
            bad.push(format!(
                "condition 3: {at}: max(NO_O_ID) - min(NO_O_ID) + 1 = {}, NEW-ORDER rows {}",
                d.max_no_o_id - d.min_no_o_id + 1,
                d.new_orders
            ));
        }
        if d.sum_ol_cnt != d.order_lines {
            bad.push(format!(
                "condition 4: {at}: sum(O_OL_CNT) = {}, ORDER-LINE rows {}",
                d.sum_ol_cnt, d.order_lines
            ));
        }
    }
    bad
}

/// The run's parameters.
#[derive(Clone, Debug)]
pub struct Params {
    pub warehouses: u32,
    pub sizes: Sizes,
    pub threads: usize,
    pub duration: Duration,
    pub seed: u64,
}

/// The engine names `tpcc` knows, with how each runs its transactions.
pub const ENGINES: &[(&str, &str)] = &[
    ("silt", "silt, optimistic, Serializable"),
    ("silt-si", "silt, optimistic, Snapshot"),
    ("silt-pess", "silt, pessimistic, Serializable"),
    ("silt-pess-si", "silt, pessimistic, Snapshot"),
    ("sqlite", "SQLite, SQL tables and indexes, BEGIN IMMEDIATE"),
    ("rocksdb", "RocksDB TransactionDB (pessimistic)"),
    ("rocksdb-occ", "RocksDB OptimisticTransactionDB"),
    ("fjall", "fjall OptimisticTxDatabase"),
    ("redb", "redb, one write transaction at a time"),
    ("tidesdb", "TidesDB transactions, Serializable"),
];

/// Opens engine `name` for `tpcc` in `cfg.dir`.
pub fn open(name: &str, cfg: &crate::engine::EngineConfig) -> Result<Box<dyn TpccDb>, String> {
    use silt::{Concurrency as C, IsolationLevel as I};
    let silt = |i, c| -> Result<Box<dyn TpccDb>, String> {
        Ok(Box::new(kv::KvTpcc {
            store: kv::SiltStore::open(cfg, &kv::Table::TPCC, i, c)?,
        }))
    };
    match name {
        "silt" => silt(I::Serializable, C::Optimistic),
        "silt-si" => silt(I::Snapshot, C::Optimistic),
        "silt-pess" => silt(I::Serializable, C::Pessimistic),
        "silt-pess-si" => silt(I::Snapshot, C::Pessimistic),
        #[cfg(feature = "sqlite")]
        "sqlite" => Ok(Box::new(sql::SqliteTpcc::open(cfg)?)),
        #[cfg(feature = "fjall")]
        "fjall" => Ok(Box::new(kv::KvTpcc {
            store: fj::FjallStore::open(cfg, &kv::Table::TPCC)?,
        })),
        #[cfg(feature = "tidesdb")]
        "tidesdb" => Ok(Box::new(kv::KvTpcc {
            store: tides::TidesStore::open(cfg, &kv::Table::TPCC)?,
        })),
        #[cfg(feature = "redb")]
        "redb" => Ok(Box::new(kv::KvTpcc {
            store: rd::RedbStore::open(cfg, &kv::Table::TPCC)?,
        })),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => Ok(Box::new(kv::KvTpcc {
            store: rocks::RocksStore::open(cfg, &kv::Table::TPCC, false)?,
        })),
        #[cfg(feature = "rocksdb")]
        "rocksdb-occ" => Ok(Box::new(kv::KvTpcc {
            store: rocks::RocksStore::open(cfg, &kv::Table::TPCC, true)?,
        })),
        other => Err(format!(
            "tpcc has no adapter for engine {other:?} (tpcc engines: {})",
            ENGINES
                .iter()
                .map(|(n, about)| format!("{n} ({about})"))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}
