//! `etcd`: etcd's v3 lock service on one session per buyer, as a Go service uses
//! `concurrency.NewSession` + `NewMutex`; the revision the lock was granted at is the fencing
//! token.
//!
//! Session: each buyer (the `client` index) keeps one lease of `lock.ttl` (whole seconds; etcd
//! raises it to its minimum) and one task renewing it every ttl/3, created at its first acquire
//! and reused by every later one. A new one replaces it once it is found unusable: a renewal
//! answered TTL 0 (lost), renewals failed for a whole TTL, or `Lock` / release found the lease
//! gone. Acquire: `Lock(name, lease)`, which the server answers once every older waiter's key
//! is gone (FIFO by create revision, each waiter watching only its predecessor). Release:
//! delete the key, as v3lock's `Unlock` does; the count deleted says whether we still held it.
//! Two consensus writes per sale (the key's put and its delete); the grant once per buyer. If
//! the holder stalls past the TTL, the lease expires and the key with it: the next waiter gets
//! the lock, which is why the token matters.
//!
//! After the grant, the key is read: a waiter whose lease expired while it waited is otherwise
//! told it holds the lock (etcd 3.4's lock service; Go's client checks since 3.5).
//!
//! Fencing token: the revision in the `Lock` answer's header, read without another call. Granted
//! at once, it is the revision of the put that created the key (its create revision); granted
//! after a wait, it is the revision of the server's read that found every older waiter's key
//! gone (v3lock's mutex), later than the create revision. Either way every earlier holder's key
//! existed at that holder's grant revision and is gone at ours, so it was deleted in between:
//! each new holder of a name gets a larger token than every holder before it.
//!
//! The lock key is `<name>/<lease id in hex>`, so a buyer's successive locks on one name share
//! it. A lock of an attempt that was cut and whose release has not finished would be reused by
//! the buyer's next `Lock` (the mutex keeps a key its session already has), and that late
//! release would then delete the new holder's key: an acquire that finds such a lock abandons
//! the session (revoked: every key of it goes) and starts a new one.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use etcd_client::{Client, LockOptions};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::record::ErrorKind;
use crate::record::trips::one;
use crate::strategy::{
    AcquireError, Acquired, Expiry, KeepAlive, Lease, Lock, StrategyError, within,
};
use crate::workload::Workload;

use crate::strategy::entry::needs::MARIADB_ETCD;
use crate::strategy::entry::{Kind, StrategyInfo};

/// `etcd`.
pub const ETCD: StrategyInfo = StrategyInfo {
    id: "etcd",
    kind: Kind::Lock,
    locks: true,
    fenced: false,
    fence_token: Some("revision the lock was granted at"),
    needs: MARIADB_ETCD,
    wait: None,
    about: "etcd v3 lock on one lease + keep-alive per buyer (Go's concurrency.Session)",
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
    about: "etcd with the revision the lock was granted at as fencing token; stale writes refused",
    ..ETCD
};

/// At most this many gRPC channels; buyers beyond it share one (HTTP/2 multiplexes).
const MAX_CONNECTIONS: u32 = 64;

/// Pause between renewals that failed, while the lease may still be alive.
const RENEW_RETRY: Duration = Duration::from_millis(100);

// gRPC status codes (the numbers are fixed by the gRPC spec).
const GRPC_DEADLINE_EXCEEDED: i32 = 4;
const GRPC_NOT_FOUND: i32 = 5;
const GRPC_UNAVAILABLE: i32 = 14;

/// What the keep-alive task knows of a session's lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Health {
    /// Renewed within its TTL.
    Alive,
    /// Renewals failed for a whole TTL: probably expired, not known.
    Ended,
    /// A renewal was answered TTL 0: the lease is gone, and every key on it.
    Lost,
}

