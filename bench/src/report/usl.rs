//! Gunther's Universal Scalability Law, fitted to throughput measured at several contender
//! counts: X(N) = λN / (1 + σ(N−1) + κN(N−1)). λ is the throughput of one contender, σ the
//! share of the work that serialises (contention: queueing for the lock), κ the cost of
//! keeping contenders coherent (each pair exchanging state: retries, wake-ups, polls that
//! find the lock taken). With κ > 0 throughput peaks at N* = √((1−σ)/κ) and falls after.
//!
//! The fit: for a given λ, the law is linear in σ and κ once rearranged (Gunther's
//! linearisation, λN/X − 1 = σ(N−1) + κN(N−1)), so they come from a least-squares solve with
//! σ in [0, 1] and κ ≥ 0 (a κ ≤ 0 is read as none, as Gunther does); λ is then chosen by a
//! golden-section search minimising the squared error of the throughput itself, so a noisy
//! single-contender level does not pin the whole curve. Pure: no I/O, unit-tested on
//! synthetic data.

use serde::{Deserialize, Serialize};

/// Fewest distinct contender counts the three coefficients are fitted to.
pub const MIN_LEVELS: usize = 3;

/// R² below which a fit is called poor: the law explains less than 90 % of the variation,
/// so its coefficients (and the peak) describe the data loosely.
pub const POOR_R2: f64 = 0.9;

/// What fitting the law to a strategy's levels gave.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum Usl {
    /// The coefficients.
    Fit(UslFit),
    /// Fewer distinct contender counts with throughput than the fit needs.
    TooFewLevels {
        /// Distinct counts with some throughput.
        levels: usize,
        /// [`MIN_LEVELS`].
        needed: usize,
    },
}

/// The fitted law.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UslFit {
    /// Throughput of one contender, grants/s.
    pub lambda: f64,
    /// Contention: the serialised share, 0..1.
    pub sigma: f64,
    /// Coherency: the pairwise cost, ≥ 0.
    pub kappa: f64,
    /// Goodness of fit over every point fitted, on the throughput; `None` when the throughput
    /// did not vary at all (nothing to explain).
    pub r2: Option<f64>,
    /// Where throughput peaks, contenders; `None` without coherency cost (κ = 0: throughput
    /// levels off at λ/σ instead, or grows linearly when σ = 0 too).
    pub peak_n: Option<f64>,
    /// The fitted throughput at `peak_n`.
    pub peak_per_s: Option<f64>,
    /// Points fitted (every trial of every level).
    pub points: usize,
    /// R² below [`POOR_R2`].
    pub poor: bool,
}

impl UslFit {
    /// The fitted throughput at `n` contenders.
    pub fn at(&self, n: f64) -> f64 {
        predict(self.lambda, self.sigma, self.kappa, n)
    }
}

impl Usl {
    /// One line for tables and pages.
    pub fn text(&self) -> String {
        match self {
            Usl::TooFewLevels { levels, needed } => {
                format!("too few levels to fit ({levels}; the fit needs {needed})")
            }
            Usl::Fit(f) => {
                let r2 =
                    f.r2.map_or("undefined (flat)".to_string(), |r| format!("{r:.3}"));
                let peak = match (f.peak_n, f.peak_per_s) {
                    (Some(n), Some(x)) => format!("peak at N = {n:.1} ({x:.0}/s)"),
                    _ if f.sigma > 0.0 => {
                        format!("no peak: levels off at {:.0}/s", f.lambda / f.sigma)
                    }
                    _ => "no peak: linear".to_string(),
                };
                let poor = if f.poor { " — poor fit" } else { "" };
                format!(
                    "λ = {:.1}/s, σ = {:.4}, κ = {:.6}, R² = {r2}, {peak}{poor}",
                    f.lambda, f.sigma, f.kappa
                )
            }
        }
    }
}

fn predict(lambda: f64, sigma: f64, kappa: f64, n: f64) -> f64 {
    lambda * n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0))
}

