//! The capacity search of `lockbench sweep` (docs/capacity.md): which rate a strategy is
//! offered next, from what the rates before decided; pure, so it is tested on synthetic
//! strategies whose capacity is known.

use crate::report::sweep::{Bound, Search};
use crate::stats::Decision;

/// Where the search stands: the rates decided passing and failing, and those left undecided.
///
/// Until a rate fails, the next is the highest passed times `factor`; until one passes, the
/// next is the lowest failed (or undecided) divided by √factor. With both, the next rate is
/// the geometric midpoint of the widest gap between the decided ends and any undecided rate
/// inside them, until the interval is at most `goal_width` wide.
///
/// Once every strategy was searched, each end is [revisited](Self::revisit): judged again on
/// its search's trials and new ones minutes later, pooled (their dispersion widens the bounds
/// when the two moments disagree). An end whose decision moves is *drifted*. The interval then
/// holds both moments: its lower end is the lower of the search's and the pooled decisions'
/// highest pass, its upper end the higher of their lowest failures ([`Self::result`]).
#[derive(Debug, Clone)]
pub struct Searcher {
    search: Search,
    /// The SLO's quantile: 1 − it is the goal share of misses.
    quantile: f64,
    /// Every rate decided passing.
    passes: Vec<f64>,
    /// Every rate decided failing.
    failures: Vec<f64>,
    /// Rates whose decision moved at their revisit.
    drifted: Vec<f64>,
    /// Rates whose step ran out of budget undecided.
    undecided: Vec<f64>,
    /// Every failing or undecided rate with the share of its arrivals that missed (those
    /// above the goal aim the descent).
    fails: Vec<(f64, f64)>,
    /// The search's decided ends, kept at the first revisit: the moment the interval must
    /// still hold once the revisit moved an end.
    searched: Option<[Option<f64>; 2]>,
    /// Set once [`Self::next`] found nothing left to offer.
    done: bool,
}

impl Searcher {
    /// A search not yet started.
    pub fn new(search: Search, quantile: f64) -> Self {
        Self {
            search,
            quantile,
            passes: Vec::new(),
            failures: Vec::new(),
            drifted: Vec::new(),
            undecided: Vec::new(),
            fails: Vec::new(),
            searched: None,
            done: false,
        }
    }

    /// The next rate to offer, or `None` when the search is done; `start` is the first rate,
    /// and coming down the search offers nothing below `floor` (the lowest rate whose pass the
    /// budget left affords).
    pub fn next(&mut self, start: f64, floor: f64) -> Option<f64> {
        let r = self.candidate(start, floor);
        let tried = |x: f64| {
            self.passes.contains(&x) || self.failures.contains(&x) || self.undecided.contains(&x)
        };
        // Rounding must not step past the ends: a pass at the rounded-down maximum is still
        // "≥ max".
        let (lo, hi) = (self.search.min_per_s, self.search.max_per_s);
        let r = r
            .map(|x| {
                if x >= hi {
                    hi
                } else {
                    round_rate(x).clamp(lo, hi)
                }
            })
            .filter(|x| !tried(*x));
        self.done = r.is_none();
        r
    }

    fn candidate(&self, start: f64, floor: f64) -> Option<f64> {
        let s = &self.search;
        let down = s.factor.sqrt();
        let (passed, failed) = (self.passed(), self.failed());
        // Undecided rates inside the (possibly open) interval.
        let inside: Vec<f64> = self
            .undecided
            .iter()
            .copied()
            .filter(|u| passed.is_none_or(|p| *u > p) && failed.is_none_or(|f| *u < f))
            .collect();
        let lowest = inside.iter().copied().chain(failed).reduce(f64::min);
        let highest = inside.iter().copied().chain(passed).reduce(f64::max);
        match (passed, failed) {
            (None, None) if self.undecided.is_empty() => {
                Some(start.clamp(s.min_per_s, s.max_per_s))
            }
            // Nothing passed yet: come down until something does, aiming below where the
            // failing rates' miss shares say the goal is crossed.
            (None, _) => {
                let lowest = lowest?;
                let r = self.aim_below(lowest).unwrap_or(lowest / down);
                let r = r.max(s.min_per_s).max(floor);
                (r < lowest * 0.999).then_some(r)
            }
            // Nothing failed yet: go up until something does.
            (Some(p), None) => {
                let top = highest.unwrap_or(p);
                (top < s.max_per_s).then(|| (top * s.factor).min(s.max_per_s))
            }
            (Some(p), Some(f)) if f / p <= s.goal_width * 1.0001 => None,
            (Some(p), Some(f)) => {
                // Only the gaps next to a decided end can narrow the interval: between two
                // undecided rates lies nothing but more rates too close to the goal to tell.
                let low = inside.iter().copied().fold(f, f64::min);
                let high = inside.iter().copied().fold(p, f64::max);
                let (a, b) = if low / p >= f / high {
                    (p, low)
                } else {
                    (high, f)
                };
                // Beside an undecided rate a gap this narrow would be undecided too.
                let least = if inside.is_empty() { 1.0 } else { 1.1 };
                (b / a > least).then(|| (a * b).sqrt())
            }
        }
    }

