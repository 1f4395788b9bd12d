//! The model of a run's servers: the services a strategy needs and where they come from, the
//! roles of their nodes, how strategies reach them (endpoints and logins), how results
//! describe them, and the options they are started with.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::builds::Builds;
use super::durability::{Appendfsync, Durability, SynchronousCommit};
use super::namespace::Prefix;
use crate::names::enum_names;

/// Where the servers of a run come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Provisioner {
    /// Child processes of lockbench, from the Debian packages (the default).
    #[default]
    Local,
    /// Containers on a private Docker network, started through testcontainers and removed
    /// at the end (`--provision containers`).
    Containers,
    /// Servers that already exist, named in a target file (`--target`); lockbench is only a
    /// client of them.
    #[value(skip)]
    Target,
}

enum_names!(Provisioner {
    Local = "local",
    Containers = "containers",
    Target = "target",
});

/// The kinds of server a strategy can ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Service {
    /// A MariaDB server with a `lockbench` database and a password user.
    Mariadb,
    /// A Redis server (standalone, master or replica).
    Redis,
    /// A Redis Sentinel.
    Sentinel,
    /// A node of a Redis Cluster (master or replica; roles change on failover).
    RedisCluster,
    /// A member of a 3-node ZooKeeper ensemble.
    Zookeeper,
    /// A member of a 3-node etcd cluster.
    Etcd,
    /// A PostgreSQL server (primary, or a streaming replica of it).
    Postgres,
}

enum_names!(Service {
    Mariadb = "mariadb",
    Redis = "redis",
    Sentinel = "sentinel",
    RedisCluster = "redis-cluster",
    Zookeeper = "zookeeper",
    Etcd = "etcd",
    Postgres = "postgres",
});

/// The servers one strategy needs; the run starts exactly these.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Needs {
    /// A MariaDB server (the stock table lives there for every MariaDB-backed strategy).
    pub mariadb: bool,
    /// One standalone Redis.
    pub redis: bool,
    /// Five independent Redis servers (Redlock).
    pub redlock: bool,
    /// A Redis master, two replicas and three Sentinels.
    pub sentinel: bool,
    /// A Redis Cluster: three masters, each with a replica.
    pub redis_cluster: bool,
    /// A 3-node ZooKeeper ensemble.
    pub zookeeper: bool,
    /// A 3-node etcd cluster.
    pub etcd: bool,
    /// A PostgreSQL primary.
    pub postgres: bool,
    /// A PostgreSQL primary and a streaming replica of it (`pg_basebackup -R`, asynchronous),
    /// which `OwnedCluster::promote` makes the primary after a fault of the first.
    pub postgres_replica: bool,
}

impl Needs {
    /// No servers; build others from it with `..Needs::NONE`.
    pub const NONE: Needs = Needs {
        mariadb: false,
        redis: false,
        redlock: false,
        sentinel: false,
        redis_cluster: false,
        zookeeper: false,
        etcd: false,
        postgres: false,
        postgres_replica: false,
    };

    /// Whether a run with these needs starts nodes of `service` (Redlock's nodes and a
    /// Sentinel setup's master and replicas are Redis nodes).
    pub fn runs(self, service: Service) -> bool {
        match service {
            Service::Mariadb => self.mariadb,
            Service::Redis => self.redis || self.redlock || self.sentinel,
            Service::Sentinel => self.sentinel,
            Service::RedisCluster => self.redis_cluster,
            Service::Zookeeper => self.zookeeper,
            Service::Etcd => self.etcd,
            Service::Postgres => self.postgres || self.postgres_replica,
        }
    }

    /// Names of the services needed, for listings.
    pub fn names(self) -> Vec<&'static str> {
        [
            (self.mariadb, "mariadb"),
            (self.redis, "redis"),
            (self.redlock, "redis×5"),
            (self.sentinel, "sentinel"),
            (self.redis_cluster, "redis-cluster"),
            (self.zookeeper, "zookeeper"),
            (self.etcd, "etcd"),
            (self.postgres && !self.postgres_replica, "postgres"),
            (self.postgres_replica, "postgres+replica"),
        ]
        .into_iter()
        .filter_map(|(needed, name)| needed.then_some(name))
        .collect()
    }

    /// Servers either needs (for `serve` of several strategies).
    pub fn union(self, o: Needs) -> Needs {
        Needs {
            mariadb: self.mariadb || o.mariadb,
            redis: self.redis || o.redis,
            redlock: self.redlock || o.redlock,
            sentinel: self.sentinel || o.sentinel,
            redis_cluster: self.redis_cluster || o.redis_cluster,
            zookeeper: self.zookeeper || o.zookeeper,
            etcd: self.etcd || o.etcd,
            postgres: self.postgres || o.postgres,
            postgres_replica: self.postgres_replica || o.postgres_replica,
        }
    }

    /// How many independent Redis servers to start.
    pub fn redis_nodes(&self) -> usize {
        if self.redlock {
            REDLOCK_NODES
        } else {
            usize::from(self.redis)
        }
    }
}

