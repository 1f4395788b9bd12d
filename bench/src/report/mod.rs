//! Report: `summary.json` (a versioned schema), `timeline.csv`, `latency.hlog`, the tables
//! printed on stdout and `report.html` with its charts. Everything is written from the recorded
//! data, so it can be re-rendered.

pub mod advise;
pub mod agreement;
mod chaos;
mod charts;
pub mod ci;
pub mod contend;
pub mod drift;
mod error;
pub mod evidence;
pub mod explain;
mod files;
pub mod format;
pub mod gate;
pub mod history;
mod hlog;
pub mod html;
pub mod layout;
pub mod model;
pub mod needs;
mod needs_sale;
pub mod paired;
pub mod predict;
pub mod rounds;
pub mod sale;
mod saved;
pub mod sweep;
mod table;
pub mod totals;
pub mod usl;
pub mod versions;
pub mod versus;
pub mod work;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use chaos::{FaultSummary, PhaseSummary, summarize as summarize_chaos};
pub use charts::{Chart, Kind as ChartKind, render_contend, render_sweep};
pub use error::ReportError;
pub use files::{write_results, write_summary};
pub use html::{write_report, write_report_with};
pub use needs::Needs;
pub use saved::summaries;
pub use table::{Printed, Width, print_faults, print_table, print_table_as};

use crate::check::{
    DoubleGrants, Exclusion, LockVerdict, Overlap, Safety, StoreVerdict, Verdict, WorkerClock,
};
use crate::cluster::{NodeInfo, Pooler, Provisioner};
use crate::record::contention::Contention;
pub use crate::record::machine::Machine;
use crate::record::utilization::{Coverage, Utilization};
use crate::record::{
    DangerWindow, DriveReport, ErrorKind, LatencySummary, Outcome, Stats, every_arrival,
};
use crate::strategy::StrategyInfo;
use crate::workload::Workload;

/// Schema id of `summary.json`; bump on any incompatible change.
pub const SCHEMA: &str = "lockbench.summary/2";

/// Attempts and sales per second.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Throughput {
    /// All attempts (any outcome) per second of `duration_s`.
    pub attempts_per_s: f64,
    /// Audited sales per second while there was stock: over `sold_out_s` when the stock ran
    /// out, else over `duration_s`.
    pub sales_per_s: f64,
    /// Reads answered (torn or not) per second of `duration_s` (0 without reads).
    #[serde(default)]
    pub reads_per_s: f64,
}

