//! A standalone `redis-server` on its own port, without persistence unless the run asks for an
//! append-only file ([`Appendfsync`]): a child process or a container, with the same flags and
//! the same readiness probe. Its [`Redis`] kind is the standalone servers (one, or
//! Redlock's five); the helpers below also serve Sentinel's master and the Cluster's nodes.

use std::net::SocketAddr;
use std::process::Command;

use async_trait::async_trait;

use crate::cluster::backend::wait_ready;
use crate::cluster::builds::Builds;
use crate::cluster::containers::{Image, Spec};
use crate::cluster::counters::{self, Meter, Reading};
use crate::cluster::durability::{Acked, Durability, queried, setting};
use crate::cluster::error::ClusterError;
use crate::cluster::external::{MARKER, Missing, bounded, numbered, owned_or_empty, target_err};
use crate::cluster::kind::{About, FromTarget, NodeAt, ServiceKind, Start, Started};
use crate::cluster::model::{Auth, Endpoints, Needs, NodeInfo, Role, Service};
use crate::cluster::namespace::Prefix;
use crate::cluster::node::{Node, NodeServer};
use crate::cluster::provision::Launcher;

pub use crate::cluster::durability::Appendfsync;

/// The variable a worker reads the Redis password from (single node, replicas, Redlock
/// nodes, cluster: one login serves them all).
pub const PASSWORD_ENV: &str = "LOCKBENCH_REDIS_PASSWORD";

/// Its image: Redis and Sentinel (`redis-server`, `sh`).
pub(in crate::cluster) const IMAGE: Image = Image {
    var: "LOCKBENCH_IMAGE_REDIS",
    official: "redis:7.0",
};

/// Client port inside a container (a local node gets a reserved one).
const PORT: u16 = 6379;

pub(in crate::cluster) fn check_installed(builds: Builds) -> Result<(), ClusterError> {
    builds.redis.server().map(|_| ())
}

/// Flags every Redis node gets wherever it runs, then `extra` (e.g. `--replicaof`): no RDB
/// snapshots, an append-only file only if `aof` asks for one (in the node's `--dir`, so a
/// restart reloads it), and no protected mode (namespaced and container addresses are not
/// loopback, so it would refuse clients).
fn flags(port: u16, aof: Appendfsync, extra: &[String]) -> Vec<String> {
    let persistence: &[&str] = match aof {
        Appendfsync::Off => &["--appendonly", "no"],
        v => &["--appendonly", "yes", "--appendfsync", v.name()],
    };
    let mut out: Vec<String> = ["--port", &port.to_string(), "--save", ""]
        .into_iter()
        .chain(persistence.iter().copied())
        .chain(["--protected-mode", "no"])
        .map(String::from)
        .collect();
    out.extend_from_slice(extra);
    out
}

/// Starts `redis-server` as node `name` with persistence `aof` and `extra` flags, and waits
/// until it answers. With `clock` and a run that preloads the clock shim, its wall clock can be
/// moved at run time ([`crate::cluster::clock`]). A restart after a kill keeps the command line and the
/// data directory, so with an append-only file the node reloads what it acknowledged.
pub(in crate::cluster) async fn start(
    l: Launcher<'_>,
    name: &str,
    role: Role,
    aof: Appendfsync,
    extra: &[String],
    clock: bool,
) -> Result<Node, ClusterError> {
    let (addr, mut server): (SocketAddr, Box<dyn NodeServer>) = match l {
        Launcher::Local(local) => {
            let addr = local.addr(name);
            let dir = local.dir(name)?;
            let mut cmd = Command::new(local.builds().redis.server()?);
            cmd.arg("--bind")
                .arg(addr.ip().to_string())
                .args(flags(addr.port(), aof, extra))
                .args(["--daemonize", "no", "--logfile", ""])
                .arg("--dir")
                .arg(&dir);
            if let Some(shim) = local.shim().filter(|_| clock) {
                let control = crate::cluster::clock::create_control(&dir)?;
                cmd.env("LD_PRELOAD", shim)
                    .env("LOCKBENCH_CLOCK_FILE", control);
            }
            (addr, Box::new(local.spawn(name, cmd)?))
        }
        Launcher::Containers(run) => {
            // The append-only file goes in a directory any user may write (images differ in
            // their working directory); a restarted container keeps its file system.
            let mut cmd = vec!["redis-server".to_string(), "--dir".into(), "/tmp".into()];
            cmd.extend(flags(PORT, aof, extra));
            let spec = Spec {
                name: name.to_string(),
                image: run.images.get(IMAGE),
                cmd,
                env: Vec::new(),
            };
            let c = run.launch_one(spec).await?;
            (c.addr(PORT), Box::new(c))
        }
    };
    let version = wait_ready(name, &mut [&mut *server], || version(addr, None)).await?;
    Ok(Node {
        name: name.to_string(),
        service: Service::Redis,
        role,
        addr,
        version,
        server,
    })
}

