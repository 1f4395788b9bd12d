//! One run, start to finish: start servers → prepare the store → load → write measurements →
//! audit → write the summary → stop servers.
//!
//! Servers are owned by the [`OwnedCluster`] guard, so they stop on every path out of
//! [`run`]: success, error, panic, and cancellation (Ctrl-C), which ends the load early but
//! still audits and writes what was measured.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime};

use indicatif::{ProgressBar, ProgressStyle};
use tokio_util::sync::CancellationToken;

use crate::chaos::runner::Targets;
use crate::chaos::{ChaosPlan, run_faults};
use crate::check::Safety;
use crate::clients::driver;
use crate::clients::protocol::Job;
use crate::clients::workers::{WorkerError, WorkerSet};
use crate::cluster::target::{self, Target};
use crate::cluster::{
    ClusterError, ClusterOptions, Endpoints, EndpointsFile, NodeInfo, OwnedCluster, Provisioner,
};
use crate::record::phases::Boundaries;
use crate::record::{Live, Recorder};
use crate::report::{self, ChaosParts, RunParts, Summary};
use crate::strategy::{self, StrategyError};
use crate::workload::Workload;
use crate::workload::pacing::Part;

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
}

/// What to run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Strategy id.
    pub strategy: String,
    /// The validated workload.
    pub workload: Workload,
    /// Faults to inject while the load runs.
    pub chaos: Option<ChaosPlan>,
    /// Worker processes for the buyers (0: in this process, unless the chaos plan pauses
    /// clients, which needs [`DEFAULT_WORKERS`]).
    pub workers: u32,
    /// Where the workload came from (recorded in the summary).
    pub workload_file: String,
    /// Results folder (created).
    pub out: PathBuf,
    /// First port for the servers; `None` picks free ports.
    pub base_port: Option<u16>,
    /// Use the servers of a running `lockbench serve` (its endpoints.json) instead of starting
    /// new ones.
    pub endpoints: Option<PathBuf>,
    /// How to start the servers (local processes or containers); ignored with `endpoints` or
    /// `target`.
    pub provision: Provisioner,
    /// Use servers that already exist (`--target FILE`): claim the prefix, run, clean up.
    pub target: Option<Target>,
    /// Also write `history.jsonl`, one line per attempt.
    pub history: bool,
    /// Show a progress bar on stderr (hidden anyway when stderr is not a terminal).
    pub progress: bool,
}

/// Worker processes used when the chaos plan pauses clients and `--workers` is not given.
pub const DEFAULT_WORKERS: u32 = 4;

fn write_err(path: &Path) -> impl FnOnce(std::io::Error) -> RunError + '_ {
    move |source| RunError::Write {
        path: path.to_path_buf(),
        source,
    }
}

/// Runs one strategy against freshly started servers and returns its summary (also written to
/// `<out>/summary.json`).
pub async fn run(opts: &RunOptions, cancel: &CancellationToken) -> Result<Summary, RunError> {
    let info = strategy::resolve(&opts.strategy, &opts.workload)?;
    if let Some(plan) = &opts.chaos {
        plan.check_provisioner(opts.provisioner())?;
    }
    let Some(t) = &opts.target else {
        return run_on(opts, info, None, cancel).await;
    };
    let endpoints = t.endpoints_for(info.id, info.needs)?;
    target::claim(&endpoints).await?;
    let servers = target::describe(&endpoints).await;
    let result = run_on(opts, info, Some((endpoints.clone(), servers)), cancel).await;
    // Whatever happened, leave the target as it was found.
    if let Err(e) = target::release(&endpoints).await {
        eprintln!("lockbench: warning: {e}");
    }
    result
}

impl RunOptions {
    /// Where this run's servers come from.
    pub fn provisioner(&self) -> Provisioner {
        if self.target.is_some() {
            Provisioner::Target
        } else {
            self.provision
        }
    }
}

