//! The PostgreSQL store: `<prefix>_stock` and `<prefix>_orders` as in the MariaDB store (and
//! `<prefix>_units` for `pg-skip-locked`, in [`super::postgres_units`]), a connection per buyer,
//! the critical section the `pg-none` control runs, and the audit.
//!
//! Waits are bounded server-side too: every buyer session starts with `lock_timeout` (the
//! workload's `lock.acquire_timeout`, exact to the millisecond, where MariaDB counts whole
//! seconds) and `statement_timeout` (that wait plus one `load.timeout`), so a statement whose
//! client gave up stops holding locks on its own.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};
use sqlx::{ConnectOptions, Connection, Executor, Row, SqlSafeStr, SqlStr};

use super::buyers::{Buyers, fail_and_drop};
use super::mysql::{PRICE_CENTS, now_us, write_failure};
use crate::check::SkuAudit;
use crate::cluster::{PostgresEndpoint, Prefix};
use crate::record::{ErrorKind, Outcome};
use crate::strategy::{CriticalSection, Purchase, Store, StrategyError, within};
use crate::workload::Workload;

/// SQLSTATE `lock_not_available`: `lock_timeout` ran out (or a `NOWAIT` found the lock held).
pub const LOCK_NOT_AVAILABLE: &str = "55P03";
/// SQLSTATE `query_canceled`: `statement_timeout` ran out (or a cancel request).
pub const QUERY_CANCELED: &str = "57014";
/// SQLSTATE `deadlock_detected`: this transaction was the victim (rolled back).
pub const DEADLOCK_DETECTED: &str = "40P01";

/// How long setup and audit statements may take (they touch every SKU, or every unit).
pub(super) const ADMIN_TIMEOUT: Duration = Duration::from_secs(60);

/// Most buyer connections: PostgreSQL forks a backend per connection.
pub const MAX_BUYER_CONNECTIONS: u32 = 1000;

/// What an error means, from its SQLSTATE (`None`: no reply from the server at all). Only a
/// reply proves a statement was not applied; a session the server ended (class 08, and 57P0x:
/// shutdown, crash) is a lost connection, whose last commit may or may not have happened.
pub fn classify_sqlstate(code: Option<&str>) -> ErrorKind {
    match code {
        None => ErrorKind::Connection,
        Some(DEADLOCK_DETECTED) => ErrorKind::Deadlock,
        Some(c) if c.starts_with("08") || c.starts_with("57P0") => ErrorKind::Connection,
        Some(_) => ErrorKind::Server,
    }
}

/// The SQLSTATE of an error reply.
pub fn sqlstate(e: &sqlx::Error) -> Option<String> {
    match e {
        sqlx::Error::Database(d) => d.code().map(|c| c.into_owned()),
        _ => None,
    }
}

/// Classifies a sqlx error from PostgreSQL (see [`classify_sqlstate`]).
pub fn classify(e: &sqlx::Error) -> ErrorKind {
    match e {
        sqlx::Error::PoolTimedOut => ErrorKind::Timeout,
        _ => classify_sqlstate(sqlstate(e).as_deref()),
    }
}

/// Whether `e` is `lock_timeout` running out: the lock was not taken, nothing was applied.
pub fn is_lock_timeout(e: &sqlx::Error) -> bool {
    sqlstate(e).as_deref() == Some(LOCK_NOT_AVAILABLE)
}

/// The session settings of a buyer (or lock) connection: `lock_timeout` = `lock_wait`,
/// `statement_timeout` = `lock_wait` + `timeout`, both in ms, sent in the startup packet (no
/// extra round trip).
pub fn session_options(
    ep: &PostgresEndpoint,
    lock_wait: Duration,
    timeout: Duration,
) -> PgConnectOptions {
    let ms = |d: Duration| d.as_millis().max(1).to_string();
    ep.connect_options()
        .options([
            ("lock_timeout", ms(lock_wait)),
            ("statement_timeout", ms(lock_wait + timeout)),
        ])
        // Statement logging costs client CPU on every call, CPU the server is short of.
        .log_statements(log::LevelFilter::Off)
        .log_slow_statements(log::LevelFilter::Off, Duration::from_secs(3600))
}

