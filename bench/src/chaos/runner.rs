//! Carries a [`ChaosPlan`] out while the load runs.
//!
//! One loop, one fault action at a time, in time order: inject at `at`, heal `duration` later
//! (a holder pause starts when the armed worker reports that it stopped itself). Each start and
//! heal marks a phase boundary for the recorder. When the load ends (or Ctrl-C), every active
//! fault is healed before the loop returns: paused nodes and workers get SIGCONT, killed nodes
//! are restarted, clocks are set back. A panic skips that, but then the cluster's and the
//! workers' guards kill every process they own (SIGKILL also ends a stopped process), and clock
//! control files die with the run directory.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::ChaCha8Rng;
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::disk;
use super::network::{self, LinkProbe};
use super::plan::{ChaosPlan, ClientPause, CommandFault, Fault, FaultSpec, NodeSet, Servers};
use crate::cluster::lazyfs::{Dropped, SlowDisk};
use crate::cluster::{ClusterError, OwnedCluster, Service, redis_cluster};
use crate::record::phases::Boundaries;

/// What became of one planned fault.
#[derive(Debug, Clone)]
pub struct FaultRecord {
    /// The plan's entry.
    pub spec: FaultSpec,
    /// What it hit: node names, or `worker-K`.
    pub nodes: Vec<String>,
    /// The client workers a partition cut from `nodes`, by index.
    pub cut_clients: Vec<usize>,
    /// When it took effect.
    pub started: Option<Instant>,
    /// When it was healed (the node answers again, the process runs again, the clock is true).
    pub healed: Option<Instant>,
    /// Why it did not happen as planned, or what went wrong while healing it.
    pub note: Option<String>,
    /// When a replica of the Redis Cluster slot whose master it hit first answered as master
    /// (polled every [`PROMOTION_POLL`]); `None`: no promotion was seen, or not such a fault.
    pub promoted: Option<Instant>,
    /// What a network fault's probe measured through the impaired path.
    pub probe: Option<LinkProbe>,
    /// The probe running while a network fault or a slow disk is in force; its heal stops it.
    pub during: Option<Arc<network::During>>,
    /// What a power loss dropped: the unsynced bytes of its nodes, and the files they were in.
    pub dropped: Option<Dropped>,
}

impl FaultRecord {
    /// What the summary lists as hit: `nodes`, then `cut from worker-K` for each cut client.
    pub fn summary_nodes(&self) -> Vec<String> {
        let cut = self
            .cut_clients
            .iter()
            .map(|k| format!("cut from worker-{k}"));
        self.nodes.iter().cloned().chain(cut).collect()
    }
}

/// What the runner may touch: the servers, client processes and log folder that faults reach.
pub struct Reach<'a> {
    /// Servers started by this run (`None` on an external target: only command faults and
    /// client pauses then).
    pub cluster: Option<&'a mut OwnedCluster>,
    /// Where command faults log their output.
    pub log_dir: std::path::PathBuf,
    /// Default service of server faults (the strategy's lock service).
    pub service: Service,
    /// Client worker processes, when the plan pauses clients.
    pub workers: Option<Arc<dyn super::ClientProcesses>>,
    /// Which worker stopped itself after an armed holder pause.
    pub paused: Option<mpsc::UnboundedReceiver<usize>>,
}

enum State {
    Pending,
    /// Holder pause armed in worker `k`, waiting for it to stop itself.
    Armed(usize),
    Active {
        heal_at: Instant,
        worker: Option<usize>,
    },
    Done,
}

