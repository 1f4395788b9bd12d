//! Measurements split at fault boundaries: before / during / after each fault.
//!
//! The chaos runner marks a [`Boundaries`] entry when a fault starts and when it is healed; the
//! recorder files every completion into the segment between two boundaries that contains its
//! end, and notes for each boundary the first *served* attempt after it (a sale, or a definite
//! "sold out" — either proves the system answers). Gaps between served attempts longer than
//! [`GAP`] are kept, to measure how long the system was unavailable. Memory grows with the
//! number of faults and gaps, never with the number of attempts.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::{Completion, Outcome};

/// Shortest stretch without a served attempt that is remembered as a gap.
pub const GAP: Duration = Duration::from_millis(5);

/// Fault boundaries in time order, shared by the chaos runner (writer) and the recorder.
#[derive(Debug, Default)]
pub struct Boundaries(Mutex<Vec<Instant>>);

impl Boundaries {
    /// Marks a boundary now and returns it.
    pub fn mark(&self) -> Instant {
        let mut b = self.0.lock().expect("boundaries lock is never poisoned");
        // Monotonic even if two marks race.
        let now = Instant::now().max(b.last().copied().unwrap_or(Instant::now()));
        b.push(now);
        now
    }

    fn snapshot(&self, into: &mut Vec<Instant>) {
        let b = self.0.lock().expect("boundaries lock is never poisoned");
        if b.len() != into.len() {
            into.clone_from(&b);
        }
    }
}

/// What happened between two boundaries.
#[derive(Debug, Clone)]
pub struct Segment {
    /// Completions per outcome class.
    pub counts: [u64; Outcome::CLASSES],
    /// Latency from the intended start, µs, every class.
    pub latency: Histogram<u64>,
}

impl Segment {
    fn new() -> Self {
        Self {
            counts: [0; Outcome::CLASSES],
            latency: super::stats::hist(3),
        }
    }
}

/// Everything the phase recorder kept.
#[derive(Debug, Clone)]
pub struct PhaseData {
    /// Boundary instants (segment `i + 1` starts at `boundaries[i]`).
    pub boundaries: Vec<Instant>,
    /// `boundaries.len() + 1` segments.
    pub segments: Vec<Segment>,
    /// Per boundary, the end of the first served attempt that ended at or after it.
    pub first_served: Vec<Option<Instant>>,
    /// Stretches longer than [`GAP`] between two served attempts.
    pub gaps: Vec<(Instant, Instant)>,
}

impl PhaseData {
    /// The longest stretch without a served attempt that overlaps `[from, to]`.
    pub fn longest_gap(&self, from: Instant, to: Instant) -> Duration {
        self.gaps
            .iter()
            .filter(|(a, b)| *a <= to && *b >= from)
            .map(|(a, b)| b.duration_since(*a))
            .max()
            .unwrap_or_default()
    }
}

/// Files completions into segments (runs inside the recorder task).
pub struct PhaseRecorder {
    shared: Arc<Boundaries>,
    data: PhaseData,
    last_served: Option<Instant>,
    start: Instant,
}

impl PhaseRecorder {
    /// Segments split at the boundaries `shared` will receive.
    pub fn new(shared: Arc<Boundaries>, start: Instant) -> Self {
        Self {
            shared,
            data: PhaseData {
                boundaries: Vec::new(),
                segments: vec![Segment::new()],
                first_served: Vec::new(),
                gaps: Vec::new(),
            },
            last_served: None,
            start,
        }
    }

    /// Picks up boundaries marked since the last call (once per batch of completions).
    pub fn refresh(&mut self) {
        self.shared.snapshot(&mut self.data.boundaries);
        let n = self.data.boundaries.len();
        self.data.segments.resize_with(n + 1, Segment::new);
        self.data.first_served.resize(n, None);
    }

