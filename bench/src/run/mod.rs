//! One run, in named steps: [`plan`](RunOptions::plan) → `servers` → `strategy` →
//! `clients` → `work` (the servers' counters, read around the load) → `load` (with faults) →
//! `measurements` → [`audit`] → `results`.
//!
//! Servers are owned by the [`OwnedCluster`] guard, so they stop on every path out of
//! [`run`]: success, error, panic, and cancellation (Ctrl-C), which ends the load early but
//! still audits and writes what was measured. A [`Session`] keeps them across trials, each
//! the same steps from `strategy` on, and returns what each measured in memory (`sweep`,
//! `contend`); [`run`] itself is a session of one trial.

pub mod calibrate;
pub mod compare;
pub mod contend;
pub mod job;
pub mod paired;
mod plan;
mod progress;
mod search;
mod session;
pub mod sweep;
mod work;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use tokio_util::sync::CancellationToken;

use crate::chaos::runner::Reach;
use crate::chaos::{ClientProcesses, FaultRecord, run_faults};
use crate::check::{OrderRow, PayAudit, Safety, SaleAudit};
use crate::clients::WorkerLink;
use crate::clients::clock::WorkerClock;
use crate::clients::driver;
use crate::clients::link;
use crate::clients::protocol::Job;
use crate::clients::workers::{Agents, WorkerError, WorkerSet};
use crate::cluster::target;
use crate::cluster::{ClusterError, Endpoints, EndpointsFile, NodeInfo, OwnedCluster, Provisioner};
use crate::record::phases::Boundaries;
use crate::record::{DriveReport, Live, Recorder, Recording, WorkerClocks};
use crate::report::{self, ChaosParts, FaultSummary, PhaseSummary, RunParts, Summary};
use crate::strategy::{Built, Store, StrategyError};
use crate::workload::Workload;
use crate::workload::pacing::Part;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

pub use plan::{DEFAULT_WORKERS, Plan, RunOptions, ServerOptions};
pub use session::{InProcess, Session, Source, TrialResult};

