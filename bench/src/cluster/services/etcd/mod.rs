//! A 3-node etcd 3.4 cluster, each member with its own data directory, client port and peer
//! port: locally from Debian's `etcd-server` package, or in containers, with the same flags.

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use async_trait::async_trait;
use etcd_client::{Client, ConnectOptions};

use crate::cluster::backend::wait_ready;
use crate::cluster::builds::Builds;
use crate::cluster::containers::{Containers, Image, Spec};
use crate::cluster::counters::{self, BYTES_IN, BYTES_OUT, FSYNCS, Meter, Reading, TOTAL};
use crate::cluster::durability::{Acked, Durability};
use crate::cluster::error::ClusterError;
use crate::cluster::external::{
    CALL_TIMEOUT, Listed, MARKER, Missing, bounded, numbered, owned_or_empty, servers_or,
    target_err,
};
use crate::cluster::kind::{About, Asked, FromTarget, NodeAt, ServiceKind, Start, Started};
use crate::cluster::local::Local;
use crate::cluster::model::{Auth, Endpoints, NodeInfo, Role, Service};
use crate::cluster::node::{Node, NodeServer};
use crate::cluster::provision::Launcher;

/// The variable a worker reads the etcd password from.
pub const PASSWORD_ENV: &str = "LOCKBENCH_ETCD_PASSWORD";

/// Its image: etcd (`etcd` on PATH).
pub(in crate::cluster) const IMAGE: Image = Image {
    var: "LOCKBENCH_IMAGE_ETCD",
    official: "quay.io/coreos/etcd:v3.4.23",
};

/// Members of the cluster: 3 tolerates one failed member.
pub const MEMBERS: usize = 3;

/// A bound on one status query (connect included).
const STATUS_TIMEOUT: Duration = Duration::from_secs(2);

/// Ports inside a container: client, peer (a local node gets reserved ones).
const PORTS: [u16; 2] = [2379, 2380];

/// Every port of every member: the names local ports are reserved under.
pub(in crate::cluster) fn port_names() -> Vec<String> {
    (1..=MEMBERS)
        .flat_map(|i| [format!("etcd-{i}"), format!("etcd-{i} (peer)")])
        .collect()
}

pub(in crate::cluster) fn check_installed(builds: Builds) -> Result<(), ClusterError> {
    builds.etcd.server().map(|_| ())
}

/// Where one member listens and is reached.
struct Member {
    name: String,
    /// Where other members and clients reach it.
    client: SocketAddr,
    peer: SocketAddr,
    /// Listen on every address (a container) rather than only on `client` and `peer`'s.
    listen_any: bool,
    data_dir: String,
}

impl Member {
    /// Its command line after the program: addresses, the cluster, then [`COMMON_FLAGS`].
    fn flags(&self, initial_cluster: &str, token: &str) -> Vec<String> {
        let listen = |a: SocketAddr| match self.listen_any {
            true => format!("http://0.0.0.0:{}", a.port()),
            false => format!("http://{a}"),
        };
        let mut out = vec![
            "--name".into(),
            self.name.clone(),
            "--data-dir".into(),
            self.data_dir.clone(),
            "--listen-client-urls".into(),
            listen(self.client),
            "--advertise-client-urls".into(),
            format!("http://{}", self.client),
            "--listen-peer-urls".into(),
            listen(self.peer),
            "--initial-advertise-peer-urls".into(),
            format!("http://{}", self.peer),
            "--initial-cluster".into(),
            initial_cluster.to_string(),
            "--initial-cluster-token".into(),
            token.to_string(),
        ];
        out.extend(COMMON_FLAGS.iter().map(|s| s.to_string()));
        out
    }
}

/// `--initial-cluster` naming every member by its peer address.
fn initial_cluster(members: &[Member]) -> String {
    members
        .iter()
        .map(|m| format!("{}=http://{}", m.name, m.peer))
        .collect::<Vec<_>>()
        .join(",")
}

