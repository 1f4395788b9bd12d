//! A trial session: one set of servers, owned for as long as its caller keeps the session (or
//! borrowed: a `serve`'s, or none for strategies built in this process), and trials run on
//! them one after another. A trial is a whole run — its plan, strategy, load, audit and
//! results folder — and returns what it measured in memory: the summary and its latency
//! histograms, so nothing is read back from the files it wrote. `sweep` and `contend` are
//! loops over sessions. The servers stop when the session drops, on every path.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hdrhistogram::Histogram;
use tokio_util::sync::CancellationToken;

use super::{Plan, RunError, RunOptions, Servers};
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
    /// None: the strategy is built in this process.
    InProcess(InProcess),
}

impl Source {
    /// The entry of strategy `id`: the registry's, or the one built in this process.
    pub fn info(&self, id: &str) -> Result<&'static StrategyInfo, StrategyError> {
        match self {
            Source::InProcess(p) => entry(Some(p), id),
            _ => entry(None, id),
        }
    }
}

/// The entry of `id`: `in_process`'s when it is that one, else the registry's.
fn entry(in_process: Option<&InProcess>, id: &str) -> Result<&'static StrategyInfo, StrategyError> {
    match in_process {
        Some(p) if p.info.id == id => Ok(p.info),
        _ => strategy::find(id),
    }
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
    /// The endpoints file the servers came from, if a `serve`'s (named in errors).
    file: Option<PathBuf>,
    /// The strategy built in this process, for a session without servers.
    in_process: Option<InProcess>,
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
        let (servers, file, in_process) = match source {
            Source::Start {
                provision,
                base_port,
            } => {
                let mut co = ClusterOptions::new(logs);
                co.base_port = *base_port;
                co.provisioner = *provision;
                co.builds = w.servers.builds(needs);
                let cluster = tokio::select! {
                    c = OwnedCluster::start(needs, &co) => c?,
                    _ = cancel.cancelled() => return Err(RunError::Interrupted),
                };
                (Servers::owned(cluster), None, None)
            }
            Source::Endpoints(path) => {
                let f = EndpointsFile::read(path)?;
                (
                    Servers::given(f.endpoints, f.nodes),
                    Some(path.clone()),
                    None,
                )
            }
            Source::InProcess(p) => (Servers::none(), None, Some(p.clone())),
        };
        Ok(Session {
            servers,
            file,
            in_process,
            last_store: None,
        })
    }

    /// The entry of strategy `id`: the registry's, or the one built in this process.
    pub fn info(&self, id: &str) -> Result<&'static StrategyInfo, StrategyError> {
        entry(self.in_process.as_ref(), id)
    }

    /// `opts` validated for a trial of this session (every check of [`RunOptions::plan`]).
    pub fn plan<'a>(&self, opts: &'a RunOptions) -> Result<Plan<'a>, RunError> {
        match &self.in_process {
            Some(p) if p.info.id == opts.strategy => opts.plan_with(p.info),
            _ => opts.plan(),
        }
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
        if let Some(e) = plan.cluster.builds.mismatch(&self.servers.nodes) {
            let whose = (self.file.as_ref())
                .map_or("the session's servers".into(), |p| p.display().to_string());
            return Err(RunError::Options(format!("{whose}: {e}")));
        }
        let _log = super::begin(plan)?;
        let built = self.in_process.as_ref().map(|p| (p.build)(plan.workload()));
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
