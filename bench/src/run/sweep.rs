//! `lockbench sweep`: the capacity of each strategy at a latency target. For each strategy,
//! short open-loop runs at rising offered rates on the same servers — a ramp that multiplies
//! the rate until a step misses the SLO, then bisection (geometric midpoints) between the last
//! pass and the first miss — each one a whole [`run`](super::run) with its own results folder.
//! `sweep.json` is rewritten after every strategy, so Ctrl-C or an error keeps what was measured.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use super::{RunError, RunOptions, run};
use crate::cluster::{ClusterOptions, Endpoints, EndpointsFile, Needs, OwnedCluster, Provisioner};
use crate::report::sweep::{Bound, Entry, SWEEP_SCHEMA, Search, Slo, Step, Sweep, rate_text};
use crate::strategy;
use crate::workload::Workload;
use crate::workload::config::{LoadMode, RedisAppendfsync};

/// What to sweep, as given.
#[derive(Debug, Clone)]
pub struct SweepOptions {
    /// Strategy ids, in order.
    pub strategies: Vec<String>,
    /// The workload every step starts from (its rate, duration and stock are the sweep's).
    pub workload: Workload,
    /// Where the workload came from.
    pub workload_file: String,
    /// The latency target.
    pub slo: Slo,
    /// How rates are searched.
    pub search: Search,
    /// Results folder: sweep.json, one folder per strategy, one per step inside.
    pub out: PathBuf,
    /// First port for the servers; `None` picks free ports.
    pub base_port: Option<u16>,
    /// Servers of a running `lockbench serve` instead of starting them.
    pub endpoints: Option<PathBuf>,
    /// How to start the servers.
    pub provision: Provisioner,
}

/// Where the search stands: the best rate that passed and the least that failed.
#[derive(Debug, Clone)]
pub struct Searcher {
    search: Search,
    passed: Option<f64>,
    failed: Option<f64>,
    refined: u32,
}

impl Searcher {
    /// A search not yet started.
    pub fn new(search: Search) -> Self {
        Self {
            search,
            passed: None,
            failed: None,
            refined: 0,
        }
    }

    /// The next rate to offer, or `None` when the search is done.
    pub fn next(&self) -> Option<f64> {
        let s = &self.search;
        match (self.passed, self.failed) {
            (None, None) => Some(s.start_per_s),
            (Some(p), None) if p >= s.max_per_s => None,
            (Some(p), None) => Some((p * s.factor).min(s.max_per_s)),
            // The first rate failed: ramp down to find any rate that passes.
            (None, Some(f)) if f / s.factor >= s.min_per_s => Some(round_rate(f / s.factor)),
            (None, Some(_)) => None,
            (Some(p), Some(f)) => {
                // Stop at the refinement budget, or when the bracket is finer than 2%:
                // the noise between two runs at one rate is larger than that.
                if self.refined >= s.refinements || f / p < 1.02 {
                    None
                } else {
                    Some(round_rate((p * f).sqrt()))
                }
            }
        }
    }

    /// Records the verdict of a step at `rate`.
    pub fn record(&mut self, rate: f64, passed: bool) {
        if self.passed.is_some() && self.failed.is_some() {
            self.refined += 1;
        }
        if passed {
            self.passed = Some(self.passed.map_or(rate, |p| p.max(rate)));
        } else {
            self.failed = Some(self.failed.map_or(rate, |f| f.min(rate)));
        }
    }

    /// The capacity found so far and how it is bounded (`complete`: the search ran out).
    pub fn result(&self, complete: bool) -> (f64, Bound, Option<f64>) {
        let bound = match (self.passed, self.failed, complete) {
            (_, _, false) => Bound::Incomplete,
            (None, _, true) => Bound::BelowLowest,
            (Some(_), None, true) => Bound::AtLeastMax,
            (Some(_), Some(_), true) => Bound::Found,
        };
        (self.passed.unwrap_or(0.0), bound, self.failed)
    }
}

/// Rates are kept to three significant digits, so folder names and tables stay short.
fn round_rate(r: f64) -> f64 {
    if r <= 0.0 {
        return r;
    }
    let decimals = (2 - r.log10().floor() as i32).max(0) as usize;
    let mag = 10f64.powi(r.log10().floor() as i32 - 2);
    // Through text, so 29.7 stays 29.7 and not 29.700000000000003.
    format!("{:.*}", decimals, (r / mag).round() * mag)
        .parse()
        .unwrap_or(r)
}

