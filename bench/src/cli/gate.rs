//! `lockbench gate`: against a stored baseline, or paired (A and B side by side now).

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;

use super::runs::default_out;
use super::{EXIT_INTERRUPTED, EXIT_PARTIAL, GateArgs};
use crate::report::{gate, paired};
use crate::run::paired::{PairedOptions, paired_gate};

pub(super) fn cmd_gate(args: GateArgs) -> anyhow::Result<ExitCode> {
    if args.a.is_some() {
        return super::with_runtime(|cancel| cmd_paired(args, cancel));
    }
    let (Some(baseline), Some(current)) = (&args.baseline, &args.current) else {
        anyhow::bail!("the gate needs --baseline and --current, or --a and --b");
    };
    let current = gate::load_results(current).context("--current")?;
    if args.update_baseline {
        let n = current.len();
        let path = gate::write_baseline(baseline, current)
            .with_context(|| format!("write the baseline into {}", baseline.display()))?;
        eprintln!("baseline updated: {} ({n} runs)", path.display());
        return Ok(ExitCode::SUCCESS);
    }
    let base = gate::load_results(baseline).context("--baseline")?;
    let tol = gate::Tolerance {
        max_throughput_drop: args.max_throughput_drop.unwrap_or(0.15),
        max_p99_rise: args.max_p99_rise.unwrap_or(0.25),
        alpha: args.alpha,
    };
    let report = gate::gate(&base, &current, tol);
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else {
        gate::print_gate(&mut out, &report)?;
    }
    (args.ci.outputs())
        .write("lockbench gate", &current)
        .context("writing the CI files")?;
    Ok(match report.passed() {
        true => ExitCode::SUCCESS,
        false => ExitCode::from(EXIT_PARTIAL),
    })
}

/// The paired gate: exit 0 pass, 1 a regression or a verdict not as claimed, 2 an error.
async fn cmd_paired(
    args: GateArgs,
    cancel: tokio_util::sync::CancellationToken,
) -> anyhow::Result<ExitCode> {
    let p = &args.paired;
    let out = p.out.clone().unwrap_or_else(|| default_out("gate"));
    if !p.resume {
        p.out_args.check(&out)?;
    }
    if !p.workload.is_file() {
        anyhow::bail!("--workload {}: no such file", p.workload.display());
    }
    if p.min_pairs > p.max_pairs {
        anyhow::bail!(
            "--min-pairs {} exceeds --max-pairs {}",
            p.min_pairs,
            p.max_pairs
        );
    }
    for id in p.strategies.iter().filter(|id| !id.starts_with("lib:")) {
        crate::strategy::find(id).with_context(|| format!("--strategies {id}"))?;
    }
    let (a, b) = (args.a.clone().unwrap(), args.b.clone().unwrap());
    // Each side's workload as it will run, so a bad --set fails before any pair.
    for v in [&a, &b] {
        let sets: Vec<String> = p.sets.iter().cloned().chain(v.sets()).collect();
        crate::workload::Workload::load(&p.workload, &sets).with_context(|| format!("{v}"))?;
    }
    let label = |v: &crate::run::paired::Variant| format!("{v}");
    let opts = PairedOptions {
        labels: (label(&a), label(&b)),
        a,
        b,
        strategies: p.strategies.clone(),
        workload: p.workload.clone(),
        sets: p.sets.clone(),
        seed: p.seed,
        min_pairs: p.min_pairs as usize,
        max_pairs: p.max_pairs as usize,
        budget: p.budget,
        tolerance: paired::PairedTolerance {
            max_throughput_drop: args.max_throughput_drop.unwrap_or(0.05),
            max_p99_rise: args.max_p99_rise.unwrap_or(0.20),
            max_sold_out_rise: p.max_sold_out_rise,
            confidence: 1.0 - args.alpha,
        },
        out: out.clone(),
        resume: p.resume,
    };
    let report = match paired_gate(&opts, &cancel, &mut std::io::stderr()).await {
        Err(crate::run::RunError::Interrupted) => {
            eprintln!("lockbench: gate interrupted before a pair was complete: no verdict");
            return Ok(ExitCode::from(EXIT_INTERRUPTED));
        }
        other => other?,
    };
    let json_path = out.join("gate.json");
    std::fs::write(&json_path, serde_json::to_vec_pretty(&report)?)
        .with_context(|| format!("writing {}", json_path.display()))?;
    let mut stdout = std::io::stdout().lock();
    match args.json {
        true => writeln!(stdout, "{}", serde_json::to_string_pretty(&report)?)?,
        false => paired::print(&mut stdout, &report)?,
    }
    paired::write_ci(&report, &args.ci.outputs()).context("writing the CI files")?;
    eprintln!("results: {}", out.display());
    Ok(match () {
        _ if cancel.is_cancelled() => ExitCode::from(EXIT_INTERRUPTED),
        _ if report.passed() => ExitCode::SUCCESS,
        _ => ExitCode::from(EXIT_PARTIAL),
    })
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::super::{Cli, Command};
    use super::*;

    fn gate(argv: &[&str]) -> anyhow::Result<ExitCode> {
        let cli = Cli::try_parse_from([&["lockbench", "gate"], argv].concat())?;
        let Command::Gate(args) = cli.command else {
            panic!("not the gate");
        };
        cmd_gate(args)
    }

    #[test]
    fn bad_input_is_refused_by_name_before_any_pair_runs() {
        let out = tempfile::tempdir().unwrap();
        let out = out.path().join("gate");
        let o = out.to_str().unwrap();
        let workload = concat!(env!("CARGO_MANIFEST_DIR"), "/../workloads/ci.toml");
        let cases: [(&[&str], &str); 5] = [
            (&["--a", "current"], "--b"),
            (
                &["--a", "sever:redis=7", "--b", "current"],
                "unknown kind `sever`",
            ),
            (
                &["--a", "current", "--b", "current", "--baseline", "x"],
                "--baseline",
            ),
            (
                &[
                    "--a",
                    "current",
                    "--b",
                    "set:load.clients=zz",
                    "--workload",
                    workload,
                    "--out",
                    o,
                ],
                "load.clients",
            ),
            (
                &[
                    "--a",
                    "current",
                    "--b",
                    "current",
                    "--strategies",
                    "nope",
                    "--workload",
                    workload,
                    "--out",
                    o,
                ],
                "--strategies nope",
            ),
        ];
        for (argv, needle) in cases {
            let e = gate(argv).unwrap_err();
            assert!(format!("{e:#}").contains(needle), "{argv:?}: {e:#}");
        }
        assert!(!out.exists(), "nothing ran, nothing was written");
    }
}
