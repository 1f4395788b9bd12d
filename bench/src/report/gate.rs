//! The regression gate: a current set of results against a committed baseline.
//!
//! Both sides hold repetitions of each strategy (every `compare.json`, `summary.json` or
//! `baseline.json` below a folder counts as one repetition). Safety is judged on every
//! repetition, because one oversell is one too many. A strategy fails when
//! - it was safe in every baseline repetition (lock held, store intact: the tables' verdict)
//!   and now is not in some repetition — its lock broke (two holders at once, or a lease lost
//!   while held), fenced or not, or its store was corrupted;
//! - it is a control that the baseline caught and the current run does not (the checker, or the
//!   fault that triggers it, went blind);
//! - its sales/s (or reads/s) fell, or its p99 rose, both **significantly** against the
//!   baseline's own spread and **beyond the tolerance** on the medians (a p99 rise under
//!   [`P99_FLOOR_US`] is noise, not a regression);
//! - it is in the baseline but was not run.
//!
//! Significance: a one-sided exact Mann–Whitney U test per strategy and metric, across
//! repetitions, with Holm's correction over every test of the gate. Why this test rather than a
//! bootstrap interval of the ratio of medians: with the 5–6 repetitions CI can afford, a
//! bootstrap resamples a handful of values and its interval is too narrow (its coverage is
//! well below nominal), whereas the exact U test needs no distribution (a run's throughput is
//! skewed by stalls of the shared machine) and its error rate under "same build" is exactly α.
//! Being exact, it also says when it cannot decide: n vs m repetitions can never give a p below
//! 1 / C(n+m, n) (3 vs 3: 0.05), and the gate then says so instead of pretending. Holm keeps the
//! chance of any false alarm over all strategies and metrics at α (12 tests are one gate, not 12
//! chances to fail); the tolerance keeps a tiny but consistent change from failing CI.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::format::{p_value, percent_change, percent_round};
use super::{SCHEMA, Summary};
use crate::check::Verdict;

/// Schema id of `baseline.json`.
pub const BASELINE_SCHEMA: &str = "lockbench.baseline/2";

/// Errors reading results.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    /// A file could not be read or parsed.
    #[error("{}: {detail}", path.display())]
    Read { path: PathBuf, detail: String },
    /// A folder holds no results at all.
    #[error(
        "{}: no results found (expected compare.json, summary.json or baseline.json in it or in \
         its subfolders)", .0.display()
    )]
    Empty(PathBuf),
}

/// A committed baseline: the summary of every repetition of every strategy (the spread the
/// gate's test compares against).
#[derive(Debug, Serialize, Deserialize)]
pub struct Baseline {
    /// Always [`BASELINE_SCHEMA`].
    pub schema: String,
    /// One entry per strategy and repetition.
    pub runs: Vec<Summary>,
}

/// A p99 that rose by less than this never fails, whatever the ratio: below a millisecond,
/// scheduling noise on a shared machine moves p99 by tens of percent.
pub const P99_FLOOR_US: f64 = 1000.0;

/// How much slower is still a pass, and how sure a failure must be.
#[derive(Debug, Clone, Copy)]
pub struct Tolerance {
    /// Largest accepted drop of median sales/s (and reads/s), as a fraction (0.15 = 15 %).
    pub max_throughput_drop: f64,
    /// Largest accepted rise of median p99, as a fraction.
    pub max_p99_rise: f64,
    /// Chance of a false alarm over the whole gate (Holm over every test), e.g. 0.05.
    pub alpha: f64,
}

/// A speed figure the gate tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Audited sales/s: lower is worse.
    SalesPerS,
    /// Reads/s of a read–write run: lower is worse.
    ReadsPerS,
    /// p99 latency in µs over every arrival: higher is worse.
    P99Us,
}

impl Metric {
    fn name(self) -> &'static str {
        match self {
            Metric::SalesPerS => "sales/s",
            Metric::ReadsPerS => "reads/s",
            Metric::P99Us => "p99",
        }
    }

    fn of(self, s: &Summary) -> f64 {
        match self {
            Metric::SalesPerS => s.throughput.sales_per_s,
            Metric::ReadsPerS => s.throughput.reads_per_s,
            Metric::P99Us => s.latency_us.p99 as f64,
        }
    }

    fn higher_is_worse(self) -> bool {
        self == Metric::P99Us
    }

    /// Whether `base → cur` (medians) is worse than the tolerance allows.
    fn beyond(self, base: f64, cur: f64, tol: &Tolerance) -> bool {
        match self {
            Metric::P99Us => cur > base * (1.0 + tol.max_p99_rise) && cur - base >= P99_FLOOR_US,
            _ => cur < base * (1.0 - tol.max_throughput_drop),
        }
    }

    fn limit(self, tol: &Tolerance) -> String {
        match self {
            Metric::P99Us => format!("+{}", percent_round(tol.max_p99_rise)),
            _ => format!("-{}", percent_round(tol.max_throughput_drop)),
        }
    }

    /// A median as the table prints it (p99 in ms).
    fn show(self, v: f64) -> String {
        match self {
            Metric::P99Us => format!("{:.2} ms", v / 1000.0),
            _ => format!("{v:.1}"),
        }
    }
}

