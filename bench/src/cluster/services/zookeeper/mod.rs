//! A 3-node ZooKeeper 3.8 ensemble, each node a JVM of its own with its own data directory,
//! client port and quorum / election ports: locally from Debian's `zookeeper` package, in a
//! container through the image's `zkServer.sh`. The configuration and readiness are shared.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use async_trait::async_trait;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::cluster::backend::wait_ready;
use crate::cluster::binary::find_binary;
use crate::cluster::builds::Builds;
use crate::cluster::containers::{Containers, Image, Spec};
use crate::cluster::counters::{self, BYTES_IN, FSYNCS, Meter, Reading, TOTAL};
use crate::cluster::durability::{Acked, Durability};
use crate::cluster::error::ClusterError;
use crate::cluster::external::{
    CALL_TIMEOUT, Listed, MARKER, Missing, bounded, foreign, numbered, servers_or, target_err,
};
use crate::cluster::kind::{About, Asked, FromTarget, NodeAt, ServiceKind, Start, Started};
use crate::cluster::local::Local;
use crate::cluster::model::{Auth, Endpoints, NodeInfo, Role, Service};
use crate::cluster::node::{Node, NodeServer};
use crate::cluster::provision::Launcher;

/// The variable a worker reads the ZooKeeper (digest auth) password from.
pub const PASSWORD_ENV: &str = "LOCKBENCH_ZOOKEEPER_PASSWORD";

/// Its image: ZooKeeper (`zkServer.sh` on PATH, `sh`).
pub(in crate::cluster) const IMAGE: Image = Image {
    var: "LOCKBENCH_IMAGE_ZOOKEEPER",
    official: "zookeeper:3.8",
};

/// Members of the ensemble: 3 tolerates one failed node, the smallest set that can lose one.
pub const MEMBERS: usize = 3;

/// Debian's jar: bookworm's ZooKeeper, and the proof that the libraries every build's
/// manifest names (netty, jetty, …) are installed.
const JAR: &str = crate::cluster::installed::BOOKWORM_ZOOKEEPER_JAR;
/// Logging backend for ZooKeeper's slf4j, not on the jar's Class-Path.
const LOG_JARS: [&str; 2] = [
    "/usr/share/java/slf4j-log4j12.jar",
    "/usr/share/java/log4j-1.2.jar",
];

/// 200 ms instead of the default 2000: failure detection and session timeouts are multiples
/// of the tick (sessions may last 2–20 ticks), and with 2 s a paused leader takes ~10 s to
/// notice. Elections then take 2.5–3.5 s on a 2-core machine.
const TICK_MS: u32 = 200;

/// ~64 MB per node: a small heap, the serial collector (no GC threads competing for two
/// cores), and the C1 compiler only, which starts faster.
const JVM_FLAGS: [&str; 4] = [
    "-Xmx128m",
    "-Xms16m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
];

/// A bound on one four-letter-word query.
const FOUR_LETTER_TIMEOUT: Duration = Duration::from_secs(2);

/// Ports inside a container: client, quorum, election (a local node gets reserved ones).
const PORTS: [u16; 3] = [2181, 2888, 3888];

/// Every port of every member: the names local ports are reserved under.
pub(in crate::cluster) fn port_names() -> Vec<String> {
    (1..=MEMBERS)
        .flat_map(|i| {
            let name = format!("zookeeper-{i}");
            [
                name.clone(),
                format!("{name} (quorum)"),
                format!("{name} (election)"),
            ]
        })
        .collect()
}

pub(in crate::cluster) fn check_installed(builds: Builds) -> Result<(), ClusterError> {
    find_binary("java", "openjdk-17-jre-headless")?;
    builds.zookeeper.jars()?;
    for jar in std::iter::once(JAR).chain(LOG_JARS) {
        if !Path::new(jar).is_file() {
            return Err(ClusterError::MissingFile {
                path: PathBuf::from(jar),
                package: "zookeeper".into(),
            });
        }
    }
    Ok(())
}

/// `server.N=host:quorum:election` lines naming every member (by address: see
/// [`Containers::launch_group`]).
fn servers(members: &[(std::net::IpAddr, u16, u16)]) -> String {
    members
        .iter()
        .enumerate()
        .map(|(i, (ip, quorum, election))| format!("server.{}={ip}:{quorum}:{election}\n", i + 1))
        .collect()
}

