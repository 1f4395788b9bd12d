//! Cluster: where the servers are, and how to start and stop them.
//!
//! [`OwnedCluster::start`] starts exactly the servers a strategy [`Needs`]: as child processes
//! on loopback (no Docker, no systemd) with `--provision local`, or as containers on a private
//! Docker network ([`containers`]); each has its own address, its own data and its log in the
//! results folder. An external target ([`target`]) starts nothing. Strategies only ever see
//! [`Endpoints`], so where the servers come from stays this module's business.
//!
//! Replicated services (a 3-node ZooKeeper ensemble, a 3-node etcd cluster) elect their own
//! leader; [`OwnedCluster::leader`] asks the servers which node leads right now.
//!
//! Every node is owned by a guard (a [`ServerProcess`] or a container): dropping the cluster
//! stops them all.

mod backend;
mod clock;
pub mod containers;
pub mod credentials;
pub mod durability;
pub mod etcd;
mod local;
mod mariadb;
pub mod namespace;
pub mod net;
mod ports;
mod process;
mod provision;
pub mod redis;
pub mod redis_cluster;
pub mod sentinel;
pub mod target;
mod zookeeper;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::names::enum_names;

use backend::wait_ready;
use provision::{Launcher, Provisioned};

pub use backend::NodeServer;
pub use namespace::Prefix;
pub use ports::{Placement, PortAllocator};
pub use process::ServerProcess;

/// How long any server may take to become ready before the run fails.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// Errors while provisioning or talking to the servers of a run.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// A server binary is not installed.
    #[error(
        "`{binary}` not found (looked in PATH, /usr/sbin, /sbin): install the Debian package \
         `{package}` (apt-get install {package}) or run scripts/install-deps.sh"
    )]
    MissingBinary { binary: String, package: String },
    /// A file a server needs (a jar, not a binary on PATH) is not installed.
    #[error(
        "`{}` not found: install the Debian package `{package}` (apt-get install {package}) \
         or run scripts/install-deps.sh", path.display()
    )]
    MissingFile { path: PathBuf, package: String },
    /// A port the run needs is taken.
    #[error(
        "port {addr} for {node} is already in use: pick another --base-port, or omit \
         --base-port to let lockbench choose free ports"
    )]
    PortBusy { addr: SocketAddr, node: String },
    /// The process could not be spawned.
    #[error("could not start {node} ({program}): {source}")]
    Spawn {
        node: String,
        program: String,
        source: std::io::Error,
    },
    /// The process exited while starting.
    #[error("{node} exited during startup ({status}); log {}:\n{tail}", log.display())]
    Died {
        node: String,
        status: String,
        log: PathBuf,
        tail: String,
    },
    /// The server did not answer in time.
    #[error("{node} was not ready after {waited:?} (last error: {last}); log: {}", log.display())]
    NotReady {
        node: String,
        waited: Duration,
        last: String,
        log: PathBuf,
    },
    /// A setup step failed.
    #[error("{node}: {what}: {detail}")]
    Setup {
        node: String,
        what: String,
        detail: String,
    },
    /// The servers of a replicated service could not say which node leads.
    #[error("which {service:?} node leads: {detail}")]
    Leader { service: Service, detail: String },
    /// A target file is malformed or lacks what a strategy needs.
    #[error("{file}: {field}: {problem}")]
    Target {
        file: String,
        field: String,
        problem: String,
    },
    /// The prefix on an external target holds data lockbench did not create.
    #[error(
        "{service}: prefix `{prefix}` already holds data lockbench did not create ({found}); \
         refusing to touch it: choose another `prefix` in the target file, or remove that data"
    )]
    PrefixTaken {
        service: String,
        prefix: String,
        found: String,
    },
    /// No Docker daemon answers (containers provisioner).
    #[error(
        "no Docker daemon answers at {host} ({detail}): start one and set DOCKER_HOST, e.g. \
         `export $(sudo scripts/container-images.sh)` starts a private dockerd with local \
         images; or use --provision local"
    )]
    NoDocker { host: String, detail: String },
    /// An image the containers provisioner needs is not on the Docker host.
    #[error(
        "image `{image}` is not on the Docker host, and lockbench never pulls (a pull leaves \
         this machine): `docker pull {image}`, or build local images with \
         scripts/container-images.sh and name them in {var}"
    )]
    MissingImage { image: String, var: String },
    /// A Docker API call failed.
    #[error("docker: {what}: {detail}")]
    Docker { what: String, detail: String },
    /// A file system operation failed.
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
}

