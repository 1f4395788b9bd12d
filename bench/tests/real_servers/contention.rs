//! Every strategy under real contention, through the library: the no-lock control oversells,
//! the locks and atomic updates stay safe with nothing lapsed, consensus locks hand out
//! increasing fencing tokens and give up cleanly when busy, and open-loop load shows the
//! queueing that service time hides.

use std::path::Path;

use lockbench::report::Summary;

use crate::common::{
    CONTENTION, assert_nothing_lapsed, assert_safe_under_contention, consensus_servers_available,
    measure, run_options, run_strategy, servers_available,
};

#[tokio::test(flavor = "multi_thread")]
async fn none_oversells_under_contention() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = run_strategy("none", CONTENTION, dir.path()).await;
    assert!(
        s.audit.oversell > 0,
        "the no-lock control was not caught: {s:?}"
    );
    assert!(
        s.audit.lost_updates > 0,
        "blind writes must lose updates: {s:?}"
    );
    assert!(!s.safe);
    // The history has one line per attempt.
    let lines = std::fs::read_to_string(dir.path().join("none/history.jsonl"))
        .unwrap()
        .lines()
        .count();
    assert_eq!(lines as u64, s.attempts);
}

/// Safe strategies under real contention: safe, with nothing lapsed.
macro_rules! safe_under_contention {
    ($($name:ident => $id:literal),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread")]
        async fn $name() {
            if !servers_available() {
                return;
            }
            let s = measure($id, CONTENTION).await;
            assert_safe_under_contention(&s);
            assert_nothing_lapsed(&s);
        }
    )*};
}

safe_under_contention! {
    mysql_for_update_is_safe_under_contention => "mysql-for-update",
    mysql_optimistic_is_safe_under_contention => "mysql-optimistic",
    mysql_atomic_is_safe_under_contention => "mysql-atomic",
    redis_setnx_watchdog_is_safe_under_contention => "redis-setnx-watchdog",
    redis_setnx_fenced_is_safe_under_contention => "redis-setnx-fenced",
    redis_lua_decr_is_safe_under_contention => "redis-lua-decr",
    mysql_lock_table_is_safe_under_contention => "mysql-lock-table",
    mysql_lock_table_fenced_is_safe_under_contention => "mysql-lock-table-fenced",
    redis_reentrant_is_safe_under_contention => "redis-reentrant",
    redis_rwlock_is_safe_under_contention => "redis-rwlock",
    // Every attempt writes here (no `read_fraction`): the control's leak is in its read lock
    // only, so its writers must be safe; `rwlocks.rs` shows the leak.
    redis_rwlock_leaky_read_writes_are_safe_under_contention => "redis-rwlock-leaky-read",
}

#[tokio::test(flavor = "multi_thread")]
async fn redis_setnx_is_safe_under_contention_and_barges() {
    if !servers_available() {
        return;
    }
    let s = measure("redis-setnx", CONTENTION).await;
    assert_safe_under_contention(&s);
    assert_nothing_lapsed(&s);
    assert_barging(&s, false);
}

#[tokio::test(flavor = "multi_thread")]
async fn redlock_is_safe_under_contention() {
    if !servers_available() {
        return;
    }
    // 5 s to sell out, as the consensus locks get: a buyer polls every 200 ± 100 ms
    // (node-redlock's retry), and a CI run starved beside the chaos tests (real-server tests
    // 414 s against 368 s) had not sold 20 units in 1.5 s.
    // Each node call gets 500 ms rather than 50: on a starved machine a 50 ms call to a
    // node times out, the quorum fails and the attempt sells nothing, which is Redlock's cost
    // under load but not what this test asks.
    let workload = CONTENTION
        .replace("duration = \"1500ms\"", "duration = \"5s\"")
        .replace(
            "acquire_timeout = \"3s\"",
            "acquire_timeout = \"3s\"\nnode_timeout = \"500ms\"",
        );
    assert_ne!(workload, CONTENTION, "the contention workload changed");
    let s = measure("redlock", &workload).await;
    assert_safe_under_contention(&s);
    assert_nothing_lapsed(&s);
    assert_eq!(
        s.servers
            .iter()
            .filter(|n| n.name.starts_with("redis-"))
            .count(),
        5
    );
}

