//! `redis-reentrant`: a hash `owner → count` under the lock key, taken and released by Lua
//! scripts (the Redisson design): the same owner may re-enter, others wait.

use std::time::Duration;

use async_trait::async_trait;

use super::conn::{Con, classify, connections};
use crate::record::ErrorKind;
use crate::strategy::wait::{Try, Waiter};
use crate::strategy::{AcquireError, Acquired, Lease, Lock, StrategyError, within};

use crate::strategy::entry::needs::MARIADB_REDIS;
use crate::strategy::entry::{Kind, Setup, StrategyInfo};

/// `redis-reentrant`.
pub const REENTRANT: StrategyInfo = StrategyInfo {
    id: "redis-reentrant",
    kind: Kind::Lock,
    locks: true,
    fenced: false,
    fence_token: None,
    needs: MARIADB_REDIS,
    wait: Some(crate::strategy::wait::REDISSON),
    about: "Redis hash owner -> count, Lua acquire / release (reentrant, Redisson-style)",
    build: |s| {
        Box::pin(async move {
            let store = s.mariadb().await?;
            let lock = Reentrant::connect(s).await?;
            Ok(s.locked(lock, store))
        })
    },
};

const ACQUIRE: &str = include_str!("../lua/reentrant_acquire.lua");
const RELEASE: &str = include_str!("../lua/reentrant_release.lua");

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

/// What the Redisson-style hash locks share (this one and the read–write lock of
/// `redis_rwlock`): a connection per buyer, the lease time, the waiter, and how a script is
/// called and its reply read.
pub(super) struct HashLock {
    cons: Vec<Con>,
    ttl_ms: u64,
    waiter: Waiter,
    timeout: Duration,
}

impl HashLock {
    /// Connects to the single Redis of `s`, waiting as its [`Setup::waiter`] says.
    pub(super) async fn connect(s: Setup<'_>) -> Result<Self, StrategyError> {
        let (addr, auth) = (s.redis()?, s.ep.redis_auth.as_ref());
        let nodes = vec![crate::strategy::wait::fixed(addr)];
        Ok(Self {
            cons: connections(addr, auth, s.w).await?,
            ttl_ms: s.w.lock.ttl.as_millis() as u64,
            waiter: s.waiter()?.subscribe(nodes, auth, &s.ep.prefix).await?,
            timeout: s.w.load.timeout,
        })
    }

    /// The lease time.
    pub(super) fn ttl(&self) -> Duration {
        Duration::from_millis(self.ttl_ms)
    }

    /// Runs a script call on `client`'s connection, bounded by the workload's timeout: its
    /// integer reply.
    async fn invoke(
        &self,
        client: u32,
        call: &redis::ScriptInvocation<'_>,
    ) -> Result<i64, ErrorKind> {
        let mut con = self.cons[client as usize % self.cons.len()].clone();
        within(self.timeout, call.invoke_async(&mut con), classify).await
    }

    /// One try of `script` (KEYS[1] = `key`, ARGV = owner, ttl in ms): the owner's new count,
    /// or how long the others hold it.
    pub(super) async fn enter(
        &self,
        client: u32,
        script: &redis::Script,
        key: &str,
        owner: &str,
    ) -> Result<Entered, ErrorKind> {
        let mut call = script.key(key);
        call.arg(owner).arg(self.ttl_ms);
        let n = self.invoke(client, &call).await?;
        Ok(match n {
            n if n > 0 => Entered::Count(n),
            0 => Entered::Busy(None),
            n => Entered::Busy(Some(Duration::from_millis(n.unsigned_abs()))),
        })
    }

    /// Takes the lock with `script`, waiting for its holders as the waiter says.
    pub(super) async fn acquire(
        &self,
        client: u32,
        script: &redis::Script,
        key: &str,
        owner: &str,
    ) -> Result<(), AcquireError> {
        let enter = || async {
            Ok(match self.enter(client, script, key, owner).await? {
                Entered::Count(_) => Try::Acquired,
                Entered::Busy(left) => Try::Busy(left),
            })
        };
        self.waiter.until_acquired(key, enter).await
    }

    /// One release of `script` (KEYS[1] = `key`, KEYS[2] = the release channel when waiters
    /// listen; ARGV = owner, ttl in ms, `message`: what a final release publishes).
    pub(super) async fn leave(
        &self,
        client: u32,
        script: &redis::Script,
        key: &str,
        owner: &str,
        message: &str,
    ) -> Result<Released, ErrorKind> {
        let mut call = script.key(key);
        if let Some(channel) = self.waiter.channel(key) {
            call.key(channel);
        }
        call.arg(owner).arg(self.ttl_ms).arg(message);
        let r = self.invoke(client, &call).await?;
        Ok(match r {
            1 => Released::Free,
            0 => Released::StillHeld,
            _ => Released::NotOwner,
        })
    }

    /// The last try's script call may start just before the deadline.
    pub(super) fn acquire_bound(&self) -> Duration {
        self.waiter.acquire_timeout() + self.timeout
    }

    /// One script call.
    pub(super) fn release_bound(&self) -> Duration {
        self.timeout
    }
}

/// The reentrant Redis lock.
pub struct Reentrant {
    hash: HashLock,
    acquire: redis::Script,
    release: redis::Script,
}

impl Reentrant {
    /// Connects to the single Redis of `s`, waiting as its [`Setup::waiter`] says.
    pub async fn connect(s: Setup<'_>) -> Result<Self, StrategyError> {
        Ok(Self {
            hash: HashLock::connect(s).await?,
            acquire: redis::Script::new(ACQUIRE),
            release: redis::Script::new(RELEASE),
        })
    }

    /// One try to take or re-enter the lock.
    pub async fn try_enter(
        &self,
        client: u32,
        key: &str,
        owner: &str,
    ) -> Result<Entered, ErrorKind> {
        self.hash.enter(client, &self.acquire, key, owner).await
    }

    /// Leaves one level (a final release publishes the owner, waking one waiter).
    pub async fn leave(&self, client: u32, key: &str, owner: &str) -> Result<Released, ErrorKind> {
        self.hash
            .leave(client, &self.release, key, owner, owner)
            .await
    }
}

#[async_trait]
impl Lock for Reentrant {
    async fn acquire(&self, client: u32, key: &str, token: &str) -> Acquired {
        self.hash.acquire(client, &self.acquire, key, token).await?;
        Ok(Lease::new(key, token).expiring(self.hash.ttl()))
    }

    fn acquire_bound(&self) -> Duration {
        self.hash.acquire_bound()
    }

    fn release_bound(&self) -> Duration {
        self.hash.release_bound()
    }

    async fn release(&self, client: u32, lease: &Lease) -> Result<bool, ErrorKind> {
        Ok(self.leave(client, &lease.key, &lease.token).await? == Released::Free)
    }
}