/// Errors that end a run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Servers could not be started.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// The strategy could not be set up, or the audit failed.
    #[error(transparent)]
    Strategy(#[from] StrategyError),
    /// Results could not be written.
    #[error("writing results to {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Client worker processes could not be started.
    #[error(transparent)]
    Workers(#[from] WorkerError),
    /// The options do not fit together.
    #[error("{0}")]
    Options(String),
    /// The chaos plan asks for a fault these servers cannot take.
    #[error(transparent)]
    Chaos(#[from] crate::chaos::ChaosError),
    /// Ctrl-C before the load started.
    #[error("interrupted")]
    Interrupted,
    /// A client broke during the load (a library's adapter misbehaved or died); what was
    /// measured is written.
    #[error("{}\n(the results measured until then are in {})", .lines.join("\n"), .out.display())]
    Broken { lines: Vec<String>, out: PathBuf },
}

fn write_err(path: &Path) -> impl FnOnce(std::io::Error) -> RunError + '_ {
    move |source| RunError::Write {
        path: path.to_path_buf(),
        source,
    }
}

/// Runs one strategy as its plan says and returns its summary (also written to
/// `<out>/summary.json`). Only a plan that holds can be run: every check was made before.
pub async fn run(plan: &Plan<'_>, cancel: &CancellationToken) -> Result<Summary, RunError> {
    let Some(t) = &plan.opts.target else {
        return run_on(plan, &Source::of(&plan.opts.servers), cancel).await;
    };
    let endpoints = t.endpoints_for(plan.info.id, plan.info.needs)?;
    take_fingerprint(false).await;
    target::claim(&endpoints).await?;
    let nodes = target::describe(&endpoints).await;
    let session = Session::on(Servers::given(endpoints.clone(), nodes));
    let result = match begin(plan) {
        Ok(_log) => one_trial(plan, session, cancel).await,
        Err(e) => Err(e),
    };
    // Whatever happened, leave the target as it was found.
    if let Err(e) = target::release(&endpoints).await {
        eprintln!("lockbench: warning: {e}");
    }
    result
}

/// [`run`] on servers from `source` (the sim's: none, the strategy built in this process): a
/// session of one trial, whose servers, if it started them, stop when it ends.
pub async fn run_on(
    plan: &Plan<'_>,
    source: &Source,
    cancel: &CancellationToken,
) -> Result<Summary, RunError> {
    // Every crate's events of this run, the servers' start included, until the guard drops.
    let _log = begin(plan)?;
    let session = Session::for_plan(source, plan, cancel).await?;
    one_trial(plan, session, cancel).await
}

/// The machine's fingerprint (`record::machine`), taken by the first session of this process
/// (a command: its first run, sweep or contend) before its servers start, and carried by
/// every summary, sweep.json and contend.json it writes.
/// The sim's in-process strategies take none: its tests stay fast and probe no disk.
pub(crate) async fn fingerprint(source: &Source) {
    if !matches!(source, Source::InProcess(_)) {
        take_fingerprint(true).await;
    }
}

/// The start of a command that writes one results folder: the folder made, the machine
/// fingerprinted ([`fingerprint`]); returns when it began.
pub(crate) async fn begin_in(out: &Path, source: &Source) -> Result<Instant, RunError> {
    let began = Instant::now();
    std::fs::create_dir_all(out).map_err(write_err(out))?;
    fingerprint(source).await;
    Ok(began)
}

/// [`fingerprint`]; `local`: whether the servers run on this machine (not a target's), so
/// their disk is the one to probe.
async fn take_fingerprint(local: bool) {
    if crate::record::machine::taken().is_some() {
        return;
    }
    let probe = tokio::task::spawn_blocking(move || {
        crate::record::machine::at_start(local);
    });
    if let Err(e) = probe.await {
        tracing::warn!("machine fingerprint: {e}");
    }
}

/// The one trial of a run's `session`, which ends with it.
async fn one_trial(
    plan: &Plan<'_>,
    mut session: Session,
    cancel: &CancellationToken,
) -> Result<Summary, RunError> {
    let measured = session.measure(plan, cancel).await;
    session.close();
    measured.map(|t| t.summary)
}

/// The run's folder, created, and its log file, which every crate's events go to until the
/// guard drops.
fn begin(plan: &Plan<'_>) -> Result<crate::logging::RunLog, RunError> {
    let out = &plan.opts.out;
    std::fs::create_dir_all(out).map_err(write_err(out))?;
    let logs = out.join("logs");
    crate::logging::RunLog::start(&logs).map_err(write_err(&logs))
}

/// A trial whose clients broke is an error, with what was measured written.
fn unbroken(plan: &Plan<'_>, t: TrialResult) -> Result<TrialResult, RunError> {
    if t.summary.broken.is_empty() {
        return Ok(t);
    }
    Err(RunError::Broken {
        lines: t.summary.broken.clone(),
        out: plan.opts.out.clone(),
    })
}

/// The steps from `strategy` to `results` on `servers`, with the strategy `built` by the caller
/// or connected here; its store is left in `store` (what the next trial settles).
async fn trial(
    plan: &Plan<'_>,
    servers: &mut Servers,
    built: Option<Built>,
    cancel: &CancellationToken,
    store: &mut Option<Arc<dyn Store>>,
) -> Result<TrialResult, RunError> {
    let built = match built {
        Some(b) => {
            prepare(&b, plan.workload()).await?;
            b
        }
        None => strategy(plan, &servers.endpoints).await?,
    };
    *store = Some(built.store.clone());
    warm_up(plan, &built, cancel).await?;
    let workers = clients(plan, servers, &built, cancel).await?;
    let writes_before = consensus_writes(plan, servers).await;
    let needs = (plan.opts.server_work).then_some(plan.info.needs);
    let watch = work::before_load(needs, servers, cancel).await;
    let environment = probe_environment(plan, servers).await;
    let measured = load(plan, &built, servers, workers, cancel).await?;
    let work = watch.finish(servers).await;
    let writes_after = consensus_writes(plan, servers).await;
    // Written before the audit, which needs the servers: a server that died mid-run fails the
    // audit, and what was measured must survive that.
    let chaos = measurements(plan, &measured)?;
    let sold = measured
        .recording
        .stats
        .count(crate::record::Outcome::Sold.class());
    let audited = audit(&built, plan.workload(), sold).await?;
    let cost = LockCost {
        writes: writes_before
            .zip(writes_after)
            .map(|(b, a)| a.saturating_sub(b)),
        lease_ttl_granted: built.strategy.lease_ttl_granted(),
        library: built.strategy.library(),
        work,
        environment,
    };
    let latency = measured.recording.stats.latency.clone();
    let summary = results(plan, servers, measured, chaos, audited, cost)?;
    built.store.close().await;
    built.strategy.close().await;
    Ok(TrialResult { summary, latency })
}

/// Where the servers are, and the guard of those this run started.
struct Servers {
    cluster: Option<OwnedCluster>,
    endpoints: Endpoints,
    nodes: Vec<NodeInfo>,
}

impl Servers {
    /// Its nodes as they are now (a node a fault restarted runs under a new pid).
    fn nodes_now(&self) -> Vec<NodeInfo> {
        match &self.cluster {
            Some(c) => c.info(),
            None => self.nodes.clone(),
        }
    }

    /// Servers started here, stopped when `cluster` drops.
    fn owned(cluster: OwnedCluster) -> Self {
        Self {
            endpoints: cluster.endpoints().clone(),
            nodes: cluster.info(),
            cluster: Some(cluster),
        }
    }

    /// Servers someone else runs.
    fn given(endpoints: Endpoints, nodes: Vec<NodeInfo>) -> Self {
        Self {
            cluster: None,
            endpoints,
            nodes,
        }
    }

    /// No servers (a strategy built in this process).
    fn none() -> Self {
        Self::given(Endpoints::default(), Vec::new())
    }
}

/// The strategy, connected, with its store seeded and its server-side state created.
async fn strategy(plan: &Plan<'_>, endpoints: &Endpoints) -> Result<Built, RunError> {
    let w = plan.workload();
    let built = plan.info.connect(endpoints, w).await?;
    prepare(&built, w).await?;
    Ok(built)
}

/// Seeds the store and creates the strategy's server-side state (coordinator only).
pub async fn prepare(built: &Built, w: &Workload) -> Result<(), StrategyError> {
    built.store.prepare(&w.inventory.stocks()).await?;
    built.strategy.prepare(w.inventory.skus).await
}

/// Worker processes for the buyers, connected and waiting for the start; none when the buyers
/// run in this process. With a private network, worker K runs in client host K.
async fn clients(
    plan: &Plan<'_>,
    servers: &Servers,
    built: &Built,
    cancel: &CancellationToken,
) -> Result<Option<WorkerSet>, RunError> {
    if plan.workers == 0 {
        return Ok(None);
    }
    let job = Job {
        strategy: plan.info.id.to_string(),
        workload: toml::to_string(plan.workload()).expect("a workload serialises to TOML"),
        endpoints: EndpointsFile::new(servers.endpoints.clone(), servers.nodes.clone()),
        part: Part::WHOLE,
        extra_bound_ms: plan.extra_bound.as_millis() as u64,
        passwords_from_env: false,
        history: plan.opts.history,
    };
    let logs = plan.opts.out.join("logs");
    std::fs::create_dir_all(&logs).map_err(write_err(&logs))?;
    let network = servers.cluster.as_ref().and_then(|c| c.network());
    let hosts: Vec<PathBuf> = network
        .map(|n| {
            n.clients
                .iter()
                .map(|h| PathBuf::from(format!("/run/netns/{}", h.netns)))
                .collect()
        })
        .unwrap_or_default();
    let n = plan.workers;
    let started = async {
        match plan.opts.worker_link {
            WorkerLink::Pipe => WorkerSet::start(&job, n, &logs, &hosts).await,
            WorkerLink::InProcess => {
                WorkerSet::start_in_process(&job, n, built.strategy.clone()).await
            }
            WorkerLink::Tcp => {
                // Workers in the run's namespaces reach this process across its bridge.
                let ip = network.map_or(IpAddr::V4(Ipv4Addr::LOCALHOST), |n| n.gateway);
                let listener = listen(SocketAddr::new(ip, 0)).await?;
                let agents = Agents::Local {
                    log_dir: &logs,
                    netns: &hosts,
                };
                WorkerSet::start_tcp(listener, &job, n, link::fresh_token(), agents).await
            }
            WorkerLink::Remote { listen: addr, wait } => {
                let token = link::token_from_env().map_err(|detail| WorkerError::Io {
                    index: 0,
                    what: "authenticate",
                    detail,
                })?;
                let listener = listen(addr).await?;
                tracing::info!(%addr, workers = n, "waiting for workers");
                WorkerSet::start_tcp(listener, &job, n, token, Agents::Remote { wait }).await
            }
        }
    };
    Ok(Some(tokio::select! {
        s = started => s?,
        _ = cancel.cancelled() => return Err(RunError::Interrupted),
    }))
}

async fn listen(addr: SocketAddr) -> Result<tokio::net::TcpListener, WorkerError> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| WorkerError::Io {
            index: 0,
            what: "listen",
            detail: format!("{addr}: {e}"),
        })
}

