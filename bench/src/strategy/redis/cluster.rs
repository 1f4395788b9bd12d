//! The Redis locks on a Redis Cluster (three masters, each with an asynchronous replica),
//! through the redis crate's cluster client: it learns the slot map from any node, sends each
//! command to the master of its key's slot, and reloads the map after a MOVED or a lost node.
//!
//! - `redis-cluster-setnx`: `redis-setnx` (SET NX PX, the same Lua compare-and-delete) on the
//!   master of the SKU's slot; stock in MariaDB.
//! - `redis-cluster-setnx-wait`: the same, and a lock counts only once `WAIT 1` says a replica
//!   has it, as `redis-sentinel-wait` does.
//! - `redis-cluster-lua-decr`: `redis-lua-decr` on the cluster (stock and orders of a SKU in
//!   its slot).
//!
//! Every key of a SKU carries the hash tag `{sku<N>}` ([`crate::cluster::redis_cluster::sku_key`]),
//! so a chaos fault can name "the master of SKU N's slot".

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, SingleNodeRoutingInfo, SlotAddr};

use super::conn::classify;
use super::lua_decr::LuaDecr;
use super::setnx::{UNLOCK, renewed_and_waited, wait_ms};
use crate::cluster::redis_cluster::{sku_key, slot};
use crate::cluster::{Endpoints, Prefix};
use crate::record::{ErrorKind, Outcome};
use crate::strategy::sql::mysql::SharedStore;
use crate::strategy::wait::{Try, WaitDefault, Waiter};
use crate::strategy::{
    AcquireError, Acquired, CriticalSection, Lease, Lock, Locked, Purchase, StrategyError, within,
};
use crate::workload::Workload;

use crate::strategy::entry::needs::{MARIADB_REDIS_CLUSTER, REDIS_CLUSTER};
use crate::strategy::entry::{Built, Kind, Setup, StrategyInfo};

/// redis-py's `RedisCluster` lock: `Lock` polls every 0.1 s. No release channel: a Lua script
/// may only touch keys of one slot, and a channel is not in the lock's.
const REDIS_PY_CLUSTER: WaitDefault = WaitDefault {
    can_notify: false,
    follows: "redis-py Lock on RedisCluster",
    ..crate::strategy::wait::REDIS_PY
};

/// `redis-cluster-setnx`.
pub const SETNX: StrategyInfo = StrategyInfo {
    id: "redis-cluster-setnx",
    kind: Kind::Lock,
    locks: true,
    fenced: false,
    fence_token: None,
    needs: MARIADB_REDIS_CLUSTER,
    wait: Some(REDIS_PY_CLUSTER),
    about: "redis-setnx on a Redis Cluster (3 masters + 3 async replicas), the SKU's slot master; stock in MariaDB",
    build: |s| Box::pin(build(s, false)),
};

/// `redis-cluster-setnx-wait`.
pub const SETNX_WAIT: StrategyInfo = StrategyInfo {
    id: "redis-cluster-setnx-wait",
    about: "redis-cluster-setnx plus WAIT 1 after lock and unlock (no replica acked: released, failed)",
    build: |s| Box::pin(build(s, true)),
    ..SETNX
};

/// `redis-cluster-lua-decr`.
pub const LUA_DECR: StrategyInfo = StrategyInfo {
    id: "redis-cluster-lua-decr",
    kind: Kind::LockFree,
    locks: false,
    fenced: false,
    fence_token: None,
    needs: REDIS_CLUSTER,
    wait: None,
    about: "redis-lua-decr on a Redis Cluster: stock and orders of a SKU in its slot (no lock)",
    build: |s| {
        Box::pin(async move {
            let cons = connections(s.ep, s.w).await?;
            let lua = Arc::new(LuaDecr::on(cons, &s.ep.prefix, s.w, sku_key, 1));
            Ok(Built {
                strategy: lua.clone(),
                store: lua,
                lock: None,
            })
        })
    },
};

/// At most this many cluster connections (each multiplexes one socket per node); buyers
/// beyond it share.
const MAX_CONNECTIONS: u32 = 8;
/// Retries of one command inside the cluster client: one redirect after a failover, and one
/// more for a redirect met on the way.
const CLIENT_RETRIES: u32 = 2;

