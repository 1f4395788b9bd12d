//! Mergeable statistics of a run: histograms per outcome class and a per-second timeline.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::{Completion, ErrorKind, Outcome, quantile};

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
    /// 95 % confidence intervals of p50, p99 and p99.9 (absent in summaries older than it).
    #[serde(default)]
    pub ci95: Option<Ci95>,
}

/// A percentile a [`LatencySummary`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pct {
    /// The median.
    P50,
    /// The 99th percentile.
    P99,
    /// The 99.9th percentile.
    P999,
}

impl Pct {
    /// Its quantile.
    pub fn q(self) -> f64 {
        match self {
            Pct::P50 => 0.5,
            Pct::P99 => 0.99,
            Pct::P999 => 0.999,
        }
    }

    /// How tables name it.
    pub fn name(self) -> &'static str {
        match self {
            Pct::P50 => "p50",
            Pct::P99 => "p99",
            Pct::P999 => "p99.9",
        }
    }
}

impl LatencySummary {
    /// Its value of `p`, µs.
    pub fn at(&self, p: Pct) -> u64 {
        match p {
            Pct::P50 => self.p50,
            Pct::P99 => self.p99,
            Pct::P999 => self.p999,
        }
    }

    /// Whether its count can bound `p` from above ([`quantile::supported`]).
    pub fn supports(&self, p: Pct) -> bool {
        quantile::supported(p.q(), self.count)
    }

    /// What a table shows for `p`: the percentile when [`Self::supports`] it, else the maximum.
    pub fn shown(&self, p: Pct) -> u64 {
        if self.supports(p) {
            self.at(p)
        } else {
            self.max
        }
    }
}

/// An interval `[lo, hi]` in µs between two order statistics ([`quantile::ranks`]): `lo` 0
/// when no sample is low enough, `hi` `None` (null) when none is high enough (unbounded).
pub type Bounds = (u64, Option<u64>);

/// Distribution-free 95 % confidence intervals of a [`LatencySummary`]'s percentiles.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Ci95 {
    /// Of the median.
    pub p50: Bounds,
    /// Of the 99th percentile.
    pub p99: Bounds,
    /// Of the 99.9th percentile.
    pub p999: Bounds,
}

impl Ci95 {
    /// The intervals of the samples in `h` (not empty).
    fn of(h: &Histogram<u64>) -> Self {
        let bounds = |q: f64| {
            let (l, u) = quantile::ranks(q, h.len());
            let lo = if l == 0 { 0 } else { order_statistic(h, l) };
            (lo, u.map(|u| order_statistic(h, u)))
        };
        Self {
            p50: bounds(0.5),
            p99: bounds(0.99),
            p999: bounds(0.999),
        }
    }
}

/// The `k`th smallest sample of `h` (1-based, at most `h.len()`), at the top of its bucket as
/// `value_at_quantile` reads it.
fn order_statistic(h: &Histogram<u64>, k: u64) -> u64 {
    let mut seen = 0;
    for v in h.iter_recorded() {
        seen += v.count_since_last_iteration();
        if seen >= k {
            return v.value_iterated_to();
        }
    }
    h.max()
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
            ci95: Some(Ci95::of(h)),
        }
    }
}

/// Latency over every scheduled arrival: the attempts that started (`started`, from their
/// intended start) and `unstarted` open-loop arrivals that no buyer ever started.
///
/// An unstarted arrival is right-censored: the load ended (`window` after its start) without
/// serving it, so its latency is unknown and at least (end of the load − its intended start).
/// It is counted at `window` — the whole load, from its start to the end of its last attempt
/// — which is at least its censoring time and at least every latency that was measured (every
/// attempt started after the load did and ended before the load was over). So unstarted
/// arrivals rank above every served one, and serving fewer arrivals can never lower any
/// percentile: turning a served arrival into an unstarted one only moves a sample up.
/// Percentiles that land among them read "not served within the load".
pub fn every_arrival(started: &Histogram<u64>, unstarted: u64, window: Duration) -> Histogram<u64> {
    let mut all = started.clone();
    if unstarted > 0 {
        let window_us = (window.as_micros() as u64).max(started.max()).max(1);
        all.saturating_record_n(window_us, unstarted);
    }
    all
}

/// Completions per outcome class and their latency (µs from the intended start): one second
/// of the run ([`Second`]) or the stretch between two fault boundaries
/// ([`super::phases::Segment`]).
#[derive(Debug, Clone)]
pub struct Tally {
    /// Completions per outcome class.
    pub counts: [u64; Outcome::CLASSES],
    /// Latency of every completion counted, every class.
    pub latency: Histogram<u64>,
}

