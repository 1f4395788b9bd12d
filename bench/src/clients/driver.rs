//! The buyers' loop: `clients` tasks take slots from the [`Schedule`], wait for the intended
//! start (open loop), run one attempt and send the [`Completion`] to the recorder.
//!
//! Bounded three ways: the schedule ends at `load.duration` (or `load.max_attempts`), no slot
//! is taken after the duration, and every attempt is cut at the strategy's bound
//! ([`Strategy::bound`]: the sum of the bounds of the calls an attempt makes) plus the longest
//! pause the chaos plan may inflict on the process. A cut attempt is recorded as unknown, with
//! the lease it held up to the cut (its lock is released in the background).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::record::{Completion, DriveReport, ErrorKind, Outcome};
use crate::strategy::{Attempt, LeaseSlot, Purchase, Strategy};
use crate::workload::pacing::{Part, Schedule, Slot};
use crate::workload::{LoadMode, Workload};

/// Runs the load against `strategy` from `start` and returns when every buyer has stopped;
/// each completion goes to `sink` (the recorder's [`crate::record::Input`], or a worker's fold).
pub async fn drive<T: From<Completion> + Send + 'static>(
    strategy: Arc<dyn Strategy>,
    w: &Workload,
    start: Instant,
    sink: mpsc::Sender<T>,
    cancel: CancellationToken,
) -> DriveReport {
    drive_part(
        strategy,
        w,
        Part::WHOLE,
        Duration::ZERO,
        start,
        sink,
        cancel,
    )
    .await
}

/// [`drive`] for one [`Part`] of the load (a worker process); `extra_bound` lengthens the bound
/// of an attempt by the longest pause the chaos plan may inflict on this process.
pub async fn drive_part<T: From<Completion> + Send + 'static>(
    strategy: Arc<dyn Strategy>,
    w: &Workload,
    part: Part,
    extra_bound: Duration,
    start: Instant,
    sink: mpsc::Sender<T>,
    cancel: CancellationToken,
) -> DriveReport {
    let schedule = Arc::new(Schedule::part(w, start, part));
    let end = start + w.load.duration;
    let bound = strategy.bound() + extra_bound;
    let open = w.load.mode == LoadMode::Open;
    let dropped = Arc::new(AtomicU64::new(0));
    let mut buyers = tokio::task::JoinSet::new();
    for client in part.clients(w.load.clients) {
        let buyer = Buyer {
            client,
            strategy: strategy.clone(),
            schedule: schedule.clone(),
            sink: sink.clone(),
            cancel: cancel.clone(),
            dropped: dropped.clone(),
            end,
            bound,
            open,
        };
        buyers.spawn(buyer.run());
    }
    drop(sink);
    while let Some(joined) = buyers.join_next().await {
        if let Err(e) = joined {
            // A panicking strategy is a bug; surface it instead of hiding a buyer's death.
            if e.is_panic() {
                std::panic::resume_unwind(e.into_panic());
            }
        }
    }
    let cancelled = cancel.is_cancelled();
    let strategy_broken = strategy.broken();
    DriveReport {
        elapsed: start.elapsed(),
        not_started: if cancelled {
            0
        } else {
            schedule.count_unstarted()
        } + dropped.load(Ordering::Relaxed),
        cancelled,
        broken: strategy_broken.into_iter().collect(),
    }
}

/// One buyer: takes slots until the schedule, the duration or the recorder ends.
struct Buyer<T> {
    client: u32,
    strategy: Arc<dyn Strategy>,
    schedule: Arc<Schedule>,
    sink: mpsc::Sender<T>,
    cancel: CancellationToken,
    /// Slots taken but given up while waiting for their start (cancelled).
    dropped: Arc<AtomicU64>,
    end: Instant,
    /// The longest an attempt may take before it is cut.
    bound: Duration,
    /// Open loop: wait for each slot's intended start.
    open: bool,
}

impl<T: From<Completion> + Send + 'static> Buyer<T> {
    async fn run(self) {
        loop {
            let now = Instant::now();
            if now >= self.end || self.cancel.is_cancelled() {
                break;
            }
            let Some(slot) = self.schedule.next(now) else {
                break;
            };
            if self.open {
                tokio::select! {
                    _ = tokio::time::sleep_until(slot.intended.into()) => {}
                    _ = self.cancel.cancelled() => {
                        self.dropped.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                }
            }
            let completion = self.attempt(&slot).await;
            if self.sink.send(completion.into()).await.is_err() {
                break; // the recorder is gone: nothing more can be recorded
            }
        }
    }

    /// Runs one attempt of `slot`, cut at the bound.
    async fn attempt(&self, slot: &Slot) -> Completion {
        let started = Instant::now();
        let lease = LeaseSlot::default();
        let p = Purchase {
            seq: slot.seq,
            client: self.client,
            sku: slot.sku,
            read: slot.read,
            ask: slot.ask,
            lease: &lease,
        };
        let attempt = tokio::time::timeout(self.bound, self.strategy.attempt(&p))
            .await
            .unwrap_or_else(|_| Attempt::from(Outcome::Unknown(ErrorKind::Timeout)));
        Completion {
            seq: slot.seq,
            client: self.client,
            sku: slot.sku,
            read: slot.read,
            outcome: attempt.outcome,
            intended: slot.intended,
            started,
            ended: Instant::now(),
            release_failed: attempt.release_failed,
            lease: lease.take(),
            ask: slot.ask,
        }
    }
}
