//! Redis connections and error classification shared by the Redis strategies.

use std::net::SocketAddr;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use super::StrategyError;
use crate::cluster::{Auth, Endpoints};
use crate::record::ErrorKind;
use crate::workload::Workload;

/// At most this many sockets per Redis server; buyers beyond it share (multiplexed).
const MAX_CONNECTIONS: u32 = 256;

/// A connection to one Redis server: multiplexed, and re-established in the background after
/// it breaks (a killed and restarted server). A command that fails is never retried (it may
/// have run), it only triggers the reconnect.
pub type Con = ConnectionManager;

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
        .set_max_delay(std::time::Duration::from_millis(100));
    let n = w.load.clients.clamp(1, MAX_CONNECTIONS);
    let connect =
        (0..n).map(|_| ConnectionManager::new_with_config(client.clone(), config.clone()));
    Ok(futures::future::try_join_all(connect).await?)
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
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
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
/// names, re-resolved after an error (a failover shows up as READONLY or a lost connection).
pub struct RedisTarget {
    current: std::sync::RwLock<std::sync::Arc<Current>>,
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
            current: std::sync::RwLock::new(std::sync::Arc::new(Current {
                addr,
                cons,
                generation: 0,
            })),
            sentinels,
            auth: auth.cloned(),
            w: w.clone(),
            resolving: tokio::sync::Mutex::new(()),
            addr_tx: tokio::sync::watch::channel(addr).0,
        })
    }

    /// Bound of one command of at most `timeout`: on a Sentinel-backed target a failed command
    /// is followed by asking the sentinels (1 s each, in turn) for the master and reconnecting.
    pub fn call_bound(&self, timeout: std::time::Duration) -> std::time::Duration {
        if self.sentinels.addrs.is_empty() {
            return timeout;
        }
        let ask = std::time::Duration::from_secs(1) * self.sentinels.addrs.len() as u32;
        timeout + ask + timeout
    }

    /// The address commands go to, changing when Sentinel names a new master.
    pub fn addr_watch(&self) -> tokio::sync::watch::Receiver<SocketAddr> {
        self.addr_tx.subscribe()
    }

    /// A connection for `client` and the generation it belongs to.
    pub fn con(&self, client: u32) -> (Con, u64) {
        let cur = self.current.read().expect("never poisoned").clone();
        (
            cur.cons[client as usize % cur.cons.len()].clone(),
            cur.generation,
        )
    }

    /// Reports a failed call made on `generation`: with Sentinel, ask for the master again and
    /// reconnect (bounded by the workload's timeouts). A fixed target ignores it.
    pub async fn failed(&self, generation: u64) {
        if self.sentinels.addrs.is_empty() {
            return;
        }
        let _one = self.resolving.lock().await;
        let old = self.current.read().expect("never poisoned").clone();
        if old.generation != generation {
            return; // someone already moved on
        }
        let Ok(addr) = self.sentinels.master().await else {
            return;
        };
        if let Ok(cons) = connections(addr, self.auth.as_ref(), &self.w).await {
            tracing::info!(from = %old.addr, to = %addr, "redis-sentinel: reconnected to the master");
            *self.current.write().expect("never poisoned") = std::sync::Arc::new(Current {
                addr,
                cons,
                generation: generation + 1,
            });
            self.addr_tx.send_replace(addr);
        }
    }
}
