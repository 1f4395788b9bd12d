//! Cluster: where the servers are, and how to start and stop them.
//!
//! [`OwnedCluster::start`] starts exactly the servers a strategy [`Needs`]: as child processes
//! on loopback (no Docker, no systemd) with `--provision local`, or as containers on a private
//! Docker network ([`containers`]); each has its own address, its own data and its log in the
//! results folder. An external target ([`target`]) starts nothing. Strategies only ever see
//! [`Endpoints`], so where the servers come from stays this module's business.
//!
//! Replicated services (a 3-node ZooKeeper ensemble, a 3-node etcd cluster) elect their own
//! leader; [`OwnedCluster::leader`] asks the servers which node leads right now.
//!
//! Every node is owned by a guard (a [`ServerProcess`] or a container): dropping the cluster
//! stops them all.
//!
//! This file only names the rooms: `model` (the types), `error`, `node`, `guard` (the owning
//! [`OwnedCluster`]), `endpoints` (the endpoints file), the backends (`backend`, `local`,
//! [`containers`], `provision`), the server builds a run may choose ([`builds`]), what their
//! counters say of the work they did (`counters`: the shared types and parsers, below the
//! services; [`work`]: read through the registry, above them), and `services/`, one folder
//! per service, each implementing `kind`'s `ServiceKind`, listed once in `registry`.

mod backend;
mod binary;
pub mod builds;
mod clock;
pub mod containers;
mod counters;
pub mod credentials;
mod datadir_cache;
pub mod durability;
mod endpoints;
mod error;
mod external;
mod guard;
pub mod installed;
mod kind;
pub mod lazyfs;
pub mod leftovers;
pub mod limits;
mod local;
mod model;
pub mod namespace;
pub mod net;
pub mod netem;
mod node;
pub mod owner;
mod ports;
mod process;
pub mod procfs;
mod provision;
mod registry;
mod services;
pub mod target;
pub mod work;

// The services other parts call by name (clients, versions, fault probes).
pub use services::{etcd, postgres, redis, redis_cluster, sentinel};

pub use builds::{Builds, EtcdBuild, MysqlBuild, PostgresBuild, RedisBuild, ZookeeperBuild};
pub use endpoints::EndpointsFile;
pub use error::ClusterError;
pub use guard::OwnedCluster;
pub use model::{
    Auth, ClusterOptions, ContainerInfo, Endpoints, MysqlEndpoint, Needs, NodeInfo, Pooler,
    PoolerEndpoint, Pooling, PostgresEndpoint, Provisioner, REDLOCK_NODES, Role, Service, Steady,
    session_settings,
};
pub use namespace::Prefix;
pub use node::{Node, NodeServer};
pub use ports::{Placement, PortAllocator};
pub use process::ServerProcess;
pub use registry::container_images;
