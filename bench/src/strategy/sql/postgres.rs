//! PostgreSQL as a [`Dialect`] of the SQL store: `<prefix>_stock` and `<prefix>_orders` as in
//! MariaDB (and `<prefix>_units` for `pg-skip-locked`, in `postgres_units.rs`), `$n`
//! placeholders, `RETURNING`, SQLSTATE classification.
//!
//! Waits are bounded server-side too: every buyer session starts with `lock_timeout` (the
//! workload's `lock.acquire_timeout`, exact to the millisecond, where MariaDB counts whole
//! seconds) and `statement_timeout` (that wait plus one `load.timeout`), so a statement whose
//! client gave up stops holding locks on its own.

use std::sync::Arc;
use std::time::Duration;

use sqlx::ConnectOptions;
use sqlx::postgres::{PgArguments, PgConnectOptions, PgConnection, Postgres};
use sqlx::query::Query;

use super::store::{Arg, Db, Dialect, PRICE_CENTS, SqlStore, Statements, driver_calls, stock_rows};
use crate::cluster::{PostgresEndpoint, session_settings};
use crate::record::ErrorKind;
use crate::strategy::{Purchase, StrategyError};
use crate::workload::Workload;

pub use super::store::MAX_BUYER_CONNECTIONS;

/// SQLSTATE `lock_not_available`: `lock_timeout` ran out (or a `NOWAIT` found the lock held).
pub const LOCK_NOT_AVAILABLE: &str = "55P03";
/// SQLSTATE `query_canceled`: `statement_timeout` ran out (or a cancel request).
pub const QUERY_CANCELED: &str = "57014";
/// SQLSTATE `deadlock_detected`: this transaction was the victim (rolled back).
pub const DEADLOCK_DETECTED: &str = "40P01";
/// SQLSTATE `unique_violation`: a sale's request id has its order already.
pub const UNIQUE_VIOLATION: &str = "23505";

/// The stock in PostgreSQL: a connection per buyer, a small pool for setup and audit.
pub type PgStore = SqlStore<Pg>;

/// Shared handle of the PostgreSQL store.
pub type SharedPgStore = Arc<PgStore>;

/// A buyer's own PostgreSQL connection, held for one call sequence.
pub type PgBuyerConn<'a> = super::buyers::BuyerConn<'a, PgConnection>;

/// PostgreSQL: how a buyer's session opens.
pub struct Pg {
    session: PgSession,
}

/// How a buyer's (or a lock's) session opens: directly, its `lock_timeout` and
/// `statement_timeout` in the startup packet; or through the run's pooler
/// (`servers.postgres_pooler`), which cannot pass those on (PgBouncer 1.18), so the session
/// sets them once open.
#[derive(Debug, Clone)]
pub struct PgSession {
    opts: PgConnectOptions,
    /// Behind a pooler: the `SET`s a new session runs first. Under session pooling the server
    /// connection may be one another client left, reset by `DISCARD ALL` to the server's
    /// defaults; under transaction pooling the pooler set the same values on every server
    /// connection it opened (`connect_query`), and this lands on one of them again.
    set: Option<String>,
    /// Statements go as simple queries, values inlined: behind a transaction pooler a
    /// prepared statement's parse and its execution may reach two server connections (the
    /// pooler hands the connection on at every sync outside a transaction), where the
    /// statement is missing or another client's has its name.
    simple: bool,
}

impl PgSession {
    /// The session of a buyer of `ep`, its lock waits bounded by `lock_wait` and its
    /// statements by `lock_wait` + `timeout`.
    pub fn new(ep: &PostgresEndpoint, lock_wait: Duration, timeout: Duration) -> Self {
        let settings = session_settings(lock_wait, timeout);
        let opts = ep
            .buyer_options()
            // Statement logging costs client CPU on every call, CPU the server is short of.
            .log_statements(log::LevelFilter::Off)
            .log_slow_statements(log::LevelFilter::Off, Duration::from_secs(3600));
        if ep.pooler.is_none() {
            return Self {
                opts: opts.options(settings),
                set: None,
                simple: false,
            };
        }
        let set: Vec<String> = (settings.iter())
            .map(|(k, v)| format!("SET {k} = {v}"))
            .collect();
        Self {
            opts,
            set: Some(set.join("; ")),
            simple: ep.simple_queries(),
        }
    }

