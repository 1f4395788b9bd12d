//! The paired gate's verdict (docs/gate.md "The paired gate"): A and B ran side by side, one
//! pair per repetition on one seed, and each figure's change is the ratio B/A of the two halves
//! of a pair. Its centre and 95 % interval over the pairs are the Hodges–Lehmann estimate and
//! the exact Wilcoxon signed-rank interval of the log-ratios ([`crate::stats::signed_rank`]):
//! a machine that slows both halves of a pair moves no ratio.
//!
//! The intervals are simultaneous: each holds 1 − α/k for the k figures compared (Bonferroni),
//! so the whole verdict holds 1 − α. A figure fails only when its whole interval lies beyond the
//! tolerance: a regression shown, not suspected, so that a noisy machine cannot fail a change
//! on its own. It passes when the whole interval lies within the tolerance; between the two it
//! is undecided, and more pairs may decide it. Safety is judged on every run.

use serde::Serialize;

use super::Summary;
use super::format::decimals;
use super::gate::median;
use crate::record::Pct;
use crate::stats::signed_rank::{self, Centre};

/// A rise of p99 smaller than this never fails, whatever the ratio (as the baseline gate).
const P99_FLOOR_US: f64 = super::gate::P99_FLOOR_US;

/// How much worse B may be, and how sure the intervals are.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct PairedTolerance {
    /// Largest accepted drop of sales/s, as a fraction (0.05 = 5 %).
    pub max_throughput_drop: f64,
    /// Largest accepted rise of p99.
    pub max_p99_rise: f64,
    /// Largest accepted rise of a sale's time to sell its hot item out.
    pub max_sold_out_rise: f64,
    /// Of every interval (0.95).
    pub confidence: f64,
}

/// A figure the paired gate compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PairedMetric {
    /// Audited sales/s: lower is worse.
    SalesPerS,
    /// p99 over every arrival: higher is worse.
    P99,
    /// Seconds from the surge until the hot item sold out: higher is worse.
    SoldOut,
}

impl PairedMetric {
    const ALL: [PairedMetric; 3] = [Self::SalesPerS, Self::P99, Self::SoldOut];

    /// The name in tables and in CI files.
    pub fn slug(self) -> &'static str {
        match self {
            Self::SalesPerS => "sales_per_s",
            Self::P99 => "p99_ms",
            Self::SoldOut => "sold_out_s",
        }
    }

    /// The figure of one run; `None` where the run has none to compare (no sell-out, a p99
    /// that is only a lower bound because arrivals never started).
    fn of(self, s: &Summary) -> Option<f64> {
        match self {
            Self::SalesPerS => Some(s.throughput.sales_per_s),
            Self::P99 => (s.latency_us.supports(Pct::P99) && !s.among_unstarted(Pct::P99.q()))
                .then(|| s.latency_us.p99 as f64 / 1e3),
            Self::SoldOut => s.hot_sold_out_s(),
        }
    }

    fn higher_is_worse(self) -> bool {
        self != Self::SalesPerS
    }

    fn tolerance(self, t: &PairedTolerance) -> f64 {
        match self {
            Self::SalesPerS => t.max_throughput_drop,
            Self::P99 => t.max_p99_rise,
            Self::SoldOut => t.max_sold_out_rise,
        }
    }

    /// The ratio B/A beyond which B is worse than the tolerance allows.
    fn threshold(self, t: &PairedTolerance) -> f64 {
        match self.higher_is_worse() {
            true => 1.0 + self.tolerance(t),
            false => 1.0 - self.tolerance(t),
        }
    }
}

/// What one figure's pairs decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// The whole interval is within the tolerance: any change is one the gate accepts.
    Pass,
    /// The whole interval is beyond the tolerance.
    Regression,
    /// Significantly worse and the estimate beyond the tolerance, the interval not wholly
    /// beyond it: suspected, not shown; more pairs may show it. Said, not failed.
    Worse,
    /// The interval spans the tolerance: neither shown.
    Undecided,
    /// Fewer pairs with this figure than an interval needs.
    TooFew,
}

