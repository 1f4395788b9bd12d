//! `redis-lua-decr`: the stock lives in Redis; one Lua script checks it, decrements it and
//! appends the order to a per-SKU list, atomically (Redis runs scripts one at a time).

use std::net::SocketAddr;
use std::time::Duration;

use async_trait::async_trait;

use super::conn::{Con, classify, connections};
use crate::check::SkuAudit;
use crate::cluster::Prefix;
use crate::record::{ErrorKind, Outcome};
use crate::strategy::{Attempt, Purchase, Store, Strategy, StrategyError, within};
use crate::workload::Workload;

use crate::strategy::entry::needs::REDIS;
use crate::strategy::entry::{Built, Kind, StrategyInfo};

/// `redis-lua-decr`.
pub const LUA_DECR: StrategyInfo = StrategyInfo {
    id: "redis-lua-decr",
    kind: Kind::LockFree,
    locks: false,
    fenced: false,
    fence_token: None,
    needs: REDIS,
    wait: None,
    about: "stock in Redis: one Lua script checks, decrements and appends the order (no lock)",
    build: |s| {
        Box::pin(async move {
            let ep = s.ep;
            let lua = LuaDecr::connect(s.redis()?, ep.redis_auth.as_ref(), &ep.prefix, s.w).await?;
            let lua = std::sync::Arc::new(lua);
            Ok(Built {
                strategy: lua.clone(),
                store: lua,
                lock: None,
            })
        })
    },
};

/// KEYS[1] = stock, KEYS[2] = orders list, ARGV[1] = buyer. Returns 1 if sold, 0 if sold out.
pub const DECREMENT: &str = include_str!("../lua/decrement.lua");

const ADMIN_TIMEOUT: Duration = Duration::from_secs(60);

/// Strategy and store in one: the script is the whole purchase. On one Redis (`C` = [`Con`])
/// or on a Redis Cluster (`C` = its cluster connection, keys from [`LuaDecr::on`]).
pub struct LuaDecr<C = Con> {
    cons: Vec<C>,
    script: redis::Script,
    timeout: Duration,
    prefix: Prefix,
    /// Key `what` of a SKU: `<p>:<what>:<sku>`, or hash-tagged on a cluster.
    key: fn(&Prefix, &str, u32) -> String,
    /// SKUs per pipeline of prepare and audit (a cluster pipeline stays in one slot: 1).
    batch: usize,
}

impl<C> LuaDecr<C> {
    /// The strategy over connections `cons`, naming keys with `key`, `batch` SKUs per pipeline.
    pub fn on(
        cons: Vec<C>,
        prefix: &Prefix,
        w: &Workload,
        key: fn(&Prefix, &str, u32) -> String,
        batch: usize,
    ) -> Self {
        Self {
            cons,
            script: redis::Script::new(DECREMENT),
            timeout: w.load.timeout,
            prefix: prefix.clone(),
            key,
            batch,
        }
    }

    /// The stock key of a SKU.
    fn stock_key(&self, sku: u32) -> String {
        (self.key)(&self.prefix, "stock", sku)
    }

    /// The orders list of a SKU.
    fn orders_key(&self, sku: u32) -> String {
        (self.key)(&self.prefix, "orders", sku)
    }
}

impl LuaDecr {
    /// Connects to the Redis at `addr`; keys start with `prefix`.
    pub async fn connect(
        addr: SocketAddr,
        auth: Option<&crate::cluster::Auth>,
        prefix: &Prefix,
        w: &Workload,
    ) -> Result<Self, StrategyError> {
        let cons = connections(addr, auth, w).await?;
        Ok(Self::on(
            cons,
            prefix,
            w,
            |p, what, sku| p.key(what, sku),
            1000,
        ))
    }
}

#[async_trait]
impl<C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static> Strategy for LuaDecr<C> {
    /// One script call.
    fn bound(&self) -> Duration {
        self.timeout
    }

    async fn attempt(&self, p: &Purchase) -> Attempt {
        let mut con = self.cons[p.client as usize % self.cons.len()].clone();
        let (stock, orders) = (self.stock_key(p.sku), self.orders_key(p.sku));
        let mut call = self.script.key(&stock);
        call.key(&orders).arg(p.seq);
        match within(self.timeout, call.invoke_async::<i64>(&mut con), classify).await {
            Ok(1) => Outcome::Sold.into(),
            Ok(_) => Outcome::SoldOut.into(),
            // The script may have run although the reply never came.
            Err(k @ (ErrorKind::Timeout | ErrorKind::Connection)) => Outcome::Unknown(k).into(),
            Err(k) => Outcome::Failed(k).into(),
        }
    }
}

#[async_trait]
impl<C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static> Store for LuaDecr<C> {
    async fn prepare(&self, stock: &[u64]) -> Result<(), StrategyError> {
        let mut con = self.cons[0].clone();
        let work = async {
            let skus: Vec<(u32, u64)> = (0..).zip(stock.iter().copied()).collect();
            for chunk in skus.chunks(self.batch) {
                let mut pipe = redis::pipe();
                for &(sku, qty) in chunk {
                    pipe.del(self.orders_key(sku))
                        .ignore()
                        .set(self.stock_key(sku), qty)
                        .ignore();
                }
                pipe.query_async::<()>(&mut con).await?;
            }
            // Load the script now so the first purchase does not pay for SCRIPT LOAD.
            self.script.prepare_invoke().load_async(&mut con).await?;
            Ok::<_, StrategyError>(())
        };
        tokio::time::timeout(ADMIN_TIMEOUT, work)
            .await
            .map_err(|_| StrategyError::Timeout("prepare stock"))?
    }

    async fn audit(&self, skus: u32) -> Result<Vec<SkuAudit>, StrategyError> {
        let con = self.cons[0].clone();
        let work = async {
            let mut out = Vec::with_capacity(skus as usize);
            for chunk in (0..skus).collect::<Vec<_>>().chunks(self.batch) {
                let mut pipe = redis::pipe();
                for &sku in chunk {
                    pipe.get(self.stock_key(sku)).llen(self.orders_key(sku));
                }
                // Replies alternate: GET stock (nil if never set), LLEN orders.
                let values: Vec<Option<i64>> = super::conn::read_retrying(|| {
                    let (mut con, pipe) = (con.clone(), pipe.clone());
                    async move { pipe.query_async(&mut con).await }
                })
                .await?;
                for (&sku, pair) in chunk.iter().zip(values.chunks(2)) {
                    let sold = pair.get(1).copied().flatten().unwrap_or(0);
                    out.push(SkuAudit {
                        sku,
                        final_stock: pair[0].unwrap_or(0),
                        sold: sold as u64,
                    });
                }
            }
            Ok::<_, StrategyError>(out)
        };
        tokio::time::timeout(ADMIN_TIMEOUT, work)
            .await
            .map_err(|_| StrategyError::Timeout("audit"))?
    }
}
