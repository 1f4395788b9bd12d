//! Network faults (delay, loss, bandwidth, reset) in the runner: the impairment itself is the
//! cluster's (`cluster::netem`); this file adds what a result needs — a probe of the impaired
//! path before the fault, during it and after its heal, so the report shows what the delay
//! really was, and a check that the heal left no rule or queue behind.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::plan::{ClientSide, Impairment};
use crate::cluster::OwnedCluster;
use crate::cluster::netem::{LinkCounts, ProbeSamples};

/// Connects of the probe before the fault and after its heal, and their spacing.
const CALM_SAMPLES: (usize, Duration) = (5, Duration::from_millis(10));
/// Most connects during the fault, and their spacing (the heal ends them sooner).
const DURING_SAMPLES: (usize, Duration) = (10, Duration::from_millis(100));
/// Bound of one connect outside a fault (a SYN lost on a calm link is resent after 1 s).
const CALM_TIMEOUT: Duration = Duration::from_secs(3);

/// What a network fault's probe measured: TCP connects through the impaired path (from the
/// host of a client worker whose link is impaired, else from another server's host, to the
/// node's port), before the fault, during it and after its heal.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkProbe {
    /// The path: `worker-2 → redis-3`, or `another server → zookeeper-2`.
    pub path: String,
    /// Just before the fault: the baseline.
    pub before: ProbeSamples,
    /// While the fault was in force.
    pub during: ProbeSamples,
    /// Just after the heal.
    pub after: ProbeSamples,
    /// Packets through the fault's queue (delay, loss, bandwidth; 0 for a reset).
    pub packets: u64,
    /// Of which dropped.
    pub dropped: u64,
    /// Rules and queues of network faults left in the node's namespace after the heal, one
    /// line each: empty when the heal removed everything.
    pub left_after_heal: Vec<String>,
}

/// The probe that runs while the fault is in force; the heal stops it.
#[derive(Debug)]
pub struct During {
    stop: Arc<AtomicBool>,
    thread: Mutex<Option<JoinHandle<Result<ProbeSamples, String>>>>,
}

/// Waits for a probe thread off the runtime's threads.
async fn join(h: JoinHandle<Result<ProbeSamples, String>>) -> Result<ProbeSamples, String> {
    match tokio::task::spawn_blocking(move || h.join()).await {
        Ok(Ok(r)) => r.map(finish),
        _ => Err("the probe thread panicked".into()),
    }
}

fn finish(mut s: ProbeSamples) -> ProbeSamples {
    s.median_ms = s.median();
    s
}

/// The client workers whose links a fault with `clients` impairs, of `workers`.
pub fn impaired_clients(clients: ClientSide, workers: usize) -> Vec<usize> {
    match clients {
        ClientSide::Split => (workers / 2..workers).collect(),
        ClientSide::All => (0..workers).collect(),
        ClientSide::None => Vec::new(),
    }
}

/// A calm probe of the path to `node` from client `from` (else another server): before the
/// fault or after its heal.
async fn calm(cluster: &OwnedCluster, node: &str, from: Option<usize>) -> ProbeSamples {
    let (n, gap) = CALM_SAMPLES;
    let stop = Arc::new(AtomicBool::new(false));
    match cluster.probe(node, from, (n, gap, CALM_TIMEOUT), stop) {
        Ok(h) => join(h).await.unwrap_or_default(),
        Err(_) => ProbeSamples::default(),
    }
}

/// Impairs the links of `nodes` (the first one probed) to the other servers and to `clients`:
/// probes the calm path first. Returns the probe record so far; an error is the fault's note.
pub async fn impair(
    cluster: &OwnedCluster,
    nodes: &[String],
    clients: &[usize],
    imp: Impairment,
    seed: u64,
    lifetime: Duration,
) -> Result<(LinkProbe, Vec<usize>), String> {
    let node = nodes.first().ok_or("no node to impair")?;
    let from = clients.first().copied();
    let path = match from {
        Some(k) => format!("worker-{k} → {node}"),
        None => format!("another server → {node}"),
    };
    let before = calm(cluster, node, from).await;
    let cut = (cluster.impair(nodes, clients, imp, seed, lifetime)).map_err(|e| e.to_string())?;
    let probe = LinkProbe {
        path,
        before,
        ..LinkProbe::default()
    };
    Ok((probe, cut))
}

/// Starts probing the impaired path of `node` from client `from` (else another server) until
/// the heal: each connect bounded by what the impairment can add, plus a resent SYN.
pub fn start_during(
    cluster: &OwnedCluster,
    node: &str,
    from: Option<usize>,
    imp: Impairment,
) -> Option<Arc<During>> {
    let extra = match imp {
        Impairment::Delay { delay, jitter } => delay + jitter,
        Impairment::Bandwidth { .. } => crate::cluster::netem::BACKLOG_LIMIT,
        Impairment::Loss { .. } | Impairment::Reset => Duration::ZERO,
    };
    let (n, gap) = DURING_SAMPLES;
    let stop = Arc::new(AtomicBool::new(false));
    let thread = cluster
        .probe(node, from, (n, gap, CALM_TIMEOUT + extra * 2), stop.clone())
        .ok()?;
    Some(Arc::new(During {
        stop,
        thread: Mutex::new(Some(thread)),
    }))
}

impl During {
    /// The probe `thread`, which ends when `stop` is set (the disk faults' probe, `disk.rs`).
    pub(super) fn of_thread(
        stop: Arc<AtomicBool>,
        thread: JoinHandle<Result<ProbeSamples, String>>,
    ) -> Arc<Self> {
        Arc::new(During {
            stop,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// What the probe measured, once it ended (empty when it failed).
    pub(super) async fn samples(&self) -> ProbeSamples {
        let thread = self.thread.lock().expect("never poisoned").take();
        match thread {
            Some(h) => join(h).await.unwrap_or_default(),
            None => ProbeSamples::default(),
        }
    }

    /// Stops the probe before the heal: a connect still in flight when the rules go would mix
    /// both sides of it, and is discarded.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

impl LinkProbe {
    /// Adds what one node's queue saw.
    pub fn count(&mut self, c: LinkCounts) {
        self.packets += c.packets;
        self.dropped += c.dropped;
    }
}

/// After the heal of the network fault on `nodes` (rules deleted, held packets released,
/// queues closed): the samples taken while it was in force, the calm path after it, and
/// whatever the heal left behind. Errors are returned for the fault's note.
pub async fn after_heal(
    cluster: &OwnedCluster,
    nodes: &[String],
    from: Option<usize>,
    during: Option<Arc<During>>,
    probe: &mut LinkProbe,
) -> Vec<String> {
    let mut errors = Vec::new();
    let thread = during.and_then(|d| d.thread.lock().expect("never poisoned").take());
    if let Some(h) = thread {
        probe.during = join(h).await.unwrap_or_default();
    }
    if let Some(node) = nodes.first() {
        probe.after = calm(cluster, node, from).await;
    }
    for n in nodes {
        match cluster.residue(n) {
            Ok(left) => probe.left_after_heal.extend(left),
            Err(e) => errors.push(e.to_string()),
        }
    }
    if !probe.left_after_heal.is_empty() {
        errors.push(format!("left after the heal: {:?}", probe.left_after_heal));
    }
    errors
}
