//! Check: was the run safe? Judged from the audited store, never from client-side counters.
//!
//! - **sold** = order rows written; **oversell** = units sold beyond a SKU's initial stock,
//!   summed over SKUs (one SKU's oversell is not cancelled by another's leftovers);
//! - **lost updates** = `sold − (initial − final)` per SKU when positive: two buyers sold the
//!   same unit and one decrement vanished;
//! - the store is **consistent** when every SKU has `sold + final = initial` and `final ≥ 0`;
//! - a **double grant** is two leases of one lock key overlapping in time ([`DoubleGrantChecker`]):
//!   the direct measure of lost mutual exclusion, of which oversell is the consequence;
//! - the [`Verdict`] has two parts that are never merged into a kinder one: the *lock* (did it
//!   ever grant a key to two holders, or lose a lease while its holder worked?) and the
//!   *store* (is the audited stock intact?). A lock that broke while the store survived by luck
//!   is still broken: the next run may not be lucky.
//! - a **torn read** is a read that saw the stock change while it held the read lock: a writer
//!   changed it under the lock, so the lock did not exclude writers. It breaks the lock half
//!   (the audit of the writes is unchanged: reads write nothing).
//! - a sale's **limit violations** and **duplicate orders** ([`SaleAudit`], from the store's
//!   orders) corrupt the store half too: the store broke the sale's rules.
//! - reserve-then-pay's **returned twice**, **paid and returned** and unbalanced books
//!   ([`PayAudit`], from the store's payments and returns) corrupt the store half too.
//! - leases timed on different hosts' clocks overlap as a double grant only beyond the clocks'
//!   uncertainty ([`ClockTable`]); shorter overlaps are counted apart, never dropped.

mod clock;
mod double_grant;
mod pay;
mod sale;

use serde::{Deserialize, Serialize};

pub use clock::{COORDINATOR, ClockTable, WorkerClock};
pub use double_grant::{DoubleGrantChecker, DoubleGrants, Mode, Overlap, SeenLease};
pub use pay::{PayAudit, PayBooks, PayCounts, PayFacts, ReservationRow};
pub use sale::{SaleAudit, SkuBalance};

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