/// How long workers may take past the load's bound to report (a flush period and the link).
const LINGER: std::time::Duration = std::time::Duration::from_secs(5);

/// Where [`consensus_writes`] come from.
const CONSENSUS_WRITES_SOURCE: &str =
    "etcd_server_proposals_committed_total, most advanced member, before and after the load";

/// Consensus writes committed so far by the etcd cluster of a strategy that needs one (`None`
/// for others, or when no member answers: then the run reports none).
async fn consensus_writes(plan: &Plan<'_>, servers: &Servers) -> Option<u64> {
    if !plan.info.needs.etcd || servers.endpoints.etcd.is_empty() {
        return None;
    }
    crate::cluster::etcd::proposals_committed(&servers.endpoints.etcd)
        .await
        .inspect_err(|e| tracing::warn!("consensus writes not measured: {e}"))
        .ok()
}

/// What the lock cost its servers, beside what the load measured.
struct LockCost {
    /// Consensus writes during the load.
    writes: Option<u64>,
    /// The lease TTL the server granted.
    lease_ttl_granted: Option<std::time::Duration>,
    /// The library behind a `lib:` strategy.
    library: Option<crate::strategy::adapter::Hello>,
    /// The servers' own counters around the load.
    work: work::Finished,
    /// The steady environment and its probe (`None` without one).
    environment: Option<crate::chaos::environment::Environment>,
}

