//! Utilization: the share of each SKU's selling window during which some holder was inside its
//! lease. A SKU's lock does useful work only while a holder is inside; the gaps between one
//! release and the next grant are the lock's own cost (and, in an open loop below capacity,
//! time nobody asked for it). 1.0: the lock never idled while it was selling.
//!
//! The selling window runs from the start of the load until the SKU sold out (the release of
//! its last sale, once some buyer found it sold out) or the load ended. Leases of attempts that
//! found the SKU sold out lie after its window and are left out. Overlapping leases (a double
//! grant) count once: the union is measured.
//!
//! Streaming, like the double-grant checker: leases arrive in completion order (up to a
//! slack), and a lease begins at most `horizon` before its completion, so merged intervals that
//! end before `latest completion - slack - horizon` are final and folded into a total.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// Pending intervals per SKU before the first compaction.
const COMPACT_AT: usize = 256;

#[derive(Default)]
struct Sku {
    /// Lease intervals not yet folded into `covered`.
    pending: Vec<(Instant, Instant)>,
    /// Length of the union of the folded intervals.
    covered: Duration,
    /// Release of the latest lease of a sale.
    last_sale: Option<Instant>,
    /// Some buyer found the SKU sold out.
    sold_out: bool,
    /// Compact when `pending` reaches this (doubles when compaction frees little).
    compact_at: usize,
}

impl Sku {
    /// Folds the intervals that end before `frontier` (none later can overlap them).
    fn compact(&mut self, frontier: Option<Instant>) {
        self.pending.sort_unstable_by_key(|i| i.0);
        let merged = union(&self.pending);
        self.pending.clear();
        for (a, b) in merged {
            if frontier.is_none_or(|f| b < f) {
                self.covered += b - a;
            } else {
                self.pending.push((a, b));
            }
        }
        self.compact_at = (self.pending.len() * 2).max(COMPACT_AT);
    }
}

/// The union of intervals sorted by start, as disjoint intervals in order.
pub(super) fn union(sorted: &[(Instant, Instant)]) -> Vec<(Instant, Instant)> {
    let mut out: Vec<(Instant, Instant)> = Vec::with_capacity(sorted.len());
    for &(a, b) in sorted {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// Streaming union of lease intervals per SKU.
pub struct CoverageTracker {
    skus: BTreeMap<u32, Sku>,
    horizon: Duration,
    slack: Duration,
    latest_end: Option<Instant>,
}

impl CoverageTracker {
    /// `horizon` bounds one attempt, `slack` how far out of order completions arrive.
    pub fn new(horizon: Duration, slack: Duration) -> Self {
        Self {
            skus: BTreeMap::new(),
            horizon,
            slack,
            latest_end: None,
        }
    }

    /// A SKU's lease from `acquired` to `released`, by an attempt that ended at `ended`;
    /// `sold` / `sold_out`: its outcome.
    pub fn observe_lease(
        &mut self,
        sku: u32,
        lease: (Instant, Instant),
        ended: Instant,
        sold: bool,
    ) {
        self.latest_end = self.latest_end.max(Some(ended));
        let frontier = self
            .latest_end
            .and_then(|e| e.checked_sub(self.slack + self.horizon));
        let s = self.skus.entry(sku).or_default();
        if sold {
            s.last_sale = s.last_sale.max(Some(lease.1));
        }
        s.pending.push((lease.0, lease.1.max(lease.0)));
        if s.pending.len() >= s.compact_at.max(COMPACT_AT) {
            // Without a frontier yet nothing is final (the earliest start folds nothing), but
            // merging still shrinks the list.
            let earliest = s.pending.iter().map(|i| i.0).min();
            s.compact(frontier.or(earliest));
        }
    }

    /// A buyer found `sku` sold out (its lease, if any, is after the selling window).
    pub fn sold_out(&mut self, sku: u32) {
        self.skus.entry(sku).or_default().sold_out = true;
    }

    /// Every lease folded; times relative to `start`.
    pub fn finish(mut self, start: Instant) -> Coverage {
        let mut per_sku = BTreeMap::new();
        for (sku, s) in &mut self.skus {
            s.compact(None);
            let sold_out_at = s
                .last_sale
                .filter(|_| s.sold_out)
                .map(|t| t.saturating_duration_since(start));
            per_sku.insert(
                *sku,
                SkuCoverage {
                    covered: s.covered,
                    sold_out_at,
                },
            );
        }
        Coverage { per_sku }
    }
}

/// What the tracker found, per SKU that was locked at least once or found sold out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Coverage {
    per_sku: BTreeMap<u32, SkuCoverage>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct SkuCoverage {
    covered: Duration,
    sold_out_at: Option<Duration>,
}

/// Utilization of a run's locks, in summary.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Utilization {
    /// Over every SKU: leased time / selling time, both summed over the SKUs.
    pub overall: f64,
    /// Per SKU, in SKU order.
    pub per_sku: Vec<SkuUtilization>,
}

/// One SKU's utilization.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkuUtilization {
    /// SKU number.
    pub sku: u32,
    /// Share of the selling window some holder was inside its lease.
    pub utilization: f64,
    /// The selling window, seconds from the start of the load.
    pub window_s: f64,
    /// Whether the window ended because the SKU sold out (else: the load ended).
    pub sold_out: bool,
}

