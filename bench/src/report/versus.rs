//! Strategies in pairs, side by side (`lockbench versus`; scripts/versus.sh and
//! scripts/libraries.sh). From a sweep: each strategy's capacity and the ratio of each pair.
//! From a comparison: each run's sales/s, p99, utilization and verdict, and the ratio of sales/s.
//!
//! A capacity is an interval (`Entry::capacity_interval_per_s`: the highest rate decided to
//! pass, the lowest decided to fail, either end open), so the ratio of two capacities is an
//! interval too: from A's lower end over B's upper to A's upper over B's lower. A pair is called
//! apart only when that interval lies wholly above 1 or below it; overlapping capacities are no
//! win for either.

use std::io::Write;
use std::str::FromStr;

use super::Summary;
use super::format::{decimals, ms_table, or_dash};
use super::sweep::{Entry, Sweep};
use super::table::render;
use crate::check::Verdict;

/// `a=b`: strategy `a` set against strategy `b`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pair {
    /// The strategy measured.
    pub a: String,
    /// The one it is set against (the ratio's denominator).
    pub b: String,
}

impl FromStr for Pair {
    type Err = String;
    fn from_str(s: &str) -> Result<Pair, String> {
        match s.trim().split_once('=') {
            Some((a, b)) if !a.trim().is_empty() && !b.trim().is_empty() => Ok(Pair {
                a: a.trim().to_string(),
                b: b.trim().to_string(),
            }),
            _ => Err(format!(
                "`{s}`: expected STRATEGY=STRATEGY, e.g. redis-rwlock=redis-reentrant"
            )),
        }
    }
}

/// Every strategy of `pairs`, each once, in the order first named.
pub fn strategies(pairs: &[Pair]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for p in pairs {
        for s in [&p.a, &p.b] {
            if !out.contains(s) {
                out.push(s.clone());
            }
        }
    }
    out
}

/// Where the ratio of two capacity intervals `a / b` lies, `[lower, upper]` (`None`: open).
pub fn capacity_ratio(a: [Option<f64>; 2], b: [Option<f64>; 2]) -> [Option<f64>; 2] {
    let over = |x: Option<f64>, y: Option<f64>| match (x, y) {
        (Some(x), Some(y)) if x > 0.0 && y > 0.0 => Some(x / y),
        _ => None,
    };
    [over(a[0], b[1]), over(a[1], b[0])]
}

/// Which side of a pair sustains more, from the ratio interval of their capacities.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Apart {
    /// The first's capacity lies above the second's: it passed a rate the second failed.
    Higher,
    /// The first's lies below: it failed a rate the second passed.
    Lower,
    /// The intervals overlap (or an end is open where it matters): neither wins.
    Overlap,
}

impl Apart {
    /// From the ratio interval: apart only when it excludes 1.
    pub fn of(ratio: [Option<f64>; 2]) -> Apart {
        match ratio {
            [Some(lo), _] if lo >= 1.0 => Apart::Higher,
            [_, Some(hi)] if hi <= 1.0 => Apart::Lower,
            _ => Apart::Overlap,
        }
    }

    fn text(self) -> &'static str {
        match self {
            Apart::Higher => "higher",
            Apart::Lower => "lower",
            Apart::Overlap => "overlap",
        }
    }
}

/// A ratio interval as the table prints it: `2.38–2.83`, `≥ 4.00`, `< 0.25`, `-`.
pub fn ratio_text(r: [Option<f64>; 2]) -> String {
    let x = |v: f64| format!("{v:.2}");
    match r {
        [Some(l), Some(u)] => format!("{}–{}", x(l), x(u)),
        [Some(l), None] => format!("≥ {}", x(l)),
        [None, Some(u)] => format!("< {}", x(u)),
        [None, None] => "-".into(),
    }
}

fn safe(e: &Entry) -> &'static str {
    if e.safe { "yes" } else { "NO" }
}

