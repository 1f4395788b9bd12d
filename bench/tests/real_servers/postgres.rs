//! The PostgreSQL service: a primary that starts, says its version and durability, takes the
//! lockbench login, leads, pauses with its backends, and leaves no process and no data
//! behind; a streaming replica that receives the primary's rows and, promoted after the
//! primary is killed, leads and takes writes.

use std::path::PathBuf;
use std::time::Duration;

use lockbench::cluster::durability::Acked;
use lockbench::cluster::{Needs, OwnedCluster, PostgresEndpoint, Role, Service};
use sqlx::{ConnectOptions, Connection, PgConnection};

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
async fn a_primary_starts_leads_pauses_and_leaves_nothing_behind() {
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
    let leader = c
        .leader(Service::Postgres)
        .await
        .unwrap()
        .expect("a leader");
    assert_eq!(leader.name, "postgres");

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

    let (procs, dirs) = footprint(&c);
    assert!(procs.len() > 3, "postmaster and helpers: {procs:?}");
    drop(c);
    assert_all_gone(&procs);
    for d in dirs {
        assert!(!d.exists(), "{} outlived the cluster", d.display());
    }
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
    assert_eq!(
        c.leader(Service::Postgres).await.unwrap().unwrap().name,
        "postgres"
    );

    let mut primary = connect(&ep, ep.addr).await;
    sqlx::raw_sql("CREATE TABLE t (v int); INSERT INTO t VALUES (42)")
        .execute(&mut primary)
        .await
        .unwrap();
    let mut replica = connect(&ep, standby[0]).await;
    let mut seen = None;
    for _ in 0..300 {
        let r = sqlx::query_scalar::<_, i32>("SELECT v FROM t")
            .fetch_optional(&mut replica)
            .await;
        if let Ok(Some(v)) = r {
            seen = Some(v);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(seen, Some(42), "the row reached the replica");
    let write = sqlx::query("INSERT INTO t VALUES (1)")
        .execute(&mut replica)
        .await;
    assert!(write.is_err(), "a standby refuses writes");

    let (mut procs, dirs) = footprint(&c);
    c.kill("postgres").await.unwrap();
    let took = c.promote("postgres-replica").await.unwrap();
    eprintln!("promotion took {took:?}");
    assert!(took < Duration::from_secs(60), "{took:?}");
    let leader = c
        .leader(Service::Postgres)
        .await
        .unwrap()
        .expect("a leader");
    assert_eq!(leader.name, "postgres-replica");
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
