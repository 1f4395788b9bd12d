//! Strategy: how one buyer takes one unit of stock.
//!
//! Two extension points:
//! - [`Lock`]: acquire → [`Lease`] (with an optional fencing token) → release. Every lock runs
//!   the same critical section (the SQL store's, [`sql::SqlStore`]), so locks are compared
//!   on identical work: read the stock, hold for the business time, blind-write `read - 1` and
//!   insert an order row. A lapse of mutual exclusion therefore shows up as oversell or lost
//!   updates.
//! - [`Strategy`]: one purchase attempt, for strategies that need no separate lock
//!   (`mysql-atomic`, `redis-lua-decr`, the `none` control). [`Locked`] adapts a [`Lock`].
//!
//! A [`Store`] holds the stock: it seeds it before the run and the checker audits it after.
//! Every network call is bounded by `load.timeout`, and every strategy states the bound of a
//! whole attempt ([`Strategy::bound`]) as the sum of the bounds of the calls it makes: the
//! driver cuts an attempt there, and the double-grant checker keeps leases that long.

pub mod adapter;
pub mod coord;
mod entry;
mod locked;
pub mod precheck;
pub mod redis;
mod registry;
pub mod rules;
mod sale_rules;
pub mod sql;
pub mod wait;

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;

use crate::check::{OrderRow, PayCounts, PayFacts, SkuAudit};
use crate::record::{ErrorKind, LeaseSpan, Outcome};
use crate::workload::Ask;

pub use entry::{BoxFuture, BuildFn, Built, Family, Kind, Setup, StrategyInfo};
pub use locked::Locked;
pub use precheck::SoldOutFlags;
pub use registry::{ALL, LIBRARY_STRATEGIES, build, find, resolve};
pub use rules::Rules;
pub use sale_rules::Enforcement;
/// The MariaDB store's path before the families had folders (tests call `mysql::settle`;
/// runs settle through `Store::settle`).
pub use sql::mysql;

/// One purchase to attempt.
#[derive(Debug, Clone, Copy)]
pub struct Purchase<'a> {
    /// Attempt number in schedule order; also the buyer id written on the order.
    pub seq: u64,
    /// Buyer loop running it (selects a connection).
    pub client: u32,
    /// Item to buy.
    pub sku: u32,
    /// Check the stock and price under the read lock instead of buying
    /// ([`CriticalSection::read_section`]); only strategies that take a lock are given reads.
    pub read: bool,
    /// The buyer, the request id and the units asked for.
    pub ask: Ask,
    /// Where the attempt leaves the lease it held. The driver owns it, so a lease is recorded
    /// even when the attempt is cut at its bound and its future dropped mid-way.
    pub lease: &'a LeaseSlot,
}

/// The lease an attempt held, left where the driver finds it whatever way the attempt ended.
#[derive(Debug, Default)]
pub struct LeaseSlot {
    span: std::sync::Mutex<Option<LeaseSpan>>,
    /// When the critical section sent its store write (for the danger window of a lease lost
    /// before it).
    wrote: std::sync::Mutex<Option<Instant>>,
}

impl LeaseSlot {
    /// Records the attempt's lease (a later call replaces an earlier one).
    pub fn put(&self, span: LeaseSpan) {
        *self.span.lock().expect("lease slot lock is never poisoned") = Some(span);
    }

    /// The recorded lease, if the attempt held one.
    pub fn take(&self) -> Option<LeaseSpan> {
        self.span
            .lock()
            .expect("lease slot lock is never poisoned")
            .take()
    }

    /// Stamps the critical section's store write as sent now (a store calls it right before).
    pub fn wrote(&self) {
        *self
            .wrote
            .lock()
            .expect("lease slot lock is never poisoned") = Some(Instant::now());
    }

    /// When the store write was sent, if it was.
    pub fn written_at(&self) -> Option<Instant> {
        *self
            .wrote
            .lock()
            .expect("lease slot lock is never poisoned")
    }
}

/// What an attempt returns to the recorder (its lease, if any, is in [`Purchase::lease`]).
#[derive(Debug, Clone)]
pub struct Attempt {
    /// The sale's outcome.
    pub outcome: Outcome,
    /// Releasing the lock failed with an error: whether it was freed is unknown (it expires).
    pub release_failed: bool,
}

impl From<Outcome> for Attempt {
    fn from(outcome: Outcome) -> Self {
        Self {
            outcome,
            release_failed: false,
        }
    }
}

