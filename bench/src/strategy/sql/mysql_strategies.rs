//! The MariaDB strategies: their entries (`none` and `mysql-atomic` run the sellers of
//! [`super::strategies`], shared with PostgreSQL), the row lock (`mysql-for-update`) and
//! optimistic versioning (`mysql-optimistic`: MariaDB's store alone has a `version` column).

use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::buyers::fail_and_drop;
use super::mysql::{ER_LOCK_WAIT_TIMEOUT, Mysql, SharedStore, classify, error_number};
use super::store::{Guard, Written, write_failure};
use super::strategies::{Atomic, NoLock, TxHeld, lock_failed, on_sql, row_key, taken, token};
use crate::record::Outcome;
use crate::record::trips::one;
use crate::strategy::{Attempt, Purchase, Strategy, backoff, calls, within};
use crate::workload::Workload;

use crate::strategy::entry::needs::MARIADB;
use crate::strategy::entry::{Kind, StrategyInfo};

/// `none`.
pub const NONE: StrategyInfo = StrategyInfo {
    id: "none",
    kind: Kind::Control,
    locks: false,
    fenced: false,
    fence_token: None,
    needs: MARIADB,
    wait: None,
    about: "control: the critical section with no lock at all; must oversell under contention",
    build: |s| Box::pin(on_sql(s, s.mariadb(), NoLock::new)),
};

/// `mysql-for-update`.
pub const FOR_UPDATE: StrategyInfo = StrategyInfo {
    id: "mysql-for-update",
    kind: Kind::Lock,
    locks: true,
    about: "SELECT … FOR UPDATE row lock held by the transaction around the critical section",
    build: |s| Box::pin(on_sql(s, s.mariadb(), ForUpdate::new)),
    ..NONE
};

/// `mysql-optimistic`.
pub const OPTIMISTIC: StrategyInfo = StrategyInfo {
    id: "mysql-optimistic",
    kind: Kind::LockFree,
    about: "version column: UPDATE … WHERE version = read; bounded retries with backoff",
    build: |s| Box::pin(on_sql(s, s.mariadb(), Optimistic::new)),
    ..NONE
};

/// `mysql-atomic`.
pub const ATOMIC: StrategyInfo = StrategyInfo {
    id: "mysql-atomic",
    kind: Kind::LockFree,
    about: "one atomic UPDATE … SET qty = qty - 1 WHERE qty > 0, then the order row (no lock)",
    build: |s| Box::pin(on_sql(s, s.mariadb(), |store, _| Atomic::new(store))),
    ..NONE
};

/// `mysql-atomic-no-limit`.
pub const ATOMIC_NO_LIMIT: StrategyInfo = StrategyInfo {
    id: "mysql-atomic-no-limit",
    kind: Kind::Control,
    about: "control: mysql-atomic without the holdings row's limit check; in a sale a buyer who \
            presses again gets units past [buyers] limit (the audit must count them)",
    ..ATOMIC
};

/// `mysql-atomic-not-idempotent`.
pub const ATOMIC_NOT_IDEMPOTENT: StrategyInfo = StrategyInfo {
    id: "mysql-atomic-not-idempotent",
    kind: Kind::Control,
    about: "control: mysql-atomic without the unique key on the request id; in a sale a second \
            press or a retry after a timeout places a second order (the audit must count it)",
    ..ATOMIC
};

/// `mysql-atomic-blind-reaper`.
pub const ATOMIC_BLIND_REAPER: StrategyInfo = StrategyInfo {
    id: "mysql-atomic-blind-reaper",
    kind: Kind::Control,
    about: "control: mysql-atomic whose [pay] reaper returns the expired reservations it \
            selected without asking again (no `AND state = 'reserved'`); two reapers return a \
            unit twice, a payment between its select and its update is returned (the audit \
            must count both)",
    ..ATOMIC
};

/// `mysql-for-update`: the critical section inside one transaction that starts with
/// `SELECT … FOR UPDATE`, so the row lock is the mutex. Waits end at `lock.acquire_timeout`
/// (`innodb_lock_wait_timeout`, whole seconds).
pub struct ForUpdate {
    store: SharedStore,
    hold: Duration,
    lock_wait: Duration,
    /// False: take the row lock and commit, nothing else (the lock alone).
    touch_store: bool,
}

impl ForUpdate {
    /// Sells from `store`.
    pub fn new(store: SharedStore, w: &Workload) -> Self {
        Self {
            lock_wait: store.lock_wait,
            store,
            hold: w.critical_section.hold,
            touch_store: w.critical_section.touch_store,
        }
    }
}

#[async_trait]
impl Strategy for ForUpdate {
    /// Connection and begin, the locking read (which may wait `lock_wait` for the row lock on
    /// top of its call), the hold, then update, insert and commit or rollback (a read: its two
    /// reads around the hold, then rollback; no longer).
    fn bound(&self) -> Duration {
        let t = self.store.timeout;
        calls(2, t) + self.lock_wait + t + self.hold + calls(3, t)
    }

