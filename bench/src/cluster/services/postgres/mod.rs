//! A private PostgreSQL: a primary with its own data directory and port, a `lockbench`
//! database owned by a password user, and, when a run needs one, a streaming replica made by
//! `pg_basebackup -R` that lockbench promotes as an operator would (`SELECT pg_promote()`).
//!
//! Every setting is a `-c` flag on the server's command line, the same locally and in a
//! container, so `pg_settings` reports where it came from. Clients come over TCP only (no
//! unix socket: its path is bounded to 107 bytes, and a namespaced node is reached by
//! address anyway), with a password (`scram-sha-256`).
//!
//! The local side (data directories, the `postgres` system user, the process tree) is in
//! `postgres/local.rs`; the container's start script in `postgres/container.rs`; an external
//! target's claim in `postgres/target.rs`; PgBouncer in front of a local primary
//! (`servers.postgres_pooler`) in `postgres/pooler.rs`.

mod container;
mod local;
mod pooler;
mod target;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgSslMode};
use sqlx::{ConnectOptions, Connection};

use super::{first, rows};
use crate::cluster::containers::Image;
use crate::cluster::counters::{FSYNCS, Meter, Reading, TOTAL};
use crate::cluster::durability::{Acked, Durability, SynchronousCommit, queried, setting};
use crate::cluster::error::ClusterError;
use crate::cluster::external::Missing;
use crate::cluster::kind::{About, Asked, FromTarget, NodeAt, ServiceKind, Start, Started};
use crate::cluster::model::{Endpoints, Needs, NodeInfo, Pooler, PostgresEndpoint, Role, Service};
use crate::cluster::node::Node;
use crate::cluster::provision::Launcher;

/// PostgreSQL's password for the user lockbench creates (or a worker's login to it).
pub const PASSWORD_ENV: &str = "LOCKBENCH_POSTGRES_PASSWORD";

/// Its image: PostgreSQL 15 (Debian's layout: `/usr/lib/postgresql/15/bin`, a `postgres` user,
/// `setpriv`, `sh`).
pub(in crate::cluster) const IMAGE: Image = Image {
    var: "LOCKBENCH_IMAGE_POSTGRES",
    official: "postgres:15",
};

/// The primary's node name.
const NAME: &str = "postgres";
/// The replica's node name.
const REPLICA: &str = "postgres-replica";
const DATABASE: &str = "lockbench";
const USER: &str = "lockbench";
/// The superuser initdb creates; its password is the run's own, never published.
const SUPERUSER: &str = "postgres";
/// Port inside a container (a local node gets a reserved one).
const PORT: u16 = 5432;
/// Enough for hundreds of buyers, each with its own session (advisory locks are per
/// session), plus the harness's own connections.
pub const MAX_CONNECTIONS: u32 = 1000;

/// Keep-alive of every server-side connection, stated rather than left to the kernel's
/// default (2 h idle, then 9 probes 75 s apart: a cut client's session, and its advisory
/// locks, would outlive any run). With these the server drops a silent peer after
/// idle + interval × count = 5 + 2 × 3 = 11 s, and [`TCP_USER_TIMEOUT_MS`] bounds a peer that
/// stops acknowledging data the server sent, which keep-alive probes do not cover. A fault
/// test that cuts a holder for longer than [`KEEPALIVE_DEADLINE`] can count on the server
/// having ended its session (and released its session locks).
pub const TCP_KEEPALIVES_IDLE_S: u32 = 5;
/// Seconds between unanswered keep-alive probes.
pub const TCP_KEEPALIVES_INTERVAL_S: u32 = 2;
/// Unanswered probes before the server drops the connection.
pub const TCP_KEEPALIVES_COUNT: u32 = 3;
/// Milliseconds sent data may stay unacknowledged before the server drops the connection.
pub const TCP_USER_TIMEOUT_MS: u32 = 11_000;
/// How long a silent client keeps its session at most, by the settings above.
pub const KEEPALIVE_DEADLINE: Duration = Duration::from_secs(
    (TCP_KEEPALIVES_IDLE_S + TCP_KEEPALIVES_INTERVAL_S * TCP_KEEPALIVES_COUNT) as u64,
);

