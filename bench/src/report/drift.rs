//! A sweep's intervals widened by how far its machine moved capacities between moments, so
//! that another moment (the next run on the same machine) lands inside them.
//!
//! A revisit's interval holds the capacities of two moments of one sweep (`run::search`). Two
//! main jobs of one build, 25 minutes apart, still missed each other in 3 of 33 intervals
//! (Nov 29, 2026, docs/results.md): the capacity moves between moments by more than an
//! interval's width. How far is measured in the same sweep: whether each revisited end's
//! decision moved, pooled over every strategy ([`crate::stats::drift`]). Every interval is
//! widened by `exp(z σ)` each way, σ the spread's upper bound at the sweep's confidence and z
//! its two-sided normal quantile: another moment's capacity lies that close to this one's.

use super::format::three_digits;
use super::sweep::{Entry, Sweep};
use crate::stats::Decision;
use crate::stats::drift::{self, Drift, Revisited};

/// An entry's revisited ends: the search's bracket (its highest pass and lowest fail before
/// the first revisit) and whether each end, decided again, moved. An end the revisit did not
/// reach (its budget, an error) is not observed; leaving out the whole interval instead would
/// drop the ones whose first end moved and sent the search away before the second.
fn revisited(e: &Entry) -> Option<Revisited> {
    let searched = e.steps.iter().take_while(|s| !s.revisit);
    let rates = |d: Decision| {
        searched
            .clone()
            .filter(move |s| s.decision == d)
            .map(|s| s.rate_per_s)
    };
    let lower = rates(Decision::Pass).reduce(f64::max)?;
    let upper = rates(Decision::Fail).reduce(f64::min)?;
    let again = |rate: f64, held: Decision| {
        (e.steps.iter())
            .find(|s| s.revisit && s.rate_per_s == rate)
            .map(|s| s.decision != held)
    };
    let r = Revisited {
        width: upper / lower,
        lower_moved: again(lower, Decision::Pass),
        upper_moved: again(upper, Decision::Fail),
    };
    (upper > lower && r.ends().0 > 0).then_some(r)
}

impl Sweep {
    /// Measures the drift over the revisits and widens every interval by it. Idempotent; a
    /// sweep without revisits keeps its intervals and no drift.
    pub fn settle_drift(&mut self) {
        let seen: Vec<Revisited> = self.entries.iter().filter_map(revisited).collect();
        let spread = drift::spread(&seen, self.search.confidence);
        let (ends, moved) = seen
            .iter()
            .map(Revisited::ends)
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
        let z = drift::two_sided_z(self.search.confidence);
        self.drift = spread.map(|s| Drift {
            intervals: seen.len(),
            ends,
            moved,
            sigma: s.sigma,
            sigma_upper: s.upper,
            // Ends that moved beyond any bound must not leave the intervals as measured.
            widen: match s.upper {
                Some(u) => (z * u).exp(),
                None if moved > 0 => (z * drift::SIGMA_MAX).exp(),
                None => 1.0,
            },
        });
        let widen = self.drift.map_or(1.0, |d| d.widen);
        for e in &mut self.entries {
            e.widen(widen);
        }
    }
}

