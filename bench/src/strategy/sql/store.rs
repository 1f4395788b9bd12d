//! One SQL store over a [`Dialect`]: `<prefix>_stock` and `<prefix>_orders`, a connection per
//! buyer plus a small pool for setup and audit, the shared critical section, the read section
//! and the audit — written once for MariaDB/MySQL ([`super::mysql`]) and PostgreSQL
//! ([`super::postgres`]).
//!
//! A dialect is what differs between the two servers: its SQL text and placeholders, how it
//! binds a value (MariaDB's unsigned integers, PostgreSQL's signed ones), how it opens a buyer's
//! session, and what its error replies mean. Everything a strategy does with those is here.

use std::future::Future;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use sqlx::pool::PoolOptions;
use sqlx::{Connection, Pool, SqlStr};

use super::buyers::{BuyerConn, Buyers, fail_and_drop};
use crate::check::{OrderRow, SkuAudit};
use crate::cluster::Prefix;
use crate::record::trips::one;
use crate::record::{ErrorKind, Outcome, Refusal};
use crate::strategy::{CriticalSection, Enforcement, Purchase, Store, StrategyError, within};
use crate::workload::Workload;

/// The price every SKU is seeded with: a read checks stock and price, and nothing changes it.
pub const PRICE_CENTS: i64 = 1999;

/// How long setup and audit statements may take (they touch every SKU, or every unit).
pub const ADMIN_TIMEOUT: Duration = Duration::from_secs(60);

/// Most buyer connections; beyond this, buyers share them (and wait on each other).
/// PostgreSQL forks a backend per connection.
pub const MAX_BUYER_CONNECTIONS: u32 = 1000;

/// A value a statement binds, named by what it is, so each dialect binds it as its driver's
/// type and the wire carries what each store always sent.
#[derive(Debug, Clone, Copy)]
pub enum Arg<'a> {
    /// A SKU (MariaDB: `INT UNSIGNED`; PostgreSQL: `INT`, it has no unsigned types).
    Sku(u32),
    /// A quantity, version or time in µs (`BIGINT` on both).
    Int(i64),
    /// A fencing token (MariaDB: `BIGINT UNSIGNED`; PostgreSQL: `BIGINT`).
    Fence(u64),
    /// A buyer's attempt number (MariaDB: `BIGINT UNSIGNED`; PostgreSQL: `BIGINT`).
    Buyer(u64),
    /// Text (the order's token).
    Text(&'a str),
}

/// The database of a dialect's connection.
pub type Db<D> = <<D as Dialect>::Conn as Connection>::Database;

