//! Reserve, then pay, on the MariaDB store (`[pay]`): the [`PayDesk`] the harness runs beside
//! the buyers — the buyers' payments and the reapers — and the facts the audit reads.
//!
//! With `[pay]` every order of the sale is a reservation: its row (id, buyer, SKU, request,
//! `state`, `expires_us`) is the order the buyer's transaction inserts, `state` `reserved` by
//! default and `expires_us` computed by the server from the order's `created_us`. Then:
//! - **pay**: `UPDATE … SET state = 'paid' WHERE id = ? AND state = 'reserved'` and a
//!   `payments` row, one transaction; a reservation no longer reserved refuses the payment
//!   (counted, never an error);
//! - **reap**: select the expired reserved ids, then per id one transaction:
//!   `UPDATE … SET state = 'returned' WHERE id = ? AND state = 'reserved'` and, only when it
//!   changed a row, the stock increment and a `returns` row. The blind reaper (the
//!   `-blind-reaper` control) drops the state condition and returns whatever it selected.
//!
//! The restock is an update of the SKU's stock row, so only strategies whose buyers deduct
//! through that row (its atomic update, its row lock, its version) are serialized with it:
//! [`crate::strategy::StrategyInfo::runs_pay`].

use std::collections::{BinaryHeap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use sqlx::mysql::{MySql, MySqlPool};
use sqlx::pool::PoolOptions;
use sqlx::{AssertSqlSafe, Connection};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::mysql::Mysql;
use super::store::{ADMIN_TIMEOUT, Dialect, now_us};
use crate::check::{PayCounts, PayFacts, ReservationRow};
use crate::cluster::{MysqlEndpoint, Prefix};
use crate::strategy::{PayDesk, StrategyError};
use crate::workload::{Pay, Workload};

/// How often the payer looks for new reservations (and sends the payments due).
const PAYER_POLL: Duration = Duration::from_millis(10);
/// Most payments in flight at once.
const PAYERS: u32 = 8;
/// Most time the payer and the reapers take, once stopped, to finish what is due: a reaper
/// round on a busy machine can outlast the settle window, and an unreaped reservation would
/// end the run still reserved.
const DRAIN_MAX: Duration = Duration::from_secs(10);
/// Most expired reservations one reaper round returns.
const REAP_BATCH: u32 = 1000;

/// The statements, with the run's table names filled in.
struct PaySql {
    /// The control's reaper: no state condition, and it restocks whatever it selected.
    blind: bool,
    reserved: String,
    pay: String,
    pay_row: String,
    expired: String,
    to_returned: String,
    restock: String,
    return_row: String,
    orders: String,
    payments: String,
    returns: String,
}

impl PaySql {
    fn new(p: &Prefix, blind: bool) -> Self {
        let (orders, stock) = (p.table("orders"), p.table("stock"));
        let (payments, returns) = (p.table("payments"), p.table("returns"));
        // The control's reaper trusts its select; the correct one asks again, in the update.
        let still = if blind { "" } else { " AND state = 'reserved'" };
        Self {
            blind,
            reserved: format!(
                "SELECT id, request, created_us FROM {orders} WHERE state = 'reserved'"
            ),
            pay: format!("UPDATE {orders} SET state = 'paid' WHERE id = ? AND state = 'reserved'"),
            pay_row: format!("INSERT INTO {payments} (reservation, paid_us) VALUES (?, ?)"),
            expired: format!(
                "SELECT id, sku, qty FROM {orders} WHERE state = 'reserved' AND expires_us < ? \
                 ORDER BY id LIMIT {REAP_BATCH}"
            ),
            to_returned: format!("UPDATE {orders} SET state = 'returned' WHERE id = ?{still}"),
            // The version moves too, so mysql-optimistic's buyers see the restock.
            restock: format!(
                "UPDATE {stock} SET qty = qty + ?, version = version + 1 WHERE sku = ?"
            ),
            return_row: format!(
                "INSERT INTO {returns} (reservation, reaper, returned_us) VALUES (?, ?, ?)"
            ),
            orders,
            payments,
            returns,
        }
    }
}

/// When the payer and the reapers stop: once `settled` (the load ended and every reservation
/// could have been paid or expired) with nothing left to do, or when `drained` whatever is.
struct Stop {
    settled: CancellationToken,
    drained: CancellationToken,
}

impl Stop {
    /// Whether a task with `nothing_left` stops now.
    fn done(&self, nothing_left: bool) -> bool {
        self.drained.is_cancelled() || (self.settled.is_cancelled() && nothing_left)
    }
}

/// The MariaDB store's desk: a pool of its own (payments and reapers), the rules, the counts.
pub struct MysqlPayDesk {
    pool: MySqlPool,
    sql: PaySql,
    pay: Pay,
    seed: u64,
    timeout: Duration,
    abandoned: AtomicU64,
    refused: AtomicU64,
    failed: AtomicU64,
}

impl MysqlPayDesk {
    /// The desk of the run's store on `ep`; `blind`: the control's reaper. Its pool connects
    /// when first used.
    pub fn new(ep: &MysqlEndpoint, prefix: &Prefix, w: &Workload, blind: bool) -> Option<Self> {
        let pay = w.pay.clone()?;
        let (_, opts) = Mysql::new(ep, w);
        let pool = PoolOptions::<MySql>::new()
            .max_connections(PAYERS + pay.reapers + 1)
            .acquire_timeout(w.load.timeout)
            .connect_lazy_with(opts);
        Some(Self {
            pool,
            sql: PaySql::new(prefix, blind),
            pay,
            seed: w.seed,
            timeout: w.load.timeout,
            abandoned: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            failed: AtomicU64::new(0),
        })
    }

    /// Pays reservation `id`: `true` paid, `false` refused (no longer reserved).
    async fn pay_one(pool: MySqlPool, sql: (String, String), id: i64) -> Result<bool, sqlx::Error> {
        let mut con = pool.acquire().await?;
        let mut tx = con.begin().await?;
        let moved = sqlx::query(AssertSqlSafe(sql.0.as_str()))
            .bind(id)
            .execute(&mut *tx)
            .await?;
        if moved.rows_affected() != 1 {
            tx.rollback().await?;
            return Ok(false);
        }
        sqlx::query(AssertSqlSafe(sql.1.as_str()))
            .bind(id)
            .bind(now_us())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// The buyers' payments: each reservation seen is abandoned (the seed says so) or paid
    /// `pay_after` after it was made. Until `stop`, then the payments in flight end.
    async fn payer(&self, stop: &Stop) {
        let mut seen: HashSet<i64> = HashSet::new();
        // Payments due: (due µs, reservation id), earliest first.
        let mut due: BinaryHeap<std::cmp::Reverse<(i64, i64)>> = BinaryHeap::new();
        let mut inflight: JoinSet<Result<bool, sqlx::Error>> = JoinSet::new();
        while !stop.done(due.is_empty()) {
            let rows =
                sqlx::query_as::<_, (i64, i64, i64)>(AssertSqlSafe(self.sql.reserved.as_str()))
                    .fetch_all(&self.pool);
            if let Ok(Ok(rows)) = tokio::time::timeout(self.timeout, rows).await {
                for (id, request, created_us) in rows {
                    if !seen.insert(id) {
                        continue;
                    }
                    if self.pay.abandons(self.seed, request as u64) {
                        self.abandoned.fetch_add(1, Ordering::Relaxed);
                    } else {
                        let after = self.pay.delay(self.seed, request as u64).as_micros() as i64;
                        due.push(std::cmp::Reverse((created_us + after, id)));
                    }
                }
            }
            let now = now_us();
            while let Some(std::cmp::Reverse((at, id))) = due.peek().copied() {
                if at > now || inflight.len() >= PAYERS as usize {
                    break;
                }
                due.pop();
                let sql = (self.sql.pay.clone(), self.sql.pay_row.clone());
                let paid = Self::pay_one(self.pool.clone(), sql, id);
                let limit = self.timeout * 4;
                inflight.spawn(async move {
                    tokio::time::timeout(limit, paid)
                        .await
                        .unwrap_or(Err(sqlx::Error::PoolTimedOut))
                });
            }
            while let Some(done) = inflight.try_join_next() {
                self.count(done);
            }
            tokio::time::sleep(PAYER_POLL).await;
        }
        while let Some(done) = inflight.join_next().await {
            self.count(done);
        }
    }

    fn count(&self, done: Result<Result<bool, sqlx::Error>, tokio::task::JoinError>) {
        match done {
            Ok(Ok(true)) => {}
            Ok(Ok(false)) => {
                self.refused.fetch_add(1, Ordering::Relaxed);
            }
            _ => {
                self.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Reaper `k`: every `reap_every`, the expired reserved reservations are selected, then
    /// each returned in a transaction of its own. The chaos runner's reaper pause falls
    /// between the select and the updates.
    async fn reaper(&self, k: u32, stop: &Stop) {
        let mut idle = false;
        loop {
            tokio::time::sleep(self.pay.reap_every).await;
            if stop.done(idle) {
                return;
            }
            idle = false;
            let expired =
                sqlx::query_as::<_, (i64, i32, i32)>(AssertSqlSafe(self.sql.expired.as_str()))
                    .bind(now_us())
                    .fetch_all(&self.pool);
            let Ok(Ok(expired)) = tokio::time::timeout(self.timeout, expired).await else {
                continue;
            };
            if expired.is_empty() {
                idle = true;
                continue;
            }
            crate::chaos::holder::reaper_selected().await;
            for (id, sku, qty) in expired {
                let back = self.return_one(k, id, sku, qty);
                // A failed return is retried by the next round (its row is still reserved).
                let _ = tokio::time::timeout(self.timeout * 4, back).await;
            }
        }
    }

    /// Returns reservation `id` (`qty` units of `sku`) in one transaction: the state, then,
    /// when it moved (or always, for the blind reaper), the restock and the `returns` row.
    async fn return_one(&self, k: u32, id: i64, sku: i32, qty: i32) -> Result<(), sqlx::Error> {
        let mut con = self.pool.acquire().await?;
        let mut tx = con.begin().await?;
        let moved = sqlx::query(AssertSqlSafe(self.sql.to_returned.as_str()))
            .bind(id)
            .execute(&mut *tx)
            .await?;
        // MariaDB counts changed rows: the blind reaper's second return of a row already
        // `returned` changes nothing, and it restocks anyway (its select is all it trusts).
        if moved.rows_affected() != 1 && !self.sql.blind {
            tx.rollback().await?;
            return Ok(());
        }
        sqlx::query(AssertSqlSafe(self.sql.restock.as_str()))
            .bind(i64::from(qty))
            .bind(sku)
            .execute(&mut *tx)
            .await?;
        sqlx::query(AssertSqlSafe(self.sql.return_row.as_str()))
            .bind(id)
            .bind(k)
            .bind(now_us())
            .execute(&mut *tx)
            .await?;
        tx.commit().await
    }
}

#[async_trait]
impl PayDesk for MysqlPayDesk {
    fn schema(&self) -> Vec<String> {
        let s = &self.sql;
        let (orders, payments, returns) = (&s.orders, &s.payments, &s.returns);
        let within_us = self.pay.pay_within.as_micros();
        vec![
            format!("DROP TABLE IF EXISTS {payments}, {returns}"),
            format!(
                "ALTER TABLE {orders} ADD COLUMN state VARCHAR(8) NOT NULL DEFAULT 'reserved', \
                 ADD COLUMN expires_us BIGINT AS (created_us + {within_us}) STORED, \
                 ADD INDEX {orders}_state (state, expires_us)"
            ),
            format!(
                "CREATE TABLE {payments} (id BIGINT AUTO_INCREMENT PRIMARY KEY, \
                 reservation BIGINT NOT NULL, paid_us BIGINT NOT NULL) ENGINE=InnoDB"
            ),
            format!(
                "CREATE TABLE {returns} (id BIGINT AUTO_INCREMENT PRIMARY KEY, \
                 reservation BIGINT NOT NULL, reaper INT NOT NULL, returned_us BIGINT NOT NULL) \
                 ENGINE=InnoDB"
            ),
        ]
    }

    async fn run(&self, load_done: CancellationToken) {
        let stop = Stop {
            settled: CancellationToken::new(),
            drained: CancellationToken::new(),
        };
        let settle = async {
            load_done.cancelled().await;
            tokio::time::sleep(self.pay.settle_bound()).await;
            stop.settled.cancel();
            tokio::time::sleep(DRAIN_MAX).await;
            stop.drained.cancel();
            // Done when the work is: the timers never end the run.
            std::future::pending::<()>().await
        };
        let reapers = (0..self.pay.reapers).map(|k| self.reaper(k, &stop));
        let work = async {
            tokio::join!(self.payer(&stop), futures::future::join_all(reapers));
        };
        tokio::select! {
            () = settle => {}
            () = work => {}
        }
    }

    fn counts(&self) -> PayCounts {
        PayCounts {
            abandoned: self.abandoned.load(Ordering::Relaxed),
            refused_payments: self.refused.load(Ordering::Relaxed),
            failed_payments: self.failed.load(Ordering::Relaxed),
        }
    }

    async fn facts(&self) -> Result<PayFacts, StrategyError> {
        let s = &self.sql;
        let read = async {
            let reservations = sqlx::query_as::<_, (i64, i32, i32)>(AssertSqlSafe(format!(
                "SELECT id, sku, qty FROM {}",
                s.orders
            )))
            .fetch_all(&self.pool)
            .await?;
            let ids = |table: &str| {
                let q = format!("SELECT reservation FROM {table}");
                sqlx::query_scalar::<_, i64>(AssertSqlSafe(q)).fetch_all(&self.pool)
            };
            let payments = ids(&s.payments).await?;
            let returns = ids(&s.returns).await?;
            Ok::<_, sqlx::Error>(PayFacts {
                reservations: (reservations.into_iter())
                    .map(|(id, sku, qty)| ReservationRow {
                        id: id as u64,
                        sku: sku as u32,
                        qty: qty as u32,
                    })
                    .collect(),
                payments: payments.into_iter().map(|id| id as u64).collect(),
                returns: returns.into_iter().map(|id| id as u64).collect(),
            })
        };
        tokio::time::timeout(ADMIN_TIMEOUT, read)
            .await
            .map_err(|_| StrategyError::Timeout("the audit of reservations"))?
            .map_err(StrategyError::Mysql)
    }

    async fn close(&self) {
        let _ = tokio::time::timeout(Duration::from_secs(5), self.pool.close()).await;
    }
}
