//! What n samples can say about a quantile, from order statistics alone (no assumption on
//! the distribution). The one rule every percentile lockbench shows goes through: a quantile
//! is shown only when its 95 % confidence interval has an upper end ([`supported`]);
//! otherwise the maximum is shown, with its count.
//!
//! With B ~ binomial(n, q) the number of samples at or below the true q quantile ξ, the
//! order statistics X(l) ≤ ξ ≤ X(u) hold with probability P(l ≤ B ≤ u − 1). No upper end
//! exists when even X(n) misses ξ too often: P(B = n) = qⁿ > 5 %.

/// Confidence of every interval and of the rule.
pub const CONFIDENCE: f64 = 0.95;

/// Above this many samples the binomial is replaced by its normal approximation (with
/// continuity correction), when it has at least this variance: the exact sum is O(n).
const EXACT_UP_TO: u64 = 100_000;
const NORMAL_MIN_VARIANCE: f64 = 25.0;
/// The standard normal's 97.5 % point: the normal approximation is only used where the
/// upper tail is the plain 2.5 % (qⁿ is negligible at that size).
const Z_975: f64 = 1.959_963_984_540_054;

/// Fewest samples whose q quantile has a 95 % upper bound: n ≥ ln 0.05 / ln q (p50: 5,
/// p90: 29, p99: 299, p99.9: 2995). The maximum (q = 1) needs one.
pub fn min_samples(q: f64) -> u64 {
    if q >= 1.0 {
        return 1;
    }
    ((1.0 - CONFIDENCE).ln() / q.ln()).ceil() as u64
}

/// Whether n samples can bound the q quantile from above at 95 %: the rule.
pub fn supported(q: f64, n: u64) -> bool {
    n >= min_samples(q)
}

/// The 1-based ranks (l, u) of the order statistics X(l) ≤ ξ ≤ X(u) that bracket the q
/// quantile with at least 95 % probability. The miss is split evenly between the tails when
/// both fit; when the upper tail needs more than 2.5 % (a sample barely [`supported`]), u is
/// the largest sample and the lower tail gets what is left. l = 0: no order statistic is
/// low enough (the bound is latency's floor, 0); u = `None`: none is high enough (unbounded).
pub fn ranks(q: f64, n: u64) -> (u64, Option<u64>) {
    let alpha = 1.0 - CONFIDENCE;
    if n == 0 {
        return (0, None);
    }
    let all_below = (n as f64 * q.ln()).exp(); // P(B = n) = qⁿ
    let variance = n as f64 * q * (1.0 - q);
    if n > EXACT_UP_TO && variance >= NORMAL_MIN_VARIANCE && all_below <= alpha / 2.0 {
        return normal_ranks(q, n);
    }
    // The upper tail: the even split, X(n) alone, or nothing.
    let (upper_alpha, fixed_u) = if all_below <= alpha / 2.0 {
        (alpha / 2.0, None)
    } else if supported(q, n) {
        (all_below, Some(n))
    } else {
        (0.0, None)
    };
    let lower_alpha = alpha - upper_alpha;
    // Walk the binomial's cdf: l = first k with P(B ≤ k) > lower_alpha (then P(B < l) ≤
    // lower_alpha); u = 1 + first j with P(B ≤ j) ≥ 1 − upper_alpha (then P(B ≥ u) ≤ it).
    let (log_q, log_p) = (q.ln(), (1.0 - q).ln());
    let mut log_pmf = n as f64 * log_p; // P(B = 0)
    let (mut cdf, mut l, mut u) = (0.0, None, None);
    for k in 0..=n {
        if k > 0 {
            log_pmf += ((n - k + 1) as f64 / k as f64).ln() + log_q - log_p;
        }
        cdf += log_pmf.exp();
        if l.is_none() && cdf > lower_alpha {
            l = Some(k);
        }
        if upper_alpha > 0.0 && fixed_u.is_none() && cdf >= 1.0 - upper_alpha {
            u = Some((k + 1).min(n));
            break;
        }
        if l.is_some() && (fixed_u.is_some() || upper_alpha == 0.0) {
            break;
        }
    }
    let u = if upper_alpha > 0.0 {
        fixed_u.or(u)
    } else {
        None
    };
    (l.unwrap_or(n), u)
}

