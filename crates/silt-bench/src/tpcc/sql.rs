//! TPC-C on SQLite with real SQL: the nine tables (primary keys as TPC-C's, `WITHOUT
//! ROWID` where the key is composite), an index on CUSTOMER (w, d, last, first) for
//! customers by last name and one on ORDERS (w, d, c, o) for a customer's newest order,
//! the five transactions as SQL statements (prepared once per connection). The writing
//! transactions (New-Order, Payment, Delivery) are `BEGIN IMMEDIATE` (they take the write
//! lock first, so they never fail to upgrade a read lock; writers run one at a time); the
//! read-only ones (Order-Status, Stock-Level) are deferred `BEGIN`, a snapshot in WAL
//! mode. `SQLITE_BUSY` (after the 60 s busy timeout) would be retried like a conflict.
//! Connections, pragmas, sync modes and the in-process write lock that writing
//! transactions hold are `engine/sqlite_pool.rs`'s, shared with the key-value adapter. The ten S_DIST_xx columns are one 240-character column
//! `s_dist`, read with `substr`.

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use crate::engine::sqlite_pool::SqlitePool;

use super::*;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS warehouse (w_id INTEGER PRIMARY KEY, w_name TEXT, w_address TEXT,
  w_tax INTEGER, w_ytd INTEGER);
