//! Clocks across hosts: how far a worker's CLOCK_MONOTONIC is from the coordinator's, and how
//! sure of it we are. Pure logic; the pings themselves travel with the worker transport.
//!
//! A ping: the coordinator reads its clock (`t0`) and sends; the worker answers with its own
//! reading (`tr`); the answer arrives (`t1`). The worker read its clock somewhere between send
//! and receive, so the offset (worker − coordinator) then lay within `θ ± u`, with
//! `θ = tr − (t0 + t1)/2` and `u = (t1 − t0)/2` (Cristian's bound). Equal delays both ways make
//! `θ` exact; unequal ones move it, never beyond `u`. Of several pings, the one with the least
//! round trip gives the tightest bound ([`ClockEstimate`]).
//!
//! A run maps every worker time onto the coordinator's clock with the offset measured at ready,
//! `θ0`. Pings during the run ([`ClockTrack`]) tell how wrong that mapping has become: at ping
//! `i` it is off by at most `|θi − θ0| + ui`. Between two pings we assume the offset moves
//! monotonically (crystal clocks drift near-linearly, a few ppm: a few µs per second), so the
//! error there is at most the larger of the two pings'; the max over every ping bounds the
//! whole run from ready to the last ping (so ping at the end too). Beyond the last ping it is
//! an extrapolation of a few ppm × the time since.
//!
//! Two processes on one host share CLOCK_MONOTONIC (system-wide on Linux, same boot id): their
//! clocks are one, exact whatever the pings say.

use std::io;

pub use crate::check::WorkerClock;

/// Where Linux names the current boot: equal on two processes ⇔ same host, same boot.
const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";

/// This host's boot id (Linux; an error elsewhere).
pub fn boot_id() -> io::Result<String> {
    let id = std::fs::read_to_string(BOOT_ID)?.trim().to_string();
    if id.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{BOOT_ID} is empty"),
        ));
    }
    Ok(id)
}

/// Whether a worker that reported `worker_boot_id` shares this host's CLOCK_MONOTONIC. When
/// ours cannot be read, no: its clock is estimated by ping like a remote one.
pub fn same_host(worker_boot_id: &str) -> bool {
    boot_id().is_ok_and(|ours| ours == worker_boot_id.trim())
}

/// One ping, all CLOCK_MONOTONIC ns: coordinator's send (`t0`), the worker's answer (`tr`),
/// coordinator's receive (`t1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    t0_ns: u64,
    tr_ns: u64,
    t1_ns: u64,
}

impl Sample {
    /// A ping sent at `t0_ns`, answered at the worker's `tr_ns`, back at `t1_ns`; `None` when
    /// it came back before it left (`t1_ns < t0_ns`: not one clock's readings).
    pub fn new(t0_ns: u64, tr_ns: u64, t1_ns: u64) -> Option<Self> {
        (t1_ns >= t0_ns).then_some(Self {
            t0_ns,
            tr_ns,
            t1_ns,
        })
    }

    /// Round trip, ns.
    pub fn rtt_ns(&self) -> u64 {
        self.t1_ns - self.t0_ns
    }

    /// Worker minus coordinator, ns: `tr − (t0 + t1)/2` (the midpoint rounded down).
    pub fn offset_ns(&self) -> i64 {
        let mid = (i128::from(self.t0_ns) + i128::from(self.t1_ns)) / 2;
        clamp_i64(i128::from(self.tr_ns) - mid)
    }

    /// Half the round trip, rounded up (covering the rounded midpoint): the true offset lies
    /// within `offset_ns ± uncertainty_ns`.
    pub fn uncertainty_ns(&self) -> u64 {
        self.rtt_ns().div_ceil(2)
    }
}

/// The offset from a round of pings: that of the least round trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockEstimate {
    /// Worker minus coordinator, ns.
    pub offset_ns: i64,
    /// The true offset lies within `offset_ns ± uncertainty_ns`.
    pub uncertainty_ns: u64,
    /// Pings in the round.
    pub samples: u32,
}

impl ClockEstimate {
    /// The tightest of `samples` (least round trip; the first of equals); `None` without any.
    pub fn from_samples(samples: &[Sample]) -> Option<Self> {
        let best = samples.iter().min_by_key(|s| s.rtt_ns())?;
        Some(Self {
            offset_ns: best.offset_ns(),
            uncertainty_ns: best.uncertainty_ns(),
            samples: samples.len() as u32,
        })
    }
}

/// One worker's clock over a run: the offset at ready (the mapping used throughout) and how far
/// off that mapping was at any ping since.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockTrack {
    same_host: bool,
    /// θ0: worker minus coordinator at ready, ns.
    offset_ns: i64,
    /// max over pings of |θi − θ0| + ui.
    uncertainty_ns: u64,
    /// max over pings of |θi − θ0|.
    drift_ns: u64,
    samples: u32,
}

impl ClockTrack {
    /// A worker on the coordinator's host: one clock, offset and uncertainty 0 for good.
    pub fn same_host() -> Self {
        Self {
            same_host: true,
            offset_ns: 0,
            uncertainty_ns: 0,
            drift_ns: 0,
            samples: 0,
        }
    }

