//! The chaos file: a list of faults, or a schedule generated from the run's seed.
//!
//! Read by `parse.rs` ([`ChaosPlan::load`]), resolved against the workload: durations may be
//! relative to its lock ttl (`"3x ttl"`), faults must start inside the load, and a generated
//! schedule is drawn from its seed. Every error names the file, the field and the expected
//! form, like workload errors.
//!
//! A resolved fault is a [`Fault`]: one variant per kind, carrying only what that kind uses, so
//! a clock change without a clock fault or a holder point on a server pause cannot be built.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Serialize, Serializer};

use super::holder::Point;
pub use crate::cluster::netem::Impairment;
use crate::cluster::{Needs, Provisioner, Service};
use crate::names::{UnknownName, enum_names};

/// Bound of each command of a `command` fault unless the file sets `timeout`.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// Errors in a chaos file.
#[derive(Debug, thiserror::Error)]
pub enum ChaosError {
    /// The file could not be read.
    #[error("{file}: cannot read chaos file: {source}")]
    Read {
        file: String,
        source: std::io::Error,
    },
    /// Not valid TOML, or unknown / mistyped keys.
    #[error("{file}: {message}")]
    Parse { file: String, message: String },
    /// A value is out of range or does not fit the other values.
    #[error("{file}: {field} = {value}: expected {expected}")]
    Invalid {
        file: String,
        field: String,
        value: String,
        expected: String,
    },
}

/// What a fault does: the `kind` of a chaos file (each is a variant of [`Fault`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// SIGKILL the target nodes; restart them when the fault ends.
    Kill,
    /// SIGSTOP the target (a server node, or a client worker process); SIGCONT at the end.
    Pause,
    /// Shift (`jump`) or speed up (`rate`) CLOCK_REALTIME of the target Redis nodes.
    Clock,
    /// Cut the target nodes off from the service's other nodes (and from some clients, see
    /// [`ClientSide`]) with iptables rules in their network namespaces; remove the rules at
    /// the end.
    Partition,
    /// Run the file's own shell command (`run`) at the start and its `heal` command at the
    /// end, each bounded by `timeout`: how faults reach servers lockbench does not own.
    Command,
    /// Hold each packet the target nodes send to their peers for `delay` ± `jitter`.
    Delay,
    /// Drop a share (`loss`) of the packets the target nodes send to their peers.
    Loss,
    /// Pace the packets the target nodes send to their peers to `bandwidth`.
    Bandwidth,
    /// Answer every TCP packet the target nodes receive from their peers with a reset.
    Reset,
    /// SIGKILL the target nodes and drop every write their data directories (on lazyfs) had
    /// not fsynced; restart them on what was synced when the fault ends.
    PowerLoss,
    /// Make the target nodes' fsync and fdatasync (and `write`, with `writes = true`) take
    /// `delay` ± `jitter` longer, on lazyfs.
    SlowDisk,
}

enum_names!(FaultKind {
    Kill = "kill",
    Pause = "pause",
    Clock = "clock",
    Partition = "partition",
    Command = "command",
    Delay = "delay",
    Loss = "loss",
    Bandwidth = "bandwidth",
    Reset = "reset",
    PowerLoss = "power-loss",
    SlowDisk = "slow-disk",
});

impl FaultKind {
    /// Whether it impairs the network rather than cutting it ([`Fault::Network`]).
    pub fn is_network(self) -> bool {
        matches!(
            self,
            Self::Delay | Self::Loss | Self::Bandwidth | Self::Reset
        )
    }

    /// Whether it needs the target nodes' data on lazyfs (power-loss, slow-disk).
    pub fn is_disk(self) -> bool {
        matches!(self, Self::PowerLoss | Self::SlowDisk)
    }
}

/// A slow disk's added wait on each fsync (and write, with `writes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskDelay {
    pub delay: Duration,
    /// Each call waits `delay` ± up to this.
    pub jitter: Duration,
    /// Whether `write` waits too, not only fsync and fdatasync.
    pub writes: bool,
}

/// Which client processes a partition also cuts from the isolated nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientSide {
    /// The second half of the workers lose the isolated nodes, the first half still reach
    /// them: the split in which an old master keeps taking writes from some clients while
    /// the others move on to a new one.
    Split,
    /// Every client still reaches the isolated nodes (servers are cut from each other only).
    None,
    /// No client reaches the isolated nodes.
    All,
}

enum_names!(ClientSide {
    Split = "split",
    None = "none",
    All = "all",
});

/// Which nodes of a service a server fault hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeSet {
    /// The Redis master (as Sentinel says now), or the only node of a single-node service.
    Master,
    /// The ZooKeeper / etcd leader (as the servers say now); the master for Redis.
    Leader,
    /// One node that does not lead now (a ZooKeeper / etcd follower, a Sentinel set's
    /// replica), drawn from the seed.
    Follower,
    /// One node of the service, drawn from the seed.
    One,
    /// The largest minority of the service's nodes (1 of 3, 2 of 5).
    Minority,
    /// The smallest majority (2 of 3, 3 of 5).
    Majority,
    /// Every node of the service.
    All,
    /// The replica of a Redis Cluster slot's master (the slot of the fault's `sku`).
    Replica,
}

enum_names!(NodeSet {
    Master = "master",
    Replica = "replica",
    Leader = "leader",
    Follower = "follower",
    One = "one",
    Minority = "minority",
    Majority = "majority",
    All = "all",
});

/// Who a fault hits, as `target = "..."` names it: nodes of a service, or a client process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Server nodes.
    Nodes(NodeSet),
    /// The client process whose buyer next reaches the fault's [`Point`] while holding a lock
    /// (pause only; by default between its read of the stock and its write).
    Holder,
    /// One client process, drawn from the seed (pause only).
    Client,
    /// The reserve-then-pay reapers of this process, between their select of expired
    /// reservations and their update (pause only; needs `[pay]`).
    Reaper,
}

impl Target {
    /// The client targets; the others are [`NodeSet`]s.
    const CLIENTS: [Target; 3] = [Target::Holder, Target::Client, Target::Reaper];