/// Starts every member and waits until the ensemble has elected a leader and every member
/// answers (one `leader`, the others `follower`).
pub(in crate::cluster) async fn start(l: Launcher<'_>) -> Result<Vec<Node>, ClusterError> {
    let (clients, mut servers) = match l {
        Launcher::Local(local) => launch_local(local)?,
        Launcher::Containers(run) => launch_containers(run).await?,
    };
    let mut watch: Vec<&mut dyn NodeServer> = servers.iter_mut().map(|s| &mut **s).collect();
    let versions = wait_ready("zookeeper", &mut watch, || quorum_versions(clients.clone())).await?;
    Ok(servers
        .into_iter()
        .zip(clients)
        .zip(versions)
        .enumerate()
        .map(|(i, ((server, addr), version))| Node {
            name: format!("zookeeper-{}", i + 1),
            service: Service::Zookeeper,
            role: Role::Member,
            addr,
            version,
            server,
        })
        .collect())
}

/// Each member's client address and server.
type Launched = (Vec<SocketAddr>, Vec<Box<dyn NodeServer>>);

/// Members as JVMs on their reserved ports, configured in their data directories.
fn launch_local(local: &Local) -> Result<Launched, ClusterError> {
    let java = find_binary("java", "openjdk-17-jre-headless")?;
    let jars = local.builds().zookeeper.jars()?;
    let names: Vec<String> = (1..=MEMBERS).map(|i| format!("zookeeper-{i}")).collect();
    let clients: Vec<SocketAddr> = names.iter().map(|n| local.addr(n)).collect();
    let members: Vec<_> = names
        .iter()
        .map(|n| {
            let quorum = local.addr(&format!("{n} (quorum)"));
            let election = local.addr(&format!("{n} (election)"));
            (quorum.ip(), quorum.port(), election.port())
        })
        .collect();
    let servers = servers(&members);
    let mut processes: Vec<Box<dyn NodeServer>> = Vec::with_capacity(MEMBERS);
    for (i, (name, client)) in names.iter().zip(&clients).enumerate() {
        let id = i + 1;
        let node_dir = local.dir(name)?;
        let data = node_dir.join("data");
        std::fs::create_dir_all(&data)
            .map_err(|e| ClusterError::io(format!("create {}", data.display()), e))?;
        let write = |file: PathBuf, text: String| {
            std::fs::write(&file, text)
                .map_err(|e| ClusterError::io(format!("write {}", file.display()), e))
        };
        write(data.join("myid"), format!("{id}\n"))?;
        let cfg = node_dir.join("zoo.cfg");
        write(
            cfg.clone(),
            config(
                &data.display().to_string(),
                Some(client.ip()),
                client.port(),
                &servers,
            ),
        )?;
        // Logs to stdout, which the process guard sends to the node's log file.
        let log4j = node_dir.join("log4j.properties");
        write(
            log4j.clone(),
            "log4j.rootLogger=INFO, CONSOLE\n\
             log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender\n\
             log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout\n\
             log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} - %-5p [%t:%C{1}@%L] - %m%n\n"
                .into(),
        )?;
        let classpath = jars
            .iter()
            .map(|j| j.display().to_string())
            .chain(LOG_JARS.map(String::from))
            .collect::<Vec<_>>()
            .join(":");
        let mut cmd = Command::new(&java);
        cmd.args(JVM_FLAGS)
            .arg(format!("-Dlog4j.configuration=file:{}", log4j.display()))
            .arg("-cp")
            .arg(classpath)
            .arg("org.apache.zookeeper.server.quorum.QuorumPeerMain")
            .arg(&cfg);
        processes.push(Box::new(local.spawn(name, cmd)?));
    }
    Ok((clients, processes))
}

/// Members as containers, each writing its configuration from the environment.
async fn launch_containers(run: &Containers) -> Result<Launched, ClusterError> {
    let [client, quorum, election] = PORTS;
    let started = run
        .launch_group(MEMBERS as u32, |ips| {
            let members: Vec<_> = ips
                .iter()
                .map(|ip| ((*ip).into(), quorum, election))
                .collect();
            let conf = config("/tmp/zk/data", None, client, &servers(&members));
            (1..=ips.len())
                .map(|i| Spec {
                    name: format!("zookeeper-{i}"),
                    image: run.images.get(IMAGE),
                    cmd: vec![
                        "sh".into(),
                        "-c".into(),
                        format!(
                            "set -e; mkdir -p /tmp/zk/data; echo {i} > /tmp/zk/data/myid; \
                             printf '%s' \"$LOCKBENCH_ZOO_CFG\" > /tmp/zk/zoo.cfg; \
                             exec zkServer.sh start-foreground /tmp/zk/zoo.cfg"
                        ),
                    ],
                    env: vec![
                        ("LOCKBENCH_ZOO_CFG", conf.clone()),
                        // The official image's default heap is large; these match local mode.
                        ("JVMFLAGS", JVM_FLAGS.join(" ")),
                    ],
                })
                .collect()
        })
        .await?;
    Ok(started
        .into_iter()
        .map(|(_, c)| (c.addr(client), Box::new(c) as Box<dyn NodeServer>))
        .unzip())
}

