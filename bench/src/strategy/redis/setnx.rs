//! The single-instance Redis lock and its variants: `SET key token NX PX ttl` to acquire, a
//! Lua compare-and-delete to release; optionally a watchdog that renews the lease, a fencing
//! token from a Redis counter, or (a broken control) a non-atomic GET-then-DEL release.

use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::conn::{Con, RedisTarget, classify};
use crate::cluster::Prefix;
use crate::record::ErrorKind;
use crate::strategy::wait::{Try, Waiter};
use crate::strategy::{
    AcquireError, Acquired, Expiry, KeepAlive, Lease, Lock, StrategyError, within,
};

use crate::strategy::entry::needs::{MARIADB_REDIS, MARIADB_SENTINEL};
use crate::strategy::entry::{Built, Kind, Setup, StrategyInfo};

/// `redis-setnx`.
pub const SETNX: StrategyInfo = StrategyInfo {
    id: "redis-setnx",
    kind: Kind::Lock,
    locks: true,
    fenced: false,
    fence_token: None,
    needs: MARIADB_REDIS,
    wait: Some(crate::strategy::wait::REDIS_PY),
    about: "Redis SET key token NX PX ttl, Lua compare-and-delete unlock; stock in MariaDB",
    build: |s| Box::pin(build(s, Flavor::PLAIN)),
};

/// `redis-setnx-watchdog`.
pub const WATCHDOG: StrategyInfo = StrategyInfo {
    id: "redis-setnx-watchdog",
    about: "redis-setnx plus a watchdog renewing the lease every ttl/3 while it is still ours",
    wait: Some(crate::strategy::wait::REDISSON),
    build: |s| {
        let flavor = Flavor {
            watchdog: true,
            ..Flavor::PLAIN
        };
        Box::pin(build(s, flavor))
    },
    ..SETNX
};

/// `redis-setnx-fenced`.
pub const FENCED: StrategyInfo = StrategyInfo {
    id: "redis-setnx-fenced",
    fenced: true,
    fence_token: Some("Redis INCR counter"),
    about: "redis-setnx with a fencing token from a Redis INCR; the store refuses stale tokens",
    build: |s| {
        let flavor = Flavor {
            fenced: true,
            ..Flavor::PLAIN
        };
        Box::pin(build(s, flavor))
    },
    ..SETNX
};

/// `redis-sentinel`.
pub const SENTINEL: StrategyInfo = StrategyInfo {
    id: "redis-sentinel",
    needs: MARIADB_SENTINEL,
    wait: Some(crate::strategy::wait::REDIS_PY),
    about: "redis-setnx on the master Sentinel names (1 master, 2 async replicas), re-resolved on errors",
    build: |s| Box::pin(sentinel(s, Flavor::PLAIN)),
    ..SETNX
};

/// `redis-sentinel-wait`.
pub const SENTINEL_WAIT: StrategyInfo = StrategyInfo {
    id: "redis-sentinel-wait",
    wait: Some(crate::strategy::wait::REDISSON),
    about: "redis-sentinel plus WAIT 1 after lock and unlock (no replica acked: released, failed, as Redisson does); follows +switch-master",
    build: |s| {
        let flavor = Flavor {
            wait_replicas: true,
            ..Flavor::PLAIN
        };
        Box::pin(sentinel(s, flavor))
    },
    ..SENTINEL
};

/// A Redis lock of `flavor` on the master the sentinels name; one that waits for replicas
/// also follows the sentinels' `+switch-master` announcements.
async fn sentinel(s: Setup<'_>, flavor: Flavor) -> Result<Built, StrategyError> {
    if s.ep.sentinels.is_empty() {
        return Err(StrategyError::Missing {
            id: s.info.id.into(),
            what: "Redis Sentinels",
        });
    }
    let store = s.mariadb().await?;
    let mut target = RedisTarget::via_sentinels(s.ep, s.w).await?;
    if flavor.wait_replicas {
        target = target.follow_switches();
    }
    let lock = SetNx::on(target, s, flavor).await?;
    Ok(s.locked(lock, store))
}

