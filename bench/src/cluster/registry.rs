//! Every service lockbench can start or use, one line each. The order is the order in which
//! local ports are reserved, an external target is claimed and cleaned, and its servers are
//! listed.

use std::net::SocketAddr;

use super::builds::Builds;
use super::containers::Images;
use super::durability::{Durability, Source};
use super::kind::{NodeAt, ServiceKind};
use super::model::{Endpoints, NodeInfo, Service};
use super::services::{etcd, mariadb, postgres, redis, redis_cluster, sentinel, zookeeper};

/// The services, in order.
pub(super) const ALL: [&dyn ServiceKind; 7] = [
    &mariadb::Mariadb,
    &redis::Redis,
    &sentinel::Sentinel,
    &redis_cluster::RedisCluster,
    &zookeeper::Zookeeper,
    &etcd::Etcd,
    &postgres::Postgres,
];

/// What each of `nodes` (its service and address) does with a write, all asked at once
/// through `ep`; what a server cannot be asked comes from `unasked`.
pub(super) async fn durability(
    nodes: impl Iterator<Item = (Service, SocketAddr)>,
    ep: &Endpoints,
    unasked: Source,
) -> Vec<Option<Durability>> {
    let reads = nodes.map(|(service, addr)| kind(service).durability(NodeAt { addr, ep, unasked }));
    futures::future::join_all(reads).await
}

/// What lockbench knows about `service`.
pub(super) fn kind(service: Service) -> &'static dyn ServiceKind {
    ALL.into_iter()
        .find(|k| k.service() == service)
        .expect("every service is in the registry")
}

impl Builds {
    /// Why `nodes` (of servers started elsewhere) are not these builds, if they are not:
    /// `servers.redis = "valkey-8.0", but redis-1 reports 7.0.15 (jemalloc-5.3.0)`. A node
    /// that could not say (`unknown`, `unreachable: …`) is not held against them. Each
    /// service says which of its builds a version is (`ServiceKind::build`).
    pub fn mismatch(&self, nodes: &[NodeInfo]) -> Option<String> {
        let said = |v: &str| v.starts_with(|c: char| c.is_ascii_digit()) || v.starts_with("valkey");
        nodes.iter().filter(|n| said(&n.version)).find_map(|n| {
            let (key, name, ok) = kind(n.service).build(*self, &n.version)?;
            (!ok).then(|| {
                format!(
                    "servers.{key} = \"{name}\", but {} reports {}",
                    n.name, n.version
                )
            })
        })
    }
}

