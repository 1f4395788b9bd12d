//! The local backend (`--provision local`, the default): every node a child process of
//! lockbench, on a loopback port of its own, or in a network namespace of the run's private
//! network ([`net`]) when partition faults need one. Data lives in a temporary directory of
//! the run, removed with it.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;

use super::backend::Backend;
use super::builds::Builds;
use super::error::ClusterError;
use super::lazyfs::{Dropped, LazyMount, SlowDisk, SyncCounts};
use super::model::{ClusterOptions, Provisioner, Service};
use super::netem::{self, Impairment, LinkCounts};
use super::node::Node;
use super::owner::Owner;
use super::ports::{Placement, PortAllocator};
use super::process::ServerProcess;
use super::{clock, net};

/// The addresses, data and network of a run's local nodes.
#[derive(Debug)]
pub(super) struct Local {
    /// Every port of the run, reserved before anything starts, by node (and use) name.
    addrs: HashMap<String, SocketAddr>,
    log_dir: PathBuf,
    /// The clock shim, for the standalone Redis nodes ([`ClusterOptions::clock_shim`]).
    shim: Option<PathBuf>,
    /// Which build of each server runs ([`ClusterOptions::builds`]).
    builds: Builds,
    /// Network faults in force, by node: healed (by drop on a panic) before the network goes.
    links: Mutex<HashMap<String, NodeLinks>>,
    /// The steady delay of the whole network ([`ClusterOptions::steady`]), removed before it.
    _steady: Vec<netem::Link>,
    /// Services whose nodes' data directories are lazyfs mounts ([`ClusterOptions::lazyfs`]).
    lazy: Vec<Service>,
    /// The steady slow disk of every mount ([`ClusterOptions::steady`]), from the end of the
    /// start-up on; a slow-disk fault's heal returns to it.
    steady_disk: Option<SlowDisk>,
    // Fields drop in order: the mounts and the namespaces go before the data directory.
    /// The lazyfs mounts, by node.
    mounts: Mutex<HashMap<String, LazyMount>>,
    network: Option<net::Network>,
    data: tempfile::TempDir,
}

/// The network faults of one node. Faults of one node can overlap when a heal runs late (a
/// bandwidth fault releasing its paced packets on a loaded machine took over a second, Nov 27,
/// 2026): the later one replaces the earlier, and each heal still ends its own fault.
#[derive(Debug, Default)]
struct NodeLinks {
    /// The fault acting now.
    live: Option<netem::Link>,
    /// What replaced faults counted, oldest first, for their heals.
    replaced: std::collections::VecDeque<Result<LinkCounts, String>>,
}
/// Whether node `name` is one of `service`'s: `etcd-2` or `redis-1` (never a
/// `redis-cluster-1` for `redis`), or the node named after its service (`mariadb`).
fn is_node_of(name: &str, service: Service) -> bool {
    let s = service.name();
    name == s
        || name
            .strip_prefix(s)
            .and_then(|r| r.strip_prefix('-'))
            .is_some_and(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit()))
}

