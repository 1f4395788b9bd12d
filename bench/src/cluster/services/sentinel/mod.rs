//! A replicated Redis under Sentinel: one master, two replicas, three sentinels.
//!
//! Sentinels start only once both replicas are online (otherwise a sentinel may not see them
//! for seconds), with a fresh config per run (Sentinel rewrites it) and a fast
//! `down-after-milliseconds` so a failover happens within a chaos window.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::process::Command;
use std::time::Duration;

use async_trait::async_trait;

use super::redis::{Appendfsync, query};
use crate::cluster::backend::wait_ready;
use crate::cluster::builds::Builds;
use crate::cluster::containers::Spec;
use crate::cluster::counters::{Meter, Reading};
use crate::cluster::error::ClusterError;
use crate::cluster::external::{Missing, bounded, numbered, servers_or, target_err, unowned_node};
use crate::cluster::kind::{About, Asked, FromTarget, ServiceKind, Start, Started};
use crate::cluster::model::{Auth, Endpoints, NodeInfo, Role, Service};
use crate::cluster::node::{Node, NodeServer};
use crate::cluster::provision::Launcher;

/// The variable a worker reads the Sentinels' password from.
pub const PASSWORD_ENV: &str = "LOCKBENCH_SENTINEL_PASSWORD";

/// The name the sentinels monitor the master under.
pub const MASTER_NAME: &str = "lockbench";

impl Endpoints {
    /// The master name to ask the sentinels about.
    pub fn sentinel_master(&self) -> &str {
        self.sentinel_master.as_deref().unwrap_or(MASTER_NAME)
    }
}

/// Replicas of the master.
const REPLICAS: usize = 2;
/// Sentinels watching it: two must agree that it is down.
const SENTINELS: usize = 3;
/// Sentinel port inside a container (a local node gets a reserved one).
const PORT: u16 = 26379;

/// Every node of the set, master first: the names local ports are reserved under.
pub(in crate::cluster) fn port_names() -> Vec<String> {
    let replicas = (1..=REPLICAS).map(|i| format!("redis-replica-{i}"));
    let sentinels = (1..=SENTINELS).map(|i| format!("sentinel-{i}"));
    std::iter::once("redis-master".to_string())
        .chain(replicas)
        .chain(sentinels)
        .collect()
}

pub(in crate::cluster) fn check_installed(builds: Builds) -> Result<(), ClusterError> {
    builds.redis.sentinel().map(|_| ())
}

