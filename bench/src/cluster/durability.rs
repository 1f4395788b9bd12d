//! What each server does with a write before it acknowledges it, for results: read from the
//! running server where it can be asked (Redis `CONFIG GET`, MariaDB system variables), from
//! the flags lockbench started it with where it cannot (etcd, ZooKeeper). Each service's
//! module says which (`ServiceKind::durability`); this file holds what they share.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::names::enum_names;

/// Bound of one durability query.
const QUERY_TIMEOUT: Duration = Duration::from_secs(5);

/// What every Redis node of a run does with a write before acknowledging it: the
/// `appendonly` and `appendfsync` it is started with (`services/redis/` turns it into flags).
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

/// What every PostgreSQL node of a run waits for before it acknowledges a commit: the
/// `synchronous_commit` it is started with (`services/postgres/` turns it into a flag).
/// Without a synchronous standby (lockbench's replica is asynchronous) `on`, `remote_write`
/// and `remote_apply` all wait for the local WAL flush only.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SynchronousCommit {
    /// Commit returns before its WAL is flushed; the WAL writer flushes within
    /// 3 × `wal_writer_delay` (600 ms): a crash loses the last commits, never consistency.
    Off,
    /// Waits for the local WAL flush only, even with a synchronous standby.
    Local,
    /// Waits for the local flush (and a synchronous standby's flush): the server's default.
    #[default]
    On,
    /// As `on`, the standby having written (not flushed) it.
    RemoteWrite,
    /// As `on`, the standby having applied it (visible to its readers).
    RemoteApply,
}

enum_names!(SynchronousCommit {
    Off = "off",
    Local = "local",
    On = "on",
    RemoteWrite = "remote_write",
    RemoteApply = "remote_apply",
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
    /// `log_bin`; PostgreSQL `synchronous_commit`, `fsync`, `wal_sync_method`,
    /// `synchronous_standby_names`; etcd `unsafe-no-fsync`; ZooKeeper `forceSync`.
    pub settings: BTreeMap<String, String>,
    /// Where the settings come from.
    pub source: Source,
    /// Why the server could not be asked (`acked` is `unknown` then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Durability {
    pub(super) fn new(acked: Acked, settings: &[(&str, &str)], source: Source) -> Self {
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

    pub(super) fn unknown(error: String) -> Self {
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

/// `fut`, cut at [`QUERY_TIMEOUT`].
pub(super) async fn bounded_query<T>(
    fut: impl std::future::Future<Output = Result<T, String>>,
) -> Result<T, String> {
    tokio::time::timeout(QUERY_TIMEOUT, fut)
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {QUERY_TIMEOUT:?}")))
}

/// What a server says of itself: the settings `read` asks it for (bounded), `acked` of them
/// saying where an acknowledged write is; `unknown` when it does not answer.
pub(super) async fn queried(
    read: impl std::future::Future<Output = Result<Vec<(String, String)>, String>>,
    acked: impl FnOnce(&[(String, String)]) -> Acked,
) -> Durability {
    match bounded_query(read).await {
        Ok(kv) => {
            let pairs: Vec<(&str, &str)> =
                kv.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            Durability::new(acked(&kv), &pairs, Source::Queried)
        }
        Err(e) => Durability::unknown(e),
    }
}

/// The value of setting `name` among `kv` (`""` when it is not there).
pub(super) fn setting<'a>(kv: &'a [(String, String)], name: &str) -> &'a str {
    kv.iter().find(|(k, _)| k == name).map_or("", |(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

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
