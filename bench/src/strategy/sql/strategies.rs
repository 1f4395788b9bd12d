//! The strategies written once for every SQL dialect: the `none` controls (`none`, `pg-none`)
//! and the atomic conditional update (`mysql-atomic`, `pg-atomic`); what the transaction locks
//! of both dialects record (the order's token, the lease of a lock a transaction holds) and
//! make of a lock not taken; and how a strategy is built on its dialect's store.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use sqlx::Connection;

use super::buyers::{BuyerConn, fail_and_drop};
use super::store::{Dialect, Guard, SqlStore, write_failure};
use crate::chaos::holder::{self, Point};
use crate::record::trips::one;
use crate::record::{ErrorKind, LeaseSpan, Outcome};
use crate::strategy::entry::{Built, Setup};
use crate::strategy::{Attempt, CriticalSection, Purchase, Strategy, StrategyError, calls, within};
use crate::workload::Workload;

/// The order's token of a strategy without a lock service: the buyer's attempt.
pub fn token(p: &Purchase) -> String {
    format!("b{}", p.seq)
}

/// The lease key of a SKU's stock row.
pub fn row_key(sku: u32) -> String {
    format!("stock-row:{sku}")
}

/// A lock the buyer's transaction took (the row lock; PostgreSQL's transaction-scoped advisory
/// lock), held from when it was taken until the commit or rollback is sent. The server frees it
/// itself (at commit, rollback, or when a cut attempt's connection goes), so only the interval
/// the buyer held it is recorded, as a lease on its key: the double-grant checker measures it
/// like any other lock.
pub struct TxHeld<'p, 'a> {
    p: &'p Purchase<'a>,
    key: String,
    /// The order's token ([`token`]).
    token: String,
    acquired: Instant,
}

impl<'p, 'a> TxHeld<'p, 'a> {
    /// `p`'s lock on `key`, held from now.
    pub fn now(p: &'p Purchase<'a>, key: String) -> Self {
        let acquired = Instant::now();
        Self {
            p,
            key,
            token: token(p),
            acquired,
        }
    }

    /// The sale under the lock, in the transaction `tx` on `store` that holds it, `qty` read
    /// under it: what turns the buyer away ([`SqlStore::refusal`], read in the locked
    /// transaction), else the hold, then the write (unguarded: the lock is trusted); and when
    /// the release (the commit or rollback the caller sends at once) was about to be sent. The
    /// holder pause points are here, as in a lock of its own. A failed write is a
    /// [`write_failure`]; a failed refusal read is what `refusal_failed` makes of it (MariaDB's
    /// row lock has always judged it as a write, PostgreSQL's locks as failed).
    pub async fn sell<D: Dialect>(
        &self,
        store: &SqlStore<D>,
        tx: &mut D::Conn,
        qty: i64,
        hold: Duration,
        refusal_failed: fn(ErrorKind) -> Outcome,
    ) -> (Result<Outcome, Outcome>, Instant) {
        let p = self.p;
        match store.refusal(tx, p, qty).await {
            Ok(None) => {}
            Ok(Some(turned_away)) => return (Ok(turned_away), Instant::now()),
            Err(k) => return (Err(refusal_failed(k)), Instant::now()),
        }
        holder::reached_by_locking_read();
        tokio::time::sleep(hold).await;
        let new_qty = qty - i64::from(p.ask.qty);
        let written = store.write(tx, p, new_qty, Guard::None, &self.token).await;
        holder::reached(Point::BeforeRelease);
        let released = Instant::now();
        let outcome = written.map(|w| w.outcome(false));
        (outcome.map_err(write_failure), released)
    }

    /// The attempt's `outcome`, the lease recorded as released at `released`.
    pub fn ended(self, outcome: Outcome, released: Instant) -> Attempt {
        self.p.lease.put(LeaseSpan {
            key: self.key,
            token: self.token,
            fence: None,
            acquired: self.acquired,
            released,
            lost: false,
            shared: false,
            loss: None,
        });
        Attempt::from(outcome)
    }
}

/// `take`, a statement that takes a lock and may wait for it, bounded by `bound`: its error
/// reply, or `None` when the call timed out client-side.
pub async fn taken<T>(
    bound: Duration,
    take: impl Future<Output = Result<T, sqlx::Error>>,
) -> Result<T, Option<sqlx::Error>> {
    match tokio::time::timeout(bound, take).await {
        Ok(r) => r.map_err(Some),
        Err(_) => Err(None),
    }
}

/// What a lock that was not taken makes of the attempt, other than a wait the server gave up:
/// a failure (`None`: the call timed out client-side) that discards the connection.
pub fn lock_failed<D: Dialect>(con: BuyerConn<'_, D::Conn>, e: Option<sqlx::Error>) -> Outcome {
    let kind = e.map_or(ErrorKind::Timeout, |e| D::classify(&e));
    fail_and_drop(con, Outcome::Failed(kind))
}

/// A strategy `make` builds on the SQL store that `store` connects ([`Setup::mariadb`],
/// [`Setup::postgres`]), selling from it.
pub async fn on_sql<D: Dialect, T: Strategy + 'static>(
    s: Setup<'_>,
    store: impl Future<Output = Result<Arc<SqlStore<D>>, StrategyError>>,
    make: impl FnOnce(Arc<SqlStore<D>>, &Workload) -> T,
) -> Result<Built, StrategyError> {
    let store = store.await?;
    Ok(s.on_store(make(store.clone(), s.w), store))
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