/// Fits the law to `(contenders, throughput)` points (several per count allowed: trials).
/// Points with no throughput or not finite are left out: the law has no zero.
pub fn fit(points: &[(f64, f64)]) -> Usl {
    let pts: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|&(n, x)| n >= 1.0 && x > 0.0 && n.is_finite() && x.is_finite())
        .collect();
    let mut counts: Vec<f64> = pts.iter().map(|p| p.0).collect();
    counts.sort_by(f64::total_cmp);
    counts.dedup();
    if counts.len() < MIN_LEVELS {
        return Usl::TooFewLevels {
            levels: counts.len(),
            needed: MIN_LEVELS,
        };
    }
    // Under the law X(N) ≤ λN, so λ lies at or above the best throughput per contender;
    // noise may put it a little below.
    let m = pts.iter().map(|&(n, x)| x / n).fold(0.0, f64::max);
    let sse = |lambda: f64| {
        let (s, k) = coefficients(&pts, lambda);
        pts.iter()
            .map(|&(n, x)| (x - predict(lambda, s, k, n)).powi(2))
            .sum::<f64>()
    };
    let lambda = golden_min(sse, 0.5 * m, 3.0 * m);
    let (sigma, kappa) = coefficients(&pts, lambda);
    let mean = pts.iter().map(|p| p.1).sum::<f64>() / pts.len() as f64;
    // The linearised solve weighs points unlike the throughput's error does: refine all three
    // on that error, from it and from the flat line (σ = 1, κ = 0, λ = the mean), so the fit
    // is never worse than a constant (R² ≥ 0).
    let (lambda, sigma, kappa) = [(lambda, sigma, kappa), (mean, 1.0, 0.0)]
        .into_iter()
        .map(|start| refine(&pts, start, m))
        .min_by(|a, b| error(&pts, *a).total_cmp(&error(&pts, *b)))
        .expect("two starts");
    // A search along [0, κ] never lands on 0 itself: a κ whose term stays below a millionth
    // at the most contenders measured is none.
    let top = counts.last().copied().unwrap_or(1.0);
    let kappa = if kappa * top * top < 1e-6 { 0.0 } else { kappa };
    let sst: f64 = pts.iter().map(|p| (p.1 - mean).powi(2)).sum();
    let r2 = (sst > 1e-12 * mean * mean).then(|| 1.0 - error(&pts, (lambda, sigma, kappa)) / sst);
    // Fully serialised (σ = 1) with a coherency cost, throughput only falls: the peak is one
    // contender.
    let peak_n = (kappa > 0.0).then(|| ((1.0 - sigma) / kappa).sqrt().max(1.0));
    Usl::Fit(UslFit {
        lambda,
        sigma,
        kappa,
        r2,
        peak_n,
        peak_per_s: peak_n.map(|n| predict(lambda, sigma, kappa, n)),
        points: pts.len(),
        poor: r2.is_some_and(|r| r < POOR_R2),
    })
}

/// The squared error of the throughput at `(λ, σ, κ)`.
fn error(pts: &[(f64, f64)], (l, s, k): (f64, f64, f64)) -> f64 {
    pts.iter()
        .map(|&(n, x)| (x - predict(l, s, k, n)).powi(2))
        .sum()
}

/// Coordinate descent on the throughput's squared error from `start`: each round minimises
/// along λ (in [0.5m, 3m], m the best throughput per contender), σ (in [0, 1]) and κ (from 0
/// to four times its start or 0.01); a bounded number of rounds, keeping the best seen.
fn refine(pts: &[(f64, f64)], start: (f64, f64, f64), m: f64) -> (f64, f64, f64) {
    let (mut l, mut s, mut k) = start;
    let k_hi = (4.0 * k).max(0.01);
    for _ in 0..30 {
        l = golden_min(|v| error(pts, (v, s, k)), 0.5 * m, 3.0 * m);
        s = golden_min(|v| error(pts, (l, v, k)), 0.0, 1.0);
        k = golden_min(|v| error(pts, (l, s, v)), 0.0, k_hi);
    }
    let end = (l, s, k);
    if error(pts, end) <= error(pts, start) {
        end
    } else {
        start
    }
}

