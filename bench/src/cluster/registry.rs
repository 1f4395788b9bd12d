//! Every service lockbench can start or use, one line each. The order is the order in which
//! local ports are reserved, an external target is claimed and cleaned, and its servers are
//! listed.

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