/// One metric of one strategy, tested.
#[derive(Debug, Clone, Serialize)]
pub struct SpeedTest {
    /// What was compared.
    pub metric: Metric,
    /// Repetitions in the baseline / current results.
    pub repetitions: (usize, usize),
    /// Medians over the repetitions, baseline and current.
    pub medians: (f64, f64),
    /// One-sided exact Mann–Whitney p: how likely a current side at least this much worse
    /// would be if both sides were draws of one build.
    pub p: f64,
    /// The smallest p these numbers of repetitions can give (1 / C(n+m, n)).
    pub smallest_p: f64,
    /// The level `p` met or missed under Holm's correction.
    pub level: f64,
    /// `p` at most `level`.
    pub significant: bool,
    /// Whether the medians moved past the tolerance.
    pub beyond_tolerance: bool,
    /// The repetitions cannot reach the gate's first Holm level (α / tests): judged on the
    /// tolerance alone.
    pub untestable: bool,
}

/// One strategy's comparison.
#[derive(Debug, Clone, Serialize)]
pub struct GateRow {
    /// Strategy id.
    pub strategy: String,
    /// Repetitions in the baseline / current results.
    pub repetitions: (usize, usize),
    /// Median audited sales/s, baseline and current.
    pub sales_per_s: (f64, f64),
    /// Median p99 latency (µs), baseline and current.
    pub p99_us: (u64, u64),
    /// Whether every repetition was safe (lock held, store intact).
    pub safe: (bool, bool),
    /// The speed tests (none when either side is missing).
    pub tests: Vec<SpeedTest>,
    /// Why it failed; empty when it passed.
    pub failures: Vec<String>,
    /// Worth a look, but no failure.
    pub notes: Vec<String>,
}

/// The verdict over every strategy.
#[derive(Debug, Clone, Serialize)]
pub struct GateReport {
    /// One row per strategy of either side.
    pub rows: Vec<GateRow>,
    /// The family-wise false-alarm level.
    pub alpha: f64,
    /// How many speed tests Holm's correction spans.
    pub tests: usize,
    /// Set when some test cannot reach significance with these repetitions: says so plainly.
    pub untestable: Option<String>,
}

impl GateReport {
    /// Whether every row passed.
    pub fn passed(&self) -> bool {
        self.rows.iter().all(|r| r.failures.is_empty())
    }
}