/// Everything a run concluded. Written as `summary.json`; see README.md for the field list.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// Version of lockbench that produced it.
    pub lockbench_version: String,
    /// Its git revision (`build`, flattened).
    #[serde(flatten)]
    pub origin: Origin,
    /// Strategy id.
    pub strategy: String,
    /// Whether the strategy claims never to oversell (controls do not).
    pub claims_safety: bool,
    /// Exactly "the lock held (or there is none) and the store is intact".
    pub safe: bool,
    /// The lock half of the verdict: `held`, `broken` (an unfenced lock granted a key to two
    /// holders at once or lost a lease while its holder worked), `broken-fenced` (that
    /// happened and the fenced store refused every stale write); `null` without a lock.
    pub lock_verdict: Option<LockVerdict>,
    /// The store half: `intact`, or `corrupted` (oversell, lost updates, inconsistent SKUs).
    pub store_verdict: StoreVerdict,
    /// Seed of the run.
    pub seed: u64,
    /// Workload file given on the command line.
    pub workload_file: String,
    /// The effective workload (file plus `--set` overrides, defaults filled in).
    pub workload: serde_json::Value,
    /// The audit: `initial_stock`, `final_stock`, `sold`, `oversell`, `lost_updates`,
    /// `inconsistent_skus`, `lost_sales` (flattened into the top level of the JSON).
    #[serde(flatten)]
    pub audit: Safety,
    /// Pairs of leases on one lock key that overlapped in time (lost mutual exclusion); leases
    /// timed on different hosts' clocks only beyond the clocks' uncertainty.
    pub double_grants: u64,
    /// Leases that a later grant of the same key overlapped: one per stale holder, however
    /// many later holders overlapped it.
    pub double_grant_incidents: u64,
    /// Leases that ended before their holder released them: release found the lock gone or
    /// another's, renewal found it expired, or Redlock's validity passed while it was held.
    pub lease_lost: u64,
    /// Per lost lease, the time from the server's end of the lease to its holder's notice,
    /// and the store writes it sent after the end (`record::danger`); lease-based strategies
    /// only (and any lock that lost a lease), absent otherwise and in older summaries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub danger_window: Option<DangerWindow>,
    /// The first few overlapping pairs, with the mode each lease held its key in (and, for
    /// leases timed on different hosts' clocks, the clock uncertainty the overlap beat).
    pub double_grant_examples: Vec<Overlap>,
    /// Of `double_grants`, the pairs of leases timed on different hosts' clocks: each overlapped
    /// by more than the two clocks' uncertainty.
    #[serde(default)]
    pub double_grants_cross_host: u64,
    /// Pairs of leases timed on different hosts' clocks that overlapped by no more than the two
    /// clocks' uncertainty: perhaps a double grant, perhaps clock error; not in `double_grants`.
    #[serde(default)]
    pub within_clock_uncertainty: u64,
    /// The longest of those overlaps, with the uncertainty it fell within.
    #[serde(default)]
    pub within_clock_uncertainty_largest: Option<Overlap>,
    /// Each worker's clock: its offset from the coordinator's, how far its mapping may have
    /// been off, how far it drifted (empty without workers).
    #[serde(default)]
    pub clocks: Vec<WorkerClock>,
    /// Reads answered (`load.read_fraction`), torn ones included.
    #[serde(default)]
    pub reads: u64,
    /// Reads that saw the stock change under their read lock: a writer got in (lock broken).
    #[serde(default)]
    pub torn_reads: u64,
    /// Share of each SKU's selling window during which some holder was inside its lease
    /// (see README "Utilization"); `null` for strategies without a lock.
    #[serde(default)]
    pub utilization: Option<Utilization>,
    /// How the lock shared its keys among waiting buyers: acquire wait, fairness, barging,
    /// missed wake-ups (`record::contention`); `null` for strategies without a lock.
    #[serde(default)]
    pub contention: Option<Contention>,
    /// How buyers waited for a busy lock (`lock.wait`); `null` for strategies that wait
    /// server-side or take no lock.
    #[serde(default)]
    pub lock_wait: Option<LockWait>,
    /// Writes a fenced store refused because a newer token had reached it.
    pub stale_rejected: u64,
    /// Locks left held with no expiry at the end: every later buyer of those SKUs stalls.
    pub stuck_locks: u64,
    /// Attempts whose outcome is unknown (timeouts after the write was sent).
    pub unknown: u64,
    /// Attempts started.
    pub attempts: u64,
    /// Attempts that definitely failed with an error.
    pub errors: u64,
    /// Attempts per outcome class: sold, sold_out, lock_timeout, error, unknown, locked, read,
    /// torn_read (client view).
    pub outcomes: BTreeMap<String, u64>,
    /// Failed and unknown attempts by error kind.
    pub errors_by_kind: BTreeMap<String, BTreeMap<String, u64>>,
    /// Lock releases that failed with an error (whether the lock was freed is unknown; it
    /// expires). A release that found the lock no longer ours is a `lease_lost`.
    pub release_failures: u64,
    /// Open-loop arrivals due before the end that never started (saturation).
    pub not_started: u64,
    /// Attempts started out of every scheduled arrival (`attempts / (attempts + not_started)`).
    pub started_fraction: f64,
    /// The run was cut short by Ctrl-C.
    pub interrupted: bool,
    /// Seconds from the start of the load to the end of its last attempt.
    pub duration_s: f64,
    /// Seconds from the start until the last sale, when the audit found no stock left.
    pub sold_out_s: Option<f64>,
    /// Rates over `duration_s`.
    pub throughput: Throughput,
    /// Latency of every scheduled arrival from its intended start. An arrival never started
    /// counts as the whole load (`duration_s`), above every measured latency: see
    /// [`every_arrival`]. This is the latency the tables and the gate show.
    pub latency_us: LatencySummary,
    /// Latency of the attempts that started only (what `latency_us` was before unstarted
    /// arrivals were counted).
    pub latency_us_started: LatencySummary,
    /// Latency by outcome class.
    pub latency_us_by_outcome: BTreeMap<String, LatencySummary>,
    /// Service time (from the actual start): the difference to `latency_us` is queueing.
    pub service_time_us: LatencySummary,
    /// The servers of the run.
    pub servers: Vec<NodeInfo>,
    /// Where the servers came from: `local` (child processes), `containers`, or `target`
    /// (servers that already existed).
    #[serde(default)]
    pub provisioner: Provisioner,
    /// The target file of a `target` run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_file: Option<String>,
    /// Wall-clock start of the load (RFC 3339).
    pub started_at: String,
    /// The chaos file of the run, if any.
    #[serde(default)]
    pub chaos_file: Option<String>,
    /// What each fault did (empty without chaos).
    #[serde(default)]
    pub faults: Vec<FaultSummary>,
    /// Throughput, latency and errors before / during / after each fault (empty without chaos).
    #[serde(default)]
    pub phases: Vec<PhaseSummary>,
    /// Client worker processes the buyers ran in (0: inside lockbench itself).
    #[serde(default)]
    pub workers: u32,
    /// Workers that died or failed, with why.
    #[serde(default)]
    pub worker_failures: Vec<String>,
    /// Consensus writes the lock service committed during the load (etcd runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consensus_writes: Option<ConsensusWrites>,
    /// What the lock service (per grant) and the store (per sale) did for the load, as their
    /// own counters say, background subtracted; `null` in older summaries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_work: Option<work::ServerWork>,
    /// What a sale cost the servers: fsyncs and CPU per sale (from `server_work`'s counters);
    /// `null` without server work or sales.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<work::Cost>,
    /// The lease TTL the lock service granted, seconds, for locks whose server may change the
    /// one asked for (etcd raises `lock.ttl` to its minimum, in whole seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_ttl_granted_s: Option<f64>,
    /// The library behind a `lib:<name>` strategy, as its adapter reported it at `init`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library: Option<crate::strategy::adapter::Hello>,
    /// Clients that broke (a library's adapter that misbehaved or died), one line per
    /// process; the run failed with them after writing this summary.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub broken: Vec<String>,
    /// What a flash sale cost (docs/sale.md): only for a sale workload (`[buyers]` or a
    /// shape other than steady), absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sale: Option<sale::Sale>,
    /// The machine the command ran on, measured once at its start (`record::machine`,
    /// docs/results.md); absent in older summaries and in runs of the in-memory sim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<Machine>,
    /// The steady environment of the run (`[environment]`: its delays and what its probe
    /// measured at the start of the load); absent when none was set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<crate::chaos::environment::Environment>,
}

