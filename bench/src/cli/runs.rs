//! The subcommands that run strategies: `run`, `coordinate`, `compare`, `sweep`, `job`,
//! `contend`, and `k8s render` (which makes every check `coordinate` makes).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use tokio_util::sync::CancellationToken;

use super::{
    CalibrateArgs, Common, CompareArgs, ContendArgs, CoordinateArgs, EXIT_INTERRUPTED,
    EXIT_PARTIAL, EXIT_UNSAFE, FailOn, JobArgs, OutArgs, RunArgs, SearchArgs, ServerArgs,
    SweepArgs, WorkloadArgs,
};
use crate::chaos::ChaosPlan;
use crate::cluster::target::ExternalTarget;
use crate::report::{self, Summary};
use crate::run::sweep::SweepOptions;
use crate::run::{RunError, RunOptions, compare, job, run};
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

/// The results folder of a command: `given`, else [`default_out`]`(suffix)`; refused when it
/// holds anything, unless `--force`.
fn out_folder(given: Option<PathBuf>, suffix: &str, out_args: &OutArgs) -> anyhow::Result<PathBuf> {
    let out = given.unwrap_or_else(|| default_out(suffix));
    out_args.check(&out)?;
    Ok(out)
}

pub(super) fn print(summaries: &[Summary], printed: report::Printed) -> anyhow::Result<()> {
    Ok(compare::print_summaries(
        &mut std::io::stdout().lock(),
        summaries,
        printed,
    )?)
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
    let out = out_folder(args.out, &args.strategy, &args.common.out_args)?;
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
    let printed = report::Printed::of(args.common.json, args.common.wide);
    print(std::slice::from_ref(&summary), printed)?;
    if let Some(env) = &summary.environment {
        eprintln!("{}", env.note());
    }
    eprintln!("results: {}", opts.out.display());
    let name = format!("lockbench run {}", args.strategy);
    (args
        .ci
        .outputs()
        .write(&name, std::slice::from_ref(&summary)))
    .context("writing the CI files (--junit, --markdown, --bmf, --github-benchmark)")?;
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
    Ok(fail_on(args.common.fail_on, std::slice::from_ref(&summary)).unwrap_or(ExitCode::SUCCESS))
}