/// The workload of one step: the given one at `rate` for the step's duration, with stock that
/// no step can sell out (a sold-out answer is fast and would flatter the latency).
///
/// A slow rate runs longer (up to twice the step) so its percentile rests on
/// `search.min_arrivals` arrivals: the p99 of 25 arrivals would be their maximum.
pub fn step_workload(base: &Workload, rate: f64, search: &Search) -> Workload {
    let mut w = base.clone();
    let secs = (search.min_arrivals as f64 / rate).clamp(search.step_s, 2.0 * search.step_s);
    w.load.mode = LoadMode::Open;
    w.load.rate = rate;
    w.load.duration = std::time::Duration::from_secs_f64(secs);
    w.load.max_attempts = None;
    let arrivals = (rate * secs * 1.2).ceil() as u64 + 100;
    w.inventory.stock = w.inventory.stock.max(arrivals);
    w
}

/// One step: a run of `id` at `rate` on the sweep's servers, into `<out>/<dir>`.
fn step_options(opts: &SweepOptions, id: &str, rate: f64, dir: &str, ep: &Path) -> RunOptions {
    RunOptions {
        strategy: id.to_string(),
        workload: step_workload(&opts.workload, rate, &opts.search),
        chaos: None,
        workers: 0,
        worker_link: crate::clients::WorkerLink::Pipe,
        private_network: false,
        workload_file: opts.workload_file.clone(),
        out: opts.out.join(dir),
        base_port: None,
        endpoints: Some(ep.to_path_buf()),
        provision: opts.provision,
        target: None,
        history: false,
        progress: false,
    }
}

/// Every check a step makes, for every strategy, before any server starts.
pub fn check(opts: &SweepOptions) -> Result<(), RunError> {
    if opts.workload.servers.redis_appendfsync != RedisAppendfsync::Off {
        return Err(RunError::Options(
            "servers.redis_appendfsync with sweep: the sweep starts one set of servers for every \
             strategy and does not configure Redis persistence yet; drop the key"
                .into(),
        ));
    }
    let ep = opts.out.join("endpoints.json");
    for id in &opts.strategies {
        let rate = opts.search.start_per_s;
        step_options(opts, id, rate, id, &ep).plan()?;
    }
    Ok(())
}

/// Runs the sweep; returns it (also written to `<out>/sweep.json`).
pub async fn sweep(
    opts: &SweepOptions,
    cancel: &CancellationToken,
    log: &mut dyn Write,
) -> Result<Sweep, RunError> {
    let began = Instant::now();
    let out = &opts.out;
    std::fs::create_dir_all(out).map_err(super::write_err(out))?;
    let mut needs = Needs::NONE;
    for id in &opts.strategies {
        needs = needs.union(strategy::find(id)?.needs);
    }
    // One set of servers for every step of every strategy: the same machines, warmed once.
    let (endpoints, cluster) = match &opts.endpoints {
        Some(path) => (path.clone(), None),
        None => {
            let mut c = ClusterOptions::new(out.join("logs"));
            c.base_port = opts.base_port;
            c.provisioner = opts.provision;
            let cluster = tokio::select! {
                c = OwnedCluster::start(needs, &c) => c?,
                _ = cancel.cancelled() => return Err(RunError::Interrupted),
            };
            let path = out.join("endpoints.json");
            cluster.write_endpoints(&path)?;
            (path, Some(cluster))
        }
    };
    let servers = EndpointsFile::read(&endpoints)?.endpoints;
    let mut sweep = Sweep {
        schema: SWEEP_SCHEMA.to_string(),
        lockbench_version: env!("CARGO_PKG_VERSION").to_string(),
        started_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        slo: opts.slo,
        search: opts.search,
        workload_file: opts.workload_file.clone(),
        entries: Vec::new(),
        elapsed_s: 0.0,
    };
    for id in &opts.strategies {
        if cancel.is_cancelled() {
            break;
        }
        let entry = sweep_one(opts, id, &endpoints, &servers, cancel, log).await;
        sweep.entries.push(entry);
        sweep.elapsed_s = began.elapsed().as_secs_f64();
        sweep.write(out).map_err(super::write_err(out))?;
    }
    if let Some(c) = cluster {
        c.stop();
        let _ = std::fs::remove_file(&endpoints);
    }
    Ok(sweep)
}

