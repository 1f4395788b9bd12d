//! Two sweeps from different machines (or from one machine with its links or disk slowed on
//! purpose): which of their differences the machines explain. Each sweep carries its machine's
//! fingerprint (loopback round trip, fdatasync, CPU score) and any environment it injected; a
//! `calibrate` model turns the two environments into the ratio of capacities it expects per
//! strategy. A measured ratio inside that range is explained by the machines; one outside it is
//! not, and is a finding about the lock, the build or the noise.
//!
//! The model predicts grants/s on one key at its contenders; a sweep measures capacity within
//! an SLO. Only their ratio across environments is compared: the assumption, stated, is that
//! both move with the time one grant takes.

use std::io::Write;

use super::format::decimals;
use super::predict::{Env, Fit, Model, here, machine_env};
use super::sweep::Sweep;

/// Where a sweep ran: absolute round trip and fsync, and the CPU score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Side {
    pub env: Env,
    pub cpu_score: Option<f64>,
}

impl Side {
    /// A sweep's machine (loopback and fdatasync medians); where its workload injected a
    /// delay, what its steps' probes measured (the delay and the machine's own together), else
    /// the machine's plus the delay. `None` without a fingerprint.
    pub fn of(s: &Sweep) -> Option<Side> {
        let own = machine_env(s.machine.as_ref())?;
        let injected = s.environment.unwrap_or(Env {
            rtt_ms: 0.0,
            fsync_ms: 0.0,
        });
        let probed = |f: &dyn Fn(&crate::chaos::environment::EnvironmentProbe) -> Option<f64>| {
            let v: Vec<f64> = (s.entries.iter().flat_map(|e| &e.steps))
                .filter_map(|st| st.summary.environment.as_ref().and_then(|e| f(&e.probe)))
                .collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
        };
        let term = |own: f64, injected: f64, probe: Option<f64>| match probe {
            Some(p) if injected > 0.0 => p,
            _ => own + injected,
        };
        Some(Side {
            env: Env {
                rtt_ms: term(own.rtt_ms, injected.rtt_ms, probed(&|p| p.rtt_ms)),
                fsync_ms: term(own.fsync_ms, injected.fsync_ms, probed(&|p| p.fsync_ms)),
            },
            cpu_score: (s.machine.as_ref())
                .and_then(|m| m.cpu_score.as_ref())
                .map(|c| c.m_per_s),
        })
    }
}

/// What the comparison concluded for one strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The two intervals overlap: nothing to explain.
    Agree,
    /// They differ, and by as much as the machines predict.
    Explained,
    /// They differ beyond what the machines predict.
    NotExplained,
    /// They differ, and the model has no fit for it (or an interval is open).
    Unknown,
}

/// One strategy's row.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub strategy: String,
    /// Second over first: measured (lo, mid, hi) from the capacity intervals.
    pub measured: Option<(f64, f64, f64)>,
    /// Second over first as the model expects it from the two environments.
    pub expected: Option<(f64, f64, f64)>,
    pub verdict: Verdict,
    /// The term that moves the expectation most, in words.
    pub why: String,
}

/// Ratio of two closed intervals, b over a: (lo, geometric mid, hi).
fn ratio(a: [Option<f64>; 2], b: [Option<f64>; 2]) -> Option<(f64, f64, f64)> {
    let ([Some(la), Some(ua)], [Some(lb), Some(ub)]) = (a, b) else {
        return None;
    };
    (la > 0.0).then(|| (lb / ua, ((lb * ub) / (la * ua)).sqrt(), ub / la))
}

