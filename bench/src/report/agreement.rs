//! Whether sweeps of one build agree: for each strategy, every sweep's capacity interval,
//! whether they overlap, and how far their midpoints lie apart. A number that moves more
//! between two runs than between two strategies is worthless; this is how we see it.

use std::io::Write;

use super::format::{or_dash, rate_exact, ratio};
use super::sweep::{Entry, Sweep};

/// One strategy across sweeps.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Strategy id.
    pub strategy: String,
    /// Each sweep's interval, `[lower, upper]` (`None`: open; the strategy missing: both).
    pub intervals: Vec<[Option<f64>; 2]>,
    /// Some capacity lies in every interval.
    pub overlap: bool,
    /// Largest over smallest midpoint (geometric), when every sweep has one.
    pub midpoint_ratio: Option<f64>,
    /// Some sweep found a rate failing for want of CPU (`Entry::machine_limit`): that interval
    /// is open above, since the machine's limit moves between runs.
    pub machine_bound: bool,
}

/// Where an interval's capacity could be, as numbers: an open lower end is 0, an open upper
/// end is infinite.
fn span(i: [Option<f64>; 2]) -> (f64, f64) {
    (i[0].unwrap_or(0.0), i[1].unwrap_or(f64::INFINITY))
}

/// The geometric midpoint of a closed interval, or its one end.
fn midpoint(i: [Option<f64>; 2]) -> Option<f64> {
    match i {
        [Some(l), Some(u)] => Some((l * u).sqrt()),
        [Some(x), None] | [None, Some(x)] => Some(x),
        [None, None] => None,
    }
}

/// The agreement of `sweeps`, one row per strategy of the first.
pub fn agreement(sweeps: &[Sweep]) -> Vec<Row> {
    let Some(first) = sweeps.first() else {
        return Vec::new();
    };
    first
        .entries
        .iter()
        .map(|e| {
            let intervals: Vec<[Option<f64>; 2]> = sweeps
                .iter()
                .map(|s| s.entry(&e.strategy).map_or([None, None], interval))
                .collect();
            let lower = intervals.iter().map(|i| span(*i).0).fold(0.0, f64::max);
            let upper = intervals
                .iter()
                .map(|i| span(*i).1)
                .fold(f64::INFINITY, f64::min);
            // The capacity passed at every lower end and failed at every upper end.
            let overlap = lower < upper;
            let mids: Option<Vec<f64>> = intervals.iter().map(|i| midpoint(*i)).collect();
            let midpoint_ratio = mids.filter(|m| m.iter().all(|x| *x > 0.0)).map(|m| {
                let max = m.iter().copied().fold(0.0, f64::max);
                let min = m.iter().copied().fold(f64::INFINITY, f64::min);
                max / min
            });
            let machine_bound = sweeps
                .iter()
                .filter_map(|s| s.entry(&e.strategy))
                .any(|e| e.machine_limit.is_some());
            Row {
                strategy: e.strategy.clone(),
                intervals,
                overlap,
                midpoint_ratio,
                machine_bound,
            }
        })
        .collect()
}

fn interval(e: &Entry) -> [Option<f64>; 2] {
    e.capacity_interval_per_s
}

/// The median interval width (upper over lower) of a sweep's closed intervals.
pub fn median_width(s: &Sweep) -> Option<f64> {
    median(s.entries.iter().filter_map(|e| e.interval_width).collect())
}

/// The median interval width over every strategy, an open end (no rate passed, or the highest
/// offered passed) counting as unbounded: `None` when the median falls on one.
pub fn median_width_all(s: &Sweep) -> Option<f64> {
    let w = s
        .entries
        .iter()
        .map(|e| e.interval_width.unwrap_or(f64::INFINITY));
    median(w.collect()).filter(|m| m.is_finite())
}

fn median(mut w: Vec<f64>) -> Option<f64> {
    if w.is_empty() {
        return None;
    }
    w.sort_by(f64::total_cmp);
    let n = w.len();
    Some(if n % 2 == 1 {
        w[n / 2]
    } else {
        (w[n / 2 - 1] * w[n / 2]).sqrt()
    })
}