/// Reads every repetition below `dir`: a folder with `compare.json` or `baseline.json` is
/// read whole (its per-strategy subfolders are the same runs again); else its `summary.json`;
/// else its subfolders.
pub fn load_results(dir: &Path) -> Result<Vec<Summary>, GateError> {
    let mut out = Vec::new();
    collect(dir, &mut out)?;
    if out.is_empty() {
        return Err(GateError::Empty(dir.to_path_buf()));
    }
    Ok(out)
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, GateError> {
    let err = |detail: String| GateError::Read {
        path: path.to_path_buf(),
        detail,
    };
    let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
    serde_json::from_str(&text).map_err(|e| {
        // A result of another schema names itself, so say that rather than which field is off.
        let value: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        let schemas: std::collections::BTreeSet<&str> = [&value]
            .into_iter()
            .chain(value.as_array().into_iter().flatten())
            .chain(value["runs"].as_array().into_iter().flatten())
            .filter_map(|v| v["schema"].as_str())
            .filter(|s| *s != SCHEMA && *s != BASELINE_SCHEMA)
            .collect();
        match schemas.first() {
            Some(old) => err(format!(
                "written in schema {old:?}, this lockbench reads {SCHEMA:?} and \
                 {BASELINE_SCHEMA:?}: re-record it (for a baseline: scripts/ci-gate.sh \
                 --update-baseline)"
            )),
            None => err(format!("not a lockbench result: {e}")),
        }
    })
}

fn collect(dir: &Path, out: &mut Vec<Summary>) -> Result<(), GateError> {
    let baseline = dir.join("baseline.json");
    if baseline.is_file() {
        let b: Baseline = read_json(&baseline)?;
        if b.schema != BASELINE_SCHEMA {
            return Err(GateError::Read {
                path: baseline,
                detail: format!("schema {:?}, expected {BASELINE_SCHEMA:?}", b.schema),
            });
        }
        out.extend(b.runs);
        return Ok(());
    }
    let compare = dir.join("compare.json");
    if compare.is_file() {
        out.extend(read_json::<Vec<Summary>>(&compare)?);
        return Ok(());
    }
    let summary = dir.join("summary.json");
    if summary.is_file() {
        out.push(read_json(&summary)?);
        return Ok(());
    }
    let entries = std::fs::read_dir(dir).map_err(|e| GateError::Read {
        path: dir.to_path_buf(),
        detail: e.to_string(),
    })?;
    let mut dirs: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for d in dirs {
        collect(&d, out)?;
    }
    Ok(())
}

/// The median; 0 of none.
pub(super) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The tables' verdict (from the lock and store verdicts they print), so the gate and the
/// tables never disagree about a run.
pub fn violated(s: &Summary) -> bool {
    !s.verdict().safe()
}

/// C(n, k) as a float (exact up to 2^53, far beyond any number of repetitions).
fn choose(n: usize, k: usize) -> f64 {
    (0..k.min(n - k)).fold(1.0, |c, i| c * (n - i) as f64 / (i + 1) as f64)
}

/// The smallest one-sided p that `n` vs `m` repetitions can give: one arrangement of C(n+m, n).
pub fn smallest_p(n: usize, m: usize) -> f64 {
    1.0 / choose(n + m, n)
}

/// Above this many arrangements, the U test samples them instead of listing every one.
const EXACT_LIMIT: f64 = 200_000.0;

/// One-sided Mann–Whitney U: the chance that `cur` ranks at least this far towards "worse"
/// than `base` if both were draws of one distribution. Ranks are mid-ranks (ties share), and
/// the p is exact over every split of the pooled values (sampled, with a fixed seed, past
/// [`EXACT_LIMIT`] splits).
pub fn mann_whitney(base: &[f64], cur: &[f64], higher_is_worse: bool) -> f64 {
    if base.is_empty() || cur.is_empty() {
        return 1.0;
    }
    let sign = if higher_is_worse { 1.0 } else { -1.0 };
    let pooled: Vec<f64> = base.iter().chain(cur).map(|v| v * sign).collect();
    let ranks = midranks(&pooled);
    let observed: f64 = ranks[base.len()..].iter().sum();
    // Rank sums are multiples of 0.5: a margin well under that absorbs float error.
    let at_least = observed - 1e-6;
    let (n, k) = (pooled.len(), cur.len());
    if choose(n, k) <= EXACT_LIMIT {
        let hits = count_splits(&ranks, k, 0, 0.0, at_least);
        return hits as f64 / choose(n, k);
    }
    // Sampled: (hits + 1) / (draws + 1) never claims a p of zero.
    let mut rng = SplitMix(0x6c6f636b_62656e63);
    let draws = 100_000u64;
    let mut idx: Vec<usize> = (0..n).collect();
    let mut hits = 0u64;
    for _ in 0..draws {
        for i in 0..k {
            let j = i + (rng.next() % (n - i) as u64) as usize;
            idx.swap(i, j);
        }
        if idx[..k].iter().map(|&i| ranks[i]).sum::<f64>() >= at_least {
            hits += 1;
        }
    }
    (hits + 1) as f64 / (draws + 1) as f64
}

/// Ranks from 1, ties given the mean of the ranks they span.
fn midranks(v: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..v.len()).collect();
    order.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
    let mut ranks = vec![0.0; v.len()];
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && v[order[j + 1]] == v[order[i]] {
            j += 1;
        }
        let rank = (i + j) as f64 / 2.0 + 1.0;
        for &o in &order[i..=j] {
            ranks[o] = rank;
        }
        i = j + 1;
    }
    ranks
}

/// How many ways of choosing `left` more of `ranks[from..]` bring `sum` to `at_least`.
fn count_splits(ranks: &[f64], left: usize, from: usize, sum: f64, at_least: f64) -> u64 {
    if left == 0 {
        return u64::from(sum >= at_least);
    }
    (from..=ranks.len() - left)
        .map(|i| count_splits(ranks, left - 1, i + 1, sum + ranks[i], at_least))
        .sum()
}

/// A small seeded generator (SplitMix64): the sampled p is the same on every run.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// Holm's step-down levels: the i-th smallest p (from 0) is held to α / (k − i) while every
/// smaller one passed its own; after the first miss, nothing is significant.
fn holm(tests: &mut [&mut SpeedTest], alpha: f64) {
    tests.sort_by(|a, b| a.p.total_cmp(&b.p));
    let k = tests.len();
    let mut rejecting = true;
    for (i, t) in tests.iter_mut().enumerate() {
        t.level = alpha / (k - i) as f64;
        rejecting = rejecting && t.p <= t.level;
        t.significant = rejecting;
    }
}

type Sides<'a> = (Vec<&'a Summary>, Vec<&'a Summary>);

/// Compares `current` with `baseline`.
pub fn gate(baseline: &[Summary], current: &[Summary], tol: Tolerance) -> GateReport {
    let mut ids: BTreeMap<&str, Sides> = BTreeMap::new();
    for s in baseline {
        ids.entry(&s.strategy).or_default().0.push(s);
    }
    for s in current {
        ids.entry(&s.strategy).or_default().1.push(s);
    }
    let mut rows: Vec<GateRow> = ids
        .iter()
        .map(|(id, (base, cur))| {
            let mut row = judge_safety(id, base, cur);
            if !base.is_empty() && !cur.is_empty() {
                row.tests = speed_tests(base, cur, &tol);
            }
            row
        })
        .collect();
    let mut all: Vec<&mut SpeedTest> = rows.iter_mut().flat_map(|r| &mut r.tests).collect();
    let k = all.len();
    holm(&mut all, tol.alpha);
    let first_level = tol.alpha / k.max(1) as f64;
    let mut untestable = None;
    for t in all {
        t.untestable = t.smallest_p > first_level;
        if t.untestable && untestable.is_none() {
            untestable = Some(too_few(t, first_level, k, tol.alpha));
        }
    }
    for row in &mut rows {
        judge_speed(row, &tol);
    }
    GateReport {
        rows,
        alpha: tol.alpha,
        tests: k,
        untestable,
    }
}