impl Decision {
    /// Whether more pairs could change it.
    pub fn settled(self) -> bool {
        matches!(self, Self::Pass | Self::Regression)
    }

    /// Whether the gate fails on it.
    pub fn fails(self) -> bool {
        self == Self::Regression
    }
}

/// One figure of one strategy over the pairs.
#[derive(Debug, Clone, Serialize)]
pub struct Change {
    pub metric: PairedMetric,
    /// Pairs in which both halves had the figure.
    pub pairs: usize,
    /// Medians over those pairs, A and B.
    pub medians: (f64, f64),
    /// A's lowest and highest over those pairs: how far the machine moved A through the job,
    /// a drift each pair's B shared.
    pub a_range: (f64, f64),
    /// Median sample counts behind a p99, A and B.
    pub n: Option<(u64, u64)>,
    /// B/A: estimate, interval and what it holds; `None` below the fewest pairs.
    pub ratio: Option<Ratio>,
    pub decision: Decision,
    /// The ratio beyond which B fails.
    pub threshold: f64,
}

/// B/A, from the centre of the log-ratios.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Ratio {
    pub estimate: f64,
    pub lower: f64,
    pub upper: f64,
    /// What the interval holds exactly.
    pub confidence: f64,
}

impl From<Centre> for Ratio {
    fn from(c: Centre) -> Self {
        Ratio {
            estimate: c.estimate.exp(),
            lower: c.lower.exp(),
            upper: c.upper.exp(),
            confidence: c.confidence,
        }
    }
}

/// One strategy (A's and B's, which differ only for `adapter:` variants).
#[derive(Debug, Clone, Serialize)]
pub struct PairedRow {
    pub a: String,
    pub b: String,
    /// Pairs with a run of it on both sides.
    pub pairs: usize,
    /// Runs whose verdict is not what the strategy claims (unsafe, or a control not caught),
    /// A and B.
    pub wrong_verdicts: (usize, usize),
    pub changes: Vec<Change>,
    /// Why it fails; empty when it passes.
    pub failures: Vec<String>,
    /// Worth a look, no failure.
    pub notes: Vec<String>,
}

/// The verdict over every strategy.
#[derive(Debug, Clone, Serialize)]
pub struct PairedReport {
    /// The variants, as given.
    pub a: String,
    pub b: String,
    pub pairs: usize,
    pub tolerance: PairedTolerance,
    /// Figures compared over every strategy (k).
    pub figures: usize,
    /// What each interval is asked to hold: 1 − (1 − confidence) / k.
    pub each_confidence: f64,
    pub rows: Vec<PairedRow>,
}

impl PairedReport {
    /// Whether every strategy passed, judged on the pairs so far.
    pub fn passed(&self) -> bool {
        self.rows.iter().all(|r| r.failures.is_empty())
    }

    /// Whether more pairs could change the verdict: not after a safety failure, nor once every
    /// figure is settled.
    pub fn settled(&self) -> bool {
        let safety = self.rows.iter().any(|r| r.wrong_verdicts.1 > 0);
        safety
            || (self.rows.iter())
                .flat_map(|r| &r.changes)
                .all(|c| c.decision.settled())
    }
}

/// One repetition: A's and B's summaries, their strategies in the same order.
pub type Pair = (Vec<Summary>, Vec<Summary>);

/// The verdict on the pairs so far.
pub fn judge(a: &str, b: &str, pairs: &[Pair], tol: &PairedTolerance) -> PairedReport {
    let width = pairs.iter().map(|(x, y)| x.len().min(y.len())).min();
    let rows = |each: f64| -> Vec<PairedRow> {
        (0..width.unwrap_or(0))
            .map(|i| {
                let halves: Vec<(&Summary, &Summary)> =
                    pairs.iter().map(|(x, y)| (&x[i], &y[i])).collect();
                judge_row(&halves, tol, each)
            })
            .collect()
    };
    // Count the figures first: their number sets what each interval must hold.
    let figures = rows(tol.confidence)
        .iter()
        .map(|r| r.changes.len())
        .sum::<usize>();
    let each_confidence = 1.0 - (1.0 - tol.confidence) / figures.max(1) as f64;
    PairedReport {
        a: a.to_string(),
        b: b.to_string(),
        pairs: pairs.len(),
        tolerance: *tol,
        figures,
        each_confidence,
        rows: rows(each_confidence),
    }
}

