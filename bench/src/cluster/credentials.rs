//! Where each service's password comes from when it does not travel with the endpoints: a
//! worker reached over TCP reads them from its own environment (they never cross the link),
//! and `lockbench coordinate` makes MariaDB's user with the one it is given.

/// MariaDB's password for the user lockbench creates (or a worker's login to it).
pub const MYSQL_PASSWORD_ENV: &str = "LOCKBENCH_MYSQL_PASSWORD";
/// Redis (single node, replicas, Redlock nodes, cluster).
pub const REDIS_PASSWORD_ENV: &str = "LOCKBENCH_REDIS_PASSWORD";
/// Redis Sentinel.
pub const SENTINEL_PASSWORD_ENV: &str = "LOCKBENCH_SENTINEL_PASSWORD";
/// etcd.
pub const ETCD_PASSWORD_ENV: &str = "LOCKBENCH_ETCD_PASSWORD";
/// ZooKeeper (digest auth).
pub const ZOOKEEPER_PASSWORD_ENV: &str = "LOCKBENCH_ZOOKEEPER_PASSWORD";

/// PostgreSQL's password for the user lockbench creates (or a worker's login to it).
pub const POSTGRES_PASSWORD_ENV: &str = "LOCKBENCH_POSTGRES_PASSWORD";

/// Every service's variable, as (service, variable), in the order the endpoints file keeps
/// its passwords.
pub const PASSWORD_ENV: [(&str, &str); 6] = [
    ("mysql", MYSQL_PASSWORD_ENV),
    ("redis", REDIS_PASSWORD_ENV),
    ("sentinel", SENTINEL_PASSWORD_ENV),
    ("etcd", ETCD_PASSWORD_ENV),
    ("zookeeper", ZOOKEEPER_PASSWORD_ENV),
    ("postgres", POSTGRES_PASSWORD_ENV),
];