/// The plain statement that these repetitions cannot decide, and how many would.
fn too_few(t: &SpeedTest, level: f64, k: usize, alpha: f64) -> String {
    let (n, m) = t.repetitions;
    let need = (2..100).find(|&r| smallest_p(r, r) <= level).unwrap_or(100);
    format!(
        "{n} vs {m} repetitions cannot show a regression: their smallest possible p is {}, the \
         gate needs {} (α {alpha} over {k} tests); speed is judged on the tolerance alone, as a \
         guess. Record the baseline and run {need} repetitions or more (REPS={need}).",
        p_value(t.smallest_p),
        p_value(level),
    )
}

/// The metrics with data on both sides, each tested (levels are set later, by Holm).
fn speed_tests(base: &[&Summary], cur: &[&Summary], tol: &Tolerance) -> Vec<SpeedTest> {
    [Metric::SalesPerS, Metric::ReadsPerS, Metric::P99Us]
        .into_iter()
        .filter_map(|metric| {
            let b: Vec<f64> = base.iter().map(|s| metric.of(s)).collect();
            let c: Vec<f64> = cur.iter().map(|s| metric.of(s)).collect();
            let medians = (median(b.clone()), median(c.clone()));
            // No baseline figure (reads/s of a run without reads): nothing to compare.
            (medians.0 > 0.0).then(|| SpeedTest {
                metric,
                repetitions: (b.len(), c.len()),
                medians,
                p: mann_whitney(&b, &c, metric.higher_is_worse()),
                smallest_p: smallest_p(b.len(), c.len()),
                level: 0.0,
                significant: false,
                beyond_tolerance: metric.beyond(medians.0, medians.1, tol),
                untestable: false,
            })
        })
        .collect()
}

/// A regression is a change both significant and beyond the tolerance; with too few
/// repetitions to test, beyond the tolerance alone (said so in the message).
fn judge_speed(row: &mut GateRow, tol: &Tolerance) {
    for t in &row.tests {
        let (b, c) = t.medians;
        let (n, m) = t.repetitions;
        let change = format!(
            "median {} {} → {} ({})",
            t.metric.name(),
            t.metric.show(b),
            t.metric.show(c),
            percent_change(b, c)
        );
        let limit = t.metric.limit(tol);
        let (p, level) = (p_value(t.p), p_value(t.level));
        let test = format!("one-sided Mann–Whitney over {n} vs {m} runs: p = {p}");
        if t.beyond_tolerance && t.untestable {
            row.failures.push(format!(
                "{change}, beyond {limit} (untested: too few repetitions for significance)"
            ));
        } else if t.beyond_tolerance && t.significant {
            row.failures.push(format!(
                "{change}, beyond {limit} and significant ({test} ≤ {level})"
            ));
        } else if t.beyond_tolerance {
            row.notes.push(format!(
                "{change}, beyond {limit} but within the spread ({test} > {level})"
            ));
        } else if t.significant {
            row.notes.push(format!(
                "{change}: significant ({test} ≤ {level}) but within {limit}"
            ));
        }
    }
}

/// A row with its safety verdict: broken, blind, missing or new.
fn judge_safety(id: &str, base: &[&Summary], cur: &[&Summary]) -> GateRow {
    let median_of = |v: &[&Summary], m: Metric| median(v.iter().map(|s| m.of(s)).collect());
    let safe = |v: &[&Summary]| !v.is_empty() && !v.iter().any(|s| violated(s));
    let mut row = GateRow {
        strategy: id.to_string(),
        repetitions: (base.len(), cur.len()),
        sales_per_s: (
            median_of(base, Metric::SalesPerS),
            median_of(cur, Metric::SalesPerS),
        ),
        p99_us: (
            median_of(base, Metric::P99Us).round() as u64,
            median_of(cur, Metric::P99Us).round() as u64,
        ),
        safe: (safe(base), safe(cur)),
        tests: Vec::new(),
        failures: Vec::new(),
        notes: Vec::new(),
    };
    if cur.is_empty() {
        row.failures.push("in the baseline but not run".into());
        return row;
    }
    if base.is_empty() {
        row.notes.push("new: not in the baseline".into());
        return row;
    }
    if row.safe.0 && !row.safe.1 {
        row.failures.push(broken(cur));
    }
    let caught = |v: &[&Summary]| v.iter().all(|s| violated(s));
    if caught(base) && !caught(cur) {
        let msg = "the baseline caught it in every run, this run did not: the checker or its \
                   trigger went blind";
        if !cur[0].claims_safety {
            row.failures.push(format!("control not caught: {msg}"));
        } else {
            row.notes.push(format!("no longer unsafe: {msg}?"));
        }
    }
    row
}