/// Runs `plan` from `start` until every fault is done or `stop` fires, then heals what is
/// still active. `seed` picks the nodes of `one` / `minority` / `majority` and the worker.
pub async fn run_faults(
    plan: &ChaosPlan,
    t: &mut Reach<'_>,
    boundaries: &Boundaries,
    start: Instant,
    seed: u64,
    stop: CancellationToken,
) -> Vec<FaultRecord> {
    let mut records: Vec<FaultRecord> = plan.faults.iter().map(FaultRecord::planned).collect();
    let mut states: Vec<State> = plan.faults.iter().map(|_| State::Pending).collect();
    let mut watchers: Vec<Option<Promotion>> = plan.faults.iter().map(|_| None).collect();
    let mut paused = t.paused.take();
    loop {
        let next = next_due(&states, &records, start);
        let waiting_for_holder = states.iter().any(|s| matches!(s, State::Armed(_)));
        if next.is_none() && !waiting_for_holder {
            break;
        }
        let far = Instant::now() + Duration::from_secs(3600);
        tokio::select! {
            () = tokio::time::sleep_until(next.unwrap_or(far).into()) => {}
            Some(k) = async {
                match paused.as_mut() {
                    Some(rx) => rx.recv().await,
                    None => std::future::pending().await,
                }
            } => {
                holder_paused(&mut states, &mut records, boundaries, k);
                continue;
            }
            () = stop.cancelled() => break,
        }
        let now = Instant::now();
        for i in 0..states.len() {
            match states[i] {
                State::Pending if start + records[i].spec.at <= now => {
                    let (state, watch) = inject(&mut records[i], t, boundaries, seed).await;
                    states[i] = state;
                    watchers[i] = watch;
                }
                State::Active { heal_at, worker } if heal_at <= now => {
                    heal(&mut records[i], t, worker, boundaries).await;
                    states[i] = State::Done;
                }
                _ => {}
            }
        }
    }
    // The load is over (or interrupted): heal whatever is active, report what never ran.
    wind_down(&mut states, &mut records, t, boundaries).await;
    // Each watcher ends by itself (a promotion seen, or its deadline).
    for (r, w) in records.iter_mut().zip(watchers) {
        if let Some(w) = w {
            r.promoted = w.await.ok().flatten();
        }
    }
    records
}

impl FaultRecord {
    /// The record of a fault not yet started.
    fn planned(spec: &FaultSpec) -> Self {
        FaultRecord {
            spec: spec.clone(),
            nodes: Vec::new(),
            cut_clients: Vec::new(),
            started: None,
            healed: None,
            note: None,
            promoted: None,
            probe: None,
            during: None,
            dropped: None,
        }
    }
}

/// The next thing due: an injection or a heal.
fn next_due(states: &[State], records: &[FaultRecord], start: Instant) -> Option<Instant> {
    states
        .iter()
        .zip(records)
        .filter_map(|(s, r)| match s {
            State::Pending => Some(start + r.spec.at),
            State::Active { heal_at, .. } => Some(*heal_at),
            _ => None,
        })
        .min()
}

/// Worker `k` stopped itself: the holder pause armed in it starts now.
fn holder_paused(
    states: &mut [State],
    records: &mut [FaultRecord],
    boundaries: &Boundaries,
    k: usize,
) {
    if let Some(i) = states
        .iter()
        .position(|s| matches!(s, State::Armed(w) if *w == k))
    {
        let at = boundaries.mark();
        records[i].started = Some(at);
        states[i] = State::Active {
            heal_at: at + records[i].spec.duration,
            worker: Some(k),
        };
        tracing::info!(fault = records[i].spec.id, worker = k, "holder paused");
    }
}

/// Heals every active fault, disarms armed pauses and notes what never ran.
async fn wind_down(
    states: &mut [State],
    records: &mut [FaultRecord],
    t: &mut Reach<'_>,
    boundaries: &Boundaries,
) {
    for (i, state) in states.iter_mut().enumerate() {
        match *state {
            State::Active { worker, .. } => heal(&mut records[i], t, worker, boundaries).await,
            State::Armed(k) => {
                if let Some(w) = &t.workers {
                    let _ = w.arm_holder_pause(k, None);
                    // It may have stopped itself just now.
                    let _ = w.resume(k);
                }
                records[i].note = Some(format!(
                    "armed worker-{k}, but it acquired no lock before the load ended"
                ));
            }
            State::Pending => {
                records[i].note = Some("not started: the load ended first".into());
            }
            State::Done => {}
        }
        *state = State::Done;
    }
}

/// A task polling for the promotion of a replica: when it saw one.
type Promotion = tokio::task::JoinHandle<Option<Instant>>;

