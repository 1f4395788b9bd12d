//! `contend.json`: the cost of contention. For each strategy, closed loops of 1, 2, 4, … N
//! contenders on one key; at each level every trial's grants per second and the acquire wait
//! of every granted attempt, pooled over the trials; per strategy the Universal Scalability
//! Law fitted to the trials ([`super::usl`]). The printed table and the page read this model
//! only, so a folder re-renders without servers. Fields added later are `#[serde(default)]`:
//! an older file still reads.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

use super::format::{decimals, ms_table, samples};
use super::usl::{self, Usl};
use crate::record::contention::Fairness;
use crate::record::{LatencySummary, Pct, quantile};
use crate::strategy::Family;

/// The schema of `contend.json`; a reader accepts every `lockbench.contend/` version.
pub const CONTEND_SCHEMA: &str = "lockbench.contend/1";

/// A whole `contend` command's results.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Contend {
    /// [`CONTEND_SCHEMA`].
    pub schema: String,
    /// Version of lockbench that measured it.
    pub lockbench_version: String,
    /// Wall-clock start (RFC 3339).
    pub started_at: String,
    /// The workload every level starts from.
    pub workload_file: String,
    /// Contender counts asked for, ascending.
    pub levels: Vec<u32>,
    /// Trials asked for at each level.
    pub trials: u32,
    /// Load of one trial, seconds.
    pub trial_s: f64,
    /// Time the whole command may take, seconds.
    #[serde(default)]
    pub budget_s: f64,
    /// Time it took, seconds.
    #[serde(default)]
    pub elapsed_s: f64,
    /// Ctrl-C stopped it: what was measured until then is here.
    #[serde(default)]
    pub interrupted: bool,
    /// One entry per strategy, in the order run.
    #[serde(default)]
    pub entries: Vec<ContendEntry>,
    /// The machine it ran on, measured at its start (absent in older files and the sim's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<super::Machine>,
}

/// One strategy's levels.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ContendEntry {
    /// Strategy id.
    pub strategy: String,
    /// Its family.
    pub family: Family,
    /// The levels measured, ascending.
    #[serde(default)]
    pub levels: Vec<Level>,
    /// The law fitted to every trial of every level.
    #[serde(default)]
    pub usl: Option<Usl>,
    /// Why it stopped early (its servers, a level's run, the budget).
    #[serde(default)]
    pub error: Option<String>,
}

/// One contender count.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Level {
    /// Contenders: buyers in a closed loop on the one key.
    pub contenders: u32,
    /// Grants per second over its trials.
    pub throughput: Spread,
    /// Each trial's acquire-wait median, µs (the maximum of a trial too small to bound it).
    pub acquire_p50_us: Spread,
    /// Each trial's acquire-wait p99, µs (the same rule).
    pub acquire_p99_us: Spread,
    /// Acquire waits over every trial: its granted attempts.
    pub acquire_count: u64,
    /// The fewest any trial had: below a percentile's need ([`quantile::supported`]), that
    /// trial's figure is its maximum.
    pub acquire_fewest: u64,
    /// Jain's index of the buyers' grant shares, over the trials that had it (1 = even).
    #[serde(default)]
    pub jain: Option<Spread>,
    /// What equal odds would read over the same attempts, mean over the trials.
    #[serde(default)]
    pub jain_if_fair: Option<f64>,
    /// Each trial.
    pub trials: Vec<LevelTrial>,
}

impl Level {
    /// A level from its trials.
    pub fn of(contenders: u32, trials: Vec<LevelTrial>) -> Level {
        let each = |f: &dyn Fn(&LevelTrial) -> f64| -> Spread {
            Spread::of(&trials.iter().map(f).collect::<Vec<f64>>())
        };
        let fair: Vec<&Fairness> = trials.iter().filter_map(|t| t.fairness.as_ref()).collect();
        let jain = (!fair.is_empty())
            .then(|| Spread::of(&fair.iter().map(|f| f.jain).collect::<Vec<_>>()));
        let if_fair = (!fair.is_empty())
            .then(|| fair.iter().map(|f| f.jain_if_fair).sum::<f64>() / fair.len() as f64);
        Level {
            contenders,
            throughput: each(&|t| t.grants_per_s),
            acquire_p50_us: each(&|t| t.acquire_us.shown(Pct::P50) as f64),
            acquire_p99_us: each(&|t| t.acquire_us.shown(Pct::P99) as f64),
            acquire_count: trials.iter().map(|t| t.acquire_us.count).sum(),
            acquire_fewest: trials.iter().map(|t| t.acquire_us.count).min().unwrap_or(0),
            jain,
            jain_if_fair: if_fair,
            trials,
        }
    }