/// The capacity pairs of one sweep: a heading with its SLO and folder, then one row per pair.
pub fn print_sweep_pairs(
    out: &mut impl Write,
    title: &str,
    sweep: &Sweep,
    pairs: &[Pair],
) -> std::io::Result<()> {
    writeln!(out, "\n{title}: capacity at {}", sweep.slo.label())?;
    let mut lines = vec![
        ["strategy", "capacity", "safe", "versus", "capacity", "safe"]
            .into_iter()
            .chain(["ratio", "first is"])
            .map(String::from)
            .collect::<Vec<_>>(),
    ];
    for p in pairs {
        let (Some(a), Some(b)) = (sweep.entry(&p.a), sweep.entry(&p.b)) else {
            lines.push(not_measured(p, |s| sweep.entry(s).is_some(), 8));
            continue;
        };
        let ratio = capacity_ratio(a.capacity_interval_per_s, b.capacity_interval_per_s);
        lines.push(vec![
            a.strategy.clone(),
            a.capacity_text(),
            safe(a).into(),
            b.strategy.clone(),
            b.capacity_text(),
            safe(b).into(),
            ratio_text(ratio),
            Apart::of(ratio).text().into(),
        ]);
    }
    render(out, &lines)
}

/// A row naming what a pair lacks, padded to `cols` cells.
fn not_measured(p: &Pair, measured: impl Fn(&str) -> bool, cols: usize) -> Vec<String> {
    let missing: Vec<&str> = [p.a.as_str(), p.b.as_str()]
        .into_iter()
        .filter(|s| !measured(s))
        .collect();
    let mut row = vec![
        p.a.clone(),
        format!("(not measured: {})", missing.join(", ")),
    ];
    row.resize(cols, String::new());
    row
}

/// One run's cells: sales/s, p99 ms, utilization, verdict (lock/store).
fn run_cells(s: &Summary) -> [String; 4] {
    [
        format!("{:.0}", s.throughput.sales_per_s),
        ms_table(s.latency_us.p99),
        or_dash(s.utilization.as_ref(), |u| format!("{:.2}", u.overall)),
        format!(
            "{}/{}",
            Verdict::lock_text(s.lock_verdict),
            Verdict::store_text(s.store_verdict)
        ),
    ]
}

