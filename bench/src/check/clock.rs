//! Clock domains: which clock a lease was timed on, and how far off its mapping onto the
//! coordinator's clock may be.
//!
//! Domain [`COORDINATOR`] (0) is the coordinator's host: its own buyers and every worker on the
//! same host share one CLOCK_MONOTONIC (system-wide on Linux), so their leases compare exactly.
//! Each remote worker is a domain of its own: its times are mapped onto the coordinator's with
//! an offset measured by ping, off by at most its uncertainty (`clients::clock` measures it).
//! The [`ClockTable`] holds the current uncertainty of every domain; it is shared between the
//! pings that raise it and the double-grant checker that reads it.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

/// The coordinator's host: exact, uncertainty 0.
pub const COORDINATOR: u32 = 0;

/// The uncertainty of each clock domain, ns, shared between writer (pings) and reader (the
/// double-grant checker). Lock-free: one relaxed atomic per domain, read only for pairs of
/// overlapping leases from different domains.
#[derive(Debug)]
pub struct ClockTable {
    uncertainty_ns: Box<[AtomicU64]>,
}

impl ClockTable {
    /// A table of `domains` domains (the coordinator's included: `remote workers + 1`), all
    /// exact until set.
    pub fn new(domains: u32) -> Self {
        Self {
            uncertainty_ns: (0..domains.max(1)).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Number of domains, the coordinator's included.
    pub fn domains(&self) -> u32 {
        self.uncertainty_ns.len() as u32
    }

    /// Sets how far `domain`'s mapped times may be off, ns (a remote worker's current
    /// `ClockTrack::uncertainty_ns`). The coordinator's domain is exact by definition: setting
    /// it, or a domain beyond the table, is a bug.
    pub fn set_uncertainty_ns(&self, domain: u32, ns: u64) {
        assert!(
            domain != COORDINATOR && domain < self.domains(),
            "clock domain {domain} cannot be set (table of {})",
            self.domains()
        );
        self.uncertainty_ns[domain as usize].store(ns, Ordering::Relaxed);
    }

    /// How far `domain`'s mapped times may be off, ns. A domain beyond the table reads 0: an
    /// unknown clock never excuses an overlap.
    pub fn uncertainty_ns(&self, domain: u32) -> u64 {
        self.uncertainty_ns
            .get(domain as usize)
            .map_or(0, |u| u.load(Ordering::Relaxed))
    }
}

/// One worker's clock as a run measured it, for summary.json. All µs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerClock {
    /// Worker index.
    pub worker: u32,
    /// On the coordinator's host (same boot id): one clock, exact, nothing estimated.
    pub same_host: bool,
    /// The worker's clock minus the coordinator's, measured at ready (the mapping used for the
    /// whole run), rounded to the nearest µs.
    pub offset_us: i64,
    /// How far that mapping may have been off at any ping of the run (rounded up).
    pub uncertainty_us: u64,
    /// How far the measured offset moved from the one at ready (rounded up).
    pub drift_us: u64,
    /// Pings answered (at ready and during the run).
    pub pings: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_coordinator_is_exact_and_unknown_domains_excuse_nothing() {
        let t = ClockTable::new(3);
        t.set_uncertainty_ns(2, 1_000);
        assert_eq!(
            (0..4).map(|d| t.uncertainty_ns(d)).collect::<Vec<_>>(),
            [0, 0, 1_000, 0]
        );
    }

    #[test]
    #[should_panic(expected = "cannot be set")]
    fn setting_the_coordinators_domain_is_a_bug() {
        ClockTable::new(2).set_uncertainty_ns(COORDINATOR, 1);
    }
}