/// What the fit expects of the second side over the first, and the term that moves it most.
fn expected(m: &Model, f: &Fit, a: Side, b: Side) -> ((f64, f64, f64), String) {
    let h = here(m, f);
    let score = m
        .machine
        .as_ref()
        .and_then(|x| x.cpu_score.as_ref())
        .map(|c| c.m_per_s);
    let at = |s: Side| {
        let cpu = match (score, s.cpu_score) {
            (Some(h), Some(t)) if t > 0.0 => h / t,
            _ => 1.0,
        };
        let added = Env {
            rtt_ms: s.env.rtt_ms - h.rtt_ms,
            fsync_ms: s.env.fsync_ms - h.fsync_ms,
        };
        (f.predict(added, cpu), cpu)
    };
    let ((pa, ca), (pb, cb)) = (at(a), at(b));
    let lo = pa.hi.map_or(0.0, |hi| pb.lo / hi);
    let hi = pb.hi.map_or(f64::INFINITY, |h| h / pa.lo);
    let terms = [
        (
            "round trip",
            f.per_rtt.value * (b.env.rtt_ms - a.env.rtt_ms),
            a.env.rtt_ms,
            b.env.rtt_ms,
        ),
        (
            "fsync",
            f.per_fsync.value * (b.env.fsync_ms - a.env.fsync_ms),
            a.env.fsync_ms,
            b.env.fsync_ms,
        ),
        ("CPU", f.base_ms.value * (cb - ca), 0.0, 0.0),
    ];
    let top = terms
        .iter()
        .max_by(|x, y| x.1.abs().total_cmp(&y.1.abs()))
        .expect("three terms");
    let sign = if top.1 >= 0.0 { "+" } else { "" };
    let why = match top.0 {
        "CPU" => format!("CPU: {sign}{} ms a grant", decimals(top.1, 2)),
        name => format!(
            "{name} {}→{} ms: {sign}{} ms a grant",
            decimals(top.2, 2),
            decimals(top.3, 2),
            decimals(top.1, 2)
        ),
    };
    ((lo, pb.grants_per_s / pa.grants_per_s, hi), why)
}

/// Each strategy of the first sweep that the second also has.
pub fn explain(first: &Sweep, second: &Sweep, m: &Model) -> Vec<Row> {
    let sides = Side::of(first).zip(Side::of(second));
    let rows = super::agreement::agreement(&[first.clone(), second.clone()]);
    rows.into_iter()
        .filter(|r| second.entry(&r.strategy).is_some())
        .map(|r| {
            let measured = ratio(r.intervals[0], r.intervals[1]);
            let fit = m.fits.iter().find(|f| f.strategy == r.strategy);
            let (expected, why) = match (fit, sides) {
                (Some(f), Some((a, b))) => {
                    let (e, why) = expected(m, f, a, b);
                    (Some(e), why)
                }
                (None, _) => (None, "no fit in the model".into()),
                (_, None) => (None, "a sweep has no fingerprint".into()),
            };
            let verdict = match (r.overlap, measured, expected) {
                (true, _, _) => Verdict::Agree,
                (false, Some(x), Some(e)) if x.0 <= e.2 && e.0 <= x.2 => Verdict::Explained,
                (false, Some(_), Some(_)) => Verdict::NotExplained,
                _ => Verdict::Unknown,
            };
            Row {
                strategy: r.strategy,
                measured,
                expected,
                verdict,
                why,
            }
        })
        .collect()
}

/// An order one sweep decided and the other did not keep: `above` clearly above `below`
/// (disjoint intervals) in sweep `decided_in` (1 or 2), not in the other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reordering {
    pub above: String,
    pub below: String,
    pub decided_in: u8,
}

