//! Adapts any [`Lock`] into a [`Strategy`]: acquire, the shared critical section, release. A
//! read ([`Purchase::read`]) takes [`Lock::acquire_read`] and runs the store's read section.
//!
//! The lease is owned by a guard from the moment acquire returns: it is recorded and the lock
//! released on every way out of the attempt — a normal release, or the attempt cut at its bound
//! (the guard's drop records the lease up to the cut and releases in the background), so the
//! double-grant checker sees every lease and no lock, keep-alive or ZooKeeper node outlives its
//! attempt.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::{
    AcquireError, Attempt, CriticalSection, Lease, LeaseSlot, Lock, Purchase, SoldOutFlags,
    Strategy,
};
use crate::chaos::failpoint;
use crate::chaos::holder::{self, Point};
use crate::record::{ErrorKind, LeaseSpan, Outcome};
use crate::strategy::sql::mysql::MysqlStore;
use crate::workload::Workload;

/// A lock around the shared critical section of a store (the MariaDB store for every real
/// lock).
pub struct Locked<L, S = MysqlStore> {
    lock: Arc<L>,
    store: Arc<S>,
    hold: Duration,
    /// Distinguishes this run's tokens from leftovers of earlier runs on the same server.
    nonce: u32,
    /// Hand the lease's fencing token to the store, which then refuses stale writes.
    fenced: bool,
    /// Run the critical section (false: measure the lock alone).
    touch_store: bool,
    /// `critical_section.precheck`: the sold-out flag in front of the lock.
    precheck: SoldOutFlags,
}

impl<L: Lock + 'static, S: CriticalSection> Locked<L, S> {
    /// Wraps `lock`; the critical section sells from `store`.
    pub fn new(lock: L, store: Arc<S>, w: &Workload) -> Self {
        Self {
            lock: Arc::new(lock),
            store,
            hold: failpoint::scaled(failpoint::SLOW_CRITICAL_SECTION, w.critical_section.hold),
            nonce: rand::random(),
            fenced: false,
            touch_store: w.critical_section.touch_store,
            precheck: SoldOutFlags::new(w),
        }
    }

    /// The lock itself.
    pub fn lock(&self) -> Arc<L> {
        self.lock.clone()
    }

    /// The `-fenced` variant: the store checks the lock's fencing tokens.
    pub fn fenced(mut self) -> Self {
        self.fenced = true;
        self
    }
}

/// A held lease: recorded into the attempt's slot and released, whichever way the attempt ends.
struct Held<'a, L: Lock + 'static> {
    lock: Arc<L>,
    client: u32,
    slot: &'a LeaseSlot,
    /// `None` once released.
    lease: Option<Lease>,
    /// When acquire returned: the lease starts here, before any injected pause.
    acquired: Instant,
    /// When release was sent, once it was.
    released: Option<Instant>,
}

impl<L: Lock + 'static> Held<'_, L> {
    /// Releases the lock and records the lease; `refused`: a fence refused the critical
    /// section's write. Returns whether the release failed with an error.
    async fn release(mut self, refused: bool) -> bool {
        let released = Instant::now();
        self.released = Some(released);
        let lease = self.lease.as_ref().expect("released once");
        // What the client already knows (renewal found it gone, validity passed) counts first:
        // the release call comes after the holder's work.
        let known_lost = lease.known_lost(released);
        let result = self.lock.release(self.client, lease).await;
        // Released: the lease's key and token move into the record (no copy per attempt).
        let lease = self.lease.take().expect("still held until here");
        let lost = known_lost || result == Ok(false);
        let loss = lost.then(|| lease.loss(released, self.slot.written_at(), refused));
        self.slot.put(LeaseSpan {
            key: lease.key,
            token: lease.token,
            fence: lease.fence,
            acquired: self.acquired,
            released,
            lost,
            shared: lease.shared,
            loss,
        });
        result.is_err()
    }
}

