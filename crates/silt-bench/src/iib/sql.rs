//! The iibench table on SQLite, in SQL: `purchases_index` with `transactionid INTEGER
//! PRIMARY KEY` (the rowid) and iibench's three secondary indexes, `marketsegment` (price,
//! customerid), `registersegment` (cashregisterid, price, customerid) and `pdc` (price,
//! dateandtime, customerid), which SQLite maintains in each statement's transaction.
//! Writing transactions are `BEGIN IMMEDIATE` (writers run one at a time); the check is a
//! deferred `BEGIN` (a snapshot in WAL mode) and `PRAGMA integrity_check`, which compares
//! every index with the table. Connections, pragmas, sync modes and the in-process write
//! lock that writing transactions hold are `engine/sqlite_pool.rs`'s (as `tpcc/sql.rs`).

use std::ops::Range;

use rusqlite::{params, Connection, TransactionBehavior};

use super::{IibDb, Purchase, Shape};
use crate::engine::sqlite_pool::SqlitePool;
use crate::tpcc::{TxError, TxResult};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS purchases_index (transactionid INTEGER PRIMARY KEY,
  dateandtime INTEGER NOT NULL, cashregisterid INTEGER NOT NULL, customerid INTEGER NOT NULL,
  productid INTEGER NOT NULL, price INTEGER NOT NULL, data BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS marketsegment ON purchases_index (price, customerid);
CREATE INDEX IF NOT EXISTS registersegment ON purchases_index (cashregisterid, price, customerid);
CREATE INDEX IF NOT EXISTS pdc ON purchases_index (price, dateandtime, customerid);
";

const INSERT: &str = "INSERT INTO purchases_index (transactionid, dateandtime, cashregisterid, \
     customerid, productid, price, data) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";

fn tx_err(e: rusqlite::Error) -> TxError {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
            TxError::Retry(format!("sqlite: {e}"))
        }
        _ => TxError::Fatal(format!("sqlite: {e}")),
    }
}

pub struct SqliteIib {
    shape: Shape,
    pool: SqlitePool,
}

impl SqliteIib {
    pub fn open(cfg: &crate::engine::EngineConfig, shape: Shape) -> Result<SqliteIib, String> {
        Ok(SqliteIib {
            shape,
            pool: SqlitePool::open(cfg, "iib.sqlite", 16, SCHEMA)?,
        })
    }

    /// Runs `f` on a pooled connection (one per thread at a time), holding the pool's
    /// write lock if `write`.
    fn with<T>(&self, write: bool, f: impl FnOnce(&mut Connection) -> TxResult<T>) -> TxResult<T> {
        let mut c = self.pool.lease_for(write).map_err(TxError::Fatal)?;
        f(&mut c)
    }

    fn insert_rows(&self, ids: Range<u64>) -> TxResult<()> {
        self.with(true, |c| {
            let tx = c
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(tx_err)?;
            {
                let mut st = tx.prepare_cached(INSERT).map_err(tx_err)?;
                for id in ids {
                    let r = self.shape.row(id);
                    st.execute(params![
                        id as i64,
                        r.dateandtime as i64,
                        r.cashregisterid,
                        r.customerid,
                        r.productid,
                        r.price,
                        r.data
                    ])
                    .map_err(tx_err)?;
                }
            }
            tx.commit().map_err(tx_err)
        })
    }
}

impl IibDb for SqliteIib {
    fn load(&self, ids: Range<u64>) -> Result<(), String> {
        self.insert_rows(ids).map_err(|e| format!("{e:?}"))
    }

    fn insert(&self, ids: Range<u64>) -> TxResult<()> {
        self.insert_rows(ids)
    }

    fn lowest(&self, below: u64) -> TxResult<Option<u64>> {
        self.with(false, |c| {
            c.prepare_cached(
                "SELECT min(transactionid) FROM purchases_index WHERE transactionid < ?1",
            )
            .and_then(|mut st| st.query_row([below as i64], |r| r.get::<_, Option<i64>>(0)))
            .map(|id| id.map(|id| id as u64))
            .map_err(tx_err)
        })
    }