/// A Sentinel-watched lock under contention: safe, nothing lapsed, on a master with two
/// replicas and three sentinels.
async fn assert_sentinel_lock_safe(id: &str) -> Option<Summary> {
    use lockbench::cluster::Role;
    if !servers_available() {
        return None;
    }
    let s = measure(id, CONTENTION).await;
    assert_safe_under_contention(&s);
    assert_nothing_lapsed(&s);
    let roles: Vec<_> = s.servers.iter().map(|n| n.role).collect();
    let count = |role| roles.iter().filter(|r| **r == role).count();
    assert_eq!(
        (count(Role::Replica), count(Role::Sentinel)),
        (2, 3),
        "{id}: {roles:?}"
    );
    Some(s)
}

#[tokio::test(flavor = "multi_thread")]
async fn redis_sentinel_is_safe_under_contention() {
    assert_sentinel_lock_safe("redis-sentinel").await;
}

/// With two healthy replicas every WAIT is acknowledged (within 1 s; they ack in
/// milliseconds): no attempt fails for it, no release either.
#[tokio::test(flavor = "multi_thread")]
async fn redis_sentinel_wait_is_safe_under_contention() {
    if let Some(s) = assert_sentinel_lock_safe("redis-sentinel-wait").await {
        assert_eq!(s.errors, 0, "{:?}", s.errors_by_kind);
    }
}

/// Fencing tokens of the run's leases in the order the locks were granted, from its history.
fn fences_in_grant_order(dir: &Path, strategy: &str) -> Vec<u64> {
    let text = std::fs::read_to_string(dir.join(strategy).join("history.jsonl")).unwrap();
    let mut leases: Vec<(u64, u64)> = text
        .lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let lease = v.get("lease")?;
            let fence = lease["fence"]
                .as_u64()
                .unwrap_or_else(|| panic!("{strategy}: lease without a fence: {l}"));
            Some((lease["acquired_us"].as_u64().unwrap(), fence))
        })
        .collect();
    leases.sort();
    leases.into_iter().map(|(_, f)| f).collect()
}

/// The lock strategies backed by a consensus service: safe, nothing lapsed, and fencing
/// tokens that grow with every new holder of the (single) lock.
async fn assert_consensus_lock_safe(strategy: &str) -> Summary {
    let dir = tempfile::tempdir().unwrap();
    // 5 s instead of 1.5 s to sell the 20 units out: a JVM ensemble starved by three tests at
    // once on 2 cores did not sell out in 1.5 s (Nov 27, 2026). The attempt bound still ends
    // a fast run early.
    let workload = CONTENTION.replace("duration = \"1500ms\"", "duration = \"5s\"");
    assert_ne!(workload, CONTENTION, "the contention workload changed");
    let s = run_strategy(strategy, &workload, dir.path()).await;
    assert_safe_under_contention(&s);
    assert_nothing_lapsed(&s);
    let fences = fences_in_grant_order(dir.path(), strategy);
    assert!(
        fences.len() as u64 >= s.audit.sold,
        "{strategy}: {fences:?}"
    );
    assert!(
        fences.windows(2).all(|w| w[0] < w[1]),
        "{strategy}: fencing tokens not increasing in grant order: {fences:?}"
    );
    s
}

