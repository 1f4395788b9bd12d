//! What lockbench knows about one service, behind one trait: [`ServiceKind`], implemented in
//! the service's own module and listed once in `registry.rs`. The guard, the external target
//! and the results ask through it, so no other file matches on [`Service`] to start, lead,
//! claim or describe a service.

use std::net::SocketAddr;
use std::time::Duration;

use async_trait::async_trait;

use super::builds::Builds;
use super::containers::Image;
use super::counters::{Meter, Reading};
use super::durability::{Durability, Source};
use super::error::ClusterError;
use super::external::Missing;
use super::model::{ClusterOptions, Endpoints, Needs, NodeInfo, Role, Service};
use super::node::Node;
use super::provision::Launcher;

/// What starting one service brought up.
pub(super) struct Started {
    /// Its nodes, in the order results list them.
    pub nodes: Vec<Node>,
    /// Puts their addresses (and logins) into the run's endpoints.
    pub publish: Box<dyn FnOnce(&mut Endpoints) + Send>,
    /// The id each node goes by when its servers name a leader (etcd's member ids: the leader
    /// may be the node that no longer answers), by node name.
    pub member_ids: Vec<(String, u64)>,
}

impl Started {
    /// `nodes`, published by `publish`, with no member ids.
    pub fn new(nodes: Vec<Node>, publish: impl FnOnce(&mut Endpoints) + Send + 'static) -> Self {
        Self {
            nodes,
            publish: Box::new(publish),
            member_ids: Vec::new(),
        }
    }

    /// `nodes`, whose addresses are added to the list `list` picks of the run's endpoints.
    pub fn listed(nodes: Vec<Node>, list: fn(&mut Endpoints) -> &mut Vec<SocketAddr>) -> Self {
        let addrs: Vec<SocketAddr> = nodes.iter().map(|n| n.addr).collect();
        Self::new(nodes, move |ep| list(ep).extend(addrs))
    }
}

/// What a service starts its nodes with.
#[derive(Clone, Copy)]
pub(super) struct Start<'a> {
    /// The backend its nodes go on.
    pub launcher: Launcher<'a>,
    /// What the run needs of it (how many Redis servers, a PostgreSQL replica).
    pub needs: Needs,
    /// The run's options: ports, logs, persistence, builds.
    pub opts: &'a ClusterOptions,
}

/// Which node of `service` leads, as a running cluster asks it of a service.
pub(super) struct Asked<'n, 'a> {
    /// The service asked about: this one, or the one it names the master of.
    pub service: Service,
    /// Its nodes.
    pub members: Vec<&'n Node>,
    /// How the servers are reached.
    pub endpoints: &'a Endpoints,
    /// [`Started::member_ids`] of every service.
    pub member_ids: &'a [(String, u64)],
}

/// A node whose durability is asked.
#[derive(Clone, Copy)]
pub(super) struct NodeAt<'a> {
    /// Its address.
    pub addr: SocketAddr,
    /// The run's endpoints: its login.
    pub ep: &'a Endpoints,
    /// Where the settings its server cannot be asked about come from.
    pub unasked: Source,
}

/// External target: what a service copies its part of a run's endpoints from.
#[derive(Clone, Copy)]
pub(super) struct FromTarget<'a> {
    /// Everything the target file names.
    pub target: &'a Endpoints,
    /// What the run needs of it.
    pub needs: Needs,
}

/// A build as [`ServiceKind::build`] names it: its `[servers]` key, its name, and whether a
/// node's version is it.
pub(super) type BuildOf = (&'static str, &'static str, bool);

/// What a service is, as data: the methods of [`ServiceKind`] that only read it are default
/// methods over it, so a service's `impl` holds what it does and one `const` of this.
pub(super) struct About {
    /// The service described.
    pub service: Service,
    /// Whether a run with these needs starts this service's own set of nodes.
    pub wanted: fn(Needs) -> bool,
    /// Local nodes of these builds: an error naming the package (or the install command of a
    /// private build) when a binary or file is missing.
    pub check_installed: fn(Builds) -> Result<(), ClusterError>,
    /// Local nodes: the name of every port its nodes listen on (reserved before any starts).
    pub port_names: fn(Needs) -> Vec<String>,
    /// Of the build these builds choose for it: its `[servers]` key, its name, and whether a
    /// node reporting this version runs it; `None`: its build cannot be chosen.
    pub build: Option<fn(Builds, &str) -> BuildOf>,
    /// Every container image its nodes may run, the default build's first (none: it has no
    /// containers).
    pub images: &'static [Image],
}

/// Everything lockbench knows about one service: which [`Needs`] ask for it, its flags and
/// readiness (inside `start`), which node leads, its slots, what it does with a write, and
/// how a run claims, cleans and describes it on an external target.
#[async_trait]
pub(super) trait ServiceKind: Sync {
    /// What it is, as data ([`About`]).
    fn about(&self) -> &'static About;