    /// A rate below `lowest` (the lowest failed or undecided) likely to pass: where the miss
    /// share of the failing rates, extrapolated on a log–log line, falls to half the goal. A
    /// pass at a low rate costs the most time (299 arrivals for a p99), so the descent aims at
    /// one pass instead of halving through many failures. Only a choice of rate: the step's
    /// trials still decide. Never below `lowest` / factor, nor above `lowest` / √factor.
    fn aim_below(&self, lowest: f64) -> Option<f64> {
        let s = &self.search;
        let goal = 1.0 - self.quantile;
        let mut fails: Vec<(f64, f64)> =
            self.fails.iter().copied().filter(|f| f.1 > goal).collect();
        fails.sort_by(|a, b| a.0.total_cmp(&b.0));
        let &(r1, m1) = fails.first()?;
        // The slope of log(miss share) over log(rate) between the two lowest failures, 2
        // (a share growing with the square of the rate) with one.
        let slope = match fails.get(1) {
            Some(&(r2, m2)) if m2 > m1 => ((m2 / m1).ln() / (r2 / r1).ln()).clamp(1.0, 4.0),
            _ => 2.0,
        };
        let r = r1 * (goal * 0.5 / m1).powf(1.0 / slope);
        Some(r.clamp(lowest / s.factor, lowest / s.factor.sqrt()))
    }

    /// Records what a step at `rate` decided, and the share of its arrivals that missed.
    pub fn record(&mut self, rate: f64, decision: Decision, missed: f64) {
        match decision {
            Decision::Pass => self.passes.push(rate),
            Decision::Fail => {
                self.failures.push(rate);
                self.fails.push((rate, missed));
            }
            Decision::Undecided => {
                self.undecided.push(rate);
                self.fails.push((rate, missed));
            }
        }
    }

    /// The highest rate decided passing.
    fn passed(&self) -> Option<f64> {
        self.passes.iter().copied().reduce(f64::max)
    }

    /// The lowest rate decided failing.
    fn failed(&self) -> Option<f64> {
        self.failures.iter().copied().reduce(f64::min)
    }

    /// The interval's decided ends, `[lower, upper]`: what a revisit looks at again.
    pub fn ends(&self) -> [Option<f64>; 2] {
        [self.passed(), self.failed()]
    }

    /// Records what `rate` decided on every trial it ran — the search's and a revisit's,
    /// minutes apart, pooled — in place of the search's decision. Returns whether the
    /// decision moved (the rate has *drifted*: the machine moved it during the sweep).
    pub fn revisit(&mut self, rate: f64, decision: Decision, missed: f64) -> bool {
        if self.searched.is_none() {
            self.searched = Some(self.ends());
        }
        let before = if self.passes.contains(&rate) {
            Decision::Pass
        } else if self.failures.contains(&rate) {
            Decision::Fail
        } else {
            Decision::Undecided
        };
        let moved = before != decision;
        // An end the later moment no longer holds says the search's decisions on its side
        // were of the earlier moment: the later one must find its own end there (a search's
        // pass at 250/s says nothing of a moment that failed 283/s), and `searched` keeps
        // the earlier moment's in the interval.
        match before {
            Decision::Pass if moved => self.passes.clear(),
            Decision::Fail if moved => self.failures.clear(),
            _ => {}
        }
        self.passes.retain(|r| *r != rate);
        self.failures.retain(|r| *r != rate);
        self.undecided.retain(|r| *r != rate);
        self.record(rate, decision, missed);
        if moved && !self.drifted.contains(&rate) {
            self.drifted.push(rate);
            self.drifted.sort_by(f64::total_cmp);
        }
        moved
    }

