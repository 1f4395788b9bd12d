//! The sold-out pre-check (`critical_section.precheck = "flag"`): the cheap check a seckill
//! service puts in front of its lock, as a process-local sold-out flag per SKU (a JVM-local map
//! in the usual design). A sold-out answer sets the SKU's flag; later buyers of that SKU in the
//! same process are answered sold out at once, without the lock or the store.
//!
//! Its cost: the flag is never cleared, so a unit that comes back after it was set (a sale lost
//! by a failover, a reservation returned) is never sold from this process: undersell. And a
//! sold-out answer to an order of several units that met fewer left sets it too (the service is
//! told "not enough stock", not how much is left), so the units left are refused to smaller
//! orders. Locks ([`super::Locked`]) and lock-free strategies call it through [`SoldOutFlags::around`].

use std::sync::atomic::{AtomicBool, Ordering};

use super::{Attempt, Purchase};
use crate::record::Outcome;
use crate::workload::Workload;

/// The sold-out flags of one process, or nothing when the workload has no pre-check.
#[derive(Debug, Default)]
pub struct SoldOutFlags {
    /// One per SKU; `None` when `critical_section.precheck` is off.
    flags: Option<Box<[AtomicBool]>>,
}

impl SoldOutFlags {
    /// The pre-check `w` asks for, over its SKUs.
    pub fn new(w: &Workload) -> Self {
        let on = !w.critical_section.precheck.is_off();
        Self {
            flags: on.then(|| {
                (0..w.inventory.skus)
                    .map(|_| AtomicBool::new(false))
                    .collect()
            }),
        }
    }

    /// Whether `p` is answered sold out by the flag, without the lock or the store. A read is
    /// never: it checks the stock under the read lock, it does not buy.
    pub fn sold_out(&self, p: &Purchase<'_>) -> bool {
        !p.read
            && self
                .flags
                .as_ref()
                .is_some_and(|f| f[p.sku as usize].load(Ordering::Relaxed))
    }

    /// Notes `outcome` of `p`: a sold-out answer sets the SKU's flag.
    pub fn saw(&self, p: &Purchase<'_>, outcome: Outcome) {
        if let (Some(f), Outcome::SoldOut) = (&self.flags, outcome) {
            f[p.sku as usize].store(true, Ordering::Relaxed);
        }
    }

    /// Runs `attempt` behind the flag: sold out at once when it is set, else the attempt,
    /// whose sold-out answer sets it.
    pub async fn around(
        &self,
        p: &Purchase<'_>,
        attempt: impl std::future::Future<Output = Attempt>,
    ) -> Attempt {
        if self.sold_out(p) {
            return Outcome::SoldOut.into();
        }
        let a = attempt.await;
        self.saw(p, a.outcome);
        a
    }
}
