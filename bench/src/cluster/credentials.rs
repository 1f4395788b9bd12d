//! Where each service's password comes from when it does not travel with the endpoints: a
//! worker reached over TCP reads them from its own environment (they never cross the link),
//! and `lockbench coordinate` makes MariaDB's user with the one it is given. Each service
//! names its variable in its own module (`services/<name>/`, `PASSWORD_ENV`); this is the
//! table of them.

use super::model::Service;
use super::services::{etcd, mariadb, postgres, redis, sentinel, zookeeper};

/// Every login's variable, by service, in the order the endpoints file keeps its passwords
/// (the Redis Cluster has none of its own: Redis's login serves it).
pub const PASSWORD_ENV: [(Service, &str); 6] = [
    (Service::Mariadb, mariadb::PASSWORD_ENV),
    (Service::Redis, redis::PASSWORD_ENV),
    (Service::Sentinel, sentinel::PASSWORD_ENV),
    (Service::Etcd, etcd::PASSWORD_ENV),
    (Service::Zookeeper, zookeeper::PASSWORD_ENV),
    (Service::Postgres, postgres::PASSWORD_ENV),
];
