//! What a worker's interval is made of on the wire, shared by its histograms
//! ([`super::partial`]) and its lease rows ([`super::lease_rows`]): times as ns since the
//! run's start, and why an interval did not decode.

use std::time::{Duration, Instant};

/// ns since `start` (wire times).
pub(super) fn ns(t: Instant, start: Instant) -> u64 {
    t.saturating_duration_since(start).as_nanos() as u64
}

/// A wire time back on this clock.
pub(super) fn at(start: Instant, ns: u64) -> Instant {
    start + Duration::from_nanos(ns)
}

/// Why an interval could not be decoded (a bug or a foreign build on the other side).
#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    /// The interval log did not parse.
    #[error("interval log: {0}")]
    Log(String),
    /// A histogram did not decode.
    #[error("histogram {tag}: {detail}")]
    Histogram {
        /// Its tag.
        tag: String,
        /// What went wrong.
        detail: String,
    },
    /// A tag names nothing this build records.
    #[error("unknown histogram tag {0:?}")]
    Tag(String),
    /// Counts and histograms disagree.
    #[error("{0}")]
    Inconsistent(String),
    /// The lease rows are cut short or point outside their tables.
    #[error("lease rows: {0}")]
    Leases(String),
}
