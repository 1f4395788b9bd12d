//! The PostgreSQL strategies: their entries (`pg-none` and `pg-atomic` run the sellers of
//! [`super::strategies`], shared with MariaDB), and the two locks a transaction takes and commit
//! or rollback frees — the row lock (`SELECT … FOR UPDATE`) and the transaction-scoped advisory
//! lock (`pg_advisory_xact_lock`).

use std::time::{Duration, Instant};

use async_trait::async_trait;
use sqlx::postgres::PgConnection;
use sqlx::{SqlSafeStr, SqlStr};

use super::buyers::fail_and_drop;
use super::postgres::{Pg, QUERY_CANCELED, SharedPgStore, classify, is_lock_timeout, sqlstate};
use super::postgres_advisory::advisory_key;
use super::store::{Arg, Dialect};
use super::strategies::{Atomic, NoLock, TxHeld, lock_failed, on_sql, row_key, taken};
use crate::record::Outcome;
use crate::record::trips::one;
use crate::strategy::entry::needs::POSTGRES;
use crate::strategy::entry::{Kind, StrategyInfo};
use crate::strategy::{Attempt, Purchase, Strategy, calls, within};
use crate::workload::Workload;

/// `pg-none`.
pub const NONE: StrategyInfo = StrategyInfo {
    id: "pg-none",
    kind: Kind::Control,
    locks: false,
    fenced: false,
    fence_token: None,
    needs: POSTGRES,
    wait: None,
    about: "control: the critical section on the PostgreSQL store with no lock; must oversell \
            under contention (proves the PostgreSQL store's audit sees it)",
    build: |s| Box::pin(on_sql(s, s.postgres(), NoLock::new)),
};

/// `pg-atomic`.
pub const ATOMIC: StrategyInfo = StrategyInfo {
    id: "pg-atomic",
    kind: Kind::LockFree,
    about: "one atomic UPDATE … SET qty = qty - 1 WHERE qty > 0 RETURNING qty, then the order \
            row, in one transaction (no lock; Django's filter(qty__gt=0).update(F('qty') - 1))",
    build: |s| Box::pin(on_sql(s, s.postgres(), |store, _| Atomic::new(store))),
    ..NONE
};

/// `pg-for-update`.
pub const FOR_UPDATE: StrategyInfo = StrategyInfo {
    id: "pg-for-update",
    kind: Kind::Lock,
    locks: true,
    about: "SELECT … FOR UPDATE row lock held by the transaction around the critical section, \
            waits bounded by lock_timeout (Django select_for_update, JPA PESSIMISTIC_WRITE)",
    build: |s| {
        Box::pin(on_sql(s, s.postgres(), |st, w| {
            TxLocked::new(st, w, TxLock::Row)
        }))
    },
    ..NONE
};

/// `pg-advisory-xact`.
pub const ADVISORY_XACT: StrategyInfo = StrategyInfo {
    id: "pg-advisory-xact",
    about: "pg_advisory_xact_lock in the transaction that sells from the PostgreSQL store, freed \
            by its commit or rollback; waits in PostgreSQL's lock queue under lock_timeout \
            (django-pglock's advisory(xact=True), key hashed as sqlx's PgAdvisoryLock)",
    build: |s| {
        Box::pin(on_sql(s, s.postgres(), |st, w| {
            TxLocked::new(st, w, TxLock::AdvisoryXact)
        }))
    },
    ..FOR_UPDATE
};

/// Which lock the transaction takes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxLock {
    /// `SELECT qty … FOR UPDATE`: the stock row's lock, taken by the read itself.
    Row,
    /// `pg_advisory_xact_lock(key)`, then a plain read. It needs no fence: the lock, the read
    /// and the writes live and die with one transaction on one server. If the session dies
    /// the transaction aborts, its writes with it; a write can only commit while the lock is
    /// held, because the commit that makes it durable is what frees the lock.
    AdvisoryXact,
}

/// The critical section inside one transaction that starts by taking a lock the transaction
/// holds until its commit or rollback. Waits end at `lock.acquire_timeout` (`lock_timeout`,
/// SQLSTATE 55P03).
pub struct TxLocked {
    store: SharedPgStore,
    hold: Duration,
    how: TxLock,
    advisory: SqlStr,
    /// False: take the lock and commit, nothing else (the lock alone).
    touch_store: bool,
}

impl TxLocked {
    /// Sells from `store`, locking as `how` says.
    pub fn new(store: SharedPgStore, w: &Workload, how: TxLock) -> Self {
        Self {
            store,
            hold: w.critical_section.hold,
            how,
            advisory: "SELECT pg_advisory_xact_lock($1)".into_sql_str(),
            touch_store: w.critical_section.touch_store,
        }
    }