/// A short run before a strategy's first step, not judged: freshly started servers (and a
/// strategy's first tables, scripts, sessions) are slower for a moment than they stay, and the
/// first step must not read that as the strategy's capacity (two of three sweeps saw the very
/// first step of `none` miss at 25/s on a new MariaDB, then pass every rate to 2690/s).
async fn warm_up(
    opts: &SweepOptions,
    id: &str,
    endpoints: &Path,
    servers: &Endpoints,
    cancel: &CancellationToken,
    log: &mut dyn Write,
) -> Option<String> {
    if let Some(mysql) = &servers.mysql {
        let _ = strategy::mysql::settle(mysql, SETTLE_BOUND).await;
    }
    let mut o = step_options(
        opts,
        id,
        opts.search.start_per_s,
        &format!("{id}/warm-up"),
        endpoints,
    );
    // A closed loop, so each strategy warms its servers with as many calls as it can serve:
    // a JVM (ZooKeeper) compiles its hot paths after thousands of calls, and 25 arrivals at
    // the start rate left the first strategy on a cold ensemble paying for the JIT (measured:
    // zookeeper-rwlock read 21/s swept first and 400/s swept after zookeeper).
    let load = &mut o.workload.load;
    load.mode = LoadMode::Closed;
    load.clients = load.clients.min(WARM_UP_BUYERS);
    load.duration = WARM_UP;
    load.max_attempts = None;
    match run(&o, cancel).await {
        Ok(s) => {
            let _ = writeln!(
                log,
                "{id:<24} warm-up, {} buyers in a closed loop for {} s (not judged): {} attempts, \
                 p99 {:.2} ms",
                o.workload.load.clients,
                WARM_UP.as_secs(),
                s.attempts,
                s.latency_us.p99 as f64 / 1000.0
            );
            None
        }
        Err(RunError::Interrupted) => Some("interrupted".to_string()),
        Err(e) => {
            let _ = writeln!(log, "{id:<24} warm-up error: {e}");
            Some(format!("warm-up: {e}"))
        }
    }
}

/// Load duration of the warm-up.
const WARM_UP: std::time::Duration = std::time::Duration::from_secs(2);
/// Buyers of the warm-up's closed loop (at most the workload's).
const WARM_UP_BUYERS: u32 = 16;

/// How long a step waits for MariaDB to end the connections of earlier steps.
const SETTLE_BOUND: std::time::Duration = std::time::Duration::from_secs(10);

/// The steps of one strategy.
async fn sweep_one(
    opts: &SweepOptions,
    id: &str,
    endpoints: &Path,
    servers: &Endpoints,
    cancel: &CancellationToken,
    log: &mut dyn Write,
) -> Entry {
    let info = strategy::find(id).expect("checked before the sweep");
    let mut searcher = Searcher::new(opts.search);
    let mut steps = Vec::new();
    let mut error = warm_up(opts, id, endpoints, servers, cancel, log).await;
    while let Some(rate) = searcher.next().filter(|_| error.is_none()) {
        if cancel.is_cancelled() {
            error = Some("interrupted".to_string());
            break;
        }
        let dir = format!("{id}/{}", rate_text(rate));
        if let Some(mysql) = &servers.mysql {
            // What an overloaded step left running must not slow the next one.
            if let Err(e) = strategy::mysql::settle(mysql, SETTLE_BOUND).await {
                let _ = writeln!(log, "{id:<24} warning: MariaDB not settled: {e}");
            }
        }
        let run_opts = step_options(opts, id, rate, &dir, endpoints);
        match run(&run_opts, cancel).await {
            Ok(summary) => {
                let step = Step::judge(summary, rate, &opts.slo, dir);
                let _ = writeln!(log, "{}", step_line(id, &step));
                searcher.record(rate, step.passed);
                let interrupted = step.summary.interrupted;
                steps.push(step);
                if interrupted {
                    error = Some("interrupted".to_string());
                    break;
                }
            }
            Err(e) => {
                let _ = writeln!(log, "{id:<24} {:>7}/s  error: {e}", rate_text(rate));
                error = Some(format!("step at {}/s: {e}", rate_text(rate)));
                break;
            }
        }
    }
    let (capacity_per_s, bound, first_failing_per_s) = searcher.result(error.is_none());
    let unsafe_steps: Vec<f64> = steps
        .iter()
        .filter(|s| !s.summary.safe)
        .map(|s| s.rate_per_s)
        .collect();
    let entry = Entry {
        strategy: id.to_string(),
        family: info.family(),
        kind: info.kind,
        capacity_per_s,
        bound,
        first_failing_per_s,
        safe: !steps.is_empty() && unsafe_steps.is_empty() && info.kind != strategy::Kind::Control,
        unsafe_steps,
        error,
        steps,
    };
    let _ = writeln!(log, "{id:<24} capacity {}", entry.capacity_text());
    entry
}

