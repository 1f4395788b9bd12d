//! Redis Cluster on real servers: six nodes formed into a ready cluster whose slot masters the
//! SKUs spread over, and the cluster strategies safe under contention on 16 SKUs. (Its faults
//! are in `chaos`.)

use lockbench::cluster::Service;

use crate::common::{cluster_of, measure, needs, servers_available};

/// Contention on 16 SKUs × 5 units: every SKU sells out, on all three masters.
const SIXTEEN_SKUS: &str = r#"
seed = 17
[inventory]
skus = 16
stock = 5
[load]
mode = "closed"
clients = 32
duration = "2s"
max_attempts = 20000
timeout = "2s"
[critical_section]
hold = "2ms"
[lock]
ttl = "5s"
acquire_timeout = "3s"
"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_starts_ready_and_its_skus_use_all_three_masters() {
    let Some((_dir, c)) = cluster_of(needs!(redis_cluster)).await else {
        return;
    };
    let nodes: Vec<_> = c
        .nodes()
        .iter()
        .filter(|n| n.service == Service::RedisCluster)
        .collect();
    assert_eq!(nodes.len(), 6);
    assert_eq!(c.endpoints().redis_cluster.len(), 6);
    let mut masters = std::collections::BTreeSet::new();
    for sku in 0..16 {
        let (master, replicas) = c.slot_nodes(Service::RedisCluster, sku).await.unwrap();
        assert_eq!(replicas.len(), 1, "sku {sku}: {replicas:?}");
        masters.insert(master.name.clone());
    }
    assert_eq!(masters.len(), 3, "16 SKUs on {masters:?}");
    let pids: Vec<u32> = nodes.iter().map(|n| n.server.pid()).collect();
    c.stop();
    for pid in pids {
        assert!(
            !crate::common::alive(pid),
            "node {pid} outlived the cluster"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn redis_cluster_strategies_are_safe_under_contention_on_16_skus() {
    if !servers_available() {
        return;
    }
    for id in [
        "redis-cluster-setnx",
        "redis-cluster-setnx-wait",
        "redis-cluster-lua-decr",
    ] {
        let s = measure(id, SIXTEEN_SKUS).await;
        assert_eq!(s.audit.initial_stock, 80, "{id}");
        assert!(
            s.outcomes["sold_out"] > 0,
            "{id}: demand never exceeded supply"
        );
        assert_eq!(
            (
                s.audit.oversell,
                s.audit.lost_updates,
                s.double_grants,
                s.lease_lost
            ),
            (0, 0, 0, 0),
            "{id}: (oversell, lost updates, double grants, leases lost)"
        );
        assert_eq!(
            s.audit.sold as i64 + s.audit.final_stock,
            80,
            "{id}: sold + final != initial"
        );
        assert!(s.safe, "{id}: {:?} {:?}", s.lock_verdict, s.store_verdict);
    }
}