/// What went wrong in the current runs that were not safe.
fn broken(cur: &[&Summary]) -> String {
    let bad: Vec<&&Summary> = cur.iter().filter(|s| violated(s)).collect();
    let most = |f: fn(&Summary) -> u64| bad.iter().map(|s| f(s)).max().unwrap_or(0);
    let verdicts: std::collections::BTreeSet<String> = bad
        .iter()
        .map(|s| {
            format!(
                "lock {}, store {}",
                Verdict::lock_text(s.lock_verdict),
                Verdict::store_text(s.store_verdict)
            )
        })
        .collect();
    format!(
        "was safe, now not in {} of {} runs ({}; oversell up to {}, lost updates up to {}, lost \
         sales up to {}, double-grant incidents up to {}, leases lost up to {}, torn reads up to \
         {})",
        bad.len(),
        cur.len(),
        verdicts.into_iter().collect::<Vec<_>>().join("; "),
        most(|s| s.audit.oversell),
        most(|s| s.audit.lost_updates),
        most(|s| s.audit.lost_sales),
        most(|s| s.double_grant_incidents),
        most(|s| s.lease_lost),
        most(|s| s.torn_reads),
    )
}

/// A metric's cell and p cell of the table.
fn cells(row: &GateRow, metric: Metric) -> (String, String) {
    let shown = |v: f64| metric.show(v).trim_end_matches(" ms").to_string();
    let Some(t) = row.tests.iter().find(|t| t.metric == metric) else {
        // Untested: a side is missing (or the baseline has no such figure).
        let (b, c) = match metric {
            Metric::P99Us => (row.p99_us.0 as f64, row.p99_us.1 as f64),
            _ => row.sales_per_s,
        };
        let side = |v: f64, ran: usize| if ran > 0 { shown(v) } else { "-".into() };
        let (n, m) = row.repetitions;
        return (format!("{} → {}", side(b, n), side(c, m)), "-".into());
    };
    let (b, c) = t.medians;
    let p = if t.untestable {
        format!("({})", p_value(t.p))
    } else {
        p_value(t.p)
    };
    (
        format!("{} → {} {}", shown(b), shown(c), percent_change(b, c)),
        p,
    )
}

/// Prints the gate's table and, under it, every failure and note, the test used and whether
/// the repetitions could decide.
pub fn print_gate(out: &mut impl std::io::Write, r: &GateReport) -> std::io::Result<()> {
    writeln!(
        out,
        "{:<24} {:>5}  {:>24} {:>7}  {:>26} {:>7}  {:>10}  verdict",
        "strategy", "runs", "sales/s base → now", "p", "p99 ms base → now", "p", "safe"
    )?;
    for row in &r.rows {
        let ran = row.repetitions.1 > 0;
        let yes = |b: bool| match (b, ran) {
            (_, false) => "-",
            (true, _) => "yes",
            (false, _) => "NO",
        };
        let (sales, sales_p) = cells(row, Metric::SalesPerS);
        let (p99, p99_p) = cells(row, Metric::P99Us);
        writeln!(
            out,
            "{:<24} {:>5}  {sales:>24} {sales_p:>7}  {p99:>26} {p99_p:>7}  {:>10}  {}",
            row.strategy,
            format!("{}/{}", row.repetitions.0, row.repetitions.1),
            format!("{} → {}", yes(row.safe.0), yes(row.safe.1)),
            if row.failures.is_empty() {
                "pass"
            } else {
                "FAIL"
            }
        )?;
    }
    for row in &r.rows {
        for f in &row.failures {
            writeln!(out, "FAIL {}: {f}", row.strategy)?;
        }
        for n in &row.notes {
            writeln!(out, "note {}: {n}", row.strategy)?;
        }
    }
    writeln!(
        out,
        "test: one-sided exact Mann–Whitney U over the repetitions, Holm over {} tests at α {} \
         (first level {}); a speed failure is significant AND beyond the tolerance",
        r.tests,
        r.alpha,
        p_value(r.alpha / r.tests.max(1) as f64)
    )?;
    if let Some(u) = &r.untestable {
        writeln!(out, "UNTESTED: {u}")?;
    }
    writeln!(
        out,
        "gate: {}",
        match (r.passed(), r.untestable.is_some()) {
            (true, false) => "passed",
            (true, true) => "passed (tolerance only: too few repetitions to test)",
            (false, _) => "FAILED",
        }
    )
}

