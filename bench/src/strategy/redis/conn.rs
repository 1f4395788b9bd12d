//! Redis connections and error classification shared by the Redis strategies.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use futures::StreamExt;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::{Cmd, Pipeline, Value};

use crate::cluster::{Auth, Endpoints};
use crate::record::ErrorKind;
use crate::strategy::StrategyError;
use crate::workload::Workload;

/// At most this many sockets per Redis server; buyers beyond it share (multiplexed).
const MAX_CONNECTIONS: u32 = 256;

/// A connection idle longer than this is checked with a PING before its next command: HikariCP's
/// default `aliveBypassWindowMs` (500 ms, `HikariPool.getConnection`). Under load connections are
/// busier than that and never pay for the check.
pub const IDLE_CHECK: Duration = Duration::from_millis(500);

/// A connection to one Redis server: multiplexed, re-established in the background after it
/// breaks (a killed and restarted server), and checked before a command as a client's pool
/// checks what it hands out, so a buyer's first command after the server is back reaches it
/// (redis-py's `ConnectionPool.get_connection`: a socket closed or with unread data fails
/// `can_read()`, and is reconnected before sending; sqlx's `test_before_acquire` pings):
/// - idle longer than [`IDLE_CHECK`], it is PINGed first. A PING failing on a broken
///   connection makes the manager reconnect; a second PING waits for that. PING is idempotent.
/// - a command refused at connect (`ConnectionRefused`: the manager's last reconnect failed, and
///   it returns that error without sending) is sent once more, after the new reconnect.
///
/// Any other failed command is never resent: it may have run (redis-py's default `Retry`, 10
/// retries on `ConnectionError` / `TimeoutError`, would resend it). Call sites cut the whole
/// call at `load.timeout`.
#[derive(Clone)]
pub struct Con {
    inner: ConnectionManager,
    /// When a reply last came back (µs since [`epoch`]), shared by the clones.
    last_reply_us: Arc<AtomicU64>,
}

/// The origin of [`Con::last_reply_us`].
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn now_us() -> u64 {
    epoch().elapsed().as_micros() as u64
}

impl Con {
    fn new(inner: ConnectionManager) -> Self {
        Self {
            inner,
            last_reply_us: Arc::new(AtomicU64::new(now_us())),
        }
    }

    /// A reply (even an error reply) proves the connection works.
    fn saw<T>(&self, r: &redis::RedisResult<T>) -> bool {
        let replied = match r {
            Ok(_) => true,
            Err(e) => !e.is_io_error() && !e.is_connection_dropped() && !e.is_timeout(),
        };
        if replied {
            self.last_reply_us.fetch_max(now_us(), Ordering::Relaxed);
        }
        replied
    }

    /// PINGs a connection idle longer than [`IDLE_CHECK`]; a broken one is reconnected by the
    /// first PING's failure and checked by the second. Nothing of the caller's was sent yet.
    async fn check_if_idle(&mut self) -> redis::RedisResult<()> {
        let idle_us = now_us().saturating_sub(self.last_reply_us.load(Ordering::Relaxed));
        if idle_us <= IDLE_CHECK.as_micros() as u64 {
            return Ok(());
        }
        let ping = redis::cmd("PING");
        let r = self.inner.send_packed_command(&ping).await;
        sent(&r);
        if self.saw(&r) {
            return r.map(drop);
        }
        match r {
            Err(e) if e.is_connection_dropped() => {
                let again = self.inner.send_packed_command(&ping).await;
                sent(&again);
                self.saw(&again);
                again.map(drop)
            }
            r => r.map(drop),
        }
    }

    /// Sends `send` after the idle check, and once more only if it was refused at connect.
    async fn send<'a, T, F>(&'a mut self, send: F) -> redis::RedisResult<T>
    where
        F: Fn(ConnectionManager) -> redis::RedisFuture<'a, T>,
    {
        self.check_if_idle().await?;
        let mut r = send(self.inner.clone()).await;
        if matches!(&r, Err(e) if e.is_connection_refusal()) {
            r = send(self.inner.clone()).await;
        }
        sent(&r);
        self.saw(&r);
        r
    }
}

