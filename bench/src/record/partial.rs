//! A worker process's share of the recording, sent in intervals instead of one line per attempt.
//!
//! A worker folds its completions itself ([`WorkerFold`]: the same [`Stats::record`] and
//! [`PhaseRecorder`] as the recorder) and every [`FLUSH`] sends what changed as an [`Interval`]:
//! histograms in HdrHistogram's interval-log encoding (V2 + deflate, base64, one tagged
//! histogram each), counters, phase segments, served spans, and the leases its attempts held in
//! a compact binary table (the double-grant check and the utilization compare leases *across*
//! workers, so every lease still crosses). The recorder decodes an interval into a [`Batch`] and
//! merges it ([`super::Ingest::batch`]); every merge is exact: histograms add bucket for bucket,
//! counters add, first served times take the minimum, served spans unite ([`phases::Served`]).
//!
//! Phases need the fault boundaries, which the coordinator marks and forwards. A completion is
//! folded only once it ended [`LAG`] ago, so a boundary that reaches the worker within `LAG` of
//! being marked files every completion in the right segment. One that comes later (a worker
//! that was paused, a slow link) is counted: the completions that may have been filed before it
//! travel as [`Interval::misfiled`] into [`phases::PhaseData::misfiled`].

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::time::{Duration, Instant};

use base64::Engine as _;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::interval_log::{
    IntervalLogIterator, IntervalLogWriterBuilder, LogEntry, Tag,
};
use hdrhistogram::serialization::{Deserializer, V2DeflateSerializer};
use serde::{Deserialize, Serialize};

use super::phases::{self, PhaseDelta, PhaseRecorder, Segment};
use super::stats::{Second, growing_hist};
use super::{Completion, ErrorKind, LeaseSpan, Outcome, Stats};

/// How old a completion must be before a worker folds it: the time a fault boundary has to
/// reach the worker for every completion to be filed in the right phase.
pub const LAG: Duration = Duration::from_millis(250);

/// How often a worker sends an [`Interval`].
pub const FLUSH: Duration = Duration::from_millis(200);

/// How far back (ms) a worker remembers when its completions ended, to count those a late
/// boundary may have misfiled.
const RECALL_MS: usize = 10_000;

/// ns since `start` (wire times).
fn ns(t: Instant, start: Instant) -> u64 {
    t.saturating_duration_since(start).as_nanos() as u64
}

fn at(start: Instant, ns: u64) -> Instant {
    start + Duration::from_nanos(ns)
}

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
    serializer: V2DeflateSerializer,
}

impl WorkerFold {
    /// A fold for a load that started at `start`, split at the boundaries `boundaries` will be
    /// told of.
    pub fn new(start: Instant, boundaries: std::sync::Arc<phases::Boundaries>) -> Self {
        let mut stats = Stats::new();
        reset_totals(&mut stats);
        Self {
            start,
            pending: VecDeque::new(),
            stats,
            dirty_from: usize::MAX,
            phases: PhaseRecorder::new(boundaries, start),
            known_boundaries: 0,
            leases: LeaseWriter::default(),
            sold_out: BTreeSet::new(),
            ends: RecentEnds::new(),
            misfiled: 0,
            flushed_ns: 0,
            serializer: V2DeflateSerializer::new(),
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
        self.interval(now)
    }

    /// Folds every queued completion, however recent, and returns the last interval.
    pub fn finish(&mut self, now: Instant) -> Interval {
        self.fold_while(|_| true);
        self.interval(now)
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
        }
    }

