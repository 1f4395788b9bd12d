//! Tables over saved results that the scripts print (`versus`, `rounds`, `totals`, `agreement`,
//! the calm rates of `versions`, `history`'s CSV) and the free port a script hands to `coordinate`: what the scripts
//! once re-read in Python, read through the report's own types.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;

use super::{
    AgreementArgs, EXIT_PARTIAL, HistoryArgs, PredictArgs, RoundsArgs, TotalsArgs, VersusArgs,
};
use crate::report::rounds::{Figures, Group};
use crate::report::sweep::Sweep;
use crate::report::versus;
use crate::report::{self, Summary};

pub(super) fn cmd_versus(args: VersusArgs) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    for dir in &args.dirs {
        let title = dir.display().to_string();
        if dir.join("sweep.json").is_file() || dir.extension().is_some_and(|e| e == "json") {
            let sweep = Sweep::read(dir)?;
            versus::print_sweep_pairs(&mut out, &title, &sweep, &args.pairs)?;
        } else {
            let runs = report::summaries(dir)?;
            versus::print_run_pairs(&mut out, &title, &runs, &args.pairs)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The one run of a run folder.
fn one_run(dir: &Path) -> anyhow::Result<Summary> {
    let mut runs = report::summaries(dir)?;
    anyhow::ensure!(
        runs.len() == 1,
        "{}: a comparison, expected one run",
        dir.display()
    );
    Ok(runs.remove(0))
}

fn name_of(dir: &Path) -> String {
    dir.file_name()
        .map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into())
}

pub(super) fn cmd_rounds(args: RoundsArgs) -> anyhow::Result<ExitCode> {
    let mut groups = Vec::new();
    for dir in &args.groups {
        let entries = std::fs::read_dir(dir).with_context(|| format!("read {}", dir.display()))?;
        let mut rounds: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.join("summary.json").is_file())
            .collect();
        rounds.sort();
        let rounds = rounds
            .iter()
            .map(|r| one_run(r).map(|s| Figures::of(&s)))
            .collect::<anyhow::Result<Vec<_>>>()?;
        groups.push(Group {
            name: name_of(dir),
            rounds,
        });
    }
    report::rounds::print_rounds(&mut std::io::stdout().lock(), &groups)?;
    Ok(ExitCode::SUCCESS)
}

