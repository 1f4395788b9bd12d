//! What a strategy is to the rest of lockbench: its [`StrategyInfo`] (metadata and
//! constructor, declared in the strategy's own file) and what the constructor gets
//! ([`Setup`]) and returns ([`Built`]).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use super::sql::mysql::{MysqlStore, SharedStore};
use super::sql::pay::MysqlPayDesk;
use super::sql::postgres::{PgStore, SharedPgStore};
use super::wait::{WaitDefault, WaitPolicy, Waiter};
use super::{Enforcement, Lock, Locked, PayDesk, Store, Strategy, StrategyError};
use crate::cluster::{Endpoints, Needs, Service};
use crate::workload::Workload;

/// What kind of row a strategy is in the comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// A lock around the shared critical section.
    Lock,
    /// A deduction that needs no separate lock.
    LockFree,
    /// A known-unsafe control: the checker must catch it.
    Control,
}

/// The group a strategy is shown in, so a report with dozens of rows compares like with like.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Family {
    /// Locks and deductions in MariaDB alone.
    Database,
    /// PostgreSQL: its advisory locks, row locks and atomic updates.
    Postgres,
    /// One Redis server (beside the MariaDB store).
    RedisSingle,
    /// Several Redis servers: Redlock's independent masters, Sentinel's replicated master.
    RedisMulti,
    /// ZooKeeper and etcd: locks on a consensus protocol.
    Consensus,
    /// Real client libraries through adapters (`lib:<name>`).
    Libraries,
    /// Known-unsafe controls.
    Controls,
}

impl Family {
    /// Every family, in the order reports show them.
    pub const ALL: [Family; 7] = [
        Self::Database,
        Self::Postgres,
        Self::RedisSingle,
        Self::RedisMulti,
        Self::Consensus,
        Self::Libraries,
        Self::Controls,
    ];

    /// The heading a report gives the family.
    pub fn title(self) -> &'static str {
        match self {
            Self::Database => "database",
            Self::Postgres => "PostgreSQL",
            Self::RedisSingle => "Redis, single node",
            Self::RedisMulti => "Redis, multi-node",
            Self::Consensus => "consensus",
            Self::Libraries => "libraries",
            Self::Controls => "controls",
        }
    }
}

/// A strategy's constructor: connects it to its servers.
pub type BuildFn = for<'a> fn(Setup<'a>) -> BoxFuture<'a, Result<Built, StrategyError>>;

/// A boxed future (constructors are stored as plain function pointers).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

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
    /// How its buyers wait for a busy lock by default, for locks that wait client-side (no
    /// server-side queue); `None` for the others.
    pub wait: Option<WaitDefault>,
    /// Connects it to its servers.
    pub build: BuildFn,
}

impl StrategyInfo {
    /// Its family, from what it is and the servers its lock runs on (every lock sells from
    /// MariaDB, so MariaDB alone means a database strategy).
    pub fn family(&self) -> Family {
        let n = self.needs;
        if self.kind == Kind::Control {
            Family::Controls
        } else if self.id.starts_with("lib:") {
            Family::Libraries
        } else if n.zookeeper || n.etcd {
            Family::Consensus
        } else if n.redlock || n.sentinel || n.redis_cluster {
            Family::RedisMulti
        } else if n.redis {
            Family::RedisSingle
        } else if n.postgres {
            Family::Postgres
        } else {
            Family::Database
        }
    }

    /// Whether its lock is a lease that ends by itself unless renewed (a TTL, a session, a
    /// library's lease): a holder can outlive it, so the run reports its danger window.
    /// Redis, ZooKeeper, etcd, the libraries and the lock table's expiry; a database's locks end
    /// with their session or transaction.
    pub fn leases(&self) -> bool {
        let n = self.needs;
        self.locks
            && (n.redis
                || n.redlock
                || n.sentinel
                || n.redis_cluster
                || n.zookeeper
                || n.etcd
                || self.id.starts_with("lib:")
                || self.id.starts_with("mysql-lock-table"))
    }
}

/// A strategy ready to run, with the store it sells from.
pub struct Built {
    /// The purchase attempt.
    pub strategy: Arc<dyn Strategy>,
    /// The store to prepare and audit.
    pub store: Arc<dyn Store>,
    /// The lock alone, for lock strategies (tests take and release it directly).
    pub lock: Option<Arc<dyn Lock>>,
}

/// What a constructor gets: its entry, the servers and the workload.
#[derive(Clone, Copy)]
pub struct Setup<'a> {
    /// The entry being built.
    pub info: &'static StrategyInfo,
    /// Where the servers are.
    pub ep: &'a Endpoints,
    /// The validated workload.
    pub w: &'a Workload,
}

