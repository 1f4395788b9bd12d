//! The coordinator ↔ worker protocol, one JSON value per line. Coordinator → worker (stdin):
//! a [`Job`], then [`Control`] messages. Worker → coordinator (stdout): [`Event`]s — `Ready`
//! once connected, an `Interval` every [`crate::record::partial::FLUSH`] (what its attempts
//! measured, folded: [`crate::record::partial`]), with `--history` also one `Done` (the
//! completion) per attempt, `Paused` just before it stops itself, `Finished` at the end. Times
//! cross the process boundary as nanoseconds since the start of the load, which both sides
//! derive from CLOCK_MONOTONIC (system-wide on Linux), so leases of different processes stay
//! comparable for the double-grant check.

use std::io::Write;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::cluster::EndpointsFile;
use crate::record::{Completion, Interval, LeaseSpan, Outcome};
use crate::workload::pacing::Part;

/// What a worker runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Job {
    /// Strategy id.
    pub strategy: String,
    /// The effective workload as TOML (parsed again by the worker).
    pub workload: String,
    /// Where the servers are.
    pub endpoints: EndpointsFile,
    /// This worker's share of clients and arrivals.
    pub part: Part,
    /// Added to the bound of an attempt (longest planned pause of a client).
    pub extra_bound_ms: u64,
    /// The passwords are not in `endpoints` (they never cross a TCP link): read them from the
    /// worker's environment ([`crate::cluster::credentials::PASSWORD_ENV`]).
    #[serde(default)]
    pub passwords_from_env: bool,
    /// Also send one `Done` per attempt (for `history.jsonl`).
    #[serde(default)]
    pub history: bool,
}

/// Coordinator → worker.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Control {
    /// Start the load; the load's start is this CLOCK_MONOTONIC reading.
    Start { origin_ns: u64 },
    /// Stop (SIGSTOP) when a lock holder next reaches this point, or no longer (`None`).
    ArmHolderPause(Option<crate::chaos::holder::Point>),
    /// End the load now (Ctrl-C).
    Stop,
    /// For the agent of a TCP link: answer with [`Event::Pong`] at once (clock offset).
    Ping { id: u64 },
    /// For the agent: stop (SIGSTOP) the load process's whole group.
    Pause,
    /// For the agent: resume (SIGCONT) it.
    Resume,
    /// A fault boundary was marked, this long after the load's start: completions that end
    /// after it belong to the next phase.
    Boundary { at_ns: u64 },
}

/// A lease on the wire.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct WireLease {
    key: String,
    token: String,
    fence: Option<u64>,
    acquired: u64,
    released: u64,
    lost: bool,
    #[serde(default)]
    shared: bool,
}

/// A completion on the wire.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireCompletion {
    seq: u64,
    client: u32,
    sku: u32,
    #[serde(default)]
    read: bool,
    outcome: Outcome,
    intended: u64,
    started: u64,
    ended: u64,
    release_failed: bool,
    lease: Option<WireLease>,
    ask: crate::workload::Ask,
}

/// Worker → coordinator.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Event {
    /// Connected to the servers, waiting for the start.
    Ready,
    /// One attempt (only when the job asks for the history).
    Done(WireCompletion),
    /// What the attempts measured since the previous interval.
    Interval(Box<Interval>),
    /// About to stop itself (a holder pause).
    Paused,
    /// The load is over; every interval was sent.
    Finished(Finished),
    /// It could not run the job.
    Failed(String),
    /// The agent's answer to [`Control::Ping`]: its CLOCK_MONOTONIC when it answered.
    Pong { id: u64, t_ns: u64 },
}

/// What a worker says when it finished (its [`Event::Finished`]), as the coordinator keeps it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Finished {
    /// Arrivals it never started.
    pub(super) not_started: u64,
    /// Ended by a Stop.
    pub(super) cancelled: bool,
    /// Why the strategy's client broke (an adapter), if it did.
    #[serde(default)]
    pub(super) broken: Option<String>,
    /// From the start of the load until its last attempt ended (its last interval waits
    /// [`crate::record::partial::LAG`] more).
    #[serde(default)]
    pub(super) elapsed_ns: Option<u64>,
    /// The generator's own lag in the peak window, as this process measured it.
    #[serde(default)]
    pub(super) generator_lag: crate::record::GeneratorLag,
    /// Its attempts' round trips; `None` from a build that does not count them.
    #[serde(default)]
    pub(super) round_trips: Option<crate::record::trips::RoundTrips>,
}

pub(super) fn ns(t: Instant, start: Instant) -> u64 {
    t.saturating_duration_since(start).as_nanos() as u64
}

impl WireCompletion {
    /// Takes the completion by value: its key and token move, no copy per attempt.
    pub fn from(c: Completion, start: Instant) -> Self {
        Self {
            seq: c.seq,
            client: c.client,
            sku: c.sku,
            read: c.read,
            outcome: c.outcome,
            intended: ns(c.intended, start),
            started: ns(c.started, start),
            ended: ns(c.ended, start),
            release_failed: c.release_failed,
            lease: c.lease.map(|l| WireLease {
                key: l.key,
                token: l.token,
                fence: l.fence,
                acquired: ns(l.acquired, start),
                released: ns(l.released, start),
                lost: l.lost,
                shared: l.shared,
            }),
            ask: c.ask,
        }
    }

