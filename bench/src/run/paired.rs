//! The paired gate's runs (docs/gate.md "The paired gate"): A and B, each a `lockbench
//! compare` of the same strategies on the same workload, alternate on one machine — A B, B A,
//! A B, … (ABBA: a drift that grows through the job favours neither side) — each pair on a seed
//! of its own, both halves on the same one. Both halves run as child processes, even when a
//! variant is this build, so that neither pays a cost the other does not.
//!
//! After each pair the verdict is judged again ([`crate::report::paired`]); the gate stops once
//! it is settled, at `max_pairs`, or when another pair would not fit the time budget.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::RunError;
use crate::report::paired::{self, Pair, PairedReport, PairedTolerance};

/// One side of the gate.
#[derive(Debug, Clone, PartialEq)]
pub enum Variant {
    /// This build, as it is.
    Current,
    /// Another lockbench build (`bin:PATH`), such as the merge base's.
    Bin(PathBuf),
    /// Workload overrides (`set:KEY=VALUE[,KEY=VALUE…]`), as `--set` takes them.
    Set(Vec<String>),
    /// A server build (`server:SERVICE=BUILD`), as `--set servers.SERVICE=BUILD`.
    Server { service: String, build: String },
    /// A library adapter (`adapter:ID`): its `lib:ID` instead of the strategies.
    Adapter(String),
}

impl FromStr for Variant {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let expected = "expected current, bin:PATH, set:KEY=VALUE[,KEY=VALUE…], \
                        server:SERVICE=BUILD or adapter:ID";
        let (kind, rest) = match s.split_once(':') {
            Some(x) => x,
            None if s == "current" => return Ok(Self::Current),
            None => return Err(format!("`{s}`: {expected}")),
        };
        let empty = || format!("`{s}`: nothing after `{kind}:`; {expected}");
        match kind {
            _ if rest.trim().is_empty() => Err(empty()),
            "bin" => Ok(Self::Bin(PathBuf::from(rest))),
            "set" => {
                let sets: Vec<String> = rest.split(',').map(|p| p.trim().to_string()).collect();
                match sets.iter().find(|p| !p.contains('=')) {
                    Some(bad) => Err(format!("`{s}`: `{bad}` is not KEY=VALUE; {expected}")),
                    None => Ok(Self::Set(sets)),
                }
            }
            "server" => match rest.split_once('=') {
                Some((service, build)) if !service.is_empty() && !build.is_empty() => {
                    Ok(Self::Server {
                        service: service.to_string(),
                        build: build.to_string(),
                    })
                }
                _ => Err(format!(
                    "`{s}`: expected server:SERVICE=BUILD, e.g. server:redis=valkey-8.0"
                )),
            },
            "adapter" => Ok(Self::Adapter(rest.to_string())),
            _ => Err(format!("`{s}`: unknown kind `{kind}`; {expected}")),
        }
    }
}

impl std::fmt::Display for Variant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Current => write!(f, "current"),
            Self::Bin(p) => write!(f, "bin:{}", p.display()),
            Self::Set(sets) => write!(f, "set:{}", sets.join(",")),
            Self::Server { service, build } => write!(f, "server:{service}={build}"),
            Self::Adapter(id) => write!(f, "adapter:{id}"),
        }
    }
}

impl Variant {
    /// The build that runs this side.
    fn bin(&self, current: &Path) -> PathBuf {
        match self {
            Self::Bin(p) => p.clone(),
            _ => current.to_path_buf(),
        }
    }

    /// The `--set`s of this side, after the gate's own.
    pub fn sets(&self) -> Vec<String> {
        match self {
            Self::Set(sets) => sets.clone(),
            Self::Server { service, build } => vec![format!("servers.{service}={build}")],
            _ => Vec::new(),
        }
    }

    /// The strategies this side runs.
    fn strategies(&self, given: &[String]) -> Vec<String> {
        match self {
            Self::Adapter(id) => vec![format!("lib:{id}")],
            _ => given.to_vec(),
        }
    }
}