/// One order as the store holds it, for the sale's audit (limit, duplicates, first come first
/// served): read from the store after the run, never from what buyers were told.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderRow {
    /// SKU sold.
    pub sku: u32,
    /// The buyer the order was placed for.
    pub buyer: u64,
    /// The request id it was placed under.
    pub request: u64,
    /// Units it took.
    pub qty: u32,
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
    /// Sales a buyer was told succeeded (outcome `sold`) beyond the orders the store holds:
    /// acknowledged writes the store lost with their decrement, which leaves every SKU
    /// consistent (a failover to a replica that lacked them, a restart). A lower bound: an
    /// attempt of unknown outcome whose order landed hides one.
    #[serde(default)]
    pub lost_sales: u64,
    /// A sale's (buyer, SKU) pairs holding more units than the limit ([`SaleAudit`]; 0
    /// without a sale).
    #[serde(default)]
    pub limit_violations: u64,
    /// A sale's orders beyond the first per request id.
    #[serde(default)]
    pub duplicate_orders: u64,
    /// Reserve-then-pay: units returned twice, paid and returned, stray payments and SKUs
    /// whose books do not balance ([`PayAudit::violations`]; absent without `[pay]`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pay_violations: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Safety {
    /// Judges per-SKU audits against each SKU's initial stock (`initial[sku]`).
    pub fn judge(initial: &[u64], audits: &[SkuAudit]) -> Self {
        let mut s = Safety {
            initial_stock: audits.iter().map(|a| initial[a.sku as usize]).sum(),
            final_stock: 0,
            sold: 0,
            oversell: 0,
            lost_updates: 0,
            inconsistent_skus: 0,
            lost_sales: 0,
            limit_violations: 0,
            duplicate_orders: 0,
            pay_violations: 0,
        };
        for a in audits {
            let initial = initial[a.sku as usize] as i128;
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

    /// Counts the sales buyers were told of (`sold` outcomes, from the recorder) that the store
    /// does not hold ([`Self::lost_sales`]).
    pub fn with_acknowledged(mut self, acknowledged_sales: u64) -> Self {
        self.lost_sales = acknowledged_sales.saturating_sub(self.sold);
        self
    }

    /// Folds a sale's audit in: its limit violations and duplicate orders.
    pub fn with_sale(mut self, sale: &SaleAudit) -> Self {
        self.limit_violations = sale.limit_violations;
        self.duplicate_orders = sale.duplicate_orders;
        self
    }

    /// Folds reserve-then-pay's audit in: its violations, and the sales buyers were told of
    /// held against every unit taken (the store's `sold` counts only the units still out of
    /// stock, and a returned reservation was a sale its buyer was told of).
    pub fn with_pay(mut self, pay: &PayAudit, acknowledged_sales: u64) -> Self {
        self.pay_violations = pay.violations();
        self.lost_sales = acknowledged_sales.saturating_sub(pay.taken_units());
        self
    }

    /// No oversell, no lost update, every SKU consistent, no acknowledged sale lost, and in a
    /// sale no buyer over the limit and no request placed twice.
    pub fn is_intact(&self) -> bool {
        self.oversell == 0
            && self.lost_updates == 0
            && self.inconsistent_skus == 0
            && self.lost_sales == 0
            && self.limit_violations == 0
            && self.duplicate_orders == 0
            && self.pay_violations == 0
    }
}

/// The lock half of the verdict, for strategies that take a lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LockVerdict {
    /// No key was granted to two holders at once and no lease was lost while its holder worked.
    Held,
    /// Mutual exclusion failed (a double grant, a lease lost while held, a torn read) and
    /// nothing refused the stale holder: an unfenced lock, a fenced one whose store was
    /// corrupted anyway, or any lock under which a read saw a writer's change.
    Broken,
    /// Mutual exclusion failed, but the lock is fenced and the store stayed intact: every stale
    /// write was refused.
    BrokenFenced,
}

/// The store half of the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StoreVerdict {
    /// No oversell, no lost update, every SKU consistent.
    Intact,
    /// Oversell, lost updates, an inconsistent SKU, or a sale's limit violations or duplicate
    /// orders.
    Corrupted,
}

/// What the checker concluded about mutual exclusion, for [`Verdict::judge`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Exclusion {
    /// Leases that a later grant of the same key overlapped.
    pub double_grant_incidents: u64,
    /// Leases that ended before their holder released them.
    pub lease_lost: u64,
    /// Reads that saw the stock change under their read lock.
    pub torn_reads: u64,
}

/// The two-part verdict of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// `None` for strategies without a lock (lock-free deductions, the `none` control).
    pub lock: Option<LockVerdict>,
    /// The audited store.
    pub store: StoreVerdict,
}

impl Verdict {
    /// Judges a run: `locks` whether the strategy takes a lock at all, `fenced` whether its
    /// store refuses stale tokens.
    pub fn judge(locks: bool, fenced: bool, ex: Exclusion, audit: &Safety) -> Self {
        let store = if audit.is_intact() {
            StoreVerdict::Intact
        } else {
            StoreVerdict::Corrupted
        };
        let lock = locks.then(|| {
            if ex.double_grant_incidents == 0 && ex.lease_lost == 0 && ex.torn_reads == 0 {
                LockVerdict::Held
            } else if fenced && store == StoreVerdict::Intact && ex.torn_reads == 0 {
                // A fence refuses stale writes; a torn read was already served to its reader.
                LockVerdict::BrokenFenced
            } else {
                LockVerdict::Broken
            }
        });
        Self { lock, store }
    }

    /// Exactly "the lock held (or there is none) and the store is intact".
    pub fn safe(&self) -> bool {
        matches!(self.lock, None | Some(LockVerdict::Held)) && self.store == StoreVerdict::Intact
    }