/// How often a promotion watcher asks the replicas for their role.
pub const PROMOTION_POLL: Duration = Duration::from_millis(50);
/// How long after the fault's planned heal a watcher keeps looking for a promotion (the
/// cluster's node timeout is 1 s, an election takes about as long again).
const PROMOTION_WAIT: Duration = Duration::from_secs(3);

/// Polls `candidates` that are not masters yet until one answers `ROLE` as master, at most
/// until `heal_at` + [`PROMOTION_WAIT`].
fn watch_promotion(candidates: Vec<std::net::SocketAddr>, heal_at: Instant) -> Promotion {
    tokio::spawn(async move {
        let deadline = heal_at + PROMOTION_WAIT;
        let masters = futures::future::join_all(
            (candidates.iter()).map(|a| redis_cluster::is_master(*a, None)),
        )
        .await;
        let replicas: Vec<std::net::SocketAddr> = (candidates.into_iter().zip(masters))
            .filter_map(|(a, master)| (!master).then_some(a))
            .collect();
        while Instant::now() < deadline {
            for r in &replicas {
                if redis_cluster::is_master(*r, None).await {
                    return Some(Instant::now());
                }
            }
            tokio::time::sleep(PROMOTION_POLL).await;
        }
        None
    })
}

/// Starts one fault; returns its new state, and the watcher of a promotion it may cause.
async fn inject(
    r: &mut FaultRecord,
    t: &mut Reach<'_>,
    boundaries: &Boundaries,
    seed: u64,
) -> (State, Option<Promotion>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xfa17_0000 ^ r.spec.id as u64);
    match r.spec.fault.clone() {
        Fault::Command(c) => (start_command(r, t, &c, boundaries).await, None),
        Fault::PauseClient(p) => (pause_client(r, t, p, boundaries, &mut rng), None),
        Fault::Kill(s)
        | Fault::Pause(s)
        | Fault::Clock { servers: s, .. }
        | Fault::Partition { servers: s, .. }
        | Fault::Network { servers: s, .. }
        | Fault::PowerLoss(s)
        | Fault::SlowDisk { servers: s, .. } => hit_servers(r, t, s, boundaries, &mut rng).await,
    }
}

/// The fault is on from the moment its command starts; a failure is noted, and the heal
/// command still runs at the end.
async fn start_command(
    r: &mut FaultRecord,
    t: &Reach<'_>,
    c: &CommandFault,
    boundaries: &Boundaries,
) -> State {
    let at = boundaries.mark();
    r.started = Some(at);
    r.nodes = vec!["command".into()];
    tracing::info!(fault = r.spec.id, run = %c.run, "command fault started");
    if let Err(e) = run_command(t, r.spec.id, c, &c.run, "run").await {
        r.note = Some(e);
    }
    State::Active {
        heal_at: at + r.spec.duration,
        worker: None,
    }
}

/// Stops a client worker now, or arms it to stop itself at the holder's point.
fn pause_client(
    r: &mut FaultRecord,
    t: &Reach<'_>,
    pause: ClientPause,
    boundaries: &Boundaries,
    rng: &mut ChaCha8Rng,
) -> State {
    if pause == ClientPause::Reaper {
        super::holder::pause_reapers(true);
        r.nodes = vec!["reapers".into()];
        let at = boundaries.mark();
        r.started = Some(at);
        return State::Active {
            heal_at: at + r.spec.duration,
            worker: None,
        };
    }
    let Some(workers) = t.workers.clone().filter(|w| !w.is_empty()) else {
        r.note = Some("no client worker processes to pause".into());
        return State::Done;
    };
    let k = rng.random_range(0..workers.len());
    r.nodes = vec![format!("worker-{k}")];
    if let ClientPause::Holder(point) = pause {
        return match workers.arm_holder_pause(k, Some(point)) {
            Ok(()) => State::Armed(k),
            Err(e) => {
                r.note = Some(format!("arming worker-{k}: {e}"));
                State::Done
            }
        };
    }
    if let Err(e) = workers.pause(k) {
        r.note = Some(format!("SIGSTOP worker-{k}: {e}"));
        return State::Done;
    }
    let at = boundaries.mark();
    r.started = Some(at);
    State::Active {
        heal_at: at + r.spec.duration,
        worker: Some(k),
    }
}