    /// The service described.
    fn service(&self) -> Service {
        self.about().service
    }

    /// Whether a run with `needs` starts this service's own set of nodes.
    fn wanted(&self, needs: Needs) -> bool {
        (self.about().wanted)(needs)
    }

    /// [`About::check_installed`] of `builds`.
    fn check_installed(&self, builds: Builds) -> Result<(), ClusterError> {
        (self.about().check_installed)(builds)
    }

    /// [`About::port_names`] when a run has `needs`.
    fn port_names(&self, needs: Needs) -> Vec<String> {
        (self.about().port_names)(needs)
    }

    /// Starts its nodes as `s` asks, and waits until they are ready.
    async fn start(&self, s: Start<'_>) -> Result<Started, ClusterError>;

    /// The service whose master this one names (Sentinel names Redis's): asked about that
    /// service's leader whenever it runs.
    fn names_master_of(&self) -> Option<Service> {
        None
    }

    /// Of `q.members` (the nodes of `q.service`: this service, or the one it names the master
    /// of), the one that leads now as the servers say; `Ok(None)` while none does. A single
    /// node leads by itself.
    async fn leader<'n>(&self, q: Asked<'n, '_>) -> Result<Option<&'n Node>, ClusterError> {
        Ok(q.members.into_iter().find(|n| n.role == Role::Primary))
    }

    /// Makes its standby `node` the primary, as an operator or a failover tool would after a
    /// fault of the primary (reached through `ep`); returns how long it took until the node
    /// took a write. A service whose servers fail over by themselves has nothing to do.
    async fn promote(&self, node: &Node, ep: &Endpoints) -> Result<Duration, ClusterError> {
        let _ = ep;
        Err(ClusterError::Setup {
            node: node.name.clone(),
            what: "promote".into(),
            detail: format!("{} has no promotion done by lockbench", self.service()),
        })
    }

    /// Whether it shards keys over slots, each served by a master of its own.
    fn has_slots(&self) -> bool {
        false
    }

    /// For a service with slots: the master serving SKU `sku`'s slot now and its replicas,
    /// asked of its servers in `ep`.
    async fn slot_owners(
        &self,
        ep: &Endpoints,
        sku: u32,
    ) -> Result<(SocketAddr, Vec<SocketAddr>), String> {
        let _ = (ep, sku);
        Err(format!("{} has no slots", self.service()))
    }

    /// What its node `n` does with a write before acknowledging it. `None`: its nodes keep no
    /// data of a run.
    async fn durability(&self, n: NodeAt<'_>) -> Option<Durability> {
        let _ = n;
        None
    }

    /// Of the build `builds` chooses for it: its `[servers]` key, its name, and whether a node
    /// reporting `version` runs it; `None`: its build cannot be chosen.
    fn build(&self, builds: Builds, version: &str) -> Option<BuildOf> {
        self.about().build.map(|b| b(builds, version))
    }

    /// Every container image its nodes may run, the default build's first (none: it has no
    /// containers).
    fn images(&self) -> Vec<Image> {
        self.about().images.to_vec()
    }

    /// The image its containers run with `builds`.
    fn image(&self, builds: Builds) -> Option<Image> {
        let _ = builds;
        self.images().first().copied()
    }

    /// What its counters of the work it did count; `None`: lockbench reads none of them.
    fn work_meter(&self) -> Option<Meter> {
        None
    }

    /// Its work counters now, summed over its nodes in `ep` that strategies send requests to;
    /// the error says why they cannot be read.
    async fn work(&self, ep: &Endpoints) -> Result<Reading, String> {
        let _ = ep;
        Err(format!("lockbench reads no counters of {}", self.service()))
    }

    /// External target: copies its servers and login from `from.target` into `out`, as much as
    /// `from.needs` asks; a missing part is an error naming the table and what the strategy
    /// needs of it (`("[etcd]", "an etcd cluster")`).
    fn copy_from_target(&self, from: FromTarget<'_>, out: &mut Endpoints) -> Result<(), Missing>;

    /// External target: checks that `ep.prefix` is free or lockbench's on its servers in `ep`
    /// (none: nothing to do), then marks it as lockbench's; refuses
    /// ([`ClusterError::PrefixTaken`]) when it holds data without the marker.
    async fn claim(&self, ep: &Endpoints) -> Result<(), ClusterError>;

    /// External target: removes everything under `ep.prefix` from its servers in `ep`, best
    /// effort on each; returns what failed, one line per server.
    async fn release(&self, ep: &Endpoints) -> Vec<String>;

    /// External target: its servers in `ep`, with the versions they report.
    async fn describe(&self, ep: &Endpoints) -> Vec<NodeInfo>;
}
