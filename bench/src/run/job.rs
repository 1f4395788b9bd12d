//! The main job (`lockbench job`, docs/main-job.md): for every strategy, how much load it
//! sustains within the SLO and what a failure costs it, in three parts on one workload, then
//! one report, all in one folder laid out by [`JobLayout`]:
//! 1. capacity: a sweep, in `sweep/`;
//! 2. calm: every strategy at one common rate, the lowest capacity among those seen safe
//!    (every safe strategy is inside its SLO there), in `calm/`;
//! 3. chaos: each scenario with every strategy it applies to, each at a share of its own
//!    capacity, so a fault is measured, not a backlog it had no room to drain, in
//!    `chaos/<scenario>/`.
//!
//! A part that fails does not stop the later ones; the job reports the last failure.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::compare::{self, CompareOptions, RateFrom};
use super::sweep::{self as sweeping, SweepOptions, WARM_UP_ROUND};
use super::{RunError, RunOptions, ServerOptions, Source};
use crate::chaos::ChaosPlan;
use crate::report::format::decimals;
use crate::report::layout::{JobLayout, SALE_CALM};
use crate::report::sweep::{Search, Slo};
use crate::report::{self, Needs, Printed};
use crate::strategy::{self, Kind};
use crate::workload::Workload;

/// The job's knobs (`lockbench job --help`).
#[derive(Debug, Clone)]
pub struct JobOptions {
    /// The job folder.
    pub out: PathBuf,
    /// The strategies; `None`: every strategy (and every lock under `pause-holder`).
    pub strategies: Option<Vec<String>>,
    /// The workload every part starts from.
    pub workload_file: PathBuf,
    /// The sale part's workload (`workloads/sale.toml`); `None`: no sale part. The steady
    /// parts' `--set`s do not apply to it: it keeps its own shape, seed and stock.
    pub sale_workload: Option<PathBuf>,
    /// The sale part's scenarios after the sale without a fault: files of `scenario_dir`.
    pub sale_scenarios: Vec<String>,
    /// `--set`s given, applied after the job's own (so they win).
    pub sets: Vec<String>,
    /// The capacity part's latency target.
    pub slo: Slo,
    /// The capacity part's search.
    pub search: Search,
    /// The share of its own capacity each strategy is offered under a fault.
    pub chaos_share: f64,
    /// Chaos scenarios: file names of `scenario_dir`, without `.toml`.
    pub scenarios: Vec<String>,
    /// Where the scenario files are (`chaos/`).
    pub scenario_dir: PathBuf,
    /// The calm part's load, as `load.duration` reads it (`5s`).
    pub calm_duration: String,
    /// Each chaos part's load (`8s`).
    pub chaos_duration: String,
    /// The report's `--needs`.
    pub needs: Option<Needs>,
    /// Where the servers come from.
    pub servers: ServerOptions,
}

/// How a part (or the job) ended, worst last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// Every strategy ran.
    Done,
    /// Some strategy failed; the others ran.
    Partial,
    /// The part could not run (or the report could not be written).
    Failed,
    /// Ctrl-C.
    Interrupted,
}

/// The four parts, every one checked before the first server starts.
struct Parts {
    /// The sale without a fault, then under each sale scenario: every strategy on one seed.
    sale: Vec<(String, CompareOptions)>,
    sweep: SweepOptions,
    calm: CompareOptions,
    chaos: Vec<(String, CompareOptions)>,
}

/// The job folder's default name: `results/runs/<UTC time>-compare` (20261128T014946Z).
pub fn default_out(now: std::time::SystemTime) -> PathBuf {
    let time = humantime::format_rfc3339_seconds(now)
        .to_string()
        .replace(['-', ':'], "");
    PathBuf::from("results/runs").join(format!("{time}-compare"))
}

