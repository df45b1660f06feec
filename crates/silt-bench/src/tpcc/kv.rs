//! TPC-C on a transactional key-value store: the tables as keyspaces (column families),
//! keys of big-endian integers, values in a small fixed encoding, and the five
//! transactions written once against [`KvTxn`]; each engine supplies a [`KvStore`].
//!
//! Keyspaces and keys (every integer 4 bytes big-endian, so key order is id order):
//!
//! | keyspace | key | value |
//! |---|---|---|
//! | `warehouse` | w | the row's static columns (its W_YTD is 0 and unused) |
//! | `warehouse` | w `y` | W_YTD (8 bytes) |
//! | `district` | w d | the row's static columns (its D_YTD and D_NEXT_O_ID are 0 and unused) |
//! | `district` | w d `y` | D_YTD (8 bytes) |
//! | `district` | w d `n` | D_NEXT_O_ID (4 bytes) |
//! | `customer` | w d c | the row |
//! | `customer_name` (index) | w d C_LAST 0x00 C_FIRST 0x00 c | empty |
//! | `history` | w d seq(8 bytes) | the row |
//! | `new_order` | w d o | empty |
//! | `order` | w d o | the row |
//! | `order_customer` (index) | w d c o | empty |
//! | `order_line` | w d o n | the row |
//! | `item` | i | the row |
//! | `stock` | w i | the row |
//!
//! `order_customer` is the index Order-Status needs to find a customer's newest order
//! (TPC-C lets the implementation choose; a SQL engine has it as an index on ORDER).
//!
//! The columns that transactions update in WAREHOUSE and DISTRICT have keys of their own
//! (CockroachDB's TPC-C schema puts them in column families of their own for the same
//! reason): New-Order reads W_TAX and D_TAX and updates D_NEXT_O_ID, Payment reads W_NAME and
//! D_NAME and updates W_YTD and D_YTD. As one value per row, every Payment conflicted with
//! every concurrent New-Order over columns neither reads of the other (a serializable
//! engine's read check, or a lock on the district row): 40% of silt's New-Orders retried
//! at 8 threads, most on the warehouse row Payment had written. Every key-value engine
//! shares this layout; SQLite has its SQL tables (`sql.rs`).

use super::*;

/// The keyspaces, in the order engines create them: TPC-C's ([`Table::TPCC`]) and the
/// iibench table of `queue_indexed` and `txn_batch_sweep` ([`Table::IIB`], `crate::iib`).
/// A store opens the keyspaces of one workload (`open(cfg, tables)`); a transaction that
/// names another fails (`TxError::Fatal`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    Warehouse,
    District,
    Customer,
    CustomerName,
    History,
    NewOrder,
    Order,
    OrderCustomer,
    OrderLine,
    Item,
    Stock,
    /// iibench's `purchases_index`: transactionid → the row.
    Purchases,
    /// Index `marketsegment` (price, customerid, transactionid) → empty.
    Marketsegment,
    /// Index `registersegment` (cashregisterid, price, customerid, transactionid) → empty.
    Registersegment,
    /// Index `pdc` (price, dateandtime, customerid, transactionid) → empty.
    Pdc,
}

impl Table {
    pub const ALL: [Table; 15] = [
        Table::Warehouse,
        Table::District,
        Table::Customer,
        Table::CustomerName,
        Table::History,
        Table::NewOrder,
        Table::Order,
        Table::OrderCustomer,
        Table::OrderLine,
        Table::Item,
        Table::Stock,
        Table::Purchases,
        Table::Marketsegment,
        Table::Registersegment,
        Table::Pdc,
    ];

    /// TPC-C's keyspaces.
    pub const TPCC: [Table; 11] = [
        Table::Warehouse,
        Table::District,
        Table::Customer,
        Table::CustomerName,
        Table::History,
        Table::NewOrder,
        Table::Order,
        Table::OrderCustomer,
        Table::OrderLine,
        Table::Item,
        Table::Stock,
    ];

