//! Weighted least squares for a handful of terms: the coefficients, their covariance, and the
//! interval of a new observation. `lockbench predict` fits a lock's time per grant to the round
//! trip and fsync time injected around it with it (three terms, a few dozen trials), so a small
//! dense solve is all it needs.
//!
//! Each observation `i` has a weight `wᵢ`: its variance is taken as σ² / wᵢ. With wᵢ = 1 / yᵢ²
//! the fit weighs relative errors alike, which is how trials of one lock scatter (a slower
//! point scatters more in milliseconds, alike in per cent).

use statrs::distribution::{ContinuousCDF, StudentsT};

/// A fitted linear model y = x · β.
#[derive(Debug, Clone, PartialEq)]
pub struct Fitted {
    /// The coefficients, one per column of x.
    pub beta: Vec<f64>,
    /// Their covariance (σ̂² (XᵀWX)⁻¹).
    pub cov: Vec<Vec<f64>>,
    /// σ̂²: the weighted residuals' sum of squares over the degrees of freedom.
    pub sigma2: f64,
    /// Observations less coefficients.
    pub dof: usize,
    /// Weighted R² around the weighted mean (`None` when y did not vary).
    pub r2: Option<f64>,
}

impl Fitted {
    /// x · β.
    pub fn at(&self, x: &[f64]) -> f64 {
        x.iter().zip(&self.beta).map(|(a, b)| a * b).sum()
    }

    /// The two-sided `confidence` interval of coefficient `j`.
    pub fn coefficient(&self, j: usize, confidence: f64) -> (f64, f64) {
        let half = self.t(confidence) * self.cov[j][j].max(0.0).sqrt();
        (self.beta[j] - half, self.beta[j] + half)
    }

    /// The two-sided `confidence` interval of one new observation at `x` whose weight is `w`
    /// (its own scatter σ̂² / w, plus the coefficients' uncertainty).
    pub fn new_observation(&self, x: &[f64], w: f64, confidence: f64) -> (f64, f64) {
        let mean = self.at(x);
        let mut var = self.sigma2 / w;
        for (i, xi) in x.iter().enumerate() {
            for (j, xj) in x.iter().enumerate() {
                var += xi * xj * self.cov[i][j];
            }
        }
        let half = self.t(confidence) * var.max(0.0).sqrt();
        (mean - half, mean + half)
    }

    fn t(&self, confidence: f64) -> f64 {
        let t = StudentsT::new(0.0, 1.0, self.dof as f64).expect("dof ≥ 1");
        t.inverse_cdf(0.5 + confidence / 2.0)
    }
}

/// Fits y = x · β, weighing observation i by `w[i]`. `None` with no more observations than
/// columns (no degree of freedom left to measure the scatter), or when the columns are
/// linearly dependent (a term that never varied cannot be told from the others).
pub fn fit(x: &[Vec<f64>], y: &[f64], w: &[f64]) -> Option<Fitted> {
    let k = x.first()?.len();
    let n = y.len();
    if n <= k || x.len() != n || w.len() != n {
        return None;
    }
    let mut xtx = vec![vec![0.0; k]; k];
    let mut xty = vec![0.0; k];
    for ((row, &yi), &wi) in x.iter().zip(y).zip(w) {
        for a in 0..k {
            xty[a] += wi * row[a] * yi;
            for b in 0..k {
                xtx[a][b] += wi * row[a] * row[b];
            }
        }
    }
    let inv = invert(xtx)?;
    let beta: Vec<f64> = (0..k)
        .map(|a| (0..k).map(|b| inv[a][b] * xty[b]).sum())
        .collect();
    let predicted = |row: &Vec<f64>| -> f64 { row.iter().zip(&beta).map(|(a, b)| a * b).sum() };
    let sse: f64 = (x.iter().zip(y).zip(w))
        .map(|((row, yi), wi)| wi * (yi - predicted(row)).powi(2))
        .sum();
    let wsum: f64 = w.iter().sum();
    let mean = y.iter().zip(w).map(|(yi, wi)| wi * yi).sum::<f64>() / wsum;
    let sst: f64 = y
        .iter()
        .zip(w)
        .map(|(yi, wi)| wi * (yi - mean).powi(2))
        .sum();
    let dof = n - k;
    let sigma2 = sse / dof as f64;
    let cov = inv
        .iter()
        .map(|r| r.iter().map(|v| v * sigma2).collect())
        .collect();
    Some(Fitted {
        beta,
        cov,
        sigma2,
        dof,
        r2: (sst > 0.0).then(|| 1.0 - sse / sst),
    })
}

