//! A worker process's share of the recording, sent in intervals instead of one line per attempt.
//!
//! A worker folds its completions itself ([`WorkerFold`]: the same [`Stats::record`] and
//! [`PhaseRecorder`] as the recorder) and every [`FLUSH`] sends what changed as an [`Interval`]:
//! histograms in HdrHistogram's interval-log encoding (V2, base64, one tagged histogram
//! each), counters, phase segments, served spans, and the leases its attempts held in
//! a compact binary table ([`WireLeases`]: the double-grant check and the utilization compare
//! leases *across* workers, so every lease still crosses). The recorder decodes an interval into
//! a [`Batch`] and merges it ([`super::Ingest::batch`]); every merge is exact: histograms add
//! bucket for bucket, counters add, first served times take the minimum, served spans unite
//! ([`phases::Served`]), and leases reach the checks in end order across workers, as they
//! would from one process.
//!
//! Phases need the fault boundaries, which the coordinator marks and forwards. A completion is
//! folded only once it ended [`LAG`] ago, so a boundary that reaches the worker within `LAG` of
//! being marked files every completion in the right segment. One that comes later (a worker
//! that was paused, a slow link) is counted: the completions that may have been filed before it
//! travel as [`Interval::misfiled`] into [`phases::PhaseData::misfiled`].