    /// The iibench table and its three secondary indexes (`crate::iib`).
    pub const IIB: [Table; 4] = [
        Table::Purchases,
        Table::Marketsegment,
        Table::Registersegment,
        Table::Pdc,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Table::Warehouse => "warehouse",
            Table::District => "district",
            Table::Customer => "customer",
            Table::CustomerName => "customer_name",
            Table::History => "history",
            Table::NewOrder => "new_order",
            Table::Order => "order",
            Table::OrderCustomer => "order_customer",
            Table::OrderLine => "order_line",
            Table::Item => "item",
            Table::Stock => "stock",
            Table::Purchases => "purchases_index",
            Table::Marketsegment => "marketsegment",
            Table::Registersegment => "registersegment",
            Table::Pdc => "pdc",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// The handle of keyspace `t` among a store's handles (one slot per [`Table::ALL`], `None`
/// where the store did not open that keyspace).
pub fn handle<H>(hs: &[Option<H>], t: Table) -> TxResult<&H> {
    hs.get(t.index())
        .and_then(Option::as_ref)
        .ok_or_else(|| TxError::Fatal(format!("keyspace {} is not open", t.name())))
}

/// One slot per [`Table::ALL`]: `open(t)` for the tables in `tables`, `None` elsewhere.
pub fn open_handles<H, E>(
    tables: &[Table],
    mut open: impl FnMut(Table) -> Result<H, E>,
) -> Result<Vec<Option<H>>, E> {
    let mut hs: Vec<Option<H>> = Table::ALL.iter().map(|_| None).collect();
    for &t in tables {
        hs[t.index()] = Some(open(t)?);
    }
    Ok(hs)
}

/// One transaction of a [`KvStore`]. Dropped without [`KvTxn::commit`], it rolls back.
pub trait KvTxn {
    fn get(&mut self, t: Table, k: &[u8]) -> TxResult<Option<Vec<u8>>>;
    /// A read that protects the key as if written (a lock, or a commit-time check).
    fn get_for_update(&mut self, t: Table, k: &[u8]) -> TxResult<Option<Vec<u8>>>;
    fn put(&mut self, t: Table, k: &[u8], v: &[u8]) -> TxResult<()>;
    fn delete(&mut self, t: Table, k: &[u8]) -> TxResult<()>;
    /// Deletes a key written at most once since it was last deleted (so compaction may drop
    /// the put and the tombstone together), where the engine has such a delete in its
    /// transactions; a plain [`KvTxn::delete`] elsewhere.
    fn single_delete(&mut self, t: Table, k: &[u8]) -> TxResult<()> {
        self.delete(t, k)
    }
    /// Calls `each` on up to `limit` pairs with `lo <= key < hi`, ascending (or descending
    /// with `reverse`); returns how many.
    fn scan(
        &mut self,
        t: Table,
        lo: &[u8],
        hi: &[u8],
        limit: usize,
        reverse: bool,
        each: &mut dyn FnMut(&[u8], &[u8]),
    ) -> TxResult<usize>;
    fn commit(self) -> TxResult<()>;
}

/// A transactional key-value engine with the keyspaces of [`Table`].
pub trait KvStore: Send + Sync {
    type Txn<'a>: KvTxn
    where
        Self: 'a;
    /// A transaction; `read_only` for Order-Status, Stock-Level and the final check (an
    /// engine may give those a cheaper kind).
    fn begin(&self, read_only: bool) -> TxResult<Self::Txn<'_>>;
    /// Writes the pairs, untimed, not necessarily atomically (the initial load).
    fn load(&self, kvs: &[(Table, Vec<u8>, Vec<u8>)]) -> Result<(), String>;
    fn mode(&self) -> String;
    /// Whether [`KvTxn::single_delete`] is the engine's own single delete.
    fn has_single_delete(&self) -> bool {
        false
    }
    fn settle(&self) -> Result<(), String> {
        Ok(())
    }
    fn stats(&self) -> Option<serde_json::Value> {
        None
    }
}

// ------------------------------------------------------------------------- encoding

/// A key of big-endian `u32`s.
pub fn key(parts: &[u32]) -> Vec<u8> {
    let mut k = Vec::with_capacity(parts.len() * 4);
    for p in parts {
        k.extend_from_slice(&p.to_be_bytes());
    }
    k
}

fn u32_at(k: &[u8], i: usize) -> u32 {
    u32::from_be_bytes(k[i * 4..i * 4 + 4].try_into().expect("4 bytes"))
}

/// The keys just past every key that starts with `prefix`.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut e = prefix.to_vec();
    while let Some(last) = e.pop() {
        if last < 0xff {
            e.push(last + 1);
            return e;
        }
    }
    vec![0xff; prefix.len() + 1]
}

fn name_prefix(w: u32, d: u32, last: &str) -> Vec<u8> {
    let mut k = key(&[w, d]);
    k.extend_from_slice(last.as_bytes());
    k.push(0);
    k
}

fn name_key(c: &Customer) -> Vec<u8> {
    let mut k = name_prefix(c.w_id, c.d_id, &c.last);
    k.extend_from_slice(c.first.as_bytes());
    k.push(0);
    k.extend_from_slice(&c.c_id.to_be_bytes());
    k
}

/// A row's encoding. Sized at the start for the common rows (order lines ~60 bytes, stock
/// ~320, customers ~660 grow once): growing from empty reallocated three to five times per
/// row, 2–4% of every key-value engine's CPU in tpcc (`perf`, silt, 2026-11-28). All the
/// key-value adapters share it, so it moves their figures alike.
struct Enc(Vec<u8>);

impl Default for Enc {
    fn default() -> Self {
        Enc(Vec::with_capacity(384))
    }
}

impl Enc {
    fn u32(mut self, x: u32) -> Self {
        self.0.extend_from_slice(&x.to_le_bytes());
        self
    }
    fn u64(mut self, x: u64) -> Self {
        self.0.extend_from_slice(&x.to_le_bytes());
        self
    }
    fn i64(mut self, x: i64) -> Self {
        self.0.extend_from_slice(&x.to_le_bytes());
        self
    }
    fn s(mut self, x: &str) -> Self {
        self.0.extend_from_slice(&(x.len() as u16).to_le_bytes());
        self.0.extend_from_slice(x.as_bytes());
        self
    }
}

struct Dec<'a>(&'a [u8]);

