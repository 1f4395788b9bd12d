//! `model.json`: what one grant of each lock costs in time, split into what round trips and
//! fsyncs add, fitted from runs with both made slower on purpose (`lockbench calibrate`), and
//! capacity on one hot key predicted from it for another network and disk (`lockbench
//! predict`). Pure: the runs are `run::calibrate`'s.
//!
//! For one hot key the physics is a queue of one: N contenders take turns, so grants/s is
//! 1 / (time per grant), and time per grant is the critical section plus the handoff. Every
//! round trip on that serial path adds the network's round trip, every fsync on it the disk's.
//! So per strategy, with every trial at its injected round trip `r` and fsync `f` (ms added to
//! this machine's own):
//!
//! ```text
//! ms per grant = base + per_rtt · r + per_fsync · f
//! ```
//!
//! `per_rtt` reads as the round trips on the serial path of one grant, `per_fsync` as its
//! serial fsyncs. They are measured, not assumed (weighted least squares over every trial,
//! relative errors alike: [`crate::stats::ols`]), and set beside what the client wrappers and
//! the servers counted per sale (`cost`), which includes work off the serial path.

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::format::decimals;
use crate::record::machine::Machine;
use crate::stats::ols::{self, Fitted};
use crate::strategy::Family;

/// The schema of `model.json`.
pub const MODEL_SCHEMA: &str = "lockbench.model/1";
/// How close a held-out point's prediction must come to what was measured: the issue's bar.
pub const CHECK_TOLERANCE: f64 = 0.25;
/// Confidence of every interval here.
const CONFIDENCE: f64 = 0.95;

/// Round trip and fsync time, ms: what was added to this machine's, or a user's absolute.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Env {
    pub rtt_ms: f64,
    pub fsync_ms: f64,
}

impl Env {
    /// `rtt 1 ms, fsync 2 ms`.
    pub fn text(&self) -> String {
        format!(
            "rtt {} ms, fsync {} ms",
            decimals(self.rtt_ms, 2),
            decimals(self.fsync_ms, 2)
        )
    }
}

/// One strategy at one environment: its trials.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Point {
    pub strategy: String,
    pub family: Family,
    /// What was injected (`environment.rtt`, `environment.fsync`).
    pub injected: Env,
    /// What the runs' probes measured, absolute, the trials' mean (a client's TCP connect to
    /// a lock node; an fdatasync in a data directory); `None` when not probed.
    #[serde(default)]
    pub measured_rtt_ms: Option<f64>,
    #[serde(default)]
    pub measured_fsync_ms: Option<f64>,
    /// Each trial's grants per second.
    pub grants_per_s: Vec<f64>,
    /// Its contend folder, relative to the model's.
    pub dir: String,
    /// Held out of the fit: a check of the prediction.
    pub held_out: bool,
    /// Counted per sale at this point (client wrappers' round trips, the servers' fsyncs),
    /// the trials' mean; `None` where nothing counts them.
    #[serde(default)]
    pub round_trips_per_sale: Option<f64>,
    #[serde(default)]
    pub fsyncs_per_sale: Option<f64>,
}

/// A coefficient and its 95 % interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Coef {
    pub value: f64,
    pub lo: f64,
    pub hi: f64,
}

impl Coef {
    /// Whether the interval excludes 0: the term moves the figure measurably.
    pub fn needed(&self) -> bool {
        self.lo > 0.0 || self.hi < 0.0
    }

    fn text(&self, places: usize) -> String {
        format!(
            "{} ({}–{})",
            decimals(self.value, places),
            decimals(self.lo, places),
            decimals(self.hi, places)
        )
    }
}

/// One strategy's fitted model.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Fit {
    pub strategy: String,
    pub family: Family,
    /// Trials fitted, over how many points.
    pub trials: usize,
    pub points: usize,
    /// ms per grant on this machine as it is.
    pub base_ms: Coef,
    /// ms per grant per ms of round trip: round trips on one grant's serial path.
    pub per_rtt: Coef,
    /// ms per grant per ms of fsync: fsyncs on one grant's serial path.
    pub per_fsync: Coef,
    /// Weighted R².
    pub r2: Option<f64>,
    /// One trial's relative scatter around the fit (σ̂), %.
    pub scatter_pct: f64,
    /// The fitted range of each term, ms added: a prediction outside it extrapolates.
    pub rtt_range: (f64, f64),
    pub fsync_range: (f64, f64),
    /// This machine's own round trip and fsync (its fingerprint's), which the probes' figures
    /// are taken over; `None` without a fingerprint (then injected values are used).
    pub here: Option<Env>,
    /// What predicting needs again: the coefficients' covariance and σ̂² and dof.
    pub cov: Vec<Vec<f64>>,
    pub sigma2: f64,
    pub dof: usize,
}

