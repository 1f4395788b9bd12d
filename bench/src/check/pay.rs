//! Reserve, then pay: what the store's facts say about every reservation, read after the run.
//! Pure.
//!
//! The facts are rows the store writes in the transaction of each transition, append-only:
//! a `payments` row per payment that moved a reservation `reserved -> paid`, a `returns` row
//! per return that moved one `-> returned` and put its units back in stock. Every unit must
//! end paid or returned exactly once, or still be reserved:
//!
//! - **returned twice**: a reservation with two or more returns (its units went back twice);
//! - **paid and returned**: a reservation with a payment and a return (a paid unit back on sale);
//! - **the books**, per SKU: `initial = left + paid + reserved`, the returned units back in
//!   `left`. A double return or the return of a paid unit leaves `left` too high.
//!
//! Any of these makes the store CORRUPTED ([`super::Safety::with_pay`]).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::SkuAudit;

/// One reservation as the store holds it (an order of a sale with `[pay]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReservationRow {
    /// The reservation's id (the order's).
    pub id: u64,
    /// Its SKU.
    pub sku: u32,
    /// Units it took from stock.
    pub qty: u32,
}

/// Everything the store holds about reservations after the run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PayFacts {
    /// Every reservation made.
    pub reservations: Vec<ReservationRow>,
    /// The reservation of each `payments` row.
    pub payments: Vec<u64>,
    /// The reservation of each `returns` row.
    pub returns: Vec<u64>,
}

/// What the client side counted (reported beside the audit, never judged on).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PayCounts {
    /// Reservations whose buyer never paid (drawn from the seed).
    pub abandoned: u64,
    /// Payments refused because the reservation was no longer reserved (it expired).
    pub refused_payments: u64,
    /// Payments whose call failed (unknown whether applied; the store's rows tell).
    pub failed_payments: u64,
}

/// `sale.pay` in summary.json.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PayAudit {
    /// Reservations made (orders of the sale).
    pub reservations: u64,
    /// Reservations paid (with a `payments` row).
    pub paid: u64,
    /// Reservations returned to stock by a reaper after they expired.
    pub expired: u64,
    /// Reservations neither paid nor returned when the run ended.
    pub reserved: u64,
    /// Reservations with two or more returns.
    pub returned_twice: u64,
    /// Reservations both paid and returned.
    pub paid_and_returned: u64,
    /// Payments with no reservation behind them, or two payments of one reservation.
    pub stray_payments: u64,
    /// What the client side counted.
    #[serde(flatten)]
    pub counts: PayCounts,
    /// Every SKU's books.
    pub books: Vec<PayBooks>,
}

/// One SKU's books under reserve-then-pay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PayBooks {
    /// The SKU.
    pub sku: u32,
    /// Its stock at the start.
    pub initial: u64,
    /// Its stock at the end (returned units included).
    pub left: i64,
    /// Units paid.
    pub paid: u64,
    /// Units still reserved.
    pub reserved: u64,
    /// Units returned (each reservation once, however many returns it had).
    pub returned: u64,
}

impl PayBooks {
    /// `initial = left + paid + reserved`, nothing below zero.
    pub fn balances(&self) -> bool {
        self.left >= 0
            && self.left as i128 + self.paid as i128 + self.reserved as i128 == self.initial as i128
    }
}

impl PayAudit {
    /// Audits the store's `facts` against each SKU's initial stock (`initial[sku]`) and the
    /// stock left (`audits`' `final_stock`).
    pub fn of(facts: &PayFacts, counts: PayCounts, initial: &[u64], audits: &[SkuAudit]) -> Self {
        let tally = |ids: &[u64]| {
            let mut n: HashMap<u64, u64> = HashMap::new();
            for id in ids {
                *n.entry(*id).or_default() += 1;
            }
            n
        };
        let (paid, returned) = (tally(&facts.payments), tally(&facts.returns));
        let mut books: Vec<PayBooks> = audits
            .iter()
            .map(|a| PayBooks {
                sku: a.sku,
                initial: initial.get(a.sku as usize).copied().unwrap_or(0),
                left: a.final_stock,
                paid: 0,
                reserved: 0,
                returned: 0,
            })
            .collect();
        let mut a = Self {
            reservations: facts.reservations.len() as u64,
            counts,
            ..Self::default()
        };
        let known: HashMap<u64, ()> = facts.reservations.iter().map(|r| (r.id, ())).collect();
        a.stray_payments = paid
            .iter()
            .map(|(id, n)| if known.contains_key(id) { n - 1 } else { *n })
            .sum();
        for r in &facts.reservations {
            let (p, ret) = (paid.contains_key(&r.id), returned.get(&r.id).copied());
            a.returned_twice += u64::from(ret.is_some_and(|n| n > 1));
            a.paid_and_returned += u64::from(p && ret.is_some());
            let Some(b) = books.iter_mut().find(|b| b.sku == r.sku) else {
                continue;
            };
            let units = u64::from(r.qty);
            if p {
                a.paid += 1;
                b.paid += units;
            } else if ret.is_some() {
                a.expired += 1;
                b.returned += units;
            } else {
                a.reserved += 1;
                b.reserved += units;
            }
        }
        a.books = books;
        a
    }

