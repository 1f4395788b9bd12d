//! How a buyer waits for a busy lock that has no server-side queue (the Redis locks and the
//! lock table), the way the library each recipe comes from waits:
//! - `notify` (Redisson's RLock): the release publishes on the lock's channel; a waiter wakes on
//!   it, or after the lock's remaining TTL if no release comes (its holder died); a writer's
//!   release of a read–write lock wakes them all ([`WAKE_ALL`]);
//! - `poll` (redis-py, node-redlock, Spring's JdbcLockRegistry): sleep `poll_interval` ±
//!   `poll_jitter` between tries.
//!
//! ZooKeeper, etcd and the row lock queue waiters server-side and do not use this; `pg-advisory`
//! waits in PostgreSQL's queue under `notify` and polls through this under `poll`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::{Notify, watch};

use super::{AcquireError, StrategyError};
use crate::cluster::{Auth, Prefix};
use crate::record::ErrorKind;
use crate::workload::{LockParams, WaitMode};

/// A strategy's default way of waiting, and the library it follows.
#[derive(Debug, Clone, Copy)]
pub struct WaitDefault {
    /// Notify or poll.
    pub mode: WaitMode,
    /// Pause between polls (also used when a workload switches a notify default to poll).
    pub poll_interval: Duration,
    /// Each pause is drawn from `poll_interval ± poll_jitter`.
    pub poll_jitter: Duration,
    /// Whether the lock's server can carry a release notification (MariaDB cannot).
    pub can_notify: bool,
    /// The library whose behaviour the default reproduces.
    pub follows: &'static str,
}

/// redis-py's `Lock` (SET NX PX + Lua compare-and-delete): `sleep=0.1` between tries.
pub const REDIS_PY: WaitDefault = WaitDefault {
    mode: WaitMode::Poll,
    poll_interval: Duration::from_millis(100),
    poll_jitter: Duration::ZERO,
    can_notify: true,
    follows: "redis-py Lock",
};

/// Redisson's `RLock`: subscribe to the lock's channel, wait at most the remaining TTL.
pub const REDISSON: WaitDefault = WaitDefault {
    mode: WaitMode::Notify,
    follows: "Redisson RLock",
    ..REDIS_PY
};

/// node-redlock: `retryDelay` 200 ms ± `retryJitter` 100 ms.
pub const NODE_REDLOCK: WaitDefault = WaitDefault {
    mode: WaitMode::Poll,
    poll_interval: Duration::from_millis(200),
    poll_jitter: Duration::from_millis(100),
    can_notify: true,
    follows: "node-redlock",
};

/// Spring Integration's `JdbcLockRegistry`: `idleBetweenTries` 100 ms.
pub const SPRING_JDBC: WaitDefault = WaitDefault {
    mode: WaitMode::Poll,
    poll_interval: Duration::from_millis(100),
    poll_jitter: Duration::ZERO,
    can_notify: false,
    follows: "Spring Integration JdbcLockRegistry",
};

/// sqlx's `PgAdvisoryLock::acquire` (`pg-advisory`): a blocking `pg_advisory_lock`, queued in
/// PostgreSQL's lock manager and woken by the release — a server-side notification, so shown as
/// `notify`. `poll` tries `pg_try_advisory_lock` every 100 ± 50 ms, as Ruby's with_advisory_lock
/// does (`sleep(rand(0.05..0.15))`).
pub const PG_ADVISORY: WaitDefault = WaitDefault {
    mode: WaitMode::Notify,
    poll_interval: Duration::from_millis(100),
    poll_jitter: Duration::from_millis(50),
    can_notify: true,
    follows: "sqlx PgAdvisoryLock::acquire: blocking pg_advisory_lock; poll: with_advisory_lock",
};

/// The effective wait of a run: the strategy's default with the workload's keys applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitPolicy {
    /// Notify or poll.
    pub mode: WaitMode,
    /// Pause between polls.
    pub poll_interval: Duration,
    /// Pause jitter (uniform, ±).
    pub poll_jitter: Duration,
}