/// The configuration of one member: data in `data_dir`, clients on `client_port` (of
/// `client_ip` only, when given), the ensemble in `servers` (`server.N=host:quorum:election`
/// lines).
pub(in crate::cluster) fn config(
    data_dir: &str,
    client_ip: Option<std::net::IpAddr>,
    client_port: u16,
    servers: &str,
) -> String {
    let client_ip = client_ip
        .map(|ip| format!("clientPortAddress={ip}\n"))
        .unwrap_or_default();
    format!(
        "tickTime={TICK_MS}\n\
         initLimit=10\n\
         syncLimit=5\n\
         dataDir={data_dir}\n\
         clientPort={client_port}\n\
         {client_ip}\
         # every buyer may hold a session and all come from one address; the default\n\
         # of 60 connections per address would refuse the rest\n\
         maxClientCnxns=1024\n\
         admin.enableServer=false\n\
         # srvr tells readiness and leadership, mntr the packets served\n\
         4lw.commands.whitelist=srvr,mntr\n\
         {servers}"
    )
}

/// Ok with every member's version once the members at `clients` have one leader and the
/// rest follow it.
pub(in crate::cluster) async fn quorum_versions(
    clients: Vec<SocketAddr>,
) -> Result<Vec<String>, String> {
    let answers = futures::future::join_all(clients.iter().map(|a| srvr(*a))).await;
    let mut modes = Vec::new();
    let mut versions = Vec::new();
    for (addr, answer) in clients.iter().zip(answers) {
        let s = answer.map_err(|e| format!("{addr}: {e}"))?;
        modes.push(s.mode);
        versions.push(s.version);
    }
    let leaders = modes.iter().filter(|m| *m == "leader").count();
    let followers = modes.iter().filter(|m| *m == "follower").count();
    if leaders == 1 && followers == clients.len() - 1 {
        Ok(versions)
    } else {
        Err(format!("no quorum yet: modes {modes:?}"))
    }
}

/// What a member says about itself.
struct Srvr {
    /// `leader`, `follower`, `observer` or `standalone`.
    mode: String,
    /// e.g. `3.8.0-debian--1`.
    version: String,
}

/// Asks the member at `addr` the four-letter word `word` (one of the whitelist of
/// [`config`]); the server answers and closes the connection.
async fn four_letters(addr: SocketAddr, word: &str) -> Result<String, String> {
    let ask = async {
        let mut stream = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| e.to_string())?;
        stream
            .write_all(word.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        let mut text = String::new();
        // The answer is a few kB at most.
        (&mut stream)
            .take(64 * 1024)
            .read_to_string(&mut text)
            .await
            .map_err(|e| e.to_string())?;
        Ok::<_, String>(text)
    };
    let text = tokio::time::timeout(FOUR_LETTER_TIMEOUT, ask)
        .await
        .map_err(|_| format!("{word} timed out after {FOUR_LETTER_TIMEOUT:?}"))??;
    // A word off the whitelist is answered with this line, not an error.
    if text.contains("is not executed because it is not in the whitelist") {
        return Err(format!("{word}: {}", text.trim()));
    }
    Ok(text)
}

/// What lockbench reads of a ZooKeeper member's work.
const WORK_METER: Meter = Meter {
    unit: "packets",
    source: "mntr of every member: zk_packets_received (requests and pings), zk_packets_sent, \
             zk_bytes_received_count, zk_cnt_fsynctime (its log's fsyncs); needs mntr in \
             4lw.commands.whitelist",
};

/// The work counters of one member's `mntr` answer.
fn mntr_work(text: &str) -> std::collections::BTreeMap<String, u64> {
    counters::mntr_fields(text)
        .filter_map(|(k, v)| {
            let key = match k {
                "zk_packets_received" => TOTAL,
                "zk_bytes_received_count" => BYTES_IN,
                "zk_packets_sent" => "packets_sent",
                // The transaction log's syncs (the `fsynctime` summary's count, 3.6 on).
                "zk_cnt_fsynctime" => FSYNCS,
                _ => return None,
            };
            Some((key.to_string(), v))
        })
        .collect()
}

