//! Clients: the buyers that carry the workload out against a strategy.
//!
//! - [`clock`]: how far each worker's clock is from the coordinator's, estimated by ping, and
//!   how sure of it we are (pure logic).
//! - [`driver`]: the buyers' loop. It needs only a [`crate::strategy::Strategy`], the
//!   workload's schedule and a sink for completions, so the same loop runs in the coordinator
//!   or in a worker process.
//! - [`protocol`]: what coordinator and worker processes say to each other (JSON lines).
//! - [`worker`]: `lockbench worker`, the worker process's side.
//! - [`workers`]: the coordinator's side: starts workers, forwards their completions, and
//!   lets the chaos runner pause them ([`crate::chaos::ClientProcesses`]).

pub mod clock;
pub mod driver;
pub mod protocol;
pub mod worker;
pub mod workers;
