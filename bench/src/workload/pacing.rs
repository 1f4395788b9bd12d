//! When each attempt is meant to start. Separate from the operation (oha's lesson): the
//! driver asks the schedule for the next slot and runs whatever strategy it was given.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::distr::Distribution;
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};

use super::{Arrival, Ask, Buyers, LoadMode, Popularity, SaleCurve, Shape, Trace, Workload};

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
    /// Draws zipf's SKUs, apart from `rng` for the same reason.
    popular: ChaCha8Rng,
    seq: u64,
    /// Seconds from the start of the next open-loop arrival.
    next_offset_s: f64,
    /// A sale: the curve's expected arrivals up to `next_offset_s` (what its inversion aims
    /// at); a trace: the index of the next arrival.
    drawn: f64,
    traced: usize,
    /// `[buyers]`: their draws and the second presses still to come.
    people: Option<People>,
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
/// Seed offset of zipf's SKU draws.
const ZIPF_STREAM: u64 = 0x7a69_7066_7321; // "zipfs!"
/// Seed offset of the buyers' draws (buyer, units, second press): never moves arrivals or SKUs.
const PEOPLE_STREAM: u64 = 0x6275_7965_7273; // "buyers"

/// When arrivals come.
enum Times {
    /// `load.rate` throughout: today's gaps, drawn exactly as before shapes existed.
    Steady(f64),
    /// The sale's curve, inverted: the n-th arrival comes when the curve's expected count
    /// reaches the sum of n unit-rate gaps (Poisson) or n (constant). One draw per arrival
    /// whatever the ratio of peak to pre-sale rate (thinning would throw most draws away
    /// before the sale).
    Curve(SaleCurve),
    /// A trace's arrivals, replayed as they are.
    Trace(Arc<Trace>),
}

/// How the SKU of an arrival is drawn.
enum Skus {
    One,
    /// `random_range(0..n)`, as before popularity existed.
    Uniform(u32),
    /// SKU k with weight 1 / (k + 1)^s: `rand_distr`'s sampler over 1..=n, less 1.
    Zipf(rand_distr::Zipf<f64>, u32),
}

impl Skus {
    fn of(skus: u32, popularity: Popularity) -> Self {
        match popularity {
            _ if skus == 1 => Skus::One,
            Popularity::Uniform => Skus::Uniform(skus),
            Popularity::Zipf(s) => Skus::Zipf(
                rand_distr::Zipf::new(f64::from(skus), s).expect("validated: n >= 1, s > 0"),
                skus,
            ),
        }
    }

    /// `rng` is the arrivals' generator (the uniform draw stays on it, as it always was);
    /// `own` is zipf's (its rejection sampler takes a varying number of draws).
    fn draw(&self, rng: &mut ChaCha8Rng, own: &mut ChaCha8Rng) -> u32 {
        match self {
            Skus::One => 0,
            Skus::Uniform(n) => rng.random_range(0..*n),
            Skus::Zipf(z, n) => (z.sample(own) as u32).clamp(1, *n) - 1,
        }
    }
}

/// `[buyers]`' own generator and the second presses waiting for their time.
struct People {
    rng: ChaCha8Rng,
    /// The next request id: one per arrival.
    requests: u64,
    pending: BinaryHeap<Pending>,
}

impl People {
    /// The Ask of an arrival at `at_s`; its second press, if drawn, waits in `pending`. Four
    /// draws per arrival whatever the shares, so the same seed gives the same asks.
    fn arrive(&mut self, b: &Buyers, at_s: f64, sku: u32, read: bool) -> Ask {
        let ask = Ask {
            buyer: self.rng.random_range(0..b.count),
            request: self.requests,
            qty: self.rng.random_range(b.quantity.min..=b.quantity.max),
        };
        self.requests += 1;
        let twice = self.rng.random::<f64>() < b.resubmit;
        let after = self
            .rng
            .random_range(RESUBMIT_AFTER_S.0..=RESUBMIT_AFTER_S.1);
        if twice && !read {
            self.pending.push(Pending {
                at_s: at_s + after,
                sku,
                ask,
            });
        }
        ask
    }
}

/// How long after the first press a second one comes, seconds (uniform).
pub const RESUBMIT_AFTER_S: (f64, f64) = (0.1, 0.4);

/// A second press of the same Ask, due at `at_s`.
struct Pending {
    at_s: f64,
    sku: u32,
    ask: Ask,
}