/// Kills, pauses, skews or cuts the server nodes `servers` names right now; a kill, pause or
/// partition of a Redis Cluster slot's master starts watching its replicas for a promotion.
async fn hit_servers(
    r: &mut FaultRecord,
    t: &mut Reach<'_>,
    servers: Servers,
    boundaries: &Boundaries,
    rng: &mut ChaCha8Rng,
) -> (State, Option<Promotion>) {
    let service = servers.service.unwrap_or(t.service);
    let Some(cluster) = t.cluster.as_deref_mut() else {
        r.note = Some("no servers of this run's own to hit (external target)".into());
        return (State::Done, None);
    };
    let (nodes, replicas) = match pick_nodes(cluster, service, servers, rng).await {
        Ok(n) => n,
        Err(e) => {
            r.note = Some(e);
            return (State::Done, None);
        }
    };
    let workers = t.workers.as_ref().map_or(0, |w| w.len());
    let mut errors = hit_links(r, cluster, &nodes, workers, rng.random()).await;
    if matches!(r.spec.fault, Fault::SlowDisk { .. }) {
        match disk::before(cluster, &nodes).await {
            Ok(p) => r.probe = Some(p),
            Err(e) => errors.push(e),
        }
    }
    for n in &nodes {
        if let Err(e) = hit_node(r, cluster, n, rng.random()).await {
            errors.push(e.to_string());
        }
    }
    r.nodes = nodes;
    let at = boundaries.mark();
    let hit = r.summary_nodes();
    tracing::info!(fault = r.spec.id, label = %r.spec.label(), ?hit, "fault started");
    r.started = Some(at);
    if let (Some(imp), Some(_)) = (r.spec.fault.impairment(), &r.probe) {
        let from = r.cut_clients.first().copied();
        r.during = network::start_during(cluster, &r.nodes[0], from, imp);
    }
    if matches!(r.spec.fault, Fault::SlowDisk { .. }) && r.probe.is_some() {
        r.during = disk::start_during(cluster, &r.nodes);
    }
    if !errors.is_empty() {
        r.note = Some(errors.join("; "));
    }
    let heal_at = at + r.spec.duration;
    let watch = match r.spec.fault {
        Fault::Kill(_) | Fault::Pause(_) | Fault::Partition { .. } if !replicas.is_empty() => {
            Some(watch_promotion(replicas, heal_at))
        }
        _ => None,
    };
    (
        State::Active {
            heal_at,
            worker: None,
        },
        watch,
    )
}

/// Kills, pauses, skews, drops the unsynced writes of or slows the disk of node `n` (links
/// are `hit_links`'s); `seed` draws a slow disk's jitter.
async fn hit_node(
    r: &mut FaultRecord,
    cluster: &mut OwnedCluster,
    n: &str,
    seed: u64,
) -> Result<(), ClusterError> {
    match r.spec.fault {
        Fault::Kill(_) => cluster.kill(n).await,
        Fault::Pause(_) => cluster.pause(n).await,
        Fault::Clock { change, .. } => cluster.set_clock(n, Some((change.jump_ms, change.rate))),
        Fault::PowerLoss(_) => {
            let d = cluster.power_loss(n).await?;
            let sum = r.dropped.get_or_insert_default();
            sum.bytes += d.bytes;
            sum.files += d.files;
            tracing::info!(
                fault = r.spec.id,
                node = n,
                bytes = d.bytes,
                files = d.files,
                "power loss dropped unsynced writes"
            );
            Ok(())
        }
        Fault::SlowDisk { disk, .. } => {
            let slow = SlowDisk {
                delay: disk.delay,
                jitter: disk.jitter,
                writes: disk.writes,
                seed,
            };
            cluster.slow_disk(n, Some(slow))
        }
        Fault::Partition { .. }
        | Fault::Network { .. }
        | Fault::PauseClient(_)
        | Fault::Command(_) => Ok(()),
    }
}