fn judge_row(halves: &[(&Summary, &Summary)], tol: &PairedTolerance, each: f64) -> PairedRow {
    let wrong = |s: &Summary| s.verdict_holds().is_err();
    let (wa, wb) = halves.iter().fold((0, 0), |(x, y), (a, b)| {
        (x + usize::from(wrong(a)), y + usize::from(wrong(b)))
    });
    let mut row = PairedRow {
        a: halves[0].0.strategy.clone(),
        b: halves[0].1.strategy.clone(),
        pairs: halves.len(),
        wrong_verdicts: (wa, wb),
        changes: PairedMetric::ALL
            .into_iter()
            .filter_map(|m| change(m, halves, tol, each))
            .collect(),
        failures: Vec::new(),
        notes: Vec::new(),
    };
    if wb > 0 {
        let first = halves.iter().find_map(|(_, b)| b.verdict_holds().err());
        let also = match wa {
            0 => "A's were all right".to_string(),
            n => format!("A's too in {n} (not B's doing alone)"),
        };
        row.failures.push(format!(
            "B: {wb} of {} runs not as claimed ({}); {also}",
            halves.len(),
            first.unwrap_or_default()
        ));
    } else if wa > 0 {
        row.notes.push(format!(
            "A: {wa} of {} runs not as claimed; B's all were",
            halves.len()
        ));
    }
    // Fenced is as claimed, but the lock broke: said, never hidden behind "ok".
    let fenced = |s: &&Summary| s.headline() == "fenced";
    let fa = halves.iter().filter(|h| fenced(&h.0)).count();
    let fb = halves.iter().filter(|h| fenced(&h.1)).count();
    if fa + fb > 0 {
        row.notes.push(format!(
            "fenced in {fa} A and {fb} B runs: the lock broke, the store refused every stale write"
        ));
    }
    for c in &row.changes {
        if c.decision.fails() {
            row.failures.push(said_change(c));
        }
    }
    row
}

/// A figure over the pairs where both halves have it; `None` where no pair has it.
fn change(
    m: PairedMetric,
    halves: &[(&Summary, &Summary)],
    tol: &PairedTolerance,
    each: f64,
) -> Option<Change> {
    let both: Vec<(f64, f64)> = halves
        .iter()
        .filter_map(|(a, b)| Some((m.of(a)?, m.of(b)?)))
        .filter(|(a, b)| *a > 0.0 && *b > 0.0)
        .collect();
    if both.is_empty() {
        return None;
    }
    let logs: Vec<f64> = both.iter().map(|(a, b)| (b / a).ln()).collect();
    let ratio = signed_rank::centre(&logs, each).map(Ratio::from);
    let medians = (
        median(both.iter().map(|p| p.0).collect()),
        median(both.iter().map(|p| p.1).collect()),
    );
    let n = (m == PairedMetric::P99).then(|| {
        let count = |f: fn(&(&Summary, &Summary)) -> u64| {
            median(halves.iter().map(|h| f(h) as f64).collect()) as u64
        };
        (
            count(|h| h.0.latency_us.count),
            count(|h| h.1.latency_us.count),
        )
    });
    let threshold = m.threshold(tol);
    let decision = decide(m, ratio, threshold, medians);
    let a_range = both.iter().fold((f64::MAX, f64::MIN), |(lo, hi), p| {
        (lo.min(p.0), hi.max(p.0))
    });
    Some(Change {
        metric: m,
        pairs: both.len(),
        medians,
        a_range,
        n,
        ratio,
        decision,
        threshold,
    })
}

