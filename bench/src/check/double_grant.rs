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
//!
//! Leases come from clock domains ([`super::clock`]): the coordinator's host (domain 0, exact)
//! and each remote worker, whose times were mapped onto the coordinator's clock with an offset
//! known only within an uncertainty. Two leases of one domain compare exactly, as above. Two
//! leases of different domains `a`, `b` are a double grant only when they overlap on every
//! mapping the clocks allow: one would have to slide by more than `u_a + u_b` (read from the
//! [`ClockTable`] when the pair is seen) against the other for them to stop overlapping. For two
//! leases that overlap at one end that slide is the overlap itself; for a short lease inside a
//! long one (a paused holder's) it is the distance to the nearer end of the long one. A pair
//! that a smaller slide would separate may be clock error: it is not dropped but counted apart
//! ([`DoubleGrants::within_clock_uncertainty`], with the largest), and a cross-domain double
//! grant carries the bound it beat and its margin.
//! The bound read is the one the pings had established by then: it covers a lease when a
//! ping round after the lease's end was folded in before the lease is observed (beyond the
//! last ping, only the few ppm of drift since are outside it).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::clock::{COORDINATOR, ClockTable};

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
    /// For leases timed on different clocks: the sum of the two clocks' uncertainties, µs
    /// (rounded down like `overlap_us`): a double grant beat it, an overlap within clock
    /// uncertainty did not. Absent for leases of one clock (exact).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_uncertainty_us: Option<u64>,
    /// For leases timed on different clocks: how far one would have to slide against the
    /// other for them to stop overlapping, µs (the overlap, or more when one lies inside the
    /// other); a double grant's beat `clock_uncertainty_us`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_margin_us: Option<u64>,
}

/// What the checker found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DoubleGrants {
    /// Overlapping pairs of leases on the same key (not both shared); for leases timed on
    /// different clocks, overlapping whatever error within the clocks' uncertainty.
    pub count: u64,
    /// Leases overlapped by a lease of the same key acquired after them (the stale holders);
    /// every overlapping pair has one, so this is > 0 exactly when `count` is.
    #[serde(default)]
    pub incidents: u64,
    /// The first few pairs.
    pub examples: Vec<Overlap>,
    /// Pairs (counted in `count`) of leases timed on different clocks that overlapped whatever
    /// error within the two clocks' uncertainty.
    #[serde(default)]
    pub cross_host: u64,
    /// Pairs of leases timed on different clocks (not both shared) that an error within the
    /// two clocks' uncertainty could separate: perhaps a double grant, perhaps clock error. Not
    /// in `count`.
    #[serde(default)]
    pub within_clock_uncertainty: u64,
    /// The longest of those overlaps, with the uncertainty it fell within.
    #[serde(default)]
    pub within_clock_uncertainty_largest: Option<Overlap>,
    /// Of `incidents`, the stale holders that never learned their lease was lost (it was not
    /// `lost`): the danger window of a holder never told.
    #[serde(default)]
    pub unnoticed: u64,
    /// The longest such a holder went on after the later grant (which bounds its loss from
    /// above), µs.
    #[serde(default)]
    pub unnoticed_went_on_us: u64,
}

struct Held {
    token: String,
    /// The clock domain the lease was timed on.
    domain: u32,
    acquired: Instant,
    released: Instant,
    /// Already counted as an incident (a later grant overlapped it).
    overlapped: bool,
    /// Its holder never learned the lease was lost.
    unnoticed: bool,
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
    /// Uncertainty of each clock domain; `None`: every domain exact.
    clocks: Option<Arc<ClockTable>>,
    found: DoubleGrants,
}

/// The lease being observed.
struct New<'a> {
    key: &'a str,
    token: &'a str,
    domain: u32,
    acquired: Instant,
    released: Instant,
    mode: Mode,
    overlapped: bool,
    unnoticed: bool,
}

/// A lease as [`DoubleGrantChecker::observe_lease`] takes it.
pub struct SeenLease<'a> {
    /// Lock key.
    pub key: &'a str,
    /// Owner token.
    pub token: &'a str,
    /// When acquire returned and release was sent.
    pub held: (Instant, Instant),
    /// How it held the key.
    pub mode: Mode,
    /// Its holder learned it was lost (a renewal, a session's end, its release said so).
    pub lost: bool,
}

