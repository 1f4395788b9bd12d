//! `pg-advisory`: a session advisory lock in PostgreSQL as the lock service, guarding the
//! shared MariaDB critical section like every other lock; `pg-advisory-fenced` adds a fencing
//! token the session draws from a sequence once granted.
//!
//! Each buyer has a session of its own (a dedicated connection): a session advisory lock
//! belongs to the session, is reentrant within it, and lives until `pg_advisory_unlock` or the
//! session's end. Sessions are never shared between buyers: two buyers on one session would
//! both be granted the lock.
//!
//! How a waiter waits (`lock.wait`):
//! - `notify` (the default, as sqlx's `PgAdvisoryLock::acquire`, node's `advisory-lock`
//!   `lock()`, django-pglock): a blocking `pg_advisory_lock`, queued in PostgreSQL's lock
//!   manager and woken by the release; the session's `lock_timeout` (`lock.acquire_timeout`)
//!   ends the wait with SQLSTATE 55P03.
//! - `poll` (Ruby's with_advisory_lock, sqlx's `try_acquire` in a loop): `pg_try_advisory_lock`
//!   every `poll_interval ± poll_jitter` (100 ± 50 ms: with_advisory_lock's
//!   `sleep(rand(0.05..0.15))`) until `lock.acquire_timeout`.
//!
//! The fence: a session advisory lock has no token. Once granted, the same session takes
//! `nextval` of the run's sequence: a value issued while the lock is held (a session lock
//! lives exactly as long as its session, so a `nextval` answered on that session proves the
//! lock was still held when it ran), so tokens increase in grant order, and the MariaDB store
//! refuses an older one. Its limits: the token orders grants, it does not keep a lease alive —
//! a holder that lost its session is only refused once a newer holder has reached the store;
//! and a sequence is not replicated synchronously unless commits are, so after a failover to an
//! asynchronous replica `nextval` may hand out values already issued.

use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::{PgAdvisoryLock, PgConnection};
use sqlx::{Connection, Executor, Row, SqlSafeStr, SqlStr};

use super::buyers::Buyers;
use super::postgres::{MAX_BUYER_CONNECTIONS, PgSession, classify, is_lock_timeout};
use super::store::Arg;
use crate::record::ErrorKind;
use crate::strategy::entry::needs::MARIADB_POSTGRES;
use crate::strategy::entry::{Kind, Setup, StrategyInfo};
use crate::strategy::wait::{Try, Waiter};
use crate::strategy::{AcquireError, Acquired, Lease, Lock, StrategyError};
use crate::workload::WaitMode;

/// `pg-advisory`.
pub const ADVISORY: StrategyInfo = StrategyInfo {
    id: "pg-advisory",
    kind: Kind::Lock,
    locks: true,
    fenced: false,
    fence_token: Some("nextval after the grant"),
    needs: MARIADB_POSTGRES,
    wait: Some(crate::strategy::wait::PG_ADVISORY),
    about: "session advisory lock (pg_advisory_lock on a session per buyer, key hashed as sqlx's \
            PgAdvisoryLock), pg_advisory_unlock; guards the shared MariaDB critical section",
    build: |s| Box::pin(build(s)),
};

/// `pg-advisory-fenced`.
pub const ADVISORY_FENCED: StrategyInfo = StrategyInfo {
    id: "pg-advisory-fenced",
    fenced: true,
    about: "pg-advisory with a token drawn by nextval on the holding session after the grant; \
            the MariaDB store refuses older tokens",
    ..ADVISORY
};

/// Whether strategy `id` holds a session advisory lock: one that lives with its server
/// session, not with a transaction, which a transaction pooler hands from buyer to buyer.
pub fn holds_a_session_lock(id: &str) -> bool {
    id == ADVISORY.id || id == ADVISORY_FENCED.id
}

async fn build(s: Setup<'_>) -> Result<crate::strategy::Built, StrategyError> {
    let ep = s.ep.postgres.as_ref().ok_or(StrategyError::Missing {
        id: s.info.id.into(),
        what: "PostgreSQL",
    })?;
    let store = s.mariadb().await?;
    let lock = AdvisoryLock::connect(ep, s, s.waiter()?).await?;
    Ok(s.locked(lock, store))
}

/// The 64-bit advisory key of a lock name, derived as sqlx's `PgAdvisoryLock::new` derives it
/// (HKDF-SHA256 of the name, 8 bytes little-endian), so lockbench's keys are the ones a Rust
/// service using sqlx would take for the same name.
pub fn advisory_key(name: &str) -> i64 {
    PgAdvisoryLock::new(name)
        .key()
        .as_bigint()
        .expect("a lock made from a name has a bigint key")
}

/// Session advisory locks, one session per buyer.
pub struct AdvisoryLock {
    sessions: Buyers<PgConnection>,
    /// How a session opens, directly or through the run's pooler.
    session: PgSession,
    timeout: Duration,
    waiter: Waiter,
    /// `nextval` of the run's sequence, for the fenced variant.
    fence: Option<SqlStr>,
    /// `<prefix>_fence`: a table whose identity column owns the sequence, so dropping the
    /// run's tables (an external target's clean-up) drops the sequence too.
    sequence_table: String,
}