    /// Opens the session.
    pub async fn open(&self) -> Result<PgConnection, sqlx::Error> {
        let mut con = self.opts.connect().await?;
        if let Some(set) = &self.set {
            sqlx::raw_sql(sqlx::AssertSqlSafe(set.clone()))
                .execute(&mut con)
                .await?;
        }
        Ok(con)
    }

    /// `sql` as the text of a simple query, `args` inlined, when this session's statements go
    /// as simple queries ([`PgSession::simple`]); `None`: prepare and bind as usual.
    pub fn inlined(&self, sql: &str, args: &[Arg<'_>]) -> Option<String> {
        self.simple.then(|| inline(sql, args))
    }
}

/// `sql` with each `$n` replaced by the literal of `args[n - 1]`, in one pass (a value's text is
/// never read again as a placeholder). Integers as they are (a negative one in parentheses:
/// `- -1` would start a comment), text quoted with `'` doubled (`standard_conforming_strings`
/// is on: a backslash is an ordinary character). The statements are lockbench's own, with no
/// `$` inside a literal.
pub fn inline(sql: &str, args: &[Arg<'_>]) -> String {
    let literal = |a: &Arg<'_>| {
        let n = match *a {
            Arg::Sku(s) => i64::from(s as i32),
            Arg::Int(n) => n,
            Arg::Fence(f) | Arg::Buyer(f) => f as i64,
            Arg::Text(t) => return format!("'{}'", t.replace('\'', "''")),
        };
        if n < 0 {
            format!("({n})")
        } else {
            n.to_string()
        }
    };
    let mut out = String::with_capacity(sql.len() + 16);
    let mut rest = sql;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let digits = rest[at + 1..].len()
            - rest[at + 1..]
                .trim_start_matches(|c: char| c.is_ascii_digit())
                .len();
        let n: Option<usize> = rest[at + 1..at + 1 + digits].parse().ok();
        match n.and_then(|n| args.get(n.wrapping_sub(1))) {
            Some(a) => out.push_str(&literal(a)),
            None => out.push_str(&rest[at..at + 1 + digits]),
        }
        rest = &rest[at + 1 + digits..];
    }
    out.push_str(rest);
    out
}

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

/// A SKU as PostgreSQL's `INT` (it has no unsigned types).
pub fn sku(p: &Purchase<'_>) -> i32 {
    p.sku as i32
}

/// Binds `args` as PostgreSQL's types (signed integers only).
fn bind<'q>(
    mut q: Query<'q, Postgres, PgArguments>,
    args: &[Arg<'_>],
) -> Query<'q, Postgres, PgArguments> {
    for a in args {
        q = match *a {
            Arg::Sku(s) => q.bind(s as i32),
            Arg::Int(n) => q.bind(n),
            Arg::Fence(f) | Arg::Buyer(f) => q.bind(f as i64),
            Arg::Text(t) => q.bind(t),
        };
    }
    q
}

impl Dialect for Pg {
    type Conn = PgConnection;
    type Endpoint = PostgresEndpoint;
    const PREPARE: &'static str = "prepare the PostgreSQL store";
    const VERSIONED: bool = false;
    const RETURNING: bool = true;
    const CUT_CLOSES: bool = true;
    const ROLLBACK_DOUBT_DISCARDS: bool = true;
    const CLOSE_BUYERS: bool = true;
    const CAST_BIGINT: &'static str = "BIGINT";
    const ON_DUPLICATE_NOTHING: &'static str = "ON CONFLICT DO NOTHING";