impl Tally {
    /// Empty, its histogram at `sigfig` significant digits; the histogram starts at the
    /// smallest size and grows to the latencies it records (an empty one costs 2 KiB, not the
    /// 20 KiB of a 60 s range).
    pub fn new(sigfig: u8) -> Self {
        Self {
            counts: [0; Outcome::CLASSES],
            latency: growing_hist(sigfig),
        }
    }

    /// An empty second ([`SECOND_SIGFIG`]).
    pub fn second() -> Self {
        Self::new(SECOND_SIGFIG)
    }

    /// Attempts counted.
    pub fn attempts(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Adds `other` (the same second or segment, recorded elsewhere) into `self`.
    pub fn add(&mut self, other: &Tally) {
        for (a, b) in self.counts.iter_mut().zip(other.counts) {
            *a += b;
        }
        self.latency
            .add(&other.latency)
            .expect("auto-resizing histograms always add");
    }
}

/// Two significant digits keep a second at a few KiB; percentiles per second are a trend.
pub const SECOND_SIGFIG: u8 = 2;

/// One second of the run, by completion time.
pub type Second = Tally;

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
    /// Lock releases that failed with an error (whether the lock was freed is unknown).
    pub release_failed: u64,
    /// Leases that ended before their holder released them.
    pub lease_lost: u64,
    /// The danger windows of the lost leases.
    pub danger: super::danger::DangerFold,
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
pub fn hist(sigfig: u8) -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(1, 60_000_000, sigfig).expect("valid bounds");
    h.auto(true);
    h
}

/// A histogram of µs values that starts at the smallest size and grows to the largest value it
/// records (bucket for bucket the same as [`hist`] of the same `sigfig`): for the many small
/// histograms (seconds, segments, a worker's intervals), whose size then follows their values.
pub(super) fn growing_hist(sigfig: u8) -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(1, 2, sigfig).expect("valid bounds");
    h.auto(true);
    h
}

