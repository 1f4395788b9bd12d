//! Double grants: two clients that each believed they held the same lock at the same moment,
//! in modes that exclude each other.
//!
//! A lease is the interval [acquire returned, release sent] on one monotonic clock, held in a
//! [`Mode`]: exclusive (a plain lock's lease, a write lease of a read–write lock) or shared (a
//! read lease of a read–write lock). Two leases of one key that overlap are a double grant
//! unless both are shared: reader–writer and writer–writer overlaps count, reader–reader
//! overlaps are what a read–write lock is for. The checker sees leases as attempts complete
//! (streaming: memory is bounded by the leases that ended within `horizon`, not by the length
//! of the run) and counts overlapping pairs per key, and *incidents*: the leases a later grant
//! of the same key overlapped. A holder paused past its lease while 80 others took the key in
//! turn is 80 pairs and one incident: one stale holder.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// How many overlapping pairs are kept as examples for the report.
const EXAMPLES: usize = 5;

/// How a lease held its key.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Alone: a plain lock's lease (whether the attempt read or bought), or a write lease.
    #[default]
    Exclusive,
    /// A read lease of a read–write lock: other shared leases may overlap it.
    Shared,
}

impl From<bool> for Mode {
    /// `shared` ([`crate::strategy::Lease::shared`]) → its mode.
    fn from(shared: bool) -> Self {
        if shared {
            Self::Shared
        } else {
            Self::Exclusive
        }
    }
}

impl Mode {
    /// `exclusive` or `shared`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Exclusive => "exclusive",
            Self::Shared => "shared",
        }
    }
}

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
    /// How `first` held the key (summaries from before read–write locks: exclusive).
    #[serde(default)]
    pub first_mode: Mode,
    /// How `second` held the key.
    #[serde(default)]
    pub second_mode: Mode,
}

/// What the checker found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DoubleGrants {
    /// Overlapping pairs of leases on the same key (not both shared).
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

/// One key's retained leases, one queue per mode, each sorted by `released`. Apart, so a
/// shared lease is compared with exclusive ones only: readers overlapping each other in the
/// thousands cost nothing.
#[derive(Default)]
struct Key {
    exclusive: VecDeque<Held>,
    shared: VecDeque<Held>,
}

impl Key {
    fn of(&mut self, mode: Mode) -> &mut VecDeque<Held> {
        match mode {
            Mode::Exclusive => &mut self.exclusive,
            Mode::Shared => &mut self.shared,
        }
    }
}

/// Streaming double-grant checker.
pub struct DoubleGrantChecker {
    /// Per key, the retained leases.
    by_key: HashMap<String, Key>,
    /// Longest possible attempt: a lease that ended more than this before another began cannot
    /// overlap anything still to come.
    horizon: Duration,
    /// Tolerance for completions arriving out of `ended` order.
    slack: Duration,
    found: DoubleGrants,
}