/// `redis-get-del`: a broken control.
pub const GET_DEL: StrategyInfo = StrategyInfo {
    id: "redis-get-del",
    kind: Kind::Control,
    about: "broken control: SET NX PX, but released by GET then DEL (two commands, not atomic)",
    build: |s| {
        let flavor = Flavor {
            release: Release::GetThenDel,
            ..Flavor::PLAIN
        };
        Box::pin(build(s, flavor))
    },
    ..SETNX
};

/// `redis-setnx-expire`: a broken control.
pub const SETNX_EXPIRE: StrategyInfo = StrategyInfo {
    id: "redis-setnx-expire",
    kind: Kind::Control,
    about: "broken control: SETNX then PEXPIRE as two commands; a client dying between them leaves a lock that never expires",
    build: |s| {
        let flavor = Flavor {
            acquire: Acquire::SetNxThenExpire,
            ..Flavor::PLAIN
        };
        Box::pin(build(s, flavor))
    },
    ..SETNX
};

/// A single-Redis lock of `flavor` around the critical section.
async fn build(s: Setup<'_>, flavor: Flavor) -> Result<Built, StrategyError> {
    let store = s.mariadb().await?;
    let target = RedisTarget::fixed(s.redis()?, s.ep.redis_auth.as_ref(), s.w).await?;
    let lock = SetNx::on(target, s, flavor).await?;
    Ok(s.locked(lock, store))
}

/// Deletes the key only if it still holds our token: a plain DEL could remove a lock that
/// expired and was taken by someone else. With a second key (the release channel), publishes
/// the release there for `notify` waiters.
pub(super) const UNLOCK: &str = include_str!("../lua/unlock.lua");
/// Extends the lease only if the key still holds our token.
pub(super) const RENEW: &str = include_str!("../lua/renew.lua");

/// WAIT's own timeout under calls bounded by `timeout`: half the call's (so the server answers
/// with its count before the call is cut), at least 1 ms (0 would block forever).
pub(super) fn wait_ms(timeout: Duration) -> u64 {
    (timeout.as_millis() as u64 / 2).max(1)
}

/// A compare-and-PEXPIRE of `token` on `key` (back to `ttl`) and `WAIT 1`, to be pipelined on
/// one connection: WAIT covers the writes of its own connection, and the PEXPIRE is one of
/// ours whichever connection took the lock. Replies: 1 if the key is still ours, then how
/// many replicas acked.
pub(super) fn renewed_and_waited(
    key: &str,
    token: &str,
    ttl: Duration,
    timeout: Duration,
) -> redis::Pipeline {
    let mut pipe = redis::pipe();
    pipe.cmd("EVAL")
        .arg(RENEW)
        .arg(1)
        .arg(key)
        .arg(token)
        .arg(ttl.as_millis() as u64);
    pipe.cmd("WAIT").arg(1).arg(wait_ms(timeout));
    pipe
}

/// How a [`SetNx`] lock releases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// One Lua script: delete only if the key still holds our token (correct).
    CompareAndDelete,
    /// `GET` then, if ours, `DEL` as two commands (broken: the lease can expire and pass to
    /// another buyer between them, and the DEL then frees *their* lock).
    GetThenDel,
}

/// How a [`SetNx`] lock is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acquire {
    /// `SET key token NX PX ttl`: key and expiry in one atomic command (correct).
    SetNxPx,
    /// `SETNX key token`, then `PEXPIRE key ttl` (broken: a client that dies in between leaves
    /// a lock with no expiry, held forever).
    SetNxThenExpire,
}

/// Which variant of the Redis lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flavor {
    /// Acquire protocol.
    pub acquire: Acquire,
    /// Release protocol.
    pub release: Release,
    /// Renew the lease every ttl/3 while held.
    pub watchdog: bool,
    /// Take a fencing token from `INCR <prefix>:fence:<key>` after acquiring. A counter on the
    /// same Redis is exactly what a failover can roll back (see the chaos scenarios).
    pub fenced: bool,
    /// `WAIT 1` after taking and after freeing the lock: it counts only once a replica has
    /// acknowledged it (see [`SetNx::replicated`]).
    pub wait_replicas: bool,
}