    /// Whether every trial had the waits `p` needs.
    pub fn supports(&self, p: Pct) -> bool {
        quantile::supported(p.q(), self.acquire_fewest)
    }

    /// `p`'s spread over the trials.
    pub fn acquire(&self, p: Pct) -> &Spread {
        match p {
            Pct::P50 => &self.acquire_p50_us,
            _ => &self.acquire_p99_us,
        }
    }
}

/// One trial of a level: a closed-loop run of its own.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LevelTrial {
    /// Its folder, relative to the command's.
    pub dir: String,
    /// Attempts granted the lock.
    pub grants: u64,
    /// Seconds from the start of its load to the end of its last attempt.
    pub duration_s: f64,
    /// `grants / duration_s`.
    pub grants_per_s: f64,
    /// Attempts that gave up waiting for the lock (`lock.acquire_timeout`).
    pub lock_timeouts: u64,
    /// Attempts that failed or whose outcome is unknown.
    pub errors: u64,
    /// Its acquire waits, µs: the recorder's (`summary.json`'s `contention.acquire`).
    pub acquire_us: LatencySummary,
    /// Its buyers' grant shares (`contention.fairness`).
    #[serde(default)]
    pub fairness: Option<Fairness>,
    /// Releasing holders that took the key again while another buyer waited.
    #[serde(default)]
    pub barges: u64,
    /// Handoffs while another buyer waited (barges are among them).
    #[serde(default)]
    pub handoffs_with_waiter: u64,
    /// Give-ups during which the key lay free (`contention.missed_wakeups`).
    #[serde(default)]
    pub missed_wakeups: u64,
    /// Its verdict held: the lock held and the store stayed intact.
    pub safe: bool,
    /// It was cut short (Ctrl-C or the level's bound).
    #[serde(default)]
    pub interrupted: bool,
    /// What a sale cost (summary.json's `cost`), for `calibrate`'s counted terms.
    #[serde(default)]
    pub cost: Option<super::work::Cost>,
    /// Its steady environment and what the probe measured (summary.json's `environment`).
    #[serde(default)]
    pub environment: Option<crate::chaos::environment::Environment>,
}

/// Values of several trials: their mean, range and the mean's 95 % interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// Trials.
    pub n: usize,
    /// Their mean.
    pub mean: f64,
    /// The lowest.
    pub min: f64,
    /// The highest.
    pub max: f64,
    /// Student's t interval of the mean (two trials or more).
    pub ci95: Option<(f64, f64)>,
}

impl Spread {
    /// The spread of `values` (`n` = 0 and zeros when empty).
    pub fn of(values: &[f64]) -> Spread {
        let n = values.len();
        if n == 0 {
            return Spread {
                n,
                mean: 0.0,
                min: 0.0,
                max: 0.0,
                ci95: None,
            };
        }
        let mean = values.iter().sum::<f64>() / n as f64;
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let ci95 = (n >= 2).then(|| {
            let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
            let t = StudentsT::new(0.0, 1.0, (n - 1) as f64)
                .map(|d| d.inverse_cdf(0.975))
                .unwrap_or(f64::NAN);
            let half = t * (var / n as f64).sqrt();
            (mean - half, mean + half)
        });
        Spread {
            n,
            mean,
            min,
            max,
            ci95,
        }
    }

    /// `412/s (405–419)`, or `412/s` from one trial.
    pub fn text(&self) -> String {
        let r = |v: f64| decimals(v, if v >= 100.0 { 0 } else { 1 });
        match self.ci95 {
            Some((lo, hi)) => format!("{}/s ({}–{})", r(self.mean), r(lo.max(0.0)), r(hi)),
            None => format!("{}/s", r(self.mean)),
        }
    }
}