/// A buyer's own PostgreSQL connection, held for one call sequence.
pub type PgBuyerConn<'a> = super::buyers::BuyerConn<'a, PgConnection>;

/// The stock in PostgreSQL: a connection per buyer, a small pool for setup and audit.
pub struct PgStore {
    pool: PgPool,
    buyers: Buyers<PgConnection>,
    opts: PgConnectOptions,
    /// Bound of every single statement (`load.timeout`).
    pub timeout: Duration,
    /// How long a statement may wait for a lock (`lock.acquire_timeout`, the session's
    /// `lock_timeout`).
    pub lock_wait: Duration,
    /// Names of everything the store creates.
    pub prefix: Prefix,
    pub(super) sql: PgSql,
}

/// The store's statements, table names filled in once.
pub(super) struct PgSql {
    pub read: SqlStr,
    pub read_for_update: SqlStr,
    pub read_price: SqlStr,
    pub read_price_for_update: SqlStr,
    pub raise_fence: SqlStr,
    pub write: SqlStr,
    pub write_if_fence: SqlStr,
    pub insert_order: SqlStr,
    pub decrement: SqlStr,
    pub stock: String,
    pub orders: String,
    pub units: String,
}

impl PgSql {
    fn new(p: &Prefix) -> Self {
        let (stock, orders) = (p.table("stock"), p.table("orders"));
        let s = |text: String| sqlx::AssertSqlSafe(text).into_sql_str();
        let set = format!("UPDATE {stock} SET qty = $1 WHERE sku = $2");
        Self {
            read: s(format!("SELECT qty FROM {stock} WHERE sku = $1")),
            read_for_update: s(format!("SELECT qty FROM {stock} WHERE sku = $1 FOR UPDATE")),
            read_price: s(format!(
                "SELECT qty, price_cents FROM {stock} WHERE sku = $1"
            )),
            read_price_for_update: s(format!(
                "SELECT qty, price_cents FROM {stock} WHERE sku = $1 FOR UPDATE"
            )),
            raise_fence: s(format!(
                "UPDATE {stock} SET fence = GREATEST(fence, $1) WHERE sku = $2"
            )),
            write_if_fence: s(format!("{set} AND fence <= $3")),
            write: s(set),
            insert_order: s(format!(
                "INSERT INTO {orders} (sku, buyer, token, created_us) VALUES ($1, $2, $3, $4) \
                 RETURNING id"
            )),
            decrement: s(format!(
                "UPDATE {stock} SET qty = qty - 1 WHERE sku = $1 AND qty > 0 RETURNING qty"
            )),
            units: p.table("units"),
            stock,
            orders,
        }
    }
}

/// A SKU as PostgreSQL's `INT` (it has no unsigned types).
pub fn sku(p: &Purchase<'_>) -> i32 {
    p.sku as i32
}

impl PgStore {
    /// Connects one connection per buyer (bounded) plus a small pool for setup and audit.
    pub async fn connect(
        ep: &PostgresEndpoint,
        prefix: &Prefix,
        w: &Workload,
    ) -> Result<Self, StrategyError> {
        let lock_wait = w.lock.acquire_timeout;
        let opts = session_options(ep, lock_wait, w.load.timeout);
        let admin = ep.connect_options().log_statements(log::LevelFilter::Off);
        let pool = PgPoolOptions::new()
            .max_connections(2)
            .connect_with(admin)
            .await
            .map_err(StrategyError::Postgres)?;
        let store = Self {
            pool,
            buyers: Buyers::new(w.load.clients.clamp(1, MAX_BUYER_CONNECTIONS) as usize),
            opts,
            timeout: w.load.timeout,
            lock_wait,
            prefix: prefix.clone(),
            sql: PgSql::new(prefix),
        };
        let open = || store.opts.connect();
        match store.buyers.connect_all(open, ADMIN_TIMEOUT).await {
            Err(sqlx::Error::PoolTimedOut) => Err(StrategyError::Timeout("connect buyers")),
            r => r.map(|()| store).map_err(StrategyError::Postgres),
        }
    }