/// Starts every member and waits until all answer a status request naming the same leader.
/// Returns each node with its etcd member id.
pub(in crate::cluster) async fn start(l: Launcher<'_>) -> Result<Vec<(Node, u64)>, ClusterError> {
    let names: Vec<String> = (1..=MEMBERS).map(|i| format!("etcd-{i}")).collect();
    // A token unique to this run: members of another cluster that happen to reach these
    // ports refuse to join it.
    let token = format!("lockbench-{}", uuid::Uuid::new_v4().simple());
    let mut servers = match l {
        Launcher::Local(local) => start_local(local, &names, &token)?,
        Launcher::Containers(run) => start_containers(run, &names, &token).await?,
    };
    let clients: Vec<SocketAddr> = servers.iter().map(|(a, _)| *a).collect();
    let mut watch: Vec<&mut dyn NodeServer> = servers.iter_mut().map(|(_, s)| &mut **s).collect();
    let statuses = wait_ready("etcd", &mut watch, || agreed(clients.clone())).await?;
    Ok(servers
        .into_iter()
        .zip(names)
        .zip(statuses)
        .map(|(((addr, server), name), (member, version))| {
            let node = Node {
                name,
                service: Service::Etcd,
                role: Role::Member,
                addr,
                version,
                server,
            };
            (node, member)
        })
        .collect())
}

/// The members' servers, each with its client address.
type Servers = Vec<(SocketAddr, Box<dyn NodeServer>)>;

/// Starts each member as a process on its reserved addresses.
fn start_local(local: &Local, names: &[String], token: &str) -> Result<Servers, ClusterError> {
    let mut servers: Servers = Vec::with_capacity(MEMBERS);
    let bin = local.builds().etcd.server()?;
    let members = names
        .iter()
        .map(|name| {
            Ok(Member {
                name: name.clone(),
                client: local.addr(name),
                peer: local.addr(&format!("{name} (peer)")),
                listen_any: false,
                data_dir: local.dir(name)?.join("data").display().to_string(),
            })
        })
        .collect::<Result<Vec<_>, ClusterError>>()?;
    let cluster = initial_cluster(&members);
    for m in &members {
        let mut cmd = Command::new(&bin);
        cmd.args(m.flags(&cluster, token));
        servers.push((m.client, Box::new(local.spawn(&m.name, cmd)?)));
    }
    Ok(servers)
}

/// Starts the members as containers on the run's network, one address each.
async fn start_containers(
    run: &Containers,
    names: &[String],
    token: &str,
) -> Result<Servers, ClusterError> {
    let mut servers: Servers = Vec::with_capacity(MEMBERS);
    let [client, peer] = PORTS;
    let started = run
        .launch_group(MEMBERS as u32, |ips| {
            let members: Vec<Member> = names
                .iter()
                .zip(ips)
                .map(|(name, ip)| Member {
                    name: name.clone(),
                    client: SocketAddr::new((*ip).into(), client),
                    peer: SocketAddr::new((*ip).into(), peer),
                    listen_any: true,
                    data_dir: "/tmp/etcd".into(),
                })
                .collect();
            let cluster = initial_cluster(&members);
            members
                .iter()
                .map(|m| Spec {
                    name: m.name.clone(),
                    image: run.images.get(IMAGE),
                    cmd: std::iter::once("etcd".to_string())
                        .chain(m.flags(&cluster, token))
                        .collect(),
                    env: Vec::new(),
                })
                .collect()
        })
        .await?;
    for (_, c) in started {
        servers.push((c.addr(client), Box::new(c)));
    }
    Ok(servers)
}

