//! Lock mechanics on real servers: leaders named by the servers themselves, an attempt cut
//! mid-section, fencing a read-modify-write in both orders, reentrant locks, and two client
//! and server failures driven through `lockbench serve` (a client dying between SETNX and
//! EXPIRE, a Redlock node frozen).

use std::time::{Duration, Instant};

use lockbench::cluster::{Role, Service};
use lockbench::strategy::sql::mysql::MysqlStore;
use lockbench::strategy::{LeaseSlot, Purchase};
use lockbench::workload::Workload;
use nix::sys::signal::Signal;

use crate::common::{
    Serve, alive, assert_all_gone, cluster, cluster_of, consensus_servers_available, needs,
    run_json, servers_available, signal, start_run, summaries, workload_file,
};

#[tokio::test(flavor = "multi_thread")]
async fn leader_names_one_node_of_each_consensus_service() {
    let Some((_dir, cluster)) = cluster_of(needs!(zookeeper, etcd)).await else {
        return;
    };
    let pids: Vec<(u32, String)> = cluster
        .info()
        .into_iter()
        .map(|n| (n.pid, n.name))
        .collect();
    assert_eq!(pids.len(), 6, "{pids:?}");
    assert_eq!(cluster.endpoints().zookeeper.len(), 3);
    assert_eq!(cluster.endpoints().etcd.len(), 3);
    for service in [Service::Zookeeper, Service::Etcd] {
        let leader = cluster
            .leader(service)
            .await
            .unwrap_or_else(|e| panic!("{service:?}: {e}"))
            .unwrap_or_else(|| panic!("{service:?}: no leader after start"));
        assert_eq!(leader.service, service);
        assert_eq!(leader.role, Role::Member);
        // The answer is the servers' view, not a guess: asked again, they name the same node.
        let again = cluster.leader(service).await.unwrap().unwrap();
        assert_eq!(leader.name, again.name, "{service:?}");
        assert!(alive(leader.server.pid()), "{service:?}");
    }
    // A service the cluster does not run has no leader to name.
    assert!(cluster.leader(Service::Redis).await.is_err());
    drop(cluster);
    assert_all_gone(&pids);
}

/// An attempt cut mid-section (as the driver cuts one at its bound) still leaves its lease to
/// be recorded, and its guard frees the lock: the next buyer of the SKU gets it well before
/// the lease (30 s) would have let it go — for Redis, an etcd lease with its keep-alive, and
/// a ZooKeeper node on a live session alike.
#[tokio::test(flavor = "multi_thread")]
async fn a_cut_attempt_records_its_lease_and_frees_its_lock() {
    use lockbench::record::Outcome;
    use lockbench::strategy;
    if !consensus_servers_available() {
        return;
    }
    let w = Workload::parse(
        "cut.toml",
        "[inventory]\nskus = 1\nstock = 10\n[load]\nclients = 2\n\
         [critical_section]\nhold = \"1500ms\"\n[lock]\nttl = \"30s\"\nacquire_timeout = \"1s\"",
        &[],
    )
    .unwrap();
    for id in ["redis-setnx", "etcd", "zookeeper"] {
        let dir = tempfile::tempdir().unwrap();
        let cluster = cluster(strategy::find(id).unwrap().needs, dir.path()).await;
        let built = strategy::build(id, cluster.endpoints(), &w).await.unwrap();
        built.store.prepare(&[10]).await.unwrap();
        built.strategy.prepare(1).await.unwrap();
        let buyer = |seq: u64, lease| Purchase {
            ask: lockbench::workload::Ask::anonymous(seq),
            seq,
            client: seq as u32,
            sku: 0,
            read: false,
            lease,
        };
        let slot = LeaseSlot::default();
        let p = buyer(1, &slot);
        let started = Instant::now();
        let cut =
            tokio::time::timeout(Duration::from_millis(700), built.strategy.attempt(&p)).await;
        assert!(
            cut.is_err(),
            "{id}: the attempt should still be in its 1.5 s hold"
        );
        let lease = slot
            .take()
            .unwrap_or_else(|| panic!("{id}: the cut attempt's lease is lost"));
        let held = lease.released - lease.acquired;
        // Cut at 700 ms (later on a busy machine), short of the 1.5 s hold's end.
        assert!(
            lease.acquired >= started
                && held > Duration::ZERO
                && held < Duration::from_millis(1400),
            "{id}: the lease runs from acquire to the cut: {held:?}"
        );
        assert!(!lease.lost, "{id}");
        // The next buyer of the SKU: the guard released the lock in the background (10 s
        // is a third of the lease, which a lock left behind would last).
        let slot2 = LeaseSlot::default();
        let next = buyer(2, &slot2);
        let waited = Instant::now();
        let second = tokio::time::timeout(Duration::from_secs(10), built.strategy.attempt(&next))
            .await
            .unwrap_or_else(|_| panic!("{id}: the cut attempt's lock was not freed"));
        assert_eq!(
            second.outcome,
            Outcome::Sold,
            "{id}: the cut attempt's lock was not freed ({:?} after the cut)",
            waited.elapsed()
        );
        assert!(slot2.take().is_some(), "{id}");
        built.store.close().await;
        drop(built);
        drop(cluster);
    }
}

