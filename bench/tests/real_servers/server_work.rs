//! Server work per grant (`summary.server_work`), from the servers' own counters: a notify
//! lock under contention publishes its releases and runs at least its SET and its release
//! script per grant, a poll lock without contention publishes nothing, a row lock under
//! contention makes MariaDB wait on row locks, and etcd and ZooKeeper count their requests;
//! what a sale costs in fsyncs and server CPU (`summary.cost`): none synced by a Redis without
//! persistence, a quorum's by ZooKeeper for every grant; and in round trips, counted by the
//! client wrappers: exactly what the code sends for one buyer that never waits.

use std::path::Path;

use lockbench::cluster::work::{CPU_US, FSYNCS};
use lockbench::cluster::{Needs, OwnedCluster};
use lockbench::report::Summary;
use lockbench::report::work::{ServiceWork, WorkFigures};
use tokio_util::sync::CancellationToken;

use tempfile::TempDir;

use crate::common::{cluster_of, needs, run_options};

/// One SKU, `clients` buyers in a closed loop for `secs`, waiting as `wait` says.
fn one_key(clients: u32, secs: f64, extra: &str) -> String {
    format!(
        "seed = 5\n[inventory]\nskus = 1\nstock = 1000000\n[load]\nmode = \"closed\"\n\
         clients = {clients}\nduration = \"{secs}s\"\n[critical_section]\nhold = \"5ms\"\n\
         [lock]\nttl = \"2s\"\nacquire_timeout = \"2s\"\n{extra}"
    )
}

/// Servers for `needs` (shared by a test's runs: one start instead of one per run), with
/// their endpoints file in the folder returned; `None`: not installed.
async fn servers(needs: Needs) -> Option<(TempDir, OwnedCluster)> {
    let (dir, c) = cluster_of(needs).await?;
    c.write_endpoints(&dir.path().join("endpoints.json"))
        .unwrap();
    Some((dir, c))
}

/// Runs `strategy` on `workload` on the servers of `dir`'s endpoints file, with the
/// server-work readings on; results in `dir/<name>`.
async fn run_measured(dir: &Path, name: &str, strategy: &str, workload: &str) -> Summary {
    run_in(dir, name, strategy, workload, 0).await
}

/// [`run_measured`] with the buyers in `workers` workers (tasks of this process speaking the
/// worker processes' protocol), none with 0.
async fn run_in(dir: &Path, name: &str, strategy: &str, workload: &str, workers: u32) -> Summary {
    let mut opts = run_options(strategy, workload, dir.join(name));
    opts.servers.endpoints = Some(dir.join("endpoints.json"));
    opts.server_work = true;
    if workers > 0 {
        opts.workers = workers;
        opts.worker_link = lockbench::clients::WorkerLink::InProcess;
    }
    let plan = opts.plan().unwrap_or_else(|e| panic!("{strategy}: {e}"));
    lockbench::run::run(&plan, &CancellationToken::new())
        .await
        .unwrap_or_else(|e| panic!("{strategy}: {e}"))
}

/// The lock service's work of `s` (its only one), with figures.
fn lock_work(s: &Summary) -> (&ServiceWork, &WorkFigures) {
    let w = s.server_work.as_ref().expect("server work measured");
    let lock = &w.lock[0];
    let f = lock
        .figures
        .as_ref()
        .unwrap_or_else(|| panic!("{:?}", lock.not_available));
    println!("{}: lock ({}): {}", s.strategy, lock.service, lock.line());
    (lock, f)
}

fn net(f: &WorkFigures, key: &str) -> f64 {
    f.counters.get(key).map_or(0.0, |c| c.net)
}