    /// The pool, for setup and audit statements.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Buyer `client`'s connection (see [`Buyers::conn`]), bounded by one `load.timeout`.
    pub async fn conn(&self, client: u32) -> Result<PgBuyerConn<'_>, ErrorKind> {
        let open = || self.opts.connect();
        self.buyers.conn(client, self.timeout, open, classify).await
    }

    /// Runs one transaction's `body` on buyer `client`'s connection, marked unsettled while it
    /// runs (an attempt cut mid-way closes it, so the server frees its locks at once); an
    /// `Err` outcome drops the connection too.
    pub async fn in_transaction(
        &self,
        client: u32,
        body: impl AsyncFnOnce(&mut PgConnection) -> Result<Outcome, Outcome>,
    ) -> Outcome {
        let mut con = match self.conn(client).await {
            Ok(c) => c,
            Err(k) => return Outcome::Failed(k),
        };
        con.unsettled();
        let result = body(&mut con).await;
        con.settled();
        result.unwrap_or_else(|o| fail_and_drop(con, o))
    }

    /// Reads a SKU's stock; `for_update` takes the row lock (and may wait `lock_wait`).
    pub async fn read(
        &self,
        con: &mut PgConnection,
        sku: i32,
        for_update: bool,
    ) -> Result<i64, sqlx::Error> {
        let sql = if for_update {
            &self.sql.read_for_update
        } else {
            &self.sql.read
        };
        sqlx::query_scalar(sql.clone())
            .bind(sku)
            .fetch_one(con)
            .await
    }

    /// The read section on `con`: stock and price, `hold`, the stock again. `locking` reads
    /// are for a caller inside a transaction (see [`super::mysql::MysqlStore::check_stock`]).
    pub async fn check_stock(
        &self,
        con: &mut PgConnection,
        sku: i32,
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
        let stock: i64 = row.try_get(0).map_err(|e| classify(&e))?;
        tokio::time::sleep(hold).await;
        let later = within(self.timeout, self.read(con, sku, locking), classify).await?;
        Ok(crate::strategy::read_outcome(stock, later))
    }

    /// Inserts the order row of a sale; returns its id.
    pub async fn insert_order(
        &self,
        con: &mut PgConnection,
        p: &Purchase<'_>,
        token: &str,
    ) -> Result<i64, ErrorKind> {
        let insert = sqlx::query_scalar(self.sql.insert_order.clone())
            .bind(sku(p))
            .bind(p.seq as i64)
            .bind(token)
            .bind(now_us());
        within(self.timeout, insert.fetch_one(con), classify).await
    }

    /// The blind write `qty = new_qty` and the order row, inside the caller's transaction;
    /// with a `fence`, refused (false) if a newer token reached the row.
    pub async fn write(
        &self,
        con: &mut PgConnection,
        p: &Purchase<'_>,
        new_qty: i64,
        fence: Option<u64>,
        token: &str,
    ) -> Result<bool, ErrorKind> {
        let update = match fence {
            None => sqlx::query(self.sql.write.clone())
                .bind(new_qty)
                .bind(sku(p)),
            Some(f) => sqlx::query(self.sql.write_if_fence.clone())
                .bind(new_qty)
                .bind(sku(p))
                .bind(f as i64),
        };
        let done = within(self.timeout, update.execute(&mut *con), classify).await?;
        if done.rows_affected() == 0 {
            return Ok(false);
        }
        self.insert_order(con, p, token).await.map(|_| true)
    }

    /// [`Self::write`] in its own transaction, committed (rolled back when refused).
    pub async fn write_tx(
        &self,
        con: &mut PgConnection,
        p: &Purchase<'_>,
        new_qty: i64,
        fence: Option<u64>,
        token: &str,
    ) -> Result<bool, ErrorKind> {
        let mut tx = within(self.timeout, con.begin(), classify).await?;
        if !self.write(&mut tx, p, new_qty, fence, token).await? {
            within(self.timeout, tx.rollback(), classify).await?;
            return Ok(false);
        }
        within(self.timeout, tx.commit(), classify).await?;
        Ok(true)
    }

    /// Raises the SKU's fence to `fence` (never lowers it) before a fenced read.
    async fn raise_fence(
        &self,
        con: &mut PgConnection,
        sku: i32,
        fence: u64,
    ) -> Result<(), ErrorKind> {
        let raise = sqlx::query(self.sql.raise_fence.clone())
            .bind(fence as i64)
            .bind(sku);
        within(self.timeout, raise.execute(con), classify)
            .await
            .map(|_| ())
    }

    /// Replaces buyer `client`'s connection before its next use.
    pub fn discard_later(&self, client: u32) {
        self.buyers.discard_later(client);
    }

    /// Runs `statements` in order on the admin pool (setup), bounded by [`ADMIN_TIMEOUT`].
    pub(super) async fn admin(&self, statements: &[String]) -> Result<(), StrategyError> {
        let work = async {
            let mut con = self.pool.acquire().await?;
            for s in statements {
                con.execute(sqlx::AssertSqlSafe(s.as_str())).await?;
            }
            Ok::<_, sqlx::Error>(())
        };
        tokio::time::timeout(ADMIN_TIMEOUT, work)
            .await
            .map_err(|_| StrategyError::Timeout("prepare the PostgreSQL store"))?
            .map_err(StrategyError::Postgres)
    }

    /// Pairs `(sku, n)` of a grouping query on the admin pool, bounded by [`ADMIN_TIMEOUT`].
    pub(super) async fn counts(&self, query: String) -> Result<Vec<(u32, i64)>, StrategyError> {
        let work =
            sqlx::query_as::<_, (i32, i64)>(sqlx::AssertSqlSafe(query)).fetch_all(&self.pool);
        let rows = tokio::time::timeout(ADMIN_TIMEOUT, work)
            .await
            .map_err(|_| StrategyError::Timeout("audit"))?
            .map_err(StrategyError::Postgres)?;
        Ok(rows.into_iter().map(|(s, n)| (s as u32, n)).collect())
    }

    /// The orders table, dropped with the tables of earlier runs (units included).
    pub(super) fn orders_ddl(&self) -> Vec<String> {
        let PgSql {
            stock,
            orders,
            units,
            ..
        } = &self.sql;
        vec![
            format!("DROP TABLE IF EXISTS {orders}, {stock}, {units}"),
            format!(
                "CREATE TABLE {orders} (id BIGSERIAL PRIMARY KEY, sku INT NOT NULL, \
                 buyer BIGINT NOT NULL, token TEXT NOT NULL, created_us BIGINT NOT NULL)"
            ),
            format!("CREATE INDEX ON {orders} (sku)"),
        ]
    }

    /// The orders per SKU.
    pub(super) async fn orders_per_sku(&self) -> Result<Vec<(u32, i64)>, StrategyError> {
        let orders = &self.sql.orders;
        self.counts(format!("SELECT sku, COUNT(*) FROM {orders} GROUP BY sku"))
            .await
    }
}

