//! A replicated Redis under Sentinel: one master, two replicas, three sentinels.
//!
//! Sentinels start only once both replicas are online (otherwise a sentinel may not see them
//! for seconds), with a fresh config per run (Sentinel rewrites it) and a fast
//! `down-after-milliseconds` so a failover happens within a chaos window.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::redis::start_with;
use super::{
    Auth, ClusterError, Node, PortAllocator, Role, Server, ServerProcess, Service, find_binary,
    wait_ready,
};

/// The name the sentinels monitor the master under.
pub const MASTER_NAME: &str = "lockbench";

/// The sentinel set's reserved addresses.
pub(super) struct Plan {
    master: SocketAddr,
    replicas: [SocketAddr; 2],
    sentinels: [SocketAddr; 3],
}

impl Plan {
    /// Reserves every port of the set.
    pub(super) fn allocate(ports: &mut PortAllocator) -> Result<Self, ClusterError> {
        Ok(Self {
            master: ports.allocate("redis-master")?,
            replicas: [
                ports.allocate("redis-replica-1")?,
                ports.allocate("redis-replica-2")?,
            ],
            sentinels: [
                ports.allocate("sentinel-1")?,
                ports.allocate("sentinel-2")?,
                ports.allocate("sentinel-3")?,
            ],
        })
    }
}

pub(super) fn check_installed() -> Result<(), ClusterError> {
    find_binary("redis-sentinel", "redis-sentinel").map(|_| ())
}

async fn query<T: redis::FromRedisValue>(
    addr: SocketAddr,
    auth: Option<&Auth>,
    cmd: &redis::Cmd,
) -> Result<T, String> {
    let client = super::redis::client(addr, auth).map_err(|e| e.to_string())?;
    let mut con = client
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| e.to_string())?;
    cmd.query_async(&mut con).await.map_err(|e| e.to_string())
}

/// The lines that make a sentinel watch `master`: two sentinels must agree it is down, which
/// they decide after 1 s without an answer.
pub(super) fn monitor_config(master: SocketAddr) -> String {
    format!(
        "sentinel monitor {MASTER_NAME} {ip} {port} 2\n\
         sentinel down-after-milliseconds {MASTER_NAME} 1000\n\
         sentinel failover-timeout {MASTER_NAME} 3000\n\
         sentinel parallel-syncs {MASTER_NAME} 1\n",
        ip = master.ip(),
        port = master.port(),
    )
}

/// Ok once the master at `master` has `n` replicas online.
pub(super) async fn replicas_online(master: SocketAddr, n: usize) -> Result<(), String> {
    let info: String = query(master, None, redis::cmd("INFO").arg("replication")).await?;
    let online = info
        .lines()
        .filter(|l| l.starts_with("slave") && l.contains("state=online"))
        .count();
    if online == n {
        Ok(())
    } else {
        Err(format!("{online} of {n} replicas online"))
    }
}

/// Ok once the sentinel at `addr` sees the master, both replicas and two other sentinels.
pub(super) async fn sees_set(addr: SocketAddr) -> Result<(), String> {
    let m = master_state(addr).await?;
    let field = |k: &str| m.get(k).cloned().unwrap_or_default();
    if field("num-slaves") == "2" && field("num-other-sentinels") == "2" {
        Ok(())
    } else {
        Err(format!(
            "sees {} replicas, {} other sentinels",
            field("num-slaves"),
            field("num-other-sentinels")
        ))
    }
}

/// `SENTINEL MASTER <name>` as a field map.
async fn master_state(sentinel: SocketAddr) -> Result<HashMap<String, String>, String> {
    let flat: Vec<String> = query(
        sentinel,
        None,
        redis::cmd("SENTINEL").arg("MASTER").arg(MASTER_NAME),
    )
    .await?;
    Ok(flat
        .chunks(2)
        .filter_map(|kv| Some((kv.first()?.clone(), kv.get(1)?.clone())))
        .collect())
}

/// The master address the sentinels currently agree on (asked of the first that answers).
pub async fn current_master(
    sentinels: &[SocketAddr],
    name: &str,
    auth: Option<&Auth>,
) -> Result<SocketAddr, String> {
    let mut last = String::from("no sentinel");
    for s in sentinels {
        let cmd = redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(name)
            .to_owned();
        match tokio::time::timeout(
            Duration::from_secs(1),
            query::<(String, u16)>(*s, auth, &cmd),
        )
        .await
        {
            Ok(Ok((ip, port))) => {
                return format!("{ip}:{port}").parse().map_err(|e| format!("{e}"));
            }
            Ok(Err(e)) => last = e,
            Err(_) => last = format!("sentinel {s} timed out"),
        }
    }
    Err(last)
}

/// Starts the set and waits until every sentinel sees the master, both replicas and the
/// two other sentinels. Nodes are pushed into `nodes` as they start, so a failure part-way
/// still leaves every started process owned by the cluster.
pub(super) async fn start(
    plan: &Plan,
    base: &Path,
    log_dir: &Path,
    nodes: &mut Vec<Node>,
) -> Result<(), ClusterError> {
    let bin = find_binary("redis-sentinel", "redis-sentinel")?;
    let fast_sync = vec!["--repl-diskless-sync-delay".to_string(), "0".into()];
    nodes.push(
        start_with(
            "redis-master",
            Role::Master,
            plan.master,
            base,
            log_dir,
            &fast_sync,
            None,
        )
        .await?,
    );
    let mut replica_args = fast_sync.clone();
    replica_args.extend([
        "--replicaof".into(),
        plan.master.ip().to_string(),
        plan.master.port().to_string(),
    ]);
    let replicas = futures::future::join_all(plan.replicas.iter().enumerate().map(|(i, addr)| {
        let name = format!("redis-replica-{}", i + 1);
        let args = replica_args.clone();
        async move { start_with(&name, Role::Replica, *addr, base, log_dir, &args, None).await }
    }))
    .await;
    for r in replicas {
        nodes.push(r?);
    }
    let master = plan.master;
    let master_idx = nodes.len() - 3;
    wait_ready(
        "redis-master",
        nodes[master_idx].server.process_mut(),
        || replicas_online(master, 2),
    )
    .await?;

    for (i, addr) in plan.sentinels.iter().enumerate() {
        let name = format!("sentinel-{}", i + 1);
        let dir = base.join(&name);
        std::fs::create_dir_all(&dir)
            .map_err(|e| ClusterError::io(format!("create {}", dir.display()), e))?;
        let conf = dir.join("sentinel.conf");
        let text = format!(
            "port {port}\nbind {ip}\nprotected-mode no\ndir {dir}\n{monitor}",
            port = addr.port(),
            ip = addr.ip(),
            dir = dir.display(),
            monitor = monitor_config(master),
        );
        std::fs::write(&conf, text)
            .map_err(|e| ClusterError::io(format!("write {}", conf.display()), e))?;
        let mut cmd = Command::new(&bin);
        cmd.arg(&conf);
        let process =
            ServerProcess::spawn(&name, addr.ip(), cmd, &log_dir.join(format!("{name}.log")))?;
        nodes.push(Node {
            name,
            service: Service::Sentinel,
            role: Role::Sentinel,
            addr: *addr,
            version: nodes[master_idx].version.clone(),
            server: Server::Process(process),
        });
    }
    for i in 0..plan.sentinels.len() {
        let addr = plan.sentinels[i];
        let idx = nodes.len() - plan.sentinels.len() + i;
        let name = nodes[idx].name.clone();
        wait_ready(&name, nodes[idx].server.process_mut(), || sees_set(addr)).await?;
    }
    Ok(())
}