/// One line per step on stderr: the rate, what was measured, and the verdict.
fn step_line(id: &str, s: &Step) -> String {
    let plus = if s.latency_censored { "+" } else { " " };
    let verdict = if s.passed {
        "meets the SLO".to_string()
    } else {
        format!("misses: {}", s.why)
    };
    let safety = if s.summary.safe || !s.summary.claims_safety {
        ""
    } else {
        "  UNSAFE"
    };
    format!(
        "{id:<24} {:>7}/s  p99 {:>9.2}{plus}ms  served {:>6.2}%  {verdict}{safety}",
        rate_text(s.rate_per_s),
        s.latency_ms,
        s.served_fraction * 100.0
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEARCH: Search = Search {
        start_per_s: 25.0,
        min_per_s: 1.0,
        max_per_s: 6400.0,
        factor: 4.0,
        refinements: 3,
        step_s: 2.0,
        min_arrivals: 100,
    };

    /// Runs the search against a strategy that sustains exactly `capacity`.
    fn search(capacity: f64) -> (Vec<f64>, (f64, Bound, Option<f64>)) {
        let mut s = Searcher::new(SEARCH);
        let mut offered = Vec::new();
        while let Some(r) = s.next() {
            assert!(offered.len() < 20, "the search must end: {offered:?}");
            offered.push(r);
            s.record(r, r <= capacity);
        }
        (offered, s.result(true))
    }

    #[test]
    fn the_ramp_brackets_and_bisection_refines_to_within_a_fifth() {
        let (offered, (cap, bound, fail)) = search(300.0);
        assert_eq!(&offered[..3], &[25.0, 100.0, 400.0]);
        assert_eq!(
            offered.len(),
            6,
            "3 ramp steps + 3 refinements: {offered:?}"
        );
        assert_eq!(bound, Bound::Found);
        let fail = fail.unwrap();
        assert!(cap <= 300.0 && fail > 300.0, "{cap} .. {fail}");
        assert!(fail / cap < 1.2, "resolution: {cap} .. {fail}");
    }

    #[test]
    fn a_strategy_faster_than_the_cap_reads_at_least_the_cap() {
        let (offered, (cap, bound, fail)) = search(1e9);
        assert_eq!(offered, vec![25.0, 100.0, 400.0, 1600.0, 6400.0]);
        assert_eq!((cap, bound, fail), (6400.0, Bound::AtLeastMax, None));
    }

    #[test]
    fn a_strategy_slower_than_the_lowest_rate_reads_below_it() {
        let (offered, (cap, bound, fail)) = search(1.0);
        assert_eq!(offered, vec![25.0, 6.25, 1.56]);
        assert_eq!((cap, bound, fail), (0.0, Bound::BelowLowest, Some(1.56)));
        // A slow strategy is still bracketed: down the ramp, then refined.
        let (offered, (cap, bound, fail)) = search(10.0);
        assert_eq!(&offered[..2], &[25.0, 6.25]);
        assert_eq!(bound, Bound::Found);
        assert!(cap <= 10.0 && fail.unwrap() > 10.0 && fail.unwrap() / cap < 1.2);
    }

    #[test]
    fn a_search_cut_short_is_incomplete_never_found() {
        let mut s = Searcher::new(SEARCH);
        s.record(25.0, true);
        assert_eq!(s.result(false).1, Bound::Incomplete);
    }

    #[test]
    fn rates_keep_three_significant_digits() {
        assert_eq!(round_rate(282.842), 283.0);
        assert_eq!(round_rate(12.3456), 12.3);
        assert_eq!(round_rate(29.7000001), 29.7);
        assert_eq!(round_rate(1.5625), 1.56);
        assert_eq!(round_rate(3363.6), 3360.0);
        assert_eq!(rate_text(283.0), "283");
        assert_eq!(rate_text(12.3), "12.3");
    }

    #[test]
    fn no_step_can_sell_out() {
        let w = Workload::parse("t.toml", "[inventory]\nskus = 4\nstock = 10\n", &[]).unwrap();
        let s = step_workload(&w, 1000.0, &SEARCH);
        assert!(s.inventory.stock >= 2000, "one SKU may get every arrival");
        assert_eq!(s.load.rate, 1000.0);
        assert_eq!(s.load.duration, std::time::Duration::from_secs(2));
        // A slow rate runs longer, for enough arrivals, but never past twice the step.
        let slow = step_workload(&w, 40.0, &SEARCH);
        assert_eq!(slow.load.duration, std::time::Duration::from_millis(2500));
        assert!(slow.inventory.stock >= 100);
        let slowest = step_workload(&w, 5.0, &SEARCH);
        assert_eq!(slowest.load.duration, std::time::Duration::from_secs(4));
    }
}