/// [`run`] once the servers are known: given (an external target's endpoints and servers), or
/// started here.
async fn run_on(
    opts: &RunOptions,
    info: &'static strategy::StrategyInfo,
    given: Option<(Endpoints, Vec<NodeInfo>)>,
    cancel: &CancellationToken,
) -> Result<Summary, RunError> {
    let w = &opts.workload;
    let chaos = opts.chaos.as_ref();
    if chaos.is_some() && opts.endpoints.is_some() {
        return Err(RunError::Options(
            "chaos needs servers this run starts and owns: drop --endpoints".into(),
        ));
    }
    let workers = match (opts.workers, chaos.is_some_and(ChaosPlan::needs_workers)) {
        (0, true) => DEFAULT_WORKERS.min(w.load.clients),
        (n, _) => n.min(w.load.clients),
    };
    if chaos.is_some_and(ChaosPlan::needs_workers) && workers < 2 {
        return Err(RunError::Options(format!(
            "the chaos plan pauses a client process: that needs at least 2 workers (and \
             load.clients >= 2), got {workers}"
        )));
    }
    std::fs::create_dir_all(&opts.out).map_err(write_err(&opts.out))?;
    let mut cluster_opts = ClusterOptions::new(opts.out.join("logs"));
    cluster_opts.base_port = opts.base_port;
    cluster_opts.clock_shim = chaos.is_some_and(ChaosPlan::needs_clock_shim);
    cluster_opts.provisioner = opts.provision;
    // Containers are partitioned on their own Docker network; only local processes need
    // namespaces for that.
    cluster_opts.network =
        opts.provision == Provisioner::Local && chaos.is_some_and(ChaosPlan::needs_network);
    let workers = if cluster_opts.network {
        workers.min(crate::cluster::net::CLIENT_HOSTS as u32)
    } else {
        workers
    };

    let (mut cluster, endpoints, servers) = match (&opts.endpoints, given) {
        (_, Some((endpoints, servers))) => (None, endpoints, servers),
        (Some(path), None) => {
            let file = EndpointsFile::read(path)?;
            (None, file.endpoints, file.nodes)
        }
        (None, None) => {
            tracing::info!(strategy = info.id, "starting servers");
            let cluster = tokio::select! {
                c = OwnedCluster::start(info.needs, &cluster_opts) => c?,
                _ = cancel.cancelled() => return Err(RunError::Interrupted),
            };
            let (endpoints, servers) = (cluster.endpoints().clone(), cluster.info());
            (Some(cluster), endpoints, servers)
        }
    };
    let built = info.connect(&endpoints, w).await?;
    built
        .store
        .prepare(w.inventory.skus, w.inventory.stock)
        .await?;
    built.strategy.prepare(w.inventory.skus).await?;

    // A paused client's attempt outlasts the usual bound by its pause.
    let extra_bound = chaos.map(ChaosPlan::max_client_pause).unwrap_or_default();
    let worker_set = if workers > 0 {
        let job = Job {
            strategy: info.id.to_string(),
            workload: toml::to_string(w).expect("a workload serialises to TOML"),
            endpoints: EndpointsFile::new(endpoints.clone(), servers.clone()),
            part: Part::WHOLE,
            extra_bound_ms: extra_bound.as_millis() as u64,
        };
        let logs = opts.out.join("logs");
        std::fs::create_dir_all(&logs).map_err(write_err(&logs))?;
        // With a private network, worker K runs in client host K.
        let hosts: Vec<PathBuf> = cluster
            .as_ref()
            .and_then(|c| c.network())
            .map(|n| {
                n.clients
                    .iter()
                    .map(|h| PathBuf::from(format!("/run/netns/{}", h.netns)))
                    .collect()
            })
            .unwrap_or_default();
        Some(tokio::select! {
            s = WorkerSet::start(&job, workers, &logs, &hosts) => s?,
            _ = cancel.cancelled() => return Err(RunError::Interrupted),
        })
    } else {
        None
    };

    let live = Arc::new(Live::default());
    let history = opts.history.then(|| opts.out.join("history.jsonl"));
    let boundaries = Arc::new(Boundaries::default());
    let start = Instant::now();
    let started_at = SystemTime::now();
    let (sink, recorder) = Recorder::spawn(
        start,
        history,
        built.strategy.bound() + extra_bound,
        live.clone(),
        boundaries.clone(),
    )
    .map_err(write_err(&opts.out))?;
    let progress = progress_bar(
        opts.progress,
        info.id,
        w.load.duration,
        live.clone(),
        cancel.clone(),
    );
    tracing::info!(strategy = info.id, workers, "load started");
    let load_done = cancel.child_token();
    let mut targets = chaos.map(|_| Targets {
        cluster: cluster.as_mut(),
        log_dir: opts.out.join("logs"),
        service: info.lock_service(),
        workers: worker_set
            .as_ref()
            .map(|s| s.control() as Arc<dyn crate::chaos::ClientProcesses>),
        paused: None,
    });
    let mut worker_set = worker_set;
    if let (Some(t), Some(set)) = (targets.as_mut(), worker_set.as_mut()) {
        t.paused = set.paused.take();
    }
    let load = async {
        let result = match worker_set {
            Some(set) => set.drive(start, sink, cancel.clone()).await,
            None => (
                driver::drive(built.strategy.clone(), w, start, sink, cancel.clone()).await,
                Vec::new(),
            ),
        };
        load_done.cancel();
        result
    };
    let faults = async {
        match (chaos, targets.as_mut()) {
            (Some(plan), Some(t)) => {
                run_faults(plan, t, &boundaries, start, w.seed, load_done.clone()).await
            }
            _ => Vec::new(),
        }
    };
    let ((drive, worker_failures), records) = tokio::join!(load, faults);
    drop(targets);
    let end = Instant::now();
    for f in &worker_failures {
        tracing::warn!("{f}");
    }
    let recording = recorder.finish().await.map_err(write_err(&opts.out))?;
    let stats = &recording.stats;
    if let Some((bar, ticker)) = progress {
        ticker.abort();
        bar.finish_and_clear();
    }
    let (fault_summaries, phases) =
        report::summarize_chaos(&records, &recording.phases, start, end);
    let windows: Vec<(usize, f64, f64)> = fault_summaries
        .iter()
        .filter_map(|f| Some((f.id, f.started_s?, f.healed_s.unwrap_or(f64::MAX))))
        .collect();
    report::write_results(&opts.out, stats, &windows).map_err(write_err(&opts.out))?;

    let audits = built.store.audit(w.inventory.skus).await?;
    let safety = Safety::judge(w.inventory.stock, &audits);
    let stuck_locks = built.strategy.stuck_locks(w.inventory.skus).await?;
    // Servers of a `serve` say themselves whether they are containers.
    let provisioner = if servers.iter().any(|n| n.container.is_some()) {
        Provisioner::Containers
    } else {
        opts.provisioner()
    };
    let summary = Summary::new(RunParts {
        info,
        workload: w,
        workload_file: &opts.workload_file,
        stats,
        double_grants: &recording.double_grants,
        stuck_locks,
        drive: &drive,
        safety: &safety,
        servers,
        provisioner,
        target_file: opts.target.as_ref().map(|t| t.file.clone()),
        started_at,
        chaos: ChaosParts {
            file: chaos.map(|c| c.file.clone()),
            faults: fault_summaries,
            phases,
            workers,
            worker_failures,
        },
    });
    report::write_summary(&opts.out, &summary).map_err(write_err(&opts.out))?;
    built.store.close().await;
    drop(built);
    if let Some(cluster) = cluster {
        cluster.stop();
    }
    Ok(summary)
}