impl ClusterError {
    fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            what: what.into(),
            source,
        }
    }
}

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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
}

enum_names!(Service {
    Mariadb = "mariadb",
    Redis = "redis",
    Sentinel = "sentinel",
    RedisCluster = "redis-cluster",
    Zookeeper = "zookeeper",
    Etcd = "etcd",
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
    /// at run time, so it is not a role fixed at start; ask [`OwnedCluster::leader`].
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

impl Endpoints {
    /// The master name to ask the sentinels about.
    pub fn sentinel_master(&self) -> &str {
        self.sentinel_master
            .as_deref()
            .unwrap_or(sentinel::MASTER_NAME)
    }
}

/// One server of a run, with the address it was given and what serves it.
#[derive(Debug)]
pub struct Node {
    /// Unique within the run, e.g. `mariadb` or `redis-1`; used in logs and errors.
    pub name: String,
    /// What the node serves.
    pub service: Service,
    /// Its place in its set.
    pub role: Role,
    /// Its own address: on loopback, in a network namespace of the run, or a container's
    /// address on the run's Docker network.
    pub addr: SocketAddr,
    /// Server version as the server reports it.
    pub version: String,
    /// The owned process or container; dropping the cluster stops it. Faults reach the node
    /// through it.
    pub server: Box<dyn NodeServer>,
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
    pub durability: Option<durability::Durability>,
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
    /// wall clocks ([`OwnedCluster::set_clock`]).
    pub clock_shim: bool,
    /// Run the nodes in network namespaces of a private network ([`net`]), so partition
    /// faults can cut links. Needs root. (Containers always have a network of their own.)
    pub network: bool,
    /// Child processes or containers.
    pub provisioner: Provisioner,
    /// Persistence of every Redis node (standalone, Redlock's, Sentinel's master and replicas).
    pub redis_appendfsync: redis::Appendfsync,
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
            redis_appendfsync: redis::Appendfsync::Off,
        }
    }
}

/// One set of nodes that starts together, as its service's topology says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Set {
    Mariadb,
    /// Standalone Redis `redis-N`.
    Redis(usize),
    Sentinel,
    RedisCluster,
    Zookeeper,
    Etcd,
}

/// What one [`Set`] brought up.
struct Started {
    nodes: Vec<Node>,
    mysql: Option<MysqlEndpoint>,
    /// etcd member id of each etcd node, by node name.
    etcd_members: Vec<(String, u64)>,
}

impl Started {
    fn nodes(nodes: Vec<Node>) -> Self {
        Self {
            nodes,
            mysql: None,
            etcd_members: Vec::new(),
        }
    }
}

impl Set {
    /// The sets `needs` asks for, in the order their local ports are reserved.
    fn of(needs: Needs) -> Vec<Set> {
        let mut sets = Vec::new();
        if needs.mariadb {
            sets.push(Set::Mariadb);
        }
        sets.extend((1..=needs.redis_nodes()).map(Set::Redis));
        for (needed, set) in [
            (needs.sentinel, Set::Sentinel),
            (needs.redis_cluster, Set::RedisCluster),
            (needs.zookeeper, Set::Zookeeper),
            (needs.etcd, Set::Etcd),
        ] {
            if needed {
                sets.push(set);
            }
        }
        sets
    }

    /// An error naming the package to install when a binary or file is missing (local).
    fn check_installed(self) -> Result<(), ClusterError> {
        match self {
            Set::Mariadb => mariadb::check_installed(),
            Set::Redis(_) => redis::check_installed(),
            Set::Sentinel => redis::check_installed().and_then(|()| sentinel::check_installed()),
            Set::RedisCluster => redis::check_installed(),
            Set::Zookeeper => zookeeper::check_installed(),
            Set::Etcd => etcd::check_installed(),
        }
    }

