//! `redlock`: the lock on N independent Redis servers (antirez's algorithm).
//!
//! `SET key token NX PX ttl` goes to every node at once, each call bounded by
//! `lock.node_timeout` so one slow node never slows an acquire; the lock is held once a
//! majority (N/2 + 1) said yes *and* time remains: validity = ttl − elapsed − drift, with
//! drift = 1% of the ttl + 2 ms. Otherwise it is released on every node and retried. The
//! acquire's answer returns as soon as a majority has answered; stragglers are not waited for.
//!
//! The lease carries its validity: a holder still working when it has passed has lost the lock
//! (nothing renews it), whatever the unlock finds. Unlock goes to every node, each bounded by
//! `lock.node_timeout`, so no node keeps a key the holder believes freed; the release answers
//! once the outcome is decided, without waiting for a frozen minority.

use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::FuturesUnordered;

use super::conn::{Con, classify, connections};
use crate::record::ErrorKind;
use crate::strategy::wait::{Try, Waiter};
use crate::strategy::{Acquired, Lease, Lock, StrategyError, within};

use crate::strategy::entry::needs::MARIADB_REDLOCK;
use crate::strategy::entry::{Kind, Setup, StrategyInfo};

/// `redlock`.
pub const REDLOCK: StrategyInfo = StrategyInfo {
    id: "redlock",
    kind: Kind::Lock,
    locks: true,
    fenced: false,
    fence_token: None,
    needs: MARIADB_REDLOCK,
    wait: Some(crate::strategy::wait::NODE_REDLOCK),
    about: "Redlock over 5 independent Redis: majority + validity = ttl - elapsed - drift",
    build: |s| {
        Box::pin(async move {
            let store = s.mariadb().await?;
            if s.ep.redis.len() < crate::cluster::REDLOCK_NODES {
                return Err(StrategyError::Missing {
                    id: s.info.id.into(),
                    what: "five independent Redis servers",
                });
            }
            let lock = Redlock::connect(s).await?;
            Ok(s.locked(lock, store))
        })
    },
};

const UNLOCK: &str = include_str!("../lua/unlock.lua");

/// The Redlock lock over independent Redis nodes.
pub struct Redlock {
    /// Per node, one connection per buyer (bounded); `None` for a node that could not be
    /// reached at start, which then counts as a "no" in every vote.
    nodes: Vec<Option<Vec<Con>>>,
    unlock: redis::Script,
    ttl: Duration,
    node_timeout: Duration,
    waiter: Waiter,
}

/// Votes needed out of `n`.
pub fn quorum(n: usize) -> usize {
    n / 2 + 1
}

/// Time a lock taken in `elapsed` remains valid: ttl − elapsed − drift (None if none remains).
pub fn validity(ttl: Duration, elapsed: Duration) -> Option<Duration> {
    let drift = ttl / 100 + Duration::from_millis(2);
    ttl.checked_sub(elapsed)?
        .checked_sub(drift)
        .filter(|v| !v.is_zero())
}

/// Awaits `calls` until `needed` returned `Ok(true)` or all finished; returns the yes count.
/// The calls still running are dropped: their replies no longer matter.
async fn until_quorum<F>(mut calls: FuturesUnordered<F>, needed: usize) -> usize
where
    F: std::future::Future<Output = Result<bool, ErrorKind>>,
{
    let mut yes = 0;
    while let Some(r) = calls.next().await {
        if r == Ok(true) {
            yes += 1;
            if yes >= needed {
                break;
            }
        }
    }
    yes
}

impl Redlock {
    /// Connects to every node of `s`; a minority of unreachable nodes is tolerated (that is
    /// the point of Redlock), a majority is an error.
    pub async fn connect(s: Setup<'_>) -> Result<Self, StrategyError> {
        let (addrs, auth, w) = (&s.ep.redis, s.ep.redis_auth.as_ref(), s.w);
        let attempts =
            futures::future::join_all(addrs.iter().map(|a| connections(*a, auth, w))).await;
        let mut nodes = Vec::with_capacity(addrs.len());
        let mut last_err = None;
        for (addr, r) in addrs.iter().zip(attempts) {
            match r {
                Ok(cons) => nodes.push(Some(cons)),
                Err(e) => {
                    tracing::warn!(%addr, error = %e, "redlock node unreachable; it votes no");
                    nodes.push(None);
                    last_err = Some(e);
                }
            }
        }
        if nodes.iter().flatten().count() < quorum(addrs.len())
            && let Some(e) = last_err
        {
            return Err(e);
        }
        // A notify waiter listens on every node it reached: a release publishes on each.
        let reached = addrs.iter().zip(&nodes).filter(|(_, n)| n.is_some());
        let listen = reached
            .map(|(a, _)| crate::strategy::wait::fixed(*a))
            .collect();
        let waiter = s.waiter()?.subscribe(listen, auth, &s.ep.prefix).await?;
        Ok(Self {
            nodes,
            unlock: redis::Script::new(UNLOCK),
            ttl: w.lock.ttl,
            node_timeout: w.lock.node_timeout,
            waiter,
        })
    }