/// [`EXIT_UNSAFE`] when `--fail-on unsafe` was given and a strategy that claims safety was
/// seen unsafe in `summaries`.
fn fail_on(policy: Option<FailOn>, summaries: &[Summary]) -> Option<ExitCode> {
    let unsafe_claim = summaries.iter().any(|s| s.claims_safety && !s.safe);
    (policy == Some(FailOn::Unsafe) && unsafe_claim).then(|| ExitCode::from(EXIT_UNSAFE))
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
        servers: c.servers.options(),
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

/// The strategies given, checked as [`strategy_ids`] checks them, else a command's `defaults`.
fn strategy_ids_or(given: &[String], defaults: &[&str]) -> anyhow::Result<Vec<String>> {
    if given.is_empty() {
        return Ok(defaults.iter().map(|s| s.to_string()).collect());
    }
    strategy_ids(given)
}

pub(super) async fn cmd_compare(
    args: CompareArgs,
    cancel: CancellationToken,
) -> anyhow::Result<ExitCode> {
    let ids = strategy_ids(&args.strategies)?;
    let workload = args.common.load.load()?;
    let chaos = load_chaos(&args.common, &workload)?;
    let target = load_target(&args.common)?;
    let out = out_folder(args.out, "compare", &args.common.out_args)?;
    let runs: Vec<RunOptions> = ids
        .iter()
        .map(|id| {
            let (w, c, t) = (workload.clone(), chaos.clone(), target.clone());
            run_options(id, w, c, t, &args.common, out.join(id))
        })
        .collect();
    let rate_from = args.rate_from.map(|sweep| compare::RateFrom {
        sweep,
        share: args.rate_share,
        common: args.common_rate,
    });
    let opts = compare::CompareOptions {
        runs,
        out: out.clone(),
        rate_from,
    };
    let (mut stdout, mut stderr) = (std::io::stdout(), std::io::stderr());
    let printed = report::Printed::of(args.common.json, args.common.wide);
    let ci = args.ci.outputs();
    let ended = job::compare_part(opts, printed, &ci, &cancel, &mut stdout, &mut stderr).await?;
    if args.common.fail_on.is_some() && ended != job::Ended::Interrupted {
        // Every strategy that ran is in compare.json (none: nothing to judge).
        let summaries = crate::report::summaries(&out).unwrap_or_default();
        if let Some(code) = fail_on(args.common.fail_on, &summaries) {
            return Ok(code);
        }
    }
    Ok(exit_code(ended))
}

/// The exit code of a command (or the job) that ended so.
fn exit_code(ended: job::Ended) -> ExitCode {
    match ended {
        job::Ended::Done => ExitCode::SUCCESS,
        job::Ended::Partial => ExitCode::from(EXIT_PARTIAL),
        job::Ended::Failed => ExitCode::from(2),
        job::Ended::Interrupted => ExitCode::from(EXIT_INTERRUPTED),
    }
}

/// The sweep's options from its flags (`sweep`, and the capacity part of `job`).
fn sweep_options(
    ids: Vec<String>,
    search: &SearchArgs,
    load: &WorkloadArgs,
    servers: &ServerArgs,
    out: PathBuf,
) -> anyhow::Result<SweepOptions> {
    Ok(SweepOptions {
        strategies: ids,
        workload_file: load.workload.display().to_string(),
        slo: search.slo(),
        search: search.search(),
        out,
        servers: servers.options(),
        workload: load.load()?,
        probe: Default::default(),
    })
}

pub(super) async fn cmd_sweep(
    args: SweepArgs,
    cancel: CancellationToken,
) -> anyhow::Result<ExitCode> {
    let ids = strategy_ids(&args.strategies)?;
    let out = out_folder(args.out, "sweep", &args.out_args)?;
    let opts = sweep_options(ids, &args.search, &args.load, &args.servers, out)?;
    crate::run::sweep::check(&opts)?;
    let (mut stdout, mut stderr) = (std::io::stdout(), std::io::stderr());
    let ended = job::sweep_part(&opts, &cancel, &mut stdout, &mut stderr)
        .await
        .context("sweep failed")?;
    Ok(exit_code(ended))
}

/// `lockbench job`: the main job, its knobs checked before anything starts.
pub(super) async fn cmd_job(args: JobArgs, cancel: CancellationToken) -> anyhow::Result<ExitCode> {
    let ci = args.ci.outputs();
    let opts = job_options(args)?;
    let (mut stdout, mut stderr) = (std::io::stdout(), std::io::stderr());
    let ended = job::job(&opts, &cancel, &mut stdout, &mut stderr).await?;
    let name = format!("lockbench job {}", opts.out.display());
    (crate::report::ci::job_parts(&opts.out).and_then(|parts| ci.write_job(&name, &parts)))
        .context("writing the CI files (--junit, --markdown, --bmf, --github-benchmark)")?;
    Ok(exit_code(ended))
}

/// The job's options from its flags.
fn job_options(args: JobArgs) -> anyhow::Result<job::JobOptions> {
    let strategies = if args.strategies.is_empty() {
        None
    } else {
        Some(strategy_ids(&args.strategies)?)
    };
    let out = args
        .out
        .unwrap_or_else(|| job::default_out(std::time::SystemTime::now()));
    args.out_args.check(&out)?;
    Ok(job::JobOptions {
        out,
        strategies,
        workload_file: args.load.workload.clone(),
        sale_workload: (args.sale.to_str() != Some("none")).then_some(args.sale),
        sale_scenarios: args
            .sale_scenarios
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect(),
        sets: args.load.set.clone(),
        slo: args.search.slo(),
        search: args.search.search(),
        chaos_share: args.chaos_share,
        scenarios: args.scenarios,
        scenario_dir: PathBuf::from("chaos"),
        calm_duration: args.calm_duration,
        chaos_duration: args.chaos_duration,
        needs: args.needs,
        servers: args.servers.options(),
    })
}

pub(super) async fn cmd_contend(
    args: ContendArgs,
    cancel: CancellationToken,
) -> anyhow::Result<ExitCode> {
    use crate::run::contend::{self, ContendOptions, DEFAULT_STRATEGIES};
    let ids = strategy_ids_or(&args.strategies, DEFAULT_STRATEGIES)?;
    let out = out_folder(args.out, "contend", &args.out_args)?;
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
        servers: args.start.options(),
        lock_free_sales: false,
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
    let failed: Vec<&str> = c
        .entries
        .iter()
        .filter(|e| e.error.is_some())
        .map(|e| e.strategy.as_str())
        .collect();
    Ok(finish(
        &out,
        &out,
        &cancel,
        &failed,
        "contend incomplete for",
    ))
}

/// `calibrate`: every point's checks first, then the points; the model's tables at the end.
pub(super) async fn cmd_calibrate(
    args: CalibrateArgs,
    cancel: CancellationToken,
) -> anyhow::Result<ExitCode> {
    use crate::run::calibrate::{self, CalibrateOptions, DEFAULT_STRATEGIES};
    let strategies = strategy_ids_or(&args.strategies, &DEFAULT_STRATEGIES)?;
    let out = out_folder(args.out, "calibrate", &args.out_args)?;
    let opts = CalibrateOptions {
        strategies,
        workload_file: args.load.workload.clone(),
        overrides: args.load.set.clone(),
        contenders: args.contenders,
        trials: args.trials,
        trial: args.duration,
        warm_up: args.warm_up,
        points: args.points.0,
        held_out: args.check.0,
        budget: args.budget,
        out: out.clone(),
        servers: args.start.options(),
    };
    calibrate::check(&opts)?;
    let source = crate::run::Source::of(&opts.servers);
    let m = match calibrate::calibrate_on(&opts, &source, &cancel, &mut std::io::stderr()).await {
        Ok(m) => m,
        Err(RunError::Interrupted) => return Ok(ExitCode::from(EXIT_INTERRUPTED)),
        Err(e) => return Err(e).context("calibrate failed"),
    };
    let mut stdout = std::io::stdout().lock();
    report::predict::print_fits(&mut stdout, &m)?;
    report::predict::print_checks(&mut stdout, &m)?;
    let failed: Vec<&str> = m.errors.iter().map(|(id, _)| id.as_str()).collect();
    let model = out.join("model.json");
    Ok(finish(
        &out,
        &model,
        &cancel,
        &failed,
        "calibrate incomplete for",
    ))
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
    compare::write_report(out, &mut std::io::stderr());
}

/// The end of a command that measured several strategies into `out`: where its `results` are
/// and its report (both said on stderr), and its exit code: interrupted, or with the
/// strategies in `failed` incomplete (said after `what`), or done.
fn finish(
    out: &Path,
    results: &Path,
    cancel: &CancellationToken,
    failed: &[&str],
    what: &str,
) -> ExitCode {
    eprintln!("results: {}", results.display());
    write_report(out);
    exit_code(job::ended(cancel, failed, what, &mut std::io::stderr()))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command, OutArgs};
    use crate::report::sweep::DEFAULTS;

    fn job(args: &[&str]) -> job::JobOptions {
        let cli = Cli::try_parse_from(["lockbench", "job"].iter().chain(args)).unwrap();
        let Command::Job(args) = cli.command else {
            panic!("not the job");
        };
        job_options(args).unwrap()
    }

    #[test]
    fn the_jobs_defaults_are_compare_shs() {
        let o = job(&[]);
        assert!(o.out.starts_with("results/runs"));
        assert!(o.out.to_string_lossy().ends_with("-compare"));
        assert_eq!(o.strategies, None);
        assert_eq!(o.workload_file, Path::new("workloads/flash-sale.toml"));
        assert_eq!((o.slo.quantile, o.slo.latency_ms), (0.99, 100.0));
        // The sweep's own defaults: the job's capacity part is `lockbench sweep`.
        let sweep = Cli::try_parse_from(["lockbench", "sweep"]).unwrap();
        let Command::Sweep(sweep) = sweep.command else {
            panic!("not the sweep");
        };
        assert_eq!(o.search, sweep.search.search());
        assert_eq!(o.chaos_share, 0.7);
        assert_eq!(o.scenarios, ["kill-master", "pause-holder"]);
        assert_eq!(o.scenario_dir, Path::new("chaos"));
        assert_eq!(
            (o.calm_duration.as_str(), o.chaos_duration.as_str()),
            ("5s", "8s")
        );
        assert!(o.needs.is_none() && o.sets.is_empty());
    }

    #[test]
    fn compare_shs_knobs_are_the_jobs_flags() {
        // As scripts/compare.sh passes them, SWEEP_ARGS and extra arguments last.
        let o = job(&[
            "--slo",
            "p99=250ms",
            "--chaos-share",
            "50%",
            "--scenarios",
            "kill-master",
            "--strategies",
            "mysql-atomic,redis-setnx",
            "--needs",
            "safe-under-pause,capacity>=10",
            "--calm-duration",
            "1s",
            "--chaos-duration",
            "6s",
            "--confidence",
            "80%",
            "--start",
            "50",
            "--budget",
            "8s",
            "--set",
            "load.clients=32",
        ]);
        assert_eq!(o.slo.latency_ms, 250.0);
        assert_eq!(o.chaos_share, 0.5);
        assert_eq!(o.scenarios, ["kill-master"]);
        assert_eq!(
            o.strategies.as_deref().unwrap(),
            ["mysql-atomic", "redis-setnx"]
        );
        assert!(o.needs.is_some());
        assert_eq!(
            (o.calm_duration.as_str(), o.chaos_duration.as_str()),
            ("1s", "6s")
        );
        assert_eq!(
            (o.search.confidence, o.search.start_per_s),
            (0.8, Some(50.0))
        );
        assert_eq!(o.search.budget_s, 8.0);
        assert_ne!(o.search.budget_s, DEFAULTS.budget_s);
        assert_eq!(o.sets, ["load.clients=32"]);
    }

    #[test]
    fn a_knob_that_does_not_hold_is_refused_by_name() {
        for bad in [["--calm-duration", "soon"], ["--chaos-share", "lots"]] {
            let e = Cli::try_parse_from(["lockbench", "job", bad[0], bad[1]]).unwrap_err();
            assert!(e.to_string().contains(bad[0]), "{e}");
        }
        let cli = Cli::try_parse_from(["lockbench", "job", "--strategies", "nope"]).unwrap();
        let Command::Job(args) = cli.command else {
            panic!("not the job");
        };
        assert!(job_options(args).is_err());
    }

    #[test]
    fn fail_on_unsafe_exits_3_only_for_a_strategy_that_claims_safety() {
        let base: Summary =
            serde_json::from_str(include_str!("../../tests/fixtures/summary.json")).unwrap();
        let with = |claims_safety, safe| Summary {
            claims_safety,
            safe,
            ..base.clone()
        };
        let policy = Some(FailOn::Unsafe);
        let three = Some(ExitCode::from(EXIT_UNSAFE));
        assert_eq!(
            fail_on(policy, &[with(true, true), with(true, false)]),
            three
        );
        // A control that claims nothing is a result, as is any verdict without the policy.
        assert_eq!(
            fail_on(policy, &[with(false, false), with(true, true)]),
            None
        );
        assert_eq!(fail_on(None, &[with(true, false)]), None);
        assert_eq!(fail_on(policy, &[]), None);
    }

    #[test]
    fn out_refuses_a_folder_that_holds_anything_unless_forced() {
        let dir = tempfile::tempdir().unwrap();
        let (strict, forced) = (OutArgs { force: false }, OutArgs { force: true });
        // New and empty folders are fine.
        strict.check(&dir.path().join("new")).unwrap();
        strict.check(dir.path()).unwrap();
        std::fs::write(dir.path().join("summary.json"), "{}").unwrap();
        let err = strict.check(dir.path()).unwrap_err().to_string();
        assert_contains!(err, "not empty", "summary.json");
        assert_contains!(err, "--force");
        forced.check(dir.path()).unwrap();
        // Each results command has the flag.
        for cmd in ["run -s none", "compare", "sweep", "contend", "job"] {
            let mut argv = vec!["lockbench"];
            argv.extend(cmd.split(' '));
            argv.push("--force");
            Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{cmd}: {e}"));
        }
    }
}