    /// The names of every port its nodes listen on (reserved up front, local).
    fn port_names(self) -> Vec<String> {
        match self {
            Set::Mariadb => vec![mariadb::NAME.into()],
            Set::Redis(i) => vec![format!("redis-{i}")],
            Set::Sentinel => sentinel::port_names(),
            Set::RedisCluster => redis_cluster::port_names(),
            Set::Zookeeper => zookeeper::port_names(),
            Set::Etcd => etcd::port_names(),
        }
    }

    /// Starts the set's nodes through `l`, as `opts` ask, and waits until they are ready.
    async fn start(self, l: Launcher<'_>, opts: &ClusterOptions) -> Result<Started, ClusterError> {
        let aof = opts.redis_appendfsync;
        Ok(match self {
            Set::Mariadb => {
                let (node, endpoint) = mariadb::start(l).await?;
                Started {
                    mysql: Some(endpoint),
                    ..Started::nodes(vec![node])
                }
            }
            Set::Redis(i) => {
                let name = format!("redis-{i}");
                Started::nodes(vec![
                    redis::start(l, &name, Role::Primary, aof, &[], true).await?,
                ])
            }
            Set::Sentinel => Started::nodes(sentinel::start(l, aof).await?),
            Set::RedisCluster => Started::nodes(redis_cluster::start(l, aof).await?),
            Set::Zookeeper => Started::nodes(zookeeper::start(l).await?),
            Set::Etcd => {
                let members = etcd::start(l).await?;
                Started {
                    etcd_members: members
                        .iter()
                        .map(|(n, id)| (n.name.clone(), *id))
                        .collect(),
                    ..Started::nodes(members.into_iter().map(|(n, _)| n).collect())
                }
            }
        })
    }
}

/// Servers started and owned by this process, as child processes or as containers. Dropping
/// it stops them all and removes their data (and their containers and Docker network).
#[derive(Debug)]
pub struct OwnedCluster {
    nodes: Vec<Node>,
    endpoints: Endpoints,
    /// etcd member id of each etcd node (by node name): etcd reports its leader as a member
    /// id, and the leader may be the node that no longer answers.
    etcd_members: Vec<(String, u64)>,
    /// What each node does with a write before acknowledging it (by node name), read once
    /// every node is ready.
    durability: Vec<(String, durability::Durability)>,
    // Declared after `nodes`: fields drop in order, so processes and containers go before
    // their network and their data.
    backend: Provisioned,
}

/// Starts retried when a picked port was taken before its server bound it.
const PORT_RACE_RETRIES: u32 = 2;

/// Whether a node died because its port was taken (its log says so).
fn lost_port(e: &ClusterError) -> bool {
    let ClusterError::Died { log, tail, .. } = e else {
        return false;
    };
    let text = std::fs::read_to_string(log).unwrap_or_else(|_| tail.clone());
    [
        "Address already in use",
        "BindException",
        "address already in use",
    ]
    .iter()
    .any(|m| text.contains(m))
}

impl OwnedCluster {
    /// Starts the servers in `needs` and waits until each answers queries.
    ///
    /// Free ports are picked, checked and released before the servers bind them, so another
    /// process can take one in between (seen: a ZooKeeper node's `BindException` while other
    /// tests started clusters). With automatic ports such a start is retried on new ports, at
    /// most [`PORT_RACE_RETRIES`] times; the failed attempt's servers stop with its guard.
    pub async fn start(needs: Needs, opts: &ClusterOptions) -> Result<Self, ClusterError> {
        let mut retries = 0;
        loop {
            match Self::start_once(needs, opts).await {
                Err(e)
                    if opts.base_port.is_none() && retries < PORT_RACE_RETRIES && lost_port(&e) =>
                {
                    retries += 1;
                    tracing::warn!("{e}: another process took a port; starting again on new ports");
                }
                result => return result,
            }
        }
    }

