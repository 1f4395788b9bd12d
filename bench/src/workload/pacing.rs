//! When each attempt is meant to start. Separate from the operation (oha's lesson): the
//! driver asks the schedule for the next slot and runs whatever strategy it was given.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};

use super::{Arrival, Ask, LoadMode, Workload};

/// One scheduled attempt.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Slot {
    /// Attempt number, in schedule order.
    pub seq: u64,
    /// Item to buy, drawn from the seed.
    pub sku: u32,
    /// When it should start (open loop) or the moment it was handed out (closed loop).
    pub intended: Instant,
    /// A read (check stock and price under the read lock) rather than a purchase, drawn from
    /// the seed with probability `load.read_fraction`.
    pub read: bool,
    /// Who asks, for which order, how many units.
    pub ask: Ask,
}

struct State {
    rng: ChaCha8Rng,
    /// Draws the read marks, apart from `rng`: the arrivals and SKUs of a seed are the same
    /// whatever the read fraction, so a run with reads differs from one without only in them.
    reads: ChaCha8Rng,
    seq: u64,
    /// Seconds from the start of the next open-loop arrival.
    next_offset_s: f64,
}

/// Seconds until the next open-loop arrival.
fn gap(arrival: Arrival, rate: f64, rng: &mut ChaCha8Rng) -> f64 {
    match arrival {
        Arrival::Constant => 1.0 / rate,
        // Inverse-CDF sampling of the exponential distribution; 1 - u is in (0, 1].
        Arrival::Poisson => -(1.0 - rng.random::<f64>()).ln() / rate,
    }
}

/// Seed offset of the read marks' generator (any constant unlike 0 gives another stream).
const READ_STREAM: u64 = 0x7265_6164_7321; // "reads!"

/// Which share of the load one process runs: slot `seq` and client `c` belong to part
/// `seq % count` and `c % count`. One process runs the single part `{ index: 0, count: 1 }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Part {
    /// This process's share, `0..count`.
    pub index: u32,
    /// Number of processes sharing the load.
    pub count: u32,
}

impl Part {
    /// The whole load in one process.
    pub const WHOLE: Part = Part { index: 0, count: 1 };

    /// The global ids of this part's clients out of `clients`.
    pub fn clients(self, clients: u32) -> impl Iterator<Item = u32> {
        (self.index..clients).step_by(self.count as usize)
    }
}

/// The seeded arrival schedule of a run, shared by all buyers (of one [`Part`]: every part
/// draws the same sequence and keeps its own slots, so the parts together make the schedule).
pub struct Schedule {
    state: Mutex<State>,
    start: Instant,
    mode: LoadMode,
    arrival: Arrival,
    rate: f64,
    skus: u32,
    read_fraction: f64,
    duration_s: f64,
    max_attempts: u64,
    part: Part,
}

impl Schedule {
    /// A schedule starting at `start`.
    pub fn new(w: &Workload, start: Instant) -> Self {
        Self::part(w, start, Part::WHOLE)
    }

