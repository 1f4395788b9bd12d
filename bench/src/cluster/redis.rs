//! A standalone `redis-server` on its own port, without persistence unless the run asks for an
//! append-only file ([`Appendfsync`]): a child process or a container, with the same flags and
//! the same readiness probe.

use std::net::SocketAddr;
use std::process::Command;

use super::backend::wait_ready;
use super::binary::find_binary;
use super::containers::Spec;
use super::error::ClusterError;
use super::model::{Auth, Role, Service};
use super::node::{Node, NodeServer};
use super::provision::Launcher;

pub use super::durability::Appendfsync;

/// Client port inside a container (a local node gets a reserved one).
const PORT: u16 = 6379;

pub(super) fn check_installed() -> Result<(), ClusterError> {
    find_binary("redis-server", "redis-server").map(|_| ())
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
/// moved at run time ([`super::clock`]). A restart after a kill keeps the command line and the
/// data directory, so with an append-only file the node reloads what it acknowledged.
pub(super) async fn start(
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
            let mut cmd = Command::new(find_binary("redis-server", "redis-server")?);
            cmd.arg("--bind")
                .arg(addr.ip().to_string())
                .args(flags(addr.port(), aof, extra))
                .args(["--daemonize", "no", "--logfile", ""])
                .arg("--dir")
                .arg(&dir);
            if let Some(shim) = local.shim().filter(|_| clock) {
                let control = super::clock::create_control(&dir)?;
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
                image: &run.images.redis,
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
pub(super) async fn persistence(
    addr: SocketAddr,
    auth: Option<&Auth>,
) -> Result<Vec<(String, String)>, String> {
    let client = client(addr, auth).map_err(|e| e.to_string())?;
    let mut con = client
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| e.to_string())?;
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

/// The version a Redis server (or Sentinel) at `addr` reports in `INFO server`.
pub(super) async fn version(addr: SocketAddr, auth: Option<&Auth>) -> Result<String, String> {
    let client = client(addr, auth).map_err(|e| e.to_string())?;
    let mut con = client
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| e.to_string())?;
    let info: String = ::redis::cmd("INFO")
        .arg("server")
        .query_async(&mut con)
        .await
        .map_err(|e| e.to_string())?;
    Ok(info
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .unwrap_or("unknown")
        .trim()
        .to_string())
}