/// The strategies a scenario runs: those given, else every strategy but the sale's controls —
/// and of those only the locks when the plan only pauses lock holders (a lock-free strategy
/// has no holder to pause; its run would say no fault took effect, not whether it is safe).
/// Ids that are not built-in strategies (library adapters) are locks.
pub fn scenario_strategies(holders_only: bool, given: Option<&[String]>) -> Vec<String> {
    let is_lock = |id: &str| !matches!(strategy::find(id), Ok(s) if s.kind != Kind::Lock);
    match given {
        Some(ids) => ids
            .iter()
            .filter(|id| !holders_only || is_lock(id))
            .cloned()
            .collect(),
        None => strategy::ALL
            .iter()
            .filter(|s| !holders_only || s.kind == Kind::Lock)
            .filter(|s| !s.sale_control())
            .map(|s| s.id.to_string())
            .collect(),
    }
}

/// A chaos part's heading, with the strategies given that it does not run.
fn chaos_heading(scenario: &str, opts: &JobOptions, runs: &[RunOptions]) -> String {
    let share = decimals(opts.chaos_share * 100.0, 3);
    let left: Vec<&str> = (opts.strategies.as_deref())
        .unwrap_or_default()
        .iter()
        .filter(|id| !runs.iter().any(|r| &r.strategy == *id))
        .map(String::as_str)
        .collect();
    let left = match left.is_empty() {
        true => String::new(),
        false => format!("; left out, no lock holder to pause: {}", left.join(", ")),
    };
    format!("chaos/{scenario}.toml, each strategy at {share}% of its capacity{left}")
}

/// The calm part's `--set`s: its duration, then the ones given.
pub fn calm_sets(duration: &str, given: &[String]) -> Vec<String> {
    let mut sets = vec![format!("load.duration=\"{duration}\"")];
    sets.extend_from_slice(given);
    sets
}

/// A chaos part's `--set`s, then the ones given. The chaos runs keep the sweep's workload (its
/// capacity must apply) but never sell out, and hold 2 s leases: a pause of "2x ttl" then
/// outlives every kind of lease (etcd grants no less).
pub fn chaos_sets(duration: &str, given: &[String]) -> Vec<String> {
    let mut sets = vec![
        "inventory.stock=1000000".to_string(),
        "lock.ttl=\"2s\"".to_string(),
        format!("load.duration=\"{duration}\""),
    ];
    sets.extend_from_slice(given);
    sets
}

/// The calm rate: one rate for all, the lowest capacity among the strategies seen safe.
pub fn calm_rate(sweep: &Path) -> RateFrom {
    RateFrom {
        sweep: sweep.to_path_buf(),
        share: 1.0,
        common: true,
    }
}

/// A chaos part's rates: `share` of each strategy's own capacity.
pub fn chaos_rate(sweep: &Path, share: f64) -> RateFrom {
    RateFrom {
        sweep: sweep.to_path_buf(),
        share,
        common: false,
    }
}

impl JobOptions {
    /// `p99=100ms`, as the knob is written.
    fn slo_knob(&self) -> String {
        let ms = decimals(self.slo.latency_ms, 3);
        format!("{}={ms}ms", self.slo.percentile_name())
    }

    /// Where the knobs say the servers come from: a `serve`'s, or started per part (the sweep's
    /// once for every strategy, each run's for it alone).
    pub fn source(&self) -> Source {
        Source::of(&self.servers)
    }

    fn workload(&self, sets: &[String]) -> Result<Workload, RunError> {
        Workload::load(&self.workload_file, sets).map_err(|e| RunError::Options(e.to_string()))
    }

    /// One run of each strategy in `ids` on `workload`, in `<out>/<strategy>`.
    fn runs(
        &self,
        ids: &[String],
        workload: &Workload,
        chaos: Option<&ChaosPlan>,
        out: &Path,
    ) -> Vec<RunOptions> {
        ids.iter()
            .map(|id| RunOptions {
                servers: self.servers.clone(),
                progress: true,
                ..RunOptions::new(
                    id,
                    workload.clone(),
                    chaos.cloned(),
                    &self.workload_file.display().to_string(),
                    out.join(id),
                )
            })
            .collect()
    }