use std::collections::{BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use base64::Engine as _;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::interval_log::{
    IntervalLogIterator, IntervalLogWriterBuilder, LogEntry, Tag,
};
use hdrhistogram::serialization::{Deserializer, V2Serializer};
use serde::{Deserialize, Serialize};

use super::danger::DangerCounts;
pub use super::lease_rows::WireLeases;
use super::lease_rows::{LeaseWriter, Leases};
use super::phases::{self, PhaseDelta, PhaseRecorder, Segment};
use super::stats::{Second, growing_hist};
pub use super::wire::BatchError;
use super::wire::{at, ns};
use super::{Completion, ErrorKind, Outcome, Stats};

/// How old a completion must be before a worker folds it: the time a fault boundary has to
/// reach the worker for every completion to be filed in the right phase.
pub const LAG: Duration = Duration::from_millis(250);

/// How often a worker sends an [`Interval`]. Decoding and adding an interval's ten or so
/// histograms costs the recorder about 50 µs however few attempts they hold: once a second,
/// that is about 20 ns per attempt at 2 500 attempts/s per worker, less above
/// (`scripts/bench-ingest.sh`).
pub const FLUSH: Duration = Duration::from_secs(1);

/// How far back (ms) a worker remembers when its completions ended, to count those a late
/// boundary may have misfiled.
const RECALL_MS: usize = 10_000;

/// One worker's folding of its completions into [`Interval`]s.
pub struct WorkerFold {
    start: Instant,
    /// Completions not yet folded, in end order.
    pending: VecDeque<Completion>,
    /// Since the last interval, except `timeline`: kept whole (seconds already sent are empty).
    stats: Stats,
    /// The first timeline second touched since the last interval.
    dirty_from: usize,
    phases: PhaseRecorder,
    /// Boundaries already checked for lateness.
    known_boundaries: usize,
    leases: LeaseWriter,
    sold_out: BTreeSet<u32>,
    ends: RecentEnds,
    misfiled: u64,
    /// End of the previous interval, ns since the start.
    flushed_ns: u64,
    /// V2 without deflate: the same standard encoding (the interval-log iterator and the
    /// deserializer read both), but deflate cost 140 µs per histogram to write (the compressor
    /// is set up anew each time) and three times as long to read, to save 400 bytes or so.
    /// `latency.hlog`, for HdrHistogram's own tools, stays compressed.
    serializer: V2Serializer,
}

impl WorkerFold {
    /// A fold for a load that started at `start`, split at the boundaries `boundaries` will be
    /// told of.
    pub fn new(start: Instant, boundaries: std::sync::Arc<phases::Boundaries>) -> Self {
        Self {
            start,
            pending: VecDeque::new(),
            stats: totals(),
            dirty_from: usize::MAX,
            phases: PhaseRecorder::new(boundaries, start),
            known_boundaries: 0,
            leases: LeaseWriter::default(),
            sold_out: BTreeSet::new(),
            ends: RecentEnds::new(),
            misfiled: 0,
            flushed_ns: 0,
            serializer: V2Serializer::new(),
        }
    }

    /// Queues one completion (folded once it is [`LAG`] old).
    pub fn push(&mut self, c: Completion) {
        // Nearly in end order: the slot is at or near the back.
        let i = self.pending.partition_point(|p| p.ended <= c.ended);
        self.pending.insert(i, c);
    }

    /// When every queued completion will be [`LAG`] old (`None`: nothing is queued).
    pub fn ripe_at(&self) -> Option<Instant> {
        self.pending.back().map(|c| c.ended + LAG)
    }

    /// Folds the completions that ended [`LAG`] before `now` and returns everything folded
    /// since the last interval.
    pub fn flush(&mut self, now: Instant) -> Interval {
        self.fold_while(|c| c.ended + LAG <= now);
        let folded_to = now.checked_sub(LAG).map_or(0, |t| ns(t, self.start));
        self.interval(now, folded_to)
    }

    /// Folds every queued completion, however recent, and returns the last interval.
    pub fn finish(&mut self, now: Instant) -> Interval {
        self.fold_while(|_| true);
        self.interval(now, u64::MAX)
    }

    fn fold_while(&mut self, ripe: impl Fn(&Completion) -> bool) {
        self.phases.refresh();
        self.check_late_boundaries();
        while self.pending.front().is_some_and(&ripe) {
            let c = self.pending.pop_front().expect("checked");
            self.fold(&c);
        }
    }

    /// A boundary at or before the latest completion folded came too late for the completions
    /// folded since it: count them (an upper bound: their end's millisecond is compared).
    fn check_late_boundaries(&mut self) {
        let now_known = self.phases.boundaries().len();
        for i in self.known_boundaries..now_known {
            let b = ns(self.phases.boundaries()[i], self.start);
            self.misfiled += self.ends.since(b);
        }
        self.known_boundaries = now_known;
    }

    fn fold(&mut self, c: &Completion) {
        self.stats.record(c, self.start);
        self.phases.record(c);
        let end_ns = ns(c.ended, self.start);
        self.dirty_from = self.dirty_from.min((end_ns / 1_000_000_000) as usize);
        self.ends.add(end_ns);
        if c.outcome == Outcome::SoldOut {
            self.sold_out.insert(c.sku);
        }
        if let Some(l) = &c.lease {
            self.leases.push(c, l, self.start);
        } else if c.outcome == Outcome::LockTimeout && !c.read {
            self.leases.push_give_up(c, self.start);
        }
    }

    /// Everything folded since the last interval, which is left empty; every completion that
    /// ended before `folded_to` (ns) was folded.
    fn interval(&mut self, now: Instant, folded_to: u64) -> Interval {
        let to_ns = ns(now, self.start).max(self.flushed_ns);
        let from = Duration::from_nanos(self.flushed_ns);
        let span = Duration::from_nanos(to_ns - self.flushed_ns);
        self.flushed_ns = to_ns;
        let phases = self.phases.drain();
        let (hlog, seconds) = self.histograms(from, span, &phases.segments);
        self.dirty_from = usize::MAX;
        let s = &mut self.stats;
        let interval = Interval {
            from_ns: from.as_nanos() as u64,
            to_ns,
            folded_to_ns: folded_to,
            hlog,
            seconds,
            segments: phases
                .segments
                .iter()
                .map(|(i, s)| (*i as u32, s.counts))
                .collect(),
            failed: s.failed,
            unknown: s.unknown,
            release_failed: s.release_failed,
            lease_lost: s.lease_lost,
            danger: s.danger.counts,
            last_sale_ns: s.last_sale.map(|d| d.as_nanos() as u64),
            first_served_ns: phases
                .first_served
                .iter()
                .map(|f| f.map(|t| ns(t, self.start)))
                .collect(),
            served_ns: phases
                .served
                .iter()
                .map(|(a, b)| (ns(*a, self.start), ns(*b, self.start)))
                .collect(),
            leases: self.leases.take(),
            sold_out: std::mem::take(&mut self.sold_out).into_iter().collect(),
            misfiled: std::mem::take(&mut self.misfiled),
        };
        reset_totals(s);
        interval
    }

    /// The interval log of every histogram filled since the last interval (`segments`' too),
    /// and the counts of the seconds in it (those seconds are left empty).
    fn histograms(
        &mut self,
        from: Duration,
        span: Duration,
        segments: &[(usize, Segment)],
    ) -> (String, Vec<(u32, [u64; Outcome::CLASSES])>) {
        let mut hlog = Vec::new();
        let mut seconds = Vec::new();
        let mut log = HlogWriter::new(&mut hlog, &mut self.serializer);
        for (h, class) in self.stats.latency.iter().zip(Outcome::CLASS_NAMES) {
            log.write(h, from, span, &format!("latency.{class}"));
        }
        log.write(&self.stats.service, from, span, "service");
        log.write(&self.stats.danger.notice, from, span, "danger.notice");
        let dirty = self.dirty_from.min(self.stats.timeline.len());
        for (i, s) in self.stats.timeline.iter_mut().enumerate().skip(dirty) {
            if s.attempts() > 0 {
                let second = Duration::from_secs(i as u64);
                let tag = format!("second.{i}");
                log.write(&s.latency, second, Duration::from_secs(1), &tag);
                seconds.push((i as u32, s.counts));
                *s = Second::second();
            }
        }
        for (i, s) in segments {
            log.write(&s.latency, from, span, &format!("phase.{i}"));
        }
        drop(log);
        let hlog = String::from_utf8(hlog).expect("an interval log is ASCII");
        (hlog, seconds)
    }
}

/// Empty statistics with small histograms (an interval's: they grow to what they hold).
fn totals() -> Stats {
    Stats {
        latency: std::array::from_fn(|_| growing_hist(3)),
        service: growing_hist(3),
        failed: Default::default(),
        unknown: Default::default(),
        release_failed: 0,
        lease_lost: 0,
        danger: Default::default(),
        timeline: Vec::new(),
        last_sale: None,
    }
}

/// Empties everything of `s` but its timeline (and `last_sale`, a maximum resent as is).
fn reset_totals(s: &mut Stats) {
    let timeline = std::mem::take(&mut s.timeline);
    let last_sale = s.last_sale;
    *s = Stats {
        timeline,
        last_sale,
        ..totals()
    };
}

/// Writes tagged histograms into an interval log (empty ones are left out).
struct HlogWriter<'a> {
    log:
        hdrhistogram::serialization::interval_log::IntervalLogWriter<'a, 'a, Vec<u8>, V2Serializer>,
}

