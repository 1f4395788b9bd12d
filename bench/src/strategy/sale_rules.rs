//! How a strategy enforces a sale's rules (`[buyers]`): each buyer's limit per SKU and one order
//! per request id, the way its family does in production. Derived from the entry
//! ([`super::StrategyInfo::enforcement`]); the SQL store builds its schema and statements from it
//! and `lockbench list` prints it.

/// Where a strategy checks the limit and the request id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enforcement {
    /// The store's own guards, in the deduction's transaction: a unique key on the request id
    /// (a second order is a key violation) and a holdings row per (buyer, SKU) whose
    /// conditional update (`units + qty <= limit`) refuses a buyer over the limit. A control
    /// leaves one of them out.
    StoreKeys {
        /// The unique key on the request id is there.
        request: bool,
        /// The holdings row's conditional update is there.
        limit: bool,
    },
    /// One server-side script checks the buyer, the request and the stock and deducts (Redis
    /// Lua); a control's script leaves the limit out.
    Script {
        /// The script checks the buyer's holdings against the limit.
        limit: bool,
    },
    /// Read inside the lock (the buyer's units and the request's orders, plain reads), so a
    /// lock that breaks shows as limit violations and duplicates too.
    InsideLock,
    /// The same reads with no lock around them (the `none` controls).
    NoLock,
}

impl Enforcement {
    /// The `lockbench list` cell.
    pub fn describe(self) -> &'static str {
        match self {
            Self::StoreKeys {
                request: true,
                limit: true,
            } => "unique key (request) + holdings row",
            Self::StoreKeys { limit: false, .. } => "limit not checked (control)",
            Self::StoreKeys { request: false, .. } => "request id not keyed (control)",
            Self::Script { limit: true } => "one Lua script",
            Self::Script { limit: false } => "one Lua script, limit not checked (control)",
            Self::InsideLock => "checked inside the lock",
            Self::NoLock => "checked with no lock (control)",
        }
    }

    /// The store's guards: (unique key on the request id, holdings row), both off for a check
    /// made by reads (inside a lock or without one).
    pub fn store_keys(self) -> (bool, bool) {
        match self {
            Self::StoreKeys { request, limit } => (request, limit),
            _ => (false, false),
        }
    }
}