impl WaitDefault {
    /// This default with the workload's `lock.wait` / `poll_interval` / `poll_jitter` applied;
    /// `notify` on a lock that cannot carry it is an error naming the key.
    pub fn resolve(&self, id: &str, l: &LockParams) -> Result<WaitPolicy, StrategyError> {
        let mode = l.wait.unwrap_or(self.mode);
        if mode == WaitMode::Notify && !self.can_notify {
            return Err(StrategyError::Unsupported {
                id: id.to_string(),
                what: "lock.wait = \"notify\" (MariaDB has no channel to publish a release on; \
                       use \"poll\")",
            });
        }
        Ok(WaitPolicy {
            mode,
            poll_interval: l.poll_interval.unwrap_or(self.poll_interval),
            poll_jitter: l.poll_jitter.unwrap_or(self.poll_jitter),
        })
    }
}

impl std::fmt::Display for WaitPolicy {
    /// `notify`, `poll 100ms` or `poll 200ms±100ms`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = |d: Duration| humantime::format_duration(d).to_string();
        match (self.mode, self.poll_jitter.is_zero()) {
            (WaitMode::Notify, _) => f.write_str("notify"),
            (WaitMode::Poll, true) => write!(f, "poll {}", ms(self.poll_interval)),
            (WaitMode::Poll, false) => write!(
                f,
                "poll {}±{}",
                ms(self.poll_interval),
                ms(self.poll_jitter)
            ),
        }
    }
}

impl WaitDefault {
    /// The default as a policy (no workload keys applied).
    pub fn policy(&self) -> WaitPolicy {
        WaitPolicy {
            mode: self.mode,
            poll_interval: self.poll_interval,
            poll_jitter: self.poll_jitter,
        }
    }
}

impl WaitPolicy {
    /// One poll pause: `poll_interval ± poll_jitter`, never negative (node-redlock's rule).
    pub fn pause(&self) -> Duration {
        if self.poll_jitter.is_zero() {
            return self.poll_interval;
        }
        let j = self.poll_jitter.as_secs_f64();
        let offset: f64 = rand::random_range(-j..=j);
        Duration::from_secs_f64((self.poll_interval.as_secs_f64() + offset).max(0.0))
    }
}

/// What one try at a busy lock found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Try {
    /// The lock is ours.
    Acquired,
    /// Another holds it, for this much longer if the try learned it (PTTL).
    Busy(Option<Duration>),
}

impl Try {
    /// A Redis `PTTL` reply: -2 (gone: try again now), -1 (no expiry: unknown), else ms.
    pub fn busy_for_pttl(pttl: i64) -> Self {
        match pttl {
            -1 => Try::Busy(None),
            ms => Try::Busy(Some(Duration::from_millis(ms.max(0) as u64))),
        }
    }
}

/// Retries a lock's single tries until it is acquired or `lock.acquire_timeout` passes,
/// waiting in between as the policy says.
pub struct Waiter {
    policy: WaitPolicy,
    /// Present exactly when the policy is `notify`.
    notifier: Option<Arc<Notifier>>,
    acquire_timeout: Duration,
    /// A notify waiter that learned no remaining TTL waits at most this long (the lease).
    ttl: Duration,
}

impl Waiter {
    /// A poll waiter (or one whose notifier is attached with [`Waiter::with_notifier`]).
    pub fn new(policy: WaitPolicy, l: &LockParams) -> Self {
        Self {
            policy,
            notifier: None,
            acquire_timeout: l.acquire_timeout,
            ttl: l.ttl,
        }
    }

    /// Subscribes to the release channels on `nodes` when the policy is `notify` (before the
    /// first try of the run, so no release is missed).
    pub async fn subscribe(
        mut self,
        nodes: Vec<watch::Receiver<SocketAddr>>,
        auth: Option<&Auth>,
        prefix: &Prefix,
    ) -> Result<Self, StrategyError> {
        if self.policy.mode == WaitMode::Notify {
            self.notifier = Some(Arc::new(Notifier::subscribe(nodes, auth, prefix).await?));
        }
        Ok(self)
    }

    /// The effective policy.
    pub fn policy(&self) -> WaitPolicy {
        self.policy
    }

    /// Whether waiters listen for releases (`notify`).
    pub fn notifies(&self) -> bool {
        self.notifier.is_some()
    }

    /// The channel a release of `key` must publish on, when waiters listen for it.
    pub fn channel(&self, key: &str) -> Option<String> {
        self.notifier.as_ref().map(|_| Notifier::channel(key))
    }