/// PgBouncer is installed (`servers.postgres_pooler`), or an error naming how to install it:
/// asked before a run starts anything.
pub fn pooler_installed() -> Result<(), ClusterError> {
    pooler::program().map(|_| ())
}

/// Bound of one question to a node about its state: a new connection's password exchange
/// (scram) took over 2 s on 2 cores shared with a CPU hog.
const ASK_TIMEOUT: Duration = Duration::from_secs(4);

/// Bound of one promotion: `pg_promote` waits at most this long, and so does the wait for
/// the first write.
const PROMOTE_TIMEOUT: Duration = Duration::from_secs(60);

/// The `-c` settings every node starts with, listening on `listen` port `port` and
/// acknowledging commits as `sync` says.
fn server_settings(listen: &str, port: u16, sync: SynchronousCommit) -> Vec<String> {
    let settings = [
        ("listen_addresses", listen.to_string()),
        ("port", port.to_string()),
        ("unix_socket_directories", String::new()),
        ("max_connections", MAX_CONNECTIONS.to_string()),
        ("synchronous_commit", sync.name().to_string()),
        ("tcp_keepalives_idle", TCP_KEEPALIVES_IDLE_S.to_string()),
        (
            "tcp_keepalives_interval",
            TCP_KEEPALIVES_INTERVAL_S.to_string(),
        ),
        ("tcp_keepalives_count", TCP_KEEPALIVES_COUNT.to_string()),
        ("tcp_user_timeout", TCP_USER_TIMEOUT_MS.to_string()),
        // A replica is a hot standby: it answers reads (and `pg_is_in_recovery()`).
        ("hot_standby", "on".to_string()),
        // Enough WAL kept for a replica that starts right after the primary's first writes.
        ("wal_keep_size", "256MB".to_string()),
    ];
    settings
        .into_iter()
        .flat_map(|(k, v)| ["-c".to_string(), format!("{k}={v}")])
        .collect()
}

/// `pg_hba.conf`: every client over TCP with a password, replication connections too (the
/// replica's `pg_basebackup` and its WAL receiver log in as the superuser).
const HBA: &str = "host all all 0.0.0.0/0 scram-sha-256\n\
                   host all all ::/0 scram-sha-256\n\
                   host replication all 0.0.0.0/0 scram-sha-256\n\
                   host replication all ::/0 scram-sha-256\n";

/// The password of the user lockbench creates: LOCKBENCH_POSTGRES_PASSWORD when set (workers
/// on other hosts read it from there: it never crosses their link), a fresh random one
/// otherwise.
fn password() -> Result<String, ClusterError> {
    let var = PASSWORD_ENV;
    match std::env::var(var) {
        Ok(p) if sql_safe(&p) => Ok(p),
        Ok(_) => Err(ClusterError::Setup {
            node: NAME.into(),
            what: format!("password from {var}"),
            detail: "expected letters, digits, `_` or `-` (it goes into a SQL statement)".into(),
        }),
        Err(_) => Ok(random_password()),
    }
}

