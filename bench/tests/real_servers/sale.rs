//! A sale's rules on real servers (issue 39): each buyer's limit per SKU and one order per
//! request id, enforced the way each family does, and the audit that reads them back from
//! the store. Each strategy sells asks given directly, in waves sent all at once (buyers who
//! press twice, who ask again past their limit, orders of two units), so the test does not
//! wait on the generator: the asks are the same for every strategy. The waves make each
//! refusal certain (a second press comes after the first was placed); the asks of a wave
//! race each other.

use lockbench::check::Safety;
use lockbench::cluster::Endpoints;
use lockbench::record::{Outcome, Refusal};
use lockbench::strategy::{self, Built, LeaseSlot, Purchase};
use lockbench::workload::{Ask, Workload};

use crate::common::{cluster_of, needs};

/// One SKU of 30 units: as many as the 6 buyers' asks (1 + 1 + 1 + 2 units each), so the
/// stock never runs out and every refusal is the rules'; a limit of 2.
const STOCK: u64 = 30;
const BUYERS: u64 = 6;

fn sale(limit: u32, hold_ms: u32) -> Workload {
    let text = format!(
        "[inventory]\nskus = 1\nstock = {STOCK}\n\
         [load]\nclients = 24\ntimeout = \"5s\"\n\
         [lock]\nacquire_timeout = \"5s\"\nttl = \"30s\"\n\
         [critical_section]\nhold = \"{hold_ms}ms\"\n\
         [buyers]\ncount = {BUYERS}\nlimit = {limit}\nresubmit = 0.5\n"
    );
    Workload::parse("sale.toml", &text, &[]).unwrap()
}

/// Every buyer's asks of `requests` (`(k, units)`: request `buyer * 10 + k`).
fn wave(requests: &[(u64, u32)]) -> Vec<Ask> {
    (0..BUYERS)
        .flat_map(|buyer| {
            requests.iter().map(move |&(k, qty)| Ask {
                buyer,
                request: buyer * 10 + k,
                qty,
            })
        })
        .collect()
}

/// Each buyer presses "buy" for request `A` (1 unit); then presses it again; then asks for
/// `B` (1 unit) and `C` (2 units) at once. A correct store: `A` sold, its second press a
/// duplicate, `B` sold and `C` over the limit of 2 (or `C` first and `B` over it).
fn waves() -> Vec<Vec<Ask>> {
    vec![wave(&[(1, 1)]), wave(&[(1, 1)]), wave(&[(2, 1), (3, 2)])]
}

/// What one strategy did with the asks: their outcomes and the audited store.
struct Sold {
    outcomes: Vec<Outcome>,
    safety: Safety,
    orders: usize,
}

impl Sold {
    fn count(&self, o: Outcome) -> usize {
        self.outcomes.iter().filter(|x| **x == o).count()
    }
}

/// Builds `id`, prepares its store and sends each wave's asks at once, a wave after the last
/// one ended; then the run's own audit.
async fn sell(id: &str, ep: &Endpoints, w: &Workload, waves: &[Vec<Ask>]) -> Sold {
    let built: Built = strategy::build(id, ep, w)
        .await
        .unwrap_or_else(|e| panic!("{id}: {e}"));
    built.store.prepare(&w.inventory.stocks()).await.unwrap();
    let mut outcomes = Vec::new();
    for asks in waves {
        let slots: Vec<LeaseSlot> = asks.iter().map(|_| LeaseSlot::default()).collect();
        let attempts = asks
            .iter()
            .zip(&slots)
            .enumerate()
            .map(|(i, (ask, lease))| {
                let p = Purchase {
                    seq: (outcomes.len() + i) as u64,
                    client: i as u32,
                    sku: 0,
                    read: false,
                    ask: *ask,
                    lease,
                };
                let strategy = built.strategy.clone();
                async move { strategy.attempt(&p).await.outcome }
            });
        outcomes.extend(futures::future::join_all(attempts).await);
    }
    let told = outcomes.iter().filter(|o| **o == Outcome::Sold).count() as u64;
    let audited = lockbench::run::audit(&built, w, told).await.unwrap();
    built.store.close().await;
    Sold {
        outcomes,
        safety: audited.safety,
        orders: audited.orders.map_or(0, |o| o.len()),
    }
}