impl Entry {
    /// Sets the interval to the measured ends widened by `factor` each way, to three
    /// significant digits, outwards.
    pub fn widen(&mut self, factor: f64) {
        let [lower, upper] =
            Entry::interval(self.capacity_per_s, self.first_failing_per_s).interval;
        let (lower, upper) = if factor > 1.0 {
            let lower = lower.map(|l| three_digits(l / factor, f64::floor));
            (lower, upper.map(|u| three_digits(u * factor, f64::ceil)))
        } else {
            (lower, upper)
        };
        self.capacity_interval_per_s = [lower, upper];
        self.interval_width = lower.zip(upper).map(|(l, u)| u / l);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::evidence::fixtures;
    use crate::report::sweep::Bound;

    /// An entry searched to [`lower`, `upper`] and revisited at both ends.
    fn revisited_entry(lower: f64, upper: f64, lower_moved: bool, upper_moved: bool) -> Entry {
        let steps = [(lower, true, true), (upper, false, true)];
        let mut e = fixtures::entry("s", lower, Bound::Found, &steps);
        let again = |rate: f64, decision: Decision| {
            let mut s = e
                .steps
                .iter()
                .find(|s| s.rate_per_s == rate)
                .unwrap()
                .clone();
            (s.revisit, s.decision, s.passed) = (true, decision, decision == Decision::Pass);
            s
        };
        let l = again(
            lower,
            if lower_moved {
                Decision::Undecided
            } else {
                Decision::Pass
            },
        );
        let u = again(
            upper,
            if upper_moved {
                Decision::Pass
            } else {
                Decision::Fail
            },
        );
        e.steps.extend([l, u]);
        e
    }

    #[test]
    fn every_interval_widens_by_the_drift_its_revisits_measured_and_holds_its_ends() {
        let entries = (0..30)
            .map(|i| revisited_entry(1000.0, 1190.0, i % 5 == 0, i % 7 == 0))
            .collect();
        let mut s = fixtures::sweep(entries);
        s.search.revisit = true;
        s.settle_drift();
        let d = s.drift.expect("30 revisited intervals");
        assert_eq!((d.intervals, d.moved), (30, 6 + 5));
        assert!(d.widen > 1.05 && d.widen < 1.6, "{d:?}");
        let e = &s.entries[0];
        let [lo, hi] = e.capacity_interval_per_s;
        assert!(
            lo.unwrap() <= 1000.0 / d.widen && hi.unwrap() >= 1190.0 * d.widen,
            "{lo:?} {hi:?}"
        );
        assert_eq!(
            (e.capacity_per_s, e.first_failing_per_s),
            (1000.0, Some(1190.0))
        );
        assert!(
            e.capacity_text()
                .starts_with(&super::super::format::rate_exact(lo.unwrap()))
        );
        // Settling again measures the same and widens from the measured ends, not twice.
        s.settle_drift();
        assert_eq!(s.entries[0].capacity_interval_per_s, [lo, hi]);
        assert!(d.text().contains("11 moved"), "{}", d.text());
    }

    #[test]
    fn a_sweep_too_small_to_bound_the_drift_keeps_its_intervals_and_says_so() {
        let mut s = fixtures::sweep(vec![revisited_entry(1000.0, 1190.0, false, false)]);
        s.settle_drift();
        let d = s.drift.expect("one revisited interval");
        assert_eq!((d.sigma_upper, d.widen), (None, 1.0));
        assert_eq!(
            s.entries[0].capacity_interval_per_s,
            [Some(1000.0), Some(1190.0)]
        );
        assert!(d.text().contains("too few"), "{}", d.text());
        // One interval both of whose ends moved is no reason to keep it as measured.
        let mut moved = fixtures::sweep(vec![revisited_entry(1000.0, 1190.0, true, true)]);
        moved.settle_drift();
        let d = moved.drift.unwrap();
        assert!(d.sigma_upper.is_none() && d.widen > 7.0, "{d:?}");
        assert!(d.text().contains("2 of the 2 ends"), "{}", d.text());
        // Without revisits there is nothing to measure.
        let steps = [(1000.0, true, true), (1190.0, false, true)];
        let mut plain = fixtures::sweep(vec![fixtures::entry("s", 1000.0, Bound::Found, &steps)]);
        plain.settle_drift();
        assert!(plain.drift.is_none());
    }

    #[test]
    fn a_sweep_read_back_is_widened_by_this_builds_rule_and_an_older_one_is_kept() {
        let entries = (0..10)
            .map(|i| revisited_entry(1000.0, 1190.0, i < 3, false))
            .collect();
        let mut s = fixtures::sweep(entries);
        s.settle_drift();
        let dir = tempfile::tempdir().unwrap();
        let mut stale = s.clone();
        stale.entries[0].capacity_interval_per_s = [Some(1.0), Some(2.0)];
        stale.write(dir.path()).unwrap();
        let read = Sweep::read(dir.path()).unwrap();
        assert_eq!(
            read.entries[0].capacity_interval_per_s,
            s.entries[0].capacity_interval_per_s
        );
        assert_eq!(read.drift, s.drift);
        // A sweep written before the drift existed keeps the intervals it printed.
        stale.drift = None;
        stale.write(dir.path()).unwrap();
        let read = Sweep::read(dir.path()).unwrap();
        assert_eq!(
            read.entries[0].capacity_interval_per_s,
            [Some(1.0), Some(2.0)]
        );
    }

    #[test]
    fn widened_ends_keep_three_digits_outwards() {
        assert_eq!(three_digits(3417.6, f64::floor), 3410.0);
        assert_eq!(three_digits(3417.6, f64::ceil), 3420.0);
        assert_eq!(three_digits(3410.0, f64::ceil), 3410.0);
        assert_eq!(three_digits(12.345, f64::floor), 12.3);
        assert_eq!(three_digits(30.0 * 1.1737, f64::ceil).to_string(), "35.3");
        assert_eq!(three_digits(84_100.0 / 1.1737, f64::floor), 71_600.0);
    }
}