impl Dec<'_> {
    fn take(&mut self, n: usize) -> TxResult<&[u8]> {
        if self.0.len() < n {
            return Err(TxError::Fatal("a row is shorter than its encoding".into()));
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn u32(&mut self) -> TxResult<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4")))
    }
    fn u64(&mut self) -> TxResult<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8")))
    }
    fn i64(&mut self) -> TxResult<i64> {
        Ok(i64::from_le_bytes(self.take(8)?.try_into().expect("8")))
    }
    fn s(&mut self) -> TxResult<String> {
        let n = u16::from_le_bytes(self.take(2)?.try_into().expect("2")) as usize;
        String::from_utf8(self.take(n)?.to_vec())
            .map_err(|_| TxError::Fatal("a row's text is not UTF-8".into()))
    }
}

/// A row that is stored as a value of its keyspace.
pub trait Stored: Sized {
    fn enc(&self) -> Vec<u8>;
    fn dec(v: &[u8]) -> TxResult<Self>;
}

impl Stored for Warehouse {
    fn enc(&self) -> Vec<u8> {
        Enc::default()
            .u32(self.w_id)
            .s(&self.name)
            .s(&self.address)
            .i64(self.tax)
            .i64(self.ytd)
            .0
    }
    fn dec(v: &[u8]) -> TxResult<Self> {
        let mut d = Dec(v);
        Ok(Warehouse {
            w_id: d.u32()?,
            name: d.s()?,
            address: d.s()?,
            tax: d.i64()?,
            ytd: d.i64()?,
        })
    }
}

impl Stored for District {
    fn enc(&self) -> Vec<u8> {
        Enc::default()
            .u32(self.w_id)
            .u32(self.d_id)
            .s(&self.name)
            .s(&self.address)
            .i64(self.tax)
            .i64(self.ytd)
            .u32(self.next_o_id)
            .0
    }
    fn dec(v: &[u8]) -> TxResult<Self> {
        let mut d = Dec(v);
        Ok(District {
            w_id: d.u32()?,
            d_id: d.u32()?,
            name: d.s()?,
            address: d.s()?,
            tax: d.i64()?,
            ytd: d.i64()?,
            next_o_id: d.u32()?,
        })
    }
}

impl Stored for Customer {
    fn enc(&self) -> Vec<u8> {
        Enc::default()
            .u32(self.w_id)
            .u32(self.d_id)
            .u32(self.c_id)
            .s(&self.first)
            .s(&self.middle)
            .s(&self.last)
            .s(&self.address)
            .s(&self.phone)
            .u64(self.since)
            .s(&self.credit)
            .i64(self.credit_lim)
            .i64(self.discount)
            .i64(self.balance)
            .i64(self.ytd_payment)
            .u32(self.payment_cnt)
            .u32(self.delivery_cnt)
            .s(&self.data)
            .0
    }
    fn dec(v: &[u8]) -> TxResult<Self> {
        let mut d = Dec(v);
        Ok(Customer {
            w_id: d.u32()?,
            d_id: d.u32()?,
            c_id: d.u32()?,
            first: d.s()?,
            middle: d.s()?,
            last: d.s()?,
            address: d.s()?,
            phone: d.s()?,
            since: d.u64()?,
            credit: d.s()?,
            credit_lim: d.i64()?,
            discount: d.i64()?,
            balance: d.i64()?,
            ytd_payment: d.i64()?,
            payment_cnt: d.u32()?,
            delivery_cnt: d.u32()?,
            data: d.s()?,
        })
    }
}

impl Stored for History {
    fn enc(&self) -> Vec<u8> {
        Enc::default()
            .u32(self.c_id)
            .u32(self.c_d_id)
            .u32(self.c_w_id)
            .u32(self.d_id)
            .u32(self.w_id)
            .u64(self.date)
            .i64(self.amount)
            .s(&self.data)
            .u64(self.seq)
            .0
    }
    fn dec(v: &[u8]) -> TxResult<Self> {
        let mut d = Dec(v);
        Ok(History {
            c_id: d.u32()?,
            c_d_id: d.u32()?,
            c_w_id: d.u32()?,
            d_id: d.u32()?,
            w_id: d.u32()?,
            date: d.u64()?,
            amount: d.i64()?,
            data: d.s()?,
            seq: d.u64()?,
        })
    }
}

impl Stored for Order {
    fn enc(&self) -> Vec<u8> {
        Enc::default()
            .u32(self.w_id)
            .u32(self.d_id)
            .u32(self.o_id)
            .u32(self.c_id)
            .u64(self.entry_d)
            .u32(self.carrier_id)
            .u32(self.ol_cnt)
            .u32(self.all_local)
            .0
    }
    fn dec(v: &[u8]) -> TxResult<Self> {
        let mut d = Dec(v);
        Ok(Order {
            w_id: d.u32()?,
            d_id: d.u32()?,
            o_id: d.u32()?,
            c_id: d.u32()?,
            entry_d: d.u64()?,
            carrier_id: d.u32()?,
            ol_cnt: d.u32()?,
            all_local: d.u32()?,
        })
    }
}

