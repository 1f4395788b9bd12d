//! `redis-reentrant`: a hash `owner → count` under the lock key, taken and released by Lua
//! scripts (the Redisson design): the same owner may re-enter, others wait.

use std::net::SocketAddr;
use std::time::Duration;

use async_trait::async_trait;

use super::redis_conn::{Con, classify, connections};
use super::{AcquireError, Lease, Lock, StrategyError, spin, within};
use crate::record::ErrorKind;
use crate::workload::Workload;

use super::entry::needs::MARIADB_REDIS;
use super::entry::{Kind, StrategyInfo};

/// `redis-reentrant`.
pub const REENTRANT: StrategyInfo = StrategyInfo {
    id: "redis-reentrant",
    kind: Kind::Lock,
    locks: true,
    fenced: false,
    fence_token: None,
    needs: MARIADB_REDIS,
    about: "Redis hash owner -> count, Lua acquire / release (reentrant, Redisson-style)",
    build: |s| {
        Box::pin(async move {
            let store = s.mariadb().await?;
            let lock = Reentrant::connect(s.redis()?, s.ep.redis_auth.as_ref(), s.w).await?;
            Ok(s.locked(lock, store))
        })
    },
};

const ACQUIRE: &str = include_str!("lua/reentrant_acquire.lua");
const RELEASE: &str = include_str!("lua/reentrant_release.lua");

/// What one release did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Released {
    /// The lock was not ours any more (the lease expired).
    NotOwner,
    /// One level released; the owner still holds it.
    StillHeld,
    /// The last level released; the lock is free.
    Free,
}

/// The reentrant Redis lock.
pub struct Reentrant {
    cons: Vec<Con>,
    acquire: redis::Script,
    release: redis::Script,
    ttl_ms: u64,
    acquire_timeout: Duration,
    retry_interval: Duration,
    timeout: Duration,
}

impl Reentrant {
    /// Connects to the Redis at `addr`.
    pub async fn connect(
        addr: SocketAddr,
        auth: Option<&crate::cluster::Auth>,
        w: &Workload,
    ) -> Result<Self, StrategyError> {
        Ok(Self {
            cons: connections(addr, auth, w).await?,
            acquire: redis::Script::new(ACQUIRE),
            release: redis::Script::new(RELEASE),
            ttl_ms: w.lock.ttl.as_millis() as u64,
            acquire_timeout: w.lock.acquire_timeout,
            retry_interval: w.lock.retry_interval,
            timeout: w.load.timeout,
        })
    }

    fn con(&self, client: u32) -> Con {
        self.cons[client as usize % self.cons.len()].clone()
    }

    /// One try: the hold count after entering, or 0 if another owner holds it.
    pub async fn try_enter(&self, client: u32, key: &str, owner: &str) -> Result<i64, ErrorKind> {
        let mut call = self.acquire.key(key);
        call.arg(owner).arg(self.ttl_ms);
        within(
            self.timeout,
            call.invoke_async(&mut self.con(client)),
            classify,
        )
        .await
    }

    /// Leaves one level.
    pub async fn leave(&self, client: u32, key: &str, owner: &str) -> Result<Released, ErrorKind> {
        let mut call = self.release.key(key);
        call.arg(owner).arg(self.ttl_ms);
        let r: i64 = within(
            self.timeout,
            call.invoke_async(&mut self.con(client)),
            classify,
        )
        .await?;
        Ok(match r {
            1 => Released::Free,
            0 => Released::StillHeld,
            _ => Released::NotOwner,
        })
    }
}

#[async_trait]
impl Lock for Reentrant {
    async fn acquire(&self, client: u32, key: &str, token: &str) -> Result<Lease, AcquireError> {
        spin(self.acquire_timeout, self.retry_interval, || async {
            self.try_enter(client, key, token).await.map(|n| n > 0)
        })
        .await?;
        Ok(Lease::new(key, token))
    }

    /// The last try's script call may start just before the deadline.
    fn acquire_bound(&self) -> Duration {
        self.acquire_timeout + self.timeout
    }

    /// One script call.
    fn release_bound(&self) -> Duration {
        self.timeout
    }

    async fn release(&self, client: u32, lease: &Lease) -> Result<bool, ErrorKind> {
        Ok(self.leave(client, &lease.key, &lease.token).await? == Released::Free)
    }
}