impl AdvisoryLock {
    /// Opens a session per buyer, with `lock_timeout` = `lock.acquire_timeout`.
    pub async fn connect(
        ep: &crate::cluster::PostgresEndpoint,
        s: Setup<'_>,
        waiter: Waiter,
    ) -> Result<Self, StrategyError> {
        let w = s.w;
        if w.load.clients > MAX_BUYER_CONNECTIONS {
            return Err(StrategyError::Unsupported {
                id: s.info.id.into(),
                what: "more than 1000 buyers (a session each: buyers sharing a session would \
                       share its advisory locks)",
            });
        }
        let sequence_table = s.ep.prefix.table("fence");
        let lock = Self {
            sessions: Buyers::new(w.load.clients as usize),
            session: PgSession::new(ep, waiter.acquire_timeout(), w.load.timeout),
            timeout: w.load.timeout,
            waiter,
            fence: s.info.fenced.then(|| {
                // The identity column's sequence, named by PostgreSQL's rule.
                let seq = format!("{sequence_table}_n_seq");
                sqlx::AssertSqlSafe(format!("SELECT nextval('{seq}')")).into_sql_str()
            }),
            sequence_table,
        };
        let open = || lock.session.open();
        match lock
            .sessions
            .connect_all(open, crate::strategy::SETUP_TIMEOUT)
            .await
        {
            Err(sqlx::Error::PoolTimedOut) => Err(StrategyError::Timeout("open lock sessions")),
            r => r.map(|()| lock).map_err(StrategyError::Postgres),
        }
    }

    /// One call on buyer `client`'s session, bounded by `limit`; a call that failed other than
    /// by `lock_timeout` discards the session if it may be broken (a discarded session frees
    /// whatever it held).
    async fn call(&self, client: u32, limit: Duration, call: Call<'_>) -> Result<i64, Failure> {
        let open = || self.session.open();
        let mut con = (self.sessions)
            .conn(client, self.timeout, open, classify)
            .await
            .map_err(Failure::Failed)?;
        // Cut before its answer (the attempt dropped at its bound), the call may still be
        // granted on the session: closing the session then frees what nobody knows it holds.
        con.unsettled();
        let answer = tokio::time::timeout(limit, call.run(&mut con, &self.session)).await;
        con.settled();
        match answer {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) if is_lock_timeout(&e) => Err(Failure::LockTimeout),
            Ok(Err(e)) => {
                let k = classify(&e);
                con.discard_if_broken(k);
                Err(Failure::Failed(k))
            }
            Err(_) => {
                con.discard();
                Err(Failure::Failed(ErrorKind::Timeout))
            }
        }
    }

    /// Waits for the lock in PostgreSQL's queue, until `lock_timeout`.
    async fn lock_blocking(&self, client: u32, key: i64) -> Result<(), AcquireError> {
        let limit = self.waiter.acquire_timeout() + self.timeout;
        match self.call(client, limit, Call::Lock(key)).await {
            Ok(_) => Ok(()),
            Err(Failure::LockTimeout) => Err(AcquireError::Busy),
            Err(Failure::Failed(k)) => Err(AcquireError::Failed(k)),
        }
    }

    /// Tries `pg_try_advisory_lock` until it is granted or `lock.acquire_timeout` passes.
    async fn lock_polling(&self, client: u32, name: &str, key: i64) -> Result<(), AcquireError> {
        let try_once = || async move {
            match self.call(client, self.timeout, Call::TryLock(key)).await {
                Ok(1) => Ok(Try::Acquired),
                Ok(_) | Err(Failure::LockTimeout) => Ok(Try::Busy(None)),
                Err(Failure::Failed(k)) => Err(k),
            }
        };
        self.waiter.until_acquired(name, try_once).await
    }

    /// The fencing token: `nextval` on the session that holds the lock. On failure the session
    /// is replaced, which frees the lock.
    async fn draw_fence(&self, client: u32, sql: &SqlStr) -> Result<u64, AcquireError> {
        match self.call(client, self.timeout, Call::Fence(sql)).await {
            Ok(v) => Ok(v as u64),
            Err(f) => {
                self.sessions.discard_later(client);
                Err(AcquireError::Failed(match f {
                    Failure::Failed(k) => k,
                    Failure::LockTimeout => ErrorKind::Server,
                }))
            }
        }
    }
}

/// A call on a lock session.
enum Call<'a> {
    /// `pg_advisory_lock`: waits until granted or `lock_timeout`.
    Lock(i64),
    /// `pg_try_advisory_lock`: 1 if granted.
    TryLock(i64),
    /// `pg_advisory_unlock`: 1 if the session held it.
    Unlock(i64),
    /// `nextval` of the fencing sequence.
    Fence(&'a SqlStr),
}

