//! How far a machine moves a capacity between two moments, from what revisits saw.
//!
//! A sweep decides each strategy's interval `[L, U]` (L passed, U failed) and, minutes later,
//! decides both ends again. Whether an end's decision moved is a coarse reading of how far the
//! capacity moved in between: with the capacity anywhere in the interval (uniform on the log
//! scale) and its log moving by δ ~ N(0, σ²) between the moments, L fails (or reads
//! undecided) at the revisit when δ < −u and U passes when δ > w − u, where w = ln(U / L) and
//! u = ln(C / L). Each end draws its own δ: the two are decided by trials of their own, and a
//! decision's own noise (a collapse in one trial of three) moves an end as a drift does. (With
//! one δ for both, an interval both of whose ends moved would be impossible; revisits have
//! seen them.) Pooled over every strategy of a sweep, those outcomes give σ by maximum
//! likelihood, and its one-sided upper bound by the likelihood ratio. The spread is the
//! machine's, not a strategy's: two binary outcomes per strategy cannot tell one strategy's
//! drift from another's, so every interval is widened by the pooled one.
//!
//! Why pooled over the machine: within one process, a minute apart, `none` read 4,260–5,060/s,
//! then 3,380–4,020/s and 3,420–4,070/s (Nov 29, 2026), while each interval was 1.19× wide;
//! and of 33 strategies in two main jobs of one build, the later read lower for 15 of 19.

use statrs::distribution::{ContinuousCDF, Normal};

/// One interval some of whose ends were decided again at a later moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Revisited {
    /// The searched upper end over the lower (> 1).
    pub width: f64,
    /// The lower end (a pass) did not pass again; `None`: not decided again.
    pub lower_moved: Option<bool>,
    /// The upper end (a fail) did not fail again; `None`: not decided again.
    pub upper_moved: Option<bool>,
}

impl Revisited {
    /// Its ends decided again, and how many of them moved.
    pub fn ends(&self) -> (usize, usize) {
        let ends = [self.lower_moved, self.upper_moved];
        let seen = ends.iter().flatten().count();
        (seen, ends.iter().flatten().filter(|m| **m).count())
    }
}

/// The spread σ of a capacity's log between two moments.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// The maximum-likelihood σ (the grid's lowest, [`SIGMA_MIN`], when no end moved).
    pub sigma: f64,
    /// Its one-sided upper bound at the confidence asked; `None` when the outcomes cannot
    /// bound it below [`SIGMA_MAX`] (too few ends).
    pub upper: Option<f64>,
}

/// The machine's drift over a sweep, and the widening it asked of every interval.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Drift {
    /// Intervals some of whose ends were decided again.
    pub intervals: usize,
    /// Ends (of those intervals) decided again.
    pub ends: usize,
    /// Of them, ends whose decision moved.
    pub moved: usize,
    /// The spread of a capacity's log between the two moments (maximum likelihood).
    pub sigma: f64,
    /// Its one-sided upper bound at the sweep's confidence; absent when the intervals were
    /// too few to bound it.
    pub sigma_upper: Option<f64>,
    /// What each end was widened by (its lower end divided, its upper end multiplied): by
    /// σ's bound, by [`SIGMA_MAX`] when ends moved yet σ could not be bounded, and 1
    /// when none moved and σ could not be bounded (too few intervals).
    pub widen: f64,
}

