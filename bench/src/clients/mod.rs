//! Clients: the buyers that carry the workload out against a strategy.
//!
//! - [`clock`]: how far each worker's clock is from the coordinator's, estimated by ping, and
//!   how sure of it we are (pure logic).
//! - [`driver`]: the buyers' loop. It needs only a [`crate::strategy::Strategy`], the
//!   workload's schedule and a sink for completions, so the same loop runs in the coordinator
//!   or in a worker process.
//! - [`protocol`]: what coordinator and worker processes say to each other (JSON lines).
//! - [`worker`]: `lockbench worker`, the load process's side.
//! - [`link`]: the TCP link's handshake (a shared token, never sent).
//! - [`agent`]: `lockbench worker --connect`, which runs a load process for a coordinator
//!   reached over TCP, possibly on another host.
//! - [`workers`]: the coordinator's side: starts or admits workers, forwards their results,
//!   and lets the chaos runner pause them ([`crate::chaos::ClientProcesses`]).
//! - [`k8s`]: `lockbench k8s render`, Kubernetes manifests for a coordinator and its workers.

pub mod agent;
pub mod clock;
pub mod driver;
pub mod k8s;
pub mod link;
pub mod protocol;
pub mod worker;
pub mod workers;

/// How a run reaches its worker processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum WorkerLink {
    /// Load processes this process starts, over their stdin and stdout.
    #[default]
    Pipe,
    /// Agents this process starts on this host (in the run's network namespaces when it has
    /// them), over TCP with the same messages and a fresh token: the transport of remote
    /// workers, tried on one machine.
    Tcp,
    /// Tasks of this process over in-memory pipes, with the same messages, sharing a strategy
    /// the caller built: the simulated pipeline's workers (tests of the harness only).
    #[value(skip)]
    InProcess,
    /// Agents on other hosts that connect to `lockbench coordinate --listen`.
    #[value(skip)]
    Remote {
        /// Where to listen.
        listen: std::net::SocketAddr,
        /// How long to wait for every worker.
        wait: std::time::Duration,
    },
}