/// Fencing a read-modify-write: the old holder (token 33) must be refused whether its write
/// arrives after the new holder's (34) write or before it — the fence is raised on the read.
#[tokio::test(flavor = "multi_thread")]
async fn fenced_store_refuses_the_older_token_in_both_orders() {
    use lockbench::strategy::Store;
    use lockbench::strategy::sql::{Guard, Written};
    let Some((_dir, cluster)) = cluster_of(needs!(mariadb)).await else {
        return;
    };
    let w = Workload::parse("t.toml", "", &[]).unwrap();
    let store = MysqlStore::connect(
        cluster.endpoints().mysql.as_ref().unwrap(),
        &cluster.endpoints().prefix,
        &w,
    )
    .await
    .unwrap();
    let lease = LeaseSlot::default();
    let p = Purchase {
        ask: lockbench::workload::Ask::anonymous(1),
        seq: 1,
        client: 0,
        sku: 0,
        read: false,
        lease: &lease,
    };
    for new_writes_first in [true, false] {
        store.prepare(&[10]).await.unwrap();
        let (mut a, mut b) = (store.conn(0).await.unwrap(), store.conn(1).await.unwrap());
        store.raise_fence(&mut a, 0, 33).await.unwrap();
        let (qty_a, _) = store.read(&mut a, 0, false).await.unwrap();
        store.raise_fence(&mut b, 0, 34).await.unwrap();
        let (qty_b, _) = store.read(&mut b, 0, false).await.unwrap();
        assert_eq!((qty_a, qty_b), (10, 10));
        let write = async |con, token| {
            let written = store.write_tx(con, &p, 9, Guard::Fence(token), "t").await;
            written.unwrap() == Written::Applied
        };
        let (old, new) = if new_writes_first {
            let new = write(&mut b, 34).await;
            (write(&mut a, 33).await, new)
        } else {
            let old = write(&mut a, 33).await;
            (old, write(&mut b, 34).await)
        };
        assert!(
            !old,
            "token 33 accepted after 34 read (new writes first: {new_writes_first})"
        );
        assert!(
            new,
            "token 34 refused (new writes first: {new_writes_first})"
        );
        let audit = store.audit(1).await.unwrap();
        assert_eq!((audit[0].final_stock, audit[0].sold), (9, 1));
    }
    // A later holder that reads after the earlier one wrote is not refused: fencing orders
    // holders, it does not forbid progress.
    store.prepare(&[10]).await.unwrap();
    let mut c = store.conn(0).await.unwrap();
    for token in [40, 41] {
        store.raise_fence(&mut c, 0, token).await.unwrap();
        let (qty, _) = store.read(&mut c, 0, false).await.unwrap();
        let written = store.write_tx(&mut c, &p, qty - 1, Guard::Fence(token), "t");
        assert_eq!(written.await.unwrap(), Written::Applied);
    }
    drop(c);
    store.close().await;
    cluster.stop();
}

