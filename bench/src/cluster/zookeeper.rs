//! A 3-node ZooKeeper 3.8 ensemble from Debian's `zookeeper` package, each node a JVM of its
//! own with its own data directory, client port and quorum / election ports.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{
    ClusterError, Node, PortAllocator, Role, Server, ServerProcess, Service, find_binary,
    wait_ready_all,
};

/// Members of the ensemble: 3 tolerates one failed node, the smallest set that can lose one.
pub const MEMBERS: usize = 3;

/// Debian's jar; its manifest's Class-Path names the other jars it needs (netty, jute, …).
const JAR: &str = "/usr/share/java/zookeeper.jar";
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
pub(super) const JVM_FLAGS: [&str; 4] = [
    "-Xmx128m",
    "-Xms16m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
];

/// A bound on one four-letter-word query.
const FOUR_LETTER_TIMEOUT: Duration = Duration::from_secs(2);

/// The three ports of one member.
#[derive(Debug, Clone, Copy)]
pub(super) struct MemberPorts {
    /// Where clients connect.
    client: SocketAddr,
    /// Followers connect to the leader here.
    quorum: SocketAddr,
    /// Leader election.
    election: SocketAddr,
}

pub(super) fn check_installed() -> Result<(), ClusterError> {
    find_binary("java", "openjdk-17-jre-headless")?;
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

/// Reserves the client, quorum and election ports of every member.
pub(super) fn allocate(ports: &mut PortAllocator) -> Result<Vec<MemberPorts>, ClusterError> {
    (1..=MEMBERS)
        .map(|i| {
            Ok(MemberPorts {
                client: ports.allocate(&format!("zookeeper-{i}"))?,
                quorum: ports.allocate(&format!("zookeeper-{i} (quorum)"))?,
                election: ports.allocate(&format!("zookeeper-{i} (election)"))?,
            })
        })
        .collect()
}

/// Starts every member and waits until the ensemble has elected a leader and every member
/// answers (one `leader`, the others `follower`).
pub(super) async fn start(
    members: &[MemberPorts],
    dir: &Path,
    log_dir: &Path,
) -> Result<Vec<Node>, ClusterError> {
    let java = find_binary("java", "openjdk-17-jre-headless")?;
    let servers: String = members
        .iter()
        .enumerate()
        .map(|(i, m)| {
            format!(
                "server.{}={}:{}:{}\n",
                i + 1,
                m.quorum.ip(),
                m.quorum.port(),
                m.election.port()
            )
        })
        .collect();
    let mut processes = Vec::with_capacity(members.len());
    for (i, m) in members.iter().enumerate() {
        let id = i + 1;
        let name = format!("zookeeper-{id}");
        let node_dir = dir.join(&name);
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
                Some(m.client.ip()),
                m.client.port(),
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
        let classpath = std::iter::once(JAR)
            .chain(LOG_JARS)
            .collect::<Vec<_>>()
            .join(":");
        let mut cmd = Command::new(&java);
        cmd.args(JVM_FLAGS)
            .arg(format!("-Dlog4j.configuration=file:{}", log4j.display()))
            .arg("-cp")
            .arg(classpath)
            .arg("org.apache.zookeeper.server.quorum.QuorumPeerMain")
            .arg(&cfg);
        processes.push(ServerProcess::spawn(
            &name,
            m.client.ip(),
            cmd,
            &log_dir.join(format!("{name}.log")),
        )?);
    }

    let clients: Vec<SocketAddr> = members.iter().map(|m| m.client).collect();
    let versions = wait_ready_all("zookeeper", &mut processes, || {
        quorum_versions(clients.clone())
    })
    .await?;

    Ok(processes
        .into_iter()
        .zip(members)
        .zip(versions)
        .enumerate()
        .map(|(i, ((process, m), version))| Node {
            name: format!("zookeeper-{}", i + 1),
            service: Service::Zookeeper,
            role: Role::Member,
            addr: m.client,
            version,
            server: Server::Process(process),
        })
        .collect())
}

/// The configuration of one member: data in `data_dir`, clients on `client_port` (of
/// `client_ip` only, when given), the ensemble in `servers` (`server.N=host:quorum:election`
/// lines).
pub(super) fn config(
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
         # srvr tells readiness and leadership; nothing else is needed\n\
         4lw.commands.whitelist=srvr\n\
         {servers}"
    )
}

/// Ok with every member's version once the members at `clients` have one leader and the
/// rest follow it.
pub(super) async fn quorum_versions(clients: Vec<SocketAddr>) -> Result<Vec<String>, String> {
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

/// Asks one member `srvr`. A member without a quorum answers that it is not serving, which is
/// an error here.
async fn srvr(addr: SocketAddr) -> Result<Srvr, String> {
    let ask = async {
        let mut stream = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| e.to_string())?;
        stream.write_all(b"srvr").await.map_err(|e| e.to_string())?;
        let mut text = String::new();
        // The server closes the connection after answering; the answer is a few hundred bytes.
        (&mut stream)
            .take(64 * 1024)
            .read_to_string(&mut text)
            .await
            .map_err(|e| e.to_string())?;
        Ok::<_, String>(text)
    };
    let text = tokio::time::timeout(FOUR_LETTER_TIMEOUT, ask)
        .await
        .map_err(|_| format!("srvr timed out after {FOUR_LETTER_TIMEOUT:?}"))??;
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
pub(super) async fn leaders(addrs: &[SocketAddr]) -> Vec<SocketAddr> {
    let answers = futures::future::join_all(addrs.iter().map(|a| srvr(*a))).await;
    addrs
        .iter()
        .zip(answers)
        .filter(|(_, s)| matches!(s, Ok(s) if s.mode == "leader"))
        .map(|(a, _)| *a)
        .collect()
}

/// The version the member at `addr` reports (for servers lockbench did not start).
pub(super) async fn version(addr: SocketAddr) -> Result<String, String> {
    srvr(addr).await.map(|s| s.version)
}
