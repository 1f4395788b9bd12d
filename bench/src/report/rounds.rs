//! Runs repeated in rounds, by group (`lockbench rounds`; scripts/bench-wait.sh): for each group
//! (a folder holding one run per round), the median and range over its rounds of the figures
//! that say how buyers waited for the lock: utilization, sales/s, p99, lock timeouts, and how the
//! lock shared its key (acquire p99, Jain's fairness, barges per handoff, missed wake-ups per
//! give-up; docs/reading.md, "Contention").

use std::io::Write;

use super::Summary;
use super::format::{decimals, or_dash};
use super::table::render;

/// The figures of one run; `None` where the run has none (no lock, no handoff, no give-up).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Figures {
    pub utilization: Option<f64>,
    pub sales_per_s: Option<f64>,
    pub p99_ms: Option<f64>,
    pub lock_timeouts: Option<f64>,
    pub acquire_p99_ms: Option<f64>,
    pub jain: Option<f64>,
    /// Barges per handoff with a waiter.
    pub barges: Option<f64>,
    /// Missed wake-ups per give-up.
    pub missed: Option<f64>,
}

impl Figures {
    /// What `s` measured.
    pub fn of(s: &Summary) -> Figures {
        let c = s.contention.as_ref();
        let share = |a: u64, b: u64| (b > 0).then(|| a as f64 / b as f64);
        Figures {
            utilization: s.utilization.as_ref().map(|u| u.overall),
            sales_per_s: Some(s.throughput.sales_per_s),
            p99_ms: Some(s.latency_us.p99 as f64 / 1000.0),
            lock_timeouts: Some(s.outcomes.get("lock_timeout").copied().unwrap_or(0) as f64),
            acquire_p99_ms: c.map(|c| c.acquire.p99 as f64 / 1000.0),
            jain: c.and_then(|c| c.fairness.as_ref()).map(|f| f.jain),
            barges: c.and_then(|c| share(c.barges, c.handoffs_with_waiter)),
            missed: c.and_then(|c| share(c.missed_wakeups, c.give_ups)),
        }
    }
}

/// One group: its name and each round's figures.
pub struct Group {
    pub name: String,
    pub rounds: Vec<Figures>,
}

/// The median and range of one figure over a group's rounds that have it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    pub median: f64,
    pub lo: f64,
    pub hi: f64,
}

impl Spread {
    /// `None` when no round has the figure; the median of an even count is the mean of the two
    /// middle values.
    pub fn of(values: impl Iterator<Item = Option<f64>>) -> Option<Spread> {
        let mut v: Vec<f64> = values.flatten().filter(|x| x.is_finite()).collect();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = match n {
            0 => return None,
            _ if n % 2 == 1 => v[n / 2],
            _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
        };
        Some(Spread {
            median,
            lo: v[0],
            hi: v[n - 1],
        })
    }
}

impl Group {
    fn spread(&self, f: fn(&Figures) -> Option<f64>) -> Option<Spread> {
        Spread::of(self.rounds.iter().map(f))
    }
}

/// `median` alone, or `median [lo–hi]`, each spelled by `f`; `-` without a value.
fn cell(s: Option<Spread>, f: fn(f64) -> String, range: bool) -> String {
    or_dash(s, |s| {
        if range {
            format!("{} [{}–{}]", f(s.median), f(s.lo), f(s.hi))
        } else {
            f(s.median)
        }
    })
}

/// A share or an index: three decimals.
fn share(x: f64) -> String {
    decimals(x, 3)
}

/// A rate or a count: one decimal (a median of two rounds may fall between).
fn tenths(x: f64) -> String {
    decimals(x, 1)
}

/// Milliseconds to three significant digits: `1516`, `23.6`, `1.62`.
fn ms(x: f64) -> String {
    let places = match x {
        x if x >= 100.0 => 0,
        x if x >= 10.0 => 1,
        _ => 2,
    };
    decimals(x, places)
}

