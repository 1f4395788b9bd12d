//! Workload: who buys, how often, for how long, and what the critical section does.
//!
//! - [`config`]: the TOML file (raw → validated [`Workload`]), with `--set` overrides.
//! - [`pacing`]: when each attempt is *intended* to start (open loop) — the schedule is drawn
//!   from the seed, so the same seed gives the same arrivals and SKUs.
//! - [`sale`]: buyers as people (`[buyers]`), the SKUs' popularity, and the [`Ask`] (buyer,
//!   request id, units) each arrival carries.
//! - [`pay`]: reserve, then pay (`[pay]`): who abandons, when the others pay, when a
//!   reservation expires and how the reapers run.
//!
//! The buyers that follow the schedule live in the clients part, a layer above.

pub mod config;
mod human;
mod number;
pub mod pacing;
pub mod pay;
pub mod sale;
mod span;
pub mod trace;

pub use config::{Arrival, LoadMode, LockParams, Precheck, WaitMode, Workload, WorkloadError};
pub use pay::{DelayRange, Pay};
pub use sale::{Ask, Buyers, Popularity, Quantity, SaleCurve, Shape};
pub use trace::Trace;
