//! Durations written as people read them (`"10s"`, `"1m 500ms"`): in `summary.json` and in the
//! effective workload a worker parses back. A leaf, so config and sale both use it.

use std::time::Duration;

use serde::Serializer;

/// Serialises a duration as humantime's text, which the workload file's parser reads back.
pub(super) fn human<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&humantime::format_duration(*d).to_string())
}