/// One way of buying one unit. Implementations must bound every network call.
#[async_trait]
pub trait Strategy: Send + Sync {
    /// Attempts one purchase; never panics on server errors (they are outcomes). A strategy
    /// that takes a lock leaves its lease in `p.lease`.
    async fn attempt(&self, p: &Purchase) -> Attempt;

    /// The longest one attempt can take: the sum of the bounds of the calls it makes (each
    /// `load.timeout` unless said otherwise), the waits it allows itself (`lock.acquire_timeout`)
    /// and the hold. The driver cuts an attempt here; a cut attempt's outcome is unknown.
    fn bound(&self) -> Duration;

    /// Creates what the strategy keeps server-side for `skus` keys (a lock table), wiping
    /// earlier runs. Called once per run by the coordinator, never by worker processes (which
    /// would wipe each other's state).
    async fn prepare(&self, _skus: u32) -> Result<(), StrategyError> {
        Ok(())
    }

    /// Locks of `skus` keys left held with no expiry after the run: held forever, every later
    /// buyer of those SKUs stalls. Zero for strategies without locks.
    async fn stuck_locks(&self, _skus: u32) -> Result<u64, StrategyError> {
        Ok(0)
    }

    /// The lease TTL the lock service granted, for locks whose server may change the one
    /// asked for (etcd raises it to its minimum); known after [`Strategy::prepare`].
    fn lease_ttl_granted(&self) -> Option<Duration> {
        None
    }

    /// Why the strategy's client can no longer be trusted (an adapter that misbehaved or
    /// died), once it cannot: the run fails with this, after writing what it measured.
    fn broken(&self) -> Option<String> {
        None
    }

    /// The library behind it and the version loaded, for library strategies (`lib:<name>`).
    fn library(&self) -> Option<adapter::Hello> {
        None
    }

    /// Closes the strategy's sessions cleanly before the servers stop (bounded), so none
    /// outlives them. Called once by the coordinator after the audit.
    async fn close(&self) {}
}

/// A held lock.
#[derive(Debug)]
pub struct Lease {
    /// The lock key (one per SKU).
    pub key: String,
    /// Unique owner token; release deletes only a lock still holding it.
    pub token: String,
    /// Monotonic fencing token, for locks that issue one.
    pub fence: Option<u64>,
    /// A task keeping the lease alive (watchdog, lease keep-alive), stopped at release.
    pub keepalive: Option<KeepAlive>,
    /// When the lease ends, for locks whose client computes it (Redlock's validity).
    pub valid_until: Option<Instant>,
    /// When the lock was granted, for locks granted in another process (a library behind an
    /// adapter): the lease starts there, before its answer reached lockbench.
    pub granted_at: Option<Instant>,
    /// A read lease of a read–write lock ([`Lock::acquire_read`]): other read leases of the key
    /// may overlap it, a write lease may not.
    pub shared: bool,
    /// When the server ends the lease unless it is renewed, for locks that can say: the
    /// danger window's loss moment.
    pub expiry: Option<Expiry>,
}

impl Lease {
    /// A lease with no fencing token and nothing keeping it alive.
    pub fn new(key: &str, token: &str) -> Self {
        Self {
            key: key.to_string(),
            token: token.to_string(),
            fence: None,
            keepalive: None,
            valid_until: None,
            granted_at: None,
            shared: false,
            expiry: None,
        }
    }

    /// This lease, which the server started (for `ttl`) by the call that just returned: its
    /// loss moment is a TTL from now, a round trip late at most.
    pub fn expiring(mut self, ttl: Duration) -> Self {
        self.expiry = Some(Expiry::After(Instant::now(), ttl));
        self
    }

    /// Whether the client already knows, at `now`, that the lease has ended: its renewal found
    /// it gone, or its validity has passed. (Release may find out more: see [`Lock::release`].)
    pub fn known_lost(&self, now: Instant) -> bool {
        self.keepalive.as_ref().is_some_and(KeepAlive::found_lost)
            || self.valid_until.is_some_and(|v| now > v)
    }

    /// The danger window of this lease, lost and released at `released`: the loss moment (its
    /// [`Expiry`], else Redlock's validity), the first notice (the keep-alive's, else `release`
    /// when the holder only learned there: a validity checked or a release that found the lock
    /// not ours), the write the critical section sent and whether a fence refused it.
    pub fn loss(
        &self,
        released: Instant,
        wrote: Option<Instant>,
        refused: bool,
    ) -> crate::record::LossSpan {
        use crate::record::LossSource;
        let lost_at = self
            .expiry
            .as_ref()
            .map(Expiry::at)
            .or_else(|| self.valid_until.map(|v| (v, LossSource::LeaseArithmetic)));
        let noticed = self.keepalive.as_ref().and_then(KeepAlive::noticed_at);
        crate::record::LossSpan {
            lost_at,
            noticed: Some(noticed.map_or(released, |n| n.min(released))),
            wrote,
            refused,
        }
    }
}