impl Local {
    /// Creates the run's directories and network and reserves a port for each of `names`
    /// (a node, or one of its ports), so a busy port fails the run before anything starts.
    pub(super) fn prepare(names: Vec<String>, opts: &ClusterOptions) -> Result<Self, ClusterError> {
        std::fs::create_dir_all(&opts.log_dir)
            .map_err(|e| ClusterError::io(format!("create {}", opts.log_dir.display()), e))?;
        let data = tempfile::Builder::new()
            .prefix("lockbench-run-")
            .tempdir()
            .map_err(|e| ClusterError::io("create run directory", e))?;
        // The owner, for the next start to remove the folder if this run is SIGKILLed.
        Owner::mark(data.path()).map_err(|e| ClusterError::io("mark the run directory", e))?;
        let network = opts.network.then(net::Network::create).transpose()?;
        let mut ports = PortAllocator::new(opts.bind, opts.base_port);
        if let Some(n) = &network {
            ports = ports.with_placement(Placement {
                gateway: n.gateway,
                servers: n.servers.iter().map(|h| h.ip).collect(),
            });
        }
        let mut addrs = HashMap::new();
        for name in names {
            let addr = ports.allocate(&name)?;
            addrs.insert(name, addr);
        }
        let steady = match &network {
            Some(n) if !opts.steady.rtt.is_zero() => steady_delay(n, &addrs, opts.steady.rtt)?,
            _ => Vec::new(),
        };
        let shim = opts
            .clock_shim
            .then(|| clock::install_shim(data.path()))
            .transpose()?;
        Ok(Self {
            addrs,
            log_dir: opts.log_dir.clone(),
            shim,
            builds: opts.builds,
            links: Mutex::default(),
            _steady: steady,
            lazy: opts.lazyfs.clone(),
            steady_disk: (!opts.steady.fsync.is_zero()).then_some(SlowDisk {
                delay: opts.steady.fsync,
                jitter: Duration::ZERO,
                writes: false,
                seed: 0,
            }),
            mounts: Mutex::default(),
            network,
            data,
        })
    }

    /// The address reserved for `name` (a node, or one of its ports: `zookeeper-1 (quorum)`).
    pub(super) fn addr(&self, name: &str) -> SocketAddr {
        *self
            .addrs
            .get(name)
            .unwrap_or_else(|| panic!("{name}: every port is reserved before start"))
    }

    /// The data directory of node `name`, created; a lazyfs mount over `<name>.synced` when
    /// its service is one of [`ClusterOptions::lazyfs`].
    pub(super) fn dir(&self, name: &str) -> Result<PathBuf, ClusterError> {
        let dir = self.data.path().join(name);
        std::fs::create_dir_all(&dir)
            .map_err(|e| ClusterError::io(format!("create {}", dir.display()), e))?;
        if !self.lazy.iter().any(|s| is_node_of(name, *s)) {
            return Ok(dir);
        }
        let mut mounts = self.mounts.lock().expect("mounts");
        if !mounts.contains_key(name) {
            let backing = self.data.path().join(format!("{name}.synced"));
            std::fs::create_dir_all(&backing)
                .map_err(|e| ClusterError::io(format!("create {}", backing.display()), e))?;
            let m = LazyMount::mount(&backing, &dir)
                .map_err(|e| ClusterError::io(format!("mount lazyfs at {}", dir.display()), e))?;
            mounts.insert(name.to_string(), m);
        }
        Ok(dir)
    }

    /// Makes durable what the nodes wrote so far (their set-up: configuration files, initdb),
    /// as on a machine that has run a while: a power loss then drops only the run's own
    /// unsynced writes. The steady slow disk starts here, after the set-up's many fsyncs.
    pub(super) fn settle_disks(&self) -> Result<(), ClusterError> {
        for (name, m) in self.mounts.lock().expect("mounts").iter() {
            m.sync_all()
                .map_err(|e| ClusterError::io(format!("sync {name}'s data on lazyfs"), e))?;
            m.slow(self.steady_disk);
        }
        Ok(())
    }

    /// Drops the unsynced writes of node `name`'s data (its process is dead by now).
    pub(super) fn crash_disk(&self, name: &str) -> Result<Dropped, ClusterError> {
        self.with_mount(name, |m| m.crash())
    }

    /// Slows (or heals, with `None`, back to the steady slow disk if any) node `name`'s fsyncs.
    pub(super) fn slow_disk(&self, name: &str, disk: Option<SlowDisk>) -> Result<(), ClusterError> {
        self.with_mount(name, |m| m.slow(disk.or(self.steady_disk)))
    }

    /// Node `name`'s data directory on lazyfs and its fsync counts so far.
    pub(super) fn disk(&self, name: &str) -> Result<(PathBuf, SyncCounts), ClusterError> {
        self.with_mount(name, |m| (m.path().to_path_buf(), m.counts()))
    }