/// Independent Redis servers of a Redlock set.
pub const REDLOCK_NODES: usize = 5;

/// The role a node plays, so later fault injection can address "the master" or "the leader".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The only node of its service.
    Primary,
    /// The master a replicated set started with (Sentinel may promote another).
    Master,
    /// A replica of the master.
    Replica,
    /// A Sentinel watching the master.
    Sentinel,
    /// A voting member of a consensus ensemble (ZooKeeper, etcd): which member leads changes
    /// at run time, so it is not a role fixed at start; ask `OwnedCluster::leader`.
    Member,
}

enum_names!(Role {
    Primary = "primary",
    Master = "master",
    Replica = "replica",
    Sentinel = "sentinel",
    Member = "member",
});

/// How to reach the MariaDB of a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MysqlEndpoint {
    /// Address the server listens on.
    pub addr: SocketAddr,
    /// User with all privileges on `database`.
    pub user: String,
    /// Never written into results (only into the endpoints file of `lockbench serve`).
    #[serde(skip_serializing, default)]
    pub password: String,
    /// Database the harness owns.
    pub database: String,
}

/// How to reach the PostgreSQL of a run (its primary).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PostgresEndpoint {
    /// Address the server listens on.
    pub addr: SocketAddr,
    /// User owning `database`.
    pub user: String,
    /// Never written into results (only into the endpoints file of `lockbench serve`).
    #[serde(skip_serializing, default)]
    pub password: String,
    /// Database the harness owns.
    pub database: String,
    /// The connection pooler the buyers reach the server through (`servers.postgres_pooler`);
    /// the harness's own connections (setup, audit, counters) go to `addr` directly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pooler: Option<PoolerEndpoint>,
}

impl PostgresEndpoint {
    /// How to connect over TCP as this user (no TLS: the servers are private).
    pub fn connect_options(&self) -> sqlx::postgres::PgConnectOptions {
        sqlx::postgres::PgConnectOptions::new()
            .host(&self.addr.ip().to_string())
            .port(self.addr.port())
            .username(&self.user)
            .password(&self.password)
            .database(&self.database)
            .ssl_mode(sqlx::postgres::PgSslMode::Disable)
    }

    /// How a buyer connects: through the pooler when there is one, else as
    /// [`Self::connect_options`]. Behind a pooler the client sends no `extra_float_digits`
    /// (PgBouncer 1.18 refuses startup parameters it does not know) and, behind a transaction
    /// pooler, caches no prepared statement: the next transaction may run on another server
    /// connection, where the statement does not exist or another client's has its name.
    pub fn buyer_options(&self) -> sqlx::postgres::PgConnectOptions {
        let direct = self.connect_options();
        let Some(p) = &self.pooler else {
            return direct;
        };
        let opts = (direct.host(&p.addr.ip().to_string()))
            .port(p.addr.port())
            .extra_float_digits(None);
        if p.pooler.shares_sessions() {
            opts.statement_cache_capacity(0)
        } else {
            opts
        }
    }

    /// Whether the buyers' statements must go as simple queries, values inlined: a transaction
    /// pooler may run a statement's parse and its execution on two server connections.
    pub fn simple_queries(&self) -> bool {
        self.pooler.is_some_and(|p| p.pooler.shares_sessions())
    }
}

/// A connection pooler between the buyers and PostgreSQL (`servers.postgres_pooler`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Pooler {
    /// The buyers connect to the server directly.
    #[default]
    None,
    /// PgBouncer, `pool_mode = transaction`: a server connection serves one transaction (or
    /// one statement outside a transaction) of a client, then the next client's.
    PgbouncerTransaction,
    /// PgBouncer, `pool_mode = session`: a client keeps its server connection until it
    /// disconnects; the next client gets it after `DISCARD ALL`.
    PgbouncerSession,
}

enum_names!(Pooler {
    None = "none",
    PgbouncerTransaction = "pgbouncer-transaction",
    PgbouncerSession = "pgbouncer-session",
});

impl Pooler {
    /// Whether the buyers connect directly.
    pub fn is_none(&self) -> bool {
        *self == Pooler::None
    }