/// Flags every member gets after its names and addresses.
pub(in crate::cluster) const COMMON_FLAGS: [&str; 10] = [
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
pub(in crate::cluster) async fn agreed(
    clients: Vec<SocketAddr>,
) -> Result<Vec<(u64, String)>, String> {
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
pub(in crate::cluster) async fn leader_id(addrs: &[SocketAddr]) -> Option<u64> {
    let answers = futures::future::join_all(addrs.iter().map(|a| status(*a, None))).await;
    answers
        .into_iter()
        .flatten()
        .filter(|s| s.leader != 0)
        .max_by_key(|s| s.term)
        .map(|s| s.leader)
}

/// The version the member at `addr` reports (for servers lockbench did not start).
pub(in crate::cluster) async fn version(
    addr: SocketAddr,
    auth: Option<&Auth>,
) -> Result<String, String> {
    status(addr, auth).await.map(|s| s.version)
}

/// The Prometheus metric counting raft entries committed: every consensus write (puts,
/// deletes, transactions, lease grants and revokes) and the few entries raft adds itself (one
/// per new leader). Renewing a lease is not one.
pub const PROPOSALS_COMMITTED: &str = "etcd_server_proposals_committed_total";

/// Raft entries committed so far, [`PROPOSALS_COMMITTED`] as the most advanced of the members
/// at `addrs` that answer (read from `/metrics` on their client URL, which needs no login):
/// the difference of two readings is the consensus writes between them. An error only when
/// none answers.
pub async fn proposals_committed(addrs: &[SocketAddr]) -> Result<u64, String> {
    let answers = futures::future::join_all(addrs.iter().map(|a| metric(*a, PROPOSALS_COMMITTED)));
    let mut best = None;
    let mut errors = Vec::new();
    for (addr, answer) in addrs.iter().zip(answers.await) {
        match answer {
            Ok(v) => best = best.max(Some(v)),
            Err(e) => errors.push(format!("{addr}: {e}")),
        }
    }
    best.ok_or_else(|| errors.join("; "))
}

/// The value of the un-labelled metric `name` on the member at `addr`.
async fn metric(addr: SocketAddr, name: &str) -> Result<u64, String> {
    let text = metrics(addr).await?;
    metric_value(&text, name).ok_or_else(|| format!("no {name} in its /metrics"))
}

/// The `/metrics` text of the member at `addr` (plain HTTP/1.0 on its client URL, which needs
/// no login, bounded by [`STATUS_TIMEOUT`]).
async fn metrics(addr: SocketAddr) -> Result<String, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let fetch = async {
        let mut conn = tokio::net::TcpStream::connect(addr).await?;
        let ask = format!("GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n");
        conn.write_all(ask.as_bytes()).await?;
        let mut body = String::new();
        // A member's exposition is a few hundred kB; the bound keeps a wrong server finite.
        (&mut conn).take(16 << 20).read_to_string(&mut body).await?;
        Ok::<_, std::io::Error>(body)
    };
    tokio::time::timeout(STATUS_TIMEOUT, fetch)
        .await
        .map_err(|_| format!("/metrics timed out after {STATUS_TIMEOUT:?}"))?
        .map_err(|e| e.to_string())
}

/// What lockbench reads of an etcd member's work.
const WORK_METER: Meter = Meter {
    unit: "requests",
    source: "/metrics of every member: grpc_server_msg_received_total (unary requests and \
             stream messages such as keep-alives), etcd_network_client_grpc_{received,sent}\
             _bytes_total, etcd_debugging_mvcc_events_total (watch events sent), and the most \
             advanced member's etcd_server_proposals_committed_total; fsyncs: the counts of \
             etcd_disk_wal_fsync_duration_seconds and etcd_disk_backend_commit_duration_seconds",
};

/// The work counters of one member's `/metrics` text: [`TOTAL`] (gRPC messages received),
/// `grpc.<method>` each, the client gRPC bytes, `watch_events`, `proposals_committed`.
fn member_work(text: &str) -> std::collections::BTreeMap<String, u64> {
    let mut out = std::collections::BTreeMap::new();
    for (labels, v) in counters::prometheus_samples(text, "grpc_server_msg_received_total") {
        *out.entry(TOTAL.to_string()).or_default() += v;
        if v > 0
            && let Some(m) = counters::label(labels, "grpc_method")
        {
            *out.entry(format!("grpc.{m}")).or_default() += v;
        }
    }
    // A member syncs its WAL at every Raft ready and its bolt database at every commit.
    for name in [
        "etcd_disk_wal_fsync_duration_seconds_count",
        "etcd_disk_backend_commit_duration_seconds_count",
    ] {
        if let Some(v) = metric_value(text, name) {
            *out.entry(FSYNCS.to_string()).or_default() += v;
        }
    }
    for (name, key) in [
        ("etcd_network_client_grpc_received_bytes_total", BYTES_IN),
        ("etcd_network_client_grpc_sent_bytes_total", BYTES_OUT),
        ("etcd_debugging_mvcc_events_total", "watch_events"),
        (PROPOSALS_COMMITTED, "proposals_committed"),
    ] {
        if let Some(v) = metric_value(text, name) {
            out.insert(key.to_string(), v);
        }
    }
    out
}

/// The work counters of the members at `addrs`, summed, but `proposals_committed` is the most
/// advanced member's (each member commits every entry).
async fn work_of(addrs: &[SocketAddr]) -> Result<Reading, String> {
    let answers = futures::future::join_all(addrs.iter().map(|a| metrics(*a))).await;
    let mut reading = Reading::default();
    let mut committed = 0;
    for (addr, text) in addrs.iter().zip(answers) {
        let mut c = member_work(&text.map_err(|e| format!("{addr}: {e}"))?);
        committed = committed.max(c.remove("proposals_committed").unwrap_or(0));
        reading.add(*addr, c);
    }
    reading
        .counters
        .insert("proposals_committed".into(), committed);
    Ok(reading)
}

/// The value of `name` in a Prometheus text exposition (Go prints large values as `1.2e+06`).
fn metric_value(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .filter_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .find_map(|v| v.trim().parse::<f64>().ok())
        .map(|v| v.round() as u64)
}

/// The etcd cluster.
pub(in crate::cluster) struct Etcd;

const ABOUT: About = About {
    service: Service::Etcd,
    wanted: |needs| needs.etcd,
    check_installed,
    port_names: |_| port_names(),
    build: Some(|b, v| ("etcd", b.etcd.name(), b.etcd.reports(v))),
    images: &[IMAGE],
};

#[async_trait]
impl ServiceKind for Etcd {
    fn about(&self) -> &'static About {
        &ABOUT
    }

    async fn start(&self, s: Start<'_>) -> Result<Started, ClusterError> {
        let members = start(s.launcher).await?;
        let ids = (members.iter())
            .map(|(n, id)| (n.name.clone(), *id))
            .collect();
        let nodes: Vec<Node> = members.into_iter().map(|(n, _)| n).collect();
        let addrs: Vec<SocketAddr> = nodes.iter().map(|n| n.addr).collect();
        Ok(Started {
            member_ids: ids,
            ..Started::new(nodes, move |ep| ep.etcd.extend(addrs))
        })
    }

    /// The member that the answering members with the highest raft term name as leader:
    /// etcd names it by member id, and it may be the member that no longer answers.
    async fn leader<'n>(&self, q: Asked<'n, '_>) -> Result<Option<&'n Node>, ClusterError> {
        let addrs: Vec<SocketAddr> = q.members.iter().map(|n| n.addr).collect();
        let Some(id) = leader_id(&addrs).await else {
            return Ok(None);
        };
        let name = (q.member_ids.iter())
            .find(|(_, m)| *m == id)
            .map(|(name, _)| name.as_str())
            .ok_or_else(|| ClusterError::Leader {
                service: q.service,
                detail: format!("leader id {id:x} is not a member this cluster started"),
            })?;
        Ok(q.members.into_iter().find(|n| n.name == name))
    }

    /// etcd fsyncs its WAL before a commit is acknowledged unless started with
    /// `--unsafe-no-fsync`, which [`COMMON_FLAGS`] never passes; no API tells it.
    fn work_meter(&self) -> Option<Meter> {
        Some(WORK_METER)
    }

    async fn work(&self, ep: &Endpoints) -> Result<Reading, String> {
        work_of(&ep.etcd).await
    }

    async fn durability(&self, n: NodeAt<'_>) -> Option<Durability> {
        let settings = [("unsafe-no-fsync", "false")];
        Some(Durability::new(Acked::Disk, &settings, n.unasked))
    }

    fn copy_from_target(&self, from: FromTarget<'_>, out: &mut Endpoints) -> Result<(), Missing> {
        let (t, missing) = (from.target, ("[etcd]", "an etcd cluster"));
        (out.etcd, out.etcd_auth) = servers_or(&t.etcd, &t.etcd_auth, missing)?;
        Ok(())
    }

    async fn claim(&self, ep: &Endpoints) -> Result<(), ClusterError> {
        listed(ep).claim(claim_prefix).await
    }

    async fn release(&self, ep: &Endpoints) -> Vec<String> {
        listed(ep).release("etcd", "delete keys", wipe_prefix).await
    }

    async fn describe(&self, ep: &Endpoints) -> Vec<NodeInfo> {
        let version = |a| version(a, ep.etcd_auth.as_ref());
        numbered(Service::Etcd, Role::Member, &ep.etcd, version).await
    }
}