impl Coverage {
    /// Utilization of `skus` SKUs over a load that lasted `elapsed`; a SKU never locked has
    /// 0 over the whole load.
    pub fn utilization(&self, skus: u32, elapsed: Duration) -> Utilization {
        let (mut covered, mut window) = (0.0, 0.0);
        let per_sku = (0..skus)
            .map(|sku| {
                let c = self.per_sku.get(&sku);
                let end = c.and_then(|c| c.sold_out_at);
                let w = end.unwrap_or(elapsed).as_secs_f64();
                let cov = c.map_or(0.0, |c| c.covered.as_secs_f64()).min(w);
                covered += cov;
                window += w;
                SkuUtilization {
                    sku,
                    utilization: ratio(cov, w),
                    window_s: round3(w),
                    sold_out: end.is_some(),
                }
            })
            .collect();
        Utilization {
            overall: ratio(covered, window),
            per_sku,
        }
    }
}

fn ratio(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        round3(part / whole)
    } else {
        0.0
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn union_of_leases_over_the_window() {
        let t0 = Instant::now();
        let mut c = CoverageTracker::new(ms(100), ms(10));
        // SKU 0: [0,10) and [20,30) sold, then [25,35) overlapping (a double grant): 35 - 20
        // + 10 = 25 ms covered of a 100 ms load.
        c.observe_lease(0, (t0, t0 + ms(10)), t0 + ms(10), true);
        c.observe_lease(0, (t0 + ms(20), t0 + ms(30)), t0 + ms(30), true);
        c.observe_lease(0, (t0 + ms(25), t0 + ms(35)), t0 + ms(35), true);
        // SKU 1 sold out at 40 ms: its later sold-out lease is outside the window.
        c.observe_lease(1, (t0 + ms(20), t0 + ms(40)), t0 + ms(40), true);
        c.sold_out(1);
        let u = c.finish(t0).utilization(3, ms(100));
        assert_eq!(u.per_sku[0].utilization, 0.25);
        assert!(!u.per_sku[0].sold_out);
        assert_eq!(
            (u.per_sku[1].utilization, u.per_sku[1].window_s),
            (0.5, 0.04)
        );
        assert!(u.per_sku[1].sold_out);
        // SKU 2 never locked: idle all along.
        assert_eq!(u.per_sku[2].utilization, 0.0);
        // (25 + 20 + 0) / (100 + 40 + 100) = 0.1875
        assert!((u.overall - 0.1875).abs() < 0.001, "{}", u.overall);
    }

    #[test]
    fn streaming_compaction_keeps_the_exact_union() {
        let t0 = Instant::now();
        let mut c = CoverageTracker::new(ms(5), ms(1));
        // 10 000 back-to-back 1 ms leases with a 1 ms gap, some out of order: half covered.
        let mut leases: Vec<u64> = (0..10_000).collect();
        leases.swap(10, 11);
        leases.swap(5000, 5001);
        for i in leases {
            let a = t0 + ms(2 * i);
            c.observe_lease(0, (a, a + ms(1)), a + ms(1), true);
        }
        let s = &c.skus[&0];
        assert!(
            s.pending.len() < 1000,
            "memory stays bounded: {}",
            s.pending.len()
        );
        let u = c.finish(t0).utilization(1, ms(20_000));
        assert_eq!(u.overall, 0.5);
    }
}