    fn with_mount<T>(
        &self,
        name: &str,
        f: impl FnOnce(&LazyMount) -> T,
    ) -> Result<T, ClusterError> {
        let mounts = self.mounts.lock().expect("mounts");
        let m = mounts.get(name).ok_or_else(|| ClusterError::Setup {
            node: name.to_string(),
            what: "disk fault".into(),
            detail: "its data directory is not on lazyfs (the run's chaos plan asked for none \
                     on this service)"
                .into(),
        })?;
        Ok(f(m))
    }

    /// Which build of each server the run's nodes run.
    pub(super) fn builds(&self) -> Builds {
        self.builds
    }

    /// The clock shim, when the run preloads it.
    pub(super) fn shim(&self) -> Option<&Path> {
        self.shim.as_deref()
    }

    /// The log file of `name` in the results folder.
    pub(super) fn log(&self, name: &str) -> PathBuf {
        self.log_dir.join(format!("{name}.log"))
    }

    /// Spawns `cmd` as node `name`, in the namespace of its reserved address, into its log.
    pub(super) fn spawn(&self, name: &str, cmd: Command) -> Result<ServerProcess, ClusterError> {
        self.spawn_as(name, cmd, None)
    }

    /// [`Local::spawn`], as `user` (uid, gid) when given ([`ServerProcess::spawn_as`]).
    pub(super) fn spawn_as(
        &self,
        name: &str,
        cmd: Command,
        user: Option<(u32, u32)>,
    ) -> Result<ServerProcess, ClusterError> {
        ServerProcess::spawn_as(name, self.addr(name).ip(), cmd, &self.log(name), user)
    }

    /// The run's data directory (each node's is below it).
    pub(super) fn data_root(&self) -> &Path {
        self.data.path()
    }

    /// The private-network host of `node`.
    fn host_of(&self, node: &Node) -> Result<&net::Host, ClusterError> {
        let err = |detail: String| ClusterError::Setup {
            node: node.name.clone(),
            what: "partition".into(),
            detail,
        };
        let net = self.network.as_ref().ok_or_else(|| {
            err("the servers run without a private network (partition faults need one)".into())
        })?;
        let ip = node.addr.ip();
        net.host(ip)
            .ok_or_else(|| err(format!("{ip} is not in a network namespace")))
    }
}

/// [`netem::steady_delay`] for the nodes at `addrs`: the server hosts that hold any, and
/// MariaDB's port on the gateway.
fn steady_delay(
    net: &net::Network,
    addrs: &HashMap<String, SocketAddr>,
    rtt: Duration,
) -> Result<Vec<netem::Link>, ClusterError> {
    let mut servers: Vec<IpAddr> = (addrs.values().map(SocketAddr::ip))
        .filter(|ip| net.servers.iter().any(|h| h.ip == *ip))
        .collect();
    servers.sort();
    servers.dedup();
    let store_ports: Vec<u16> = (addrs.iter())
        .filter(|(name, a)| is_node_of(name, Service::Mariadb) && a.ip() == net.gateway)
        .map(|(_, a)| a.port())
        .collect();
    netem::steady_delay(net, &servers, &store_ports, rtt).map_err(|detail| ClusterError::Setup {
        node: "network".into(),
        what: "environment.rtt".into(),
        detail,
    })
}

#[async_trait]
impl Backend for Local {
    fn provisioner(&self) -> Provisioner {
        Provisioner::Local
    }

    fn network(&self) -> Option<&net::Network> {
        self.network.as_ref()
    }

    /// iptables DROP rules in each isolated node's namespace: from and to every other server
    /// host and the hosts of the cut workers.
    async fn partition(
        &self,
        nodes: &mut [&mut Node],
        clients: &[usize],
        _workers: usize,
    ) -> Result<Vec<usize>, ClusterError> {
        let isolated: Vec<&net::Host> = nodes
            .iter()
            .map(|n| self.host_of(n))
            .collect::<Result<_, _>>()?;
        let net = self.network.as_ref().expect("host_of found a network");
        let mut others: Vec<IpAddr> = net
            .servers
            .iter()
            .filter(|h| isolated.iter().all(|i| i.ip != h.ip))
            .map(|h| h.ip)
            .collect();
        others.extend(
            clients
                .iter()
                .filter_map(|k| net.clients.get(*k))
                .map(|h| h.ip),
        );
        for (h, n) in isolated.iter().zip(nodes.iter()) {
            net.cut(h, &others).map_err(|detail| ClusterError::Setup {
                node: n.name.clone(),
                what: "partition".into(),
                detail,
            })?;
        }
        Ok(clients.to_vec())
    }