    /// Every name: the [`NodeSet`]s, then the clients.
    pub const NAMES: &'static [&'static str] = &[
        "master", "replica", "leader", "follower", "one", "minority", "majority", "all", "holder",
        "client", "reaper",
    ];

    /// The name in chaos files and summaries.
    pub fn name(self) -> &'static str {
        match self {
            Self::Nodes(n) => n.name(),
            Self::Holder => "holder",
            Self::Client => "client",
            Self::Reaper => "reaper",
        }
    }

    /// Whether the target is a client process rather than server nodes.
    pub fn is_client(self) -> bool {
        !matches!(self, Self::Nodes(_))
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Target {
    type Err = UnknownName;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Some(t) = Self::CLIENTS.into_iter().find(|t| t.name() == s) {
            return Ok(t);
        }
        s.parse().map(Self::Nodes).map_err(|_| UnknownName {
            name: s.to_string(),
            expected: Self::NAMES,
        })
    }
}

/// How a clock fault changes the clock.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ClockChange {
    /// Added to CLOCK_REALTIME, ms (negative: back in time).
    pub jump_ms: i64,
    /// Speed of the clock (1.0 = real time).
    pub rate: f64,
}

/// The server nodes a fault hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Servers {
    /// Which of the service's nodes.
    pub nodes: NodeSet,
    /// Which service; `None`: the strategy's lock service.
    pub service: Option<Service>,
    /// On a Redis Cluster, whose slot's master or replica (`sku = N` in the file; `None`:
    /// SKU 0).
    pub sku: Option<u32>,
}

/// Which client process a pause stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientPause {
    /// The process whose buyer next reaches this point of its attempt while holding a lock.
    Holder(Point),
    /// One process, drawn from the seed.
    Any,
    /// No process: the reapers in the coordinator wait between their select and their update
    /// ([`super::holder::reaper_selected`]) until the fault heals.
    Reaper,
}

/// What a fault does and to whom: each kind carries only what it uses.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// SIGKILL the nodes; restart them when the fault ends.
    Kill(Servers),
    /// SIGSTOP the nodes; SIGCONT at the end.
    Pause(Servers),
    /// SIGSTOP a client worker process; SIGCONT at the end.
    PauseClient(ClientPause),
    /// Change CLOCK_REALTIME of the (Redis) nodes; set it back at the end.
    Clock {
        /// Whose clock.
        servers: Servers,
        /// How it changes.
        change: ClockChange,
    },
    /// Cut the nodes off from the service's other nodes and from `clients`.
    Partition {
        /// Who is isolated.
        servers: Servers,
        /// Which clients are cut too.
        clients: ClientSide,
    },
    /// Run the file's own shell commands.
    Command(CommandFault),
    /// Impair the links between the nodes and the service's other nodes and `clients`:
    /// delay, loss, bandwidth or reset (NFQUEUE, `cluster::netem`).
    Network {
        /// Whose links.
        servers: Servers,
        /// Which clients' links too.
        clients: ClientSide,
        /// What happens to the packets.
        impairment: Impairment,
    },
    /// SIGKILL the nodes, drop their unsynced writes; restart them when the fault ends.
    PowerLoss(Servers),
    /// Slow the nodes' fsyncs until the fault ends.
    SlowDisk {
        /// Whose disk.
        servers: Servers,
        /// By how much.
        disk: DiskDelay,
    },
}

impl Fault {
    /// Its kind, as the file names it.
    pub fn kind(&self) -> FaultKind {
        match self {
            Self::Kill(_) => FaultKind::Kill,
            Self::Pause(_) | Self::PauseClient(_) => FaultKind::Pause,
            Self::Clock { .. } => FaultKind::Clock,
            Self::Partition { .. } => FaultKind::Partition,
            Self::Command(_) => FaultKind::Command,
            Self::Network { impairment, .. } => match impairment {
                Impairment::Delay { .. } => FaultKind::Delay,
                Impairment::Loss { .. } => FaultKind::Loss,
                Impairment::Bandwidth { .. } => FaultKind::Bandwidth,
                Impairment::Reset => FaultKind::Reset,
            },
            Self::PowerLoss(_) => FaultKind::PowerLoss,
            Self::SlowDisk { .. } => FaultKind::SlowDisk,
        }
    }

    /// Who it hits; `None` for a command fault (whatever its commands hit).
    pub fn target(&self) -> Option<Target> {
        match self {
            Self::PauseClient(ClientPause::Holder(_)) => Some(Target::Holder),
            Self::PauseClient(ClientPause::Any) => Some(Target::Client),
            Self::PauseClient(ClientPause::Reaper) => Some(Target::Reaper),
            Self::Command(_) => None,
            _ => self.servers().map(|s| Target::Nodes(s.nodes)),
        }
    }

    /// What a network fault does to the packets.
    pub fn impairment(&self) -> Option<Impairment> {
        match self {
            Self::Network { impairment, .. } => Some(*impairment),
            _ => None,
        }
    }

    /// The server nodes it hits, if it hits servers lockbench started.
    pub fn servers(&self) -> Option<&Servers> {
        match self {
            Self::Kill(s) | Self::Pause(s) | Self::PowerLoss(s) => Some(s),
            Self::Clock { servers, .. }
            | Self::Partition { servers, .. }
            | Self::Network { servers, .. }
            | Self::SlowDisk { servers, .. } => Some(servers),
            Self::PauseClient(_) | Self::Command(_) => None,
        }
    }
}

/// One fault of the resolved schedule.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultSpec {
    /// 1-based, in start order.
    pub id: usize,
    /// Start, from the start of the load.
    pub at: Duration,
    /// How long it lasts before it is healed.
    pub duration: Duration,
    /// What it does and to whom.
    pub fault: Fault,
}

/// The shell commands of a `command` fault.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommandFault {
    /// Run with `sh -c` when the fault starts.
    pub run: String,
    /// Run with `sh -c` when it ends, always (also after `run` failed, and on Ctrl-C).
    pub heal: String,
    /// Bound of each command; it is killed (its whole process group) when it runs out.
    #[serde(serialize_with = "human")]
    pub timeout: Duration,
}

