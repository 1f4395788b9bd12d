//! What the faults did: one entry per fault (when it really started and healed, how long the
//! system took to serve again) and the measurements of each phase between fault boundaries.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::format::round;
use crate::chaos::FaultRecord;
use crate::chaos::network::LinkProbe;
use crate::record::phases::{PhaseData, Segment};
use crate::record::{ErrorKind, LatencySummary, Outcome};

/// One fault as it happened. Times are seconds from the start of the load.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FaultSummary {
    /// 1-based, in start order.
    pub id: usize,
    /// e.g. `pause holder`, `kill master`.
    pub label: String,
    /// What the plan asked for (kind, target, service, at, duration, clock change).
    pub plan: serde_json::Value,
    /// What it hit: node names or `worker-K`.
    pub nodes: Vec<String>,
    /// When it took effect (`null`: it never did; see `note`).
    pub started_s: Option<f64>,
    /// When it was healed.
    pub healed_s: Option<f64>,
    /// From the start of the fault to the first served attempt (a sale or a definite
    /// "sold out") that ended after it; 0 when service never stopped.
    pub first_served_after_start_s: Option<f64>,
    /// From the heal to the first served attempt after it: the recovery time.
    pub recovery_s: Option<f64>,
    /// From the start of the fault to the moment a replica of the Redis Cluster slot whose
    /// master it hit answered as master (`null`: no promotion seen, or not such a fault).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promotion_s: Option<f64>,
    /// Longest stretch without any served attempt overlapping the fault and its recovery
    /// (stretches under 5 ms are not tracked and count as 0).
    pub unavailable_s: Option<f64>,
    /// Why it did not happen as planned, or what failed while healing it.
    pub note: Option<String>,
    /// A network fault's probe: TCP connect round trips through the impaired path before,
    /// during and after the fault, what its queue saw, and what the heal left (nothing).
    ///
    /// A slow disk's probe: fdatasync after a small write in the node's data directory
    /// (`rtt_ms`: each fdatasync's time), before, during and after the fault.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<LinkProbe>,
    /// A power loss: the bytes its nodes had written and not fsynced, dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped_bytes: Option<u64>,
    /// A power loss: the files those bytes were in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped_files: Option<u64>,
}

/// Measurements between two fault boundaries.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PhaseSummary {
    /// `before`, `during 1`, `after 1`, `during 1+2`, ...
    pub name: String,
    /// Faults active in this phase.
    pub faults: Vec<usize>,
    /// Start, seconds from the start of the load.
    pub from_s: f64,
    /// End.
    pub to_s: f64,
    /// Attempts that ended in this phase.
    pub attempts: u64,
    /// Of which sales (client view).
    pub sold: u64,
    /// Definite failures.
    pub errors: u64,
    /// Unknown outcomes.
    pub unknown: u64,
    /// Lock or optimistic-retry timeouts.
    pub lock_timeouts: u64,
    /// Attempts per second of the phase.
    pub attempts_per_s: f64,
    /// Sales per second of the phase.
    pub sales_per_s: f64,
    /// Latency from the intended start of every attempt that ended in the phase.
    pub latency_us: LatencySummary,
}

/// Seconds from `start` to `t`, to the millisecond.
fn secs(t: Instant, start: Instant) -> f64 {
    round(t.saturating_duration_since(start).as_secs_f64(), 3)
}

/// Builds the fault and phase summaries. `end` is when the load ended.
pub fn summarize(
    records: &[FaultRecord],
    data: &PhaseData,
    start: Instant,
    end: Instant,
) -> (Vec<FaultSummary>, Vec<PhaseSummary>) {
    let faults = records
        .iter()
        .map(|r| fault_summary(r, data, start, end))
        .collect();
    if records.is_empty() {
        return (faults, Vec::new());
    }
    let mut phases = Vec::new();
    for (j, seg) in data.segments.iter().enumerate() {
        let from = if j == 0 {
            start
        } else {
            data.boundaries[j - 1]
        };
        let to = data.boundaries.get(j).copied().unwrap_or(end).max(from);
        phases.push(phase_summary(records, seg, from, to, start));
    }
    (faults, phases)
}