impl PartialEq for Pending {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Pending {}

impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Pending {
    /// The earliest first out of the max-heap (ties by request id, so the order is the seed's).
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .at_s
            .total_cmp(&self.at_s)
            .then(other.ask.request.cmp(&self.ask.request))
    }
}

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
    times: Times,
    skus: Skus,
    buyers: Option<Buyers>,
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
        let times = match &w.load.shape {
            Shape::Steady => Times::Steady(w.load.rate),
            Shape::Sale { .. } => Times::Curve(w.load.shape.curve(w.load.rate).expect("a sale")),
            Shape::Trace { arrivals, .. } => Times::Trace(arrivals.clone()),
        };
        let mut schedule = Self {
            state: Mutex::new(State {
                rng: ChaCha8Rng::seed_from_u64(w.seed),
                reads: ChaCha8Rng::seed_from_u64(w.seed ^ READ_STREAM),
                popular: ChaCha8Rng::seed_from_u64(w.seed ^ ZIPF_STREAM),
                seq: 0,
                next_offset_s: 0.0,
                drawn: 0.0,
                traced: 0,
                people: w.buyers.as_ref().map(|_| People {
                    rng: ChaCha8Rng::seed_from_u64(w.seed ^ PEOPLE_STREAM),
                    requests: 0,
                    pending: BinaryHeap::new(),
                }),
            }),
            start,
            mode: w.load.mode,
            arrival: w.load.arrival,
            times,
            skus: Skus::of(w.inventory.skus, w.inventory.popularity),
            buyers: w.buyers.clone(),
            read_fraction: w.load.read_fraction,
            duration_s: w.load.duration.as_secs_f64(),
            max_attempts: w.load.max_attempts.unwrap_or(u64::MAX),
            part,
        };
        let st = schedule.state.get_mut().expect("not shared yet");
        st.next_offset_s = schedule.times.after(schedule.arrival, st);
        schedule
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
        let closed = self.mode == LoadMode::Closed;
        let now_s = now.saturating_duration_since(self.start).as_secs_f64();
        let fresh = closed || st.next_offset_s < self.duration_s;
        let fresh_at = if closed { now_s } else { st.next_offset_s };
        let seq = st.seq;
        if let Some(p) = self.resubmit_due(st, fresh, fresh_at) {
            st.seq += 1;
            return Some(Slot {
                seq,
                sku: p.sku,
                intended: if closed { now } else { self.at(p.at_s) },
                read: false,
                ask: p.ask,
            });
        }
        if !fresh {
            return None;
        }
        let intended = if closed {
            now
        } else {
            let at = self.at(st.next_offset_s);
            st.next_offset_s = self.times.after(self.arrival, st);
            at
        };
        let sku = self.skus.draw(&mut st.rng, &mut st.popular);
        // Drawn only when reads are asked for, so the `reads` stream is consumed one per slot.
        let read = self.read_fraction > 0.0 && st.reads.random::<f64>() < self.read_fraction;
        let ask = match (&mut st.people, &self.buyers) {
            (Some(people), Some(b)) => people.arrive(b, fresh_at, sku, read),
            _ => Ask::anonymous(seq),
        };
        st.seq += 1;
        Some(Slot {
            seq,
            sku,
            intended,
            read,
            ask,
        })
    }

    /// The second press due before the next fresh arrival (at `fresh_at`, if `fresh`), or any
    /// due before the end once no fresh one is left.
    fn resubmit_due(&self, st: &mut State, fresh: bool, fresh_at: f64) -> Option<Pending> {
        let pending = &mut st.people.as_mut()?.pending;
        let p = pending.peek()?;
        let due = p.at_s < self.duration_s && (!fresh || p.at_s <= fresh_at);
        due.then(|| pending.pop()).flatten()
    }

    fn at(&self, offset_s: f64) -> Instant {
        self.start + Duration::from_secs_f64(offset_s)
    }

    /// Drains the rest of an open-loop schedule, counting the arrivals that were due before
    /// the end but never started (every buyer was busy). Zero for the closed loop.
    pub fn count_unstarted(&self) -> u64 {
        self.drain_unstarted(false).0
    }

    /// [`Self::count_unstarted`], and with `keep` each never-started purchase: a sale's buyers
    /// who asked and went without (undersell, FCFS and the phases count them).
    pub fn drain_unstarted(&self, keep: bool) -> (u64, Vec<Slot>) {
        if self.mode == LoadMode::Closed {
            return (0, Vec::new());
        }
        let (mut n, mut kept) = (0, Vec::new());
        while let Some(slot) = self.next(self.start) {
            n += 1;
            if keep && !slot.read {
                kept.push(slot);
            }
        }
        (n, kept)
    }
}

