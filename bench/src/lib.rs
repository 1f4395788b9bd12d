//! lockbench: a benchmark and chaos harness for distributed locks under a flash-sale workload.
//!
//! # Layout
//!
//! One run wires the parts together (Jepsen's db / client / generator / nemesis / checker,
//! applied to many strategies at once); each imports only the parts below it, and
//! ARCHITECTURE.md at the repository root draws them and the path of one attempt:
//!
//! - [`cluster`]: real servers (MariaDB, Redis, ZooKeeper, etcd), one module per service,
//!   started by a backend (local processes or containers) on free ports and owned: every
//!   process dies with its guard. Or servers that already exist ([`cluster::target`]).
//! - [`workload`]: the TOML workload file and the seeded schedule of arrivals.
//! - [`check`]: the verdict — the audited store and the double-grant checker.
//! - [`record`]: completions into HdrHistograms, a per-second timeline, a JSONL history.
//! - [`chaos`]: fault plans and the runner that injects and always heals them.
//! - [`strategy`]: how one buyer takes one unit; each strategy declares its registry entry.
//! - [`clients`]: the buyers' loop, in this process or in worker processes.
//! - [`report`]: `summary.json`, tables, report.html, the regression gate.
//! - [`run`]: one run in named steps; [`cli`] is the command line; `main.rs` only maps its
//!   result to an exit code.
//! - [`logging`]: lockbench's own warnings to the terminal, every crate's events to the log
//!   file of the run under way.
//! - [`clock`]: the host's monotonic clock every process of a run stamps events with.
//! - [`stats`]: binomial bounds and what they decide (capacity steps, percentile intervals).
//! - [`sim`]: an in-memory lock and store that tests lockbench's own pipeline.

/// Asserts that `text` contains each of `parts`, and shows the text when it does not.
#[cfg(test)]
macro_rules! assert_contains {
    ($text:expr, $($part:expr),+ $(,)?) => {{
        let text = &$text;
        $(assert!(text.contains($part), "{:?} is not in:\n{}", $part, text);)+
    }};
}

pub mod chaos;
pub mod check;
pub mod cli;
pub mod clients;
pub mod clock;
pub mod cluster;
pub mod logging;
pub mod names;
pub mod record;
pub mod report;
pub mod reproduce;
pub mod run;
pub mod sim;
pub mod stats;
pub mod strategy;
pub mod workload;

#[cfg(test)]
mod assert_contains_tests {
    #[test]
    fn every_part_must_be_there() {
        assert_contains!("a sale, sold out", "sale", "sold out");
    }

    #[test]
    #[should_panic(expected = "\"oversold\" is not in:\na sale, sold out")]
    fn a_missing_part_fails_and_shows_the_text() {
        assert_contains!("a sale, sold out", "sale", "oversold");
    }
}