/// The rule of the module's head, for one figure.
fn decide(m: PairedMetric, ratio: Option<Ratio>, threshold: f64, medians: (f64, f64)) -> Decision {
    let Some(r) = ratio else {
        return Decision::TooFew;
    };
    // Orient so that "lower is worse" for every figure.
    let (lo, hi, est, t) = match m.higher_is_worse() {
        true => (
            1.0 / r.upper,
            1.0 / r.lower,
            1.0 / r.estimate,
            1.0 / threshold,
        ),
        false => (r.lower, r.upper, r.estimate, threshold),
    };
    // A p99 rise under a millisecond is scheduling noise, whatever its ratio.
    let material = m != PairedMetric::P99 || (medians.1 - medians.0) * 1e3 >= P99_FLOOR_US;
    if hi < t && material {
        Decision::Regression
    } else if lo >= t || (m == PairedMetric::P99 && !material && hi >= 1.0) {
        Decision::Pass
    } else if hi < 1.0 && est < t && material {
        Decision::Worse
    } else {
        Decision::Undecided
    }
}

/// A p99 that passed on the 1 ms floor, not on its interval.
fn below_floor(c: &Change) -> bool {
    c.metric == PairedMetric::P99 && c.ratio.is_some_and(|r| r.upper > c.threshold)
}

/// The tolerance as a signed change: `-5%`, `+20%`.
fn limit(c: &Change) -> String {
    let pct = (c.threshold - 1.0) * 100.0;
    let sign = if pct >= 0.0 { "+" } else { "" };
    format!("{sign}{}%", decimals(pct, 3))
}

/// `sales_per_s B/A 0.912 (95% 0.905..0.921, 8 pairs): beyond the −5% allowed`.
pub fn said_change(c: &Change) -> String {
    let ratio = match &c.ratio {
        Some(r) => format!(
            "B/A {} ({}% {}..{}, {} pairs)",
            decimals(r.estimate, 3),
            decimals(r.confidence * 100.0, 3),
            decimals(r.lower, 3),
            decimals(r.upper, 3),
            c.pairs
        ),
        None => format!("B/A not estimated ({} pairs)", c.pairs),
    };
    let limit = limit(c);
    let verdict = match c.decision {
        Decision::Pass if below_floor(c) => "the medians within 1 ms of each other".to_string(),
        Decision::Pass => format!("within the {limit} allowed"),
        Decision::Regression => format!("beyond the {limit} allowed"),
        Decision::Worse => format!(
            "suspected: significantly worse, the estimate beyond the {limit} allowed, the \
             interval not wholly beyond it"
        ),
        Decision::Undecided => {
            format!("the interval spans the {limit} allowed: not shown either way")
        }
        Decision::TooFew => "too few pairs for an interval".to_string(),
    };
    format!("{} {ratio}: {verdict}", c.metric.slug())
}

/// The verdict's table, then PASS or FAIL with every failure.
pub fn print(out: &mut dyn std::io::Write, r: &PairedReport) -> std::io::Result<()> {
    let conf = decimals(r.tolerance.confidence * 100.0, 3);
    let each = decimals(r.each_confidence * 100.0, 3);
    writeln!(
        out,
        "paired gate: A = {}, B = {}; {} pair(s) run side by side (ABBA), one seed a pair; B/A \
         with intervals that hold {conf}% together ({each}% each over {} figures; Hodges–Lehmann, \
         exact Wilcoxon signed-rank over the pairs)",
        r.a, r.b, r.pairs, r.figures
    )?;
    writeln!(
        out,
        "{:<24} {:<12} {:>12} {:>12} {:>7}  {:<15} verdict",
        "strategy", "figure", "A median", "B median", "B/A", "interval"
    )?;
    for row in &r.rows {
        let name = match row.a == row.b {
            true => row.a.clone(),
            false => format!("{} → {}", row.a, row.b),
        };
        let claims = |wrong: usize| format!("{}/{} ok", row.pairs - wrong, row.pairs);
        let safety = match row.wrong_verdicts.1 {
            0 => "pass",
            _ => "FAIL",
        };
        writeln!(
            out,
            "{name:<24} {:<12} {:>12} {:>12} {:>7}  {:<15} {safety}",
            "verdicts",
            claims(row.wrong_verdicts.0),
            claims(row.wrong_verdicts.1),
            "",
            ""
        )?;
        for c in &row.changes {
            print_change(out, c)?;
        }
        if let Some(c) = row
            .changes
            .iter()
            .find(|c| c.metric == PairedMetric::SalesPerS)
        {
            writeln!(
                out,
                "{:<24} A's own sales/s ranged {}..{} over the pairs: the drift each B shared",
                "",
                decimals(c.a_range.0, 3),
                decimals(c.a_range.1, 3)
            )?;
        }
        for n in &row.notes {
            writeln!(out, "{:<24} note: {n}", "")?;
        }
    }
    let failures: Vec<String> = (r.rows.iter())
        .flat_map(|row| row.failures.iter().map(move |f| format!("{}: {f}", row.b)))
        .collect();
    match failures.is_empty() {
        true => writeln!(
            out,
            "PASS: no regression beyond the tolerance, every verdict as claimed"
        ),
        false => {
            writeln!(out, "FAIL:")?;
            failures.iter().try_for_each(|f| writeln!(out, "  {f}"))
        }
    }
}