impl<'a> HlogWriter<'a> {
    fn new(out: &'a mut Vec<u8>, serializer: &'a mut V2Serializer) -> Self {
        Self {
            log: IntervalLogWriterBuilder::new()
                .begin_log_with(out, serializer)
                .expect("writing to memory cannot fail"),
        }
    }

    fn write(&mut self, h: &Histogram<u64>, from: Duration, span: Duration, tag: &str) {
        if h.is_empty() {
            return;
        }
        self.log
            .write_histogram(
                h,
                from,
                span,
                Some(Tag::new(tag).expect("tags have no , or space")),
            )
            .expect("a histogram of counts serialises into memory");
    }
}

/// Counts of completions folded per millisecond of their end, over the last [`RECALL_MS`].
struct RecentEnds {
    per_ms: Vec<u32>,
    /// The latest millisecond counted (its slot is `latest % RECALL_MS`).
    latest: Option<u64>,
    /// The latest end, ns.
    latest_ns: u64,
    /// Every completion folded.
    total: u64,
}

impl RecentEnds {
    fn new() -> Self {
        Self {
            per_ms: vec![0; RECALL_MS],
            latest: None,
            latest_ns: 0,
            total: 0,
        }
    }

    fn add(&mut self, end_ns: u64) {
        let ms = end_ns / 1_000_000;
        self.total += 1;
        self.latest_ns = self.latest_ns.max(end_ns);
        let latest = self.latest.unwrap_or(ms);
        if ms > latest {
            // Clear the slots of the milliseconds skipped (at most all of them).
            for m in (latest + 1..=ms).rev().take(RECALL_MS) {
                self.per_ms[m as usize % RECALL_MS] = 0;
            }
        }
        let latest = latest.max(ms);
        self.latest = Some(latest);
        if latest - ms < RECALL_MS as u64 {
            self.per_ms[ms as usize % RECALL_MS] += 1;
        }
    }

    /// At most how many completions folded so far ended at or after `b_ns`: none if all ended
    /// before; else exact to the millisecond within the recall, every one folded beyond it.
    fn since(&self, b_ns: u64) -> u64 {
        let Some(latest) = self.latest.filter(|_| b_ns <= self.latest_ns) else {
            return 0;
        };
        let b = b_ns / 1_000_000;
        if latest - b >= RECALL_MS as u64 {
            return self.total;
        }
        (b..=latest)
            .map(|m| u64::from(self.per_ms[m as usize % RECALL_MS]))
            .sum()
    }
}