    /// PgBouncer's `pool_mode`, `None` without a pooler.
    pub fn pool_mode(self) -> Option<&'static str> {
        match self {
            Pooler::None => None,
            Pooler::PgbouncerTransaction => Some("transaction"),
            Pooler::PgbouncerSession => Some("session"),
        }
    }

    /// Whether one client's session state (a session advisory lock, a prepared statement)
    /// can end up on a server connection another client then uses: transaction pooling.
    pub fn shares_sessions(self) -> bool {
        self == Pooler::PgbouncerTransaction
    }

    /// Server connections for `clients` buyers: transaction pooling shares a few (4, and
    /// always fewer than the buyers when there are two or more), which is what it is for and
    /// what moves a session lock; session pooling gives each connected buyer one (a buyer keeps
    /// its connection, so with fewer the others would wait for one until they gave up).
    pub fn pool_size(self, clients: u32) -> u32 {
        match self {
            Pooler::PgbouncerTransaction => clients.saturating_sub(1).clamp(1, 4),
            _ => clients.max(1),
        }
    }
}

/// The pooler a buyer reaches PostgreSQL through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolerEndpoint {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Which pooler, in which mode.
    pub pooler: Pooler,
    /// Server connections it keeps for the run's database and user (`default_pool_size`).
    pub pool_size: u32,
}

/// The pooler a run puts between its buyers and PostgreSQL, and what it needs to know of the
/// workload.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pooling {
    /// Which pooler (`none`: the buyers connect directly).
    pub pooler: Pooler,
    /// The run's buyers: the pooler takes at least that many clients.
    pub clients: u32,
    /// `lock_timeout` of every server connection it opens (`lock.acquire_timeout`).
    pub lock_wait: Duration,
    /// `load.timeout`: `statement_timeout` is `lock_wait` plus this.
    pub timeout: Duration,
}

/// The session settings of a buyer (or lock) connection: `lock_timeout` = `lock_wait`,
/// `statement_timeout` = `lock_wait` + `timeout`, both in ms. Sent in the startup packet by a
/// direct buyer; set by the pooler on each server connection it opens.
pub fn session_settings(lock_wait: Duration, timeout: Duration) -> [(&'static str, String); 2] {
    let ms = |d: Duration| d.as_millis().max(1).to_string();
    [
        ("lock_timeout", ms(lock_wait)),
        ("statement_timeout", ms(lock_wait + timeout)),
    ]
}

/// A user and password for a Redis (ACL user, or `requirepass` with no user), a Sentinel or an
/// etcd cluster with auth enabled. The password never goes into results: `lockbench serve`'s
/// endpoints file carries it beside the endpoints, as it does the MariaDB one.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Auth {
    /// User name; `None`: Redis's `default` user (etcd always needs one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// Never serialised.
    #[serde(skip_serializing, default)]
    pub password: String,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Debug output ends up in logs and panic messages: never the password.
        f.debug_struct("Auth")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

impl Auth {
    /// `user:password`, ZooKeeper's digest scheme credentials.
    pub fn digest(&self) -> Vec<u8> {
        format!(
            "{}:{}",
            self.username.as_deref().unwrap_or_default(),
            self.password
        )
        .into_bytes()
    }
}

impl MysqlEndpoint {
    /// How to connect over TCP as this user (no TLS: the servers are private).
    pub fn connect_options(&self) -> sqlx::mysql::MySqlConnectOptions {
        sqlx::mysql::MySqlConnectOptions::new()
            .host(&self.addr.ip().to_string())
            .port(self.addr.port())
            .username(&self.user)
            .password(&self.password)
            .database(&self.database)
            .ssl_mode(sqlx::mysql::MySqlSslMode::Disabled)
    }
}

/// What strategies are given: addresses and credentials, never processes.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Endpoints {
    /// The MariaDB server, if the strategy needs one.
    pub mysql: Option<MysqlEndpoint>,
    /// Independent Redis servers (one, or five for Redlock).
    pub redis: Vec<SocketAddr>,
    /// Sentinels of the replicated Redis (the master is found through them).
    #[serde(default)]
    pub sentinels: Vec<SocketAddr>,
    /// Nodes of the Redis Cluster, masters and replicas (empty when not needed); a client
    /// learns the slot map from any of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redis_cluster: Vec<SocketAddr>,
    /// Client addresses of the ZooKeeper ensemble (empty when not needed).
    #[serde(default)]
    pub zookeeper: Vec<SocketAddr>,
    /// Client addresses of the etcd cluster members (empty when not needed).
    #[serde(default)]
    pub etcd: Vec<SocketAddr>,
    /// The PostgreSQL primary, if the strategy needs one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub postgres: Option<PostgresEndpoint>,
    /// Streaming replicas of that primary, same login (empty without one). After a failover
    /// the primary is whichever of `postgres.addr` and these is not in recovery
    /// (`postgres::current_primary` asks them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub postgres_standbys: Vec<SocketAddr>,
    /// Start of every key, table and node the strategies create on these servers.
    #[serde(default)]
    pub prefix: Prefix,
    /// Name under which the sentinels monitor the master (`None`: lockbench's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sentinel_master: Option<String>,
    /// Credentials of the Redis servers (also the master found through the sentinels).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis_auth: Option<Auth>,
    /// Credentials of the sentinels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sentinel_auth: Option<Auth>,
    /// Credentials of the etcd cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd_auth: Option<Auth>,
    /// Digest-scheme credentials of the ZooKeeper ensemble.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zookeeper_auth: Option<Auth>,
}