/// The work counters of the members at `addrs`, summed.
async fn work_of(addrs: &[SocketAddr]) -> Result<Reading, String> {
    let answers = futures::future::join_all(addrs.iter().map(|a| four_letters(*a, "mntr"))).await;
    let mut reading = Reading::default();
    for (addr, text) in addrs.iter().zip(answers) {
        reading.add(*addr, mntr_work(&text.map_err(|e| format!("{addr}: {e}"))?));
    }
    Ok(reading)
}

/// Asks one member `srvr`. A member without a quorum answers that it is not serving, which is
/// an error here.
async fn srvr(addr: SocketAddr) -> Result<Srvr, String> {
    let text = four_letters(addr, "srvr").await?;
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_string())
    };
    let mode = field("Mode:").ok_or_else(|| format!("not serving: {}", text.trim()))?;
    let version = field("Zookeeper version:")
        // "3.8.0-${mvngit.commit.id}, built on …": Debian's build leaves the placeholder.
        .map(|v| {
            let v = v.split(',').next().unwrap_or_default();
            v.split("-${").next().unwrap_or_default().trim().to_string()
        })
        .unwrap_or_else(|| "unknown".into());
    Ok(Srvr { mode, version })
}

/// Client addresses of the members that say they lead (one, normally; none during an
/// election; briefly two when a cut-off old leader has not noticed yet).
pub(in crate::cluster) async fn leaders(addrs: &[SocketAddr]) -> Vec<SocketAddr> {
    let answers = futures::future::join_all(addrs.iter().map(|a| srvr(*a))).await;
    addrs
        .iter()
        .zip(answers)
        .filter(|(_, s)| matches!(s, Ok(s) if s.mode == "leader"))
        .map(|(a, _)| *a)
        .collect()
}

/// The version the member at `addr` reports (for servers lockbench did not start).
pub(in crate::cluster) async fn version(addr: SocketAddr) -> Result<String, String> {
    srvr(addr).await.map(|s| s.version)
}

/// The ZooKeeper ensemble.
pub(in crate::cluster) struct Zookeeper;

const ABOUT: About = About {
    service: Service::Zookeeper,
    wanted: |needs| needs.zookeeper,
    check_installed,
    port_names: |_| port_names(),
    build: Some(|b, v| ("zookeeper", b.zookeeper.name(), b.zookeeper.reports(v))),
    images: &[IMAGE],
};

#[async_trait]
impl ServiceKind for Zookeeper {
    fn about(&self) -> &'static About {
        &ABOUT
    }

    async fn start(&self, s: Start<'_>) -> Result<Started, ClusterError> {
        let nodes = start(s.launcher).await?;
        Ok(Started::listed(nodes, |ep| &mut ep.zookeeper))
    }

    /// The member whose `srvr` answer says `Mode: leader`.
    async fn leader<'n>(&self, q: Asked<'n, '_>) -> Result<Option<&'n Node>, ClusterError> {
        let addrs: Vec<SocketAddr> = q.members.iter().map(|n| n.addr).collect();
        match leaders(&addrs).await.as_slice() {
            [] => Ok(None),
            [one] => Ok(q.members.into_iter().find(|n| n.addr == *one)),
            many => Err(ClusterError::Leader {
                service: q.service,
                detail: format!("several nodes say they lead: {many:?}"),
            }),
        }
    }

    /// ZooKeeper fsyncs its transaction log before acknowledging a proposal unless
    /// `forceSync=no`; [`config`] leaves the default, and no four-letter word tells it.
    fn work_meter(&self) -> Option<Meter> {
        Some(WORK_METER)
    }

    async fn work(&self, ep: &Endpoints) -> Result<Reading, String> {
        work_of(&ep.zookeeper).await
    }

    async fn durability(&self, n: NodeAt<'_>) -> Option<Durability> {
        let settings = [("forceSync", "yes")];
        Some(Durability::new(Acked::Disk, &settings, n.unasked))
    }

    fn copy_from_target(&self, from: FromTarget<'_>, out: &mut Endpoints) -> Result<(), Missing> {
        let (servers, auth) = (&from.target.zookeeper, &from.target.zookeeper_auth);
        let missing = ("[zookeeper]", "a ZooKeeper ensemble");
        (out.zookeeper, out.zookeeper_auth) = servers_or(servers, auth, missing)?;
        Ok(())
    }

    async fn claim(&self, ep: &Endpoints) -> Result<(), ClusterError> {
        listed(ep).claim(claim_prefix).await
    }

    async fn release(&self, ep: &Endpoints) -> Vec<String> {
        listed(ep)
            .release("zookeeper", "delete nodes", wipe_prefix)
            .await
    }

    async fn describe(&self, ep: &Endpoints) -> Vec<NodeInfo> {
        numbered(Service::Zookeeper, Role::Member, &ep.zookeeper, version).await
    }
}

