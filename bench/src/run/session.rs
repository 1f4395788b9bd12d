//! A trial session: one set of servers, owned for as long as its caller keeps the session (or
//! borrowed: a `serve`'s, or none for strategies built in this process), and trials run on
//! them one after another. A trial is a whole run — its plan, strategy, load, audit and
//! results folder — and returns what it measured in memory: the summary and its latency
//! histograms, so nothing is read back from the files it wrote. `sweep` and `contend` are
//! loops over sessions; a run (and so each run of `compare` and the job's calm and chaos
//! parts) is a session of one trial. The servers stop when the session drops, on every path.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hdrhistogram::Histogram;
use tokio_util::sync::CancellationToken;

use super::{Plan, RunError, RunOptions, ServerOptions, Servers};
use crate::clients::WorkerLink;
use crate::cluster::{ClusterOptions, EndpointsFile, Needs, OwnedCluster, Provisioner};
use crate::record::Outcome;
use crate::report::Summary;
use crate::strategy::{self, Built, Store, StrategyError, StrategyInfo};
use crate::workload::Workload;

/// A strategy built in this process instead of connected to servers (the in-memory one of
/// [`crate::sim`]): its entry, and how it is built for a trial's workload.
#[derive(Clone)]
pub struct InProcess {
    /// Its entry (not in the registry).
    pub info: &'static StrategyInfo,
    /// Builds it afresh for each trial, as a real strategy is connected afresh.
    pub build: Arc<dyn Fn(&Workload) -> Built + Send + Sync>,
}

/// Where a session's servers come from.
#[derive(Clone)]
pub enum Source {
    /// Started by the session, stopped when it drops.
    Start {
        /// How to start them.
        provision: Provisioner,
        /// First port; `None` picks free ports.
        base_port: Option<u16>,
    },
    /// A running `lockbench serve`'s, from its endpoints.json: not the session's to stop.
    Endpoints(PathBuf),
    /// None: the strategies are built in this process (each id once).
    InProcess(Vec<InProcess>),
}

impl Source {
    /// The servers a command's flags name: a `serve`'s endpoints file, or servers it starts.
    pub fn of(servers: &ServerOptions) -> Self {
        match &servers.endpoints {
            Some(path) => Source::Endpoints(path.clone()),
            None => Source::Start {
                provision: servers.provision,
                base_port: servers.base_port,
            },
        }
    }

    /// The strategies built in this process (none for servers).
    fn in_process(&self) -> &[InProcess] {
        match self {
            Source::InProcess(p) => p,
            _ => &[],
        }
    }

    /// The entry of strategy `id`: the registry's, or the one built in this process.
    pub fn info(&self, id: &str) -> Result<&'static StrategyInfo, StrategyError> {
        entry(self.in_process(), id)
    }

    /// `opts` validated for a trial on these servers (every check of [`RunOptions::plan`]).
    pub fn plan<'a>(&self, opts: &'a RunOptions) -> Result<Plan<'a>, RunError> {
        plan_in(self.in_process(), opts)
    }
}

/// The entry of `id`: the one built in this process when it is one of `in_process`, else the
/// registry's.
fn entry(in_process: &[InProcess], id: &str) -> Result<&'static StrategyInfo, StrategyError> {
    match in_process.iter().find(|p| p.info.id == id) {
        Some(p) => Ok(p.info),
        None => strategy::find(id),
    }
}

/// `opts` planned on the entry [`entry`] finds. A strategy built in this process runs its
/// buyers here or in workers that are tasks of this process: a worker process rebuilds its
/// strategy from a registered entry.
fn plan_in<'a>(in_process: &[InProcess], opts: &'a RunOptions) -> Result<Plan<'a>, RunError> {
    let Some(p) = in_process.iter().find(|p| p.info.id == opts.strategy) else {
        return opts.plan();
    };
    let plan = opts.plan_with(p.info)?;
    if plan.workers > 0 && opts.worker_link != WorkerLink::InProcess {
        return Err(RunError::Options(format!(
            "{}: a strategy built in this process runs its buyers here or in workers that are \
             tasks of this process; worker processes rebuild theirs from a registered entry",
            p.info.id
        )));
    }
    Ok(plan)
}

/// What one trial measured, in memory.
pub struct TrialResult {
    /// The summary (also written as its folder's summary.json).
    pub summary: Summary,
    /// Latency from the intended start, one histogram per outcome class, in
    /// [`Outcome::CLASS_NAMES`]' order (also written as its folder's latency.hlog).
    pub latency: [Histogram<u64>; Outcome::CLASSES],
}

/// One set of servers and the trials run on it.
pub struct Session {
    servers: Servers,
    /// The endpoints file the servers came from, if a `serve`'s (named in errors; its builds
    /// are checked against each trial's).
    file: Option<PathBuf>,
    /// The strategies built in this process, for a session without servers.
    in_process: Vec<InProcess>,
    /// The last trial's store: the next trial settles what it left ([`Store::settle`]).
    last_store: Option<Arc<dyn Store>>,
}

