//! A private PostgreSQL: its own data directory and port, a `lockbench` database and a
//! password user for TCP clients.
//!
//! Placeholder while the service is built (issue 29): it declares the service so the model,
//! the registry and the strategies compile, and refuses to start.

use std::net::SocketAddr;

use async_trait::async_trait;

use super::builds::Builds;
use super::durability::{Durability, Source};
use super::error::ClusterError;
use super::kind::{ServiceKind, Started};
use super::model::{ClusterOptions, Endpoints, Needs, NodeInfo, Service};
use super::provision::Launcher;

/// The PostgreSQL server: the lock service of the `pg-*` strategies, and their store.
pub(super) struct Postgres;

#[async_trait]
impl ServiceKind for Postgres {
    fn service(&self) -> Service {
        Service::Postgres
    }

    fn wanted(&self, needs: Needs) -> bool {
        needs.postgres
    }

    fn check_installed(&self, _: Builds) -> Result<(), ClusterError> {
        Err(ClusterError::Setup {
            node: "postgres".into(),
            what: "start".into(),
            detail: "not built yet".into(),
        })
    }

    fn port_names(&self, _needs: Needs) -> Vec<String> {
        vec!["postgres".into()]
    }

    async fn start(
        &self,
        _l: Launcher<'_>,
        _needs: Needs,
        _opts: &ClusterOptions,
    ) -> Result<Started, ClusterError> {
        Err(self.check_installed(Builds::default()).unwrap_err())
    }

    async fn durability(
        &self,
        _addr: SocketAddr,
        _ep: &Endpoints,
        _unasked: Source,
    ) -> Option<Durability> {
        None
    }

    async fn claim(&self, _ep: &Endpoints) -> Result<(), ClusterError> {
        Ok(())
    }

    async fn release(&self, _ep: &Endpoints) -> Vec<String> {
        Vec::new()
    }

    async fn describe(&self, _ep: &Endpoints) -> Vec<NodeInfo> {
        Vec::new()
    }
}