    /// The slots of `part` of the schedule starting at `start`.
    pub fn part(w: &Workload, start: Instant, part: Part) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(w.seed);
        let first = gap(w.load.arrival, w.load.rate, &mut rng);
        Self {
            state: Mutex::new(State {
                rng,
                reads: ChaCha8Rng::seed_from_u64(w.seed ^ READ_STREAM),
                seq: 0,
                next_offset_s: first,
            }),
            start,
            mode: w.load.mode,
            arrival: w.load.arrival,
            rate: w.load.rate,
            skus: w.inventory.skus,
            read_fraction: w.load.read_fraction,
            duration_s: w.load.duration.as_secs_f64(),
            max_attempts: w.load.max_attempts.unwrap_or(u64::MAX),
            part,
        }
    }

    /// The next slot, or `None` when the schedule is exhausted (past the duration in the open
    /// loop, or `max_attempts` handed out). `now` stamps closed-loop slots.
    pub fn next(&self, now: Instant) -> Option<Slot> {
        let mut st = self
            .state
            .lock()
            .expect("schedule lock is never poisoned: no panics inside");
        loop {
            let slot = self.draw(&mut st, now)?;
            if slot.seq % u64::from(self.part.count) == u64::from(self.part.index) {
                return Some(slot);
            }
        }
    }

    fn draw(&self, st: &mut State, now: Instant) -> Option<Slot> {
        if st.seq >= self.max_attempts {
            return None;
        }
        let intended = match self.mode {
            LoadMode::Closed => now,
            LoadMode::Open => {
                if st.next_offset_s >= self.duration_s {
                    return None;
                }
                let at = self.start + Duration::from_secs_f64(st.next_offset_s);
                let gap = gap(self.arrival, self.rate, &mut st.rng);
                st.next_offset_s += gap;
                at
            }
        };
        let sku = if self.skus == 1 {
            0
        } else {
            st.rng.random_range(0..self.skus)
        };
        // Drawn only when reads are asked for, so the `reads` stream is consumed one per slot.
        let read = self.read_fraction > 0.0 && st.reads.random::<f64>() < self.read_fraction;
        let seq = st.seq;
        st.seq += 1;
        Some(Slot {
            seq,
            sku,
            intended,
            read,
            ask: Ask::anonymous(seq),
        })
    }

    /// Drains the rest of an open-loop schedule, counting the arrivals that were due before
    /// the end but never started (every buyer was busy). Zero for the closed loop.
    pub fn count_unstarted(&self) -> u64 {
        if self.mode == LoadMode::Closed {
            return 0;
        }
        let mut n = 0;
        while self.next(self.start).is_some() {
            n += 1;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Workload;

    fn workload(extra: &[&str]) -> Workload {
        let mut o: Vec<String> = vec![
            "inventory.skus=4".into(),
            "load.rate=1000".into(),
            "load.duration=2s".into(),
        ];
        o.extend(extra.iter().map(|s| s.to_string()));
        Workload::parse("t.toml", "", &o).unwrap()
    }

    fn all(s: &Schedule, start: Instant) -> Vec<(u64, u32, Duration)> {
        std::iter::from_fn(|| s.next(start))
            .map(|x| (x.seq, x.sku, x.intended - start))
            .collect()
    }

    #[test]
    fn same_seed_same_schedule_other_seed_other_schedule() {
        let start = Instant::now();
        let a = all(&Schedule::new(&workload(&[]), start), start);
        let b = all(&Schedule::new(&workload(&[]), start), start);
        let c = all(&Schedule::new(&workload(&["seed=99"]), start), start);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(
            a.iter().any(|x| x.1 == 3) && a.iter().all(|x| x.1 < 4),
            "skus drawn from 0..4"
        );
    }

    /// The schedule as it was drawn before reads existed, re-derived here from the seed: one
    /// generator, the first gap, then per slot its gap and its SKU.
    fn schedule_before_reads(w: &Workload, start: Instant) -> Vec<(u64, u32, Duration)> {
        let mut rng = ChaCha8Rng::seed_from_u64(w.seed);
        let mut at = gap(w.load.arrival, w.load.rate, &mut rng);
        let mut out = Vec::new();
        while at < w.load.duration.as_secs_f64() {
            let intended = start + Duration::from_secs_f64(at);
            at += gap(w.load.arrival, w.load.rate, &mut rng);
            let sku = rng.random_range(0..w.inventory.skus);
            out.push((out.len() as u64, sku, intended - start));
        }
        out
    }

    #[test]
    fn reads_change_no_arrival_or_sku_and_are_drawn_from_the_seed() {
        let start = Instant::now();
        let none = all(&Schedule::new(&workload(&[]), start), start);
        assert_eq!(none, schedule_before_reads(&workload(&[]), start));
        let zero = all(
            &Schedule::new(&workload(&["load.read_fraction=0.0"]), start),
            start,
        );
        assert_eq!(none, zero);
        let marks = |extra: &[&str]| -> Vec<bool> {
            let s = Schedule::new(&workload(extra), start);
            std::iter::from_fn(|| s.next(start))
                .map(|x| x.read)
                .collect()
        };
        assert!(marks(&[]).iter().all(|r| !r), "no reads by default");
        let reads = Schedule::new(&workload(&["load.read_fraction=0.9"]), start);
        let with_reads: Vec<_> = std::iter::from_fn(|| reads.next(start)).collect();
        let same: Vec<_> = with_reads
            .iter()
            .map(|x| (x.seq, x.sku, x.intended - start))
            .collect();
        assert_eq!(same, none, "reads only mark slots: same times, same SKUs");
        let a = marks(&["load.read_fraction=0.9"]);
        assert_eq!(
            a,
            marks(&["load.read_fraction=0.9"]),
            "same seed, same marks"
        );
        assert_ne!(a, marks(&["load.read_fraction=0.9", "seed=99"]));
        let share = a.iter().filter(|r| **r).count() as f64 / a.len() as f64;
        // ~2,000 slots: the sd of the share is ~0.007, so ±0.04 is > 5 sd.
        assert!((share - 0.9).abs() < 0.04, "{share}");
        assert!(marks(&["load.read_fraction=1.0"]).iter().all(|r| *r));
        // Parts of a split load see the same marks as the whole.
        let parts: Vec<bool> = (0..2)
            .flat_map(|i| {
                let s = Schedule::part(
                    &workload(&["load.read_fraction=0.9"]),
                    start,
                    Part { index: i, count: 2 },
                );
                std::iter::from_fn(move || s.next(start)).map(|x| (x.seq, x.read))
            })
            .collect::<std::collections::BTreeMap<_, _>>()
            .into_values()
            .collect();
        assert_eq!(parts, a);
    }

    #[test]
    fn constant_rate_gives_rate_times_duration_evenly_spaced() {
        let start = Instant::now();
        let slots = all(
            &Schedule::new(&workload(&["load.arrival=\"constant\""]), start),
            start,
        );
        assert_eq!(slots.len(), 2000);
        assert_eq!(slots[1].2 - slots[0].2, Duration::from_millis(1));
    }

    #[test]
    fn poisson_rate_is_right_on_average() {
        let start = Instant::now();
        let n = all(
            &Schedule::new(&workload(&["load.duration=20s"]), start),
            start,
        )
        .len() as f64;
        // 20,000 expected; a Poisson count's sd is ~141, so ±5% is > 7 sd.
        assert!((n - 20_000.0).abs() < 1_000.0, "{n}");
    }

    #[test]
    fn max_attempts_bounds_both_loops() {
        let start = Instant::now();
        assert_eq!(
            all(
                &Schedule::new(&workload(&["load.max_attempts=10"]), start),
                start
            )
            .len(),
            10
        );
        let closed = workload(&["load.max_attempts=7", "load.mode=\"closed\""]);
        assert_eq!(all(&Schedule::new(&closed, start), start).len(), 7);
    }

    #[test]
    fn unstarted_counts_what_is_left_before_the_end() {
        let start = Instant::now();
        let s = Schedule::new(&workload(&["load.arrival=\"constant\""]), start);
        for _ in 0..500 {
            s.next(start);
        }
        assert_eq!(s.count_unstarted(), 1500);
    }
}