    /// Every knob, before anything runs: the parts' options on the servers the knobs name and
    /// the sweep's (its search, its trials planned on the registry), so a typo fails now, not
    /// after the sweep.
    pub fn check(&self) -> Result<(), RunError> {
        sweeping::check(&self.parts(&self.source())?.sweep)
    }

    /// Every part's options from the knobs: workloads, chaos files and strategies (those
    /// `source` knows) checked here.
    fn parts(&self, source: &Source) -> Result<Parts, RunError> {
        let layout = JobLayout::new(&self.out);
        let ids = self
            .strategies
            .clone()
            .unwrap_or_else(|| scenario_strategies(false, None));
        for id in &ids {
            source.info(id)?;
        }
        let sweep = SweepOptions {
            strategies: ids.clone(),
            workload: self.workload(&self.sets)?,
            workload_file: self.workload_file.display().to_string(),
            slo: self.slo,
            search: self.search,
            out: layout.sweep(),
            servers: self.servers.clone(),
            probe: Default::default(),
        };
        let calm_load = self.workload(&calm_sets(&self.calm_duration, &self.sets))?;
        let calm = CompareOptions {
            runs: self.runs(&ids, &calm_load, None, &layout.calm()),
            out: layout.calm(),
            rate_from: Some(calm_rate(&layout.sweep())),
        };
        let chaos_load = self.workload(&chaos_sets(&self.chaos_duration, &self.sets))?;
        let mut chaos = Vec::new();
        for sc in &self.scenarios {
            let file = self.scenario_dir.join(format!("{sc}.toml"));
            let plan = ChaosPlan::load(&file, &chaos_load)?;
            let these = scenario_strategies(plan.pauses_only_holders(), self.strategies.as_deref());
            let out = layout.chaos(sc);
            chaos.push((
                sc.clone(),
                CompareOptions {
                    runs: self.runs(&these, &chaos_load, Some(&plan), &out),
                    out,
                    rate_from: Some(chaos_rate(&layout.sweep(), self.chaos_share)),
                },
            ));
        }
        let sale = self.sale_parts(&ids, &layout)?;
        Ok(Parts {
            sale,
            sweep,
            calm,
            chaos,
        })
    }

    /// The sale part's comparisons: the sale as it comes (`calm`), then under each of
    /// `sale_scenarios`; every strategy on the same workload and seed, at the rates its shape
    /// says (no sweep rate).
    fn sale_parts(
        &self,
        ids: &[String],
        layout: &JobLayout,
    ) -> Result<Vec<(String, CompareOptions)>, RunError> {
        let Some(file) = &self.sale_workload else {
            return Ok(Vec::new());
        };
        let w = Workload::load(file, &[]).map_err(|e| RunError::Options(e.to_string()))?;
        // Without --strategies: every one that runs a sale, its controls too.
        let all: Vec<String>;
        let ids = match &self.strategies {
            Some(_) => ids,
            None => {
                all = strategy::ALL
                    .iter()
                    .filter(|s| s.supports(&w).is_ok())
                    .map(|s| s.id.to_string())
                    .collect();
                &all
            }
        };
        let mut parts = vec![(SALE_CALM.to_string(), None)];
        for sc in &self.sale_scenarios {
            let plan = ChaosPlan::load(&self.scenario_dir.join(format!("{sc}.toml")), &w)?;
            parts.push((sc.clone(), Some(plan)));
        }
        Ok(parts
            .into_iter()
            .map(|(name, plan)| {
                let out = layout.sale(&name);
                let mut runs = self.runs(ids, &w, plan.as_ref(), &out);
                for r in &mut runs {
                    r.workload_file = file.display().to_string();
                }
                let opts = CompareOptions {
                    runs,
                    out,
                    rate_from: None,
                };
                (name, opts)
            })
            .collect())
    }
}

/// Runs the job: `out` takes what the parts print on stdout, `log` what they say on stderr.
/// An error is returned only before anything ran (a knob that does not hold).
pub async fn job(
    opts: &JobOptions,
    cancel: &CancellationToken,
    out: &mut dyn Write,
    log: &mut dyn Write,
) -> Result<Ended, RunError> {
    opts.check()?;
    job_on(opts, &opts.source(), WARM_UP_ROUND, cancel, out, log).await
}