/// Both reentrant locks: the owner re-enters, others wait until the last level is released.
#[tokio::test(flavor = "multi_thread")]
async fn reentrant_locks_count_levels_and_exclude_others() {
    use lockbench::strategy::redis::reentrant::{Entered, Reentrant, Released};
    use lockbench::strategy::sql::mysql_lock_table::LockTable;
    use lockbench::strategy::{Lock, Store};
    use lockbench::strategy::{Setup, find};
    let Some((_dir, cluster)) = cluster_of(needs!(mariadb, redis)).await else {
        return;
    };
    let w = Workload::parse("t.toml", "", &[]).unwrap();
    let ep = cluster.endpoints();
    let key = "lockbench:lock:0";

    let setup = Setup {
        info: find("redis-reentrant").unwrap(),
        ep,
        w: &w,
    };
    let redis = Reentrant::connect(setup).await.unwrap();
    assert_eq!(redis.try_enter(0, key, "x").await, Ok(Entered::Count(1)));
    assert_eq!(
        redis.try_enter(1, key, "x").await,
        Ok(Entered::Count(2)),
        "the owner re-enters"
    );
    let busy = redis.try_enter(2, key, "y").await;
    assert!(
        matches!(busy, Ok(Entered::Busy(Some(left))) if left <= w.lock.ttl),
        "another owner must wait, at most the lease's remaining time: {busy:?}"
    );
    assert_eq!(redis.leave(0, key, "y").await, Ok(Released::NotOwner));
    assert_eq!(redis.leave(0, key, "x").await, Ok(Released::StillHeld));
    assert!(
        matches!(redis.try_enter(2, key, "y").await, Ok(Entered::Busy(_))),
        "one level is still held"
    );
    assert_eq!(redis.leave(0, key, "x").await, Ok(Released::Free));
    assert_eq!(redis.try_enter(2, key, "y").await, Ok(Entered::Count(1)));

    let store = std::sync::Arc::new(
        MysqlStore::connect(ep.mysql.as_ref().unwrap(), &ep.prefix, &w)
            .await
            .unwrap(),
    );
    let waiter = Setup {
        info: find("mysql-lock-table").unwrap(),
        ..setup
    }
    .waiter()
    .unwrap();
    let table = LockTable::new(store.clone(), &w, waiter, false);
    table.prepare(1).await.unwrap();
    assert_eq!(table.try_take(0, key, "x").await, Ok(true));
    assert_eq!(
        table.try_take(0, key, "x").await,
        Ok(true),
        "the owner re-enters"
    );
    assert_eq!(table.count(key, "x").await, Ok(2));
    assert_eq!(
        table.try_take(0, key, "y").await,
        Ok(false),
        "another owner must wait"
    );
    assert_eq!(
        table.leave(0, key, "y").await,
        Ok(false),
        "only the owner releases"
    );
    assert_eq!(table.leave(0, key, "x").await, Ok(true));
    assert_eq!(
        table.try_take(0, key, "y").await,
        Ok(false),
        "one level is still held"
    );
    assert_eq!(table.leave(0, key, "x").await, Ok(true));
    assert_eq!(table.try_take(0, key, "y").await, Ok(true));
    store.close().await;
    cluster.stop();
}

