//! External strategies, `lib:<name>`: a real lock library (Curator, redis-py, kazoo, …)
//! behind an adapter process that speaks adapters/PROTOCOL.md. lockbench still runs the
//! critical section and every check, so a library gets the same columns and verdicts as
//! lockbench's own strategies.
//!
//! One adapter per process that runs buyers (each worker process, or the coordinator of an
//! in-process run); in a worker it joins the worker's process group, so a chaos pause or kill
//! of the client stops the library and its renewal threads too.

pub mod check;
mod libraries;
pub mod process;
pub mod wire;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;

use self::process::{AdapterProcess, Bounds, CallError, InitArgs};
use self::wire::{InitEndpoints, Reply, Request};
use super::entry::Setup;
use super::{AcquireError, Acquired, Built, Expiry, KeepAlive, Lease, Lock, StrategyError};
use crate::record::ErrorKind;

pub use libraries::{LIBRARIES, Library, STRATEGIES, library_of};
pub use process::Hello;

/// How long an adapter may take to start and connect (a JVM, a ZooKeeper session).
pub const INIT_TIMEOUT: Duration = Duration::from_secs(30);

/// Env var naming the folder of the adapters (default: `./adapters`, else the source tree's).
pub const ADAPTERS_ENV: &str = "LOCKBENCH_ADAPTERS";

/// The folder holding the adapters.
pub fn adapters_dir() -> PathBuf {
    if let Some(d) = std::env::var_os(ADAPTERS_ENV) {
        return PathBuf::from(d);
    }
    let here = PathBuf::from("adapters");
    if here.join("PROTOCOL.md").exists() {
        return std::fs::canonicalize(&here).unwrap_or(here);
    }
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../adapters"))
}

/// Builds `lib:<name>` (or `lib:<name>-fenced`): starts its adapter.
pub async fn build(s: Setup<'_>) -> Result<Built, StrategyError> {
    let lib = library_of(s.info.id).ok_or_else(|| StrategyError::Unknown {
        id: s.info.id.to_string(),
        known: LIBRARIES
            .iter()
            .map(|l| l.name)
            .collect::<Vec<_>>()
            .join(", "),
    })?;
    if s.ep.redis_auth.is_some() || s.ep.etcd_auth.is_some() || s.ep.zookeeper_auth.is_some() {
        return Err(StrategyError::Unsupported {
            id: s.info.id.to_string(),
            what: "servers with credentials (the adapter protocol passes none)",
        });
    }
    let store = s.mariadb().await?;
    let argv = lib.argv(&adapters_dir());
    let lock = AdapterLock::start(s.info.id, &argv, &init_args(&s), s.w).await?;
    let hello = lock.process.hello();
    if hello.version != lib.version {
        tracing::warn!(
            "{}: the adapter loaded {} {}, not the pinned {}",
            s.info.id,
            hello.library,
            hello.version,
            lib.version
        );
    }
    if s.info.fenced && !hello.fencing {
        return Err(StrategyError::Adapter(format!(
            "{}: {} answered init with fencing: false, so it has no -fenced variant",
            lock.process.name(),
            hello.library
        )));
    }
    Ok(s.locked(lock, store))
}

fn init_args(s: &Setup<'_>) -> InitArgs {
    InitArgs {
        endpoints: InitEndpoints::of(s.ep, s.info.needs),
        ttl: s.w.lock.ttl,
        acquire_timeout: s.w.lock.acquire_timeout,
        call_timeout: s.w.load.timeout,
        clients: s.w.load.clients,
    }
}

/// A lock taken through an adapter.
pub struct AdapterLock {
    process: AdapterProcess,
    bounds: Bounds,
    /// The adapter's lease id of each lease held, by lockbench's owner token.
    held: Mutex<HashMap<String, String>>,
    /// `lock.ttl`, the lease (or session timeout) the library was given at `init`.
    ttl: Duration,
}