    /// Rates whose decision moved at their revisit, in ascending order.
    pub fn drifted(&self) -> Vec<f64> {
        self.drifted.clone()
    }

    /// The ends that hold every moment looked at: the decisions as they stand and, once
    /// revisited, the search's — the lower of their highest passes and the higher of their
    /// lowest failures. Following only the later moment left intervals the next sweep missed:
    /// `none` passed 4,670/s in a search and failed it at the revisit, and its interval became
    /// 3,930–4,670/s, below its own search's 4,670–5,550/s; a sweep of the same build 6
    /// minutes earlier read 4,820–5,260/s. Of 39 intervals whose ends drifted
    /// in 42 sweeps of Nov 27–29, 2026, 18 left out their own search's bracket.
    /// A side the revisit left open (no pass, or no failure) stays open.
    fn covered(&self) -> (Option<f64>, Option<f64>) {
        let (passed, failed) = (self.passed(), self.failed());
        let Some([was_passed, was_failed]) = self.searched else {
            return (passed, failed);
        };
        let lower = passed.map(|p| was_passed.map_or(p, |w| w.min(p)));
        let upper = failed.zip(was_failed).map(|(f, w)| f.max(w));
        (lower, upper)
    }

    /// The capacity found so far, how it is bounded, and the first failing rate; `complete`:
    /// the search was not cut short by an error or Ctrl-C.
    pub fn result(&self, complete: bool) -> (f64, Bound, Option<f64>) {
        let s = &self.search;
        let (passed, failed) = self.covered();
        let bound = match (passed, failed) {
            _ if !complete => Bound::Incomplete,
            (Some(_), Some(_)) => Bound::Found,
            (Some(p), None) if p >= s.max_per_s => Bound::AtLeastMax,
            (None, Some(f)) if f <= s.min_per_s * 1.0001 => Bound::BelowLowest,
            _ => Bound::Unbracketed,
        };
        (passed.unwrap_or(0.0), bound, failed)
    }
}

