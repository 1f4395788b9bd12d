//! The danger window of lost leases: how long a holder went on after the server ended its
//! lease (TTL ran out, session expired) before it noticed, and whether it wrote in between.
//!
//! A lock that loses a lease tells its [`LossSpan`] at release: when the lease ended on the
//! server and how that moment was found ([`LossSource`]), when the holder first learned (a
//! failed renewal, a session's expiry, a library's LOST, a release that found the lock not
//! ours), and when its critical section wrote. [`DangerFold`] folds them per run, in the
//! recorder and in each worker alike ([`super::Stats::record`]); a lease that was not lost
//! costs nothing here.

use std::time::Instant;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::names::enum_names;

/// How the server's end of a lease was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LossSource {
    /// Seen happen (the lock's own record of the moment it ended the lease).
    Observed,
    /// Computed: the last moment the server (re)started the lease plus its TTL, as the server
    /// computes it; nothing watched the key.
    LeaseArithmetic,
}

enum_names!(LossSource {
    Observed = "observed",
    LeaseArithmetic = "lease-arithmetic",
});

/// What a lost lease's holder and lock knew of its end, on the holder's monotonic clock
/// (the default: nothing).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LossSpan {
    /// When the server ended the lease, and how that was found (`None`: the lock cannot say).
    pub lost_at: Option<(Instant, LossSource)>,
    /// When the holder first learned the lease was gone (`None`: it never did).
    pub noticed: Option<Instant>,
    /// When its critical section sent its store write, if it wrote.
    pub wrote: Option<Instant>,
    /// A fence refused that write.
    pub refused: bool,
}

impl LossSpan {
    /// µs from the loss to the notice (0 when the notice came first: the loss moment is then
    /// an estimate a round trip late).
    fn notice_us(&self) -> Option<u64> {
        let (lost, _) = self.lost_at?;
        Some(self.noticed?.saturating_duration_since(lost).as_micros() as u64)
    }

    /// µs the write came after the loss, when it did.
    fn write_after_us(&self) -> Option<u64> {
        let (lost, _) = self.lost_at?;
        let wrote = self.wrote?;
        (wrote > lost).then(|| wrote.duration_since(lost).as_micros() as u64)
    }
}

/// The counters of a [`DangerFold`] (its histogram travels apart, in the interval log).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DangerCounts {
    /// Lost leases folded.
    pub lost: u64,
    /// Of those, with no loss moment (the lock cannot say when the server ended it).
    pub no_loss_moment: u64,
    /// Of those with one, never noticed by their holder.
    pub unnoticed: u64,
    /// Store writes sent after the loss.
    pub writes_after_loss: u64,
    /// The longest of them past the loss, µs.
    pub write_after_loss_max_us: u64,
    /// Writes after the loss that a fence refused.
    pub refused_by_fence: u64,
    /// Loss moments by [`LossSource`] (`ALL` order).
    pub sources: [u64; 2],
}

impl DangerCounts {
    /// Nothing folded.
    pub fn is_empty(&self) -> bool {
        self.lost == 0
    }
}

/// An auto-resizing histogram of µs from its smallest size (a run mostly loses no lease);
/// not `stats`' helpers, which fold this file in.
fn notice_hist() -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(1, 2, 3).expect("valid bounds");
    h.auto(true);
    h
}

/// The danger windows of a run's (or an interval's) lost leases.
#[derive(Debug, Clone)]
pub struct DangerFold {
    /// Loss → notice, µs, one value per lost lease with both moments.
    pub notice: Histogram<u64>,
    /// Everything else.
    pub counts: DangerCounts,
}

impl Default for DangerFold {
    fn default() -> Self {
        Self {
            notice: notice_hist(),
            counts: DangerCounts::default(),
        }
    }
}

impl DangerFold {
    /// Folds one lost lease's span.
    pub fn record(&mut self, s: &LossSpan) {
        let c = &mut self.counts;
        c.lost += 1;
        let Some((_, source)) = s.lost_at else {
            c.no_loss_moment += 1;
            return;
        };
        c.sources[source as usize] += 1;
        match s.notice_us() {
            Some(us) => self
                .notice
                .record(us.max(1))
                .expect("auto-resizing histograms grow"),
            None => c.unnoticed += 1,
        }
        if let Some(us) = s.write_after_us() {
            c.writes_after_loss += 1;
            c.write_after_loss_max_us = c.write_after_loss_max_us.max(us);
            c.refused_by_fence += u64::from(s.refused);
        }
    }

    /// Adds `other` (folded elsewhere) into `self`: exact.
    pub fn merge(&mut self, other: &DangerFold) {
        self.notice
            .add(&other.notice)
            .expect("auto-resizing histograms always add");
        let (a, b) = (&mut self.counts, &other.counts);
        a.lost += b.lost;
        a.no_loss_moment += b.no_loss_moment;
        a.unnoticed += b.unnoticed;
        a.writes_after_loss += b.writes_after_loss;
        a.write_after_loss_max_us = a.write_after_loss_max_us.max(b.write_after_loss_max_us);
        a.refused_by_fence += b.refused_by_fence;
        for (x, y) in a.sources.iter_mut().zip(b.sources) {
            *x += y;
        }
    }

