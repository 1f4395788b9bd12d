//! MariaDB/MySQL as a [`Dialect`] of the SQL store: its schema (with the `version` column that
//! `mysql-optimistic` reads, [`Dialect::VERSIONED`]), its error numbers, its buyer sessions
//! (their lock waits set by `innodb_lock_wait_timeout`, whole seconds), and settling a shared
//! server between runs.

use std::sync::Arc;
use std::time::Duration;

use sqlx::mysql::{MySql, MySqlArguments, MySqlConnectOptions};
use sqlx::query::Query;
use sqlx::{ConnectOptions, Connection, Executor, MySqlConnection};

use super::store::{Arg, Db, Dialect, PRICE_CENTS, SqlStore, Statements, driver_calls, stock_rows};
use crate::cluster::MysqlEndpoint;
use crate::record::ErrorKind;
use crate::strategy::StrategyError;
use crate::workload::Workload;

/// MariaDB error number of a lock wait timeout (`innodb_lock_wait_timeout`).
pub const ER_LOCK_WAIT_TIMEOUT: u16 = 1205;
/// MariaDB error number of a deadlock victim.
pub const ER_LOCK_DEADLOCK: u16 = 1213;
/// MariaDB error number of a unique-key violation (a sale's request id has its order).
pub const ER_DUP_ENTRY: u16 = 1062;

/// The stock table in MariaDB: a connection per buyer, a small pool for setup and audit.
pub type MysqlStore = SqlStore<Mysql>;

/// Shared handle type used by the MariaDB strategies.
pub type SharedStore = Arc<MysqlStore>;

/// A buyer's own MariaDB connection, held for one call sequence.
pub type BuyerConn<'a> = super::buyers::BuyerConn<'a, MySqlConnection>;

/// MariaDB/MySQL: how a buyer's session opens.
pub struct Mysql {
    opts: MySqlConnectOptions,
    lock_wait_s: u64,
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

/// Row-lock waits end with error 1205 after `innodb_lock_wait_timeout`, which counts whole
/// seconds: the acquire timeout rounded up, at least 1 s.
pub fn lock_wait(w: &Workload) -> Duration {
    Duration::from_secs(w.lock.acquire_timeout.as_secs_f64().ceil().max(1.0) as u64)
}

/// Binds `args` as MariaDB's types (SKUs, tokens and buyers unsigned).
fn bind<'q>(
    mut q: Query<'q, MySql, MySqlArguments>,
    args: &[Arg<'_>],
) -> Query<'q, MySql, MySqlArguments> {
    for a in args {
        q = match *a {
            Arg::Sku(s) => q.bind(s),
            Arg::Int(n) => q.bind(n),
            Arg::Fence(f) | Arg::Buyer(f) => q.bind(f),
            Arg::Text(t) => q.bind(t),
        };
    }
    q
}

impl Dialect for Mysql {
    type Conn = MySqlConnection;
    type Endpoint = MysqlEndpoint;
    const PREPARE: &'static str = "prepare stock";
    const VERSIONED: bool = true;
    const RETURNING: bool = false;
    const CUT_CLOSES: bool = false;
    const ROLLBACK_DOUBT_DISCARDS: bool = false;
    const CLOSE_BUYERS: bool = false;
    const CAST_BIGINT: &'static str = "SIGNED";
    const ON_DUPLICATE_NOTHING: &'static str = "ON DUPLICATE KEY UPDATE units = units";

    fn is_duplicate(e: &sqlx::Error) -> bool {
        error_number(e) == Some(ER_DUP_ENTRY)
    }

    fn new(ep: &MysqlEndpoint, w: &Workload) -> (Self, MySqlConnectOptions) {
        let opts = ep
            .connect_options()
            // Statement logging costs client CPU on every call, CPU the server is short of.
            .log_statements(log::LevelFilter::Off)
            .log_slow_statements(log::LevelFilter::Off, Duration::from_secs(3600));
        let admin = opts.clone();
        let lock_wait_s = lock_wait(w).as_secs();
        (Self { opts, lock_wait_s }, admin)
    }

    fn schema(sql: &Statements, stock: &[u64]) -> Vec<String> {
        let (stock_t, orders_t) = (&sql.stock, &sql.orders);
        let mut ddl = vec![
            format!("DROP TABLE IF EXISTS {orders_t}, {stock_t}"),
            format!(
                "CREATE TABLE {stock_t} (sku INT PRIMARY KEY, qty BIGINT NOT NULL, \
                 price_cents BIGINT NOT NULL DEFAULT {PRICE_CENTS}, \
                 version BIGINT NOT NULL DEFAULT 0, fence BIGINT UNSIGNED NOT NULL DEFAULT 0) \
                 ENGINE=InnoDB"
            ),
            format!(
                "CREATE TABLE {orders_t} (id BIGINT AUTO_INCREMENT PRIMARY KEY, sku INT NOT NULL, \
                 buyer BIGINT NOT NULL, token VARCHAR(64) NOT NULL, created_us BIGINT NOT NULL, \
                 KEY (sku)) ENGINE=InnoDB"
            ),
        ];
        ddl.extend(stock_rows(stock_t, stock));
        ddl
    }

    fn lock_wait(w: &Workload) -> Duration {
        lock_wait(w)
    }

    fn classify(e: &sqlx::Error) -> ErrorKind {
        classify(e)
    }

    fn error(e: sqlx::Error) -> StrategyError {
        StrategyError::Mysql(e)
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

    driver_calls!();

    /// What an overloaded trial left running (a statement whose client gave up keeps its row
    /// locks) ends before the next trial on this server: [`settle`].
    fn settle(&self, bound: Duration) -> impl Future<Output = Result<usize, StrategyError>> + Send {
        settle_as(&self.opts, bound)
    }
}

/// Ends what earlier runs left on a shared server before the next one starts: a statement whose
/// client gave up (a timeout drops the connection) keeps running server-side, holding its row
/// locks until its own lock wait times out, and would slow a run that never caused it. Kills
/// every other connection of the harness's user and waits (up to `bound`) until they are gone.
/// Returns how many it killed.
pub async fn settle(ep: &MysqlEndpoint, bound: Duration) -> Result<usize, StrategyError> {
    settle_as(&ep.connect_options(), bound).await
}

/// [`settle`] with the options of the harness's user.
async fn settle_as(opts: &MySqlConnectOptions, bound: Duration) -> Result<usize, StrategyError> {
    let user = opts.get_username().to_string();
    let opts = opts.clone().log_statements(log::LevelFilter::Off);
    let mut con = tokio::time::timeout(bound, MySqlConnection::connect_with(&opts))
        .await
        .map_err(|_| StrategyError::Timeout("connecting to MariaDB to settle it"))??;
    let others =
        "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = ? AND ID <> CONNECTION_ID()";
    let ids: Vec<i64> = sqlx::query_scalar(others)
        .bind(&user)
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
            .bind(&user)
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
