//! The owning guard: [`OwnedCluster`] starts the servers a strategy needs and owns them
//! (dropping it stops them all, and removes their data, containers and network); it kills,
//! pauses and partitions a node whatever the backend, and asks the servers which node leads.

use std::net::SocketAddr;
use std::path::Path;

use super::backend::wait_ready;
use super::containers::Containers;
use super::durability::Durability;
use super::endpoints::EndpointsFile;
use super::error::ClusterError;
use super::local::Local;
use super::model::{
    ClusterOptions, Endpoints, MysqlEndpoint, Needs, NodeInfo, Provisioner, Role, Service,
};
use super::node::Node;
use super::provision::{Launcher, Provisioned};
use super::{durability, etcd, mariadb, net, redis, redis_cluster, sentinel, zookeeper};

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
    durability: Vec<(String, Durability)>,
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
            Provisioner::Containers => {
                Provisioned::Containers(Containers::prepare(needs, &opts.log_dir).await?)
            }
            Provisioner::Local | Provisioner::Target => {
                // A missing binary or a busy port fails the run before anything starts.
                for s in &sets {
                    s.check_installed()?;
                }
                let ports = sets.iter().flat_map(|s| s.port_names()).collect();
                Provisioned::Local(Local::prepare(ports, opts)?)
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
        EndpointsFile::new(self.endpoints.clone(), self.info()).write(path)
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
}
