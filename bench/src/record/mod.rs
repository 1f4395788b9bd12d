//! Record: what happened, on one monotonic clock.
//!
//! Buyers in this process send one [`Completion`] per attempt to the recorder task
//! ([`Recorder::spawn`]); worker processes fold theirs themselves and send a [`Batch`] per
//! interval ([`partial`]). The recorder ([`Ingest`]) folds both into [`Stats`] (HdrHistograms
//! per outcome, a per-second timeline), the phases, the double-grant checker and the
//! utilization tracker, and, if asked, streams completions to a JSONL history. Memory grows
//! with the run's seconds, never with its attempts, except a sale's row per purchase
//! ([`sale`], asked for by [`Ingest::keep_sale`]).

pub mod contention;
pub mod danger;
mod history;
mod lease_rows;
pub mod machine;
#[cfg(test)]
mod merge_tests;
mod outcome;
pub mod partial;
pub mod phases;
pub mod pressure;
pub mod quantile;
pub mod sale;
mod stats;
pub mod trips;
pub mod utilization;
mod wire;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::check::{DoubleGrantChecker, DoubleGrants};
use crate::workload::Ask;

pub use danger::{DangerWindow, LossSource, LossSpan};
pub use history::{HistoryLease, HistoryLine, HistoryWriter, max_shared_holders, read_history};
pub use outcome::{ErrorKind, Outcome, Refusal};
pub use partial::{Batch, BatchError, Interval, WorkerFold};
pub use stats::{Bounds, Ci95, LatencySummary, Pct, Second, Stats, every_arrival, hist};

/// How many completions may wait for the recorder before buyers are slowed down.
const QUEUE: usize = 64 * 1024;
/// How far out of completion order leases may reach the recorder: a worker's lease waits
/// [`partial::LAG`] before it is folded and up to [`partial::FLUSH`] before it is sent, then
/// crosses the network; a second more for a busy machine.
const ORDER_SLACK: Duration = Duration::from_millis(
    partial::LAG.as_millis() as u64 + partial::FLUSH.as_millis() as u64 + 1_000,
);

/// What the driver itself observed.
#[derive(Debug, Clone, Default)]
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
    /// How late the generator itself released arrivals, in the peak window.
    pub generator_lag: GeneratorLag,
    /// A sale's purchases never started: buyers who asked and went without (this process's;
    /// empty outside a sale).
    pub unstarted: Vec<sale::Unstarted>,
    /// The attempts' round trips to the servers ([`trips`]); `None` when a worker's count was
    /// lost (it failed, or its build sends none).
    pub round_trips: Option<trips::RoundTrips>,
}

/// How late the generator released arrivals to buyers who were idle and waiting for them
/// (`started − intended` of arrivals a buyer had taken before their intended start: timer and
/// scheduler lateness, the load generator's own), in the peak window: the second after the
/// surge starts ([`crate::workload::Shape::surge_start`]), or the whole load for a steady
/// stream. Arrivals that waited for a busy buyer are not in it: that queueing is the
/// strategy's. n = 0: no arrival was released to an idle buyer in the window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GeneratorLag {
    /// Arrivals measured.
    pub n: u64,
    /// Median lag, µs.
    pub p50_us: u64,
    /// 99th percentile, µs.
    pub p99_us: u64,
    /// Largest, µs.
    pub max_us: u64,
}

impl GeneratorLag {
    /// The lag of the µs values in `h`.
    pub fn of(h: &hdrhistogram::Histogram<u64>) -> Self {
        if h.is_empty() {
            return Self::default();
        }
        Self {
            n: h.len(),
            p50_us: h.value_at_quantile(0.5),
            p99_us: h.value_at_quantile(0.99),
            max_us: h.max(),
        }
    }

    /// Two processes' lags as one: counts add, and each quantile is the larger of the two, an
    /// upper bound of the merged quantile (at most 1 % of either part lies above its own p99,
    /// so at most 1 % of the whole lies above the larger); the max is exact.
    pub fn merge(self, other: Self) -> Self {
        Self {
            n: self.n + other.n,
            p50_us: self.p50_us.max(other.p50_us),
            p99_us: self.p99_us.max(other.p99_us),
            max_us: self.max_us.max(other.max_us),
        }
    }
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
    /// For a lost lease: when the server ended it, when its holder noticed, when it wrote
    /// (the danger window, [`danger`]); `None` for a lease that was not lost.
    pub loss: Option<LossSpan>,
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
    /// Who asked, for which order, how many units.
    pub ask: Ask,
}

