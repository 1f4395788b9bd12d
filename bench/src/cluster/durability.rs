//! What each server does with a write before it acknowledges it, for results: read from the
//! running server where it can be asked (Redis `CONFIG GET`, MariaDB system variables), from
//! the flags lockbench started it with where it cannot (etcd, ZooKeeper).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::model::{Endpoints, Service};
use crate::names::enum_names;

/// Bound of one durability query.
const QUERY_TIMEOUT: Duration = Duration::from_secs(5);

/// What every Redis node of a run does with a write before acknowledging it: the
/// `appendonly` and `appendfsync` it is started with (`cluster/redis.rs` turns it into flags).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Appendfsync {
    /// No persistence (`--save "" --appendonly no`): a restarted node comes back empty.
    #[default]
    Off,
    /// Append-only file, written before the reply, fsynced when the OS decides.
    No,
    /// Append-only file, fsynced once per second.
    Everysec,
    /// Append-only file, fsynced before every reply.
    Always,
}

enum_names!(Appendfsync {
    Off = "off",
    No = "no",
    Everysec = "everysec",
    Always = "always",
});

/// Where a write is when the server acknowledges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acked {
    /// Only in the server's memory: a crash of the server process loses it.
    Memory,
    /// Written to a file, in the OS page cache: it survives a crash of the server process, not
    /// of the machine.
    Os,
    /// On disk (fsynced) before the acknowledgement.
    Disk,
    /// The server could not be asked (the error says why).
    Unknown,
}

enum_names!(Acked {
    Memory = "memory",
    Os = "os",
    Disk = "disk",
    Unknown = "unknown",
});

/// Where the settings of a [`Durability`] come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Asked of the running server.
    Queried,
    /// The flags and configuration lockbench started the server with (the server cannot be
    /// asked).
    StartedWith,
    /// A server lockbench did not start and cannot ask: the server's default is assumed.
    ServerDefault,
}

enum_names!(Source {
    Queried = "queried",
    StartedWith = "started-with",
    ServerDefault = "server-default",
});

/// What one server does with a write before acknowledging it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Durability {
    /// Where an acknowledged write is: `memory`, `os` (page cache), `disk` (fsynced), `unknown`.
    pub acked: Acked,
    /// The settings that decide it, by the server's own names: Redis `appendonly`,
    /// `appendfsync`, `save`; MariaDB `innodb_flush_log_at_trx_commit`, `sync_binlog`,
    /// `log_bin`; etcd `unsafe-no-fsync`; ZooKeeper `forceSync`.
    pub settings: BTreeMap<String, String>,
    /// Where the settings come from.
    pub source: Source,
    /// Why the server could not be asked (`acked` is `unknown` then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Durability {
    fn new(acked: Acked, settings: &[(&str, &str)], source: Source) -> Self {
        Self {
            acked,
            settings: settings
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            source,
            error: None,
        }
    }

    fn unknown(error: String) -> Self {
        Self {
            acked: Acked::Unknown,
            settings: BTreeMap::new(),
            source: Source::Queried,
            error: Some(error),
        }
    }

    /// One line for tables and reports, e.g. `disk (appendfsync=always, appendonly=yes,
    /// save="")`.
    pub fn describe(&self) -> String {
        let settings: Vec<String> = self
            .settings
            .iter()
            .map(|(k, v)| {
                if v.is_empty() {
                    format!("{k}=\"\"")
                } else {
                    format!("{k}={v}")
                }
            })
            .collect();
        let mut out = self.acked.to_string();
        if !settings.is_empty() {
            out.push_str(&format!(" ({})", settings.join(", ")));
        }
        match (self.source, &self.error) {
            (_, Some(e)) => out.push_str(&format!(": {e}")),
            (Source::ServerDefault, None) => out.push_str(", assumed: the server's default"),
            _ => {}
        }
        out
    }
}

/// Redis: an acknowledged write is in memory only without an append-only file (RDB snapshots,
/// `save`, are periodic); with one it was written to the file before the reply, and fsynced
/// too with `appendfsync always`.
fn redis_acked(appendonly: &str, appendfsync: &str) -> Acked {
    match (appendonly, appendfsync) {
        ("yes", "always") => Acked::Disk,
        ("yes", _) => Acked::Os,
        _ => Acked::Memory,
    }
}

/// MariaDB (InnoDB): `innodb_flush_log_at_trx_commit` 1 (and MariaDB's 3) fsync the redo log
/// at every commit, 2 writes it to the OS, 0 leaves it in the log buffer for up to a second.
fn mariadb_acked(flush_log_at_trx_commit: &str) -> Acked {
    match flush_log_at_trx_commit {
        "1" | "3" => Acked::Disk,
        "2" => Acked::Os,
        "0" => Acked::Memory,
        _ => Acked::Unknown,
    }
}

