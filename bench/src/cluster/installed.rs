//! Where each server build's files are: bookworm's on PATH, the others in the private prefix
//! `scripts/install-deps.sh --servers` fills (`<prefix>/<key>-<build>/`).

use std::path::PathBuf;

use super::binary::{find_binary, is_executable};
use super::builds::{EtcdBuild, PostgresBuild, RedisBuild, ZookeeperBuild};
use super::error::ClusterError;

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

impl PostgresBuild {
    /// `program` (`initdb`, `postgres`, `pg_basebackup`) of this build: bookworm's in
    /// `/usr/lib/postgresql/15/bin` (off PATH), 18's in the private prefix.
    pub(super) fn program(self, program: &str) -> Result<PathBuf, ClusterError> {
        match self {
            Self::Pg15 => {
                let path = PathBuf::from("/usr/lib/postgresql/15/bin").join(program);
                if is_executable(&path) {
                    Ok(path)
                } else {
                    Err(ClusterError::MissingFile {
                        path,
                        package: "postgresql-15".into(),
                    })
                }
            }
            Self::Pg18 => private("postgres", self.name(), &format!("bin/{program}")),
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
        assert_contains!(e, "bash scripts/install-deps.sh --servers redis=valkey-8.0");
        assert_contains!(e, "redis-valkey-8.0/bin/valkey-server");
        let e = EtcdBuild::Etcd35.server().unwrap_err().to_string();
        assert_contains!(e, "--servers etcd=3.5");
        let e = ZookeeperBuild::Zk39.jars().unwrap_err().to_string();
        assert_contains!(e, "--servers zookeeper=3.9");
        assert_contains!(e, "zookeeper-3.9/lib/zookeeper-jute.jar");
        unsafe { std::env::remove_var("LOCKBENCH_SERVERS") };
    }
}