    fn delete_lowest(&self, n: usize, from: u64, below: u64) -> TxResult<Vec<u64>> {
        self.with(true, |c| {
            let tx = c
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(tx_err)?;
            let ids = {
                let mut st = tx
                    .prepare_cached(
                        "SELECT transactionid FROM purchases_index WHERE transactionid >= ?1 \
                         AND transactionid < ?2 ORDER BY transactionid LIMIT ?3",
                    )
                    .map_err(tx_err)?;
                let rows = st
                    .query_map(params![from as i64, below as i64, n as i64], |r| {
                        r.get::<_, i64>(0)
                    })
                    .map_err(tx_err)?;
                rows.map(|r| r.map(|id| id as u64))
                    .collect::<Result<Vec<u64>, _>>()
                    .map_err(tx_err)?
            };
            if let (Some(&lo), Some(&hi)) = (ids.first(), ids.last()) {
                let mut st = tx
                    .prepare_cached(
                        "DELETE FROM purchases_index WHERE transactionid BETWEEN ?1 AND ?2",
                    )
                    .map_err(tx_err)?;
                let gone = st.execute(params![lo as i64, hi as i64]).map_err(tx_err)?;
                if gone != ids.len() {
                    return Err(TxError::Fatal(format!(
                        "sqlite: deleted {gone} rows of the {} found",
                        ids.len()
                    )));
                }
            }
            tx.commit().map_err(tx_err)?;
            Ok(ids)
        })
    }

    fn check(&self, live: Range<u64>) -> Result<Vec<String>, String> {
        self.with(false, |c| {
            let tx = c
                .transaction_with_behavior(TransactionBehavior::Deferred)
                .map_err(tx_err)?;
            let mut bad = Vec::new();
            let mut next = live.start;
            let mut rows = 0u64;
            {
                let mut st = tx
                    .prepare(
                        "SELECT transactionid, dateandtime, cashregisterid, customerid, \
                         productid, price, data FROM purchases_index ORDER BY transactionid",
                    )
                    .map_err(tx_err)?;
                let mut q = st.query([]).map_err(tx_err)?;
                while let Some(r) = q.next().map_err(tx_err)? {
                    rows += 1;
                    let id = r.get::<_, i64>(0).map_err(tx_err)? as u64;
                    let got = Purchase {
                        id,
                        dateandtime: r.get::<_, i64>(1).map_err(tx_err)? as u64,
                        cashregisterid: r.get(2).map_err(tx_err)?,
                        customerid: r.get(3).map_err(tx_err)?,
                        productid: r.get(4).map_err(tx_err)?,
                        price: r.get(5).map_err(tx_err)?,
                        data: r.get(6).map_err(tx_err)?,
                    };
                    if bad.len() < 10 {
                        if id != next {
                            bad.push(format!(
                                "row {id} where row {next} was expected (live rows {live:?})"
                            ));
                        } else if got != self.shape.row(id) {
                            bad.push(format!("row {id} is not the row inserted"));
                        }
                    }
                    next = id + 1;
                }
            }
            let expected = live.end - live.start;
            if rows != expected {
                bad.push(format!(
                    "{rows} rows, {expected} expected (live rows {live:?})"
                ));
            }
            // Every index entry has its row and every row its entries.
            let mut st = tx.prepare("PRAGMA integrity_check").map_err(tx_err)?;
            let problems = st
                .query_map([], |r| r.get::<_, String>(0))
                .map_err(tx_err)?
                .collect::<Result<Vec<String>, _>>()
                .map_err(tx_err)?;
            if problems != ["ok"] {
                bad.extend(problems.into_iter().take(10));
            }
            Ok(bad)
        })
        .map_err(|e| format!("iib check: {e:?}"))
    }

    fn mode(&self) -> String {
        "SQLite: a table and three indexes in SQL, writers BEGIN IMMEDIATE one at a time in the process".into()
    }

    fn single_delete(&self) -> bool {
        false
    }

    /// A WAL checkpoint, so the database file holds what the run wrote.
    fn settle(&self) -> Result<(), String> {
        self.with(true, |c| {
            c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
                .map_err(tx_err)
        })
        .map_err(|e| format!("{e:?}"))
    }
}