pub(super) fn cmd_totals(args: TotalsArgs) -> anyhow::Result<ExitCode> {
    let runs = args
        .runs
        .iter()
        .map(|d| Ok((name_of(d), one_run(d)?)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let same = report::totals::print_totals(&mut std::io::stdout().lock(), &runs)?;
    Ok(if same {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_PARTIAL)
    })
}

/// `agreement SWEEP…`: exits 1 when some sweeps' intervals do not overlap.
pub(super) fn cmd_agreement(args: AgreementArgs) -> anyhow::Result<ExitCode> {
    let sweeps = args
        .sweeps
        .iter()
        .map(|p| Sweep::read(p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let agree = report::agreement::print_agreement(&mut std::io::stdout(), &sweeps)?;
    if let Some(model) = &args.model {
        return explained(model, &sweeps);
    }
    Ok(if agree {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `agreement A B --model M`: which differences the machines explain; 1 when some is not.
fn explained(model: &Path, sweeps: &[Sweep]) -> anyhow::Result<ExitCode> {
    use crate::report::explain::{Verdict, explain, print_explained};
    let [first, second] = sweeps else {
        anyhow::bail!(
            "--model compares two sweeps, {} given; expected the first machine's sweep and the \
             second's",
            sweeps.len()
        );
    };
    let m = read_model(model)?;
    print_explained(&mut std::io::stdout().lock(), first, second, &m)?;
    let open = explain(first, second, &m)
        .iter()
        .any(|r| matches!(r.verdict, Verdict::NotExplained | Verdict::Unknown));
    Ok(if open {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// A model from its `calibrate` folder or its model.json.
fn read_model(path: &Path) -> anyhow::Result<crate::report::predict::Model> {
    let path = if path.is_dir() {
        path.join("model.json")
    } else {
        path.to_path_buf()
    };
    crate::report::predict::Model::read(&path).map_err(anyhow::Error::msg)
}

/// `predict --model M --rtt R --fsync F`: each strategy's capacity there, from the model.
pub(super) fn cmd_predict(args: PredictArgs) -> anyhow::Result<ExitCode> {
    use crate::report::predict::{Env, print_predictions};
    let m = read_model(&args.model)?;
    if m.fits.is_empty() {
        anyhow::bail!(
            "{}: no strategy was fitted (too few points measured); expected a model.json \
             from a `lockbench calibrate` that finished its points",
            args.model.display()
        );
    }
    let at = Env {
        rtt_ms: args.rtt.as_secs_f64() * 1000.0,
        fsync_ms: args.fsync.as_secs_f64() * 1000.0,
    };
    print_predictions(&mut std::io::stdout().lock(), &m, at, args.cpu_score)?;
    Ok(ExitCode::SUCCESS)
}

/// `history DIR… [--strategies] [--out FILE]`: the CSV, to stdout by default.
pub(super) fn cmd_history(args: HistoryArgs) -> anyhow::Result<ExitCode> {
    let rows = report::history::collect(&args.dirs, &args.strategies)?;
    match &args.out {
        Some(path) => {
            let mut f = std::io::BufWriter::new(
                std::fs::File::create(path)
                    .with_context(|| format!("create {}", path.display()))?,
            );
            report::history::write_csv(&mut f, &rows)?;
            f.flush()?;
        }
        None => report::history::write_csv(&mut std::io::stdout().lock(), &rows)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// `versions DIR --calm-rates KEY`: a `strategy rate duration` line per strategy.
pub(super) fn cmd_calm_rates(args: &super::VersionsArgs, key: &str) -> anyhow::Result<ExitCode> {
    let mut builds = report::versions::load(&args.dir)?;
    if !args.builds.is_empty() {
        builds.retain(|b| args.builds.contains(&b.build));
    }
    let mut out = std::io::stdout().lock();
    for s in &args.strategies {
        let samples = f64::from(args.samples);
        if let Some(c) = report::versions::common_calm_rate(&builds, key, s, samples) {
            let rate = report::format::rate_exact(c.rate_per_s);
            writeln!(out, "{} {rate} {}s", c.strategy, c.duration_s)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A port on 127.0.0.1 that was free when checked, chosen as the servers' ports are.
pub(super) fn cmd_free_port() -> anyhow::Result<ExitCode> {
    let mut ports = crate::cluster::PortAllocator::new([127, 0, 0, 1].into(), None);
    let addr = ports.allocate("coordinator")?;
    println!("{}", addr.port());
    Ok(ExitCode::SUCCESS)
}

/// `lockbench advise`: the needs judged on a results folder, in words.
pub(super) fn cmd_advise(args: super::args::AdviseArgs) -> anyhow::Result<ExitCode> {
    let model = crate::report::advise::advise(&args.dir, &args.needs)?;
    crate::report::advise::print_advice(&mut std::io::stdout(), &model)?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::evidence::fixtures::{entry, summary, sweep};
    use crate::report::sweep::Bound;

    fn write(dir: &Path, file: &str, value: &impl serde::Serialize) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join(file), serde_json::to_vec(value).unwrap()).unwrap();
    }

    #[test]
    fn versus_reads_a_sweep_or_a_comparison_by_what_the_folder_holds() {
        let tmp = tempfile::tempdir().unwrap();
        let s = sweep(vec![
            entry("a", 100.0, Bound::Found, &[(100.0, true, true)]),
            entry("b", 50.0, Bound::Found, &[(50.0, true, true)]),
        ]);
        write(&tmp.path().join("sweep-1"), "sweep.json", &s);
        write(
            &tmp.path().join("default"),
            "compare.json",
            &vec![summary("a"), summary("b")],
        );
        let args = VersusArgs {
            dirs: vec![tmp.path().join("sweep-1"), tmp.path().join("default")],
            pairs: vec!["a=b".parse().unwrap()],
        };
        assert_eq!(cmd_versus(args).unwrap(), ExitCode::SUCCESS);
        let none = VersusArgs {
            dirs: vec![tmp.path().join("absent")],
            pairs: vec!["a=b".parse().unwrap()],
        };
        assert!(cmd_versus(none).is_err());
    }

    #[test]
    fn totals_exit_1_when_a_run_counted_other_attempts() {
        let tmp = tempfile::tempdir().unwrap();
        let base = summary("redis-setnx");
        let mut other = base.clone();
        other.not_started += 1;
        write(&tmp.path().join("pipe"), "summary.json", &base);
        write(&tmp.path().join("same"), "summary.json", &base);
        write(&tmp.path().join("other"), "summary.json", &other);
        let totals = |names: &[&str]| {
            let runs = names.iter().map(|n| tmp.path().join(n)).collect();
            cmd_totals(TotalsArgs { runs }).unwrap()
        };
        assert_eq!(totals(&["pipe", "same"]), ExitCode::SUCCESS);
        assert_eq!(totals(&["pipe", "other"]), ExitCode::from(EXIT_PARTIAL));
    }

    #[test]
    fn rounds_read_one_run_per_round_folder() {
        let tmp = tempfile::tempdir().unwrap();
        for (g, r) in [
            ("notify", "round-1"),
            ("notify", "round-2"),
            ("poll", "round-1"),
        ] {
            write(&tmp.path().join(g).join(r), "summary.json", &summary("x"));
        }
        let groups = vec![tmp.path().join("notify"), tmp.path().join("poll")];
        assert_eq!(
            cmd_rounds(RoundsArgs { groups }).unwrap(),
            ExitCode::SUCCESS
        );
    }
}