/// The SETNX-then-EXPIRE pitfall, triggered for real: the client process dies (failpoint
/// `crash`, an abort) between the two commands. The lock has no expiry, so every later buyer
/// of the SKU stalls — reported as `stuck_locks`. The atomic `SET NX PX` lock, killed right
/// after acquiring, only blocks buyers until its ttl runs out.
#[test]
fn a_client_dying_between_setnx_and_expire_leaves_a_lock_that_never_expires() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let serve = Serve::start(dir, "redis-setnx");
    let w = workload_file(
        dir,
        "[inventory]\nstock = 50\n[load]\nmode = \"closed\"\nclients = 4\nduration = \"1500ms\"\n\
         [critical_section]\nhold = \"1ms\"\n[lock]\nttl = \"500ms\"\nacquire_timeout = \"300ms\"\n",
    );
    // A run that must crash at `failpoint`: its stderr.
    let crash = |strategy: &str, failpoint: &str, out: &str| {
        let crashed = serve
            .run(strategy, &w, &dir.join(out))
            .env("LOCKBENCH_FAILPOINTS", failpoint)
            .output()
            .unwrap();
        assert!(
            !crashed.status.success(),
            "the failpoint did not crash the client"
        );
        String::from_utf8_lossy(&crashed.stderr).into_owned()
    };

    let err = crash(
        "redis-setnx-expire",
        "lock.between-setnx-and-expire=crash",
        "crash-1",
    );
    assert!(
        err.contains("failpoint lock.between-setnx-and-expire"),
        "{err}"
    );
    let stalled = run_json(&mut serve.run("redis-setnx-expire", &w, &dir.join("after-crash-1")));
    assert_eq!(stalled.audit.sold, 0, "{stalled:?}");
    assert_eq!(
        stalled.outcomes["lock_timeout"], stalled.attempts,
        "{stalled:?}"
    );
    assert_eq!(stalled.stuck_locks, 1, "{stalled:?}");

    // Free the stuck key by hand (the only way out), then kill a SET NX PX holder instead.
    let file = serve.file();
    let redis_addr = file["endpoints"]["redis"][0].as_str().unwrap().to_string();
    let mut con = redis::Client::open(format!("redis://{redis_addr}/"))
        .unwrap()
        .get_connection()
        .unwrap();
    let _: i64 = redis::cmd("DEL")
        .arg("lockbench:lock:0")
        .query(&mut con)
        .unwrap();
    crash("redis-setnx", "lock.after-acquire=crash", "crash-2");
    let recovered = run_json(&mut serve.run("redis-setnx", &w, &dir.join("after-crash-2")));
    assert!(
        recovered.audit.sold > 0,
        "the lease never expired: {recovered:?}"
    );
    assert_eq!(recovered.stuck_locks, 0);

    serve.stop();
}

/// One of five Redlock nodes frozen (SIGSTOP): the majority still grants the lock, and since
/// every call to a node is bounded by `lock.node_timeout` and the answer returns at a majority,
/// attempts do not slow down by a timeout.
#[test]
fn redlock_stays_available_and_fast_with_one_node_paused() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let serve = Serve::start(dir, "redlock");
    // Eight buyers on eight SKUs: little contention, so service time is the lock's own cost.
    let w = workload_file(
        dir,
        "[inventory]\nskus = 8\nstock = 100000\n[load]\nmode = \"closed\"\nclients = 8\n\
         duration = \"3s\"\n[critical_section]\nhold = \"1ms\"\n[lock]\nnode_timeout = \"100ms\"\n",
    );
    let healthy = run_json(&mut serve.run("redlock", &w, &dir.join("healthy")));
    let pid = serve.pid("redis-3");
    // Freeze the node once the load has started (every connection to it is made by then),
    // and well before its third second.
    let out = dir.join("one-paused");
    let run = start_run(&mut serve.run("redlock", &w, &out), &out);
    std::thread::sleep(Duration::from_millis(500));
    signal(pid, Signal::SIGSTOP);
    let finished = run.wait_with_output();
    signal(pid, Signal::SIGCONT);
    let degraded = summaries(&finished.unwrap(), "one node paused").remove(0);
    serve.stop();

    // The third second of the run is entirely with the node frozen.
    let timeline = std::fs::read_to_string(out.join("timeline.csv")).unwrap();
    let header: Vec<&str> = timeline.lines().next().unwrap().split(',').collect();
    let cols: Vec<&str> = timeline
        .lines()
        .nth(3)
        .expect("a third second")
        .split(',')
        .collect();
    let col = |name: &str| -> u64 {
        cols[header.iter().position(|h| *h == name).unwrap()]
            .parse()
            .unwrap()
    };
    let (sold, p50_us) = (col("sold"), col("p50_us"));
    // Healthy, a busy debug build sells hundreds a second; a stopped majority sells none.
    assert!(sold >= 10, "the majority stopped granting: {timeline}");
    // Waiting for the frozen node on each acquire would add its 100 ms timeout to every
    // attempt; 60 ms leaves room for a busy machine's noise.
    assert!(
        p50_us < healthy.service_time_us.p50 + 60_000,
        "healthy p50 {} us, with a node frozen {p50_us} us:\n{timeline}",
        healthy.service_time_us.p50
    );
    assert!(degraded.safe, "{degraded:?}");
    assert_eq!(degraded.outcomes["lock_timeout"], 0, "{degraded:?}");
}