/// Test fixtures: one attempt of buyer 0 on SKU 0 that took no lease, and a plain lease.
/// Tests set the fields they are about with struct update syntax.
#[cfg(test)]
impl Completion {
    /// Ended at `ended` after `latency` (intended and started then).
    pub(crate) fn fixture(outcome: Outcome, ended: Instant, latency: Duration) -> Completion {
        Completion {
            ask: Default::default(),
            seq: 0,
            client: 0,
            sku: 0,
            read: false,
            outcome,
            intended: ended - latency,
            started: ended - latency,
            ended,
            release_failed: false,
            lease: None,
        }
    }
}

#[cfg(test)]
impl LeaseSpan {
    /// Held from `acquired` to `released`, released by its holder, unfenced, exclusive.
    pub(crate) fn fixture(key: &str, token: &str, acquired: Instant, released: Instant) -> Self {
        LeaseSpan {
            key: key.into(),
            token: token.into(),
            fence: None,
            acquired,
            released,
            lost: false,
            shared: false,
            loss: None,
        }
    }
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
    /// How the locks shared their keys (`None` without a lock attempt).
    pub contention: Option<contention::Contention>,
    /// A sale's purchase attempts, one row each (`None` unless asked: [`Ingest::keep_sale`]).
    pub sale: Option<sale::SaleLog>,
}

/// What reaches the recorder.
#[derive(Debug)]
pub enum Input {
    /// An attempt of a buyer in this process: recorded (and written to the history).
    Completion(Completion),
    /// A worker process's interval: merged.
    Batch(Box<Batch>),
    /// An attempt of a worker process, for the history only: its measurements come in the
    /// worker's batches.
    History(Completion),
}

impl From<Completion> for Input {
    fn from(c: Completion) -> Self {
        Self::Completion(c)
    }
}

/// The recorder's state: folds inputs in, one at a time (the recorder task runs it; tests and
/// benchmarks call it directly).
pub struct Ingest {
    start: Instant,
    stats: Stats,
    checks: LeaseChecks,
    /// Worker leases, put back in end order before the checks see them.
    merge: lease_rows::LeaseMerge,
    phases: phases::PhaseRecorder,
    history: Option<HistoryWriter>,
    live: Arc<Live>,
    sale: Option<sale::SaleLog>,
}

/// A lease as the checks see it.
struct LeaseSeen<'a> {
    key: &'a str,
    token: &'a str,
    sku: u32,
    client: u32,
    started: Instant,
    held: (Instant, Instant),
    ended: Instant,
    shared: bool,
    sold: bool,
    found_sold_out: bool,
    /// Its holder learned it was lost.
    lost: bool,
}

/// What is checked on leases: double grants, utilization and contention.
struct LeaseChecks {
    double_grants: DoubleGrantChecker,
    coverage: utilization::CoverageTracker,
    contention: contention::ContentionTracker,
    /// Worker K's clock domain (empty: every lease on the coordinator's clock).
    domains: Vec<u32>,
}

impl LeaseChecks {
    /// One lease. `worker`: the process whose clock took its times (`None`: this one). Leases
    /// of one clock domain (one host: CLOCK_MONOTONIC is system-wide) are compared exactly,
    /// of two only beyond their clocks' uncertainty.
    fn observe(&mut self, worker: Option<usize>, l: LeaseSeen<'_>) {
        let domain = worker
            .and_then(|k| self.domains.get(k).copied())
            .unwrap_or(crate::check::COORDINATOR);
        let seen = crate::check::SeenLease {
            key: l.key,
            token: l.token,
            held: l.held,
            mode: l.shared.into(),
            lost: l.lost,
        };
        self.double_grants.observe_lease(domain, seen, l.ended);
        // A lease of an attempt that found its SKU sold out lies after the selling window.
        if !l.found_sold_out {
            self.coverage.observe_lease(l.sku, l.held, l.ended, l.sold);
        }
        self.contention
            .grant(l.sku, l.client, l.started, l.held, l.ended, l.shared);
    }
}