/// The run pairs of one comparison: one row per pair, the ratio of sales/s last.
pub fn print_run_pairs(
    out: &mut impl Write,
    title: &str,
    runs: &[Summary],
    pairs: &[Pair],
) -> std::io::Result<()> {
    writeln!(out, "\n{title}")?;
    let head = ["sales/s", "p99 ms", "util", "verdict"];
    let mut lines = vec![
        std::iter::once("strategy")
            .chain(head)
            .chain(std::iter::once("versus"))
            .chain(head)
            .chain(std::iter::once("ratio"))
            .map(String::from)
            .collect::<Vec<_>>(),
    ];
    let find = |s: &str| runs.iter().find(|r| r.strategy == s);
    for p in pairs {
        let (Some(a), Some(b)) = (find(&p.a), find(&p.b)) else {
            lines.push(not_measured(p, |s| find(s).is_some(), 11));
            continue;
        };
        let ratio = (b.throughput.sales_per_s > 0.0)
            .then(|| a.throughput.sales_per_s / b.throughput.sales_per_s);
        let mut row = vec![a.strategy.clone()];
        row.extend(run_cells(a));
        row.push(b.strategy.clone());
        row.extend(run_cells(b));
        row.push(or_dash(ratio, |r| decimals(r, 2)));
        lines.push(row);
    }
    render(out, &lines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::evidence::fixtures::{entry, summary, sweep};
    use crate::report::sweep::Bound;

    fn with(strategy: &str, lo: f64, hi: Option<f64>, bound: Bound) -> Entry {
        let mut e = entry(strategy, lo, bound, &[(lo.max(1.0), true, true)]);
        e.capacity_per_s = lo;
        e.first_failing_per_s = hi;
        e.capacity_interval_per_s = Entry::interval(lo, hi).interval;
        e
    }

    fn pairs(s: &str) -> Vec<Pair> {
        s.split(',').map(|p| p.parse().unwrap()).collect()
    }

    fn table(sweep: &Sweep, p: &str) -> String {
        let mut out = Vec::new();
        print_sweep_pairs(&mut out, "sweep 1", sweep, &pairs(p)).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn pairs_parse_and_name_each_strategy_once() {
        let p = pairs("a=b, c=a");
        assert_eq!(strategies(&p), ["a", "b", "c"]);
        assert!("a".parse::<Pair>().is_err());
        assert!("=b".parse::<Pair>().is_err());
    }

    #[test]
    fn disjoint_intervals_are_apart_with_a_bracketed_ratio() {
        let a = [Some(1900.0), Some(2260.0)];
        let b = [Some(800.0), Some(951.0)];
        let r = capacity_ratio(a, b);
        assert_eq!(ratio_text(r), "2.00–2.83");
        assert_eq!(Apart::of(r), Apart::Higher);
        assert_eq!(Apart::of(capacity_ratio(b, a)), Apart::Lower);
    }

    #[test]
    fn overlapping_intervals_are_no_win() {
        let r = capacity_ratio([Some(100.0), Some(125.0)], [Some(110.0), Some(137.0)]);
        assert_eq!(Apart::of(r), Apart::Overlap);
        assert_eq!(ratio_text(r), "0.73–1.14");
    }

    #[test]
    fn a_bound_stays_a_bound() {
        // A passed even the highest rate (≥ 25600) against B's 800–951: at least 26.9x.
        let r = capacity_ratio([Some(25600.0), None], [Some(800.0), Some(951.0)]);
        assert_eq!(ratio_text(r), "≥ 26.92");
        assert_eq!(Apart::of(r), Apart::Higher);
        // A failed even the lowest rate (< 1): below 1/800 of B, an upper bound.
        let r = capacity_ratio([None, Some(1.0)], [Some(800.0), Some(951.0)]);
        assert_eq!(ratio_text(r), "< 0.00");
        assert_eq!(Apart::of(r), Apart::Lower);
        // Both at least the highest rate: nothing known of their ratio.
        let r = capacity_ratio([Some(25600.0), None], [Some(25600.0), None]);
        assert_eq!(ratio_text(r), "-");
        assert_eq!(Apart::of(r), Apart::Overlap);
    }

    #[test]
    fn the_sweep_table_prints_brackets_and_the_missing() {
        let s = sweep(vec![
            with("rw", 1900.0, Some(2260.0), Bound::Found),
            with("plain", 800.0, Some(951.0), Bound::Found),
            with("fast", 25600.0, None, Bound::AtLeastMax),
        ]);
        let out = table(&s, "rw=plain,fast=rw,rw=nope");
        assert_contains!(out, "capacity at p99 ≤ 100 ms, ≥ 99% served");
        let row = |name: &str, other: &str| {
            out.lines()
                .find(|l| l.starts_with(name) && l.contains(other))
                .unwrap_or_else(|| panic!("{out}"))
                .to_string()
        };
        let rw = row("rw", "plain");
        assert_contains!(rw, "1900–2260/s", "2.00–2.83");
        assert!(rw.trim_end().ends_with("higher"), "{rw}");
        let fast = row("fast", "rw");
        assert_contains!(fast, "≥ 25600/s", "≥ 11.33");
        assert!(row("rw", "not measured").contains("(not measured: nope)"));
    }

    #[test]
    fn the_run_table_sets_sales_side_by_side() {
        let mut lib = summary("lib:example");
        lib.throughput.sales_per_s = 522.0;
        let mut own = summary("redis-setnx");
        own.throughput.sales_per_s = 600.0;
        let mut out = Vec::new();
        let p = pairs("lib:example=redis-setnx,lib:x=redis-setnx");
        print_run_pairs(&mut out, "default", &[lib, own], &p).unwrap();
        let out = String::from_utf8(out).unwrap();
        let row = out.lines().find(|l| l.starts_with("lib:example")).unwrap();
        assert!(row.contains("held/intact") && row.contains("0.62"), "{out}");
        assert!(row.trim_end().ends_with("0.87"), "{out}");
        assert_contains!(out, "(not measured: lib:x)");
    }
}
