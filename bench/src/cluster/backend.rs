//! Provisioner backends: where the nodes of a run live, and how a fault reaches them.
//!
//! Two traits split the work. A [`NodeServer`] (`node.rs`) is the guard of one node (a child
//! process, a container): it is killed, restarted, paused and resumed through the trait,
//! whatever serves it. A [`Backend`] owns what the nodes share (port reservations and network namespaces for
//! local processes, the Docker network for containers) and does what spans nodes: a partition.
//! Which backend a run has, and the `Launcher` through which the service modules start nodes
//! on it, are `provision.rs`'s: this file names no backend, so the backends can implement its
//! traits without a circle.

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;

use super::error::ClusterError;
use super::model::Provisioner;
use super::net;
use super::netem::{Impairment, LinkCounts};
use super::node::{Node, NodeServer};

/// How long any server may take to become ready before the run fails.
pub(super) const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// Where the nodes of a run live: local processes or containers. Dropped after the nodes.
#[async_trait]
pub(super) trait Backend: std::fmt::Debug + Send + Sync {
    /// Which backend this is, for results.
    fn provisioner(&self) -> Provisioner;

    /// The private network of local nodes, when they run in namespaces.
    fn network(&self) -> Option<&net::Network> {
        None
    }

    /// Cuts `nodes` off from every other server and from the client workers `clients` asks
    /// for (of `workers`); returns the workers actually cut (a backend may only cut all).
    async fn partition(
        &self,
        nodes: &mut [&mut Node],
        clients: &[usize],
        workers: usize,
    ) -> Result<Vec<usize>, ClusterError>;

    /// Undoes [`Backend::partition`] for `node`.
    async fn heal(&self, node: &mut Node) -> Result<(), ClusterError>;

    /// Impairs the links between `node` and every other server host and the hosts of the client
    /// workers `clients` (a network fault), for at most `lifetime`; returns the workers whose
    /// links are impaired. Only local nodes in the run's private network can.
    fn impair(
        &self,
        node: &Node,
        _clients: &[usize],
        _imp: Impairment,
        _seed: u64,
        _lifetime: Duration,
    ) -> Result<Vec<usize>, ClusterError> {
        Err(ClusterError::Setup {
            node: node.name.clone(),
            what: "network fault".into(),
            detail: format!(
                "{} nodes are not in a private network of this run (use --provision local)",
                self.provisioner().name()
            ),
        })
    }

    /// Undoes [`Backend::impair`] for `node` (rules deleted, held packets released, queue
    /// closed); what its queue saw.
    fn unimpair(&self, node: &Node) -> Result<LinkCounts, ClusterError> {
        Err(ClusterError::Setup {
            node: node.name.clone(),
            what: "heal network fault".into(),
            detail: "no network fault on this node".into(),
        })
    }

    /// Whether a network fault acts on `node` now (a later fault that replaced one whose heal
    /// came late): its rules are not the late heal's residue.
    fn impaired(&self, _node: &Node) -> bool {
        false
    }

    /// Moves the wall clock of node `name`; only nodes started with the clock shim can.
    fn set_clock(&self, name: &str, _change: Option<(i64, f64)>) -> Result<(), ClusterError> {
        Err(ClusterError::Setup {
            node: name.to_string(),
            what: "clock fault".into(),
            detail: format!(
                "{} nodes have no clock shim (use --provision local)",
                self.provisioner().name()
            ),
        })
    }
}

/// Polls `probe` (each attempt bounded to 2 s) until it answers, a server of `watch` stops,
/// or [`READY_TIMEOUT`] passes; a timeout names the first server's log.
pub(super) async fn wait_ready<T, F, Fut>(
    name: &str,
    watch: &mut [&mut dyn NodeServer],
    mut probe: F,
) -> Result<T, ClusterError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let log: PathBuf = watch
        .first()
        .map(|s| s.log().to_path_buf())
        .unwrap_or_default();
    let start = tokio::time::Instant::now();
    let mut last = String::from("no attempt yet");
    while start.elapsed() < READY_TIMEOUT {
        for s in watch.iter_mut() {
            s.check_running(name).await?;
        }
        match tokio::time::timeout(Duration::from_secs(2), probe()).await {
            Ok(Ok(v)) => return Ok(v),
            Ok(Err(e)) => last = e,
            Err(_) => last = "probe timed out after 2s".into(),
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    Err(ClusterError::NotReady {
        node: name.to_string(),
        waited: READY_TIMEOUT,
        last,
        log,
    })
}