impl<L: Lock + 'static> Drop for Held<'_, L> {
    fn drop(&mut self) {
        // Only when the attempt was cut (or panicked) before its release finished.
        let Some(lease) = self.lease.take() else {
            return;
        };
        let released = self.released.unwrap_or_else(Instant::now);
        let lost = lease.known_lost(released);
        // Cloned: the lease itself goes to the background release.
        self.slot.put(LeaseSpan {
            key: lease.key.clone(),
            token: lease.token.clone(),
            fence: lease.fence,
            acquired: self.acquired,
            released,
            lost,
            shared: lease.shared,
            loss: lost.then(|| lease.loss(released, self.slot.written_at(), false)),
        });
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let (lock, client) = (self.lock.clone(), self.client);
            // Bounded by the lock's own call bounds; a second release of one token is harmless.
            rt.spawn(async move {
                let _ = lock.release(client, &lease).await;
            });
        }
    }
}

#[async_trait]
impl<L: Lock + 'static, S: CriticalSection> Strategy for Locked<L, S> {
    async fn prepare(&self, skus: u32) -> Result<(), super::StrategyError> {
        self.lock.prepare(skus).await
    }

    async fn stuck_locks(&self, skus: u32) -> Result<u64, super::StrategyError> {
        self.lock.stuck_locks(skus).await
    }

    fn lease_ttl_granted(&self) -> Option<Duration> {
        self.lock.lease_ttl_granted()
    }

    fn broken(&self) -> Option<String> {
        self.lock.broken()
    }

    fn library(&self) -> Option<super::adapter::Hello> {
        self.lock.library()
    }

    async fn close(&self) {
        self.lock.close().await
    }

    /// Acquire, the longer of the purchase and the read section, release.
    fn bound(&self) -> Duration {
        let section = if self.touch_store {
            self.store
                .critical_section_bound(self.hold)
                .max(self.store.read_section_bound(self.hold))
        } else {
            Duration::ZERO
        };
        self.lock.acquire_bound() + section + self.lock.release_bound()
    }

    async fn attempt(&self, p: &Purchase) -> Attempt {
        self.precheck.around(p, self.locked_attempt(p)).await
    }
}

impl<L: Lock + 'static, S: CriticalSection> Locked<L, S> {
    /// Acquire, the critical section (or the read section), release.
    async fn locked_attempt(&self, p: &Purchase<'_>) -> Attempt {
        let key = self.store.lock_key(p.sku);
        // `seq` is unique within the run, the nonce across runs.
        let token = format!("{:08x}-{}", self.nonce, p.seq);
        let acquired = if p.read {
            self.lock.acquire_read(p.client, &key, &token).await
        } else {
            self.lock.acquire(p.client, &key, &token).await
        };
        let lease = match acquired {
            Ok(lease) => lease,
            Err(AcquireError::Busy) => return Outcome::LockTimeout.into(),
            Err(AcquireError::Failed(k)) => return Outcome::Failed(k).into(),
        };
        // A read writes nothing, so there is nothing for a fence to refuse.
        let fence = if self.fenced && !p.read {
            Some(
                lease
                    .fence
                    .expect("a fenced strategy is only built on a lock that issues tokens"),
            )
        } else {
            None
        };
        let held = Held {
            lock: self.lock.clone(),
            client: p.client,
            slot: p.lease,
            acquired: lease.granted_at.unwrap_or_else(Instant::now),
            lease: Some(lease),
            released: None,
        };
        crate::chaos::failpoint("lock.after-acquire");
        holder::reached(Point::AfterAcquire);
        let outcome = if !self.touch_store {
            Outcome::Locked
        } else if p.read {
            self.store.read_section(p, self.hold).await
        } else {
            self.store
                .critical_section(p, &token, fence, self.hold)
                .await
        };
        holder::reached(Point::BeforeRelease);
        let refused = outcome == Outcome::Failed(ErrorKind::StaleToken);
        let release_failed = held.release(refused).await;
        Attempt {
            outcome,
            release_failed,
        }
    }
}