/// A node as written into results.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeInfo {
    /// Node name.
    pub name: String,
    /// Service it provides.
    pub service: Service,
    /// Role in its set.
    pub role: Role,
    /// Listening address.
    pub addr: SocketAddr,
    /// Version reported by the server.
    pub version: String,
    /// OS process id while it ran (tests use it to prove the process is gone); for a
    /// container, the host pid of its main process; 0 for an external target's server.
    pub pid: u32,
    /// Its log file (empty for an external target's server).
    pub log: PathBuf,
    /// The container serving it, when provisioned as containers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<ContainerInfo>,
    /// What it does with a write before acknowledging it (`None`: a server that keeps no data
    /// of the run, such as a Sentinel, or a summary older than this field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub durability: Option<Durability>,
}

/// A container that served a node.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ContainerInfo {
    /// Container id.
    pub id: String,
    /// Image it ran.
    pub image: String,
    /// The run's Docker network it was on (removed with it).
    pub network: String,
}

/// Where and how to start local servers.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// Directory that receives the server logs (kept with the results).
    pub log_dir: PathBuf,
    /// Address every node binds (loopback).
    pub bind: IpAddr,
    /// First port to use; `None` picks free ports. Every port is checked before start.
    pub base_port: Option<u16>,
    /// Preload the clock shim into the standalone Redis nodes, so clock faults can move their
    /// wall clocks (`OwnedCluster::set_clock`).
    pub clock_shim: bool,
    /// Run the nodes in network namespaces of a private network (`net.rs`), so partition
    /// faults can cut links. Needs root. (Containers always have a network of their own.)
    pub network: bool,
    /// Child processes or containers.
    pub provisioner: Provisioner,
    /// Persistence of every Redis node (standalone, Redlock's, Sentinel's master and replicas).
    pub redis_appendfsync: Appendfsync,
    /// Which build of each server local nodes run (containers run bookworm's only).
    pub builds: Builds,
    /// What every PostgreSQL node waits for before acknowledging a commit.
    pub postgres_synchronous_commit: SynchronousCommit,
    /// The pooler between the buyers and the PostgreSQL primary (local processes only).
    pub postgres_pooling: Pooling,
    /// MariaDB's `innodb_flush_log_at_trx_commit`: 1 (the default: the redo log fsynced at
    /// every commit) or 2 (written at commit, fsynced once a second).
    pub mariadb_flush_log_at_trx_commit: u8,
    /// Services whose local nodes keep their data on lazyfs (`lazyfs`): what power-loss and
    /// slow-disk faults need; empty for every other run, which then pays nothing.
    pub lazyfs: Vec<Service>,
    /// A slower network and disk for the cluster's whole life (a workload's `[environment]`).
    pub steady: Steady,
}

/// Every round trip through the private network lengthened by `rtt` (needs
/// [`ClusterOptions::network`]), every fsync on the lazyfs mounts by `fsync`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Steady {
    pub rtt: std::time::Duration,
    pub fsync: std::time::Duration,
}

impl ClusterOptions {
    /// Loopback, automatic ports, logs into `log_dir`.
    pub fn new(log_dir: impl Into<PathBuf>) -> Self {
        Self {
            log_dir: log_dir.into(),
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            base_port: None,
            clock_shim: false,
            network: false,
            provisioner: Provisioner::Local,
            redis_appendfsync: Appendfsync::Off,
            builds: Builds::default(),
            postgres_synchronous_commit: SynchronousCommit::On,
            postgres_pooling: Pooling::default(),
            mariadb_flush_log_at_trx_commit: 1,
            lazyfs: Vec::new(),
            steady: Steady::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provisioner_names_on_the_command_line_are_its_names() {
        use clap::ValueEnum;
        for p in Provisioner::value_variants() {
            let v = p.to_possible_value().expect("listed variants have a value");
            assert_eq!(v.get_name(), p.name());
        }
    }
}