fn print_change(out: &mut dyn std::io::Write, c: &Change) -> std::io::Result<()> {
    let n = |i: usize| match c.n {
        Some(n) => format!(" n={}", if i == 0 { n.0 } else { n.1 }),
        None => String::new(),
    };
    let (est, interval) = match &c.ratio {
        Some(r) => (
            decimals(r.estimate, 3),
            format!("{}..{}", decimals(r.lower, 3), decimals(r.upper, 3)),
        ),
        None => ("-".into(), "-".into()),
    };
    let verdict = match c.decision {
        Decision::Pass if below_floor(c) => "pass (medians within 1 ms)".to_string(),
        Decision::Pass => "pass".to_string(),
        Decision::Regression => "REGRESSION".into(),
        Decision::Worse => "suspected (significant, not shown beyond the limit)".into(),
        Decision::Undecided => "undecided (spans the tolerance)".into(),
        Decision::TooFew => format!("too few pairs ({})", c.pairs),
    };
    let limit = limit(c);
    writeln!(
        out,
        "{:<24} {:<12} {:>12} {:>12} {est:>7}  {interval:<15} {verdict} (limit {limit})",
        "",
        c.metric.slug(),
        format!("{}{}", decimals(c.medians.0, 3), n(0)),
        format!("{}{}", decimals(c.medians.1, 3), n(1)),
    )
}

/// The CI files of a paired verdict (docs/ci-formats.md): JUnit (per strategy a `safety`
/// testcase and one per figure, a failure carrying the figure and its interval), a Markdown
/// table (also appended to `$GITHUB_STEP_SUMMARY`), BMF and github-action-benchmark JSON of B's
/// medians and each ratio B/A with its interval.
pub fn write_ci(r: &PairedReport, files: &super::ci::CiOutputs) -> std::io::Result<()> {
    use serde_json::json;
    let json = |v: &serde_json::Value| serde_json::to_vec_pretty(v).expect("JSON values serialize");
    if let Some(p) = &files.junit {
        let xml = junit(r).to_string().map_err(std::io::Error::other)?;
        std::fs::write(p, xml)?;
    }
    super::ci::write_markdown(files.markdown.as_deref(), &markdown(r))?;
    let figures =
        || (r.rows.iter()).flat_map(|row| row.changes.iter().map(move |c| (row.b.as_str(), c)));
    if let Some(p) = &files.bmf {
        let mut all = serde_json::Map::new();
        for (id, c) in figures() {
            let e = all.entry(id).or_insert_with(|| json!({}));
            e[c.metric.slug()] = json!({ "value": c.medians.1 });
            if let Some(q) = &c.ratio {
                e[format!("{}_ratio", c.metric.slug())] =
                    json!({ "value": q.estimate, "lower_value": q.lower, "upper_value": q.upper });
            }
        }
        std::fs::write(p, json(&serde_json::Value::Object(all)))?;
    }
    if let Some(p) = &files.github_benchmark {
        let entries = |smaller: bool| -> serde_json::Value {
            (figures())
                .filter(|(_, c)| c.metric.higher_is_worse() == smaller)
                .map(|(id, c)| {
                    let range = c.ratio.map(|q| {
                        format!(
                            "B/A {} ({}..{})",
                            decimals(q.estimate, 3),
                            decimals(q.lower, 3),
                            decimals(q.upper, 3)
                        )
                    });
                    json!({ "name": format!("{id} {}", c.metric.slug()), "unit": unit(c.metric),
                            "value": c.medians.1, "range": range.unwrap_or_default(),
                            "extra": said_change(c) })
                })
                .collect()
        };
        std::fs::write(p, json(&entries(true)))?;
        std::fs::write(super::ci::bigger_twin(p), json(&entries(false)))?;
    }
    Ok(())
}