/// External target: the members of `ep`, their login and the run's prefix.
fn listed(ep: &Endpoints) -> Listed<'_> {
    Listed::new(&ep.etcd, &ep.etcd_auth, &ep.prefix)
}

/// A client of the members at `addrs`, logged in with `auth`.
async fn client(addrs: &[SocketAddr], auth: Option<&Auth>) -> Result<Client, String> {
    let urls: Vec<String> = addrs.iter().map(|a| format!("http://{a}")).collect();
    let opts = options(auth)
        .with_connect_timeout(CALL_TIMEOUT)
        .with_timeout(CALL_TIMEOUT);
    Client::connect(urls, Some(opts))
        .await
        .map_err(|e| e.to_string())
}

/// A claim on an etcd cluster: keys under the prefix, marked by the owner key.
async fn claim_prefix(l: Listed<'_>) -> Result<(), ClusterError> {
    let (addrs, auth, p) = (l.addrs, l.auth, l.prefix);
    let err = |e| target_err("etcd", e);
    let mut etcd = bounded("connect", client(addrs, auth)).await.map_err(err)?;
    let opts = etcd_client::GetOptions::new()
        .with_prefix()
        .with_keys_only()
        .with_limit(100);
    let found: Vec<String> = bounded("list keys", async {
        let r = etcd
            .get(p.key_start(), Some(opts))
            .await
            .map_err(|e| e.to_string())?;
        Ok(r.kvs()
            .iter()
            .map(|kv| String::from_utf8_lossy(kv.key()).into_owned())
            .collect())
    })
    .await
    .map_err(err)?;
    owned_or_empty("etcd", p, &found, &p.owner_key())?;
    bounded("mark the prefix", async {
        etcd.put(p.owner_key(), MARKER, None)
            .await
            .map(drop)
            .map_err(|e| e.to_string())
    })
    .await
    .map_err(err)?;
    Ok(())
}