impl AdapterLock {
    /// Starts the adapter `argv` for strategy `id` and initialises it.
    pub async fn start(
        id: &str,
        argv: &[String],
        init: &InitArgs,
        w: &crate::workload::Workload,
    ) -> Result<Self, StrategyError> {
        let bounds = Bounds::new(w.lock.acquire_timeout, w.load.timeout);
        let process = AdapterProcess::start(id, argv, init, INIT_TIMEOUT, bounds.hang)
            .await
            .map_err(StrategyError::Adapter)?;
        Ok(Self {
            process,
            bounds,
            held: Mutex::default(),
            ttl: w.lock.ttl,
        })
    }

    /// What the adapter said of itself.
    pub fn hello(&self) -> &Hello {
        self.process.hello()
    }
}

/// An `error` reply's code as an outcome: only `busy` says the lock was simply held.
fn failure(code: &str) -> AcquireError {
    match code {
        "busy" => AcquireError::Busy,
        "timeout" => AcquireError::Failed(ErrorKind::Timeout),
        "connection" => AcquireError::Failed(ErrorKind::Connection),
        _ => AcquireError::Failed(ErrorKind::Server),
    }
}

fn call_failure(e: CallError) -> ErrorKind {
    match e {
        CallError::Timeout => ErrorKind::Timeout,
        CallError::Broken(_) => ErrorKind::Server,
    }
}

#[async_trait]
impl Lock for AdapterLock {
    async fn acquire(&self, client: u32, key: &str, token: &str) -> Acquired {
        let answer = self
            .process
            .request(
                |msg_id| Request::Acquire {
                    msg_id,
                    client,
                    key,
                },
                self.bounds.acquire,
            )
            .await
            .map_err(|e| AcquireError::Failed(call_failure(e)))?;
        let (lease_id, fence, granted_ns) = match answer.reply {
            Reply::AcquireOk {
                lease,
                fence,
                granted_ns,
                ..
            } => (lease, fence, granted_ns),
            Reply::Error { code, .. } => return Err(failure(&code)),
            other => unreachable!("the reader lets only acquire_ok or error through: {other:?}"),
        };
        // The lease starts when the library returned, not when its answer crossed the pipe.
        let granted_at = crate::clock::instant_at(granted_ns);
        self.held
            .lock()
            .expect("held lock")
            .insert(token.to_string(), lease_id);
        let mut lease = Lease::new(key, token);
        lease.fence = fence;
        lease.granted_at = Some(granted_at);
        // A TTL from the grant: the library's renewals (a watchdog, a session's heartbeats)
        // are not seen here, so this is the loss of a holder stopped right after its grant
        // (a holder pause), early for one lost after renewing.
        lease.expiry = Some(Expiry::After(granted_at, self.ttl));
        if let Some(mut lost) = answer.lost {
            lease.keepalive = Some(KeepAlive::spawn(async move {
                lost.wait_for(|l| *l).await.is_ok()
            }));
        }
        Ok(lease)
    }

    async fn release(&self, _client: u32, lease: &Lease) -> Result<bool, ErrorKind> {
        let Some(id) = self
            .held
            .lock()
            .expect("held lock")
            .get(&lease.token)
            .cloned()
        else {
            return Ok(false);
        };
        let answer = self
            .process
            .request(
                |msg_id| Request::Release { msg_id, lease: &id },
                self.bounds.release,
            )
            .await;
        self.held.lock().expect("held lock").remove(&lease.token);
        self.process.forget_lease(&id);
        match answer.map_err(call_failure)?.reply {
            Reply::ReleaseOk { was_held, .. } => Ok(was_held),
            Reply::Error { code, .. } => Err(match failure(&code) {
                AcquireError::Failed(k) => k,
                AcquireError::Busy => ErrorKind::Server,
            }),
            other => unreachable!("the reader lets only release_ok or error through: {other:?}"),
        }
    }

    fn acquire_bound(&self) -> Duration {
        self.bounds.acquire
    }

    fn release_bound(&self) -> Duration {
        self.bounds.release
    }

    fn broken(&self) -> Option<String> {
        self.process.broken()
    }

    fn library(&self) -> Option<Hello> {
        Some(self.process.hello().clone())
    }
}