/// When the server ends a lease unless it is renewed: a moment it was observed to end, or the
/// last moment it (re)started plus its TTL. Renewals move it ([`Expiry::renewed`]), shared
/// with the task that renews.
#[derive(Debug, Clone)]
pub enum Expiry {
    /// Seen ending at this moment.
    Observed(Instant),
    /// Started at `.0` (the send of the call that set it), ends `.1` later.
    After(Instant, Duration),
    /// Renewed: the last send of a (re)start that succeeded, and the TTL.
    Renewed(Arc<std::sync::Mutex<Instant>>, Duration),
}

impl Expiry {
    /// A lease the server started at `from` for `ttl`, which something will renew: the
    /// renewing task keeps a clone and calls [`Expiry::renewed`].
    pub fn renewable(from: Instant, ttl: Duration) -> Self {
        Self::Renewed(Arc::new(std::sync::Mutex::new(from)), ttl)
    }

    /// A renewal sent at `sent` succeeded: the lease now ends a TTL after it.
    pub fn renewed(&self, sent: Instant) {
        if let Self::Renewed(from, _) = self {
            let mut from = from.lock().expect("expiry lock is never poisoned");
            *from = (*from).max(sent);
        }
    }

    /// The moment the lease ends, and how it was found.
    pub fn at(&self) -> (Instant, crate::record::LossSource) {
        use crate::record::LossSource;
        match self {
            Self::Observed(t) => (*t, LossSource::Observed),
            Self::After(from, ttl) => (*from + *ttl, LossSource::LeaseArithmetic),
            Self::Renewed(from, ttl) => (
                *from.lock().expect("expiry lock is never poisoned") + *ttl,
                LossSource::LeaseArithmetic,
            ),
        }
    }
}

/// A background task that keeps a lease alive; aborted by [`KeepAlive::stop`] or on drop, so
/// it never outlives the attempt that took the lease.
#[derive(Debug)]
pub struct KeepAlive {
    task: tokio::task::AbortHandle,
    /// Set, to when, once the task ended because it found the lease gone.
    lost: Arc<std::sync::OnceLock<Instant>>,
}

impl KeepAlive {
    /// Spawns `task` on the runtime; it returns `true` if it stopped because it found the
    /// lease gone (expired, or owned by another), `false` if it gave up for another reason.
    pub fn spawn(task: impl std::future::Future<Output = bool> + Send + 'static) -> Self {
        let lost = Arc::new(std::sync::OnceLock::new());
        let flag = lost.clone();
        let task = tokio::spawn(async move {
            if task.await {
                let _ = flag.set(Instant::now());
            }
        });
        Self {
            task: task.abort_handle(),
            lost,
        }
    }

    /// Stops renewing (before the release is sent).
    pub fn stop(&self) {
        self.task.abort();
    }

    /// Whether renewing found the lease gone.
    pub fn found_lost(&self) -> bool {
        self.lost.get().is_some()
    }

    /// When renewing found the lease gone, if it did: the holder's notice.
    pub fn noticed_at(&self) -> Option<Instant> {
        self.lost.get().copied()
    }
}

impl Drop for KeepAlive {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Why a lock was not acquired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcquireError {
    /// Others held it until `lock.acquire_timeout` ran out.
    Busy,
    /// A call failed (the lock may have been taken server-side on a timeout; it expires).
    Failed(ErrorKind),
}

/// What taking a lock gives: its lease, or why not.
pub type Acquired = Result<Lease, AcquireError>;

/// A mutual-exclusion lock over a key.
#[async_trait]
pub trait Lock: Send + Sync {
    /// Creates whatever the lock keeps server-side for `skus` keys (wiping earlier runs).
    async fn prepare(&self, _skus: u32) -> Result<(), StrategyError> {
        Ok(())
    }

    /// Takes the lock on `key` for `token`, retrying until `lock.acquire_timeout`.
    async fn acquire(&self, client: u32, key: &str, token: &str) -> Acquired;

    /// Takes the lock on `key` for a read. A read–write lock grants a shared lease
    /// ([`Lease::shared`]) that other readers may hold at once and that excludes writers; a plain
    /// lock serves a read as it serves a write, with its exclusive lock (the default). Bounded by
    /// [`Lock::acquire_bound`]; released with [`Lock::release`].
    async fn acquire_read(&self, client: u32, key: &str, token: &str) -> Acquired {
        self.acquire(client, key, token).await
    }