impl Ingest {
    /// A recorder for a load that started at `start`; `history` (if any) receives one line per
    /// attempt; `horizon` bounds one attempt (for the streaming checks); measurements are split
    /// at the fault `boundaries`.
    pub fn new(
        start: Instant,
        history: Option<HistoryWriter>,
        horizon: Duration,
        live: Arc<Live>,
        boundaries: Arc<phases::Boundaries>,
    ) -> Self {
        Self {
            start,
            stats: Stats::new(),
            checks: LeaseChecks {
                double_grants: DoubleGrantChecker::new(horizon, ORDER_SLACK),
                coverage: utilization::CoverageTracker::new(horizon, ORDER_SLACK),
                contention: contention::ContentionTracker::new(horizon, ORDER_SLACK),
                domains: Vec::new(),
            },
            merge: lease_rows::LeaseMerge::default(),
            phases: phases::PhaseRecorder::new(boundaries, start),
            history,
            live,
            sale: None,
        }
    }

    /// Keeps a row per purchase attempt of this process's buyers, for a sale's figures
    /// ([`sale`]): memory then grows with the attempts (about 40 bytes each).
    pub fn keep_sale(mut self) -> Self {
        self.sale = Some(sale::SaleLog::default());
        self
    }

    /// Times the leases of worker `k` on clock domain `clocks.domains[k]`, whose uncertainty
    /// `clocks.table` holds (see [`crate::check::ClockTable`]); without it every clock is one.
    pub fn with_clocks(mut self, clocks: WorkerClocks) -> Self {
        let checks = &mut self.checks;
        checks.double_grants = std::mem::replace(
            &mut checks.double_grants,
            DoubleGrantChecker::new(Duration::ZERO, Duration::ZERO),
        )
        .with_clocks(clocks.table);
        checks.domains = clocks.domains;
        self
    }

    /// Picks up fault boundaries marked since the last call (once per handful of inputs).
    pub fn refresh(&mut self) {
        self.phases.refresh();
    }

    /// Folds one input in.
    pub fn input(&mut self, input: Input) -> std::io::Result<()> {
        match input {
            Input::Completion(c) => self.completion(&c),
            Input::Batch(b) => self.batch(*b).map_err(std::io::Error::other),
            Input::History(c) => self.history(&c),
        }
    }

    /// Records one attempt of a buyer in this process.
    pub fn completion(&mut self, c: &Completion) -> std::io::Result<()> {
        self.stats.record(c, self.start);
        self.phases.record(c);
        if let Some(s) = self.sale.as_mut() {
            s.push(c, self.start);
        }
        self.live.attempts.fetch_add(1, Ordering::Relaxed);
        if c.outcome == Outcome::Sold {
            self.live.sold.fetch_add(1, Ordering::Relaxed);
        }
        if c.outcome == Outcome::SoldOut {
            self.checks.coverage.sold_out(c.sku);
        }
        if let Some(l) = &c.lease {
            self.checks.observe(
                None,
                LeaseSeen {
                    key: &l.key,
                    token: &l.token,
                    sku: c.sku,
                    client: c.client,
                    started: c.started,
                    held: (l.acquired, l.released),
                    ended: c.ended,
                    shared: l.shared,
                    sold: c.outcome == Outcome::Sold,
                    found_sold_out: c.outcome == Outcome::SoldOut,
                    lost: l.lost,
                },
            );
        } else if c.outcome == Outcome::LockTimeout && !c.read {
            self.checks
                .contention
                .give_up(c.sku, c.client, c.started, c.ended);
        }
        self.history(c)
    }

    /// Writes one attempt to the history (when there is one), nothing else.
    pub fn history(&mut self, c: &Completion) -> std::io::Result<()> {
        match self.history.as_mut() {
            Some(w) => w.write(c),
            None => Ok(()),
        }
    }

    /// Merges one worker's interval.
    pub fn batch(&mut self, b: Batch) -> Result<(), BatchError> {
        self.stats.merge(&b.stats);
        for (i, s) in &b.seconds {
            self.stats.add_second(*i, s);
        }
        self.phases.merge(&b.phases);
        if b.misfiled > 0 {
            tracing::warn!(
                worker = b.worker,
                "a fault boundary reached the worker late: up to {} completions may be filed \
                 in the phase before it",
                b.misfiled
            );
            self.phases.misfiled(b.misfiled);
        }
        self.live
            .attempts
            .fetch_add(b.stats.attempts(), Ordering::Relaxed);
        self.live
            .sold
            .fetch_add(b.stats.count(Outcome::Sold.class()), Ordering::Relaxed);
        for sku in &b.sold_out {
            self.checks.coverage.sold_out(*sku);
        }
        self.merge.add(b.worker, b.leases, b.folded_to)?;
        self.release_leases(false)
    }

