//! `redis-lua-decr`: the stock lives in Redis; one Lua script checks it, decrements it and
//! appends the order to a per-SKU list, atomically (Redis runs scripts one at a time).
//!
//! With `[buyers]` a second script (`sale.lua`) does the seckill's whole check in the same
//! atomic step: the request id against a SET of those seen, the buyer's units of the SKU (a
//! HASH buyer → units) against the limit, the stock against the units asked; then DECRBY,
//! HINCRBY, SADD and the order `buyer:request:qty`. Every key of a SKU shares its cluster
//! slot. Without `[buyers]` the script and the figures are the same as before the sale.

use std::net::SocketAddr;
use std::time::Duration;

use async_trait::async_trait;

use super::conn::{Con, classify, connections};
use crate::check::{OrderRow, SkuAudit};
use crate::cluster::Prefix;
use crate::record::{ErrorKind, Outcome, Refusal};
use crate::strategy::{
    Attempt, Purchase, Rules, SoldOutFlags, Store, Strategy, StrategyError, within,
};
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

/// `redis-lua-decr-no-limit`: the control whose script never compares a buyer's units with
/// the limit.
pub const LUA_DECR_NO_LIMIT: StrategyInfo = StrategyInfo {
    id: "redis-lua-decr-no-limit",
    kind: Kind::Control,
    about: "control: redis-lua-decr whose sale script skips the buyer's limit (caught with [buyers])",
    build: |s| {
        Box::pin(async move {
            let ep = s.ep;
            let lua = LuaDecr::connect(s.redis()?, ep.redis_auth.as_ref(), &ep.prefix, s.w).await?;
            let lua = std::sync::Arc::new(lua.without_limit());
            Ok(Built {
                strategy: lua.clone(),
                store: lua,
                lock: None,
            })
        })
    },
    ..LUA_DECR
};

/// KEYS[1] = stock, KEYS[2] = orders list, ARGV[1] = buyer. Returns 1 if sold, 0 if sold out.
pub const DECREMENT: &str = include_str!("../lua/decrement.lua");

/// The sale's script (`[buyers]`): see `sale.lua`'s header.
pub const SALE: &str = include_str!("../lua/sale.lua");

const ADMIN_TIMEOUT: Duration = Duration::from_secs(60);

/// Strategy and store in one: the script is the whole purchase. On one Redis (`C` = [`Con`])
/// or on a Redis Cluster (`C` = its cluster connection, keys from [`LuaDecr::on`]).
pub struct LuaDecr<C = Con> {
    cons: Vec<C>,
    script: redis::Script,
    /// With `[buyers]`: the sale's rules and its script.
    sale: Option<(Rules, redis::Script)>,
    /// SKUs the orders are listed for ([`Store::orders`]).
    skus: u32,
    /// `critical_section.precheck`: the sold-out flag in front of the script.
    precheck: SoldOutFlags,
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
            sale: Rules::of(w).map(|r| (r, redis::Script::new(SALE))),
            skus: w.inventory.skus,
            precheck: SoldOutFlags::new(w),
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

    /// The sale's keys of a SKU: the request ids seen and the buyers' holdings.
    fn sale_keys(&self, sku: u32) -> [String; 2] {
        ["requests", "held"].map(|what| (self.key)(&self.prefix, what, sku))
    }

    /// The `-no-limit` control: the sale's script never checks the limit.
    pub fn without_limit(mut self) -> Self {
        self.sale = self.sale.map(|(r, s)| (r.without_limit(), s));
        self
    }

    /// The script call of purchase `p`: the sale's with `[buyers]`, else the decrement.
    fn call(&self, p: &Purchase) -> redis::ScriptInvocation<'_> {
        let (stock, orders) = (self.stock_key(p.sku), self.orders_key(p.sku));
        let Some((rules, sale)) = &self.sale else {
            let mut call = self.script.key(&stock);
            call.key(&orders).arg(p.seq);
            return call;
        };
        let [requests, held] = self.sale_keys(p.sku);
        let limit = if rules.check_limit { rules.limit } else { 0 };
        let mut call = sale.key(&stock);
        call.key(&orders).key(&requests).key(&held);
        call.arg(p.ask.buyer)
            .arg(p.ask.request)
            .arg(p.ask.qty)
            .arg(limit);
        call
    }
}