    /// Releases a lease. `Ok(false)` means the lock was no longer held by this token
    /// (it expired and maybe went to someone else): the lease was lost while held. Safe to
    /// call twice for one lease (a cut attempt's guard may repeat a release in flight).
    async fn release(&self, client: u32, lease: &Lease) -> Result<bool, ErrorKind>;

    /// The longest `acquire` can take: `lock.acquire_timeout` plus the calls that may still
    /// start before it has passed and run after it, each bounded.
    fn acquire_bound(&self) -> Duration;

    /// The longest `release` can take.
    fn release_bound(&self) -> Duration;

    /// See [`Strategy::stuck_locks`].
    async fn stuck_locks(&self, _skus: u32) -> Result<u64, StrategyError> {
        Ok(0)
    }

    /// See [`Strategy::lease_ttl_granted`].
    fn lease_ttl_granted(&self) -> Option<Duration> {
        None
    }

    /// See [`Strategy::broken`].
    fn broken(&self) -> Option<String> {
        None
    }

    /// See [`Strategy::library`].
    fn library(&self) -> Option<adapter::Hello> {
        None
    }

    /// See [`Strategy::close`].
    async fn close(&self) {}
}

/// Where the stock lives: seeded before the run, audited after it.
#[async_trait]
pub trait Store: Send + Sync {
    /// Creates the schema / keys and sets every SKU's stock, `stock[sku]` (wiping earlier
    /// runs).
    async fn prepare(&self, stock: &[u64]) -> Result<(), StrategyError>;
    /// Reads the final stock and the orders written, per SKU. Never trusts client counters.
    async fn audit(&self, skus: u32) -> Result<Vec<SkuAudit>, StrategyError>;
    /// Every order the store holds (buyer, request id, units), for the sale's audit; `None`
    /// when this store cannot list them (the sale's figures then say so).
    async fn orders(&self) -> Result<Option<Vec<OrderRow>>, StrategyError> {
        Ok(None)
    }
    /// Reserve, then pay (`[pay]`): the payments and reapers the harness runs beside the
    /// buyers, and the facts the audit reads; `None` without `[pay]`.
    fn pay_desk(&self) -> Option<Arc<dyn PayDesk>> {
        None
    }
    /// Closes connections cleanly before the servers stop.
    async fn close(&self) {}
    /// Between trials on the same servers (after this store's trial closed it): ends what the
    /// trial left running server-side, waiting at most `bound`, so it cannot slow the next
    /// trial; returns how many sessions it ended. Nothing is left by default.
    async fn settle(&self, _bound: Duration) -> Result<usize, StrategyError> {
        Ok(0)
    }
}

/// Reserve-then-pay's part of a run: the payments and the reapers, run by the harness beside
/// the buyers and stopped and awaited before the audit, and the store's facts about them.
#[async_trait]
pub trait PayDesk: Send + Sync {
    /// What it adds to the sale's schema (after the store's own statements).
    fn schema(&self) -> Vec<String>;
    /// Pays and reaps until `load_done`, then for [`crate::workload::Pay::settle_bound`]
    /// more, so every reservation can be paid or returned; nothing it started runs when it
    /// returns.
    async fn run(&self, load_done: tokio_util::sync::CancellationToken);
    /// What the payers counted (reported beside the audit, never judged on).
    fn counts(&self) -> PayCounts;
    /// The store's reservations, payments and returns.
    async fn facts(&self) -> Result<PayFacts, StrategyError>;
    /// Closes its connections.
    async fn close(&self);
}

/// The work every lock protects: read the stock, hold, write `read - 1` and the order; and,
/// for a read, the check of stock and price under the read lock. The MariaDB store runs it
/// for every real lock (and for `none`); the sim's store runs it in memory to test the harness
/// itself through the same [`Locked`] adapter. Statically dispatched, so the attempt's path
/// boxes no extra future.
pub trait CriticalSection: Send + Sync + 'static {
    /// The lock key of a SKU.
    fn lock_key(&self, sku: u32) -> String;

    /// Sells one unit of `p.sku` under the lock; with `fence`, the store refuses a token older
    /// than one it has seen.
    fn critical_section(
        &self,
        p: &Purchase<'_>,
        token: &str,
        fence: Option<u64>,
        hold: Duration,
    ) -> impl std::future::Future<Output = Outcome> + Send;

    /// The longest [`Self::critical_section`] can take with `hold`.
    fn critical_section_bound(&self, hold: Duration) -> Duration;