impl Stored for OrderLine {
    fn enc(&self) -> Vec<u8> {
        Enc::default()
            .u32(self.w_id)
            .u32(self.d_id)
            .u32(self.o_id)
            .u32(self.number)
            .u32(self.i_id)
            .u32(self.supply_w_id)
            .u64(self.delivery_d)
            .u32(self.quantity)
            .i64(self.amount)
            .s(&self.dist_info)
            .0
    }
    fn dec(v: &[u8]) -> TxResult<Self> {
        let mut d = Dec(v);
        Ok(OrderLine {
            w_id: d.u32()?,
            d_id: d.u32()?,
            o_id: d.u32()?,
            number: d.u32()?,
            i_id: d.u32()?,
            supply_w_id: d.u32()?,
            delivery_d: d.u64()?,
            quantity: d.u32()?,
            amount: d.i64()?,
            dist_info: d.s()?,
        })
    }
}

impl Stored for Item {
    fn enc(&self) -> Vec<u8> {
        Enc::default()
            .u32(self.i_id)
            .u32(self.im_id)
            .s(&self.name)
            .i64(self.price)
            .s(&self.data)
            .0
    }
    fn dec(v: &[u8]) -> TxResult<Self> {
        let mut d = Dec(v);
        Ok(Item {
            i_id: d.u32()?,
            im_id: d.u32()?,
            name: d.s()?,
            price: d.i64()?,
            data: d.s()?,
        })
    }
}

impl Stored for Stock {
    fn enc(&self) -> Vec<u8> {
        Enc::default()
            .u32(self.w_id)
            .u32(self.i_id)
            .i64(self.quantity)
            .s(&self.dist)
            .i64(self.ytd)
            .u32(self.order_cnt)
            .u32(self.remote_cnt)
            .s(&self.data)
            .0
    }
    fn dec(v: &[u8]) -> TxResult<Self> {
        let mut d = Dec(v);
        Ok(Stock {
            w_id: d.u32()?,
            i_id: d.u32()?,
            quantity: d.i64()?,
            dist: d.s()?,
            ytd: d.i64()?,
            order_cnt: d.u32()?,
            remote_cnt: d.u32()?,
            data: d.s()?,
        })
    }
}

/// The key-value pairs of one row of the initial population (a customer and an order
/// bring their index entries).
pub fn row_kvs(r: &Row, out: &mut Vec<(Table, Vec<u8>, Vec<u8>)>) {
    match r {
        Row::Item(x) => out.push((Table::Item, key(&[x.i_id]), x.enc())),
        Row::Warehouse(x) => {
            let fixed = Warehouse {
                ytd: 0,
                ..x.clone()
            };
            out.push((Table::Warehouse, key(&[x.w_id]), fixed.enc()));
            let yk = column_key(&[x.w_id], YTD);
            out.push((Table::Warehouse, yk, x.ytd.to_le_bytes().to_vec()));
        }
        Row::District(x) => {
            let fixed = District {
                ytd: 0,
                next_o_id: 0,
                ..x.clone()
            };
            let rk = [x.w_id, x.d_id];
            out.push((Table::District, key(&rk), fixed.enc()));
            let yk = column_key(&rk, YTD);
            out.push((Table::District, yk, x.ytd.to_le_bytes().to_vec()));
            let nk = column_key(&rk, NEXT_O_ID);
            out.push((Table::District, nk, x.next_o_id.to_le_bytes().to_vec()));
        }
        Row::Customer(x) => {
            out.push((Table::Customer, key(&[x.w_id, x.d_id, x.c_id]), x.enc()));
            out.push((Table::CustomerName, name_key(x), Vec::new()));
        }
        Row::History(x) => out.push((Table::History, history_key(x), x.enc())),
        Row::Order(x) => {
            out.push((Table::Order, key(&[x.w_id, x.d_id, x.o_id]), x.enc()));
            out.push((
                Table::OrderCustomer,
                key(&[x.w_id, x.d_id, x.c_id, x.o_id]),
                Vec::new(),
            ));
        }
        Row::NewOrder { w_id, d_id, o_id } => {
            out.push((Table::NewOrder, key(&[*w_id, *d_id, *o_id]), Vec::new()))
        }
        Row::OrderLine(x) => out.push((
            Table::OrderLine,
            key(&[x.w_id, x.d_id, x.o_id, x.number]),
            x.enc(),
        )),
        Row::Stock(x) => out.push((Table::Stock, key(&[x.w_id, x.i_id]), x.enc())),
    }
}

/// The key of a WAREHOUSE or DISTRICT column stored apart from its row: the row's key and a
/// one-byte tag ([`YTD`], [`NEXT_O_ID`]).
fn column_key(row: &[u32], tag: u8) -> Vec<u8> {
    let mut k = key(row);
    k.push(tag);
    k
}

/// The tag of W_YTD and D_YTD's keys.
const YTD: u8 = b'y';
/// The tag of D_NEXT_O_ID's key.
const NEXT_O_ID: u8 = b'n';

/// A column's value of `N` bytes (little-endian), present and of that length.
fn column<const N: usize>(v: Option<&[u8]>, what: &str) -> TxResult<[u8; N]> {
    let v = v.ok_or_else(|| missing(what))?;
    v.try_into()
        .map_err(|_| TxError::Fatal(format!("{what}: {} bytes, not {N}", v.len())))
}

/// Payment's read-modify-write of W_YTD or D_YTD (`what`): adds `amount` to the YTD column
/// of the WAREHOUSE or DISTRICT row `row` in `table`.
fn add_ytd<T: KvTxn>(
    t: &mut T,
    table: Table,
    row: &[u32],
    amount: i64,
    what: &str,
) -> TxResult<()> {
    let k = column_key(row, YTD);
    let ytd = i64::from_le_bytes(column(t.get_for_update(table, &k)?.as_deref(), what)?);
    t.put(table, &k, &(ytd + amount).to_le_bytes())
}

