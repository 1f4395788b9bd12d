//! The result of one attempt: ok, fail (definitely did not happen), or unknown.

use serde::{Deserialize, Serialize};

/// Why an attempt failed or has an unknown outcome. Errors are data, counted by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// A network call did not answer within `load.timeout`.
    Timeout,
    /// The connection could not be made or was lost.
    Connection,
    /// The database chose this transaction as a deadlock victim (rolled back).
    Deadlock,
    /// Any other error reply from a server.
    Server,
    /// A fenced store refused the write: a newer lock holder's token had reached it.
    StaleToken,
}

impl ErrorKind {
    /// Every kind, in a stable order.
    pub const ALL: [ErrorKind; 5] = [
        Self::Timeout,
        Self::Connection,
        Self::Deadlock,
        Self::Server,
        Self::StaleToken,
    ];

    /// Stable name for tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Self::Timeout => "timeout",
            Self::Connection => "connection",
            Self::Deadlock => "deadlock",
            Self::Server => "server",
            Self::StaleToken => "stale_token",
        }
    }
}

/// Why a sale workload's store turned an order down (the stock was there).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Refusal {
    /// The buyer already holds `buyers.limit` units of the SKU, or would with this order.
    Limit,
    /// The request id already has its order (a second press, a retry after a timeout).
    Duplicate,
}

/// What one attempt to buy one unit did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Outcome {
    /// The buyer got the unit (an order was written).
    Sold,
    /// The buyer saw no stock left.
    SoldOut,
    /// The buyer could not get exclusive access in time (lock not acquired within
    /// `lock.acquire_timeout`, row-lock wait timeout, optimistic retries exhausted).
    LockTimeout,
    /// A definite failure: nothing was written.
    Failed(ErrorKind),
    /// The write may or may not have happened (timeout or lost connection after it was sent).
    /// Only the audit of the store decides.
    Unknown(ErrorKind),
    /// The lock was taken and released without touching the store
    /// (`critical_section.touch_store = false`: measuring the lock alone).
    Locked,
    /// A read (`load.read_fraction`) checked the SKU's stock and price under the read lock and
    /// saw `stock` both before and after its hold.
    Read {
        /// The stock it saw.
        stock: i64,
    },
    /// A read saw the stock change while it held the read lock: a writer changed it under the
    /// read lock, which therefore did not exclude writers (the lock is broken).
    TornRead {
        /// The stock it saw first.
        stock: i64,
        /// The stock it saw at the end of its hold.
        later: i64,
    },
    /// A sale's store refused the order by its rules (nothing was written): a definite answer,
    /// neither an error nor unknown.
    Refused(Refusal),
}

impl Outcome {
    /// Number of outcome classes (histograms are kept per class).
    pub const CLASSES: usize = 10;
    /// Class names in index order.
    pub const CLASS_NAMES: [&'static str; Self::CLASSES] = [
        "sold",
        "sold_out",
        "lock_timeout",
        "error",
        "unknown",
        "locked",
        "read",
        "torn_read",
        "over_limit",
        "duplicate",
    ];

    /// Index of this outcome's class.
    pub fn class(self) -> usize {
        match self {
            Self::Sold => 0,
            Self::SoldOut => 1,
            Self::LockTimeout => 2,
            Self::Failed(_) => 3,
            Self::Unknown(_) => 4,
            Self::Locked => 5,
            Self::Read { .. } => 6,
            Self::TornRead { .. } => 7,
            Self::Refused(Refusal::Limit) => 8,
            Self::Refused(Refusal::Duplicate) => 9,
        }
    }

    /// Class index of [`Outcome::Read`].
    pub const READ: usize = 6;
    /// Class index of [`Outcome::TornRead`].
    pub const TORN_READ: usize = 7;

    /// The stock a read saw (first, for a torn read), and the stock it saw at the end of its
    /// hold when that differed.
    pub fn stock_seen(self) -> Option<(i64, Option<i64>)> {
        match self {
            Self::Read { stock } => Some((stock, None)),
            Self::TornRead { stock, later } => Some((stock, Some(later))),
            _ => None,
        }
    }

    /// The error kind, for failed and unknown outcomes.
    pub fn error(self) -> Option<ErrorKind> {
        match self {
            Self::Failed(k) | Self::Unknown(k) => Some(k),
            _ => None,
        }
    }

    /// Stable name of the class.
    pub fn name(self) -> &'static str {
        Self::CLASS_NAMES[self.class()]
    }
}
