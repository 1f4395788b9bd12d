//! `etcd`: a lease per acquisition plus etcd's v3 lock service; the lock key's create revision
//! is the fencing token.
//!
//! Acquire: grant a lease of `lock.ttl` (whole seconds), then `Lock(name, lease)`, which the
//! server answers once every older waiter's key is gone (FIFO by create revision, each waiter
//! watching only its predecessor). A task renews the lease every ttl/3 while the lock is held.
//! Release: `Unlock(key)`, then revoke the lease. If the holder stalls past the TTL, the lease
//! expires and the key with it: the next waiter gets the lock, which is why the token matters.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use etcd_client::{Client, LockOptions};

use super::{AcquireError, KeepAlive, Lease, Lock, StrategyError, within};
use crate::record::ErrorKind;
use crate::workload::Workload;

use super::entry::needs::MARIADB_ETCD;
use super::entry::{Kind, StrategyInfo};

/// `etcd`.
pub const ETCD: StrategyInfo = StrategyInfo {
    id: "etcd",
    kind: Kind::Lock,
    locks: true,
    fenced: false,
    fence_token: Some("lock key create revision"),
    needs: MARIADB_ETCD,
    wait: None,
    about: "etcd lease + v3 lock, keep-alive every ttl/3; key's create revision fence",
    build: |s| {
        Box::pin(async move {
            let store = s.mariadb().await?;
            let addrs = s.members(&s.ep.etcd, "etcd")?;
            let lock = EtcdLock::connect(&addrs, s.ep.etcd_auth.as_ref(), s.w).await?;
            Ok(s.locked(lock, store))
        })
    },
};

/// `etcd-fenced`.
pub const ETCD_FENCED: StrategyInfo = StrategyInfo {
    id: "etcd-fenced",
    fenced: true,
    about: "etcd with the lock key's create revision as fencing token; stale writes refused",
    ..ETCD
};

/// At most this many gRPC channels; buyers beyond it share one (HTTP/2 multiplexes).
const MAX_CONNECTIONS: u32 = 64;

// gRPC status codes (the numbers are fixed by the gRPC spec).
const GRPC_DEADLINE_EXCEEDED: i32 = 4;
const GRPC_NOT_FOUND: i32 = 5;
const GRPC_UNAVAILABLE: i32 = 14;

/// A held lock: what release needs besides the [`Lease`] (which owns the keep-alive task).
struct Held {
    /// The key `Lock` returned (`<name>/<lease id in hex>`).
    key: Vec<u8>,
    lease_id: i64,
}

/// The etcd lease + lock strategy.
pub struct EtcdLock {
    clients: Vec<Client>,
    ttl_s: i64,
    acquire_timeout: Duration,
    timeout: Duration,
    /// Leases currently held, by owner token (at most one per buyer in flight).
    held: Mutex<HashMap<String, Held>>,
}

/// Classifies an etcd client error: only an error reply proves nothing happened.
pub fn classify(e: &etcd_client::Error) -> ErrorKind {
    match e {
        etcd_client::Error::GRpcStatus(s) => match i32::from(s.code()) {
            GRPC_DEADLINE_EXCEEDED => ErrorKind::Timeout,
            GRPC_UNAVAILABLE => ErrorKind::Connection,
            _ => ErrorKind::Server,
        },
        etcd_client::Error::TransportError(_) | etcd_client::Error::IoError(_) => {
            ErrorKind::Connection
        }
        _ => ErrorKind::Server,
    }
}

/// A lease TTL in whole seconds (etcd's unit), rounded up, at least 1. etcd raises it to its
/// own minimum (1.5 × election timeout, so 2 s here) and says so in the grant's answer.
pub fn lease_ttl_s(ttl: Duration) -> i64 {
    (ttl.as_secs_f64().ceil() as i64).max(1)
}

impl EtcdLock {
    /// Connects to the members at `addrs` (one channel per buyer, up to a bound). Connecting
    /// is lazy: an unreachable cluster shows up as errors on the first calls.
    pub async fn connect(
        addrs: &[SocketAddr],
        auth: Option<&crate::cluster::Auth>,
        w: &Workload,
    ) -> Result<Self, StrategyError> {
        let urls: Vec<String> = addrs.iter().map(|a| format!("http://{a}")).collect();
        // No per-request timeout in the options: it would also cut the keep-alive stream,
        // which lives as long as the lock. Every call is bounded with `within` instead.
        let opts = crate::cluster::etcd::options(auth).with_connect_timeout(super::SETUP_TIMEOUT);
        let n = w.load.clients.clamp(1, MAX_CONNECTIONS);
        let connect = (0..n).map(|_| Client::connect(urls.clone(), Some(opts.clone())));
        let clients =
            tokio::time::timeout(super::SETUP_TIMEOUT, futures::future::try_join_all(connect))
                .await
                .map_err(|_| StrategyError::Timeout("connect to etcd"))??;
        Ok(Self {
            clients,
            ttl_s: lease_ttl_s(w.lock.ttl),
            acquire_timeout: w.lock.acquire_timeout,
            timeout: w.load.timeout,
            held: Mutex::new(HashMap::new()),
        })
    }

    fn client(&self, client: u32) -> Client {
        self.clients[client as usize % self.clients.len()].clone()
    }

