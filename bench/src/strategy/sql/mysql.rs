//! The MariaDB store: the `<prefix>_stock` and `<prefix>_orders` tables, the shared critical
//! section, and the audit.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use sqlx::mysql::{MySqlConnectOptions, MySqlPoolOptions};
use sqlx::{
    ConnectOptions, Connection, Executor, MySqlConnection, MySqlPool, Row, SqlSafeStr, SqlStr,
};

use super::buyers::Buyers;
use crate::check::SkuAudit;
use crate::cluster::{MysqlEndpoint, Prefix};
use crate::record::{ErrorKind, Outcome};
use crate::strategy::{CriticalSection, Purchase, Store, StrategyError, within};
use crate::workload::Workload;

/// MariaDB error number of a lock wait timeout (`innodb_lock_wait_timeout`).
pub const ER_LOCK_WAIT_TIMEOUT: u16 = 1205;
/// MariaDB error number of a deadlock victim.
pub const ER_LOCK_DEADLOCK: u16 = 1213;

/// The price every SKU is seeded with: a read checks stock and price, and nothing changes it.
pub const PRICE_CENTS: i64 = 1999;

/// How long setup and audit statements may take (they touch every SKU).
const ADMIN_TIMEOUT: Duration = Duration::from_secs(60);

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

/// The stock table in MariaDB: a connection per buyer, a small pool for setup and audit.
pub struct MysqlStore {
    pool: MySqlPool,
    buyers: Buyers<MySqlConnection>,
    opts: MySqlConnectOptions,
    lock_wait_s: u64,
    /// Bound of every single statement.
    pub timeout: Duration,
    /// Names of everything the store creates.
    pub prefix: Prefix,
    sql: Sql,
}

/// The store's statements, with its table names filled in once at connect (cloning a
/// [`SqlStr`] is a reference count, not a copy).
struct Sql {
    read: SqlStr,
    read_for_update: SqlStr,
    read_price: SqlStr,
    read_price_for_update: SqlStr,
    raise_fence: SqlStr,
    write: SqlStr,
    write_if_version: SqlStr,
    write_if_fence: SqlStr,
    insert_order: SqlStr,
    /// Used by `mysql-atomic`.
    decrement: SqlStr,
    stock: String,
    orders: String,
}

impl Sql {
    fn new(p: &Prefix) -> Self {
        let (stock, orders) = (p.table("stock"), p.table("orders"));
        let s = |text: String| sqlx::AssertSqlSafe(text).into_sql_str();
        let set = format!("UPDATE {stock} SET qty = ?, version = version + 1 WHERE sku = ?");
        Self {
            read: s(format!("SELECT qty, version FROM {stock} WHERE sku = ?")),
            read_for_update: s(format!(
                "SELECT qty, version FROM {stock} WHERE sku = ? FOR UPDATE"
            )),
            read_price: s(format!(
                "SELECT qty, price_cents FROM {stock} WHERE sku = ?"
            )),
            read_price_for_update: s(format!(
                "SELECT qty, price_cents FROM {stock} WHERE sku = ? FOR UPDATE"
            )),
            raise_fence: s(format!(
                "UPDATE {stock} SET fence = GREATEST(fence, ?) WHERE sku = ?"
            )),
            write_if_version: s(format!("{set} AND version = ?")),
            write_if_fence: s(format!("{set} AND fence <= ?")),
            write: s(set),
            insert_order: s(format!(
                "INSERT INTO {orders} (sku, buyer, token, created_us) VALUES (?, ?, ?, ?)"
            )),
            decrement: s(format!(
                "UPDATE {stock} SET qty = qty - 1, version = version + 1 WHERE sku = ? AND qty > 0"
            )),
            stock,
            orders,
        }
    }
}

/// The MariaDB error number, if `e` is a database error reply.
pub fn error_number(e: &sqlx::Error) -> Option<u16> {
    match e {
        sqlx::Error::Database(d) => d
            .try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
            .map(|m| m.number()),
        _ => None,
    }
}