impl Times {
    /// The offset of the arrival after the one at `st.next_offset_s` (after 0 at first).
    fn after(&self, arrival: Arrival, st: &mut State) -> f64 {
        let prev = st.next_offset_s;
        match self {
            Times::Steady(rate) => prev + gap(arrival, *rate, &mut st.rng),
            Times::Curve(curve) => {
                st.drawn += gap(arrival, 1.0, &mut st.rng);
                curve.time_of(st.drawn, prev)
            }
            Times::Trace(trace) => {
                st.traced += 1;
                trace
                    .times_us
                    .get(st.traced - 1)
                    .map_or(f64::INFINITY, |t| *t as f64 / 1e6)
            }
        }
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
    /// A 100× sale: 500/s before, 50,000/s at 1 s after a 50 ms rise, halving every 500 ms
    /// toward 2,000/s; 3 s in all.
    const SALE: [&str; 7] = [
        "load.rate=500",
        "load.shape=\"sale\"",
        "load.start=\"1s\"",
        "load.rise=\"50ms\"",
        "load.peak=50000",
        "load.half_life=\"500ms\"",
        "load.tail=2000",
    ];

    fn sale(extra: &[&str]) -> Workload {
        let mut o: Vec<&str> = SALE.to_vec();
        o.extend(["load.duration=3s"]);
        o.extend(extra);
        workload(&o)
    }

    /// Arrivals per 10 ms bucket, from the schedule's intended starts.
    fn per_10ms(w: &Workload) -> Vec<u64> {
        let start = Instant::now();
        let mut counts = vec![0u64; (w.load.duration.as_millis() / 10) as usize];
        for (_, _, at) in all(&Schedule::new(w, start), start) {
            counts[(at.as_millis() / 10) as usize] += 1;
        }
        counts
    }

    #[test]
    fn a_sale_draws_its_curve_poisson_within_4_sd_per_100ms_and_in_total() {
        let w = sale(&[]);
        let counts = per_10ms(&w);
        let curve = w.load.shape.curve(w.load.rate).unwrap();
        // A Poisson count of mean m has sd √m. Per 10 ms the pre-sale mean is 5 (too small to
        // judge a shape by), so the 10 ms counts are judged in sums over 100 ms windows (means
        // 50 to ~4,700), each within 4 sd (+1 for the window's edge).
        for (k, window) in counts.chunks(10).enumerate() {
            let (a, b) = (k as f64 * 0.1, (k + 1) as f64 * 0.1);
            let m = curve.expected(b) - curve.expected(a);
            let n = window.iter().sum::<u64>() as f64;
            assert!(
                (n - m).abs() <= 4.0 * m.sqrt() + 1.0,
                "window {k}: {n} vs {m:.0}"
            );
        }
        let m = curve.expected(3.0);
        let n = counts.iter().sum::<u64>() as f64;
        assert!((n - m).abs() <= 4.0 * m.sqrt(), "total {n} vs {m:.0}");
        // The surge is there: the peak's 10 ms bucket holds ~100× a pre-sale one.
        assert!(
            counts[105] > 300 && counts[50] < 30,
            "{} {}",
            counts[105],
            counts[50]
        );
    }

    #[test]
    fn a_constant_sale_spaces_its_arrivals_along_the_curve() {
        let w = sale(&["load.arrival=\"constant\""]);
        let curve = w.load.shape.curve(w.load.rate).unwrap();
        // The n-th arrival comes when the curve's expected count reaches n: every bucket holds
        // its expected count to within one.
        for (k, n) in per_10ms(&w).into_iter().enumerate() {
            let m = curve.expected((k + 1) as f64 * 0.01) - curve.expected(k as f64 * 0.01);
            assert!((n as f64 - m).abs() <= 1.0 + 1e-6, "bucket {k}: {n} vs {m}");
        }
    }

    #[test]
    fn a_sale_is_the_seeds_and_its_curve_the_shapes() {
        let start = Instant::now();
        let a = all(&Schedule::new(&sale(&[]), start), start);
        assert_eq!(a, all(&Schedule::new(&sale(&[]), start), start));
        assert_ne!(a, all(&Schedule::new(&sale(&["seed=99"]), start), start));
        let w = sale(&[]);
        let at = |ms| w.load.rate_at(Duration::from_millis(ms));
        for (ms, rate) in [
            (500, 500.0),
            (1025, 25_250.0),
            (1050, 50_000.0),
            (1550, 26_000.0),
        ] {
            assert!((at(ms) - rate).abs() < 1e-6, "{ms} ms: {}", at(ms));
        }
        assert_eq!(w.load.shape.surge_start(), Some(Duration::from_secs(1)));
    }

    #[test]
    fn a_trace_replays_its_count_in_every_bucket() {
        let dir = tempfile::tempdir().unwrap();
        // 10 ms buckets: a pre-sale trickle, a jump, a decay; one empty bucket.
        let counts: Vec<u64> = (0..100)
            .map(|k| match k {
                0..40 => 3,
                40 => 0,
                41..60 => 400,
                _ => 400 / (k - 58),
            })
            .collect();
        let csv: String = std::iter::once("t_ms,count\n".to_string())
            .chain(
                counts
                    .iter()
                    .enumerate()
                    .map(|(k, c)| format!("{},{c}\n", 5000 + 10 * k)),
            )
            .collect();
        std::fs::write(dir.path().join("t.csv"), csv).unwrap();
        let text = "[load]\nshape = \"trace\"\ntrace = \"t.csv\"\nduration = \"1s\"\n";
        let file = dir.path().join("w.toml");
        let w = Workload::parse(file.to_str().unwrap(), text, &[]).unwrap();
        assert_eq!(per_10ms(&w), counts);
        assert_eq!(w.load.shape.surge_start(), Some(Duration::from_millis(410)));
        assert_eq!(w.load.rate_at(Duration::from_millis(415)), 40_000.0);
        // Stored absolute: a worker reads the same file.
        let back = Workload::parse("<coordinator>", &toml::to_string(&w).unwrap(), &[]).unwrap();
        assert_eq!(per_10ms(&back), counts);
    }

    #[test]
    fn zipf_draws_each_sku_with_its_weight() {
        let start = Instant::now();
        let w = workload(&["load.duration=20s", "inventory.popularity=\"zipf:1.1\""]);
        let slots = all(&Schedule::new(&w, start), start);
        let weights: Vec<f64> = (1..=4).map(|k| (k as f64).powf(-1.1)).collect();
        let total: f64 = weights.iter().sum();
        let n = slots.len() as f64;
        for (k, wk) in weights.iter().enumerate() {
            let p = wk / total;
            let share = slots.iter().filter(|s| s.1 == k as u32).count() as f64 / n;
            // ~20,000 draws: a share's sd is √(p(1-p)/n) ≤ 0.0035; within 4 sd.
            let sd = (p * (1.0 - p) / n).sqrt();
            assert!((share - p).abs() <= 4.0 * sd, "sku {k}: {share} vs {p}");
        }
        let again = all(&Schedule::new(&w, start), start);
        assert!(again == slots, "same seed, same SKUs");
    }

    #[test]
    fn buyers_and_second_presses_never_move_the_arrivals_or_skus() {
        let start = Instant::now();
        let people = [
            "buyers.count=500",
            "buyers.quantity=\"1..3\"",
            "buyers.resubmit=0.2",
        ];
        let w = workload(&people);
        let s = Schedule::new(&w, start);
        let slots: Vec<Slot> = std::iter::from_fn(|| s.next(start)).collect();
        let mut firsts = std::collections::HashMap::new();
        let mut seconds = 0;
        for (k, x) in slots.iter().enumerate() {
            assert_eq!(x.seq, k as u64);
            assert!(
                k == 0 || slots[k - 1].intended <= x.intended,
                "in intended order"
            );
            assert!(x.ask.buyer < 500 && (1..=3).contains(&x.ask.qty), "{x:?}");
            match firsts.get(&x.ask.request) {
                None => {
                    firsts.insert(x.ask.request, *x);
                }
                Some(first) => {
                    // The same Ask and SKU, 100–400 ms later.
                    seconds += 1;
                    let after = x.intended - first.intended;
                    assert_eq!((x.ask, x.sku), (first.ask, first.sku));
                    assert!(after >= Duration::from_millis(100), "{after:?}");
                    assert!(after <= Duration::from_millis(400), "{after:?}");
                }
            }
        }
        // ~2,000 arrivals, a fifth pressed twice (those in the last 400 ms may fall past the
        // end): sd ~18, so 300..=500 is > 5 sd either side.
        assert!((300..=500).contains(&seconds), "{seconds}");
        // The first presses are the anonymous schedule's arrivals, SKUs and times.
        let plain = all(&Schedule::new(&workload(&[]), start), start);
        let mut fresh: Vec<Slot> = firsts.into_values().collect();
        fresh.sort_by_key(|x| x.ask.request);
        let fresh: Vec<_> = fresh.iter().map(|x| (x.sku, x.intended - start)).collect();
        let plain: Vec<_> = plain.iter().map(|x| (x.1, x.2)).collect();
        assert_eq!(fresh, plain);
        let again = Schedule::new(&w, start);
        let asks: Vec<Ask> = std::iter::from_fn(|| again.next(start))
            .map(|x| x.ask)
            .collect();
        assert_eq!(
            asks,
            slots.iter().map(|x| x.ask).collect::<Vec<_>>(),
            "same seed"
        );
    }
}