    /// The lock cell of a table: `held`, `BROKEN`, `broken, fenced`, or `-` without a lock.
    pub fn lock_text(lock: Option<LockVerdict>) -> &'static str {
        match lock {
            None => "-",
            Some(LockVerdict::Held) => "held",
            Some(LockVerdict::Broken) => "BROKEN",
            Some(LockVerdict::BrokenFenced) => "broken, fenced",
        }
    }

    /// The store cell of a table: `intact` or `CORRUPTED`.
    pub fn store_text(store: StoreVerdict) -> &'static str {
        match store {
            StoreVerdict::Intact => "intact",
            StoreVerdict::Corrupted => "CORRUPTED",
        }
    }

    /// One word for the row: `safe` (lock held, store intact), `fenced` (the lock broke and
    /// fencing kept the store intact), `UNSAFE`; a control reads `caught (control)` or, when
    /// the checker saw nothing wrong, `not caught (control)` — never `safe`.
    pub fn headline(&self, control: bool) -> &'static str {
        match (control, self.safe(), self.lock) {
            (true, true, _) => "not caught (control)",
            (true, false, _) => "caught (control)",
            (false, true, _) => "safe",
            (false, false, Some(LockVerdict::BrokenFenced)) => "fenced",
            (false, false, _) => "UNSAFE",
        }
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
    fn each_sku_is_judged_against_its_own_stock() {
        // A hot SKU of 1,000 sold out exactly; a cold one of 100 oversold by 1 — not hidden by
        // the hot one's larger stock.
        let s = Safety::judge(&[1000, 100], &[audit(0, 0, 1000), audit(1, -1, 101)]);
        assert_eq!((s.initial_stock, s.sold, s.oversell), (1100, 1101, 1));
        assert!(!s.is_intact());
        let ok = Safety::judge(&[1000, 100], &[audit(0, 0, 1000), audit(1, 0, 100)]);
        assert!(ok.is_intact(), "{ok:?}");
    }

    #[test]
    fn exact_sale_is_safe() {
        let s = Safety::judge(&[20; 2], &[audit(0, 0, 20), audit(1, 5, 15)]);
        assert_eq!((s.initial_stock, s.final_stock, s.sold), (40, 5, 35));
        assert!(s.is_intact(), "{s:?}");
    }

    #[test]
    fn blind_writes_show_as_oversell_and_lost_updates() {
        // 32 buyers read 20, each wrote 19: 32 orders for one decrement; later sold out at 0.
        let s = Safety::judge(&[20; 1], &[audit(0, 0, 52)]);
        assert_eq!(s.oversell, 32);
        assert_eq!(s.lost_updates, 32);
        assert!(!s.is_intact());
    }

    #[test]
    fn lost_updates_without_oversell_when_stock_remains() {
        let s = Safety::judge(&[100; 1], &[audit(0, 95, 10)]);
        assert_eq!((s.oversell, s.lost_updates, s.inconsistent_skus), (0, 5, 1));
        assert!(!s.is_intact());
    }

    #[test]
    fn oversell_is_per_sku_not_netted_across_skus() {
        let s = Safety::judge(&[10; 2], &[audit(0, -2, 12), audit(1, 10, 0)]);
        assert_eq!(s.oversell, 2);
        assert_eq!(s.lost_updates, 0);
        assert_eq!(s.inconsistent_skus, 1, "negative stock is inconsistent");
    }

    fn ex(incidents: u64, lost: u64) -> Exclusion {
        Exclusion {
            double_grant_incidents: incidents,
            lease_lost: lost,
            torn_reads: 0,
        }
    }

    #[test]
    fn a_torn_read_breaks_the_lock_and_fencing_does_not_excuse_it() {
        let intact = Safety::judge(&[10; 1], &[audit(0, 5, 5)]);
        let torn = Exclusion {
            torn_reads: 1,
            ..Exclusion::default()
        };
        for fenced in [false, true] {
            let v = Verdict::judge(true, fenced, torn, &intact);
            assert_eq!(v.lock, Some(LockVerdict::Broken), "fenced: {fenced}");
            assert_eq!(v.store, StoreVerdict::Intact, "reads write nothing");
            assert_eq!(v.headline(false), "UNSAFE");
            assert_eq!(v.headline(true), "caught (control)");
        }
        let v = Verdict::judge(true, false, Exclusion::default(), &intact);
        assert_eq!(v.lock, Some(LockVerdict::Held));
    }

    #[test]
    fn a_lock_that_broke_is_broken_even_when_the_store_was_lucky() {
        let intact = Safety::judge(&[10; 1], &[audit(0, 5, 5)]);
        let v = Verdict::judge(true, false, ex(3, 0), &intact);
        assert_eq!(v.lock, Some(LockVerdict::Broken));
        assert_eq!(v.store, StoreVerdict::Intact);
        assert!(!v.safe());
        assert_eq!(v.headline(false), "UNSAFE");
        // A lease lost while held breaks the lock too, without any overlap seen.
        let v = Verdict::judge(true, false, ex(0, 1), &intact);
        assert_eq!((v.lock, v.safe()), (Some(LockVerdict::Broken), false));
    }

    #[test]
    fn fencing_is_credited_only_when_the_store_stayed_intact() {
        let intact = Safety::judge(&[10; 1], &[audit(0, 5, 5)]);
        let corrupted = Safety::judge(&[10; 1], &[audit(0, 5, 7)]);
        let v = Verdict::judge(true, true, ex(2, 2), &intact);
        assert_eq!(v.lock, Some(LockVerdict::BrokenFenced));
        assert!(!v.safe(), "safe means exactly held and intact");
        assert_eq!(v.headline(false), "fenced");
        let v = Verdict::judge(true, true, ex(2, 2), &corrupted);
        assert_eq!(
            v.lock,
            Some(LockVerdict::Broken),
            "a stale write got through"
        );
        assert_eq!(v.headline(false), "UNSAFE");
    }

    #[test]
    fn safe_means_held_and_intact_and_controls_are_never_safe() {
        let intact = Safety::judge(&[10; 1], &[audit(0, 5, 5)]);
        let corrupted = Safety::judge(&[10; 1], &[audit(0, 0, 12)]);
        let held = Verdict::judge(true, false, ex(0, 0), &intact);
        assert!(held.safe());
        assert_eq!(held.headline(false), "safe");
        assert_eq!(held.headline(true), "not caught (control)");
        let lock_free = Verdict::judge(false, false, ex(0, 0), &intact);
        assert_eq!((lock_free.lock, lock_free.safe()), (None, true));
        let none = Verdict::judge(false, false, ex(0, 0), &corrupted);
        assert_eq!(none.headline(true), "caught (control)");
        assert_eq!(Verdict::lock_text(None), "-");
        assert_eq!(
            Verdict::lock_text(Some(LockVerdict::BrokenFenced)),
            "broken, fenced"
        );
    }

    #[test]
    fn missing_orders_are_inconsistent_but_not_oversell() {
        // Stock decremented but the order row is missing (e.g. a non-atomic write).
        let s = Safety::judge(&[10; 1], &[audit(0, 5, 3)]);
        assert_eq!((s.oversell, s.lost_updates, s.inconsistent_skus), (0, 0, 1));
        assert!(!s.is_intact());
    }

    #[test]
    fn acknowledged_sales_lost_with_their_decrement_corrupt_a_consistent_store() {
        // A failover lost the last 3 sales whole (decrement and order): every SKU adds up.
        let s = Safety::judge(&[10; 1], &[audit(0, 5, 5)]);
        assert!(s.is_intact());
        let told_8 = s.with_acknowledged(8);
        assert_eq!((told_8.inconsistent_skus, told_8.lost_sales), (0, 3));
        assert!(!told_8.is_intact());
        let v = Verdict::judge(false, false, ex(0, 0), &told_8);
        assert_eq!(v.store, StoreVerdict::Corrupted);
        // More orders than acknowledgements is not a loss: unknown outcomes that landed.
        assert!(s.with_acknowledged(4).is_intact());
    }
}
