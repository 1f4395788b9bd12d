//! `sweep.json`: the capacity of each strategy at a latency target (SLO), with every step of
//! the search that found it. Written by `lockbench sweep` (see `run::sweep`), read by the
//! report and by `compare --rate-from`.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::Summary;
use crate::strategy::{Family, Kind};

/// Schema id of `sweep.json`; bump on any incompatible change.
pub const SWEEP_SCHEMA: &str = "lockbench.sweep/1";

/// The latency target a step must meet to count as sustained.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Slo {
    /// The percentile judged, as a quantile (0.99 for p99), over every scheduled arrival
    /// (an arrival never started counts as slower than every served one).
    pub quantile: f64,
    /// Its bound, in milliseconds.
    pub latency_ms: f64,
    /// The least fraction of scheduled arrivals that must be served (sold or told "sold out").
    pub min_served: f64,
}

impl Slo {
    /// `p99=100ms` (also `p50`, `p90`, `p99.9`: the percentiles every summary carries over
    /// every arrival): the flag's form. Returns (quantile, bound in ms).
    pub fn parse(s: &str) -> Result<(f64, f64), String> {
        let bad = || {
            format!("`{s}`: expected pNN=DURATION with NN one of 50, 90, 99, 99.9, e.g. p99=100ms")
        };
        let (p, d) = s.trim().split_once('=').ok_or_else(bad)?;
        let pct = match p.trim() {
            "p50" => 50.0,
            "p90" => 90.0,
            "p99" => 99.0,
            "p99.9" => 99.9,
            _ => return Err(bad()),
        };
        let d = humantime::parse_duration(d.trim()).map_err(|_| bad())?;
        if d.is_zero() {
            return Err(format!("`{s}`: the latency bound must be above zero"));
        }
        Ok((pct / 100.0, d.as_secs_f64() * 1000.0))
    }

    /// The judged percentile of every arrival in `s`, in µs.
    fn latency_us(&self, s: &Summary) -> u64 {
        let l = &s.latency_us;
        match (self.quantile * 1000.0).round() as u64 {
            500 => l.p50,
            900 => l.p90,
            990 => l.p99,
            _ => l.p999,
        }
    }

    /// `p99 ≤ 100 ms, ≥ 99% served`.
    pub fn label(&self) -> String {
        format!(
            "{} ≤ {} ms, ≥ {}% served",
            self.percentile_name(),
            trim(self.latency_ms),
            trim(self.min_served * 100.0)
        )
    }

    /// `p99`, `p99.9`.
    pub fn percentile_name(&self) -> String {
        format!("p{}", trim(self.quantile * 100.0))
    }
}

fn trim(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// How the search bounded the capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Bound {
    /// A step passed at `capacity_per_s` and one failed at `first_failing_per_s`, within the
    /// search's resolution.
    Found,
    /// Even the lowest rate offered failed (`first_failing_per_s`): the capacity is below it
    /// (`capacity_per_s` is 0).
    BelowLowest,
    /// Even the highest rate the search may offer passed: the capacity is at least that.
    AtLeastMax,
    /// The search stopped early (an error, Ctrl-C): `capacity_per_s` is the best passed so far.
    Incomplete,
}

/// One short open-loop run at one offered rate.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Step {
    /// Offered arrivals per second.
    pub rate_per_s: f64,
    /// Whether it met the SLO: the percentile within its bound and enough arrivals served.
    pub passed: bool,
    /// Why it failed, in words with the numbers (empty when it passed).
    pub why: String,
    /// The judged percentile over every scheduled arrival, in ms.
    pub latency_ms: f64,
    /// Whether that percentile fell among arrivals never served within the load (its value is
    /// then a lower bound).
    pub latency_censored: bool,
    /// Sold, "sold out", locked (the lock alone) or read answers over every scheduled arrival.
    pub served_fraction: f64,
    /// Folder of this step's results, relative to sweep.json.
    pub dir: String,
    /// The step's full summary (also in `<dir>/summary.json`).
    pub summary: Summary,
}