    /// NFQUEUE (or REJECT) rules in the node's namespace against every other server host and
    /// the hosts of `clients`, and the queue thread that serves them.
    fn impair(
        &self,
        node: &Node,
        clients: &[usize],
        imp: Impairment,
        seed: u64,
        lifetime: Duration,
    ) -> Result<Vec<usize>, ClusterError> {
        let host = self.host_of(node)?;
        let net = self.network.as_ref().expect("host_of found a network");
        let peers: Vec<IpAddr> = (net.servers.iter())
            .filter(|h| h.ip != host.ip)
            .chain(clients.iter().filter_map(|k| net.clients.get(*k)))
            .map(|h| h.ip)
            .collect();
        let link = netem::Link::start(host, &peers, imp, seed, lifetime).map_err(|detail| {
            ClusterError::Setup {
                node: node.name.clone(),
                what: "network fault".into(),
                detail,
            }
        })?;
        let mut links = self.links.lock().expect("links are never poisoned");
        let on_node = links.entry(node.name.clone()).or_default();
        // A second fault on the same node replaces the first, healed now; the first one's heal,
        // still to come, gets what it counted.
        if let Some(old) = on_node.live.replace(link) {
            on_node.replaced.push_back(old.stop());
        }
        Ok(clients.to_vec())
    }

    fn unimpair(&self, node: &Node) -> Result<LinkCounts, ClusterError> {
        let err = |detail: String| ClusterError::Setup {
            node: node.name.clone(),
            what: "heal network fault".into(),
            detail,
        };
        let mut links = self.links.lock().expect("links are never poisoned");
        let on_node = links.entry(node.name.clone()).or_default();
        // Heals come in the order their faults started: a replaced fault's first.
        if let Some(counts) = on_node.replaced.pop_front() {
            return counts.map_err(err);
        }
        let link =
            (on_node.live.take()).ok_or_else(|| err("no network fault on this node".into()))?;
        drop(links);
        link.stop().map_err(err)
    }

    fn impaired(&self, node: &Node) -> bool {
        let links = self.links.lock().expect("links are never poisoned");
        links.get(&node.name).is_some_and(|l| l.live.is_some())
    }

    async fn heal(&self, node: &mut Node) -> Result<(), ClusterError> {
        let host = self.host_of(node)?;
        let net = self.network.as_ref().expect("host_of found a network");
        net.heal(host).map_err(|detail| ClusterError::Setup {
            node: node.name.clone(),
            what: "heal partition".into(),
            detail,
        })
    }

    fn set_clock(&self, name: &str, change: Option<(i64, f64)>) -> Result<(), ClusterError> {
        let control = clock::control_path(&self.data.path().join(name));
        if !control.exists() {
            return Err(ClusterError::Setup {
                node: name.to_string(),
                what: "clock fault".into(),
                detail: "this node was not started with the clock shim (only standalone Redis \
                         nodes are)"
                    .into(),
            });
        }
        clock::set(&control, change)
            .map_err(|e| ClusterError::io(format!("write {}", control.display()), e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_belongs_to_the_service_it_is_named_after() {
        assert!(is_node_of("etcd-2", Service::Etcd));
        assert!(is_node_of("redis-1", Service::Redis));
        assert!(is_node_of("mariadb", Service::Mariadb));
        assert!(!is_node_of("redis-cluster-1", Service::Redis));
        assert!(!is_node_of("etcd-2 (peer)", Service::Etcd));
        assert!(!is_node_of("zookeeper-1", Service::Etcd));
    }
}