/// An interval as the tables print it: `a–b`, `≥ a`, `< b`, or `-`.
pub(super) fn text(i: [Option<f64>; 2]) -> String {
    match i {
        [Some(l), Some(u)] => format!("{}–{}", rate_exact(l), rate_exact(u)),
        [Some(l), None] => format!("≥ {}", rate_exact(l)),
        [None, Some(u)] => format!("< {}", rate_exact(u)),
        [None, None] => "-".into(),
    }
}

/// Prints the table; returns whether every strategy's intervals overlap. Intervals apart of a
/// strategy some sweep marked machine-bound read `NO (machine)` and still count: a machine-bound
/// interval is already open above, so one still apart is below another run's passing rate.
pub fn print_agreement(out: &mut impl Write, sweeps: &[Sweep]) -> std::io::Result<bool> {
    let rows = agreement(sweeps);
    let width = rows.iter().map(|r| r.strategy.len()).max().unwrap_or(8);
    write!(out, "{:<width$}", "strategy")?;
    for i in 1..=sweeps.len() {
        write!(out, "  {:>16}", format!("run {i} (/s)"))?;
    }
    writeln!(out, "  overlap  midpoints max/min")?;
    for r in &rows {
        write!(out, "{:<width$}", r.strategy)?;
        for i in &r.intervals {
            write!(out, "  {:>16}", text(*i))?;
        }
        let ratio = r.midpoint_ratio.map_or("-".into(), |x| format!("{x:.2}"));
        let overlap = match (r.overlap, r.machine_bound) {
            (true, _) => "yes",
            (false, false) => "NO",
            (false, true) => "NO (machine)",
        };
        writeln!(out, "  {overlap:<7}  {ratio}")?;
    }
    let apart = rows.iter().filter(|r| !r.overlap).count();
    let machine: Vec<&str> = (rows.iter())
        .filter(|r| r.machine_bound)
        .map(|r| r.strategy.as_str())
        .collect();
    let widths: Vec<String> = sweeps
        .iter()
        .map(|s| {
            let closed = s
                .entries
                .iter()
                .filter(|e| e.interval_width.is_some())
                .count();
            let all = median_width_all(s).map_or("unbounded".into(), ratio);
            let of_closed = or_dash(median_width(s), ratio);
            format!("{all} ({of_closed} over its {closed} closed intervals)")
        })
        .collect();
    writeln!(
        out,
        "{} of {} strategies overlap in every run; median interval width per run, an open end \
         counting as unbounded: {}",
        rows.len() - apart,
        rows.len(),
        widths.join(", ")
    )?;
    if !machine.is_empty() {
        writeln!(
            out,
            "machine-bound in some run (a rate failed with the CPUs saturated, so that run's \
             interval is open above: the machine's limit, not the lock's): {}",
            machine.join(", ")
        )?;
    }
    Ok(apart == 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::evidence::fixtures::{entry, sweep};
    use crate::report::sweep::Bound;

    fn with(strategy: &str, lo: f64, hi: Option<f64>) -> Entry {
        let mut e = entry(strategy, lo, Bound::Found, &[(lo, true, true)]);
        e.first_failing_per_s = hi;
        e.capacity_interval_per_s = Entry::interval(lo, hi).interval;
        e.interval_width = Entry::interval(lo, hi).width;
        e
    }

    #[test]
    fn overlapping_intervals_agree_and_disjoint_ones_do_not() {
        let a = sweep(vec![
            with("x", 100.0, Some(125.0)),
            with("y", 10.0, Some(12.5)),
        ]);
        let b = sweep(vec![
            with("x", 110.0, Some(137.0)),
            with("y", 12.5, Some(15.6)),
        ]);
        let rows = agreement(&[a.clone(), b.clone()]);
        assert!(rows[0].overlap, "{rows:?}");
        // y: 10–12.5 and 12.5–15.6 share no capacity (12.5 both failed and passed).
        assert!(!rows[1].overlap, "{rows:?}");
        let r = rows[0].midpoint_ratio.unwrap();
        assert!((r - 1.096).abs() < 0.01, "{r}");
        let mut out = Vec::new();
        assert!(!print_agreement(&mut out, &[a, b]).unwrap());
        let out = String::from_utf8(out).unwrap();
        assert_contains!(out, "1 of 2 strategies overlap");
    }

    /// `strategy` passed `lo` and failed `at` for want of CPU: open above.
    fn machine_bound(strategy: &str, lo: f64, at: f64) -> Entry {
        let mut e = with(strategy, lo, None);
        e.bound = Bound::MachineLimit;
        e.machine_limit = Some(crate::report::sweep::MachineLimit {
            at_per_s: at,
            busy: 0.97,
            harness: 0.5,
            servers: 0.45,
        });
        e
    }

    #[test]
    fn machine_bound_intervals_are_open_above_and_apart_still_fail_the_agreement() {
        let a = sweep(vec![
            with("x", 100.0, Some(125.0)),
            with("y", 10.0, Some(12.5)),
        ]);
        // y passed 11 in a run whose failing 13.7 ran out of CPU: at least 11, which 10–12.5
        // does not exclude.
        let open = sweep(vec![
            with("x", 110.0, Some(137.0)),
            machine_bound("y", 11.0, 13.7),
        ]);
        let rows = agreement(&[a.clone(), open.clone()]);
        assert!(rows[1].overlap && rows[1].machine_bound, "{rows:?}");
        assert_eq!(text(rows[1].intervals[1]), "≥ 11");
        assert!(print_agreement(&mut Vec::new(), &[a.clone(), open]).unwrap());
        // Passing 12.5, where the other run failed: apart, said, and still a failure.
        let b = sweep(vec![
            with("x", 110.0, Some(137.0)),
            machine_bound("y", 12.5, 15.6),
        ]);
        let rows = agreement(&[a.clone(), b.clone()]);
        assert!(!rows[1].overlap && rows[1].machine_bound, "{rows:?}");
        assert!(!rows[0].machine_bound);
        let mut out = Vec::new();
        assert!(!print_agreement(&mut out, &[a.clone(), b]).unwrap());
        let out = String::from_utf8(out).unwrap();
        assert!(out.contains("NO (machine)") && out.contains("not the lock's): y\n"));
        // Without the mark the same row reads a plain NO, and intervals that overlap pass.
        let c = sweep(vec![
            with("x", 110.0, Some(137.0)),
            with("y", 12.5, Some(15.6)),
        ]);
        let mut out = Vec::new();
        assert!(!print_agreement(&mut out, &[a.clone(), c]).unwrap());
        assert!(!String::from_utf8(out).unwrap().contains("machine"));
        assert!(print_agreement(&mut Vec::new(), &[a.clone(), a]).unwrap());
    }

    #[test]
    fn open_ends_overlap_what_they_do_not_exclude() {
        let a = sweep(vec![with("x", 6400.0, None)]);
        let b = sweep(vec![with("x", 3200.0, Some(6400.0))]);
        assert!(!agreement(&[a.clone(), b])[0].overlap);
        let c = sweep(vec![with("x", 1600.0, None)]);
        assert!(agreement(&[a, c])[0].overlap);
        assert_eq!(
            median_width(&sweep(vec![with("x", 1.0, Some(1.2))])),
            Some(1.2)
        );
        // Over every strategy an open interval is unbounded: with two open of three the
        // median is unbounded although the closed one is narrow.
        let s = sweep(vec![
            with("x", 1.0, Some(1.2)),
            with("y", 6400.0, None),
            with("z", 0.0, Some(40.0)),
        ]);
        assert_eq!(median_width(&s), Some(1.2));
        assert_eq!(median_width_all(&s), None);
        let s = sweep(vec![
            with("x", 1.0, Some(1.2)),
            with("w", 1.0, Some(1.3)),
            with("y", 6400.0, None),
        ]);
        assert_eq!(median_width_all(&s), Some(1.3));
    }
}