/// A capacity predicted for one environment.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Predicted {
    /// Grants per second on one key.
    pub grants_per_s: f64,
    /// The 95 % interval of one new trial (an upper end of `None`: unbounded).
    pub lo: f64,
    pub hi: Option<f64>,
    /// Outside the fitted range of a term.
    pub extrapolated: bool,
}

/// A held-out point: predicted against measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Check {
    pub strategy: String,
    /// Added to this machine's, as injected.
    pub at: Env,
    pub predicted: Predicted,
    /// The trials' mean grants/s and their count.
    pub measured: f64,
    pub measured_n: usize,
    /// measured / predicted − 1.
    pub error: f64,
    /// |error| ≤ [`CHECK_TOLERANCE`].
    pub within: bool,
    /// When not within: the term whose point was furthest from the fit's, in words.
    pub missing: Option<String>,
}

/// A whole `calibrate` command's results.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Model {
    pub schema: String,
    pub lockbench_version: String,
    pub started_at: String,
    pub workload_file: String,
    /// Contenders of every trial, on one key.
    pub contenders: u32,
    pub trials: u32,
    pub trial_s: f64,
    pub machine: Option<Machine>,
    pub points: Vec<Point>,
    pub fits: Vec<Fit>,
    pub checks: Vec<Check>,
    /// Strategies that stopped, and why.
    #[serde(default)]
    pub errors: Vec<(String, String)>,
}

impl Fit {
    fn fitted(&self) -> Fitted {
        Fitted {
            beta: vec![self.base_ms.value, self.per_rtt.value, self.per_fsync.value],
            cov: self.cov.clone(),
            sigma2: self.sigma2,
            dof: self.dof,
            r2: self.r2,
        }
    }

    /// Capacity with `added` round trip and fsync time over this machine's, `cpu` the ratio
    /// of this machine's CPU score to the target's (1: same CPU). The base term is not split
    /// into CPU and the rest (nothing here varies the CPU), so a different CPU widens the
    /// interval to cover the base scaled fully and not at all.
    pub fn predict(&self, added: Env, cpu: f64) -> Predicted {
        let f = self.fitted();
        let x = [1.0, added.rtt_ms, added.fsync_ms];
        let mean = f.at(&x);
        let (lo, hi) = f.new_observation(&x, 1.0 / (mean * mean).max(1e-12), CONFIDENCE);
        let shift = self.base_ms.value * (cpu - 1.0);
        let (lo, hi) = (lo + shift.min(0.0), hi + shift.max(0.0));
        let outside = |v: f64, (a, b): (f64, f64)| v < a - 1e-9 || v > b + 1e-9;
        Predicted {
            grants_per_s: 1000.0 / (mean + shift / 2.0).max(1e-9),
            lo: 1000.0 / hi,
            hi: (lo > 0.0).then(|| 1000.0 / lo),
            extrapolated: outside(added.rtt_ms, self.rtt_range)
                || outside(added.fsync_ms, self.fsync_range)
                || cpu != 1.0,
        }
    }
}

/// The x of a point, each term: 0 where nothing was injected; else what its probe measured
/// over this machine's own (`here`), else what was injected.
fn added(p: &Point, here: Option<Env>) -> Env {
    let term = |injected: f64, measured: Option<f64>, own: Option<f64>| match (measured, own) {
        _ if injected == 0.0 => 0.0,
        (Some(m), Some(h)) => (m - h).max(0.0),
        _ => injected,
    };
    Env {
        rtt_ms: term(p.injected.rtt_ms, p.measured_rtt_ms, here.map(|h| h.rtt_ms)),
        fsync_ms: term(
            p.injected.fsync_ms,
            p.measured_fsync_ms,
            here.map(|h| h.fsync_ms),
        ),
    }
}