impl DoubleGrantChecker {
    /// `horizon` bounds one attempt (acquire + critical section + release); `slack` bounds how
    /// far out of order completions may arrive.
    pub fn new(horizon: Duration, slack: Duration) -> Self {
        Self {
            by_key: HashMap::new(),
            horizon,
            slack,
            clocks: None,
            found: DoubleGrants::default(),
        }
    }

    /// Reads the uncertainty of each clock domain from `clocks` (kept up to date by the pings
    /// while the run goes) when it compares leases of different domains.
    pub fn with_clocks(mut self, clocks: Arc<ClockTable>) -> Self {
        self.clocks = Some(clocks);
        self
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
        span: (Instant, Instant),
        mode: Mode,
        ended: Instant,
    ) {
        self.observe_in(COORDINATOR, key, token, span, mode, ended);
    }

    /// [`Self::observe`] for a lease timed on clock `domain` (0: the coordinator's host) and
    /// mapped onto the coordinator's clock. Against a lease of another domain, an overlap
    /// counts only beyond the two domains' uncertainty (two atomic loads per overlapping
    /// pair; same-domain pairs read nothing).
    pub fn observe_in(
        &mut self,
        domain: u32,
        key: &str,
        token: &str,
        held: (Instant, Instant),
        mode: Mode,
        ended: Instant,
    ) {
        let lease = SeenLease {
            key,
            token,
            held,
            mode,
            lost: true,
        };
        self.observe_lease(domain, lease, ended);
    }