/// Gauss–Jordan with partial pivoting; `None` when (nearly) singular.
fn invert(mut a: Vec<Vec<f64>>) -> Option<Vec<Vec<f64>>> {
    let k = a.len();
    let scale = (0..k).map(|i| a[i][i].abs()).fold(0.0, f64::max);
    let mut inv: Vec<Vec<f64>> = (0..k)
        .map(|i| (0..k).map(|j| f64::from(u8::from(i == j))).collect())
        .collect();
    for c in 0..k {
        let p = (c..k).max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs()))?;
        if a[p][c].abs() <= scale * 1e-12 {
            return None;
        }
        a.swap(c, p);
        inv.swap(c, p);
        let d = a[c][c];
        for j in 0..k {
            a[c][j] /= d;
            inv[c][j] /= d;
        }
        for i in (0..k).filter(|&i| i != c) {
            let f = a[i][c];
            for j in 0..k {
                a[i][j] -= f * a[c][j];
                inv[i][j] -= f * inv[c][j];
            }
        }
    }
    Some(inv)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(xs: &[(f64, f64)]) -> Vec<Vec<f64>> {
        xs.iter().map(|&(a, b)| vec![1.0, a, b]).collect()
    }

    #[test]
    fn exact_data_gives_back_its_coefficients_with_no_scatter() {
        let xs = [(0.0, 0.0), (1.0, 0.0), (2.0, 0.0), (0.0, 2.0), (0.0, 4.0)];
        let y: Vec<f64> = xs.iter().map(|(a, b)| 2.0 + 3.0 * a + 0.5 * b).collect();
        let f = fit(&rows(&xs), &y, &[1.0; 5]).unwrap();
        for (got, want) in f.beta.iter().zip([2.0, 3.0, 0.5]) {
            assert!((got - want).abs() < 1e-9, "{:?}", f.beta);
        }
        assert!(f.sigma2 < 1e-12);
        assert_eq!(f.dof, 2);
        assert!((f.r2.unwrap() - 1.0).abs() < 1e-9);
    }

    #[test]
    fn noise_widens_the_intervals_and_they_still_cover_the_truth() {
        // Repeated points with ±5 % scatter around 2 + 3 rtt + 0.5 fsync.
        let mut xs = Vec::new();
        let mut y = Vec::new();
        for (k, &(a, b)) in [(0.0, 0.0), (1.0, 0.0), (2.0, 0.0), (0.0, 2.0), (0.0, 4.0)]
            .iter()
            .enumerate()
        {
            for s in [-1.0, 0.0, 1.0] {
                let truth = 2.0 + 3.0 * a + 0.5 * b;
                xs.push((a, b));
                y.push(truth * (1.0 + 0.05 * s * if k % 2 == 0 { 1.0 } else { -1.0 }));
            }
        }
        let w: Vec<f64> = y.iter().map(|v| 1.0 / (v * v)).collect();
        let f = fit(&rows(&xs), &y, &w).unwrap();
        for (j, want) in [2.0, 3.0, 0.5].into_iter().enumerate() {
            let (lo, hi) = f.coefficient(j, 0.95);
            assert!(lo < want && want < hi, "β{j}: {lo}..{hi}");
            assert!(hi - lo > 1e-6, "scatter gives width");
        }
        let x = [1.0, 1.5, 3.0];
        let truth = 2.0 + 4.5 + 1.5;
        let (lo, hi) = f.new_observation(&x, 1.0 / (truth * truth), 0.95);
        assert!(lo < truth && truth < hi, "{lo}..{hi}");
        // A new trial's interval is wider than the coefficients' alone.
        let (clo, chi) = f.new_observation(&x, f64::INFINITY, 0.95);
        assert!(hi - lo > chi - clo);
    }

    #[test]
    fn a_term_that_never_varied_or_too_few_trials_fit_nothing() {
        let xs = [(0.0, 0.0), (1.0, 0.0), (2.0, 0.0), (3.0, 0.0)];
        let y = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(fit(&rows(&xs), &y, &[1.0; 4]), None, "fsync never varied");
        let xs = [(0.0, 0.0), (1.0, 0.0), (0.0, 1.0)];
        assert_eq!(fit(&rows(&xs), &[1.0; 3], &[1.0; 3]), None, "no dof");
    }
}
