//! Round trips a buyer's attempt made to the servers, counted by the client wrappers (Redis's
//! `Con`, the SQL store's calls and sessions, the etcd and ZooKeeper calls) as they send.
//!
//! A tokio task-local holds the attempt's count: the driver opens it around each attempt
//! ([`counted`]) and every wrapper's [`trip`] adds one there. So only the buyer's own calls
//! count, exactly: a watchdog's renewals, a keep-alive, the pay desk, the audit and a release
//! left to the background after a cut run in other tasks (or outside any attempt) and add
//! nothing. The cost on the hot path is one thread-local access per call and one pair of
//! atomic adds per attempt, in the driver.

use std::cell::Cell;
use std::future::Future;

use serde::{Deserialize, Serialize};

tokio::task_local! {
    static TRIPS: Cell<u64>;
}

/// One request/response exchange sent by the current attempt; nothing outside an attempt.
pub fn trip() {
    let _ = TRIPS.try_with(|c| c.set(c.get() + 1));
}

/// Counts one exchange, then awaits `call` (a client call that is one round trip).
pub async fn one<F: Future>(call: F) -> F::Output {
    trip();
    call.await
}

/// Runs `attempt` with a count of its own; returns its output and the round trips it made
/// (those of an attempt cut inside `attempt` too).
pub async fn counted<F: Future>(attempt: F) -> (F::Output, u64) {
    TRIPS
        .scope(Cell::new(0), async {
            let out = attempt.await;
            (out, TRIPS.with(Cell::get))
        })
        .await
}

/// The round trips of a load's attempts (every attempt: winners, losers and their polls,
/// failures), summed in each process and across the workers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoundTrips {
    /// Attempts counted.
    pub attempts: u64,
    /// Their round trips together.
    pub round_trips: u64,
}

impl RoundTrips {
    /// Two processes' counts as one.
    pub fn merge(self, other: Self) -> Self {
        Self {
            attempts: self.attempts + other.attempts,
            round_trips: self.round_trips + other.round_trips,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_attempt_counts_its_own_calls_and_nothing_else_does() {
        trip(); // outside any attempt: not counted, and no panic
        let ((), n) = counted(async {
            trip();
            one(async {}).await;
            // Another task (a watchdog's renewal) is not the attempt's.
            tokio::spawn(async { trip() }).await.unwrap();
            let ((), inner) = counted(async { trip() }).await;
            assert_eq!(inner, 1);
        })
        .await;
        assert_eq!(n, 2);
    }

    #[tokio::test]
    async fn a_cut_attempt_keeps_what_it_sent() {
        let (cut, n) = counted(tokio::time::timeout(
            std::time::Duration::from_millis(1),
            async {
                trip();
                std::future::pending::<()>().await
            },
        ))
        .await;
        assert!(cut.is_err());
        assert_eq!(n, 1);
    }

    #[test]
    fn counts_merge_by_adding() {
        let a = RoundTrips {
            attempts: 2,
            round_trips: 5,
        };
        let b = RoundTrips {
            attempts: 1,
            round_trips: 4,
        };
        assert_eq!(
            a.merge(b),
            RoundTrips {
                attempts: 3,
                round_trips: 9
            }
        );
    }
}