impl Step {
    /// Judges a step's summary against the SLO. Safety does not enter: capacity is about
    /// latency and service, and an unsafe step is reported beside it (`Entry::unsafe_steps`),
    /// never hidden by a low capacity.
    pub fn judge(summary: Summary, rate_per_s: f64, slo: &Slo, dir: String) -> Step {
        let scheduled = summary.attempts + summary.not_started;
        // Reads are served too (a torn one was answered: safety is judged apart).
        let served: u64 = ["sold", "sold_out", "locked", "read", "torn_read"]
            .iter()
            .filter_map(|k| summary.outcomes.get(*k))
            .sum();
        let served_fraction = if scheduled == 0 {
            0.0
        } else {
            served as f64 / scheduled as f64
        };
        let us = slo.latency_us(&summary);
        let latency_ms = us as f64 / 1000.0;
        let latency_censored = super::table::among_unstarted(&summary, slo.quantile);
        let mut why = Vec::new();
        if scheduled == 0 {
            why.push("no arrival was scheduled".to_string());
        }
        if latency_ms > slo.latency_ms {
            let plus = if latency_censored { "+" } else { "" };
            why.push(format!(
                "{} {}{plus} ms > {} ms",
                slo.percentile_name(),
                trim((latency_ms * 10.0).round() / 10.0),
                trim(slo.latency_ms)
            ));
        }
        if served_fraction < slo.min_served {
            why.push(format!(
                "served {}% < {}% ({served} of {scheduled})",
                trim((served_fraction * 1000.0).floor() / 10.0),
                trim(slo.min_served * 100.0)
            ));
        }
        if summary.interrupted {
            why.push("interrupted".to_string());
        }
        Step {
            rate_per_s,
            passed: why.is_empty(),
            why: why.join("; "),
            latency_ms,
            latency_censored,
            served_fraction,
            dir,
            summary,
        }
    }
}

/// One strategy's capacity and the steps that found it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entry {
    /// Strategy id.
    pub strategy: String,
    /// Its family (the report's grouping).
    pub family: Family,
    /// Lock, lock-free or control.
    pub kind: Kind,
    /// The highest offered rate (arrivals/s) seen to meet the SLO; 0 when none did.
    pub capacity_per_s: f64,
    /// How the search bounded it.
    pub bound: Bound,
    /// The lowest offered rate seen to fail, when one did.
    pub first_failing_per_s: Option<f64>,
    /// Every step was judged safe (lock held or none, store intact). A control is never safe.
    pub safe: bool,
    /// Steps whose verdict was not safe, by rate: the sweep is also a safety run.
    pub unsafe_steps: Vec<f64>,
    /// Why the search stopped early, when it did.
    pub error: Option<String>,
    /// Every step, in the order run.
    pub steps: Vec<Step>,
}

/// How the rates were searched.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Search {
    /// The first rate offered.
    pub start_per_s: f64,
    /// The lowest rate the search may offer when the first one fails (it ramps down).
    pub min_per_s: f64,
    /// The highest rate the search may offer.
    pub max_per_s: f64,
    /// The ramp multiplies the rate by this until a step fails.
    pub factor: f64,
    /// Bisection steps (geometric midpoints) between the last pass and the first failure.
    pub refinements: u32,
    /// Load duration of one step, in seconds (a slow rate runs up to twice as long).
    pub step_s: f64,
    /// Arrivals a step aims for, so its percentile is not its maximum.
    pub min_arrivals: u64,
}

/// The whole of `sweep.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sweep {
    /// [`SWEEP_SCHEMA`].
    pub schema: String,
    /// Version of lockbench that ran it.
    pub lockbench_version: String,
    /// RFC 3339 start time.
    pub started_at: String,
    /// The latency target.
    pub slo: Slo,
    /// How the rates were searched.
    pub search: Search,
    /// Where the workload came from.
    pub workload_file: String,
    /// One entry per strategy, in the order swept.
    pub entries: Vec<Entry>,
    /// Wall-clock seconds the sweep took.
    pub elapsed_s: f64,
}