/// Which build made a summary besides lockbench's version, so that `lockbench history` can
/// line runs up by commit (the machine is `Summary::machine`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Origin {
    /// Git revision of the lockbench build (`git rev-parse --short HEAD` when it was
    /// compiled); absent outside a git checkout and in older summaries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<String>,
}

impl Origin {
    /// This build.
    pub fn here() -> Self {
        Self {
            build: option_env!("LOCKBENCH_GIT_REV").map(Into::into),
        }
    }
}

/// Consensus writes during the load: what a lock costs its consensus service per sale.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ConsensusWrites {
    /// Entries committed between the start and the end of the load (every writer's, lease
    /// grants and revokes included).
    pub writes: u64,
    /// `writes` per audited sale (`null` when nothing sold).
    pub per_sale: Option<f64>,
    /// Where the count comes from.
    pub source: String,
}

impl ConsensusWrites {
    /// `writes` over `sold` sales, read from `source`.
    pub fn new(writes: u64, sold: u64, source: &str) -> Self {
        Self {
            writes,
            per_sale: (sold > 0).then(|| format::round(writes as f64 / sold as f64, 2)),
            source: source.into(),
        }
    }
}

/// How a run's buyers waited for a busy lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockWait {
    /// What the run did: `notify`, `poll 100ms`, `poll 200ms±100ms`.
    pub wait: String,
    /// The strategy's default and the library it follows.
    pub default: String,
}

/// What a finished run hands to [`Summary::new`].
pub struct RunParts<'a> {
    /// The strategy that ran.
    pub info: &'a StrategyInfo,
    /// The effective workload.
    pub workload: &'a Workload,
    /// Where the workload came from.
    pub workload_file: &'a str,
    /// The recorder's statistics.
    pub stats: &'a Stats,
    /// What the driver observed.
    pub drive: &'a DriveReport,
    /// The audit's verdict.
    pub safety: &'a Safety,
    /// Overlapping leases.
    pub double_grants: &'a DoubleGrants,
    /// Leased time per SKU.
    pub coverage: &'a Coverage,
    /// How the locks shared their keys.
    pub contention: Option<&'a Contention>,
    /// Locks left held with no expiry.
    pub stuck_locks: u64,
    /// The servers used.
    pub servers: Vec<NodeInfo>,
    /// Where they came from.
    pub provisioner: Provisioner,
    /// The target file, for an external target.
    pub target_file: Option<String>,
    /// Wall-clock start of the load.
    pub started_at: std::time::SystemTime,
    /// Chaos file, fault and phase summaries, workers.
    pub chaos: ChaosParts,
    /// Each worker's clock (empty without workers).
    pub clocks: Vec<WorkerClock>,
}