fn history_key(h: &History) -> Vec<u8> {
    let mut k = key(&[h.w_id, h.d_id]);
    k.extend_from_slice(&h.seq.to_be_bytes());
    k
}

// ------------------------------------------------------------------------ transactions

/// TPC-C on any [`KvStore`].
pub struct KvTpcc<S: KvStore> {
    pub store: S,
}

fn missing(what: &str) -> TxError {
    TxError::Fatal(format!("tpcc: {what} not found"))
}

fn row<T: Stored>(v: Option<Vec<u8>>, what: &str) -> TxResult<T> {
    T::dec(&v.ok_or_else(|| missing(what))?)
}

/// The customer `sel` names in (w, d): by id, or the middle one of those with that last
/// name, ordered by first name (the index's order).
fn customer_id<T: KvTxn>(t: &mut T, w: u32, d: u32, sel: &CustomerSel) -> TxResult<u32> {
    match sel {
        CustomerSel::Id(c) => Ok(*c),
        CustomerSel::Last(last) => {
            let lo = name_prefix(w, d, last);
            let hi = prefix_end(&lo);
            let mut ids = Vec::new();
            t.scan(
                Table::CustomerName,
                &lo,
                &hi,
                usize::MAX,
                false,
                &mut |k, _| ids.push(u32::from_be_bytes(k[k.len() - 4..].try_into().expect("4"))),
            )?;
            if ids.is_empty() {
                return Err(missing("a customer with that last name"));
            }
            Ok(ids[middle(ids.len())])
        }
    }
}

impl<S: KvStore> TpccDb for KvTpcc<S> {
    fn load(&self, rows: &[Row]) -> Result<(), String> {
        let mut kvs = Vec::with_capacity(rows.len() * 2);
        for r in rows {
            row_kvs(r, &mut kvs);
        }
        self.store.load(&kvs)
    }

    fn after_load(&self) -> Result<(), String> {
        self.store.settle()
    }

    fn new_order(&self, x: &NewOrderIn) -> TxResult<bool> {
        let mut t = self.store.begin(false)?;
        let w: Warehouse = row(t.get(Table::Warehouse, &key(&[x.w_id]))?, "warehouse")?;
        let d: District = row(t.get(Table::District, &key(&[x.w_id, x.d_id]))?, "district")?;
        let nk = column_key(&[x.w_id, x.d_id], NEXT_O_ID);
        let o_id = u32::from_le_bytes(column(
            t.get_for_update(Table::District, &nk)?.as_deref(),
            "d_next_o_id",
        )?);
        t.put(Table::District, &nk, &(o_id + 1).to_le_bytes())?;
        let c: Customer = row(
            t.get(Table::Customer, &key(&[x.w_id, x.d_id, x.c_id]))?,
            "customer",
        )?;
        let order = Order {
            w_id: x.w_id,
            d_id: x.d_id,
            o_id,
            c_id: x.c_id,
            entry_d: x.entry_d,
            carrier_id: 0,
            ol_cnt: x.lines.len() as u32,
            all_local: u32::from(x.all_local()),
        };
        let ok = key(&[x.w_id, x.d_id, o_id]);
        t.put(Table::Order, &ok, &order.enc())?;
        t.put(Table::NewOrder, &ok, &[])?;
        t.put(
            Table::OrderCustomer,
            &key(&[x.w_id, x.d_id, x.c_id, o_id]),
            &[],
        )?;
        let mut total = 0i64;
        for (n, l) in x.lines.iter().enumerate() {
            let Some(item) = t.get(Table::Item, &key(&[l.i_id]))? else {
                // An unknown item: the whole order rolls back (TPC-C 2.4.2.3).
                return Ok(false);
            };
            let item = Item::dec(&item)?;
            let sk = key(&[l.supply_w_id, l.i_id]);
            let mut s: Stock = row(t.get_for_update(Table::Stock, &sk)?, "stock")?;
            let q = i64::from(l.quantity);
            s.quantity = if s.quantity >= q + 10 {
                s.quantity - q
            } else {
                s.quantity - q + 91
            };
            s.ytd += q;
            s.order_cnt += 1;
            if l.supply_w_id != x.w_id {
                s.remote_cnt += 1;
            }
            t.put(Table::Stock, &sk, &s.enc())?;
            let amount = q * item.price;
            total += amount;
            let at = (x.d_id as usize - 1) * 24;
            let ol = OrderLine {
                w_id: x.w_id,
                d_id: x.d_id,
                o_id,
                number: n as u32 + 1,
                i_id: l.i_id,
                supply_w_id: l.supply_w_id,
                delivery_d: 0,
                quantity: l.quantity,
                amount,
                dist_info: s.dist.get(at..at + 24).unwrap_or("").to_string(),
            };
            t.put(
                Table::OrderLine,
                &key(&[x.w_id, x.d_id, o_id, n as u32 + 1]),
                &ol.enc(),
            )?;
        }
        // The order's total as the terminal would show it (not stored).
        let _ = total * (10_000 - c.discount) * (10_000 + w.tax + d.tax);
        t.commit()?;
        Ok(true)
    }