    async fn attempt(&self, p: &Purchase) -> Attempt {
        let s = &self.store;
        let mut con = match s.conn(p.client).await {
            Ok(c) => c,
            Err(k) => return Outcome::Failed(k).into(),
        };
        let mut tx = match s.begin(&mut con, p.client).await {
            Ok(tx) => tx,
            Err(k) => return Outcome::Failed(k).into(),
        };
        // The locking read may legitimately wait for the row lock, up to the server's timeout.
        let read = s.read(&mut tx, p.sku, true);
        let qty = match taken(self.lock_wait + s.timeout, read).await {
            Ok((qty, _)) => qty,
            // The server ended the wait (error 1205) and applied nothing.
            Err(Some(e)) if error_number(&e) == Some(ER_LOCK_WAIT_TIMEOUT) => {
                drop(tx);
                return Outcome::LockTimeout.into();
            }
            Err(e) => {
                drop(tx);
                return lock_failed::<Mysql>(con, e).into();
            }
        };
        // The row lock is held from here until the commit or rollback is sent: record it as a
        // lease, so the double-grant checker measures the row lock like any other.
        let lease = TxHeld::now(p, row_key(p.sku));
        if p.read && self.touch_store {
            // A plain lock serves a read with its exclusive lock: the read section under the
            // row lock, then the transaction is rolled back (nothing was written).
            let checked = s.check_stock(&mut tx, p.sku, self.hold, true).await;
            let released = Instant::now();
            return match checked {
                Ok(outcome) => {
                    let _ = within(s.timeout, one(tx.rollback()), classify).await;
                    lease.ended(outcome, released)
                }
                Err(k) => {
                    drop(tx);
                    lease.ended(fail_and_drop(con, Outcome::Failed(k)), released)
                }
            };
        }
        if !self.touch_store {
            let released = Instant::now();
            let _ = within(s.timeout, one(tx.rollback()), classify).await;
            return lease.ended(Outcome::Locked, released);
        }
        // A failed read of a sale's rules fails the attempt as a failed write would.
        let (written, released) = lease.sell(s, &mut tx, qty, self.hold, write_failure).await;
        let written = s.finish(tx, written, p.client).await;
        match written {
            Ok(o) => lease.ended(o, released),
            Err(o) => lease.ended(fail_and_drop(con, o), released),
        }
    }
}

/// `mysql-optimistic`: read `(qty, version)` without a lock, hold, then
/// `UPDATE … WHERE version = read`; on a conflict retry with backoff, at most
/// `lock.optimistic_retries` times and never past `lock.acquire_timeout`.
pub struct Optimistic {
    store: SharedStore,
    hold: Duration,
    retries: u32,
    backoff: Duration,
    give_up_after: Duration,
}

impl Optimistic {
    /// Sells from `store`.
    pub fn new(store: SharedStore, w: &Workload) -> Self {
        Self {
            store,
            hold: w.critical_section.hold,
            retries: w.lock.optimistic_retries,
            backoff: w.lock.optimistic_backoff,
            give_up_after: w.lock.acquire_timeout,
        }
    }
}

#[async_trait]
impl Strategy for Optimistic {
    /// The connection, then tries until `acquire_timeout`; the last try may start just before
    /// it: read, hold, begin, update, insert, commit.
    fn bound(&self) -> Duration {
        let t = self.store.timeout;
        t + self.give_up_after + calls(5, t) + self.hold
    }

    async fn attempt(&self, p: &Purchase) -> Attempt {
        let s = &self.store;
        let started = tokio::time::Instant::now();
        let token = token(p);
        let mut con = match s.conn(p.client).await {
            Ok(c) => c,
            Err(k) => return Outcome::Failed(k).into(),
        };
        for retry in 0..=self.retries {
            let (qty, version) =
                match within(s.timeout, s.read(&mut con, p.sku, false), classify).await {
                    Ok(v) => v,
                    Err(k) => return fail_and_drop(con, Outcome::Failed(k)).into(),
                };
            let units = i64::from(p.ask.qty);
            if qty < units {
                return Outcome::SoldOut.into();
            }
            tokio::time::sleep(self.hold).await;
            let version = Guard::Version(version);
            match s.write_tx(&mut con, p, qty - units, version, &token).await {
                Ok(Written::GuardRefused) => {}
                Ok(written) => return written.outcome(false).into(),
                Err(k) => return fail_and_drop(con, write_failure(k)).into(),
            }
            let pause = backoff(self.backoff, retry);
            if started.elapsed() + pause > self.give_up_after {
                break;
            }
            tokio::time::sleep(pause).await;
        }
        Outcome::LockTimeout.into()
    }
}
