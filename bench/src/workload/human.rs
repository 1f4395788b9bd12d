//! Durations as a workload file writes them (`"10s"`, `"2ms"`), for the effective workload in
//! `summary.json` and the text a worker process parses back.

use std::time::Duration;

use serde::Serializer;

/// A duration as humantime prints it.
pub(super) fn human<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&humantime::format_duration(*d).to_string())
}

/// An optional duration: absent stays absent.
pub(super) fn human_opt<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => human(d, s),
        None => s.serialize_none(),
    }
}