/// Counts a call as a round trip of the buyer's attempt ([`crate::record::trips`]) unless it
/// was refused at connect, which sends nothing. A pipeline or a script call is one; a call
/// that timed out or lost its connection was sent and waited for, so it is one too.
fn sent<T>(r: &redis::RedisResult<T>) {
    if !matches!(r, Err(e) if e.is_connection_refusal()) {
        crate::record::trips::trip();
    }
}

impl ConnectionLike for Con {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> redis::RedisFuture<'a, Value> {
        Box::pin(self.send(move |mut c| Box::pin(async move { c.send_packed_command(cmd).await })))
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipe: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<Value>> {
        Box::pin(self.send(move |mut c| {
            Box::pin(async move { c.send_packed_commands(pipe, offset, count).await })
        }))
    }

    fn get_db(&self) -> i64 {
        self.inner.get_db()
    }
}

/// One connection per buyer (bounded), each with the workload's timeouts.
pub async fn connections(
    addr: SocketAddr,
    auth: Option<&Auth>,
    w: &Workload,
) -> Result<Vec<Con>, StrategyError> {
    let client = crate::cluster::redis::client(addr, auth)?;
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(w.load.timeout))
        .set_response_timeout(Some(w.load.timeout))
        // A few quick tries per break; the next failed command starts another round.
        .set_number_of_retries(3)
        .set_max_delay(Duration::from_millis(100));
    let n = w.load.clients.clamp(1, MAX_CONNECTIONS);
    let connect =
        (0..n).map(|_| ConnectionManager::new_with_config(client.clone(), config.clone()));
    let managers = futures::future::try_join_all(connect).await?;
    Ok(managers.into_iter().map(Con::new).collect())
}