    /// Abandons an acquisition: stops renewing and revokes the lease, which deletes our waiter
    /// key (or the lock, if the server granted it just as we gave up). A failed revoke leaves
    /// the key to expire with the lease.
    async fn give_up(&self, etcd: &mut Client, keep: KeepAlive, lease_id: i64) {
        keep.stop();
        let _ = self.revoke(etcd, lease_id).await;
    }

    /// Revokes a lease, which deletes every key attached to it. `Ok(false)`: it had already
    /// expired.
    async fn revoke(&self, client: &mut Client, lease_id: i64) -> Result<bool, ErrorKind> {
        match tokio::time::timeout(self.timeout, client.lease_revoke(lease_id)).await {
            Ok(Ok(_)) => Ok(true),
            Ok(Err(etcd_client::Error::GRpcStatus(s))) if i32::from(s.code()) == GRPC_NOT_FOUND => {
                Ok(false)
            }
            Ok(Err(e)) => Err(classify(&e)),
            Err(_) => Err(ErrorKind::Timeout),
        }
    }
}

/// Renews `lease_id` every `every` until aborted, or until the lease is gone (a renewal
/// answered with TTL 0: returns `true`, the lease was lost) or a renewal fails (returns
/// `false`: whether the lease outlives it, release will find out). Each send and answer is
/// bounded by `timeout`.
async fn keep_alive(mut client: Client, lease_id: i64, every: Duration, timeout: Duration) -> bool {
    let Ok(Ok((mut keeper, mut stream))) =
        tokio::time::timeout(timeout, client.lease_keep_alive(lease_id)).await
    else {
        tracing::debug!(lease_id, "keep-alive stream could not be opened");
        return false;
    };
    loop {
        tokio::time::sleep(every).await;
        let renewed = async {
            keeper.keep_alive().await?;
            stream.message().await
        };
        match tokio::time::timeout(timeout, renewed).await {
            Ok(Ok(Some(r))) if r.ttl() > 0 => {}
            Ok(Ok(Some(_))) => {
                tracing::debug!(lease_id, "lease expired before renewal");
                return true;
            }
            other => {
                tracing::debug!(lease_id, ?other, "keep-alive failed");
                return false;
            }
        }
    }
}

#[async_trait]
impl Lock for EtcdLock {
    async fn acquire(&self, client: u32, key: &str, token: &str) -> Result<Lease, AcquireError> {
        let mut etcd = self.client(client);
        let started = tokio::time::Instant::now();
        let grant = within(self.timeout, etcd.lease_grant(self.ttl_s, None), classify)
            .await
            .map_err(AcquireError::Failed)?;
        let lease_id = grant.id();
        // Renew at a third of the TTL the server granted (it may have raised ours).
        let every = Duration::from_secs(grant.ttl().max(1) as u64) / 3;
        let keep = KeepAlive::spawn(keep_alive(etcd.clone(), lease_id, every, self.timeout));
        let remaining = self.acquire_timeout.saturating_sub(started.elapsed());
        let opts = LockOptions::new().with_lease(lease_id);
        let locked = match tokio::time::timeout(remaining, etcd.lock(key, Some(opts))).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                self.give_up(&mut etcd, keep, lease_id).await;
                return Err(AcquireError::Failed(classify(&e)));
            }
            Err(_) => {
                self.give_up(&mut etcd, keep, lease_id).await;
                return Err(AcquireError::Busy);
            }
        };
        let lock_key = locked.key().to_vec();
        // The fencing token: the lock key's create revision. Waiters queue by it, so each new
        // holder of a name has a larger one than every holder before it.
        let fence = match within(self.timeout, etcd.get(lock_key.clone(), None), classify).await {
            Ok(r) => r.kvs().first().map(|kv| kv.create_revision() as u64),
            Err(k) => {
                self.give_up(&mut etcd, keep, lease_id).await;
                return Err(AcquireError::Failed(k));
            }
        };
        let Some(fence) = fence else {
            // The key vanished between Lock and Get: the lease already expired.
            self.give_up(&mut etcd, keep, lease_id).await;
            return Err(AcquireError::Failed(ErrorKind::Server));
        };
        let held = Held {
            key: lock_key,
            lease_id,
        };
        self.held
            .lock()
            .expect("held-leases lock poisoned")
            .insert(token.to_string(), held);
        let mut lease = Lease::new(key, token);
        lease.fence = Some(fence);
        lease.keepalive = Some(keep);
        Ok(lease)
    }

    /// Lease grant, then `Lock` for what is left of the wait, then the fence read and, when it
    /// fails, the revoke: the wait plus 3 calls.
    fn acquire_bound(&self) -> Duration {
        self.acquire_timeout + super::calls(3, self.timeout)
    }

    /// Unlock, then revoke.
    fn release_bound(&self) -> Duration {
        super::calls(2, self.timeout)
    }

    async fn release(&self, client: u32, lease: &Lease) -> Result<bool, ErrorKind> {
        let Some(held) = self
            .held
            .lock()
            .expect("held-leases lock poisoned")
            .remove(&lease.token)
        else {
            return Ok(false);
        };
        if let Some(k) = &lease.keepalive {
            k.stop();
        }
        let mut etcd = self.client(client);
        // Unlock deletes the key whether or not it still existed, so it cannot tell whether we
        // still held the lock; the revoke can: an expired lease is not found.
        // A failed unlock is repaired by the revoke, which deletes the key too.
        let _ = within(self.timeout, etcd.unlock(held.key), classify).await;
        self.revoke(&mut etcd, held.lease_id).await
    }
}
