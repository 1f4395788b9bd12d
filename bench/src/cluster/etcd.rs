//! A 3-node etcd 3.4 cluster from Debian's `etcd-server` package, each member with its own
//! data directory, client port and peer port.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use etcd_client::{Client, ConnectOptions};

use super::{
    Auth, ClusterError, Node, PortAllocator, Role, Server, ServerProcess, Service, find_binary,
    wait_ready_all,
};

/// Members of the cluster: 3 tolerates one failed member.
pub const MEMBERS: usize = 3;

/// A bound on one status query (connect included).
const STATUS_TIMEOUT: Duration = Duration::from_secs(2);

/// The two ports of one member.
#[derive(Debug, Clone, Copy)]
pub(super) struct MemberPorts {
    /// Where clients connect (gRPC).
    client: SocketAddr,
    /// Raft traffic between members.
    peer: SocketAddr,
}

pub(super) fn check_installed() -> Result<(), ClusterError> {
    find_binary("etcd", "etcd-server").map(|_| ())
}

/// Reserves the client and peer ports of every member.
pub(super) fn allocate(ports: &mut PortAllocator) -> Result<Vec<MemberPorts>, ClusterError> {
    (1..=MEMBERS)
        .map(|i| {
            Ok(MemberPorts {
                client: ports.allocate(&format!("etcd-{i}"))?,
                peer: ports.allocate(&format!("etcd-{i} (peer)"))?,
            })
        })
        .collect()
}

/// Starts every member and waits until all answer a status request naming the same leader.
/// Returns each node with its etcd member id.
pub(super) async fn start(
    members: &[MemberPorts],
    dir: &Path,
    log_dir: &Path,
) -> Result<Vec<(Node, u64)>, ClusterError> {
    let bin = find_binary("etcd", "etcd-server")?;
    std::fs::create_dir_all(dir)
        .map_err(|e| ClusterError::io(format!("create {}", dir.display()), e))?;
    let initial_cluster = members
        .iter()
        .enumerate()
        .map(|(i, m)| format!("etcd-{}=http://{}", i + 1, m.peer))
        .collect::<Vec<_>>()
        .join(",");
    // A token unique to this run: members of another cluster that happen to reach these
    // ports refuse to join it.
    let token = format!("lockbench-{}", uuid::Uuid::new_v4().simple());
    let mut processes = Vec::with_capacity(members.len());
    for (i, m) in members.iter().enumerate() {
        let name = format!("etcd-{}", i + 1);
        let mut cmd = Command::new(&bin);
        cmd.arg("--name")
            .arg(&name)
            .arg("--data-dir")
            .arg(dir.join(format!("{name}.data")))
            .arg("--listen-client-urls")
            .arg(format!("http://{}", m.client))
            .arg("--advertise-client-urls")
            .arg(format!("http://{}", m.client))
            .arg("--listen-peer-urls")
            .arg(format!("http://{}", m.peer))
            .arg("--initial-advertise-peer-urls")
            .arg(format!("http://{}", m.peer))
            .arg("--initial-cluster")
            .arg(&initial_cluster)
            .arg("--initial-cluster-token")
            .arg(&token)
            .args(COMMON_FLAGS);
        processes.push(ServerProcess::spawn(
            &name,
            m.client.ip(),
            cmd,
            &log_dir.join(format!("{name}.log")),
        )?);
    }

    let clients: Vec<SocketAddr> = members.iter().map(|m| m.client).collect();
    let statuses = wait_ready_all("etcd", &mut processes, || agreed(clients.clone())).await?;

    Ok(processes
        .into_iter()
        .zip(members)
        .zip(statuses)
        .enumerate()
        .map(|(i, ((process, m), (member, version)))| {
            let node = Node {
                name: format!("etcd-{}", i + 1),
                service: Service::Etcd,
                role: Role::Member,
                addr: m.client,
                version,
                server: Server::Process(process),
            };
            (node, member)
        })
        .collect())
}

/// Flags every member gets after its names and addresses.
pub(super) const COMMON_FLAGS: [&str; 10] = [
    "--initial-cluster-state",
    "new",
    // Defaults are 100 / 1000 too, but they are what the fault timings assume: a killed
    // leader is replaced in ~1 s.
    "--heartbeat-interval",
    "100",
    "--election-timeout",
    "1000",
    // Logs to stderr, which ends up in the node's log file.
    "--logger",
    "zap",
    "--log-outputs",
    "stderr",
];

/// Ok with each member's (id, version) once every member at `clients` answers and all name
/// the same leader, which is one of them.
pub(super) async fn agreed(clients: Vec<SocketAddr>) -> Result<Vec<(u64, String)>, String> {
    let answers = futures::future::join_all(clients.iter().map(|a| status(*a, None))).await;
    let mut out = Vec::new();
    for (addr, answer) in clients.iter().zip(answers) {
        out.push(answer.map_err(|e| format!("{addr}: {e}"))?);
    }
    let ids: Vec<u64> = out.iter().map(|s| s.member).collect();
    let leader = out[0].leader;
    if leader != 0 && out.iter().all(|s| s.leader == leader) && ids.contains(&leader) {
        Ok(out.into_iter().map(|s| (s.member, s.version)).collect())
    } else {
        let leaders: Vec<u64> = out.iter().map(|s| s.leader).collect();
        Err(format!(
            "no agreed leader yet: members {ids:x?} name {leaders:x?}"
        ))
    }
}

/// What a member says about itself.
struct Status {
    /// Its own member id.
    member: u64,
    /// The member id it follows as leader (0: none known).
    leader: u64,
    /// Raft term: during an election, the higher term has the newer view.
    term: u64,
    /// Server version, e.g. `3.4.23`.
    version: String,
}

/// Connect options that log in with `auth` (user and password) if given.
pub fn options(auth: Option<&Auth>) -> ConnectOptions {
    let opts = ConnectOptions::new();
    match auth {
        Some(a) => opts.with_user(a.username.clone().unwrap_or_default(), a.password.clone()),
        None => opts,
    }
}

/// Asks the member at `addr` (and only it: one endpoint per client) for its status.
async fn status(addr: SocketAddr, auth: Option<&Auth>) -> Result<Status, String> {
    let ask = async {
        let opts = options(auth).with_connect_timeout(STATUS_TIMEOUT);
        let mut client = Client::connect([format!("http://{addr}")], Some(opts))
            .await
            .map_err(|e| e.to_string())?;
        let s = client.status().await.map_err(|e| e.to_string())?;
        let member = s
            .header()
            .map(|h| h.member_id())
            .ok_or("status without a header")?;
        Ok::<_, String>(Status {
            member,
            leader: s.leader(),
            term: s.raft_term(),
            version: s.version().to_string(),
        })
    };
    tokio::time::timeout(STATUS_TIMEOUT, ask)
        .await
        .map_err(|_| format!("status timed out after {STATUS_TIMEOUT:?}"))?
}

/// The member id that the answering members with the highest raft term name as leader, if
/// any names one.
pub(super) async fn leader_id(addrs: &[SocketAddr]) -> Option<u64> {
    let answers = futures::future::join_all(addrs.iter().map(|a| status(*a, None))).await;
    answers
        .into_iter()
        .flatten()
        .filter(|s| s.leader != 0)
        .max_by_key(|s| s.term)
        .map(|s| s.leader)
}

/// The version the member at `addr` reports (for servers lockbench did not start).
pub(super) async fn version(addr: SocketAddr, auth: Option<&Auth>) -> Result<String, String> {
    status(addr, auth).await.map(|s| s.version)
}
