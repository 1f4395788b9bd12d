//! Clients: the buyers that carry the workload out against a strategy.
//!
//! - [`driver`]: the buyers' loop. It needs only a [`crate::strategy::Strategy`], the
//!   workload's schedule and a sink for completions, so the same loop runs in the coordinator
//!   or in a worker process.
//! - [`protocol`]: what coordinator and worker processes say to each other (JSON lines).
//! - [`worker`]: `lockbench worker`, the worker process's side.
//! - [`workers`]: the coordinator's side: starts workers, forwards their completions, and
//!   lets the chaos runner pause them ([`crate::chaos::ClientProcesses`]).
//! - [`k8s`]: `lockbench k8s render`, Kubernetes manifests for a coordinator and its workers.

pub mod driver;
pub mod k8s;
pub mod protocol;
pub mod worker;
pub mod workers;