    /// A remote worker, mapped with the offset measured at ready.
    pub fn remote(ready: ClockEstimate) -> Self {
        Self {
            same_host: false,
            offset_ns: ready.offset_ns,
            uncertainty_ns: ready.uncertainty_ns,
            drift_ns: 0,
            samples: ready.samples,
        }
    }

    /// At ready: [`Self::same_host`] when `same_host`, else [`Self::remote`] from the round
    /// `ready` (`None` when it is empty: a remote clock needs at least one ping).
    pub fn at_ready(same_host: bool, ready: &[Sample]) -> Option<Self> {
        if same_host {
            let mut t = Self::same_host();
            t.samples = ready.len() as u32;
            return Some(t);
        }
        ClockEstimate::from_samples(ready).map(Self::remote)
    }

    /// Folds in one round of pings taken during the run (its tightest sample: a round of a few
    /// back-to-back pings keeps one delayed answer from widening the bound). Same host: counted
    /// only.
    pub fn observe(&mut self, round: &[Sample]) {
        self.samples += round.len() as u32;
        let Some(now) = ClockEstimate::from_samples(round) else {
            return;
        };
        if self.same_host {
            return;
        }
        let moved = now.offset_ns.abs_diff(self.offset_ns);
        self.drift_ns = self.drift_ns.max(moved);
        self.uncertainty_ns = self
            .uncertainty_ns
            .max(moved.saturating_add(now.uncertainty_ns));
    }

    /// Whether the worker shares the coordinator's clock.
    pub fn is_same_host(&self) -> bool {
        self.same_host
    }

    /// θ0: worker minus coordinator, ns, the mapping used for the whole run.
    pub fn offset_ns(&self) -> i64 {
        self.offset_ns
    }

    /// How far the mapping may be off, ns, at any ping so far (the value for the
    /// [`crate::check::ClockTable`]).
    pub fn uncertainty_ns(&self) -> u64 {
        self.uncertainty_ns
    }

    /// How far the measured offset moved from θ0, ns, at any ping so far.
    pub fn drift_ns(&self) -> u64 {
        self.drift_ns
    }

    /// Pings answered, at ready and since.
    pub fn samples(&self) -> u32 {
        self.samples
    }

    /// A worker's CLOCK_MONOTONIC reading as the coordinator's (`worker_ns − θ0`, saturating).
    pub fn to_coordinator_ns(&self, worker_ns: u64) -> u64 {
        let ns = i128::from(worker_ns) - i128::from(self.offset_ns);
        ns.clamp(0, i128::from(u64::MAX)) as u64
    }

    /// The summary.json record of worker `worker`.
    pub fn summary(&self, worker: u32) -> WorkerClock {
        WorkerClock {
            worker,
            same_host: self.same_host,
            offset_us: clamp_i64(div_round(i128::from(self.offset_ns), 1_000)),
            uncertainty_us: self.uncertainty_ns.div_ceil(1_000),
            drift_us: self.drift_ns.div_ceil(1_000),
            pings: self.samples,
        }
    }
}

