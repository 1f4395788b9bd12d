//! One database connection per buyer, for any sqlx driver: the MariaDB store's, the PostgreSQL
//! store's and the advisory lock's sessions. Like each mysqlslap client thread, a buyer keeps
//! its connection: no pool checkout and return around every attempt.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::record::trips::one;
use crate::record::{ErrorKind, Outcome};
use crate::strategy::within;

/// A connection idle longer than this is pinged before use, and reopened if the ping fails:
/// HikariCP's rule (`HikariPool.getConnection`: `aliveBypassWindowMs`, 500 ms by default); sqlx's
/// pool pings at every checkout (`test_before_acquire`). A connection broken while the server
/// was down then fails the ping, not the buyer's first statement after the server is back.
pub const IDLE_CHECK: Duration = Duration::from_millis(500);

/// A buyer's connection slot, and when the connection was last handed back.
struct Slot<C> {
    con: Option<C>,
    returned: Instant,
}

/// The buyers' connection slots.
pub struct Buyers<C> {
    slots: Vec<tokio::sync::Mutex<Slot<C>>>,
    /// Per slot: replace the connection before its next use (set where the connection itself
    /// is still borrowed and cannot be discarded on the spot).
    stale: Vec<AtomicBool>,
}

/// A buyer's own connection, held for one call sequence.
pub struct BuyerConn<'a, C> {
    guard: tokio::sync::MutexGuard<'a, Slot<C>>,
    /// In a transaction that has not ended: dropped now (the attempt cut mid-transaction), the
    /// connection is closed, so the server rolls back and frees the transaction's locks at
    /// once instead of at the buyer's next call.
    unsettled: bool,
}

impl<C> BuyerConn<'_, C> {
    /// Closes the connection instead of keeping it: after a timeout or an error
    /// mid-transaction its state is unknown. The buyer reconnects on its next call.
    pub fn discard(mut self) {
        self.guard.con.take();
    }

    /// Closes the connection after an error that may have broken it (a lost connection or a
    /// timeout), as HikariCP evicts a connection whose statement failed with a connection error.
    pub fn discard_if_broken(&mut self, kind: ErrorKind) {
        if matches!(kind, ErrorKind::Connection | ErrorKind::Timeout) {
            self.guard.con.take();
        }
    }

    /// A transaction starts: until [`Self::settled`], dropping this closes the connection.
    pub fn unsettled(&mut self) {
        self.unsettled = true;
    }

    /// The transaction ended (committed, rolled back, or its rollback queued on the
    /// connection by sqlx's `Transaction` drop): the connection may be kept.
    pub fn settled(&mut self) {
        self.unsettled = false;
    }
}

impl<C> Drop for BuyerConn<'_, C> {
    fn drop(&mut self) {
        if self.unsettled {
            self.guard.con.take();
        }
        self.guard.returned = Instant::now();
    }
}

impl<C> std::ops::Deref for BuyerConn<'_, C> {
    type Target = C;
    fn deref(&self) -> &C {
        (self.guard.con.as_ref()).expect("a BuyerConn always holds a connection")
    }
}

impl<C> std::ops::DerefMut for BuyerConn<'_, C> {
    fn deref_mut(&mut self) -> &mut C {
        (self.guard.con.as_mut()).expect("a BuyerConn always holds a connection")
    }
}

impl<C: sqlx::Connection> Buyers<C> {
    /// `n` empty slots.
    pub fn new(n: usize) -> Self {
        Self {
            slots: (0..n.max(1))
                .map(|_| {
                    tokio::sync::Mutex::new(Slot {
                        con: None,
                        returned: Instant::now(),
                    })
                })
                .collect(),
            stale: (0..n.max(1)).map(|_| AtomicBool::new(false)).collect(),
        }
    }

    /// Opens every slot's connection now, so the first attempts do not pay for it; bounded.
    pub async fn connect_all<F, Fut>(&self, open: F, bound: Duration) -> Result<(), sqlx::Error>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<C, sqlx::Error>>,
    {
        let all = futures::future::join_all(self.slots.iter().map(|slot| async {
            let con = open().await?;
            slot.lock().await.con = Some(con);
            Ok::<_, sqlx::Error>(())
        }));
        let results = tokio::time::timeout(bound, all)
            .await
            .map_err(|_| sqlx::Error::PoolTimedOut)?;
        results.into_iter().collect()
    }

    /// Buyer `client`'s connection: reopened if an earlier failure discarded it or, idle
    /// longer than [`IDLE_CHECK`], it fails a ping. Nothing of the buyer's is sent before it is
    /// ready, and the whole check is bounded by `timeout`.
    pub async fn conn<F, Fut>(
        &self,
        client: u32,
        timeout: Duration,
        open: F,
        classify: fn(&sqlx::Error) -> ErrorKind,
    ) -> Result<BuyerConn<'_, C>, ErrorKind>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<C, sqlx::Error>>,
    {
        let slot = client as usize % self.slots.len();
        let mut guard = self.slots[slot].lock().await;
        if self.stale[slot].swap(false, Ordering::Relaxed) {
            guard.con.take();
        }
        let ready = within(timeout, ready(&mut guard, open), classify).await;
        if ready.is_err() {
            // A ping or handshake cut short leaves the connection in an unknown state.
            guard.con.take();
        }
        ready?;
        Ok(BuyerConn {
            guard,
            unsettled: false,
        })
    }

    /// Replaces buyer `client`'s connection before its next use.
    pub fn discard_later(&self, client: u32) {
        self.stale[client as usize % self.stale.len()].store(true, Ordering::Relaxed);
    }

    /// Closes every connection cleanly (each bounded by `bound`).
    pub async fn close(&self, bound: Duration) {
        let all = self.slots.iter().map(|slot| async move {
            if let Some(con) = slot.lock().await.con.take() {
                let _ = tokio::time::timeout(bound, con.close()).await;
            }
        });
        futures::future::join_all(all).await;
    }
}

/// Pings the slot's connection if it sat idle, and opens one if there is none (left).
async fn ready<C, F, Fut>(slot: &mut Slot<C>, open: F) -> Result<(), sqlx::Error>
where
    C: sqlx::Connection,
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<C, sqlx::Error>>,
{
    if let Some(con) = slot.con.as_mut()
        && slot.returned.elapsed() > IDLE_CHECK
        && let Err(e) = one(con.ping()).await
    {
        tracing::debug!("an idle buyer connection failed its ping; reopening: {e}");
        slot.con = None;
    }
    if slot.con.is_none() {
        // A (re)connect counts as one, though its handshake and session setup take several.
        slot.con = Some(one(open()).await?);
    }
    Ok(())
}

/// Returns `outcome`, discarding the connection: after a timeout or error mid-transaction its
/// state is unknown.
pub fn fail_and_drop<C>(con: BuyerConn<'_, C>, outcome: Outcome) -> Outcome {
    con.discard();
    outcome
}
