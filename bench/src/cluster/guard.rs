//! The owning guard: [`OwnedCluster`] starts the servers a strategy needs and owns them
//! (dropping it stops them all, and removes their data, containers and network); it kills,
//! pauses and partitions a node whatever the backend, and asks the servers which node leads.
//! What it knows of each service it asks of the service's module, through the registry.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::thread::JoinHandle;
use std::time::Duration;

use super::backend::wait_ready;
use super::containers::{Containers, Images};
use super::durability::{Durability, Source};
use super::endpoints::EndpointsFile;
use super::error::ClusterError;
use super::kind::{Asked, ServiceKind, Start, Started};
use super::lazyfs::{Dropped, SlowDisk, SyncCounts};
use super::local::Local;
use super::model::{ClusterOptions, Endpoints, Needs, NodeInfo, Provisioner, Service};
use super::net;
use super::netem::{self, Impairment, LinkCounts, ProbeSamples};
use super::node::Node;
use super::provision::Provisioned;
use super::registry;

/// Servers started and owned by this process, as child processes or as containers. Dropping
/// it stops them all and removes their data (and their containers and Docker network).
#[derive(Debug)]
pub struct OwnedCluster {
    nodes: Vec<Node>,
    endpoints: Endpoints,
    /// [`Started::member_ids`] of every service (etcd's member ids).
    member_ids: Vec<(String, u64)>,
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
        let kinds: Vec<&dyn ServiceKind> = (registry::ALL.into_iter())
            .filter(|k| k.wanted(needs))
            .collect();
        let mut cluster = Self {
            nodes: Vec::new(),
            endpoints: Endpoints::default(),
            member_ids: Vec::new(),
            durability: Vec::new(),
            backend: provision(needs, &kinds, opts).await?,
        };
        // Every service starts at once: the slowest (MariaDB's install, ZooKeeper's JVMs and
        // election) bounds the start-up time, not their sum.
        let launcher = cluster.backend.launcher();
        let s = Start {
            launcher,
            needs,
            opts,
        };
        let started = futures::future::join_all(kinds.iter().map(|k| k.start(s))).await;
        // Keep whatever started, so that it stops with the cluster if another service failed.
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
        if let Some(local) = cluster.backend.local() {
            local.settle_disks()?;
        }
        let nodes = cluster.nodes.iter().map(|n| (n.service, n.addr));
        let read = registry::durability(nodes, &cluster.endpoints, Source::StartedWith).await;
        cluster.durability = (cluster.nodes.iter().zip(read))
            .filter_map(|(n, d)| Some((n.name.clone(), d?)))
            .collect();
        Ok(cluster)
    }

    /// Takes in a started service: its nodes, and their addresses into the endpoints.
    fn add(&mut self, s: Started) {
        (s.publish)(&mut self.endpoints);
        self.member_ids.extend(s.member_ids);
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

    /// Whether this cluster runs nodes of `service`.
    fn runs(&self, service: Service) -> bool {
        self.nodes.iter().any(|n| n.service == service)
    }

    /// The node of `service` that leads right now, as its servers report it.
    ///
    /// ZooKeeper: the node whose `srvr` answer says `Mode: leader`. etcd: the member that the
    /// answering members with the highest raft term name as leader. Redis under Sentinel: the
    /// master the sentinels name. Single-node services (MariaDB, Redis) answer their only
    /// node. `Ok(None)` means no answering server knows of a leader (an election is under way,
    /// or the leader is cut off and nobody noticed yet). Every query is bounded; a node that
    /// does not answer (killed, paused) is skipped.
    pub async fn leader(&self, service: Service) -> Result<Option<&Node>, ClusterError> {
        let members: Vec<&Node> = self.nodes.iter().filter(|n| n.service == service).collect();
        if members.is_empty() {
            return Err(ClusterError::Leader {
                service,
                detail: "this cluster runs no such servers".into(),
            });
        }
        // A service whose master another one names (Redis under Sentinel) is asked of that one.
        let kind = (registry::ALL.into_iter())
            .find(|k| k.names_master_of() == Some(service) && self.runs(k.service()))
            .unwrap_or_else(|| registry::kind(service));
        kind.leader(Asked {
            service,
            members,
            endpoints: &self.endpoints,
            member_ids: &self.member_ids,
        })
        .await
    }

    /// Promotes standby node `name` to primary, as an operator (or a failover tool) does after
    /// killing, pausing or cutting off the primary: PostgreSQL's `pg_promote()`. Returns the
    /// time from the request until the node took a write. The endpoints do not change: a
    /// client finds the new primary among the primary and its standbys
    /// (`postgres::current_primary`), as [`Self::leader`] does.
    pub async fn promote(&self, name: &str) -> Result<Duration, ClusterError> {
        let node = self.node(name)?;
        (registry::kind(node.service))
            .promote(node, &self.endpoints)
            .await
    }

    /// Whether `service` shards its keys over slots (a Redis Cluster), each with a master of
    /// its own ([`Self::slot_nodes`]).
    pub fn has_slots(&self, service: Service) -> bool {
        registry::kind(service).has_slots()
    }

    /// The nodes of `service` serving SKU `sku`'s slot now: its master and its replicas, as
    /// the first node that answers says (a failover moves them).
    pub async fn slot_nodes(
        &self,
        service: Service,
        sku: u32,
    ) -> Result<(&Node, Vec<&Node>), ClusterError> {
        let err = |detail: String| ClusterError::Leader { service, detail };
        let (master, replicas) = (registry::kind(service))
            .slot_owners(&self.endpoints, sku)
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

    /// A power loss of node `name`: SIGKILL, then every write it had not fsynced is dropped
    /// from its data directory (on lazyfs, [`ClusterOptions::lazyfs`]); [`OwnedCluster::restart`]
    /// starts it again on what was synced.
    pub async fn power_loss(&mut self, name: &str) -> Result<Dropped, ClusterError> {
        let local = self.lazy_local(name)?;
        // Whether it can be dropped is known before the kill.
        local.disk(name)?;
        self.node_mut(name)?.server.kill().await?;
        self.lazy_local(name)?.crash_disk(name)
    }

    /// Slows node `name`'s fsyncs (on lazyfs), or heals them with `None`.
    pub fn slow_disk(&self, name: &str, disk: Option<SlowDisk>) -> Result<(), ClusterError> {
        self.lazy_local(name)?.slow_disk(name, disk)
    }

    /// Node `name`'s data directory on lazyfs, and its fsync counts so far.
    pub fn disk(&self, name: &str) -> Result<(PathBuf, SyncCounts), ClusterError> {
        self.lazy_local(name)?.disk(name)
    }

    fn lazy_local(&self, name: &str) -> Result<&Local, ClusterError> {
        self.backend.local().ok_or_else(|| ClusterError::Setup {
            node: name.to_string(),
            what: "disk fault".into(),
            detail: "power-loss and slow-disk need local processes (--provision local)".into(),
        })
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

    /// Impairs the links between nodes `names` and every other server and the client workers
    /// `clients` (a network fault: delay, loss, bandwidth, reset), for at most `lifetime`;
    /// returns the workers whose links are impaired. Local nodes in the private network only.
    pub fn impair(
        &self,
        names: &[String],
        clients: &[usize],
        imp: Impairment,
        seed: u64,
        lifetime: Duration,
    ) -> Result<Vec<usize>, ClusterError> {
        let mut cut = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let node = self.node(name)?;
            let seed = seed ^ (i as u64) << 32;
            cut = self
                .backend
                .backend()
                .impair(node, clients, imp, seed, lifetime)?;
        }
        Ok(cut)
    }

    /// Heals the network fault on node `name`: its rules deleted, then its held packets
    /// released, then its queue closed. What its queue saw.
    pub fn unimpair(&self, name: &str) -> Result<LinkCounts, ClusterError> {
        self.backend.backend().unimpair(self.node(name)?)
    }

    /// Starts a probe of the path to node `name`: `samples` TCP connects to its port, `gap`
    /// apart and each bounded by `timeout`, from the host of client worker `client` (else from
    /// another server's host), until `stop`. Needs the private network.
    pub fn probe(
        &self,
        name: &str,
        client: Option<usize>,
        (samples, gap, timeout): (usize, Duration, Duration),
        stop: Arc<AtomicBool>,
    ) -> Result<JoinHandle<Result<ProbeSamples, String>>, ClusterError> {
        let node = self.node(name)?;
        let err = |detail: &str| ClusterError::Setup {
            node: name.to_string(),
            what: "probe".into(),
            detail: detail.into(),
        };
        let net = self.network().ok_or_else(|| err("no private network"))?;
        let from = match client {
            Some(k) => net.clients.get(k),
            None => net.servers.iter().find(|h| h.ip != node.addr.ip()),
        }
        .ok_or_else(|| err("no host to probe from"))?;
        let ns = PathBuf::from(format!("/run/netns/{}", from.netns));
        Ok(netem::probe(ns, node.addr, samples, gap, timeout, stop))
    }

    /// What network faults left in node `name`'s namespace (rules, bound queues): empty after
    /// every heal.
    pub fn residue(&self, name: &str) -> Result<Vec<String>, ClusterError> {
        let node = self.node(name)?;
        // A later fault acts on the node (this one's heal came late): its rules are its own,
        // and its heal checks what is left.
        if self.backend.backend().impaired(node) {
            return Ok(Vec::new());
        }
        let host = (self.network())
            .and_then(|n| n.host(node.addr.ip()))
            .ok_or_else(|| no_such_node(name))?;
        netem::residue(&host.netns).map_err(|detail| ClusterError::Setup {
            node: name.to_string(),
            what: "residue".into(),
            detail,
        })
    }

    fn node(&self, name: &str) -> Result<&Node, ClusterError> {
        (self.nodes.iter())
            .find(|n| n.name == name)
            .ok_or_else(|| no_such_node(name))
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

/// The backend of `opts.provisioner`, ready for the services `kinds`: for local processes,
/// every binary checked and every port reserved first, so a missing binary or a busy port
/// fails the run before anything starts.
async fn provision(
    needs: Needs,
    kinds: &[&dyn ServiceKind],
    opts: &ClusterOptions,
) -> Result<Provisioned, ClusterError> {
    Ok(match opts.provisioner {
        Provisioner::Containers => Provisioned::Containers(
            Containers::prepare(
                Images::from_env(kinds.iter().filter_map(|k| k.image(opts.builds))),
                opts.builds.mysql,
                &opts.log_dir,
            )
            .await?,
        ),
        Provisioner::Local | Provisioner::Target => {
            for k in kinds {
                k.check_installed(opts.builds)?;
            }
            let ports = kinds.iter().flat_map(|k| k.port_names(needs)).collect();
            Provisioned::Local(Local::prepare(ports, opts)?)
        }
    })
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
