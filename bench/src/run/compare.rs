//! Several strategies one after another on one workload (`lockbench compare`, and the calm and
//! chaos parts of `lockbench job`): every run planned before the first server starts, each
//! offered its own rate or a common one from a sweep, `compare.json` written after every
//! strategy so an interrupted comparison keeps what it measured.

use std::io::Write;
use std::path::{Path, PathBuf};

use tokio_util::sync::CancellationToken;

use super::{RunError, RunOptions, Source, run, run_on, write_err};
use crate::report::sweep::{NO_PASS_SHARE, Sweep};
use crate::report::{self, Summary};

/// Where each run's rate comes from, when not from the workload's `load.rate`.
#[derive(Debug, Clone)]
pub struct RateFrom {
    /// A sweep: its folder or its sweep.json.
    pub sweep: PathBuf,
    /// The share of the capacity offered.
    pub share: f64,
    /// One rate for every strategy: `share` of the lowest capacity among those seen safe.
    pub common: bool,
}

/// A comparison.
#[derive(Debug, Clone)]
pub struct CompareOptions {
    /// One run per strategy, in order, each with its folder `<out>/<strategy>`.
    pub runs: Vec<RunOptions>,
    /// The comparison's folder: compare.json, one subfolder per strategy.
    pub out: PathBuf,
    /// Rates from a sweep instead of `load.rate`.
    pub rate_from: Option<RateFrom>,
}

/// What a comparison ran.
#[derive(Debug)]
pub struct Compared {
    /// The strategies that finished, in order.
    pub summaries: Vec<Summary>,
    /// The strategies whose run failed (said on `log` as it happened).
    pub failed: Vec<String>,
}

/// Runs a comparison: rates, then every plan, then each run in turn, on the servers its
/// options name (started for it alone, a `serve`'s, or a target's). An error before the first
/// run (a sweep with no rate, a plan that does not hold) is returned; a run that fails is said
/// on `log` and counted in [`Compared::failed`], and the next one runs.
pub async fn compare(
    opts: CompareOptions,
    cancel: &CancellationToken,
    log: &mut dyn Write,
) -> Result<Compared, RunError> {
    compare_with(opts, None, cancel, log).await
}

/// [`compare`] with every run's servers from `source` (the sim's tests: none), each run a
/// session of one trial: servers a run starts are its own, as a chaos run needs (a killed
/// master is not the next strategy's).
pub async fn compare_on(
    opts: CompareOptions,
    source: &Source,
    cancel: &CancellationToken,
    log: &mut dyn Write,
) -> Result<Compared, RunError> {
    compare_with(opts, Some(source), cancel, log).await
}

/// [`compare`] on `source`, or on the servers each run's options name.
async fn compare_with(
    opts: CompareOptions,
    source: Option<&Source>,
    cancel: &CancellationToken,
    log: &mut dyn Write,
) -> Result<Compared, RunError> {
    let mut runs = opts.runs;
    if let Some(from) = &opts.rate_from {
        runs = rates_from_sweep(runs, from, log)?;
        if runs.is_empty() {
            return Err(RunError::Options(format!(
                "--rate-from {}: no strategy has a rate to run at",
                from.sweep.display()
            )));
        }
    }
    // Every run's plan holds before the first server starts.
    let plans = (runs.iter())
        .map(|o| source.map_or_else(|| o.plan(), |s| s.plan(o)))
        .collect::<Result<Vec<_>, _>>()?;
    let mut done = Compared {
        summaries: Vec::new(),
        failed: Vec::new(),
    };
    let began = std::time::Instant::now();
    for (i, plan) in plans.iter().enumerate() {
        let id = &plan.opts.strategy;
        if cancel.is_cancelled() {
            break;
        }
        let _part = super::progress::part(
            format!("compare {}/{}", i + 1, plans.len()),
            Some(super::progress::time_left(&plans[i..], i, began.elapsed())),
        );
        let ran = match source {
            Some(s) => run_on(plan, s, cancel).await,
            None => run(plan, cancel).await,
        };
        match ran {
            Ok(s) => {
                done.summaries.push(s);
                // Written after every strategy, so an interrupted comparison keeps what it has.
                write_compare(&opts.out, &done.summaries)?;
            }
            Err(RunError::Interrupted) => break,
            Err(e) => {
                let _ = writeln!(log, "lockbench: {id}: {e}");
                done.failed.push(id.clone());
            }
        }
    }
    Ok(done)
}

