//! Mergeable statistics of a run: histograms per outcome class and a per-second timeline.

use std::time::Instant;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::{Completion, ErrorKind, Outcome};

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest recorded value.
    pub max: u64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Number of samples.
    pub count: u64,
}

impl LatencySummary {
    /// Summarises a histogram (all zero when it is empty).
    pub fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Self::default();
        }
        Self {
            p50: h.value_at_quantile(0.50),
            p90: h.value_at_quantile(0.90),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
            mean: (h.mean() * 10.0).round() / 10.0,
            count: h.len(),
        }
    }
}

/// One second of the run, by completion time.
#[derive(Debug, Clone)]
pub struct Second {
    /// Completions per outcome class.
    pub counts: [u64; Outcome::CLASSES],
    /// Latency (from intended start, µs) of everything that completed in this second.
    pub latency: Histogram<u64>,
}

impl Second {
    fn new() -> Self {
        // Two significant digits keep a second at a few KiB; percentiles per second are a trend.
        Self {
            counts: [0; Outcome::CLASSES],
            latency: hist(2),
        }
    }
}

/// Everything recorded about a run's attempts. Histograms auto-resize, so no value is dropped.
#[derive(Debug, Clone)]
pub struct Stats {
    /// Latency from the *intended* start (includes queueing: no coordinated omission), per class.
    pub latency: [Histogram<u64>; Outcome::CLASSES],
    /// Service time (from the actual start), all classes together.
    pub service: Histogram<u64>,
    /// Failed attempts by error kind.
    pub failed: [u64; ErrorKind::ALL.len()],
    /// Unknown-outcome attempts by error kind.
    pub unknown: [u64; ErrorKind::ALL.len()],
    /// Lock releases that failed.
    pub release_failed: u64,
    /// Per-second timeline, index = second since start.
    pub timeline: Vec<Second>,
    /// When the last `sold` attempt ended, since the start (the sell-out time when the stock
    /// ran out).
    pub last_sale: Option<std::time::Duration>,
}

impl Default for Stats {
    fn default() -> Self {
        Self::new()
    }
}

/// A histogram of µs values, sized for 1 µs .. 60 s and growing beyond if needed.
pub(super) fn hist(sigfig: u8) -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(1, 60_000_000, sigfig).expect("valid bounds");
    h.auto(true);
    h
}

impl Stats {
    /// Empty statistics.
    pub fn new() -> Self {
        Self {
            latency: std::array::from_fn(|_| hist(3)),
            service: hist(3),
            failed: [0; ErrorKind::ALL.len()],
            unknown: [0; ErrorKind::ALL.len()],
            release_failed: 0,
            timeline: Vec::new(),
            last_sale: None,
        }
    }

    /// Folds one completion in; `start` is the run's time zero.
    pub fn record(&mut self, c: &Completion, start: Instant) {
        let class = c.outcome.class();
        let latency_us = c.ended.saturating_duration_since(c.intended).as_micros() as u64;
        let service_us = c.ended.saturating_duration_since(c.started).as_micros() as u64;
        self.latency[class].saturating_record(latency_us.max(1));
        self.service.saturating_record(service_us.max(1));
        match c.outcome {
            Outcome::Failed(k) => self.failed[k as usize] += 1,
            Outcome::Unknown(k) => self.unknown[k as usize] += 1,
            _ => {}
        }
        self.release_failed += u64::from(c.release_failed);
        if c.outcome == Outcome::Sold {
            self.last_sale = self
                .last_sale
                .max(Some(c.ended.saturating_duration_since(start)));
        }
        let sec = c.ended.saturating_duration_since(start).as_secs() as usize;
        if self.timeline.len() <= sec {
            self.timeline.resize_with(sec + 1, Second::new);
        }
        let s = &mut self.timeline[sec];
        s.counts[class] += 1;
        s.latency.saturating_record(latency_us.max(1));
    }

