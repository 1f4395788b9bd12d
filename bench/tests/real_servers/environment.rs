//! A steady environment (`[environment]`) on real servers, as root: `rtt` lengthens each of
//! the four round trips of a `mysql-atomic` sale (begin, the conditional update, the order's
//! insert, commit) by about its value; `fsync` slows
//! ZooKeeper's grants (a create and a delete are synced before they are acknowledged) and
//! not those of Redis without persistence (no fsync on its path). Each run leaves no rule,
//! namespace or mount behind. Every figure is measured against a run without it, here.

use std::path::Path;

use lockbench::report::Summary;
use lockbench::run::{RunOptions, run};
use lockbench::workload::Workload;
use tokio_util::sync::CancellationToken;

use crate::common::{
    assert_networks_gone, assert_servers_gone, consensus_servers_available, require,
    servers_available,
};

/// One buyer in a closed loop on one SKU for 2 s; `touch_store = false` keeps the store's
/// commits (and their fsyncs) out of a lock's sale.
fn one_buyer(touch_store: bool) -> String {
    format!(
        r#"
seed = 5
[inventory]
skus = 1
stock = 100000
[load]
mode = "closed"
clients = 1
duration = "2s"
timeout = "3s"
[critical_section]
hold = "1ms"
touch_store = {touch_store}
[lock]
ttl = "5s"
acquire_timeout = "3s"
"#
    )
}

fn root() -> bool {
    require(
        "root (namespaces, NFQUEUE, FUSE)",
        nix::unistd::geteuid().is_root(),
    )
}

/// Runs `strategy` on `workload` with `sets`; its servers are gone, and so is every lazyfs
/// mount below its folder.
async fn run_with(
    dir: &Path,
    name: &str,
    strategy: &str,
    workload: &str,
    sets: &[&str],
) -> Summary {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let w = Workload::parse("w.toml", workload, &sets).expect("valid workload");
    let out = dir.join(name);
    let opts = RunOptions {
        server_work: false,
        ..RunOptions::new(strategy, w, None, "w.toml", out.clone())
    };
    let plan = opts.plan().unwrap_or_else(|e| panic!("{name}: {e}"));
    let s = run(&plan, &CancellationToken::new())
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_servers_gone(&s);
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let out = out.display().to_string();
    assert!(
        !mounts.lines().any(|l| l.contains(&out)),
        "{name}: a lazyfs mount left:\n{mounts}"
    );
    let done = s.attempts - s.errors - s.unknown;
    assert!(
        done >= 10,
        "{name}: only {done} attempts ended well: {:?}",
        s.outcomes
    );
    eprintln!(
        "{name}: p50 {} us over {done} attempts; environment {:?}",
        s.latency_us.p50, s.environment
    );
    s
}

/// No NFQUEUE rule of the run's network is left in the root namespace.
fn assert_no_root_rules(s: &Summary) {
    let ip = s.servers[0].addr.ip().to_string();
    let k = ip.split('.').nth(2).unwrap();
    let rules = std::process::Command::new("iptables")
        .args(["-w", "-S", "OUTPUT"])
        .output()
        .unwrap();
    let rules = String::from_utf8_lossy(&rules.stdout);
    let tag = format!("lockbench-lbk{k}");
    assert!(
        !rules.split_whitespace().any(|w| w == tag),
        "rules left:\n{rules}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_steady_rtt_lengthens_each_round_trip_of_a_sale_by_about_its_delay() {
    if !(servers_available() && root()) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let w = one_buyer(true);
    let plain = run_with(dir.path(), "plain", "mysql-atomic", &w, &[]).await;
    assert!(plain.environment.is_none(), "absent when not set");
    let sets = ["environment.rtt=20ms"];
    let slow = run_with(dir.path(), "rtt", "mysql-atomic", &w, &sets).await;
    let (base, p50) = (plain.latency_us.p50, slow.latency_us.p50);
    // Four round trips per sale (begin, update, insert, commit): each paid the delay, and not
    // much more than it (the queue's 1 ms tick, a busy machine).
    let per_round_trip = p50.saturating_sub(base) / 4;
    assert!(
        (20_000..25_000).contains(&per_round_trip),
        "p50 {p50} us with rtt 20ms, {base} us without: {per_round_trip} us per round trip"
    );
    let env = slow
        .environment
        .as_ref()
        .expect("the environment is recorded");
    assert_eq!((env.rtt_ms, env.fsync_ms), (20.0, 0.0));
    let probed = env.probe.rtt_ms.expect("the probe measured the round trip");
    assert!((20.0..35.0).contains(&probed), "probe {probed} ms");
    assert_eq!(env.probe.fsync_ms, None);
    assert_networks_gone(std::slice::from_ref(&slow));
    assert_no_root_rules(&slow);
    // Both at once: both probed, nothing left.
    let sets = ["environment.rtt=2ms", "environment.fsync=2ms"];
    let both = run_with(dir.path(), "both", "redis-setnx", &one_buyer(true), &sets).await;
    let probe = &both.environment.as_ref().expect("recorded").probe;
    assert!(probe.rtt_ms.is_some_and(|ms| ms >= 2.0), "{probe:?}");
    assert!(probe.fsync_ms.is_some_and(|ms| ms >= 2.0), "{probe:?}");
    assert_networks_gone(std::slice::from_ref(&both));
    assert_no_root_rules(&both);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_steady_slow_fsync_slows_zookeeper_grants_and_not_redis_without_persistence() {
    if !(consensus_servers_available() && root()) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let w = one_buyer(false);
    let sets = ["environment.fsync=20ms"];
    let zk = run_with(dir.path(), "zk", "zookeeper", &w, &[]).await;
    let zk_slow = run_with(dir.path(), "zk-fsync", "zookeeper", &w, &sets).await;
    let rise = zk_slow.latency_us.p50 as f64 - zk.latency_us.p50 as f64;
    assert!(rise >= 20_000.0, "zookeeper: p50 rose by {rise} us only");
    let env = zk_slow.environment.as_ref().expect("recorded");
    let probed = env.probe.fsync_ms.expect("the probe measured fdatasync");
    assert!(probed >= 20.0, "probe {probed} ms");
    let redis = run_with(dir.path(), "redis", "redis-setnx", &w, &[]).await;
    let redis_slow = run_with(dir.path(), "redis-fsync", "redis-setnx", &w, &sets).await;
    let rise = redis_slow.latency_us.p50 as f64 - redis.latency_us.p50 as f64;
    assert!(
        rise < 5_000.0,
        "redis-setnx without persistence: p50 rose by {rise} us"
    );
}