    /// Files one completion.
    pub fn record(&mut self, c: &Completion) {
        let d = &mut self.data;
        let i = d.boundaries.partition_point(|b| *b <= c.ended);
        let seg = &mut d.segments[i];
        seg.counts[c.outcome.class()] += 1;
        let us = c.ended.saturating_duration_since(c.intended).as_micros() as u64;
        seg.latency.saturating_record(us.max(1));
        if !matches!(c.outcome, Outcome::Sold | Outcome::SoldOut) {
            return;
        }
        // Walk back from the last boundary before this end. An earlier boundary's first served
        // attempt is never later than a later boundary's (it is the minimum over more attempts),
        // so the walk stops at the first one already served by then: O(1) per attempt, not
        // O(faults), while a late (out-of-order) completion still lowers every value it should.
        for first in d.first_served[..i].iter_mut().rev() {
            if first.is_some_and(|f| f <= c.ended) {
                break;
            }
            *first = Some(c.ended);
        }
        let last = self.last_served.unwrap_or(self.start);
        if c.ended > last {
            if c.ended - last > GAP {
                d.gaps.push((last, c.ended));
            }
            self.last_served = Some(c.ended);
        }
    }

    /// What was kept; `end` closes a gap that lasts until the end of the load.
    pub fn finish(mut self, end: Instant) -> PhaseData {
        self.refresh();
        let last = self.last_served.unwrap_or(self.start);
        if end > last + GAP {
            self.data.gaps.push((last, end));
        }
        self.data
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(start: Instant, ms: u64, outcome: Outcome) -> Completion {
        let t = start + Duration::from_millis(ms);
        Completion {
            seq: 0,
            client: 0,
            sku: 0,
            read: false,
            outcome,
            intended: t - Duration::from_millis(1),
            started: t - Duration::from_millis(1),
            ended: t,
            release_failed: false,
            lease: None,
        }
    }

    #[test]
    fn files_completions_between_boundaries_and_measures_recovery() {
        let start = Instant::now() - Duration::from_secs(10);
        let shared = Arc::new(Boundaries::default());
        shared.0.lock().unwrap().extend([
            start + Duration::from_secs(2),
            start + Duration::from_secs(4),
        ]);
        let mut r = PhaseRecorder::new(shared, start);
        r.refresh();
        for ms in [100, 1000, 1990] {
            r.record(&done(start, ms, Outcome::Sold));
        }
        // During the fault: only errors, then the first sale 1.5 s after the heal.
        r.record(&done(
            start,
            2500,
            Outcome::Failed(super::super::ErrorKind::Timeout),
        ));
        r.record(&done(start, 5500, Outcome::SoldOut));
        r.record(&done(start, 5600, Outcome::Sold));
        assert_eq!(
            r.data.segments[2].latency.max(),
            1000,
            "µs from the intended start"
        );
        let d = r.finish(start + Duration::from_millis(5600));
        assert_eq!(
            d.segments
                .iter()
                .map(|s| s.counts.iter().sum::<u64>())
                .collect::<Vec<_>>(),
            [3, 1, 2]
        );
        assert_eq!(
            d.first_served,
            [Some(start + Duration::from_millis(5500)); 2]
        );
        let gap = d.longest_gap(
            start + Duration::from_secs(2),
            start + Duration::from_secs(4),
        );
        assert_eq!(gap, Duration::from_millis(3510));
    }

    #[test]
    fn a_late_completion_still_lowers_the_first_served_time() {
        let start = Instant::now() - Duration::from_secs(10);
        let shared = Arc::new(Boundaries::default());
        shared.0.lock().unwrap().extend([
            start + Duration::from_secs(2),
            start + Duration::from_secs(4),
        ]);
        let mut r = PhaseRecorder::new(shared, start);
        r.refresh();
        r.record(&done(start, 1000, Outcome::Sold));
        r.record(&done(start, 5500, Outcome::Sold));
        // Arrives after the 5.5 s one but ended earlier, after both boundaries.
        r.record(&done(start, 4200, Outcome::Sold));
        // Ended between the boundaries: only the first one's value moves.
        r.record(&done(start, 3000, Outcome::SoldOut));
        let d = r.finish(start + Duration::from_secs(6));
        let ms = |m| Some(start + Duration::from_millis(m));
        assert_eq!(d.first_served, [ms(3000), ms(4200)]);
    }
}
