//! Check: was the run safe? Judged from the audited store, never from client-side counters.
//!
//! - **sold** = order rows written; **oversell** = units sold beyond a SKU's initial stock,
//!   summed over SKUs (one SKU's oversell is not cancelled by another's leftovers);
//! - **lost updates** = `sold − (initial − final)` per SKU when positive: two buyers sold the
//!   same unit and one decrement vanished;
//! - the store is **consistent** when every SKU has `sold + final = initial` and `final ≥ 0`;
//! - a **double grant** is two leases of one lock key overlapping in time ([`DoubleGrantChecker`]):
//!   the direct measure of lost mutual exclusion, of which oversell is the consequence.

mod double_grant;
pub mod gate;

use serde::{Deserialize, Serialize};

pub use double_grant::{DoubleGrantChecker, DoubleGrants, Overlap};

/// What the audit found for one SKU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SkuAudit {
    /// SKU number.
    pub sku: u32,
    /// Stock left in the store.
    pub final_stock: i64,
    /// Orders recorded for it.
    pub sold: u64,
}

/// The safety verdict of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Safety {
    /// Units on sale at the start, over all SKUs.
    pub initial_stock: u64,
    /// Units left, over all SKUs.
    pub final_stock: i64,
    /// Orders written.
    pub sold: u64,
    /// Units sold beyond the stock.
    pub oversell: u64,
    /// Sales whose decrement vanished.
    pub lost_updates: u64,
    /// SKUs whose `sold + final != initial` or whose final stock is negative.
    pub inconsistent_skus: u64,
}

impl Safety {
    /// Judges per-SKU audits against the initial stock of each SKU.
    pub fn judge(initial_per_sku: u64, audits: &[SkuAudit]) -> Self {
        let initial = initial_per_sku as i128;
        let mut s = Safety {
            initial_stock: initial_per_sku * audits.len() as u64,
            final_stock: 0,
            sold: 0,
            oversell: 0,
            lost_updates: 0,
            inconsistent_skus: 0,
        };
        for a in audits {
            let sold = a.sold as i128;
            let decremented = initial - a.final_stock as i128;
            s.final_stock += a.final_stock;
            s.sold += a.sold;
            s.oversell += (sold - initial).max(0) as u64;
            s.lost_updates += (sold - decremented).max(0) as u64;
            if sold != decremented || a.final_stock < 0 {
                s.inconsistent_skus += 1;
            }
        }
        s
    }

    /// No oversell, no lost update, every SKU consistent.
    pub fn is_safe(&self) -> bool {
        self.oversell == 0 && self.lost_updates == 0 && self.inconsistent_skus == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn audit(sku: u32, final_stock: i64, sold: u64) -> SkuAudit {
        SkuAudit {
            sku,
            final_stock,
            sold,
        }
    }

    #[test]
    fn exact_sale_is_safe() {
        let s = Safety::judge(20, &[audit(0, 0, 20), audit(1, 5, 15)]);
        assert_eq!((s.initial_stock, s.final_stock, s.sold), (40, 5, 35));
        assert!(s.is_safe(), "{s:?}");
    }

    #[test]
    fn blind_writes_show_as_oversell_and_lost_updates() {
        // 32 buyers read 20, each wrote 19: 32 orders for one decrement; later sold out at 0.
        let s = Safety::judge(20, &[audit(0, 0, 52)]);
        assert_eq!(s.oversell, 32);
        assert_eq!(s.lost_updates, 32);
        assert!(!s.is_safe());
    }

    #[test]
    fn lost_updates_without_oversell_when_stock_remains() {
        let s = Safety::judge(100, &[audit(0, 95, 10)]);
        assert_eq!((s.oversell, s.lost_updates, s.inconsistent_skus), (0, 5, 1));
        assert!(!s.is_safe());
    }

    #[test]
    fn oversell_is_per_sku_not_netted_across_skus() {
        let s = Safety::judge(10, &[audit(0, -2, 12), audit(1, 10, 0)]);
        assert_eq!(s.oversell, 2);
        assert_eq!(s.lost_updates, 0);
        assert_eq!(s.inconsistent_skus, 1, "negative stock is inconsistent");
    }

    #[test]
    fn missing_orders_are_inconsistent_but_not_oversell() {
        // Stock decremented but the order row is missing (e.g. a non-atomic write).
        let s = Safety::judge(10, &[audit(0, 5, 3)]);
        assert_eq!((s.oversell, s.lost_updates, s.inconsistent_skus), (0, 0, 1));
        assert!(!s.is_safe());
    }
}