    async fn start_once(needs: Needs, opts: &ClusterOptions) -> Result<Self, ClusterError> {
        let sets = Set::of(needs);
        let backend = match opts.provisioner {
            Provisioner::Containers => Provisioned::Containers(
                containers::Containers::prepare(needs, &opts.log_dir).await?,
            ),
            Provisioner::Local | Provisioner::Target => {
                Provisioned::Local(local::Local::prepare(&sets, opts)?)
            }
        };
        let mut cluster = Self {
            nodes: Vec::new(),
            endpoints: Endpoints::default(),
            etcd_members: Vec::new(),
            durability: Vec::new(),
            backend,
        };
        // Every set starts at once: the slowest (MariaDB's install, ZooKeeper's JVMs and
        // election) bounds the start-up time, not their sum.
        let launcher = cluster.backend.launcher();
        let started = futures::future::join_all(sets.iter().map(|s| s.start(launcher, opts))).await;
        // Keep whatever started, so that it stops with the cluster if another set failed.
        let mut failed = None;
        for s in started {
            match s {
                Ok(s) => cluster.add(s),
                Err(e) => failed = failed.or(Some(e)),
            }
        }
        if let Some(e) = failed {
            return Err(e);
        }
        let reads = cluster
            .nodes
            .iter()
            .map(|n| durability::read(n.service, n.addr, &cluster.endpoints, true));
        let read = futures::future::join_all(reads).await;
        cluster.durability = (cluster.nodes.iter().zip(read))
            .filter_map(|(n, d)| Some((n.name.clone(), d?)))
            .collect();
        Ok(cluster)
    }

    /// Takes in a started set: its nodes, and their addresses into the endpoints.
    fn add(&mut self, s: Started) {
        let ep = &mut self.endpoints;
        ep.mysql = ep.mysql.take().or(s.mysql);
        for n in &s.nodes {
            match (n.service, n.role) {
                (Service::Redis, Role::Primary) => ep.redis.push(n.addr),
                (Service::Sentinel, _) => ep.sentinels.push(n.addr),
                (Service::RedisCluster, _) => ep.redis_cluster.push(n.addr),
                (Service::Zookeeper, _) => ep.zookeeper.push(n.addr),
                (Service::Etcd, _) => ep.etcd.push(n.addr),
                _ => {}
            }
        }
        self.etcd_members.extend(s.etcd_members);
        self.nodes.extend(s.nodes);
    }

    /// How the servers were provisioned.
    pub fn provisioner(&self) -> Provisioner {
        self.backend.backend().provisioner()
    }

    /// How strategies reach the servers.
    pub fn endpoints(&self) -> &Endpoints {
        &self.endpoints
    }

    /// The running nodes.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The node of `service` that leads right now, as its servers report it.
    ///
    /// ZooKeeper: the node whose `srvr` answer says `Mode: leader`. etcd: the member that the
    /// answering members with the highest raft term name as leader. Single-node services
    /// (MariaDB, Redis) answer their only node. `Ok(None)` means no answering server knows of
    /// a leader (an election is under way, or the leader is cut off and nobody noticed yet).
    /// Every query is bounded; a node that does not answer (killed, paused) is skipped.
    pub async fn leader(&self, service: Service) -> Result<Option<&Node>, ClusterError> {
        let members: Vec<&Node> = self.nodes.iter().filter(|n| n.service == service).collect();
        if members.is_empty() {
            return Err(ClusterError::Leader {
                service,
                detail: "this cluster runs no such servers".into(),
            });
        }
        match service {
            Service::Redis if !self.endpoints.sentinels.is_empty() => {
                // The master is whatever the sentinels say now (it moves on failover).
                let name = self.endpoints.sentinel_master();
                let auth = self.endpoints.sentinel_auth.as_ref();
                match sentinel::current_master(&self.endpoints.sentinels, name, auth).await {
                    Ok(addr) => Ok(members.into_iter().find(|n| n.addr == addr)),
                    Err(_) => Ok(None),
                }
            }
            Service::Mariadb | Service::Redis => {
                Ok(members.into_iter().find(|n| n.role == Role::Primary))
            }
            Service::RedisCluster => Err(ClusterError::Leader {
                service,
                detail: "a Redis Cluster has a master per slot range: name a SKU (`sku = N`) \
                         and its slot's master"
                    .into(),
            }),
            Service::Sentinel => Err(ClusterError::Leader {
                service,
                detail: "sentinels elect no leader of their own here; ask for the Redis master"
                    .into(),
            }),
            Service::Zookeeper => {
                let addrs: Vec<SocketAddr> = members.iter().map(|n| n.addr).collect();
                let leaders = zookeeper::leaders(&addrs).await;
                match leaders.as_slice() {
                    [] => Ok(None),
                    [one] => Ok(members.into_iter().find(|n| n.addr == *one)),
                    many => Err(ClusterError::Leader {
                        service,
                        detail: format!("several nodes say they lead: {many:?}"),
                    }),
                }
            }
            Service::Etcd => {
                let addrs: Vec<SocketAddr> = members.iter().map(|n| n.addr).collect();
                let Some(id) = etcd::leader_id(&addrs).await else {
                    return Ok(None);
                };
                let name = self
                    .etcd_members
                    .iter()
                    .find(|(_, m)| *m == id)
                    .map(|(name, _)| name.as_str())
                    .ok_or_else(|| ClusterError::Leader {
                        service,
                        detail: format!("leader id {id:x} is not a member this cluster started"),
                    })?;
                Ok(members.into_iter().find(|n| n.name == name))
            }
        }
    }