/// [`ranks`] from the normal approximation of the binomial, with continuity correction.
fn normal_ranks(q: f64, n: u64) -> (u64, Option<u64>) {
    let (mean, sd) = (n as f64 * q, (n as f64 * q * (1.0 - q)).sqrt());
    let l = (mean - 0.5 - Z_975 * sd).floor() + 1.0;
    let u = (mean - 0.5 + Z_975 * sd).ceil() + 1.0;
    (l.max(0.0) as u64, Some((u as u64).min(n)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_changes_side_at_ln_005_over_ln_q() {
        for (q, n) in [(0.5, 5), (0.9, 29), (0.99, 299), (0.999, 2995)] {
            assert_eq!(min_samples(q), n, "q{q}");
            assert!(supported(q, n) && !supported(q, n - 1), "q{q}");
            // The rule and the interval agree: an upper end exactly when supported.
            assert!(
                ranks(q, n).1.is_some() && ranks(q, n - 1).1.is_none(),
                "q{q}"
            );
        }
        assert!(supported(1.0, 1) && !supported(0.5, 0));
    }

    #[test]
    fn a_p99_of_1000_spans_about_p98_3_to_p99_7() {
        let (l, u) = ranks(0.99, 1000);
        assert!((983..=985).contains(&l), "{l}");
        assert!((996..=998).contains(&u.unwrap()), "{u:?}");
    }

    #[test]
    fn a_p99_of_10000_spans_about_p98_8_to_p99_2() {
        let (l, u) = ranks(0.99, 10_000);
        assert!((9878..=9882).contains(&l), "{l}");
        assert!((9918..=9922).contains(&u.unwrap()), "{u:?}");
    }

    #[test]
    fn a_p99_of_100_has_no_upper_end() {
        let (l, u) = ranks(0.99, 100);
        assert_eq!(u, None);
        // One-sided below: P(B ≤ 96) ≈ 1.8 % ≤ 5 % < P(B ≤ 97) ≈ 7.9 %, so X(97).
        assert_eq!(l, 97);
    }

    #[test]
    fn barely_supported_puts_the_upper_end_on_the_maximum() {
        // 0.99^299 = 4.95 %: X(299) is the upper end, the lower tail gets the 0.05 % left.
        let (l, u) = ranks(0.99, 299);
        assert_eq!(u, Some(299));
        assert!(l < 290, "{l}");
    }

    #[test]
    fn the_median_of_small_samples() {
        assert_eq!(ranks(0.5, 4), (0, None));
        // n = 5: [X(0) = 0, X(5)] covers 1 − 1/32.
        assert_eq!(ranks(0.5, 5), (0, Some(5)));
        // n = 100: the textbook ranks 40 and 61.
        assert_eq!(ranks(0.5, 100), (40, Some(61)));
    }

    #[test]
    fn the_normal_approximation_meets_the_exact_sum() {
        for q in [0.5, 0.99, 0.999] {
            let n = EXACT_UP_TO;
            let exact = ranks(q, n);
            let normal = normal_ranks(q, n);
            assert!(
                exact.0.abs_diff(normal.0) <= 2,
                "q{q}: {exact:?} {normal:?}"
            );
            assert!(
                exact.1.unwrap().abs_diff(normal.1.unwrap()) <= 2,
                "q{q}: {exact:?} {normal:?}"
            );
        }
        let (l, u) = ranks(0.99, 1_000_000);
        assert!(l < 990_000 && u.unwrap() > 990_000 && u.unwrap() - l < 500);
    }

    #[test]
    fn every_interval_covers_95_percent() {
        // Exact coverage P(l ≤ B ≤ u − 1), summed independently of the walk above.
        for n in [1u64, 5, 30, 100, 298, 299, 300, 400, 1000, 3000] {
            for q in [0.5, 0.9, 0.99, 0.999] {
                let (l, u) = ranks(q, n);
                let Some(u) = u else { continue };
                let pmf = |k: u64| {
                    let mut lp = 0.0;
                    for i in 0..k {
                        lp += ((n - i) as f64 / (i + 1) as f64).ln();
                    }
                    (lp + k as f64 * q.ln() + (n - k) as f64 * (1.0 - q).ln()).exp()
                };
                let cover: f64 = (l..u).map(pmf).sum();
                assert!(
                    cover >= CONFIDENCE - 1e-9,
                    "q{q} n{n}: {l}..{u} covers {cover}"
                );
            }
        }
    }
}
