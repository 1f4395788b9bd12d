//! The messages of the adapter protocol (adapters/PROTOCOL.md). Unknown fields are ignored
//! both ways, so the protocol grows without a new version.

use serde::{Deserialize, Serialize};

/// The protocol version this lockbench speaks.
pub const PROTOCOL: u32 = 1;

/// A request from lockbench.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Request<'a> {
    /// Connect to the servers; answered by `init_ok`.
    Init {
        msg_id: u64,
        protocol: u32,
        endpoints: &'a InitEndpoints,
        ttl_ms: u64,
        acquire_timeout_ms: u64,
        call_timeout_ms: u64,
        clients: u32,
    },
    /// Take the lock named `key`; answered by `acquire_ok` or `error`.
    Acquire {
        msg_id: u64,
        client: u32,
        key: &'a str,
    },
    /// Release a lease; answered by `release_ok` or `error`.
    Release { msg_id: u64, lease: &'a str },
    /// Close and exit; answered by `shutdown_ok`.
    Shutdown { msg_id: u64 },
    /// A type no adapter knows (the conformance test expects `not_supported`).
    Frobnicate { msg_id: u64 },
}

impl Request<'_> {
    /// Its id.
    pub fn msg_id(&self) -> u64 {
        match self {
            Self::Init { msg_id, .. }
            | Self::Acquire { msg_id, .. }
            | Self::Release { msg_id, .. }
            | Self::Shutdown { msg_id }
            | Self::Frobnicate { msg_id } => *msg_id,
        }
    }

    /// Its `type`, and the reply type that answers it (beside `error`): one row a request.
    fn types(&self) -> (&'static str, &'static str) {
        match self {
            Self::Init { .. } => ("init", "init_ok"),
            Self::Acquire { .. } => ("acquire", "acquire_ok"),
            Self::Release { .. } => ("release", "release_ok"),
            Self::Shutdown { .. } => ("shutdown", "shutdown_ok"),
            Self::Frobnicate { .. } => ("frobnicate", "error"),
        }
    }

    /// Its `type`.
    pub fn kind(&self) -> &'static str {
        self.types().0
    }

    /// The reply type that answers it (beside `error`).
    pub fn answer(&self) -> &'static str {
        self.types().1
    }
}

/// The servers, as `host:port` lists.
#[derive(Debug, Clone, Default, Serialize)]
pub struct InitEndpoints {
    /// One address for a single-server lock, several independent masters for Redlock.
    pub redis: Vec<String>,
    /// The ZooKeeper ensemble.
    pub zookeeper: Vec<String>,
    /// The etcd members.
    pub etcd: Vec<String>,
    /// The PostgreSQL primary (one address; omitted when not needed).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub postgres: Vec<String>,
    /// Who to log in to PostgreSQL as; its password travels in the adapter's environment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub postgres_login: Option<PostgresLogin>,
}

/// The user and database of `postgres`. The password is never in a line: the adapter reads it
/// from `PGPASSWORD` ([`PASSWORD_ENV`]), libpq's variable, which PostgreSQL drivers read
/// themselves.
#[derive(Clone, Serialize)]
pub struct PostgresLogin {
    /// The user.
    pub user: String,
    /// Its database.
    pub database: String,
    /// Set as the adapter's `PGPASSWORD`; never serialised.
    #[serde(skip)]
    pub password: String,
}

impl std::fmt::Debug for PostgresLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Debug output ends up in logs and panic messages: never the password.
        f.debug_struct("PostgresLogin")
            .field("user", &self.user)
            .field("database", &self.database)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// The environment variable an adapter reads the PostgreSQL password from.
pub const PASSWORD_ENV: &str = "PGPASSWORD";

impl InitEndpoints {
    /// The servers of `ep` that `needs` names.
    pub fn of(ep: &crate::cluster::Endpoints, needs: crate::cluster::Needs) -> Self {
        let list = |v: &[std::net::SocketAddr]| v.iter().map(|a| a.to_string()).collect();
        Self {
            redis: if needs.redis || needs.redlock {
                list(&ep.redis)
            } else {
                Vec::new()
            },
            zookeeper: if needs.zookeeper {
                list(&ep.zookeeper)
            } else {
                Vec::new()
            },
            etcd: if needs.etcd {
                list(&ep.etcd)
            } else {
                Vec::new()
            },
            postgres: match &ep.postgres {
                Some(pg) if needs.postgres => vec![pg.addr.to_string()],
                _ => Vec::new(),
            },
            postgres_login: ep.postgres.as_ref().filter(|_| needs.postgres).map(|pg| {
                PostgresLogin {
                    user: pg.user.clone(),
                    database: pg.database.clone(),
                    password: pg.password.clone(),
                }
            }),
        }
    }