    /// The Redis Cluster nodes serving SKU `sku`'s slot now: its master and its replicas, as
    /// the first node that answers says (a failover moves them).
    pub async fn slot_nodes(&self, sku: u32) -> Result<(&Node, Vec<&Node>), ClusterError> {
        let addrs = &self.endpoints.redis_cluster;
        let slot = redis_cluster::sku_slot(sku);
        let err = |detail: String| ClusterError::Leader {
            service: Service::RedisCluster,
            detail,
        };
        let (master, replicas) = redis_cluster::slot_owners(addrs, None, slot)
            .await
            .map_err(err)?;
        let find = |a: SocketAddr| self.nodes.iter().find(|n| n.addr == a);
        let master =
            find(master).ok_or_else(|| err(format!("{master} is not a node of this run")))?;
        Ok((master, replicas.into_iter().filter_map(find).collect()))
    }

    /// Node descriptions for results.
    pub fn info(&self) -> Vec<NodeInfo> {
        self.nodes
            .iter()
            .map(|n| NodeInfo {
                name: n.name.clone(),
                service: n.service,
                role: n.role,
                addr: n.addr,
                version: n.version.clone(),
                pid: n.server.pid(),
                log: n.server.log().to_path_buf(),
                container: n.server.container(),
                durability: (self.durability.iter())
                    .find(|(name, _)| *name == n.name)
                    .map(|(_, d)| d.clone()),
            })
            .collect()
    }

