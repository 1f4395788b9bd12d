//! Chaos: what breaks, when, and how it is healed.
//!
//! - [`plan`]: the chaos file (a list of faults or a seeded random schedule), validated against
//!   the workload.
//! - [`runner`]: carries the plan out against the cluster and the client workers while the load
//!   runs, records when each fault really started and ended, and heals every fault before it
//!   returns (the cluster's and workers' guards cover panics).
//! - [`command`]: the shell commands of `command` faults (faults on servers lockbench does
//!   not own), bounded, their output logged.
//! - [`holder`]: the hook that pauses a client process at a point of a lock holder's attempt
//!   (by default between its read of the stock and its write).
//! - [`failpoint`](mod@failpoint)s: named places in the client code where a crash can be injected at an exact
//!   moment (etcd's gofail idea), such as "the client dies between SETNX and EXPIRE".

pub mod command;
pub mod failpoint;
pub mod holder;
pub mod plan;
pub mod runner;

pub use failpoint::failpoint;
pub use plan::{ChaosError, ChaosPlan, FaultKind, FaultSpec, Target};
pub use runner::{FaultRecord, run_faults};