/// This machine's own round trip and fsync, from its fingerprint: the loopback and fdatasync
/// medians probed before any server started.
pub fn machine_env(m: Option<&Machine>) -> Option<Env> {
    let m = m?;
    Some(Env {
        rtt_ms: m.loopback.as_ref()?.p50_us / 1000.0,
        fsync_ms: m.fdatasync.as_ref()?.latency.p50_us / 1000.0,
    })
}

/// Fits one strategy from its points that were not held out, `here` this machine's own round
/// trip and fsync. `None` when they cannot tell the terms apart (fewer than 4 trials, or a
/// term never varied).
pub fn fit(points: &[&Point], here: Option<Env>) -> Option<Fit> {
    let used: Vec<&&Point> = points.iter().filter(|p| !p.held_out).collect();
    let first = used.first()?;
    let zero = here;
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for p in &used {
        let a = added(p, zero);
        for &g in p.grants_per_s.iter().filter(|g| **g > 0.0) {
            x.push(vec![1.0, a.rtt_ms, a.fsync_ms]);
            y.push(1000.0 / g);
        }
    }
    let w: Vec<f64> = y.iter().map(|v| 1.0 / (v * v)).collect();
    let f = ols::fit(&x, &y, &w)?;
    let coef = |j: usize| {
        let (lo, hi) = f.coefficient(j, CONFIDENCE);
        Coef {
            value: f.beta[j],
            lo,
            hi,
        }
    };
    let range = |j: usize| {
        x.iter()
            .map(|r| r[j])
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
                (a.min(v), b.max(v))
            })
    };
    Some(Fit {
        strategy: first.strategy.clone(),
        family: first.family,
        trials: y.len(),
        points: used.len(),
        base_ms: coef(0),
        per_rtt: coef(1),
        per_fsync: coef(2),
        r2: f.r2,
        scatter_pct: f.sigma2.sqrt() * 100.0,
        rtt_range: range(1),
        fsync_range: range(2),
        here: zero,
        cov: f.cov,
        sigma2: f.sigma2,
        dof: f.dof,
    })
}

/// A held-out point judged against its strategy's fit.
pub fn check(fit: &Fit, p: &Point) -> Option<Check> {
    let n = p.grants_per_s.len();
    if n == 0 {
        return None;
    }
    let measured = p.grants_per_s.iter().sum::<f64>() / n as f64;
    let predicted = fit.predict(added(p, fit.here), 1.0);
    let error = measured / predicted.grants_per_s - 1.0;
    let within = error.abs() <= CHECK_TOLERANCE;
    Some(Check {
        strategy: p.strategy.clone(),
        at: p.injected,
        predicted,
        measured,
        measured_n: n,
        error,
        within,
        missing: (!within).then(|| missing_term(fit, p, error)),
    })
}

/// Why a held-out point missed, from what the fit lacks: a point beyond a term's fitted range
/// asks the term to stay linear where it was not seen; inside, the terms do not add (they
/// interact: a slower disk lengthens the round trip that waits on it, or the other way).
fn missing_term(fit: &Fit, p: &Point, error: f64) -> String {
    let a = added(p, fit.here);
    let beyond = |v: f64, (lo, hi): (f64, f64)| v < lo || v > hi;
    let slower = if error < 0.0 { "slower" } else { "faster" };
    if beyond(a.rtt_ms, fit.rtt_range) || beyond(a.fsync_ms, fit.fsync_range) {
        format!("measured {slower} than predicted beyond the fitted range: a term is not linear")
    } else {
        format!(
            "measured {slower} than predicted inside the fitted range: round trip and fsync \
             do not add independently (the model has no interaction term)"
        )
    }
}

impl Model {
    /// A model with no point yet: `contenders` on one key, `trials` of `trial_s` a point, on
    /// `machine`.
    pub fn empty(
        workload_file: &str,
        (contenders, trials, trial_s): (u32, u32, f64),
        machine: Option<Machine>,
    ) -> Model {
        Model {
            schema: MODEL_SCHEMA.to_string(),
            lockbench_version: env!("CARGO_PKG_VERSION").to_string(),
            started_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            workload_file: workload_file.to_string(),
            contenders,
            trials,
            trial_s,
            machine,
            points: Vec::new(),
            fits: Vec::new(),
            checks: Vec::new(),
            errors: Vec::new(),
        }
    }

