//! Workload: who buys, how often, for how long, and what the critical section does.
//!
//! - [`config`]: the TOML file (raw → validated [`Workload`]), with `--set` overrides.
//! - [`pacing`]: when each attempt is *intended* to start (open loop) — the schedule is drawn
//!   from the seed, so the same seed gives the same arrivals and SKUs.
//! - [`driver`]: the buyers' loop. It only needs a [`crate::strategy::Strategy`] and a sink for
//!   completions, so it can run in this process or, later, in a worker process.

pub mod config;
pub mod driver;
pub mod pacing;
pub mod workers;

pub use config::{Arrival, LoadMode, Workload, WorkloadError};