/// Runs a read-only query (the audit's), again after a broken connection: the connection
/// manager reconnects in between, and a read changes nothing when it runs twice. A connection
/// idle since its server was killed or cut off fails its first command.
pub async fn read_retrying<T, F, Fut>(mut query: F) -> redis::RedisResult<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = redis::RedisResult<T>>,
{
    let mut tries = 0;
    loop {
        match query().await {
            Err(e) if tries < 3 && classify(&e) == ErrorKind::Connection => {
                tries += 1;
                tracing::debug!("read retried after: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            r => return r,
        }
    }
}

/// Classifies a Redis error: an error reply is definite, anything else may not be.
pub fn classify(e: &redis::RedisError) -> ErrorKind {
    if e.is_timeout() {
        ErrorKind::Timeout
    } else if e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() {
        ErrorKind::Connection
    } else {
        ErrorKind::Server
    }
}

/// Where a Redis strategy sends its commands: a fixed server, or the master that Sentinel
/// names, re-resolved after an error (a failover shows up as READONLY or a lost connection) and,
/// once [`Self::follow_switches`] is on, as soon as a sentinel announces `+switch-master`.
pub struct RedisTarget {
    shared: Arc<Shared>,
    /// The `+switch-master` subscriber, aborted when the target drops.
    follower: Option<tokio::task::AbortHandle>,
}

impl Drop for RedisTarget {
    fn drop(&mut self) {
        if let Some(f) = &self.follower {
            f.abort();
        }
    }
}

/// What the target and its subscriber share.
struct Shared {
    current: std::sync::RwLock<Arc<Current>>,
    /// None (no addresses) for a fixed server.
    sentinels: Sentinels,
    /// Credentials of the Redis servers.
    auth: Option<Auth>,
    w: Workload,
    /// One re-resolution at a time; the others see the new generation and skip theirs.
    resolving: tokio::sync::Mutex<()>,
    /// The current server's address, for subscribers that follow it (release channels).
    addr_tx: tokio::sync::watch::Sender<SocketAddr>,
}

/// The sentinels that name the master, and how to ask them.
#[derive(Default)]
struct Sentinels {
    addrs: Vec<SocketAddr>,
    /// The name they monitor the master under.
    master_name: String,
    auth: Option<Auth>,
}

impl Sentinels {
    async fn master(&self) -> Result<SocketAddr, String> {
        crate::cluster::sentinel::current_master(&self.addrs, &self.master_name, self.auth.as_ref())
            .await
    }
}

struct Current {
    addr: SocketAddr,
    cons: Vec<Con>,
    generation: u64,
}

/// Connecting to a sentinel, and its answer to a PING, may take this long before the subscriber
/// gives up on it and tries again.
const SENTINEL_CALL: Duration = Duration::from_secs(1);
/// How often the subscriber pings its sentinel: a sentinel cut off or stopped closes nothing,
/// so only an unanswered PING tells the subscription is dead.
const SENTINEL_PING: Duration = Duration::from_secs(1);
/// Pause before subscribing again to a sentinel that failed.
const SENTINEL_RETRY: Duration = Duration::from_millis(500);

impl RedisTarget {
    /// Always the server at `addr`.
    pub async fn fixed(
        addr: SocketAddr,
        auth: Option<&Auth>,
        w: &Workload,
    ) -> Result<Self, StrategyError> {
        Self::new(addr, Sentinels::default(), auth, w).await
    }

    /// The master that the sentinels of `ep` name (`ep.sentinel_master()`).
    pub async fn via_sentinels(ep: &Endpoints, w: &Workload) -> Result<Self, StrategyError> {
        let sentinels = Sentinels {
            addrs: ep.sentinels.clone(),
            master_name: ep.sentinel_master().to_string(),
            auth: ep.sentinel_auth.clone(),
        };
        let addr = sentinels.master().await.map_err(|e| {
            StrategyError::Redis(redis::RedisError::from((
                redis::ErrorKind::Io,
                "no master from Sentinel",
                e,
            )))
        })?;
        Self::new(addr, sentinels, ep.redis_auth.as_ref(), w).await
    }

    async fn new(
        addr: SocketAddr,
        sentinels: Sentinels,
        auth: Option<&Auth>,
        w: &Workload,
    ) -> Result<Self, StrategyError> {
        let cons = connections(addr, auth, w).await?;
        Ok(Self {
            shared: Arc::new(Shared {
                current: std::sync::RwLock::new(Arc::new(Current {
                    addr,
                    cons,
                    generation: 0,
                })),
                sentinels,
                auth: auth.cloned(),
                w: w.clone(),
                resolving: tokio::sync::Mutex::new(()),
                addr_tx: tokio::sync::watch::channel(addr).0,
            }),
            follower: None,
        })
    }

    /// Also moves to the new master as soon as a sentinel publishes `+switch-master` for our
    /// master name, before any call has failed on the old one. Subscribes on every sentinel,
    /// as Jedis's `JedisSentinelPool` does: a sentinel cut off with the old master announces
    /// nothing, only the others do. A subscription that breaks or stops answering PING is made
    /// again (every [`SENTINEL_RETRY`]) while the others keep listening. The subscriber stops
    /// when the target drops. A fixed target has no sentinels: nothing to follow.
    pub fn follow_switches(mut self) -> Self {
        if self.shared.sentinels.addrs.is_empty() || self.follower.is_some() {
            return self;
        }
        let shared = Arc::downgrade(&self.shared);
        let addrs = self.shared.sentinels.addrs.clone();
        let task = tokio::spawn(async move {
            futures::future::join_all(addrs.into_iter().map(|a| follow(shared.clone(), a))).await;
        });
        self.follower = Some(task.abort_handle());
        self
    }

    /// Bound of one command of at most `timeout`: on a Sentinel-backed target a failed command
    /// is followed by asking the sentinels (1 s each, in turn) for the master and reconnecting.
    pub fn call_bound(&self, timeout: Duration) -> Duration {
        if self.shared.sentinels.addrs.is_empty() {
            return timeout;
        }
        let ask = SENTINEL_CALL * self.shared.sentinels.addrs.len() as u32;
        timeout + ask + timeout
    }

    /// The address commands go to, changing when Sentinel names a new master.
    pub fn addr_watch(&self) -> tokio::sync::watch::Receiver<SocketAddr> {
        self.shared.addr_tx.subscribe()
    }

    /// A connection for `client` and the generation it belongs to.
    pub fn con(&self, client: u32) -> (Con, u64) {
        let cur = self.shared.current();
        (
            cur.cons[client as usize % cur.cons.len()].clone(),
            cur.generation,
        )
    }

    /// Reports a failed call made on `generation`: with Sentinel, ask for the master again and
    /// reconnect (bounded by the workload's timeouts). A fixed target ignores it.
    pub async fn failed(&self, generation: u64) {
        self.shared.failed(generation).await
    }
}

impl Shared {
    fn current(&self) -> Arc<Current> {
        self.current.read().expect("never poisoned").clone()
    }

    async fn failed(&self, generation: u64) {
        if self.sentinels.addrs.is_empty() {
            return;
        }
        let _one = self.resolving.lock().await;
        let old = self.current();
        if old.generation != generation {
            return; // someone already moved on
        }
        let Ok(addr) = self.sentinels.master().await else {
            return;
        };
        self.reconnect(&old, addr, "a failed call").await;
    }

    /// A sentinel announced `addr` as the master: move there unless we already are.
    async fn switched(&self, addr: SocketAddr) {
        let _one = self.resolving.lock().await;
        let old = self.current();
        if old.addr != addr {
            self.reconnect(&old, addr, "+switch-master").await;
        }
    }

    /// Replaces `old` by fresh connections to `addr` (kept if they cannot be made).
    async fn reconnect(&self, old: &Current, addr: SocketAddr, why: &str) {
        if let Ok(cons) = connections(addr, self.auth.as_ref(), &self.w).await {
            tracing::info!(from = %old.addr, to = %addr, why, "redis-sentinel: reconnected to the master");
            *self.current.write().expect("never poisoned") = Arc::new(Current {
                addr,
                cons,
                generation: old.generation + 1,
            });
            self.addr_tx.send_replace(addr);
        }
    }
}

/// Listens for `+switch-master` on the sentinel at `sentinel` until the target is gone,
/// subscribing again after the subscription breaks or stops answering.
async fn follow(shared: Weak<Shared>, sentinel: SocketAddr) {
    loop {
        let Some(s) = shared.upgrade() else { return };
        let (auth, name) = (s.sentinels.auth.clone(), s.sentinels.master_name.clone());
        drop(s); // hold the target only while a message is handled
        match subscribe(sentinel, auth.as_ref()).await {
            Ok(pubsub) => {
                let (mut sink, mut stream) = pubsub.split();
                let mut ping = tokio::time::interval(SENTINEL_PING);
                loop {
                    tokio::select! {
                        msg = stream.next() => {
                            let Some(msg) = msg else { break }; // the sentinel went away
                            let Some(addr) = switched_to(&msg, &name) else { continue };
                            let Some(s) = shared.upgrade() else { return };
                            s.switched(addr).await;
                        }
                        _ = ping.tick() => {
                            let pong = tokio::time::timeout(SENTINEL_CALL, sink.ping::<redis::Value>());
                            if !matches!(pong.await, Ok(Ok(_))) {
                                break;
                            }
                        }
                    }
                }
                tracing::debug!(%sentinel, "+switch-master subscription lost; subscribing again");
            }
            Err(e) => tracing::debug!(%sentinel, "cannot subscribe to +switch-master: {e}"),
        }
        tokio::time::sleep(SENTINEL_RETRY).await;
    }
}

/// A subscription to `+switch-master` on the sentinel at `addr`, within [`SENTINEL_CALL`].
async fn subscribe(addr: SocketAddr, auth: Option<&Auth>) -> Result<redis::aio::PubSub, String> {
    let client = crate::cluster::redis::client(addr, auth).map_err(|e| e.to_string())?;
    let sub = async {
        let mut pubsub = client.get_async_pubsub().await?;
        pubsub.subscribe("+switch-master").await?;
        Ok::<_, redis::RedisError>(pubsub)
    };
    match tokio::time::timeout(SENTINEL_CALL, sub).await {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(_) => Err("timed out".into()),
    }
}

/// The new master a `+switch-master` message names, if it is about `name`: its payload is
/// `<name> <old ip> <old port> <new ip> <new port>`.
fn switched_to(msg: &redis::Msg, name: &str) -> Option<SocketAddr> {
    let payload: String = msg.get_payload().ok()?;
    parse_switch(&payload, name)
}

fn parse_switch(payload: &str, name: &str) -> Option<SocketAddr> {
    let f: Vec<&str> = payload.split_whitespace().collect();
    match f.as_slice() {
        [n, _, _, ip, port] if *n == name => format!("{ip}:{port}").parse().ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_switch_names_the_new_master_of_our_name_only() {
        let msg = "lockbench 127.0.0.1 6379 127.0.0.1 6380";
        assert_eq!(
            parse_switch(msg, "lockbench"),
            Some("127.0.0.1:6380".parse().unwrap())
        );
        assert_eq!(parse_switch(msg, "other"), None);
        assert_eq!(parse_switch("lockbench 127.0.0.1 6379", "lockbench"), None);
    }
}