/// σ in [0, 1] and κ ≥ 0 minimising the squared error of the linearised law at `lambda`: the
/// unconstrained solve when it is feasible, else the best of the solves on the boundary.
fn coefficients(pts: &[(f64, f64)], lambda: f64) -> (f64, f64) {
    let rows: Vec<(f64, f64, f64)> = pts
        .iter()
        .map(|&(n, x)| (n - 1.0, n * (n - 1.0), lambda * n / x - 1.0))
        .collect();
    let sum = |f: &dyn Fn(&(f64, f64, f64)) -> f64| rows.iter().map(f).sum::<f64>();
    let (aa, ab, bb) = (
        sum(&|r| r.0 * r.0),
        sum(&|r| r.0 * r.1),
        sum(&|r| r.1 * r.1),
    );
    let (ay, by) = (sum(&|r| r.0 * r.2), sum(&|r| r.1 * r.2));
    let residual = |s: f64, k: f64| sum(&|r| (r.2 - s * r.0 - k * r.1).powi(2));
    let only = |num: f64, den: f64| if den > 0.0 { num / den } else { 0.0 };
    let det = aa * bb - ab * ab;
    let mut candidates = vec![
        (only(ay, aa).clamp(0.0, 1.0), 0.0),
        (0.0, only(by, bb).max(0.0)),
        // σ at its ceiling: every contender waits for every other.
        (1.0, only(by - ab, bb).max(0.0)),
    ];
    if det.abs() > 1e-12 * aa * bb {
        let (s, k) = ((ay * bb - by * ab) / det, (by * aa - ay * ab) / det);
        if (0.0..=1.0).contains(&s) && k >= 0.0 {
            candidates.push((s, k));
        }
    }
    candidates
        .into_iter()
        .min_by(|p, q| residual(p.0, p.1).total_cmp(&residual(q.0, q.1)))
        .unwrap_or((0.0, 0.0))
}