    /// A read under the read lock: reads `p.sku`'s stock and price, holds for the same business
    /// time as a purchase, then reads the stock again. [`Outcome::Read`] with the stock seen,
    /// or [`Outcome::TornRead`] when it changed in between: a writer changed it while the read
    /// lock was held. Writes nothing, so an error is a definite failure, never unknown.
    fn read_section(
        &self,
        p: &Purchase<'_>,
        hold: Duration,
    ) -> impl std::future::Future<Output = Outcome> + Send;

    /// The longest [`Self::read_section`] can take with `hold`.
    fn read_section_bound(&self, hold: Duration) -> Duration;
}

/// The outcome of a read that saw `stock`, then `later` at the end of its hold.
pub fn read_outcome(stock: i64, later: i64) -> Outcome {
    if later == stock {
        Outcome::Read { stock }
    } else {
        Outcome::TornRead { stock, later }
    }
}

/// Errors setting up a strategy or auditing its store.
#[derive(Debug, thiserror::Error)]
pub enum StrategyError {
    /// No strategy by that name.
    #[error("unknown strategy `{id}`; known strategies: {known} (see `lockbench list`)")]
    Unknown { id: String, known: String },
    /// The strategy needs a server the endpoints lack.
    #[error("strategy `{id}` needs {what}, which this cluster does not provide")]
    Missing { id: String, what: &'static str },
    /// A MariaDB call failed during setup or audit.
    #[error("mariadb: {0}")]
    Mysql(#[from] sqlx::Error),
    /// A PostgreSQL call failed during setup or audit.
    #[error("postgres: {0}")]
    Postgres(sqlx::Error),
    /// A Redis call failed during setup or audit.
    #[error("redis: {0}")]
    Redis(#[from] ::redis::RedisError),
    /// Connecting to etcd failed.
    #[error("etcd: {0}")]
    Etcd(#[from] etcd_client::Error),
    /// Connecting to ZooKeeper failed.
    #[error("zookeeper: {0}")]
    Zookeeper(#[from] zookeeper_client::Error),
    /// The workload asks for something the strategy cannot do.
    #[error("strategy `{id}` does not support {what}")]
    Unsupported { id: String, what: &'static str },
    /// A setup or audit call timed out.
    #[error("{0} timed out")]
    Timeout(&'static str),
    /// A library's adapter failed to start or broke the protocol (the message names it).
    #[error("{0}")]
    Adapter(String),
}

/// The audit of `skus` SKUs from `(sku, final stock)` and `(sku, orders)` pairs, as the stores'
/// queries return them: a SKU with no order row sold nothing.
pub(crate) fn audits(
    skus: u32,
    stock: impl IntoIterator<Item = (u32, i64)>,
    orders: impl IntoIterator<Item = (u32, i64)>,
) -> Vec<SkuAudit> {
    let mut out: Vec<SkuAudit> = (0..skus)
        .map(|sku| SkuAudit {
            sku,
            final_stock: 0,
            sold: 0,
        })
        .collect();
    for (sku, qty) in stock {
        out[sku as usize].final_stock = qty;
    }
    for (sku, n) in orders {
        out[sku as usize].sold = n as u64;
    }
    out
}

/// `calls` network calls of at most `each`.
pub(crate) fn calls(n: u32, each: Duration) -> Duration {
    each * n
}

/// Bound of opening a strategy's connections before the load starts. Not measured, and a busy
/// machine (servers, worker processes and a ZooKeeper election sharing two cores) can need
/// seconds: `load.timeout` is for the calls that are measured. 30 s: in CI (three test threads
/// beside containers) a ZooKeeper ensemble of 200 ms ticks could not open a session in 15 s.
pub const SETUP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Runs `fut` with a deadline; a timeout becomes [`ErrorKind::Timeout`].
pub(crate) async fn within<T, E>(
    limit: Duration,
    fut: impl std::future::Future<Output = Result<T, E>>,
    classify: impl FnOnce(&E) -> ErrorKind,
) -> Result<T, ErrorKind> {
    match tokio::time::timeout(limit, fut).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(classify(&e)),
        Err(_) => Err(ErrorKind::Timeout),
    }
}

/// Jittered exponential backoff for mysql-optimistic's retries: `base · 2^n`, capped at
/// `8 · base`, with ±50% jitter so retrying buyers do not march in step.
pub(crate) fn backoff(base: Duration, retry: u32) -> Duration {
    let exp = base.saturating_mul(1 << retry.min(3));
    let jitter: f64 = rand::random_range(0.5..1.5);
    exp.mul_f64(jitter)
}