impl Flavor {
    /// `redis-setnx`.
    pub const PLAIN: Flavor = Flavor {
        acquire: Acquire::SetNxPx,
        release: Release::CompareAndDelete,
        watchdog: false,
        fenced: false,
        wait_replicas: false,
    };
}

/// The single-instance Redis lock.
pub struct SetNx {
    target: RedisTarget,
    flavor: Flavor,
    unlock: redis::Script,
    renew: redis::Script,
    ttl: Duration,
    waiter: Waiter,
    timeout: Duration,
    prefix: Prefix,
}

impl SetNx {
    /// The lock on whatever `target` points at (a fixed server, or the master Sentinel
    /// names), waiting as the strategy's [`Setup::waiter`] says.
    pub async fn on(
        target: RedisTarget,
        s: Setup<'_>,
        flavor: Flavor,
    ) -> Result<Self, StrategyError> {
        let waiter = s
            .waiter()?
            .subscribe(
                vec![target.addr_watch()],
                s.ep.redis_auth.as_ref(),
                &s.ep.prefix,
            )
            .await?;
        Ok(Self {
            prefix: s.ep.prefix.clone(),
            target,
            flavor,
            unlock: redis::Script::new(UNLOCK),
            renew: redis::Script::new(RENEW),
            ttl: s.w.lock.ttl,
            waiter,
            timeout: s.w.load.timeout,
        })
    }

    fn con(&self, client: u32) -> Con {
        self.target.con(client).0
    }

    /// Runs `request` (a command, a pipeline, a script call) on `client`'s connection, bounded
    /// by the workload's timeout; an error tells the target (which may fail over).
    async fn run<T>(
        &self,
        client: u32,
        request: impl AsyncFnOnce(&mut Con) -> redis::RedisResult<T>,
    ) -> Result<T, ErrorKind> {
        let (mut con, generation) = self.target.con(client);
        let r = within(self.timeout, request(&mut con), classify).await;
        if r.is_err() {
            self.target.failed(generation).await;
        }
        r
    }

    /// Runs one command for `client`, as [`Self::run`] does.
    async fn call<T: redis::FromRedisValue + Send>(
        &self,
        client: u32,
        cmd: &redis::Cmd,
    ) -> Result<T, ErrorKind> {
        self.run(client, async |con| cmd.query_async(con).await)
            .await
    }

    /// With [`Flavor::wait_replicas`]: the lock just taken counts only once a replica has it.
    /// `WAIT 1 <load.timeout / 2>` (half, so the server answers with its count before the call
    /// is cut) is pipelined behind a compare-and-PEXPIRE of our token on the same connection:
    /// WAIT covers the writes of its own connection, and this write is ours whichever
    /// connection (reconnected, or moved to a new master) the SET went out on. Nothing acked
    /// within the timeout: the lock is released and the attempt fails with a timeout, as
    /// Redisson fails a lock whose WAIT saw no replica (`NoSyncedSlavesException`, after which
    /// it unlocks). The key no longer ours there: the attempt fails with a server error.
    async fn replicated(&self, client: u32, key: &str, token: &str) -> Result<(), AcquireError> {
        if !self.flavor.wait_replicas {
            return Ok(());
        }
        let pipe = renewed_and_waited(key, token, self.ttl, self.timeout);
        let r = self.run(client, async |con| {
            pipe.query_async::<(i64, i64)>(con).await
        });
        match r.await.map_err(AcquireError::Failed)? {
            (1, acked) if acked >= 1 => Ok(()),
            (1, _) => {
                let _ = self.release(client, &Lease::new(key, token)).await;
                Err(AcquireError::Failed(ErrorKind::Timeout))
            }
            _ => Err(AcquireError::Failed(ErrorKind::Server)),
        }
    }