/// The gate's knobs (`lockbench gate --help`).
#[derive(Debug, Clone)]
pub struct PairedOptions {
    pub a: Variant,
    pub b: Variant,
    /// As given: the labels of the report.
    pub labels: (String, String),
    pub strategies: Vec<String>,
    pub workload: PathBuf,
    /// `--set`s of both sides, before each side's own.
    pub sets: Vec<String>,
    /// The first pair's seed; pair i runs on `seed + i`.
    pub seed: u64,
    /// No verdict before this many pairs (an interval needs them).
    pub min_pairs: usize,
    pub max_pairs: usize,
    /// No pair starts that would end past it (judged on the pairs so far).
    pub budget: Duration,
    pub tolerance: PairedTolerance,
    /// Each side's results: `<out>/pair-NN/<a|b>/`, with its log beside it.
    pub out: PathBuf,
    /// Read a side whose results are already in `out` instead of running it again (a gate
    /// interrupted, or judged again with other tolerances).
    pub resume: bool,
}

/// The pairs run until the verdict is settled, the pairs run out or the budget does; the
/// verdict on them. Progress goes to `out`, one line a pair.
pub async fn paired_gate(
    opts: &PairedOptions,
    cancel: &CancellationToken,
    out: &mut dyn std::io::Write,
) -> Result<PairedReport, RunError> {
    let me = std::env::current_exe().map_err(|e| RunError::Options(e.to_string()))?;
    let began = Instant::now();
    let mut pairs: Vec<Pair> = Vec::new();
    let (a, b) = (&opts.labels.0, &opts.labels.1);
    loop {
        let i = pairs.len();
        let report = paired::judge(a, b, &pairs, &opts.tolerance);
        let enough = i >= opts.min_pairs && report.settled();
        let per_pair = began.elapsed() / (i.max(1) as u32);
        let no_time = i > 0 && began.elapsed() + per_pair > opts.budget;
        if enough || i >= opts.max_pairs || no_time || cancel.is_cancelled() {
            let why = match () {
                _ if cancel.is_cancelled() => "interrupted",
                _ if enough => "settled",
                _ if i >= opts.max_pairs => "the pairs ran out",
                _ => "another pair would not fit the budget",
            };
            let _ = writeln!(
                out,
                "stopped after {i} pair(s), {} s: {why}",
                began.elapsed().as_secs()
            );
            return match cancel.is_cancelled() && i == 0 {
                true => Err(RunError::Interrupted),
                false => Ok(report),
            };
        }
        let seed = opts.seed + i as u64;
        // A B, B A, A B, …
        let order = if i.is_multiple_of(2) { [0, 1] } else { [1, 0] };
        let mut halves: [Vec<crate::report::Summary>; 2] = [Vec::new(), Vec::new()];
        for side in order {
            let dir = opts
                .out
                .join(format!("pair-{:02}", i + 1))
                .join(["a", "b"][side]);
            let v = [&opts.a, &opts.b][side];
            halves[side] = match run_side(opts, v, &me, seed, &dir, cancel).await {
                // Judged on the pairs complete so far (the loop's head sees the cancel).
                Err(RunError::Interrupted) if !pairs.is_empty() => break,
                other => other?,
            };
        }
        if cancel.is_cancelled() {
            continue;
        }
        let [ha, hb] = halves;
        // The seed it ran on (a resumed pair's own).
        let seed = ha.first().map_or(seed, |s| s.seed);
        let _ = writeln!(out, "pair {} (seed {seed}): {}", i + 1, pair_line(&ha, &hb));
        pairs.push((ha, hb));
    }
}

/// One strategy's sales/s on both halves: `redis-setnx 85.1 → 77.9`.
fn pair_line(a: &[crate::report::Summary], b: &[crate::report::Summary]) -> String {
    let one = |(x, y): (&crate::report::Summary, &crate::report::Summary)| {
        format!(
            "{} {:.1} → {:.1} sales/s",
            y.strategy, x.throughput.sales_per_s, y.throughput.sales_per_s
        )
    };
    a.iter().zip(b).map(one).collect::<Vec<_>>().join(", ")
}

