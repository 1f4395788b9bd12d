//! Contention: how a lock shares its keys among the buyers waiting for them.
//!
//! From every exclusive attempt on a lock (a grant with its wait, or a give-up at
//! `lock.acquire_timeout`), per SKU (one lock key per SKU):
//! - **acquire wait**: from asking for the lock to holding it, apart from the critical section;
//! - **fairness**: Jain's index over the buyers that competed for a key of each buyer's share of
//!   its own attempts that won the key. Grants per attempt, not grants: an open loop hands
//!   arrivals to whichever buyer is free, so raw grant counts differ by chance; a starved buyer
//!   shows as a low share. A fair lock still reads below 1 by binomial noise: `jain_if_fair` is
//!   what equal odds would read over the same attempts;
//! - **barging**: a releasing holder took the key again although another buyer had been
//!   waiting since before the release;
//! - **missed wake-ups**: a give-up during whose wait no lease covered the key for at least
//!   [`MISSED_WAKEUP_GRACE`]: the lock was free and the waiter neither took it nor was woken.
//!   The lease is the client's view (from acquire's answer to release's request), narrower
//!   than the server's by about a round trip on each side; the grace absorbs that.
//!
//! Streaming like the utilization: attempts arrive in end order up to `slack`, and one lasts at
//! most `horizon`, so what began `slack + 2 × horizon` before the latest end is final and
//! dropped once counted: memory follows the run's rate times that window, not its length.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::stats::{LatencySummary, hist};
use super::utilization::union;

/// How long a key must lie free during a wait that ends in a give-up to count as a missed
/// wake-up: well above a loopback round trip and the scheduling delays of a busy 2-core
/// machine (notify locks showed free stretches of 13 ms beside compiles), below any poll
/// interval a library ships (100 ms and up).
pub const MISSED_WAKEUP_GRACE: Duration = Duration::from_millis(25);

/// Pending attempts per key before the first compaction.
const COMPACT_AT: usize = 512;

/// An exclusive grant: who, when it asked, when it held, when it let go.
#[derive(Debug, Clone, Copy)]
struct Grant {
    client: u32,
    started: Instant,
    acquired: Instant,
    released: Instant,
}

/// A wait: who, from when to when (a grant's wait ends when it holds).
#[derive(Debug, Clone, Copy)]
struct Wait {
    client: u32,
    started: Instant,
    ended: Instant,
}

#[derive(Default)]
struct Key {
    grants: Vec<Grant>,
    give_ups: Vec<Wait>,
    /// Every lease of the key, shared ones too: they keep writers out as well.
    covers: Vec<(Instant, Instant)>,
    /// The latest grant already paired with its predecessor.
    prev: Option<Grant>,
    /// Per buyer: (attempts, grants).
    buyers: HashMap<u32, (u64, u64)>,
    compact_at: usize,
}

/// Counts over every key.
#[derive(Default)]
struct Counts {
    give_ups: u64,
    longest_give_up: Duration,
    handoffs_with_waiter: u64,
    barges: u64,
    missed_wakeups: u64,
    longest_free: Duration,
}

/// Streams a run's lock attempts into [`Contention`].
pub struct ContentionTracker {
    keys: BTreeMap<u32, Key>,
    acquire: Histogram<u64>,
    counts: Counts,
    window: Duration,
    latest_end: Option<Instant>,
}

impl ContentionTracker {
    /// `horizon` bounds one attempt, `slack` how far out of end order attempts arrive.
    pub fn new(horizon: Duration, slack: Duration) -> Self {
        Self {
            keys: BTreeMap::new(),
            acquire: hist(3),
            counts: Counts::default(),
            window: slack + horizon * 2,
            latest_end: None,
        }
    }

    /// A lease of `sku` held over `held` by `client`, which asked at `started`; its attempt
    /// ended at `ended`. A shared (read) lease only covers the key.
    pub fn grant(
        &mut self,
        sku: u32,
        client: u32,
        started: Instant,
        held: (Instant, Instant),
        ended: Instant,
        shared: bool,
    ) {
        let k = self.key(sku, ended);
        k.covers.push((held.0, held.1.max(held.0)));
        if !shared {
            k.grants.push(Grant {
                client,
                started,
                acquired: held.0,
                released: held.1,
            });
            let b = k.buyers.entry(client).or_default();
            b.0 += 1;
            b.1 += 1;
            let waited = held.0.saturating_duration_since(started);
            self.acquire.saturating_record(waited.as_micros() as u64);
        }
        self.maybe_compact(sku);
    }

    /// `client` asked for `sku`'s lock at `started` and gave up waiting at `ended`.
    pub fn give_up(&mut self, sku: u32, client: u32, started: Instant, ended: Instant) {
        let k = self.key(sku, ended);
        k.give_ups.push(Wait {
            client,
            started,
            ended,
        });
        k.buyers.entry(client).or_default().0 += 1;
        self.counts.give_ups += 1;
        let waited = ended.saturating_duration_since(started);
        self.counts.longest_give_up = self.counts.longest_give_up.max(waited);
        self.maybe_compact(sku);
    }

