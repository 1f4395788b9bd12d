//! Pure statistics, shared by every part that states how sure a figure is: binomial
//! confidence bounds (Clopper–Pearson) on a share of arrivals, and what they decide.
//!
//! A share measured on n arrivals is only known within bounds; a capacity step passes or fails
//! on those bounds, never on the point estimate, so one slow sale among 25 cannot end a ramp
//! and 1,000 arrivals a hair over the target cannot pass it.

pub mod drift;
pub mod ols;
pub mod signed_rank;

use statrs::distribution::{Beta, ContinuousCDF};

/// One-sided Clopper–Pearson bounds on the true share behind `k` events among `n` trials, each
/// at `confidence` (0.95: the true share is below `upper` with 95 % confidence, and above
/// `lower` with 95 %). Exact (the Beta quantiles of the binomial tails), so it never claims
/// more than the count holds, however small: with k = 0 the upper bound falls to 1 % only at
/// n ≥ 299. `(0, 1)` when n = 0.
pub fn clopper_pearson(n: u64, k: u64, confidence: f64) -> (f64, f64) {
    assert!(k <= n, "{k} events among {n} trials");
    clopper_pearson_over(n, k, 1.0, confidence)
}

/// [`clopper_pearson`] on `n` trials whose events cluster: with a dispersion φ > 1 (see
/// [`dispersion`]) the counts hold only n / φ independent trials' worth of evidence, and the
/// bounds are those of k / φ events among n / φ (the quasi-binomial effective sample size).
/// φ = 1 is the plain bound.
pub fn clopper_pearson_over(n: u64, k: u64, phi: f64, confidence: f64) -> (f64, f64) {
    assert!(k <= n, "{k} events among {n} trials");
    assert!(
        confidence > 0.0 && confidence < 1.0,
        "confidence {confidence} must lie strictly between 0 and 1"
    );
    if n == 0 {
        return (0.0, 1.0);
    }
    let phi = phi.max(1.0);
    let (n_f, k_f) = (n as f64 / phi, k as f64 / phi);
    let lower = if k == 0 {
        0.0
    } else {
        beta_quantile(k_f, n_f - k_f + 1.0, 1.0 - confidence)
    };
    let upper = if k == n {
        1.0
    } else {
        beta_quantile(k_f + 1.0, n_f - k_f, confidence)
    };
    (lower, upper)
}

/// How much more the share of events varies between groups (a step's trials) than binomial
/// sampling allows: Pearson's χ² over the groups divided by its degrees of freedom, at least 1.
/// Misses near a capacity come in bursts (a backlog that takes a second to drain), so two
/// trials at one rate can read 4 of 700 and 34 of 700 (measured, redis-sentinel-wait at
/// 669/s); pooled as 1,400 independent arrivals they would claim a certainty they do not hold.
/// Consecutive groups are merged until each expects at least [`MIN_EXPECTED`] events, where
/// χ² is a fair approximation (one miss in a short trial is no evidence of bursts). 1 with
/// fewer than two such groups, or when no group (or every one) had an event.
pub fn dispersion(groups: &[(u64, u64)]) -> f64 {
    let n: u64 = groups.iter().map(|g| g.0).sum();
    let k: u64 = groups.iter().map(|g| g.1.min(g.0)).sum();
    if k == 0 || k == n {
        return 1.0;
    }
    let p = k as f64 / n as f64;
    let mut merged: Vec<(f64, f64)> = Vec::new();
    let mut open = (0.0, 0.0);
    for &(n_i, k_i) in groups {
        open = (open.0 + n_i as f64, open.1 + k_i.min(n_i) as f64);
        if open.0 * p.min(1.0 - p) >= MIN_EXPECTED {
            merged.push(std::mem::take(&mut open));
        }
    }
    match merged.last_mut() {
        Some(last) => *last = (last.0 + open.0, last.1 + open.1),
        None => return 1.0,
    }
    if merged.len() < 2 {
        return 1.0;
    }
    let chi2: f64 = merged
        .iter()
        .map(|&(n_i, k_i)| (k_i - n_i * p).powi(2) / (n_i * p * (1.0 - p)))
        .sum();
    (chi2 / (merged.len() - 1) as f64).max(1.0)
}

/// Fewest expected events in a group that [`dispersion`] compares (Cochran's rule for χ²).
pub const MIN_EXPECTED: f64 = 5.0;

/// The `p` quantile of Beta(a, b).
fn beta_quantile(a: f64, b: f64, p: f64) -> f64 {
    Beta::new(a, b)
        .expect("shape parameters are positive")
        .inverse_cdf(p)
        .clamp(0.0, 1.0)
}

/// What a share's bounds decide against a goal share (the largest acceptable).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Decision {
    /// The upper bound is within the goal.
    Pass,
    /// The lower bound is beyond the goal.
    Fail,
    /// Neither yet: more samples are needed.
    Undecided,
}

