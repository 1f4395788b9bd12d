//! The sale's audit: what the store's orders say about a sale's rules, read after the run
//! (never from what buyers were told). Pure.
//!
//! - **limit violations**: (buyer, SKU) pairs whose orders hold more units than `buyers.limit`
//!   (and the units over it, summed);
//! - **duplicate orders**: orders beyond the first under one request id (a second press or a
//!   retry the store placed twice);
//! - **balance**: per SKU, the units its orders took plus the stock left equal its initial
//!   stock.
//!
//! Either of the first two makes the store CORRUPTED ([`super::Safety::with_sale`]).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::{OrderRow, SkuAudit};

/// What a sale's orders show.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SaleAudit {
    /// (buyer, SKU) pairs holding more units than the limit.
    pub limit_violations: u64,
    /// Units held beyond the limit, over those pairs.
    pub units_over_limit: u64,
    /// Orders beyond the first per request id.
    pub duplicate_orders: u64,
    /// Every SKU's books.
    pub balance: Vec<SkuBalance>,
}

/// One SKU's books: `sold + left = initial` when they balance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkuBalance {
    /// The SKU.
    pub sku: u32,
    /// Its stock at the start.
    pub initial: u64,
    /// Units its orders took (the sum of their `qty`).
    pub sold: u64,
    /// Its stock at the end.
    pub left: i64,
}

impl SkuBalance {
    /// Sold and left add up to the initial stock, and nothing is left below zero.
    pub fn balances(&self) -> bool {
        self.left >= 0 && self.sold as i128 + self.left as i128 == self.initial as i128
    }
}

impl SaleAudit {
    /// Audits `orders` against the per-buyer `limit`, and each SKU's books from its initial
    /// stock (`initial[sku]`) and the stock left (`audits`' `final_stock`).
    pub fn of(orders: &[OrderRow], limit: u32, initial: &[u64], audits: &[SkuAudit]) -> Self {
        let mut held: HashMap<(u64, u32), u64> = HashMap::new();
        let mut per_request: HashMap<u64, u64> = HashMap::new();
        let mut sold = vec![0u64; initial.len()];
        for o in orders {
            *held.entry((o.buyer, o.sku)).or_default() += u64::from(o.qty);
            *per_request.entry(o.request).or_default() += 1;
            if let Some(s) = sold.get_mut(o.sku as usize) {
                *s += u64::from(o.qty);
            }
        }
        let over: Vec<u64> = held
            .values()
            .filter_map(|&units| units.checked_sub(limit.into()).filter(|&n| n > 0))
            .collect();
        let balance = audits
            .iter()
            .map(|a| SkuBalance {
                sku: a.sku,
                initial: initial.get(a.sku as usize).copied().unwrap_or(0),
                sold: sold.get(a.sku as usize).copied().unwrap_or(0),
                left: a.final_stock,
            })
            .collect();
        Self {
            limit_violations: over.len() as u64,
            units_over_limit: over.iter().sum(),
            duplicate_orders: per_request.values().map(|n| n - 1).sum(),
            balance,
        }
    }

    /// SKUs whose books do not balance.
    pub fn unbalanced(&self) -> u64 {
        self.balance.iter().filter(|b| !b.balances()).count() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(sku: u32, buyer: u64, request: u64, qty: u32) -> OrderRow {
        OrderRow {
            sku,
            buyer,
            request,
            qty,
        }
    }

    fn left(stock: &[i64]) -> Vec<SkuAudit> {
        (0..stock.len())
            .map(|sku| SkuAudit {
                sku: sku as u32,
                final_stock: stock[sku],
                sold: 0,
            })
            .collect()
    }

    #[test]
    fn clean_books_show_nothing() {
        // Buyer 1 holds 2 of SKU 0 (limit 2) and 1 of SKU 1: per SKU, not over.
        let orders = [order(0, 1, 10, 2), order(1, 1, 11, 1), order(0, 2, 12, 1)];
        let a = SaleAudit::of(&orders, 2, &[5, 3], &left(&[2, 2]));
        assert_eq!((a.limit_violations, a.units_over_limit), (0, 0));
        assert_eq!(a.duplicate_orders, 0);
        assert_eq!(a.unbalanced(), 0);
        assert_eq!(a.balance[0].sold, 3);
    }

    #[test]
    fn a_buyer_over_the_limit_is_counted_once_with_the_units_over() {
        // Buyer 1: 3 units of SKU 0 in two orders (limit 1): one pair, 2 units over. Buyer 2:
        // 2 of SKU 1 in one order of 2: one pair, 1 over.
        let orders = [order(0, 1, 10, 1), order(0, 1, 11, 2), order(1, 2, 12, 2)];
        let a = SaleAudit::of(&orders, 1, &[10, 10], &left(&[7, 8]));
        assert_eq!((a.limit_violations, a.units_over_limit), (2, 3));
        assert_eq!(a.duplicate_orders, 0);
    }

    #[test]
    fn orders_beyond_the_first_of_a_request_are_duplicates() {
        // Request 10 placed three times, 11 twice, 12 once: 3 duplicates.
        let orders = [10, 10, 10, 11, 11, 12].map(|r| order(0, r, r, 1));
        let a = SaleAudit::of(&orders, 5, &[10], &left(&[4]));
        assert_eq!(a.duplicate_orders, 3);
        // Buyers 10 and 11 hold 3 and 2 units: within the limit of 5.
        assert_eq!(a.limit_violations, 0);
    }

    #[test]
    fn books_that_do_not_add_up_are_unbalanced() {
        // SKU 0: 10 at the start, orders took 4, 5 left: a unit vanished. SKU 1: oversold
        // below zero.
        let orders = [order(0, 1, 1, 4), order(1, 2, 2, 3)];
        let a = SaleAudit::of(&orders, 9, &[10, 2], &left(&[5, -1]));
        assert_eq!(a.unbalanced(), 2);
        let ok = SaleAudit::of(&orders, 9, &[10, 2], &left(&[6, -1]));
        assert!(ok.balance[0].balances() && !ok.balance[1].balances());
    }
}
