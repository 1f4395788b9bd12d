//! The host's monotonic clock, as every process of a run reads it: the coordinator, its
//! workers and the adapter processes stamp events with it, so their readings compare directly
//! on one host (and, with the offsets `clients::clock` pings, across hosts).

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
