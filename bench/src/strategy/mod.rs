//! Strategy: how one buyer takes one unit of stock.
//!
//! Two extension points:
//! - [`Lock`]: acquire → [`Lease`] (with an optional fencing token) → release. Every lock runs
//!   the same critical section ([`mysql::MysqlStore::critical_section`]), so locks are compared
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

mod etcd;
mod locked;
pub mod mysql;
pub mod mysql_lock_table;
mod mysql_strategies;
mod redis_conn;
mod redis_lua_decr;
pub mod redis_reentrant;
mod redis_setnx;
pub mod redlock;
mod zookeeper;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;

use crate::check::SkuAudit;
use crate::cluster::{Endpoints, Needs};
use crate::record::{ErrorKind, LeaseSpan, Outcome};
use crate::workload::Workload;

pub use locked::Locked;

/// One purchase to attempt.
#[derive(Debug, Clone, Copy)]
pub struct Purchase<'a> {
    /// Attempt number in schedule order; also the buyer id written on the order.
    pub seq: u64,
    /// Buyer loop running it (selects a connection).
    pub client: u32,
    /// Item to buy.
    pub sku: u32,
    /// Where the attempt leaves the lease it held. The driver owns it, so a lease is recorded
    /// even when the attempt is cut at its bound and its future dropped mid-way.
    pub lease: &'a LeaseSlot,
}

/// The lease an attempt held, left where the driver finds it whatever way the attempt ended.
#[derive(Debug, Default)]
pub struct LeaseSlot(std::sync::Mutex<Option<LeaseSpan>>);

impl LeaseSlot {
    /// Records the attempt's lease (a later call replaces an earlier one).
    pub fn put(&self, span: LeaseSpan) {
        *self.0.lock().expect("lease slot lock is never poisoned") = Some(span);
    }

    /// The recorded lease, if the attempt held one.
    pub fn take(&self) -> Option<LeaseSpan> {
        self.0
            .lock()
            .expect("lease slot lock is never poisoned")
            .take()
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
        }
    }

    /// Whether the client already knows, at `now`, that the lease has ended: its renewal found
    /// it gone, or its validity has passed. (Release may find out more: see [`Lock::release`].)
    pub fn known_lost(&self, now: Instant) -> bool {
        self.keepalive.as_ref().is_some_and(KeepAlive::found_lost)
            || self.valid_until.is_some_and(|v| now > v)
    }
}

/// A background task that keeps a lease alive; aborted by [`KeepAlive::stop`] or on drop, so
/// it never outlives the attempt that took the lease.
#[derive(Debug)]
pub struct KeepAlive {
    task: tokio::task::AbortHandle,
    /// Set when the task ended because it found the lease gone.
    lost: Arc<AtomicBool>,
}