/// [`job`] with every part's servers from `source` (the sim's tests: none) and the sweep's
/// warm-up rounds `warm_up_round` long (zero: none): one session for the sweep, one per run of
/// the calm and chaos parts. The sweep's knobs are not held to the command's floors (the sim
/// takes trials far shorter than 500 ms): [`JobOptions::check`] is [`job`]'s.
pub async fn job_on(
    opts: &JobOptions,
    source: &Source,
    warm_up_round: Duration,
    cancel: &CancellationToken,
    out: &mut dyn Write,
    log: &mut dyn Write,
) -> Result<Ended, RunError> {
    let parts = opts.parts(source)?;
    let began = Instant::now();
    let layout = JobLayout::new(&opts.out);
    let mut status = Ended::Done;
    let mut note = |e: Ended| {
        if e != Ended::Done {
            status = e;
        }
    };
    let total = parts.sale.len() + 2 + parts.chaos.len(); // sales, sweep, calm, chaos
    let mut part = 0;
    let mut heading = |out: &mut dyn Write, what: String| {
        part += 1;
        let _ = writeln!(out, "== {part}/{total} {what}");
        super::progress::job_part(Some(format!("job {part}/{total}")));
    };
    for (name, sale) in parts.sale {
        let what = match name.as_str() {
            SALE_CALM => "the sale: every strategy on one seed, as the surge comes".to_string(),
            sc => format!("the sale under chaos/{sc}.toml"),
        };
        heading(out, what);
        note(compare_part_or_say(sale, source, cancel, out, log).await);
        let _ = writeln!(out);
    }
    heading(out, format!("capacity at {}", opts.slo_knob()));
    let swept = sweep_part_on(&parts.sweep, source, warm_up_round, false, cancel, out, log);
    note(swept.await.unwrap_or_else(|e| {
        let _ = writeln!(log, "lockbench: error: sweep failed: {e}");
        Ended::Failed
    }));
    if !layout.sweep_json().is_file() {
        // Nothing later has a rate to run at; the report still shows the sale.
        if !cancel.is_cancelled() {
            let _ = writeln!(log, "lockbench: job: the sweep wrote no sweep.json");
            note(Ended::Failed);
        }
    } else {
        let _ = writeln!(out);
        heading(
            out,
            "calm, every strategy at one rate that every strategy seen safe sustains".into(),
        );
        note(compare_part_or_say(parts.calm, source, cancel, out, log).await);
        for (sc, part) in parts.chaos {
            let _ = writeln!(out);
            heading(out, chaos_heading(&sc, opts, &part.runs));
            note(compare_part_or_say(part, source, cancel, out, log).await);
        }
    }
    let _ = writeln!(out);
    if !write_job_report(opts, &layout, cancel, out, log) {
        note(Ended::Failed);
    }
    super::progress::job_part(None);
    let _ = writeln!(out, "took {} s", began.elapsed().as_secs());
    Ok(if cancel.is_cancelled() {
        Ended::Interrupted
    } else {
        status
    })
}

/// The one report of every part (the parts write none of their own: each would render the
/// same charts again), said on `log`; after Ctrl-C it shows what was measured, if anything
/// was. Its path goes to `out`, an error to `log`. False: it could not be written.
fn write_job_report(
    opts: &JobOptions,
    layout: &JobLayout,
    cancel: &CancellationToken,
    out: &mut dyn Write,
    log: &mut dyn Write,
) -> bool {
    match report::write_report_with(layout.root(), opts.needs.as_ref()) {
        Err(_) if cancel.is_cancelled() => true,
        Err(e) => {
            let _ = writeln!(log, "lockbench: error: {e}");
            false
        }
        Ok(_) => {
            let _ = writeln!(
                out,
                "report: {} — the sale (sale/<calm|scenario>/compare.json), capacity \
                 (sweep/sweep.json), calm (calm/compare.json), chaos \
                 (chaos/<scenario>/compare.json); one folder per run with summary.json, \
                 timeline.csv, latency.hlog, logs/",
                layout.report().display()
            );
            true
        }
    }
}

