//! One node of a run: what it is ([`Node`]) and the owned guard of what serves it
//! ([`NodeServer`]: a child process, a container).

use std::net::SocketAddr;
use std::path::Path;

use async_trait::async_trait;

use super::error::ClusterError;
use super::model::{ContainerInfo, Role, Service};

/// One server of a run, with the address it was given and what serves it.
#[derive(Debug)]
pub struct Node {
    /// Unique within the run, e.g. `mariadb` or `redis-1`; used in logs and errors.
    pub name: String,
    /// What the node serves.
    pub service: Service,
    /// Its place in its set.
    pub role: Role,
    /// Its own address: on loopback, in a network namespace of the run, or a container's
    /// address on the run's Docker network.
    pub addr: SocketAddr,
    /// Server version as the server reports it.
    pub version: String,
    /// The owned process or container; dropping the cluster stops it. Faults reach the node
    /// through it.
    pub server: Box<dyn NodeServer>,
}

/// What serves one node, owned: dropping it stops the node (and removes its container).
#[async_trait]
pub trait NodeServer: std::any::Any + std::fmt::Debug + Send + Sync {
    /// OS pid of the process, or host pid of the container's main process.
    fn pid(&self) -> u32;

    /// The file that receives the node's output.
    fn log(&self) -> &Path;

    /// The container serving the node, if a container does.
    fn container(&self) -> Option<ContainerInfo> {
        None
    }

    /// Ok while the node runs; otherwise how it ended (with the tail of its log). `name`
    /// names it in the error.
    async fn check_running(&mut self, name: &str) -> Result<(), ClusterError>;

    /// SIGKILL (a crash: no shutdown, no flush).
    async fn kill(&mut self) -> Result<(), ClusterError>;

    /// Starts it again with its original command line and data; returns whether clients can
    /// reach it now (not while a partition holds it off the network).
    async fn restart(&mut self) -> Result<bool, ClusterError>;

    /// Stops it from answering while it keeps its sockets.
    async fn pause(&mut self) -> Result<(), ClusterError>;

    /// Undoes [`NodeServer::pause`]. Idempotent.
    async fn resume(&mut self) -> Result<(), ClusterError>;
}