    /// Fits every strategy and checks its held-out points.
    pub fn conclude(&mut self) {
        let mut ids: Vec<&str> = self.points.iter().map(|p| p.strategy.as_str()).collect();
        ids.dedup();
        let (mut fits, mut checks) = (Vec::new(), Vec::new());
        let here = machine_env(self.machine.as_ref());
        for id in ids {
            let mine: Vec<&Point> = self.points.iter().filter(|p| p.strategy == id).collect();
            let Some(f) = fit(&mine, here) else { continue };
            checks.extend((mine.iter().filter(|p| p.held_out)).filter_map(|p| check(&f, p)));
            fits.push(f);
        }
        (self.fits, self.checks) = (fits, checks);
    }

    /// Writes `<dir>/model.json`.
    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(dir.join("model.json"), text + "\n")
    }

    /// Reads a model.json.
    pub fn read(path: &Path) -> Result<Model, String> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            format!(
                "{}: {e}; expected the model.json `lockbench calibrate` wrote",
                path.display()
            )
        })?;
        let m: Model = serde_json::from_str(&text).map_err(|e| {
            format!(
                "{}: {e}; expected a lockbench.model/ JSON file",
                path.display()
            )
        })?;
        if !m.schema.starts_with("lockbench.model/") {
            return Err(format!(
                "{}: schema = {:?}: expected lockbench.model/1",
                path.display(),
                m.schema
            ));
        }
        Ok(m)
    }
}

/// The fits: each term with its interval, the counted costs beside them.
pub fn print_fits(out: &mut dyn Write, m: &Model) -> std::io::Result<()> {
    writeln!(
        out,
        "time per grant on one key, {} contenders, {} trial(s) of {} s a point (95 % intervals):",
        m.contenders,
        m.trials,
        decimals(m.trial_s, 1)
    )?;
    writeln!(
        out,
        "{:<22} {:>6} {:>22} {:>22} {:>22} {:>8} {:>6} {:>10} {:>10}",
        "strategy",
        "trials",
        "base ms/grant",
        "serial round trips",
        "serial fsyncs",
        "scatter",
        "R²",
        "counted rt",
        "fsyncs"
    )?;
    for f in &m.fits {
        let counted = |g: &dyn Fn(&Point) -> Option<f64>| {
            (m.points.iter())
                .find(|p| p.strategy == f.strategy && !p.held_out)
                .and_then(g)
                .map_or("-".into(), |v| decimals(v, 2))
        };
        writeln!(
            out,
            "{:<22} {:>6} {:>22} {:>22} {:>22} {:>7}% {:>6} {:>10} {:>10}",
            f.strategy,
            f.trials,
            f.base_ms.text(2),
            f.per_rtt.text(2),
            f.per_fsync.text(2),
            decimals(f.scatter_pct, 1),
            f.r2.map_or("-".into(), |r| decimals(r, 2)),
            counted(&|p| p.round_trips_per_sale),
            counted(&|p| p.fsyncs_per_sale),
        )?;
    }
    for (id, e) in &m.errors {
        writeln!(out, "{id:<22} stopped: {e}")?;
    }
    Ok(())
}

/// The held-out points: predicted against measured.
pub fn print_checks(out: &mut dyn Write, m: &Model) -> std::io::Result<()> {
    if m.checks.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "held out of the fit (within ±{} %):",
        decimals(CHECK_TOLERANCE * 100.0, 0)
    )?;
    for c in &m.checks {
        writeln!(
            out,
            "{:<22} at {:<24} predicted {:>9}/s {:<22} measured {:>9}/s (n={})  {:>+6}%  {}",
            c.strategy,
            c.at.text(),
            decimals(c.predicted.grants_per_s, 0),
            interval(&c.predicted),
            decimals(c.measured, 0),
            c.measured_n,
            decimals(c.error * 100.0, 1),
            if c.within {
                "within".to_string()
            } else {
                format!("MISSED: {}", c.missing.as_deref().unwrap_or(""))
            }
        )?;
    }
    Ok(())
}

/// This machine's own round trip and fsync, which a user's absolute figures are taken over:
/// the fit's, else none (then what the user gives is taken as added).
pub fn here(m: &Model, f: &Fit) -> Env {
    (f.here.or_else(|| machine_env(m.machine.as_ref()))).unwrap_or(Env {
        rtt_ms: 0.0,
        fsync_ms: 0.0,
    })
}