impl Entry {
    /// `≥ 6400/s`, `< 1.56/s`, `283/s`: the capacity with its bound.
    pub fn capacity_text(&self) -> String {
        let r = rate_text;
        match self.bound {
            Bound::AtLeastMax => format!("≥ {}/s", r(self.capacity_per_s)),
            Bound::BelowLowest => format!("< {}/s", r(self.first_failing_per_s.unwrap_or(0.0))),
            Bound::Found => format!("{}/s", r(self.capacity_per_s)),
            Bound::Incomplete => format!("{}/s so far (incomplete)", r(self.capacity_per_s)),
        }
    }

    /// Why the first failing step failed, if one did.
    pub fn first_miss(&self) -> Option<&Step> {
        let f = self.first_failing_per_s?;
        self.steps.iter().find(|s| s.rate_per_s == f && !s.passed)
    }
}

/// `400`, `283`, `12.5`: a rate as a folder name and in tables.
pub fn rate_text(r: f64) -> String {
    if r.fract() == 0.0 {
        format!("{r:.0}")
    } else {
        format!("{r}")
    }
}

/// Prints the capacity table: one row per strategy, by family.
pub fn print_capacity(out: &mut impl std::io::Write, sweep: &Sweep) -> std::io::Result<()> {
    writeln!(
        out,
        "capacity at {} (offered arrivals/s)",
        sweep.slo.label()
    )?;
    let width = sweep
        .entries
        .iter()
        .map(|e| e.strategy.len())
        .max()
        .unwrap_or(8);
    writeln!(
        out,
        "{:<width$}  {:<18}  {:>14}  {:>10}  {:>5}  {:<6}  first miss",
        "strategy", "family", "capacity", "misses at", "steps", "safety"
    )?;
    let mut entries: Vec<&Entry> = sweep.entries.iter().collect();
    entries.sort_by_key(|e| e.family);
    for e in entries {
        let safety = if e.kind == Kind::Control {
            if e.unsafe_steps.is_empty() {
                "not caught"
            } else {
                "caught"
            }
        } else if e.safe {
            "safe"
        } else {
            "UNSAFE"
        };
        let miss = match (&e.error, e.first_miss()) {
            (Some(err), _) => format!("error: {err}"),
            (None, Some(s)) => s.why.clone(),
            (None, None) => String::new(),
        };
        writeln!(
            out,
            "{:<width$}  {:<18}  {:>14}  {:>10}  {:>5}  {:<6}  {miss}",
            e.strategy,
            e.family.title(),
            e.capacity_text(),
            e.first_failing_per_s
                .map_or("-".into(), |r| format!("{}/s", rate_text(r))),
            e.steps.len(),
            safety
        )?;
    }
    writeln!(out, "took {:.0} s", sweep.elapsed_s)
}

impl Sweep {
    /// Reads `<dir>/sweep.json` (or the file itself).
    pub fn read(path: &Path) -> anyhow::Result<Sweep> {
        use anyhow::Context;
        let file = if path.is_dir() {
            path.join("sweep.json")
        } else {
            path.to_path_buf()
        };
        let text = std::fs::read(&file).with_context(|| format!("read {}", file.display()))?;
        let sweep: Sweep = serde_json::from_slice(&text)
            .with_context(|| format!("{}: not a sweep.json", file.display()))?;
        anyhow::ensure!(
            sweep.schema == SWEEP_SCHEMA,
            "{}: schema `{}`, this lockbench reads `{SWEEP_SCHEMA}`",
            file.display(),
            sweep.schema
        );
        Ok(sweep)
    }