impl Call<'_> {
    /// The call on `con`; as a simple query with the key inlined where `session` sends no
    /// prepared statement (behind a transaction pooler).
    async fn run(self, con: &mut PgConnection, session: &PgSession) -> Result<i64, sqlx::Error> {
        crate::record::trips::trip(); // one statement, whichever
        let (sql, key) = match &self {
            Call::Lock(k) => ("SELECT pg_advisory_lock($1)", Some(*k)),
            Call::TryLock(k) => ("SELECT pg_try_advisory_lock($1)", Some(*k)),
            Call::Unlock(k) => ("SELECT pg_advisory_unlock($1)", Some(*k)),
            Call::Fence(sql) => (sql.as_str(), None),
        };
        let args: Vec<Arg<'_>> = key.map(Arg::Int).into_iter().collect();
        if let Some(text) = session.inlined(sql, &args) {
            let row = sqlx::raw_sql(sqlx::AssertSqlSafe(text))
                .fetch_one(con)
                .await?;
            return match self {
                Call::Lock(_) => Ok(1),
                Call::TryLock(_) | Call::Unlock(_) => row.try_get::<bool, _>(0).map(i64::from),
                Call::Fence(_) => row.try_get::<i64, _>(0),
            };
        }
        let flag = |sql: &'static str, key: i64| sqlx::query_scalar::<_, bool>(sql).bind(key);
        match self {
            Call::Lock(k) => sqlx::query("SELECT pg_advisory_lock($1)")
                .bind(k)
                .execute(con)
                .await
                .map(|_| 1),
            Call::TryLock(k) => flag("SELECT pg_try_advisory_lock($1)", k)
                .fetch_one(con)
                .await
                .map(i64::from),
            Call::Unlock(k) => flag("SELECT pg_advisory_unlock($1)", k)
                .fetch_one(con)
                .await
                .map(i64::from),
            Call::Fence(sql) => {
                sqlx::query_scalar::<_, i64>(sql.clone())
                    .fetch_one(con)
                    .await
            }
        }
    }
}

/// Why a call on a session did not answer.
enum Failure {
    /// `lock_timeout` ran out: nothing was taken.
    LockTimeout,
    /// Any other failure.
    Failed(ErrorKind),
}

#[async_trait]
impl Lock for AdvisoryLock {
    /// The fenced variant's sequence, created anew.
    async fn prepare(&self, _skus: u32) -> Result<(), StrategyError> {
        if self.fence.is_none() {
            return Ok(());
        }
        let t = &self.sequence_table;
        let work = async {
            let mut con = self.session.open().await?;
            con.execute(sqlx::AssertSqlSafe(format!("DROP TABLE IF EXISTS {t}")))
                .await?;
            con.execute(sqlx::AssertSqlSafe(format!(
                "CREATE TABLE {t} (n BIGINT GENERATED ALWAYS AS IDENTITY)"
            )))
            .await?;
            con.close().await
        };
        tokio::time::timeout(crate::strategy::SETUP_TIMEOUT, work)
            .await
            .map_err(|_| StrategyError::Timeout("create the fencing sequence"))?
            .map_err(StrategyError::Postgres)
    }

    async fn acquire(&self, client: u32, key: &str, token: &str) -> Acquired {
        let k = advisory_key(key);
        match self.waiter.policy().mode {
            WaitMode::Notify => self.lock_blocking(client, k).await?,
            WaitMode::Poll => self.lock_polling(client, key, k).await?,
        }
        let mut lease = Lease::new(key, token);
        if let Some(sql) = &self.fence {
            lease.fence = Some(self.draw_fence(client, sql).await?);
        }
        Ok(lease)
    }

    /// `pg_advisory_unlock` on the buyer's session: false when the session no longer held it
    /// (it ended, and the lock with it — the lease was lost).
    async fn release(&self, client: u32, lease: &Lease) -> Result<bool, ErrorKind> {
        let k = advisory_key(&lease.key);
        match self.call(client, self.timeout, Call::Unlock(k)).await {
            Ok(held) => Ok(held == 1),
            Err(Failure::Failed(k)) => Err(k),
            Err(Failure::LockTimeout) => Err(ErrorKind::Server),
        }
    }

    /// The session (opened if needed), the lock call (its wait ends at `acquire_timeout`; a
    /// poll's last try may start just before it), then the token.
    fn acquire_bound(&self) -> Duration {
        self.waiter.acquire_timeout() + crate::strategy::calls(3, self.timeout)
    }

    /// The session, then the unlock.
    fn release_bound(&self) -> Duration {
        crate::strategy::calls(2, self.timeout)
    }

    async fn close(&self) {
        self.sessions.close(Duration::from_secs(1)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_sqlx_derivations_stable_and_distinct_per_name() {
        let a = advisory_key("lb-1:lock:0");
        assert_eq!(a, advisory_key("lb-1:lock:0"), "stable");
        assert_ne!(a, advisory_key("lb-1:lock:1"));
        assert_ne!(a, advisory_key("lb-2:lock:0"));
        // sqlx's own example of `PgAdvisoryLock::new` (its documentation's test vector).
        assert_eq!(
            advisory_key("my first Postgres advisory lock!"),
            -5560419505042474287
        );
        let distinct: std::collections::HashSet<i64> = (0..10_000)
            .map(|s| advisory_key(&format!("lb:lock:{s}")))
            .collect();
        assert_eq!(distinct.len(), 10_000, "no collision among 10,000 SKUs");
    }
}