/// Every pair whose order one sweep decided and the other does not keep.
pub fn reorderings(first: &Sweep, second: &Sweep) -> Vec<Reordering> {
    let closed = |s: &Sweep, id: &str| match s.entry(id)?.capacity_interval_per_s {
        [Some(l), Some(u)] => Some((l, u)),
        _ => None,
    };
    let mut out = Vec::new();
    for a in &first.entries {
        for b in &first.entries {
            let ids = (a.strategy.as_str(), b.strategy.as_str());
            let (Some(fa), Some(fb)) = (closed(first, ids.0), closed(first, ids.1)) else {
                continue;
            };
            let (Some(sa), Some(sb)) = (closed(second, ids.0), closed(second, ids.1)) else {
                continue;
            };
            let above = |x: (f64, f64), y: (f64, f64)| x.0 > y.1;
            let decided_in = match (above(fa, fb), above(sa, sb)) {
                (true, false) => 1,
                (false, true) => 2,
                _ => continue,
            };
            out.push(Reordering {
                above: a.strategy.clone(),
                below: b.strategy.clone(),
                decided_in,
            });
        }
    }
    out
}

fn triple(t: Option<(f64, f64, f64)>) -> String {
    t.map_or("-".into(), |(lo, mid, hi)| {
        let hi = if hi.is_finite() {
            decimals(hi, 2)
        } else {
            "∞".into()
        };
        format!("×{} ({}–{hi})", decimals(mid, 2), decimals(lo, 2))
    })
}