    /// The wait of a notify waiter: its remaining share of `acquire_timeout`.
    pub fn acquire_timeout(&self) -> Duration {
        self.acquire_timeout
    }

    /// Calls `try_once` until it acquires; `Busy` after `acquire_timeout`, or the first error.
    ///
    /// Poll (redis-py's loop): sleep a pause, unless the next try would start after the
    /// deadline. Notify (Redisson's loop): wait for a release message, at most the holder's
    /// remaining TTL, and try again unless the deadline has passed.
    pub async fn until_acquired<F, Fut>(
        &self,
        key: &str,
        mut try_once: F,
    ) -> Result<(), AcquireError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<Try, ErrorKind>>,
    {
        let started = tokio::time::Instant::now();
        // Registered before the first try: a release during the try leaves a permit.
        let wake = self.notifier.as_ref().map(|n| n.listen(key));
        let mut woken = false;
        loop {
            let busy_for = match try_once().await {
                Ok(Try::Acquired) => return Ok(()),
                Ok(Try::Busy(d)) => d,
                Err(k) => {
                    pass_on(&wake, woken);
                    return Err(AcquireError::Failed(k));
                }
            };
            let left = self.acquire_timeout.saturating_sub(started.elapsed());
            match &wake {
                Some(n) => {
                    if left.is_zero() {
                        break;
                    }
                    let wait = busy_for.unwrap_or(self.ttl).min(left);
                    woken = tokio::time::timeout(wait, n.notified()).await.is_ok();
                    if started.elapsed() >= self.acquire_timeout {
                        // A wake-up taken but not used goes to the next waiter.
                        pass_on(&wake, woken);
                        break;
                    }
                }
                None => {
                    let pause = self.policy.pause();
                    if pause > left {
                        break;
                    }
                    tokio::time::sleep(pause).await;
                }
            }
        }
        Err(AcquireError::Busy)
    }
}

/// Hands a release notification this waiter consumed without trying on to another waiter.
fn pass_on(wake: &Option<Arc<Notify>>, woken: bool) {
    if let (Some(n), true) = (wake, woken) {
        n.notify_one();
    }
}

/// A release message that wakes every waiter of the key in each process, not one: Redisson's
/// read–write lock sends it when a writer frees the key, since all the readers waiting may now
/// share it. (Any other message wakes one waiter.) Waiters that are trying at that moment miss
/// it, as in Redisson, except the one that finds the permit left by the usual wake-up.
pub const WAKE_ALL: &str = "wake-all";

/// One subscription per Redis node to every release channel of the run (`<prefix>:*`), and
/// the waiters of each channel in this process. Like Redisson, a message wakes one waiter of
/// the process (`Notify::notify_one`: with none waiting, the next one to wait returns at
/// once), so a release does not start a stampede.
pub struct Notifier {
    waiters: Arc<Mutex<HashMap<String, Arc<Notify>>>>,
    /// The subscriber tasks, stopped when the lock is dropped.
    tasks: Vec<tokio::task::AbortHandle>,
}

impl Drop for Notifier {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Bound of subscribing to one node before the run.
const SUBSCRIBE_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause before resubscribing after a subscription broke (server killed or cut off).
const RESUBSCRIBE_PAUSE: Duration = Duration::from_millis(100);

impl Notifier {
    /// The channel of `key`'s releases.
    pub fn channel(key: &str) -> String {
        format!("{key}:released")
    }

    /// Subscribes on every node (each followed wherever its address moves, e.g. the master
    /// Sentinel names); fails if a node cannot be subscribed to now.
    pub async fn subscribe(
        nodes: Vec<watch::Receiver<SocketAddr>>,
        auth: Option<&Auth>,
        prefix: &Prefix,
    ) -> Result<Self, StrategyError> {
        let waiters: Arc<Mutex<HashMap<String, Arc<Notify>>>> = Arc::default();
        let pattern = format!("{}*", prefix.key_start());
        let mut tasks = Vec::new();
        for mut addr in nodes {
            let at = *addr.borrow_and_update();
            let first = connect(at, auth, &pattern).await?;
            let (auth, pattern, waiters) = (auth.cloned(), pattern.clone(), waiters.clone());
            let task = tokio::spawn(async move {
                let mut current = Some(first);
                loop {
                    if let Some(pubsub) = current.take() {
                        listen(pubsub, &mut addr, &waiters).await;
                    }
                    tokio::select! {
                        _ = tokio::time::sleep(RESUBSCRIBE_PAUSE) => {}
                        _ = moved(&mut addr) => {}
                    }
                    let at = *addr.borrow_and_update();
                    match connect(at, auth.as_ref(), &pattern).await {
                        Ok(p) => current = Some(p),
                        Err(e) => tracing::debug!(%at, "release channel: resubscribe failed: {e}"),
                    }
                }
            });
            tasks.push(task.abort_handle());
        }
        Ok(Self { waiters, tasks })
    }

