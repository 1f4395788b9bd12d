//! A standalone `redis-server` on its own port, no persistence.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;

use super::{
    Auth, ClusterError, Node, Role, Server, ServerProcess, Service, find_binary, wait_ready,
};

pub(super) fn check_installed() -> Result<(), ClusterError> {
    find_binary("redis-server", "redis-server").map(|_| ())
}

/// Starts `redis-server` named `name` bound to `addr` (data in `base/name`) and waits until
/// it answers.
pub(super) async fn start(
    name: &str,
    addr: SocketAddr,
    base: &Path,
    log_dir: &Path,
    clock_shim: Option<&Path>,
) -> Result<Node, ClusterError> {
    start_with(name, Role::Primary, addr, base, log_dir, &[], clock_shim).await
}

/// [`start`] with a role and extra server arguments (e.g. `--replicaof`); with `clock_shim`
/// the server's wall clock can be moved at run time ([`super::clock`]).
pub(super) async fn start_with(
    name: &str,
    role: Role,
    addr: SocketAddr,
    base: &Path,
    log_dir: &Path,
    extra: &[String],
    clock_shim: Option<&Path>,
) -> Result<Node, ClusterError> {
    let bin = find_binary("redis-server", "redis-server")?;
    let dir = &base.join(name);
    std::fs::create_dir_all(dir)
        .map_err(|e| ClusterError::io(format!("create {}", dir.display()), e))?;
    let mut cmd = Command::new(bin);
    cmd.arg("--bind")
        .arg(addr.ip().to_string())
        .arg("--port")
        .arg(addr.port().to_string())
        .args([
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "no",
            "--logfile",
            "",
        ])
        // Namespaced addresses are not loopback, so protected mode would refuse clients.
        .args(["--protected-mode", "no"])
        .arg("--dir")
        .arg(dir)
        .args(extra);
    if let Some(shim) = clock_shim {
        let control = super::clock::create_control(dir)?;
        cmd.env("LD_PRELOAD", shim)
            .env("LOCKBENCH_CLOCK_FILE", control);
    }
    let mut process =
        ServerProcess::spawn(name, addr.ip(), cmd, &log_dir.join(format!("{name}.log")))?;
    let version = wait_ready(name, &mut process, || version(addr, None)).await?;
    Ok(Node {
        name: name.to_string(),
        service: Service::Redis,
        role,
        addr,
        version,
        server: Server::Process(process),
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