/// The probe of a workload's `[environment]`, once, just before the load (the delays are in
/// force since the servers started); `None` without one or without servers of this run.
async fn probe_environment(
    plan: &Plan<'_>,
    servers: &Servers,
) -> Option<crate::chaos::environment::Environment> {
    let env = plan.workload().environment;
    let cluster = servers.cluster.as_ref().filter(|_| !env.is_none())?;
    let delays = (env.rtt, env.fsync);
    let service = plan.info.lock_service();
    let e = crate::chaos::environment::probe(cluster, &servers.nodes, service, delays).await;
    tracing::info!("{}", e.note());
    Some(e)
}

/// What the load measured.
struct Measured {
    drive: DriveReport,
    worker_failures: Vec<String>,
    /// Each worker's clock, as its pings measured it (none without workers).
    clocks: Vec<WorkerClock>,
    faults: Vec<FaultRecord>,
    recording: Recording,
    start: Instant,
    end: Instant,
    started_at: SystemTime,
}

/// The load, with the chaos plan's faults beside it; every fault is healed when it returns.
async fn load(
    plan: &Plan<'_>,
    built: &Built,
    servers: &mut Servers,
    workers: Option<WorkerSet>,
    cancel: &CancellationToken,
) -> Result<Measured, RunError> {
    let (w, id, out) = (plan.workload(), plan.info.id, &plan.opts.out);
    let live = Arc::new(Live::default());
    let boundaries = Arc::new(Boundaries::default());
    let start = Instant::now();
    let started_at = SystemTime::now();
    let (sink, recorder) = Recorder::spawn(
        start,
        plan.opts.history.then(|| out.join("history.jsonl")),
        built.strategy.bound() + plan.extra_bound,
        live.clone(),
        boundaries.clone(),
        workers.as_ref().map(|s| WorkerClocks {
            table: s.clock_table(),
            domains: s.domains(),
        }),
        report::sale::is_sale(w),
    )
    .map_err(write_err(out))?;
    let bar = progress::Bar::start(plan.opts.progress, id, w.load.duration, live, cancel);
    tracing::info!(strategy = id, workers = plan.workers, "load started");
    let mut workers = workers;
    let chaos = plan.opts.chaos.as_ref();
    let mut reach = chaos.map(|_| fault_reach(plan, servers, &mut workers));
    let load_done = cancel.child_token();
    let buyers = async {
        let result = drive_buyers(plan, built, workers, start, sink, &boundaries, cancel).await;
        load_done.cancel();
        result
    };
    let faults = async {
        match (chaos, reach.as_mut()) {
            (Some(c), Some(t)) => {
                run_faults(c, t, &boundaries, start, w.seed, load_done.clone()).await
            }
            _ => Vec::new(),
        }
    };
    // Reserve, then pay: the payments and reapers run beside the buyers, and end (awaited
    // here) once every reservation could have settled after the load.
    let desk = built.store.pay_desk();
    let pay = async {
        if let Some(d) = &desk {
            d.run(load_done.clone()).await;
        }
    };
    let ((drive, worker_failures, clocks), faults, ()) = tokio::join!(buyers, faults, pay);
    drop(reach);
    // The load ended with its last attempt, or with a heal after it (not when the workers'
    // last intervals arrived, a moment later).
    let end = (faults.iter().filter_map(|f| f.healed)).fold(start + drive.elapsed, Instant::max);
    for f in &worker_failures {
        tracing::warn!("{f}");
    }
    let recording = recorder.finish(end).await.map_err(write_err(out))?;
    drop(bar);
    Ok(Measured {
        drive,
        worker_failures,
        clocks,
        faults,
        recording,
        start,
        end,
        started_at,
    })
}