impl Setup<'_> {
    fn missing(&self, what: &'static str) -> StrategyError {
        StrategyError::Missing {
            id: self.info.id.into(),
            what,
        }
    }

    /// The MariaDB store every lock sells from.
    pub async fn mariadb(self) -> Result<SharedStore, StrategyError> {
        let e = self.ep.mysql.as_ref().ok_or(self.missing("MariaDB"))?;
        let blind = self.info.id.ends_with(BLIND_REAPER);
        let desk = MysqlPayDesk::new(e, &self.ep.prefix, self.w, blind);
        let desk = desk.map(|d| Arc::new(d) as Arc<dyn PayDesk>);
        MysqlStore::connect(e, &self.ep.prefix, self.w)
            .await
            .map(|s| Arc::new(s.enforcing(self.info.enforcement()).paying(desk)))
    }

    /// The PostgreSQL store (the `pg-*` strategies that sell from PostgreSQL).
    pub async fn postgres(self) -> Result<SharedPgStore, StrategyError> {
        let e = self
            .ep
            .postgres
            .as_ref()
            .ok_or(self.missing("PostgreSQL"))?;
        PgStore::connect(e, &self.ep.prefix, self.w)
            .await
            .map(|s| Arc::new(s.enforcing(self.info.enforcement())))
    }

    /// How this strategy's buyers wait for a busy lock (its default, with the workload's
    /// keys applied), ready to subscribe for `notify`.
    pub fn waiter(&self) -> Result<Waiter, StrategyError> {
        Ok(Waiter::new(self.info.wait_policy(self.w)?, &self.w.lock))
    }

    /// The single Redis server.
    pub fn redis(&self) -> Result<SocketAddr, StrategyError> {
        self.ep.redis.first().copied().ok_or(self.missing("Redis"))
    }

    /// The members of a replicated service (at least one).
    pub fn members(
        &self,
        addrs: &[SocketAddr],
        what: &'static str,
    ) -> Result<Vec<SocketAddr>, StrategyError> {
        if addrs.is_empty() {
            Err(self.missing(what))
        } else {
            Ok(addrs.to_vec())
        }
    }

    /// `lock` around the critical section of `store`, fenced when the entry says so.
    pub fn locked<L: Lock + 'static>(&self, lock: L, store: SharedStore) -> Built {
        let locked = Locked::new(lock, store.clone(), self.w);
        let lock: Arc<dyn Lock> = locked.lock();
        Built {
            lock: Some(lock),
            strategy: Arc::new(if self.info.fenced {
                locked.fenced()
            } else {
                locked
            }),
            store,
        }
    }

    /// A strategy that sells from `store` itself (lock-free, or a lock its transaction takes).
    pub fn on_store(&self, strategy: impl Strategy + 'static, store: Arc<dyn Store>) -> Built {
        Built {
            strategy: Arc::new(strategy),
            store,
            lock: None,
        }
    }
}

impl StrategyInfo {
    /// Connects this strategy to its servers.
    pub async fn connect(
        &'static self,
        ep: &Endpoints,
        w: &Workload,
    ) -> Result<Built, StrategyError> {
        (self.build)(Setup { info: self, ep, w }).await
    }

    /// How its buyers wait in a run of `w`; a `lock.wait` the lock cannot do is an error, and
    /// so is asking a strategy without [`Self::wait`] (it has no client-side wait).
    pub fn wait_policy(&self, w: &Workload) -> Result<WaitPolicy, StrategyError> {
        match &self.wait {
            Some(d) => d.resolve(self.id, &w.lock),
            None => Err(StrategyError::Unsupported {
                id: self.id.into(),
                what: "a client-side wait (it queues waiters server-side)",
            }),
        }
    }

    /// Rejects a workload the strategy cannot run (checked before any server starts).
    pub fn supports(&self, w: &Workload) -> Result<(), StrategyError> {
        if self.wait.is_some() {
            self.wait_policy(w)?;
        }
        if !w.critical_section.touch_store && self.kind != Kind::Lock {
            return Err(StrategyError::Unsupported {
                id: self.id.into(),
                what: "critical_section.touch_store = false (measuring the lock alone needs a lock)",
            });
        }
        if w.load.read_fraction > 0.0 && !self.locks {
            return Err(StrategyError::Unsupported {
                id: self.id.into(),
                what: "load.read_fraction > 0 (a read is judged by the lock it holds: torn reads \
                       break the lock half of the verdict, and this strategy takes no lock)",
            });
        }
        if w.pay.is_some() && !self.runs_pay() {
            return Err(StrategyError::Unsupported {
                id: self.id.into(),
                what: "[pay] (reserve, then pay): the reaper restocks through MariaDB's stock \
                       row, which serializes it only with buyers who deduct through that row \
                       (none, mysql-atomic and its controls, mysql-for-update, mysql-optimistic)",
            });
        }
        if w.pay.is_none() && self.id.ends_with(BLIND_REAPER) {
            return Err(StrategyError::Unsupported {
                id: self.id.into(),
                what: "a workload without [pay]: its blind reaper runs only where reservations \
                       expire (workloads/sale-pay.toml)",
            });
        }
        if w.buyers.is_some() && !self.runs_sales() {
            return Err(StrategyError::Unsupported {
                id: self.id.into(),
                what: "[buyers] (a sale): its unit rows take one unit per order and keep no \
                       buyer limit or request key yet",
            });
        }
        Ok(())
    }

    /// Whether it can run a sale's buyers (`[buyers]`): every strategy but `pg-skip-locked`,
    /// whose rows of one unit each keep no buyer limit or request key yet.
    pub fn runs_sales(&self) -> bool {
        self.id != "pg-skip-locked"
    }