    /// `$1`, `$2`, … in the order the `?` come.
    fn placeholders(sql: String) -> String {
        let mut out = String::with_capacity(sql.len() + 8);
        for (n, part) in sql.split('?').enumerate() {
            if n > 0 {
                out.push_str(&format!("${n}"));
            }
            out.push_str(part);
        }
        out
    }

    fn is_duplicate(e: &sqlx::Error) -> bool {
        sqlstate(e).as_deref() == Some(UNIQUE_VIOLATION)
    }

    fn new(ep: &PostgresEndpoint, w: &Workload) -> (Self, PgConnectOptions) {
        let session = PgSession::new(ep, w.lock.acquire_timeout, w.load.timeout);
        // Setup and audit go to the server itself, never through a pooler.
        let admin = ep.connect_options().log_statements(log::LevelFilter::Off);
        (Self { session }, admin)
    }

    fn schema(sql: &Statements, stock: &[u64]) -> Vec<String> {
        let stock_t = &sql.stock;
        let mut ddl = orders_ddl(sql);
        ddl.push(format!(
            "CREATE TABLE {stock_t} (sku INT PRIMARY KEY, qty BIGINT NOT NULL, \
             price_cents BIGINT NOT NULL DEFAULT {PRICE_CENTS}, fence BIGINT NOT NULL DEFAULT 0)"
        ));
        ddl.extend(stock_rows(stock_t, stock));
        ddl
    }

    fn lock_wait(w: &Workload) -> Duration {
        w.lock.acquire_timeout
    }

    fn classify(e: &sqlx::Error) -> ErrorKind {
        classify(e)
    }

    fn error(e: sqlx::Error) -> StrategyError {
        StrategyError::Postgres(e)
    }

    async fn open(&self) -> Result<PgConnection, sqlx::Error> {
        self.session.open().await
    }

    fn inlined(&self, sql: &str, args: &[Arg<'_>]) -> Option<String> {
        self.session.inlined(sql, args)
    }

    driver_calls!();
}

/// The orders table, dropped with the tables of earlier runs (units included).
pub(super) fn orders_ddl(sql: &Statements) -> Vec<String> {
    let Statements {
        stock,
        orders,
        units,
        ..
    } = sql;
    vec![
        format!("DROP TABLE IF EXISTS {orders}, {stock}, {units}"),
        format!(
            "CREATE TABLE {orders} (id BIGSERIAL PRIMARY KEY, sku INT NOT NULL, \
             buyer BIGINT NOT NULL, token TEXT NOT NULL, created_us BIGINT NOT NULL)"
        ),
        format!("CREATE INDEX ON {orders} (sku)"),
    ]
}

impl PgStore {
    /// The orders table, dropped with the tables of earlier runs (units included).
    pub(super) fn orders_ddl(&self) -> Vec<String> {
        orders_ddl(&self.sql)
    }
}

#[cfg(test)]
mod tests {
    use super::super::store::write_failure;
    use super::*;
    use crate::record::Outcome;

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

    #[test]
    fn a_simple_query_carries_its_values_inlined_once() {
        let sql = "INSERT INTO o VALUES ($1, $2, $3, $4) -- $10";
        let args = [
            Arg::Sku(7),
            Arg::Int(-3),
            Arg::Text("it's $1"),
            Arg::Fence(u64::MAX),
        ];
        assert_eq!(
            inline(sql, &args),
            "INSERT INTO o VALUES (7, (-3), 'it''s $1', (-1)) -- $10"
        );
        assert_eq!(
            inline("SELECT pg_advisory_lock($1)", &[Arg::Int(42)]),
            "SELECT pg_advisory_lock(42)"
        );
    }

    #[test]
    fn placeholders_are_numbered_in_order() {
        let sql = "UPDATE t SET a = a - ? WHERE b = ? AND a >= ?".to_string();
        assert_eq!(
            Pg::placeholders(sql),
            "UPDATE t SET a = a - $1 WHERE b = $2 AND a >= $3"
        );
    }
}