/// The durability of the node of `service` at `addr`, which lockbench started (`owned`) or
/// not, reached through `ep`; `None` for a server that stores no data of a run (Sentinel).
pub(super) async fn read(
    service: Service,
    addr: std::net::SocketAddr,
    ep: &Endpoints,
    owned: bool,
) -> Option<Durability> {
    let source = if owned {
        Source::StartedWith
    } else {
        Source::ServerDefault
    };
    Some(match service {
        Service::Sentinel => return None,
        Service::Redis | Service::RedisCluster => {
            match bounded(super::redis::persistence(addr, ep.redis_auth.as_ref())).await {
                Ok(kv) => {
                    let get = |k: &str| {
                        kv.iter()
                            .find(|(n, _)| n == k)
                            .map_or("", |(_, v)| v.as_str())
                    };
                    let acked = redis_acked(get("appendonly"), get("appendfsync"));
                    let pairs: Vec<(&str, &str)> =
                        kv.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                    Durability::new(acked, &pairs, Source::Queried)
                }
                Err(e) => Durability::unknown(e),
            }
        }
        Service::Mariadb => {
            let Some(m) = &ep.mysql else {
                return Some(Durability::unknown("no MariaDB login".into()));
            };
            match bounded(mariadb_settings(m.connect_options())).await {
                Ok(kv) => {
                    let flush = kv
                        .iter()
                        .find(|(k, _)| k == "innodb_flush_log_at_trx_commit")
                        .map_or("", |(_, v)| v.as_str());
                    let pairs: Vec<(&str, &str)> =
                        kv.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                    Durability::new(mariadb_acked(flush), &pairs, Source::Queried)
                }
                Err(e) => Durability::unknown(e),
            }
        }
        // etcd fsyncs its WAL before a commit is acknowledged unless started with
        // `--unsafe-no-fsync`, which cluster/etcd.rs never passes; no API tells it.
        Service::Etcd => Durability::new(Acked::Disk, &[("unsafe-no-fsync", "false")], source),
        // ZooKeeper fsyncs its transaction log before acknowledging a proposal unless
        // `forceSync=no`; the zoo.cfg of cluster/zookeeper.rs leaves the default, and no
        // four-letter word tells it.
        Service::Zookeeper => Durability::new(Acked::Disk, &[("forceSync", "yes")], source),
    })
}

/// `fut`, cut at [`QUERY_TIMEOUT`].
async fn bounded<T>(
    fut: impl std::future::Future<Output = Result<T, String>>,
) -> Result<T, String> {
    tokio::time::timeout(QUERY_TIMEOUT, fut)
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {QUERY_TIMEOUT:?}")))
}

/// The MariaDB (or MySQL) variables that decide when a commit reaches the disk.
async fn mariadb_settings(
    opts: sqlx::mysql::MySqlConnectOptions,
) -> Result<Vec<(String, String)>, String> {
    use sqlx::{ConnectOptions, Connection};
    let mut con = opts.connect().await.map_err(|e| e.to_string())?;
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SHOW GLOBAL VARIABLES WHERE Variable_name IN \
         ('innodb_flush_log_at_trx_commit', 'sync_binlog', 'log_bin')",
    )
    .fetch_all(&mut con)
    .await
    .map_err(|e| e.to_string())?;
    let _ = con.close().await;
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_settings_say_where_an_acknowledged_write_is() {
        assert_eq!(redis_acked("no", "everysec"), Acked::Memory);
        assert_eq!(redis_acked("yes", "no"), Acked::Os);
        assert_eq!(redis_acked("yes", "everysec"), Acked::Os);
        assert_eq!(redis_acked("yes", "always"), Acked::Disk);
        assert_eq!(mariadb_acked("1"), Acked::Disk);
        assert_eq!(mariadb_acked("2"), Acked::Os);
        assert_eq!(mariadb_acked("0"), Acked::Memory);
    }

    #[test]
    fn the_servers_lockbench_starts_keep_their_fsync() {
        // What `read` says of etcd and ZooKeeper without asking them.
        assert!(!super::super::etcd::COMMON_FLAGS.contains(&"--unsafe-no-fsync"));
        let cfg = super::super::zookeeper::config("/d", None, 2181, "");
        assert!(!cfg.contains("forceSync"), "{cfg}");
    }

    #[test]
    fn describe_names_the_settings_and_the_source() {
        let d = Durability::new(
            Acked::Memory,
            &[("appendonly", "no"), ("save", "")],
            Source::Queried,
        );
        assert_eq!(d.describe(), "memory (appendonly=no, save=\"\")");
        let d = Durability::new(Acked::Disk, &[("forceSync", "yes")], Source::ServerDefault);
        assert_eq!(
            d.describe(),
            "disk (forceSync=yes), assumed: the server's default"
        );
    }
}