/// Decides `k` bad outcomes among `n` against `goal` (e.g. 0.01: at most 1 % may miss).
pub fn decide(n: u64, k: u64, goal: f64, confidence: f64) -> (Decision, f64, f64) {
    decide_over(n, k, 1.0, goal, confidence)
}

/// [`decide`] with the bounds of [`clopper_pearson_over`] at dispersion `phi`.
pub fn decide_over(n: u64, k: u64, phi: f64, goal: f64, confidence: f64) -> (Decision, f64, f64) {
    let (lower, upper) = clopper_pearson_over(n, k, phi, confidence);
    let d = if n > 0 && upper <= goal {
        Decision::Pass
    } else if n > 0 && lower > goal {
        Decision::Fail
    } else {
        Decision::Undecided
    };
    (d, lower, upper)
}

/// The fewest trials with no event that pass `goal` at `confidence`: ln(1 − c) / ln(1 − goal),
/// rounded up (299 for a p99 at 95 %).
pub fn trials_to_pass(goal: f64, confidence: f64) -> u64 {
    ((1.0 - confidence).ln() / (1.0 - goal).ln()).ceil() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_p99_needs_299_clean_arrivals_and_473_with_one_miss() {
        assert_eq!(trials_to_pass(0.01, 0.95), 299);
        assert_eq!(decide(298, 0, 0.01, 0.95).0, Decision::Undecided);
        assert_eq!(decide(299, 0, 0.01, 0.95).0, Decision::Pass);
        // One slow sale among 300 does not fail the step: it needs more arrivals to pass.
        assert_eq!(decide(300, 1, 0.01, 0.95).0, Decision::Undecided);
        assert_eq!(decide(472, 1, 0.01, 0.95).0, Decision::Undecided);
        assert_eq!(decide(473, 1, 0.01, 0.95).0, Decision::Pass);
    }

    #[test]
    fn clear_misses_fail_early_and_a_share_at_the_goal_never_decides() {
        // 3 of 25 slow (12 %): beyond 1 % with 95 % confidence already.
        let (d, lower, _) = decide(25, 3, 0.01, 0.95);
        assert_eq!(d, Decision::Fail, "lower bound {lower}");
        // 1 of 25 (4 %) proves nothing either way.
        assert_eq!(decide(25, 1, 0.01, 0.95).0, Decision::Undecided);
        // Exactly at the goal, even 100,000 arrivals stay undecided.
        assert_eq!(decide(100_000, 1_000, 0.01, 0.95).0, Decision::Undecided);
        assert_eq!(decide(0, 0, 0.01, 0.95).0, Decision::Undecided);
    }

    #[test]
    fn bounds_match_published_clopper_pearson_values() {
        // Two-sided 95 % interval (each side at 97.5 %) for 5 of 20: 0.0866 .. 0.4910.
        let (lo, hi) = clopper_pearson(20, 5, 0.975);
        assert!((lo - 0.0866).abs() < 5e-4, "{lo}");
        assert!((hi - 0.4910).abs() < 5e-4, "{hi}");
        // The rule of three: 0 of n, upper ≈ 3/n at 95 %.
        let (lo, hi) = clopper_pearson(1000, 0, 0.95);
        assert_eq!(lo, 0.0);
        assert!((hi - 0.002991).abs() < 1e-5, "{hi}");
        assert_eq!(clopper_pearson(10, 10, 0.95).1, 1.0);
    }

    #[test]
    fn trials_that_disagree_widen_the_bounds_and_agreeing_ones_do_not() {
        // Measured: 4 of 700 then 34 of 700 at one rate. Pooled they "fail" at 95 %; with
        // their dispersion they are undecided, as a third trial reading 0 showed they were.
        let phi = dispersion(&[(700, 4), (700, 34)]);
        assert!(phi > 10.0, "{phi}");
        assert_eq!(decide(1400, 38, 0.01, 0.95).0, Decision::Fail);
        assert_eq!(
            decide_over(1400, 38, phi, 0.01, 0.95).0,
            Decision::Undecided
        );
        // Trials that agree within binomial noise keep the plain bounds.
        assert_eq!(dispersion(&[(518, 7), (518, 10)]), 1.0);
        assert_eq!(dispersion(&[(500, 0), (500, 0)]), 1.0);
        assert_eq!(dispersion(&[(500, 9)]), 1.0);
        // One miss in a short trial is no burst: the groups expect too few to compare.
        assert_eq!(dispersion(&[(25, 1), (150, 0), (150, 0), (150, 0)]), 1.0);
        // A clear failure stays a failure even when its trials disagree.
        let phi = dispersion(&[(700, 300), (700, 500)]);
        assert_eq!(decide_over(1400, 800, phi, 0.01, 0.95).0, Decision::Fail);
        assert_eq!(
            clopper_pearson_over(20, 5, 1.0, 0.975),
            clopper_pearson(20, 5, 0.975)
        );
    }
}