    fn cons(&self, client: u32) -> impl Iterator<Item = Con> + '_ {
        self.nodes
            .iter()
            .flatten()
            .map(move |n| n[client as usize % n.len()].clone())
    }

    /// Frees `key` on every node that still holds `token`. Every node gets its unlock (each a
    /// task of its own, bounded by `node_timeout`, that finishes even after this returns), but
    /// the answer comes as soon as it is decided, so a frozen minority never slows a release:
    /// `Ok(true)` once a majority freed it, `Ok(false)` once a majority can no longer confirm
    /// it held the lock (the lease was lost), `Err` when only unanswered nodes stand between.
    async fn unlock_all(&self, client: u32, key: &str, token: &str) -> Result<bool, ErrorKind> {
        let n = self.nodes.len();
        let mut calls: FuturesUnordered<_> = self
            .cons(client)
            .map(|mut con| {
                let (unlock, limit) = (self.unlock.clone(), self.node_timeout);
                let (key, token) = (key.to_string(), token.to_string());
                let channel = self.waiter.channel(&key);
                tokio::spawn(async move {
                    let mut call = unlock.key(&key);
                    if let Some(channel) = channel {
                        call.key(channel);
                    }
                    call.arg(&token);
                    within(limit, call.invoke_async::<i64>(&mut con), classify)
                        .await
                        .map(|freed| freed == 1)
                })
            })
            .collect();
        // Unreachable-at-start nodes never answer: they count as unanswered.
        let (mut yes, mut no, mut unknown) = (0, 0, n - calls.len());
        while let Some(joined) = calls.next().await {
            match joined {
                Ok(Ok(true)) => yes += 1,
                Ok(Ok(false)) => no += 1,
                _ => unknown += 1,
            }
            if yes >= quorum(n) {
                return Ok(true);
            }
            if no > n - quorum(n) {
                return Ok(false);
            }
        }
        if yes + unknown >= quorum(n) {
            Err(ErrorKind::Timeout)
        } else {
            Ok(false)
        }
    }
}

#[async_trait]
impl Lock for Redlock {
    async fn acquire(&self, client: u32, key: &str, token: &str) -> Acquired {
        let ttl_ms = self.ttl.as_millis() as u64;
        let set = redis::cmd("SET")
            .arg(key)
            .arg(token)
            .arg("NX")
            .arg("PX")
            .arg(ttl_ms)
            .to_owned();
        let valid_until = std::sync::Mutex::new(None);
        let round = || async {
            let round = tokio::time::Instant::now();
            let calls: FuturesUnordered<_> = self
                .cons(client)
                .map(|mut con| {
                    let set = &set;
                    async move {
                        let reply = set.query_async::<Option<String>>(&mut con);
                        within(self.node_timeout, reply, classify)
                            .await
                            .map(|r| r.is_some())
                    }
                })
                .collect();
            let yes = until_quorum(calls, quorum(self.nodes.len())).await;
            if yes >= quorum(self.nodes.len())
                && let Some(valid) = validity(self.ttl, round.elapsed())
            {
                *valid_until.lock().expect("never poisoned") =
                    Some(std::time::Instant::now() + valid);
                return Ok(Try::Acquired);
            }
            // No majority (or no time left): undo the partial acquisition everywhere. A node
            // that does not answer votes no: a round never fails, it is busy.
            let _ = self.unlock_all(client, key, token).await;
            Ok(Try::Busy(None))
        };
        self.waiter.until_acquired(key, round).await?;
        let mut lease = Lease::new(key, token);
        lease.valid_until = valid_until.into_inner().expect("never poisoned");
        Ok(lease)
    }

    async fn release(&self, client: u32, lease: &Lease) -> Result<bool, ErrorKind> {
        self.unlock_all(client, &lease.key, &lease.token).await
    }

    /// A round (SET on every node at once) may start just before the deadline, followed by
    /// its undo (unlock on every node at once): two node timeouts.
    fn acquire_bound(&self) -> Duration {
        self.waiter.acquire_timeout() + self.node_timeout * 2
    }

    /// Unlock on every node at once.
    fn release_bound(&self) -> Duration {
        self.node_timeout
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quorum_is_a_strict_majority() {
        assert_eq!((quorum(1), quorum(3), quorum(5), quorum(4)), (1, 2, 3, 3));
    }

    #[test]
    fn validity_subtracts_elapsed_time_and_drift() {
        let ttl = Duration::from_millis(1000);
        assert_eq!(
            validity(ttl, Duration::from_millis(100)),
            Some(Duration::from_millis(888))
        );
        assert_eq!(validity(ttl, Duration::from_millis(988)), None);
        assert_eq!(validity(ttl, Duration::from_secs(2)), None);
    }
}