/// Cluster connections to the nodes of `ep`, each call bounded by the workload's timeout.
/// The client follows MOVED / ASK redirects (a slot moved by a failover) as every cluster
/// client does, which takes retries: [`CLIENT_RETRIES`]. The same retries resend a command
/// after a broken connection, where it may have run: a resent SET NX then finds our own key
/// (the lock looks busy and frees at its ttl), a resent decrement sells twice and appends two
/// orders (the audit counts both). Every call stays cut at `load.timeout`.
async fn connections(
    ep: &Endpoints,
    w: &Workload,
) -> Result<Vec<ClusterConnection>, StrategyError> {
    if ep.redis_cluster.is_empty() {
        return Err(StrategyError::Missing {
            id: "redis-cluster".into(),
            what: "Redis Cluster nodes",
        });
    }
    let nodes: Vec<String> = ep
        .redis_cluster
        .iter()
        .map(|a| format!("redis://{a}"))
        .collect();
    let mut b = redis::cluster::ClusterClientBuilder::new(nodes)
        .connection_timeout(w.load.timeout)
        .response_timeout(w.load.timeout)
        .retries(CLIENT_RETRIES);
    if let Some(a) = &ep.redis_auth {
        b = b.password(&a.password);
        if let Some(u) = &a.username {
            b = b.username(u);
        }
    }
    let client = b.build()?;
    let n = w.load.clients.clamp(1, MAX_CONNECTIONS);
    let connect = (0..n).map(|_| client.get_async_connection());
    let all = tokio::time::timeout(
        crate::strategy::SETUP_TIMEOUT,
        futures::future::try_join_all(connect),
    )
    .await
    .map_err(|_| StrategyError::Timeout("connect to the Redis Cluster"))??;
    Ok(all)
}

async fn build(s: Setup<'_>, wait_replicas: bool) -> Result<Built, StrategyError> {
    let store = s.mariadb().await?;
    let lock = ClusterSetNx {
        cons: connections(s.ep, s.w).await?,
        unlock: redis::Script::new(UNLOCK),
        ttl: s.w.lock.ttl,
        waiter: s.waiter()?,
        timeout: s.w.load.timeout,
        prefix: s.ep.prefix.clone(),
        wait_replicas,
    };
    let tagged = Arc::new(SlotTagged {
        store: store.clone(),
        prefix: s.ep.prefix.clone(),
    });
    let locked = Locked::new(lock, tagged, s.w);
    Ok(Built {
        lock: Some(locked.lock()),
        strategy: Arc::new(locked),
        store,
    })
}

/// The MariaDB critical section, with lock keys that carry their SKU's hash tag.
struct SlotTagged {
    store: SharedStore,
    prefix: Prefix,
}

impl CriticalSection for SlotTagged {
    fn lock_key(&self, sku: u32) -> String {
        sku_key(&self.prefix, "lock", sku)
    }

    fn critical_section(
        &self,
        p: &Purchase<'_>,
        token: &str,
        fence: Option<u64>,
        hold: Duration,
    ) -> impl std::future::Future<Output = Outcome> + Send {
        self.store.critical_section(p, token, fence, hold)
    }

    fn critical_section_bound(&self, hold: Duration) -> Duration {
        self.store.critical_section_bound(hold)
    }

    fn read_section(
        &self,
        p: &Purchase<'_>,
        hold: Duration,
    ) -> impl std::future::Future<Output = Outcome> + Send {
        self.store.read_section(p, hold)
    }

    fn read_section_bound(&self, hold: Duration) -> Duration {
        self.store.read_section_bound(hold)
    }
}

/// SET NX PX on the master of the key's slot, compare-and-delete to release.
pub struct ClusterSetNx {
    cons: Vec<ClusterConnection>,
    unlock: redis::Script,
    ttl: Duration,
    waiter: Waiter,
    timeout: Duration,
    prefix: Prefix,
    /// `WAIT 1` after taking and after freeing the lock.
    wait_replicas: bool,
}

impl ClusterSetNx {
    fn con(&self, client: u32) -> ClusterConnection {
        self.cons[client as usize % self.cons.len()].clone()
    }

    /// Runs `cmd` for `client` (routed by its key), bounded by the workload's timeout.
    async fn call<T: redis::FromRedisValue + Send>(
        &self,
        client: u32,
        cmd: &redis::Cmd,
    ) -> Result<T, ErrorKind> {
        let mut con = self.con(client);
        // One round trip (a MOVED redirect the client follows inside is not counted).
        let call = crate::record::trips::one(cmd.query_async::<T>(&mut con));
        within(self.timeout, call, classify).await
    }

