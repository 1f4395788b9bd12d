//! PostgreSQL in containers of the run's Docker network.

use std::net::SocketAddr;

use super::super::containers::Containers;
use super::super::durability::SynchronousCommit;
use super::super::error::ClusterError;
use super::super::model::PostgresEndpoint;
use super::super::node::Node;
use super::NAME;

fn not_yet() -> ClusterError {
    ClusterError::Setup {
        node: NAME.into(),
        what: "start".into(),
        detail: "PostgreSQL has no container image yet; use --provision local".into(),
    }
}

pub(super) async fn start_primary(
    _run: &Containers,
    _sync: SynchronousCommit,
) -> Result<(Node, PostgresEndpoint, String), ClusterError> {
    Err(not_yet())
}

pub(super) async fn start_replica(
    _run: &Containers,
    _from: (SocketAddr, &str),
    _sync: SynchronousCommit,
) -> Result<Node, ClusterError> {
    Err(not_yet())
}