#[tokio::test(flavor = "multi_thread")]
async fn redis_counts_a_notify_lock_s_publishes_and_none_for_a_lone_poller() {
    let Some((dir, _servers)) = servers(needs!(mariadb, redis)).await else {
        return;
    };
    let s = run_measured(
        dir.path(),
        "notify",
        "redis-setnx",
        &one_key(6, 1.5, "wait = \"notify\""),
    )
    .await;
    let (lock, f) = lock_work(&s);
    assert_eq!(
        (lock.per.as_str(), lock.unit.as_str()),
        ("grant", "commands")
    );
    assert!(lock.samples > 20, "{} grants", lock.samples);
    // SET NX and the release script at least, for every grant.
    assert!(f.total_per.unwrap() >= 2.0, "{f:?}");
    assert!(
        net(f, "cmd.evalsha") + net(f, "cmd.eval") >= lock.samples as f64 * 0.9,
        "{f:?}"
    );
    // Every release publishes on the lock's channel; waiters subscribed to it.
    assert!(net(f, "cmd.publish") >= lock.samples as f64 * 0.9, "{f:?}");
    assert!(
        f.bytes_in_per.unwrap() > 0.0 && f.bytes_out_per.unwrap() > 0.0,
        "{f:?}"
    );
    let store = s.server_work.as_ref().unwrap().store.as_ref().unwrap();
    assert_eq!((store.per.as_str(), store.samples), ("sale", s.audit.sold));
    let sf = store.figures.as_ref().unwrap();
    assert!(
        sf.total_per.unwrap() >= 3.0,
        "read, write, insert per sale: {sf:?}"
    );

    // One buyer never meets a held lock: a poller neither publishes nor subscribes.
    let s = run_measured(
        dir.path(),
        "poll",
        "redis-setnx",
        &one_key(1, 1.0, "wait = \"poll\""),
    )
    .await;
    let (lock, f) = lock_work(&s);
    assert!(lock.samples > 5, "{} grants", lock.samples);
    for cmd in ["cmd.publish", "cmd.subscribe", "cmd.psubscribe"] {
        assert_eq!(net(f, cmd), 0.0, "{cmd}: {f:?}");
    }
    assert!(f.total_per.unwrap() >= 2.0, "{f:?}");
    // Persistence off: Redis syncs nothing, and says so (a 0, not an absent count); the
    // sale's fsyncs are the store's, which commits each to its redo log.
    assert_eq!(f.per(FSYNCS), Some(0.0), "{f:?}");
    let cost = s.cost.as_ref().expect("a sale's cost");
    assert_eq!(cost.services[0].fsyncs_per_sale, Some(0.0), "{cost:?}");
    assert!(cost.fsyncs_per_sale.unwrap() > 0.0, "{cost:?}");
    assert!(cost.cpu_ms_per_sale.is_some(), "{cost:?}");
    // Each attempt: SET NX PX (no one holds it), then the store's read, BEGIN, UPDATE, INSERT
    // and COMMIT, then the release script (loaded by the run above): 7. The first attempt's
    // two connections (Redis's and MariaDB's) sat idle through the readings' 1 s window, so
    // each is pinged first: 2 more, once.
    assert_round_trips(&s, 7, 2);
}

