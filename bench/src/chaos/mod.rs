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
//! - [`environment`]: a workload's steady environment, probed at the start of the load.
//! - [`disk`]: the slow disk's probe (fdatasync in the node's data directory, on lazyfs)
//!   before, during and after the fault.
//! - [`network`]: what the runner adds to network faults (delay, loss, bandwidth, reset): the
//!   probe of the impaired path before, during and after, and the check that nothing is left.
//! - [`failpoint`](mod@failpoint)s: named places in the client code where a crash can be injected at an exact
//!   moment (etcd's gofail idea), such as "the client dies between SETNX and EXPIRE".

pub mod command;
pub mod disk;
pub mod environment;
pub mod failpoint;
pub mod holder;
pub mod network;
mod parse;
pub mod plan;
pub mod runner;

pub use failpoint::failpoint;

/// The client processes a chaos plan can stop: implemented by the coordinator's worker set
/// (the clients part, a layer above), so chaos depends on this trait and not on how clients are run.
pub trait ClientProcesses: Send + Sync {
    /// How many client processes there are.
    fn len(&self) -> usize;

    /// Whether there are none.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stops client `k` (SIGSTOP: everything in it freezes, keep-alives included).
    fn pause(&self, k: usize) -> std::io::Result<()>;

    /// Resumes client `k`.
    fn resume(&self, k: usize) -> std::io::Result<()>;

    /// Arms client `k` to stop itself when a lock holder next reaches `point`, or disarms it.
    fn arm_holder_pause(&self, k: usize, point: Option<holder::Point>) -> std::io::Result<()>;
}
pub use plan::{ChaosError, ChaosPlan, FaultKind, FaultSpec, Target};
pub use runner::{FaultRecord, run_faults};