    fn payment(&self, x: &PaymentIn) -> TxResult<()> {
        let mut t = self.store.begin(false)?;
        let w: Warehouse = row(t.get(Table::Warehouse, &key(&[x.w_id]))?, "warehouse")?;
        add_ytd(&mut t, Table::Warehouse, &[x.w_id], x.amount, "w_ytd")?;
        let d: District = row(t.get(Table::District, &key(&[x.w_id, x.d_id]))?, "district")?;
        add_ytd(
            &mut t,
            Table::District,
            &[x.w_id, x.d_id],
            x.amount,
            "d_ytd",
        )?;
        let c_id = customer_id(&mut t, x.c_w_id, x.c_d_id, &x.customer)?;
        let ck = key(&[x.c_w_id, x.c_d_id, c_id]);
        let mut c: Customer = row(t.get_for_update(Table::Customer, &ck)?, "customer")?;
        c.balance -= x.amount;
        c.ytd_payment += x.amount;
        c.payment_cnt += 1;
        if c.credit == "BC" {
            c.data = bad_credit_data(x, c_id, &c.data);
        }
        t.put(Table::Customer, &ck, &c.enc())?;
        let h = History {
            c_id,
            c_d_id: x.c_d_id,
            c_w_id: x.c_w_id,
            d_id: x.d_id,
            w_id: x.w_id,
            date: x.date,
            amount: x.amount,
            data: format!("{}    {}", w.name, d.name),
            seq: x.h_seq,
        };
        t.put(Table::History, &history_key(&h), &h.enc())?;
        t.commit()
    }

    fn order_status(&self, x: &OrderStatusIn) -> TxResult<()> {
        let mut t = self.store.begin(true)?;
        let c_id = customer_id(&mut t, x.w_id, x.d_id, &x.customer)?;
        let _c: Customer = row(
            t.get(Table::Customer, &key(&[x.w_id, x.d_id, c_id]))?,
            "customer",
        )?;
        let lo = key(&[x.w_id, x.d_id, c_id]);
        let hi = prefix_end(&lo);
        let mut newest = None;
        t.scan(Table::OrderCustomer, &lo, &hi, 1, true, &mut |k, _| {
            newest = Some(u32_at(k, 3))
        })?;
        if let Some(o_id) = newest {
            let ok = key(&[x.w_id, x.d_id, o_id]);
            let o: Order = row(t.get(Table::Order, &ok)?, "order")?;
            let hi = prefix_end(&ok);
            let mut lines = 0;
            t.scan(
                Table::OrderLine,
                &ok,
                &hi,
                usize::MAX,
                false,
                &mut |_, v| lines += usize::from(OrderLine::dec(v).is_ok()),
            )?;
            if lines != o.ol_cnt as usize {
                return Err(TxError::Fatal(format!(
                    "order-status: order {o_id} has {lines} lines, O_OL_CNT {}",
                    o.ol_cnt
                )));
            }
        }
        t.commit()
    }

    fn delivery(&self, x: &DeliveryIn) -> TxResult<()> {
        let mut t = self.store.begin(false)?;
        for d in 1..=DISTRICTS {
            let lo = key(&[x.w_id, d]);
            let hi = prefix_end(&lo);
            let mut oldest = None;
            t.scan(Table::NewOrder, &lo, &hi, 1, false, &mut |k, _| {
                oldest = Some(u32_at(k, 2))
            })?;
            let Some(o_id) = oldest else {
                continue; // no undelivered order in this district
            };
            let ok = key(&[x.w_id, d, o_id]);
            // Claim it: an engine whose scans read committed data without protecting the
            // range (RocksDB) may have let a concurrent Delivery take it since the scan.
            if t.get_for_update(Table::NewOrder, &ok)?.is_none() {
                return Err(TxError::Retry(
                    "delivery: the oldest new-order was delivered concurrently".into(),
                ));
            }
            t.delete(Table::NewOrder, &ok)?;
            let mut o: Order = row(t.get_for_update(Table::Order, &ok)?, "order")?;
            o.carrier_id = x.carrier_id;
            t.put(Table::Order, &ok, &o.enc())?;
            let mut lines = Vec::new();
            t.scan(
                Table::OrderLine,
                &ok,
                &prefix_end(&ok),
                usize::MAX,
                false,
                &mut |k, v| lines.push((k.to_vec(), v.to_vec())),
            )?;
            let mut sum = 0;
            for (k, v) in lines {
                let mut l = OrderLine::dec(&v)?;
                l.delivery_d = x.date;
                sum += l.amount;
                t.put(Table::OrderLine, &k, &l.enc())?;
            }
            let ck = key(&[x.w_id, d, o.c_id]);
            let mut c: Customer = row(t.get_for_update(Table::Customer, &ck)?, "customer")?;
            c.balance += sum;
            c.delivery_cnt += 1;
            t.put(Table::Customer, &ck, &c.enc())?;
        }
        t.commit()
    }