/// How long a network fault's queue may outlive its planned heal before it gives up by itself
/// (a backstop: every way out heals it sooner; its rules then let packets pass).
const NETWORK_GRACE: Duration = Duration::from_secs(60);

/// Cuts (partition) or impairs (network faults) the links of `nodes` to the other servers
/// and to some of the `workers`; notes which clients; returns the errors.
async fn hit_links(
    r: &mut FaultRecord,
    cluster: &mut OwnedCluster,
    nodes: &[String],
    workers: usize,
    seed: u64,
) -> Vec<String> {
    let mut errors = Vec::new();
    match r.spec.fault {
        Fault::Partition { clients, .. } => {
            let clients = network::impaired_clients(clients, workers);
            // The cluster cuts as its backend can; it says which clients it cut.
            match cluster.partition(nodes, &clients, workers).await {
                Ok(cut) => r.cut_clients = cut,
                Err(e) => errors.push(e.to_string()),
            }
        }
        Fault::Network {
            clients,
            impairment,
            ..
        } => {
            let clients = network::impaired_clients(clients, workers);
            let lifetime = r.spec.duration + NETWORK_GRACE;
            match network::impair(cluster, nodes, &clients, impairment, seed, lifetime).await {
                Ok((probe, cut)) => {
                    r.probe = Some(probe);
                    r.cut_clients = cut;
                }
                Err(e) => errors.push(e),
            }
        }
        _ => {}
    }
    errors
}

/// Ends one fault.
async fn heal(
    r: &mut FaultRecord,
    t: &mut Reach<'_>,
    worker: Option<usize>,
    boundaries: &Boundaries,
) {
    let mut errors = Vec::new();
    if r.spec.fault == Fault::PauseClient(ClientPause::Reaper) {
        super::holder::pause_reapers(false);
    } else if let Fault::Command(c) = &r.spec.fault {
        if let Err(e) = run_command(t, r.spec.id, c, &c.heal, "heal").await {
            errors.push(e);
        }
    } else if let Some(k) = worker {
        if let Some(w) = &t.workers
            && let Err(e) = w.resume(k)
        {
            errors.push(format!("SIGCONT worker-{k}: {e}"));
        }
    } else if let Some(cluster) = t.cluster.as_deref_mut() {
        if let Some(d) = &r.during {
            d.stop();
        }
        for n in &r.nodes {
            let res = match r.spec.fault {
                // Rules deleted, then held packets released, then the queue closed.
                Fault::Network { .. } => {
                    (cluster.unimpair(n)).map(|c| r.probe.get_or_insert_default().count(c))
                }
                Fault::Kill(_) | Fault::PowerLoss(_) => cluster.restart(n).await,
                Fault::SlowDisk { .. } => cluster.slow_disk(n, None),
                Fault::Pause(_) => cluster.resume(n).await,
                Fault::Clock { .. } => cluster.set_clock(n, None),
                Fault::Partition { .. } => cluster.heal_partition(n).await,
                Fault::PauseClient(_) | Fault::Command(_) => Ok(()),
            };
            if let Err(e) = res {
                errors.push(e.to_string());
            }
        }
    }
    let at = boundaries.mark();
    tracing::info!(fault = r.spec.id, "fault healed");
    r.healed = Some(at);
    if let (Some(cluster), Some(mut probe)) = (t.cluster.as_deref(), r.probe.take()) {
        let from = r.cut_clients.first().copied();
        let during = r.during.take();
        if matches!(r.spec.fault, Fault::SlowDisk { .. }) {
            disk::after_heal(cluster, &r.nodes, during, &mut probe).await;
        } else {
            errors.extend(network::after_heal(cluster, &r.nodes, from, during, &mut probe).await);
        }
        r.probe = Some(probe);
    }
    if !errors.is_empty() {
        let prior = r.note.take().map(|n| format!("{n}; ")).unwrap_or_default();
        r.note = Some(format!("{prior}healing: {}", errors.join("; ")));
    }
}