    /// Takes the lock; returns the stock read under it (0 when the store is not touched).
    async fn take(&self, tx: &mut PgConnection, p: &Purchase<'_>) -> Result<i64, sqlx::Error> {
        let s = &self.store;
        match self.how {
            TxLock::Row => s.read(tx, p.sku, true).await.map(|(qty, _)| qty),
            TxLock::AdvisoryXact => {
                let key = advisory_key(&s.prefix.lock_key(p.sku));
                let key = [Arg::Int(key)];
                s.dialect().execute(tx, self.advisory.clone(), &key).await?;
                if !self.touch_store {
                    return Ok(0);
                }
                s.read(tx, p.sku, false).await.map(|(qty, _)| qty)
            }
        }
    }

    /// The key the lease is recorded under.
    fn lease_key(&self, p: &Purchase<'_>) -> String {
        match self.how {
            TxLock::Row => row_key(p.sku),
            TxLock::AdvisoryXact => self.store.prefix.lock_key(p.sku),
        }
    }
}

#[async_trait]
impl Strategy for TxLocked {
    /// Connection and begin, the lock (which may wait `lock_wait` on top of its call), the
    /// read, the hold, then update, insert and commit.
    fn bound(&self) -> Duration {
        let t = self.store.timeout;
        self.store.lock_wait + calls(7, t) + self.hold
    }

    async fn attempt(&self, p: &Purchase) -> Attempt {
        let s = &self.store;
        let mut con = match s.conn(p.client).await {
            Ok(c) => c,
            Err(k) => return Outcome::Failed(k).into(),
        };
        con.unsettled();
        let mut tx = match s.begin(&mut con, p.client).await {
            Ok(tx) => tx,
            Err(k) => return Outcome::Failed(k).into(),
        };
        // Taking the lock may legitimately wait, up to the server's lock_timeout.
        let qty = match taken(s.lock_wait + s.timeout * 2, self.take(&mut tx, p)).await {
            Ok(qty) => qty,
            Err(Some(e)) if gave_up_waiting(&e) => {
                // The server ended the wait and applied nothing. As a real client does
                // (Django's atomic block), roll back and keep the connection: closing it
                // made the buyer's next attempt pay a new session (a fork, a SCRAM login).
                if within(s.timeout, one(tx.rollback()), classify)
                    .await
                    .is_ok()
                {
                    con.settled();
                }
                return Outcome::LockTimeout.into();
            }
            Err(e) => {
                drop(tx);
                return lock_failed::<Pg>(con, e).into();
            }
        };
        // Held from here until the commit or rollback is sent; the server frees it itself, so
        // only the interval the buyer held it is recorded.
        let lease = TxHeld::now(p, self.lease_key(p));
        let (outcome, released) = self.under_lock(&mut tx, p, qty, &lease).await;
        let finished = s.finish(tx, outcome, p.client).await;
        con.settled();
        match finished {
            Ok(o) => lease.ended(o, released),
            Err(o) => lease.ended(fail_and_drop(con, o), released),
        }
    }
}

impl TxLocked {
    /// What the transaction does under the lock, and when its release was sent (the commit or
    /// rollback follows at once): a read's check, or a sale's hold and writes.
    async fn under_lock(
        &self,
        tx: &mut PgConnection,
        p: &Purchase<'_>,
        qty: i64,
        lease: &TxHeld<'_, '_>,
    ) -> (Result<Outcome, Outcome>, Instant) {
        let s = &self.store;
        if !self.touch_store {
            return (Ok(Outcome::Locked), Instant::now());
        }
        if p.read {
            // A plain lock serves a read with its exclusive lock. READ COMMITTED: each read of
            // the transaction sees the latest commit, so a writer's change would show.
            let locking = self.how == TxLock::Row;
            let checked = s.check_stock(tx, p.sku, self.hold, locking).await;
            return (checked.map_err(Outcome::Failed), Instant::now());
        }
        // Taking the lock read the stock too (the row lock's locking read; the advisory lock
        // then the read, one call).
        lease.sell(s, tx, qty, self.hold, Outcome::Failed).await
    }
}

/// Whether taking the lock ended because the wait was too long: `lock_timeout`, or
/// `statement_timeout` (SQLSTATE `query_canceled`), which a waiter queued behind another
/// waiter can reach first, since `lock_timeout` bounds each lock a statement waits for (the
/// tuple's, then the holder's transaction's) and not their sum. Only the statement that takes
/// the lock can wait that long.
fn gave_up_waiting(e: &sqlx::Error) -> bool {
    is_lock_timeout(e) || sqlstate(e).as_deref() == Some(QUERY_CANCELED)
}
