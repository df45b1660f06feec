//! TPC-C's data: the rows of the initial population (clause 4.3.3), the transactions'
//! inputs (clause 2.x.1) and the random functions both use (NURand, last names, strings).

/// Districts per warehouse (TPC-C's ten, at every scale).
pub const DISTRICTS: u32 = 10;

/// Table sizes per warehouse (and per district), TPC-C's times `--tpcc-scale`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sizes {
    pub items: u32,
    /// Customers per district (and orders per district at load).
    pub customers: u32,
    /// Undelivered orders per district at load (the last ones): NEW-ORDER rows.
    pub new_orders: u32,
}

impl Sizes {
    pub fn scaled(scale: f64) -> Sizes {
        let s = |full: f64, min: f64| (full * scale).round().max(min) as u32;
        let customers = s(3000.0, 30.0);
        Sizes {
            items: s(100_000.0, 100.0),
            customers,
            new_orders: (customers * 3).div_ceil(10),
        }
    }

    /// Rows of one warehouse's initial population (for progress).
    pub fn rows_per_warehouse(&self) -> u64 {
        let c = u64::from(self.customers) * u64::from(DISTRICTS);
        1 + u64::from(DISTRICTS) + u64::from(self.items) + 3 * c + c * 10 + c * 3 / 10
    }

    /// The last customer last-name number drawn (0..=999 at full size).
    pub fn max_name(&self) -> u32 {
        self.customers.min(1000) - 1
    }
}

/// SplitMix64: small, fast, and enough for a workload generator.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5851_f42d_4c95_7f2d)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u32, hi: u32) -> u32 {
        lo + (self.next_u64() % u64::from(hi - lo + 1)) as u32
    }

    /// TPC-C's NURand(A, x, y) (clause 2.1.6), with run-time constant `c`.
    pub fn nurand(&mut self, a: u32, x: u32, y: u32, c: u32) -> u32 {
        (((self.range(0, a) | self.range(x, y)) + c) % (y - x + 1)) + x
    }

    /// A random alphanumeric string of `lo..=hi` characters.
    pub fn astring(&mut self, lo: u32, hi: u32) -> String {
        const CH: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        let n = self.range(lo, hi);
        (0..n)
            .map(|_| CH[(self.next_u64() % CH.len() as u64) as usize] as char)
            .collect()
    }

    /// A random numeric string of `n` digits.
    pub fn nstring(&mut self, n: u32) -> String {
        (0..n)
            .map(|_| (b'0' + (self.next_u64() % 10) as u8) as char)
            .collect()
    }

    /// I_DATA / S_DATA: 26..50 characters, 10% with "ORIGINAL" inside.
    fn data(&mut self) -> String {
        let mut s = self.astring(26, 50);
        if self.range(1, 10) == 1 {
            let at = self.range(0, s.len() as u32 - 8) as usize;
            s.replace_range(at..at + 8, "ORIGINAL");
        }
        s
    }
}

/// The run-time constants of NURand (clause 2.1.6).
pub const C_LAST: u32 = 157;
pub const C_ID: u32 = 259;
pub const OL_I_ID: u32 = 7911;

/// C_LAST from a number in 0..=999 (clause 4.3.2.3).
pub fn last_name(n: u32) -> String {
    const SYL: [&str; 10] = [
        "BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING",
    ];
    format!(
        "{}{}{}",
        SYL[(n / 100) as usize % 10],
        SYL[(n / 10) as usize % 10],
        SYL[n as usize % 10]
    )
}

/// "Now" for the rows' dates: seconds since the epoch (dates are stored, never compared).
pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

// ------------------------------------------------------------------------------ rows