/// External target: the members of `ep`, their login and the run's prefix.
fn listed(ep: &Endpoints) -> Listed<'_> {
    Listed::new(&ep.zookeeper, &ep.zookeeper_auth, &ep.prefix)
}

/// A client session with the ensemble at `addrs`, logged in with `auth`'s digest.
async fn client(
    addrs: &[SocketAddr],
    auth: Option<&Auth>,
) -> Result<zookeeper_client::Client, String> {
    let connect = addrs
        .iter()
        .map(|a| a.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let mut connector = zookeeper_client::Client::connector()
        .with_session_timeout(Duration::from_secs(10))
        .with_connection_timeout(CALL_TIMEOUT);
    if let Some(a) = auth {
        connector = connector.with_auth("digest", &a.digest());
    }
    connector.connect(&connect).await.map_err(|e| e.to_string())
}

/// A claim on a ZooKeeper ensemble: the prefix's root node, holding the marker.
async fn claim_prefix(l: Listed<'_>) -> Result<(), ClusterError> {
    let (addrs, auth, p) = (l.addrs, l.auth, l.prefix);
    let err = |e| target_err("zookeeper", e);
    let zk = bounded("connect", client(addrs, auth)).await.map_err(err)?;
    let root = p.zk_root();
    let work = async {
        match zk.get_data(&root).await {
            Ok((data, _)) if data == MARKER.as_bytes() => Ok(()),
            Ok(_) => Err(Some(())),
            Err(zookeeper_client::Error::NoNode) => {
                let mode = zookeeper_client::CreateMode::Persistent
                    .with_acls(zookeeper_client::Acls::anyone_all());
                zk.create(&root, MARKER.as_bytes(), &mode)
                    .await
                    .map(drop)
                    .map_err(|_| None)
            }
            Err(_) => Err(None),
        }
    };
    match tokio::time::timeout(CALL_TIMEOUT, work).await {
        Ok(Ok(())) => {}
        Ok(Err(Some(()))) => return Err(foreign("zookeeper", p, &[root])),
        Ok(Err(None)) | Err(_) => {
            return Err(err(format!("read or create {root} failed")));
        }
    }
    Ok(())
}

/// Deletes the prefix's ZooKeeper tree.
async fn wipe_prefix(l: Listed<'_>) -> Result<(), String> {
    let (addrs, auth, p) = (l.addrs, l.auth, l.prefix);
    let zk = client(addrs, auth).await?;
    delete_tree(&zk, &p.zk_root()).await
}

/// Deletes `root` and everything below it, depth first (bounded by the caller's timeout).
async fn delete_tree(zk: &zookeeper_client::Client, root: &str) -> Result<(), String> {
    let mut stack = vec![(root.to_string(), false)];
    while let Some((path, expanded)) = stack.pop() {
        if expanded {
            match zk.delete(&path, None).await {
                Ok(()) | Err(zookeeper_client::Error::NoNode) => {}
                Err(e) => return Err(format!("delete {path}: {e}")),
            }
            continue;
        }
        match zk.list_children(&path).await {
            Ok(children) => {
                stack.push((path.clone(), true));
                stack.extend(children.into_iter().map(|c| (format!("{path}/{c}"), false)));
            }
            Err(zookeeper_client::Error::NoNode) => {}
            Err(e) => return Err(format!("list {path}: {e}")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mntr_gives_packets_and_bytes() {
        let text = "zk_version\t3.8.0\nzk_packets_received\t70\nzk_packets_sent\t69\n\
                    zk_bytes_received_count\t5000\nzk_watch_count\t3\n";
        let c = mntr_work(text);
        assert_eq!((c[TOTAL], c["packets_sent"], c[BYTES_IN]), (70, 69, 5000));
        assert_eq!(c.len(), 3);
    }

    #[test]
    fn mntr_is_whitelisted_beside_srvr() {
        assert!(config("/d", None, 2181, "").contains("4lw.commands.whitelist=srvr,mntr\n"));
    }

    #[test]
    fn the_ensemble_lockbench_starts_keeps_its_fsync() {
        // What `durability` says without asking the servers.
        let cfg = config("/d", None, 2181, "");
        assert!(!cfg.contains("forceSync"), "{cfg}");
    }
}