    /// Everything folded since the last interval, which is left empty.
    fn interval(&mut self, now: Instant) -> Interval {
        let to_ns = ns(now, self.start).max(self.flushed_ns);
        let from = Duration::from_nanos(self.flushed_ns);
        let span = Duration::from_nanos(to_ns - self.flushed_ns);
        self.flushed_ns = to_ns;
        let mut hlog = Vec::new();
        let mut seconds = Vec::new();
        let phases = self.phases.drain();
        {
            let mut log = HlogWriter::new(&mut hlog, &mut self.serializer);
            for (i, h) in self.stats.latency.iter().enumerate() {
                log.write(
                    h,
                    from,
                    span,
                    &format!("latency.{}", Outcome::CLASS_NAMES[i]),
                );
            }
            log.write(&self.stats.service, from, span, "service");
            let dirty = self.dirty_from.min(self.stats.timeline.len());
            for (i, s) in self.stats.timeline.iter_mut().enumerate().skip(dirty) {
                if s.attempts() > 0 {
                    let second = Duration::from_secs(i as u64);
                    log.write(
                        &s.latency,
                        second,
                        Duration::from_secs(1),
                        &format!("second.{i}"),
                    );
                    seconds.push((i as u32, s.counts));
                    *s = Second::new();
                }
            }
            for (i, s) in &phases.segments {
                log.write(&s.latency, from, span, &format!("phase.{i}"));
            }
        }
        self.dirty_from = usize::MAX;
        let s = &mut self.stats;
        let interval = Interval {
            from_ns: from.as_nanos() as u64,
            to_ns,
            hlog: String::from_utf8(hlog).expect("an interval log is ASCII"),
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
}

/// Empties everything of `s` but its timeline (and `last_sale`, a maximum resent as is).
fn reset_totals(s: &mut Stats) {
    for h in &mut s.latency {
        *h = growing_hist(3);
    }
    s.service = growing_hist(3);
    s.failed = Default::default();
    s.unknown = Default::default();
    s.release_failed = 0;
    s.lease_lost = 0;
}

/// Writes tagged histograms into an interval log (empty ones are left out).
struct HlogWriter<'a> {
    log: hdrhistogram::serialization::interval_log::IntervalLogWriter<
        'a,
        'a,
        Vec<u8>,
        V2DeflateSerializer,
    >,
}

impl<'a> HlogWriter<'a> {
    fn new(out: &'a mut Vec<u8>, serializer: &'a mut V2DeflateSerializer) -> Self {
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
    /// The histograms as an HdrHistogram interval log (V2 + deflate, base64), µs values, one
    /// tagged line each, empty ones left out: `latency.<class>` (from the intended start, per
    /// outcome class), `service` (from the actual start), `second.<n>` (latency of what ended
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

impl Interval {
    /// Nothing was folded in it.
    pub fn is_empty(&self) -> bool {
        self.hlog.is_empty() && self.first_served_ns.is_empty() && self.misfiled == 0
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Leases in one interval: a table of keys and of token prefixes, then one binary row per lease
/// (base64), each field a LEB128 varint unless said otherwise:
///
/// | field | |
/// |---|---|
/// | flags | one byte: 1 lost, 2 shared, 4 sold, 8 its attempt found the SKU sold out, 16 has a fence, 32 the token ends in a number |
/// | key | index into `keys` |
/// | sku | |
/// | ended | ns since the start, zigzag delta from the previous row's |
/// | ended − released | zigzag |
/// | released − acquired | zigzag |
/// | fence | if flagged |
/// | token | index into `tokens`: the token, or what precedes its trailing digits |
/// | number, digits | if flagged: the trailing digits as a number, and their count (one byte; leading zeros) |
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WireLeases {
    /// Lock keys.
    pub keys: Vec<String>,
    /// Tokens, or their parts before trailing digits.
    pub tokens: Vec<String>,
    /// How many rows.
    pub count: u32,
    /// The rows, base64.
    pub rows: String,
}

impl WireLeases {
    fn is_empty(&self) -> bool {
        self.count == 0
    }
}

/// Not needed by the checks (the stats count `lease_lost`), kept for a complete record.
const LOST: u8 = 1;
const SHARED: u8 = 2;
const SOLD: u8 = 4;
const FOUND_SOLD_OUT: u8 = 8;
const FENCE: u8 = 16;
const NUMBERED: u8 = 32;

/// Builds a [`WireLeases`].
#[derive(Default)]
struct LeaseWriter {
    keys: Table,
    tokens: Table,
    rows: Vec<u8>,
    count: u32,
    last_end: u64,
}

/// Strings by first appearance, for indexing.
#[derive(Default)]
struct Table {
    index: HashMap<String, u32>,
    list: Vec<String>,
}

impl Table {
    fn id(&mut self, s: &str) -> u32 {
        if let Some(i) = self.index.get(s) {
            return *i;
        }
        let i = self.list.len() as u32;
        self.index.insert(s.to_string(), i);
        self.list.push(s.to_string());
        i
    }

    fn take(&mut self) -> Vec<String> {
        self.index.clear();
        std::mem::take(&mut self.list)
    }
}

/// A token split into the part before its trailing digits and those digits (at most 19, so
/// they fit a u64; their count keeps leading zeros).
fn split_token(token: &str) -> (&str, Option<(u64, u8)>) {
    let digits = token
        .bytes()
        .rev()
        .take_while(u8::is_ascii_digit)
        .count()
        .min(19);
    if digits == 0 {
        return (token, None);
    }
    let (head, tail) = token.split_at(token.len() - digits);
    (
        head,
        Some((tail.parse().expect("ASCII digits"), digits as u8)),
    )
}

impl LeaseWriter {
    fn push(&mut self, c: &Completion, l: &LeaseSpan, start: Instant) {
        let (head, number) = split_token(&l.token);
        let flags = (if l.lost { LOST } else { 0 })
            | (if l.shared { SHARED } else { 0 })
            | (if c.outcome == Outcome::Sold { SOLD } else { 0 })
            | (if c.outcome == Outcome::SoldOut {
                FOUND_SOLD_OUT
            } else {
                0
            })
            | (if l.fence.is_some() { FENCE } else { 0 })
            | (if number.is_some() { NUMBERED } else { 0 });
        let (ended, released, acquired) = (
            ns(c.ended, start),
            ns(l.released, start),
            ns(l.acquired, start),
        );
        let out = &mut self.rows;
        out.push(flags);
        let key = self.keys.id(&l.key);
        varint(out, u64::from(key));
        varint(out, u64::from(c.sku));
        varint(out, zigzag(ended.wrapping_sub(self.last_end) as i64));
        varint(out, zigzag(ended.wrapping_sub(released) as i64));
        varint(out, zigzag(released.wrapping_sub(acquired) as i64));
        if let Some(f) = l.fence {
            varint(out, f);
        }
        let head = self.tokens.id(head);
        varint(&mut self.rows, u64::from(head));
        if let Some((n, digits)) = number {
            varint(&mut self.rows, n);
            self.rows.push(digits);
        }
        self.last_end = ended;
        self.count += 1;
    }

    fn take(&mut self) -> WireLeases {
        let rows = base64::engine::general_purpose::STANDARD.encode(&self.rows);
        self.rows.clear();
        self.last_end = 0;
        WireLeases {
            keys: self.keys.take(),
            tokens: self.tokens.take(),
            count: std::mem::take(&mut self.count),
            rows,
        }
    }
}

fn varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn zigzag(n: i64) -> u64 {
    ((n << 1) ^ (n >> 63)) as u64
}

fn unzigzag(n: u64) -> i64 {
    ((n >> 1) as i64) ^ -((n & 1) as i64)
}

/// Why an interval could not be decoded (a bug or a foreign build on the other side).
#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    /// The interval log did not parse.
    #[error("interval log: {0}")]
    Log(String),
    /// A histogram did not decode.
    #[error("histogram {tag}: {detail}")]
    Histogram {
        /// Its tag.
        tag: String,
        /// What went wrong.
        detail: String,
    },
    /// A tag names nothing this build records.
    #[error("unknown histogram tag {0:?}")]
    Tag(String),
    /// Counts and histograms disagree.
    #[error("{0}")]
    Inconsistent(String),
    /// The lease rows are cut short or point outside their tables.
    #[error("lease rows: {0}")]
    Leases(String),
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
    pub(super) sold_out: Vec<u32>,
    pub(super) misfiled: u64,
}

impl Batch {
    /// Attempts it carries.
    pub fn attempts(&self) -> u64 {
        self.stats.attempts()
    }
}

/// Decoded lease rows (their fields are read as the recorder walks them).
#[derive(Debug, Clone, Default)]
pub(super) struct Leases {
    keys: Vec<String>,
    tokens: Vec<String>,
    count: u32,
    rows: Vec<u8>,
}

/// One lease of a batch, borrowed while the recorder observes it.
pub(super) struct LeaseRow<'a> {
    pub key: &'a str,
    pub token: &'a str,
    pub sku: u32,
    pub acquired: Instant,
    pub released: Instant,
    pub ended: Instant,
    pub shared: bool,
    pub sold: bool,
    pub found_sold_out: bool,
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> Result<u8, BatchError> {
        let b = *self
            .bytes
            .get(self.at)
            .ok_or_else(|| BatchError::Leases("cut short".into()))?;
        self.at += 1;
        Ok(b)
    }

    fn varint(&mut self) -> Result<u64, BatchError> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            n |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(n);
            }
        }
        Err(BatchError::Leases("varint too long".into()))
    }