/// `load.warmup`: the workload's load for that long from this process, every completion
/// dropped, then the store and the strategy's state prepared again, so the measured load
/// starts on warm servers with the whole stock. Workers start after it (their own
/// connections are new either way); no fault runs during it.
async fn warm_up(
    plan: &Plan<'_>,
    built: &Built,
    cancel: &CancellationToken,
) -> Result<(), RunError> {
    let w = plan.workload();
    if w.load.warmup.is_zero() {
        return Ok(());
    }
    let mut warm = w.clone();
    warm.load.duration = w.load.warmup;
    warm.load.max_attempts = None;
    let (sink, mut drained) = tokio::sync::mpsc::channel::<crate::record::Completion>(1024);
    let drain = tokio::spawn(async move { while drained.recv().await.is_some() {} });
    let strategy = built.strategy.clone();
    driver::drive(strategy, &warm, Instant::now(), sink, cancel.clone()).await;
    let _ = drain.await;
    if cancel.is_cancelled() {
        return Err(RunError::Interrupted);
    }
    tracing::info!(warmup = ?w.load.warmup, "warm-up done; store prepared again");
    prepare(built, w).await.map_err(RunError::from)
}

/// What the chaos runner may touch: the run's servers, its workers and its log folder.
fn fault_reach<'a>(
    plan: &Plan<'_>,
    servers: &'a mut Servers,
    workers: &mut Option<WorkerSet>,
) -> Reach<'a> {
    Reach {
        cluster: servers.cluster.as_mut(),
        log_dir: plan.opts.out.join("logs"),
        service: plan.info.lock_service(),
        workers: workers
            .as_ref()
            .map(|s| s.control() as Arc<dyn ClientProcesses>),
        paused: workers.as_mut().and_then(|s| s.paused.take()),
    }
}