/// One worker's interval on the wire: what it folded since its previous one. Times are ns
/// since the start of the load, on the worker's clock.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// When the previous interval was cut.
    pub from_ns: u64,
    /// When this one was cut.
    pub to_ns: u64,
    /// Every completion of the worker that ended before this was folded, into this interval
    /// or an earlier one (`u64::MAX` in its last): the recorder waits for it to put the
    /// workers' leases back in end order. (A completion that reached the fold late, its worker
    /// stopped between its end and its report, comes later, out of order.)
    pub folded_to_ns: u64,
    /// The histograms as an HdrHistogram interval log (V2, base64), µs values, one
    /// tagged line each, empty ones left out: `latency.<class>` (from the intended start, per
    /// outcome class), `service` (from the actual start), `danger.notice` (a lost lease's
    /// loss → notice), `second.<n>` (latency of what ended
    /// in second n of the timeline), `phase.<i>` (latency in segment i between boundaries).
    pub hlog: String,
    /// Completions per outcome class of each `second.<n>`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub seconds: Vec<(u32, [u64; Outcome::CLASSES])>,
    /// Completions per outcome class of each `phase.<i>`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub segments: Vec<(u32, [u64; Outcome::CLASSES])>,
    /// Failed attempts by error kind ([`ErrorKind::ALL`] order).
    pub failed: [u64; ErrorKind::ALL.len()],
    /// Unknown-outcome attempts by error kind.
    pub unknown: [u64; ErrorKind::ALL.len()],
    /// Releases that failed.
    pub release_failed: u64,
    /// Leases lost while held.
    pub lease_lost: u64,
    /// The danger windows' counters of those (their loss → notice times are the log's
    /// `danger.notice`).
    #[serde(default, skip_serializing_if = "DangerCounts::is_empty")]
    pub danger: DangerCounts,
    /// The latest sale of the worker so far (not only of this interval).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_sale_ns: Option<u64>,
    /// The first served end per boundary the worker knew of, when one changed (else empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub first_served_ns: Vec<Option<u64>>,
    /// Served spans ([`phases::Served`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub served_ns: Vec<(u64, u64)>,
    /// The leases its attempts held.
    #[serde(default, skip_serializing_if = "WireLeases::is_empty")]
    pub leases: WireLeases,
    /// SKUs an attempt found sold out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sold_out: Vec<u32>,
    /// Completions that may have been filed before a boundary that reached the worker late.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub misfiled: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A decoded interval, ready for the recorder to merge.
#[derive(Debug, Clone)]
pub struct Batch {
    /// Index of the worker that sent it (the clock its times were taken on).
    pub worker: usize,
    pub(super) stats: Stats,
    pub(super) seconds: Vec<(usize, Second)>,
    pub(super) phases: PhaseDelta,
    pub(super) leases: Leases,
    /// Every lease of the worker that ended before this (ns) has been sent.
    pub(super) folded_to: u64,
    pub(super) sold_out: Vec<u32>,
    pub(super) misfiled: u64,
}

impl Batch {
    /// Attempts it carries.
    pub fn attempts(&self) -> u64 {
        self.stats.attempts()
    }
}

impl Interval {
    /// Decodes the interval worker `worker` sent, its times from `start`.
    pub fn decode(self, start: Instant, worker: usize) -> Result<Batch, BatchError> {
        let mut stats = totals();
        let mut seconds: Vec<(usize, Second)> = Vec::with_capacity(self.seconds.len());
        let mut segments: Vec<(usize, Segment)> = Vec::with_capacity(self.segments.len());
        read_hlog(&self.hlog, &mut stats, &mut seconds, &mut segments)?;
        fill_counts(&mut seconds, &self.seconds, "second", |s| {
            (&mut s.counts, &s.latency)
        })?;
        fill_counts(&mut segments, &self.segments, "phase", |s| {
            (&mut s.counts, &s.latency)
        })?;
        stats.failed = self.failed;
        stats.unknown = self.unknown;
        stats.release_failed = self.release_failed;
        stats.lease_lost = self.lease_lost;
        stats.danger.counts = self.danger;
        stats.last_sale = self.last_sale_ns.map(Duration::from_nanos);
        Ok(Batch {
            worker,
            stats,
            seconds,
            phases: PhaseDelta {
                segments,
                first_served: self
                    .first_served_ns
                    .iter()
                    .map(|f| f.map(|n| at(start, n)))
                    .collect(),
                served: self
                    .served_ns
                    .iter()
                    .map(|(a, b)| (at(start, *a), at(start, *b)))
                    .collect(),
            },
            leases: Leases::decode(self.leases)?,
            folded_to: self.folded_to_ns,
            sold_out: self.sold_out,
            misfiled: self.misfiled,
        })
    }
}