    fn key(&mut self, sku: u32, ended: Instant) -> &mut Key {
        self.latest_end = self.latest_end.max(Some(ended));
        self.keys.entry(sku).or_default()
    }

    fn maybe_compact(&mut self, sku: u32) {
        let k = self.keys.get_mut(&sku).expect("just inserted");
        let pending = k.grants.len() + k.give_ups.len();
        if pending < k.compact_at.max(COMPACT_AT) {
            return;
        }
        let cutoff = self.latest_end.and_then(|e| e.checked_sub(self.window));
        if let Some(cutoff) = cutoff {
            k.settle(Some(cutoff), self.window, &mut self.counts);
        }
        k.compact_at = (k.grants.len() + k.give_ups.len()) * 2;
    }

    /// Every attempt counted.
    pub fn finish(mut self) -> Option<Contention> {
        for k in self.keys.values_mut() {
            k.settle(None, self.window, &mut self.counts);
        }
        if self.acquire.is_empty() && self.counts.give_ups == 0 {
            return None;
        }
        let c = &self.counts;
        Some(Contention {
            acquire: LatencySummary::of(&self.acquire),
            give_ups: c.give_ups,
            longest_give_up_us: c.longest_give_up.as_micros() as u64,
            fairness: Fairness::of(self.keys.values().map(|k| &k.buyers)),
            handoffs_with_waiter: c.handoffs_with_waiter,
            barges: c.barges,
            missed_wakeups: c.missed_wakeups,
            missed_wakeup_grace_us: MISSED_WAKEUP_GRACE.as_micros() as u64,
            longest_free_while_waiting_us: c.longest_free.as_micros() as u64,
        })
    }
}

impl Key {
    /// Counts the attempts final before `cutoff` (every one with `None`) and drops what no
    /// later attempt can need.
    fn settle(&mut self, cutoff: Option<Instant>, window: Duration, c: &mut Counts) {
        let before = |t: Instant| cutoff.is_none_or(|x| t < x);
        self.covers.sort_unstable_by_key(|i| i.0);
        let held = union(&self.covers);
        self.give_ups.sort_unstable_by_key(|w| w.ended);
        let done = self.give_ups.partition_point(|w| before(w.ended));
        for w in &self.give_ups[..done] {
            let gap = longest_gap(&held, w.started, w.ended);
            c.longest_free = c.longest_free.max(gap);
            c.missed_wakeups += u64::from(gap >= MISSED_WAKEUP_GRACE);
        }
        self.grants.sort_unstable_by_key(|g| g.acquired);
        let paired = self.grants.partition_point(|g| before(g.acquired));
        self.pair(paired, c);
        self.give_ups.drain(..done);
        self.grants.drain(..paired);
        if let Some(x) = cutoff.and_then(|x| x.checked_sub(window)) {
            self.covers.retain(|i| i.1 >= x);
        } else if cutoff.is_none() {
            self.covers.clear();
        }
    }

    /// Pairs each of the first `n` grants (by acquire) with the grant before it: a handoff.
    fn pair(&mut self, n: usize, c: &mut Counts) {
        let waits = Waiting::new(
            self.grants
                .iter()
                .map(|g| Wait {
                    client: g.client,
                    started: g.started,
                    ended: g.acquired,
                })
                .chain(self.give_ups.iter().copied()),
        );
        for g in &self.grants[..n] {
            if let Some(p) = self.prev
                && waits.other_waiting(p.client, p.released, g.acquired)
            {
                c.handoffs_with_waiter += 1;
                c.barges += u64::from(g.client == p.client);
            }
            self.prev = Some(*g);
        }
    }
}

/// Waits sorted by start, with the two latest ends of distinct buyers among each prefix.
struct Waiting {
    starts: Vec<Instant>,
    /// (end, buyer) best and second best with another buyer, over waits `..=i`.
    best: Vec<[(Instant, u32); 2]>,
}

impl Waiting {
    fn new(waits: impl Iterator<Item = Wait>) -> Self {
        let mut w: Vec<Wait> = waits.collect();
        w.sort_unstable_by_key(|w| w.started);
        let mut best = Vec::with_capacity(w.len());
        let mut top: Option<[(Instant, u32); 2]> = None;
        for x in &w {
            let e = (x.ended, x.client);
            top = Some(match top {
                None => [e, e],
                Some([a, b]) if e.0 > a.0 => [e, if a.1 == e.1 { b } else { a }],
                Some([a, b]) if e.1 != a.1 && (b.1 == a.1 || e.0 > b.0) => [a, e],
                Some(t) => t,
            });
            best.push(top.expect("just set"));
        }
        Self {
            starts: w.iter().map(|w| w.started).collect(),
            best,
        }
    }