/// A ticking progress bar for runs longer than a couple of seconds.
fn progress_bar(
    enabled: bool,
    id: &str,
    duration: Duration,
    live: Arc<Live>,
    cancel: CancellationToken,
) -> Option<(ProgressBar, tokio::task::JoinHandle<()>)> {
    if !enabled || duration < Duration::from_secs(2) {
        return None;
    }
    // `ProgressBar::new` draws to stderr and stays hidden when stderr is not a terminal.
    let bar = ProgressBar::new(duration.as_millis() as u64);
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{{prefix:>18}} [{{bar:30}}] {{elapsed:>3}}/{}s {{msg}}",
            duration.as_secs()
        ))
        .expect("valid template")
        .progress_chars("=> "),
    );
    bar.set_prefix(id.to_string());
    let start = Instant::now();
    let ticking = bar.clone();
    let ticker = tokio::spawn(async move {
        let bar = ticking;
        let mut tick = tokio::time::interval(Duration::from_millis(200));
        loop {
            tick.tick().await;
            let done = start.elapsed().min(duration);
            bar.set_position(done.as_millis() as u64);
            let n = live.attempts.load(Ordering::Relaxed);
            let sold = live.sold.load(Ordering::Relaxed);
            bar.set_message(format!("{n} attempts, {sold} sold"));
            if done >= duration || cancel.is_cancelled() {
                return;
            }
        }
    });
    Some((bar, ticker))
}