/// What one SQL server speaks. A value of it is what a store keeps to open buyer sessions.
pub trait Dialect: Send + Sync + Sized + 'static {
    /// The driver's connection.
    type Conn: Connection;
    /// Where the server is and who logs in.
    type Endpoint: Sync;

    /// What a `prepare` that ran out of time was doing.
    const PREPARE: &'static str;
    /// The stock row carries a `version` (MariaDB's, which `mysql-optimistic` reads): read with
    /// the stock and raised by every write.
    const VERSIONED: bool;
    /// The store's `INSERT` of an order and its `qty - 1` update answer with a row
    /// (`RETURNING`, fetched) instead of a count of rows (executed).
    const RETURNING: bool;
    /// A buyer's transaction in [`SqlStore::in_transaction`] is marked unsettled while it
    /// runs, so an attempt cut mid-way closes its connection and the server frees its locks at
    /// once. PostgreSQL's strategies do; MariaDB's always left a cut transaction's rollback
    /// queued on the connection, and still do (results must not move).
    const CUT_CLOSES: bool;
    /// A rollback that was not answered leaves the connection in doubt: [`SqlStore::finish`]
    /// replaces it before its next use. PostgreSQL's transaction locks do; MariaDB's row lock
    /// always kept the connection, and still does (results must not move).
    const ROLLBACK_DOUBT_DISCARDS: bool;
    /// [`Store::close`] closes the buyers' connections too, not only the pool (PostgreSQL's
    /// backends are processes; MariaDB's store always left its buyers to the drop).
    const CLOSE_BUYERS: bool;
    /// The 64-bit integer type of a `CAST` (MariaDB: `SIGNED`; PostgreSQL: `BIGINT`).
    const CAST_BIGINT: &'static str;
    /// What an insert of an existing holdings row ends with, so it adds nothing.
    const ON_DUPLICATE_NOTHING: &'static str;

    /// `sql` with its `?` placeholders in the dialect's form (PostgreSQL numbers them).
    fn placeholders(sql: String) -> String {
        sql
    }
    /// Whether `e` is a unique-key violation (the request id's order is there already).
    fn is_duplicate(e: &sqlx::Error) -> bool;

    /// The session a buyer opens (its lock wait bound set), and the admin pool's options.
    fn new(ep: &Self::Endpoint, w: &Workload) -> (Self, <Self::Conn as Connection>::Options);
    /// The statements that create and seed the store (wiping earlier runs).
    fn schema(sql: &Statements, stock: &[u64]) -> Vec<String>;
    /// How long a statement may wait for a row lock.
    fn lock_wait(w: &Workload) -> Duration;
    /// What an error means. Only an error *reply* proves the statement was not applied.
    fn classify(e: &sqlx::Error) -> ErrorKind;
    /// A setup or audit error.
    fn error(e: sqlx::Error) -> StrategyError;

    /// Opens a buyer's session.
    fn open(&self) -> impl Future<Output = Result<Self::Conn, sqlx::Error>> + Send;
    /// `sql` as a simple query's text with `args` inlined, when this session sends no
    /// prepared statement (PostgreSQL behind a transaction pooler); `None` by default.
    fn inlined(&self, _sql: &str, _args: &[Arg<'_>]) -> Option<String> {
        None
    }
    /// Runs `sql` with `args`; the rows it changed.
    fn execute(
        &self,
        con: &mut Self::Conn,
        sql: SqlStr,
        args: &[Arg<'_>],
    ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send;
    /// Runs `sql` with `args`; the first `cols` columns (at most 2) of its first row.
    fn fetch(
        &self,
        con: &mut Self::Conn,
        sql: SqlStr,
        args: &[Arg<'_>],
        cols: usize,
    ) -> impl Future<Output = Result<Option<[i64; 2]>, sqlx::Error>> + Send;
    /// Runs `statements` in order on one connection of the pool.
    fn admin(
        pool: &Pool<Db<Self>>,
        statements: &[String],
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send;
    /// The orders of a `SELECT sku, buyer, request, qty`.
    fn order_rows(
        pool: &Pool<Db<Self>>,
        query: String,
    ) -> impl Future<Output = Result<Vec<OrderRow>, sqlx::Error>> + Send;
    /// The `(sku, n)` pairs of a grouping query.
    fn pairs(
        pool: &Pool<Db<Self>>,
        query: String,
    ) -> impl Future<Output = Result<Vec<(u32, i64)>, sqlx::Error>> + Send;
    /// [`Store::settle`]: nothing is left by default.
    fn settle(
        &self,
        _bound: Duration,
    ) -> impl Future<Output = Result<usize, StrategyError>> + Send {
        async { Ok(0) }
    }
}

/// A dialect's calls into its driver: the same text for every driver, each expansion checked
/// against its own driver's concrete types (generic code would need sqlx's executor bounds on
/// every caller). Expanded inside `impl Dialect`, beside the dialect's own `bind`.
macro_rules! driver_calls {
    () => {
        async fn execute(
            &self,
            con: &mut Self::Conn,
            sql: sqlx::SqlStr,
            args: &[Arg<'_>],
        ) -> Result<u64, sqlx::Error> {
            // Every statement of the store is one round trip (its first PREPARE on a
            // connection, which sqlx then caches, is not counted).
            crate::record::trips::trip();
            let done = match self.inlined(sql.as_str(), args) {
                Some(text) => {
                    sqlx::raw_sql(sqlx::AssertSqlSafe(text))
                        .execute(con)
                        .await?
                }
                None => bind(sqlx::query(sql), args).execute(con).await?,
            };
            Ok(done.rows_affected())
        }

        async fn fetch(
            &self,
            con: &mut Self::Conn,
            sql: sqlx::SqlStr,
            args: &[Arg<'_>],
            cols: usize,
        ) -> Result<Option<[i64; 2]>, sqlx::Error> {
            crate::record::trips::trip();
            let row = match self.inlined(sql.as_str(), args) {
                Some(text) => {
                    (sqlx::raw_sql(sqlx::AssertSqlSafe(text)).fetch_optional(con)).await?
                }
                None => bind(sqlx::query(sql), args).fetch_optional(con).await?,
            };
            let Some(row) = row else { return Ok(None) };
            let mut out = [0; 2];
            for (i, v) in out.iter_mut().enumerate().take(cols) {
                *v = sqlx::Row::try_get(&row, i)?;
            }
            Ok(Some(out))
        }

        async fn admin(
            pool: &sqlx::Pool<Db<Self>>,
            statements: &[String],
        ) -> Result<(), sqlx::Error> {
            let mut con = pool.acquire().await?;
            for s in statements {
                sqlx::Executor::execute(&mut *con, sqlx::AssertSqlSafe(s.as_str())).await?;
            }
            Ok(())
        }

        async fn order_rows(
            pool: &sqlx::Pool<Db<Self>>,
            query: String,
        ) -> Result<Vec<crate::check::OrderRow>, sqlx::Error> {
            let rows = sqlx::query_as::<_, (i32, i64, i64, i32)>(sqlx::AssertSqlSafe(query))
                .fetch_all(pool)
                .await?;
            let row = |(sku, buyer, request, qty): (i32, i64, i64, i32)| crate::check::OrderRow {
                sku: sku as u32,
                buyer: buyer as u64,
                request: request as u64,
                qty: qty as u32,
            };
            Ok(rows.into_iter().map(row).collect())
        }

        async fn pairs(
            pool: &sqlx::Pool<Db<Self>>,
            query: String,
        ) -> Result<Vec<(u32, i64)>, sqlx::Error> {
            let rows = sqlx::query_as::<_, (i32, i64)>(sqlx::AssertSqlSafe(query))
                .fetch_all(pool)
                .await?;
            Ok(rows.into_iter().map(|(s, n)| (s as u32, n)).collect())
        }
    };
}
pub(super) use driver_calls;

/// A store's statements, with its table names filled in once at connect (cloning a [`SqlStr`]
/// is a reference count, not a copy).
pub struct Statements {
    /// The stock of a SKU (and MariaDB's version column).
    pub read: SqlStr,
    /// [`Self::read`], taking the row lock.
    pub read_for_update: SqlStr,
    /// How many columns the two reads return.
    pub read_cols: usize,
    /// Stock and price.
    pub read_price: SqlStr,
    /// [`Self::read_price`], taking the row lock.
    pub read_price_for_update: SqlStr,
    /// Raises the fence to a token, never lowering it.
    pub raise_fence: SqlStr,
    /// The blind write.
    pub write: SqlStr,
    /// The blind write where the version is still the one read (MariaDB's only).
    pub write_if_version: Option<SqlStr>,
    /// The blind write where no newer token reached the row.
    pub write_if_fence: SqlStr,
    /// The order row.
    pub insert_order: SqlStr,
    /// The atomic strategies' one-statement deduction: `qty - 1` where stock is left.
    pub decrement: SqlStr,
    /// `<prefix>_stock`.
    pub stock: String,
    /// `<prefix>_orders`.
    pub orders: String,
    /// `<prefix>_units` (`pg-skip-locked`'s, dropped with the others).
    pub units: String,
}

impl Statements {
    /// The statements of `D`'s store, its tables named after `p`: written once for every
    /// dialect, with `?` placeholders put in its form, the `version` column where it has one
    /// ([`Dialect::VERSIONED`]) and `RETURNING` where it answers with a row
    /// ([`Dialect::RETURNING`]).
    fn new<D: Dialect>(p: &Prefix) -> Self {
        let (stock, orders) = (p.table("stock"), p.table("orders"));
        let s = |text: String| {
            use sqlx::SqlSafeStr;
            sqlx::AssertSqlSafe(D::placeholders(text)).into_sql_str()
        };
        let (version, raise) = match D::VERSIONED {
            true => (", version", ", version = version + 1"),
            false => ("", ""),
        };
        let returning = |what: &str| match D::RETURNING {
            true => format!(" RETURNING {what}"),
            false => String::new(),
        };
        let set = format!("UPDATE {stock} SET qty = ?{raise} WHERE sku = ?");
        Self {
            read: s(format!("SELECT qty{version} FROM {stock} WHERE sku = ?")),
            read_for_update: s(format!(
                "SELECT qty{version} FROM {stock} WHERE sku = ? FOR UPDATE"
            )),
            read_cols: 1 + usize::from(D::VERSIONED),
            read_price: s(format!(
                "SELECT qty, price_cents FROM {stock} WHERE sku = ?"
            )),
            read_price_for_update: s(format!(
                "SELECT qty, price_cents FROM {stock} WHERE sku = ? FOR UPDATE"
            )),
            raise_fence: s(format!(
                "UPDATE {stock} SET fence = GREATEST(fence, ?) WHERE sku = ?"
            )),
            write_if_version: D::VERSIONED.then(|| s(format!("{set} AND version = ?"))),
            write_if_fence: s(format!("{set} AND fence <= ?")),
            write: s(set),
            insert_order: s(format!(
                "INSERT INTO {orders} (sku, buyer, token, created_us) VALUES (?, ?, ?, ?){}",
                returning("id")
            )),
            decrement: s(format!(
                "UPDATE {stock} SET qty = qty - 1{raise} WHERE sku = ? AND qty > 0{}",
                returning("qty")
            )),
            units: p.table("units"),
            stock,
            orders,
        }
    }
}

/// What must still hold for the blind write to be applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guard {
    /// Nothing: the lock is trusted.
    None,
    /// The row's version is still the one read (optimistic concurrency).
    Version(i64),
    /// No newer fencing token than this one has reached the row.
    Fence(u64),
}

impl Guard {
    /// A fence if there is one, else nothing.
    pub fn fence(fence: Option<u64>) -> Self {
        fence.map_or(Guard::None, Guard::Fence)
    }
}

/// A sale workload's rules in the store (`[buyers]`): the limit, and which guards of its own
/// the store keeps ([`Enforcement::store_keys`]); a lock's store keeps none (the lock protects
/// its reads).
#[derive(Debug, Clone, Copy)]
pub struct Sale {
    /// Units one buyer may hold of one SKU.
    pub limit: u32,
    /// A unique key on the orders' request id.
    pub request_key: bool,
    /// The holdings row per (buyer, SKU) and its conditional update.
    pub holdings: bool,
}

/// A sale's statements (only a sale runs them: a steady workload's stay as they were).
/// Written once for both dialects, placeholders put in each one's form.
pub struct SaleSql {
    /// `qty - ?` where at least that much is left: all or nothing.
    pub decrement: SqlStr,
    /// The order with its buyer, request id and units.
    pub insert_order: SqlStr,
    /// The buyer's units of a SKU and the request's orders, from the orders (a check inside
    /// a lock: plain reads).
    pub held: SqlStr,
    /// The holdings row of (buyer, SKU), if missing.
    pub hold_row: SqlStr,
    /// Adds the order's units to the holdings where they stay within the limit.
    pub hold_units: SqlStr,
    /// `<prefix>_holdings`.
    pub holdings: String,
}

impl SaleSql {
    fn new<D: Dialect>(sql: &Statements, p: &Prefix) -> Self {
        let (stock, orders, holdings) = (&sql.stock, &sql.orders, p.table("holdings"));
        let s = |text: String| {
            use sqlx::SqlSafeStr;
            sqlx::AssertSqlSafe(D::placeholders(text)).into_sql_str()
        };
        let bigint = D::CAST_BIGINT;
        let nothing = D::ON_DUPLICATE_NOTHING;
        Self {
            decrement: s(format!(
                "UPDATE {stock} SET qty = qty - ? WHERE sku = ? AND qty >= ?"
            )),
            insert_order: s(format!(
                "INSERT INTO {orders} (sku, buyer, token, created_us, request, qty) \
                 VALUES (?, ?, ?, ?, ?, ?)"
            )),
            held: s(format!(
                "SELECT CAST(COALESCE(SUM(qty), 0) AS {bigint}), \
                 (SELECT COUNT(*) FROM {orders} WHERE request = ?) \
                 FROM {orders} WHERE buyer = ? AND sku = ?"
            )),
            hold_row: s(format!(
                "INSERT INTO {holdings} (buyer, sku, units) VALUES (?, ?, 0) {nothing}"
            )),
            hold_units: s(format!(
                "UPDATE {holdings} SET units = units + ? \
                 WHERE buyer = ? AND sku = ? AND units + ? <= ?"
            )),
            holdings,
        }
    }

    /// What a sale adds to the schema, after the dialect's tables: the orders' request id and
    /// units, their indexes (the request's unique where the store keys it), the holdings.
    fn schema(&self, sql: &Statements, sale: &Sale) -> Vec<String> {
        let (orders, holdings) = (&sql.orders, &self.holdings);
        let unique = if sale.request_key { "UNIQUE " } else { "" };
        let mut ddl = vec![
            format!("DROP TABLE IF EXISTS {holdings}"),
            format!(
                "ALTER TABLE {orders} ADD COLUMN request BIGINT NOT NULL DEFAULT 0, \
                 ADD COLUMN qty INT NOT NULL DEFAULT 1"
            ),
            format!("CREATE {unique}INDEX {orders}_request ON {orders} (request)"),
            format!("CREATE INDEX {orders}_buyer ON {orders} (buyer, sku)"),
        ];
        if sale.holdings {
            ddl.push(format!(
                "CREATE TABLE {holdings} (buyer BIGINT NOT NULL, sku INT NOT NULL, \
                 units INT NOT NULL, PRIMARY KEY (buyer, sku))"
            ));
        }
        ddl
    }
}

/// What a store's write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// The stock and the order are written.
    Applied,
    /// The write's [`Guard`] refused it (a version or a fence moved).
    GuardRefused,
    /// A sale's rule refused the order (the caller rolls back).
    Refused(Refusal),
}

impl Written {
    /// The attempt's outcome; a refused guard is a stale token where the write was `fenced`.
    pub fn outcome(self, fenced: bool) -> Outcome {
        match self {
            Self::Applied => Outcome::Sold,
            Self::Refused(r) => Outcome::Refused(r),
            Self::GuardRefused if fenced => Outcome::Failed(ErrorKind::StaleToken),
            Self::GuardRefused => unreachable!("an unguarded update always matches the seeded row"),
        }
    }
}

/// Outcome of a write that failed with `kind`: a reply means nothing happened; a timeout or a
/// lost connection after sending means it may have been applied.
pub fn write_failure(kind: ErrorKind) -> Outcome {
    match kind {
        ErrorKind::Timeout | ErrorKind::Connection => Outcome::Unknown(kind),
        _ => Outcome::Failed(kind),
    }
}

/// `INSERT INTO {table} (sku, qty) VALUES …` statements seeding `stock[sku]`, 1,000 rows each.
pub fn stock_rows(table: &str, stock: &[u64]) -> Vec<String> {
    let rows: Vec<String> = stock
        .iter()
        .enumerate()
        .map(|(sku, qty)| format!("({sku},{qty})"))
        .collect();
    rows.chunks(1000)
        .map(|chunk| format!("INSERT INTO {table} (sku, qty) VALUES {}", chunk.join(",")))
        .collect()
}

/// Wall-clock time in µs, stamped on each order row.
pub fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

/// The stock in one SQL server: a connection per buyer, a small pool for setup and audit.
pub struct SqlStore<D: Dialect> {
    pool: Pool<Db<D>>,
    buyers: Buyers<D::Conn>,
    dialect: D,
    /// Bound of every single statement (`load.timeout`).
    pub timeout: Duration,
    /// How long a statement may wait for a row lock ([`Dialect::lock_wait`]).
    pub lock_wait: Duration,
    /// Names of everything the store creates.
    pub prefix: Prefix,
    pub(super) sql: Statements,
    /// A sale's rules (`None`: a steady workload, whose statements stay as they were).
    pub sale: Option<Sale>,
    sale_sql: SaleSql,
    /// Reserve, then pay (`[pay]`): the desk the harness runs beside the buyers.
    pay: Option<std::sync::Arc<dyn crate::strategy::PayDesk>>,
}

impl<D: Dialect> SqlStore<D> {
    /// Connects one connection per buyer (bounded) plus a small pool for setup and audit.
    /// Tables are named after `prefix`.
    pub async fn connect(
        ep: &D::Endpoint,
        prefix: &Prefix,
        w: &Workload,
    ) -> Result<Self, StrategyError> {
        let (dialect, admin) = D::new(ep, w);
        let sql = Statements::new::<D>(prefix);
        let pool = PoolOptions::<Db<D>>::new()
            .max_connections(2)
            .connect_with(admin)
            .await
            .map_err(D::error)?;
        let store = Self {
            pool,
            buyers: Buyers::new(w.load.clients.clamp(1, MAX_BUYER_CONNECTIONS) as usize),
            dialect,
            timeout: w.load.timeout,
            lock_wait: D::lock_wait(w),
            prefix: prefix.clone(),
            sale_sql: SaleSql::new::<D>(&sql, prefix),
            sql,
            pay: None,
            // A lock's store by default: the sale checked by reads ([`Self::enforcing`]).
            sale: w.buyers.as_ref().map(|b| Sale {
                limit: b.limit,
                request_key: false,
                holdings: false,
            }),
        };
        // Connect every buyer now, so the first attempts do not pay for it.
        let open = || store.dialect.open();
        match store.buyers.connect_all(open, ADMIN_TIMEOUT).await {
            Err(sqlx::Error::PoolTimedOut) => Err(StrategyError::Timeout("connect buyers")),
            r => r.map(|()| store).map_err(D::error),
        }
    }

    /// The store with the guards of its own that `e` keeps in a sale.
    pub fn enforcing(mut self, e: Enforcement) -> Self {
        if let Some(sale) = &mut self.sale {
            (sale.request_key, sale.holdings) = e.store_keys();
        }
        self
    }

    /// The store whose sale's orders are reservations, paid and reaped by `desk`.
    pub fn paying(mut self, desk: Option<std::sync::Arc<dyn crate::strategy::PayDesk>>) -> Self {
        self.pay = desk;
        self
    }

    /// Orders still out of stock: with `[pay]`, a returned reservation's units are back.
    fn kept(&self) -> &'static str {
        match self.pay {
            Some(_) => " WHERE state <> 'returned'",
            None => "",
        }
    }

    /// The dialect: how the store's buyers run a statement.
    pub fn dialect(&self) -> &D {
        &self.dialect
    }

    /// The pool, for setup and audit statements.
    pub fn pool(&self) -> &Pool<Db<D>> {
        &self.pool
    }

    /// Buyer `client`'s connection (see [`Buyers::conn`]), bounded by one `load.timeout`.
    pub async fn conn(&self, client: u32) -> Result<BuyerConn<'_, D::Conn>, ErrorKind> {
        let open = || self.dialect.open();
        self.buyers
            .conn(client, self.timeout, open, D::classify)
            .await
    }

    /// Runs one transaction's `body` on buyer `client`'s connection (marked unsettled while it
    /// runs where [`Dialect::CUT_CLOSES`]); an `Err` outcome drops the connection.
    pub async fn in_transaction(
        &self,
        client: u32,
        body: impl AsyncFnOnce(&mut D::Conn) -> Result<Outcome, Outcome>,
    ) -> Outcome {
        let mut con = match self.conn(client).await {
            Ok(c) => c,
            Err(k) => return Outcome::Failed(k),
        };
        if D::CUT_CLOSES {
            con.unsettled();
        }
        let result = body(&mut con).await;
        con.settled();
        result.unwrap_or_else(|o| fail_and_drop(con, o))
    }

    /// Reads `(qty, version)` of a SKU (version 0 where the table has none); `for_update` takes
    /// the row lock (and may wait `lock_wait`).
    pub async fn read(
        &self,
        con: &mut D::Conn,
        sku: u32,
        for_update: bool,
    ) -> Result<(i64, i64), sqlx::Error> {
        let sql = if for_update {
            &self.sql.read_for_update
        } else {
            &self.sql.read
        };
        let args = [Arg::Sku(sku)];
        let row = self
            .dialect
            .fetch(con, sql.clone(), &args, self.sql.read_cols)
            .await?;
        let [qty, version] = row.ok_or(sqlx::Error::RowNotFound)?;
        Ok((qty, version))
    }

    /// The read section's statements on `con`: stock and price, `hold`, the stock again.
    /// `locking` reads (`FOR UPDATE`) are for a caller inside a transaction, whose plain reads
    /// would all see its first snapshot under MariaDB's REPEATABLE READ; on an autocommit
    /// connection each plain read sees the latest commit, so a writer's change during the hold
    /// shows.
    pub async fn check_stock(
        &self,
        con: &mut D::Conn,
        sku: u32,
        hold: Duration,
        locking: bool,
    ) -> Result<Outcome, ErrorKind> {
        let first = if locking {
            &self.sql.read_price_for_update
        } else {
            &self.sql.read_price
        };
        let args = [Arg::Sku(sku)];
        let read = self.dialect.fetch(&mut *con, first.clone(), &args, 2);
        let row = within(self.timeout, read, D::classify).await?;
        let [stock, _price_cents] = row.ok_or(D::classify(&sqlx::Error::RowNotFound))?;
        tokio::time::sleep(hold).await;
        let (later, _) = within(self.timeout, self.read(con, sku, locking), D::classify).await?;
        Ok(crate::strategy::read_outcome(stock, later))
    }

    /// Raises the SKU's fence to `fence` (never lowers it) before a fenced read, so a writer
    /// holding an older token is refused even if it writes *before* the newer holder does.
    pub async fn raise_fence(
        &self,
        con: &mut D::Conn,
        sku: u32,
        fence: u64,
    ) -> Result<(), ErrorKind> {
        let args = [Arg::Fence(fence), Arg::Sku(sku)];
        let raise = self
            .dialect
            .execute(con, self.sql.raise_fence.clone(), &args);
        within(self.timeout, raise, D::classify).await.map(|_| ())
    }

    /// The blind write: `qty = new_qty` if the guard holds, plus the order row (and a sale's
    /// guards, [`Self::place`]). Runs inside the caller's transaction, which rolls back
    /// whatever was not [`Written::Applied`].
    pub async fn write(
        &self,
        con: &mut D::Conn,
        p: &Purchase<'_>,
        new_qty: i64,
        guard: Guard,
        token: &str,
    ) -> Result<Written, ErrorKind> {
        let sql = &self.sql;
        let (update, guarded) = match guard {
            Guard::None => (&sql.write, None),
            Guard::Version(v) => {
                let write = sql.write_if_version.as_ref();
                let write = write.expect("only a store with a version column gets a version guard");
                (write, Some(Arg::Int(v)))
            }
            Guard::Fence(f) => (&sql.write_if_fence, Some(Arg::Fence(f))),
        };
        let (qty, sku) = (Arg::Int(new_qty), Arg::Sku(p.sku));
        let args = [qty, sku, guarded.unwrap_or(qty)];
        let bound = &args[..2 + usize::from(guarded.is_some())];
        let update = self.dialect.execute(&mut *con, update.clone(), bound);
        if within(self.timeout, update, D::classify).await? == 0 {
            return Ok(Written::GuardRefused);
        }
        Ok(match self.place(con, p, token).await? {
            None => Written::Applied,
            Some(r) => Written::Refused(r),
        })
    }

    /// Places the order: a steady workload's row as it always was; a sale's with its buyer,
    /// request id and units, refused by the store's own guards where it keeps them (a
    /// duplicate request id by its unique key; a buyer over the limit by the holdings row's
    /// conditional update). Runs inside the caller's transaction, which rolls back a refusal.
    pub async fn place(
        &self,
        con: &mut D::Conn,
        p: &Purchase<'_>,
        token: &str,
    ) -> Result<Option<Refusal>, ErrorKind> {
        let Some(sale) = self.sale else {
            return self.insert_order(con, p, token).await.map(|_| None);
        };
        let (a, sql) = (p.ask, &self.sale_sql);
        let (buyer, sku, qty) = (Arg::Buyer(a.buyer), Arg::Sku(p.sku), Arg::Int(a.qty.into()));
        let args = [
            sku,
            buyer,
            Arg::Text(token),
            Arg::Int(now_us()),
            Arg::Buyer(a.request),
            qty,
        ];
        let insert = async {
            match self
                .dialect
                .execute(&mut *con, sql.insert_order.clone(), &args)
                .await
            {
                Err(e) if sale.request_key && D::is_duplicate(&e) => Ok(false),
                r => r.map(|_| true),
            }
        };
        if !within(self.timeout, insert, D::classify).await? {
            return Ok(Some(Refusal::Duplicate));
        }
        if !sale.holdings {
            return Ok(None);
        }
        let key = [buyer, sku];
        let row = self.dialect.execute(&mut *con, sql.hold_row.clone(), &key);
        within(self.timeout, row, D::classify).await?;
        let args = [qty, buyer, sku, qty, Arg::Int(sale.limit.into())];
        let add = self.dialect.execute(con, sql.hold_units.clone(), &args);
        let added = within(self.timeout, add, D::classify).await?;
        Ok((added == 0).then_some(Refusal::Limit))
    }

    /// What turns `p` away before a write, given the `stock` read: no stock for its units; in a
    /// sale, read inside the lock (plain reads: the lock protects them), an order already
    /// placed under its request id or the buyer's units over the limit. `None`: sell.
    pub async fn refusal(
        &self,
        con: &mut D::Conn,
        p: &Purchase<'_>,
        stock: i64,
    ) -> Result<Option<Outcome>, ErrorKind> {
        let qty = i64::from(p.ask.qty);
        let Some(sale) = self.sale else {
            return Ok((stock < qty).then_some(Outcome::SoldOut));
        };
        let args = [
            Arg::Buyer(p.ask.request),
            Arg::Buyer(p.ask.buyer),
            Arg::Sku(p.sku),
        ];
        let read = self
            .dialect
            .fetch(con, self.sale_sql.held.clone(), &args, 2);
        let [held, orders] = within(self.timeout, read, D::classify)
            .await?
            .unwrap_or_default();
        Ok(if orders > 0 {
            Some(Outcome::Refused(Refusal::Duplicate))
        } else if stock < qty {
            Some(Outcome::SoldOut)
        } else if held + qty > i64::from(sale.limit) {
            Some(Outcome::Refused(Refusal::Limit))
        } else {
            None
        })
    }

    /// Inserts the order row of a sale; returns its id where the dialect returns it
    /// ([`Dialect::RETURNING`]).
    pub async fn insert_order(
        &self,
        con: &mut D::Conn,
        p: &Purchase<'_>,
        token: &str,
    ) -> Result<Option<i64>, ErrorKind> {
        let args = [
            Arg::Sku(p.sku),
            Arg::Buyer(p.seq),
            Arg::Text(token),
            Arg::Int(now_us()),
        ];
        let sql = self.sql.insert_order.clone();
        if D::RETURNING {
            let id = within(
                self.timeout,
                self.dialect.fetch(con, sql, &args, 1),
                D::classify,
            )
            .await?;
            let [id, _] = id.ok_or(D::classify(&sqlx::Error::RowNotFound))?;
            return Ok(Some(id));
        }
        within(
            self.timeout,
            self.dialect.execute(con, sql, &args),
            D::classify,
        )
        .await
        .map(|_| None)
    }

    /// [`Self::write`] in its own transaction, committed (rolled back when refused).
    pub async fn write_tx(
        &self,
        con: &mut D::Conn,
        p: &Purchase<'_>,
        new_qty: i64,
        guard: Guard,
        token: &str,
    ) -> Result<Written, ErrorKind> {
        let mut tx = within(self.timeout, one(con.begin()), D::classify).await?;
        let written = self.write(&mut tx, p, new_qty, guard, token).await?;
        if written != Written::Applied {
            within(self.timeout, one(tx.rollback()), D::classify).await?;
            return Ok(written);
        }
        within(self.timeout, one(tx.commit()), D::classify).await?;
        Ok(written)
    }

    /// The atomic deduction of `p`'s units of `p.sku` where that many are left (one unit, as
    /// it always was, without a sale); false when they were not.
    pub async fn decrement(&self, con: &mut D::Conn, p: &Purchase<'_>) -> Result<bool, ErrorKind> {
        if self.sale.is_some() {
            let qty = Arg::Int(p.ask.qty.into());
            let args = [qty, Arg::Sku(p.sku), qty];
            let done = self
                .dialect
                .execute(con, self.sale_sql.decrement.clone(), &args);
            return within(self.timeout, done, D::classify).await.map(|n| n > 0);
        }
        let (sql, args) = (self.sql.decrement.clone(), [Arg::Sku(p.sku)]);
        if D::RETURNING {
            let left = self.dialect.fetch(con, sql, &args, 1);
            return within(self.timeout, left, D::classify)
                .await
                .map(|l| l.is_some());
        }
        let done = within(
            self.timeout,
            self.dialect.execute(con, sql, &args),
            D::classify,
        )
        .await?;
        Ok(done > 0)
    }

    /// Begins a transaction on buyer `client`'s connection `con`; a connection that cannot
    /// begin (the server restarted) is replaced next time.
    pub async fn begin<'c>(
        &self,
        con: &'c mut D::Conn,
        client: u32,
    ) -> Result<sqlx::Transaction<'c, Db<D>>, ErrorKind> {
        let begun = within(self.timeout, one(con.begin()), D::classify).await;
        if begun.is_err() {
            self.discard_later(client);
        }
        begun
    }

    /// Ends buyer `client`'s transaction `tx`, whose lock (the row lock, a transaction's
    /// advisory lock) its commit or rollback frees, as `outcome` says: commits a sale (a failed
    /// commit is a [`write_failure`]); rolls back anything else, nothing to keep (a read, sold
    /// out, refused), the outcome standing whether or not the rollback was answered
    /// ([`Dialect::ROLLBACK_DOUBT_DISCARDS`]); drops it on a failure (its connection goes).
    pub async fn finish(
        &self,
        tx: sqlx::Transaction<'_, Db<D>>,
        outcome: Result<Outcome, Outcome>,
        client: u32,
    ) -> Result<Outcome, Outcome> {
        match outcome {
            Ok(Outcome::Sold) => within(self.timeout, one(tx.commit()), D::classify)
                .await
                .map(|()| Outcome::Sold)
                .map_err(write_failure),
            Ok(o) => {
                let rollback = within(self.timeout, one(tx.rollback()), D::classify).await;
                if rollback.is_err() && D::ROLLBACK_DOUBT_DISCARDS {
                    self.discard_later(client);
                }
                Ok(o)
            }
            Err(o) => {
                drop(tx);
                Err(o)
            }
        }
    }

    /// Replaces buyer `client`'s connection before its next use.
    pub fn discard_later(&self, client: u32) {
        self.buyers.discard_later(client);
    }

    /// Runs `statements` in order on the admin pool (setup), bounded by `ADMIN_TIMEOUT`.
    pub async fn admin(&self, statements: &[String]) -> Result<(), StrategyError> {
        tokio::time::timeout(ADMIN_TIMEOUT, D::admin(&self.pool, statements))
            .await
            .map_err(|_| StrategyError::Timeout(D::PREPARE))?
            .map_err(D::error)
    }

    /// Pairs `(sku, n)` of a grouping query on the admin pool, bounded by `ADMIN_TIMEOUT`.
    pub async fn counts(&self, query: String) -> Result<Vec<(u32, i64)>, StrategyError> {
        tokio::time::timeout(ADMIN_TIMEOUT, D::pairs(&self.pool, query))
            .await
            .map_err(|_| StrategyError::Timeout("audit"))?
            .map_err(D::error)
    }

    /// The units sold per SKU: its orders (a sale's: the sum of their units).
    pub async fn orders_per_sku(&self) -> Result<Vec<(u32, i64)>, StrategyError> {
        let orders = &self.sql.orders;
        if self.sale.is_some() {
            let bigint = D::CAST_BIGINT;
            let (units, kept) = (format!("CAST(SUM(qty) AS {bigint})"), self.kept());
            return self
                .counts(format!(
                    "SELECT sku, {units} FROM {orders}{kept} GROUP BY sku"
                ))
                .await;
        }
        self.counts(format!("SELECT sku, COUNT(*) FROM {orders} GROUP BY sku"))
            .await
    }
}