/// One side's comparison as a child process; its summaries in the strategies' order.
async fn run_side(
    opts: &PairedOptions,
    v: &Variant,
    me: &Path,
    seed: u64,
    dir: &Path,
    cancel: &CancellationToken,
) -> Result<Vec<crate::report::Summary>, RunError> {
    let strategies = v.strategies(&opts.strategies);
    if opts.resume && dir.join("compare.json").is_file() {
        let summaries =
            crate::report::gate::load_results(dir).map_err(|e| RunError::Options(e.to_string()))?;
        return in_order(&strategies, summaries, dir);
    }
    let log_path = dir.with_extension("log");
    std::fs::create_dir_all(dir).map_err(super::write_err(dir))?;
    let log = std::fs::File::create(&log_path).map_err(super::write_err(&log_path))?;
    let mut cmd = tokio::process::Command::new(v.bin(me));
    cmd.arg("compare")
        .arg("--workload")
        .arg(&opts.workload)
        .arg("--strategies")
        .arg(strategies.join(","))
        .arg("--out")
        .arg(dir)
        .arg("--set")
        .arg(format!("seed={seed}"));
    for s in opts.sets.iter().chain(&v.sets()) {
        cmd.arg("--set").arg(s);
    }
    let err_log = log.try_clone().map_err(super::write_err(&log_path))?;
    // A group of its own: a terminal's Ctrl-C reaches the gate alone, which passes on one
    // SIGINT (a second would make the child abort its clean-up).
    cmd.stdout(log)
        .stderr(err_log)
        .stdin(std::process::Stdio::null())
        .process_group(0);
    let mut child = cmd
        .spawn()
        .map_err(|e| RunError::Options(format!("starting {}: {e}", v.bin(me).display())))?;
    let status = tokio::select! {
        s = child.wait() => s,
        _ = cancel.cancelled() => {
            // Its own Ctrl-C handler stops its servers; wait for it to finish doing so.
            if let Some(pid) = child.id() {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid as i32),
                    nix::sys::signal::Signal::SIGINT,
                );
            }
            child.wait().await
        }
    }
    .map_err(|e| RunError::Options(e.to_string()))?;
    let found = crate::report::gate::load_results(dir);
    let summaries = match found {
        Ok(s) if status.success() => s,
        _ if cancel.is_cancelled() => return Err(RunError::Interrupted),
        _ => {
            // Its own error line says why (a bad --set, a server that would not start).
            let text = std::fs::read_to_string(&log_path).unwrap_or_default();
            let why = (text.lines().rev())
                .find(|l| l.contains("error"))
                .unwrap_or("no error line");
            return Err(RunError::Options(format!(
                "{}'s comparison failed ({status}): {why} (its output: {})",
                v,
                log_path.display()
            )));
        }
    };
    in_order(&strategies, summaries, dir)
}

/// A side's summaries in the order of its strategies; an error names a missing one.
fn in_order(
    strategies: &[String],
    summaries: Vec<crate::report::Summary>,
    dir: &Path,
) -> Result<Vec<crate::report::Summary>, RunError> {
    (strategies.iter())
        .map(|id| {
            let found = summaries.iter().find(|s| &s.strategy == id).cloned();
            found.ok_or_else(|| {
                RunError::Options(format!("{} has no result of {id}", dir.display()))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_parse_and_bad_ones_say_the_expected_form() {
        assert_eq!("current".parse(), Ok(Variant::Current));
        assert_eq!(
            "bin:/tmp/base/lockbench".parse(),
            Ok(Variant::Bin("/tmp/base/lockbench".into()))
        );
        let v: Variant = "set:critical_section.hold=99ms, load.clients=8"
            .parse()
            .unwrap();
        assert_eq!(v.sets(), ["critical_section.hold=99ms", "load.clients=8"]);
        let v: Variant = "server:redis=valkey-8.0".parse().unwrap();
        assert_eq!(v.sets(), ["servers.redis=valkey-8.0"]);
        let v: Variant = "adapter:redis-py-5".parse().unwrap();
        assert_eq!(v.strategies(&["redis-setnx".into()]), ["lib:redis-py-5"]);
        assert_eq!(Variant::Current.strategies(&["x".into()]), ["x"]);
        for bad in [
            "",
            "set:",
            "set:hold",
            "server:redis",
            "sever:redis=7",
            "foo",
        ] {
            let e = bad.parse::<Variant>().unwrap_err();
            assert!(e.contains("expected"), "{bad}: {e}");
        }
    }
}