fn unit(m: PairedMetric) -> &'static str {
    match m {
        PairedMetric::SalesPerS => "sales/s",
        PairedMetric::P99 => "ms",
        PairedMetric::SoldOut => "s",
    }
}

/// Suite `lockbench gate A vs B`; per strategy `safety` and one testcase per figure.
fn junit(r: &PairedReport) -> quick_junit::Report {
    use quick_junit::{NonSuccessKind, TestCase, TestCaseStatus, TestSuite};
    let case = |class: &str, name: &str, failure: Option<String>, out: String| {
        let status = match failure {
            None => TestCaseStatus::success(),
            Some(why) => {
                let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
                s.set_message(why);
                s
            }
        };
        let mut t = TestCase::new(name.to_string(), status);
        t.set_classname(class.to_string()).set_system_out(out);
        t
    };
    let mut suite = TestSuite::new(format!("lockbench gate {} vs {}", r.a, r.b));
    for row in &r.rows {
        let safety = format!(
            "verdicts as claimed: A {}/{}, B {}/{}",
            row.pairs - row.wrong_verdicts.0,
            row.pairs,
            row.pairs - row.wrong_verdicts.1,
            row.pairs
        );
        let safety = match row.notes.is_empty() {
            true => safety,
            false => format!("{safety}; {}", row.notes.join("; ")),
        };
        let failed = (row.wrong_verdicts.1 > 0).then(|| row.failures[0].clone());
        suite.add_test_case(case(&row.b, "safety", failed, safety));
        for c in &row.changes {
            let said = said_change(c);
            let failed = c.decision.fails().then(|| said.clone());
            suite.add_test_case(case(&row.b, c.metric.slug(), failed, said));
        }
    }
    let mut report = quick_junit::Report::new("lockbench");
    report.add_test_suite(suite);
    report
}

