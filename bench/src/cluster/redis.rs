//! A standalone `redis-server` on its own port, no persistence: a child process or a
//! container, with the same flags and the same readiness probe.

use std::net::SocketAddr;
use std::process::Command;

use super::backend::{Launcher, NodeServer, wait_ready};
use super::containers::Spec;
use super::{Auth, ClusterError, Node, Role, Service, find_binary};

/// Client port inside a container (a local node gets a reserved one).
const PORT: u16 = 6379;

pub(super) fn check_installed() -> Result<(), ClusterError> {
    find_binary("redis-server", "redis-server").map(|_| ())
}

/// Flags every Redis node gets wherever it runs, then `extra` (e.g. `--replicaof`): no
/// persistence, and no protected mode (namespaced and container addresses are not loopback,
/// so it would refuse clients).
fn flags(port: u16, extra: &[String]) -> Vec<String> {
    let mut out: Vec<String> = ["--port", &port.to_string()]
        .into_iter()
        .chain(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
        .map(String::from)
        .collect();
    out.extend_from_slice(extra);
    out
}

/// Starts `redis-server` as node `name` with `extra` flags and waits until it answers. With
/// `clock` and a run that preloads the clock shim, its wall clock can be moved at run time
/// ([`super::clock`]).
pub(super) async fn start(
    l: Launcher<'_>,
    name: &str,
    role: Role,
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
                .args(flags(addr.port(), extra))
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
            let mut cmd = vec!["redis-server".to_string()];
            cmd.extend(flags(PORT, extra));
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