fn random_password() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// Whether `s` may go between quotes of a statement (DDL takes no bind parameters).
fn sql_safe(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The statements that make the user with `password`, its database, and let it promote a
/// replica (run on the primary before the replica is copied from it, so the replica has them).
fn grants(password: &str) -> [String; 3] {
    [
        format!("CREATE ROLE {USER} LOGIN PASSWORD '{password}'"),
        format!("CREATE DATABASE {DATABASE} OWNER {USER}"),
        format!("GRANT EXECUTE ON FUNCTION pg_promote(boolean, integer) TO {USER}"),
    ]
}

/// How lockbench logs in as the superuser at `addr`.
fn superuser(addr: SocketAddr, password: &str) -> PgConnectOptions {
    PgConnectOptions::new()
        .host(&addr.ip().to_string())
        .port(addr.port())
        .username(SUPERUSER)
        .password(password)
        .database("postgres")
        .ssl_mode(PgSslMode::Disable)
}

/// The login of `ep`, at `addr` (another node of the same set: a replica has the same users).
fn at(ep: &PostgresEndpoint, addr: SocketAddr) -> PgConnectOptions {
    ep.connect_options()
        .host(&addr.ip().to_string())
        .port(addr.port())
}

/// The version the server reports, `15.20` (Debian adds ` (Debian 15.20-0+deb12u1)`).
pub(in crate::cluster) async fn version(opts: PgConnectOptions) -> Result<String, String> {
    let (v,): (String,) = first(rows(opts, "SHOW server_version").await?)?;
    Ok(v.split_whitespace().next().unwrap_or_default().to_string())
}

/// Creates the user and its database on the primary, as the superuser: the first two
/// statements of [`grants`] in the `postgres` database, the grant of `pg_promote` in the new
/// one (a function's privileges are each database's own).
async fn create_user(opts: &PgConnectOptions, password: &str) -> Result<(), ClusterError> {
    let setup = |detail: String| ClusterError::Setup {
        node: NAME.into(),
        what: "create database and user".into(),
        detail,
    };
    let [role, db, promote] = grants(password);
    // One statement at a time: CREATE DATABASE cannot run inside the implicit transaction of
    // a multi-statement query.
    for (ddl, database) in [(role, "postgres"), (db, "postgres"), (promote, DATABASE)] {
        let mut con =
            (opts.clone().database(database).connect().await).map_err(|e| setup(e.to_string()))?;
        sqlx::raw_sql(sqlx::AssertSqlSafe(ddl))
            .execute(&mut con)
            .await
            .map_err(|e| setup(e.to_string()))?;
        let _ = con.close().await;
    }
    Ok(())
}

/// Whether the server at `opts` is in recovery (a standby), and its timeline (a promotion
/// starts a new one, so of two servers out of recovery the higher timeline is the newer
/// primary).
async fn state(opts: PgConnectOptions) -> Result<(bool, u32), String> {
    let sql = "SELECT pg_is_in_recovery(), CASE WHEN pg_is_in_recovery() THEN NULL \
               ELSE pg_walfile_name(pg_current_wal_lsn()) END";
    let (recovery, walfile): (bool, Option<String>) = first(rows(opts, sql).await?)?;
    Ok((recovery, walfile.as_deref().map_or(0, timeline)))
}

/// The timeline of a WAL file name (its first 8 hex digits).
fn timeline(walfile: &str) -> u32 {
    walfile
        .get(..8)
        .and_then(|t| u32::from_str_radix(t, 16).ok())
        .unwrap_or(0)
}

/// Of `addrs` (a primary and its standbys, reached with `ep`'s login), the one that accepts
/// writes now: not in recovery, on the highest timeline (an old primary restarted after a
/// promotion also leaves recovery, on the old timeline). The nodes are asked at once, each for
/// at most [`ASK_TIMEOUT`]; one that does not answer is skipped. `None`: none accepts writes.
async fn writable(ep: &PostgresEndpoint, addrs: &[SocketAddr]) -> Option<SocketAddr> {
    let asks = addrs.iter().map(|&a| async move {
        let s = tokio::time::timeout(ASK_TIMEOUT, state(at(ep, a))).await;
        (a, s.ok().and_then(Result::ok))
    });
    let answers = futures::future::join_all(asks).await;
    (answers.into_iter())
        .filter_map(|(a, s)| s.filter(|(recovery, _)| !recovery).map(|(_, tl)| (tl, a)))
        .max_by_key(|(tl, _)| *tl)
        .map(|(_, a)| a)
}

/// The PostgreSQL node of `ep` that accepts writes now (the primary, or the standby promoted
/// after a failover), asked of every node: what a client does to find the primary.
pub async fn current_primary(ep: &Endpoints) -> Result<SocketAddr, String> {
    let p = ep
        .postgres
        .as_ref()
        .ok_or("no PostgreSQL in these endpoints")?;
    let mut all = vec![p.addr];
    all.extend(&ep.postgres_standbys);
    writable(p, &all)
        .await
        .ok_or_else(|| format!("none of {all:?} accepts writes"))
}

/// Promotes the standby at `addr` (`SELECT pg_promote()`, waiting for the end of recovery)
/// and waits until it takes a write; returns the time from the request to that write.
async fn promote(ep: &PostgresEndpoint, addr: SocketAddr) -> Result<Duration, String> {
    let opts = at(ep, addr);
    let start = Instant::now();
    let mut con = opts.connect().await.map_err(|e| e.to_string())?;
    let done: bool = sqlx::query_scalar("SELECT pg_promote(true, $1)")
        .bind(PROMOTE_TIMEOUT.as_secs() as i32)
        .fetch_one(&mut con)
        .await
        .map_err(|e| format!("pg_promote: {e}"))?;
    if !done {
        return Err(format!(
            "pg_promote: not promoted within {PROMOTE_TIMEOUT:?}"
        ));
    }
    // A transaction id is only handed out by a server that takes writes.
    while let Err(e) = sqlx::query("SELECT pg_current_xact_id()")
        .execute(&mut con)
        .await
    {
        if start.elapsed() > PROMOTE_TIMEOUT {
            return Err(format!("no write taken within {PROMOTE_TIMEOUT:?}: {e}"));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let took = start.elapsed();
    let _ = con.close().await;
    Ok(took)
}

/// PostgreSQL: with `synchronous_commit = off` a commit is acknowledged before its WAL is
/// written (a crash of the server loses it); with `fsync = off` the WAL is written but never
/// forced to disk; otherwise the commit's WAL is flushed before the acknowledgement.
fn acked(synchronous_commit: &str, fsync: &str) -> Acked {
    match (synchronous_commit, fsync) {
        ("", _) | (_, "") => Acked::Unknown,
        ("off", _) => Acked::Memory,
        (_, "off") => Acked::Os,
        _ => Acked::Disk,
    }
}

/// The settings that decide when a commit reaches the disk, as `pg_settings` reports them.
async fn settings(opts: PgConnectOptions) -> Result<Vec<(String, String)>, String> {
    let sql = "SELECT name, setting FROM pg_settings WHERE name IN ('synchronous_commit', \
               'fsync', 'wal_sync_method', 'synchronous_standby_names') ORDER BY name";
    rows(opts, sql).await
}

/// The pooler in front of the server at `addr`, as settings of its durability line (it does
/// not change where a commit is, but results record the servers' settings there):
/// `pooler = pgbouncer-transaction`, `pooler_pool_size = 4`. None without one.
fn pooler_settings(ep: &PostgresEndpoint, addr: SocketAddr) -> Vec<(String, String)> {
    match ep.pooler {
        Some(p) if addr == ep.addr => vec![
            ("pooler".into(), p.pooler.name().into()),
            ("pooler_pool_size".into(), p.pool_size.to_string()),
        ],
        _ => Vec::new(),
    }
}

/// The columns of `pg_stat_database` lockbench reads, in [`WORK_QUERY`]'s order.
const STAT_COLUMNS: [&str; 9] = [
    "xact_commit",
    "xact_rollback",
    "tup_returned",
    "tup_fetched",
    "tup_inserted",
    "tup_updated",
    "tup_deleted",
    "deadlocks",
    "conflicts",
];

/// The run database's row of `pg_stat_database`.
const WORK_QUERY: &str = "SELECT xact_commit, xact_rollback, tup_returned, tup_fetched, \
     tup_inserted, tup_updated, tup_deleted, deadlocks, conflicts \
     FROM pg_stat_database WHERE datname = current_database()";

/// Work counters of a `pg_stat_database` row (values in [`STAT_COLUMNS`]' order): [`TOTAL`]
/// is the transactions that ended (committed or rolled back: every statement outside a
/// transaction block is one), the rest by their column name. A negative value (never seen;
/// the columns are bigint) is left out.
fn stat_counters(values: &[i64]) -> std::collections::BTreeMap<String, u64> {
    let mut out: std::collections::BTreeMap<String, u64> = (STAT_COLUMNS.iter())
        .zip(values)
        .filter_map(|(k, v)| Some((k.to_string(), u64::try_from(*v).ok()?)))
        .collect();
    let ended = ["xact_commit", "xact_rollback"]
        .iter()
        .filter_map(|k| out.get(*k))
        .sum();
    out.insert(TOTAL.to_string(), ended);
    out
}

/// The server's WAL syncs so far: `pg_stat_wal.wal_sync` (14 to 17), `pg_stat_io`'s WAL
/// fsyncs from 18 on (which took them out of `pg_stat_wal`); `None` before 14.
async fn wal_syncs(con: &mut sqlx::PgConnection) -> Result<Option<u64>, String> {
    let (version,): (i32,) = sqlx::query_as("SELECT current_setting('server_version_num')::int")
        .fetch_one(&mut *con)
        .await
        .map_err(|e| format!("server_version_num: {e}"))?;
    let query = match version {
        ..140000 => return Ok(None),
        140000..180000 => "SELECT wal_sync FROM pg_stat_wal",
        _ => "SELECT coalesce(sum(fsyncs), 0)::bigint FROM pg_stat_io WHERE object = 'wal'",
    };
    let (n,): (i64,) = (sqlx::query_as(query).fetch_one(&mut *con).await)
        .map_err(|e| format!("WAL syncs: {e}"))?;
    Ok(u64::try_from(n).ok())
}

/// The counters of the primary at `ep`.
async fn work(ep: &PostgresEndpoint) -> Result<Reading, String> {
    let mut con = ep
        .connect_options()
        .connect()
        .await
        .map_err(|e| e.to_string())?;
    let row: (i64, i64, i64, i64, i64, i64, i64, i64, i64) = sqlx::query_as(WORK_QUERY)
        .fetch_one(&mut con)
        .await
        .map_err(|e| format!("pg_stat_database: {e}"))?;
    let syncs = wal_syncs(&mut con).await?;
    let _ = con.close().await;
    let (a, b, c, d, e, f, g, h, i) = row;
    let mut counters = stat_counters(&[a, b, c, d, e, f, g, h, i]);
    counters.extend(syncs.map(|s| (FSYNCS.to_string(), s)));
    let mut reading = Reading::default();
    reading.add(ep.addr, counters);
    Ok(reading)
}

/// The PostgreSQL server: the lock service and store of the `pg-*` strategies.
pub(in crate::cluster) struct Postgres;

/// Its primary, and its replica when `needs` asks for one; last, the pooler's (reserved
/// whether a run puts one in front or not: the ports before it stay where they were).
fn port_names(needs: Needs) -> Vec<String> {
    let mut names = vec![NAME.to_string()];
    if needs.postgres_replica {
        names.push(REPLICA.into());
    }
    names.push(pooler::PORT_NAME.into());
    names
}

const ABOUT: About = About {
    service: Service::Postgres,
    wanted: |needs| needs.runs(Service::Postgres),
    check_installed: |b| local::check_installed(b.postgres),
    port_names,
    build: Some(|b, v| ("postgres", b.postgres.name(), b.postgres.reports(v))),
    images: &[IMAGE],
};

#[async_trait]
impl ServiceKind for Postgres {
    fn about(&self) -> &'static About {
        &ABOUT
    }

    async fn start(&self, s: Start<'_>) -> Result<Started, ClusterError> {
        let (l, sync) = (s.launcher, s.opts.postgres_synchronous_commit);
        let pooling = &s.opts.postgres_pooling;
        let (primary, endpoint, superuser) = match l {
            Launcher::Local(local) => local::start_primary(local, sync, pooling).await?,
            Launcher::Containers(_) if pooling.pooler != Pooler::None => {
                return Err(ClusterError::Setup {
                    node: pooler::NAME.into(),
                    what: "start".into(),
                    detail: "servers.postgres_pooler runs PgBouncer as a local process \
                             beside a local PostgreSQL: use --provision local"
                        .into(),
                });
            }
            Launcher::Containers(run) => container::start_primary(run, sync).await?,
        };
        let mut nodes = vec![primary];
        if s.needs.postgres_replica {
            nodes[0].role = Role::Master;
            let from = (nodes[0].addr, superuser.as_str());
            let replica = match l {
                Launcher::Local(local) => local::start_replica(local, from, sync).await,
                Launcher::Containers(run) => container::start_replica(run, from, sync).await,
            };
            // The primary stops with its guard if the replica fails.
            nodes.push(replica?);
            wait_streaming(&mut nodes, &endpoint).await?;
        }
        let standbys: Vec<SocketAddr> = nodes[1..].iter().map(|n| n.addr).collect();
        Ok(Started::new(nodes, move |ep| {
            ep.postgres = Some(endpoint);
            ep.postgres_standbys = standbys;
        }))
    }

    async fn leader<'n>(&self, q: Asked<'n, '_>) -> Result<Option<&'n Node>, ClusterError> {
        let Some(ep) = &q.endpoints.postgres else {
            return Ok(None);
        };
        let addrs: Vec<SocketAddr> = q.members.iter().map(|n| n.addr).collect();
        let lead = writable(ep, &addrs).await;
        Ok(q.members.into_iter().find(|n| Some(n.addr) == lead))
    }

    async fn promote(&self, node: &Node, ep: &Endpoints) -> Result<Duration, ClusterError> {
        let err = |detail: String| ClusterError::Setup {
            node: node.name.clone(),
            what: "promote".into(),
            detail,
        };
        let p = ep
            .postgres
            .as_ref()
            .ok_or_else(|| err("no PostgreSQL login".into()))?;
        promote(p, node.addr).await.map_err(err)
    }

    async fn durability(&self, n: NodeAt<'_>) -> Option<Durability> {
        let Some(p) = &n.ep.postgres else {
            return Some(Durability::unknown("no PostgreSQL login".into()));
        };
        let read = async {
            let mut kv = settings(at(p, n.addr)).await?;
            kv.extend(pooler_settings(p, n.addr));
            Ok(kv)
        };
        let get = setting;
        Some(
            queried(read, |kv| {
                acked(get(kv, "synchronous_commit"), get(kv, "fsync"))
            })
            .await,
        )
    }

    fn work_meter(&self) -> Option<Meter> {
        Some(Meter {
            unit: "transactions",
            source: "pg_stat_database of the run's database on the primary: xact_commit + \
                     xact_rollback (each statement outside a transaction block is one), tup_*, \
                     deadlocks, conflicts; a backend reports its counts when idle, at most once \
                     a second, so a reading may lag by about 1 s; lock waits are not counted \
                     (pg_locks is a snapshot of the waits now, not a counter); no byte counts; \
                     fsyncs: pg_stat_wal.wal_sync (pg_stat_io's WAL fsyncs from 18 on)",
        })
    }

    async fn work(&self, ep: &Endpoints) -> Result<Reading, String> {
        work(ep.postgres.as_ref().ok_or("no PostgreSQL login")?).await
    }

    fn copy_from_target(&self, from: FromTarget<'_>, out: &mut Endpoints) -> Result<(), Missing> {
        let db = from.target.postgres.clone();
        out.postgres = Some(db.ok_or(("[postgres]", "a PostgreSQL database".into()))?);
        out.postgres_standbys = from.target.postgres_standbys.clone();
        Ok(())
    }

    async fn claim(&self, ep: &Endpoints) -> Result<(), ClusterError> {
        match &ep.postgres {
            Some(p) => target::claim_prefix(p, &ep.prefix).await,
            None => Ok(()),
        }
    }

    async fn release(&self, ep: &Endpoints) -> Vec<String> {
        match &ep.postgres {
            Some(p) => target::release(p, &ep.prefix).await,
            None => Vec::new(),
        }
    }

    async fn describe(&self, ep: &Endpoints) -> Vec<NodeInfo> {
        match &ep.postgres {
            Some(p) => target::describe(p, &ep.postgres_standbys).await,
            None => Vec::new(),
        }
    }
}

/// Waits until the primary (first of `nodes`) streams to every standby after it, and a row
/// it wrote is on them: the replica is of use to a failover from then on.
async fn wait_streaming(nodes: &mut [Node], ep: &PostgresEndpoint) -> Result<(), ClusterError> {
    let standbys: Vec<SocketAddr> = nodes[1..].iter().map(|n| n.addr).collect();
    let primary = at(ep, nodes[0].addr);
    let (first, rest) = nodes.split_first_mut().expect("a primary");
    let mut watch: Vec<&mut dyn crate::cluster::node::NodeServer> = vec![&mut *first.server];
    watch.extend(rest.iter_mut().map(|n| &mut *n.server));
    crate::cluster::backend::wait_ready(REPLICA, &mut watch, || {
        caught_up(primary.clone(), ep, &standbys)
    })
    .await
}

/// Ok once every standby at `standbys` streams from the primary at `primary` and has replayed
/// its WAL up to now.
async fn caught_up(
    primary: PgConnectOptions,
    ep: &PostgresEndpoint,
    standbys: &[SocketAddr],
) -> Result<(), String> {
    let (lsn,): (String,) = first(rows(primary, "SELECT pg_current_wal_lsn()::text").await?)?;
    for &s in standbys {
        let mut con = at(ep, s).connect().await.map_err(|e| e.to_string())?;
        let behind: Option<bool> = sqlx::query_scalar(
            // The receive position is set once the WAL receiver streams (pg_stat_wal_receiver
            // would say so too, but only to a superuser or pg_read_all_stats).
            "SELECT pg_last_wal_receive_lsn() IS NULL OR pg_last_wal_replay_lsn() < $1::pg_lsn",
        )
        .bind(&lsn)
        .fetch_one(&mut con)
        .await
        .map_err(|e| e.to_string())?;
        let _ = con.close().await;
        if behind != Some(false) {
            return Err(format!("standby {s} has not replayed up to {lsn} yet"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_say_where_an_acknowledged_commit_is() {
        assert_eq!(acked("on", "on"), Acked::Disk);
        assert_eq!(acked("remote_apply", "on"), Acked::Disk);
        assert_eq!(acked("local", "off"), Acked::Os);
        assert_eq!(acked("off", "on"), Acked::Memory);
        assert_eq!(acked("", "on"), Acked::Unknown);
    }

    #[test]
    fn a_database_row_becomes_work_counters() {
        let c = stat_counters(&[120, 5, 900, 300, 10, 40, 2, 1, 0]);
        assert_eq!(c[TOTAL], 125);
        assert_eq!((c["xact_commit"], c["xact_rollback"]), (120, 5));
        assert_eq!((c["tup_updated"], c["deadlocks"]), (40, 1));
        assert_eq!(c.len(), STAT_COLUMNS.len() + 1);
        // A value that is no count is left out, and the total sums what is there.
        let c = stat_counters(&[-1, 3]);
        assert_eq!((c[TOTAL], c.contains_key("xact_commit")), (3, false));
    }

    #[test]
    fn a_wal_file_names_its_timeline() {
        assert_eq!(timeline("000000020000000000000003"), 2);
        assert_eq!(timeline("0000000A0000000000000003"), 10);
        assert_eq!(timeline("x"), 0);
    }

    #[test]
    fn every_setting_is_a_flag_and_keepalive_is_explicit() {
        let s = server_settings("10.0.0.2", 5433, SynchronousCommit::Off);
        assert!(s.chunks(2).all(|kv| kv[0] == "-c" && kv[1].contains('=')));
        for want in [
            "listen_addresses=10.0.0.2",
            "port=5433",
            "synchronous_commit=off",
            "tcp_keepalives_idle=5",
            "tcp_keepalives_interval=2",
            "tcp_keepalives_count=3",
            "max_connections=1000",
        ] {
            assert!(s.iter().any(|a| a == want), "{want} in {s:?}");
        }
        assert_eq!(KEEPALIVE_DEADLINE, Duration::from_secs(11));
    }

    #[test]
    fn only_plain_passwords_go_into_statements() {
        assert!(sql_safe("abc_DEF-123"));
        assert!(!sql_safe("a'b") && !sql_safe("") && !sql_safe("a b"));
        assert!(grants("pw")[0].contains("PASSWORD 'pw'"));
    }
}
