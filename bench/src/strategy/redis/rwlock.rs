//! `redis-rwlock`: a read–write lock with the semantics of Redisson's `RReadWriteLock`, and
//! `redis-rwlock-leaky-read`, the same lock with a read script that forgets the writer.
//!
//! One hash at the lock key holds `mode` (`read` / `write`) and one field per holder with its
//! reentrant count (a writer's field is `<owner>:write`). Readers share and re-enter; a writer
//! excludes everyone but may itself take the read lock, as Redisson allows. Each read level has
//! a timeout key of its own, so when one reader leaves, the hash's expiry becomes the longest
//! remaining reader's. Waiting is Redisson's `notify`: the last reader's release wakes one
//! waiter, a writer's release wakes them all (every waiting reader may share the key now).
//! Redisson's read lock is not fair: readers keep entering while a writer waits.
//!
//! The lease is `lock.ttl` with no watchdog, as `redis-reentrant` (Redisson's `tryLock` with an
//! explicit lease time), so the two compare on the same lease handling.

use std::time::Duration;

use async_trait::async_trait;

use super::reentrant::{HashLock, Released};
use crate::record::ErrorKind;
use crate::strategy::wait::{REDISSON, WAKE_ALL, WaitDefault};
use crate::strategy::{Acquired, Lease, Lock, StrategyError};

use crate::strategy::entry::needs::MARIADB_REDIS;
use crate::strategy::entry::{Kind, Setup, StrategyInfo};

/// Redisson's `RReadWriteLock`: notify waiters (one per read release, all per write release).
pub const REDISSON_RW: WaitDefault = WaitDefault {
    follows: "Redisson RReadWriteLock",
    ..REDISSON
};

/// `redis-rwlock`.
pub const RWLOCK: StrategyInfo = StrategyInfo {
    id: "redis-rwlock",
    kind: Kind::Lock,
    locks: true,
    fenced: false,
    fence_token: None,
    needs: MARIADB_REDIS,
    wait: Some(REDISSON_RW),
    about: "Redis read-write lock, a hash mode + holder -> count (Redisson RReadWriteLock): \
            readers share and re-enter, a writer excludes all",
    build: |s| {
        Box::pin(async move {
            let store = s.mariadb().await?;
            let lock = RwLock::connect(s, READ).await?;
            Ok(s.locked(lock, store))
        })
    },
};

/// `redis-rwlock-leaky-read`: a broken control.
pub const LEAKY_READ: StrategyInfo = StrategyInfo {
    id: "redis-rwlock-leaky-read",
    kind: Kind::Control,
    about: "BROKEN: redis-rwlock whose read script ignores a writer (grants a read while a \
            write is held); writers still exclude each other",
    build: |s| {
        Box::pin(async move {
            let store = s.mariadb().await?;
            let lock = RwLock::connect(s, READ_LEAKY).await?;
            Ok(s.locked(lock, store))
        })
    },
    ..RWLOCK
};

const READ: &str = include_str!("../lua/rwlock_read.lua");
const READ_LEAKY: &str = include_str!("../lua/rwlock_read_leaky.lua");
const WRITE: &str = include_str!("../lua/rwlock_write.lua");
const READ_RELEASE: &str = include_str!("../lua/rwlock_read_release.lua");
const WRITE_RELEASE: &str = include_str!("../lua/rwlock_write_release.lua");

/// The Redis read–write lock.
pub struct RwLock {
    hash: HashLock,
    read: redis::Script,
    write: redis::Script,
    read_release: redis::Script,
    write_release: redis::Script,
}

impl RwLock {
    /// Connects to the single Redis of `s`; reads are taken with the script `read`.
    async fn connect(s: Setup<'_>, read: &str) -> Result<Self, StrategyError> {
        Ok(Self {
            hash: HashLock::connect(s).await?,
            read: redis::Script::new(read),
            write: redis::Script::new(WRITE),
            read_release: redis::Script::new(READ_RELEASE),
            write_release: redis::Script::new(WRITE_RELEASE),
        })
    }
}

#[async_trait]
impl Lock for RwLock {
    async fn acquire(&self, client: u32, key: &str, token: &str) -> Acquired {
        self.hash.acquire(client, &self.write, key, token).await?;
        Ok(Lease::new(key, token).expiring(self.hash.ttl()))
    }

    async fn acquire_read(&self, client: u32, key: &str, token: &str) -> Acquired {
        self.hash.acquire(client, &self.read, key, token).await?;
        let mut lease = Lease::new(key, token).expiring(self.hash.ttl());
        lease.shared = true;
        Ok(lease)
    }

    fn acquire_bound(&self) -> Duration {
        self.hash.acquire_bound()
    }

    fn release_bound(&self) -> Duration {
        self.hash.release_bound()
    }

    /// `Ok(true)` whether the key was freed or others (or our other levels) still hold it.
    async fn release(&self, client: u32, lease: &Lease) -> Result<bool, ErrorKind> {
        let (script, message) = if lease.shared {
            // The last reader out wakes one waiter (a writer, or a reader that raced).
            (&self.read_release, lease.token.as_str())
        } else {
            (&self.write_release, WAKE_ALL)
        };
        let r = self
            .hash
            .leave(client, script, &lease.key, &lease.token, message)
            .await?;
        Ok(r != Released::NotOwner)
    }
}