    /// The adapter's environment: the passwords that never go into a line (none for a login
    /// without one, which leaves the adapter whatever its environment already says).
    pub fn env(&self) -> Vec<(&'static str, String)> {
        self.postgres_login
            .iter()
            .filter(|l| !l.password.is_empty())
            .map(|l| (PASSWORD_ENV, l.password.clone()))
            .collect()
    }
}

/// A line from the adapter.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Reply {
    /// Connected.
    InitOk {
        in_reply_to: u64,
        protocol: u32,
        library: String,
        version: String,
        fencing: bool,
        renews: bool,
    },
    /// The lock is held.
    AcquireOk {
        in_reply_to: u64,
        lease: String,
        #[serde(default)]
        fence: Option<u64>,
        granted_ns: u64,
    },
    /// Released; `was_held` is false when the library found the lock no longer ours.
    ReleaseOk { in_reply_to: u64, was_held: bool },
    /// About to exit.
    ShutdownOk { in_reply_to: u64 },
    /// The request failed.
    Error {
        in_reply_to: u64,
        code: String,
        #[serde(default)]
        text: String,
        #[serde(default)]
        definite: bool,
    },
    /// Unprompted: the library reported a held lock gone.
    Lost {
        lease: String,
        #[serde(default)]
        reason: String,
    },
}

impl Reply {
    /// The request it answers (`None` for `lost`).
    pub fn in_reply_to(&self) -> Option<u64> {
        match self {
            Self::InitOk { in_reply_to, .. }
            | Self::AcquireOk { in_reply_to, .. }
            | Self::ReleaseOk { in_reply_to, .. }
            | Self::ShutdownOk { in_reply_to }
            | Self::Error { in_reply_to, .. } => Some(*in_reply_to),
            Self::Lost { .. } => None,
        }
    }

    /// Its `type`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::InitOk { .. } => "init_ok",
            Self::AcquireOk { .. } => "acquire_ok",
            Self::ReleaseOk { .. } => "release_ok",
            Self::ShutdownOk { .. } => "shutdown_ok",
            Self::Error { .. } => "error",
            Self::Lost { .. } => "lost",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_parse_with_unknown_fields_and_name_what_is_missing() {
        let ok: Reply = serde_json::from_str(
            r#"{"type":"acquire_ok","in_reply_to":7,"lease":"l1","granted_ns":5,"extra":[1]}"#,
        )
        .unwrap();
        assert!(matches!(ok, Reply::AcquireOk { fence: None, .. }));
        let e = serde_json::from_str::<Reply>(r#"{"type":"acquire_ok","in_reply_to":7}"#)
            .unwrap_err()
            .to_string();
        assert_contains!(e, "missing field `lease`");
        let e = serde_json::from_str::<Reply>(r#"{"type":"granted","in_reply_to":7}"#)
            .unwrap_err()
            .to_string();
        assert_contains!(e, "unknown variant `granted`");
    }

    #[test]
    fn the_postgres_password_goes_into_the_environment_and_never_into_a_line() {
        use crate::cluster::{Endpoints, PostgresEndpoint};
        use crate::strategy::entry::needs::{MARIADB_POSTGRES, MARIADB_REDIS};
        let ep = Endpoints {
            redis: vec!["127.0.0.1:6379".parse().unwrap()],
            postgres: Some(PostgresEndpoint {
                addr: "127.0.0.1:5432".parse().unwrap(),
                user: "bench".into(),
                password: "s3cret-pw".into(),
                database: "shop".into(),
                pooler: None,
            }),
            ..Endpoints::default()
        };
        let init = InitEndpoints::of(&ep, MARIADB_POSTGRES);
        let line = serde_json::to_string(&init).unwrap();
        assert_eq!(
            line,
            r#"{"redis":[],"zookeeper":[],"etcd":[],"postgres":["127.0.0.1:5432"],"postgres_login":{"user":"bench","database":"shop"}}"#
        );
        assert!(!format!("{init:?}").contains("s3cret-pw"));
        assert_eq!(init.env(), vec![("PGPASSWORD", "s3cret-pw".to_string())]);
        // A library that does not need PostgreSQL gets neither its address nor its password.
        let redis = InitEndpoints::of(&ep, MARIADB_REDIS);
        let line = serde_json::to_string(&redis).unwrap();
        assert_eq!(
            line,
            r#"{"redis":["127.0.0.1:6379"],"zookeeper":[],"etcd":[]}"#
        );
        assert!(redis.env().is_empty());
    }

    #[test]
    fn requests_carry_their_type_and_id() {
        let line = serde_json::to_string(&Request::Acquire {
            msg_id: 3,
            client: 1,
            key: "k",
        })
        .unwrap();
        assert_eq!(
            line,
            r#"{"type":"acquire","msg_id":3,"client":1,"key":"k"}"#
        );
    }
}