/// A correct strategy: nobody over the limit, no request placed twice, no oversell, the
/// books balance, and each refusal answered as one (never an error).
fn assert_kept_the_rules(id: &str, s: &Sold) {
    let f = &s.safety;
    assert_eq!(
        (f.limit_violations, f.duplicate_orders, f.oversell),
        (0, 0, 0),
        "{id}: {f:?} {:?}",
        s.outcomes
    );
    assert!(f.is_intact(), "{id}: {f:?}");
    assert!(f.sold > 0 && f.sold <= STOCK, "{id}: {f:?}");
    let errors = s.outcomes.iter().filter(|o| o.error().is_some()).count();
    assert_eq!(errors, 0, "{id}: {:?}", s.outcomes);
    // Every second press of a placed `A` is answered as a duplicate; the last wave's
    // refusals as over the limit (an optimistic buyer may give up instead).
    let duplicates = s.count(Outcome::Refused(Refusal::Duplicate));
    let sold_a = s.outcomes[..BUYERS as usize]
        .iter()
        .filter(|o| **o == Outcome::Sold)
        .count();
    assert_eq!(duplicates, sold_a, "{id}: {:?}", s.outcomes);
    assert!(
        s.count(Outcome::Refused(Refusal::Limit)) > 0,
        "{id}: {:?}",
        s.outcomes
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn mariadb_strategies_keep_the_limit_and_the_request_id_and_the_controls_are_caught() {
    let Some((_dir, cluster)) = cluster_of(needs!(mariadb, redis)).await else {
        return;
    };
    let ep = cluster.endpoints();
    let w = sale(2, 0);
    for id in [
        "mysql-atomic",
        "mysql-for-update",
        "mysql-optimistic",
        "redis-setnx",
    ] {
        let s = sell(id, ep, &w, &waves()).await;
        assert_kept_the_rules(id, &s);
    }
    // The limit not checked: every buyer's `B` and `C` go through while stock lasts, and
    // the audit finds buyers over 2 units.
    let s = sell("mysql-atomic-no-limit", ep, &w, &waves()).await;
    let f = &s.safety;
    assert_eq!(f.limit_violations, BUYERS, "{f:?} {:?}", s.outcomes);
    assert_eq!((f.duplicate_orders, f.oversell), (0, 0), "{f:?}");
    assert!(!f.is_intact(), "over the limit is CORRUPTED: {f:?}");
    // No key on the request id (the limit, 2, still checked): a second press of `A` places a
    // second order while the buyer is under the limit.
    let s = sell("mysql-atomic-not-idempotent", ep, &w, &waves()).await;
    let f = &s.safety;
    assert!(f.duplicate_orders > 0, "{f:?} {:?}", s.outcomes);
    assert_eq!((f.limit_violations, f.oversell), (0, 0), "{f:?}");
    assert!(!f.is_intact(), "a duplicate order is CORRUPTED: {f:?}");
    assert_eq!(s.count(Outcome::Refused(Refusal::Duplicate)), 0);
    assert_eq!(
        f.duplicate_orders, BUYERS,
        "every second press placed: {f:?}"
    );
    // No lock at all, with a hold between the reads and the writes, every ask in one wave:
    // each reads the same stock and holdings, so buyers pass their limit, requests are
    // placed twice and units vanish.
    let all_at_once = [waves().concat()];
    let s = sell("none", ep, &sale(2, 300), &all_at_once).await;
    let f = &s.safety;
    assert!(
        f.limit_violations > 0 && f.duplicate_orders > 0 && f.lost_updates > 0,
        "{f:?}"
    );
    assert!(s.orders > (BUYERS * 2) as usize, "{} orders", s.orders);
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_strategies_keep_the_limit_and_the_request_id() {
    let Some((_dir, cluster)) = cluster_of(needs!(postgres)).await else {
        return;
    };
    let w = sale(2, 0);
    for id in ["pg-atomic", "pg-for-update"] {
        let s = sell(id, cluster.endpoints(), &w, &waves()).await;
        assert_kept_the_rules(id, &s);
    }
    let e = strategy::build("pg-skip-locked", cluster.endpoints(), &w).await;
    let e = e.err().expect("pg-skip-locked refuses a sale for now");
    assert!(e.to_string().contains("[buyers]"), "{e}");
}