#[async_trait]
impl Store for PgStore {
    async fn prepare(&self, skus: u32, stock: u64) -> Result<(), StrategyError> {
        let stock_t = &self.sql.stock;
        let mut ddl = self.orders_ddl();
        ddl.push(format!(
            "CREATE TABLE {stock_t} (sku INT PRIMARY KEY, qty BIGINT NOT NULL, \
             price_cents BIGINT NOT NULL DEFAULT {PRICE_CENTS}, fence BIGINT NOT NULL DEFAULT 0)"
        ));
        ddl.push(format!(
            "INSERT INTO {stock_t} (sku, qty) SELECT s, {stock} FROM generate_series(0, {}) s",
            i64::from(skus) - 1
        ));
        self.admin(&ddl).await
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

    async fn close(&self) {
        // Bounded: a dead server must not hold up the end of the run.
        self.buyers.close(Duration::from_secs(1)).await;
        let _ = tokio::time::timeout(Duration::from_secs(5), self.pool.close()).await;
    }
}

/// `pg-none`'s critical section (and any lock's, were one to guard this store): read (no lock
/// of the store's own), hold, blind-write `read - 1` with the order in one transaction; with a
/// `fence`, the read raises the SKU's fence and the write refuses an older token.
impl CriticalSection for PgStore {
    fn lock_key(&self, sku: u32) -> String {
        self.prefix.lock_key(sku)
    }

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
            && let Err(k) = self.raise_fence(&mut con, sku(p), f).await
        {
            return fail_and_drop(con, Outcome::Failed(k));
        }
        let qty = match within(self.timeout, self.read(&mut con, sku(p), false), classify).await {
            Ok(qty) => qty,
            Err(k) => return fail_and_drop(con, Outcome::Failed(k)),
        };
        if qty <= 0 {
            return Outcome::SoldOut;
        }
        // Between the read and the write: where a holder's GC pause loses an update.
        crate::chaos::holder::reached(crate::chaos::holder::Point::AfterRead);
        tokio::time::sleep(hold).await;
        match self.write_tx(&mut con, p, qty - 1, fence, token).await {
            Ok(true) => Outcome::Sold,
            Ok(false) if fence.is_some() => Outcome::Failed(ErrorKind::StaleToken),
            Ok(false) => unreachable!("an unguarded update always matches the seeded row"),
            Err(k) => fail_and_drop(con, write_failure(k)),
        }
    }

