//! The PostgreSQL service: a primary that starts, says its version and durability, takes the
//! lockbench login, leads, pauses with its backends, comes back from a kill with its data, and
//! leaves no process and no data behind; a streaming replica that receives the primary's rows
//! and, promoted after the primary is killed, leads and takes writes; the same in containers;
//! an external PostgreSQL claimed, refused and cleaned.

use std::path::PathBuf;
use std::time::Duration;

use lockbench::cluster::durability::{Acked, Source, SynchronousCommit};
use lockbench::cluster::{
    Builds, ClusterOptions, Needs, OwnedCluster, PostgresEndpoint, Role, Service, work,
};
use sqlx::{ConnectOptions, PgConnection};

use crate::common::{alive, assert_all_gone, cluster, descendants, postgres_available};

const PRIMARY: Needs = Needs {
    postgres: true,
    ..Needs::NONE
};
const REPLICATED: Needs = Needs {
    postgres_replica: true,
    ..Needs::NONE
};

async fn connect(ep: &PostgresEndpoint, addr: std::net::SocketAddr) -> PgConnection {
    ep.connect_options()
        .host(&addr.ip().to_string())
        .port(addr.port())
        .connect()
        .await
        .unwrap_or_else(|e| panic!("login at {addr}: {e}"))
}

/// The data directory a postgres process runs on (its `-D`).
fn data_dir(pid: u32) -> PathBuf {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    let args: Vec<String> = cmdline
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let i = args.iter().position(|a| a == "-D").expect("-D on the line");
    PathBuf::from(&args[i + 1])
}