/// Sets each run's offered rate from a sweep (`compare --rate-from`), saying where it came from.
/// A strategy with no rate (it met the SLO at no rate offered) is left out, and said so: its
/// row would measure a backlog, not the strategy.
pub fn rates_from_sweep(
    runs: Vec<RunOptions>,
    from: &RateFrom,
    log: &mut dyn Write,
) -> Result<Vec<RunOptions>, RunError> {
    let (path, share) = (&from.sweep, from.share);
    let sweep = Sweep::read(path).map_err(|e| RunError::Options(format!("--rate-from: {e:#}")))?;
    let pct = share * 100.0;
    let common = if from.common {
        let (cap, whose) = sweep.common_rate().ok_or_else(|| {
            RunError::Options(format!(
                "--common-rate: no strategy in {} was seen safe with a capacity at the SLO",
                path.display()
            ))
        })?;
        let _ = writeln!(
            log,
            "offered rate: {pct:.0}% of {cap}/s = {:.1}/s for every strategy (the lowest capacity at {} among those the sweep saw safe, its lower end or {:.0}% of the lowest rate that did not pass, rounded down 1-2-5: {whose})",
            cap * share,
            sweep.slo.label(),
            NO_PASS_SHARE * 100.0
        );
        Some(cap * share)
    } else {
        None
    };
    let mut kept = Vec::new();
    for mut opts in runs {
        let rate = match common {
            Some(r) => r,
            None => match sweep.rate_for(&opts.strategy, share) {
                Ok((r, basis)) => {
                    let _ = writeln!(log, "offered rate of {}: {basis} = {r:.2}/s", opts.strategy);
                    r
                }
                Err(e) => {
                    let _ = writeln!(log, "lockbench: left out: {e}");
                    continue;
                }
            },
        };
        opts.workload.load.rate = rate;
        kept.push(opts);
    }
    Ok(kept)
}

/// Writes `<out>/compare.json`: every summary so far.
pub fn write_compare(out: &Path, summaries: &[Summary]) -> Result<(), RunError> {
    std::fs::create_dir_all(out).map_err(write_err(out))?;
    let path = out.join("compare.json");
    let bytes = serde_json::to_vec_pretty(summaries).map_err(|e| RunError::Write {
        path: path.clone(),
        source: e.into(),
    })?;
    // Private, as each summary.json: it names the servers' addresses.
    crate::logging::create_private(&path)
        .and_then(|mut f| std::io::Write::write_all(&mut f, &bytes))
        .map_err(write_err(&path))
}

/// Prints the summaries: the table and the faults' table, or JSON.
pub fn print_summaries(
    mut out: &mut dyn Write,
    summaries: &[Summary],
    printed: report::Printed,
) -> std::io::Result<()> {
    match printed {
        report::Printed::Json => {
            serde_json::to_writer_pretty(&mut out, summaries)?;
            writeln!(out)?;
        }
        report::Printed::Table(width) => {
            report::print_table_as(&mut out, summaries, width)?;
            report::print_faults(&mut out, summaries)?;
        }
    }
    Ok(())
}

/// Renders report.html after the results are safely written: a failure only warns.
pub fn write_report(out: &Path, log: &mut dyn Write) {
    let _ = match report::write_report(out) {
        Ok(path) => writeln!(log, "report: {}", path.display()),
        Err(e) => writeln!(log, "lockbench: warning: report.html not written: {e}"),
    };
}