/// A short table for a pull request.
fn markdown(r: &PairedReport) -> String {
    let mut md = format!(
        "### lockbench gate: {} vs {} ({} pairs) — {}\n\n| strategy | figure | A | B | B/A (95% interval) | verdict |\n|---|---|---|---|---|---|\n",
        r.a,
        r.b,
        r.pairs,
        if r.passed() { "pass" } else { "**FAIL**" }
    );
    for row in &r.rows {
        let ok = |w: usize| format!("{}/{} as claimed", row.pairs - w, row.pairs);
        let v = if row.wrong_verdicts.1 > 0 {
            "**FAIL**"
        } else {
            "pass"
        };
        md.push_str(&format!(
            "| {} | safety | {} | {} | | {v} |\n",
            row.b,
            ok(row.wrong_verdicts.0),
            ok(row.wrong_verdicts.1)
        ));
        for c in &row.changes {
            let ratio = c.ratio.map_or("-".to_string(), |q| {
                format!(
                    "{} ({}..{})",
                    decimals(q.estimate, 3),
                    decimals(q.lower, 3),
                    decimals(q.upper, 3)
                )
            });
            let v = match c.decision.fails() {
                true => "**FAIL**".to_string(),
                false => format!("{:?}", c.decision).to_lowercase(),
            };
            md.push_str(&format!(
                "| {} | {} | {} | {} | {ratio} | {v} |\n",
                row.b,
                c.metric.slug(),
                decimals(c.medians.0, 3),
                decimals(c.medians.1, 3)
            ));
        }
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOL: PairedTolerance = PairedTolerance {
        max_throughput_drop: 0.05,
        max_p99_rise: 0.20,
        max_sold_out_rise: 0.10,
        confidence: 0.95,
    };

    /// The committed fixture as `strategy` with these sales/s and p99 (µs), safe or not.
    fn run(strategy: &str, sales: f64, p99_us: u64, safe: bool) -> Summary {
        let mut s: Summary =
            serde_json::from_str(include_str!("../../tests/fixtures/summary.json")).unwrap();
        s.strategy = strategy.into();
        s.claims_safety = true;
        s.throughput.sales_per_s = sales;
        s.latency_us.p99 = p99_us;
        s.not_started = 0;
        s.lock_verdict = Some(match safe {
            true => crate::check::LockVerdict::Held,
            false => crate::check::LockVerdict::Broken,
        });
        s.store_verdict = match safe {
            true => crate::check::StoreVerdict::Intact,
            false => crate::check::StoreVerdict::Corrupted,
        };
        s.safe = safe;
        s
    }

    /// Pairs of one strategy: A at 100 sales/s × drift, B at `b_over_a` of it, with ±2 %
    /// noise that differs between the halves.
    fn pairs(n: usize, b_over_a: f64, drift: impl Fn(usize) -> f64) -> Vec<Pair> {
        let noise = [
            0.02, -0.01, 0.015, -0.02, 0.0, 0.01, -0.015, 0.005, -0.005, 0.02,
        ];
        (0..n)
            .map(|i| {
                let a = 100.0 * drift(i) * (1.0 + noise[i % 10]);
                let b = 100.0 * drift(i) * b_over_a * (1.0 - noise[(i + 3) % 10]);
                (
                    vec![run("x", a, 50_000, true)],
                    vec![run("x", b, 50_000, true)],
                )
            })
            .collect()
    }

    fn sales(r: &PairedReport) -> &Change {
        let c = r.rows[0]
            .changes
            .iter()
            .find(|c| c.metric == PairedMetric::SalesPerS);
        c.unwrap()
    }

    #[test]
    fn a_tenth_slower_fails_and_the_same_build_passes_through_a_machine_that_halves_its_speed() {
        let slow = judge("current", "set:hold", &pairs(8, 0.90, |_| 1.0), &TOL);
        assert_eq!(
            sales(&slow).decision,
            Decision::Regression,
            "{:?}",
            sales(&slow)
        );
        assert!(!slow.passed() && slow.settled());
        let r = sales(&slow).ratio.unwrap();
        assert!(r.lower < 0.90 && 0.90 < r.upper && r.upper < 0.95, "{r:?}");
        // The machine halves its speed from pair 4 on: both halves of a pair slow alike.
        let same = judge(
            "current",
            "current",
            &pairs(8, 1.0, |i| if i < 4 { 1.0 } else { 0.5 }),
            &TOL,
        );
        assert_eq!(sales(&same).decision, Decision::Pass, "{:?}", sales(&same));
        let (lo, hi) = sales(&same).a_range;
        assert!(lo < 0.55 * hi, "A's range shows the drift: {lo}..{hi}");
        assert!(same.passed() && same.settled());
    }

    #[test]
    fn a_suspected_slowdown_is_said_but_only_one_shown_beyond_the_tolerance_fails() {
        // Every B below its A, by 1 % to 15 %: significant, the estimate past −5 %, but the
        // interval reaches within the tolerance.
        let ratios = [0.93, 0.90, 0.92, 0.97, 0.99, 0.90, 0.85, 0.96];
        let p: Vec<Pair> = ratios
            .iter()
            .map(|r| {
                (
                    vec![run("x", 100.0, 50_000, true)],
                    vec![run("x", 100.0 * r, 50_000, true)],
                )
            })
            .collect();
        let r = judge("a", "b", &p, &TOL);
        let c = sales(&r);
        assert_eq!(c.decision, Decision::Worse, "{c:?}");
        assert!(r.passed() && !r.settled());
        assert!(said_change(c).contains("suspected"), "{}", said_change(c));
        // Two figures (sales/s, p99): each interval holds 97.5 %, together 95 %.
        assert_eq!(r.figures, 2);
        assert!((r.each_confidence - 0.975).abs() < 1e-12);
        assert!(c.ratio.unwrap().confidence >= 0.975);
    }

    #[test]
    fn too_few_pairs_decide_nothing_and_fail_nothing() {
        let r = judge("current", "set:hold", &pairs(5, 0.5, |_| 1.0), &TOL);
        assert_eq!(sales(&r).decision, Decision::TooFew);
        assert!(r.passed() && !r.settled());
    }

    #[test]
    fn a_p99_rise_under_a_millisecond_never_fails() {
        let mut p = pairs(8, 1.0, |_| 1.0);
        for (_, b) in &mut p {
            b[0].latency_us.p99 = 50_900; // +1.8 %, 0.9 ms
        }
        let r = judge("a", "b", &p, &TOL);
        let p99 = r.rows[0]
            .changes
            .iter()
            .find(|c| c.metric == PairedMetric::P99);
        assert!(!p99.unwrap().decision.fails(), "{p99:?}");
        for (_, b) in &mut p {
            b[0].latency_us.p99 = 80_000; // +60 %
        }
        let r = judge("a", "b", &p, &TOL);
        let p99 = r.rows[0]
            .changes
            .iter()
            .find(|c| c.metric == PairedMetric::P99)
            .unwrap();
        assert_eq!(p99.decision, Decision::Regression);
    }

    #[test]
    fn one_unsafe_run_of_b_fails_at_once_and_a_control_must_stay_caught() {
        let mut p = pairs(2, 1.0, |_| 1.0);
        p[1].1[0] = run("x", 100.0, 50_000, false);
        let r = judge("a", "b", &p, &TOL);
        assert!(!r.passed() && r.settled());
        assert!(
            r.rows[0].failures[0].starts_with("B: 1 of 2 runs not as claimed"),
            "{:?}",
            r.rows[0].failures
        );
        // A control (claims no safety) caught on A, not on B.
        let mut p = pairs(2, 1.0, |_| 1.0);
        for (a, b) in &mut p {
            a[0] = run("ctl", 100.0, 50_000, false);
            a[0].claims_safety = false;
            b[0].strategy = "ctl".into();
            b[0].claims_safety = false;
        }
        let r = judge("a", "b", &p, &TOL);
        assert_eq!(r.rows[0].wrong_verdicts, (0, 2));
        assert!(!r.passed());
        // Fenced: as claimed, and the note says the lock broke.
        let mut p = pairs(2, 1.0, |_| 1.0);
        p[0].1[0].lock_verdict = Some(crate::check::LockVerdict::BrokenFenced);
        let r = judge("a", "b", &p, &TOL);
        assert!(r.passed(), "{:?}", r.rows[0].failures);
        assert_eq!(
            r.rows[0].notes,
            ["fenced in 0 A and 1 B runs: the lock broke, the store refused every stale write"]
        );
    }

    #[test]
    fn the_ci_files_carry_the_failure_with_its_interval() {
        let r = judge("current", "set:hold", &pairs(8, 0.90, |_| 1.0), &TOL);
        let xml = junit(&r).to_string().unwrap();
        let back = quick_junit::Report::deserialize_from_str(&xml).unwrap();
        let suite = &back.test_suites[0];
        assert_eq!(suite.name.as_str(), "lockbench gate current vs set:hold");
        assert_eq!(suite.failures, 1, "{xml}");
        assert!(
            xml.contains(
                "sales_per_s B/A 0.896 (97.656% 0.878..0.916, 8 pairs): beyond the -5% allowed"
            ),
            "{xml}"
        );
        let md = markdown(&r);
        assert_contains!(md, "**FAIL**", "| x | sales_per_s |");
    }
}