/// How long after boundary `t` the first attempt was served, if `t` is a boundary.
fn first_after(data: &PhaseData, t: Instant) -> Option<Duration> {
    data.boundaries
        .iter()
        .position(|b| *b == t)
        .and_then(|i| data.first_served[i])
        .map(|f| f.saturating_duration_since(t))
}

/// What one fault did: when it started and healed, and how long service took to come back.
fn fault_summary(r: &FaultRecord, data: &PhaseData, start: Instant, end: Instant) -> FaultSummary {
    let recovery = r.healed.and_then(|t| first_after(data, t));
    let recovered_at = r.healed.zip(recovery).map(|(h, d)| h + d);
    let unavailable = r.started.map(|s| {
        let to = recovered_at.or(r.healed).unwrap_or(end);
        data.longest_gap(s, to)
    });
    let s = |d: Duration| round(d.as_secs_f64(), 3);
    FaultSummary {
        id: r.spec.id,
        label: r.spec.label(),
        plan: serde_json::to_value(&r.spec).expect("fault spec serialises"),
        nodes: r.summary_nodes(),
        started_s: r.started.map(|t| secs(t, start)),
        healed_s: r.healed.map(|t| secs(t, start)),
        first_served_after_start_s: r.started.and_then(|t| first_after(data, t)).map(s),
        recovery_s: recovery.map(s),
        promotion_s: r
            .started
            .zip(r.promoted)
            .map(|(a, b)| s(b.saturating_duration_since(a))),
        unavailable_s: unavailable.map(s),
        note: r.note.clone(),
        probe: r.probe.clone(),
        dropped_bytes: r.dropped.map(|d| d.bytes),
        dropped_files: r.dropped.map(|d| d.files),
    }
}

/// The measurements of the phase from `from` to `to`, named by the faults active in it.
fn phase_summary(
    records: &[FaultRecord],
    seg: &Segment,
    from: Instant,
    to: Instant,
    start: Instant,
) -> PhaseSummary {
    let (name, active) = phase_name(records, from);
    let attempts: u64 = seg.counts.iter().sum();
    let len = to.saturating_duration_since(from).as_secs_f64();
    let rate = |n: u64| {
        if len > 0.0 {
            round(n as f64 / len, 1)
        } else {
            0.0
        }
    };
    let sold = seg.counts[Outcome::Sold.class()];
    PhaseSummary {
        name,
        faults: active,
        from_s: secs(from, start),
        to_s: secs(to, start),
        attempts,
        sold,
        errors: seg.counts[Outcome::Failed(ErrorKind::Server).class()],
        unknown: seg.counts[Outcome::Unknown(ErrorKind::Timeout).class()],
        lock_timeouts: seg.counts[Outcome::LockTimeout.class()],
        attempts_per_s: rate(attempts),
        sales_per_s: rate(sold),
        latency_us: LatencySummary::of(&seg.latency),
    }
}

/// The name of a phase starting at `from` (`during 1+2`, `after 2`, `before`), and the faults
/// active in it.
fn phase_name(records: &[FaultRecord], from: Instant) -> (String, Vec<usize>) {
    let active: Vec<usize> = records
        .iter()
        .filter(|r| r.started.is_some_and(|s| s <= from) && r.healed.is_none_or(|h| h > from))
        .map(|r| r.spec.id)
        .collect();
    let last_healed = records
        .iter()
        .filter(|r| r.healed.is_some_and(|h| h <= from))
        .max_by_key(|r| r.healed)
        .map(|r| r.spec.id);
    let list = |ids: &[usize]| {
        ids.iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join("+")
    };
    let name = match (active.is_empty(), last_healed) {
        (false, _) => format!("during {}", list(&active)),
        (true, Some(id)) => format!("after {id}"),
        (true, None) => "before".to_string(),
    };
    (name, active)
}
