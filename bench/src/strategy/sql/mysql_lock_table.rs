//! `mysql-lock-table`: a lock row per key in MariaDB — owner, expiry, reentrancy count and a
//! fencing counter. An expired lock is taken over atomically by one conditional UPDATE; only
//! the owner releases. Expiry uses the server's clock, the one authority every client shares.

use std::time::Duration;

use async_trait::async_trait;
use sqlx::mysql::{MySqlArguments, MySqlRow};
use sqlx::query::Query;
use sqlx::{Executor, MySql, Row};

use super::mysql::{SharedStore, classify};
use crate::record::ErrorKind;
use crate::record::trips::one;
use crate::strategy::wait::{Try, Waiter};
use crate::strategy::{AcquireError, Acquired, Lease, Lock, StrategyError, within};
use crate::workload::Workload;

use crate::strategy::entry::needs::MARIADB;
use crate::strategy::entry::{Kind, Setup, StrategyInfo};

/// `mysql-lock-table`.
pub const LOCK_TABLE: StrategyInfo = StrategyInfo {
    id: "mysql-lock-table",
    kind: Kind::Lock,
    locks: true,
    fenced: false,
    fence_token: Some("lock row takeover counter"),
    needs: MARIADB,
    wait: Some(crate::strategy::wait::SPRING_JDBC),
    about: "lock row per key (owner, expiry, reentrancy count); expired locks taken over atomically",
    build: |s| Box::pin(build(s)),
};

/// `mysql-lock-table-fenced`.
pub const LOCK_TABLE_FENCED: StrategyInfo = StrategyInfo {
    id: "mysql-lock-table-fenced",
    fenced: true,
    about: "mysql-lock-table with the row's takeover counter as fencing token; stale writes refused",
    ..LOCK_TABLE
};

async fn build(s: Setup<'_>) -> Result<crate::strategy::Built, StrategyError> {
    let store = s.mariadb().await?;
    let lock = LockTable::new(store.clone(), s.w, s.waiter()?, s.info.fenced);
    Ok(s.locked(lock, store))
}

/// The server's time in ms; constant within one statement.
const NOW_MS: &str = "ROUND(UNIX_TIMESTAMP(NOW(3)) * 1000)";

/// The lock table.
pub struct LockTable {
    store: SharedStore,
    ttl_ms: i64,
    waiter: Waiter,
    /// Read the row's fence after acquiring (the `-fenced` variant needs it).
    fence_tokens: bool,
    take: String,
    release: String,
    count: String,
    fence: String,
    /// `<prefix>_locks`.
    table: String,
}

impl LockTable {
    /// A lock table in the store's database, polled as `waiter` says; `fence_tokens` reads a
    /// fencing token per lease.
    pub fn new(store: SharedStore, w: &Workload, waiter: Waiter, fence_tokens: bool) -> Self {
        let locks = store.prefix.table("locks");
        // Assignments run left to right, so count and fence see the old owner and expiry.
        let take = format!(
            "UPDATE {locks} SET \
               count = IF(owner = ? AND expires_at >= {NOW_MS}, count + 1, 1), \
               fence = IF(owner = ? AND expires_at >= {NOW_MS}, fence, fence + 1), \
               owner = ?, expires_at = {NOW_MS} + ? \
             WHERE name = ? AND (count = 0 OR expires_at < {NOW_MS} OR owner = ?)"
        );
        let release = format!(
            "UPDATE {locks} SET count = count - 1, owner = IF(count = 0, '', owner), \
               expires_at = IF(count = 0, 0, expires_at) \
             WHERE name = ? AND owner = ? AND count > 0 AND expires_at >= {NOW_MS}"
        );
        Self {
            store,
            ttl_ms: w.lock.ttl.as_millis() as i64,
            waiter,
            fence_tokens,
            take,
            release,
            count: format!("SELECT count FROM {locks} WHERE name = ? AND owner = ?"),
            fence: format!("SELECT fence FROM {locks} WHERE name = ? AND owner = ?"),
            table: locks,
        }
    }

    /// One try to take (or re-enter) the lock.
    pub async fn try_take(&self, client: u32, key: &str, owner: &str) -> Result<bool, ErrorKind> {
        let q = sqlx::query(sqlx::AssertSqlSafe(self.take.as_str()))
            .bind(owner)
            .bind(owner)
            .bind(owner)
            .bind(self.ttl_ms)
            .bind(key)
            .bind(owner);
        Ok(self.changed(client, q).await? == 1)
    }

