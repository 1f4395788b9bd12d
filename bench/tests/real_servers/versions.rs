//! Server builds besides Debian bookworm's (`[servers] redis`, `etcd`, `zookeeper`;
//! scripts/servers.lock):
//! a run on each starts that build, summary.json records the build its servers report, and
//! the locks hold on it as on bookworm's. A build that cannot run where it was asked for is
//! refused before anything starts.

use lockbench::cluster::Service;

use crate::common::{
    CONTENTION, assert_safe_under_contention, consensus_servers_available, measure, require,
    run_options, servers_available,
};

/// The builds of scripts/servers.lock are installed (`install-deps.sh --servers all`).
pub(crate) fn builds_installed() -> bool {
    let p = lockbench::cluster::installed::prefix();
    require(
        "the server builds of scripts/servers.lock (bash scripts/install-deps.sh --servers all)",
        [
            "redis-valkey-8.0/bin/valkey-server",
            "redis-valkey-9.1/bin/valkey-server",
            "etcd-3.5/bin/etcd",
            "zookeeper-3.9/lib/zookeeper.jar",
            "curator-5.7/lib/curator-recipes.jar",
        ]
        .iter()
        .all(|b| p.join(b).exists()),
    )
}

/// `CONTENTION` on the server build `key = build`.
fn on(key: &str, build: &str) -> String {
    format!("{CONTENTION}[servers]\n{key} = \"{build}\"\n")
}

/// Every node of `service` in `s` reported a build starting with `reported` and naming
/// `allocator`; the effective workload names the build asked for.
fn assert_build(
    s: &lockbench::report::Summary,
    service: Service,
    key: &str,
    build: &str,
    reported: &str,
) {
    let nodes: Vec<_> = s.servers.iter().filter(|n| n.service == service).collect();
    assert!(!nodes.is_empty(), "{}: {:?}", s.strategy, s.servers);
    for n in nodes {
        assert!(n.version.starts_with(reported), "{}: {n:?}", s.strategy);
    }
    assert_eq!(s.workload["servers"][key], build, "{}", s.strategy);
}

#[tokio::test(flavor = "multi_thread")]
async fn redis_strategies_hold_on_each_valkey_build_and_say_which_ran() {
    if !servers_available() || !builds_installed() {
        return;
    }
    let builds = [
        ("7.0", "7.0.", "jemalloc"),
        ("valkey-8.0", "valkey 8.0.1", "jemalloc"),
        // The wheel's build: libc malloc, not Debian's jemalloc, and the summary says so.
        ("valkey-9.1", "valkey 9.1.2", "(libc)"),
    ];
    for (build, reported, allocator) in builds {
        for strategy in ["redis-setnx", "redis-lua-decr"] {
            let s = measure(strategy, &on("redis", build)).await;
            assert_safe_under_contention(&s);
            assert_build(&s, Service::Redis, "redis", build, reported);
            assert!(
                s.servers.iter().any(|n| n.version.contains(allocator)),
                "{strategy} on {build}: {:?}",
                s.servers
            );
        }
    }
    // A Sentinel of a Valkey build is the same binary under the Sentinel's name.
    let s = measure("redis-sentinel", &on("redis", "valkey-9.1")).await;
    assert_safe_under_contention(&s);
    assert_build(&s, Service::Sentinel, "redis", "valkey-9.1", "valkey 9.1.2");
}

#[tokio::test(flavor = "multi_thread")]
async fn etcd_holds_on_3_5_and_says_which_ran() {
    if !consensus_servers_available() || !builds_installed() {
        return;
    }
    // 5 s to sell out, as for every consensus lock beside other tests (contention.rs).
    let w = on("etcd", "3.5").replace("duration = \"1500ms\"", "duration = \"5s\"");
    let s = measure("etcd", &w).await;
    assert_safe_under_contention(&s);
    assert_build(&s, Service::Etcd, "etcd", "3.5", "3.5.16");
    let s = measure("etcd", CONTENTION).await;
    assert_build(&s, Service::Etcd, "etcd", "3.4", "3.4.");
}

#[tokio::test(flavor = "multi_thread")]
async fn zookeeper_holds_on_3_9_and_says_which_ran() {
    if !consensus_servers_available() || !builds_installed() {
        return;
    }
    let w = on("zookeeper", "3.9").replace("duration = \"1500ms\"", "duration = \"5s\"");
    for strategy in ["zookeeper", "zookeeper-fenced"] {
        let s = measure(strategy, &w).await;
        assert_safe_under_contention(&s);
        assert_build(&s, Service::Zookeeper, "zookeeper", "3.9", "3.9.3");
    }
}

/// The container images and the servers of a target are bookworm's: another build there is
/// refused when the plan is made, naming the way out; a strategy that does not use the service
/// is not bothered by its key.
#[test]
fn a_build_where_it_cannot_run_is_refused_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = run_options(
        "redis-setnx",
        &on("redis", "valkey-8.0"),
        dir.path().join("o"),
    );
    opts.servers.provision = lockbench::cluster::Provisioner::Containers;
    let e = opts.plan().unwrap_err().to_string();
    assert!(
        e.contains("servers.redis = \"valkey-8.0\"") && e.contains("--provision local"),
        "{e}"
    );
    let mut opts = run_options(
        "mysql-atomic",
        &on("redis", "valkey-8.0"),
        dir.path().join("o"),
    );
    opts.servers.provision = lockbench::cluster::Provisioner::Containers;
    assert!(opts.plan().is_ok());
    assert!(!dir.path().join("o").exists(), "nothing ran");
}
