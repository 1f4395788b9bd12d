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

    /// Its `type`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Init { .. } => "init",
            Self::Acquire { .. } => "acquire",
            Self::Release { .. } => "release",
            Self::Shutdown { .. } => "shutdown",
            Self::Frobnicate { .. } => "frobnicate",
        }
    }

    /// The reply type that answers it (beside `error`).
    pub fn answer(&self) -> &'static str {
        match self {
            Self::Init { .. } => "init_ok",
            Self::Acquire { .. } => "acquire_ok",
            Self::Release { .. } => "release_ok",
            Self::Shutdown { .. } => "shutdown_ok",
            Self::Frobnicate { .. } => "error",
        }
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
}

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
        }
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
        assert!(e.contains("missing field `lease`"), "{e}");
        let e = serde_json::from_str::<Reply>(r#"{"type":"granted","in_reply_to":7}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown variant `granted`"), "{e}");
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