/// Deletes every etcd key of the prefix.
async fn wipe_prefix(l: Listed<'_>) -> Result<(), String> {
    let (addrs, auth, p) = (l.addrs, l.auth, l.prefix);
    let mut etcd = client(addrs, auth).await?;
    etcd.delete(
        p.key_start(),
        Some(etcd_client::DeleteOptions::new().with_prefix()),
    )
    .await
    .map(drop)
    .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_metric_is_read_from_the_exposition_format() {
        let text = "HTTP/1.0 200 OK\r\n\r\n# HELP etcd_server_proposals_committed_total x\n\
                    # TYPE etcd_server_proposals_committed_total gauge\n\
                    etcd_server_proposals_committed_total_other 3\n\
                    etcd_server_proposals_committed_total 1.234567e+06\n";
        assert_eq!(metric_value(text, PROPOSALS_COMMITTED), Some(1_234_567));
        assert_eq!(metric_value("x 1\n", PROPOSALS_COMMITTED), None);
    }

    #[test]
    fn a_member_s_work_is_read_from_its_metrics() {
        let text = "grpc_server_msg_received_total{grpc_method=\"Txn\",grpc_type=\"unary\"} 5\n\
                    grpc_server_msg_received_total{grpc_method=\"Range\",grpc_type=\"unary\"} 0\n\
                    grpc_server_msg_received_total{grpc_method=\"LeaseKeepAlive\"} 3\n\
                    etcd_network_client_grpc_received_bytes_total 900\n\
                    etcd_network_client_grpc_sent_bytes_total 1.2e+03\n\
                    etcd_debugging_mvcc_events_total 2\n\
                    etcd_server_proposals_committed_total 40\n";
        let c = member_work(text);
        assert_eq!(
            (c[TOTAL], c["grpc.Txn"], c["grpc.LeaseKeepAlive"]),
            (8, 5, 3)
        );
        assert!(!c.contains_key("grpc.Range"));
        assert_eq!((c[BYTES_IN], c[BYTES_OUT]), (900, 1200));
        assert_eq!((c["watch_events"], c["proposals_committed"]), (2, 40));
    }

    #[test]
    fn the_members_lockbench_starts_keep_their_fsync() {
        // What `durability` says without asking the servers.
        assert!(!COMMON_FLAGS.contains(&"--unsafe-no-fsync"));
    }
}
