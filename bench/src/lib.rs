//! lockbench: a benchmark and chaos harness for distributed locks under a flash-sale workload.
//!
//! # Layout
//!
//! One run wires five parts together (Jepsen's db / client / generator / nemesis / checker,
//! applied to many strategies at once):
//!
//! - [`cluster`]: starts real servers (MariaDB, Redis, ZooKeeper, etcd) as child processes on
//!   free loopback ports, waits until they are ready, and owns them: every process dies with
//!   its guard. Or uses servers that already exist ([`cluster::target`]) under a prefix it
//!   claims and cleans up.
//! - [`strategy`]: how one buyer takes one unit of stock. Lock-based strategies implement
//!   [`strategy::Lock`] and share one critical section; lock-free ones implement
//!   [`strategy::Strategy`] directly. The [`strategy::Store`] audits the stock afterwards.
//! - [`workload`]: the TOML workload file (validated, with `--set` overrides) and the buyers'
//!   loop with its pacing (open loop by default, closed loop for saturation).
//! - [`chaos`]: fault injection; today failpoints (crash a client at an exact instruction),
//!   scheduled server and client faults with the chaos milestone.
//! - [`record`], [`check`], [`report`]: the recorder turns completions into HdrHistograms, a
//!   per-second timeline and an optional JSONL history; the checker judges the audited store;
//!   the report writes `summary.json` and prints tables.
//!
//! [`run`] wires them: start servers → prepare the store → load → audit → write results →
//! stop servers. [`cli`] is the command line; `main.rs` only maps its result to an exit code.

pub mod chaos;
pub mod check;
pub mod cli;
pub mod clients;
pub mod cluster;
pub mod names;
pub mod record;
pub mod report;
pub mod run;
pub mod sim;
pub mod strategy;
pub mod workload;