/// Every container image a service may run, each as its variable names it now (for a check
/// that a Docker host has them all).
pub fn container_images() -> Images {
    Images::from_env(ALL.iter().flat_map(|k| k.images()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::builds::{EtcdBuild, MysqlBuild, RedisBuild, ZookeeperBuild};

    #[test]
    fn every_service_is_registered_once() {
        for s in Service::ALL {
            assert_eq!(ALL.iter().filter(|k| k.service() == *s).count(), 1, "{s}");
        }
        assert_eq!(ALL.len(), Service::ALL.len());
    }

    #[test]
    fn images_default_to_the_official_ones_and_follow_the_builds() {
        use crate::cluster::builds::{Builds, MysqlBuild};
        use crate::cluster::model::Needs;
        // What `OwnedCluster::start` asks the containers backend for (as published: the
        // test suite's environment names local images).
        let run = |needs: Needs, builds: Builds| -> Vec<(String, &str)> {
            let kinds = ALL.into_iter().filter(|k| k.wanted(needs));
            let images = Images::official(kinds.filter_map(|k| k.image(builds)));
            images.iter().map(|(i, v)| (i.to_string(), v)).collect()
        };
        let needs = Needs {
            redis: true,
            sentinel: true,
            etcd: true,
            ..Needs::NONE
        };
        // Redis's image serves Sentinel's nodes too, once.
        assert_eq!(
            run(needs, Builds::default()),
            [
                ("redis:7.0".into(), "LOCKBENCH_IMAGE_REDIS"),
                ("quay.io/coreos/etcd:v3.4.23".into(), "LOCKBENCH_IMAGE_ETCD")
            ]
        );
        // The database's image follows servers.mysql.
        let db = Needs {
            mariadb: true,
            ..Needs::NONE
        };
        let my9 = Builds {
            mysql: MysqlBuild::Mysql9,
            ..Builds::default()
        };
        assert_eq!(run(db, my9), [("mysql:9".into(), "LOCKBENCH_IMAGE_MYSQL")]);
        let pg = Needs {
            postgres_replica: true,
            ..Needs::NONE
        };
        assert_eq!(
            run(pg, Builds::default()),
            [("postgres:15".into(), "LOCKBENCH_IMAGE_POSTGRES")]
        );
        assert_eq!(container_images().iter().count(), 6);
    }

    /// ARCHITECTURE.md's "Adding a service": its folder, its registry line (above) and its
    /// `Service` variant go together. A folder without a variant, or a variant without a
    /// folder, fails here.
    #[test]
    fn every_service_has_a_folder_and_every_folder_a_service() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/cluster/services");
        let folder = |s: &Service| s.name().replace('-', "_");
        for s in Service::ALL {
            let m = dir.join(folder(s)).join("mod.rs");
            assert!(m.is_file(), "{s}: no {}", m.display());
        }
        for e in std::fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                let name = e.file_name().into_string().unwrap();
                assert!(
                    Service::ALL.iter().any(|s| folder(s) == name),
                    "services/{name}/ is no Service variant"
                );
            }
        }
    }

    #[test]
    fn servers_started_elsewhere_must_report_the_build_asked_for() {
        let node = |service, version: &str| NodeInfo {
            name: "n-1".into(),
            service,
            role: crate::cluster::Role::Primary,
            addr: "127.0.0.1:1".parse().unwrap(),
            version: version.into(),
            pid: 0,
            log: Default::default(),
            container: None,
            durability: None,
        };
        let valkey = Builds {
            redis: RedisBuild::Valkey80,
            etcd: EtcdBuild::Etcd35,
            zookeeper: ZookeeperBuild::Zk39,
            mysql: MysqlBuild::Mariadb1011,
            postgres: Default::default(),
        };
        let nodes = [
            node(Service::Redis, "valkey 8.0.1 (jemalloc-5.3.0)"),
            node(Service::Etcd, "3.5.16"),
            node(Service::Mariadb, "10.11.6-MariaDB"),
        ];
        assert_eq!(valkey.mismatch(&nodes), None);
        assert_eq!(
            Builds::default().mismatch(&nodes).as_deref(),
            Some("servers.redis = \"7.0\", but n-1 reports valkey 8.0.1 (jemalloc-5.3.0)")
        );
        // One node: what `b` says of it ("": it is the build asked for, or could not say).
        let one = |b: Builds, s, v: &str| b.mismatch(&[node(s, v)]).unwrap_or_default();
        assert!(one(valkey, Service::Etcd, "3.4.23").contains("servers.etcd = \"3.5\""));
        assert_eq!(one(valkey, Service::Redis, "unknown"), "");
        // ZooKeeper's `srvr` says `3.9.3-<commit>`.
        assert_eq!(one(valkey, Service::Zookeeper, "3.9.3-abc"), "");
        let zk38 = one(valkey, Service::Zookeeper, "3.8.0-11");
        assert_contains!(zk38, "servers.zookeeper = \"3.9\"");
        // MySQL says `9.7.4-2`; MariaDB names itself in its version.
        let mysql = one(valkey, Service::Mariadb, "9.7.4-2");
        assert_contains!(mysql, "servers.mysql = \"mariadb-10.11\"");
        let my9 = Builds {
            mysql: MysqlBuild::Mysql9,
            ..Builds::default()
        };
        assert_eq!(one(my9, Service::Mariadb, "9.7.4-2"), "");
        assert!(my9.mismatch(&nodes[2..]).is_some());
    }
}