/// Every process of the nodes (postmasters and their backends), and their data directories.
fn footprint(c: &OwnedCluster) -> (Vec<(u32, String)>, Vec<PathBuf>) {
    let mut procs = Vec::new();
    let mut dirs = Vec::new();
    for n in c.nodes() {
        let pid = n.server.pid();
        procs.push((pid, n.name.clone()));
        procs.extend(descendants(pid));
        dirs.push(data_dir(pid));
    }
    (procs, dirs)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_primary_starts_leads_pauses_restarts_and_leaves_nothing_behind() {
    if !postgres_available() {
        return;
    }
    let logs = tempfile::tempdir().unwrap();
    let c = cluster(PRIMARY, logs.path()).await;
    let info = c.info();
    assert_eq!(info.len(), 1);
    let n = &info[0];
    assert_eq!((n.name.as_str(), n.role), ("postgres", Role::Primary));
    assert!(n.version.starts_with("15."), "{}", n.version);
    let d = n.durability.as_ref().expect("durability recorded");
    assert_eq!(d.acked, Acked::Disk, "{}", d.describe());
    assert_eq!(d.settings["synchronous_commit"], "on");
    assert_eq!(d.settings["fsync"], "on");
    assert!(d.settings.contains_key("wal_sync_method"), "{d:?}");
    assert!(logs.path().join("postgres.log").is_file());

    let ep = c.endpoints().postgres.clone().expect("published");
    assert_eq!(
        (ep.user.as_str(), ep.database.as_str()),
        ("lockbench", "lockbench")
    );
    let mut con = connect(&ep, ep.addr).await;
    sqlx::raw_sql("CREATE TABLE t (v int); INSERT INTO t VALUES (1)")
        .execute(&mut con)
        .await
        .unwrap();
    let bad = ep.connect_options().password("wrong").connect().await;
    assert!(bad.is_err(), "a wrong password is refused");
    assert_eq!(leader(&c).await, "postgres");

    // A pause stops the backend already serving this connection, not only the postmaster.
    let mut c = c;
    c.pause("postgres").await.unwrap();
    let q = sqlx::query_scalar::<_, i32>("SELECT v FROM t").fetch_one(&mut con);
    assert!(
        tokio::time::timeout(Duration::from_secs(2), q)
            .await
            .is_err(),
        "a paused server answered"
    );
    c.resume("postgres").await.unwrap();
    let v: i32 = tokio::time::timeout(
        Duration::from_secs(30),
        sqlx::query_scalar("SELECT v FROM t").fetch_one(&mut con),
    )
    .await
    .expect("answers after resume")
    .unwrap();
    assert_eq!(v, 1);

    // A kill takes the backends with the postmaster; a restart recovers the committed row
    // (on the same user and data directory) once crash recovery lets clients in.
    let before = footprint(&c).0;
    c.kill("postgres").await.unwrap();
    assert_all_gone(&before);
    c.restart("postgres").await.unwrap();
    let mut kept = None;
    for _ in 0..300 {
        if let Ok(mut con) = ep.connect_options().connect().await {
            kept = sqlx::query_scalar::<_, i32>("SELECT v FROM t")
                .fetch_one(&mut con)
                .await
                .ok();
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(kept, Some(1), "the committed row after a crash and restart");

    let (procs, dirs) = footprint(&c);
    assert!(procs.len() > 3, "postmaster and helpers: {procs:?}");
    drop(c);
    assert_all_gone(&procs);
    for d in dirs {
        assert!(!d.exists(), "{} outlived the cluster", d.display());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn synchronous_commit_is_set_by_the_run_and_recorded() {
    if !postgres_available() {
        return;
    }
    let logs = tempfile::tempdir().unwrap();
    let mut opts = ClusterOptions::new(logs.path());
    opts.postgres_synchronous_commit = SynchronousCommit::Off;
    let c = OwnedCluster::start(PRIMARY, &opts).await.unwrap();
    let d = c.info()[0].durability.clone().expect("recorded");
    assert_eq!(
        (d.acked, d.source),
        (Acked::Memory, Source::Queried),
        "{d:?}"
    );
    assert_eq!(d.settings["synchronous_commit"], "off");
    assert_eq!(d.settings["fsync"], "on");
    assert_eq!(d.settings["synchronous_standby_names"], "");
    // The work counters count the transactions of the run's database.
    let ep = c.endpoints().clone();
    let before = work::read(Service::Postgres, &ep).await.unwrap();
    let mut con = connect(
        ep.postgres.as_ref().unwrap(),
        ep.postgres.as_ref().unwrap().addr,
    )
    .await;
    for _ in 0..20 {
        sqlx::query("SELECT 1").execute(&mut con).await.unwrap();
    }
    drop(con);
    // A backend reports its counts when idle, at most once a second, and on exit.
    let mut grew = 0;
    for _ in 0..100 {
        let after = work::read(Service::Postgres, &ep).await.unwrap();
        grew = after.counters[work::TOTAL] - before.counters[work::TOTAL];
        if grew >= 20 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(grew >= 20, "{grew} transactions counted of 20");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_replica_streams_and_after_promotion_leads_and_takes_writes() {
    if !postgres_available() {
        return;
    }
    let logs = tempfile::tempdir().unwrap();
    let mut c = cluster(REPLICATED, logs.path()).await;
    let roles: Vec<(String, Role)> = c.info().iter().map(|n| (n.name.clone(), n.role)).collect();
    assert_eq!(
        roles,
        [
            ("postgres".to_string(), Role::Master),
            ("postgres-replica".to_string(), Role::Replica)
        ]
    );
    let ep = c.endpoints().postgres.clone().unwrap();
    let standby = c.endpoints().postgres_standbys.clone();
    assert_eq!(standby.len(), 1);
    assert_eq!(leader(&c).await, "postgres");

    let mut primary = connect(&ep, ep.addr).await;
    sqlx::raw_sql("CREATE TABLE t (v int); INSERT INTO t VALUES (42)")
        .execute(&mut primary)
        .await
        .unwrap();
    assert_eq!(
        replicated(&ep, standby[0]).await,
        Some(42),
        "the row reached the replica"
    );
    let mut replica = connect(&ep, standby[0]).await;
    let write = sqlx::query("INSERT INTO t VALUES (1)")
        .execute(&mut replica)
        .await;
    assert!(write.is_err(), "a standby refuses writes");

    let (mut procs, dirs) = footprint(&c);
    c.kill("postgres").await.unwrap();
    let took = c.promote("postgres-replica").await.unwrap();
    eprintln!("promotion took {took:?}");
    assert!(took < Duration::from_secs(60), "{took:?}");
    assert_eq!(leader(&c).await, "postgres-replica");
    let lead_addr = lockbench::cluster::postgres::current_primary(c.endpoints())
        .await
        .unwrap();
    assert_eq!(lead_addr, standby[0]);
    sqlx::query("INSERT INTO t VALUES (7)")
        .execute(&mut replica)
        .await
        .expect("the promoted replica takes writes");

    procs.extend(footprint_alive(&c));
    drop(c);
    assert_all_gone(&procs);
    for d in dirs {
        assert!(!d.exists(), "{} outlived the cluster", d.display());
    }
}

/// The processes of the nodes still running (a killed one has none left to list).
fn footprint_alive(c: &OwnedCluster) -> Vec<(u32, String)> {
    let mut procs = Vec::new();
    for n in c.nodes().iter().filter(|n| alive(n.server.pid())) {
        let pid = n.server.pid();
        procs.push((pid, n.name.clone()));
        procs.extend(descendants(pid));
    }
    procs
}

#[tokio::test(flavor = "multi_thread")]
async fn an_external_postgres_is_claimed_refused_when_foreign_and_cleaned() {
    use lockbench::cluster::{ClusterError, Prefix, target};
    if !postgres_available() {
        return;
    }
    let logs = tempfile::tempdir().unwrap();
    let c = cluster(PRIMARY, logs.path()).await;
    let server = c.endpoints().postgres.clone().unwrap();
    let mut ep = lockbench::cluster::Endpoints {
        postgres: Some(server.clone()),
        prefix: Prefix::new("lbpg").unwrap(),
        ..Default::default()
    };
    let mut con = connect(&server, server.addr).await;

    target::claim(&ep).await.unwrap();
    assert_eq!(prefix_tables(&mut con).await, ["lbpg_owner"]);
    sqlx::query("CREATE TABLE lbpg_stock (v int)")
        .execute(&mut con)
        .await
        .unwrap();
    // Claimed again (a second run): the marker makes it lockbench's.
    target::claim(&ep).await.unwrap();
    let nodes = target::describe(&ep).await;
    assert_eq!(nodes.len(), 1);
    assert!(nodes[0].version.starts_with("15."), "{:?}", nodes[0]);
    assert!(nodes[0].durability.is_some());
    target::release(&ep).await.unwrap();
    assert!(prefix_tables(&mut con).await.is_empty());

    // Someone else's table under the prefix: refused, and the data kept.
    sqlx::raw_sql("CREATE TABLE lbpg_orders (v int); INSERT INTO lbpg_orders VALUES (5)")
        .execute(&mut con)
        .await
        .unwrap();
    let e = target::claim(&ep).await.unwrap_err();
    assert!(matches!(e, ClusterError::PrefixTaken { .. }), "{e}");
    assert!(e.to_string().contains("lbpg_orders"), "{e}");
    let kept: i32 = sqlx::query_scalar("SELECT v FROM lbpg_orders")
        .fetch_one(&mut con)
        .await
        .unwrap();
    assert_eq!(kept, 5);
    assert_eq!(prefix_tables(&mut con).await, ["lbpg_orders"]);

    // A wrong password: refused with the server's answer, no password in the message.
    ep.postgres.as_mut().unwrap().password = "not-it".into();
    let e = target::claim(&ep).await.unwrap_err().to_string();
    assert!(e.contains("password"), "{e}");
    assert!(!e.contains("not-it"), "{e}");
}

#[test]
fn containers_run_a_primary_and_a_replica_as_the_postgres_user() {
    if !crate::containers::docker_available() {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let logs = tempfile::tempdir().unwrap();
        let mut opts = ClusterOptions::new(logs.path());
        opts.provisioner = lockbench::cluster::Provisioner::Containers;
        let mut c = OwnedCluster::start(REPLICATED, &opts).await.unwrap();
        let info = c.info();
        assert_eq!(info.len(), 2);
        for n in &info {
            assert!(n.version.starts_with("15."), "{n:?}");
            assert!(n.container.is_some(), "{n:?}");
            let d = n.durability.as_ref().unwrap();
            assert_eq!(d.acked, Acked::Disk, "{d:?}");
        }
        let ep = c.endpoints().postgres.clone().unwrap();
        let mut primary = connect(&ep, ep.addr).await;
        // PostgreSQL refuses to run as root: that it runs at all says the script switched
        // to the package's user. The replica streams from the primary:
        sqlx::raw_sql("CREATE TABLE t (v int); INSERT INTO t VALUES (42)")
            .execute(&mut primary)
            .await
            .unwrap();
        let standby = c.endpoints().postgres_standbys[0];
        assert_eq!(replicated(&ep, standby).await, Some(42));
        assert_eq!(leader(&c).await, "postgres");
        c.kill("postgres").await.unwrap();
        let took = c.promote("postgres-replica").await.unwrap();
        eprintln!("container promotion took {took:?}");
        assert_eq!(leader(&c).await, "postgres-replica");
        let ids: Vec<String> = info
            .iter()
            .filter_map(|n| Some(n.container.clone()?.id))
            .collect();
        drop(c);
        let docker = testcontainers::bollard::Docker::connect_with_defaults().unwrap();
        for id in ids {
            assert!(
                docker.inspect_container(&id, None).await.is_err(),
                "{id} outlived the run"
            );
        }
    });
}

/// The tables under prefix `lbpg`.
async fn prefix_tables(con: &mut PgConnection) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT tablename::text FROM pg_tables WHERE tablename LIKE 'lbpg%' ORDER BY 1",
    )
    .fetch_all(con)
    .await
    .unwrap()
}

/// The node the servers say leads, asked until one does (a busy machine may let a question
/// time out).
async fn leader(c: &OwnedCluster) -> String {
    for _ in 0..30 {
        if let Some(n) = c.leader(Service::Postgres).await.unwrap() {
            return n.name.clone();
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("no PostgreSQL node leads");
}

/// The value of table `t` on the standby at `addr`, once it has one (asked for up to 30 s).
async fn replicated(ep: &PostgresEndpoint, addr: std::net::SocketAddr) -> Option<i32> {
    let mut con = connect(ep, addr).await;
    for _ in 0..300 {
        let r = sqlx::query_scalar::<_, i32>("SELECT v FROM t")
            .fetch_optional(&mut con)
            .await;
        if let Ok(Some(v)) = r {
            return Some(v);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_18_from_its_wheel_streams_and_promotes() {
    let bin = lockbench::cluster::installed::prefix().join("postgres-18/bin/postgres");
    if !(postgres_available()
        && crate::common::require(
            "PostgreSQL 18 (bash scripts/install-deps.sh --servers postgres=18)",
            bin.is_file(),
        ))
    {
        return;
    }
    let logs = tempfile::tempdir().unwrap();
    let mut opts = ClusterOptions::new(logs.path());
    opts.builds.postgres = lockbench::cluster::PostgresBuild::Pg18;
    let mut c = OwnedCluster::start(REPLICATED, &opts).await.unwrap();
    for n in c.info() {
        assert!(n.version.starts_with("18."), "{n:?}");
        assert_eq!(opts.builds.mismatch(std::slice::from_ref(&n)), None);
    }
    assert!(
        Builds::default().mismatch(&c.info()).is_some(),
        "15 is asked, 18 runs"
    );
    let ep = c.endpoints().postgres.clone().unwrap();
    let mut primary = connect(&ep, ep.addr).await;
    sqlx::raw_sql("CREATE TABLE t (v int); INSERT INTO t VALUES (42)")
        .execute(&mut primary)
        .await
        .unwrap();
    let standby = c.endpoints().postgres_standbys[0];
    assert_eq!(replicated(&ep, standby).await, Some(42));
    c.kill("postgres").await.unwrap();
    let took = c.promote("postgres-replica").await.unwrap();
    eprintln!("postgres 18 promotion took {took:?}");
    assert_eq!(leader(&c).await, "postgres-replica");
}