impl KeepAlive {
    /// Spawns `task` on the runtime; it returns `true` if it stopped because it found the
    /// lease gone (expired, or owned by another), `false` if it gave up for another reason.
    pub fn spawn(task: impl std::future::Future<Output = bool> + Send + 'static) -> Self {
        let lost = Arc::new(AtomicBool::new(false));
        let flag = lost.clone();
        let task = tokio::spawn(async move {
            if task.await {
                flag.store(true, Ordering::SeqCst);
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
        self.lost.load(Ordering::SeqCst)
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

/// A mutual-exclusion lock over a key.
#[async_trait]
pub trait Lock: Send + Sync {
    /// Creates whatever the lock keeps server-side for `skus` keys (wiping earlier runs).
    async fn prepare(&self, _skus: u32) -> Result<(), StrategyError> {
        Ok(())
    }

    /// Takes the lock on `key` for `token`, retrying until `lock.acquire_timeout`.
    async fn acquire(&self, client: u32, key: &str, token: &str) -> Result<Lease, AcquireError>;

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
}

/// Where the stock lives: seeded before the run, audited after it.
#[async_trait]
pub trait Store: Send + Sync {
    /// Creates the schema / keys and sets every SKU's stock (wiping earlier runs).
    async fn prepare(&self, skus: u32, stock: u64) -> Result<(), StrategyError>;
    /// Reads the final stock and the orders written, per SKU. Never trusts client counters.
    async fn audit(&self, skus: u32) -> Result<Vec<SkuAudit>, StrategyError>;
    /// Closes connections cleanly before the servers stop.
    async fn close(&self) {}
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
}

/// `calls` network calls of at most `each`.
pub(crate) fn calls(n: u32, each: Duration) -> Duration {
    each * n
}

/// What kind of row a strategy is in the comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// A lock around the shared critical section.
    Lock,
    /// A deduction that needs no separate lock.
    LockFree,
    /// A known-unsafe control: the checker must catch it.
    Control,
}

/// A registered strategy.
#[derive(Debug, Clone, Copy)]
pub struct StrategyInfo {
    /// Id used on the command line.
    pub id: &'static str,
    /// Lock, lock-free or control.
    pub kind: Kind,
    /// Whether buyers take a lock (and record leases): the lock half of the verdict applies.
    pub locks: bool,
    /// Whether the store refuses writes whose fencing token is older than one it has seen.
    pub fenced: bool,
    /// Servers it needs.
    pub needs: Needs,
    /// Where the lock's fencing token comes from, for locks that issue one (the `-fenced`
    /// variant hands it to the store).
    pub fence_token: Option<&'static str>,
    /// One line for `lockbench list`.
    pub about: &'static str,
}

impl StrategyInfo {
    /// Rejects a workload the strategy cannot run (checked before any server starts).
    pub fn supports(&self, w: &Workload) -> Result<(), StrategyError> {
        if !w.critical_section.touch_store && self.kind != Kind::Lock {
            return Err(StrategyError::Unsupported {
                id: self.id.into(),
                what: "critical_section.touch_store = false (measuring the lock alone needs a lock)",
            });
        }
        Ok(())
    }

    /// The service that decides who may sell (where server faults land by default): the
    /// consensus ensemble or Redis for distributed locks, MariaDB for the database strategies.
    pub fn lock_service(&self) -> crate::cluster::Service {
        use crate::cluster::Service;
        let n = self.needs;
        if n.etcd {
            Service::Etcd
        } else if n.zookeeper {
            Service::Zookeeper
        } else if n.redis || n.redlock || n.sentinel {
            Service::Redis
        } else {
            Service::Mariadb
        }
    }

    /// Whether the strategy claims it never oversells (controls do not).
    pub fn claims_safety(&self) -> bool {
        self.kind != Kind::Control
    }
}

/// Bound of opening a strategy's connections before the load starts. Not measured, and a busy
/// machine (servers, worker processes and a ZooKeeper election sharing two cores) can need
/// seconds: `load.timeout` is for the calls that are measured.
pub const SETUP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

const MARIADB: Needs = Needs {
    mariadb: true,
    ..Needs::NONE
};
const MARIADB_REDIS: Needs = Needs {
    mariadb: true,
    redis: true,
    ..Needs::NONE
};
const REDIS: Needs = Needs {
    redis: true,
    ..Needs::NONE
};
const MARIADB_SENTINEL: Needs = Needs {
    mariadb: true,
    sentinel: true,
    ..Needs::NONE
};
const MARIADB_REDLOCK: Needs = Needs {
    mariadb: true,
    redlock: true,
    ..Needs::NONE
};
const MARIADB_ZOOKEEPER: Needs = Needs {
    mariadb: true,
    zookeeper: true,
    ..Needs::NONE
};
const MARIADB_ETCD: Needs = Needs {
    mariadb: true,
    etcd: true,
    ..Needs::NONE
};

/// Every strategy, in the order the comparison lists them.
pub const ALL: &[StrategyInfo] = &[
    StrategyInfo {
        id: "none",
        locks: false,
        fenced: false,
        kind: Kind::Control,
        fence_token: None,
        needs: MARIADB,
        about: "control: the critical section with no lock at all; must oversell under contention",
    },
    StrategyInfo {
        id: "mysql-for-update",
        locks: true,
        fenced: false,
        kind: Kind::Lock,
        fence_token: None,
        needs: MARIADB,
        about: "SELECT … FOR UPDATE row lock held by the transaction around the critical section",
    },
    StrategyInfo {
        id: "mysql-optimistic",
        locks: false,
        fenced: false,
        kind: Kind::LockFree,
        fence_token: None,
        needs: MARIADB,
        about: "version column: UPDATE … WHERE version = read; bounded retries with backoff",
    },
    StrategyInfo {
        id: "mysql-atomic",
        locks: false,
        fenced: false,
        kind: Kind::LockFree,
        fence_token: None,
        needs: MARIADB,
        about: "one atomic UPDATE … SET qty = qty - 1 WHERE qty > 0, then the order row (no lock)",
    },
    StrategyInfo {
        id: "mysql-lock-table",
        locks: true,
        fenced: false,
        kind: Kind::Lock,
        fence_token: Some("lock row takeover counter"),
        needs: MARIADB,
        about: "lock row per key (owner, expiry, reentrancy count); expired locks taken over atomically",
    },
    StrategyInfo {
        id: "mysql-lock-table-fenced",
        locks: true,
        fenced: true,
        kind: Kind::Lock,
        fence_token: Some("lock row takeover counter"),
        needs: MARIADB,
        about: "mysql-lock-table with the row's takeover counter as fencing token; stale writes refused",
    },
    StrategyInfo {
        id: "redis-setnx",
        locks: true,
        fenced: false,
        kind: Kind::Lock,
        fence_token: None,
        needs: MARIADB_REDIS,
        about: "Redis SET key token NX PX ttl, Lua compare-and-delete unlock; stock in MariaDB",
    },
    StrategyInfo {
        id: "redis-setnx-watchdog",
        locks: true,
        fenced: false,
        kind: Kind::Lock,
        fence_token: None,
        needs: MARIADB_REDIS,
        about: "redis-setnx plus a watchdog renewing the lease every ttl/3 while it is still ours",
    },
    StrategyInfo {
        id: "redis-setnx-fenced",
        locks: true,
        fenced: true,
        kind: Kind::Lock,
        fence_token: Some("Redis INCR counter"),
        needs: MARIADB_REDIS,
        about: "redis-setnx with a fencing token from a Redis INCR; the store refuses stale tokens",
    },
    StrategyInfo {
        id: "redis-reentrant",
        locks: true,
        fenced: false,
        kind: Kind::Lock,
        fence_token: None,
        needs: MARIADB_REDIS,
        about: "Redis hash owner -> count, Lua acquire / release (reentrant, Redisson-style)",
    },
    StrategyInfo {
        id: "redlock",
        locks: true,
        fenced: false,
        kind: Kind::Lock,
        fence_token: None,
        needs: MARIADB_REDLOCK,
        about: "Redlock over 5 independent Redis: majority + validity = ttl - elapsed - drift",
    },
    StrategyInfo {
        id: "redis-sentinel",
        locks: true,
        fenced: false,
        kind: Kind::Lock,
        fence_token: None,
        needs: MARIADB_SENTINEL,
        about: "redis-setnx on the master Sentinel names (1 master, 2 async replicas), re-resolved on errors",
    },
    StrategyInfo {
        id: "redis-get-del",
        locks: true,
        fenced: false,
        kind: Kind::Control,
        fence_token: None,
        needs: MARIADB_REDIS,
        about: "broken control: SET NX PX, but released by GET then DEL (two commands, not atomic)",
    },
    StrategyInfo {
        id: "redis-setnx-expire",
        locks: true,
        fenced: false,
        kind: Kind::Control,
        needs: MARIADB_REDIS,
        fence_token: None,
        about: "broken control: SETNX then PEXPIRE as two commands; a client dying between them leaves a lock that never expires",
    },
    StrategyInfo {
        id: "redis-lua-decr",
        locks: false,
        fenced: false,
        kind: Kind::LockFree,
        fence_token: None,
        needs: REDIS,
        about: "stock in Redis: one Lua script checks, decrements and appends the order (no lock)",
    },
    StrategyInfo {
        id: "zookeeper",
        locks: true,
        fenced: false,
        kind: Kind::Lock,
        fence_token: Some("lock node czxid"),
        needs: MARIADB_ZOOKEEPER,
        about: "ZooKeeper ephemeral sequential node, watch the predecessor (fair); czxid fence",
    },
    StrategyInfo {
        id: "etcd",
        locks: true,
        fenced: false,
        kind: Kind::Lock,
        fence_token: Some("lock key create revision"),
        needs: MARIADB_ETCD,
        about: "etcd lease + v3 lock, keep-alive every ttl/3; key's create revision fence",
    },
    StrategyInfo {
        id: "zookeeper-fenced",
        locks: true,
        fenced: true,
        kind: Kind::Lock,
        fence_token: Some("lock node czxid"),
        needs: MARIADB_ZOOKEEPER,
        about: "zookeeper with the lock node's czxid as fencing token; stale writes refused",
    },
    StrategyInfo {
        id: "etcd-fenced",
        locks: true,
        fenced: true,
        kind: Kind::Lock,
        fence_token: Some("lock key create revision"),
        needs: MARIADB_ETCD,
        about: "etcd with the lock key's create revision as fencing token; stale writes refused",
    },
];

/// Looks a strategy up by id.
pub fn find(id: &str) -> Result<&'static StrategyInfo, StrategyError> {
    ALL.iter()
        .find(|s| s.id == id)
        .ok_or_else(|| StrategyError::Unknown {
            id: id.to_string(),
            known: ALL.iter().map(|s| s.id).collect::<Vec<_>>().join(", "),
        })
}

/// A strategy ready to run, with the store it sells from.
pub struct Built {
    /// The purchase attempt.
    pub strategy: Arc<dyn Strategy>,
    /// The store to prepare and audit.
    pub store: Arc<dyn Store>,
}

/// Connects strategy `id` to its servers.
pub async fn build(id: &str, ep: &Endpoints, w: &Workload) -> Result<Built, StrategyError> {
    let info = find(id)?;
    info.supports(w)?;
    let mysql = || async {
        let e = ep.mysql.as_ref().ok_or(StrategyError::Missing {
            id: id.into(),
            what: "MariaDB",
        })?;
        mysql::MysqlStore::connect(e, &ep.prefix, w)
            .await
            .map(Arc::new)
    };
    let redis_auth = ep.redis_auth.as_ref();
    let redis_addr = || {
        ep.redis.first().copied().ok_or(StrategyError::Missing {
            id: id.into(),
            what: "Redis",
        })
    };
    let cluster = |addrs: &Vec<std::net::SocketAddr>, what: &'static str| {
        if addrs.is_empty() {
            Err(StrategyError::Missing {
                id: id.into(),
                what,
            })
        } else {
            Ok(addrs.clone())
        }
    };
    let built = match info.id {
        "none" => {
            let store = mysql().await?;
            Built {
                strategy: Arc::new(mysql_strategies::NoLock::new(store.clone(), w)),
                store,
            }
        }
        "mysql-for-update" => {
            let store = mysql().await?;
            Built {
                strategy: Arc::new(mysql_strategies::ForUpdate::new(store.clone(), w)),
                store,
            }
        }
        "mysql-optimistic" => {
            let store = mysql().await?;
            Built {
                strategy: Arc::new(mysql_strategies::Optimistic::new(store.clone(), w)),
                store,
            }
        }
        "mysql-atomic" => {
            let store = mysql().await?;
            Built {
                strategy: Arc::new(mysql_strategies::Atomic::new(store.clone())),
                store,
            }
        }
        "redis-setnx"
        | "redis-setnx-watchdog"
        | "redis-setnx-fenced"
        | "redis-get-del"
        | "redis-setnx-expire" => {
            use redis_setnx::{Acquire, Flavor, Release, SetNx};
            let flavor = match info.id {
                "redis-setnx-expire" => Flavor {
                    acquire: Acquire::SetNxThenExpire,
                    ..Flavor::PLAIN
                },
                "redis-setnx-watchdog" => Flavor {
                    watchdog: true,
                    ..Flavor::PLAIN
                },
                "redis-setnx-fenced" => Flavor {
                    fenced: true,
                    ..Flavor::PLAIN
                },
                "redis-get-del" => Flavor {
                    release: Release::GetThenDel,
                    ..Flavor::PLAIN
                },
                _ => Flavor::PLAIN,
            };
            let store = mysql().await?;
            let locked = Locked::new(
                SetNx::connect(redis_addr()?, redis_auth, &ep.prefix, w, flavor).await?,
                store.clone(),
                w,
            );
            let locked = if flavor.fenced {
                locked.fenced()
            } else {
                locked
            };
            Built {
                strategy: Arc::new(locked),
                store,
            }
        }
        "mysql-lock-table" | "mysql-lock-table-fenced" => {
            let fenced = info.fenced;
            let store = mysql().await?;
            let lock = mysql_lock_table::LockTable::new(store.clone(), w, fenced);
            let locked = Locked::new(lock, store.clone(), w);
            Built {
                strategy: Arc::new(if fenced { locked.fenced() } else { locked }),
                store,
            }
        }
        "redis-reentrant" => {
            let store = mysql().await?;
            let lock = redis_reentrant::Reentrant::connect(redis_addr()?, redis_auth, w).await?;
            Built {
                strategy: Arc::new(Locked::new(lock, store.clone(), w)),
                store,
            }
        }
        "redlock" => {
            let store = mysql().await?;
            if ep.redis.len() < crate::cluster::REDLOCK_NODES {
                return Err(StrategyError::Missing {
                    id: id.into(),
                    what: "five independent Redis servers",
                });
            }
            let lock = redlock::Redlock::connect(&ep.redis, redis_auth, w).await?;
            Built {
                strategy: Arc::new(Locked::new(lock, store.clone(), w)),
                store,
            }
        }
        "redis-sentinel" => {
            if ep.sentinels.is_empty() {
                return Err(StrategyError::Missing {
                    id: id.into(),
                    what: "Redis Sentinels",
                });
            }
            let store = mysql().await?;
            let target = redis_conn::RedisTarget::via_sentinels(ep, w).await?;
            let lock = redis_setnx::SetNx::on(target, &ep.prefix, w, redis_setnx::Flavor::PLAIN)?;
            Built {
                strategy: Arc::new(Locked::new(lock, store.clone(), w)),
                store,
            }
        }
        "redis-lua-decr" => {
            let store = Arc::new(
                redis_lua_decr::LuaDecr::connect(redis_addr()?, redis_auth, &ep.prefix, w).await?,
            );
            Built {
                strategy: store.clone(),
                store,
            }
        }
        "zookeeper" | "zookeeper-fenced" => {
            let store = mysql().await?;
            let addrs = cluster(&ep.zookeeper, "ZooKeeper")?;
            let lock = Locked::new(
                zookeeper::ZkLock::connect(&addrs, ep.zookeeper_auth.as_ref(), &ep.prefix, w)
                    .await?,
                store.clone(),
                w,
            );
            let lock = if info.fenced { lock.fenced() } else { lock };
            Built {
                strategy: Arc::new(lock),
                store,
            }
        }
        "etcd" | "etcd-fenced" => {
            let store = mysql().await?;
            let addrs = cluster(&ep.etcd, "etcd")?;
            let lock = Locked::new(
                etcd::EtcdLock::connect(&addrs, ep.etcd_auth.as_ref(), w).await?,
                store.clone(),
                w,
            );
            let lock = if info.fenced { lock.fenced() } else { lock };
            Built {
                strategy: Arc::new(lock),
                store,
            }
        }
        other => unreachable!("strategy `{other}` is registered but not built"),
    };
    Ok(built)
}

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

/// Jittered exponential backoff for retries: `base · 2^n`, capped at `8 · base`, with ±50%
/// jitter so retrying buyers do not march in step.
pub(crate) fn backoff(base: Duration, retry: u32) -> Duration {
    let exp = base.saturating_mul(1 << retry.min(3));
    let jitter: f64 = rand::random_range(0.5..1.5);
    exp.mul_f64(jitter)
}

/// Spins on `try_once` (true = acquired) with [`backoff`] until `acquire_timeout`: the retry
/// loop of every lock that has no server-side wait queue.
pub(crate) async fn spin<F, Fut>(
    acquire_timeout: Duration,
    retry_interval: Duration,
    mut try_once: F,
) -> Result<(), AcquireError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<bool, ErrorKind>>,
{
    let started = tokio::time::Instant::now();
    for retry in 0.. {
        if try_once().await.map_err(AcquireError::Failed)? {
            return Ok(());
        }
        let pause = backoff(retry_interval, retry);
        if started.elapsed() + pause > acquire_timeout {
            break;
        }
        tokio::time::sleep(pause).await;
    }
    Err(AcquireError::Busy)
}