    /// Writes `path` (mode 0600: it holds the MariaDB password) describing these servers, for
    /// `lockbench run --endpoints`.
    pub fn write_endpoints(&self, path: &Path) -> Result<(), ClusterError> {
        let file = EndpointsFile::new(self.endpoints.clone(), self.info());
        let text = serde_json::to_string_pretty(&file).expect("endpoints serialise");
        use std::os::unix::fs::OpenOptionsExt;
        let io = |e| ClusterError::io(format!("write {}", path.display()), e);
        // Written beside it, then renamed: whoever waits for the file to appear (a test, a
        // script, `run --endpoints`) never reads it half-written.
        let tmp = path.with_extension("json.tmp");
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(io)?;
        std::io::Write::write_all(&mut f, text.as_bytes()).map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)
    }

    /// The private network, when started with [`ClusterOptions::network`].
    pub fn network(&self) -> Option<&net::Network> {
        self.backend.backend().network()
    }

    fn node_mut(&mut self, name: &str) -> Result<&mut Node, ClusterError> {
        find_node(&mut self.nodes, name)
    }

    /// SIGKILLs node `name` (a crash: no shutdown, no flush); a container's main process.
    pub async fn kill(&mut self, name: &str) -> Result<(), ClusterError> {
        self.node_mut(name)?.server.kill().await
    }

    /// Starts node `name` again with its original command line and data, and waits until it
    /// accepts connections (whether it has caught up is for the load to find out).
    pub async fn restart(&mut self, name: &str) -> Result<(), ClusterError> {
        let node = self.node_mut(name)?;
        let addr = node.addr;
        if !node.server.restart().await? {
            // Partitioned: nothing can reach it until the partition heals.
            return Ok(());
        }
        wait_ready(name, &mut [&mut *node.server], || async move {
            tokio::net::TcpStream::connect(addr)
                .await
                .map(drop)
                .map_err(|e| e.to_string())
        })
        .await
    }

    /// Stops node `name` from answering while it keeps its sockets: SIGSTOP to a process, the
    /// cgroup freezer for a container.
    pub async fn pause(&mut self, name: &str) -> Result<(), ClusterError> {
        self.node_mut(name)?.server.pause().await
    }

    /// Undoes [`OwnedCluster::pause`].
    pub async fn resume(&mut self, name: &str) -> Result<(), ClusterError> {
        self.node_mut(name)?.server.resume().await
    }

    /// Cuts nodes `names` off from every other server and from the client workers `clients`
    /// (indices below `workers`), as the backend can: iptables rules in the nodes' network
    /// namespaces (local, needs [`ClusterOptions::network`]), or off the Docker network, which
    /// cuts every client. Returns the workers actually cut.
    pub async fn partition(
        &mut self,
        names: &[String],
        clients: &[usize],
        workers: usize,
    ) -> Result<Vec<usize>, ClusterError> {
        if let Some(missing) = names
            .iter()
            .find(|n| self.nodes.iter().all(|m| m.name != **n))
        {
            return Err(no_such_node(missing));
        }
        let mut nodes: Vec<&mut Node> = self
            .nodes
            .iter_mut()
            .filter(|n| names.contains(&n.name))
            .collect();
        self.backend
            .backend()
            .partition(&mut nodes, clients, workers)
            .await
    }

    /// Undoes [`OwnedCluster::partition`] for node `name`.
    pub async fn heal_partition(&mut self, name: &str) -> Result<(), ClusterError> {
        let node = find_node(&mut self.nodes, name)?;
        self.backend.backend().heal(node).await
    }

    /// Cuts node `name` off from every other node and every client.
    pub async fn disconnect(&mut self, name: &str) -> Result<(), ClusterError> {
        let all: Vec<usize> = (0..net::CLIENT_HOSTS).collect();
        self.partition(&[name.to_string()], &all, all.len())
            .await
            .map(drop)
    }

    /// Undoes [`OwnedCluster::disconnect`]: back on the network at its own address.
    pub async fn reconnect(&mut self, name: &str) -> Result<(), ClusterError> {
        self.heal_partition(name).await
    }

    /// Moves the wall clock of Redis node `name` (started with [`ClusterOptions::clock_shim`]):
    /// `Some((jump_ms, rate))` from now on, `None` back to real time.
    pub fn set_clock(&self, name: &str, change: Option<(i64, f64)>) -> Result<(), ClusterError> {
        self.backend.backend().set_clock(name, change)
    }

    /// Stops every server now (dropping the cluster does the same).
    pub fn stop(self) {
        drop(self);
    }
}

/// Servers started by `lockbench serve`, as written to its endpoints file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EndpointsFile {
    /// Addresses and users.
    pub endpoints: Endpoints,
    /// The MariaDB password (the endpoints themselves never serialise passwords).
    pub mysql_password: Option<String>,
    /// The Redis password, if the servers need one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis_password: Option<String>,
    /// The sentinels' password, if they need one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sentinel_password: Option<String>,
    /// The etcd password, if the cluster needs one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd_password: Option<String>,
    /// The ZooKeeper password, if the ensemble needs one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zookeeper_password: Option<String>,
    /// The nodes serving them.
    pub nodes: Vec<NodeInfo>,
}

impl EndpointsFile {
    /// The file for `endpoints`, every password beside them.
    pub fn new(endpoints: Endpoints, nodes: Vec<NodeInfo>) -> Self {
        let pw = |a: &Option<Auth>| a.as_ref().map(|a| a.password.clone());
        Self {
            mysql_password: endpoints.mysql.as_ref().map(|m| m.password.clone()),
            redis_password: pw(&endpoints.redis_auth),
            sentinel_password: pw(&endpoints.sentinel_auth),
            etcd_password: pw(&endpoints.etcd_auth),
            zookeeper_password: pw(&endpoints.zookeeper_auth),
            endpoints,
            nodes,
        }
    }