/// Prints the table and the reorderings, each with whether the machines explain it.
pub fn print_explained(
    out: &mut dyn Write,
    first: &Sweep,
    second: &Sweep,
    m: &Model,
) -> std::io::Result<()> {
    let rows = explain(first, second, m);
    let side = |s: &Sweep| {
        Side::of(s).map_or("no fingerprint".into(), |x| {
            format!(
                "{}, CPU score {}",
                x.env.text(),
                x.cpu_score.map_or("-".into(), |c| decimals(c, 0))
            )
        })
    };
    writeln!(out, "what the machines explain (second over first):")?;
    writeln!(out, "  first:  {}", side(first))?;
    writeln!(out, "  second: {}", side(second))?;
    writeln!(
        out,
        "{:<22} {:>22} {:>22}  {:<14} largest term",
        "strategy", "measured", "expected", "verdict"
    )?;
    for r in &rows {
        let v = match r.verdict {
            Verdict::Agree => "agree",
            Verdict::Explained => "explained",
            Verdict::NotExplained => "NOT explained",
            Verdict::Unknown => "cannot tell",
        };
        writeln!(
            out,
            "{:<22} {:>22} {:>22}  {v:<14} {}",
            r.strategy,
            triple(r.measured),
            triple(r.expected),
            r.why
        )?;
    }
    for r in reorderings(first, second) {
        let of = |id: &str| rows.iter().find(|x| x.strategy == id).map(|x| x.verdict);
        let verdicts = [of(&r.above), of(&r.below)];
        let told = |ok: &dyn Fn(Verdict) -> bool| verdicts.iter().any(|v| v.is_some_and(ok));
        let answer = if told(&|v| v == Verdict::NotExplained) {
            "the machines do NOT explain it (a change beyond what they predict)"
        } else if told(&|v| v == Verdict::Unknown) {
            "cannot tell (a strategy the model has no fit for, or an open interval)"
        } else {
            "the machines explain it (each strategy's change is explained or none)"
        };
        let (yes, no) = if r.decided_in == 1 {
            ("first", "second")
        } else {
            ("second", "first")
        };
        writeln!(
            out,
            "order: {} clearly above {} in the {yes}, not in the {no}: {}",
            r.above, r.below, answer
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::machine::Machine;
    use crate::report::evidence::fixtures::{entry, sweep};
    use crate::report::predict::{Model, fixture_machine, fixture_point};
    use crate::report::sweep::Bound;

    fn machine(fsync_ms: f64) -> Machine {
        fixture_machine(0.05, fsync_ms)
    }

    /// A sweep on a machine whose disk syncs in `fsync_ms`, the strategies' intervals given.
    fn on(fsync_ms: f64, caps: &[(&str, f64, f64)]) -> Sweep {
        let entries = caps
            .iter()
            .map(|&(id, lo, hi)| {
                let mut e = entry(id, lo, Bound::Found, &[(lo, true, true)]);
                e.capacity_interval_per_s = [Some(lo), Some(hi)];
                e
            })
            .collect();
        let mut s = sweep(entries);
        s.machine = Some(machine(fsync_ms));
        s
    }

    /// A model whose `zk` pays 2 serial fsyncs a grant and `opt` none, fitted on points at
    /// fsync +0, +2, +4 ms and rtt +0, +1, +2 ms.
    fn model() -> Model {
        let truth = |id: &str, r: f64, f: f64| match id {
            "zk" => 2.0 + 2.0 * r + 2.0 * f,
            _ => 2.0 + r,
        };
        let grid = [(0.0, 0.0), (1.0, 0.0), (2.0, 0.0), (0.0, 2.0), (0.0, 4.0)];
        let mut points = Vec::new();
        for id in ["zk", "opt"] {
            for (r, f) in grid {
                points.push(fixture_point(id, (r, f), false, truth(id, r, f)));
            }
        }
        let mut m = Model::empty("w.toml", (8, 3, 2.0), Some(machine(0.5)));
        m.points = points;
        m.conclude();
        m
    }

    /// The rows [`model`] explains between two sweeps, and what `explain` prints.
    fn told(first: &Sweep, second: &Sweep) -> (Vec<Row>, String) {
        let m = model();
        let mut text = Vec::new();
        print_explained(&mut text, first, second, &m).unwrap();
        (explain(first, second, &m), String::from_utf8(text).unwrap())
    }

    fn row<'a>(rows: &'a [Row], strategy: &str) -> &'a Row {
        rows.iter().find(|r| r.strategy == strategy).unwrap()
    }

    #[test]
    fn a_slower_disk_explains_the_lock_that_syncs_and_the_reordering() {
        // zk takes 2 ms a grant (500/s), above opt; on a disk 3 ms slower it takes 8 ms
        // (125/s) and opt does not move: the order flips, and the disk says why.
        let first = on(0.5, &[("zk", 480.0, 520.0), ("opt", 280.0, 300.0)]);
        let second = on(3.5, &[("zk", 115.0, 135.0), ("opt", 280.0, 310.0)]);
        let (rows, text) = told(&first, &second);
        let zk = row(&rows, "zk");
        assert_eq!(zk.verdict, Verdict::Explained, "{zk:?}");
        assert_eq!(zk.why, "fsync 0.5→3.5 ms: +6 ms a grant");
        assert_eq!(row(&rows, "opt").verdict, Verdict::Agree);
        assert_eq!(
            reorderings(&first, &second),
            vec![
                Reordering {
                    above: "zk".into(),
                    below: "opt".into(),
                    decided_in: 1,
                },
                Reordering {
                    above: "opt".into(),
                    below: "zk".into(),
                    decided_in: 2,
                },
            ]
        );
        assert_contains!(text, "the machines explain it");
    }

    #[test]
    fn a_change_the_machines_do_not_predict_is_not_explained() {
        // Same disk, yet opt more than doubled, past zk: nothing in the fingerprints says why.
        let first = on(0.5, &[("zk", 480.0, 520.0), ("opt", 280.0, 300.0)]);
        let second = on(0.5, &[("zk", 480.0, 520.0), ("opt", 600.0, 700.0)]);
        let (rows, text) = told(&first, &second);
        let opt = row(&rows, "opt");
        assert_eq!(opt.verdict, Verdict::NotExplained, "{opt:?}");
        assert_eq!(row(&rows, "zk").verdict, Verdict::Agree);
        assert_contains!(text, "do NOT explain");
    }

    #[test]
    fn a_strategy_the_model_lacks_cannot_be_told() {
        let first = on(0.5, &[("etcd", 100.0, 120.0)]);
        let second = on(3.5, &[("etcd", 50.0, 60.0)]);
        let rows = explain(&first, &second, &model());
        assert_eq!(rows[0].verdict, Verdict::Unknown);
        assert_eq!(rows[0].why, "no fit in the model");
    }
}
