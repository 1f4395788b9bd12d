//! Measurements split at fault boundaries: before / during / after each fault.
//!
//! The chaos runner marks a [`Boundaries`] entry when a fault starts and when it is healed; the
//! recorder files every completion into the segment between two boundaries that contains its
//! end, and notes for each boundary the first *served* attempt after it (a sale, or a definite
//! "sold out" — either proves the system answers). Stretches without a served attempt longer
//! than [`GAP`] are kept, to measure how long the system was unavailable. Memory grows with the
//! number of faults and gaps, never with the number of attempts.
//!
//! Worker processes file their own completions ([`super::partial`]); the recorder merges their
//! [`PhaseDelta`]s: segments add, first served times take the minimum, served spans unite.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::{Completion, Outcome};

/// Shortest stretch without a served attempt that is remembered as a gap.
pub const GAP: Duration = Duration::from_millis(5);

/// Fault boundaries in time order, shared by the chaos runner (writer) and the recorder; worker
/// processes are told of each one ([`Boundaries::subscribe`]).
#[derive(Debug)]
pub struct Boundaries(watch::Sender<Vec<Instant>>);

impl Default for Boundaries {
    fn default() -> Self {
        Self(watch::Sender::new(Vec::new()))
    }
}

impl Boundaries {
    /// Marks a boundary now and returns it.
    pub fn mark(&self) -> Instant {
        self.push(Instant::now())
    }

    /// Adds a boundary marked elsewhere (a worker told by its coordinator); returns it as kept.
    pub fn push(&self, at: Instant) -> Instant {
        let mut kept = at;
        self.0.send_modify(|b| {
            // Monotonic even if two marks race.
            kept = at.max(b.last().copied().unwrap_or(at));
            b.push(kept);
        });
        kept
    }

    /// Every boundary so far, and each one marked later.
    pub fn subscribe(&self) -> watch::Receiver<Vec<Instant>> {
        self.0.subscribe()
    }

    fn snapshot(&self, into: &mut Vec<Instant>) {
        let b = self.0.borrow();
        if b.len() != into.len() {
            into.clone_from(&b);
        }
    }
}

/// What happened between two boundaries.
pub type Segment = super::stats::Tally;

/// Significant digits of a segment's latency (a phase's percentiles are reported).
const SEGMENT_SIGFIG: u8 = 3;

fn segment() -> Segment {
    Segment::new(SEGMENT_SIGFIG)
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
    /// Completions a worker process may have filed in the segment before a boundary that
    /// reached it late (more than [`super::partial::LAG`] after it was marked): at most this
    /// many attempts are in the wrong segment, and first served times may be late by them.
    pub misfiled: u64,
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

/// The ends of served attempts as spans: each span starts and ends at a served end, and no
/// stretch longer than [`GAP`] inside it is free of served ends; spans closer than that are
/// merged. So the stretches longer than [`GAP`] between spans are exactly the gaps between
/// served attempts, and memory grows with the gaps, not the attempts.
///
/// Why worker processes can send their spans instead of every served end: let S be the served
/// ends of all workers and U the union of every worker's spans. A gap of S (consecutive s < t,
/// t − s > GAP) meets no span: a span reaching into (s, t) has both ends in S, so outside
/// (s, t), so it contains [s, t], a stretch longer than GAP free of served ends — which no span
/// contains. Conversely, a stretch between two spans of U holds no served end (each is in its
/// span) and is bounded by served ends: when longer than GAP, it is a gap of S. Merging spans
/// that lie at most GAP apart keeps both properties, so the union is kept merged.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Served {
    /// In time order, each more than [`GAP`] before the next.
    spans: Vec<(Instant, Instant)>,
}

impl Served {
    /// Adds a span (a served end: `(end, end)`).
    pub fn insert(&mut self, (a, b): (Instant, Instant)) {
        // Served ends come nearly in order: extend or follow the last span.
        if let Some(last) = self.spans.last_mut()
            && a >= last.0
        {
            if a <= last.1 + GAP {
                last.1 = last.1.max(b);
            } else {
                self.spans.push((a, b));
            }
            return;
        }
        // The spans within GAP of [a, b] (each span ends before the next starts).
        let lo = self.spans.partition_point(|s| s.1 + GAP < a);
        let hi = self.spans.partition_point(|s| s.0 <= b + GAP);
        if lo == hi {
            self.spans.insert(lo, (a, b));
        } else {
            let merged = (a.min(self.spans[lo].0), b.max(self.spans[hi - 1].1));
            self.spans.splice(lo..hi, [merged]);
        }
    }

