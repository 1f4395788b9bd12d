//! The sale's rules on Redis (issue 39): `redis-lua-decr` on one Redis and on a Redis Cluster
//! keep the limit per buyer and one order per request id under repeated buyers, double presses
//! and orders of 1 to 3 units, and the books balance; the `-no-limit` control is caught. The
//! store is driven with crafted purchases ([`lockbench::sim::crafted_asks`]), all at once.

use std::collections::HashMap;

use lockbench::check::OrderRow;
use lockbench::record::{Outcome, Refusal};
use lockbench::sim::{crafted_asks, press_all};
use lockbench::workload::Workload;

use crate::common::{cluster_of, needs};

const SALE: &str = r#"
[inventory]
skus = 2
stock = 40
[load]
clients = 8
timeout = "2s"
[buyers]
count = 20
limit = 2
quantity = "1..3"
"#;

/// What one strategy's sale left: its outcomes, (buyer–SKU pairs over the limit, orders beyond
/// the first per request), and whether every SKU balances (units sold + left = 40, none below 0).
struct Sale {
    outcomes: Vec<Outcome>,
    faults: (usize, u64),
    balanced: bool,
}

impl Sale {
    fn count(&self, o: Outcome) -> usize {
        self.outcomes.iter().filter(|&&x| x == o).count()
    }
}

/// (pairs of buyer and SKU over `limit`, orders beyond the first per request, units per SKU).
fn books(orders: &[OrderRow], limit: u32) -> (usize, u64, [u64; 2]) {
    let mut held: HashMap<(u64, u32), u64> = HashMap::new();
    let mut requests: HashMap<u64, u64> = HashMap::new();
    let mut sold = [0; 2];
    for o in orders {
        *held.entry((o.buyer, o.sku)).or_default() += u64::from(o.qty);
        *requests.entry(o.request).or_default() += 1;
        sold[o.sku as usize] += u64::from(o.qty);
    }
    let over = held.values().filter(|&&u| u > u64::from(limit)).count();
    (over, requests.values().map(|n| n - 1).sum(), sold)
}

async fn sale(id: &str, ep: &lockbench::cluster::Endpoints) -> Sale {
    let w = Workload::parse("w.toml", SALE, &[]).unwrap();
    let built = lockbench::strategy::build(id, ep, &w)
        .await
        .unwrap_or_else(|e| panic!("{id}: {e}"));
    built.strategy.prepare(2).await.unwrap();
    built.store.prepare(&w.inventory.stocks()).await.unwrap();
    let outcomes = press_all(&*built.strategy, &crafted_asks(20, 3, 2), 8).await;
    let orders = built
        .store
        .orders()
        .await
        .unwrap()
        .expect("Redis lists its orders");
    let audits = built.store.audit(2).await.unwrap();
    let (over, dups, sold) = books(&orders, 2);
    for a in &audits {
        assert_eq!(a.sold, sold[a.sku as usize], "{id}: the audit counts units");
    }
    let balanced = audits
        .iter()
        .all(|a| a.final_stock >= 0 && a.sold as i64 + a.final_stock == 40);
    built.strategy.close().await;
    built.store.close().await;
    Sale {
        outcomes,
        faults: (over, dups),
        balanced,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn redis_lua_decr_keeps_the_limit_and_request_ids_and_the_no_limit_control_is_caught() {
    let Some((_dir, c)) = cluster_of(needs!(redis, redis_cluster)).await else {
        return;
    };
    for id in ["redis-lua-decr", "redis-cluster-lua-decr"] {
        let s = sale(id, c.endpoints()).await;
        assert_eq!(s.faults, (0, 0), "{id}: {:?}", s.outcomes);
        assert!(s.balanced, "{id}");
        assert!(
            s.outcomes.iter().all(|o| o.error().is_none()),
            "{id}: {:?}",
            s.outcomes
        );
        // Every order was pressed twice: exactly one press of each sold order sold.
        let sold = s.count(Outcome::Sold);
        assert!(sold > 0, "{id}");
        assert_eq!(sold, s.count(Outcome::Refused(Refusal::Duplicate)), "{id}");
        assert!(s.count(Outcome::Refused(Refusal::Limit)) > 0, "{id}");
    }
    let control = sale("redis-lua-decr-no-limit", c.endpoints()).await;
    assert!(
        control.faults.0 > 0,
        "the control is caught: {:?}",
        control.outcomes
    );
    assert_eq!(control.faults.1, 0, "it still keeps one order per request");
    assert!(control.balanced);
    assert_eq!(control.count(Outcome::Refused(Refusal::Limit)), 0);
}