/// A comparison part, an error said as the command would.
async fn compare_part_or_say(
    opts: CompareOptions,
    source: &Source,
    cancel: &CancellationToken,
    out: &mut dyn Write,
    log: &mut dyn Write,
) -> Ended {
    if cancel.is_cancelled() {
        return Ended::Interrupted;
    }
    if opts.runs.is_empty() {
        // A chaos part that left every strategy given out (its heading says why).
        return Ended::Done;
    }
    let table = Printed::Table(crate::report::Width::Compact);
    compare_part_with(opts, Some(source), table, false, cancel, out, log)
        .await
        .map(|(ended, _)| ended)
        .unwrap_or_else(|e| {
            let _ = writeln!(log, "lockbench: error: {e}");
            Ended::Failed
        })
}

/// `lockbench sweep` once its options hold: the sweep, its capacity table, its report.
pub async fn sweep_part(
    opts: &SweepOptions,
    cancel: &CancellationToken,
    out: &mut dyn Write,
    log: &mut dyn Write,
) -> Result<Ended, RunError> {
    let source = Source::of(&opts.servers);
    sweep_part_on(opts, &source, WARM_UP_ROUND, true, cancel, out, log).await
}

/// [`sweep_part`] on servers from `source`, warm-up rounds `warm_up_round` long; its own
/// report.html only if `own_report` (a job writes one for every part).
async fn sweep_part_on(
    opts: &SweepOptions,
    source: &Source,
    warm_up_round: Duration,
    own_report: bool,
    cancel: &CancellationToken,
    out: &mut dyn Write,
    log: &mut dyn Write,
) -> Result<Ended, RunError> {
    let q = &opts.search;
    let _ = writeln!(
        log,
        "sweep: {} strategies, SLO {}, each step decided at {}% confidence; trials of {}..{} s, \
         {} s a step, {} s a strategy, until the interval is within {}x ({}..{}/s)",
        opts.strategies.len(),
        opts.slo.label(),
        q.confidence * 100.0,
        q.trial_s,
        q.max_trial_s,
        q.step_budget_s,
        q.budget_s,
        q.goal_width,
        q.min_per_s,
        q.max_per_s
    );
    let sweep = match sweeping::sweep_on(opts, source, warm_up_round, cancel, log).await {
        Ok(s) => s,
        Err(RunError::Interrupted) => return Ok(Ended::Interrupted),
        Err(e) => return Err(e),
    };
    let _ = report::sweep::print_capacity(&mut &mut *out, &sweep);
    let _ = writeln!(log, "results: {}", opts.out.display());
    if own_report {
        compare::write_report(&opts.out, log);
    }
    let failed: Vec<&str> = sweep
        .entries
        .iter()
        .filter(|e| e.error.is_some())
        .map(|e| e.strategy.as_str())
        .collect();
    Ok(ended(cancel, &failed, "sweep incomplete for", log))
}

/// How a command that measured several strategies ended: interrupted, or with the strategies
/// in `failed` incomplete (said on `log` after `what`), or done.
pub fn ended(
    cancel: &CancellationToken,
    failed: &[&str],
    what: &str,
    log: &mut dyn Write,
) -> Ended {
    if cancel.is_cancelled() {
        return Ended::Interrupted;
    }
    if failed.is_empty() {
        return Ended::Done;
    }
    let _ = writeln!(log, "lockbench: {what}: {}", failed.join(", "));
    Ended::Partial
}

/// `lockbench compare` once its options hold: the runs, their table (or JSON), the report.
pub async fn compare_part(
    opts: CompareOptions,
    printed: Printed,
    ci: &crate::report::ci::CiOutputs,
    cancel: &CancellationToken,
    out: &mut dyn Write,
    log: &mut dyn Write,
) -> Result<Ended, RunError> {
    let dir = opts.out.clone();
    let (ended, summaries) = compare_part_with(opts, None, printed, true, cancel, out, log).await?;
    let name = format!("lockbench compare {}", dir.display());
    if let Err(e) = ci.write(&name, &summaries) {
        let _ = writeln!(log, "lockbench: error: writing the CI files: {e}");
        return Ok(Ended::Failed);
    }
    Ok(ended)
}

