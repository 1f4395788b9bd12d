//! Adapts any [`Lock`] into a [`Strategy`]: acquire, the shared critical section, release.

use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::mysql::SharedStore;
use super::{AcquireError, Attempt, Lock, Purchase, Strategy};
use crate::record::{LeaseSpan, Outcome};
use crate::workload::Workload;

/// A lock around the shared critical section of the MariaDB store.
pub struct Locked<L> {
    lock: L,
    store: SharedStore,
    hold: Duration,
    /// Distinguishes this run's tokens from leftovers of earlier runs on the same server.
    nonce: u32,
    /// Hand the lease's fencing token to the store, which then refuses stale writes.
    fenced: bool,
    /// Run the critical section (false: measure the lock alone).
    touch_store: bool,
}

impl<L: Lock> Locked<L> {
    /// Wraps `lock`; the critical section sells from `store`.
    pub fn new(lock: L, store: SharedStore, w: &Workload) -> Self {
        Self {
            lock,
            store,
            hold: w.critical_section.hold,
            nonce: rand::random(),
            fenced: false,
            touch_store: w.critical_section.touch_store,
        }
    }

    /// The `-fenced` variant: the store checks the lock's fencing tokens.
    pub fn fenced(mut self) -> Self {
        self.fenced = true;
        self
    }
}

#[async_trait]
impl<L: Lock> Strategy for Locked<L> {
    async fn stuck_locks(&self, skus: u32) -> Result<u64, super::StrategyError> {
        self.lock.stuck_locks(skus).await
    }

    async fn attempt(&self, p: &Purchase) -> Attempt {
        let key = self.store.prefix.lock_key(p.sku);
        // `seq` is unique within the run, the nonce across runs.
        let token = format!("{:08x}-{}", self.nonce, p.seq);
        let lease = match self.lock.acquire(p.client, &key, &token).await {
            Ok(lease) => lease,
            Err(AcquireError::Busy) => return Outcome::LockTimeout.into(),
            Err(AcquireError::Failed(k)) => return Outcome::Failed(k).into(),
        };
        // The lease starts when acquire returned, before any injected pause.
        let acquired = Instant::now();
        crate::chaos::failpoint("lock.after-acquire");
        crate::chaos::holder::lock_acquired();
        let fence = if self.fenced {
            Some(
                lease
                    .fence
                    .expect("a fenced strategy is only built on a lock that issues tokens"),
            )
        } else {
            None
        };
        let outcome = if self.touch_store {
            self.store
                .critical_section(p, &lease.token, fence, self.hold)
                .await
        } else {
            Outcome::Locked
        };
        let released = Instant::now();
        let release_failed = !matches!(self.lock.release(p.client, &lease).await, Ok(true));
        Attempt {
            outcome,
            release_failed,
            lease: Some(LeaseSpan {
                key,
                token: lease.token.clone(),
                fence: lease.fence,
                acquired,
                released,
            }),
        }
    }
}
