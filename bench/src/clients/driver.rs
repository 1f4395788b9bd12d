//! The buyers' loop: `clients` tasks take slots from the [`Schedule`], wait for the intended
//! start (open loop), run one attempt and send the [`Completion`] to the recorder.
//!
//! Bounded three ways: the schedule ends at `load.duration` (or `load.max_attempts`), no slot
//! is taken after the duration and its drain (open loop: `load.drain` more for the arrivals due
//! before the end that waited for a free buyer), and every attempt is cut at the strategy's bound
//! ([`Strategy::bound`]: the sum of the bounds of the calls an attempt makes) plus the longest
//! pause the chaos plan may inflict on the process. A cut attempt is recorded as unknown, with
//! the lease it held up to the cut (its lock is released in the background).
//!
//! With `[buyers]`, a purchase that ended in a timeout is tried again at once with the same
//! Ask by the share `retry_after_timeout` of requests ([`Buyers::retries`]): once per request,
//! never after the duration, as attempt `RETRY_SEQ + seq` (outside the schedule's numbers),
//! intended to start when the timeout came back. Each buyer also measures the generator's
//! own lag ([`GeneratorLag`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use hdrhistogram::Histogram;

use crate::record::sale::Unstarted;
use crate::record::trips::{RoundTrips, counted};
use crate::record::{Completion, DriveReport, ErrorKind, GeneratorLag, Outcome, hist};
use crate::strategy::{Attempt, LeaseSlot, Purchase, Strategy};
use crate::workload::pacing::{Part, Schedule, Slot};
use crate::workload::{Buyers, LoadMode, Workload};

/// Where a retry's attempt numbers start: far past any schedule's (2^40 slots is 12 days at a
/// million a second), and within a signed 64-bit column.
pub const RETRY_SEQ: u64 = 1 << 40;

/// How long after the surge starts the generator's lag is measured.
const PEAK_WINDOW: Duration = Duration::from_secs(1);

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
    // The closed loop would draw new slots for ever: it stops at the end.
    let stop = end + if open { w.load.drain } else { Duration::ZERO };
    let dropped = Arc::new(AtomicU64::new(0));
    let trips = Arc::new(Trips::default());
    let peak = match w.load.shape.surge_start() {
        Some(s) => (start + s, start + s + PEAK_WINDOW),
        None => (start, end),
    };
    let retry = w.buyers.clone().map(|b| (Arc::new(b), w.seed));
    let mut buyers = tokio::task::JoinSet::new();
    for client in part.clients(w.load.clients) {
        let buyer = Buyer {
            client,
            strategy: strategy.clone(),
            schedule: schedule.clone(),
            sink: sink.clone(),
            cancel: cancel.clone(),
            dropped: dropped.clone(),
            trips: trips.clone(),
            end,
            stop,
            bound,
            open,
            peak,
            retry: retry.clone(),
        };
        buyers.spawn(buyer.run());
    }
    drop(sink);
    let mut lag = hist(3);
    while let Some(joined) = buyers.join_next().await {
        match joined {
            Ok(h) => lag.add(h).expect("auto-resizing histograms add"),
            // A panicking strategy is a bug; surface it instead of hiding a buyer's death.
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => {}
        }
    }
    let cancelled = cancel.is_cancelled();
    let strategy_broken = strategy.broken();
    let generator_lag = GeneratorLag::of(&lag);
    // Also in summary.json's `sale.generator_lag_us` for a sale.
    tracing::info!(?generator_lag, "the generator's lag in the peak window");
    let (unstarted, asks) = if cancelled {
        (0, Vec::new())
    } else {
        schedule.drain_unstarted(w.buyers.is_some())
    };
    DriveReport {
        elapsed: start.elapsed(),
        not_started: unstarted + dropped.load(Ordering::Relaxed),
        cancelled,
        broken: strategy_broken.into_iter().collect(),
        generator_lag,
        unstarted: (asks.iter())
            .map(|s| Unstarted {
                sku: s.sku,
                ask: s.ask,
                intended_us: s.intended.saturating_duration_since(start).as_micros() as u64,
            })
            .collect(),
        round_trips: Some(RoundTrips {
            attempts: trips.attempts.load(Ordering::Relaxed),
            round_trips: trips.round_trips.load(Ordering::Relaxed),
        }),
    }
}

/// The buyers' attempts and their round trips, added once per attempt.
#[derive(Default)]
struct Trips {
    attempts: AtomicU64,
    round_trips: AtomicU64,
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
    /// Every attempt's round trips.
    trips: Arc<Trips>,
    end: Instant,
    /// No slot is taken after this: `end`, and in the open loop its drain.
    stop: Instant,
    /// The longest an attempt may take before it is cut.
    bound: Duration,
    /// Open loop: wait for each slot's intended start.
    open: bool,
    /// The window the generator's lag is measured in.
    peak: (Instant, Instant),
    /// `[buyers]` and the seed: who retries after a timeout.
    retry: Option<(Arc<Buyers>, u64)>,
}

impl<T: From<Completion> + Send + 'static> Buyer<T> {
    /// Returns the generator's lag as this buyer saw it (µs).
    async fn run(self) -> Histogram<u64> {
        let mut lag = hist(3);
        loop {
            let now = Instant::now();
            if now >= self.stop || self.cancel.is_cancelled() {
                break;
            }
            let Some(slot) = self.schedule.next(now) else {
                break;
            };
            // Taken before its time: this buyer was idle, so any lateness is the generator's.
            let idle = self.open && now < slot.intended;
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
            if idle && (self.peak.0..self.peak.1).contains(&slot.intended) {
                let late = completion.started.saturating_duration_since(slot.intended);
                lag.saturating_record(late.as_micros() as u64);
            }
            let timed_out = matches!(
                completion.outcome,
                Outcome::Unknown(ErrorKind::Timeout) | Outcome::Failed(ErrorKind::Timeout)
            );
            if self.sink.send(completion.into()).await.is_err() {
                break; // the recorder is gone: nothing more can be recorded
            }
            if timed_out
                && let Some(retried) = self.retry_after_timeout(&slot).await
                && self.sink.send(retried.into()).await.is_err()
            {
                break;
            }
        }
        lag
    }

    /// The one retry of a purchase that timed out, if its buyer retries and the load is not
    /// over: the same Ask, at once.
    async fn retry_after_timeout(&self, slot: &Slot) -> Option<Completion> {
        let (buyers, seed) = self.retry.as_ref()?;
        let now = Instant::now();
        if slot.read
            || !buyers.retries(*seed, slot.ask.request)
            || now >= self.end
            || self.cancel.is_cancelled()
        {
            return None;
        }
        let retry = Slot {
            seq: RETRY_SEQ + slot.seq,
            intended: now,
            ..*slot
        };
        Some(self.attempt(&retry).await)
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
        let (attempt, trips) =
            counted(tokio::time::timeout(self.bound, self.strategy.attempt(&p))).await;
        let attempt =
            attempt.unwrap_or_else(|_| Attempt::from(Outcome::Unknown(ErrorKind::Timeout)));
        self.trips.attempts.fetch_add(1, Ordering::Relaxed);
        self.trips.round_trips.fetch_add(trips, Ordering::Relaxed);
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