/// Runs the buyers, in the worker processes when there are any, else in this process.
async fn drive_buyers(
    plan: &Plan<'_>,
    built: &Built,
    workers: Option<WorkerSet>,
    start: Instant,
    sink: tokio::sync::mpsc::Sender<crate::record::Input>,
    boundaries: &Arc<Boundaries>,
    cancel: &CancellationToken,
) -> (DriveReport, Vec<String>, Vec<WorkerClock>) {
    let w = plan.workload();
    match workers {
        Some(set) => {
            // Attempts start until the duration ends and each is cut at its bound; then
            // a worker has a few seconds to send what it holds.
            let limit = w.load.duration + built.strategy.bound() + plan.extra_bound + LINGER;
            set.drive(start, sink, boundaries.clone(), cancel.clone(), limit)
                .await
        }
        None => {
            let strategy = built.strategy.clone();
            let report = driver::drive(strategy, w, start, sink, cancel.clone()).await;
            (report, Vec::new(), Vec::new())
        }
    }
}

/// The audited store: the checker's verdict on it, and locks left held forever.
pub struct Audited {
    /// The checker's reading of the store.
    pub safety: Safety,
    /// Locks left held with no expiry.
    pub stuck_locks: u64,
    /// The store's reading, SKU by SKU.
    pub per_sku: Vec<crate::check::SkuAudit>,
    /// A sale's orders as the store holds them (`None`: not a sale, or a store that cannot
    /// list them), for the results' figures (first come first served, undersell).
    pub orders: Option<Vec<OrderRow>>,
    /// What the orders show about the sale's rules (`None` without `[buyers]` or orders).
    pub sale: Option<SaleAudit>,
    /// Reserve, then pay: every reservation's end, from the store (`None` without `[pay]`).
    pub pay: Option<PayAudit>,
}

/// Reads the store back and judges it (never client counters: the `acknowledged_sales` buyers
/// were told of only reveal sales the store lost whole, see [`Safety::lost_sales`]).
pub async fn audit(
    built: &Built,
    w: &Workload,
    acknowledged_sales: u64,
) -> Result<Audited, StrategyError> {
    let audits = built.store.audit(w.inventory.skus).await?;
    let initial = w.inventory.stocks();
    let mut safety = Safety::judge(&initial, &audits).with_acknowledged(acknowledged_sales);
    // Only a sale's orders carry buyers and request ids worth reading.
    let orders = match report::sale::is_sale(w) {
        true => built.store.orders().await?,
        false => None,
    };
    let sale = w.buyers.as_ref().zip(orders.as_ref());
    let sale = sale.map(|(b, o)| SaleAudit::of(o, b.limit, &initial, &audits));
    if let Some(s) = &sale {
        safety = safety.with_sale(s);
    }
    let pay = match built.store.pay_desk() {
        Some(desk) => {
            let facts = desk.facts().await?;
            Some(PayAudit::of(&facts, desk.counts(), &initial, &audits))
        }
        None => None,
    };
    if let Some(p) = &pay {
        safety = safety.with_pay(p, acknowledged_sales);
    }
    Ok(Audited {
        safety,
        stuck_locks: built.strategy.stuck_locks(w.inventory.skus).await?,
        orders,
        sale,
        pay,
        per_sku: audits,
    })
}

