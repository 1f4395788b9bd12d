//! The command line: argument definitions ([`args`]) and the subcommands, as library code so
//! tests can call it. `main.rs` only parses and maps the result to an exit code; this module
//! dispatches, [`runs`] runs strategies (run, coordinate, compare, sweep, job, contend, k8s
//! render), [`tables`] prints the scripts' tables over saved results (versus, rounds, totals,
//! agreement, versions' calm rates, history) and [`tools`] holds the rest (list, serve,
//! adapter-check, gate).

use std::process::ExitCode;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use crate::report;

mod args;
mod gate;
mod runs;
mod tables;
mod tools;

pub use args::*;
use gate::cmd_gate;
use runs::{
    cmd_calibrate, cmd_compare, cmd_contend, cmd_coordinate, cmd_job, cmd_k8s_render, cmd_run,
    cmd_sweep,
};
use tables::{cmd_advise, cmd_free_port, cmd_rounds, cmd_totals, cmd_versus};
pub use tools::list;
use tools::{cmd_adapter_check, cmd_reproduce, cmd_serve};

/// Exit code when the run was interrupted (128 + SIGINT).
pub const EXIT_INTERRUPTED: u8 = 130;
/// Exit code when some strategy of a comparison failed to run, or the gate failed.
pub const EXIT_PARTIAL: u8 = 1;
/// Exit code with `--fail-on unsafe` when a strategy that claims safety was seen unsafe
/// (before [`EXIT_PARTIAL`]: a verdict outweighs a strategy that could not run).
pub const EXIT_UNSAFE: u8 = 3;

/// Sets up logging ([`crate::logging`]): lockbench's own warnings on the terminal, every
/// crate's events in the run's `logs/lockbench.log`; a worker logs everything to its stderr.
pub fn init_tracing(cli: &Cli) {
    let output = match cli.command {
        Command::Worker(_) => crate::logging::Output::WorkerStderr,
        _ => crate::logging::Output::Terminal,
    };
    crate::logging::init(cli.verbose, output);
}

/// Runs a parsed command line.
pub fn main(cli: Cli) -> anyhow::Result<ExitCode> {
    // A worker's coordinator already swept at its start.
    if !matches!(cli.command, Command::Worker(_)) {
        crate::cluster::leftovers::sweep();
    }
    match cli.command {
        Command::List => {
            list(&mut std::io::stdout())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Run(args) => with_runtime(|cancel| cmd_run(args, cancel)),
        Command::Compare(args) => with_runtime(|cancel| cmd_compare(args, cancel)),
        Command::Sweep(args) => with_runtime(|cancel| cmd_sweep(args, cancel)),
        Command::Job(args) => with_runtime(|cancel| cmd_job(args, cancel)),
        Command::Contend(args) => with_runtime(|cancel| cmd_contend(args, cancel)),
        Command::Calibrate(args) => with_runtime(|cancel| cmd_calibrate(args, cancel)),
        Command::Predict(args) => tables::cmd_predict(args),
        Command::Serve(args) => with_runtime(|cancel| cmd_serve(args, cancel)),
        Command::Gate(args) => cmd_gate(args),
        Command::Agreement(args) => tables::cmd_agreement(args),
        Command::Reproduce(args) => with_runtime(|cancel| cmd_reproduce(args, cancel)),
        Command::Versus(args) => cmd_versus(args),
        Command::Rounds(args) => cmd_rounds(args),
        Command::Totals(args) => cmd_totals(args),
        Command::History(args) => tables::cmd_history(args),
        Command::FreePort => cmd_free_port(),
        Command::Versions(args) => {
            if let Some(key) = &args.calm_rates {
                return tables::cmd_calm_rates(&args, key);
            }
            let builds = report::versions::load(&args.dir)?;
            report::versions::print_versions(&mut std::io::stdout(), &builds)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::AdapterCheck(args) => with_runtime(|cancel| cmd_adapter_check(args, cancel)),
        Command::K8s(crate::clients::k8s::K8sCommand::Render(args)) => cmd_k8s_render(args),
        Command::Report(args) => {
            let path = report::write_report_with(&args.dir, args.needs.as_ref())?;
            println!("{}", path.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Advise(args) => cmd_advise(args),
        Command::Coordinate(args) => with_runtime(|cancel| cmd_coordinate(args, cancel)),
        Command::Worker(WorkerArgs {
            connect: Some(addr),
            index,
        }) => {
            let index = index.context(
                "--index (or JOB_COMPLETION_INDEX) is needed with --connect: which worker this is",
            )?;
            let rt = tokio::runtime::Runtime::new().context("start the tokio runtime")?;
            rt.block_on(crate::clients::agent::agent_main(&addr, index))
                .with_context(|| format!("worker {index}"))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Worker(_) => {
            // Started as /proc/self/exe (see `WorkerSet::start`), which ps and pgrep would
            // show as `exe`; threads started from here inherit the name.
            let _ = nix::sys::prctl::set_name(c"lockbench");
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("start the tokio runtime")?;
            let done = rt.block_on(crate::clients::worker::worker_main());
            // Reading stdin occupies a blocking thread that a normal shutdown would wait for.
            rt.shutdown_background();
            done?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Builds the runtime and a cancellation token fired by the first Ctrl-C or SIGTERM. A second
/// signal exits at once; servers still die then, through their parent-death signal.
fn with_runtime<F, Fut>(f: F) -> anyhow::Result<ExitCode>
where
    F: FnOnce(CancellationToken) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<ExitCode>>,
{
    // One thread, like redis-benchmark: on a small machine the servers need the other cores,
    // and cross-thread wake-ups cost more than they give (scripts/bench-overhead.sh measured
    // 0.8x of redis-benchmark multi-threaded, 1.09x single-threaded).
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("start the tokio runtime")?;
    rt.block_on(async {
        let cancel = CancellationToken::new();
        let on_signal = cancel.clone();
        tokio::spawn(async move {
            let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            let term_recv = async {
                match term.as_mut() {
                    Some(t) => t.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term_recv => {}
            }
            eprintln!("lockbench: interrupted: stopping the load, auditing what ran and stopping servers (Ctrl-C again aborts)");
            on_signal.cancel();
            let _ = tokio::signal::ctrl_c().await;
            std::process::exit(i32::from(EXIT_INTERRUPTED));
        });
        f(cancel).await
    })
}