#[async_trait]
impl<D: Dialect> Store for SqlStore<D> {
    async fn prepare(&self, stock: &[u64]) -> Result<(), StrategyError> {
        let mut ddl = D::schema(&self.sql, stock);
        if let Some(sale) = &self.sale {
            ddl.extend(self.sale_sql.schema(&self.sql, sale));
        }
        if let Some(desk) = &self.pay {
            ddl.extend(desk.schema());
        }
        self.admin(&ddl).await
    }

    /// A sale's orders; `None` without one (a steady store has no request ids).
    async fn orders(&self) -> Result<Option<Vec<OrderRow>>, StrategyError> {
        if self.sale.is_none() {
            return Ok(None);
        }
        let orders = &self.sql.orders;
        let kept = self.kept();
        let query = format!("SELECT sku, buyer, request, qty FROM {orders}{kept}");
        tokio::time::timeout(ADMIN_TIMEOUT, D::order_rows(&self.pool, query))
            .await
            .map_err(|_| StrategyError::Timeout("audit"))?
            .map_err(D::error)
            .map(Some)
    }

    async fn audit(&self, skus: u32) -> Result<Vec<SkuAudit>, StrategyError> {
        let stock_t = &self.sql.stock;
        let stock = self
            .counts(format!("SELECT sku, qty FROM {stock_t}"))
            .await?;
        Ok(crate::strategy::audits(
            skus,
            stock,
            self.orders_per_sku().await?,
        ))
    }

