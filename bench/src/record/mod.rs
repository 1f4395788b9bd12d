//! Record: what happened, on one monotonic clock.
//!
//! Buyers send one [`Completion`] per attempt to the recorder task ([`Recorder::spawn`]), which
//! folds it into [`Stats`] (HdrHistograms per outcome, a per-second timeline) and, if asked,
//! streams it to a JSONL history. Memory grows with the run's seconds, never with its attempts.

mod history;
mod outcome;
pub mod phases;
mod stats;
pub mod utilization;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::check::{DoubleGrantChecker, DoubleGrants};

pub use history::{HistoryLease, HistoryLine, HistoryWriter, max_shared_holders, read_history};
pub use outcome::{ErrorKind, Outcome};
pub use stats::{LatencySummary, Second, Stats, every_arrival};

/// How many completions may wait for the recorder before buyers are slowed down.
const QUEUE: usize = 64 * 1024;
/// How far out of completion order events may reach the recorder (worker processes flush
/// every batch, so their events lag by milliseconds).
const ORDER_SLACK: Duration = Duration::from_secs(1);

/// What the driver itself observed.
#[derive(Debug, Clone)]
pub struct DriveReport {
    /// From the start until the last attempt ended.
    pub elapsed: Duration,
    /// Open-loop arrivals due before the end that never started because every buyer was busy:
    /// the demand the strategy could not serve.
    pub not_started: u64,
    /// Whether the load was cut short by cancellation (Ctrl-C).
    pub cancelled: bool,
    /// Why a client of the strategy broke (a library's adapter that misbehaved or died), one
    /// line per process: the run fails with these once its results are written.
    pub broken: Vec<String>,
}

/// The interval during which a client believed it held a lock.
#[derive(Debug, Clone)]
pub struct LeaseSpan {
    /// Lock key.
    pub key: String,
    /// Token the lock was taken with (owner identity).
    pub token: String,
    /// Fencing token, if the lock issues one.
    pub fence: Option<u64>,
    /// When acquire returned.
    pub acquired: Instant,
    /// When release was sent (or, for an attempt cut by its bound, when it was cut).
    pub released: Instant,
    /// The lease ended before its holder released it: release found it gone or owned by
    /// another, renewal found it expired, or its validity (Redlock) passed while held.
    pub lost: bool,
    /// A read lease of a read–write lock ([`crate::strategy::Lease::shared`]): other shared
    /// leases of the key may overlap it.
    pub shared: bool,
}

/// One finished attempt.
#[derive(Debug, Clone)]
pub struct Completion {
    /// Attempt number in schedule order.
    pub seq: u64,
    /// Buyer loop that ran it.
    pub client: u32,
    /// Item bought (or read).
    pub sku: u32,
    /// The attempt was a read ([`crate::workload::pacing::Slot::read`]), whatever its outcome.
    pub read: bool,
    /// What happened.
    pub outcome: Outcome,
    /// When the schedule wanted it to start (equals `started` in the closed loop).
    pub intended: Instant,
    /// When it actually started.
    pub started: Instant,
    /// When it ended.
    pub ended: Instant,
    /// Whether releasing the lock failed (the sale itself is judged by `outcome`).
    pub release_failed: bool,
    /// The lease held, for lock-based strategies.
    pub lease: Option<LeaseSpan>,
}

/// Live counters for the progress bar.
#[derive(Debug, Default)]
pub struct Live {
    /// Completed attempts.
    pub attempts: AtomicU64,
    /// Attempts that ended `sold`.
    pub sold: AtomicU64,
}

/// Everything the recorder produced.
pub struct Recording {
    /// Histograms, timeline, counters.
    pub stats: Stats,
    /// Overlapping leases found while recording.
    pub double_grants: DoubleGrants,
    /// Measurements between fault boundaries.
    pub phases: phases::PhaseData,
    /// Leased time per SKU, for utilization.
    pub coverage: utilization::Coverage,
}

/// Handle to the recorder task.
pub struct Recorder {
    task: tokio::task::JoinHandle<std::io::Result<Recording>>,
}

impl Recorder {
    /// Starts the recorder; `history` (if any) receives one JSON line per completion;
    /// `horizon` bounds one attempt (for the streaming double-grant check); measurements are
    /// also split at the fault `boundaries`.
    pub fn spawn(
        start: Instant,
        history: Option<PathBuf>,
        horizon: Duration,
        live: Arc<Live>,
        boundaries: Arc<phases::Boundaries>,
    ) -> std::io::Result<(mpsc::Sender<Completion>, Self)> {
        let mut writer = history
            .map(|p| HistoryWriter::create(&p, start))
            .transpose()?;
        let (tx, mut rx) = mpsc::channel::<Completion>(QUEUE);
        let task = tokio::spawn(async move {
            let mut stats = Stats::new();
            let mut leases = DoubleGrantChecker::new(horizon, ORDER_SLACK);
            let mut coverage = utilization::CoverageTracker::new(horizon, ORDER_SLACK);
            let mut phases = phases::PhaseRecorder::new(boundaries, start);
            let mut batch = Vec::with_capacity(256);
            while rx.recv_many(&mut batch, 256).await > 0 {
                phases.refresh();
                for c in batch.drain(..) {
                    stats.record(&c, start);
                    phases.record(&c);
                    live.attempts.fetch_add(1, Ordering::Relaxed);
                    if c.outcome == Outcome::Sold {
                        live.sold.fetch_add(1, Ordering::Relaxed);
                    }
                    if let Some(l) = &c.lease {
                        leases.observe(
                            &l.key,
                            &l.token,
                            (l.acquired, l.released),
                            l.shared.into(),
                            c.ended,
                        );
                    }
                    match (&c.lease, c.outcome) {
                        (_, Outcome::SoldOut) => coverage.sold_out(c.sku),
                        (Some(l), o) => coverage.observe_lease(
                            c.sku,
                            (l.acquired, l.released),
                            c.ended,
                            o == Outcome::Sold,
                        ),
                        (None, _) => {}
                    }
                    if let Some(w) = writer.as_mut() {
                        w.write(&c)?;
                    }
                }
            }
            if let Some(w) = writer {
                w.finish()?;
            }
            Ok(Recording {
                stats,
                double_grants: leases.finish(),
                phases: phases.finish(Instant::now()),
                coverage: coverage.finish(start),
            })
        });
        Ok((tx, Self { task }))
    }

    /// Waits until every sender is dropped and returns what was recorded.
    pub async fn finish(self) -> std::io::Result<Recording> {
        self.task.await.map_err(std::io::Error::other)?
    }
}