/// A fault as `summary.json` shows it (`faults[].plan`): one flat object whose keys do not
/// depend on the kind, apart from the kind's own data.
#[derive(Serialize)]
struct FlatFault<'a> {
    id: usize,
    kind: FaultKind,
    /// `command` for command faults.
    target: &'static str,
    service: Option<Service>,
    #[serde(serialize_with = "human")]
    at: Duration,
    #[serde(serialize_with = "human")]
    duration: Duration,
    #[serde(skip_serializing_if = "Option::is_none")]
    clock: Option<ClockChange>,
    #[serde(skip_serializing_if = "Option::is_none")]
    clients: Option<ClientSide>,
    #[serde(skip_serializing_if = "Option::is_none")]
    command: Option<&'a CommandFault>,
    #[serde(skip_serializing_if = "Option::is_none")]
    point: Option<Point>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sku: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "human_opt")]
    delay: Option<Duration>,
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "human_opt")]
    jitter: Option<Duration>,
    #[serde(skip_serializing_if = "Option::is_none")]
    loss: Option<f64>,
    /// Bits per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    bandwidth_bit_s: Option<u64>,
    /// A slow disk's: whether writes wait too.
    #[serde(skip_serializing_if = "Option::is_none")]
    writes: Option<bool>,
}

impl Serialize for FaultSpec {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let f = &self.fault;
        FlatFault {
            id: self.id,
            kind: f.kind(),
            target: f.target().map_or("command", Target::name),
            service: f.servers().and_then(|s| s.service),
            at: self.at,
            duration: self.duration,
            clock: match f {
                Fault::Clock { change, .. } => Some(*change),
                _ => None,
            },
            clients: match f {
                Fault::Partition { clients, .. } | Fault::Network { clients, .. } => Some(*clients),
                _ => None,
            },
            command: match f {
                Fault::Command(c) => Some(c),
                _ => None,
            },
            point: match f {
                Fault::PauseClient(ClientPause::Holder(p)) => Some(*p),
                _ => None,
            },
            sku: f.servers().and_then(|s| s.sku),
            delay: match (f, f.impairment()) {
                (_, Some(Impairment::Delay { delay, .. })) => Some(delay),
                (Fault::SlowDisk { disk, .. }, _) => Some(disk.delay),
                _ => None,
            },
            jitter: match (f, f.impairment()) {
                (_, Some(Impairment::Delay { jitter, .. })) => Some(jitter),
                (Fault::SlowDisk { disk, .. }, _) => Some(disk.jitter),
                _ => None,
            },
            writes: match f {
                Fault::SlowDisk { disk, .. } => Some(disk.writes),
                _ => None,
            },
            loss: match f.impairment() {
                Some(Impairment::Loss { share }) => Some(share),
                _ => None,
            },
            bandwidth_bit_s: match f.impairment() {
                Some(Impairment::Bandwidth { bits_per_s }) => Some(bits_per_s),
                _ => None,
            },
        }
        .serialize(s)
    }
}

impl FaultSpec {
    /// Short label such as `pause holder` or `kill redis master`.
    pub fn label(&self) -> String {
        let kind = self.fault.kind();
        match (&self.fault, self.fault.target()) {
            (Fault::Command(c), _) => format!("command `{}`", short(&c.run)),
            (f, Some(target)) => {
                let of_sku = (f.servers().and_then(|s| s.sku))
                    .map(|k| format!(" of sku {k}"))
                    .unwrap_or_default();
                match f.servers().and_then(|s| s.service) {
                    Some(s) => format!("{kind} {s} {target}{of_sku}"),
                    None => format!("{kind} {target}{of_sku}"),
                }
            }
            (_, None) => kind.to_string(),
        }
    }
}

/// The first line of a command, cut to 40 characters, for labels.
fn short(cmd: &str) -> String {
    let line = cmd.trim().lines().next().unwrap_or_default();
    match line.char_indices().nth(40) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line.to_string(),
    }
}

/// A validated chaos file, resolved against one workload.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChaosPlan {
    /// Where it came from.
    pub file: String,
    /// What the scenario shows (from the file).
    pub description: String,
    /// Faults sorted by start.
    pub faults: Vec<FaultSpec>,
}

impl ChaosPlan {
    /// Whether every fault pauses a lock holder: then a strategy without a lock has nothing
    /// the plan can hit, and its run would only report that no fault took effect.
    pub fn pauses_only_holders(&self) -> bool {
        !self.faults.is_empty()
            && self
                .faults
                .iter()
                .all(|f| f.fault.target() == Some(Target::Holder))
    }

    /// Whether clients must run as worker processes: to pause one, or to put them in network
    /// namespaces of their own for a partition.
    pub fn needs_workers(&self) -> bool {
        self.faults.iter().any(|f| {
            matches!(
                f.fault,
                Fault::PauseClient(ClientPause::Holder(_) | ClientPause::Any)
                    | Fault::Partition { .. }
                    | Fault::Network { .. }
            )
        })
    }

    /// Whether any fault partitions or impairs the network (nodes then run in network
    /// namespaces).
    pub fn needs_network(&self) -> bool {
        self.faults
            .iter()
            .any(|f| matches!(f.fault, Fault::Partition { .. } | Fault::Network { .. }))
    }

    /// Rejects, before anything starts, network faults (delay, loss, bandwidth, reset) when
    /// this process cannot make them: they need root for namespaces, iptables and NFQUEUE.
    pub fn check_privileges(&self, root: bool) -> Result<(), ChaosError> {
        self.check_disk(root, std::path::Path::new("/dev/fuse").exists())?;
        match self.faults.iter().position(|f| f.fault.kind().is_network()) {
            Some(i) if !root => Err(ChaosError::Invalid {
                file: self.file.clone(),
                field: format!("fault[{i}].kind"),
                value: format!("{:?}", self.faults[i].fault.kind().name()),
                expected: "a fault this process can make: network faults need root \
                           (CAP_NET_ADMIN, for network namespaces, iptables and NFQUEUE); run as \
                           root or drop the fault"
                    .into(),
            }),
            _ => Ok(()),
        }
    }