/// Runs one command of command fault `id`, logging to `logs/fault-<id>.log`.
async fn run_command(
    t: &Reach<'_>,
    id: usize,
    c: &CommandFault,
    cmd: &str,
    phase: &str,
) -> Result<(), String> {
    let log = t.log_dir.join(format!("fault-{id}.log"));
    let env = [
        ("LOCKBENCH_FAULT_ID", id.to_string()),
        ("LOCKBENCH_FAULT_PHASE", phase.to_string()),
    ];
    super::command::run(cmd, c.timeout, &log, &env)
        .await
        .map_err(|e| format!("{phase}: {e}"))
}

/// How long a fault on the leader waits for an election to end before it is skipped.
const LEADER_WAIT: Duration = Duration::from_secs(10);

/// The nodes of `service` that `servers` names right now; for the master of a Redis Cluster
/// slot, also the addresses of its replicas (whose promotion is watched).
async fn pick_nodes(
    cluster: &OwnedCluster,
    service: Service,
    servers: Servers,
    rng: &mut ChaCha8Rng,
) -> Result<(Vec<String>, Vec<std::net::SocketAddr>), String> {
    let set = servers.nodes;
    if cluster.has_slots(service)
        && matches!(set, NodeSet::Master | NodeSet::Leader | NodeSet::Replica)
    {
        let sku = servers.sku.unwrap_or(0);
        let (master, replicas) =
            (cluster.slot_nodes(service, sku).await).map_err(|e| e.to_string())?;
        if set == NodeSet::Replica {
            if replicas.is_empty() {
                return Err(format!("the master of sku {sku}'s slot has no replica now"));
            }
            return Ok((
                replicas.iter().map(|n| n.name.clone()).collect(),
                Vec::new(),
            ));
        }
        // Any other node may be the one promoted: the slot's replica may be flagged failed
        // (cut off, paused) and so be missing from the slot map. The watcher drops the nodes
        // that are masters already.
        let watched = (cluster.nodes().iter())
            .filter(|n| n.service == service && n.addr != master.addr)
            .map(|n| n.addr)
            .collect();
        return Ok((vec![master.name.clone()], watched));
    }
    if set == NodeSet::Replica {
        return Err(format!(
            "`replica` names a Redis Cluster slot's replica; this fault hits {service}"
        ));
    }
    pick_set(cluster, service, set, rng)
        .await
        .map(|n| (n, Vec::new()))
}

/// The node of `service` that leads now. An earlier fault may have started an election (a
/// ZooKeeper leader paused for 1.5 s is voted out): wait for it, bounded, as an operator
/// would, rather than skip.
async fn wait_leader(cluster: &OwnedCluster, service: Service) -> Result<String, String> {
    let deadline = tokio::time::Instant::now() + LEADER_WAIT;
    loop {
        match cluster.leader(service).await {
            Ok(Some(node)) => return Ok(node.name.clone()),
            Ok(None) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await
            }
            Ok(None) => {
                return Err(format!(
                    "no {service} node led within {} s (election under way?)",
                    LEADER_WAIT.as_secs()
                ));
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// The nodes of `service` that `set` names right now.
async fn pick_set(
    cluster: &OwnedCluster,
    service: Service,
    set: NodeSet,
    rng: &mut ChaCha8Rng,
) -> Result<Vec<String>, String> {
    let mut names: Vec<String> = cluster
        .nodes()
        .iter()
        .filter(|n| n.service == service)
        .map(|n| n.name.clone())
        .collect();
    if names.is_empty() {
        return Err(format!("this run has no {service} nodes to hit"));
    }
    names.sort();
    let n = names.len();
    let count = match set {
        NodeSet::Master | NodeSet::Leader => return Ok(vec![wait_leader(cluster, service).await?]),
        NodeSet::Follower => {
            let leader = wait_leader(cluster, service).await?;
            names.retain(|n| *n != leader);
            1
        }
        NodeSet::Replica => unreachable!("pick_nodes answers replicas"),
        NodeSet::One => 1,
        NodeSet::Minority => (n - 1) / 2,
        NodeSet::Majority => n / 2 + 1,
        NodeSet::All => n,
    };
    if count == 0 || names.is_empty() {
        return Err(format!("{n} {service} node(s) have no {set} to hit"));
    }
    names.shuffle(rng);
    names.truncate(count);
    names.sort();
    Ok(names)
}