    /// The connection, raising the fence, the read, `hold`, then begin, update, insert and
    /// commit — 7 calls.
    fn critical_section_bound(&self, hold: Duration) -> Duration {
        crate::strategy::calls(7, self.timeout) + hold
    }

    async fn read_section(&self, p: &Purchase<'_>, hold: Duration) -> Outcome {
        let mut con = match self.conn(p.client).await {
            Ok(c) => c,
            Err(k) => return Outcome::Failed(k),
        };
        match self.check_stock(&mut con, sku(p), hold, false).await {
            Ok(outcome) => outcome,
            Err(k) => fail_and_drop(con, Outcome::Failed(k)),
        }
    }

    fn read_section_bound(&self, hold: Duration) -> Duration {
        crate::strategy::calls(3, self.timeout) + hold
    }
}

/// Shared handle of the PostgreSQL store.
pub type SharedPgStore = Arc<PgStore>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_reply_proves_nothing_was_applied() {
        assert_eq!(classify_sqlstate(None), ErrorKind::Connection);
        assert_eq!(classify_sqlstate(Some("40P01")), ErrorKind::Deadlock);
        // admin_shutdown, crash_shutdown, connection_failure: the session is gone.
        for gone in ["57P01", "57P02", "08006", "08003"] {
            assert_eq!(
                classify_sqlstate(Some(gone)),
                ErrorKind::Connection,
                "{gone}"
            );
        }
        // lock_not_available, query_canceled (statement_timeout), unique_violation: replies.
        for reply in ["55P03", "57014", "23505"] {
            assert_eq!(classify_sqlstate(Some(reply)), ErrorKind::Server, "{reply}");
        }
        assert_eq!(
            write_failure(classify_sqlstate(Some("57P01"))),
            Outcome::Unknown(ErrorKind::Connection)
        );
        assert_eq!(
            write_failure(classify_sqlstate(Some("57014"))),
            Outcome::Failed(ErrorKind::Server)
        );
        assert_eq!(classify(&sqlx::Error::PoolTimedOut), ErrorKind::Timeout);
        assert_eq!(classify(&sqlx::Error::WorkerCrashed), ErrorKind::Connection);
    }
}