/// The chaos side of a run, for [`Summary::new`].
#[derive(Debug, Default)]
pub struct ChaosParts {
    /// The chaos file, if any.
    pub file: Option<String>,
    /// What each fault did.
    pub faults: Vec<FaultSummary>,
    /// Per-phase measurements.
    pub phases: Vec<PhaseSummary>,
    /// Worker processes used.
    pub workers: u32,
    /// Workers that failed.
    pub worker_failures: Vec<String>,
}

impl Summary {
    /// Builds the summary of one run from its parts.
    pub fn new(p: RunParts<'_>) -> Self {
        let (stats, drive, safety, dg) = (p.stats, p.drive, p.safety, p.double_grants);
        let duration_s = drive.elapsed.as_secs_f64();
        let sold_out_s = sold_out(stats, safety);
        let attempts = stats.attempts();
        let started = stats.all_latency();
        let every = every_arrival(&started, drive.not_started, drive.elapsed);
        let verdict = judge(&p);
        let reads = stats.count(Outcome::READ) + stats.count(Outcome::TORN_READ);
        let utilization = utilization(&p);
        let largest = dg.within_clock_uncertainty_largest.clone();
        let (info, w) = (p.info, p.workload);
        Self {
            schema: SCHEMA.into(),
            lockbench_version: env!("CARGO_PKG_VERSION").into(),
            origin: Origin::here(),
            strategy: info.id.into(),
            claims_safety: info.claims_safety(),
            safe: verdict.safe(),
            lock_verdict: verdict.lock,
            store_verdict: verdict.store,
            seed: w.seed,
            workload_file: p.workload_file.into(),
            workload: serde_json::to_value(w).expect("workload serialises"),
            audit: *safety,
            double_grants: dg.count,
            double_grant_incidents: dg.incidents,
            lease_lost: stats.lease_lost,
            danger_window: danger_window(info, stats, dg),
            stale_rejected: stats.failed[ErrorKind::StaleToken as usize],
            stuck_locks: p.stuck_locks,
            double_grant_examples: dg.examples.clone(),
            double_grants_cross_host: dg.cross_host,
            within_clock_uncertainty: dg.within_clock_uncertainty,
            within_clock_uncertainty_largest: largest,
            clocks: p.clocks,
            reads,
            torn_reads: stats.count(Outcome::TORN_READ),
            utilization,
            contention: p.contention.filter(|_| info.locks).cloned(),
            lock_wait: LockWait::of(info, w),
            unknown: stats.count(Outcome::Unknown(ErrorKind::Timeout).class()),
            attempts,
            errors: stats.count(Outcome::Failed(ErrorKind::Server).class()),
            outcomes: outcome_counts(stats),
            errors_by_kind: errors_by_kind(stats),
            release_failures: stats.release_failed,
            not_started: drive.not_started,
            started_fraction: fraction(attempts, attempts + drive.not_started),
            interrupted: drive.cancelled,
            duration_s: format::round(duration_s, 3),
            sold_out_s: sold_out_s.map(|s| format::round(s, 3)),
            throughput: Throughput::over(attempts, safety.sold, reads, duration_s, sold_out_s),
            latency_us: LatencySummary::of(&every),
            latency_us_started: LatencySummary::of(&started),
            latency_us_by_outcome: latency_by_outcome(stats),
            service_time_us: LatencySummary::of(&stats.service),
            servers: p.servers,
            provisioner: p.provisioner,
            target_file: p.target_file,
            started_at: humantime::format_rfc3339_millis(p.started_at).to_string(),
            chaos_file: p.chaos.file,
            faults: p.chaos.faults,
            phases: p.chaos.phases,
            workers: p.chaos.workers,
            worker_failures: p.chaos.worker_failures,
            consensus_writes: None,
            server_work: None,
            cost: None,
            lease_ttl_granted_s: None,
            library: None,
            broken: drive.broken.clone(),
            sale: None,
            machine: None,
            environment: None,
        }
    }
}

/// The danger window of a lease-based lock, or of any lock that lost a lease.
/// The stale holders never told come from the double-grant check.
fn danger_window(info: &StrategyInfo, stats: &Stats, d: &DoubleGrants) -> Option<DangerWindow> {
    let lost = stats.danger.counts.lost + d.unnoticed > 0;
    let window = || DangerWindow {
        unnoticed_overlapped: d.unnoticed,
        unnoticed_went_on_max_us: (d.unnoticed > 0).then_some(d.unnoticed_went_on_us),
        ..stats.danger.window()
    };
    (info.locks && (info.leases() || lost)).then(window)
}