    /// Takes every span (a worker's interval sends them).
    pub fn drain(&mut self) -> Vec<(Instant, Instant)> {
        std::mem::take(&mut self.spans)
    }

    /// Stretches longer than [`GAP`] without a served attempt, from `start` (before the first)
    /// to `end` (after the last).
    pub fn gaps(&self, start: Instant, end: Instant) -> Vec<(Instant, Instant)> {
        let mut gaps = Vec::new();
        let mut last = start;
        for &(a, b) in &self.spans {
            if a > last + GAP {
                gaps.push((last, a));
            }
            last = last.max(b);
        }
        if end > last + GAP {
            gaps.push((last, end));
        }
        gaps
    }
}

/// What a worker's phase recorder gathered since its last interval.
#[derive(Debug, Clone, Default)]
pub struct PhaseDelta {
    /// The segments it filed attempts into, by index (boundaries are the coordinator's).
    pub segments: Vec<(usize, Segment)>,
    /// Its first served time per boundary it knew of, when one changed (else empty).
    pub first_served: Vec<Option<Instant>>,
    /// Its served spans ([`Served`]).
    pub served: Vec<(Instant, Instant)>,
}

/// Files completions into segments (runs inside the recorder task, and in each worker).
pub struct PhaseRecorder {
    shared: Arc<Boundaries>,
    data: PhaseData,
    served: Served,
    /// A first served time changed since the last [`PhaseRecorder::drain`].
    first_served_changed: bool,
    start: Instant,
}

impl PhaseRecorder {
    /// Segments split at the boundaries `shared` will receive.
    pub fn new(shared: Arc<Boundaries>, start: Instant) -> Self {
        Self {
            shared,
            data: PhaseData {
                boundaries: Vec::new(),
                segments: vec![segment()],
                first_served: Vec::new(),
                gaps: Vec::new(),
                misfiled: 0,
            },
            served: Served::default(),
            first_served_changed: false,
            start,
        }
    }

    /// Picks up boundaries marked since the last call (once per batch of completions).
    pub fn refresh(&mut self) {
        self.shared.snapshot(&mut self.data.boundaries);
        self.fit(self.data.boundaries.len());
    }

    /// Room for `n` boundaries.
    fn fit(&mut self, n: usize) {
        if self.data.segments.len() < n + 1 {
            self.data.segments.resize_with(n + 1, segment);
            self.data.first_served.resize(n, None);
        }
    }

    /// The boundaries known so far.
    pub fn boundaries(&self) -> &[Instant] {
        &self.data.boundaries
    }

    /// Files one completion.
    pub fn record(&mut self, c: &Completion) {
        let d = &mut self.data;
        let i = d.boundaries.partition_point(|b| *b <= c.ended);
        let seg = &mut d.segments[i];
        seg.counts[c.outcome.class()] += 1;
        let us = c.ended.saturating_duration_since(c.intended).as_micros() as u64;
        super::stats::put(&mut seg.latency, us);
        if !matches!(c.outcome, Outcome::Sold | Outcome::SoldOut) {
            return;
        }
        self.first_served_changed |= lower_first_served(&mut d.first_served[..i], c.ended);
        self.served.insert((c.ended, c.ended));
    }

    /// Takes what was filed since the last call: the segments filed into (left empty), the
    /// first served times if one changed (they stay: each call reports them all), the served
    /// spans.
    pub fn drain(&mut self) -> PhaseDelta {
        let segments = self
            .data
            .segments
            .iter_mut()
            .enumerate()
            .filter(|(_, s)| s.attempts() > 0)
            .map(|(i, s)| (i, std::mem::replace(s, segment())))
            .collect();
        let first_served = if std::mem::take(&mut self.first_served_changed) {
            self.data.first_served.clone()
        } else {
            Vec::new()
        };
        PhaseDelta {
            segments,
            first_served,
            served: self.served.drain(),
        }
    }