    /// Reads an endpoints file written by [`OwnedCluster::write_endpoints`].
    pub fn read(path: &Path) -> Result<Self, ClusterError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ClusterError::io(format!("read {}", path.display()), e))?;
        let mut file: Self = serde_json::from_str(&text).map_err(|e| ClusterError::Setup {
            node: path.display().to_string(),
            what: "parse endpoints file".into(),
            detail: format!("{e}; expected the endpoints.json written by `lockbench serve`"),
        })?;
        file.restore_passwords();
        Ok(file)
    }

    /// Removes the passwords carried beside the endpoints (for a link that must not carry
    /// them: the worker reads them with [`Self::passwords_from_env`]).
    pub fn without_passwords(mut self) -> Self {
        for pw in self.passwords_mut() {
            *pw = None;
        }
        self
    }

    /// The passwords as `(variable, password)`: a worker's environment
    /// ([`credentials::PASSWORD_ENV`] names the variables).
    pub fn password_env(&self) -> Vec<(&'static str, String)> {
        let all = [
            &self.mysql_password,
            &self.redis_password,
            &self.sentinel_password,
            &self.etcd_password,
            &self.zookeeper_password,
        ];
        credentials::PASSWORD_ENV
            .iter()
            .zip(all)
            .filter_map(|((_, var), p)| Some((*var, p.clone()?)))
            .collect()
    }

    /// Reads the passwords from this process's environment
    /// ([`credentials::PASSWORD_ENV`]); unset variables leave no password.
    pub fn passwords_from_env(&mut self) {
        let vars = credentials::PASSWORD_ENV.map(|(_, v)| std::env::var(v).ok());
        for (pw, var) in self.passwords_mut().into_iter().zip(vars) {
            *pw = var;
        }
    }

    /// In the order of [`credentials::PASSWORD_ENV`].
    fn passwords_mut(&mut self) -> [&mut Option<String>; 5] {
        [
            &mut self.mysql_password,
            &mut self.redis_password,
            &mut self.sentinel_password,
            &mut self.etcd_password,
            &mut self.zookeeper_password,
        ]
    }

    /// Puts the passwords carried beside the endpoints back into them (after deserialising:
    /// the endpoints never serialise a password).
    pub fn restore_passwords(&mut self) {
        let ep = &mut self.endpoints;
        if let (Some(m), Some(pw)) = (ep.mysql.as_mut(), &self.mysql_password) {
            m.password = pw.clone();
        }
        for (auth, pw) in [
            (&mut ep.redis_auth, &self.redis_password),
            (&mut ep.sentinel_auth, &self.sentinel_password),
            (&mut ep.etcd_auth, &self.etcd_password),
            (&mut ep.zookeeper_auth, &self.zookeeper_password),
        ] {
            if let (Some(a), Some(pw)) = (auth.as_mut(), pw) {
                a.password = pw.clone();
            }
        }
    }
}

fn no_such_node(name: &str) -> ClusterError {
    ClusterError::Setup {
        node: name.to_string(),
        what: "fault".into(),
        detail: "no such node in this cluster".into(),
    }
}

fn find_node<'n>(nodes: &'n mut [Node], name: &str) -> Result<&'n mut Node, ClusterError> {
    nodes
        .iter_mut()
        .find(|n| n.name == name)
        .ok_or_else(|| no_such_node(name))
}

/// Finds `binary` on PATH or in the sbin directories where Debian puts daemons.
fn find_binary(binary: &str, package: &str) -> Result<PathBuf, ClusterError> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|dir| dir.join(binary))
        .find(|p| is_executable(p))
        .ok_or_else(|| ClusterError::MissingBinary {
            binary: binary.to_string(),
            package: package.to_string(),
        })
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_is_retried_only_when_a_port_was_taken() {
        let dir = tempfile::tempdir().unwrap();
        let died = |text: &str| {
            let log = dir.path().join(format!("{}.log", text.len()));
            std::fs::write(&log, text).unwrap();
            ClusterError::Died {
                node: "zookeeper-3".into(),
                status: "exit status: 1".into(),
                log,
                tail: String::new(),
            }
        };
        assert!(lost_port(&died(
            "java.net.BindException: Address already in use"
        )));
        assert!(!lost_port(&died("Invalid config, exiting abnormally")));
    }

    #[test]
    fn provisioner_names_on_the_command_line_are_its_names() {
        use clap::ValueEnum;
        for p in Provisioner::value_variants() {
            let v = p.to_possible_value().expect("listed variants have a value");
            assert_eq!(v.get_name(), p.name());
        }
    }
}