/// One buyer's lease and the task renewing it.
struct Session {
    lease_id: i64,
    /// Set by the keep-alive task.
    health: watch::Receiver<Health>,
    keep: tokio::task::AbortHandle,
    /// Given up on (its keys may be stale): never used again, and already revoked.
    abandoned: AtomicBool,
    /// To revoke it.
    client: Client,
    timeout: Duration,
    /// When the server ends it unless renewed: the grant's send, then each renewal's.
    expiry: Expiry,
}

impl Session {
    /// Grants a lease of `ttl_s` and starts renewing it; returns it with the TTL granted.
    async fn start(
        client: &mut Client,
        ttl_s: i64,
        timeout: Duration,
    ) -> Result<(Arc<Self>, i64), ErrorKind> {
        let sent = std::time::Instant::now();
        let grant = within(timeout, one(client.lease_grant(ttl_s, None)), classify).await?;
        let granted = grant.ttl().max(1);
        let (tx, health) = watch::channel(Health::Alive);
        let ttl = Duration::from_secs(granted as u64);
        let expiry = Expiry::renewable(sent, ttl);
        let renew = Renew {
            lease_id: grant.id(),
            ttl,
            timeout,
            expiry: expiry.clone(),
        };
        let keep = tokio::spawn(keep_alive(client.clone(), renew, tx));
        let session = Self {
            lease_id: grant.id(),
            health,
            keep: keep.abort_handle(),
            abandoned: AtomicBool::new(false),
            client: client.clone(),
            timeout,
            expiry,
        };
        Ok((Arc::new(session), granted))
    }

    /// Whether new locks may be taken on it.
    fn usable(&self) -> bool {
        !self.abandoned.load(Ordering::SeqCst) && *self.health.borrow() == Health::Alive
    }

    /// The lock key `Lock(name)` creates on this lease (v3lock's `<name>/<lease hex>`).
    fn key(&self, name: &str) -> String {
        format!("{name}/{:x}", self.lease_id)
    }

    /// Stops renewing without revoking: for a lease found gone.
    fn forget(&self) {
        self.keep.abort();
        self.abandoned.store(true, Ordering::SeqCst);
    }

    /// Stops renewing and revokes the lease in the background (bounded), which deletes every
    /// key on it; if the revoke fails, they expire with the lease.
    fn abandon(&self) {
        self.keep.abort();
        if self.abandoned.swap(true, Ordering::SeqCst) || *self.health.borrow() == Health::Lost {
            return;
        }
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let (mut client, id, timeout) = (self.client.clone(), self.lease_id, self.timeout);
            rt.spawn(async move {
                let _ = tokio::time::timeout(timeout, client.lease_revoke(id)).await;
            });
        }
    }
}

impl Drop for Session {
    /// A session never outlives its buyer's strategy (nor a replacement): revoked, so its
    /// keys do not linger for a TTL.
    fn drop(&mut self) {
        self.abandon();
    }
}

/// A lock granted and not yet released.
struct Held {
    /// The key `Lock` returned.
    key: Vec<u8>,
    /// The session it was taken on.
    session: Arc<Session>,
}

/// One buyer's session and its locks not yet released.
#[derive(Default)]
struct Buyer {
    session: Option<Arc<Session>>,
    /// By owner token: at most one in flight, plus those of cut attempts whose release has not
    /// finished.
    held: HashMap<String, Held>,
}