/// The minimum of `f` on [lo, hi] by golden-section search (f assumed unimodal there).
fn golden_min(f: impl Fn(f64) -> f64, mut lo: f64, mut hi: f64) -> f64 {
    let r = (5f64.sqrt() - 1.0) / 2.0;
    let (mut c, mut d) = (hi - r * (hi - lo), lo + r * (hi - lo));
    let (mut fc, mut fd) = (f(c), f(d));
    // Each round keeps 61.8 % of the bracket: 80 rounds narrow it by 10^-16.
    for _ in 0..80 {
        if fc <= fd {
            (hi, d, fd) = (d, c, fc);
            c = hi - r * (hi - lo);
            fc = f(c);
        } else {
            (lo, c, fc) = (c, d, fd);
            d = lo + r * (hi - lo);
            fd = f(d);
        }
    }
    (lo + hi) / 2.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn synthetic(lambda: f64, sigma: f64, kappa: f64, ns: &[f64]) -> Vec<(f64, f64)> {
        ns.iter()
            .map(|&n| (n, predict(lambda, sigma, kappa, n)))
            .collect()
    }

    fn fitted(u: Usl) -> UslFit {
        match u {
            Usl::Fit(f) => f,
            other => panic!("no fit: {other:?}"),
        }
    }

    const LEVELS: [f64; 7] = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];

    #[test]
    fn exact_data_gives_back_its_coefficients_and_peak() {
        let f = fitted(fit(&synthetic(1000.0, 0.05, 0.002, &LEVELS)));
        assert!((f.lambda - 1000.0).abs() < 0.5, "{f:?}");
        assert!((f.sigma - 0.05).abs() < 1e-4, "{f:?}");
        assert!((f.kappa - 0.002).abs() < 1e-6, "{f:?}");
        assert!(f.r2.unwrap() > 0.9999 && !f.poor, "{f:?}");
        // √((1 − 0.05) / 0.002) = 21.79
        assert!((f.peak_n.unwrap() - 21.794).abs() < 0.05, "{f:?}");
        assert!((f.peak_per_s.unwrap() - f.at(f.peak_n.unwrap())).abs() < 1e-9);
        assert_eq!(f.points, 7);
    }

    #[test]
    fn trials_with_noise_still_land_near_the_truth() {
        // ±3 % alternating noise, three trials a level.
        let mut pts = Vec::new();
        for (i, (n, x)) in synthetic(500.0, 0.1, 0.0005, &LEVELS)
            .into_iter()
            .enumerate()
        {
            for (j, e) in [-0.03, 0.0, 0.03].iter().enumerate() {
                let sign = if (i + j) % 2 == 0 { 1.0 } else { -1.0 };
                pts.push((n, x * (1.0 + sign * e)));
            }
        }
        let f = fitted(fit(&pts));
        assert!((f.lambda / 500.0 - 1.0).abs() < 0.1, "{f:?}");
        assert!((f.sigma - 0.1).abs() < 0.03, "{f:?}");
        assert!(f.r2.unwrap() > 0.9, "{f:?}");
        assert_eq!(f.points, 21);
    }

    #[test]
    fn amdahl_data_has_no_coherency_and_no_peak() {
        let f = fitted(fit(&synthetic(200.0, 0.2, 0.0, &LEVELS)));
        assert!(f.kappa < 1e-9 && (f.sigma - 0.2).abs() < 1e-4, "{f:?}");
        assert_eq!(f.peak_n, None);
        assert!(Usl::Fit(f).text().contains("levels off at 1000/s"));
    }

    #[test]
    fn a_falling_curve_that_asks_for_a_negative_kappa_gets_none() {
        // Throughput that grows faster than linear would need κ < 0: held at 0.
        let pts = [(1.0, 100.0), (2.0, 210.0), (4.0, 440.0), (8.0, 900.0)];
        let f = fitted(fit(&pts));
        assert!(f.kappa >= 0.0 && f.sigma >= 0.0, "{f:?}");
        assert_eq!(f.kappa, 0.0);
        assert_eq!(f.peak_n, None);
    }

    #[test]
    fn a_serialised_lock_that_only_loses_peaks_at_one_contender() {
        let f = fitted(fit(&synthetic(100.0, 1.0, 0.04, &LEVELS)));
        assert!(
            (f.sigma - 1.0).abs() < 1e-6 && (f.kappa - 0.04).abs() < 1e-6,
            "{f:?}"
        );
        assert_eq!(f.peak_n, Some(1.0));
        assert!((f.peak_per_s.unwrap() - 100.0).abs() < 0.01, "{f:?}");
    }

    #[test]
    fn flat_throughput_is_fully_serialised_with_an_undefined_r2() {
        let pts: Vec<(f64, f64)> = LEVELS.iter().map(|&n| (n, 300.0)).collect();
        let f = fitted(fit(&pts));
        assert!((f.sigma - 1.0).abs() < 1e-3, "{f:?}");
        assert!((f.lambda - 300.0).abs() < 1.0, "{f:?}");
        assert_eq!(f.r2, None);
        assert!(!f.poor);
        assert!(Usl::Fit(f).text().contains("undefined (flat)"));
    }

    #[test]
    fn one_or_two_levels_are_too_few_and_say_so() {
        assert_eq!(
            fit(&[(1.0, 100.0), (1.0, 110.0)]),
            Usl::TooFewLevels {
                levels: 1,
                needed: 3
            }
        );
        let two = fit(&[(1.0, 100.0), (4.0, 300.0)]);
        assert_eq!(two.text(), "too few levels to fit (2; the fit needs 3)");
        assert_eq!(
            fit(&[]),
            Usl::TooFewLevels {
                levels: 0,
                needed: 3
            }
        );
    }

    #[test]
    fn levels_without_throughput_are_left_out() {
        let u = fit(&[(1.0, 100.0), (2.0, 0.0), (4.0, f64::NAN), (8.0, 300.0)]);
        assert_eq!(
            u,
            Usl::TooFewLevels {
                levels: 2,
                needed: 3
            }
        );
    }

    #[test]
    fn a_curve_the_law_cannot_follow_still_fits_no_worse_than_its_mean() {
        // etcd's first contend run (Nov 27, 2026): a dip at 2 contenders, then a plateau.
        let pts = [
            (1.0, 69.3),
            (2.0, 22.7),
            (4.0, 40.4),
            (8.0, 62.9),
            (16.0, 63.8),
            (32.0, 63.3),
            (64.0, 53.0),
        ];
        let f = fitted(fit(&pts));
        assert!(f.r2.unwrap() >= 0.0 && f.poor, "{f:?}");
    }

    #[test]
    fn a_poor_fit_is_flagged() {
        // A zigzag the law cannot follow.
        let pts = [
            (1.0, 100.0),
            (2.0, 400.0),
            (4.0, 120.0),
            (8.0, 420.0),
            (16.0, 110.0),
        ];
        let f = fitted(fit(&pts));
        assert!(f.poor && f.r2.unwrap() < POOR_R2, "{f:?}");
        assert!(Usl::Fit(f).text().ends_with("poor fit"));
    }

    #[test]
    fn the_fit_round_trips_through_json() {
        let u = fit(&synthetic(1000.0, 0.05, 0.002, &LEVELS));
        let text = serde_json::to_string(&u).unwrap();
        // serde_json reads floats back to within an ulp, not always exactly.
        let (Usl::Fit(a), Usl::Fit(b)) = (&u, &serde_json::from_str::<Usl>(&text).unwrap()) else {
            panic!("{text}");
        };
        assert!((a.kappa - b.kappa).abs() < 1e-15 && (a.lambda - b.lambda).abs() < 1e-9);
        assert_eq!(
            (a.points, a.poor, a.peak_n.is_some()),
            (b.points, b.poor, b.peak_n.is_some())
        );
        let few = serde_json::to_string(&fit(&[])).unwrap();
        assert_contains!(few, "\"status\":\"too-few-levels\"");
    }
}