    /// The completion, its times from `start`.
    pub fn into_completion(self, start: Instant) -> Completion {
        let at = |n: u64| start + Duration::from_nanos(n);
        Completion {
            seq: self.seq,
            client: self.client,
            sku: self.sku,
            read: self.read,
            outcome: self.outcome,
            intended: at(self.intended),
            started: at(self.started),
            ended: at(self.ended),
            release_failed: self.release_failed,
            lease: self.lease.map(|l| LeaseSpan {
                key: l.key,
                token: l.token,
                fence: l.fence,
                acquired: at(l.acquired),
                released: at(l.released),
                lost: l.lost,
                shared: l.shared,
                loss: None,
            }),
            ask: self.ask,
        }
    }
}

/// Writes one event as a line.
pub fn emit(out: &mut impl Write, e: &Event) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, e)?;
    out.write_all(b"\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Workload;

    #[test]
    fn a_workload_crosses_to_a_worker_unchanged() {
        let w = Workload::parse(
            "w.toml",
            "seed = 5\n[load]\nmax_attempts = 7\nduration = \"1m 500ms\"\nshape = \"sale\"\n\
             start = \"2s\"\nrise = \"20ms\"\npeak = 50000\nhalf_life = \"1s\"\ntail = 800\n\
             [lock]\nttl = \"1500ms\"",
            &[],
        )
        .expect("valid");
        let text = toml::to_string(&w).expect("serialises");
        let back = Workload::parse("<coordinator>", &text, &[]).expect("parses back");
        assert_eq!(
            serde_json::to_value(&w).unwrap(),
            serde_json::to_value(&back).unwrap()
        );
    }

    /// A completion as a worker sends it.
    fn done_line(c: Completion, start: Instant) -> String {
        serde_json::to_string(&Event::Done(WireCompletion::from(c, start))).unwrap()
    }

    /// A completion as the coordinator reads it.
    fn read_done(line: &str, start: Instant) -> Completion {
        let Event::Done(back) = serde_json::from_str(line).unwrap() else {
            panic!("not a completion: {line}");
        };
        back.into_completion(start)
    }

    #[test]
    fn completions_keep_their_times_across_the_pipe() {
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        let c = Completion {
            seq: 3,
            client: 1,
            sku: 2,
            intended: at(1),
            started: at(2),
            release_failed: true,
            lease: Some(LeaseSpan {
                fence: Some(4),
                lost: true,
                ..LeaseSpan::fixture("k", "t", at(3), at(8))
            }),
            ..Completion::fixture(
                Outcome::Failed(crate::record::ErrorKind::StaleToken),
                at(9),
                Duration::ZERO,
            )
        };
        let line = done_line(c.clone(), start);
        let back = read_done(&line, start);
        assert_eq!(
            (back.outcome, back.ended, back.seq),
            (c.outcome, c.ended, 3)
        );
        let (l, b) = (c.lease.unwrap(), back.lease.unwrap());
        assert_eq!(
            (l.acquired, l.released, l.fence, l.lost),
            (b.acquired, b.released, b.fence, b.lost)
        );
    }

    #[test]
    fn a_read_crosses_with_the_stock_it_saw_and_its_shared_lease() {
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        let c = Completion {
            seq: 4,
            sku: 1,
            read: true,
            lease: Some(LeaseSpan {
                shared: true,
                ..LeaseSpan::fixture("k", "r", at(2), at(4))
            }),
            ..Completion::fixture(
                Outcome::TornRead { stock: 7, later: 6 },
                at(5),
                Duration::from_millis(4),
            )
        };
        let line = done_line(c, start);
        let back = read_done(&line, start);
        assert!(back.read);
        assert_eq!(back.outcome, Outcome::TornRead { stock: 7, later: 6 });
        assert!(back.lease.unwrap().shared);
        // A worker of an older build sends neither: a write with an exclusive lease.
        let old = line
            .replace(",\"read\":true", "")
            .replace(",\"shared\":true", "");
        assert_ne!(old, line);
        let old = read_done(&old, start);
        assert!(!old.read && !old.lease.unwrap().shared);
    }

    #[test]
    fn a_worker_s_round_trips_cross_with_its_last_message() {
        let trips = crate::record::trips::RoundTrips {
            attempts: 3,
            round_trips: 21,
        };
        let finished = |round_trips| {
            Event::Finished(Finished {
                not_started: 0,
                cancelled: false,
                broken: None,
                elapsed_ns: None,
                generator_lag: Default::default(),
                round_trips,
            })
        };
        let line = serde_json::to_string(&finished(Some(trips))).unwrap();
        let back: Event = serde_json::from_str(&line).unwrap();
        assert!(matches!(back, Event::Finished(f) if f.round_trips == Some(trips)));
        // A worker of an older build counts none: not a count of 0.
        let old = line.replace(",\"round_trips\":{\"attempts\":3,\"round_trips\":21}", "");
        assert_ne!(old, line);
        let back: Event = serde_json::from_str(&old).unwrap();
        assert!(matches!(back, Event::Finished(f) if f.round_trips.is_none()));
    }
}