/// The etcd session + lock strategy.
pub struct EtcdLock {
    clients: Vec<Client>,
    ttl_s: i64,
    acquire_timeout: Duration,
    timeout: Duration,
    /// By buyer index.
    buyers: Mutex<HashMap<u32, Buyer>>,
    /// The TTL of the last lease the server granted, seconds (0: none yet).
    granted_ttl_s: AtomicI64,
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

/// Whether the server refused a call because the lease it names is gone.
fn lease_gone(e: &etcd_client::Error) -> bool {
    matches!(e, etcd_client::Error::GRpcStatus(s)
        if i32::from(s.code()) == GRPC_NOT_FOUND || s.message().contains("lease not found"))
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
        // which lives as long as the session. Every call is bounded with `within` instead.
        let opts = crate::cluster::etcd::options(auth)
            .with_connect_timeout(crate::strategy::SETUP_TIMEOUT);
        let n = w.load.clients.clamp(1, MAX_CONNECTIONS);
        let connect = (0..n).map(|_| Client::connect(urls.clone(), Some(opts.clone())));
        let clients = tokio::time::timeout(
            crate::strategy::SETUP_TIMEOUT,
            futures::future::try_join_all(connect),
        )
        .await
        .map_err(|_| StrategyError::Timeout("connect to etcd"))??;
        Ok(Self {
            clients,
            ttl_s: lease_ttl_s(w.lock.ttl),
            acquire_timeout: w.lock.acquire_timeout,
            timeout: w.load.timeout,
            buyers: Mutex::new(HashMap::new()),
            granted_ttl_s: AtomicI64::new(0),
        })
    }

    fn client(&self, client: u32) -> Client {
        self.clients[client as usize % self.clients.len()].clone()
    }

    fn buyers(&self) -> std::sync::MutexGuard<'_, HashMap<u32, Buyer>> {
        self.buyers.lock().expect("buyers lock poisoned")
    }

    /// The buyer's session: its current one while usable and free of unreleased locks, else a
    /// new one (one lease grant).
    async fn session(&self, client: u32, etcd: &mut Client) -> Result<Arc<Session>, ErrorKind> {
        {
            let mut buyers = self.buyers();
            let b = buyers.entry(client).or_default();
            if let Some(s) = &b.session {
                // A lock still held on it belongs to a cut attempt (this buyer's attempts run
                // one at a time): its key would be reused, so the session is given up.
                let stale = b.held.values().any(|h| Arc::ptr_eq(&h.session, s));
                if stale || !s.usable() {
                    s.abandon();
                    b.session = None;
                } else {
                    return Ok(s.clone());
                }
            }
        }
        let (session, granted) = Session::start(etcd, self.ttl_s, self.timeout).await?;
        self.granted_ttl_s.store(granted, Ordering::Relaxed);
        self.buyers().entry(client).or_default().session = Some(session.clone());
        Ok(session)
    }

    /// Records the lock `locked_key` granted on `session` as held under `token`.
    fn hold(&self, client: u32, token: &str, locked_key: &[u8], session: &Arc<Session>) {
        let held = Held {
            key: locked_key.to_vec(),
            session: session.clone(),
        };
        self.buyers()
            .entry(client)
            .or_default()
            .held
            .insert(token.to_string(), held);
    }

    /// Stops using `session` for new locks (it stays alive for locks still held on it).
    fn retire(&self, client: u32, session: &Arc<Session>) {
        if let Some(b) = self.buyers().get_mut(&client)
            && b.session.as_ref().is_some_and(|s| Arc::ptr_eq(s, session))
        {
            b.session = None;
        }
    }

    /// Leaves the queue of `name` after a `Lock` that failed or was given up: deletes our
    /// waiter key (the server deletes it too when the call is cancelled, but not if it granted
    /// the lock just as we gave up). If that fails, the whole session is abandoned.
    async fn leave_queue(
        &self,
        etcd: &mut Client,
        client: u32,
        session: &Arc<Session>,
        name: &str,
    ) {
        let key = session.key(name);
        if within(self.timeout, one(etcd.delete(key, None)), classify)
            .await
            .is_err()
        {
            session.abandon();
            self.retire(client, session);
        }
    }
}

/// Abandons the session if dropped armed: an acquire cut while its `Lock` was under way (or
/// while leaving the queue) may have left a waiter key, which the live session would keep
/// forever.
struct Queued<'a> {
    session: &'a Session,
    armed: bool,
}

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.session.abandon();
        }
    }
}

/// What the keep-alive task renews: the lease, its TTL, each call's bound, and the expiry it
/// moves at each renewal.
struct Renew {
    lease_id: i64,
    ttl: Duration,
    timeout: Duration,
    expiry: Expiry,
}