    /// With [`Flavor::wait_replicas`], after a release that deleted our key: `WAIT 1`, and a
    /// timeout error if no replica acknowledged it (Redisson's unlock fails the same way).
    async fn release_replicated(&self, client: u32, deleted: bool) -> Result<(), ErrorKind> {
        if !self.flavor.wait_replicas || !deleted {
            return Ok(());
        }
        let wait = redis::cmd("WAIT")
            .arg(1)
            .arg(wait_ms(self.timeout))
            .to_owned();
        match self.call::<i64>(client, &wait).await? {
            0 => Err(ErrorKind::Timeout),
            _ => Ok(()),
        }
    }

    /// The lease the server started at `sent`, with its watchdog if the flavor renews.
    fn lease(&self, client: u32, key: &str, token: &str, sent: Instant) -> Lease {
        let mut lease = Lease::new(key, token);
        if self.flavor.watchdog {
            let expiry = Expiry::renewable(sent, self.ttl);
            lease.keepalive = Some(self.watchdog(client, key, token, expiry.clone()));
            lease.expiry = Some(expiry);
        } else {
            lease.expiry = Some(Expiry::After(sent, self.ttl));
        }
        lease
    }

    /// Renews the lease every ttl/3 until aborted or the lease is found lost, moving `expiry`
    /// at each renewal.
    fn watchdog(&self, client: u32, key: &str, token: &str, expiry: Expiry) -> KeepAlive {
        let (mut con, renew, timeout) = (self.con(client), self.renew.clone(), self.timeout);
        let (key, token, ttl) = (key.to_string(), token.to_string(), self.ttl);
        KeepAlive::spawn(async move {
            let mut tick = tokio::time::interval(ttl / 3);
            tick.tick().await; // the first tick is immediate; the lease is fresh
            loop {
                tick.tick().await;
                let mut call = renew.key(&key);
                call.arg(&token).arg(ttl.as_millis() as u64);
                let sent = Instant::now();
                // A failed renewal is retried at the next tick; a lost lease ends the watchdog.
                match within(timeout, call.invoke_async::<i64>(&mut con), classify).await {
                    Ok(0) => return true,
                    Ok(_) => expiry.renewed(sent),
                    Err(_) => {}
                }
            }
        })
    }
}

#[async_trait]
impl Lock for SetNx {
    async fn acquire(&self, client: u32, key: &str, token: &str) -> Acquired {
        let ttl_ms = self.ttl.as_millis() as u64;
        let set = match self.flavor.acquire {
            Acquire::SetNxPx => redis::cmd("SET")
                .arg(key)
                .arg(token)
                .arg("NX")
                .arg("PX")
                .arg(ttl_ms)
                .to_owned(),
            Acquire::SetNxThenExpire => redis::cmd("SETNX").arg(key).arg(token).to_owned(),
        };
        let notify = self.waiter.notifies();
        // The send of the last try: the server starts the TTL there (the danger window's loss
        // moment is a TTL after the last (re)start).
        let sent = std::sync::Mutex::new(Instant::now());
        let taken = self
            .waiter
            .until_acquired(key, || async {
                *sent.lock().expect("never poisoned") = Instant::now();
                match self.flavor.acquire {
                    // A notify waiter also asks how long the holder has left (one round trip:
                    // pipelined), the most it waits for a release message.
                    Acquire::SetNxPx if notify => {
                        let mut p = redis::pipe();
                        p.add_command(set.clone()).cmd("PTTL").arg(key);
                        let (got, pttl): (Option<String>, i64) = self
                            .run(client, async |con| p.query_async(con).await)
                            .await?;
                        Ok(match got {
                            Some(_) => Try::Acquired,
                            None => Try::busy_for_pttl(pttl),
                        })
                    }
                    Acquire::SetNxPx => {
                        let got = self.call::<Option<String>>(client, &set).await?;
                        Ok(if got.is_some() {
                            Try::Acquired
                        } else {
                            Try::Busy(None)
                        })
                    }
                    Acquire::SetNxThenExpire => {
                        if self.call::<i64>(client, &set).await? == 0 {
                            return Ok(Try::Busy(None));
                        }
                        crate::chaos::failpoint("lock.between-setnx-and-expire");
                        let expire = redis::cmd("PEXPIRE").arg(key).arg(ttl_ms).to_owned();
                        self.call::<i64>(client, &expire)
                            .await
                            .map(|_| Try::Acquired)
                    }
                }
            })
            .await;
        if let Err(AcquireError::Failed(ErrorKind::Timeout)) = taken {
            // A timed-out SET may still have taken the lock: free it if so (best effort; the
            // TTL frees it otherwise).
            let _ = self.release(client, &Lease::new(key, token)).await;
        }
        taken?;
        self.replicated(client, key, token).await?;
        let sent = sent.into_inner().expect("never poisoned");
        let mut lease = self.lease(client, key, token, sent);
        if self.flavor.fenced {
            let incr = redis::cmd("INCR")
                .arg(self.prefix.key("fence", key))
                .to_owned();
            match self.call::<u64>(client, &incr).await {
                Ok(fence) => lease.fence = Some(fence),
                Err(k) => {
                    let _ = self.release(client, &lease).await;
                    return Err(AcquireError::Failed(k));
                }
            }
        }
        Ok(lease)
    }

