//! The host's monotonic clock, as every process of a run reads it: the coordinator, its
//! workers and the adapter processes stamp events with it, so their readings compare directly
//! on one host (and, with the offsets `clients::clock` pings, across hosts).

use std::time::{Duration, Instant};

use nix::time::{ClockId, clock_gettime};

/// CLOCK_MONOTONIC in ns (shifted by the test knob [`CLOCK_SHIFT_ENV`], to play another host).
pub fn monotonic_ns() -> u64 {
    static SHIFT: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let shift = *SHIFT.get_or_init(|| {
        std::env::var(CLOCK_SHIFT_ENV)
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .map_or(0, |ms| ms * 1_000_000)
    });
    let t = clock_gettime(ClockId::CLOCK_MONOTONIC).expect("CLOCK_MONOTONIC is always there");
    t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64 + shift
}

/// Test knob: milliseconds added to this process's clock readings (with the worker link's
/// fake boot id, a worker on this host plays one on another host).
pub const CLOCK_SHIFT_ENV: &str = "LOCKBENCH_TEST_CLOCK_SHIFT_MS";

/// The `Instant` of this process at the [`monotonic_ns`] reading `ns`.
///
/// Every time that crosses a process boundary (a worker's leases, an adapter's grants) is
/// converted through this one pairing. Reading the two clocks side by side at each conversion
/// would put any preemption between the reads into the times: on a loaded host that shifted a
/// worker's leases by 53–85 µs against another's, enough to read a row lock's hand-off as a
/// double grant.
pub fn instant_at(ns: u64) -> Instant {
    let (t, at) = *pairing();
    if ns >= at {
        t + Duration::from_nanos(ns - at)
    } else {
        t.checked_sub(Duration::from_nanos(at - ns)).unwrap_or(t)
    }
}

/// The [`monotonic_ns`] reading at this process's `Instant` `t` (the inverse of [`instant_at`]).
pub fn monotonic_at(t: Instant) -> u64 {
    let (p, at) = *pairing();
    if t >= p {
        at + (t - p).as_nanos() as u64
    } else {
        at.saturating_sub((p - t).as_nanos() as u64)
    }
}

/// Pairs of reads tried for [`pairing`]: the tightest bracket is kept, so one preemption cannot
/// skew it; 32 pairs of reads take a few µs.
const PAIRING_TRIES: usize = 32;

/// One `Instant` and the [`monotonic_ns`] reading at the same moment, taken once per process:
/// std's `Instant` reads CLOCK_MONOTONIC on Linux but hides the value, so the two differ by a
/// constant that only a bracketed read can find.
fn pairing() -> &'static (Instant, u64) {
    static PAIR: std::sync::OnceLock<(Instant, u64)> = std::sync::OnceLock::new();
    PAIR.get_or_init(|| tightest_pair(PAIRING_TRIES, monotonic_ns, Instant::now))
}

/// Of `tries` brackets `mono, instant, mono`, the instant of the narrowest with its bracket's
/// midpoint: off by at most half that bracket.
fn tightest_pair<I: Copy>(
    tries: usize,
    mut mono: impl FnMut() -> u64,
    mut instant: impl FnMut() -> I,
) -> (I, u64) {
    let mut best: Option<(u64, I, u64)> = None;
    for _ in 0..tries.max(1) {
        let before = mono();
        let i = instant();
        let after = mono();
        let width = after.saturating_sub(before);
        if best.is_none_or(|(w, _, _)| width < w) {
            best = Some((width, i, before + width / 2));
        }
    }
    let (_, i, at) = best.expect("at least one try");
    (i, at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_narrowest_bracket_wins_over_a_preempted_one() {
        // Instants are stand-ins (a counter); the first bracket was preempted for 80 µs, the
        // second is 40 ns wide, the third 10 ns.
        let reads = [0u64, 80_000, 100_000, 100_040, 200_000, 200_010];
        let mut k = 0;
        let mut n = 0u32;
        let (i, at) = tightest_pair(
            3,
            || {
                k += 1;
                reads[k - 1]
            },
            || {
                n += 1;
                n
            },
        );
        assert_eq!((i, at), (3, 200_005));
    }

    #[test]
    fn instant_and_monotonic_convert_back_and_forth() {
        let now = Instant::now();
        let ns = monotonic_at(now);
        let back = instant_at(ns);
        let diff = if back > now { back - now } else { now - back };
        assert!(diff < Duration::from_micros(1), "{diff:?}");
        // The pairing and a fresh reading agree to within a bracket (both read one clock).
        let fresh = monotonic_ns();
        let mapped = monotonic_at(Instant::now());
        assert!(mapped.abs_diff(fresh) < 5_000_000, "{mapped} vs {fresh}");
    }
}