    fn stock_level(&self, x: &StockLevelIn) -> TxResult<u32> {
        let mut t = self.store.begin(true)?;
        let nk = column_key(&[x.w_id, x.d_id], NEXT_O_ID);
        let next_o_id = u32::from_le_bytes(column(
            t.get(Table::District, &nk)?.as_deref(),
            "d_next_o_id",
        )?);
        let lo = key(&[x.w_id, x.d_id, next_o_id.saturating_sub(20)]);
        let hi = key(&[x.w_id, x.d_id, next_o_id]);
        let mut items = Vec::new();
        t.scan(
            Table::OrderLine,
            &lo,
            &hi,
            usize::MAX,
            false,
            &mut |_, v| {
                if let Ok(l) = OrderLine::dec(v) {
                    items.push(l.i_id)
                }
            },
        )?;
        items.sort_unstable();
        items.dedup();
        let mut low = 0;
        for i in items {
            let s: Stock = row(t.get(Table::Stock, &key(&[x.w_id, i]))?, "stock")?;
            low += u32::from(s.quantity < x.threshold);
        }
        t.commit()?;
        Ok(low)
    }

    fn totals(&self, warehouses: u32) -> Result<Totals, String> {
        let e = |e: TxError| format!("tpcc check: {e:?}");
        let mut t = self.store.begin(true).map_err(e)?;
        let mut ytd = std::collections::BTreeMap::<u32, (i64, i64)>::new();
        let mut bad = None;
        // A row's key, or its key and a column's tag (`column_key`).
        all(
            &mut t,
            Table::Warehouse,
            &mut |k, v| match (k.len(), k.last()) {
                (4, _) => {
                    if let Err(x) = Warehouse::dec(v) {
                        bad = Some(x);
                    }
                }
                (5, Some(&YTD)) => match column(Some(v), "w_ytd").map(i64::from_le_bytes) {
                    Ok(y) => ytd.entry(u32_at(k, 0)).or_default().0 = y,
                    Err(x) => bad = Some(x),
                },
                _ => bad = Some(TxError::Fatal(format!("warehouse: a stray key {k:02x?}"))),
            },
        )
        .map_err(e)?;
        let mut ds = std::collections::BTreeMap::<(u32, u32), DistrictTotals>::new();
        all(&mut t, Table::District, &mut |k, v| {
            let (w, d) = (u32_at(k, 0), u32_at(k, 1));
            match (k.len(), k.last()) {
                (8, _) => match District::dec(v) {
                    Ok(_) => {
                        let x = ds.entry((w, d)).or_default();
                        (x.w, x.d) = (w, d);
                    }
                    Err(x) => bad = Some(x),
                },
                (9, Some(&YTD)) => match column(Some(v), "d_ytd").map(i64::from_le_bytes) {
                    Ok(y) => ytd.entry(w).or_default().1 += y,
                    Err(x) => bad = Some(x),
                },
                (9, Some(&NEXT_O_ID)) => {
                    match column(Some(v), "d_next_o_id").map(u32::from_le_bytes) {
                        Ok(n) => ds.entry((w, d)).or_default().next_o_id = n,
                        Err(x) => bad = Some(x),
                    }
                }
                _ => bad = Some(TxError::Fatal(format!("district: a stray key {k:02x?}"))),
            }
        })
        .map_err(e)?;
        all(&mut t, Table::Order, &mut |_, v| match Order::dec(v) {
            Ok(o) => {
                let x = ds.entry((o.w_id, o.d_id)).or_default();
                x.max_o_id = x.max_o_id.max(o.o_id);
                x.sum_ol_cnt += u64::from(o.ol_cnt);
            }
            Err(x) => bad = Some(x),
        })
        .map_err(e)?;
        all(&mut t, Table::NewOrder, &mut |k, _| {
            let x = ds.entry((u32_at(k, 0), u32_at(k, 1))).or_default();
            let o = u32_at(k, 2);
            if x.new_orders == 0 {
                x.min_no_o_id = o;
            }
            x.min_no_o_id = x.min_no_o_id.min(o);
            x.max_no_o_id = x.max_no_o_id.max(o);
            x.new_orders += 1;
        })
        .map_err(e)?;
        all(&mut t, Table::OrderLine, &mut |k, _| {
            ds.entry((u32_at(k, 0), u32_at(k, 1)))
                .or_default()
                .order_lines += 1;
        })
        .map_err(e)?;
        drop(t);
        if let Some(x) = bad {
            return Err(e(x));
        }
        let _ = warehouses;
        Ok(Totals {
            w_ytd: ytd.into_iter().map(|(w, (a, b))| (w, a, b)).collect(),
            districts: ds.into_values().collect(),
        })
    }

    fn mode(&self) -> String {
        self.store.mode()
    }

    fn stats(&self) -> Option<serde_json::Value> {
        self.store.stats()
    }

    fn settle(&self) -> Result<(), String> {
        self.store.settle()
    }
}

/// Every pair of keyspace `table` (every key starts with a small big-endian id, so below
/// 64 bytes of 0xff).
fn all<T: KvTxn>(t: &mut T, table: Table, each: &mut dyn FnMut(&[u8], &[u8])) -> TxResult<usize> {
    t.scan(table, &[], &[0xff; 64], usize::MAX, false, each)
}

// ------------------------------------------------------------------------------ silt

/// silt: one column family per keyspace, `Db::begin` with the cell's concurrency control
/// and isolation level; the load is plain `WriteBatch`es.
pub struct SiltStore {
    engine: crate::engine::SiltEngine,
    cfs: Vec<Option<silt::ColumnFamily>>,
    opts: silt::TxnOptions,
}