impl Session {
    /// The servers `needs` asks for, from `source`; a started cluster runs the builds `w`'s
    /// `[servers]` chooses and logs to `logs`. Ctrl-C while they start is
    /// [`RunError::Interrupted`].
    pub async fn open(
        source: &Source,
        w: &Workload,
        needs: Needs,
        logs: PathBuf,
        cancel: &CancellationToken,
    ) -> Result<Session, RunError> {
        let mut co = ClusterOptions::new(logs);
        co.builds = w.servers.builds(needs);
        // A workload's `[environment]`, refused before any server starts where it cannot be.
        if !w.environment.is_none() {
            let (given, provision) = match source {
                Source::Start { provision, .. } => (None, *provision),
                Source::Endpoints(_) => (Some("--endpoints"), Provisioner::Local),
                Source::InProcess(_) => {
                    (Some("the sim's in-process strategies"), Provisioner::Local)
                }
            };
            let root = nix::unistd::geteuid().is_root();
            super::plan::environment_possible("the workload", w, given, provision, root)?;
            super::plan::steady(&mut co, w, needs);
        }
        Session::start(source, needs, co, cancel).await
    }

    /// The servers of one planned run, from `source`, started as its plan says (its builds,
    /// persistence, clock shim, private network; logs in its folder): a run is a session of
    /// one trial.
    pub async fn for_plan(
        source: &Source,
        plan: &Plan<'_>,
        cancel: &CancellationToken,
    ) -> Result<Session, RunError> {
        if let Source::Start { .. } = source {
            tracing::info!(strategy = plan.info.id, "starting servers");
        }
        Session::start(source, plan.info.needs, plan.cluster.clone(), cancel).await
    }

    /// The servers `needs` asks for from `source`; those it starts, as `co` says (with the
    /// source's provisioner and first port).
    async fn start(
        source: &Source,
        needs: Needs,
        mut co: ClusterOptions,
        cancel: &CancellationToken,
    ) -> Result<Session, RunError> {
        super::fingerprint(source).await;
        let (servers, file) = match source {
            Source::Start {
                provision,
                base_port,
            } => {
                co.base_port = *base_port;
                co.provisioner = *provision;
                let cluster = tokio::select! {
                    c = OwnedCluster::start(needs, &co) => c?,
                    _ = cancel.cancelled() => return Err(RunError::Interrupted),
                };
                (Servers::owned(cluster), None)
            }
            Source::Endpoints(path) => {
                let f = EndpointsFile::read(path)?;
                f.check_answering(path).await?;
                (Servers::given(f.endpoints, f.nodes), Some(path.clone()))
            }
            Source::InProcess(_) => (Servers::none(), None),
        };
        Ok(Session {
            file,
            in_process: source.in_process().to_vec(),
            ..Session::on(servers)
        })
    }

    /// A session on servers someone else owns (an external target's).
    pub(super) fn on(servers: Servers) -> Session {
        Session {
            servers,
            file: None,
            in_process: Vec::new(),
            last_store: None,
        }
    }

    /// The entry of strategy `id`: the registry's, or the one built in this process.
    pub fn info(&self, id: &str) -> Result<&'static StrategyInfo, StrategyError> {
        entry(&self.in_process, id)
    }

    /// `opts` validated for a trial of this session (every check of [`RunOptions::plan`]).
    pub fn plan<'a>(&self, opts: &'a RunOptions) -> Result<Plan<'a>, RunError> {
        plan_in(&self.in_process, opts)
    }

    /// Ends what the last trial left running on its store's server (up to `bound`), so it
    /// cannot slow the next: the store's hook, [`Store::settle`]. Returns how many sessions
    /// it ended (0 before the first trial).
    pub async fn settle(&self, bound: Duration) -> Result<usize, StrategyError> {
        match &self.last_store {
            Some(s) => s.settle(bound).await,
            None => Ok(0),
        }
    }

    /// One trial on these servers, as `plan` says, results in its folder; returns what it
    /// measured. A trial whose clients broke is [`RunError::Broken`], as a run is.
    pub async fn trial(
        &mut self,
        plan: &Plan<'_>,
        cancel: &CancellationToken,
    ) -> Result<TrialResult, RunError> {
        let _log = super::begin(plan)?;
        self.measure(plan, cancel).await
    }

    /// [`trial`](Self::trial) with its run log already begun by the caller.
    pub(super) async fn measure(
        &mut self,
        plan: &Plan<'_>,
        cancel: &CancellationToken,
    ) -> Result<TrialResult, RunError> {
        if let Some(path) = &self.file
            && let Some(e) = plan.cluster.builds.mismatch(&self.servers.nodes)
        {
            return Err(RunError::Options(format!("{}: {e}", path.display())));
        }
        let built = (self.in_process.iter())
            .find(|p| p.info.id == plan.info.id)
            .map(|p| (p.build)(plan.workload()));
        let t = super::trial(plan, &mut self.servers, built, cancel, &mut self.last_store).await?;
        super::unbroken(plan, t)
    }

    /// Stops the servers the session started (dropping it does too).
    pub fn close(self) {
        if let Some(c) = self.servers.cluster {
            c.stop();
        }
    }
}