/// A client of the Redis server (or Sentinel) at `addr`, logging in with `auth` if given.
pub fn client(addr: SocketAddr, auth: Option<&Auth>) -> ::redis::RedisResult<::redis::Client> {
    use ::redis::IntoConnectionInfo;
    let mut info =
        ::redis::ConnectionAddr::Tcp(addr.ip().to_string(), addr.port()).into_connection_info()?;
    if let Some(a) = auth {
        let mut settings = info.redis_settings().clone().set_password(&a.password);
        if let Some(user) = &a.username {
            settings = settings.set_username(user);
        }
        info = info.set_redis_settings(settings);
    }
    ::redis::Client::open(info)
}

/// The persistence settings of the Redis server at `addr`, as `CONFIG GET` reads them:
/// `appendonly`, `appendfsync` and `save`.
pub(in crate::cluster) async fn persistence(
    addr: SocketAddr,
    auth: Option<&Auth>,
) -> Result<Vec<(String, String)>, String> {
    let mut con = connection(addr, auth).await?;
    let mut out = Vec::new();
    for key in ["appendonly", "appendfsync", "save"] {
        // A flat [name, value] list; empty if the server does not know the parameter.
        let pair: Vec<String> = ::redis::cmd("CONFIG")
            .arg("GET")
            .arg(key)
            .query_async(&mut con)
            .await
            .map_err(|e| format!("CONFIG GET {key}: {e}"))?;
        if let [name, value] = pair.as_slice() {
            out.push((name.clone(), value.clone()));
        }
    }
    Ok(out)
}

/// The build a Redis server (or Sentinel) at `addr` reports in `INFO server` and `memory`:
/// `7.0.15 (jemalloc-5.3.0)`, or `valkey 8.0.1 (jemalloc-5.3.0)` (Valkey reports a
/// `redis_version` of the Redis it is compatible with, and its own beside it).
pub(in crate::cluster) async fn version(
    addr: SocketAddr,
    auth: Option<&Auth>,
) -> Result<String, String> {
    let mut con = connection(addr, auth).await?;
    let info: String = ::redis::cmd("INFO")
        .arg("server")
        .arg("memory")
        .query_async(&mut con)
        .await
        .map_err(|e| e.to_string())?;
    Ok(describe_build(&info))
}

/// The build named by an `INFO` answer (see [`version`]).
fn describe_build(info: &str) -> String {
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
    };
    let version = match field("valkey_version") {
        Some(v) => format!("valkey {v}"),
        None => field("redis_version").unwrap_or("unknown").to_string(),
    };
    match field("mem_allocator") {
        Some(a) => format!("{version} ({a})"),
        None => version,
    }
}

/// What lockbench reads of a Redis node's work.
pub(in crate::cluster) const WORK_METER: Meter = Meter {
    unit: "commands",
    source: "INFO commandstats (calls of every command, those Lua scripts run included) and \
             INFO stats (total_net_{input,output}_bytes less replication's) of every master; a \
             replica's commands replay its master's, so replicas are not counted; fsyncs (every \
             node): INFO persistence's rdb_saves with the append-only file off, none counted \
             with it on",
};

/// The work counters of the Redis nodes at `addrs` (see [`counters::redis_counters`]), summed;
/// a node whose `INFO replication` says it is a replica is read but adds nothing.
pub(in crate::cluster) async fn work(
    addrs: &[SocketAddr],
    auth: Option<&Auth>,
) -> Result<Reading, String> {
    let answers = futures::future::join_all(addrs.iter().map(|a| async move {
        let mut con = connection(*a, auth).await?;
        ::redis::cmd("INFO")
            .arg("stats")
            .arg("commandstats")
            .arg("replication")
            .arg("persistence")
            .query_async::<String>(&mut con)
            .await
            .map_err(|e| format!("{a}: INFO: {e}"))
    }));
    let mut reading = Reading::default();
    for (addr, info) in addrs.iter().zip(answers.await) {
        let info = info?;
        let replica = counters::info_fields(&info).any(|(k, v)| k == "role" && v.trim() == "slave");
        // A replica's commands replay its master's; its fsyncs are its own.
        let counters = if replica {
            let fsyncs = counters::redis_fsyncs(&info).map(|f| (counters::FSYNCS.into(), f));
            fsyncs.into_iter().collect()
        } else {
            counters::redis_counters(&info)
        };
        reading.add(*addr, counters);
    }
    Ok(reading)
}