impl SiltStore {
    /// silt with the keyspaces `tables`, each transaction at `isolation` and `concurrency`
    /// (and `TxnOptions`' other defaults: see [`SiltStore::max_txn_bytes`]).
    pub fn open(
        cfg: &crate::engine::EngineConfig,
        tables: &[Table],
        isolation: silt::IsolationLevel,
        concurrency: silt::Concurrency,
    ) -> Result<SiltStore, String> {
        let engine = crate::engine::SiltEngine::open(cfg, true)?;
        let cfs = open_handles(tables, |t| engine.db.create_cf(t.name()))
            .map_err(|e| format!("silt: create_cf: {e}"))?;
        Ok(SiltStore {
            engine,
            cfs,
            opts: silt::TxnOptions::new(isolation, concurrency),
        })
    }

    /// Raises (or lowers) the most one transaction may buffer (`TxnOptions::max_bytes`,
    /// default 1 GiB; past it a write fails with `TransactionTooLarge`).
    pub fn max_txn_bytes(mut self, bytes: u64) -> SiltStore {
        self.opts.max_bytes = bytes;
        self
    }
}

fn silt_tx(e: silt::Error) -> TxError {
    if e.is_retryable() {
        TxError::Retry(e.to_string())
    } else {
        TxError::Fatal(format!("silt: {e}"))
    }
}

pub struct SiltTxn<'a> {
    t: silt::Txn,
    cfs: &'a [Option<silt::ColumnFamily>],
}

impl KvTxn for SiltTxn<'_> {
    fn get(&mut self, t: Table, k: &[u8]) -> TxResult<Option<Vec<u8>>> {
        self.t.get_cf(handle(self.cfs, t)?, k).map_err(silt_tx)
    }
    fn get_for_update(&mut self, t: Table, k: &[u8]) -> TxResult<Option<Vec<u8>>> {
        self.t
            .get_for_update_cf(handle(self.cfs, t)?, k)
            .map_err(silt_tx)
    }
    fn put(&mut self, t: Table, k: &[u8], v: &[u8]) -> TxResult<()> {
        self.t.put_cf(handle(self.cfs, t)?, k, v).map_err(silt_tx)
    }
    fn delete(&mut self, t: Table, k: &[u8]) -> TxResult<()> {
        self.t.delete_cf(handle(self.cfs, t)?, k).map_err(silt_tx)
    }
    fn single_delete(&mut self, t: Table, k: &[u8]) -> TxResult<()> {
        self.t
            .single_delete_cf(handle(self.cfs, t)?, k)
            .map_err(silt_tx)
    }
    fn scan(
        &mut self,
        t: Table,
        lo: &[u8],
        hi: &[u8],
        limit: usize,
        reverse: bool,
        each: &mut dyn FnMut(&[u8], &[u8]),
    ) -> TxResult<usize> {
        let mut it = self.t.range_cf(handle(self.cfs, t)?, lo..hi);
        let mut n = 0;
        while n < limit {
            let next = if reverse {
                it.next_back_ref()
            } else {
                it.next_ref()
            };
            match next {
                None => break,
                Some(kv) => {
                    let (k, v) = kv.map_err(silt_tx)?;
                    each(k, v);
                    n += 1;
                }
            }
        }
        Ok(n)
    }
    fn commit(self) -> TxResult<()> {
        self.t.commit().map_err(silt_tx)
    }
}

impl KvStore for SiltStore {
    type Txn<'a> = SiltTxn<'a>;

    fn begin(&self, _read_only: bool) -> TxResult<SiltTxn<'_>> {
        Ok(SiltTxn {
            t: self.engine.db.begin(self.opts.clone()),
            cfs: &self.cfs,
        })
    }

    fn load(&self, kvs: &[(Table, Vec<u8>, Vec<u8>)]) -> Result<(), String> {
        let mut b = silt::WriteBatch::new();
        for (t, k, v) in kvs {
            b.put_cf(
                handle(&self.cfs, *t).map_err(|e| format!("silt: load: {e:?}"))?,
                k,
                v,
            );
        }
        self.engine
            .db
            .write(b, silt::WriteOptions::default())
            .map_err(|e| format!("silt: load: {e}"))
    }

    fn mode(&self) -> String {
        format!("silt {:?} {:?}", self.opts.concurrency, self.opts.isolation)
    }

    fn has_single_delete(&self) -> bool {
        true
    }

    /// A flush, then until compaction is quiet (`SiltEngine::wait_idle` waits for level 0
    /// under its trigger, which counts every column family's tables together, so with
    /// eleven of them it would wait out its whole limit).
    fn settle(&self) -> Result<(), String> {
        use crate::engine::Engine;
        self.engine.flush()?;
        crate::engine::settle(std::time::Duration::from_secs(120), &|| {
            let s = self.engine.db.stats();
            (s.compactions + s.flushes + s.compaction_write_bytes, false)
        });
        Ok(())
    }

    fn stats(&self) -> Option<serde_json::Value> {
        use crate::engine::Engine;
        self.engine.stats()
    }
}

#[cfg(test)]
#[path = "check_tests.rs"]
mod check_tests;