    fn pay_desk(&self) -> Option<std::sync::Arc<dyn crate::strategy::PayDesk>> {
        self.pay.clone()
    }

    async fn close(&self) {
        // Bounded: a dead server must not hold up the end of the run.
        if let Some(desk) = &self.pay {
            desk.close().await;
        }
        if D::CLOSE_BUYERS {
            self.buyers.close(Duration::from_secs(1)).await;
        }
        let _ = tokio::time::timeout(Duration::from_secs(5), self.pool.close()).await;
    }

    async fn settle(&self, bound: Duration) -> Result<usize, StrategyError> {
        self.dialect.settle(bound).await
    }
}

/// Every real lock's critical section (and the `none` controls').
impl<D: Dialect> CriticalSection for SqlStore<D> {
    fn lock_key(&self, sku: u32) -> String {
        self.prefix.lock_key(sku)
    }

    /// The shared critical section run under any lock: read (no lock of the store's own), hold
    /// for the business time, blind-write `read - 1` with the order in one transaction.
    ///
    /// With a `fence` the store is fenced: the read raises the SKU's fence to the token and the
    /// write is refused (`Failed(StaleToken)`) if a newer token has been seen since.
    async fn critical_section(
        &self,
        p: &Purchase<'_>,
        token: &str,
        fence: Option<u64>,
        hold: Duration,
    ) -> Outcome {
        let mut con = match self.conn(p.client).await {
            Ok(c) => c,
            Err(k) => return Outcome::Failed(k),
        };
        if let Some(f) = fence
            && let Err(k) = self.raise_fence(&mut con, p.sku, f).await
        {
            return fail_and_drop(con, Outcome::Failed(k));
        }
        let read = self.read(&mut con, p.sku, false);
        let qty = match within(self.timeout, read, D::classify).await {
            Ok((qty, _)) => qty,
            Err(k) => return fail_and_drop(con, Outcome::Failed(k)),
        };
        match self.refusal(&mut con, p, qty).await {
            Ok(None) => {}
            Ok(Some(turned_away)) => return turned_away,
            Err(k) => return fail_and_drop(con, Outcome::Failed(k)),
        }
        // Between the read and the write: where a holder's GC pause loses an update.
        crate::chaos::holder::reached(crate::chaos::holder::Point::AfterRead);
        tokio::time::sleep(hold).await;
        let new_qty = qty - i64::from(p.ask.qty);
        p.lease.wrote();
        match self
            .write_tx(&mut con, p, new_qty, Guard::fence(fence), token)
            .await
        {
            Ok(written) => written.outcome(fence.is_some()),
            Err(k) => fail_and_drop(con, write_failure(k)),
        }
    }

    /// Bound of [`Self::critical_section`]: the buyer's connection (opened if needed), raising
    /// the fence, the read, a sale's read of the buyer's units and the request's orders,
    /// `hold`, then begin, update, insert and commit — 7 calls, 8 in a sale.
    fn critical_section_bound(&self, hold: Duration) -> Duration {
        let calls = 7 + u32::from(self.sale.is_some());
        crate::strategy::calls(calls, self.timeout) + hold
    }

    /// Stock and price, hold, the stock again, each read the latest commit (autocommit).
    async fn read_section(&self, p: &Purchase<'_>, hold: Duration) -> Outcome {
        let mut con = match self.conn(p.client).await {
            Ok(c) => c,
            Err(k) => return Outcome::Failed(k),
        };
        match self.check_stock(&mut con, p.sku, hold, false).await {
            Ok(outcome) => outcome,
            Err(k) => fail_and_drop(con, Outcome::Failed(k)),
        }
    }

    /// The buyer's connection, two reads and `hold`.
    fn read_section_bound(&self, hold: Duration) -> Duration {
        crate::strategy::calls(3, self.timeout) + hold
    }
}