    /// Whether a buyer other than `holder` started waiting before `released` and was still
    /// waiting when `next` was granted (the grantee itself, if it is another buyer).
    fn other_waiting(&self, holder: u32, released: Instant, next: Instant) -> bool {
        let n = self.starts.partition_point(|s| *s < released);
        let Some(top) = n.checked_sub(1).map(|i| self.best[i]) else {
            return false;
        };
        top.iter().any(|(end, who)| *who != holder && *end >= next)
    }
}

/// The longest stretch of `[from, to]` that no interval of `covered` (a union) covers.
fn longest_gap(covered: &[(Instant, Instant)], from: Instant, to: Instant) -> Duration {
    let mut at = from;
    let mut gap = Duration::ZERO;
    let first = covered.partition_point(|i| i.1 <= from);
    for &(a, b) in covered[first..].iter().take_while(|i| i.0 < to) {
        gap = gap.max(a.saturating_duration_since(at));
        at = at.max(b);
    }
    gap.max(to.saturating_duration_since(at))
}

/// How a run's locks shared their keys, in summary.json (`null` for a run without a lock).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Contention {
    /// Acquire wait of every exclusive grant, µs: from asking for the lock to holding it (the
    /// critical section apart). Its `max` is the longest wait that ended in a grant.
    pub acquire: LatencySummary,
    /// Waits that ended in a give-up (`lock.acquire_timeout`).
    pub give_ups: u64,
    /// The longest of those, µs.
    pub longest_give_up_us: u64,
    /// Each buyer's share of its attempts that won a key, and how even those shares were.
    pub fairness: Option<Fairness>,
    /// Handoffs (one grant of a key after another) while another buyer had been waiting since
    /// before the release.
    pub handoffs_with_waiter: u64,
    /// Of those, how many went back to the buyer that had just released.
    pub barges: u64,
    /// Give-ups during whose wait the key lay free for at least the grace.
    pub missed_wakeups: u64,
    /// That grace, µs.
    pub missed_wakeup_grace_us: u64,
    /// The longest free stretch during any wait that ended in a give-up, µs.
    pub longest_free_while_waiting_us: u64,
}

/// Jain's index of the buyers' grant shares, over the keys that several buyers competed for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fairness {
    /// Averaged over those keys, weighted by their attempts: 1 = every buyer won the same
    /// share of its attempts; 1/n = one buyer of n won everything.
    pub jain: f64,
    /// What equal odds would read over the same attempts (binomial noise alone).
    pub jain_if_fair: f64,
    /// Keys counted.
    pub keys: u32,
    /// Buyers that competed, summed over those keys.
    pub buyers: u32,
    /// The lowest share of any buyer with at least 5 attempts on a key.
    pub lowest_share: Option<f64>,
}

impl Fairness {
    /// Over each key's (attempts, grants) per buyer.
    fn of<'a>(keys: impl Iterator<Item = &'a HashMap<u32, (u64, u64)>>) -> Option<Self> {
        let (mut jain, mut fair, mut weight) = (0.0, 0.0, 0.0);
        let (mut n_keys, mut n_buyers) = (0u32, 0u32);
        let mut lowest: Option<f64> = None;
        for buyers in keys {
            let Some((j, f, attempts)) = jain_of(buyers) else {
                continue;
            };
            jain += j * attempts;
            fair += f * attempts;
            weight += attempts;
            n_keys += 1;
            n_buyers += buyers.len() as u32;
            for &(a, g) in buyers.values().filter(|b| b.0 >= 5) {
                let s = g as f64 / a as f64;
                lowest = Some(lowest.map_or(s, |l: f64| l.min(s)));
            }
        }
        (weight > 0.0).then(|| Self {
            jain: round3(jain / weight),
            jain_if_fair: round3(fair / weight),
            keys: n_keys,
            buyers: n_buyers,
            lowest_share: lowest.map(round3),
        })
    }
}

/// One key's index, the index equal odds would give, and its attempts; `None` with fewer than
/// two buyers or no grant.
fn jain_of(buyers: &HashMap<u32, (u64, u64)>) -> Option<(f64, f64, f64)> {
    let n = buyers.len() as f64;
    let (attempts, grants) = buyers
        .values()
        .fold((0u64, 0u64), |(a, g), b| (a + b.0, g + b.1));
    if buyers.len() < 2 || grants == 0 {
        return None;
    }
    let shares = buyers.values().map(|&(a, g)| g as f64 / a as f64);
    let (sum, sq) = shares.fold((0.0, 0.0), |(s, q), x| (s + x, q + x * x));
    let p = grants as f64 / attempts as f64;
    // E[x²] of a share of a attempts at odds p: p² + p(1 − p)/a.
    let expected_sq: f64 = buyers
        .values()
        .map(|&(a, _)| p * p + p * (1.0 - p) / a as f64)
        .sum();
    Some((
        sum * sum / (n * sq),
        n * p * p / expected_sq,
        attempts as f64,
    ))
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
#[path = "contention_tests.rs"]
mod tests;