    /// Runs `p` on the master of `key`'s slot: a WAIT must go to the node that took the
    /// write (routed alone, the client would send it to every master).
    async fn on_master_of(
        &self,
        client: u32,
        key: &str,
        p: redis::Pipeline,
        count: usize,
    ) -> Result<Vec<redis::Value>, ErrorKind> {
        let mut con = self.con(client);
        let route = SingleNodeRoutingInfo::SpecificNode(Route::new(slot(key), SlotAddr::Master));
        within(
            self.timeout,
            crate::record::trips::one(con.route_pipeline(p, 0, count, route)),
            classify,
        )
        .await
    }

    /// With `wait_replicas`: the lock counts only once a replica has it. A compare-and-PEXPIRE
    /// of our token and `WAIT 1` are pipelined on the slot master's connection (WAIT covers
    /// the connection's writes, and the PEXPIRE is one whichever connection the SET took); no
    /// replica acked in time: released, and a failed acquire (Redisson's
    /// `NoSyncedSlavesException`), as `redis-sentinel-wait`.
    async fn replicated(&self, client: u32, key: &str, token: &str) -> Result<(), AcquireError> {
        if !self.wait_replicas {
            return Ok(());
        }
        let p = renewed_and_waited(key, token, self.ttl, self.timeout);
        let replies = self
            .on_master_of(client, key, p, 2)
            .await
            .map_err(AcquireError::Failed)?;
        let int = |v: Option<&redis::Value>| match v {
            Some(redis::Value::Int(n)) => *n,
            _ => -1,
        };
        match (int(replies.first()), int(replies.get(1))) {
            (1, acked) if acked >= 1 => Ok(()),
            (1, _) => {
                let _ = self.release(client, &Lease::new(key, token)).await;
                Err(AcquireError::Failed(ErrorKind::Timeout))
            }
            _ => Err(AcquireError::Failed(ErrorKind::Server)),
        }
    }
}

#[async_trait]
impl Lock for ClusterSetNx {
    async fn acquire(&self, client: u32, key: &str, token: &str) -> Acquired {
        let set = redis::cmd("SET")
            .arg(key)
            .arg(token)
            .arg("NX")
            .arg("PX")
            .arg(self.ttl.as_millis() as u64)
            .to_owned();
        let taken = self
            .waiter
            .until_acquired(key, || async {
                let got = self.call::<Option<String>>(client, &set).await?;
                Ok(if got.is_some() {
                    Try::Acquired
                } else {
                    Try::Busy(None)
                })
            })
            .await;
        if let Err(AcquireError::Failed(ErrorKind::Timeout)) = taken {
            // A timed-out SET may still have taken the lock: free it if so (best effort).
            let _ = self.release(client, &Lease::new(key, token)).await;
        }
        taken?;
        self.replicated(client, key, token).await?;
        Ok(Lease::new(key, token).expiring(self.ttl))
    }

    /// A SET may start just before the deadline; then the release of a timed-out SET. Waiting
    /// for replicas adds the pipelined WAIT and the release after a failed one.
    fn acquire_bound(&self) -> Duration {
        let calls = 2 + 2 * u32::from(self.wait_replicas);
        self.waiter.acquire_timeout() + self.timeout * calls
    }

    /// The compare-and-delete, and its WAIT when waiting for replicas.
    fn release_bound(&self) -> Duration {
        self.timeout * (1 + u32::from(self.wait_replicas))
    }

    async fn stuck_locks(&self, skus: u32) -> Result<u64, StrategyError> {
        let mut stuck = 0;
        for sku in 0..skus {
            // PTTL -1: the key exists and will never expire.
            let pttl = redis::cmd("PTTL")
                .arg(sku_key(&self.prefix, "lock", sku))
                .to_owned();
            let ttl: i64 = super::conn::read_retrying(|| {
                let (mut con, pttl) = (self.con(0), pttl.clone());
                async move { pttl.query_async(&mut con).await }
            })
            .await?;
            stuck += u64::from(ttl == -1);
        }
        Ok(stuck)
    }

    async fn release(&self, client: u32, lease: &Lease) -> Result<bool, ErrorKind> {
        let mut call = self.unlock.key(&lease.key);
        call.arg(&lease.token);
        let mut con = self.con(client);
        let call = crate::record::trips::one(call.invoke_async::<i64>(&mut con));
        let deleted = within(self.timeout, call, classify).await? == 1;
        if self.wait_replicas && deleted {
            let mut p = redis::pipe();
            p.cmd("WAIT").arg(1).arg(wait_ms(self.timeout));
            let acked = self.on_master_of(client, &lease.key, p, 1).await?;
            if !matches!(acked.first(), Some(redis::Value::Int(n)) if *n >= 1) {
                return Err(ErrorKind::Timeout);
            }
        }
        Ok(deleted)
    }
}