/// The lines that make a sentinel watch `master`: two sentinels must agree it is down, which
/// they decide after 1 s without an answer.
pub(in crate::cluster) fn monitor_config(master: SocketAddr) -> String {
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
pub(in crate::cluster) async fn replicas_online(
    master: SocketAddr,
    n: usize,
) -> Result<(), String> {
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
pub(in crate::cluster) async fn sees_set(addr: SocketAddr) -> Result<(), String> {
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

/// The configuration of one sentinel (Sentinel rewrites it as it learns): listening on
/// `port` (of `bind` only, when given), its state in `dir`.
fn config(port: u16, bind: Option<IpAddr>, dir: &str, master: SocketAddr) -> String {
    let bind = bind.map(|ip| format!("bind {ip}\n")).unwrap_or_default();
    format!(
        "port {port}\n{bind}protected-mode no\ndir {dir}\n{}",
        monitor_config(master)
    )
}

/// Starts the set, every Redis node with persistence `aof`, and waits until every sentinel
/// sees the master, both replicas and the two other sentinels. Sentinels start only once both
/// replicas are online.
pub(in crate::cluster) async fn start(
    l: Launcher<'_>,
    aof: Appendfsync,
) -> Result<Vec<Node>, ClusterError> {
    let fast_sync = ["--repl-diskless-sync-delay".to_string(), "0".into()];
    let master =
        super::redis::start(l, "redis-master", Role::Master, aof, &fast_sync, false).await?;
    let master_addr = master.addr;
    let mut nodes = vec![master];
    let mut replica_args = fast_sync.to_vec();
    replica_args.extend([
        "--replicaof".into(),
        master_addr.ip().to_string(),
        master_addr.port().to_string(),
    ]);
    let replicas = futures::future::join_all((1..=REPLICAS).map(|i| {
        let name = format!("redis-replica-{i}");
        let args = &replica_args;
        async move { super::redis::start(l, &name, Role::Replica, aof, args, false).await }
    }))
    .await;
    for r in replicas {
        nodes.push(r?);
    }
    wait_ready("redis-master", &mut [&mut *nodes[0].server], || {
        replicas_online(master_addr, REPLICAS)
    })
    .await?;
    let mut sentinels = Vec::with_capacity(SENTINELS);
    for i in 1..=SENTINELS {
        let name = format!("sentinel-{i}");
        let (addr, server) = launch_sentinel(l, &name, master_addr).await?;
        sentinels.push(Node {
            name,
            service: Service::Sentinel,
            role: Role::Sentinel,
            addr,
            version: nodes[0].version.clone(),
            server,
        });
    }
    let waits = sentinels.iter_mut().map(|n| {
        let (name, addr) = (n.name.clone(), n.addr);
        let server = &mut *n.server;
        async move { wait_ready(&name, &mut [server], || sees_set(addr)).await }
    });
    for r in futures::future::join_all(waits).await {
        r?;
    }
    nodes.append(&mut sentinels);
    Ok(nodes)
}

/// Starts one sentinel of the master at `master`.
async fn launch_sentinel(
    l: Launcher<'_>,
    name: &str,
    master: SocketAddr,
) -> Result<(SocketAddr, Box<dyn NodeServer>), ClusterError> {
    match l {
        Launcher::Local(local) => {
            let addr = local.addr(name);
            let dir = local.dir(name)?;
            let conf = dir.join("sentinel.conf");
            let text = config(
                addr.port(),
                Some(addr.ip()),
                &dir.display().to_string(),
                master,
            );
            std::fs::write(&conf, text)
                .map_err(|e| ClusterError::io(format!("write {}", conf.display()), e))?;
            let mut cmd = Command::new(local.builds().redis.sentinel()?);
            cmd.arg(&conf);
            Ok((addr, Box::new(local.spawn(name, cmd)?)))
        }
        Launcher::Containers(run) => {
            // A restarted sentinel keeps the config it rewrote.
            let script = "[ -f /tmp/sentinel.conf ] || printf '%s' \"$LOCKBENCH_SENTINEL_CONF\" \
                          > /tmp/sentinel.conf; exec redis-server /tmp/sentinel.conf --sentinel";
            let spec = Spec {
                name: name.to_string(),
                image: run.images.get(super::redis::IMAGE),
                cmd: vec!["sh".into(), "-c".into(), script.into()],
                env: vec![(
                    "LOCKBENCH_SENTINEL_CONF",
                    config(PORT, None, "/tmp", master),
                )],
            };
            let c = run.launch_one(spec).await?;
            Ok((c.addr(PORT), Box::new(c)))
        }
    }
}

/// The Sentinel set: its master and replicas are Redis nodes, whose master it names. The
/// Sentinels keep no data of a run (no durability of their own).
pub(in crate::cluster) struct Sentinel;

/// Its nodes run Redis's build and image.
const ABOUT: About = About {
    service: Service::Sentinel,
    wanted: |needs| needs.sentinel,
    check_installed: |b| super::redis::check_installed(b).and_then(|()| check_installed(b)),
    port_names: |_| port_names(),
    ..super::redis::ABOUT
};

#[async_trait]
impl ServiceKind for Sentinel {
    fn about(&self) -> &'static About {
        &ABOUT
    }

    async fn start(&self, s: Start<'_>) -> Result<Started, ClusterError> {
        let nodes = start(s.launcher, s.opts.redis_appendfsync).await?;
        let sentinels: Vec<SocketAddr> = (nodes.iter())
            .filter(|n| n.service == Service::Sentinel)
            .map(|n| n.addr)
            .collect();
        Ok(Started::new(nodes, move |ep| {
            ep.sentinels.extend(sentinels)
        }))
    }

    fn names_master_of(&self) -> Option<Service> {
        Some(Service::Redis)
    }

    async fn leader<'n>(&self, q: Asked<'n, '_>) -> Result<Option<&'n Node>, ClusterError> {
        if q.service != Service::Redis {
            return Err(ClusterError::Leader {
                service: q.service,
                detail: "sentinels elect no leader of their own here; ask for the Redis master"
                    .into(),
            });
        }
        // The master is whatever the sentinels say now (it moves on failover).
        let ep = q.endpoints;
        let auth = ep.sentinel_auth.as_ref();
        match current_master(&ep.sentinels, ep.sentinel_master(), auth).await {
            Ok(addr) => Ok(q.members.into_iter().find(|n| n.addr == addr)),
            Err(_) => Ok(None),
        }
    }

    fn work_meter(&self) -> Option<Meter> {
        Some(Meter {
            unit: "commands",
            source: "INFO commandstats and INFO stats of the master the Sentinels name (not of \
                     the Sentinels, nor of the replicas, whose commands replay the master's)",
        })
    }

    /// The master the sentinels name now: the only node the locks send requests to (the
    /// sentinels' own pings and hellos are background the run subtracts).
    async fn work(&self, ep: &Endpoints) -> Result<Reading, String> {
        let master = named_master(ep)
            .await
            .map_err(|e| e.to_string())?
            .ok_or("no sentinel to name the master")?;
        super::redis::work(&[master], ep.redis_auth.as_ref()).await
    }

    /// Claims the master the sentinels name (a Redis server like the others).
    fn copy_from_target(&self, from: FromTarget<'_>, out: &mut Endpoints) -> Result<(), Missing> {
        let target = from.target;
        let (servers, auth) = (&target.sentinels, &target.sentinel_auth);
        (out.sentinels, out.sentinel_auth) =
            servers_or(servers, auth, ("[sentinel]", "Redis Sentinels"))?;
        out.sentinel_master = target.sentinel_master.clone();
        // The master the sentinels name is a Redis server like the others.
        out.redis_auth = target.redis_auth.clone();
        Ok(())
    }

    async fn claim(&self, ep: &Endpoints) -> Result<(), ClusterError> {
        if let Some(addr) = named_master(ep).await? {
            super::redis::claim_server(addr, ep.redis_auth.as_ref(), &ep.prefix).await?;
        }
        Ok(())
    }

    async fn release(&self, ep: &Endpoints) -> Vec<String> {
        match named_master(ep).await {
            Ok(Some(addr)) => {
                let auth = ep.redis_auth.as_ref();
                (super::redis::release_server(addr, auth, &ep.prefix).await)
                    .into_iter()
                    .collect()
            }
            Ok(None) => Vec::new(),
            Err(e) => vec![e.to_string()],
        }
    }

    async fn describe(&self, ep: &Endpoints) -> Vec<NodeInfo> {
        let version = |addr, auth| bounded("version", super::redis::version(addr, auth));
        let of_sentinel = |a| version(a, ep.sentinel_auth.as_ref());
        let mut out = numbered(
            Service::Sentinel,
            Role::Sentinel,
            &ep.sentinels,
            of_sentinel,
        )
        .await;
        // The master the sentinels name at the start; a failover may move it during the run.
        if let Ok(Some(addr)) = named_master(ep).await
            && !ep.redis.contains(&addr)
        {
            let v = version(addr, ep.redis_auth.as_ref()).await;
            let name = "redis-master".to_string();
            out.push(unowned_node(name, Service::Redis, Role::Master, addr, v));
        }
        out
    }
}

/// The master the sentinels of `ep` name now; `None` without sentinels.
async fn named_master(ep: &Endpoints) -> Result<Option<SocketAddr>, ClusterError> {
    if ep.sentinels.is_empty() {
        return Ok(None);
    }
    let auth = ep.sentinel_auth.as_ref();
    current_master(&ep.sentinels, ep.sentinel_master(), auth)
        .await
        .map(Some)
        .map_err(|e| target_err("sentinel", format!("which node is master: {e}")))
}