CREATE TABLE IF NOT EXISTS district (d_w_id INTEGER, d_id INTEGER, d_name TEXT, d_address TEXT,
  d_tax INTEGER, d_ytd INTEGER, d_next_o_id INTEGER, PRIMARY KEY (d_w_id, d_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS customer (c_w_id INTEGER, c_d_id INTEGER, c_id INTEGER,
  c_first TEXT, c_middle TEXT, c_last TEXT, c_address TEXT, c_phone TEXT, c_since INTEGER,
  c_credit TEXT, c_credit_lim INTEGER, c_discount INTEGER, c_balance INTEGER,
  c_ytd_payment INTEGER, c_payment_cnt INTEGER, c_delivery_cnt INTEGER, c_data TEXT,
  PRIMARY KEY (c_w_id, c_d_id, c_id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS customer_name ON customer (c_w_id, c_d_id, c_last, c_first);
CREATE TABLE IF NOT EXISTS history (h_c_id INTEGER, h_c_d_id INTEGER, h_c_w_id INTEGER,
  h_d_id INTEGER, h_w_id INTEGER, h_date INTEGER, h_amount INTEGER, h_data TEXT);
CREATE TABLE IF NOT EXISTS new_order (no_w_id INTEGER, no_d_id INTEGER, no_o_id INTEGER,
  PRIMARY KEY (no_w_id, no_d_id, no_o_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS orders (o_w_id INTEGER, o_d_id INTEGER, o_id INTEGER,
  o_c_id INTEGER, o_entry_d INTEGER, o_carrier_id INTEGER, o_ol_cnt INTEGER,
  o_all_local INTEGER, PRIMARY KEY (o_w_id, o_d_id, o_id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS orders_customer ON orders (o_w_id, o_d_id, o_c_id, o_id);
CREATE TABLE IF NOT EXISTS order_line (ol_w_id INTEGER, ol_d_id INTEGER, ol_o_id INTEGER,
  ol_number INTEGER, ol_i_id INTEGER, ol_supply_w_id INTEGER, ol_delivery_d INTEGER,
  ol_quantity INTEGER, ol_amount INTEGER, ol_dist_info TEXT,
  PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS item (i_id INTEGER PRIMARY KEY, i_im_id INTEGER, i_name TEXT,
  i_price INTEGER, i_data TEXT);
CREATE TABLE IF NOT EXISTS stock (s_w_id INTEGER, s_i_id INTEGER, s_quantity INTEGER,
  s_dist TEXT, s_ytd INTEGER, s_order_cnt INTEGER, s_remote_cnt INTEGER, s_data TEXT,
  PRIMARY KEY (s_w_id, s_i_id)) WITHOUT ROWID;
";

fn tx_err(e: rusqlite::Error) -> TxError {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
            TxError::Retry(format!("sqlite: {e}"))
        }
        _ => TxError::Fatal(format!("sqlite: {e}")),
    }
}

pub struct SqliteTpcc {
    pool: SqlitePool,
}

impl SqliteTpcc {
    pub fn open(cfg: &crate::engine::EngineConfig) -> Result<SqliteTpcc, String> {
        Ok(SqliteTpcc {
            pool: SqlitePool::open(cfg, "tpcc.sqlite", 64, SCHEMA)?,
        })
    }

    /// Runs `f` on a pooled connection (one per thread at a time), holding the pool's
    /// write lock if `write`.
    fn with<T>(&self, write: bool, f: impl FnOnce(&mut Connection) -> TxResult<T>) -> TxResult<T> {
        let mut c = self.pool.lease_for(write).map_err(TxError::Fatal)?;
        f(&mut c)
    }

    fn write_tx<T>(
        &self,
        f: impl FnOnce(&rusqlite::Transaction<'_>) -> TxResult<Option<T>>,
    ) -> TxResult<Option<T>> {
        self.with(true, |c| {
            let tx = c
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(tx_err)?;
            match f(&tx)? {
                Some(v) => {
                    tx.commit().map_err(tx_err)?;
                    Ok(Some(v))
                }
                None => Ok(None), // dropped: rolled back
            }
        })
    }

    fn read_tx<T>(&self, f: impl FnOnce(&rusqlite::Transaction<'_>) -> TxResult<T>) -> TxResult<T> {
        self.with(false, |c| {
            let tx = c
                .transaction_with_behavior(TransactionBehavior::Deferred)
                .map_err(tx_err)?;
            let v = f(&tx)?;
            tx.commit().map_err(tx_err)?;
            Ok(v)
        })
    }
}

/// The customer `sel` names in (w, d).
fn customer_id(tx: &rusqlite::Transaction<'_>, w: u32, d: u32, sel: &CustomerSel) -> TxResult<u32> {
    match sel {
        CustomerSel::Id(c) => Ok(*c),
        CustomerSel::Last(last) => {
            let mut st = tx
                .prepare_cached(
                    "SELECT c_id FROM customer WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_last = ?3 \
                     ORDER BY c_first",
                )
                .map_err(tx_err)?;
            let ids = st
                .query_map(params![w, d, last], |r| r.get::<_, u32>(0))
                .map_err(tx_err)?
                .collect::<Result<Vec<u32>, _>>()
                .map_err(tx_err)?;
            if ids.is_empty() {
                return Err(TxError::Fatal(format!("sqlite: no customer named {last}")));
            }
            Ok(ids[middle(ids.len())])
        }
    }
}

fn opt0<T: Default + PartialEq + rusqlite::ToSql>(x: T) -> Option<T> {
    (x != T::default()).then_some(x)
}

impl TpccDb for SqliteTpcc {
    fn load(&self, rows: &[Row]) -> Result<(), String> {
        self.write_tx(|tx| {
            for r in rows {
                let n = match r {
                    Row::Item(x) => tx
                        .prepare_cached("INSERT INTO item VALUES (?1, ?2, ?3, ?4, ?5)")
                        .and_then(|mut s| {
                            s.execute(params![x.i_id, x.im_id, x.name, x.price, x.data])
                        }),
                    Row::Warehouse(x) => tx
                        .prepare_cached("INSERT INTO warehouse VALUES (?1, ?2, ?3, ?4, ?5)")
                        .and_then(|mut s| {
                            s.execute(params![x.w_id, x.name, x.address, x.tax, x.ytd])
                        }),
                    Row::District(x) => tx
                        .prepare_cached("INSERT INTO district VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)")
                        .and_then(|mut s| {
                            s.execute(params![
                                x.w_id,
                                x.d_id,
                                x.name,
                                x.address,
                                x.tax,
                                x.ytd,
                                x.next_o_id
                            ])
                        }),
                    Row::Customer(x) => tx
                        .prepare_cached(
                            "INSERT INTO customer VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, \
                             ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
                        )
                        .and_then(|mut s| {
                            s.execute(params![
                                x.w_id,
                                x.d_id,
                                x.c_id,
                                x.first,
                                x.middle,
                                x.last,
                                x.address,
                                x.phone,
                                x.since as i64,
                                x.credit,
                                x.credit_lim,
                                x.discount,
                                x.balance,
                                x.ytd_payment,
                                x.payment_cnt,
                                x.delivery_cnt,
                                x.data
                            ])
                        }),
                    Row::History(x) => tx
                        .prepare_cached(
                            "INSERT INTO history VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                        )
                        .and_then(|mut s| {
                            s.execute(params![
                                x.c_id,
                                x.c_d_id,
                                x.c_w_id,
                                x.d_id,
                                x.w_id,
                                x.date as i64,
                                x.amount,
                                x.data
                            ])
                        }),
                    Row::Order(x) => tx
                        .prepare_cached(
                            "INSERT INTO orders VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                        )
                        .and_then(|mut s| {
                            s.execute(params![
                                x.w_id,
                                x.d_id,
                                x.o_id,
                                x.c_id,
                                x.entry_d as i64,
                                opt0(x.carrier_id),
                                x.ol_cnt,
                                x.all_local
                            ])
                        }),
                    Row::NewOrder { w_id, d_id, o_id } => tx
                        .prepare_cached("INSERT INTO new_order VALUES (?1, ?2, ?3)")
                        .and_then(|mut s| s.execute(params![w_id, d_id, o_id])),
                    Row::OrderLine(x) => tx
                        .prepare_cached(
                            "INSERT INTO order_line VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, \
                             ?10)",
                        )
                        .and_then(|mut s| {
                            s.execute(params![
                                x.w_id,
                                x.d_id,
                                x.o_id,
                                x.number,
                                x.i_id,
                                x.supply_w_id,
                                opt0(x.delivery_d as i64),
                                x.quantity,
                                x.amount,
                                x.dist_info
                            ])
                        }),
                    Row::Stock(x) => tx
                        .prepare_cached("INSERT INTO stock VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)")
                        .and_then(|mut s| {
                            s.execute(params![
                                x.w_id,
                                x.i_id,
                                x.quantity,
                                x.dist,
                                x.ytd,
                                x.order_cnt,
                                x.remote_cnt,
                                x.data
                            ])
                        }),
                };
                n.map_err(tx_err)?;
            }
            Ok(Some(()))
        })
        .map(|_| ())
        .map_err(|e| format!("{e:?}"))
    }

    fn after_load(&self) -> Result<(), String> {
        self.settle()
    }

    fn new_order(&self, x: &NewOrderIn) -> TxResult<bool> {
        let r = self.write_tx(|tx| {
            let w_tax: i64 = tx
                .prepare_cached("SELECT w_tax FROM warehouse WHERE w_id = ?1")
                .and_then(|mut s| s.query_row(params![x.w_id], |r| r.get(0)))
                .map_err(tx_err)?;
            let (d_tax, o_id): (i64, u32) = tx
                .prepare_cached(
                    "UPDATE district SET d_next_o_id = d_next_o_id + 1 \
                     WHERE d_w_id = ?1 AND d_id = ?2 RETURNING d_tax, d_next_o_id - 1",
                )
                .and_then(|mut s| s.query_row(params![x.w_id, x.d_id], |r| Ok((r.get(0)?, r.get(1)?))))
                .map_err(tx_err)?;
            let discount: i64 = tx
                .prepare_cached(
                    "SELECT c_discount FROM customer WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_id = ?3",
                )
                .and_then(|mut s| s.query_row(params![x.w_id, x.d_id, x.c_id], |r| r.get(0)))
                .map_err(tx_err)?;
            tx.prepare_cached("INSERT INTO orders VALUES (?1, ?2, ?3, ?4, ?5, NULL, ?6, ?7)")
                .and_then(|mut s| {
                    s.execute(params![
                        x.w_id,
                        x.d_id,
                        o_id,
                        x.c_id,
                        x.entry_d as i64,
                        x.lines.len() as u32,
                        u32::from(x.all_local())
                    ])
                })
                .map_err(tx_err)?;
            tx.prepare_cached("INSERT INTO new_order VALUES (?1, ?2, ?3)")
                .and_then(|mut s| s.execute(params![x.w_id, x.d_id, o_id]))
                .map_err(tx_err)?;
            let mut total = 0i64;
            for (n, l) in x.lines.iter().enumerate() {
                let price: Option<i64> = tx
                    .prepare_cached("SELECT i_price FROM item WHERE i_id = ?1")
                    .and_then(|mut s| s.query_row(params![l.i_id], |r| r.get(0)).optional())
                    .map_err(tx_err)?;
                let Some(price) = price else {
                    return Ok(None); // unknown item: roll back (TPC-C 2.4.2.3)
                };
                let q = i64::from(l.quantity);
                let dist: String = tx
                    .prepare_cached(
                        "UPDATE stock SET s_quantity = CASE WHEN s_quantity >= ?3 + 10 \
                         THEN s_quantity - ?3 ELSE s_quantity - ?3 + 91 END, \
                         s_ytd = s_ytd + ?3, s_order_cnt = s_order_cnt + 1, \
                         s_remote_cnt = s_remote_cnt + ?4 \
                         WHERE s_w_id = ?1 AND s_i_id = ?2 \
                         RETURNING substr(s_dist, ?5, 24)",
                    )
                    .and_then(|mut s| {
                        s.query_row(
                            params![
                                l.supply_w_id,
                                l.i_id,
                                q,
                                u32::from(l.supply_w_id != x.w_id),
                                (x.d_id - 1) * 24 + 1
                            ],
                            |r| r.get(0),
                        )
                    })
                    .map_err(tx_err)?;
                let amount = q * price;
                total += amount;
                tx.prepare_cached(
                    "INSERT INTO order_line VALUES (?1, ?2, ?3, ?4, ?5, ?6, NULL, ?7, ?8, ?9)",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        x.w_id,
                        x.d_id,
                        o_id,
                        n as u32 + 1,
                        l.i_id,
                        l.supply_w_id,
                        l.quantity,
                        amount,
                        dist
                    ])
                })
                .map_err(tx_err)?;
            }
            let _ = total * (10_000 - discount) * (10_000 + w_tax + d_tax);
            Ok(Some(()))
        })?;
        Ok(r.is_some())
    }

    fn payment(&self, x: &PaymentIn) -> TxResult<()> {
        self.write_tx(|tx| {
            let w_name: String = tx
                .prepare_cached("UPDATE warehouse SET w_ytd = w_ytd + ?2 WHERE w_id = ?1 RETURNING w_name")
                .and_then(|mut s| s.query_row(params![x.w_id, x.amount], |r| r.get(0)))
                .map_err(tx_err)?;
            let d_name: String = tx
                .prepare_cached(
                    "UPDATE district SET d_ytd = d_ytd + ?3 WHERE d_w_id = ?1 AND d_id = ?2 \
                     RETURNING d_name",
                )
                .and_then(|mut s| s.query_row(params![x.w_id, x.d_id, x.amount], |r| r.get(0)))
                .map_err(tx_err)?;
            let c_id = customer_id(tx, x.c_w_id, x.c_d_id, &x.customer)?;
            let (credit, data): (String, String) = tx
                .prepare_cached(
                    "UPDATE customer SET c_balance = c_balance - ?4, \
                     c_ytd_payment = c_ytd_payment + ?4, c_payment_cnt = c_payment_cnt + 1 \
                     WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_id = ?3 RETURNING c_credit, c_data",
                )
                .and_then(|mut s| {
                    s.query_row(params![x.c_w_id, x.c_d_id, c_id, x.amount], |r| {
                        Ok((r.get(0)?, r.get(1)?))
                    })
                })
                .map_err(tx_err)?;
            if credit == "BC" {
                tx.prepare_cached(
                    "UPDATE customer SET c_data = ?4 WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_id = ?3",
                )
                .and_then(|mut s| {
                    s.execute(params![x.c_w_id, x.c_d_id, c_id, bad_credit_data(x, c_id, &data)])
                })
                .map_err(tx_err)?;
            }
            tx.prepare_cached("INSERT INTO history VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)")
                .and_then(|mut s| {
                    s.execute(params![
                        c_id,
                        x.c_d_id,
                        x.c_w_id,
                        x.d_id,
                        x.w_id,
                        x.date as i64,
                        x.amount,
                        format!("{w_name}    {d_name}")
                    ])
                })
                .map_err(tx_err)?;
            Ok(Some(()))
        })
        .map(|_| ())
    }

    fn order_status(&self, x: &OrderStatusIn) -> TxResult<()> {
        self.read_tx(|tx| {
            let c_id = customer_id(tx, x.w_id, x.d_id, &x.customer)?;
            let _balance: i64 = tx
                .prepare_cached(
                    "SELECT c_balance FROM customer WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_id = ?3",
                )
                .and_then(|mut s| s.query_row(params![x.w_id, x.d_id, c_id], |r| r.get(0)))
                .map_err(tx_err)?;
            let newest: Option<(u32, u32)> = tx
                .prepare_cached(
                    "SELECT o_id, o_ol_cnt FROM orders WHERE o_w_id = ?1 AND o_d_id = ?2 \
                     AND o_c_id = ?3 ORDER BY o_id DESC LIMIT 1",
                )
                .and_then(|mut s| {
                    s.query_row(params![x.w_id, x.d_id, c_id], |r| Ok((r.get(0)?, r.get(1)?)))
                        .optional()
                })
                .map_err(tx_err)?;
            if let Some((o_id, ol_cnt)) = newest {
                let mut st = tx
                    .prepare_cached(
                        "SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d \
                         FROM order_line WHERE ol_w_id = ?1 AND ol_d_id = ?2 AND ol_o_id = ?3",
                    )
                    .map_err(tx_err)?;
                let n = st
                    .query_map(params![x.w_id, x.d_id, o_id], |r| r.get::<_, i64>(3))
                    .map_err(tx_err)?
                    .count();
                if n != ol_cnt as usize {
                    return Err(TxError::Fatal(format!(
                        "order-status: order {o_id} has {n} lines, O_OL_CNT {ol_cnt}"
                    )));
                }
            }
            Ok(())
        })
    }

    fn delivery(&self, x: &DeliveryIn) -> TxResult<()> {
        self.write_tx(|tx| {
            for d in 1..=DISTRICTS {
                let o_id: Option<u32> = tx
                    .prepare_cached(
                        "SELECT no_o_id FROM new_order WHERE no_w_id = ?1 AND no_d_id = ?2 \
                         ORDER BY no_o_id LIMIT 1",
                    )
                    .and_then(|mut s| s.query_row(params![x.w_id, d], |r| r.get(0)).optional())
                    .map_err(tx_err)?;
                let Some(o_id) = o_id else { continue };
                tx.prepare_cached(
                    "DELETE FROM new_order WHERE no_w_id = ?1 AND no_d_id = ?2 AND no_o_id = ?3",
                )
                .and_then(|mut s| s.execute(params![x.w_id, d, o_id]))
                .map_err(tx_err)?;
                let c_id: u32 = tx
                    .prepare_cached(
                        "UPDATE orders SET o_carrier_id = ?4 WHERE o_w_id = ?1 AND o_d_id = ?2 \
                         AND o_id = ?3 RETURNING o_c_id",
                    )
                    .and_then(|mut s| {
                        s.query_row(params![x.w_id, d, o_id, x.carrier_id], |r| r.get(0))
                    })
                    .map_err(tx_err)?;
                let sum: i64 = tx
                    .prepare_cached(
                        "UPDATE order_line SET ol_delivery_d = ?4 WHERE ol_w_id = ?1 \
                         AND ol_d_id = ?2 AND ol_o_id = ?3 RETURNING ol_amount",
                    )
                    .and_then(|mut s| {
                        s.query_map(params![x.w_id, d, o_id, x.date as i64], |r| {
                            r.get::<_, i64>(0)
                        })?
                        .sum::<rusqlite::Result<i64>>()
                    })
                    .map_err(tx_err)?;
                tx.prepare_cached(
                    "UPDATE customer SET c_balance = c_balance + ?4, \
                     c_delivery_cnt = c_delivery_cnt + 1 \
                     WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_id = ?3",
                )
                .and_then(|mut s| s.execute(params![x.w_id, d, c_id, sum]))
                .map_err(tx_err)?;
            }
            Ok(Some(()))
        })
        .map(|_| ())
    }

    fn stock_level(&self, x: &StockLevelIn) -> TxResult<u32> {
        self.read_tx(|tx| {
            tx.prepare_cached(
                "SELECT count(DISTINCT s_i_id) FROM district, order_line, stock \
                 WHERE d_w_id = ?1 AND d_id = ?2 AND ol_w_id = ?1 AND ol_d_id = ?2 \
                 AND ol_o_id < d_next_o_id AND ol_o_id >= d_next_o_id - 20 \
                 AND s_w_id = ?1 AND s_i_id = ol_i_id AND s_quantity < ?3",
            )
            .and_then(|mut s| s.query_row(params![x.w_id, x.d_id, x.threshold], |r| r.get(0)))
            .map_err(tx_err)
        })
    }

    fn totals(&self, _warehouses: u32) -> Result<Totals, String> {
        self.read_tx(|tx| {
            let q = |sql: &str| tx.prepare(sql).map_err(tx_err);
            let w_ytd = q("SELECT w_id, w_ytd, (SELECT sum(d_ytd) FROM district WHERE d_w_id = w_id) \
                 FROM warehouse ORDER BY w_id")?
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .map_err(tx_err)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(tx_err)?;
            let districts = q("SELECT d_w_id, d_id, d_next_o_id,
                   (SELECT coalesce(max(o_id), 0) FROM orders WHERE o_w_id = d_w_id AND o_d_id = d_id),
                   (SELECT coalesce(max(no_o_id), 0) FROM new_order WHERE no_w_id = d_w_id AND no_d_id = d_id),
                   (SELECT coalesce(min(no_o_id), 0) FROM new_order WHERE no_w_id = d_w_id AND no_d_id = d_id),
                   (SELECT count(*) FROM new_order WHERE no_w_id = d_w_id AND no_d_id = d_id),
                   (SELECT coalesce(sum(o_ol_cnt), 0) FROM orders WHERE o_w_id = d_w_id AND o_d_id = d_id),
                   (SELECT count(*) FROM order_line WHERE ol_w_id = d_w_id AND ol_d_id = d_id)
                 FROM district ORDER BY d_w_id, d_id")?
                .query_map([], |r| {
                    Ok(DistrictTotals {
                        w: r.get(0)?,
                        d: r.get(1)?,
                        next_o_id: r.get(2)?,
                        max_o_id: r.get(3)?,
                        max_no_o_id: r.get(4)?,
                        min_no_o_id: r.get(5)?,
                        new_orders: r.get::<_, i64>(6)? as u64,
                        sum_ol_cnt: r.get::<_, i64>(7)? as u64,
                        order_lines: r.get::<_, i64>(8)? as u64,
                    })
                })
                .map_err(tx_err)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(tx_err)?;
            Ok(Totals { w_ytd, districts })
        })
        .map_err(|e| format!("tpcc check: {e:?}"))
    }

    fn mode(&self) -> String {
        "sqlite BEGIN IMMEDIATE (writers, one at a time in the process), BEGIN (readers), WAL"
            .into()
    }

    fn settle(&self) -> Result<(), String> {
        self.with(true, |c| {
            c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
                .map_err(tx_err)
        })
        .map_err(|e| format!("{e:?}"))
    }
}