/// A server-side queue grants in order: a releasing holder that asks again queues behind the
/// buyers already waiting, so (almost) no handoff goes back to it. A client-side wait lets
/// whoever asks first after a release win: the releaser, which asks at once, often does.
fn assert_barging(s: &Summary, queued: bool) {
    let c = s
        .contention
        .as_ref()
        .expect("a lock run measures contention");
    println!("{}: {c:?}", s.strategy);
    assert!(c.handoffs_with_waiter >= 10, "{}: {c:?}", s.strategy);
    let share = c.barges as f64 / c.handoffs_with_waiter as f64;
    if queued {
        // Not 0: a give-up's end is stamped after its queue node is gone, so a grant in that
        // instant can read as one.
        assert!(share <= 0.05, "{}: a queue barged: {c:?}", s.strategy);
    } else {
        assert!(share >= 0.2, "{}: no barging seen: {c:?}", s.strategy);
    }
    let f = c.fairness.as_ref().expect("32 buyers competed");
    assert!(f.jain > 0.0 && f.jain <= 1.0 && f.buyers >= 2, "{f:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn zookeeper_is_safe_under_contention() {
    if !consensus_servers_available() {
        return;
    }
    let s = assert_consensus_lock_safe("zookeeper").await;
    assert_barging(&s, true);
}

#[tokio::test(flavor = "multi_thread")]
async fn etcd_is_safe_under_contention() {
    if !consensus_servers_available() {
        return;
    }
    let s = assert_consensus_lock_safe("etcd").await;
    assert_barging(&s, true);
}

#[tokio::test(flavor = "multi_thread")]
async fn fenced_consensus_locks_are_safe_under_contention() {
    if !consensus_servers_available() {
        return;
    }
    // The fenced store must accept every token of a lock that never lapses.
    for id in ["zookeeper-fenced", "etcd-fenced"] {
        let _ = assert_consensus_lock_safe(id).await;
    }
}

/// Every attempt writes (no `read_fraction`): the write lock alone, its czxid growing.
#[tokio::test(flavor = "multi_thread")]
async fn zookeeper_rwlock_is_safe_under_contention() {
    if !consensus_servers_available() {
        return;
    }
    assert_consensus_lock_safe("zookeeper-rwlock").await;
}

/// Holds longer than waiters wait: most attempts give up with `lock_timeout`. A waiter that
/// gave up must also take its queue entry (ZooKeeper node, etcd waiter key) away, or the
/// next holder would wait behind it forever and sales would stop after the first.
#[tokio::test(flavor = "multi_thread")]
async fn consensus_locks_give_up_when_busy_and_leave_the_queue() {
    if !consensus_servers_available() {
        return;
    }
    // 8 buyers queue for 8 × 200 ms; waiters give up after 500 ms. The wait leaves room for a
    // starved ensemble's round trips (with 150 ms, ZooKeeper beside two CPU hogs timed out
    // nearly every acquire and sold 4 in 5 s).
    let w = r#"
seed = 5
[inventory]
skus = 1
stock = 1000
[load]
mode = "closed"
clients = 8
duration = "6s"
timeout = "2s"
[critical_section]
hold = "200ms"
[lock]
ttl = "5s"
acquire_timeout = "500ms"
"#;
    let dir = tempfile::tempdir().unwrap();
    for strategy in ["zookeeper", "etcd"] {
        let s = run_strategy(strategy, w, dir.path()).await;
        assert!(s.safe, "{strategy}: {s:?}");
        assert!(
            s.outcomes["lock_timeout"] > 0,
            "{strategy}: {:?}",
            s.outcomes
        );
        assert_eq!(s.errors, 0, "{strategy}: {:?}", s.errors_by_kind);
        assert_eq!((s.release_failures, s.lease_lost), (0, 0), "{strategy}");
        // The queue still moves in the second half, long after the first waiters gave up: a
        // queue blocked by an abandoned entry sells nothing after its first second or so.
        let timeline =
            std::fs::read_to_string(dir.path().join(strategy).join("timeline.csv")).unwrap();
        let late: u64 = timeline
            .lines()
            .skip(1)
            .filter_map(|l| {
                let mut cols = l.split(',');
                let second: u64 = cols.next()?.parse().ok()?;
                let sold: u64 = cols.next()?.parse().ok()?;
                (second >= 3).then_some(sold)
            })
            .sum();
        assert!(
            late > 0 && s.audit.sold >= 3,
            "{strategy}: sold {} in all, {late} from second 3 on",
            s.audit.sold
        );
    }
}

/// `critical_section.touch_store = false` measures the lock alone: every attempt is a lock
/// cycle and the stock is untouched; a lock-free strategy refuses the setting.
#[tokio::test(flavor = "multi_thread")]
async fn lock_only_runs_measure_lock_cycles_and_leave_the_stock() {
    if !servers_available() {
        return;
    }
    let w = CONTENTION.replace(
        "[critical_section]",
        "[critical_section]\ntouch_store = false",
    );
    for id in ["redis-setnx", "mysql-for-update"] {
        let s = measure(id, &w).await;
        // More lock cycles than units in stock: selling out did not end them. (Not a count
        // tied to speed: a busy CI machine runs far fewer cycles.)
        assert!(s.attempts > 20, "{id}: {s:?}");
        // Every attempt took the lock or timed out waiting for it (a busy machine times a few
        // out: 4 of 3,205 in CI on Nov 25, 2026); none sold, failed or ended unknown.
        let o = &s.outcomes;
        assert_eq!(o["locked"] + o["lock_timeout"], s.attempts, "{id}: {o:?}");
        assert!(o["locked"] > 20, "{id}: {o:?}");
        assert_eq!((s.audit.sold, s.audit.final_stock), (0, 20), "{id}");
        assert_eq!(s.double_grants, 0, "{id}");
    }
    let dir = tempfile::tempdir().unwrap();
    let opts = run_options("mysql-atomic", &w, dir.path().join("atomic"));
    let err = opts.plan().unwrap_err().to_string();
    assert!(err.contains("touch_store"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn open_loop_measures_from_the_intended_start() {
    if !servers_available() {
        return;
    }
    // 400 attempts/s on one hot SKU with a 20 ms hold: the row lock serialises buyers at under
    // 50/s, so arrivals queue. Latency from the intended start must show the queueing that
    // service time hides, and the unserved demand must be reported.
    let w = r#"
[inventory]
skus = 1
stock = 100000
[load]
mode = "open"
arrival = "constant"
rate = 400
clients = 8
duration = "1s"
[critical_section]
hold = "20ms"
"#;
    let dir = tempfile::tempdir().unwrap();
    let s = run_strategy("mysql-for-update", w, dir.path()).await;
    // The row lock is recorded as a lease, so its double-grant count of 0 is a measurement.
    let history =
        std::fs::read_to_string(dir.path().join("mysql-for-update/history.jsonl")).unwrap();
    assert!(history.lines().filter(|l| l.contains("\"lease\"")).count() > 10);
    assert_eq!(s.double_grants, 0);
    // Started attempts: latency from the intended start adds each attempt's wait for a free
    // buyer to its service time (measured from the actual start the two would be equal). The
    // mean wait is the difference of the means: hundreds of ms here (8 buyers serialised on one
    // row), 0 if the start were taken for the intended one. (A p99 ratio was not robust: service
    // time includes the row-lock wait, which grows with the machine's load: 1026 ms against
    // 2 x 539 ms beside two CPU hogs.)
    let waited_ms = (s.latency_us_started.mean - s.service_time_us.mean) / 1000.0;
    assert!(
        waited_ms > 10.0,
        "queueing hidden: mean wait {waited_ms:.1} ms: {:?} vs {:?}",
        s.latency_us_started,
        s.service_time_us
    );
    assert!(s.not_started > 0, "saturation not reported: {s:?}");
    // Every arrival: the unstarted ones rank above every started one.
    assert!(s.started_fraction < 0.99, "{s:?}");
    assert!(
        s.latency_us.p99 >= s.latency_us_started.max,
        "an unstarted arrival counted below a served one: {:?} vs {:?}",
        s.latency_us,
        s.latency_us_started
    );
    // The arrivals follow the schedule, not the servers: 400 in 1 s.
    assert!(
        s.attempts + s.not_started >= 390,
        "{} + {}",
        s.attempts,
        s.not_started
    );
}