impl ContendEntry {
    /// A strategy with nothing measured yet.
    pub fn new(strategy: &str, family: Family) -> Self {
        Self {
            strategy: strategy.to_string(),
            family,
            levels: Vec::new(),
            usl: None,
            error: None,
        }
    }

    /// Fits the law again to every trial of every level.
    pub fn refit(&mut self) {
        let points: Vec<(f64, f64)> = self
            .levels
            .iter()
            .flat_map(|l| {
                l.trials
                    .iter()
                    .map(move |t| (f64::from(l.contenders), t.grants_per_s))
            })
            .collect();
        self.usl = Some(usl::fit(&points));
    }

    /// Its level of `n` contenders.
    pub fn level(&self, n: u32) -> Option<&Level> {
        self.levels.iter().find(|l| l.contenders == n)
    }
}

impl Contend {
    /// Reads `contend.json` (or the folder holding it).
    pub fn read(path: &Path) -> anyhow::Result<Contend> {
        let (c, file): (Contend, _) = super::files::read_saved(path, "contend.json")?;
        anyhow::ensure!(
            c.schema.starts_with("lockbench.contend/"),
            "{}: schema `{}`, this lockbench reads `{CONTEND_SCHEMA}`",
            file.display(),
            c.schema
        );
        Ok(c)
    }

    /// Writes `<dir>/contend.json` whole (through a temporary file, so an interrupted write
    /// never leaves half a file).
    pub fn write(&self, dir: &Path) -> std::io::Result<PathBuf> {
        super::files::write_saved(dir, "contend.json", self)
    }
}

/// A level's acquire percentile: the trials' mean, their range when several, and what the
/// figure rests on: `3.20 ms (2.90–3.61, n=7410)`, or `(…, max of 70)` when some trial had
/// too few waits to bound `p` and gave its maximum; `-` without grants.
pub fn acquire_cell(l: &Level, p: Pct) -> String {
    if l.acquire_count == 0 {
        return "-".into();
    }
    let s = l.acquire(p);
    let n = if l.supports(p) {
        samples(l.acquire_count, true)
    } else {
        samples(l.acquire_fewest, false)
    };
    let ms = |us: f64| ms_table(us.round() as u64);
    if s.n > 1 {
        format!("{} ms ({}–{}, {n})", ms(s.mean), ms(s.min), ms(s.max))
    } else {
        format!("{} ms ({n})", ms(s.mean))
    }
}

/// `0.97 (fair 0.99)`: Jain's index over the trials, beside what equal odds read; `-` without.
pub fn jain_cell(l: &Level) -> String {
    match (&l.jain, l.jain_if_fair) {
        (Some(j), Some(f)) => format!("{:.3} (fair {f:.3})", j.mean),
        _ => "-".into(),
    }
}