    /// A try (SET NX PX, or SETNX and PEXPIRE) may start just before the deadline; then the
    /// release of a timed-out SET, or the fence's INCR and the release after a failed one.
    /// Waiting for replicas adds the pipelined WAIT and the release's own WAIT.
    fn acquire_bound(&self) -> Duration {
        let per_try = match self.flavor.acquire {
            Acquire::SetNxPx => 1,
            Acquire::SetNxThenExpire => 2,
        };
        let wait = u32::from(self.flavor.wait_replicas);
        self.waiter.acquire_timeout() + self.target.call_bound(self.timeout) * (per_try + 2 + wait)
    }

    /// Compare-and-delete is one call; GET then DEL two (three with the PUBLISH of notify);
    /// waiting for replicas adds a WAIT.
    fn release_bound(&self) -> Duration {
        let n = match self.flavor.release {
            Release::CompareAndDelete => 1,
            Release::GetThenDel => 2 + u32::from(self.waiter.notifies()),
        } + u32::from(self.flavor.wait_replicas);
        self.target.call_bound(self.timeout) * n
    }

    async fn stuck_locks(&self, skus: u32) -> Result<u64, StrategyError> {
        let mut stuck = 0;
        let (con, _) = self.target.con(0);
        for sku in 0..skus {
            // PTTL -1: the key exists and will never expire.
            let pttl = redis::cmd("PTTL").arg(self.prefix.lock_key(sku)).to_owned();
            let ttl: i64 = super::conn::read_retrying(|| {
                let (mut con, pttl) = (con.clone(), pttl.clone());
                async move { pttl.query_async(&mut con).await }
            })
            .await?;
            stuck += u64::from(ttl == -1);
        }
        Ok(stuck)
    }

    async fn release(&self, client: u32, lease: &Lease) -> Result<bool, ErrorKind> {
        if let Some(k) = &lease.keepalive {
            k.stop();
        }
        match self.flavor.release {
            Release::CompareAndDelete => {
                let mut call = self.unlock.key(&lease.key);
                if let Some(channel) = self.waiter.channel(&lease.key) {
                    call.key(channel);
                }
                call.arg(&lease.token);
                let deleted: i64 = self
                    .run(client, async |con| call.invoke_async(con).await)
                    .await?;
                let deleted = deleted == 1;
                self.release_replicated(client, deleted).await?;
                Ok(deleted)
            }
            Release::GetThenDel => {
                let get = redis::cmd("GET").arg(&lease.key).to_owned();
                let holder: Option<String> = self.call(client, &get).await?;
                if holder.as_deref() != Some(lease.token.as_str()) {
                    return Ok(false);
                }
                self.call::<i64>(client, &redis::cmd("DEL").arg(&lease.key).to_owned())
                    .await?;
                if let Some(channel) = self.waiter.channel(&lease.key) {
                    let publish = redis::cmd("PUBLISH")
                        .arg(channel)
                        .arg(&lease.token)
                        .to_owned();
                    self.call::<i64>(client, &publish).await?;
                }
                Ok(true)
            }
        }
    }
}