    /// [`Self::observe_in`], knowing whether the holder learned its lease was lost: a stale
    /// holder that did not counts in [`DoubleGrants::unnoticed`].
    pub fn observe_lease(&mut self, domain: u32, lease: SeenLease<'_>, ended: Instant) {
        let SeenLease {
            key,
            token,
            held: (acquired, released),
            mode,
            lost,
        } = lease;
        if !self.by_key.contains_key(key) {
            self.by_key.insert(key.to_string(), Key::default());
        }
        let held = self.by_key.get_mut(key).expect("inserted above");
        let mut new = New {
            key,
            token,
            domain,
            acquired,
            released,
            mode,
            overlapped: false,
            unnoticed: !lost,
        };
        let clocks = self.clocks.as_deref();
        Self::compare(
            &mut self.found,
            clocks,
            &mut held.exclusive,
            Mode::Exclusive,
            &mut new,
        );
        if mode == Mode::Exclusive {
            Self::compare(
                &mut self.found,
                clocks,
                &mut held.shared,
                Mode::Shared,
                &mut new,
            );
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
                domain,
                acquired,
                released,
                overlapped: new.overlapped,
                unnoticed: new.unnoticed,
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
    fn compare(
        found: &mut DoubleGrants,
        clocks: Option<&ClockTable>,
        queue: &mut VecDeque<Held>,
        mode: Mode,
        new: &mut New,
    ) {
        for other in queue.iter_mut().rev() {
            if other.released <= new.acquired {
                break;
            }
            let start = new.acquired.max(other.acquired);
            let end = new.released.min(other.released);
            if start >= end {
                continue;
            }
            let overlap = end - start;
            // Different clocks: the overlap must beat what their mapping may be off by.
            let bound = (other.domain != new.domain).then(|| {
                clocks.map_or(Duration::ZERO, |c| {
                    let ns = c
                        .uncertainty_ns(other.domain)
                        .saturating_add(c.uncertainty_ns(new.domain));
                    Duration::from_nanos(ns)
                })
            });
            // How far one lease would have to slide against the other for them to stop
            // overlapping: at least the overlap, far more when one lies inside the other (a
            // paused holder's long lease around a short one). Across clocks the pair is a
            // double grant on every mapping they allow only when this beats their bound.
            let margin = new
                .released
                .saturating_duration_since(other.acquired)
                .min(other.released.saturating_duration_since(new.acquired));
            let example = |o: &Held| Overlap {
                key: new.key.to_string(),
                first: o.token.clone(),
                second: new.token.to_string(),
                overlap_us: overlap.as_micros() as u64,
                first_mode: mode,
                second_mode: new.mode,
                clock_uncertainty_us: bound.map(|b| b.as_micros() as u64),
                clock_margin_us: bound.map(|_| margin.as_micros() as u64),
            };
            if let Some(bound) = bound {
                if margin <= bound {
                    found.within_clock_uncertainty += 1;
                    let largest = found.within_clock_uncertainty_largest.as_ref();
                    if largest.is_none_or(|l| overlap.as_micros() as u64 > l.overlap_us) {
                        found.within_clock_uncertainty_largest = Some(example(other));
                    }
                    continue;
                }
                found.cross_host += 1;
            }
            found.count += 1;
            // The one granted first is the stale holder (ties: the one seen first).
            let (stale, unnoticed, went_on) = if other.acquired <= new.acquired {
                let went_on = other.released.saturating_duration_since(new.acquired);
                (&mut other.overlapped, other.unnoticed, went_on)
            } else {
                let went_on = new.released.saturating_duration_since(other.acquired);
                (&mut new.overlapped, new.unnoticed, went_on)
            };
            if !*stale {
                *stale = true;
                found.incidents += 1;
                if unnoticed {
                    found.unnoticed += 1;
                    let us = went_on.as_micros() as u64;
                    found.unnoticed_went_on_us = found.unnoticed_went_on_us.max(us);
                }
            }
            if found.examples.len() < EXAMPLES {
                found.examples.push(example(other));
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

    /// `token` held `key` exclusively over `(from, to)` ms after `t0`; its attempt ended 1 ms
    /// after the release.
    fn held(
        c: &mut DoubleGrantChecker,
        t0: Instant,
        key: &str,
        token: &str,
        (from, to): (u64, u64),
    ) {
        c.observe(
            key,
            token,
            (ms(t0, from), ms(t0, to)),
            Mode::Exclusive,
            ms(t0, to + 1),
        );
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
            held(&mut c, t0, "k", &format!("t{i}"), (10 * i, 10 * i + 10));
        }
        assert_eq!(c.finish().count, 0);
    }

    #[test]
    fn a_stale_holder_never_told_is_counted_with_how_long_it_went_on() {
        let t0 = Instant::now();
        let lease = |token, from, to, lost| SeenLease {
            key: "k",
            token,
            held: (ms(t0, from), ms(t0, to)),
            mode: Mode::Exclusive,
            lost,
        };
        for (lost, want) in [(false, (1, 240_000)), (true, (0, 0))] {
            let mut c = checker();
            // A holds 0..300, never told (or told) that its lease ended; B got it at 60.
            c.observe_lease(COORDINATOR, lease("B", 60, 90, false), ms(t0, 91));
            c.observe_lease(COORDINATOR, lease("A", 0, 300, lost), ms(t0, 301));
            let found = c.finish();
            assert_eq!(found.incidents, 1);
            assert_eq!((found.unnoticed, found.unnoticed_went_on_us), want);
        }
    }

    #[test]
    fn overlapping_leases_on_one_key_are_counted_with_examples() {
        let t0 = Instant::now();
        let mut c = checker();
        // A holds 0..100 (its lease expired at 50 and B took over at 60); C holds 100..150.
        held(&mut c, t0, "k", "B", (60, 90));
        held(&mut c, t0, "k", "A", (0, 100));
        held(&mut c, t0, "k", "C", (100, 150));
        // Same times on another key: no overlap across keys.
        held(&mut c, t0, "other", "D", (10, 20));
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
                clock_uncertainty_us: None,
                clock_margin_us: None,
            }
        );
    }

    #[test]
    fn three_way_overlap_counts_every_pair() {
        let t0 = Instant::now();
        let mut c = checker();
        for (i, t) in ["a", "b", "c"].iter().enumerate() {
            held(&mut c, t0, "k", t, (i as u64, 100 + i as u64));
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
            held(
                &mut c,
                t0,
                "k",
                &format!("b{i}"),
                (10 + 10 * i, 15 + 10 * i),
            );
        }
        held(&mut c, t0, "k", "paused", (0, 900));
        let found = c.finish();
        assert_eq!((found.count, found.incidents), (80, 1));
    }

    /// What a fresh checker finds in leases of `(token, from_ms, to_ms, mode)` on key `k`,
    /// reported in release order.
    fn judged(t0: Instant, leases: &[(&str, u64, u64, Mode)]) -> DoubleGrants {
        let mut c = checker();
        let mut leases = leases.to_vec();
        leases.sort_by_key(|l| l.2);
        for (t, a, r, m) in leases {
            c.observe("k", t, (ms(t0, a), ms(t0, r)), m, ms(t0, r + 1));
        }
        c.finish()
    }

    #[test]
    fn readers_may_overlap_each_other_but_not_a_writer() {
        use Mode::{Exclusive as W, Shared as R};
        let t0 = Instant::now();
        // Three readers together, then a writer alone, then two readers: a working rwlock.
        let working = [
            ("r1", 0, 50, R),
            ("r2", 10, 60, R),
            ("r3", 20, 70, R),
            ("w1", 70, 90, W),
            ("r4", 90, 120, R),
            ("r5", 95, 130, R),
        ];
        assert_eq!(judged(t0, &working), DoubleGrants::default());
        // A writer inside two readers' leases: two reader–writer pairs; a second writer
        // overlapping the first: one writer–writer pair.
        let broken = [
            ("r1", 0, 50, R),
            ("r2", 10, 60, R),
            ("w1", 20, 40, W),
            ("w2", 30, 80, W),
        ];
        let found = judged(t0, &broken);
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

    /// A checker reading a table where worker domains 1 and 2 are each 1 ms uncertain.
    fn two_remote_domains() -> (DoubleGrantChecker, Arc<ClockTable>) {
        let table = Arc::new(ClockTable::new(3));
        table.set_uncertainty_ns(1, 1_000_000);
        table.set_uncertainty_ns(2, 1_000_000);
        (checker().with_clocks(table.clone()), table)
    }

    /// On key `k`: lease `a` of domain `da` held [0, 10] ms and lease `b` of domain `db`
    /// from `us` µs before its end: they share `us` µs.
    fn pair_on(
        c: &mut DoubleGrantChecker,
        k: &str,
        (da, ma): (u32, Mode),
        (db, mb): (u32, Mode),
        us: u64,
    ) {
        let t0 = Instant::now();
        let at = |us: u64| t0 + Duration::from_micros(us);
        c.observe_in(da, k, "a", (at(0), at(10_000)), ma, at(10_001));
        c.observe_in(db, k, "b", (at(10_000 - us), at(20_000)), mb, at(20_001));
    }

    fn pair(c: &mut DoubleGrantChecker, a: (u32, Mode), b: (u32, Mode), us: u64) {
        pair_on(c, "k", a, b, us);
    }

    #[test]
    fn across_clocks_an_overlap_counts_only_beyond_both_uncertainties() {
        use Mode::Exclusive as W;
        // 3 ms against 1 + 1 ms: a double grant, carrying the bound it beat.
        let (mut c, _) = two_remote_domains();
        pair(&mut c, (1, W), (2, W), 3_000);
        let found = c.finish();
        assert_eq!((found.count, found.incidents, found.cross_host), (1, 1, 1));
        assert_eq!(found.within_clock_uncertainty, 0);
        let e = &found.examples[0];
        assert_eq!((e.overlap_us, e.clock_uncertainty_us), (3_000, Some(2_000)));
        // 1.5 ms, and exactly 2 ms: within the uncertainty, not counted, but shown.
        for us in [1_500, 2_000] {
            let (mut c, _) = two_remote_domains();
            pair(&mut c, (1, W), (2, W), us);
            let found = c.finish();
            assert_eq!((found.count, found.incidents, found.cross_host), (0, 0, 0));
            assert_eq!(found.within_clock_uncertainty, 1);
            let largest = found.within_clock_uncertainty_largest.expect("kept");
            assert_eq!(
                (largest.overlap_us, largest.clock_uncertainty_us),
                (us, Some(2_000))
            );
        }
        // Against the coordinator's host (exact): only the worker's 1 ms.
        let (mut c, _) = two_remote_domains();
        pair(&mut c, (COORDINATOR, W), (1, W), 1_500);
        assert_eq!(c.finish().examples[0].clock_uncertainty_us, Some(1_000));
    }

    #[test]
    fn across_clocks_a_short_lease_inside_a_long_one_counts_whatever_the_error() {
        // A holder paused for 4 s on one host; on another, a 0.5 ms lease 2 s into it. They
        // share only 0.5 ms, less than the clocks' 1 + 1 ms, yet no error within 2 ms can pull
        // the short one out of the long one: a double grant, with its margin.
        let t0 = Instant::now();
        let at = |us: u64| t0 + Duration::from_micros(us);
        let w = Mode::Exclusive;
        // b's 0.5 ms lease from `start` µs on host 2, beside a's 4 s one on host 1.
        let short_in_long = |start: u64| {
            let (mut c, _) = two_remote_domains();
            let b = (at(start), at(start + 500));
            c.observe_in(2, "k", "b", b, w, at(start + 600));
            c.observe_in(1, "k", "a", (at(0), at(4_000_000)), w, at(4_000_100));
            c.finish()
        };
        let found = short_in_long(2_000_000);
        assert_eq!((found.count, found.cross_host), (1, 1));
        assert_eq!(found.within_clock_uncertainty, 0);
        let e = &found.examples[0];
        assert_eq!(
            (e.overlap_us, e.clock_uncertainty_us, e.clock_margin_us),
            (500, Some(2_000), Some(2_000_000))
        );
        // Near the long lease's end, 1.5 ms from it: an error of 2 ms could separate them.
        let found = short_in_long(3_998_500);
        assert_eq!((found.count, found.within_clock_uncertainty), (0, 1));
    }

    #[test]
    fn one_clock_is_exact_whatever_its_uncertainty() {
        let (mut c, _) = two_remote_domains();
        pair(&mut c, (2, Mode::Exclusive), (2, Mode::Exclusive), 1);
        let found = c.finish();
        assert_eq!((found.count, found.cross_host), (1, 0));
        assert_eq!(found.examples[0].overlap_us, 1);
        assert_eq!(found.examples[0].clock_uncertainty_us, None);
        // `observe` is domain 0: exact, as before clocks existed.
        let (mut c, _) = two_remote_domains();
        let t0 = Instant::now();
        held(&mut c, t0, "k", "a", (0, 10));
        held(&mut c, t0, "k", "b", (9, 20));
        assert_eq!(c.finish().count, 1);
    }

    #[test]
    fn across_clocks_readers_still_share_and_a_writer_is_judged_by_the_bound() {
        use Mode::{Exclusive as W, Shared as R};
        let (mut c, _) = two_remote_domains();
        pair(&mut c, (1, R), (2, R), 5_000);
        assert_eq!(c.finish(), DoubleGrants::default());
        let (mut c, _) = two_remote_domains();
        pair(&mut c, (1, R), (2, W), 5_000);
        let found = c.finish();
        assert_eq!((found.count, found.cross_host), (1, 1));
        assert_eq!(
            (found.examples[0].first_mode, found.examples[0].second_mode),
            (R, W)
        );
        let (mut c, _) = two_remote_domains();
        pair(&mut c, (1, W), (2, R), 1_000);
        assert_eq!(c.finish().within_clock_uncertainty, 1);
    }

    #[test]
    fn the_table_is_read_when_a_pair_is_seen() {
        use Mode::Exclusive as W;
        let (mut c, table) = two_remote_domains();
        pair_on(&mut c, "k1", (1, W), (2, W), 3_000);
        // A ping found domain 2 off by up to 5 ms: the same overlap is now within 6 ms.
        table.set_uncertainty_ns(2, 5_000_000);
        pair_on(&mut c, "k2", (1, W), (2, W), 3_000);
        let found = c.finish();
        assert_eq!((found.count, found.within_clock_uncertainty), (1, 1));
        assert_eq!(
            found
                .within_clock_uncertainty_largest
                .unwrap()
                .clock_uncertainty_us,
            Some(6_000)
        );
    }

    #[test]
    fn without_a_table_every_clock_is_exact() {
        let mut c = checker();
        pair(&mut c, (1, Mode::Exclusive), (2, Mode::Exclusive), 1);
        let found = c.finish();
        assert_eq!((found.count, found.cross_host), (1, 1));
        assert_eq!(found.examples[0].clock_uncertainty_us, Some(0));
    }
}