/// Writes `current` as the new baseline in `dir/baseline.json`.
pub fn write_baseline(dir: &Path, current: Vec<Summary>) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join("baseline.json");
    let b = Baseline {
        schema: BASELINE_SCHEMA.into(),
        runs: current,
    };
    std::fs::write(&path, serde_json::to_vec_pretty(&b)?)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real summary (mysql-atomic under kill-master), renamed and edited per case.
    fn run(id: &str, sales: f64, p99_us: u64, oversell: u64, control: bool) -> Summary {
        let mut s: Summary =
            serde_json::from_str(include_str!("../../tests/fixtures/summary.json")).unwrap();
        s.strategy = id.into();
        s.throughput.sales_per_s = sales;
        s.latency_us.p99 = p99_us;
        s.audit.oversell = oversell;
        s.audit.lost_updates = oversell;
        s.double_grants = 0;
        s.claims_safety = !control;
        rejudge(&mut s);
        s
    }

    /// Recomputes the verdict after a test edited the counts it comes from.
    fn rejudge(s: &mut Summary) {
        let v = Verdict::judge(
            s.lock_verdict.is_some(),
            s.strategy.ends_with("-fenced"),
            crate::check::Exclusion {
                double_grant_incidents: s.double_grant_incidents,
                lease_lost: s.lease_lost,
                torn_reads: s.torn_reads,
            },
            &s.audit,
        );
        (s.lock_verdict, s.store_verdict, s.safe) = (v.lock, v.store, v.safe());
    }

    /// A lock strategy's run whose lock broke `incidents` times, the store intact.
    fn broken_lock(id: &str, incidents: u64) -> Summary {
        let mut s = run(id, 1000.0, 3000, 0, false);
        s.lock_verdict = Some(crate::check::LockVerdict::Held);
        s.double_grants = incidents;
        s.double_grant_incidents = incidents;
        rejudge(&mut s);
        s
    }

    #[test]
    fn a_lock_that_broke_fails_even_when_the_store_survived() {
        let base = vec![broken_lock("etcd", 0), broken_lock("etcd-fenced", 0)];
        let cur = vec![broken_lock("etcd", 2), broken_lock("etcd-fenced", 3)];
        let r = gate(&base, &cur, TOL);
        assert_one_failure(&r, "etcd", &["lock BROKEN, store intact"]);
        assert_one_failure(&r, "etcd-fenced", &["lock broken, fenced, store intact"]);
    }

    #[test]
    fn torn_reads_and_fewer_reads_fail_a_read_write_run() {
        let reads = |torn: u64, per_s: f64| {
            let mut s = broken_lock("redis-rwlock", 0);
            (s.reads, s.torn_reads, s.throughput.reads_per_s) = (9000, torn, per_s);
            rejudge(&mut s);
            s
        };
        let r = gate(&[reads(0, 900.0)], &[reads(4, 880.0)], TOL);
        assert_one_failure(&r, "redis-rwlock", &["lock BROKEN", "torn reads up to 4"]);
        let r = gate(&[reads(0, 900.0)], &[reads(0, 600.0)], TOL);
        assert_one_failure(&r, "redis-rwlock", &["median reads/s 900.0 → 600.0"]);
    }

    /// Every summary the tests hold: the gate's notion of a violation is the tables' verdict.
    #[test]
    fn the_gate_and_the_tables_agree_on_every_fixture() {
        let mut all: Vec<Summary> = baseline();
        all.push(broken_lock("etcd", 2));
        all.push(broken_lock("etcd-fenced", 3));
        all.push(broken_lock("etcd", 0));
        let committed = concat!(env!("CARGO_MANIFEST_DIR"), "/../results/baseline");
        all.extend(load_results(Path::new(committed)).expect("the committed baseline reads"));
        for s in &all {
            let mut table = Vec::new();
            crate::report::print_table(&mut table, std::slice::from_ref(s)).unwrap();
            let table = String::from_utf8(table).unwrap();
            let row = table.lines().nth(2).unwrap();
            let says_safe = row.ends_with(" safe") || row.ends_with("not caught (control)");
            assert_eq!(violated(s), !says_safe, "{}: {row}", s.strategy);
            assert_eq!(s.safe, s.verdict().safe(), "{}", s.strategy);
        }
    }

    const TOL: Tolerance = Tolerance {
        max_throughput_drop: 0.15,
        max_p99_rise: 0.25,
        alpha: 0.05,
    };

    fn baseline() -> Vec<Summary> {
        let mut v = Vec::new();
        for (sales, p99) in [(1000.0, 3000), (1040.0, 3100), (980.0, 2900)] {
            v.push(run("mysql-atomic", sales, p99, 0, false));
            v.push(run("none", sales * 2.0, p99 / 2, 400, true));
        }
        v
    }

    /// `id` failed for one reason, which says each of `parts`.
    fn assert_one_failure(r: &GateReport, id: &str, parts: &[&str]) {
        let f = failures(r, id);
        assert!(
            f.len() == 1 && parts.iter().all(|p| f[0].contains(p)),
            "{id}: {f:?}"
        );
    }

    fn failures(r: &GateReport, id: &str) -> Vec<String> {
        r.rows
            .iter()
            .find(|r| r.strategy == id)
            .unwrap()
            .failures
            .clone()
    }

    #[test]
    fn same_results_pass_and_noise_within_tolerance_passes() {
        let r = gate(&baseline(), &baseline(), TOL);
        assert!(r.passed(), "{r:?}");
        // 10 % slower, 20 % higher p99, and one wild repetition: medians stay inside.
        let cur = vec![
            run("mysql-atomic", 900.0, 3600, 0, false),
            run("mysql-atomic", 910.0, 3500, 0, false),
            run("mysql-atomic", 50.0, 90_000, 0, false),
            run("none", 1900.0, 1500, 380, true),
        ];
        let r = gate(&baseline(), &cur, TOL);
        assert!(r.passed(), "{r:?}");
        assert_eq!(r.rows[0].repetitions, (3, 3));
    }

    #[test]
    fn planted_regressions_fail_with_the_reason() {
        let slow = vec![
            run("mysql-atomic", 700.0, 3000, 0, false),
            run("none", 2000.0, 1500, 400, true),
        ];
        assert_one_failure(
            &gate(&baseline(), &slow, TOL),
            "mysql-atomic",
            &["sales/s 1000.0 → 700.0 (-30.0%)"],
        );

        let tail = vec![
            run("mysql-atomic", 1000.0, 4000, 0, false),
            run("none", 2000.0, 1500, 400, true),
        ];
        assert_one_failure(
            &gate(&baseline(), &tail, TOL),
            "mysql-atomic",
            &["p99 3.00 ms → 4.00 ms"],
        );
    }

    #[test]
    fn planted_oversell_and_a_blind_checker_fail() {
        let unsafe_now = vec![
            run("mysql-atomic", 1000.0, 3000, 0, false),
            run("mysql-atomic", 1000.0, 3000, 3, false),
            run("none", 2000.0, 1500, 400, true),
        ];
        assert_one_failure(
            &gate(&baseline(), &unsafe_now, TOL),
            "mysql-atomic",
            &["now not in 1 of 2 runs"],
        );

        let blind = run("none", 2000.0, 1500, 0, true);
        let cur = vec![run("mysql-atomic", 1000.0, 3000, 0, false), blind];
        assert_one_failure(
            &gate(&baseline(), &cur, TOL),
            "none",
            &["control not caught"],
        );

        let missing = vec![run("mysql-atomic", 1000.0, 3000, 0, false)];
        let f = failures(&gate(&baseline(), &missing, TOL), "none");
        assert_eq!(f, ["in the baseline but not run"]);
    }

    /// A lock strategy's repetitions with these sales/s, p99 at 300 ms over 61/s scaled.
    fn reps(id: &str, sales: &[f64]) -> Vec<Summary> {
        sales
            .iter()
            .map(|&v| run(id, v, (300_000.0 * 61.0 / v) as u64, 0, false))
            .collect()
    }

    /// Six repetitions of a build whose sales/s spread by about 3 %.
    const SIX: [f64; 6] = [61.0, 59.5, 62.3, 60.1, 58.9, 61.7];

    fn scaled(by: f64) -> Vec<f64> {
        SIX.iter().map(|v| v * by).collect()
    }

    fn text(r: &GateReport) -> String {
        let mut out = Vec::new();
        print_gate(&mut out, r).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn the_u_test_is_exact_for_small_samples_and_sampled_beyond() {
        let low = [1.0, 2.0, 3.0];
        let high = [4.0, 5.0, 6.0];
        // 3 vs 3 completely separated: 1 of C(6, 3) = 20 arrangements.
        assert!((mann_whitney(&high, &low, false) - 0.05).abs() < 1e-12);
        assert!((mann_whitney(&low, &high, true) - 0.05).abs() < 1e-12);
        // The other way round it is no evidence at all.
        assert_eq!(mann_whitney(&low, &high, false), 1.0);
        assert!((smallest_p(4, 4) - 1.0 / 70.0).abs() < 1e-12);
        // One swap among 4 vs 4: U = 1, two arrangements as extreme.
        let p = mann_whitney(&[5.0, 6.0, 7.0, 3.5], &[1.0, 2.0, 3.0, 4.0], false);
        assert!((p - 2.0 / 70.0).abs() < 1e-12, "{p}");
        // Ties share their ranks: identical samples are no evidence.
        assert_eq!(mann_whitney(&[2.0; 5], &[2.0; 5], false), 1.0);
        // 12 vs 12 (2.7 million arrangements) is sampled: about 1 / 100,001.
        let a: Vec<f64> = (0..12).map(f64::from).collect();
        let b: Vec<f64> = (12..24).map(f64::from).collect();
        let p = mann_whitney(&b, &a, false);
        assert!(p < 2e-5, "{p}");
        let p = mann_whitney(&a, &b, false);
        assert!(p > 0.99, "{p}");
    }

    #[test]
    fn identical_repetitions_pass() {
        let r = gate(&reps("redis-setnx", &SIX), &reps("redis-setnx", &SIX), TOL);
        assert!(r.passed() && r.untestable.is_none(), "{}", text(&r));
        assert_eq!(r.tests, 2);
        assert!(text(&r).ends_with("gate: passed\n"), "{}", text(&r));
    }

    #[test]
    fn a_clear_shift_fails_as_significant_and_beyond_the_tolerance() {
        // 30 % longer hold: sales/s 1/1.3 of the baseline's, every repetition below every one.
        let r = gate(
            &reps("redis-setnx", &SIX),
            &reps("redis-setnx", &scaled(1.0 / 1.3)),
            TOL,
        );
        let f = failures(&r, "redis-setnx");
        assert!(
            f.len() == 2
                && f[0]
                    .contains("median sales/s 60.5 → 46.6 (-23.1%), beyond -15% and significant")
                && f[0].contains("6 vs 6 runs: p = 0.0011 ≤ 0.025)")
                && f[1].contains("median p99"),
            "{}",
            text(&r)
        );
        assert!(text(&r).ends_with("gate: FAILED\n"));
    }

    #[test]
    fn a_significant_shift_inside_the_tolerance_passes_with_a_note() {
        let r = gate(
            &reps("redis-setnx", &SIX),
            &reps("redis-setnx", &scaled(0.9)),
            TOL,
        );
        assert!(r.passed(), "{}", text(&r));
        let row = &r.rows[0];
        assert!(row.tests.iter().all(|t| t.significant), "{row:?}");
        assert!(
            row.notes[0].contains("significant") && row.notes[0].contains("but within -15%"),
            "{:?}",
            row.notes
        );
    }

    #[test]
    fn a_median_beyond_the_tolerance_within_the_spread_passes() {
        // One bad half of a noisy build: the medians differ by 17 %, the ranks interleave.
        let base = reps("none", &[100.0, 140.0, 90.0, 130.0, 95.0, 135.0]);
        let cur = reps("none", &[80.0, 138.0, 85.0, 132.0, 90.0, 100.0]);
        let r = gate(&base, &cur, TOL);
        assert!(r.passed(), "{}", text(&r));
        assert!(
            r.rows[0].notes[0].contains("beyond -15% but within the spread"),
            "{}",
            text(&r)
        );
    }

    #[test]
    fn too_few_repetitions_are_reported_and_judged_on_the_tolerance_alone() {
        let three = &SIX[..3];
        let slow: Vec<f64> = three.iter().map(|v| v / 1.3).collect();
        let r = gate(
            &reps("redis-setnx", three),
            &reps("redis-setnx", three),
            TOL,
        );
        let t = text(&r);
        assert!(r.passed(), "{t}");
        assert!(
            t.contains(
                "UNTESTED: 3 vs 3 repetitions cannot show a regression: their smallest \
                        possible p is 0.05, the gate needs 0.025"
            ) && t.contains("REPS=4")
                && t.ends_with("gate: passed (tolerance only: too few repetitions to test)\n"),
            "{t}"
        );
        let r = gate(
            &reps("redis-setnx", three),
            &reps("redis-setnx", &slow),
            TOL,
        );
        let f = failures(&r, "redis-setnx");
        assert!(f[0].contains("(untested: too few repetitions"), "{f:?}");
    }

    #[test]
    fn holm_spreads_alpha_over_every_test_of_the_gate() {
        // Six strategies × two metrics: the first level is 0.05 / 12, which 5 vs 5 (1 / 252)
        // meets and 4 vs 4 (1 / 70) does not.
        let ids = ["a", "b", "c", "d", "e", "f"];
        let side = |n: usize, by: f64| -> Vec<Summary> {
            ids.iter()
                .flat_map(|id| reps(id, &scaled(by)[..n]))
                .collect()
        };
        let r = gate(&side(5, 1.0), &side(5, 0.7), TOL);
        assert_eq!(r.tests, 12);
        assert!(r.untestable.is_none() && !r.passed(), "{}", text(&r));
        let r = gate(&side(4, 1.0), &side(4, 0.7), TOL);
        assert!(
            r.untestable.as_ref().unwrap().contains("REPS=5"),
            "{}",
            text(&r)
        );
    }

    #[test]
    fn results_load_from_compare_summary_and_baseline_files_once_each() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        // A comparison (its per-strategy folders repeat it), a single run, a baseline.
        std::fs::create_dir_all(d.join("rep-1/mysql-atomic")).unwrap();
        let two = vec![
            run("mysql-atomic", 1.0, 1, 0, false),
            run("none", 1.0, 1, 9, true),
        ];
        std::fs::write(
            d.join("rep-1/compare.json"),
            serde_json::to_vec(&two).unwrap(),
        )
        .unwrap();
        std::fs::write(
            d.join("rep-1/mysql-atomic/summary.json"),
            serde_json::to_vec(&two[0]).unwrap(),
        )
        .unwrap();
        std::fs::create_dir_all(d.join("rep-2")).unwrap();
        std::fs::write(
            d.join("rep-2/summary.json"),
            serde_json::to_vec(&two[0]).unwrap(),
        )
        .unwrap();
        assert_eq!(load_results(d).unwrap().len(), 3);
        let b = write_baseline(&d.join("base"), two).unwrap();
        assert!(b.ends_with("base/baseline.json"));
        assert_eq!(load_results(&d.join("base")).unwrap().len(), 2);
        let e = load_results(&d.join("base/..").join("nothing-here")).unwrap_err();
        assert!(e.to_string().contains("nothing-here"), "{e}");
        std::fs::create_dir_all(d.join("empty")).unwrap();
        let e = load_results(&d.join("empty")).unwrap_err().to_string();
        assert_contains!(e, "no results found");
    }
}
