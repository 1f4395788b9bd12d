//! The strategies written once for every SQL dialect: the `none` controls (`none`, `pg-none`)
//! and the atomic conditional update (`mysql-atomic`, `pg-atomic`); and what the transaction
//! locks of both dialects record (the order's token, the lease of a lock a transaction holds).

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use sqlx::Connection;

use super::store::{Dialect, SqlStore, write_failure};
use crate::record::trips::one;
use crate::record::{LeaseSpan, Outcome};
use crate::strategy::{Attempt, CriticalSection, Purchase, Strategy, calls, within};
use crate::workload::Workload;

/// The order's token of a strategy without a lock service: the buyer's attempt.
pub fn token(p: &Purchase) -> String {
    format!("b{}", p.seq)
}

/// The lease key of a SKU's stock row.
pub fn row_key(sku: u32) -> String {
    format!("stock-row:{sku}")
}

/// The interval the buyer held a lock its transaction took (the row lock; PostgreSQL's
/// transaction-scoped advisory lock), as a lease on `key`.
pub fn tx_lease(key: String, token: &str, acquired: Instant, released: Instant) -> LeaseSpan {
    LeaseSpan {
        key,
        token: token.to_string(),
        fence: None,
        acquired,
        released,
        lost: false,
        shared: false,
        loss: None,
    }
}

/// `none`: the shared critical section with no lock. Under contention several buyers read the
/// same stock and each writes `read - 1`: the control that proves the checker sees oversell.
/// Generic over the store: `pg-none` runs it on the PostgreSQL store.
pub struct NoLock<S> {
    store: Arc<S>,
    hold: Duration,
}

impl<S: CriticalSection> NoLock<S> {
    /// Sells from `store` with the workload's hold time.
    pub fn new(store: Arc<S>, w: &Workload) -> Self {
        Self {
            store,
            hold: w.critical_section.hold,
        }
    }
}

#[async_trait]
impl<S: CriticalSection> Strategy for NoLock<S> {
    fn bound(&self) -> Duration {
        self.store.critical_section_bound(self.hold)
    }

    async fn attempt(&self, p: &Purchase) -> Attempt {
        self.store
            .critical_section(p, &token(p), None, self.hold)
            .await
            .into()
    }
}

/// `mysql-atomic`, `pg-atomic`: `UPDATE stock SET qty = qty - 1 WHERE sku = ? AND qty > 0`
/// and the order row in one transaction. No read-modify-write, so no lock is needed (and no
/// hold applies: there is no window to hold). In a sale: `qty - n WHERE qty >= n`, and the
/// store's guards refuse a duplicate request id or a buyer over the limit in the same
/// transaction ([`SqlStore::place`]), which then rolls back.
pub struct Atomic<D: Dialect> {
    store: Arc<SqlStore<D>>,
}

impl<D: Dialect> Atomic<D> {
    /// Sells from `store`.
    pub fn new(store: Arc<SqlStore<D>>) -> Self {
        Self { store }
    }
}

#[async_trait]
impl<D: Dialect> Strategy for Atomic<D> {
    /// Connection, begin, update, insert or rollback, commit.
    fn bound(&self) -> Duration {
        calls(5, self.store.timeout)
    }

    async fn attempt(&self, p: &Purchase) -> Attempt {
        let s = &self.store;
        let sell = async |con: &mut D::Conn| {
            let mut tx = within(s.timeout, one(con.begin()), D::classify)
                .await
                .map_err(Outcome::Failed)?;
            if !s.decrement(&mut tx, p).await.map_err(write_failure)? {
                within(s.timeout, one(tx.rollback()), D::classify)
                    .await
                    .map_err(Outcome::Failed)?;
                return Ok(Outcome::SoldOut);
            }
            let placed = s.place(&mut tx, p, &token(p)).await;
            if let Some(refused) = placed.map_err(write_failure)? {
                within(s.timeout, one(tx.rollback()), D::classify)
                    .await
                    .map_err(Outcome::Failed)?;
                return Ok(Outcome::Refused(refused));
            }
            within(s.timeout, one(tx.commit()), D::classify)
                .await
                .map_err(write_failure)?;
            Ok(Outcome::Sold)
        };
        s.in_transaction(p.client, sell).await.into()
    }
}