    /// Leaves one level; false if the lock was no longer ours.
    pub async fn leave(&self, client: u32, key: &str, owner: &str) -> Result<bool, ErrorKind> {
        let q = sqlx::query(sqlx::AssertSqlSafe(self.release.as_str()))
            .bind(key)
            .bind(owner);
        Ok(self.changed(client, q).await? == 1)
    }

    /// The reentrancy count `owner` holds (0 if none).
    pub async fn count(&self, key: &str, owner: &str) -> Result<i64, ErrorKind> {
        let row = self.owned_row(0, &self.count, key, owner).await?;
        Ok(row.map(|r| r.get::<i32, _>(0) as i64).unwrap_or(0))
    }

    /// Runs `q` on `client`'s connection (dropped if the error broke it): the rows it changed.
    async fn changed(
        &self,
        client: u32,
        q: Query<'_, MySql, MySqlArguments>,
    ) -> Result<u64, ErrorKind> {
        let mut con = self.store.conn(client).await?;
        let done = within(self.store.timeout, one(q.execute(&mut *con)), classify)
            .await
            .inspect_err(|k| con.discard_if_broken(*k))?;
        Ok(done.rows_affected())
    }

    /// The row `sql` selects of `key` held by `owner`, on `client`'s connection (dropped if the
    /// error broke it).
    async fn owned_row(
        &self,
        client: u32,
        sql: &str,
        key: &str,
        owner: &str,
    ) -> Result<Option<MySqlRow>, ErrorKind> {
        let mut con = self.store.conn(client).await?;
        let q = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(key).bind(owner);
        within(
            self.store.timeout,
            one(q.fetch_optional(&mut *con)),
            classify,
        )
        .await
        .inspect_err(|k| con.discard_if_broken(*k))
    }
}

#[async_trait]
impl Lock for LockTable {
    async fn prepare(&self, skus: u32) -> Result<(), StrategyError> {
        let mut con = self.store.pool().acquire().await?;
        let locks = &self.table;
        con.execute(sqlx::AssertSqlSafe(format!("DROP TABLE IF EXISTS {locks}")))
            .await?;
        con.execute(sqlx::AssertSqlSafe(format!(
            "CREATE TABLE {locks} (name VARCHAR(64) PRIMARY KEY, owner VARCHAR(64) NOT NULL DEFAULT '', \
             expires_at BIGINT NOT NULL DEFAULT 0, count INT NOT NULL DEFAULT 0, \
             fence BIGINT UNSIGNED NOT NULL DEFAULT 0) ENGINE=InnoDB"
        )))
        .await?;
        for chunk in (0..skus).collect::<Vec<_>>().chunks(1000) {
            let rows: Vec<String> = chunk
                .iter()
                .map(|s| format!("('{}')", self.store.prefix.lock_key(*s)))
                .collect();
            con.execute(sqlx::AssertSqlSafe(format!(
                "INSERT INTO {locks} (name) VALUES {}",
                rows.join(",")
            )))
            .await?;
        }
        Ok(())
    }

    async fn acquire(&self, client: u32, key: &str, token: &str) -> Acquired {
        let take = || async {
            let taken = self.try_take(client, key, token).await?;
            Ok(if taken {
                Try::Acquired
            } else {
                Try::Busy(None)
            })
        };
        self.waiter.until_acquired(key, take).await?;
        let ttl = std::time::Duration::from_millis(self.ttl_ms as u64);
        let mut lease = Lease::new(key, token).expiring(ttl);
        if self.fence_tokens {
            let fence = async {
                let row = self.owned_row(client, &self.fence, key, token).await?;
                // The row is gone only if the lease expired and was taken within the round trip.
                row.map(|r| r.get::<u64, _>(0)).ok_or(ErrorKind::Server)
            };
            match fence.await {
                Ok(f) => lease.fence = Some(f),
                Err(k) => {
                    let _ = self.leave(client, key, token).await;
                    return Err(AcquireError::Failed(k));
                }
            }
        }
        Ok(lease)
    }

    async fn release(&self, client: u32, lease: &Lease) -> Result<bool, ErrorKind> {
        self.leave(client, &lease.key, &lease.token).await
    }

    /// The last try (connection + update) may start just before the deadline; then the fence
    /// read (connection + select) and, if it fails, leaving (connection + update).
    fn acquire_bound(&self) -> Duration {
        self.waiter.acquire_timeout() + crate::strategy::calls(6, self.store.timeout)
    }

    /// Connection + update.
    fn release_bound(&self) -> Duration {
        crate::strategy::calls(2, self.store.timeout)
    }
}