/// An order as the list holds it: `buyer:request:qty` from the sale's script, the buyer alone
/// (the attempt number: its own request, one unit) from the decrement.
fn order_row(sku: u32, entry: &str) -> Option<OrderRow> {
    let mut parts = entry.split(':').map(str::parse::<u64>);
    let buyer = parts.next()?.ok()?;
    let (request, qty) = match (parts.next(), parts.next()) {
        (Some(r), Some(q)) => (r.ok()?, u32::try_from(q.ok()?).ok()?),
        _ => (buyer, 1),
    };
    Some(OrderRow {
        sku,
        buyer,
        request,
        qty,
    })
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
        self.precheck.around(p, self.script_attempt(p)).await
    }
}

impl<C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static> LuaDecr<C> {
    /// One script call.
    async fn script_attempt(&self, p: &Purchase<'_>) -> Attempt {
        let mut con = self.cons[p.client as usize % self.cons.len()].clone();
        let call = self.call(p);
        match within(self.timeout, call.invoke_async::<i64>(&mut con), classify).await {
            Ok(1) => Outcome::Sold.into(),
            Ok(-1) => Outcome::Refused(Refusal::Limit).into(),
            Ok(-2) => Outcome::Refused(Refusal::Duplicate).into(),
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
                    if self.sale.is_some() {
                        pipe.del(&self.sale_keys(sku)[..]).ignore();
                    }
                }
                pipe.query_async::<()>(&mut con).await?;
            }
            // Load the script now so the first purchase does not pay for SCRIPT LOAD.
            let script = self.sale.as_ref().map_or(&self.script, |(_, s)| s);
            script.prepare_invoke().load_async(&mut con).await?;
            Ok::<_, StrategyError>(())
        };
        tokio::time::timeout(ADMIN_TIMEOUT, work)
            .await
            .map_err(|_| StrategyError::Timeout("prepare stock"))?
    }

    async fn audit(&self, skus: u32) -> Result<Vec<SkuAudit>, StrategyError> {
        let mut out = self.counted(skus).await?;
        if self.sale.is_some() {
            // An order takes `qty` units: the audit counts units, from the orders themselves.
            for a in &mut out {
                let rows = self.orders_of(a.sku).await?;
                a.sold = rows.iter().map(|o| u64::from(o.qty)).sum();
            }
        }
        Ok(out)
    }

    async fn orders(&self) -> Result<Option<Vec<OrderRow>>, StrategyError> {
        let mut all = Vec::new();
        for sku in 0..self.skus {
            all.extend(self.orders_of(sku).await?);
        }
        Ok(Some(all))
    }
}

impl<C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static> LuaDecr<C> {
    /// The orders list of `sku`, read back (bounded, retried after a broken connection).
    async fn orders_of(&self, sku: u32) -> Result<Vec<OrderRow>, StrategyError> {
        let (con, key) = (self.cons[0].clone(), self.orders_key(sku));
        let read = super::conn::read_retrying(|| {
            let (mut con, key) = (con.clone(), key.clone());
            async move {
                redis::cmd("LRANGE")
                    .arg(key)
                    .arg(0)
                    .arg(-1)
                    .query_async::<Vec<String>>(&mut con)
                    .await
            }
        });
        let entries = tokio::time::timeout(ADMIN_TIMEOUT, read)
            .await
            .map_err(|_| StrategyError::Timeout("read the orders"))??;
        Ok(entries.iter().filter_map(|e| order_row(sku, e)).collect())
    }

    /// Each SKU's stock left and its orders counted (LLEN), pipelined.
    async fn counted(&self, skus: u32) -> Result<Vec<SkuAudit>, StrategyError> {
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