/// `s`'s round trips are `per_attempt` for each attempt and `once` more, all sold: so a
/// wrapper that stops counting (or a call that is added) fails.
fn assert_round_trips(s: &Summary, per_attempt: u64, once: u64) {
    let cost = s.cost.as_ref().expect("a sale's cost");
    println!("{}: cost: {}", s.strategy, cost.line());
    let t = cost.round_trips.expect("round trips counted");
    assert!(t.attempts > 5, "{t:?}");
    assert_eq!(cost.sales, t.attempts, "every attempt sold: {t:?}");
    assert_eq!(t.round_trips, t.attempts * per_attempt + once, "{t:?}");
    let per_sale = t.round_trips as f64 / cost.sales as f64;
    assert_eq!(
        cost.round_trips_per_sale,
        Some((per_sale * 1e3).round() / 1e3)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn mysql_atomic_costs_its_transaction_s_statements_in_round_trips() {
    let Some((dir, _servers)) = servers(needs!(mariadb)).await else {
        return;
    };
    let s = run_measured(dir.path(), "atomic", "mysql-atomic", &one_key(1, 1.0, "")).await;
    // Issue 43 expected one round trip per sale: the conditional UPDATE alone. The strategy
    // sends its transaction as statements: BEGIN, the UPDATE, the order's INSERT, COMMIT, each
    // awaited (strategy/sql/strategies.rs, `Atomic`): 4; and the first attempt pings its
    // connection, idle through the readings' window.
    assert_round_trips(&s, 4, 1);
    // Two buyers in two workers: their counts come back with their last message, merged.
    // No lock, so no wait: still 4 each, and each worker's connection pinged once.
    let s = run_in(
        dir.path(),
        "workers",
        "mysql-atomic",
        &one_key(2, 1.0, ""),
        2,
    )
    .await;
    assert_round_trips(&s, 4, 2);
    // The servers' work not read (as in a sweep's or contend's trial): the round trips alone.
    let mut opts = run_options(
        "mysql-atomic",
        &one_key(1, 0.5, ""),
        dir.path().join("bare"),
    );
    opts.servers.endpoints = Some(dir.path().join("endpoints.json"));
    let plan = opts.plan().unwrap();
    let s = lockbench::run::run(&plan, &CancellationToken::new())
        .await
        .unwrap();
    assert!(s.server_work.is_none());
    let cost = s.cost.as_ref().expect("the round trips alone");
    let t = cost.round_trips.unwrap();
    // Without the readings' idle window the first ping may not be needed.
    let pinged = t.round_trips - t.attempts * 4;
    assert!(pinged <= 1 && cost.fsyncs_per_sale.is_none(), "{cost:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_row_lock_under_contention_makes_mariadb_wait_on_row_locks() {
    let Some((dir, _servers)) = servers(needs!(mariadb)).await else {
        return;
    };
    let s = run_measured(dir.path(), "row", "mysql-for-update", &one_key(6, 1.5, "")).await;
    let (lock, f) = lock_work(&s);
    // The lock lives in the store: one service, per grant.
    assert_eq!(
        (lock.service.to_string().as_str(), lock.per.as_str()),
        ("mariadb", "grant")
    );
    assert!(s.server_work.as_ref().unwrap().store.is_none());
    assert!(f.counters["innodb_row_lock_waits"].raw > 0, "{f:?}");
    assert!(f.total_per.unwrap() >= 3.0, "{f:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn etcd_and_zookeeper_count_their_requests_per_grant() {
    let Some((dir, _servers)) = servers(needs!(mariadb, etcd, zookeeper)).await else {
        return;
    };
    for (strategy, unit) in [("etcd", "requests"), ("zookeeper", "packets")] {
        let s = run_measured(dir.path(), strategy, strategy, &one_key(4, 1.0, "")).await;
        let (lock, f) = lock_work(&s);
        assert_eq!(lock.unit, unit);
        // A ZooKeeper session takes a while in a debug build: a few grants may be all.
        assert!(lock.samples > 0, "{strategy}: no grant");
        // Acquire and release are a request each at least.
        assert!(f.total_per.unwrap() >= 2.0, "{strategy}: {f:?}");
        if strategy == "etcd" {
            assert!(f.counters["proposals_committed"].net > 0.0, "{f:?}");
        }
        // Both sync their logs for every write and spend CPU on every grant.
        assert!(f.per(FSYNCS).unwrap() > 0.0, "{strategy}: {f:?}");
        assert!(f.per(CPU_US).unwrap() > 0.0, "{strategy}: {f:?}");
        if strategy == "zookeeper" {
            // Four buyers on one key wait: a waiter's watch and its next listing are paid
            // round trips, on top of the 8 of a lone buyer (below).
            let cost = s.cost.as_ref().expect("a sale's cost");
            assert!(cost.round_trips_per_sale.unwrap() > 8.0, "{cost:?}");
        }
    }
    // One buyer: the `Lock` RPC, the read of the granted key, the store's five, the delete: 8;
    // once, the buyer's session (its lease grant) and the store's idle connection's ping.
    let s = run_measured(dir.path(), "etcd-lone", "etcd", &one_key(1, 1.0, "")).await;
    assert_round_trips(&s, 8, 2);
    // One buyer, so no write waits for another's sync: a grant's create and delete are each
    // synced by a quorum (2 of the 3 members) at least before they are acknowledged.
    let s = run_measured(dir.path(), "zk-lone", "zookeeper", &one_key(1, 2.0, "")).await;
    let (lock, f) = lock_work(&s);
    assert!(lock.samples > 0, "no grant");
    assert!(f.per(FSYNCS).unwrap() >= 2.0, "{f:?}");
    // Each attempt: the create, the listing that finds no one ahead, the store's five (read,
    // BEGIN, UPDATE, INSERT, COMMIT), the delete: 8; the store's idle connection is pinged
    // once (the parent node exists from the runs above).
    assert_round_trips(&s, 8, 1);
}
