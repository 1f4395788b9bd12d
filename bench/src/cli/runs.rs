//! The subcommands that run strategies: `run`, `coordinate`, `compare`, `sweep`, `contend`, and
//! `k8s render` (which makes every check `coordinate` makes).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use tokio_util::sync::CancellationToken;

use super::{
    Common, CompareArgs, ContendArgs, CoordinateArgs, EXIT_INTERRUPTED, EXIT_PARTIAL, RunArgs,
    SweepArgs,
};
use crate::chaos::ChaosPlan;
use crate::cluster::target::ExternalTarget;
use crate::report::{self, Summary};
use crate::run::{RunError, RunOptions, run};
use crate::strategy;
use crate::workload::Workload;

pub(super) fn load_chaos(c: &Common, w: &Workload) -> anyhow::Result<Option<ChaosPlan>> {
    let Some(path) = &c.chaos else {
        return Ok(None);
    };
    Ok(Some(ChaosPlan::load(path, w)?))
}

pub(super) fn load_target(c: &Common) -> anyhow::Result<Option<ExternalTarget>> {
    Ok(c.target.as_deref().map(ExternalTarget::load).transpose()?)
}

pub(super) fn default_out(suffix: &str) -> PathBuf {
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    PathBuf::from("results/runs").join(format!("{}-{suffix}", now.replace(':', "")))
}

pub(super) fn print(summaries: &[Summary], json: bool) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, summaries)?;
        writeln!(out)?;
    } else {
        report::print_table(&mut out, summaries)?;
        report::print_faults(&mut out, summaries)?;
    }
    Ok(())
}

pub(super) async fn cmd_run(args: RunArgs, cancel: CancellationToken) -> anyhow::Result<ExitCode> {
    run_with(args, None, cancel).await
}

pub(super) async fn cmd_coordinate(
    args: CoordinateArgs,
    cancel: CancellationToken,
) -> anyhow::Result<ExitCode> {
    let link = crate::clients::WorkerLink::Remote {
        listen: args.listen,
        wait: args.wait,
    };
    run_with(args.run, Some(link), cancel).await
}