/// Classifies a sqlx error. Only an error *reply* proves the statement was not applied.
pub fn classify(e: &sqlx::Error) -> ErrorKind {
    match e {
        sqlx::Error::Database(_) if error_number(e) == Some(ER_LOCK_DEADLOCK) => {
            ErrorKind::Deadlock
        }
        sqlx::Error::Database(_) => ErrorKind::Server,
        sqlx::Error::PoolTimedOut => ErrorKind::Timeout,
        _ => ErrorKind::Connection,
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

/// Row-lock waits end with error 1205 after `innodb_lock_wait_timeout`, which counts whole
/// seconds: the acquire timeout rounded up, at least 1 s.
pub fn lock_wait(w: &Workload) -> Duration {
    Duration::from_secs(w.lock.acquire_timeout.as_secs_f64().ceil().max(1.0) as u64)
}

/// Wall-clock time in µs, stamped on each order row.
pub(super) fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

/// Most buyer connections; beyond this, buyers share them (and wait on each other).
const MAX_BUYER_CONNECTIONS: u32 = 1000;

/// A buyer's own MariaDB connection, held for one call sequence.
pub type BuyerConn<'a> = super::buyers::BuyerConn<'a, MySqlConnection>;

impl MysqlStore {
    /// Connects one connection per buyer (bounded) plus a small pool for setup and audit.
    /// Tables are named after `prefix`.
    pub async fn connect(
        ep: &MysqlEndpoint,
        prefix: &Prefix,
        w: &Workload,
    ) -> Result<Self, StrategyError> {
        let opts = ep
            .connect_options()
            // Statement logging costs client CPU on every call, CPU the server is short of.
            .log_statements(log::LevelFilter::Off)
            .log_slow_statements(log::LevelFilter::Off, Duration::from_secs(3600));
        let pool = MySqlPoolOptions::new()
            .max_connections(2)
            .connect_with(opts.clone())
            .await?;
        let store = Self {
            pool,
            buyers: Buyers::new(w.load.clients.clamp(1, MAX_BUYER_CONNECTIONS) as usize),
            opts,
            lock_wait_s: lock_wait(w).as_secs(),
            timeout: w.load.timeout,
            prefix: prefix.clone(),
            sql: Sql::new(prefix),
        };
        // Connect every buyer now, so the first attempts do not pay for it.
        match store
            .buyers
            .connect_all(|| store.open(), ADMIN_TIMEOUT)
            .await
        {
            Err(sqlx::Error::PoolTimedOut) => Err(StrategyError::Timeout("connect buyers")),
            r => r.map(|()| store).map_err(StrategyError::from),
        }
    }

    async fn open(&self) -> Result<MySqlConnection, sqlx::Error> {
        let mut con = self.opts.connect().await?;
        // Row-lock waits end with error 1205 at the acquire timeout.
        con.execute(sqlx::AssertSqlSafe(format!(
            "SET SESSION innodb_lock_wait_timeout = {}",
            self.lock_wait_s
        )))
        .await?;
        Ok(con)
    }

    /// The pool, for setup statements.
    pub fn pool(&self) -> &MySqlPool {
        &self.pool
    }

    /// Buyer `client`'s connection (see [`Buyers::conn`]), bounded by one `load.timeout`.
    pub async fn conn(&self, client: u32) -> Result<BuyerConn<'_>, ErrorKind> {
        (self.buyers)
            .conn(client, self.timeout, || self.open(), classify)
            .await
    }

    /// Reads `(qty, version)` of a SKU; `for_update` takes the row lock.
    pub async fn read(
        &self,
        con: &mut MySqlConnection,
        sku: u32,
        for_update: bool,
    ) -> Result<(i64, i64), sqlx::Error> {
        let sql = if for_update {
            &self.sql.read_for_update
        } else {
            &self.sql.read
        };
        let row = sqlx::query(sql.clone()).bind(sku).fetch_one(con).await?;
        Ok((row.try_get(0)?, row.try_get(1)?))
    }

    /// The read section's statements on `con`: stock and price, `hold`, the stock again.
    /// `locking` reads (`FOR UPDATE`) are for a caller inside a transaction, whose plain reads
    /// would all see its first snapshot; on an autocommit connection each plain read sees the
    /// latest commit, so a writer's change during the hold shows.
    pub async fn check_stock(
        &self,
        con: &mut MySqlConnection,
        sku: u32,
        hold: Duration,
        locking: bool,
    ) -> Result<Outcome, ErrorKind> {
        let first = if locking {
            &self.sql.read_price_for_update
        } else {
            &self.sql.read_price
        };
        let read = sqlx::query(first.clone()).bind(sku).fetch_one(&mut *con);
        let row = within(self.timeout, read, classify).await?;
        let (stock, _price_cents): (i64, i64) = (
            row.try_get(0).map_err(|e| classify(&e))?,
            row.try_get(1).map_err(|e| classify(&e))?,
        );
        tokio::time::sleep(hold).await;
        let (later, _) = within(self.timeout, self.read(con, sku, locking), classify).await?;
        Ok(crate::strategy::read_outcome(stock, later))
    }

    /// Raises the SKU's fence to `fence` (never lowers it) before a fenced read, so a writer
    /// holding an older token is refused even if it writes *before* the newer holder does.
    pub async fn raise_fence(
        &self,
        con: &mut MySqlConnection,
        sku: u32,
        fence: u64,
    ) -> Result<(), ErrorKind> {
        let raise = sqlx::query(self.sql.raise_fence.clone())
            .bind(fence)
            .bind(sku);
        within(self.timeout, raise.execute(con), classify)
            .await
            .map(|_| ())
    }

    /// The blind write: `qty = new_qty` if the guard holds, plus the order row. Returns false
    /// when the guard refused the write. Runs inside the caller's transaction.
    pub async fn write(
        &self,
        con: &mut MySqlConnection,
        p: &Purchase<'_>,
        new_qty: i64,
        guard: Guard,
        token: &str,
    ) -> Result<bool, ErrorKind> {
        let t = self.timeout;
        let update = match guard {
            Guard::None => sqlx::query(self.sql.write.clone())
                .bind(new_qty)
                .bind(p.sku),
            Guard::Version(v) => sqlx::query(self.sql.write_if_version.clone())
                .bind(new_qty)
                .bind(p.sku)
                .bind(v),
            Guard::Fence(f) => sqlx::query(self.sql.write_if_fence.clone())
                .bind(new_qty)
                .bind(p.sku)
                .bind(f),
        };
        let done = within(t, update.execute(&mut *con), classify).await?;
        if done.rows_affected() == 0 {
            return Ok(false);
        }
        self.insert_order(con, p, token).await?;
        Ok(true)
    }

    /// Inserts the order row of a sale.
    pub async fn insert_order(
        &self,
        con: &mut MySqlConnection,
        p: &Purchase<'_>,
        token: &str,
    ) -> Result<(), ErrorKind> {
        let insert = sqlx::query(self.sql.insert_order.clone())
            .bind(p.sku)
            .bind(p.seq)
            .bind(token)
            .bind(now_us());
        within(self.timeout, insert.execute(con), classify)
            .await
            .map(|_| ())
    }

    /// [`Self::write`] in its own transaction, committed.
    pub async fn write_tx(
        &self,
        con: &mut MySqlConnection,
        p: &Purchase<'_>,
        new_qty: i64,
        guard: Guard,
        token: &str,
    ) -> Result<bool, ErrorKind> {
        let mut tx = within(self.timeout, con.begin(), classify).await?;
        if !self.write(&mut tx, p, new_qty, guard, token).await? {
            within(self.timeout, tx.rollback(), classify).await?;
            return Ok(false);
        }
        within(self.timeout, tx.commit(), classify).await?;
        Ok(true)
    }
}

impl MysqlStore {
    /// `mysql-atomic`'s one-statement deduction: `qty - 1` where stock is left.
    pub fn decrement_sql(&self) -> SqlStr {
        self.sql.decrement.clone()
    }

    /// Replaces buyer `client`'s connection before its next use.
    pub fn discard_later(&self, client: u32) {
        self.buyers.discard_later(client);
    }
}

pub use super::buyers::fail_and_drop;

#[async_trait]
impl Store for MysqlStore {
    async fn prepare(&self, skus: u32, stock: u64) -> Result<(), StrategyError> {
        let work = async {
            let mut con = self.pool.acquire().await?;
            let (stock_t, orders_t) = (&self.sql.stock, &self.sql.orders);
            con.execute(sqlx::AssertSqlSafe(format!(
                "DROP TABLE IF EXISTS {orders_t}, {stock_t}"
            )))
            .await?;
            con.execute(sqlx::AssertSqlSafe(format!(
                "CREATE TABLE {stock_t} (sku INT PRIMARY KEY, qty BIGINT NOT NULL, \
                 price_cents BIGINT NOT NULL DEFAULT {PRICE_CENTS}, \
                 version BIGINT NOT NULL DEFAULT 0, fence BIGINT UNSIGNED NOT NULL DEFAULT 0) \
                 ENGINE=InnoDB"
            )))
            .await?;
            con.execute(sqlx::AssertSqlSafe(format!(
                "CREATE TABLE {orders_t} (id BIGINT AUTO_INCREMENT PRIMARY KEY, sku INT NOT NULL, \
                 buyer BIGINT NOT NULL, token VARCHAR(64) NOT NULL, created_us BIGINT NOT NULL, \
                 KEY (sku)) ENGINE=InnoDB"
            )))
            .await?;
            for chunk in (0..skus).collect::<Vec<_>>().chunks(1000) {
                let values = chunk
                    .iter()
                    .map(|s| format!("({s},{stock})"))
                    .collect::<Vec<_>>()
                    .join(",");
                con.execute(sqlx::AssertSqlSafe(format!(
                    "INSERT INTO {stock_t} (sku, qty) VALUES {values}"
                )))
                .await?;
            }
            Ok::<_, StrategyError>(())
        };
        tokio::time::timeout(ADMIN_TIMEOUT, work)
            .await
            .map_err(|_| StrategyError::Timeout("prepare stock"))?
    }

    async fn audit(&self, skus: u32) -> Result<Vec<SkuAudit>, StrategyError> {
        let (stock_t, orders_t) = (&self.sql.stock, &self.sql.orders);
        let pairs = |q: String| async move {
            let rows = sqlx::query_as::<_, (i32, i64)>(sqlx::AssertSqlSafe(q))
                .fetch_all(&self.pool)
                .await?;
            Ok::<Vec<(u32, i64)>, sqlx::Error>(
                rows.into_iter().map(|(s, n)| (s as u32, n)).collect(),
            )
        };
        let work = async {
            let stock = pairs(format!("SELECT sku, qty FROM {stock_t}")).await?;
            let orders =
                pairs(format!("SELECT sku, COUNT(*) FROM {orders_t} GROUP BY sku")).await?;
            Ok::<_, StrategyError>(crate::strategy::audits(skus, stock, orders))
        };
        tokio::time::timeout(ADMIN_TIMEOUT, work)
            .await
            .map_err(|_| StrategyError::Timeout("audit"))?
    }

    async fn close(&self) {
        // Bounded: a dead server must not hold up the end of the run.
        let _ = tokio::time::timeout(Duration::from_secs(5), self.pool.close()).await;
    }
}

/// Shared handle type used by the MariaDB strategies.
pub type SharedStore = Arc<MysqlStore>;

/// Every real lock's critical section (and `none`'s).
impl CriticalSection for MysqlStore {
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
        let qty = match within(self.timeout, self.read(&mut con, p.sku, false), classify).await {
            Ok((qty, _)) => qty,
            Err(k) => return fail_and_drop(con, Outcome::Failed(k)),
        };
        if qty <= 0 {
            return Outcome::SoldOut;
        }
        // Between the read and the write: where a holder's GC pause loses an update.
        crate::chaos::holder::reached(crate::chaos::holder::Point::AfterRead);
        tokio::time::sleep(hold).await;
        let guard = fence.map_or(Guard::None, Guard::Fence);
        match self.write_tx(&mut con, p, qty - 1, guard, token).await {
            Ok(true) => Outcome::Sold,
            Ok(false) if fence.is_some() => Outcome::Failed(ErrorKind::StaleToken),
            Ok(false) => unreachable!("an unguarded update always matches the seeded row"),
            Err(k) => fail_and_drop(con, write_failure(k)),
        }
    }

    /// Bound of [`Self::critical_section`]: the buyer's connection (opened if needed), raising
    /// the fence, the read, `hold`, then begin, update, insert and commit — 7 calls.
    fn critical_section_bound(&self, hold: Duration) -> Duration {
        crate::strategy::calls(7, self.timeout) + hold
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

/// Ends what earlier runs left on a shared server before the next one starts: a statement whose
/// client gave up (a timeout drops the connection) keeps running server-side, holding its row
/// locks until its own lock wait times out, and would slow a run that never caused it. Kills
/// every other connection of the harness's user and waits (up to `bound`) until they are gone.
/// Returns how many it killed.
pub async fn settle(ep: &MysqlEndpoint, bound: Duration) -> Result<usize, StrategyError> {
    let opts = ep.connect_options().log_statements(log::LevelFilter::Off);
    let mut con = tokio::time::timeout(bound, MySqlConnection::connect_with(&opts))
        .await
        .map_err(|_| StrategyError::Timeout("connecting to MariaDB to settle it"))??;
    let others =
        "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = ? AND ID <> CONNECTION_ID()";
    let ids: Vec<i64> = sqlx::query_scalar(others)
        .bind(&ep.user)
        .fetch_all(&mut con)
        .await?;
    for id in &ids {
        // Gone already, or ending: either way it stops holding locks.
        let _ = con
            .execute(sqlx::AssertSqlSafe(format!("KILL CONNECTION {id}")))
            .await;
    }
    let deadline = tokio::time::Instant::now() + bound;
    loop {
        let left: Vec<i64> = sqlx::query_scalar(others)
            .bind(&ep.user)
            .fetch_all(&mut con)
            .await?;
        if left.iter().all(|id| !ids.contains(id)) || tokio::time::Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = con.close().await;
    Ok(ids.len())
}