/// A column: its heading, the figure, how it is spelled.
type Column = (&'static str, fn(&Figures) -> Option<f64>, fn(f64) -> String);

/// How fast the lock served: medians.
const SERVED: [Column; 4] = [
    ("utilization", |f| f.utilization, share),
    ("sales/s", |f| f.sales_per_s, tenths),
    ("p99 ms", |f| f.p99_ms, ms),
    ("lock timeouts", |f| f.lock_timeouts, tenths),
];

/// How the lock shared its key: medians and ranges.
const SHARED: [Column; 4] = [
    ("acquire p99 ms", |f| f.acquire_p99_ms, ms),
    ("fairness (Jain)", |f| f.jain, share),
    ("barges/handoff", |f| f.barges, share),
    ("missed/give-up", |f| f.missed, share),
];

/// One table: a row per group, a cell per column.
fn print_columns(
    out: &mut impl Write,
    groups: &[Group],
    columns: &[Column],
    range: bool,
) -> std::io::Result<()> {
    let head = std::iter::once("group").chain(columns.iter().map(|c| c.0));
    let mut lines = vec![head.map(String::from).collect::<Vec<_>>()];
    for g in groups {
        let cells = columns.iter().map(|c| cell(g.spread(c.1), c.2, range));
        lines.push(std::iter::once(g.name.clone()).chain(cells).collect());
    }
    render(out, &lines)
}

/// The two tables (medians; then how the key was shared, with ranges) and the ratio of the
/// first group's median sales/s to each other's.
pub fn print_rounds(out: &mut impl Write, groups: &[Group]) -> std::io::Result<()> {
    let rounds = groups.iter().map(|g| g.rounds.len()).max().unwrap_or(0);
    writeln!(out, "\nmedians over {rounds} rounds:")?;
    print_columns(out, groups, &SERVED, false)?;
    writeln!(
        out,
        "\nhow the key was shared (median, range over {rounds} rounds):"
    )?;
    print_columns(out, groups, &SHARED, true)?;
    let Some((first, rest)) = groups.split_first() else {
        return Ok(());
    };
    let sales = |g: &Group| g.spread(|f| f.sales_per_s).map(|s| s.median);
    let ratios: Vec<String> = rest
        .iter()
        .map(|g| {
            let r = sales(first).zip(sales(g).filter(|b| *b > 0.0));
            let r = or_dash(r, |(a, b)| format!("{:.2}", a / b));
            format!("{} / {} = {r}", first.name, g.name)
        })
        .collect();
    if !ratios.is_empty() {
        writeln!(out, "\nratios of sales/s: {}", ratios.join(", "))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::evidence::fixtures::summary;

    fn run(sales: f64, barges: u64, handoffs: u64) -> Figures {
        let mut s = summary("redis-setnx");
        s.throughput.sales_per_s = sales;
        let mut f = Figures::of(&s);
        f.barges = (handoffs > 0).then(|| barges as f64 / handoffs as f64);
        f
    }

    #[test]
    fn medians_skip_rounds_without_the_figure() {
        let s = Spread::of([Some(3.0), None, Some(1.0), Some(2.0), Some(10.0)].into_iter());
        assert_eq!(
            s,
            Some(Spread {
                median: 2.5,
                lo: 1.0,
                hi: 10.0
            })
        );
        assert_eq!(Spread::of([None, None].into_iter()), None);
    }

    #[test]
    fn the_tables_show_medians_ranges_and_the_ratios() {
        let groups = [
            Group {
                name: "notify".into(),
                rounds: vec![run(200.0, 9, 10), run(220.0, 10, 10), run(210.0, 1, 1)],
            },
            Group {
                name: "poll-100ms".into(),
                rounds: vec![run(100.0, 0, 0), run(110.0, 0, 0), run(105.0, 0, 0)],
            },
        ];
        let mut out = Vec::new();
        print_rounds(&mut out, &groups).unwrap();
        let out = String::from_utf8(out).unwrap();
        assert_contains!(out, "over 3 rounds");
        let notify: Vec<&str> = out.lines().filter(|l| l.starts_with("notify")).collect();
        assert!(notify[0].contains("210"), "{out}");
        assert!(notify[1].contains("1 [0.9–1]"), "{out}");
        let poll = out
            .lines()
            .filter(|l| l.starts_with("poll"))
            .nth(1)
            .unwrap();
        assert!(poll.contains(" - "), "no handoff: no barge share: {out}");
        assert_contains!(out, "ratios of sales/s: notify / poll-100ms = 2.00");
    }
}