    /// Lets the merged worker leases through to the checks (every one with `all`).
    fn release_leases(&mut self, all: bool) -> Result<(), BatchError> {
        let checks = &mut self.checks;
        self.merge.release(all, self.start, |worker, l| {
            if l.gave_up {
                return checks
                    .contention
                    .give_up(l.sku, l.client, l.started, l.ended);
            }
            checks.observe(
                Some(worker),
                LeaseSeen {
                    key: l.key,
                    token: l.token,
                    sku: l.sku,
                    client: l.client,
                    started: l.started,
                    held: (l.acquired, l.released),
                    ended: l.ended,
                    shared: l.shared,
                    sold: l.sold,
                    found_sold_out: l.found_sold_out,
                    lost: l.lost,
                },
            )
        })
    }

    /// Everything recorded; `end` is when the load ended.
    pub fn finish(mut self, end: Instant) -> std::io::Result<Recording> {
        self.release_leases(true).map_err(std::io::Error::other)?;
        if let Some(w) = self.history {
            w.finish()?;
        }
        Ok(Recording {
            stats: self.stats,
            double_grants: self.checks.double_grants.finish(),
            phases: self.phases.finish(end),
            coverage: self.checks.coverage.finish(self.start),
            contention: self.checks.contention.finish(),
            sale: self.sale,
        })
    }
}

/// The clocks of a run's worker processes, for the double-grant check.
pub struct WorkerClocks {
    /// Each clock domain's uncertainty, live.
    pub table: Arc<crate::check::ClockTable>,
    /// Worker K's clock domain.
    pub domains: Vec<u32>,
}

/// Handle to the recorder task.
pub struct Recorder {
    task: tokio::task::JoinHandle<std::io::Result<Ingest>>,
}

impl Recorder {
    /// Starts the recorder ([`Ingest::new`] says what the arguments are; `sale`: keep a row
    /// per purchase, [`Ingest::keep_sale`]).
    pub fn spawn(
        start: Instant,
        history: Option<PathBuf>,
        horizon: Duration,
        live: Arc<Live>,
        boundaries: Arc<phases::Boundaries>,
        clocks: Option<WorkerClocks>,
        sale: bool,
    ) -> std::io::Result<(mpsc::Sender<Input>, Self)> {
        let writer = history
            .map(|p| HistoryWriter::create(&p, start))
            .transpose()?;
        let (tx, mut rx) = mpsc::channel::<Input>(QUEUE);
        let task = tokio::spawn(async move {
            let mut ingest = Ingest::new(start, writer, horizon, live, boundaries);
            if let Some(c) = clocks {
                ingest = ingest.with_clocks(c);
            }
            if sale {
                ingest = ingest.keep_sale();
            }
            let mut batch = Vec::with_capacity(256);
            while rx.recv_many(&mut batch, 256).await > 0 {
                ingest.refresh();
                for input in batch.drain(..) {
                    ingest.input(input)?;
                }
            }
            Ok(ingest)
        });
        Ok((tx, Self { task }))
    }

    /// Waits until every sender is dropped and returns what was recorded; `end` is when the
    /// load ended (it closes a stretch without a served attempt that lasts until the end).
    pub async fn finish(self, end: Instant) -> std::io::Result<Recording> {
        self.task.await.map_err(std::io::Error::other)??.finish(end)
    }
}

#[cfg(test)]
mod generator_lag_tests {
    use super::*;

    #[test]
    fn generator_lags_merge_to_an_upper_bound_of_each_quantile() {
        let mut h = hist(3);
        for us in [10, 20, 30, 40, 2_000] {
            h.record(us).unwrap();
        }
        let a = GeneratorLag::of(&h);
        assert_eq!((a.n, a.p50_us, a.max_us), (5, 30, 2_000));
        assert_eq!(GeneratorLag::of(&hist(3)), GeneratorLag::default());
        let b = GeneratorLag {
            n: 3,
            p50_us: 50,
            p99_us: 60,
            max_us: 70,
        };
        let m = a.merge(b);
        assert_eq!(
            (m.n, m.p50_us, m.p99_us, m.max_us),
            (8, 50, a.p99_us, 2_000)
        );
    }
}