/// Each strategy's capacity in the environment `at` (absolute), `cpu_score` the target's.
pub fn print_predictions(
    out: &mut dyn Write,
    m: &Model,
    at: Env,
    cpu_score: Option<f64>,
) -> std::io::Result<()> {
    let score_here = (m.machine.as_ref())
        .and_then(|m| m.cpu_score.as_ref())
        .map(|s| s.m_per_s);
    let cpu = match (score_here, cpu_score) {
        (Some(h), Some(t)) if t > 0.0 => h / t,
        _ => 1.0,
    };
    writeln!(
        out,
        "capacity on one key, {} contenders, at {} (95 % interval of one trial there):",
        m.contenders,
        at.text()
    )?;
    if cpu_score.is_some() && score_here.is_none() {
        writeln!(
            out,
            "(the model's machine has no CPU score: --cpu-score is ignored)"
        )?;
    }
    writeln!(
        out,
        "{:<22} {:>10} {:<20} {:<28} note",
        "strategy", "grants/s", "interval", "this machine"
    )?;
    for f in &m.fits {
        let h = here(m, f);
        let added = Env {
            rtt_ms: at.rtt_ms - h.rtt_ms,
            fsync_ms: at.fsync_ms - h.fsync_ms,
        };
        let p = f.predict(added, cpu);
        writeln!(
            out,
            "{:<22} {:>10} {:<20} {:<28} {}",
            f.strategy,
            decimals(p.grants_per_s, 0),
            interval(&p),
            h.text(),
            if p.extrapolated {
                "extrapolated: beyond the fitted range, or another CPU"
            } else {
                ""
            }
        )?;
    }
    Ok(())
}

/// `(lo–hi)`, or `(≥ lo)` when unbounded above.
pub fn interval(p: &Predicted) -> String {
    match p.hi {
        Some(hi) => format!("({}–{})", decimals(p.lo, 0), decimals(hi, 0)),
        None => format!("(≥ {})", decimals(p.lo, 0)),
    }
}

/// A point of three trials ±3 % around `ms_per_grant`, injected `(rtt, fsync)`, for tests.
#[cfg(test)]
pub(crate) fn fixture_point(id: &str, at: (f64, f64), held_out: bool, ms_per_grant: f64) -> Point {
    let g = 1000.0 / ms_per_grant;
    Point {
        strategy: id.into(),
        family: Family::Consensus,
        injected: Env {
            rtt_ms: at.0,
            fsync_ms: at.1,
        },
        measured_rtt_ms: None,
        measured_fsync_ms: None,
        grants_per_s: vec![g * 0.97, g, g * 1.03],
        dir: String::new(),
        held_out,
        round_trips_per_sale: None,
        fsyncs_per_sale: None,
    }
}