/// The lease being observed.
struct New<'a> {
    key: &'a str,
    token: &'a str,
    acquired: Instant,
    released: Instant,
    mode: Mode,
    overlapped: bool,
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

    /// Adds one lease of `key`, held `(acquired, released)` in `mode`; `ended` is when its
    /// attempt completed (after the release call).
    ///
    /// Cost: O(overlaps + 1) amortised. Leases are kept sorted by release time, so walking
    /// back from the latest release stops at the first lease released before this one was
    /// acquired: none before it can overlap (the few visited beyond the overlaps are leases
    /// reported out of order, within `slack`). A shared lease walks the exclusive queue only,
    /// so reader–reader overlaps, however many readers hold the key at once, are never
    /// visited: a read costs its overlaps with writers, which a working lock never has.
    pub fn observe(
        &mut self,
        key: &str,
        token: &str,
        (acquired, released): (Instant, Instant),
        mode: Mode,
        ended: Instant,
    ) {
        if !self.by_key.contains_key(key) {
            self.by_key.insert(key.to_string(), Key::default());
        }
        let held = self.by_key.get_mut(key).expect("inserted above");
        let mut new = New {
            key,
            token,
            acquired,
            released,
            mode,
            overlapped: false,
        };
        Self::compare(
            &mut self.found,
            &mut held.exclusive,
            Mode::Exclusive,
            &mut new,
        );
        if mode == Mode::Exclusive {
            Self::compare(&mut self.found, &mut held.shared, Mode::Shared, &mut new);
        }
        let queue = held.of(mode);
        // Completions arrive in nearly release order: the slot is at or near the end.
        let at = queue
            .iter()
            .rposition(|h| h.released <= released)
            .map_or(0, |i| i + 1);
        queue.insert(
            at,
            Held {
                token: token.to_string(),
                acquired,
                released,
                overlapped: new.overlapped,
            },
        );
        // A lease released more than horizon + slack before this attempt ended cannot overlap
        // any attempt still to complete (each lasts at most `horizon`).
        let horizon = self.horizon + self.slack;
        for queue in [&mut held.exclusive, &mut held.shared] {
            while queue.front().is_some_and(|h| h.released + horizon < ended) {
                queue.pop_front();
            }
        }
    }

    /// Counts the overlaps of `new` with the leases of `queue` (held in `mode`).
    fn compare(found: &mut DoubleGrants, queue: &mut VecDeque<Held>, mode: Mode, new: &mut New) {
        for other in queue.iter_mut().rev() {
            if other.released <= new.acquired {
                break;
            }
            let start = new.acquired.max(other.acquired);
            let end = new.released.min(other.released);
            if start >= end {
                continue;
            }
            found.count += 1;
            // The one granted first is the stale holder (ties: the one seen first).
            let stale = if other.acquired <= new.acquired {
                &mut other.overlapped
            } else {
                &mut new.overlapped
            };
            if !*stale {
                *stale = true;
                found.incidents += 1;
            }
            if found.examples.len() < EXAMPLES {
                found.examples.push(Overlap {
                    key: new.key.to_string(),
                    first: other.token.clone(),
                    second: new.token.to_string(),
                    overlap_us: (end - start).as_micros() as u64,
                    first_mode: mode,
                    second_mode: new.mode,
                });
            }
        }
    }

    /// The verdict so far.
    pub fn finish(self) -> DoubleGrants {
        self.found
    }

    /// Leases currently retained (for the memory bound test).
    pub fn retained(&self) -> usize {
        self.by_key
            .values()
            .map(|k| k.exclusive.len() + k.shared.len())
            .sum()
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
                (ms(t0, 10 * i), ms(t0, 10 * i + 10)),
                Mode::Exclusive,
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
        c.observe(
            "k",
            "B",
            (ms(t0, 60), ms(t0, 90)),
            Mode::Exclusive,
            ms(t0, 91),
        );
        c.observe(
            "k",
            "A",
            (ms(t0, 0), ms(t0, 100)),
            Mode::Exclusive,
            ms(t0, 101),
        );
        c.observe(
            "k",
            "C",
            (ms(t0, 100), ms(t0, 150)),
            Mode::Exclusive,
            ms(t0, 151),
        );
        // Same times on another key: no overlap across keys.
        c.observe(
            "other",
            "D",
            (ms(t0, 10), ms(t0, 20)),
            Mode::Exclusive,
            ms(t0, 21),
        );
        let found = c.finish();
        assert_eq!((found.count, found.incidents), (1, 1));
        assert_eq!(
            found.examples[0],
            Overlap {
                key: "k".into(),
                first: "B".into(),
                second: "A".into(),
                overlap_us: 30_000,
                first_mode: Mode::Exclusive,
                second_mode: Mode::Exclusive,
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
                (ms(t0, i as u64), ms(t0, 100 + i as u64)),
                Mode::Exclusive,
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
                (ms(t0, 10 + 10 * i), ms(t0, 15 + 10 * i)),
                Mode::Exclusive,
                ms(t0, 16 + 10 * i),
            );
        }
        c.observe(
            "k",
            "paused",
            (ms(t0, 0), ms(t0, 900)),
            Mode::Exclusive,
            ms(t0, 901),
        );
        let found = c.finish();
        assert_eq!((found.count, found.incidents), (80, 1));
    }

    /// Leases of `(token, from_ms, to_ms, mode)` on key `k`, reported in release order.
    fn observe_all(c: &mut DoubleGrantChecker, t0: Instant, leases: &[(&str, u64, u64, Mode)]) {
        let mut leases = leases.to_vec();
        leases.sort_by_key(|l| l.2);
        for (t, a, r, m) in leases {
            c.observe("k", t, (ms(t0, a), ms(t0, r)), m, ms(t0, r + 1));
        }
    }

    #[test]
    fn readers_may_overlap_each_other_but_not_a_writer() {
        use Mode::{Exclusive as W, Shared as R};
        let t0 = Instant::now();
        // Three readers together, then a writer alone, then two readers: a working rwlock.
        let mut c = checker();
        observe_all(
            &mut c,
            t0,
            &[
                ("r1", 0, 50, R),
                ("r2", 10, 60, R),
                ("r3", 20, 70, R),
                ("w1", 70, 90, W),
                ("r4", 90, 120, R),
                ("r5", 95, 130, R),
            ],
        );
        assert_eq!(c.finish(), DoubleGrants::default());
        // A writer inside two readers' leases: two reader–writer pairs; a second writer
        // overlapping the first: one writer–writer pair.
        let mut c = checker();
        observe_all(
            &mut c,
            t0,
            &[
                ("r1", 0, 50, R),
                ("r2", 10, 60, R),
                ("w1", 20, 40, W),
                ("w2", 30, 80, W),
            ],
        );
        let found = c.finish();
        // r1–w1, r2–w1, r1–w2, r2–w2, w1–w2; never r1–r2.
        assert_eq!(found.count, 5, "{found:?}");
        let modes: Vec<(&str, &str, Mode, Mode)> = found
            .examples
            .iter()
            .map(|o| {
                (
                    o.first.as_str(),
                    o.second.as_str(),
                    o.first_mode,
                    o.second_mode,
                )
            })
            .collect();
        assert!(modes.contains(&("w1", "r1", W, R)), "{modes:?}");
        assert!(modes.contains(&("w1", "w2", W, W)), "{modes:?}");
        assert!(
            modes.iter().all(|(_, _, a, b)| (*a, *b) != (R, R)),
            "reader–reader pairs are never counted: {modes:?}"
        );
    }

    #[test]
    fn reader_writer_overlaps_count_in_either_order_of_arrival() {
        use Mode::{Exclusive as W, Shared as R};
        let t0 = Instant::now();
        for (first, second) in [(("r", R), ("w", W)), (("w", W), ("r", R))] {
            let mut c = checker();
            c.observe("k", first.0, (ms(t0, 0), ms(t0, 30)), first.1, ms(t0, 31));
            c.observe(
                "k",
                second.0,
                (ms(t0, 20), ms(t0, 40)),
                second.1,
                ms(t0, 41),
            );
            let found = c.finish();
            assert_eq!(
                (found.count, found.incidents),
                (1, 1),
                "{first:?} {second:?}"
            );
            assert_eq!(found.examples[0].overlap_us, 10_000);
        }
    }

    #[test]
    fn many_overlapping_readers_are_not_compared_with_each_other() {
        let t0 = Instant::now();
        let mut c = checker();
        // 20,000 readers each holding the key 500 ms, 1,000 of them at any moment: all
        // pairwise overlaps allowed. Bounded memory, nothing counted.
        for i in 0..20_000u64 {
            if i == 17_002 {
                // One writer, reported in completion order, while 1,000 readers hold the key.
                let w = (ms(t0, 9_000), ms(t0, 9_001));
                c.observe("k", "w", w, Mode::Exclusive, ms(t0, 9_001));
            }
            c.observe(
                "k",
                "r",
                (ms(t0, i / 2), ms(t0, i / 2 + 500)),
                Mode::Shared,
                ms(t0, i / 2 + 500),
            );
        }
        // Two leases per ms, horizon + slack = 1.05 s.
        assert!(c.retained() <= 2_200, "{}", c.retained());
        let found = c.finish();
        assert_eq!(
            found.count, 1_000,
            "the writer, with each reader holding the key"
        );
        // 998 readers granted before the writer were overlapped by it; the two granted with it
        // (a tie) make the writer the stale holder, once.
        assert_eq!(found.incidents, 999);
    }

    #[test]
    fn memory_is_bounded_by_the_horizon_not_the_run() {
        let t0 = Instant::now();
        let mut c = checker();
        for i in 0..100_000u64 {
            c.observe(
                "k",
                "t",
                (ms(t0, i), ms(t0, i + 1)),
                Mode::Exclusive,
                ms(t0, i + 1),
            );
        }
        // One lease per ms, horizon + slack = 1.05 s.
        assert!(c.retained() <= 1_100, "{}", c.retained());
        assert_eq!(c.finish().count, 0);
    }
}