/// Share of each SKU's selling window some holder was inside its lease; `None` without a lock.
fn utilization(p: &RunParts<'_>) -> Option<Utilization> {
    let skus = p.workload.inventory.skus;
    (p.info.locks).then(|| p.coverage.utilization(skus, p.drive.elapsed))
}

/// When the stock ran out, in seconds from the start; None while some was left.
fn sold_out(stats: &Stats, safety: &Safety) -> Option<f64> {
    stats
        .last_sale
        .filter(|_| safety.final_stock <= 0)
        .map(|d| d.as_secs_f64())
}

/// The verdict on the run: whether two holders overlapped and whether the store adds up.
fn judge(p: &RunParts<'_>) -> Verdict {
    Verdict::judge(
        p.info.locks,
        p.info.fenced,
        Exclusion {
            double_grant_incidents: p.double_grants.incidents,
            lease_lost: p.stats.lease_lost,
            torn_reads: p.stats.count(Outcome::TORN_READ),
        },
        p.safety,
    )
}

impl Throughput {
    /// Rates over `duration_s`; sales over `sold_out_s` instead when the stock ran out.
    fn over(
        attempts: u64,
        sold: u64,
        reads: u64,
        duration_s: f64,
        sold_out_s: Option<f64>,
    ) -> Self {
        let selling_s = sold_out_s.unwrap_or(duration_s);
        let per_s = |n: u64, over_s: f64| {
            if over_s > 0.0 {
                format::round(n as f64 / over_s, 1)
            } else {
                0.0
            }
        };
        Self {
            attempts_per_s: per_s(attempts, duration_s),
            sales_per_s: per_s(sold, selling_s),
            reads_per_s: per_s(reads, duration_s),
        }
    }
}

impl LockWait {
    /// The wait policy the run used and the strategy's default, for a strategy that waits.
    fn of(info: &StrategyInfo, w: &Workload) -> Option<Self> {
        info.wait.as_ref().map(|d| LockWait {
            wait: info
                .wait_policy(w)
                .map_or_else(|e| e.to_string(), |p| p.to_string()),
            default: format!("{} ({})", d.policy(), d.follows),
        })
    }
}

/// Attempts per outcome class.
fn outcome_counts(stats: &Stats) -> BTreeMap<String, u64> {
    (0..Outcome::CLASSES)
        .map(|i| (Outcome::CLASS_NAMES[i].to_string(), stats.count(i)))
        .collect()
}

/// Failed and unknown attempts by the kind of error, kinds that occurred only.
fn errors_by_kind(stats: &Stats) -> BTreeMap<String, BTreeMap<String, u64>> {
    let by_kind = |counts: &[u64]| {
        ErrorKind::ALL
            .iter()
            .zip(counts)
            .filter(|(_, n)| **n > 0)
            .map(|(k, n)| (k.name().to_string(), *n))
            .collect::<BTreeMap<_, _>>()
    };
    BTreeMap::from([
        ("error".to_string(), by_kind(&stats.failed)),
        ("unknown".to_string(), by_kind(&stats.unknown)),
    ])
}

/// Latency percentiles of each outcome class that occurred.
fn latency_by_outcome(stats: &Stats) -> BTreeMap<String, LatencySummary> {
    (0..Outcome::CLASSES)
        .filter(|&i| stats.count(i) > 0)
        .map(|i| {
            (
                Outcome::CLASS_NAMES[i].to_string(),
                LatencySummary::of(&stats.latency[i]),
            )
        })
        .collect()
}

/// `part / whole` to four decimals; 1 when nothing was scheduled.
fn fraction(part: u64, whole: u64) -> f64 {
    if whole > 0 {
        format::round(part as f64 / whole as f64, 4)
    } else {
        1.0
    }
}

impl Summary {
    /// The two-part verdict.
    pub fn verdict(&self) -> Verdict {
        Verdict {
            lock: self.lock_verdict,
            store: self.store_verdict,
        }
    }

    /// Whether the run had reads (`load.read_fraction > 0`): only then do tables show them.
    pub fn had_reads(&self) -> bool {
        self.reads > 0
            || self
                .workload
                .pointer("/load/read_fraction")
                .and_then(serde_json::Value::as_f64)
                .is_some_and(|f| f > 0.0)
    }