/// `run`, with its workers reached as `link` says (default: `--worker-link`).
pub(super) async fn run_with(
    args: RunArgs,
    link: Option<crate::clients::WorkerLink>,
    cancel: CancellationToken,
) -> anyhow::Result<ExitCode> {
    // Validate everything before any server starts.
    let workload = args.common.load.load()?;
    let chaos = load_chaos(&args.common, &workload)?;
    let target = load_target(&args.common)?;
    let out = args.out.unwrap_or_else(|| default_out(&args.strategy));
    let mut opts = run_options(&args.strategy, workload, chaos, target, &args.common, out);
    if let Some(link) = link {
        opts.worker_link = link;
    }
    let plan = opts.plan()?;
    let summary = match run(&plan, &cancel).await {
        Ok(s) => s,
        Err(RunError::Interrupted) => return Ok(ExitCode::from(EXIT_INTERRUPTED)),
        Err(e) => return Err(e).with_context(|| format!("run of `{}` failed", args.strategy)),
    };
    print(std::slice::from_ref(&summary), args.common.json)?;
    eprintln!("results: {}", opts.out.display());
    write_report(&opts.out);
    if summary.interrupted {
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    }
    if !summary.worker_failures.is_empty() {
        // The totals hold what the workers reported, but not their whole share of the load.
        anyhow::bail!(
            "{} worker failure(s), results written but incomplete: {}",
            summary.worker_failures.len(),
            summary.worker_failures.join("; ")
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) fn run_options(
    strategy: &str,
    workload: Workload,
    chaos: Option<ChaosPlan>,
    target: Option<ExternalTarget>,
    c: &Common,
    out: PathBuf,
) -> RunOptions {
    let file = c.load.workload.display().to_string();
    RunOptions {
        workers: c.workers,
        worker_link: c.worker_link,
        private_network: c.private_network,
        base_port: c.servers.base_port,
        endpoints: c.servers.endpoints.clone(),
        provision: c.servers.provision,
        target,
        history: c.history,
        progress: !c.json,
        ..RunOptions::new(strategy, workload, chaos, &file, out)
    }
}

pub(super) fn strategy_ids(given: &[String]) -> anyhow::Result<Vec<String>> {
    let ids: Vec<String> = if given.is_empty() {
        strategy::ALL.iter().map(|s| s.id.to_string()).collect()
    } else {
        given
            .iter()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    };
    if ids.is_empty() {
        bail!(
            "--strategies: no strategy given; expected ids separated by commas, e.g. none,redis-setnx"
        );
    }
    for id in &ids {
        strategy::find(id).context("--strategies")?;
    }
    Ok(ids)
}

pub(super) async fn cmd_compare(
    args: CompareArgs,
    cancel: CancellationToken,
) -> anyhow::Result<ExitCode> {
    let ids = strategy_ids(&args.strategies)?;
    let workload = args.common.load.load()?;
    let chaos = load_chaos(&args.common, &workload)?;
    let target = load_target(&args.common)?;
    let out = args.out.unwrap_or_else(|| default_out("compare"));
    let mut runs: Vec<RunOptions> = ids
        .iter()
        .map(|id| {
            let (w, c, t) = (workload.clone(), chaos.clone(), target.clone());
            run_options(id, w, c, t, &args.common, out.join(id))
        })
        .collect();
    if let Some(path) = &args.rate_from {
        runs = rates_from_sweep(runs, path, args.rate_share, args.common_rate)?;
        if runs.is_empty() {
            bail!(
                "--rate-from {}: no strategy has a rate to run at",
                path.display()
            );
        }
    }
    // Every run's plan holds before the first server starts.
    let plans = runs
        .iter()
        .map(RunOptions::plan)
        .collect::<Result<Vec<_>, _>>()?;
    let mut summaries = Vec::new();
    let mut failed = Vec::new();
    for plan in &plans {
        let id = &plan.opts.strategy;
        if cancel.is_cancelled() {
            break;
        }
        match run(plan, &cancel).await {
            Ok(s) => {
                summaries.push(s);
                // Written after every strategy, so an interrupted comparison keeps what it has.
                write_compare(&out, &summaries)?;
            }
            Err(RunError::Interrupted) => break,
            Err(e) => {
                eprintln!("lockbench: {id}: {e}");
                failed.push(id.clone());
            }
        }
    }
    print(&summaries, args.common.json)?;
    eprintln!("results: {}", out.display());
    if !summaries.is_empty() {
        write_report(&out);
    }
    if cancel.is_cancelled() {
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    }
    if !failed.is_empty() {
        eprintln!("lockbench: failed strategies: {}", failed.join(", "));
        return Ok(ExitCode::from(EXIT_PARTIAL));
    }
    Ok(ExitCode::SUCCESS)
}

/// Sets each run's offered rate from a sweep (`compare --rate-from`), saying where it came from.
/// A strategy with no rate (it met the SLO at no rate offered) is left out, and said so: its
/// row would measure a backlog, not the strategy.
pub(super) fn rates_from_sweep(
    runs: Vec<RunOptions>,
    path: &Path,
    share: f64,
    common: bool,
) -> anyhow::Result<Vec<RunOptions>> {
    let sweep = report::sweep::Sweep::read(path).context("--rate-from")?;
    let pct = share * 100.0;
    let common = if common {
        let (cap, whose) = sweep.common_rate().with_context(|| {
            format!(
                "--common-rate: no strategy in {} was seen safe with a capacity at the SLO",
                path.display()
            )
        })?;
        eprintln!(
            "offered rate: {pct:.0}% of {cap}/s = {:.1}/s for every strategy (the lowest capacity at {} among those the sweep saw safe, its lower end or {:.0}% of the lowest rate that did not pass, rounded down 1-2-5: {whose})",
            cap * share,
            sweep.slo.label(),
            report::sweep::NO_PASS_SHARE * 100.0
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
                    eprintln!("offered rate of {}: {basis} = {r:.2}/s", opts.strategy);
                    r
                }
                Err(e) => {
                    eprintln!("lockbench: left out: {e}");
                    continue;
                }
            },
        };
        opts.workload.load.rate = rate;
        kept.push(opts);
    }
    Ok(kept)
}