    fn index<'t>(&mut self, table: &'t [String]) -> Result<&'t str, BatchError> {
        let i = self.varint()?;
        table
            .get(i as usize)
            .map(String::as_str)
            .ok_or_else(|| BatchError::Leases(format!("index {i} outside its table")))
    }
}

impl Leases {
    /// Calls `f` with each lease in order; times from `start`.
    pub(super) fn for_each(
        &self,
        start: Instant,
        mut f: impl FnMut(LeaseRow<'_>),
    ) -> Result<(), BatchError> {
        let mut r = Reader {
            bytes: &self.rows,
            at: 0,
        };
        let mut token = String::new();
        let mut last_end = 0u64;
        for _ in 0..self.count {
            let flags = r.byte()?;
            let key = r.index(&self.keys)?;
            let sku = r.varint()? as u32;
            let ended = last_end.wrapping_add(unzigzag(r.varint()?) as u64);
            let released = ended.wrapping_sub(unzigzag(r.varint()?) as u64);
            let acquired = released.wrapping_sub(unzigzag(r.varint()?) as u64);
            last_end = ended;
            if flags & FENCE != 0 {
                r.varint()?; // the fence is not needed by the checks (only history shows it)
            }
            let head = r.index(&self.tokens)?;
            token.clear();
            token.push_str(head);
            if flags & NUMBERED != 0 {
                let n = r.varint()?;
                let digits = r.byte()?;
                push_digits(&mut token, n, digits);
            }
            f(LeaseRow {
                key,
                token: &token,
                sku,
                acquired: at(start, acquired),
                released: at(start, released),
                ended: at(start, ended),
                shared: flags & SHARED != 0,
                sold: flags & SOLD != 0,
                found_sold_out: flags & FOUND_SOLD_OUT != 0,
            });
        }
        if r.at != r.bytes.len() {
            return Err(BatchError::Leases("bytes left after the last row".into()));
        }
        Ok(())
    }
}

/// Appends `n` in decimal, zero-padded to `digits`.
fn push_digits(out: &mut String, mut n: u64, digits: u8) {
    let mut buf = [b'0'; 20];
    let mut i = buf.len();
    while n > 0 {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
    }
    let from = (buf.len() - usize::from(digits).max(1)).min(i);
    out.push_str(std::str::from_utf8(&buf[from..]).expect("ASCII digits"));
}

impl Interval {
    /// Decodes the interval worker `worker` sent, its times from `start`.
    pub fn decode(&self, start: Instant, worker: usize) -> Result<Batch, BatchError> {
        let mut stats = Stats::new();
        let mut seconds: Vec<(usize, Second)> = Vec::with_capacity(self.seconds.len());
        let mut segments: Vec<(usize, Segment)> = Vec::with_capacity(self.segments.len());
        let mut de = Deserializer::new();
        for entry in IntervalLogIterator::new(self.hlog.as_bytes()) {
            let LogEntry::Interval(h) = entry.map_err(|e| BatchError::Log(format!("{e:?}")))?
            else {
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
                "second" => seconds.push((
                    n()?,
                    Second {
                        counts: [0; 8],
                        latency: hist,
                    },
                )),
                "phase" => segments.push((
                    n()?,
                    Segment {
                        counts: [0; 8],
                        latency: hist,
                    },
                )),
                _ => return Err(BatchError::Tag(tag.into())),
            }
        }
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
        stats.last_sale = self.last_sale_ns.map(Duration::from_nanos);
        let leases = &self.leases;
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
            leases: Leases {
                keys: leases.keys.clone(),
                tokens: leases.tokens.clone(),
                count: leases.count,
                rows: base64::engine::general_purpose::STANDARD
                    .decode(&leases.rows)
                    .map_err(|e| BatchError::Leases(e.to_string()))?,
            },
            sold_out: self.sold_out.clone(),
            misfiled: self.misfiled,
        })
    }
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
    fn tokens_split_and_join_back_exactly() {
        for token in [
            "b0",
            "b10",
            "0000beef-123456",
            "lock-0000000012",
            "x-00",
            "007",
            "tok",
            "",
            "12345678901234567890123",
            "a-18446744073709551615",
        ] {
            let (head, number) = split_token(token);
            let mut back = head.to_string();
            if let Some((n, digits)) = number {
                push_digits(&mut back, n, digits);
            }
            assert_eq!(back, token);
        }
        assert_eq!(split_token("b10"), ("b", Some((10, 2))));
        assert_eq!(split_token("tok"), ("tok", None));
    }

    #[test]
    fn lease_rows_read_back_as_written() {
        let start = Instant::now();
        let at = |us: u64| start + Duration::from_micros(us);
        let mut w = LeaseWriter::default();
        let mut written = Vec::new();
        for i in 0..300u64 {
            // Out of end order now and then: deltas go negative.
            let end = 1_000 + (i * 37) % 500 + i * 10;
            let outcome = [Outcome::Sold, Outcome::SoldOut, Outcome::Locked][i as usize % 3];
            let c = Completion {
                seq: i,
                client: 0,
                sku: (i % 7) as u32,
                read: false,
                outcome,
                intended: at(end - 900),
                started: at(end - 800),
                ended: at(end),
                release_failed: false,
                lease: Some(LeaseSpan {
                    key: format!("k{}", i % 5),
                    token: [format!("b{i}"), format!("n-{i:06}"), "plain".into()][i as usize % 3]
                        .clone(),
                    fence: (i % 2 == 0).then_some(i * 1_000_000_007),
                    acquired: at(end - 700 + i % 3),
                    released: at(end - 10),
                    lost: i % 11 == 0,
                    shared: i % 4 == 0,
                }),
            };
            w.push(&c, c.lease.as_ref().unwrap(), start);
            written.push(c);
        }
        let wire = w.take();
        assert_eq!((wire.keys.len(), wire.tokens.len()), (5, 3));
        let leases = Leases {
            keys: wire.keys,
            tokens: wire.tokens,
            count: wire.count,
            rows: base64::engine::general_purpose::STANDARD
                .decode(&wire.rows)
                .unwrap(),
        };
        let mut read = 0;
        leases
            .for_each(start, |l| {
                let c = &written[read];
                let lease = c.lease.as_ref().unwrap();
                assert_eq!((l.key, l.token), (lease.key.as_str(), lease.token.as_str()));
                assert_eq!(
                    (l.sku, l.acquired, l.released, l.ended),
                    (c.sku, lease.acquired, lease.released, c.ended)
                );
                assert_eq!(
                    (l.shared, l.sold, l.found_sold_out),
                    (
                        lease.shared,
                        c.outcome == Outcome::Sold,
                        c.outcome == Outcome::SoldOut
                    )
                );
                read += 1;
            })
            .unwrap();
        assert_eq!(read, 300);
        let mut cut = leases.clone();
        cut.rows.pop();
        assert!(
            cut.for_each(start, |_| {}).is_err(),
            "a cut row is an error"
        );
    }

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
