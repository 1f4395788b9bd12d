//! What every service's claim, clean-up and description of an external target share (each
//! service's own are in its module; `target.rs` runs them): the owner marker, the bound of
//! every call, the refusal, a node lockbench did not start (and a service's numbered ones),
//! and the servers sharing one login that a claim and a clean-up are given ([`Listed`]).

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use super::error::ClusterError;
use super::model::{Auth, NodeInfo, Role, Service};
use super::namespace::Prefix;

/// Bound of every call that checks, marks or cleans a target.
pub(super) const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Most keys / tables named in a refusal.
const SHOW_FOUND: usize = 5;
/// What the owner marker holds: proof that lockbench created the data under the prefix.
pub(super) const MARKER: &str =
    "lockbench: this prefix holds data of lockbench runs; safe to delete";

/// `fut`, cut at [`CALL_TIMEOUT`]; errors start with `what`.
pub(super) async fn bounded<T>(
    what: &str,
    fut: impl std::future::Future<Output = Result<T, String>>,
) -> Result<T, String> {
    tokio::time::timeout(CALL_TIMEOUT, fut)
        .await
        .map_err(|_| format!("{what}: no answer within {CALL_TIMEOUT:?}"))?
        .map_err(|e| format!("{what}: {e}"))
}

/// A clean-up of `service`'s servers as [`bounded`] runs it, as the list of failures a
/// release reports (empty when it worked).
pub(super) async fn cleaned(
    service: &str,
    what: &str,
    wipe: impl std::future::Future<Output = Result<(), String>>,
) -> Vec<String> {
    match bounded(what, wipe).await {
        Ok(()) => Vec::new(),
        Err(e) => vec![format!("{service}: {e}")],
    }
}

/// A failure to check, mark or clean `service`'s servers.
pub(super) fn target_err(service: &str, detail: String) -> ClusterError {
    ClusterError::Setup {
        node: service.to_string(),
        what: "external target".into(),
        detail,
    }
}

/// A refusal: the prefix holds data that lockbench did not create.
pub(super) fn foreign(service: &str, p: &Prefix, found: &[String]) -> ClusterError {
    ClusterError::PrefixTaken {
        service: service.to_string(),
        prefix: p.to_string(),
        found: found
            .iter()
            .take(SHOW_FOUND)
            .cloned()
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// Refuses ([`foreign`]) a prefix where `found` (its keys, tables or nodes) holds data but not
/// the owner marker `owner`.
pub(super) fn owned_or_empty(
    service: &str,
    p: &Prefix,
    found: &[String],
    owner: &str,
) -> Result<(), ClusterError> {
    match found.is_empty() || found.iter().any(|f| f == owner) {
        true => Ok(()),
        false => Err(foreign(service, p, found)),
    }
}

/// A server this process did not start, as a target's description lists it (`pid` 0, no
/// log: nothing runs here).
pub(super) fn unowned_node(
    name: String,
    service: Service,
    role: Role,
    addr: SocketAddr,
    version: Result<String, String>,
) -> NodeInfo {
    NodeInfo {
        name,
        service,
        role,
        addr,
        version: version.unwrap_or_else(|e| format!("unreachable ({e})")),
        pid: 0,
        log: Default::default(),
        container: None,
        durability: None,
    }
}

/// External target: the servers `addrs` of `service` in `role`, named `<service>-1`, `-2`, …,
/// each with the version `version` reads of it, one after the other.
pub(super) async fn numbered<F>(
    service: Service,
    role: Role,
    addrs: &[SocketAddr],
    version: impl Fn(SocketAddr) -> F,
) -> Vec<NodeInfo>
where
    F: Future<Output = Result<String, String>>,
{
    let mut out = Vec::new();
    for (i, a) in addrs.iter().enumerate() {
        let v = version(*a).await;
        let name = format!("{service}-{}", i + 1);
        out.push(unowned_node(name, service, role, *a, v));
    }
    out
}

/// External target: a service's servers that share one login (etcd's members, ZooKeeper's,
/// the Redis Cluster's nodes), with the prefix a run claims on them: what its claim and its
/// clean-up are given.
#[derive(Clone, Copy)]
pub(super) struct Listed<'a> {
    /// Its servers the target names (none: it has nothing there).
    pub addrs: &'a [SocketAddr],
    /// Their login.
    pub auth: Option<&'a Auth>,
    /// The run's prefix.
    pub prefix: &'a Prefix,
}

impl<'a> Listed<'a> {
    /// The servers `addrs` with their login `auth`, under `prefix`.
    pub fn new(addrs: &'a [SocketAddr], auth: &'a Option<Auth>, prefix: &'a Prefix) -> Self {
        let auth = auth.as_ref();
        Self {
            addrs,
            auth,
            prefix,
        }
    }

    /// The service's claim `claim` of the prefix on its servers; nothing to claim without any.
    pub async fn claim<F>(self, claim: impl FnOnce(Self) -> F) -> Result<(), ClusterError>
    where
        F: Future<Output = Result<(), ClusterError>>,
    {
        if self.addrs.is_empty() {
            return Ok(());
        }
        claim(self).await
    }

    /// The service's clean-up `wipe` of the prefix on its servers, as [`cleaned`] runs it for
    /// `service` (`what` it does); nothing failed without any servers.
    pub async fn release<F>(
        self,
        service: &str,
        what: &str,
        wipe: impl FnOnce(Self) -> F,
    ) -> Vec<String>
    where
        F: Future<Output = Result<(), String>>,
    {
        if self.addrs.is_empty() {
            return Vec::new();
        }
        cleaned(service, what, wipe(self)).await
    }
}

/// External target: the table a strategy misses and what it needs of it.
pub(super) type Missing = (&'static str, String);

/// External target: a service's servers `from` with their login `auth`, copied; or, when the
/// target names none, the table and what a strategy needs of it (`missing`).
pub(super) fn servers_or(
    from: &[SocketAddr],
    auth: &Option<Auth>,
    missing: (&'static str, &str),
) -> Result<(Vec<SocketAddr>, Option<Auth>), Missing> {
    if from.is_empty() {
        return Err((missing.0, missing.1.into()));
    }
    Ok((from.to_vec(), auth.clone()))
}
