//! Durability per server: `[servers] redis_appendfsync` starts Redis with an append-only file
//! that a killed and restarted node reloads (its locks with it), and every summary says what
//! each server does with a write before acknowledging it.

use std::net::SocketAddr;

use lockbench::cluster::durability::{Acked, Source};
use lockbench::cluster::redis::Appendfsync;
use lockbench::cluster::{ClusterOptions, Needs, OwnedCluster, Service};
use lockbench::run::RunError;

use crate::common::*;

async fn con(addr: SocketAddr) -> redis::aio::MultiplexedConnection {
    lockbench::cluster::redis::client(addr, None)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// A lock key set with `aof`, then the node SIGKILLed and restarted: the key and its TTL after
/// the restart (`None`: gone).
async fn lock_after_restart(aof: Appendfsync) -> (Option<String>, i64) {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = ClusterOptions::new(dir.path());
    opts.redis_appendfsync = aof;
    let needs = Needs {
        redis: true,
        ..Needs::NONE
    };
    let mut c = OwnedCluster::start(needs, &opts)
        .await
        .unwrap_or_else(|e| panic!("{aof}: {e}"));
    let info = c.info();
    let d = info[0].durability.as_ref().expect("a Redis node says");
    let expected = match aof {
        Appendfsync::Off => Acked::Memory,
        Appendfsync::Always => Acked::Disk,
        Appendfsync::No | Appendfsync::Everysec => Acked::Os,
    };
    assert_eq!((d.acked, d.source), (expected, Source::Queried), "{d:?}");
    let addr = c.endpoints().redis[0];
    let name = info[0].name.clone();
    // The lock as redis-setnx takes it; the reply comes back once it is in the file.
    let set: Option<String> = redis::cmd("SET")
        .arg("lock:1")
        .arg("token-1")
        .arg("NX")
        .arg("PX")
        .arg(60_000)
        .query_async(&mut con(addr).await)
        .await
        .unwrap();
    assert_eq!(set.as_deref(), Some("OK"));
    c.kill(&name).await.unwrap();
    c.restart(&name).await.unwrap();
    // Ready is a TCP connect; the file may still be loading (LOADING errors): retry, bounded.
    let mut last = String::new();
    for _ in 0..200 {
        let mut k = con(addr).await;
        let got: redis::RedisResult<(Option<String>, i64)> = redis::pipe()
            .cmd("GET")
            .arg("lock:1")
            .cmd("PTTL")
            .arg("lock:1")
            .query_async(&mut k)
            .await;
        match got {
            Ok(v) => return v,
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("{aof}: the restarted node never answered: {last}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_appendfsync_always_a_lock_survives_a_kill_and_restart_of_redis() {
    if !require("redis-server installed", which("redis-server")) {
        return;
    }
    let (value, ttl) = lock_after_restart(Appendfsync::Always).await;
    assert_eq!(value.as_deref(), Some("token-1"));
    // Still expiring, at its absolute deadline (60 s after the SET, some seconds ago).
    assert!(ttl > 0 && ttl <= 60_000, "PTTL {ttl}");
    // Today's default: the restarted node is empty, the lock is gone.
    let (value, _) = lock_after_restart(Appendfsync::Off).await;
    assert_eq!(value, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_summary_says_what_every_server_does_with_a_write() {
    if !servers_available() {
        return;
    }
    let workload = format!("{CONTENTION}\n[servers]\nredis_appendfsync = \"always\"\n");
    let s = measure("redis-setnx", &workload).await;
    assert_safe_under_contention(&s);
    let by = |svc: Service| {
        let n = s.servers.iter().find(|n| n.service == svc).unwrap();
        n.durability
            .clone()
            .unwrap_or_else(|| panic!("{}: none", n.name))
    };
    let redis = by(Service::Redis);
    assert_eq!(redis.acked, Acked::Disk, "{redis:?}");
    assert_eq!(redis.settings["appendonly"], "yes");
    assert_eq!(redis.settings["appendfsync"], "always");
    assert_eq!(redis.settings["save"], "");
    let mariadb = by(Service::Mariadb);
    assert_eq!(mariadb.source, Source::Queried, "{mariadb:?}");
    assert!(
        mariadb
            .settings
            .contains_key("innodb_flush_log_at_trx_commit"),
        "{mariadb:?}"
    );
    // The report shows it too.
    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(
        json["servers"][0]["durability"]["source"], "queried",
        "{json}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_and_zookeeper_durability_comes_from_their_flags() {
    let Some((_dir, c)) = cluster_of(needs!(zookeeper, etcd)).await else {
        return;
    };
    for n in c.info() {
        let d = n.durability.unwrap_or_else(|| panic!("{}: none", n.name));
        assert_eq!(
            (d.acked, d.source),
            (Acked::Disk, Source::StartedWith),
            "{d:?}"
        );
    }
}

#[test]
fn servers_this_run_does_not_start_keep_their_persistence() {
    let mut opts = run_options(
        "redis-setnx",
        "[servers]\nredis_appendfsync = \"always\"\n",
        "/nonexistent".into(),
    );
    opts.servers.endpoints = Some("/nonexistent/endpoints.json".into());
    let Err(RunError::Options(e)) = opts.plan() else {
        panic!("--endpoints with redis_appendfsync must be rejected");
    };
    assert!(
        e.contains("servers.redis_appendfsync = \"always\" with --endpoints")
            && e.contains("servers[].durability"),
        "{e}"
    );
    // "off" is today's servers, and a strategy without Redis does not care.
    opts.workload = lockbench::workload::Workload::parse("w.toml", "", &[]).unwrap();
    assert!(opts.plan().is_ok());
    let mut etcd = run_options(
        "etcd",
        "[servers]\nredis_appendfsync = \"always\"\n",
        "/nonexistent".into(),
    );
    etcd.servers.endpoints = Some("/nonexistent/endpoints.json".into());
    assert!(etcd.plan().is_ok());
}

fn which(bin: &str) -> bool {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .any(|d| d.join(bin).is_file())
}