    /// SKUs whose books do not balance.
    pub fn unbalanced(&self) -> u64 {
        self.books.iter().filter(|b| !b.balances()).count() as u64
    }

    /// Everything that breaks "every unit ends paid or returned exactly once": reservations
    /// returned twice, paid and returned, stray payments, and SKUs whose books do not balance.
    pub fn violations(&self) -> u64 {
        self.returned_twice + self.paid_and_returned + self.stray_payments + self.unbalanced()
    }

    /// Units the buyers took, whatever became of them: the paid, the reserved and the
    /// returned (what acknowledged sales are held against).
    pub fn taken_units(&self) -> u64 {
        self.books
            .iter()
            .map(|b| b.paid + b.reserved + b.returned)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(id: u64, sku: u32) -> ReservationRow {
        ReservationRow { id, sku, qty: 1 }
    }

    fn audit(facts: &PayFacts, left: &[i64]) -> PayAudit {
        let audits: Vec<SkuAudit> = (left.iter().enumerate())
            .map(|(sku, l)| SkuAudit {
                sku: sku as u32,
                final_stock: *l,
                sold: 0,
            })
            .collect();
        PayAudit::of(facts, PayCounts::default(), &[10, 10], &audits)
    }

    #[test]
    fn every_unit_once_balances() {
        // SKU 0: 1 paid, 1 returned (back in stock), 1 still reserved: 10 = 8 + 1 + 1.
        let facts = PayFacts {
            reservations: vec![res(1, 0), res(2, 0), res(3, 0)],
            payments: vec![1],
            returns: vec![2],
        };
        let a = audit(&facts, &[8, 10]);
        assert_eq!(
            (a.reservations, a.paid, a.expired, a.reserved),
            (3, 1, 1, 1)
        );
        assert_eq!(a.violations(), 0, "{a:?}");
        assert_eq!(a.taken_units(), 3);
    }

    #[test]
    fn a_double_return_and_a_returned_payment_are_caught() {
        // Reservation 2 returned twice: its unit went back twice (left one too high).
        let twice = PayFacts {
            reservations: vec![res(1, 0), res(2, 0)],
            payments: vec![1],
            returns: vec![2, 2],
        };
        let a = audit(&twice, &[10, 10]);
        assert_eq!((a.returned_twice, a.paid_and_returned), (1, 0));
        assert_eq!(a.unbalanced(), 1);
        assert!(a.violations() >= 2);
        // Reservation 1 paid, then returned: the paid unit is on sale again.
        let paid_back = PayFacts {
            reservations: vec![res(1, 1)],
            payments: vec![1],
            returns: vec![1],
        };
        let a = audit(&paid_back, &[10, 10]);
        assert_eq!((a.returned_twice, a.paid_and_returned), (0, 1));
        assert_eq!(a.unbalanced(), 1, "10 left + 1 paid on an initial 10");
        // A payment of nothing is a stray.
        let stray = PayFacts {
            payments: vec![9, 9],
            ..PayFacts::default()
        };
        assert_eq!(audit(&stray, &[10, 10]).stray_payments, 2);
    }

    #[test]
    fn books_that_lose_a_unit_do_not_balance() {
        let facts = PayFacts {
            reservations: vec![res(1, 0)],
            payments: vec![],
            returns: vec![1],
        };
        // Returned, but the stock never got it back.
        let a = audit(&facts, &[9, 10]);
        assert_eq!(
            (a.returned_twice, a.paid_and_returned, a.unbalanced()),
            (0, 0, 1)
        );
    }
}
