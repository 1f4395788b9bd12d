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
    /// `p99=100ms` (also `p99.9=20ms`, `p50=5ms`): the flag's form.
    pub fn parse(s: &str) -> Result<(f64, f64), String> {
        let bad =
            || format!("`{s}`: expected pNN=DURATION, e.g. p99=100ms (percentile 0 < NN < 100)");
        let (p, d) = s.trim().split_once('=').ok_or_else(bad)?;
        let p = p.trim().strip_prefix('p').ok_or_else(bad)?;
        let pct: f64 = p.parse().map_err(|_| bad())?;
        if !(pct > 0.0 && pct < 100.0) {
            return Err(bad());
        }
        let d = humantime::parse_duration(d.trim()).map_err(|_| bad())?;
        if d.is_zero() {
            return Err(format!("`{s}`: the latency bound must be above zero"));
        }
        Ok((pct / 100.0, d.as_secs_f64() * 1000.0))
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
    /// Even the lowest rate failed: the capacity is below it (`capacity_per_s` is 0).
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
    /// Whether it met the SLO (latency and served fraction) with the store intact.
    pub passed: bool,
    /// Why it failed, in words with the numbers (empty when it passed).
    pub why: String,
    /// The judged percentile over every scheduled arrival, in ms.
    pub latency_ms: f64,
    /// Whether that percentile fell among arrivals never served within the load (its value is
    /// then a lower bound).
    pub latency_censored: bool,
    /// Sold or "sold out" answers over every scheduled arrival.
    pub served_fraction: f64,
    /// Folder of this step's results, relative to sweep.json.
    pub dir: String,
    /// The step's full summary (also in `<dir>/summary.json`).
    pub summary: Summary,
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
    /// The highest rate the search may offer.
    pub max_per_s: f64,
    /// The ramp multiplies the rate by this until a step fails.
    pub factor: f64,
    /// Bisection steps (geometric midpoints) between the last pass and the first failure.
    pub refinements: u32,
    /// Load duration of one step, in seconds.
    pub step_s: f64,
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
            "99=100ms", "p100=1s", "p0=1s", "p99", "p99=fast", "p99=0s", "px=1s",
        ] {
            let e = Slo::parse(bad).unwrap_err();
            assert!(e.contains(bad.trim()), "{bad}: {e}");
        }
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