    /// Rejects, before anything starts, power-loss and slow-disk faults where lazyfs cannot
    /// mount: it needs the kernel's FUSE (`fuse`: /dev/fuse exists) and root.
    pub fn check_disk(&self, root: bool, fuse: bool) -> Result<(), ChaosError> {
        let Some(i) = self.faults.iter().position(|f| f.fault.kind().is_disk()) else {
            return Ok(());
        };
        let why = match (fuse, root) {
            (false, _) => {
                "/dev/fuse is missing: the kernel (or the container lockbench runs in) \
                           has no FUSE, which lazyfs needs"
            }
            (true, false) => {
                "this process is not root: lazyfs mounts /dev/fuse itself, which \
                              only root may do"
            }
            (true, true) => return Ok(()),
        };
        Err(ChaosError::Invalid {
            file: self.file.clone(),
            field: format!("fault[{i}].kind"),
            value: format!("{:?}", self.faults[i].fault.kind().name()),
            expected: format!(
                "a fault this machine can make: power-loss and slow-disk put the node's data on \
                 a FUSE filesystem (lazyfs), and {why}; run as root where /dev/fuse exists, or \
                 drop the fault"
            ),
        })
    }

    /// The services whose nodes' data must sit on lazyfs: those a power-loss or slow-disk
    /// fault names, else `default` (the strategy's lock service).
    pub fn lazyfs_services(&self, default: Service) -> Vec<Service> {
        let mut out: Vec<Service> = (self.faults.iter())
            .filter(|f| f.fault.kind().is_disk())
            .filter_map(|f| f.fault.servers().map(|s| s.service.unwrap_or(default)))
            .collect();
        out.sort_by_key(|s| s.name());
        out.dedup();
        out
    }

    /// Longest pause of a client process: attempts may outlast their bound by this much.
    pub fn max_client_pause(&self) -> Duration {
        self.faults
            .iter()
            .filter(|f| {
                matches!(
                    f.fault,
                    Fault::PauseClient(ClientPause::Holder(_) | ClientPause::Any)
                )
            })
            .map(|f| f.duration)
            .max()
            .unwrap_or_default()
    }

    /// Whether any fault changes clocks (Redis nodes then start with the clock shim).
    pub fn needs_clock_shim(&self) -> bool {
        self.faults
            .iter()
            .any(|f| matches!(f.fault, Fault::Clock { .. }))
    }

    /// Rejects, before anything starts, a server fault its service cannot take or the run
    /// does not start. The service is the one the fault names, else `default` (the strategy's
    /// lock service): the parse checks only what the file names, and a fault resolved to the
    /// default would otherwise fail mid-run, as a fault note beside a measured run.
    pub fn check_services(&self, default: Service, needs: Needs) -> Result<(), ChaosError> {
        for (i, f) in self.faults.iter().enumerate() {
            let Some(s) = f.fault.servers() else {
                continue;
            };
            let service = s.service.unwrap_or(default);
            let named = if s.service.is_some() {
                "names"
            } else {
                "falls to the strategy's lock service,"
            };
            let reject = |key: &str, value: String, expected: String| {
                Err(ChaosError::Invalid {
                    file: self.file.clone(),
                    field: format!("fault[{i}].{key}"),
                    value,
                    expected,
                })
            };
            if !needs.runs(service) {
                let runs = needs.names().join(", ");
                return reject(
                    "service",
                    format!("{:?}", service.name()),
                    format!("a service this strategy runs ({runs}): the fault {named} {service}"),
                );
            }
            if matches!(f.fault, Fault::Clock { .. }) && service != Service::Redis {
                return reject(
                    "kind",
                    "\"clock\"".into(),
                    format!(
                        "kill, pause or partition: the fault {named} {service}, and the clock \
                         shim is preloaded into Redis nodes only"
                    ),
                );
            }
            if f.fault.kind().is_network() && service == Service::Mariadb {
                return reject(
                    "service",
                    "\"mariadb\"".into(),
                    format!(
                        "a service whose nodes have network namespaces of their own (the fault \
                         {named} {service}): MariaDB runs on the private network's bridge \
                         address, in lockbench's own namespace, whose links a network fault \
                         does not touch"
                    ),
                );
            }
            if (s.nodes == NodeSet::Replica || s.sku.is_some()) && service != Service::RedisCluster
            {
                let (key, value) = match s.sku {
                    Some(_) => ("sku", "set".to_string()),
                    None => ("target", "\"replica\"".to_string()),
                };
                return reject(
                    key,
                    value,
                    format!(
                        "a target of {service} (the fault {named} {service}): a slot's replica \
                         and `sku` exist only on a Redis Cluster"
                    ),
                );
            }
        }
        Ok(())
    }

    /// Rejects, before anything starts, a fault that servers provisioned by `p` cannot take.
    pub fn check_provisioner(&self, p: Provisioner) -> Result<(), ChaosError> {
        for (i, f) in self.faults.iter().enumerate() {
            let reject = |key: &str, value: String, expected: &str| {
                Err(ChaosError::Invalid {
                    file: self.file.clone(),
                    field: format!("fault[{i}].{key}"),
                    value,
                    expected: expected.to_string(),
                })
            };
            match (p, &f.fault) {
                (Provisioner::Target, f) if f.servers().is_some() => {
                    return reject(
                        "kind",
                        format!("{:?}", f.kind().name()),
                        "\"command\" (or a pause of a client): lockbench kills, pauses and cuts \
                         only servers it started; against an external target write the fault as \
                         commands, e.g. kind = \"command\", run = \"kubectl delete pod redis-0\", \
                         heal = \"kubectl wait …\"",
                    );
                }
                (Provisioner::Containers, Fault::Clock { .. }) => {
                    return reject(
                        "kind",
                        "\"clock\"".into(),
                        "kill, pause or partition: clock faults preload a library into local \
                         Redis processes, which containers do not have; use --provision local",
                    );
                }
                (Provisioner::Containers, f @ Fault::Network { .. }) => {
                    return reject(
                        "kind",
                        format!("{:?}", f.kind().name()),
                        "kill, pause or partition: network faults (delay, loss, bandwidth, reset) \
                         queue the packets of a node's network namespace, which only local \
                         processes have here; use --provision local",
                    );
                }
                (Provisioner::Containers, f) if f.kind().is_disk() => {
                    return reject(
                        "kind",
                        format!("{:?}", f.kind().name()),
                        "kill, pause or partition: power-loss and slow-disk put a local node's \
                         data on lazyfs, a FUSE filesystem lockbench mounts itself, which \
                         containers do not have; use --provision local",
                    );
                }
                (Provisioner::Containers, Fault::Partition { clients, .. })
                    if *clients != ClientSide::All =>
                {
                    return reject(
                        "clients",
                        format!("{:?}", clients.name()),
                        "\"all\": a container is partitioned by disconnecting it from the run's \
                         Docker network, which cuts it from every node and every client; split \
                         and node-only partitions need --provision local",
                    );
                }
                _ => {}
            }
        }
        Ok(())
    }
}