pub(super) async fn cmd_sweep(
    args: SweepArgs,
    cancel: CancellationToken,
) -> anyhow::Result<ExitCode> {
    use crate::report::sweep::{Search, Slo};
    use crate::run::sweep::{SweepOptions, sweep};
    let ids = strategy_ids(&args.strategies)?;
    let workload = args.load.load()?;
    let out = args.out.unwrap_or_else(|| default_out("sweep"));
    let opts = SweepOptions {
        strategies: ids.clone(),
        workload_file: args.load.workload.display().to_string(),
        slo: Slo {
            quantile: args.slo.0,
            latency_ms: args.slo.1,
            min_served: args.min_served,
        },
        search: Search {
            start_per_s: args.start,
            min_per_s: args.min,
            max_per_s: args.max,
            factor: args.factor,
            confidence: args.confidence,
            goal_width: args.goal_width,
            budget_s: args.budget.as_secs_f64(),
            step_budget_s: args.step_budget.as_secs_f64(),
            trial_s: args.trial.as_secs_f64(),
            max_trial_s: args.max_trial.as_secs_f64(),
            revisit: !args.no_revisit,
            revisit_budget_s: args.revisit_budget.as_secs_f64(),
        },
        out: out.clone(),
        base_port: args.servers.base_port,
        endpoints: args.servers.endpoints,
        provision: args.servers.provision,
        workload,
    };
    crate::run::sweep::check(&opts)?;
    let q = &opts.search;
    eprintln!(
        "sweep: {} strategies, SLO {}, each step decided at {}% confidence; trials of {}..{} s, \
         {} s a step, {} s a strategy, until the interval is within {}x ({}..{}/s)",
        ids.len(),
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
    let result = sweep(&opts, &cancel, &mut std::io::stderr()).await;
    let sweep = match result {
        Ok(s) => s,
        Err(RunError::Interrupted) => return Ok(ExitCode::from(EXIT_INTERRUPTED)),
        Err(e) => return Err(e).context("sweep failed"),
    };
    report::sweep::print_capacity(&mut std::io::stdout().lock(), &sweep)?;
    eprintln!("results: {}", out.display());
    write_report(&out);
    if cancel.is_cancelled() {
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    }
    let failed: Vec<&str> = sweep
        .entries
        .iter()
        .filter(|e| e.error.is_some())
        .map(|e| e.strategy.as_str())
        .collect();
    if !failed.is_empty() {
        eprintln!("lockbench: sweep incomplete for: {}", failed.join(", "));
        return Ok(ExitCode::from(EXIT_PARTIAL));
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) async fn cmd_contend(
    args: ContendArgs,
    cancel: CancellationToken,
) -> anyhow::Result<ExitCode> {
    use crate::run::contend::{self, ContendOptions, DEFAULT_STRATEGIES};
    let ids = if args.strategies.is_empty() {
        DEFAULT_STRATEGIES.iter().map(|s| s.to_string()).collect()
    } else {
        strategy_ids(&args.strategies)?
    };
    let out = args.out.unwrap_or_else(|| default_out("contend"));
    let opts = ContendOptions {
        strategies: ids.clone(),
        workload: args.load.load()?,
        workload_file: args.load.workload.display().to_string(),
        levels: args
            .levels
            .map_or_else(|| contend::plan_levels(args.max), |l| l.0),
        trials: args.trials,
        trial: args.duration,
        warm_up: args.warm_up,
        budget: args.budget,
        out: out.clone(),
        base_port: args.base_port,
        provision: args.provision,
    };
    contend::check(&opts)?;
    eprintln!(
        "contend: {} strategies at {:?} contenders on one key, {} trial(s) of {} a level, \
         within {}",
        ids.len(),
        opts.levels,
        opts.trials,
        humantime::format_duration(opts.trial),
        humantime::format_duration(opts.budget)
    );
    let c = match contend::contend(&opts, &cancel, &mut std::io::stderr()).await {
        Ok(c) => c,
        Err(RunError::Interrupted) => return Ok(ExitCode::from(EXIT_INTERRUPTED)),
        Err(e) => return Err(e).context("contend failed"),
    };
    report::contend::print_contend(&mut std::io::stdout().lock(), &c)?;
    eprintln!("results: {}", out.display());
    write_report(&out);
    if cancel.is_cancelled() {
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    }
    let failed: Vec<&str> = c
        .entries
        .iter()
        .filter(|e| e.error.is_some())
        .map(|e| e.strategy.as_str())
        .collect();
    if !failed.is_empty() {
        eprintln!("lockbench: contend incomplete for: {}", failed.join(", "));
        return Ok(ExitCode::from(EXIT_PARTIAL));
    }
    Ok(ExitCode::SUCCESS)
}

/// `k8s render`: the files and every check `coordinate` makes before it starts anything, then
/// the manifests.
pub(super) fn cmd_k8s_render(args: crate::clients::k8s::RenderArgs) -> anyhow::Result<ExitCode> {
    use crate::clients::k8s;
    let inputs = k8s::Inputs::load(&args)?;
    let chaos = inputs.chaos.as_ref().map(|(plan, _)| plan.clone());
    let file = args.workload.display().to_string();
    let opts = RunOptions {
        workers: args.workers,
        worker_link: crate::clients::WorkerLink::Remote {
            listen: std::net::SocketAddr::from(([0, 0, 0, 0], args.port)),
            wait: std::time::Duration::from_secs(120),
        },
        target: Some(inputs.target.checked.clone()),
        ..RunOptions::new(
            &args.strategy,
            inputs.workload.clone(),
            chaos,
            &file,
            PathBuf::new(),
        )
    };
    let plan = opts.plan()?;
    if plan.workers != args.workers {
        bail!(
            "--workers {}: expected at most load.clients = {} (each worker runs at least one buyer)",
            args.workers,
            inputs.workload.load.clients
        );
    }
    inputs
        .target
        .checked
        .endpoints_for(&args.strategy, plan.info.needs)?;
    k8s::write(&args, &inputs)?;
    Ok(ExitCode::SUCCESS)
}

/// Renders report.html after the results are safely written: a failure only warns.
pub(super) fn write_report(out: &Path) {
    match report::write_report(out) {
        Ok(path) => eprintln!("report: {}", path.display()),
        Err(e) => eprintln!("lockbench: warning: report.html not written: {e}"),
    }
}

pub(super) fn write_compare(out: &Path, summaries: &[Summary]) -> anyhow::Result<()> {
    std::fs::create_dir_all(out)?;
    let path = out.join("compare.json");
    std::fs::write(&path, serde_json::to_vec_pretty(summaries)?)
        .with_context(|| format!("write {}", path.display()))
}