fn clamp_i64(x: i128) -> i64 {
    x.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

/// `x / d` rounded to the nearest, halves away from zero (`d > 0`).
fn div_round(x: i128, d: i128) -> i128 {
    let q = x / d;
    let r = x % d;
    if 2 * r.abs() >= d { q + x.signum() } else { q }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ping sent at `t0` (coordinator ns) over `out` ns, answered by a worker whose clock is
    /// `offset` ahead, back `back` ns later.
    fn ping(t0: u64, offset: i64, out: u64, back: u64) -> Sample {
        let tr = (t0 + out) as i64 + offset;
        Sample::new(t0, tr as u64, t0 + out + back).expect("forward in time")
    }

    /// The offsets and bounds a test tries: behind, equal, ahead, far ahead.
    const OFFSETS: [i64; 4] = [-7_345_678_901, 0, 42, 3_600_000_000_000];

    #[test]
    fn symmetric_delays_give_the_exact_offset() {
        for offset in OFFSETS {
            let s = ping(10_000_000_000, offset, 150_000, 150_000);
            assert_eq!(s.offset_ns(), offset);
            assert_eq!((s.rtt_ns(), s.uncertainty_ns()), (300_000, 150_000));
        }
    }

    #[test]
    fn asymmetric_delays_stay_within_the_bound() {
        for offset in OFFSETS {
            for (out, back) in [(1, 999_999), (999_999, 1), (0, 7), (7, 0), (300, 301)] {
                let s = ping(10_000_000_000, offset, out, back);
                let error = s.offset_ns().abs_diff(offset);
                assert!(
                    error <= s.uncertainty_ns(),
                    "offset {offset}, {out}/{back}: {s:?} off by {error}"
                );
            }
        }
        // All of the round trip on one side: the bound is reached, not exceeded.
        let s = ping(1_000, 0, 1_000, 0);
        assert_eq!((s.offset_ns(), s.uncertainty_ns()), (500, 500));
    }

    #[test]
    fn a_ping_back_before_it_left_is_refused() {
        assert_eq!(Sample::new(10, 5, 9), None);
        assert!(Sample::new(10, 5, 10).is_some());
    }

    #[test]
    fn the_least_round_trip_wins() {
        let round = [
            ping(0, 5_000, 40_000, 400_000),
            ping(1_000_000, 5_000, 20_000, 30_000),
            ping(2_000_000, 5_000, 300, 200_000),
        ];
        let e = ClockEstimate::from_samples(&round).unwrap();
        assert_eq!(e.samples, 3);
        assert_eq!(e.uncertainty_ns, 25_000, "the 50 µs round trip");
        assert_eq!(
            e.offset_ns,
            5_000 - 5_000,
            "its 20/30 µs asymmetry moved it 5 µs"
        );
        assert_eq!(ClockEstimate::from_samples(&[]), None);
    }

    #[test]
    fn drift_grows_the_uncertainty() {
        // Ready: offset 1 ms, known within 50 µs.
        let ready = [ping(0, 1_000_000, 50_000, 50_000)];
        let mut t = ClockTrack::at_ready(false, &ready).unwrap();
        assert_eq!(
            (t.offset_ns(), t.uncertainty_ns(), t.drift_ns()),
            (1_000_000, 50_000, 0)
        );
        // A second later the worker's clock is 5 µs further ahead (5 ppm), pinged in 20 µs.
        t.observe(&[ping(1_000_000_000, 1_005_000, 10_000, 10_000)]);
        assert_eq!((t.drift_ns(), t.uncertainty_ns()), (5_000, 50_000));
        // 60 s later, 300 µs: the mapping may be off by 300 + 10 µs.
        t.observe(&[
            ping(60_000_000_000, 1_300_000, 10_000, 10_000),
            ping(60_001_000_000, 1_300_000, 400_000, 400_000),
        ]);
        assert_eq!((t.drift_ns(), t.uncertainty_ns()), (300_000, 310_000));
        // Drifting back does not narrow it: the bound holds for the whole run.
        t.observe(&[ping(61_000_000_000, 1_000_000, 1_000, 1_000)]);
        assert_eq!(
            (t.drift_ns(), t.uncertainty_ns(), t.samples()),
            (300_000, 310_000, 5)
        );
        assert_eq!(
            t.offset_ns(),
            1_000_000,
            "the mapping stays the one at ready"
        );
        assert_eq!(t.to_coordinator_ns(5_001_000_000), 5_000_000_000);
        assert_eq!(
            t.summary(3),
            WorkerClock {
                worker: 3,
                same_host: false,
                offset_us: 1_000,
                uncertainty_us: 310,
                drift_us: 300,
                pings: 5,
            }
        );
    }

    #[test]
    fn the_mapping_is_within_the_uncertainty_at_every_ping() {
        // A worker whose clock runs 20 ppm fast, pinged with uneven delays every second.
        let mut t = ClockTrack::at_ready(false, &[ping(0, 123_456, 30_000, 70_000)]).unwrap();
        for s in 1..=100u64 {
            let t0 = s * 1_000_000_000;
            let truth = 123_456 + (t0 / 1_000_000 * 20) as i64;
            t.observe(&[ping(t0, truth, 10_000 + s * 997 % 50_000, 40_000)]);
            let error = t.offset_ns().abs_diff(truth);
            assert!(error <= t.uncertainty_ns(), "at {s} s: {error} > {t:?}");
        }
    }

    #[test]
    fn the_same_host_is_exact_whatever_the_pings_say() {
        let pings = [ping(0, 9_000_000, 1_000, 500_000)];
        let mut t = ClockTrack::at_ready(true, &pings).unwrap();
        t.observe(&[ping(1_000_000_000, -4_000_000, 2_000_000, 1)]);
        assert!(t.is_same_host());
        assert_eq!((t.offset_ns(), t.uncertainty_ns(), t.drift_ns()), (0, 0, 0));
        assert_eq!(t.samples(), 2);
        assert_eq!(t.to_coordinator_ns(77), 77);
        assert_eq!(t.summary(0).uncertainty_us, 0);
        assert_eq!(
            ClockTrack::at_ready(false, &[]),
            None,
            "remote needs a ping"
        );
    }

    #[test]
    fn our_own_boot_id_is_the_same_host() {
        // Linux only: every CI host is.
        let ours = boot_id().expect("Linux has a boot id");
        assert!(same_host(&ours) && same_host(&format!("{ours}\n")));
        assert!(!same_host("00000000-0000-0000-0000-000000000000"));
        assert!(!same_host(""));
    }

    #[test]
    fn summary_rounds_the_offset_to_nearest_and_bounds_up() {
        let mut t = ClockTrack::remote(ClockEstimate {
            offset_ns: -1_500,
            uncertainty_ns: 1_001,
            samples: 1,
        });
        t.observe(&[]);
        let w = t.summary(1);
        assert_eq!((w.offset_us, w.uncertainty_us, w.drift_us), (-2, 2, 0));
        t.offset_ns = 1_499;
        assert_eq!(t.summary(1).offset_us, 1);
    }
}