/// The standalone Redis servers of a run: `redis-1`, or Redlock's `redis-1..5`.
pub(in crate::cluster) struct Redis;

/// Their node names, which are also the names their local ports are reserved under.
fn names(needs: Needs) -> Vec<String> {
    (1..=needs.redis_nodes())
        .map(|i| format!("redis-{i}"))
        .collect()
}

/// `[servers] redis`, which every Redis node runs (Sentinel's and the cluster's too).
pub(in crate::cluster) fn build(b: Builds, version: &str) -> (&'static str, &'static str, bool) {
    ("redis", b.redis.name(), b.redis.reports(version))
}

/// Also what Sentinel's and the Redis Cluster's nodes run.
pub(in crate::cluster) const ABOUT: About = About {
    service: Service::Redis,
    wanted: |needs| needs.redis_nodes() > 0,
    check_installed,
    port_names: names,
    build: Some(build),
    images: &[IMAGE],
};

#[async_trait]
impl ServiceKind for Redis {
    fn about(&self) -> &'static About {
        &ABOUT
    }

    /// Every server at once, each with the clock shim when the run preloads it.
    async fn start(&self, s: Start<'_>) -> Result<Started, ClusterError> {
        let (l, aof) = (s.launcher, s.opts.redis_appendfsync);
        let names = names(s.needs);
        let started = futures::future::join_all(
            (names.iter()).map(|name| start(l, name, Role::Primary, aof, &[], true)),
        )
        .await;
        let nodes = started.into_iter().collect::<Result<Vec<_>, _>>()?;
        Ok(Started::listed(nodes, |ep| &mut ep.redis))
    }

    async fn durability(&self, n: NodeAt<'_>) -> Option<Durability> {
        Some(durability(n.addr, n.ep.redis_auth.as_ref()).await)
    }

    fn work_meter(&self) -> Option<Meter> {
        Some(WORK_METER)
    }

    async fn work(&self, ep: &Endpoints) -> Result<Reading, String> {
        work(&ep.redis, ep.redis_auth.as_ref()).await
    }

    fn copy_from_target(&self, from: FromTarget<'_>, out: &mut Endpoints) -> Result<(), Missing> {
        let (target, n) = (from.target, from.needs.redis_nodes());
        if target.redis.len() < n {
            return Err(("[redis] nodes", format!("{n} independent Redis server(s)")));
        }
        out.redis = target.redis[..n].to_vec();
        out.redis_auth = target.redis_auth.clone();
        Ok(())
    }

    async fn claim(&self, ep: &Endpoints) -> Result<(), ClusterError> {
        for &addr in &ep.redis {
            claim_server(addr, ep.redis_auth.as_ref(), &ep.prefix).await?;
        }
        Ok(())
    }

    async fn release(&self, ep: &Endpoints) -> Vec<String> {
        let mut failures = Vec::new();
        for &addr in &ep.redis {
            failures.extend(release_server(addr, ep.redis_auth.as_ref(), &ep.prefix).await);
        }
        failures
    }

    async fn describe(&self, ep: &Endpoints) -> Vec<NodeInfo> {
        let role = if ep.redis.len() == 1 {
            Role::Primary
        } else {
            Role::Member
        };
        let version = |a| bounded("version", version(a, ep.redis_auth.as_ref()));
        numbered(Service::Redis, role, &ep.redis, version).await
    }
}

/// Redis: an acknowledged write is in memory only without an append-only file (RDB snapshots,
/// `save`, are periodic); with one it was written to the file before the reply, and fsynced
/// too with `appendfsync always`.
fn acked(appendonly: &str, appendfsync: &str) -> Acked {
    match (appendonly, appendfsync) {
        ("yes", "always") => Acked::Disk,
        ("yes", _) => Acked::Os,
        _ => Acked::Memory,
    }
}

/// What the Redis server (or Cluster node) at `addr` does with a write, as it says.
pub(in crate::cluster) async fn durability(addr: SocketAddr, auth: Option<&Auth>) -> Durability {
    queried(persistence(addr, auth), |kv| {
        acked(setting(kv, "appendonly"), setting(kv, "appendfsync"))
    })
    .await
}