impl Drift {
    /// The drift in words with its numbers, for the line under a capacity table.
    pub fn text(&self) -> String {
        let pct = |x: f64| format!("{:.1}%", x * 100.0);
        match self.sigma_upper {
            Some(upper) => format!(
                "between moments: this machine moved capacities by σ {} (at most {} at the \
                 sweep's confidence) between the search and the revisit, from {} ends of {} \
                 intervals, {} moved; every interval is widened ×{:.2} each way so that another \
                 run on this machine lands inside (docs/capacity.md#between-moments)",
                pct(self.sigma),
                pct(upper),
                self.ends,
                self.intervals,
                self.moved,
                self.widen
            ),
            None if self.moved > 0 => format!(
                "between moments: {} of the {} ends of {} revisited interval(s) moved, more \
                 than bounds how far this machine moves a capacity; every interval is widened \
                 ×{:.2} each way (docs/capacity.md#between-moments)",
                self.moved, self.ends, self.intervals, self.widen
            ),
            None => format!(
                "between moments: {} revisited interval(s) are too few to bound how far this \
                 machine moves a capacity; the intervals hold this sweep's moments only, and \
                 another run may land outside them (docs/capacity.md#between-moments)",
                self.intervals
            ),
        }
    }
}

/// The smallest σ looked at: 0.1 %, below any machine's drift worth stating.
pub const SIGMA_MIN: f64 = 0.001;

/// The largest σ looked at: a capacity moving e-fold between two moments. A bound that needs
/// more says the ends were too few to bound it.
pub const SIGMA_MAX: f64 = 1.0;

/// Grid points over [SIGMA_MIN, SIGMA_MAX], log-spaced (4.4 % apart).
const GRID: usize = 161;

/// Points over an interval at which the capacity's place is integrated.
const PLACES: usize = 64;

/// The spread of `revisited`, with its upper bound at `confidence` (one-sided); `None` when
/// there is nothing to estimate from.
pub fn spread(revisited: &[Revisited], confidence: f64) -> Option<Spread> {
    let usable: Vec<&Revisited> = revisited
        .iter()
        .filter(|r| r.width.is_finite() && r.width > 1.0)
        .collect();
    if usable.is_empty() {
        return None;
    }
    let grid: Vec<f64> = (0..GRID)
        .map(|i| SIGMA_MIN * (SIGMA_MAX / SIGMA_MIN).powf(i as f64 / (GRID - 1) as f64))
        .collect();
    let ll: Vec<f64> = grid.iter().map(|s| log_likelihood(&usable, *s)).collect();
    let best = (0..GRID).fold(0, |b, i| if ll[i] > ll[b] { i } else { b });
    // The likelihood-ratio bound: 2 (ℓ̂ − ℓ(σ)) ≤ z², z the one-sided normal quantile.
    let z = normal().inverse_cdf(confidence);
    let within = |i: usize| 2.0 * (ll[best] - ll[i]) <= z * z;
    let last = (best..GRID)
        .take_while(|i| within(*i))
        .last()
        .unwrap_or(best);
    Some(Spread {
        sigma: grid[best],
        upper: (last + 1 < GRID).then(|| grid[last]),
    })
}

/// The two-sided normal quantile at `confidence`: how many σ another moment may lie from
/// this one (1.96 at 95 %).
pub fn two_sided_z(confidence: f64) -> f64 {
    normal().inverse_cdf(0.5 + confidence / 2.0)
}

fn normal() -> Normal {
    Normal::new(0.0, 1.0).expect("the standard normal")
}

