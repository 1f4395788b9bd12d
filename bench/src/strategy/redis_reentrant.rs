//! `redis-reentrant`: a hash `owner → count` under the lock key, taken and released by Lua
//! scripts (the Redisson design): the same owner may re-enter, others wait.

use std::time::Duration;

use async_trait::async_trait;

use super::redis_conn::{Con, classify, connections};
use super::wait::{Try, Waiter};
use super::{AcquireError, Lease, Lock, StrategyError, within};
use crate::record::ErrorKind;

use super::entry::needs::MARIADB_REDIS;
use super::entry::{Kind, Setup, StrategyInfo};

/// `redis-reentrant`.
pub const REENTRANT: StrategyInfo = StrategyInfo {
    id: "redis-reentrant",
    kind: Kind::Lock,
    locks: true,
    fenced: false,
    fence_token: None,
    needs: MARIADB_REDIS,
    wait: Some(super::wait::REDISSON),
    about: "Redis hash owner -> count, Lua acquire / release (reentrant, Redisson-style)",
    build: |s| {
        Box::pin(async move {
            let store = s.mariadb().await?;
            let lock = Reentrant::connect(s).await?;
            Ok(s.locked(lock, store))
        })
    },
};

const ACQUIRE: &str = include_str!("lua/reentrant_acquire.lua");
const RELEASE: &str = include_str!("lua/reentrant_release.lua");

/// What one try to enter found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entered {
    /// Ours, held this many times.
    Count(i64),
    /// Another owner holds it, for this much longer (`None`: it never expires).
    Busy(Option<Duration>),
}

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
    waiter: Waiter,
    timeout: Duration,
}

impl Reentrant {
    /// Connects to the single Redis of `s`, waiting as its [`Setup::waiter`] says.
    pub async fn connect(s: Setup<'_>) -> Result<Self, StrategyError> {
        let (addr, auth) = (s.redis()?, s.ep.redis_auth.as_ref());
        let nodes = vec![super::wait::fixed(addr)];
        Ok(Self {
            cons: connections(addr, auth, s.w).await?,
            acquire: redis::Script::new(ACQUIRE),
            release: redis::Script::new(RELEASE),
            ttl_ms: s.w.lock.ttl.as_millis() as u64,
            waiter: s.waiter()?.subscribe(nodes, auth, &s.ep.prefix).await?,
            timeout: s.w.load.timeout,
        })
    }

    fn con(&self, client: u32) -> Con {
        self.cons[client as usize % self.cons.len()].clone()
    }

    /// One try to take or re-enter the lock.
    pub async fn try_enter(
        &self,
        client: u32,
        key: &str,
        owner: &str,
    ) -> Result<Entered, ErrorKind> {
        let mut call = self.acquire.key(key);
        call.arg(owner).arg(self.ttl_ms);
        let n: i64 = within(
            self.timeout,
            call.invoke_async(&mut self.con(client)),
            classify,
        )
        .await?;
        Ok(match n {
            n if n > 0 => Entered::Count(n),
            0 => Entered::Busy(None),
            n => Entered::Busy(Some(Duration::from_millis(n.unsigned_abs()))),
        })
    }

    /// Leaves one level.
    pub async fn leave(&self, client: u32, key: &str, owner: &str) -> Result<Released, ErrorKind> {
        let mut call = self.release.key(key);
        if let Some(channel) = self.waiter.channel(key) {
            call.key(channel);
        }
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
        let enter = || async {
            Ok(match self.try_enter(client, key, token).await? {
                Entered::Count(_) => Try::Acquired,
                Entered::Busy(left) => Try::Busy(left),
            })
        };
        self.waiter.until_acquired(key, enter).await?;
        Ok(Lease::new(key, token))
    }

    /// The last try's script call may start just before the deadline.
    fn acquire_bound(&self) -> Duration {
        self.waiter.acquire_timeout() + self.timeout
    }

    /// One script call.
    fn release_bound(&self) -> Duration {
        self.timeout
    }

    async fn release(&self, client: u32, lease: &Lease) -> Result<bool, ErrorKind> {
        Ok(self.leave(client, &lease.key, &lease.token).await? == Released::Free)
    }
}