/// Writes the measurements and the summary; returns the summary.
/// Writes the latency histograms and the timeline (fault windows marked); returns the faults'
/// and phases' summaries.
fn measurements(
    plan: &Plan<'_>,
    m: &Measured,
) -> Result<(Vec<FaultSummary>, Vec<PhaseSummary>), RunError> {
    let out = &plan.opts.out;
    let (faults, phases) = report::summarize_chaos(&m.faults, &m.recording.phases, m.start, m.end);
    let windows: Vec<(usize, f64, f64)> = faults
        .iter()
        .filter_map(|f| Some((f.id, f.started_s?, f.healed_s.unwrap_or(f64::MAX))))
        .collect();
    report::write_results(out, &m.recording.stats, &windows).map_err(write_err(out))?;
    Ok((faults, phases))
}

/// Writes the summary; returns it.
fn results(
    plan: &Plan<'_>,
    servers: &Servers,
    m: Measured,
    (faults, phases): (Vec<FaultSummary>, Vec<PhaseSummary>),
    audited: Audited,
    cost: LockCost,
) -> Result<Summary, RunError> {
    let out = &plan.opts.out;
    let stats = &m.recording.stats;
    // Servers of a `serve` say themselves whether they are containers.
    let provisioner = if servers.nodes.iter().any(|n| n.container.is_some()) {
        Provisioner::Containers
    } else {
        plan.opts.provisioner()
    };
    let chaos = plan.opts.chaos.as_ref();
    // A library's calls are made in its adapter's process; the sim has no server to call.
    let library = plan.info.id.starts_with("lib:");
    let serverless = plan.info.needs == crate::cluster::Needs::NONE;
    let trips = m.drive.round_trips.filter(|_| !library && !serverless);
    let summary = Summary::new(RunParts {
        info: plan.info,
        workload: plan.workload(),
        workload_file: &plan.opts.workload_file,
        stats,
        double_grants: &m.recording.double_grants,
        coverage: &m.recording.coverage,
        contention: m.recording.contention.as_ref(),
        stuck_locks: audited.stuck_locks,
        drive: &m.drive,
        safety: &audited.safety,
        servers: servers.nodes.clone(),
        provisioner,
        target_file: plan.opts.target.as_ref().map(|t| t.file.clone()),
        started_at: m.started_at,
        chaos: ChaosParts {
            file: chaos.map(|c| c.file.clone()),
            faults,
            phases,
            workers: plan.workers,
            worker_failures: m.worker_failures,
        },
        clocks: m.clocks,
    });
    let mut summary = summary;
    summary.consensus_writes = cost
        .writes
        .map(|n| report::ConsensusWrites::new(n, audited.safety.sold, CONSENSUS_WRITES_SOURCE));
    summary.lease_ttl_granted_s = cost.lease_ttl_granted.map(|d| d.as_secs_f64());
    summary.library = cost.library;
    let grants = report::work::grants(&summary.outcomes);
    summary.server_work = (cost.work).figures(plan.info.locks, grants, audited.safety.sold);
    let sold = audited.safety.sold;
    summary.cost = match summary.server_work.as_ref() {
        Some(w) => w.cost(sold, trips),
        None => trips.and_then(|t| report::work::Cost::of_round_trips(sold, t)),
    };
    summary.sale = report::sale::Sale::new(report::sale::SaleParts {
        workload: plan.workload(),
        log: m.recording.sale.as_ref(),
        orders: audited.orders.as_deref(),
        audits: &audited.per_sku,
        not_started: m.drive.not_started,
        unstarted: &m.drive.unstarted,
        workers: plan.workers,
        audit: audited.sale.as_ref(),
        lag: m.drive.generator_lag,
    });
    if let Some(sale) = summary.sale.as_mut() {
        sale.pay = audited.pay;
    }
    summary.machine = crate::record::machine::taken().cloned();
    summary.environment = cost.environment;
    report::write_summary(out, &summary).map_err(write_err(out))?;
    Ok(summary)
}