    /// Whether it can run reserve-then-pay (`[pay]`): its buyers deduct through MariaDB's
    /// stock row (an atomic update, the row lock, the version), the row the reaper restocks
    /// through, so the two are serialized; a lock outside the store would need the reaper to
    /// take it too, which is not built.
    pub fn runs_pay(&self) -> bool {
        self.needs == needs::MARIADB && !self.id.starts_with("mysql-lock-table")
    }

    /// The service that decides who may sell (where server faults land by default): the
    /// consensus ensemble or Redis for distributed locks, MariaDB for the database strategies.
    pub fn lock_service(&self) -> Service {
        let n = self.needs;
        if n.etcd {
            Service::Etcd
        } else if n.zookeeper {
            Service::Zookeeper
        } else if n.redis_cluster {
            Service::RedisCluster
        } else if n.redis || n.redlock || n.sentinel {
            Service::Redis
        } else if n.postgres {
            Service::Postgres
        } else {
            Service::Mariadb
        }
    }

    /// How it enforces a sale's limit and request id, derived from the entry: a lock checks
    /// inside it; a lock-free strategy by its store's guards (Redis: one script), minus the one
    /// a control's id says it leaves out (`-no-limit`, `-not-idempotent`); `none` checks with
    /// no lock.
    pub fn enforcement(&self) -> Enforcement {
        let n = self.needs;
        if self.locks {
            Enforcement::InsideLock
        } else if n.redis || n.redis_cluster {
            Enforcement::Script {
                limit: !self.id.ends_with(NO_LIMIT),
            }
        } else if self.kind == Kind::Control && !self.sale_control() {
            Enforcement::NoLock
        } else {
            Enforcement::StoreKeys {
                request: !self.id.ends_with(NOT_IDEMPOTENT),
                limit: !self.id.ends_with(NO_LIMIT),
            }
        }
    }

    /// A control of a sale's rules (`-no-limit`, `-not-idempotent`, `-blind-reaper`): caught
    /// only by a sale's buyers (the blind reaper: only with `[pay]`), so the job runs it in the
    /// sale part alone (in a steady part it is its correct twin and would read "not caught").
    pub fn sale_control(&self) -> bool {
        self.kind == Kind::Control
            && [NO_LIMIT, NOT_IDEMPOTENT, BLIND_REAPER]
                .iter()
                .any(|s| self.id.ends_with(s))
    }

    /// Whether the strategy claims it never oversells (controls do not).
    pub fn claims_safety(&self) -> bool {
        self.kind != Kind::Control
    }
}

/// The id suffix of a control that does not check the buyer's limit.
const NO_LIMIT: &str = "-no-limit";
/// The id suffix of a control that does not key the request id.
const NOT_IDEMPOTENT: &str = "-not-idempotent";
/// The id suffix of a control whose reaper returns what it selected without asking again.
const BLIND_REAPER: &str = "-blind-reaper";

/// The servers the strategies need, named once.
pub mod needs {
    use crate::cluster::Needs;

    /// MariaDB alone.
    pub const MARIADB: Needs = Needs {
        mariadb: true,
        ..Needs::NONE
    };
    /// Redis alone (the stock in Redis).
    pub const REDIS: Needs = Needs {
        redis: true,
        ..Needs::NONE
    };
    /// MariaDB and one Redis.
    pub const MARIADB_REDIS: Needs = Needs {
        mariadb: true,
        redis: true,
        ..Needs::NONE
    };
    /// MariaDB and a Sentinel-watched Redis.
    pub const MARIADB_SENTINEL: Needs = Needs {
        mariadb: true,
        sentinel: true,
        ..Needs::NONE
    };
    /// A Redis Cluster alone (the stock in the cluster).
    pub const REDIS_CLUSTER: Needs = Needs {
        redis_cluster: true,
        ..Needs::NONE
    };
    /// MariaDB and a Redis Cluster.
    pub const MARIADB_REDIS_CLUSTER: Needs = Needs {
        mariadb: true,
        redis_cluster: true,
        ..Needs::NONE
    };
    /// MariaDB and five independent Redis.
    pub const MARIADB_REDLOCK: Needs = Needs {
        mariadb: true,
        redlock: true,
        ..Needs::NONE
    };
    /// MariaDB and a ZooKeeper ensemble.
    pub const MARIADB_ZOOKEEPER: Needs = Needs {
        mariadb: true,
        zookeeper: true,
        ..Needs::NONE
    };
    /// MariaDB and an etcd cluster.
    pub const MARIADB_ETCD: Needs = Needs {
        mariadb: true,
        etcd: true,
        ..Needs::NONE
    };
    /// PostgreSQL alone (the stock in PostgreSQL).
    pub const POSTGRES: Needs = Needs {
        postgres: true,
        ..Needs::NONE
    };
    /// MariaDB (the stock) and PostgreSQL (the lock service).
    pub const MARIADB_POSTGRES: Needs = Needs {
        mariadb: true,
        postgres: true,
        ..Needs::NONE
    };
}