/// A fingerprint whose loopback and fdatasync medians are these, CPU score 100, for tests.
#[cfg(test)]
pub(crate) fn fixture_machine(rtt_ms: f64, fsync_ms: f64) -> Machine {
    use crate::record::machine::{CpuScore, DiskSync, Latency};
    let latency = |ms: f64| Latency {
        n: 100,
        p50_us: ms * 1000.0,
        p99_us: ms * 2000.0,
        max_us: ms * 3000.0,
    };
    Machine {
        cpu_model: "test".into(),
        cores: 2,
        usable_cores: 2,
        cpu_score: Some(CpuScore {
            m_per_s: 100.0,
            rounds: 3,
            optimized: true,
        }),
        fdatasync: Some(DiskSync {
            path: "/x".into(),
            fs: None,
            write_bytes: 4096,
            latency: latency(fsync_ms),
        }),
        loopback: Some(latency(rtt_ms)),
        psi: None,
        unmeasured: Vec::new(),
        probe_s: 1.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(
        id: &str,
        rtt: f64,
        fsync: f64,
        held_out: bool,
        truth: &dyn Fn(f64, f64) -> f64,
    ) -> Point {
        fixture_point(id, (rtt, fsync), held_out, truth(rtt, fsync))
    }

    fn model(points: Vec<Point>) -> Model {
        let mut m = Model::empty("w.toml", (8, 3, 2.0), None);
        m.points = points;
        m.conclude();
        m
    }

    const GRID: [(f64, f64); 6] = [
        (0.0, 0.0),
        (1.0, 0.0),
        (2.0, 0.0),
        (0.0, 2.0),
        (0.0, 4.0),
        (2.0, 4.0),
    ];

    #[test]
    fn a_linear_lock_is_recovered_and_its_held_out_point_checks() {
        // 2 ms base, 3 round trips and 1 fsync on the serial path.
        let truth = |r: f64, f: f64| 2.0 + 3.0 * r + f;
        let mut pts: Vec<Point> = GRID
            .iter()
            .map(|&(r, f)| point("zk", r, f, false, &truth))
            .collect();
        pts.push(point("zk", 1.5, 3.0, true, &truth));
        let m = model(pts);
        let f = &m.fits[0];
        assert!(
            f.per_rtt.lo < 3.0 && 3.0 < f.per_rtt.hi && f.per_rtt.needed(),
            "{:?}",
            f.per_rtt
        );
        assert!(
            f.per_fsync.lo < 1.0 && 1.0 < f.per_fsync.hi,
            "{:?}",
            f.per_fsync
        );
        let c = &m.checks[0];
        assert!(c.within && c.error.abs() < 0.05, "{c:?}");
        let p = c.predicted;
        let want = 1000.0 / truth(1.5, 3.0);
        assert!(p.lo < want && want < p.hi.unwrap(), "{p:?}");
        assert!(!p.extrapolated);
    }

    #[test]
    fn a_lock_the_disk_does_not_touch_needs_no_fsync_term() {
        let truth = |r: f64, _f: f64| 1.0 + 2.0 * r;
        let pts: Vec<Point> = GRID
            .iter()
            .map(|&(r, f)| point("redis", r, f, false, &truth))
            .collect();
        let f = &model(pts).fits[0];
        assert!(!f.per_fsync.needed(), "{:?}", f.per_fsync);
        assert!(f.per_rtt.needed());
    }

    #[test]
    fn a_held_out_point_the_model_cannot_follow_is_missed_and_says_why() {
        // Round trip and fsync multiply: a linear fit on the edges misses the inside.
        let truth = |r: f64, f: f64| 1.0 + r + f + 3.0 * r * f;
        let mut pts: Vec<Point> = GRID[..5]
            .iter()
            .map(|&(r, f)| point("x", r, f, false, &truth))
            .collect();
        pts.push(point("x", 1.5, 3.0, true, &truth));
        let c = &model(pts).checks[0];
        assert!(!c.within, "{c:?}");
        assert!(
            c.missing.as_deref().unwrap().contains("interaction"),
            "{c:?}"
        );
    }

    #[test]
    fn a_point_outside_the_fitted_range_is_flagged_and_a_cpu_widens() {
        let truth = |r: f64, f: f64| 2.0 + r + f;
        let pts: Vec<Point> = GRID
            .iter()
            .map(|&(r, f)| point("y", r, f, false, &truth))
            .collect();
        let f = &model(pts).fits[0];
        let inside = f.predict(
            Env {
                rtt_ms: 1.0,
                fsync_ms: 1.0,
            },
            1.0,
        );
        assert!(!inside.extrapolated);
        assert!(
            f.predict(
                Env {
                    rtt_ms: 5.0,
                    fsync_ms: 1.0
                },
                1.0
            )
            .extrapolated
        );
        let slower_cpu = f.predict(
            Env {
                rtt_ms: 1.0,
                fsync_ms: 1.0,
            },
            2.0,
        );
        assert!(slower_cpu.lo < inside.lo && slower_cpu.extrapolated);
    }

    #[test]
    fn measured_environments_replace_the_injected_ones() {
        // The injector adds 0.5 ms more than asked; the probes saw it.
        let truth = |r: f64, f: f64| 2.0 + 3.0 * r + f;
        let pts: Vec<Point> = GRID
            .iter()
            .map(|&(r, f)| {
                let real = if r > 0.0 { r + 0.5 } else { 0.0 };
                let mut p = point("z", real, f, false, &truth);
                p.injected = Env {
                    rtt_ms: r,
                    fsync_ms: f,
                };
                p.measured_rtt_ms = (r > 0.0).then_some(0.1 + real);
                p.measured_fsync_ms = (f > 0.0).then_some(0.8 + f);
                p
            })
            .collect();
        let mut m = model(pts);
        m.machine = Some(fixture_machine(0.1, 0.8));
        m.conclude();
        let f = &m.fits[0];
        assert!((f.per_rtt.value - 3.0).abs() < 0.1, "{:?}", f.per_rtt);
        assert_eq!(
            f.here,
            Some(Env {
                rtt_ms: 0.1,
                fsync_ms: 0.8
            })
        );
    }
}