/// ln P(outcomes | σ), the capacity's place in each interval integrated out (midpoint rule).
fn log_likelihood(revisited: &[&Revisited], sigma: f64) -> f64 {
    let n = normal();
    revisited
        .iter()
        .map(|r| {
            let w = r.width.ln();
            let p: f64 = (0..PLACES)
                .map(|k| {
                    let u = w * (k as f64 + 0.5) / PLACES as f64;
                    // The chance the end's decision moved: the capacity crossed it.
                    let lower = n.cdf(-u / sigma);
                    let upper = n.cdf(-(w - u) / sigma);
                    // An end not decided again says nothing.
                    let pl = r
                        .lower_moved
                        .map_or(1.0, |m| if m { lower } else { 1.0 - lower });
                    let pu = r
                        .upper_moved
                        .map_or(1.0, |m| if m { upper } else { 1.0 - upper });
                    pl * pu
                })
                .sum::<f64>()
                / PLACES as f64;
            p.max(f64::MIN_POSITIVE).ln()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_distr::{Distribution, Normal as Gauss};

    /// Intervals of width `width` whose capacity moves by σ between the moments.
    fn simulate(n: usize, width: f64, sigma: f64, seed: u64) -> Vec<Revisited> {
        let mut rng = rand::rngs::ChaCha8Rng::seed_from_u64(seed);
        let gauss = Gauss::new(0.0, sigma).unwrap();
        (0..n)
            .map(|_| {
                let w = width.ln();
                let u: f64 = rng.random_range(0.0..w);
                // Each end decided on trials of its own: a move of its own.
                let (at_lower, at_upper) = (u + gauss.sample(&mut rng), u + gauss.sample(&mut rng));
                Revisited {
                    width,
                    lower_moved: Some(at_lower < 0.0),
                    upper_moved: Some(at_upper > w),
                }
            })
            .collect()
    }

    #[test]
    fn the_spread_is_found_from_which_ends_moved_and_its_bound_lies_above_it() {
        for (sigma, seed) in [(0.03, 1), (0.06, 2), (0.12, 3)] {
            let s = spread(&simulate(400, 1.19, sigma, seed), 0.95).unwrap();
            assert!(
                (s.sigma / sigma - 1.0).abs() < 0.4,
                "σ {sigma} read {}",
                s.sigma
            );
            // The bound holds the true spread, and not by a mile.
            let upper = s.upper.expect("400 intervals bound it");
            assert!(upper >= sigma && upper < sigma * 2.0, "σ {sigma}: {s:?}");
        }
    }

    /// An interval both of whose ends held.
    const STILL: Revisited = Revisited {
        width: 1.19,
        lower_moved: Some(false),
        upper_moved: Some(false),
    };

    #[test]
    fn ends_that_all_held_bound_the_spread_low_and_more_of_them_lower() {
        let held = |n| vec![STILL; n];
        let few = spread(&held(10), 0.95).unwrap();
        let many = spread(&held(40), 0.95).unwrap();
        assert_eq!(few.sigma, SIGMA_MIN);
        let (few, many) = (few.upper.unwrap(), many.upper.unwrap());
        assert!(many < few && few < 0.04, "10 held: {few}, 40 held: {many}");
    }

    #[test]
    fn one_interval_cannot_bound_the_spread_and_moved_ends_raise_it() {
        let one = [STILL];
        assert_eq!(spread(&one, 0.95).unwrap().upper, None);
        let mut some = simulate(40, 1.19, 0.001, 4);
        let calm = spread(&some, 0.95).unwrap();
        for r in some.iter_mut().take(12) {
            r.lower_moved = Some(true);
        }
        let moved = spread(&some, 0.95).unwrap();
        assert!(
            moved.sigma > 0.03 && moved.sigma > calm.sigma * 10.0,
            "{calm:?} {moved:?}"
        );
        assert!(spread(&[], 0.95).is_none());
    }

    #[test]
    fn an_end_not_decided_again_counts_for_nothing_and_one_that_moved_alone_still_counts() {
        let lower_only = Revisited {
            upper_moved: None,
            ..STILL
        };
        let (both, half) = (spread(&[STILL; 20], 0.95), spread(&[lower_only; 20], 0.95));
        // Half the ends held: the bound is looser.
        assert!(half.unwrap().upper.unwrap() > both.unwrap().upper.unwrap());
        let mut seen = vec![STILL; 20];
        seen.extend(
            [Revisited {
                lower_moved: Some(true),
                ..lower_only
            }; 5],
        );
        let s = spread(&seen, 0.95).unwrap();
        assert!(s.sigma > 0.02, "{s:?}");
        assert_eq!(seen[24].ends(), (1, 1));
    }

    #[test]
    fn another_moment_lies_within_1_96_sigma_at_95_percent() {
        assert!((two_sided_z(0.95) - 1.96).abs() < 0.001);
    }
}
