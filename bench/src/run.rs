//! One run, start to finish: start servers → prepare the store → load → write measurements →
//! audit → write the summary → stop servers.
//!
//! Servers are owned by the [`LocalCluster`] guard, so they stop on every path out of
//! [`run`]: success, error, panic, and cancellation (Ctrl-C), which ends the load early but
//! still audits and writes what was measured.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime};

use indicatif::{ProgressBar, ProgressStyle};
use tokio_util::sync::CancellationToken;

use crate::check::Safety;
use crate::cluster::{ClusterError, ClusterOptions, EndpointsFile, LocalCluster};
use crate::record::{Live, Recorder};
use crate::report::{self, RunParts, Summary};
use crate::strategy::{self, StrategyError};
use crate::workload::{Workload, driver};

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
    /// Where the workload came from (recorded in the summary).
    pub workload_file: String,
    /// Results folder (created).
    pub out: PathBuf,
    /// First port for the servers; `None` picks free ports.
    pub base_port: Option<u16>,
    /// Use the servers of a running `lockbench serve` (its endpoints.json) instead of starting
    /// new ones.
    pub endpoints: Option<PathBuf>,
    /// Also write `history.jsonl`, one line per attempt.
    pub history: bool,
    /// Show a progress bar on stderr (hidden anyway when stderr is not a terminal).
    pub progress: bool,
}

fn write_err(path: &Path) -> impl FnOnce(std::io::Error) -> RunError + '_ {
    move |source| RunError::Write {
        path: path.to_path_buf(),
        source,
    }
}

/// Runs one strategy against freshly started servers and returns its summary (also written to
/// `<out>/summary.json`).
pub async fn run(opts: &RunOptions, cancel: &CancellationToken) -> Result<Summary, RunError> {
    let info = strategy::find(&opts.strategy)?;
    let w = &opts.workload;
    info.supports(w)?;
    std::fs::create_dir_all(&opts.out).map_err(write_err(&opts.out))?;
    let mut cluster_opts = ClusterOptions::new(opts.out.join("logs"));
    cluster_opts.base_port = opts.base_port;

    let (cluster, endpoints, servers) = match &opts.endpoints {
        Some(path) => {
            let file = EndpointsFile::read(path)?;
            (None, file.endpoints, file.nodes)
        }
        None => {
            tracing::info!(strategy = info.id, "starting servers");
            let cluster = tokio::select! {
                c = LocalCluster::start(info.needs, &cluster_opts) => c?,
                _ = cancel.cancelled() => return Err(RunError::Interrupted),
            };
            let (endpoints, servers) = (cluster.endpoints().clone(), cluster.info());
            (Some(cluster), endpoints, servers)
        }
    };
    let built = strategy::build(info.id, &endpoints, w).await?;
    built
        .store
        .prepare(w.inventory.skus, w.inventory.stock)
        .await?;

    let live = Arc::new(Live::default());
    let history = opts.history.then(|| opts.out.join("history.jsonl"));
    let start = Instant::now();
    let started_at = SystemTime::now();
    let (sink, recorder) = Recorder::spawn(start, history, w.attempt_bound(), live.clone())
        .map_err(write_err(&opts.out))?;
    let progress = progress_bar(
        opts.progress,
        info.id,
        w.load.duration,
        live.clone(),
        cancel.clone(),
    );
    tracing::info!(strategy = info.id, "load started");
    let drive = driver::drive(built.strategy.clone(), w, start, sink, cancel.clone()).await;
    let recording = recorder.finish().await.map_err(write_err(&opts.out))?;
    let stats = &recording.stats;
    if let Some((bar, ticker)) = progress {
        ticker.abort();
        bar.finish_and_clear();
    }
    report::write_results(&opts.out, stats).map_err(write_err(&opts.out))?;

    let audits = built.store.audit(w.inventory.skus).await?;
    let safety = Safety::judge(w.inventory.stock, &audits);
    let stuck_locks = built.strategy.stuck_locks(w.inventory.skus).await?;
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
        started_at,
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