fn human<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&humantime::format_duration(*d).to_string())
}

fn human_opt<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => human(d, s),
        None => s.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Workload;

    fn workload() -> Workload {
        Workload::parse(
            "w.toml",
            "[lock]\nttl = \"2s\"\n[load]\nduration = \"10s\"",
            &[],
        )
        .expect("valid workload")
    }

    fn err(text: &str) -> String {
        ChaosPlan::parse("c.toml", text, &workload())
            .expect_err("should be rejected")
            .to_string()
    }

    #[test]
    fn parses_faults_and_resolves_ttl_multiples() {
        let p = ChaosPlan::parse(
            "c.toml",
            r#"
description = "x"
[[fault]]
kind = "pause"
target = "holder"
at = "3s"
duration = "3x ttl"
[[fault]]
kind = "clock"
target = "majority"
service = "redis"
at = "1s"
duration = "1s"
jump = "+1.5x ttl"
"#,
            &workload(),
        )
        .expect("valid");
        assert_eq!(p.faults.len(), 2);
        // Sorted by start, numbered from 1.
        assert_eq!(
            (p.faults[0].id, p.faults[0].fault.kind()),
            (1, FaultKind::Clock)
        );
        let Fault::Clock { servers, change } = p.faults[0].fault else {
            panic!("a clock fault: {:?}", p.faults[0]);
        };
        assert_eq!(change.jump_ms, 3000);
        assert_eq!(
            (servers.nodes, servers.service),
            (NodeSet::Majority, Some(Service::Redis))
        );
        assert_eq!(
            p.faults[1].fault,
            Fault::PauseClient(ClientPause::Holder(Point::AfterRead))
        );
        assert_eq!(p.faults[1].duration, Duration::from_secs(6));
        assert!(p.needs_workers() && p.needs_clock_shim());
        assert_eq!(p.max_client_pause(), Duration::from_secs(6));
    }

    #[test]
    fn generated_schedule_is_reproducible_and_inside_the_load() {
        let text = "[random]\nkinds = [\"kill\", \"pause\"]\nevery = \"1s\"\nduration = \"500ms\"";
        let a = ChaosPlan::parse("c.toml", text, &workload()).expect("valid");
        let b = ChaosPlan::parse("c.toml", text, &workload()).expect("valid");
        assert_eq!(a, b);
        assert!(a.faults.len() >= 2, "{:?}", a.faults);
        for pair in a.faults.windows(2) {
            // One fault at a time.
            assert!(pair[0].at + pair[0].duration <= pair[1].at);
        }
        assert!(a.faults.iter().all(|f| f.at < Duration::from_secs(10)));
        let mut other = workload();
        other.seed = 99;
        let c = ChaosPlan::parse("c.toml", text, &other).expect("valid");
        assert_ne!(a.faults, c.faults, "another seed, another schedule");
    }

    #[test]
    fn command_faults_parse_and_servers_faults_are_refused_on_a_target() {
        let text = "[[fault]]\nkind = \"command\"\nat = \"1s\"\nduration = \"2s\"\n\
                    run = \"docker pause r1\"\nheal = \"docker unpause r1\"\ntimeout = \"5s\"\n";
        let plan = ChaosPlan::parse("c.toml", text, &workload()).unwrap();
        let f = &plan.faults[0];
        let Fault::Command(c) = &f.fault else {
            panic!("a command fault: {f:?}");
        };
        assert_eq!(
            (c.run.as_str(), c.heal.as_str()),
            ("docker pause r1", "docker unpause r1")
        );
        assert_eq!(c.timeout, Duration::from_secs(5));
        assert_eq!(f.label(), "command `docker pause r1`");
        plan.check_provisioner(Provisioner::Target).unwrap();
        plan.check_provisioner(Provisioner::Local).unwrap();
        let cases = [
            (text.replace("timeout = \"5s\"\n", "target = \"one\"\n"), "fault[0].target"),
            (text.replace("run = \"docker pause r1\"\n", ""), "fault[0].run = missing"),
            (text.replace("\"docker unpause r1\"", "\" \""), "fault[0].heal"),
            (
                "[[fault]]\nkind = \"kill\"\ntarget = \"one\"\nat = \"1s\"\nduration = \"1s\"\nrun = \"x\"\n"
                    .to_string(),
                "fault[0].run = set: expected no value: only command faults take it",
            ),
            (
                "[[fault]]\nkind = \"kill\"\nat = \"1s\"\nduration = \"1s\"\n".to_string(),
                "fault[0].target = missing",
            ),
            (
                "[[fault]]\nkind = \"pause\"\ntarget = \"command\"\nat = \"1s\"\nduration = \"1s\"\n"
                    .to_string(),
                "fault[0].target = \"command\"",
            ),
        ];
        for (text, want) in cases {
            let e = ChaosPlan::parse("c.toml", &text, &workload())
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
        let kill = "[[fault]]\nkind = \"kill\"\ntarget = \"master\"\nat = \"1s\"\nduration = \"1s\"\n\
                    [[fault]]\nkind = \"pause\"\ntarget = \"holder\"\nat = \"1s\"\nduration = \"1s\"\n";
        let plan = ChaosPlan::parse("k.toml", kill, &workload()).unwrap();
        let e = plan
            .check_provisioner(Provisioner::Target)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("k.toml: fault[0].kind = \"kill\": expected \"command\""),
            "{e}"
        );
        // A client pause alone is fine anywhere: the client is lockbench's own process.
        let holder =
            "[[fault]]\nkind = \"pause\"\ntarget = \"holder\"\nat = \"1s\"\nduration = \"1s\"\n";
        let plan = ChaosPlan::parse("h.toml", holder, &workload()).unwrap();
        plan.check_provisioner(Provisioner::Target).unwrap();
    }

    #[test]
    fn containers_take_kills_pauses_and_whole_partitions_only() {
        let fault = |kind: &str, extra: &str| {
            let text = format!(
                "[[fault]]\nkind = \"{kind}\"\ntarget = \"leader\"\nat = \"1s\"\n\
                 duration = \"1s\"\n{extra}"
            );
            ChaosPlan::parse("c.toml", &text, &workload()).unwrap()
        };
        for ok in [
            fault("kill", ""),
            fault("pause", ""),
            fault("partition", "clients = \"all\"\n"),
        ] {
            ok.check_provisioner(Provisioner::Containers).unwrap();
        }
        let cases = [
            (
                fault("clock", "jump = \"+1s\"\n"),
                "c.toml: fault[0].kind = \"clock\": expected kill, pause or partition",
            ),
            (
                fault("partition", ""),
                "c.toml: fault[0].clients = \"split\": expected \"all\"",
            ),
            (
                fault("partition", "clients = \"none\"\n"),
                "c.toml: fault[0].clients = \"none\": expected \"all\"",
            ),
        ];
        for (plan, want) in cases {
            let e = plan
                .check_provisioner(Provisioner::Containers)
                .unwrap_err()
                .to_string();
            assert!(e.starts_with(want), "{e}");
            // The same plans run on local processes.
            plan.check_provisioner(Provisioner::Local).unwrap();
        }
    }

    #[test]
    fn the_shipped_target_chaos_example_parses() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap();
        let w = Workload::load(&root.join("workloads/chaos.toml"), &[]).unwrap();
        let plan = ChaosPlan::load(&root.join("targets/example-chaos.toml"), &w).unwrap();
        assert!(
            plan.faults
                .iter()
                .all(|f| matches!(f.fault, Fault::Command(_)))
        );
        plan.check_provisioner(Provisioner::Target).unwrap();
    }

    #[test]
    fn holder_pauses_land_after_the_read_unless_told_otherwise() {
        let holder =
            "[[fault]]\nkind = \"pause\"\ntarget = \"holder\"\nat = \"1s\"\nduration = \"1s\"\n";
        let fault = |text: &str| {
            let plan = ChaosPlan::parse("h.toml", text, &workload()).unwrap();
            plan.faults[0].fault.clone()
        };
        assert_eq!(
            fault(holder),
            Fault::PauseClient(ClientPause::Holder(Point::AfterRead))
        );
        for &p in Point::ALL {
            let text = format!("{holder}point = \"{p}\"\n");
            assert_eq!(fault(&text), Fault::PauseClient(ClientPause::Holder(p)));
        }
        let server = holder.replace("\"holder\"", "\"one\"");
        assert!(matches!(fault(&server), Fault::Pause(_)), "a server pause");
    }

    #[test]
    fn summaries_show_every_fault_as_one_flat_object() {
        let text = r#"
[[fault]]
kind = "kill"
target = "leader"
at = "3s"
duration = "2s"
[[fault]]
kind = "clock"
target = "master"
service = "redis"
at = "4s"
duration = "1s"
jump = "-500ms"
[[fault]]
kind = "partition"
target = "one"
at = "5s"
duration = "1s"
[[fault]]
kind = "pause"
target = "holder"
at = "6s"
duration = "1s"
[[fault]]
kind = "command"
at = "7s"
duration = "1s"
run = "a"
heal = "b"
"#;
        let plan = ChaosPlan::parse("c.toml", text, &workload()).unwrap();
        let json: Vec<_> = plan
            .faults
            .iter()
            .map(|f| serde_json::to_value(f).unwrap())
            .collect();
        // The keys `summary.json` has always had (faults[].plan).
        let want = serde_json::json!([
            {"id": 1, "kind": "kill", "target": "leader", "service": null, "at": "3s",
             "duration": "2s"},
            {"id": 2, "kind": "clock", "target": "master", "service": "redis", "at": "4s",
             "duration": "1s", "clock": {"jump_ms": -500, "rate": 1.0}},
            {"id": 3, "kind": "partition", "target": "one", "service": null, "at": "5s",
             "duration": "1s", "clients": "split"},
            {"id": 4, "kind": "pause", "target": "holder", "service": null, "at": "6s",
             "duration": "1s", "point": "after-read"},
            {"id": 5, "kind": "command", "target": "command", "service": null, "at": "7s",
             "duration": "1s", "command": {"run": "a", "heal": "b", "timeout": "30s"}},
        ]);
        assert_eq!(serde_json::Value::Array(json), want);
        let labels: Vec<String> = plan.faults.iter().map(FaultSpec::label).collect();
        assert_eq!(
            labels,
            [
                "kill leader",
                "clock redis master",
                "partition one",
                "pause holder",
                "command `a`"
            ]
        );
    }

    #[test]
    fn network_faults_parse_with_their_own_keys() {
        let fault = |kind: &str, extra: &str| {
            let text = format!(
                "[[fault]]\nkind = \"{kind}\"\ntarget = \"follower\"\nservice = \"zookeeper\"\n\
                 at = \"1s\"\nduration = \"2s\"\n{extra}"
            );
            ChaosPlan::parse("n.toml", &text, &workload())
        };
        let ms = Duration::from_millis;
        let cases = [
            (
                fault("delay", "delay = \"100ms\"\njitter = \"20ms\"\n"),
                Impairment::Delay {
                    delay: ms(100),
                    jitter: ms(20),
                },
            ),
            (
                fault("delay", "delay = \"1s\"\n"),
                Impairment::Delay {
                    delay: ms(1000),
                    jitter: Duration::ZERO,
                },
            ),
            (
                fault("loss", "loss = 0.3\n"),
                Impairment::Loss { share: 0.3 },
            ),
            (
                fault("bandwidth", "bandwidth = \"1mbit\"\n"),
                Impairment::Bandwidth {
                    bits_per_s: 1_000_000,
                },
            ),
            (
                fault("bandwidth", "bandwidth = \"512 kbit/s\"\n"),
                Impairment::Bandwidth {
                    bits_per_s: 512_000,
                },
            ),
            (fault("reset", ""), Impairment::Reset),
        ];
        for (plan, want) in cases {
            let plan = plan.unwrap();
            let f = &plan.faults[0];
            assert_eq!(f.fault.impairment(), Some(want));
            assert_eq!(f.fault.target(), Some(Target::Nodes(NodeSet::Follower)));
            // Every client's link by default: the node is slow for everyone.
            assert!(matches!(
                f.fault,
                Fault::Network {
                    clients: ClientSide::All,
                    ..
                }
            ));
            assert!(plan.needs_network() && plan.needs_workers());
            plan.check_provisioner(Provisioner::Local).unwrap();
            plan.check_privileges(true).unwrap();
            let e = plan.check_privileges(false).unwrap_err().to_string();
            assert!(e.starts_with("n.toml: fault[0].kind = \""), "{e}");
            assert_contains!(e, "need root", "drop the fault");
            let e = (plan.check_provisioner(Provisioner::Containers))
                .unwrap_err()
                .to_string();
            assert_contains!(e, "--provision local");
            let e = (plan.check_provisioner(Provisioner::Target))
                .unwrap_err()
                .to_string();
            assert_contains!(e, "expected \"command\"");
        }
        let mariadb = Needs {
            mariadb: true,
            ..Needs::NONE
        };
        // The file names no service: it falls to the strategy's, MariaDB.
        let text = "[[fault]]\nkind = \"loss\"\ntarget = \"one\"\nat = \"1s\"\nduration = \"1s\"\n\
                    loss = 0.5\n";
        let on_mariadb = (ChaosPlan::parse("n.toml", text, &workload()).unwrap())
            .check_services(Service::Mariadb, mariadb)
            .unwrap_err()
            .to_string();
        assert_contains!(on_mariadb, "fault[0].service = \"mariadb\"");
        let plan = fault(
            "delay",
            "delay = \"100ms\"\njitter = \"20ms\"\nclients = \"split\"\n",
        );
        let f = &plan.unwrap().faults[0];
        assert_eq!(f.label(), "delay zookeeper follower");
        let json = serde_json::to_value(f).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"id": 1, "kind": "delay", "target": "follower",
                "service": "zookeeper", "at": "1s", "duration": "2s", "clients": "split",
                "delay": "100ms", "jitter": "20ms"})
        );
    }

    #[test]
    fn bad_network_values_name_file_field_and_form() {
        let base = "[[fault]]\ntarget = \"one\"\nat = \"1s\"\nduration = \"1s\"\n";
        let cases = [
            (
                "kind = \"delay\"\n",
                "fault[0].delay = missing: expected a duration",
            ),
            (
                "kind = \"delay\"\ndelay = \"-100ms\"\n",
                "fault[0].delay = \"-100ms\": expected a duration from \"1ms\" to \"30s\"",
            ),
            (
                "kind = \"delay\"\ndelay = \"0ms\"\n",
                "fault[0].delay = \"0ms\"",
            ),
            (
                "kind = \"delay\"\ndelay = \"100 parsecs\"\n",
                "fault[0].delay",
            ),
            (
                "kind = \"delay\"\ndelay = \"100ms\"\njitter = \"200ms\"\n",
                "fault[0].jitter = \"200ms\": expected a duration up to the delay",
            ),
            (
                "kind = \"loss\"\nloss = 1.5\n",
                "fault[0].loss = 1.5: expected the share of packets dropped, a number in (0, 1]",
            ),
            ("kind = \"loss\"\nloss = -0.1\n", "fault[0].loss = -0.1"),
            ("kind = \"loss\"\nloss = 0.0\n", "fault[0].loss = 0"),
            ("kind = \"loss\"\n", "fault[0].loss = missing"),
            (
                "kind = \"bandwidth\"\nbandwidth = \"1 megabyte\"\n",
                "fault[0].bandwidth = \"1 megabyte\": expected a rate such as \"1mbit\"",
            ),
            (
                "kind = \"bandwidth\"\nbandwidth = \"1bit\"\n",
                "at least \"8kbit\"",
            ),
            (
                "kind = \"loss\"\nloss = 0.3\ndelay = \"1s\"\n",
                "fault[0].delay = set: expected no value: only delay and slow-disk faults take it",
            ),
            (
                "kind = \"reset\"\nbandwidth = \"1mbit\"\n",
                "fault[0].bandwidth = set: expected no value: only bandwidth faults take it",
            ),
            (
                "kind = \"kill\"\nloss = 0.3\n",
                "fault[0].loss = set: expected no value: only loss faults take it",
            ),
        ];
        for (extra, want) in cases {
            let e = err(&format!("{base}{extra}"));
            assert!(e.starts_with("c.toml: "), "{e}");
            assert!(e.contains(want), "expected {want:?} in: {e}");
        }
        // Unlike a partition, a network fault may hit a majority: a slow quorum.
        let slow_majority = format!(
            "{}kind = \"delay\"\ndelay = \"30ms\"\n",
            base.replace("\"one\"", "\"majority\"")
        );
        ChaosPlan::parse("c.toml", &slow_majority, &workload()).unwrap();
    }

    #[test]
    fn a_cluster_slot_fault_names_its_sku() {
        let text = "[[fault]]\nkind = \"kill\"\ntarget = \"master\"\nservice = \"redis-cluster\"\n\
                    sku = 5\nat = \"1s\"\nduration = \"1s\"\n";
        let plan = ChaosPlan::parse("c.toml", text, &workload()).unwrap();
        let f = &plan.faults[0];
        assert_eq!(
            f.fault,
            Fault::Kill(Servers {
                nodes: NodeSet::Master,
                service: Some(Service::RedisCluster),
                sku: Some(5),
            })
        );
        assert_eq!(f.label(), "kill redis-cluster master of sku 5");
        assert_eq!(serde_json::to_value(f).unwrap()["sku"], 5);
    }

    #[test]
    fn every_name_parses_back_to_its_value() {
        fn round_trip<T>(all: &[T])
        where
            T: Copy + PartialEq + std::fmt::Debug + fmt::Display + FromStr + Serialize,
        {
            for &v in all {
                assert_eq!(v.to_string().parse::<T>().ok(), Some(v));
                let json = serde_json::to_value(v).unwrap();
                assert_eq!(json, serde_json::Value::String(v.to_string()));
            }
        }
        round_trip(FaultKind::ALL);
        round_trip(ClientSide::ALL);
        round_trip(NodeSet::ALL);
        round_trip(Point::ALL);
        round_trip(Service::ALL);
        round_trip(Provisioner::ALL);
        round_trip(crate::cluster::Role::ALL);
        let targets: Vec<Target> = NodeSet::ALL
            .iter()
            .map(|&n| Target::Nodes(n))
            .chain(Target::CLIENTS)
            .collect();
        let names: Vec<String> = targets.iter().map(Target::to_string).collect();
        assert_eq!(names, Target::NAMES);
        for t in targets {
            assert_eq!(t.to_string().parse::<Target>(), Ok(t));
        }
        let e = "command".parse::<Target>().unwrap_err().to_string();
        assert!(
            e.starts_with("\"command\": expected one of \"master\""),
            "{e}"
        );
    }

    #[test]
    fn bad_files_name_file_field_and_form() {
        let base =
            "[[fault]]\nkind = \"pause\"\ntarget = \"one\"\nat = \"1s\"\nduration = \"1s\"\n";
        let cases = [
            (
                base.replace("\"pause\"", "\"explode\""),
                "fault[0].kind = \"explode\"",
            ),
            (
                base.replace("\"one\"", "\"boss\""),
                "fault[0].target = \"boss\"",
            ),
            (
                base.replace("at = \"1s\"", "at = \"soon\""),
                "fault[0].at = \"soon\"",
            ),
            (
                base.replace("duration = \"1s\"", "duration = \"2x lease\""),
                "fault[0].duration",
            ),
            (
                base.replace("at = \"1s\"", "at = \"20s\""),
                "before the load ends",
            ),
            (
                base.replace("\"pause\"", "\"kill\"")
                    .replace("\"one\"", "\"holder\""),
                "only `pause`",
            ),
            (format!("{base}jump = \"+1s\"\n"), "only clock faults"),
            (
                format!("{base}sku = 3\n"),
                "fault[0].sku = set: expected no value: only a Redis Cluster's slot master",
            ),
            (
                format!(
                    "{}service = \"redis\"\n",
                    base.replace("\"one\"", "\"replica\"")
                ),
                "fault[0].target = replica: expected a target of this service",
            ),
            (
                format!("{base}point = \"after-read\"\n"),
                "fault[0].point = set: expected no value: only pauses of the holder take it",
            ),
            (
                format!(
                    "{}point = \"mid-air\"\n",
                    base.replace("\"one\"", "\"holder\"")
                ),
                "fault[0].point = \"mid-air\": expected one of \"after-read\" (the default)",
            ),
            (base.replace("\"pause\"", "\"clock\""), "fault[0].jump"),
            (
                format!("{base}colour = \"red\"\n"),
                "unknown field `colour`",
            ),
            (
                "description = \"nothing\"".to_string(),
                "at least one [[fault]]",
            ),
            (
                "[random]\nkinds = []\nevery = \"1s\"\nduration = \"1s\"".to_string(),
                "random.kinds",
            ),
        ];
        for (text, want) in cases {
            let e = err(&text);
            assert!(e.starts_with("c.toml: "), "{e}");
            assert!(e.contains(want), "expected {want:?} in: {e}");
        }
    }

    #[test]
    fn disk_faults_parse_and_name_their_lazyfs_services() {
        let p = ChaosPlan::parse(
            "c.toml",
            r#"
[[fault]]
kind = "power-loss"
target = "master"
at = "2s"
duration = "1s"
[[fault]]
kind = "slow-disk"
target = "one"
service = "etcd"
at = "4s"
duration = "2s"
delay = "200ms"
jitter = "50ms"
writes = true
"#,
            &workload(),
        )
        .expect("valid");
        assert_eq!(p.faults[0].fault.kind(), FaultKind::PowerLoss);
        let Fault::SlowDisk { disk, .. } = p.faults[1].fault else {
            panic!("a slow disk: {:?}", p.faults[1]);
        };
        let ms = Duration::from_millis;
        assert_eq!(
            (disk.delay, disk.jitter, disk.writes),
            (ms(200), ms(50), true)
        );
        assert_eq!(
            p.lazyfs_services(Service::Redis),
            vec![Service::Etcd, Service::Redis]
        );
        let flat = serde_json::to_value(&p.faults[1]).expect("serialises");
        assert_eq!(
            (flat["kind"].as_str(), flat["writes"].as_bool()),
            (Some("slow-disk"), Some(true))
        );
        assert!(!p.needs_network() && !p.needs_workers());
        // Another run pays nothing: no disk fault, no lazyfs.
        let calm =
            "[[fault]]\nkind = \"kill\"\ntarget = \"master\"\nat = \"1s\"\nduration = \"1s\"";
        let k = ChaosPlan::parse("c.toml", calm, &workload()).expect("valid");
        assert!(k.lazyfs_services(Service::Redis).is_empty());
    }

    #[test]
    fn disk_faults_are_refused_where_lazyfs_cannot_mount_and_their_keys_elsewhere() {
        let text =
            "[[fault]]\nkind = \"power-loss\"\ntarget = \"master\"\nat = \"1s\"\nduration = \"1s\"";
        let p = ChaosPlan::parse("c.toml", text, &workload()).expect("valid");
        p.check_disk(true, true).expect("root with FUSE");
        let e = p.check_disk(false, true).unwrap_err().to_string();
        assert_contains!(e, "fault[0].kind", "not root");
        let e = p.check_disk(true, false).unwrap_err().to_string();
        assert_contains!(e, "/dev/fuse is missing");
        let e = p
            .check_provisioner(Provisioner::Containers)
            .unwrap_err()
            .to_string();
        assert_contains!(e, "--provision local");
        let e = p
            .check_provisioner(Provisioner::Target)
            .unwrap_err()
            .to_string();
        assert_contains!(e, "\"command\"");
        let e = err(
            "[[fault]]\nkind = \"kill\"\ntarget = \"master\"\nat = \"1s\"\nduration = \"1s\"\nwrites = true",
        );
        assert_contains!(e, "fault[0].writes", "only slow-disk");
        let e = err(
            "[[fault]]\nkind = \"slow-disk\"\ntarget = \"master\"\nat = \"1s\"\nduration = \"1s\"",
        );
        assert_contains!(e, "fault[0].delay", "missing");
    }
}