    /// Writes `<dir>/sweep.json` (after every strategy, so an interrupted sweep keeps what it
    /// measured).
    pub fn write(&self, dir: &Path) -> std::io::Result<std::path::PathBuf> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join("sweep.json");
        let tmp = dir.join("sweep.json.tmp");
        std::fs::write(
            &tmp,
            serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?,
        )?;
        std::fs::rename(&tmp, &path)?;
        Ok(path)
    }

    /// The entry of `strategy`.
    pub fn entry(&self, strategy: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.strategy == strategy)
    }

    /// The rate to offer `strategy`: `share` of its capacity. A capacity that is a lower
    /// bound (`≥ max`) is used as it is; one below the lowest rate offered has no rate.
    pub fn rate_for(&self, strategy: &str, share: f64) -> Result<f64, String> {
        let e = self
            .entry(strategy)
            .ok_or_else(|| format!("`{strategy}` is not in the sweep"))?;
        match e.bound {
            Bound::Found | Bound::AtLeastMax if e.capacity_per_s > 0.0 => {
                Ok(e.capacity_per_s * share)
            }
            Bound::Incomplete => Err(format!(
                "the sweep of `{strategy}` did not finish ({})",
                e.error.as_deref().unwrap_or("stopped")
            )),
            _ => Err(format!(
                "`{strategy}` met the SLO at no rate the sweep offered (down to {}/s)",
                e.first_failing_per_s.unwrap_or(self.search.min_per_s)
            )),
        }
    }

    /// The lowest capacity among the strategies seen safe at every step with a capacity
    /// found (controls never count), and whose it is: a rate every such strategy sustains.
    pub fn common_rate(&self) -> Option<(f64, &str)> {
        self.entries
            .iter()
            .filter(|e| e.safe && e.kind != Kind::Control && e.capacity_per_s > 0.0)
            .filter(|e| matches!(e.bound, Bound::Found | Bound::AtLeastMax))
            .map(|e| (e.capacity_per_s, e.strategy.as_str()))
            .min_by(|a, b| a.0.total_cmp(&b.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slo_flag_parses_percentile_and_bound() {
        assert_eq!(Slo::parse("p99=100ms").unwrap(), (0.99, 100.0));
        let (q, ms) = Slo::parse(" p99.9 = 1s ").unwrap();
        assert!((q - 0.999).abs() < 1e-12 && ms == 1000.0);
        for bad in [
            "99=100ms", "p100=1s", "p95=1s", "p99", "p99=fast", "p99=0s", "px=1s",
        ] {
            let e = Slo::parse(bad).unwrap_err();
            assert!(e.contains(bad.trim()), "{bad}: {e}");
        }
    }

    fn summary(attempts: u64, not_started: u64, sold: u64, p99_us: u64) -> Summary {
        let text = include_str!("../../tests/fixtures/summary.json");
        let mut s: Summary = serde_json::from_str(text).expect("the fixture parses");
        (s.attempts, s.not_started, s.interrupted) = (attempts, not_started, false);
        s.outcomes = [("sold".to_string(), sold)].into_iter().collect();
        s.latency_us.p99 = p99_us;
        s
    }

    const SLO: Slo = Slo {
        quantile: 0.99,
        latency_ms: 100.0,
        min_served: 0.99,
    };

    #[test]
    fn a_step_passes_only_within_the_bound_and_serving_enough() {
        let ok = Step::judge(summary(1000, 0, 995, 99_000), 500.0, &SLO, "x".into());
        assert!(ok.passed, "{}", ok.why);
        let slow = Step::judge(summary(1000, 0, 1000, 100_500), 500.0, &SLO, "x".into());
        assert!(
            !slow.passed && slow.why.contains("p99 100.5 ms > 100 ms"),
            "{}",
            slow.why
        );
        // 2% of the arrivals never answered "sold" (lock timeouts): fast, yet not sustained.
        let few = Step::judge(summary(1000, 0, 980, 5_000), 500.0, &SLO, "x".into());
        assert!(
            !few.passed && few.why.contains("served 98% < 99%"),
            "{}",
            few.why
        );
    }

    #[test]
    fn unstarted_arrivals_fail_a_step_and_mark_its_percentile_a_lower_bound() {
        // 3% never started: the p99 of every arrival lands among them.
        let s = Step::judge(summary(970, 30, 970, 2_000_000), 500.0, &SLO, "x".into());
        assert!(!s.passed && s.latency_censored, "{s:?}");
        assert!(s.why.contains("p99 2000+ ms"), "{}", s.why);
        let s = Step::judge(summary(1000, 0, 1000, 2_000), 500.0, &SLO, "x".into());
        assert!(!s.latency_censored);
    }

    #[test]
    fn slo_label_reads_plainly() {
        let slo = Slo {
            quantile: 0.99,
            latency_ms: 100.0,
            min_served: 0.99,
        };
        assert_eq!(slo.label(), "p99 ≤ 100 ms, ≥ 99% served");
    }
}
