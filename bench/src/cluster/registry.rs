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
}