/// One command to the Redis (or sentinel) at `addr`, within 5 s.
async fn redis_query<T: redis::FromRedisValue>(
    addr: std::net::SocketAddr,
    cmd: &redis::Cmd,
) -> redis::RedisResult<T> {
    let client = redis::Client::open(format!("redis://{addr}/"))?;
    let call = async {
        let mut con = client.get_multiplexed_async_connection().await?;
        cmd.query_async(&mut con).await
    };
    tokio::time::timeout(Duration::from_secs(5), call)
        .await
        .unwrap_or_else(|_| panic!("{addr}: no answer in 5 s"))
}

/// A `+switch-master` moves redis-sentinel-wait to the new master before any call of its
/// fails: after `SENTINEL FAILOVER` (the old master stays up and is demoted), its first attempt
/// sells. redis-sentinel, which learns of a failover only from errors, fails its first attempt
/// on the demoted master, then finds the new one and sells.
#[tokio::test(flavor = "multi_thread")]
async fn switch_master_moves_sentinel_wait_before_any_call_fails() {
    use lockbench::record::Outcome;
    use lockbench::strategy::{self, Built};
    if !servers_available() {
        return;
    }
    let w = Workload::parse(
        "switch.toml",
        "[inventory]\nskus = 1\nstock = 10\n[load]\nclients = 2\ntimeout = \"2s\"\n\
         [critical_section]\nhold = \"1ms\"\n[lock]\nttl = \"10s\"\nacquire_timeout = \"1s\"",
        &[],
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let needs = strategy::find("redis-sentinel-wait").unwrap().needs;
    let cluster = cluster(needs, dir.path()).await;
    let ep = cluster.endpoints();
    let wait = strategy::build("redis-sentinel-wait", ep, &w)
        .await
        .unwrap();
    let plain = strategy::build("redis-sentinel", ep, &w).await.unwrap();
    wait.store.prepare(&[10]).await.unwrap();
    async fn sell(b: &Built, seq: u64) -> Outcome {
        let slot = LeaseSlot::default();
        let p = Purchase {
            ask: lockbench::workload::Ask::anonymous(seq),
            seq,
            client: 0,
            sku: 0,
            read: false,
            lease: &slot,
        };
        b.strategy.attempt(&p).await.outcome
    }
    assert_eq!(sell(&wait, 1).await, Outcome::Sold);
    assert_eq!(sell(&plain, 2).await, Outcome::Sold);

    let name = ep.sentinel_master();
    let master = |s| {
        let cmd = redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(name)
            .to_owned();
        async move {
            let (ip, port): (String, u16) = redis_query(s, &cmd).await.unwrap();
            std::net::SocketAddr::new(ip.parse().unwrap(), port)
        }
    };
    let old = master(ep.sentinels[0]).await;
    let ok: String = redis_query(
        ep.sentinels[0],
        redis::cmd("SENTINEL").arg("FAILOVER").arg(name),
    )
    .await
    .unwrap();
    assert_eq!(ok, "OK");
    // Done once the sentinels name another master, the old one is a replica (it is demoted
    // after the switch is announced) and the new one has a replica online (for WAIT 1).
    let info = |a| async move {
        redis_query::<String>(a, redis::cmd("INFO").arg("replication"))
            .await
            .unwrap_or_default()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let new = master(ep.sentinels[0]).await;
        if new != old
            && info(old).await.contains("role:slave")
            && info(new).await.contains("state=online")
        {
            break;
        }
        assert!(Instant::now() < deadline, "no failover from {old} in 60 s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The subscriber reconnects within milliseconds of the announcement; 2 s of margin.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        sell(&wait, 3).await,
        Outcome::Sold,
        "redis-sentinel-wait still on the demoted master {old}"
    );
    let first = sell(&plain, 4).await;
    assert!(
        matches!(first, Outcome::Failed(_)),
        "redis-sentinel should learn of the failover from a failed call: {first:?}"
    );
    assert_eq!(sell(&plain, 5).await, Outcome::Sold);
    wait.store.close().await;
    plain.store.close().await;
    drop((wait, plain));
    drop(cluster);
}