/// Money is in cents and rates in basis points (1/10,000), as integers.
#[derive(Clone, Debug, PartialEq)]
pub struct Warehouse {
    pub w_id: u32,
    pub name: String,
    /// Street 1 and 2, city, state, zip, as one padded field.
    pub address: String,
    pub tax: i64,
    pub ytd: i64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct District {
    pub w_id: u32,
    pub d_id: u32,
    pub name: String,
    pub address: String,
    pub tax: i64,
    pub ytd: i64,
    pub next_o_id: u32,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Customer {
    pub w_id: u32,
    pub d_id: u32,
    pub c_id: u32,
    pub first: String,
    pub middle: String,
    pub last: String,
    pub address: String,
    pub phone: String,
    pub since: u64,
    /// "GC" or "BC".
    pub credit: String,
    pub credit_lim: i64,
    pub discount: i64,
    pub balance: i64,
    pub ytd_payment: i64,
    pub payment_cnt: u32,
    pub delivery_cnt: u32,
    pub data: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct History {
    pub c_id: u32,
    pub c_d_id: u32,
    pub c_w_id: u32,
    pub d_id: u32,
    pub w_id: u32,
    pub date: u64,
    pub amount: i64,
    pub data: String,
    /// A unique id (history has no primary key in TPC-C; the key-value engines need one):
    /// the terminal in the high 16 bits, its count in the rest.
    pub seq: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Order {
    pub w_id: u32,
    pub d_id: u32,
    pub o_id: u32,
    pub c_id: u32,
    pub entry_d: u64,
    /// 0: null (not delivered).
    pub carrier_id: u32,
    pub ol_cnt: u32,
    pub all_local: u32,
}

#[derive(Clone, Debug, PartialEq)]
pub struct OrderLine {
    pub w_id: u32,
    pub d_id: u32,
    pub o_id: u32,
    pub number: u32,
    pub i_id: u32,
    pub supply_w_id: u32,
    /// 0: null (not delivered).
    pub delivery_d: u64,
    pub quantity: u32,
    pub amount: i64,
    pub dist_info: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Item {
    pub i_id: u32,
    pub im_id: u32,
    pub name: String,
    pub price: i64,
    pub data: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Stock {
    pub w_id: u32,
    pub i_id: u32,
    pub quantity: i64,
    /// S_DIST_01 … S_DIST_10, 24 characters each, concatenated.
    pub dist: String,
    pub ytd: i64,
    pub order_cnt: u32,
    pub remote_cnt: u32,
    pub data: String,
}

/// One row of the initial population.
#[derive(Clone, Debug)]
pub enum Row {
    Item(Item),
    Warehouse(Warehouse),
    District(District),
    Customer(Customer),
    History(History),
    Order(Order),
    NewOrder { w_id: u32, d_id: u32, o_id: u32 },
    OrderLine(OrderLine),
    Stock(Stock),
}

/// The initial population (clause 4.3.3.1), handed to `each` in chunks of about `chunk`
/// rows: the items, then per warehouse its row, its stock, its districts with their
/// customers, history, orders, order lines and new orders.
pub fn population(
    warehouses: u32,
    sizes: Sizes,
    seed: u64,
    chunk: usize,
    each: &mut dyn FnMut(&[Row]) -> Result<(), String>,
) -> Result<(), String> {
    let mut rng = Rng::new(seed ^ 0x10ad);
    let mut buf: Vec<Row> = Vec::with_capacity(chunk);
    let mut push = |r: Row, buf: &mut Vec<Row>| -> Result<(), String> {
        buf.push(r);
        if buf.len() >= chunk {
            each(buf)?;
            buf.clear();
        }
        Ok(())
    };
    for i in 1..=sizes.items {
        let r = Row::Item(Item {
            i_id: i,
            im_id: rng.range(1, 10_000),
            name: rng.astring(14, 24),
            price: i64::from(rng.range(100, 10_000)),
            data: rng.data(),
        });
        push(r, &mut buf)?;
    }
    let now = now_secs();
    let first_new = sizes.customers - sizes.new_orders + 1;
    for w in 1..=warehouses {
        let address = |rng: &mut Rng| {
            format!(
                "{}|{}|{}|{}|{}11111",
                rng.astring(10, 20),
                rng.astring(10, 20),
                rng.astring(10, 20),
                rng.astring(2, 2),
                rng.nstring(4)
            )
        };
        let r = Row::Warehouse(Warehouse {
            w_id: w,
            name: rng.astring(6, 10),
            address: address(&mut rng),
            tax: i64::from(rng.range(0, 2000)),
            ytd: 30_000_000,
        });
        push(r, &mut buf)?;
        for i in 1..=sizes.items {
            let r = Row::Stock(Stock {
                w_id: w,
                i_id: i,
                quantity: i64::from(rng.range(10, 100)),
                dist: (0..DISTRICTS).map(|_| rng.astring(24, 24)).collect(),
                ytd: 0,
                order_cnt: 0,
                remote_cnt: 0,
                data: rng.data(),
            });
            push(r, &mut buf)?;
        }
        for d in 1..=DISTRICTS {
            let r = Row::District(District {
                w_id: w,
                d_id: d,
                name: rng.astring(6, 10),
                address: address(&mut rng),
                tax: i64::from(rng.range(0, 2000)),
                ytd: 3_000_000,
                next_o_id: sizes.customers + 1,
            });
            push(r, &mut buf)?;
            for c in 1..=sizes.customers {
                let last = if c <= 1000 {
                    last_name(c - 1)
                } else {
                    last_name(rng.nurand(255, 0, 999, C_LAST))
                };
                let r = Row::Customer(Customer {
                    w_id: w,
                    d_id: d,
                    c_id: c,
                    first: rng.astring(8, 16),
                    middle: "OE".into(),
                    last,
                    address: address(&mut rng),
                    phone: rng.nstring(16),
                    since: now,
                    credit: if rng.range(1, 10) == 1 { "BC" } else { "GC" }.into(),
                    credit_lim: 5_000_000,
                    discount: i64::from(rng.range(0, 5000)),
                    balance: -1000,
                    ytd_payment: 1000,
                    payment_cnt: 1,
                    delivery_cnt: 0,
                    data: rng.astring(300, 500),
                });
                push(r, &mut buf)?;
                let r = Row::History(History {
                    c_id: c,
                    c_d_id: d,
                    c_w_id: w,
                    d_id: d,
                    w_id: w,
                    date: now,
                    amount: 1000,
                    data: rng.astring(12, 24),
                    seq: (0xffff << 48) | (u64::from(w) << 32) | u64::from(d * 100_000 + c),
                });
                push(r, &mut buf)?;
            }
            // O_C_ID: a random permutation of the customers.
            let mut cs: Vec<u32> = (1..=sizes.customers).collect();
            for i in (1..cs.len()).rev() {
                let j = (rng.next_u64() % (i as u64 + 1)) as usize;
                cs.swap(i, j);
            }
            for o in 1..=sizes.customers {
                let delivered = o < first_new;
                let ol_cnt = rng.range(5, 15);
                let r = Row::Order(Order {
                    w_id: w,
                    d_id: d,
                    o_id: o,
                    c_id: cs[(o - 1) as usize],
                    entry_d: now,
                    carrier_id: if delivered { rng.range(1, 10) } else { 0 },
                    ol_cnt,
                    all_local: 1,
                });
                push(r, &mut buf)?;
                for n in 1..=ol_cnt {
                    let r = Row::OrderLine(OrderLine {
                        w_id: w,
                        d_id: d,
                        o_id: o,
                        number: n,
                        i_id: rng.range(1, sizes.items),
                        supply_w_id: w,
                        delivery_d: if delivered { now } else { 0 },
                        quantity: 5,
                        amount: if delivered {
                            0
                        } else {
                            i64::from(rng.range(1, 999_999))
                        },
                        dist_info: rng.astring(24, 24),
                    });
                    push(r, &mut buf)?;
                }
                if !delivered {
                    push(
                        Row::NewOrder {
                            w_id: w,
                            d_id: d,
                            o_id: o,
                        },
                        &mut buf,
                    )?;
                }
            }
        }
    }
    if !buf.is_empty() {
        each(&buf)?;
    }
    Ok(())
}

// ------------------------------------------------------------------------------ inputs

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TxKind {
    NewOrder,
    Payment,
    OrderStatus,
    Delivery,
    StockLevel,
}

impl TxKind {
    pub const ALL: [TxKind; 5] = [
        TxKind::NewOrder,
        TxKind::Payment,
        TxKind::OrderStatus,
        TxKind::Delivery,
        TxKind::StockLevel,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TxKind::NewOrder => "new_order",
            TxKind::Payment => "payment",
            TxKind::OrderStatus => "order_status",
            TxKind::Delivery => "delivery",
            TxKind::StockLevel => "stock_level",
        }
    }

    /// The standard mix (clause 5.2.3's minimums, New-Order the rest): a draw in 0..100.
    pub fn of_draw(u: u32) -> TxKind {
        match u {
            0..=44 => TxKind::NewOrder,
            45..=87 => TxKind::Payment,
            88..=91 => TxKind::OrderStatus,
            92..=95 => TxKind::Delivery,
            _ => TxKind::StockLevel,
        }
    }
}

#[derive(Clone, Debug)]
pub struct NewOrderLine {
    pub i_id: u32,
    pub supply_w_id: u32,
    pub quantity: u32,
}

#[derive(Clone, Debug)]
pub struct NewOrderIn {
    pub w_id: u32,
    pub d_id: u32,
    pub c_id: u32,
    /// Sorted by (supply warehouse, item), so lock-based engines take stock locks in one
    /// order; the last has an unknown item when the order must roll back.
    pub lines: Vec<NewOrderLine>,
    pub entry_d: u64,
}

impl NewOrderIn {
    pub fn all_local(&self) -> bool {
        self.lines.iter().all(|l| l.supply_w_id == self.w_id)
    }
}

/// A customer chosen by id or by last name (the middle one of those with that name,
/// ordered by first name).
#[derive(Clone, Debug)]
pub enum CustomerSel {
    Id(u32),
    Last(String),
}

#[derive(Clone, Debug)]
pub struct PaymentIn {
    pub w_id: u32,
    pub d_id: u32,
    pub c_w_id: u32,
    pub c_d_id: u32,
    pub customer: CustomerSel,
    pub amount: i64,
    pub date: u64,
    /// The HISTORY row's unique id.
    pub h_seq: u64,
}

#[derive(Clone, Debug)]
pub struct OrderStatusIn {
    pub w_id: u32,
    pub d_id: u32,
    pub customer: CustomerSel,
}

#[derive(Clone, Debug)]
pub struct DeliveryIn {
    pub w_id: u32,
    pub carrier_id: u32,
    pub date: u64,
}

#[derive(Clone, Debug)]
pub struct StockLevelIn {
    pub w_id: u32,
    pub d_id: u32,
    pub threshold: i64,
}

#[derive(Clone, Debug)]
pub enum Input {
    NewOrder(NewOrderIn),
    Payment(PaymentIn),
    OrderStatus(OrderStatusIn),
    Delivery(DeliveryIn),
    StockLevel(StockLevelIn),
}

/// A terminal's input generator (clauses 2.4.1, 2.5.1, 2.6.1, 2.7.1, 2.8.1).
pub struct Terminal {
    pub rng: Rng,
    pub w_id: u32,
    pub warehouses: u32,
    pub sizes: Sizes,
    pub id: u64,
    pub history: u64,
}

impl Terminal {
    pub fn new(id: usize, warehouses: u32, sizes: Sizes, seed: u64) -> Terminal {
        Terminal {
            rng: Rng::new(seed.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ id as u64),
            w_id: (id as u32 % warehouses) + 1,
            warehouses,
            sizes,
            id: id as u64,
            history: 0,
        }
    }

    fn other_warehouse(&mut self) -> u32 {
        if self.warehouses == 1 {
            return self.w_id;
        }
        let w = self.rng.range(1, self.warehouses - 1);
        if w >= self.w_id {
            w + 1
        } else {
            w
        }
    }

    fn customer(&mut self) -> CustomerSel {
        if self.rng.range(1, 100) <= 60 {
            let max = self.sizes.max_name();
            CustomerSel::Last(last_name(self.rng.nurand(255, 0, max, C_LAST % (max + 1))))
        } else {
            CustomerSel::Id(self.rng.nurand(1023, 1, self.sizes.customers, C_ID))
        }
    }

    pub fn next(&mut self) -> Input {
        let kind = TxKind::of_draw(self.rng.range(0, 99));
        let w_id = self.w_id;
        let d_id = self.rng.range(1, DISTRICTS);
        match kind {
            TxKind::NewOrder => {
                let n = self.rng.range(5, 15);
                let rollback = self.rng.range(1, 100) == 1;
                let mut lines: Vec<NewOrderLine> = (0..n)
                    .map(|_| NewOrderLine {
                        i_id: self.rng.nurand(8191, 1, self.sizes.items, OL_I_ID),
                        supply_w_id: if self.rng.range(1, 100) == 1 {
                            self.other_warehouse()
                        } else {
                            w_id
                        },
                        quantity: self.rng.range(1, 10),
                    })
                    .collect();
                lines.sort_by_key(|l| (l.supply_w_id, l.i_id));
                if rollback {
                    lines.last_mut().expect("5 or more lines").i_id = self.sizes.items + 1;
                }
                Input::NewOrder(NewOrderIn {
                    w_id,
                    d_id,
                    c_id: self.rng.nurand(1023, 1, self.sizes.customers, C_ID),
                    lines,
                    entry_d: now_secs(),
                })
            }
            TxKind::Payment => {
                let (c_w_id, c_d_id) = if self.rng.range(1, 100) <= 85 || self.warehouses == 1 {
                    (w_id, d_id)
                } else {
                    (self.other_warehouse(), self.rng.range(1, DISTRICTS))
                };
                self.history += 1;
                Input::Payment(PaymentIn {
                    w_id,
                    d_id,
                    c_w_id,
                    c_d_id,
                    customer: self.customer(),
                    amount: i64::from(self.rng.range(100, 500_000)),
                    date: now_secs(),
                    h_seq: (self.id << 48) | self.history,
                })
            }
            TxKind::OrderStatus => Input::OrderStatus(OrderStatusIn {
                w_id,
                d_id,
                customer: self.customer(),
            }),
            TxKind::Delivery => Input::Delivery(DeliveryIn {
                w_id,
                carrier_id: self.rng.range(1, 10),
                date: now_secs(),
            }),
            TxKind::StockLevel => Input::StockLevel(StockLevelIn {
                w_id,
                d_id,
                threshold: i64::from(self.rng.range(10, 20)),
            }),
        }
    }
}

impl Input {
    pub fn kind(&self) -> TxKind {
        match self {
            Input::NewOrder(_) => TxKind::NewOrder,
            Input::Payment(_) => TxKind::Payment,
            Input::OrderStatus(_) => TxKind::OrderStatus,
            Input::Delivery(_) => TxKind::Delivery,
            Input::StockLevel(_) => TxKind::StockLevel,
        }
    }
}

/// C_DATA after a payment by a bad-credit customer (clause 2.5.2.2): the payment's ids and
/// amount in front, truncated to 500 characters.
pub fn bad_credit_data(x: &PaymentIn, c_id: u32, old: &str) -> String {
    let mut s = format!(
        "{} {} {} {} {} {}|{}",
        c_id, x.c_d_id, x.c_w_id, x.d_id, x.w_id, x.amount, old
    );
    s.truncate(500);
    s
}

/// The middle of `n` customers ordered by first name: position ceil(n / 2), 1-based
/// (clause 2.5.2.2).
pub fn middle(n: usize) -> usize {
    n.div_ceil(2) - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mix_is_the_standard_one() {
        let mut count = std::collections::HashMap::new();
        for u in 0..100 {
            *count.entry(TxKind::of_draw(u)).or_insert(0) += 1;
        }
        assert_eq!(count[&TxKind::NewOrder], 45);
        assert_eq!(count[&TxKind::Payment], 43);
        assert_eq!(count[&TxKind::OrderStatus], 4);
        assert_eq!(count[&TxKind::Delivery], 4);
        assert_eq!(count[&TxKind::StockLevel], 4);
    }

    #[test]
    fn nurand_and_names_stay_in_range() {
        let mut r = Rng::new(1);
        for _ in 0..10_000 {
            let x = r.nurand(1023, 1, 30, C_ID);
            assert!((1..=30).contains(&x));
        }
        assert_eq!(last_name(0), "BARBARBAR");
        assert_eq!(last_name(371), "PRICALLYOUGHT");
        assert_eq!(middle(1), 0);
        assert_eq!(middle(4), 1);
        assert_eq!(middle(5), 2);
    }

    #[test]
    fn scaled_population_has_every_table() {
        let sizes = Sizes::scaled(0.01);
        assert_eq!(sizes.customers, 30);
        let mut n = 0u64;
        let mut new_orders = 0;
        population(1, sizes, 3, 100, &mut |rows| {
            n += rows.len() as u64;
            new_orders += rows
                .iter()
                .filter(|r| matches!(r, Row::NewOrder { .. }))
                .count();
            Ok(())
        })
        .unwrap();
        assert_eq!(new_orders as u32, sizes.new_orders * DISTRICTS);
        assert!(n > u64::from(sizes.items) * 2);
    }
}