/// Renews `lease_id` every ttl/3, telling `health` when it is lost (a renewal answered TTL 0)
/// or ended (no renewal succeeded for a whole `ttl`); runs until then or until aborted. A
/// failed renewal reopens the stream and retries every [`RENEW_RETRY`]. Each open, send and
/// answer is bounded by `timeout`.
async fn keep_alive(mut client: Client, r: Renew, health: watch::Sender<Health>) {
    let Renew {
        lease_id,
        ttl,
        timeout,
        expiry,
    } = r;
    let every = ttl / 3;
    let mut renewed = Instant::now();
    let mut next = renewed + every;
    let mut stream = None;
    loop {
        tokio::time::sleep_until(next).await;
        let sent = std::time::Instant::now();
        let once = async {
            if stream.is_none() {
                stream = Some(client.lease_keep_alive(lease_id).await?);
            }
            let (keeper, answers) = stream.as_mut().expect("opened above");
            keeper.keep_alive().await?;
            answers.message().await
        };
        let answer = tokio::time::timeout(timeout, once).await;
        match answer {
            Ok(Ok(Some(r))) if r.ttl() > 0 => {
                expiry.renewed(sent);
                renewed = Instant::now();
                next = renewed + every;
            }
            Ok(Ok(Some(_))) => {
                tracing::debug!(lease_id, "lease expired before renewal");
                health.send_replace(Health::Lost);
                return;
            }
            other => {
                tracing::debug!(lease_id, ?other, "renewal failed");
                stream = None;
                if renewed.elapsed() >= ttl {
                    health.send_replace(Health::Ended);
                    return;
                }
                next = Instant::now() + RENEW_RETRY.min(every);
            }
        }
    }
}

/// Whether the session was found lost (for [`Lease::known_lost`], through a [`KeepAlive`]
/// that watches it: stopping it at release leaves the session's own task running).
async fn found_lost(mut health: watch::Receiver<Health>) -> bool {
    health.wait_for(|h| *h == Health::Lost).await.is_ok()
}

/// The lease of a granted lock, fenced by its revision, lost when its session's lease is.
fn granted(key: &str, token: &str, fence: u64, session: &Session) -> Lease {
    let mut lease = Lease::new(key, token);
    lease.fence = Some(fence);
    lease.keepalive = Some(KeepAlive::spawn(found_lost(session.health.clone())));
    lease.expiry = Some(session.expiry.clone());
    lease
}

#[async_trait]
impl Lock for EtcdLock {
    /// Grants and revokes one lease, in the coordinator before the load, to learn the TTL
    /// the server grants (reported with the run).
    async fn prepare(&self, _skus: u32) -> Result<(), StrategyError> {
        let mut etcd = self.client(0);
        let grant = tokio::time::timeout(
            crate::strategy::SETUP_TIMEOUT,
            etcd.lease_grant(self.ttl_s, None),
        )
        .await
        .map_err(|_| StrategyError::Timeout("etcd lease grant"))??;
        self.granted_ttl_s.store(grant.ttl(), Ordering::Relaxed);
        tokio::time::timeout(
            crate::strategy::SETUP_TIMEOUT,
            etcd.lease_revoke(grant.id()),
        )
        .await
        .map_err(|_| StrategyError::Timeout("etcd lease revoke"))??;
        Ok(())
    }

    fn lease_ttl_granted(&self) -> Option<Duration> {
        let s = self.granted_ttl_s.load(Ordering::Relaxed);
        (s > 0).then(|| Duration::from_secs(s as u64))
    }

