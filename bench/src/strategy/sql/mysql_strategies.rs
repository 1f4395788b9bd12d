//! The MariaDB strategies: their entries (`none` and `mysql-atomic` run the sellers of
//! [`super::strategies`], shared with PostgreSQL), the row lock (`mysql-for-update`) and
//! optimistic versioning (`mysql-optimistic`: MariaDB's store alone has a `version` column).

use std::time::{Duration, Instant};

use async_trait::async_trait;
use sqlx::{Connection, MySqlConnection};

use super::buyers::fail_and_drop;
use super::mysql::{BuyerConn, ER_LOCK_WAIT_TIMEOUT, SharedStore, classify, error_number};
use super::store::{Guard, Written, write_failure};
use super::strategies::{Atomic, NoLock, row_key, token, tx_lease};
use crate::chaos::holder::{self, Point};
use crate::record::trips::one;
use crate::record::{ErrorKind, Outcome};
use crate::strategy::{Attempt, Built, Purchase, Strategy, StrategyError, backoff, calls, within};
use crate::workload::Workload;

use crate::strategy::entry::needs::MARIADB;
use crate::strategy::entry::{Kind, Setup, StrategyInfo};

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
    build: |s| Box::pin(on_mariadb(s, NoLock::new)),
};

/// `mysql-for-update`.
pub const FOR_UPDATE: StrategyInfo = StrategyInfo {
    id: "mysql-for-update",
    kind: Kind::Lock,
    locks: true,
    about: "SELECT … FOR UPDATE row lock held by the transaction around the critical section",
    build: |s| Box::pin(on_mariadb(s, ForUpdate::new)),
    ..NONE
};

/// `mysql-optimistic`.
pub const OPTIMISTIC: StrategyInfo = StrategyInfo {
    id: "mysql-optimistic",
    kind: Kind::LockFree,
    about: "version column: UPDATE … WHERE version = read; bounded retries with backoff",
    build: |s| Box::pin(on_mariadb(s, Optimistic::new)),
    ..NONE
};

/// `mysql-atomic`.
pub const ATOMIC: StrategyInfo = StrategyInfo {
    id: "mysql-atomic",
    kind: Kind::LockFree,
    about: "one atomic UPDATE … SET qty = qty - 1 WHERE qty > 0, then the order row (no lock)",
    build: |s| Box::pin(on_mariadb(s, |store, _| Atomic::new(store))),
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

/// A strategy `make` builds on the MariaDB store, selling from it.
async fn on_mariadb<T: Strategy + 'static>(
    s: Setup<'_>,
    make: impl FnOnce(SharedStore, &Workload) -> T,
) -> Result<Built, StrategyError> {
    let store = s.mariadb().await?;
    Ok(s.on_store(make(store.clone(), s.w), store))
}

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
        let mut tx = match within(s.timeout, one(con.begin()), classify).await {
            Ok(tx) => tx,
            Err(k) => {
                // A connection that cannot begin (the server restarted) is replaced next time.
                s.discard_later(p.client);
                return Outcome::Failed(k).into();
            }
        };
        // The locking read may legitimately wait for the row lock, up to the server's timeout.
        let read =
            tokio::time::timeout(self.lock_wait + s.timeout, s.read(&mut tx, p.sku, true)).await;
        let qty = match read {
            Ok(Ok((qty, _))) => qty,
            Ok(Err(e)) => {
                drop(tx);
                return locking_read_failed(con, Some(e)).into();
            }
            Err(_) => {
                drop(tx);
                return locking_read_failed(con, None).into();
            }
        };
        // The row lock is held from here until the commit or rollback is sent: record it as a
        // lease, so the double-grant checker measures the row lock like any other.
        let acquired = Instant::now();
        let token = token(p);
        // The server frees the row lock itself (at commit, rollback, or when a cut attempt's
        // connection goes), so only the interval the buyer held it is recorded here.
        let held = |outcome: Outcome, released: Instant| {
            p.lease
                .put(tx_lease(row_key(p.sku), &token, acquired, released));
            Attempt::from(outcome)
        };
        if p.read && self.touch_store {
            // A plain lock serves a read with its exclusive lock: the read section under the
            // row lock, then the transaction is rolled back (nothing was written).
            let checked = s.check_stock(&mut tx, p.sku, self.hold, true).await;
            let released = Instant::now();
            return match checked {
                Ok(outcome) => {
                    let _ = within(s.timeout, one(tx.rollback()), classify).await;
                    held(outcome, released)
                }
                Err(k) => {
                    drop(tx);
                    held(fail_and_drop(con, Outcome::Failed(k)), released)
                }
            };
        }
        if !self.touch_store {
            let released = Instant::now();
            let _ = within(s.timeout, one(tx.rollback()), classify).await;
            return held(Outcome::Locked, released);
        }
        let (written, released) = self.hold_and_write(&mut tx, p, qty, &token).await;
        let written = match written {
            Ok(Outcome::Sold) => within(s.timeout, one(tx.commit()), classify)
                .await
                .map(|()| Outcome::Sold),
            // Sold out or refused: nothing to keep.
            Ok(o) => {
                let _ = within(s.timeout, one(tx.rollback()), classify).await;
                Ok(o)
            }
            Err(k) => {
                drop(tx);
                Err(k)
            }
        };
        match written {
            Ok(o) => held(o, released),
            Err(k) => held(fail_and_drop(con, write_failure(k)), released),
        }
    }
}

impl ForUpdate {
    /// The sale under the row lock: what turns the buyer away (no stock; a sale's request
    /// already placed or limit reached, read in the locked transaction), else the hold, then
    /// the write; when the release (the commit or rollback) is about to be sent. The holder
    /// pause points are here, as in a lock of its own.
    async fn hold_and_write(
        &self,
        tx: &mut MySqlConnection,
        p: &Purchase<'_>,
        qty: i64,
        token: &str,
    ) -> (Result<Outcome, ErrorKind>, Instant) {
        match self.store.refusal(tx, p, qty).await {
            Ok(None) => {}
            Ok(Some(turned_away)) => return (Ok(turned_away), Instant::now()),
            Err(k) => return (Err(k), Instant::now()),
        }
        holder::reached_by_locking_read();
        tokio::time::sleep(self.hold).await;
        let new_qty = qty - i64::from(p.ask.qty);
        let written = self.store.write(tx, p, new_qty, Guard::None, token).await;
        holder::reached(Point::BeforeRelease);
        (written.map(|w| w.outcome(false)), Instant::now())
    }
}

/// What a locking read that returned no row makes of the attempt: a lock wait timeout, or a
/// failure (`None`: the call timed out) that discards the connection.
fn locking_read_failed(con: BuyerConn<'_>, e: Option<sqlx::Error>) -> Outcome {
    match e {
        Some(e) if error_number(&e) == Some(ER_LOCK_WAIT_TIMEOUT) => Outcome::LockTimeout,
        Some(e) => fail_and_drop(con, Outcome::Failed(classify(&e))),
        None => fail_and_drop(con, Outcome::Failed(ErrorKind::Timeout)),
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
