//! The sale's rules a store enforces when the workload has `[buyers]`: one order per request id
//! (a second press or a retry is answered once), at most `buyers.limit` units per buyer per SKU,
//! and an order's units all or nothing. A refusal is an answer ([`Outcome::Refused`]), never an
//! error. The Redis Lua script (`strategy/lua/sale.lua`) applies the same checks in the same
//! order inside Redis; the sim's store applies them through [`Rules::refuse`].

use crate::record::{Outcome, Refusal};
use crate::workload::{Ask, Workload};

/// What a store checks before it takes units for an [`Ask`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    /// Units one buyer may hold of one SKU.
    pub limit: u32,
    /// `false` for the `-no-limit` controls: the holdings are never compared with the limit.
    pub check_limit: bool,
}

impl Rules {
    /// The rules of `w`'s sale; `None` without `[buyers]` (anonymous arrivals: nothing to check
    /// but the stock, as before the sale).
    pub fn of(w: &Workload) -> Option<Self> {
        w.buyers.as_ref().map(|b| Self {
            limit: b.limit,
            check_limit: true,
        })
    }

    /// The same rules with the limit left unchecked (the `-no-limit` controls).
    pub fn without_limit(self) -> Self {
        Self {
            check_limit: false,
            ..self
        }
    }

    /// The answer to `ask` when no units may be taken, checked in this order: the request id
    /// already `seen` (duplicate), the buyer's units `held` of the SKU plus the ask beyond the
    /// limit, `stock` short of the ask (sold out: all or nothing). `None`: take the units.
    pub fn refuse(&self, ask: &Ask, seen: bool, held: u64, stock: i64) -> Option<Outcome> {
        if seen {
            Some(Outcome::Refused(Refusal::Duplicate))
        } else if self.check_limit && held + u64::from(ask.qty) > u64::from(self.limit) {
            Some(Outcome::Refused(Refusal::Limit))
        } else if stock < i64::from(ask.qty) {
            Some(Outcome::SoldOut)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_then_limit_then_stock_all_or_nothing() {
        let r = Rules {
            limit: 2,
            check_limit: true,
        };
        let ask = |qty| Ask {
            buyer: 1,
            request: 9,
            qty,
        };
        let dup = Some(Outcome::Refused(Refusal::Duplicate));
        let limit = Some(Outcome::Refused(Refusal::Limit));
        assert_eq!(r.refuse(&ask(1), true, 2, 0), dup, "a duplicate first");
        assert_eq!(r.refuse(&ask(1), false, 2, 5), limit);
        assert_eq!(r.refuse(&ask(2), false, 1, 5), limit, "held 1 + 2 > 2");
        assert_eq!(r.refuse(&ask(2), false, 0, 1), Some(Outcome::SoldOut));
        assert_eq!(r.refuse(&ask(2), false, 0, 2), None);
        let control = r.without_limit();
        assert_eq!(control.refuse(&ask(3), false, 5, 3), None);
        assert_eq!(control.refuse(&ask(1), true, 0, 3), dup);
    }
}