    async fn acquire(&self, client: u32, key: &str, token: &str) -> Acquired {
        let mut etcd = self.client(client);
        let started = Instant::now();
        let mut retried = false;
        loop {
            let session = self
                .session(client, &mut etcd)
                .await
                .map_err(AcquireError::Failed)?;
            let remaining = self.acquire_timeout.saturating_sub(started.elapsed());
            let opts = LockOptions::new().with_lease(session.lease_id);
            let mut queued = Queued {
                session: &session,
                armed: true,
            };
            let locked =
                match tokio::time::timeout(remaining, one(etcd.lock(key, Some(opts)))).await {
                    Ok(Ok(r)) => r,
                    // The session's lease expired before the keep-alive noticed: once, on a new one.
                    Ok(Err(e)) if lease_gone(&e) && !retried => {
                        queued.armed = false;
                        session.forget();
                        self.retire(client, &session);
                        retried = true;
                        continue;
                    }
                    Ok(Err(e)) => {
                        self.leave_queue(&mut etcd, client, &session, key).await;
                        queued.armed = false;
                        return Err(AcquireError::Failed(classify(&e)));
                    }
                    Err(_) => {
                        self.leave_queue(&mut etcd, client, &session, key).await;
                        queued.armed = false;
                        return Err(AcquireError::Busy);
                    }
                };
            let Some(fence) = locked.header().map(|h| h.revision() as u64) else {
                self.leave_queue(&mut etcd, client, &session, key).await;
                queued.armed = false;
                return Err(AcquireError::Failed(ErrorKind::Server));
            };
            // Go's Mutex.Lock (since etcd 3.5, "concurrency: make lock more reliable") reads
            // its key after the wait: a waiter whose lease expired while it waited has no key,
            // yet every older key is gone, so the wait ends as if granted. etcd 3.4's lock
            // service (Debian's) lacks that read and answers such a waiter as the holder while
            // the next waiter is granted too: a double grant, seen under a partition. One read
            // per grant (the answer does not say whether it waited).
            match within(self.timeout, one(etcd.get(locked.key(), None)), classify).await {
                Ok(r) if r.count() > 0 => {}
                Ok(_) => {
                    // The session expired: as for a lease found gone at `Lock`.
                    queued.armed = false;
                    session.forget();
                    self.retire(client, &session);
                    if retried {
                        return Err(AcquireError::Failed(ErrorKind::Server));
                    }
                    retried = true;
                    continue;
                }
                Err(k) => {
                    self.leave_queue(&mut etcd, client, &session, key).await;
                    queued.armed = false;
                    return Err(AcquireError::Failed(k));
                }
            }
            // From here the lock is in `held`, which release (or the next acquire) settles.
            self.hold(client, token, locked.key(), &session);
            queued.armed = false;
            return Ok(granted(key, token, fence, &session));
        }
    }

    /// The wait, plus the calls that may start before it has passed and run after it: a lease
    /// grant (again after a lease found gone), the read of the granted key, then leaving the
    /// queue.
    fn acquire_bound(&self) -> Duration {
        self.acquire_timeout + crate::strategy::calls(4, self.timeout)
    }

    /// One delete.
    fn release_bound(&self) -> Duration {
        crate::strategy::calls(1, self.timeout)
    }

    async fn release(&self, client: u32, lease: &Lease) -> Result<bool, ErrorKind> {
        if let Some(k) = &lease.keepalive {
            k.stop();
        }
        let found = self
            .buyers()
            .get(&client)
            .and_then(|b| b.held.get(&lease.token))
            .map(|h| (h.key.clone(), h.session.clone()));
        let Some((key, session)) = found else {
            return Ok(false);
        };
        let mut etcd = self.client(client);
        let deleted = within(self.timeout, one(etcd.delete(key, None)), classify).await;
        // Removed only now: until the delete is answered, the next acquire must see it.
        if let Some(b) = self.buyers().get_mut(&client) {
            b.held.remove(&lease.token);
        }
        match deleted {
            Ok(r) if r.deleted() > 0 => Ok(true),
            // The key was gone: the lease expired under the holder.
            Ok(_) => {
                session.forget();
                self.retire(client, &session);
                Ok(false)
            }
            // Whether the key is gone is unknown: the session goes, and the key with it.
            Err(k) => {
                session.abandon();
                self.retire(client, &session);
                Err(k)
            }
        }
    }
}