    /// Whether the `q` quantile of every arrival lands among the arrivals that never started:
    /// they rank above every started one, so exactly when `q` exceeds the started fraction.
    pub fn among_unstarted(&self, q: f64) -> bool {
        let scheduled = self.attempts + self.not_started;
        self.not_started > 0 && q * scheduled as f64 > self.attempts as f64
    }

    /// One word for the row (see [`Verdict::headline`]).
    pub fn headline(&self) -> &'static str {
        self.verdict().headline(!self.claims_safety)
    }

    /// Whether the verdict is what the strategy claims: a strategy that claims safety is safe
    /// (or fenced: its lock broke, its store refused every stale write), a control is caught.
    /// `Err` says what happened instead.
    pub fn verdict_holds(&self) -> Result<String, String> {
        match (self.claims_safety, self.headline()) {
            (true, "safe") | (false, "caught (control)") => Ok(self.headline().to_string()),
            (true, "fenced") => {
                Ok("fenced: the lock broke; the store refused every stale write".into())
            }
            (_, headline) => Err(format!(
                "{}: {} (lock {}, store {})",
                self.strategy,
                headline,
                crate::check::Verdict::lock_text(self.lock_verdict),
                crate::check::Verdict::store_text(self.store_verdict)
            )),
        }
    }

    /// A sale's time from its surge until its hot item sold out; `None` outside a sale or
    /// when it did not sell out.
    pub fn hot_sold_out_s(&self) -> Option<f64> {
        let sale = self.sale.as_ref()?;
        let figures = sale.figures.as_ref()?;
        (figures.sold_out_after_surge_s)
            .get(sale.hot_sku as usize)
            .copied()?
    }

    /// The note on the connection pooler between the buyers and PostgreSQL
    /// (`servers.postgres_pooler` of the effective workload), and what it does to this run's
    /// lock; `None` without one.
    pub fn pooler_note(&self) -> Option<String> {
        let servers = self.workload.get("servers")?;
        let pooler: Pooler = servers.get("postgres_pooler")?.as_str()?.parse().ok()?;
        let mode = pooler.pool_mode()?;
        let clients = self.workload["load"]["clients"].as_u64().unwrap_or(1) as u32;
        let mut note = format!(
            "PgBouncer is in the path between the buyers and PostgreSQL ({mode} pooling, {} \
             server connections for {clients} buyers)",
            pooler.pool_size(clients)
        );
        let session_lock = crate::strategy::sql::holds_a_session_lock(&self.strategy);
        note.push_str(match (session_lock, pooler.shares_sessions()) {
            (true, true) => {
                ": the session advisory lock follows the server connection, not the buyer: \
                 the pooler runs each statement on whichever server connection is free, so the \
                 next buyer whose statement lands on the holder's connection is granted the \
                 lock again (it is reentrant), and an unlock that lands on another connection \
                 frees nothing (pgbouncer#617, #102); a waiter blocked in pg_advisory_lock pins \
                 one of the few server connections meanwhile, so other buyers' statements queue \
                 in the pooler (timeouts)"
            }
            (true, false) => {
                ": each buyer keeps its server session while connected (a session left behind \
                 is reset by DISCARD ALL, which frees its advisory locks), so the session lock \
                 stays the buyer's"
            }
            (false, true) => {
                ": a transaction keeps its server connection until it ends, so a lock the \
                 transaction holds cannot move to another buyer"
            }
            (false, false) => "",
        });
        Some(note)
    }

    /// The note for overlaps of leases on different hosts' clocks that the clocks'
    /// uncertainty may explain (not counted as double grants); `None` without any.
    pub fn clock_note(&self) -> Option<String> {
        let largest = self.within_clock_uncertainty_largest.as_ref();
        (self.within_clock_uncertainty > 0).then(|| {
            let largest = largest.map_or_else(String::new, |o| {
                format!(
                    " (the longest {} µs within {} µs)",
                    o.overlap_us,
                    o.clock_uncertainty_us.unwrap_or(0)
                )
            });
            format!(
                "{} lease overlap(s) across hosts within clock uncertainty{largest}, not counted \
                 as double grants",
                self.within_clock_uncertainty
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant, UNIX_EPOCH};

    use super::*;
    use crate::record::{Completion, LeaseSpan};

    #[test]
    fn a_percentile_is_marked_when_it_lands_among_unstarted_arrivals() {
        let among_unstarted = |s: &Summary, q| s.among_unstarted(q);
        let mut s: Summary =
            serde_json::from_str(include_str!("../../tests/fixtures/summary.json"))
                .expect("fixture");
        s.not_started = 0;
        assert!(!among_unstarted(&s, 1.0), "nothing unstarted");
        (s.attempts, s.not_started) = (995, 5);
        assert!(!among_unstarted(&s, 0.99), "990th of 1000 is a started one");
        assert!(among_unstarted(&s, 0.999) && among_unstarted(&s, 1.0));
        (s.attempts, s.not_started) = (110, 890);
        assert!(among_unstarted(&s, 0.5));
    }

    #[test]
    fn read_columns_appear_only_when_a_run_had_reads() {
        let plain: Summary =
            serde_json::from_str(include_str!("../../tests/fixtures/summary.json"))
                .expect("fixture");
        assert!(!plain.had_reads(), "a summary from before reads has none");
        let table = |rows: &[Summary]| {
            let mut out = Vec::new();
            print_table(&mut out, rows).unwrap();
            String::from_utf8(out).unwrap()
        };
        assert!(!table(std::slice::from_ref(&plain)).contains("reads"));
        let mut reads = plain.clone();
        reads.strategy = "rw".into();
        (reads.reads, reads.torn_reads, reads.throughput.reads_per_s) = (900, 3, 450.0);
        let t = table(&[plain, reads]);
        let header = t.lines().next().unwrap();
        assert!(
            header.contains("reads/s") && header.contains("torn reads"),
            "{t}"
        );
        let row = |id: &str| {
            t.lines()
                .find(|l| l.starts_with(&format!("{id} ")))
                .unwrap()
                .split_whitespace()
                .collect::<Vec<_>>()
        };
        // Columns 3 and 4: after attempts/s and sales/s.
        assert_eq!(&row("rw")[3..5], ["450.0", "3"], "{t}");
        assert_eq!(&row("mysql-atomic")[3..5], ["-", "-"], "{t}");
    }

    #[test]
    fn a_pooler_in_the_path_is_noted_with_what_it_does_to_the_lock() {
        let mut s: Summary =
            serde_json::from_str(include_str!("../../tests/fixtures/summary.json")).unwrap();
        s.workload["servers"]["postgres_pooler"] = "none".into();
        assert_eq!(s.pooler_note(), None);
        s.workload["load"]["clients"] = 32.into();
        s.workload["servers"]["postgres_pooler"] = "pgbouncer-transaction".into();
        s.strategy = "pg-advisory".into();
        let note = s.pooler_note().unwrap();
        assert_contains!(note, "4 server connections for 32 buyers");
        assert!(note.contains("follows the server connection, not the buyer"));
        s.strategy = "pg-advisory-xact".into();
        assert!(
            s.pooler_note()
                .unwrap()
                .contains("cannot move to another buyer")
        );
        s.workload["servers"]["postgres_pooler"] = "pgbouncer-session".into();
        s.strategy = "pg-advisory-fenced".into();
        let note = s.pooler_note().unwrap();
        assert_contains!(note, "(session pooling, 32 server connections");
        assert_contains!(note, "stays the buyer's");
    }

    #[test]
    fn overlaps_within_clock_uncertainty_are_a_note_not_a_double_grant() {
        let mut s: Summary =
            serde_json::from_str(include_str!("../../tests/fixtures/summary.json"))
                .expect("a summary from before clocks loads");
        assert_eq!((s.within_clock_uncertainty, s.clocks.len()), (0, 0));
        assert_eq!(s.clock_note(), None);
        s.within_clock_uncertainty = 2;
        s.within_clock_uncertainty_largest = Some(Overlap {
            key: "k".into(),
            first: "a".into(),
            second: "b".into(),
            overlap_us: 900,
            first_mode: crate::check::Mode::Exclusive,
            second_mode: crate::check::Mode::Exclusive,
            clock_uncertainty_us: Some(1_500),
            clock_margin_us: Some(1_500),
        });
        let mut out = Vec::new();
        print_table(&mut out, std::slice::from_ref(&s)).unwrap();
        let out = String::from_utf8(out).unwrap();
        assert!(
            out.contains(&format!(
                "note: {}: 2 lease overlap(s) across hosts within clock uncertainty (the longest \
                 900 µs within 1500 µs), not counted as double grants",
                s.strategy
            )),
            "{out}"
        );
    }

    /// Golden test of the summary schema: fixed parts in, the committed JSON out. A change in
    /// any field name, unit or rounding shows up here first. Regenerate deliberately with
    /// `UPDATE_GOLDEN=1 cargo test --lib golden` (and bump [`SCHEMA`] if it breaks readers).
    #[test]
    fn summary_matches_the_golden_file() {
        let w = Workload::parse("w.toml", "seed = 9\n[inventory]\nskus = 2\nstock = 3", &[])
            .expect("valid");
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let mut stats = Stats::new();
        let outcomes = [
            Outcome::Sold,
            Outcome::Sold,
            Outcome::LockTimeout,
            Outcome::Failed(ErrorKind::StaleToken),
            Outcome::Unknown(ErrorKind::Timeout),
            Outcome::SoldOut,
        ];
        for (i, outcome) in outcomes.into_iter().enumerate() {
            let i = i as u64;
            stats.record(
                &Completion {
                    ask: Default::default(),
                    seq: i,
                    client: i as u32,
                    sku: (i % 2) as u32,
                    outcome,
                    intended: at(100 * i),
                    started: at(100 * i + 5),
                    ended: at(100 * i + 20 + i * i),
                    read: false,
                    release_failed: i == 2,
                    lease: Some(LeaseSpan {
                        key: "k".into(),
                        token: format!("t{i}"),
                        fence: None,
                        acquired: at(100 * i + 6),
                        released: at(100 * i + 18),
                        lost: i == 3,
                        shared: false,
                        loss: None,
                    }),
                },
                start,
            );
        }
        let safety = Safety {
            initial_stock: 6,
            final_stock: 0,
            sold: 7,
            oversell: 1,
            lost_updates: 1,
            inconsistent_skus: 1,
            lost_sales: 0,
            limit_violations: 0,
            duplicate_orders: 0,
            pay_violations: 0,
        };
        // Two buyers on SKU 0: one waits 5 ms and holds, the other gives up after 40 ms.
        let mut contention = crate::record::contention::ContentionTracker::new(
            Duration::from_secs(5),
            Duration::ZERO,
        );
        contention.grant(0, 1, at(0), (at(5), at(25)), at(25), false);
        contention.give_up(0, 2, at(1), at(41));
        let contention = contention.finish();
        let summary = Summary::new(RunParts {
            info: crate::strategy::find("redis-setnx").expect("known"),
            workload: &w,
            workload_file: "w.toml",
            stats: &stats,
            drive: &DriveReport {
                elapsed: Duration::from_millis(2500),
                not_started: 4,
                cancelled: false,
                broken: Vec::new(),
                generator_lag: Default::default(),
                unstarted: Vec::new(),
                round_trips: None,
            },
            safety: &safety,
            coverage: &Coverage::default(),
            contention: contention.as_ref(),
            double_grants: &DoubleGrants {
                count: 2,
                incidents: 1,
                examples: vec![Overlap {
                    key: "k".into(),
                    first: "t0".into(),
                    second: "t1".into(),
                    overlap_us: 1500,
                    first_mode: crate::check::Mode::Exclusive,
                    second_mode: crate::check::Mode::Exclusive,
                    clock_uncertainty_us: Some(1_000),
                    clock_margin_us: Some(1_500),
                }],
                cross_host: 1,
                within_clock_uncertainty: 3,
                within_clock_uncertainty_largest: Some(Overlap {
                    key: "k".into(),
                    first: "t2".into(),
                    second: "t3".into(),
                    overlap_us: 700,
                    first_mode: crate::check::Mode::Exclusive,
                    second_mode: crate::check::Mode::Shared,
                    clock_uncertainty_us: Some(1_000),
                    clock_margin_us: Some(700),
                }),
                unnoticed: 1,
                unnoticed_went_on_us: 1_200_000,
            },
            stuck_locks: 0,
            servers: Vec::new(),
            provisioner: Provisioner::Local,
            target_file: None,
            started_at: UNIX_EPOCH + Duration::from_secs(1_800_000_000),
            chaos: ChaosParts::default(),
            clocks: vec![
                WorkerClock {
                    worker: 0,
                    same_host: true,
                    offset_us: 0,
                    uncertainty_us: 0,
                    drift_us: 0,
                    pings: 4,
                },
                WorkerClock {
                    worker: 1,
                    same_host: false,
                    offset_us: -1_234,
                    uncertainty_us: 500,
                    drift_us: 12,
                    pings: 65,
                },
            ],
        });
        let mut got = serde_json::to_value(&summary).expect("serialises");
        // The only fields that are not a function of the parts: the build.
        got["lockbench_version"] = "X".into();
        got["build"] = "X".into();
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/summary-golden.json"
        );
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::write(path, serde_json::to_string_pretty(&got).unwrap() + "\n").unwrap();
        }
        let want: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).expect("golden file")).unwrap();
        assert_eq!(got, want, "summary.json changed; see the doc comment");
    }
}
