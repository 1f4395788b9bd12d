//! Double grants: two clients that each believed they held the same lock at the same moment.
//!
//! A lease is the interval [acquire returned, release sent] on one monotonic clock. The checker
//! sees leases as attempts complete (streaming: memory is bounded by the leases that ended
//! within `horizon`, not by the length of the run) and counts overlapping pairs per key, and
//! *incidents*: the leases a later grant of the same key overlapped. A holder paused past its
//! lease while 80 others took the key in turn is 80 pairs and one incident: one stale holder.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// How many overlapping pairs are kept as examples for the report.
const EXAMPLES: usize = 5;

/// One overlapping pair, for the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Overlap {
    /// The lock key both held.
    pub key: String,
    /// Token of the lease that ended first.
    pub first: String,
    /// Token of the other lease.
    pub second: String,
    /// How long both held it, µs.
    pub overlap_us: u64,
}

/// What the checker found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DoubleGrants {
    /// Overlapping pairs of leases on the same key.
    pub count: u64,
    /// Leases overlapped by a lease of the same key acquired after them (the stale holders);
    /// every overlapping pair has one, so this is > 0 exactly when `count` is.
    #[serde(default)]
    pub incidents: u64,
    /// The first few pairs.
    pub examples: Vec<Overlap>,
}

struct Held {
    token: String,
    acquired: Instant,
    released: Instant,
    /// Already counted as an incident (a later grant overlapped it).
    overlapped: bool,
}

/// Streaming double-grant checker.
pub struct DoubleGrantChecker {
    /// Per key, the retained leases sorted by `released`.
    by_key: HashMap<String, VecDeque<Held>>,
    /// Longest possible attempt: a lease that ended more than this before another began cannot
    /// overlap anything still to come.
    horizon: Duration,
    /// Tolerance for completions arriving out of `ended` order.
    slack: Duration,
    found: DoubleGrants,
}

impl DoubleGrantChecker {
    /// `horizon` bounds one attempt (acquire + critical section + release); `slack` bounds how
    /// far out of order completions may arrive.
    pub fn new(horizon: Duration, slack: Duration) -> Self {
        Self {
            by_key: HashMap::new(),
            horizon,
            slack,
            found: DoubleGrants::default(),
        }
    }

    /// Adds one lease; `ended` is when its attempt completed (after the release call).
    ///
    /// Cost: O(overlaps + 1) amortised. Leases are kept sorted by release time, so walking
    /// back from the latest release stops at the first lease released before this one was
    /// acquired: none before it can overlap.
    pub fn observe(
        &mut self,
        key: &str,
        token: &str,
        acquired: Instant,
        released: Instant,
        ended: Instant,
    ) {
        if !self.by_key.contains_key(key) {
            self.by_key.insert(key.to_string(), VecDeque::new());
        }
        let held = self.by_key.get_mut(key).expect("inserted above");
        let mut overlapped = false;
        for other in held.iter_mut().rev() {
            if other.released <= acquired {
                break;
            }
            let (start, end) = (acquired.max(other.acquired), released.min(other.released));
            if start < end {
                self.found.count += 1;
                // The one granted first is the stale holder (ties: the one seen first).
                let stale = if other.acquired <= acquired {
                    &mut other.overlapped
                } else {
                    &mut overlapped
                };
                if !*stale {
                    *stale = true;
                    self.found.incidents += 1;
                }
                if self.found.examples.len() < EXAMPLES {
                    self.found.examples.push(Overlap {
                        key: key.to_string(),
                        first: other.token.clone(),
                        second: token.to_string(),
                        overlap_us: (end - start).as_micros() as u64,
                    });
                }
            }
        }
        // Completions arrive in nearly release order: the slot is at or near the end.
        let at = held
            .iter()
            .rposition(|h| h.released <= released)
            .map_or(0, |i| i + 1);
        held.insert(
            at,
            Held {
                token: token.to_string(),
                acquired,
                released,
                overlapped,
            },
        );
        // A lease released more than horizon + slack before this attempt ended cannot overlap
        // any attempt still to complete (each lasts at most `horizon`).
        let horizon = self.horizon + self.slack;
        while held.front().is_some_and(|h| h.released + horizon < ended) {
            held.pop_front();
        }
    }