    /// The waiters' wake-up of `key` (created on first use).
    pub fn listen(&self, key: &str) -> Arc<Notify> {
        let mut w = self.waiters.lock().expect("never poisoned");
        w.entry(Self::channel(key)).or_default().clone()
    }
}

/// Opens a subscription to every release channel on the node at `at`.
async fn connect(
    at: SocketAddr,
    auth: Option<&Auth>,
    pattern: &str,
) -> Result<redis::aio::PubSub, StrategyError> {
    let client = crate::cluster::redis::client(at, auth)?;
    let subscribed = async {
        let mut p = client.get_async_pubsub().await?;
        p.psubscribe(pattern).await?;
        Ok::<_, redis::RedisError>(p)
    };
    tokio::time::timeout(SUBSCRIBE_TIMEOUT, subscribed)
        .await
        .map_err(|_| StrategyError::Timeout("subscribe to the release channels"))?
        .map_err(StrategyError::Redis)
}

/// Wakes one waiter per message ([`WAKE_ALL`]: every waiter) until the subscription breaks or the node's address moves.
async fn listen(
    pubsub: redis::aio::PubSub,
    addr: &mut watch::Receiver<SocketAddr>,
    waiters: &Mutex<HashMap<String, Arc<Notify>>>,
) {
    let mut messages = pubsub.into_on_message();
    loop {
        tokio::select! {
            m = messages.next() => match m {
                Some(m) => {
                    let w = waiters.lock().expect("never poisoned");
                    if let Some(n) = w.get(m.get_channel_name()) {
                        if m.get_payload_bytes() == WAKE_ALL.as_bytes() {
                            n.notify_waiters();
                        }
                        n.notify_one();
                    }
                }
                None => return,
            },
            _ = moved(addr) => return,
        }
    }
}

/// Returns when the node's address moves; never, once nobody can move it (a fixed node).
async fn moved(addr: &mut watch::Receiver<SocketAddr>) {
    if addr.changed().await.is_err() {
        std::future::pending::<()>().await
    }
}

/// A node that never moves, for [`Notifier::subscribe`].
pub fn fixed(addr: SocketAddr) -> watch::Receiver<SocketAddr> {
    watch::channel(addr).1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poll_pauses_stay_within_interval_plus_minus_jitter() {
        let p = WaitPolicy {
            mode: WaitMode::Poll,
            poll_interval: Duration::from_millis(200),
            poll_jitter: Duration::from_millis(100),
        };
        let pauses: Vec<Duration> = (0..2000).map(|_| p.pause()).collect();
        assert!(pauses.iter().all(|d| *d >= Duration::from_millis(100)));
        assert!(pauses.iter().all(|d| *d <= Duration::from_millis(300)));
        // Spread over the whole range, not stuck at the interval.
        assert!(pauses.iter().any(|d| *d < Duration::from_millis(130)));
        assert!(pauses.iter().any(|d| *d > Duration::from_millis(270)));
        let fixed = WaitPolicy {
            poll_jitter: Duration::ZERO,
            ..p
        };
        assert_eq!(fixed.pause(), Duration::from_millis(200));
        let wide = WaitPolicy {
            poll_jitter: Duration::from_millis(500),
            ..p
        };
        assert!((0..500).all(|_| wide.pause() <= Duration::from_millis(700)));
    }

    #[test]
    fn pttl_replies_become_remaining_waits() {
        assert_eq!(Try::busy_for_pttl(-1), Try::Busy(None));
        assert_eq!(Try::busy_for_pttl(-2), Try::Busy(Some(Duration::ZERO)));
        assert_eq!(
            Try::busy_for_pttl(1500),
            Try::Busy(Some(Duration::from_millis(1500)))
        );
    }
}