/// Rates are kept to three significant digits, so folder names and tables stay short.
fn round_rate(r: f64) -> f64 {
    crate::report::format::three_digits(r, f64::round)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::report::sweep::rate_text;

    /// The defaults, with a budget the synthetic searches never reach.
    pub(in crate::run) const SEARCH: Search = Search {
        start_per_s: None,
        budget_s: 60.0,
        ..crate::report::sweep::DEFAULTS
    };

    /// Runs the search from `start` against a strategy that sustains exactly `capacity`, and
    /// leaves undecided every rate within `fuzz` of it (a share of misses too close to 1 % to
    /// tell within a step's budget).
    fn search(start: f64, capacity: f64, fuzz: f64) -> (Vec<f64>, (f64, Bound, Option<f64>)) {
        let mut s = Searcher::new(SEARCH, 0.99);
        let mut offered = Vec::new();
        while let Some(r) = s.next(start, 0.0) {
            assert!(offered.len() < 20, "the search must end: {offered:?}");
            offered.push(r);
            let d = if (r / capacity - 1.0).abs() < fuzz {
                Decision::Undecided
            } else if r <= capacity {
                Decision::Pass
            } else {
                Decision::Fail
            };
            // A miss share growing with the square of the rate: 1 % at the capacity.
            s.record(r, d, 0.01 * (r / capacity).powi(2));
        }
        (offered, s.result(true))
    }

    #[test]
    fn the_search_ends_with_an_interval_within_the_goal_width() {
        for (start, cap) in [
            (25.0, 300.0),
            (1000.0, 300.0),
            (50.0, 12.5),
            (3000.0, 951.0),
        ] {
            let (offered, (lo, bound, hi)) = search(start, cap, 0.0);
            let hi = hi.unwrap();
            assert_eq!(bound, Bound::Found, "{offered:?}");
            assert!(
                lo <= cap && hi > cap,
                "{lo} .. {hi} around {cap}: {offered:?}"
            );
            assert!(hi / lo <= 1.25 * 1.0001, "{lo} .. {hi}: {offered:?}");
            assert!(offered.len() <= 8, "{offered:?}");
        }
    }

    #[test]
    fn the_descent_aims_below_the_crossing_its_failures_predict() {
        // 400/s missed far beyond 1 %: the next rate is the furthest down allowed (÷4), and
        // from two failures the line says where to find a pass.
        let (offered, (lo, bound, hi)) = search(400.0, 30.0, 0.0);
        assert_eq!(&offered[..3], &[400.0, 100.0, 25.0], "{offered:?}");
        assert!(offered.len() <= 6 && bound == Bound::Found, "{offered:?}");
        assert!(lo <= 30.0 && hi.unwrap() > 30.0);
        // A failure just over the goal only steps down by √factor.
        let mut s = Searcher::new(SEARCH, 0.99);
        s.record(100.0, Decision::Fail, 0.012);
        assert_eq!(s.next(100.0, 0.0), Some(50.0));
        // With too little budget left for a pass at 50/s, the search stops above it.
        let mut s = Searcher::new(SEARCH, 0.99);
        s.record(100.0, Decision::Fail, 0.012);
        assert_eq!(s.next(100.0, 60.0), Some(60.0));
        assert_eq!(s.next(100.0, 100.0), None);
        let (offered, _) = search(25.0, 3000.0, 0.0);
        assert_eq!(&offered[..3], &[25.0, 100.0, 400.0], "{offered:?}");
    }

    #[test]
    fn undecided_rates_stay_inside_a_wider_interval_and_the_search_still_ends() {
        let (offered, (lo, bound, hi)) = search(1000.0, 300.0, 0.1);
        let hi = hi.unwrap();
        assert_eq!(bound, Bound::Found, "{offered:?}");
        assert!(lo <= 270.0 && hi >= 330.0, "{lo} .. {hi}: {offered:?}");
        assert!(offered.len() <= 10, "{offered:?}");
    }

    #[test]
    fn a_strategy_faster_than_the_cap_reads_at_least_the_cap() {
        let (offered, (cap, bound, fail)) = search(12800.0, 1e9, 0.0);
        assert_eq!(offered, vec![12800.0, 51200.0, 204800.0]);
        assert_eq!((cap, bound, fail), (204800.0, Bound::AtLeastMax, None));
        // A cap of more than three significant digits is offered as it is, not rounded
        // below it (which read "unbracketed, budget spent" on Nov 25, 2026).
        let mut s = Searcher::new(
            Search {
                max_per_s: 102400.0,
                ..SEARCH
            },
            0.99,
        );
        assert_eq!(s.next(50600.0, 0.0), Some(50600.0));
        s.record(50600.0, Decision::Pass, 0.0);
        assert_eq!(s.next(50600.0, 0.0), Some(102400.0));
        s.record(102400.0, Decision::Pass, 0.0);
        assert_eq!(s.result(true), (102400.0, Bound::AtLeastMax, None));
    }

    #[test]
    fn a_strategy_slower_than_the_lowest_rate_reads_below_it() {
        let (offered, (cap, bound, fail)) = search(8.0, 0.5, 0.0);
        assert_eq!(offered, vec![8.0, 2.0, 1.0]);
        assert_eq!((cap, bound, fail), (0.0, Bound::BelowLowest, Some(1.0)));
    }

    #[test]
    fn a_search_cut_short_is_incomplete_or_unbracketed_never_found() {
        let mut s = Searcher::new(SEARCH, 0.99);
        s.record(25.0, Decision::Pass, 0.0);
        assert_eq!(s.result(false).1, Bound::Incomplete);
        // The budget ran out after one pass: the interval is open above.
        assert_eq!(s.result(true), (25.0, Bound::Unbracketed, None));
    }

    /// A search that passed 400, 566 and 673/s and failed 800 and 952/s.
    fn searched() -> Searcher {
        let mut s = Searcher::new(SEARCH, 0.99);
        for (r, d) in [(400.0, true), (800.0, false), (566.0, true), (673.0, true)] {
            let d = if d { Decision::Pass } else { Decision::Fail };
            s.record(r, d, if d == Decision::Pass { 0.0 } else { 0.05 });
        }
        s.record(952.0, Decision::Fail, 0.2);
        s
    }

    #[test]
    fn a_revisit_that_agrees_keeps_the_interval() {
        let mut s = searched();
        assert_eq!(s.ends(), [Some(673.0), Some(800.0)]);
        assert!(!s.revisit(673.0, Decision::Pass, 0.0));
        assert!(!s.revisit(800.0, Decision::Fail, 0.03));
        assert_eq!(s.result(true), (673.0, Bound::Found, Some(800.0)));
        assert!(s.drifted().is_empty());
    }

    #[test]
    fn a_revisit_whose_pooled_decision_moves_widens_the_interval_over_both_moments() {
        // The machine slowed: on every trial pooled the lower end now fails. The search's
        // passes were of the earlier moment, so the later one looks for its own below, and
        // the search's failure stays the upper end: the search's moment sustained 673/s (the
        // revisit used to make 673 the upper end, 566–673/s, leaving that moment out).
        let mut s = searched();
        assert!(s.revisit(673.0, Decision::Fail, 0.02));
        assert_eq!(s.drifted(), vec![673.0]);
        assert_eq!(s.result(true), (0.0, Bound::Unbracketed, Some(800.0)));
        let r = s.next(1.0, 0.0).unwrap();
        assert!((673.0 / SEARCH.factor..673.0).contains(&r), "{r}");
        s.record(r, Decision::Pass, 0.0);
        assert_eq!(s.result(true), (r, Bound::Found, Some(800.0)));
        // It sped up: the upper end now passes. The later moment looks for its own failure
        // above, and the search's pass stays the lower end.
        let mut s = searched();
        assert!(s.revisit(800.0, Decision::Pass, 0.0));
        assert_eq!(s.result(true), (673.0, Bound::Unbracketed, None));
        let r = s.next(1.0, 0.0).unwrap();
        assert!(r > 800.0, "{r}");
        s.record(r, Decision::Fail, 0.02);
        assert_eq!(s.result(true), (673.0, Bound::Found, Some(r)));
        // The two moments disagree so much that the pooled trials decide nothing: the rate
        // is inside the interval, and the later moment's pass is looked for below it.
        let mut s = searched();
        assert!(s.revisit(673.0, Decision::Undecided, 0.013));
        s.record(566.0, Decision::Pass, 0.0);
        assert_eq!(s.result(true), (566.0, Bound::Found, Some(800.0)));
        // With no pass found below a lower end that moved, the interval opens below, up to
        // the search's failure.
        let mut s = Searcher::new(SEARCH, 0.99);
        s.record(100.0, Decision::Pass, 0.0);
        s.record(120.0, Decision::Fail, 0.05);
        assert!(s.revisit(100.0, Decision::Fail, 0.05));
        assert_eq!(s.result(true), (0.0, Bound::Unbracketed, Some(120.0)));
    }

    #[test]
    fn an_interval_an_end_widened_is_narrowed_again_inside_its_new_ends() {
        // Nov 26, 2026: redis-lua-decr's lower end, 67,900/s, failed at its revisit, leaving
        // [33,900, 67,900], 2.0x wide. The later moment looks for its own pass below 67,900
        // (the search's at 33,900 was of the earlier one), coming down by at most √factor at
        // first, so here it stays between the two.
        let mut s = Searcher::new(SEARCH, 0.99);
        for (r, d, m) in [
            (33_900.0, Decision::Pass, 0.0),
            (67_900.0, Decision::Pass, 0.0),
            (79_800.0, Decision::Fail, 0.02),
        ] {
            s.record(r, d, m);
        }
        assert_eq!(s.next(1.0, 0.0), None, "1.18x: the search had ended");
        assert!(s.revisit(67_900.0, Decision::Fail, 0.015));
        let mut offered = Vec::new();
        while let Some(r) = s.next(1.0, 0.0) {
            assert!(r > 33_900.0 && r < 67_900.0, "{r}");
            offered.push(r);
            // The machine now sustains 50,000/s.
            let d = if r <= 50_000.0 {
                Decision::Pass
            } else {
                Decision::Fail
            };
            s.record(r, d, if d == Decision::Pass { 0.0 } else { 0.02 });
            assert!(offered.len() < 5, "{offered:?}");
        }
        // The later moment's ends are as narrow as the goal; the interval reaches up to the
        // search's failure, where the search's moment had its capacity (67,900–79,800/s).
        let [now_lo, now_hi] = s.ends().map(Option::unwrap);
        assert!(now_lo <= 50_000.0 && now_hi > 50_000.0, "{now_lo} {now_hi}");
        assert!(
            now_hi / now_lo <= SEARCH.goal_width * 1.0001,
            "{now_lo} {now_hi}"
        );
        assert_eq!(s.result(true), (now_lo, Bound::Found, Some(79_800.0)));
        assert_eq!(s.drifted(), vec![67_900.0]);
    }

    #[test]
    fn a_capacity_that_moves_between_search_and_revisit_stays_inside_the_interval() {
        // Searched at a capacity of 300/s, revisited when the machine sustains 8 % less or
        // more. An end the two moments decide alike keeps its decision; one they decide
        // differently pools to undecided (the trials' dispersion widens the bounds; the
        // pooling itself is tested in report::sweep). Each interval must then hold both
        // capacities, so two sweeps whose moments differ so still overlap.
        for moved in [0.92, 1.08] {
            let (_, (lo, _, hi)) = search(1000.0, 300.0, 0.0);
            let mut s = Searcher::new(SEARCH, 0.99);
            for (r, d, m) in trace(1000.0, 300.0) {
                s.record(r, d, m);
            }
            assert_eq!(s.ends(), [Some(lo), hi]);
            let later = 300.0 * moved;
            for r in s.ends().into_iter().flatten() {
                let (now, then) = (r <= later, r <= 300.0);
                let d = match (now, then) {
                    (true, true) => Decision::Pass,
                    (false, false) => Decision::Fail,
                    _ => Decision::Undecided,
                };
                s.revisit(r, d, 0.01 * (r / later).powi(2));
            }
            let (lo, _, hi) = s.result(true);
            let hi = hi.unwrap();
            assert!(
                lo <= 300.0f64.min(later) && hi > 300.0f64.max(later),
                "{lo}..{hi} x{moved}"
            );
        }
    }

    #[test]
    fn a_capacity_the_revisit_decides_outright_elsewhere_stays_inside_with_the_searched_one() {
        // The later moment sustains 25 % less or 30 % more, so its trials overrule the search's
        // at an end, and the search narrows again around the later capacity alone. The interval
        // must still hold the search's 300/s: the next sweep may land at either moment.
        for moved in [0.75, 1.3] {
            let mut s = Searcher::new(SEARCH, 0.99);
            for (r, d, m) in trace(1000.0, 300.0) {
                s.record(r, d, m);
            }
            let later = 300.0 * moved;
            let decide = |r: f64| {
                if r <= later {
                    (Decision::Pass, 0.0)
                } else {
                    (Decision::Fail, 0.01 * (r / later).powi(2))
                }
            };
            for r in s.ends().into_iter().flatten() {
                let (d, m) = decide(r);
                s.revisit(r, d, m);
            }
            assert!(!s.drifted().is_empty(), "x{moved}");
            let mut n = 0;
            while let Some(r) = s.next(1000.0, 0.0) {
                let (d, m) = decide(r);
                s.record(r, d, m);
                n += 1;
                assert!(n < 12, "x{moved}");
            }
            let (lo, bound, hi) = s.result(true);
            let hi = hi.unwrap();
            assert_eq!(bound, Bound::Found);
            assert!(
                lo <= 300.0f64.min(later) && hi > 300.0f64.max(later),
                "{lo}..{hi} x{moved}"
            );
        }
    }

    /// The steps [`search`] ran, with what each decided and missed.
    fn trace(start: f64, capacity: f64) -> Vec<(f64, Decision, f64)> {
        let mut s = Searcher::new(SEARCH, 0.99);
        let mut steps = Vec::new();
        while let Some(r) = s.next(start, 0.0) {
            let d = if r <= capacity {
                Decision::Pass
            } else {
                Decision::Fail
            };
            let m = 0.01 * (r / capacity).powi(2);
            s.record(r, d, m);
            steps.push((r, d, m));
        }
        steps
    }

    #[test]
    fn rates_keep_three_significant_digits() {
        assert_eq!(round_rate(282.842), 283.0);
        assert_eq!(round_rate(12.3456), 12.3);
        assert_eq!(round_rate(29.7000001), 29.7);
        assert_eq!(round_rate(1.5625), 1.56);
        assert_eq!(round_rate(3363.6), 3360.0);
        assert_eq!(rate_text(283.0), "283");
        assert_eq!(rate_text(12.3), "12.3");
    }
}