/// Records `us` (at least 1) into `h`, which grows to fit it (`saturating_record` would clamp
/// it to the histogram's current range, the 2 µs of a new [`growing_hist`]).
pub(super) fn put(h: &mut Histogram<u64>, us: u64) {
    let us = us.max(1);
    if h.record(us).is_err() {
        // Only when growing failed (a count array beyond usize): the largest value it holds.
        h.saturating_record(us);
    }
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
            lease_lost: 0,
            danger: Default::default(),
            timeline: Vec::new(),
            last_sale: None,
        }
    }

    /// Folds one completion in; `start` is the run's time zero.
    pub fn record(&mut self, c: &Completion, start: Instant) {
        let class = c.outcome.class();
        let latency_us = c.ended.saturating_duration_since(c.intended).as_micros() as u64;
        let service_us = c.ended.saturating_duration_since(c.started).as_micros() as u64;
        put(&mut self.latency[class], latency_us);
        put(&mut self.service, service_us);
        match c.outcome {
            Outcome::Failed(k) => self.failed[k as usize] += 1,
            Outcome::Unknown(k) => self.unknown[k as usize] += 1,
            _ => {}
        }
        self.release_failed += u64::from(c.release_failed);
        self.lease_lost += u64::from(c.lease.as_ref().is_some_and(|l| l.lost));
        if let Some(l) = c.lease.as_ref().filter(|l| l.lost) {
            // A lost lease whose lock told nothing of its end still counts (no loss moment).
            self.danger.record(&l.loss.unwrap_or_default());
        }
        if c.outcome == Outcome::Sold {
            self.last_sale = self
                .last_sale
                .max(Some(c.ended.saturating_duration_since(start)));
        }
        let sec = c.ended.saturating_duration_since(start).as_secs() as usize;
        if self.timeline.len() <= sec {
            self.timeline.resize_with(sec + 1, Second::second);
        }
        let s = &mut self.timeline[sec];
        s.counts[class] += 1;
        put(&mut s.latency, latency_us);
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
        self.lease_lost += other.lease_lost;
        self.danger.merge(&other.danger);
        self.last_sale = self.last_sale.max(other.last_sale);
        for (i, s) in other.timeline.iter().enumerate() {
            self.add_second(i, s);
        }
    }

    /// Adds second `i` recorded elsewhere into the timeline.
    pub fn add_second(&mut self, i: usize, s: &Second) {
        if self.timeline.len() <= i {
            self.timeline.resize_with(i + 1, Second::second);
        }
        self.timeline[i].add(s);
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

    fn completion(start: Instant, outcome: Outcome, at_ms: u64, latency_ms: u64) -> Completion {
        let ended = start + Duration::from_millis(at_ms);
        Completion::fixture(outcome, ended, Duration::from_millis(latency_ms))
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
    fn serving_fewer_arrivals_never_improves_a_percentile() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand::rngs::ChaCha8Rng::seed_from_u64(3);
        let window = Duration::from_secs(8);
        for _ in 0..200 {
            // One run: each arrival's latency if it was served (within the 8 s window).
            let n = rng.random_range(1..2_000usize);
            let served: Vec<u64> = (0..n)
                .map(|_| rng.random_range(1..=window.as_micros() as u64))
                .collect();
            // The same arrivals, of which a strategy served only some (any subset).
            let kept: Vec<bool> = (0..n).map(|_| rng.random_bool(0.7)).collect();
            let mut all = hist(3);
            let mut fewer = hist(3);
            for (v, k) in served.iter().zip(&kept) {
                all.record(*v).unwrap();
                if *k {
                    fewer.record(*v).unwrap();
                }
            }
            let unstarted = kept.iter().filter(|k| !**k).count() as u64;
            let all = every_arrival(&all, 0, window);
            let fewer_all = every_arrival(&fewer, unstarted, window);
            assert_eq!(all.len(), fewer_all.len(), "every arrival is one sample");
            for q in [0.5, 0.9, 0.99, 0.999, 1.0] {
                assert!(
                    fewer_all.value_at_quantile(q) >= all.value_at_quantile(q),
                    "q{q}: serving {} of {n} gave {} < {}",
                    n as u64 - unstarted,
                    fewer_all.value_at_quantile(q),
                    all.value_at_quantile(q)
                );
            }
        }
    }

    #[test]
    fn a_strategy_that_leaves_arrivals_unstarted_shows_them_in_its_tail() {
        // 3,282 served fast, 11,584 never started (the ZooKeeper run of the issue): the served
        // tail alone says 20 ms; over every arrival, p99 is the whole 8 s load.
        let mut served = hist(3);
        served.record_n(20_000, 3_282).unwrap();
        let all = every_arrival(&served, 11_584, Duration::from_secs(8));
        assert!(LatencySummary::of(&served).p99 < 21_000);
        assert!(LatencySummary::of(&all).p99 >= 8_000_000);
        assert!(LatencySummary::of(&all).p50 >= 8_000_000);
        // Nothing unstarted: the same figures.
        assert_eq!(
            LatencySummary::of(&every_arrival(&served, 0, Duration::from_secs(8))),
            LatencySummary::of(&served)
        );
    }

    #[test]
    fn intervals_are_read_from_the_histogram() {
        // 1..=1000 µs: X(k) = k (3 significant digits hold every value exactly).
        let mut h = hist(3);
        for v in 1..=1000 {
            h.record(v).unwrap();
        }
        let l = LatencySummary::of(&h);
        assert_eq!(order_statistic(&h, 990), h.value_at_quantile(0.99));
        let ci = l.ci95.unwrap();
        let (lo, hi) = ci.p99;
        assert!(lo < l.p99 && l.p99 < hi.unwrap(), "{ci:?} {}", l.p99);
        assert_eq!(ci.p99, (983, Some(997)));
        assert_eq!(ci.p50, (469, Some(532)));
        // 1,000 samples cannot bound a p99.9.
        assert_eq!(ci.p999.1, None);
        assert!(l.supports(Pct::P99) && !l.supports(Pct::P999));
        assert_eq!(l.shown(Pct::P999), 1000);
        // 100 samples: p99 unbounded, shown as the maximum.
        let mut h = hist(3);
        h.record_n(7, 100).unwrap();
        let l = LatencySummary::of(&h);
        assert_eq!(l.ci95.unwrap().p99, (7, None));
        assert_eq!(l.shown(Pct::P99), l.max);
        // A summary written before the intervals still parses.
        let old: LatencySummary = serde_json::from_str(
            r#"{"p50":1,"p90":2,"p99":3,"p999":4,"max":5,"mean":1.5,"count":9}"#,
        )
        .unwrap();
        assert_eq!(old.ci95, None);
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