/// Reads the histograms of an interval's log: the latency of each outcome class and the
/// service time into `stats`, each second's and phase's latency into `seconds` and
/// `segments` (their counts come apart).
fn read_hlog(
    hlog: &str,
    stats: &mut Stats,
    seconds: &mut Vec<(usize, Second)>,
    segments: &mut Vec<(usize, Segment)>,
) -> Result<(), BatchError> {
    let mut de = Deserializer::new();
    for entry in IntervalLogIterator::new(hlog.as_bytes()) {
        let LogEntry::Interval(h) = entry.map_err(|e| BatchError::Log(format!("{e:?}")))? else {
            continue;
        };
        let tag = h.tag().map(|t| t.as_str()).unwrap_or_default();
        let bad = |detail: String| BatchError::Histogram {
            tag: tag.to_string(),
            detail,
        };
        let raw = base64::engine::general_purpose::STANDARD
            .decode(h.encoded_histogram())
            .map_err(|e| bad(e.to_string()))?;
        let hist: Histogram<u64> = de
            .deserialize(&mut raw.as_slice())
            .map_err(|e| bad(format!("{e:?}")))?;
        let (kind, rest) = tag.split_once('.').unwrap_or((tag, ""));
        let n = || {
            rest.parse::<usize>()
                .map_err(|_| BatchError::Tag(tag.into()))
        };
        match kind {
            "latency" => {
                let class = Outcome::CLASS_NAMES
                    .iter()
                    .position(|c| *c == rest)
                    .ok_or_else(|| BatchError::Tag(tag.into()))?;
                stats.latency[class] = hist;
            }
            "service" => stats.service = hist,
            "danger" if rest == "notice" => stats.danger.notice = hist,
            "second" => seconds.push((
                n()?,
                Second {
                    counts: [0; Outcome::CLASSES],
                    latency: hist,
                },
            )),
            "phase" => segments.push((
                n()?,
                Segment {
                    counts: [0; Outcome::CLASSES],
                    latency: hist,
                },
            )),
            _ => return Err(BatchError::Tag(tag.into())),
        }
    }
    Ok(())
}

/// Gives each decoded histogram of `kind` its counts per class from `counts`; both must name
/// the same items and agree on the total.
fn fill_counts<T>(
    items: &mut [(usize, T)],
    counts: &[(u32, [u64; Outcome::CLASSES])],
    kind: &str,
    parts: impl Fn(&mut T) -> (&mut [u64; Outcome::CLASSES], &Histogram<u64>),
) -> Result<(), BatchError> {
    if items.len() != counts.len() {
        return Err(BatchError::Inconsistent(format!(
            "{} {kind} histograms for {} counts",
            items.len(),
            counts.len()
        )));
    }
    items.sort_unstable_by_key(|(i, _)| *i);
    let mut sorted = counts.to_vec();
    sorted.sort_unstable_by_key(|(i, _)| *i);
    for ((i, item), (j, c)) in items.iter_mut().zip(&sorted) {
        let (mine, hist) = parts(item);
        if *i != *j as usize || c.iter().sum::<u64>() != hist.len() {
            return Err(BatchError::Inconsistent(format!(
                "{kind}.{i}: counts {c:?} for {} latencies",
                hist.len()
            )));
        }
        *mine = *c;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_boundary_later_than_the_recall_counts_every_completion() {
        let mut ends = RecentEnds::new();
        for m in 0..20_000u64 {
            ends.add(m * 1_000_000 + 500);
        }
        assert_eq!(ends.since(20_000 * 1_000_000), 0, "after every end");
        assert_eq!(ends.since(19_990 * 1_000_000), 10);
        assert_eq!(
            ends.since(19_990 * 1_000_000 + 501),
            10,
            "to the millisecond"
        );
        assert_eq!(
            ends.since(100 * 1_000_000),
            20_000,
            "beyond the recall: all of them"
        );
    }
}
