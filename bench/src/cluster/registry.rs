//! Every service lockbench can start or use, one line each. The order is the order in which
//! local ports are reserved, an external target is claimed and cleaned, and its servers are
//! listed.

use super::containers::Images;
use super::kind::ServiceKind;
use super::model::Service;
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

/// What lockbench knows about `service`.
pub(super) fn kind(service: Service) -> &'static dyn ServiceKind {
    ALL.into_iter()
        .find(|k| k.service() == service)
        .expect("every service is in the registry")
}

/// Every container image a service may run, each as its variable names it now (for a check
/// that a Docker host has them all).
pub fn container_images() -> Images {
    Images::from_env(ALL.iter().flat_map(|k| k.images()))
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