    /// Adds `other` into `self` (used to combine buyers recorded elsewhere).
    pub fn merge(&mut self, other: &Stats) {
        for (a, b) in self.latency.iter_mut().zip(&other.latency) {
            a.add(b).expect("auto-resizing histograms always add");
        }
        self.service
            .add(&other.service)
            .expect("auto-resizing histograms always add");
        for i in 0..ErrorKind::ALL.len() {
            self.failed[i] += other.failed[i];
            self.unknown[i] += other.unknown[i];
        }
        self.release_failed += other.release_failed;
        self.last_sale = self.last_sale.max(other.last_sale);
        if self.timeline.len() < other.timeline.len() {
            self.timeline.resize_with(other.timeline.len(), Second::new);
        }
        for (a, b) in self.timeline.iter_mut().zip(&other.timeline) {
            for i in 0..Outcome::CLASSES {
                a.counts[i] += b.counts[i];
            }
            a.latency
                .add(&b.latency)
                .expect("auto-resizing histograms always add");
        }
    }

    /// Attempts per outcome class.
    pub fn count(&self, class: usize) -> u64 {
        self.latency[class].len()
    }

    /// All attempts.
    pub fn attempts(&self) -> u64 {
        self.latency.iter().map(|h| h.len()).sum()
    }

    /// Latency of every attempt, whatever its outcome.
    pub fn all_latency(&self) -> Histogram<u64> {
        let mut all = hist(3);
        for h in &self.latency {
            all.add(h).expect("auto-resizing histograms always add");
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn completion(start: Instant, outcome: Outcome, at_ms: u64, latency_ms: u64) -> Completion {
        let ended = start + Duration::from_millis(at_ms);
        Completion {
            seq: 0,
            client: 0,
            sku: 0,
            outcome,
            intended: ended - Duration::from_millis(latency_ms),
            started: ended - Duration::from_millis(latency_ms),
            ended,
            release_failed: false,
            lease: None,
        }
    }

    #[test]
    fn merge_equals_recording_everything_in_one() {
        let start = Instant::now();
        let events = [
            (Outcome::Sold, 100, 3),
            (Outcome::SoldOut, 1500, 1),
            (Outcome::Unknown(ErrorKind::Timeout), 2500, 1000),
            (Outcome::Failed(ErrorKind::Connection), 700, 2),
            (Outcome::Sold, 2100, 40),
        ];
        let mut one = Stats::new();
        let (mut a, mut b) = (Stats::new(), Stats::new());
        for (i, (o, at, lat)) in events.iter().enumerate() {
            let c = completion(start, *o, *at, *lat);
            one.record(&c, start);
            if i % 2 == 0 {
                a.record(&c, start)
            } else {
                b.record(&c, start)
            }
        }
        b.merge(&a);
        assert_eq!(b.attempts(), 5);
        assert_eq!(b.count(0), 2);
        assert_eq!(b.unknown[ErrorKind::Timeout as usize], 1);
        assert_eq!(b.failed[ErrorKind::Connection as usize], 1);
        assert_eq!(b.timeline.len(), 3);
        assert_eq!(b.last_sale, Some(Duration::from_millis(2100)));
        assert_eq!(b.timeline[2].counts, one.timeline[2].counts);
        assert_eq!(
            LatencySummary::of(&b.all_latency()),
            LatencySummary::of(&one.all_latency())
        );
        // The 1 s unknown dominates the tail: latency is measured, not hidden.
        assert!(LatencySummary::of(&b.all_latency()).max >= 999_000);
    }

    #[test]
    fn latency_counts_from_the_intended_start() {
        let start = Instant::now();
        let mut c = completion(start, Outcome::Sold, 1000, 1);
        c.intended = c.started - Duration::from_millis(500); // queued 500 ms behind schedule
        let mut s = Stats::new();
        s.record(&c, start);
        assert!(s.latency[0].max() >= 500_000);
        assert!(s.service.max() < 2_000);
    }
}