/// [`compare_part`] on servers from `source`, or those each run's options name, with its own
/// report.html if `own_report`; returns how it ended and the summaries of the strategies that
/// finished.
async fn compare_part_with(
    opts: CompareOptions,
    source: Option<&Source>,
    printed: Printed,
    own_report: bool,
    cancel: &CancellationToken,
    out: &mut dyn Write,
    log: &mut dyn Write,
) -> Result<(Ended, Vec<crate::report::Summary>), RunError> {
    let dir = opts.out.clone();
    let done = match source {
        Some(s) => compare::compare_on(opts, s, cancel, log).await?,
        None => compare::compare(opts, cancel, log).await?,
    };
    compare::print_summaries(out, &done.summaries, printed).map_err(|source| RunError::Write {
        path: PathBuf::from("<stdout>"),
        source,
    })?;
    let _ = writeln!(log, "results: {}", dir.display());
    if own_report && !done.summaries.is_empty() {
        compare::write_report(&dir, log);
    }
    let failed: Vec<&str> = done.failed.iter().map(String::as_str).collect();
    Ok((
        ended(cancel, &failed, "failed strategies", log),
        done.summaries,
    ))
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::*;

    const PAUSE_HOLDER: &str = "pause-holder";
    use crate::report::sweep::DEFAULTS;

    /// The knobs' defaults (`lockbench job` with no flags), on the repository's files.
    fn defaults(out: &Path) -> JobOptions {
        JobOptions {
            out: out.to_path_buf(),
            strategies: None,
            workload_file: PathBuf::from("../workloads/flash-sale.toml"),
            sale_workload: None,
            sale_scenarios: Vec::new(),
            sets: Vec::new(),
            slo: Slo::parse("p99=100ms")
                .map(|(quantile, latency_ms)| Slo {
                    quantile,
                    latency_ms,
                    min_served: 0.99,
                })
                .unwrap(),
            search: DEFAULTS,
            chaos_share: 0.7,
            scenarios: vec!["kill-master".into(), PAUSE_HOLDER.into()],
            scenario_dir: PathBuf::from("../chaos"),
            calm_duration: "5s".into(),
            chaos_duration: "8s".into(),
            needs: None,
            servers: ServerOptions::default(),
        }
    }

    fn ids(runs: &[RunOptions]) -> Vec<&str> {
        runs.iter().map(|r| r.strategy.as_str()).collect()
    }

    #[test]
    fn the_default_folder_is_named_by_its_utc_time() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_830_586);
        assert_eq!(
            default_out(t),
            Path::new("results/runs/20261128T014946Z-compare")
        );
    }

    #[test]
    fn pause_holder_runs_only_the_locks_given_or_not() {
        let locks = scenario_strategies(true, None);
        let all = scenario_strategies(false, None);
        // Every strategy but the controls of a sale's rules, which only a sale can catch.
        let steady = strategy::ALL.iter().filter(|s| !s.sale_control()).count();
        assert_eq!(all.len(), steady);
        assert!(steady < strategy::ALL.len());
        assert!(!all.contains(&"mysql-atomic-no-limit".to_string()));
        assert!(!locks.is_empty() && locks.len() < all.len());
        for id in &locks {
            assert_eq!(strategy::find(id).unwrap().kind, Kind::Lock, "{id}");
        }
        assert!(locks.contains(&"redis-setnx".to_string()));
        assert!(!locks.contains(&"mysql-atomic".to_string()));
        assert!(!locks.contains(&"none".to_string()));
        // Given ones too: a lock-free strategy under a holder pause would only say that no
        // fault took effect (and `advise --needs safe` could not call it safe).
        let given: Vec<String> = ["mysql-atomic", "redis-setnx", "lib:example"]
            .map(String::from)
            .to_vec();
        assert_eq!(scenario_strategies(true, Some(&given)), given[1..]);
        assert_eq!(scenario_strategies(false, Some(&given)), given);
        let mut opts = defaults(Path::new("job"));
        opts.strategies = Some(given);
        let heading = chaos_heading(PAUSE_HOLDER, &opts, &[]);
        assert!(
            heading.ends_with("at 70% of its capacity; left out, no lock holder to pause: mysql-atomic, redis-setnx, lib:example"),
            "{heading}"
        );
    }

    #[test]
    fn the_sets_given_come_after_the_jobs_own_and_win() {
        let given = vec!["load.duration=\"3s\"".to_string()];
        assert_eq!(calm_sets("5s", &given)[0], "load.duration=\"5s\"");
        assert_eq!(chaos_sets("8s", &given).last(), given.last());
        let w = Workload::load(
            Path::new("../workloads/flash-sale.toml"),
            &chaos_sets("8s", &given),
        )
        .unwrap();
        assert_eq!(w.load.duration, Duration::from_secs(3));
        assert_eq!(w.lock.ttl, Duration::from_secs(2));
        assert_eq!(w.inventory.stock, 1_000_000);
    }

    #[test]
    fn the_parts_are_the_jobs_layout_and_rates() {
        let opts = defaults(Path::new("job"));
        let parts = opts.parts(&opts.source()).unwrap();
        let layout = JobLayout::new("job");
        assert_eq!(parts.sweep.out, layout.sweep());
        let steady = strategy::ALL.iter().filter(|s| !s.sale_control()).count();
        assert_eq!(parts.sweep.strategies.len(), steady);
        // Calm: every strategy at one common rate, the whole of the lowest safe capacity, 5 s.
        let calm = parts.calm.rate_from.as_ref().unwrap();
        assert!(calm.common && calm.share == 1.0 && calm.sweep == layout.sweep());
        assert_eq!(parts.calm.out, layout.calm());
        assert_eq!(parts.calm.runs.len(), steady);
        let run = &parts.calm.runs[0];
        assert_eq!(run.out, layout.calm().join(&run.strategy));
        assert_eq!(run.workload.load.duration, Duration::from_secs(5));
        assert!(run.chaos.is_none());
        // Chaos: each scenario in order, 70 % of each one's own capacity, 8 s, stock to spare.
        let names: Vec<&str> = parts.chaos.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["kill-master", PAUSE_HOLDER]);
        for (name, part) in &parts.chaos {
            let rate = part.rate_from.as_ref().unwrap();
            assert!(!rate.common && rate.share == 0.7, "{name}");
            assert_eq!(part.out, layout.chaos(name));
            let run = &part.runs[0];
            assert!(run.chaos.is_some());
            assert_eq!(run.workload.load.duration, Duration::from_secs(8));
            assert_eq!(run.workload.inventory.stock, 1_000_000);
        }
        assert_eq!(ids(&parts.chaos[1].1.runs), scenario_strategies(true, None));
    }

    #[test]
    fn a_bad_knob_fails_before_anything_runs() {
        let mut opts = defaults(Path::new("job"));
        opts.scenarios.push("no-such-scenario".into());
        assert!(opts.check().is_err());
        let mut opts = defaults(Path::new("job"));
        opts.strategies = Some(vec!["no-such-strategy".into()]);
        assert!(opts.check().is_err());
        let mut opts = defaults(Path::new("job"));
        opts.calm_duration = "soon".into();
        assert!(opts.check().is_err());
        // The sweep's knobs too: a trial shorter than the command's floor of 500 ms.
        let mut opts = defaults(Path::new("job"));
        opts.search.trial_s = 0.1;
        let err = opts.check().unwrap_err().to_string();
        assert_contains!(err, "--trial");
    }

    #[test]
    fn the_slo_prints_as_its_knob_is_written() {
        let mut opts = defaults(Path::new("job"));
        assert_eq!(opts.slo_knob(), "p99=100ms");
        opts.slo.quantile = 0.999;
        opts.slo.latency_ms = 250.0;
        assert_eq!(opts.slo_knob(), "p99.9=250ms");
    }
}