/// A connection to the Redis server at `addr`.
pub(in crate::cluster) async fn connection(
    addr: SocketAddr,
    auth: Option<&Auth>,
) -> Result<::redis::aio::MultiplexedConnection, String> {
    let client = client(addr, auth).map_err(|e| e.to_string())?;
    client
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| e.to_string())
}

/// Runs `cmd` on the Redis server (or Sentinel) at `addr`.
pub(in crate::cluster) async fn query<T: ::redis::FromRedisValue>(
    addr: SocketAddr,
    auth: Option<&Auth>,
    cmd: &::redis::Cmd,
) -> Result<T, String> {
    let mut con = connection(addr, auth).await?;
    cmd.query_async(&mut con).await.map_err(|e| e.to_string())
}

/// Keys under the prefix (at most `limit`), by a bounded SCAN.
pub(in crate::cluster) async fn prefix_keys(
    con: &mut ::redis::aio::MultiplexedConnection,
    p: &Prefix,
    limit: usize,
) -> Result<Vec<String>, String> {
    let mut cursor: u64 = 0;
    let mut keys = Vec::new();
    // A SCAN round trip visits ~1000 slots; a million keys on the server is ~1000 rounds.
    for _ in 0..100_000 {
        let (next, batch): (u64, Vec<String>) = ::redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{}*", p.key_start()))
            .arg("COUNT")
            .arg(1000)
            .query_async(con)
            .await
            .map_err(|e| e.to_string())?;
        keys.extend(batch);
        cursor = next;
        if cursor == 0 || keys.len() >= limit {
            break;
        }
    }
    keys.truncate(limit);
    Ok(keys)
}

/// A claim on one Redis server: keys `<prefix>:*`, marked by the owner key.
pub(in crate::cluster) async fn claim_server(
    addr: SocketAddr,
    auth: Option<&Auth>,
    p: &Prefix,
) -> Result<(), ClusterError> {
    let err = |e| target_err(&format!("redis {addr}"), e);
    let mut con = bounded("connect", connection(addr, auth))
        .await
        .map_err(err)?;
    let keys = bounded("scan keys", prefix_keys(&mut con, p, 100))
        .await
        .map_err(err)?;
    owned_or_empty(&format!("redis {addr}"), p, &keys, &p.owner_key())?;
    let set = ::redis::cmd("SET")
        .arg(p.owner_key())
        .arg(MARKER)
        .to_owned();
    bounded("mark the prefix", async {
        set.query_async::<()>(&mut con)
            .await
            .map_err(|e| e.to_string())
    })
    .await
    .map_err(err)?;
    Ok(())
}

/// Deletes every key of the prefix from one Redis server (bounded); what failed, as a line
/// of the clean-up's error.
pub(in crate::cluster) async fn release_server(
    addr: SocketAddr,
    auth: Option<&Auth>,
    p: &Prefix,
) -> Option<String> {
    (bounded("delete keys", wipe(addr, auth, p)).await.err()).map(|e| format!("redis {addr}: {e}"))
}

/// Deletes every key of the prefix from one Redis server, a thousand at a time.
async fn wipe(addr: SocketAddr, auth: Option<&Auth>, p: &Prefix) -> Result<(), String> {
    let mut con = connection(addr, auth).await?;
    loop {
        let keys = prefix_keys(&mut con, p, 1000).await?;
        if keys.is_empty() {
            return Ok(());
        }
        ::redis::cmd("DEL")
            .arg(&keys)
            .query_async::<()>(&mut con)
            .await
            .map_err(|e| e.to_string())?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_say_where_an_acknowledged_write_is() {
        assert_eq!(acked("no", "everysec"), Acked::Memory);
        assert_eq!(acked("yes", "no"), Acked::Os);
        assert_eq!(acked("yes", "everysec"), Acked::Os);
        assert_eq!(acked("yes", "always"), Acked::Disk);
    }

    #[test]
    fn the_build_says_valkey_and_its_allocator() {
        let redis =
            "# Server\r\nredis_version:7.0.15\r\n# Memory\r\nmem_allocator:jemalloc-5.3.0\r\n";
        assert_eq!(describe_build(redis), "7.0.15 (jemalloc-5.3.0)");
        let valkey = "redis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:9.1.2\r\n\
                      mem_allocator:libc\r\n";
        assert_eq!(describe_build(valkey), "valkey 9.1.2 (libc)");
        // A Sentinel answers no memory section.
        assert_eq!(describe_build("redis_version:7.0.15\r\n"), "7.0.15");
    }
}