/// The table of every strategy's levels, then each one's fit.
pub fn print_contend(out: &mut impl Write, c: &Contend) -> std::io::Result<()> {
    writeln!(
        out,
        "{:<22} {:>4}  {:<20} {:<11} {:<32} {:<32} {:<20} {:>8}",
        "strategy",
        "N",
        "grants/s (95% CI)",
        "trials",
        "acquire p50 (trials)",
        "acquire p99 (trials)",
        "Jain",
        "timeouts"
    )?;
    for e in &c.entries {
        for l in &e.levels {
            let range = format!("{:.0}–{:.0}", l.throughput.min, l.throughput.max);
            let timeouts: u64 = l.trials.iter().map(|t| t.lock_timeouts).sum();
            writeln!(
                out,
                "{:<22} {:>4}  {:<20} {:<11} {:<32} {:<32} {:<20} {:>8}",
                e.strategy,
                l.contenders,
                l.throughput.text(),
                range,
                acquire_cell(l, Pct::P50),
                acquire_cell(l, Pct::P99),
                jain_cell(l),
                timeouts
            )?;
        }
        if let Some(u) = &e.usl {
            writeln!(out, "{:<22} USL: {}", e.strategy, u.text())?;
        }
        if let Some(why) = &e.error {
            writeln!(out, "{:<22} stopped early: {why}", e.strategy)?;
        }
    }
    if c.interrupted {
        writeln!(out, "interrupted: the levels above are what was measured")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spread_of_trials_has_a_t_interval_from_two_on() {
        let one = Spread::of(&[400.0]);
        assert_eq!((one.mean, one.ci95), (400.0, None));
        assert_eq!(one.text(), "400/s");
        let three = Spread::of(&[390.0, 400.0, 410.0]);
        assert_eq!((three.min, three.max, three.n), (390.0, 410.0, 3));
        // s = 10, t(0.975, 2) = 4.303: 400 ± 24.84.
        let (lo, hi) = three.ci95.unwrap();
        assert!(
            (hi - 424.84).abs() < 0.01 && (lo - 375.16).abs() < 0.01,
            "{lo} {hi}"
        );
        assert_eq!(three.text(), "400/s (375–425)");
        assert_eq!(Spread::of(&[]).n, 0);
    }

    fn trial(p50: u64, p99: u64, count: u64) -> LevelTrial {
        LevelTrial {
            dir: "x/n4/trial-1".into(),
            grants: count,
            duration_s: 1.0,
            grants_per_s: count as f64,
            lock_timeouts: 0,
            errors: 0,
            acquire_us: LatencySummary {
                p50,
                p99,
                max: p99 * 2,
                count,
                ..LatencySummary::default()
            },
            fairness: None,
            barges: 0,
            handoffs_with_waiter: 0,
            missed_wakeups: 0,
            safe: true,
            interrupted: false,
            cost: None,
            environment: None,
        }
    }

    #[test]
    fn a_level_spreads_its_trials_percentiles_and_says_what_they_rest_on() {
        let l = Level::of(4, vec![trial(1000, 3000, 400), trial(1200, 5000, 500)]);
        assert_eq!((l.acquire_count, l.acquire_fewest), (900, 400));
        assert_eq!(acquire_cell(&l, Pct::P99), "4.00 ms (3.00–5.00, n=900)");
        assert_eq!(l.throughput.mean, 450.0);
        assert_eq!(jain_cell(&l), "-");
        // A trial of 100 waits cannot bound a p99: it gives its maximum, and the cell says so.
        let l = Level::of(4, vec![trial(1000, 3000, 100), trial(1000, 3000, 400)]);
        assert_eq!(
            acquire_cell(&l, Pct::P99),
            "4.50 ms (3.00–6.00, max of 100)"
        );
        assert_eq!(acquire_cell(&l, Pct::P50), "1.00 ms (1.00–1.00, n=500)");
        let one = Level::of(1, vec![trial(500, 900, 300)]);
        assert_eq!(acquire_cell(&one, Pct::P99), "0.90 ms (n=300)");
        assert_eq!(
            acquire_cell(&Level::of(2, vec![trial(0, 0, 0)]), Pct::P99),
            "-"
        );
    }

    #[test]
    fn an_old_file_without_later_fields_still_reads() {
        let dir = tempfile::tempdir().unwrap();
        let old = r#"{"schema":"lockbench.contend/1","lockbench_version":"0.1.0",
            "started_at":"2026-11-27T13:00:00Z","workload_file":"w.toml","levels":[1,2],
            "trials":1,"trial_s":1.0,"entries":[{"strategy":"redis-setnx","family":"redis-single"}]}"#;
        std::fs::write(dir.path().join("contend.json"), old).unwrap();
        let c = Contend::read(dir.path()).unwrap();
        assert_eq!(c.entries[0].levels.len(), 0);
        assert!(c.entries[0].usl.is_none() && !c.interrupted);
        let mut out = Vec::new();
        print_contend(&mut out, &c).unwrap();
        assert!(String::from_utf8(out).unwrap().starts_with("strategy"));
        std::fs::write(dir.path().join("contend.json"), r#"{"schema":"x"}"#).unwrap();
        assert!(Contend::read(dir.path()).is_err());
    }
}