    /// Adds what a worker filed: segments add, first served times take the minimum, served
    /// spans unite.
    pub fn merge(&mut self, d: &PhaseDelta) {
        let most = d.segments.iter().map(|(i, _)| *i).max().unwrap_or(0);
        self.fit(most.max(d.first_served.len()));
        for (i, s) in &d.segments {
            self.data.segments[*i].add(s);
        }
        for (mine, theirs) in self.data.first_served.iter_mut().zip(&d.first_served) {
            if let Some(t) = theirs {
                *mine = Some(mine.map_or(*t, |m| m.min(*t)));
            }
        }
        for span in &d.served {
            self.served.insert(*span);
        }
    }

    /// Counts completions a worker may have misfiled ([`PhaseData::misfiled`]).
    pub fn misfiled(&mut self, n: u64) {
        self.data.misfiled += n;
    }

    /// What was kept; `end` closes a gap that lasts until the end of the load.
    pub fn finish(mut self, end: Instant) -> PhaseData {
        self.refresh();
        self.data.gaps = self.served.gaps(self.start, end);
        self.data
    }
}

/// Lowers the first served time of each boundary in `before` (the boundaries at or before a
/// served end `at`) to `at`; returns whether one changed.
///
/// Walks back from the last boundary before this end. An earlier boundary's first served
/// attempt is never later than a later boundary's (it is the minimum over more attempts), so
/// the walk stops at the first one already served by then: O(1) per attempt, not O(faults),
/// while a late (out-of-order) completion still lowers every value it should.
fn lower_first_served(before: &mut [Option<Instant>], at: Instant) -> bool {
    let mut changed = false;
    for first in before.iter_mut().rev() {
        if first.is_some_and(|f| f <= at) {
            break;
        }
        *first = Some(at);
        changed = true;
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(start: Instant, ms: u64, outcome: Outcome) -> Completion {
        let t = start + Duration::from_millis(ms);
        Completion::fixture(outcome, t, Duration::from_millis(1))
    }

    /// A recorder that started 10 s ago with a fault from 2 s to 4 s.
    fn faulted() -> (Instant, PhaseRecorder) {
        let start = Instant::now() - Duration::from_secs(10);
        let shared = Arc::new(Boundaries::default());
        for s in [2, 4] {
            shared.push(start + Duration::from_secs(s));
        }
        let mut r = PhaseRecorder::new(shared, start);
        r.refresh();
        (start, r)
    }

    #[test]
    fn files_completions_between_boundaries_and_measures_recovery() {
        let (start, mut r) = faulted();
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
        let (start, mut r) = faulted();
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

    #[test]
    fn the_gaps_of_every_workers_spans_are_the_gaps_of_all_served_ends() {
        use rand::{RngExt, SeedableRng};
        let start = Instant::now();
        let mut rng = rand::rngs::ChaCha8Rng::seed_from_u64(9);
        for _ in 0..200 {
            let end = start + Duration::from_millis(500);
            // Served ends of 8 workers, 2–10 ms apart on average: gaps of every length near GAP.
            let n = rng.random_range(0..300);
            let ends: Vec<(usize, Instant)> = (0..n)
                .map(|_| {
                    let us = rng.random_range(0..500_000u64);
                    (rng.random_range(0..8), start + Duration::from_micros(us))
                })
                .collect();
            // By definition: consecutive served ends more than GAP apart.
            let mut sorted: Vec<Instant> = ends.iter().map(|e| e.1).collect();
            sorted.sort();
            let mut expected = Vec::new();
            let mut last = start;
            for t in sorted.iter().copied().chain([end]) {
                if t > last + GAP {
                    expected.push((last, t));
                }
                last = last.max(t);
            }
            // Each worker's spans, drained at arbitrary points, its ends out of order at times.
            let mut union = Served::default();
            let mut workers = vec![Served::default(); 8];
            for (k, t) in &ends {
                workers[*k].insert((*t, *t));
                if rng.random_bool(0.05) {
                    for s in workers[*k].drain() {
                        union.insert(s);
                    }
                }
            }
            for w in &mut workers {
                for s in w.drain() {
                    union.insert(s);
                }
            }
            assert_eq!(union.gaps(start, end), expected);
        }
    }
}