    /// The run's figures (summary.json's `danger_window`).
    pub fn window(&self) -> DangerWindow {
        let c = &self.counts;
        let quantile = |q: f64| (!self.notice.is_empty()).then(|| self.notice.value_at_quantile(q));
        let sources: Vec<&str> = LossSource::ALL
            .iter()
            .filter(|s| c.sources[**s as usize] > 0)
            .map(|s| s.name())
            .collect();
        DangerWindow {
            n: self.notice.len(),
            lost: c.lost,
            loss_to_notice_p50_us: quantile(0.5),
            loss_to_notice_max_us: (!self.notice.is_empty()).then(|| self.notice.max()),
            unnoticed: c.unnoticed,
            no_loss_moment: c.no_loss_moment,
            writes_after_loss: c.writes_after_loss,
            write_after_loss_max_us: (c.writes_after_loss > 0).then_some(c.write_after_loss_max_us),
            refused_by_fence: c.refused_by_fence,
            unnoticed_overlapped: 0,
            unnoticed_went_on_max_us: None,
            source: (!sources.is_empty()).then(|| sources.join("+")),
        }
    }
}

/// summary.json's `danger_window`, for lease-based strategies: per lost lease, the time from
/// the server's end of the lease to its holder's notice, and the store writes it sent between.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DangerWindow {
    /// Lost leases with both a loss moment and a notice: the sample of the loss → notice
    /// figures.
    pub n: u64,
    /// Every lost lease (`lease_lost`).
    pub lost: u64,
    /// Median time from the loss to the holder's notice, µs.
    pub loss_to_notice_p50_us: Option<u64>,
    /// Longest, µs.
    pub loss_to_notice_max_us: Option<u64>,
    /// Lost leases whose holder never noticed.
    pub unnoticed: u64,
    /// Lost leases whose loss moment the lock cannot give.
    pub no_loss_moment: u64,
    /// Store writes the holders sent after their lease had ended.
    pub writes_after_loss: u64,
    /// How long after the loss the latest of them came, µs.
    pub write_after_loss_max_us: Option<u64>,
    /// Of `writes_after_loss`, those a fence refused.
    pub refused_by_fence: u64,
    /// Leases a later grant overlapped whose holder never learned they were lost (not in
    /// `lost`: nothing told it; from the double-grant check).
    #[serde(default)]
    pub unnoticed_overlapped: u64,
    /// The longest such a holder went on after that later grant (which bounds its loss from
    /// above), µs.
    #[serde(default)]
    pub unnoticed_went_on_max_us: Option<u64>,
    /// How the loss moments were found: `observed`, `lease-arithmetic` (last renewal + TTL),
    /// or both joined by `+`; `null` when no lease was lost.
    pub source: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn span(t0: Instant, lost_ms: u64, noticed_ms: Option<u64>, wrote_ms: Option<u64>) -> LossSpan {
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        LossSpan {
            lost_at: Some((at(lost_ms), LossSource::LeaseArithmetic)),
            noticed: noticed_ms.map(at),
            wrote: wrote_ms.map(at),
            refused: false,
        }
    }

    #[test]
    fn folds_notice_and_writes_after_the_loss() {
        let t0 = Instant::now();
        let mut f = DangerFold::default();
        // Paused past the lease: noticed 1.8 s after the loss, wrote 1.9 s after it.
        f.record(&span(t0, 1_000, Some(2_800), Some(2_900)));
        // Noticed at once, wrote before the loss: no write after it.
        f.record(&LossSpan {
            refused: true,
            ..span(t0, 500, Some(500), Some(400))
        });
        // A fenced write after the loss, refused.
        f.record(&LossSpan {
            refused: true,
            lost_at: Some((t0 + Duration::from_millis(100), LossSource::Observed)),
            ..span(t0, 0, Some(300), Some(200))
        });
        let w = f.window();
        assert_eq!((w.n, w.lost, w.unnoticed), (3, 3, 0));
        assert_eq!(w.loss_to_notice_p50_us.map(|u| u / 1_000), Some(200));
        assert_eq!(w.loss_to_notice_max_us.map(|u| u / 1_000), Some(1_800));
        assert_eq!((w.writes_after_loss, w.refused_by_fence), (2, 1));
        assert_eq!(w.write_after_loss_max_us.map(|u| u / 1_000), Some(1_900));
        assert_eq!(w.source.as_deref(), Some("observed+lease-arithmetic"));
    }

    #[test]
    fn a_loss_without_a_moment_or_a_notice_is_counted_apart() {
        let t0 = Instant::now();
        let mut f = DangerFold::default();
        f.record(&LossSpan {
            lost_at: None,
            noticed: Some(t0),
            wrote: Some(t0),
            refused: false,
        });
        f.record(&span(t0, 10, None, Some(20)));
        let w = f.window();
        assert_eq!((w.n, w.lost, w.no_loss_moment, w.unnoticed), (0, 2, 1, 1));
        assert_eq!((w.loss_to_notice_p50_us, w.writes_after_loss), (None, 1));
        assert_eq!(w.source.as_deref(), Some("lease-arithmetic"));
    }

    #[test]
    fn merging_folds_equals_folding_everything_in_one() {
        let t0 = Instant::now();
        let spans = [
            span(t0, 0, Some(700), Some(800)),
            span(t0, 100, Some(150), None),
            span(t0, 50, None, Some(60)),
            span(t0, 0, Some(2_000), Some(1_000)),
        ];
        let mut one = DangerFold::default();
        let (mut a, mut b) = (DangerFold::default(), DangerFold::default());
        for (i, s) in spans.iter().enumerate() {
            one.record(s);
            if i % 2 == 0 { &mut a } else { &mut b }.record(s);
        }
        a.merge(&b);
        assert_eq!(a.window(), one.window());
        assert_eq!(DangerFold::default().window().source, None);
    }
}