    /// The verdict so far.
    pub fn finish(self) -> DoubleGrants {
        self.found
    }

    /// Leases currently retained (for the memory bound test).
    pub fn retained(&self) -> usize {
        self.by_key.values().map(VecDeque::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(t0: Instant, m: u64) -> Instant {
        t0 + Duration::from_millis(m)
    }

    fn checker() -> DoubleGrantChecker {
        DoubleGrantChecker::new(Duration::from_secs(1), Duration::from_millis(50))
    }

    #[test]
    fn back_to_back_leases_are_not_double_grants() {
        let t0 = Instant::now();
        let mut c = checker();
        for i in 0..100 {
            // [10i, 10i+10): touching ends do not overlap.
            c.observe(
                "k",
                &format!("t{i}"),
                ms(t0, 10 * i),
                ms(t0, 10 * i + 10),
                ms(t0, 10 * i + 11),
            );
        }
        assert_eq!(c.finish().count, 0);
    }

    #[test]
    fn overlapping_leases_on_one_key_are_counted_with_examples() {
        let t0 = Instant::now();
        let mut c = checker();
        // A holds 0..100 (its lease expired at 50 and B took over at 60); C holds 100..150.
        c.observe("k", "B", ms(t0, 60), ms(t0, 90), ms(t0, 91));
        c.observe("k", "A", ms(t0, 0), ms(t0, 100), ms(t0, 101));
        c.observe("k", "C", ms(t0, 100), ms(t0, 150), ms(t0, 151));
        // Same times on another key: no overlap across keys.
        c.observe("other", "D", ms(t0, 10), ms(t0, 20), ms(t0, 21));
        let found = c.finish();
        assert_eq!((found.count, found.incidents), (1, 1));
        assert_eq!(
            found.examples[0],
            Overlap {
                key: "k".into(),
                first: "B".into(),
                second: "A".into(),
                overlap_us: 30_000
            }
        );
    }

    #[test]
    fn three_way_overlap_counts_every_pair() {
        let t0 = Instant::now();
        let mut c = checker();
        for (i, t) in ["a", "b", "c"].iter().enumerate() {
            c.observe(
                "k",
                t,
                ms(t0, i as u64),
                ms(t0, 100 + i as u64),
                ms(t0, 101 + i as u64),
            );
        }
        let found = c.finish();
        assert_eq!(
            (found.count, found.incidents),
            (3, 2),
            "a and b were overlapped later"
        );
    }

    #[test]
    fn one_paused_holder_overlapped_by_many_is_one_incident() {
        let t0 = Instant::now();
        let mut c = checker();
        // The paused holder's lease is reported last (its attempt ends last).
        for i in 0..80u64 {
            c.observe(
                "k",
                &format!("b{i}"),
                ms(t0, 10 + 10 * i),
                ms(t0, 15 + 10 * i),
                ms(t0, 16 + 10 * i),
            );
        }
        c.observe("k", "paused", ms(t0, 0), ms(t0, 900), ms(t0, 901));
        let found = c.finish();
        assert_eq!((found.count, found.incidents), (80, 1));
    }

    #[test]
    fn memory_is_bounded_by_the_horizon_not_the_run() {
        let t0 = Instant::now();
        let mut c = checker();
        for i in 0..100_000u64 {
            c.observe("k", "t", ms(t0, i), ms(t0, i + 1), ms(t0, i + 1));
        }
        // One lease per ms, horizon + slack = 1.05 s.
        assert!(c.retained() <= 1_100, "{}", c.retained());
        assert_eq!(c.finish().count, 0);
    }
}
