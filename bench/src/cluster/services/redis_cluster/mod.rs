//! A Redis Cluster: 16,384 hash slots over three masters, each with one replica (six
//! `redis-server --cluster-enabled yes` nodes), formed with CLUSTER commands so the same code
//! forms it from local processes and from containers.
//!
//! Each node keeps its `nodes.conf` in its own data directory: a killed master restarts with
//! its identity, learns that its replica was promoted, and rejoins as a replica of it.
//! `cluster-node-timeout` is 1 s (the default is 15 s) so that a failover (timeout, then a
//! replica election of ~0.5–1 s) ends inside a chaos window of a few seconds.
//! `cluster-require-full-coverage` keeps its default (`yes`): while a slot has no master, the
//! whole cluster refuses queries, as a stock deployment does.
//!
//! Keys of one SKU carry the hash tag `{sku<N>}` ([`sku_key`]), so a SKU's lock, stock and
//! orders live in one slot, on one master; [`sku_slot`] says which.

use std::net::SocketAddr;
use std::time::Duration;

use async_trait::async_trait;

use super::redis::{Appendfsync, connection, prefix_keys};
use crate::cluster::backend::{READY_TIMEOUT, wait_ready};
use crate::cluster::counters::{Meter, Reading};
use crate::cluster::durability::Durability;
use crate::cluster::error::ClusterError;
use crate::cluster::external::{
    Listed, MARKER, Missing, bounded, numbered, owned_or_empty, servers_or, target_err,
};
use crate::cluster::kind::{About, Asked, FromTarget, NodeAt, ServiceKind, Start, Started};
use crate::cluster::model::{Auth, Endpoints, NodeInfo, Role, Service};
use crate::cluster::namespace::Prefix;
use crate::cluster::node::{Node, NodeServer};
use crate::cluster::provision::Launcher;

/// Hash slots of a Redis Cluster.
pub const SLOTS: u16 = 16_384;
/// Masters of the cluster lockbench starts; each has one replica.
pub const MASTERS: usize = 3;
/// Nodes of the cluster lockbench starts: masters `redis-cluster-1..3`, then their replicas
/// `redis-cluster-4..6` (node `i + 3` replicates node `i`).
pub const NODES: usize = 2 * MASTERS;
/// How long a node may not answer before the others mark it failing (see the module doc).
const NODE_TIMEOUT_MS: u64 = 1000;
/// One query to a node while forming, probing or failing over.
const QUERY: Duration = Duration::from_secs(1);

/// CRC16-CCITT (XMODEM), the checksum Redis Cluster hashes keys with.
fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in data {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The slot of `key`: CRC16 of its hash tag (the text between the first `{` and the next `}`,
/// if not empty) or of the whole key, mod 16384.
pub fn slot(key: &str) -> u16 {
    let hashed = key
        .find('{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            rest.find('}').map(|close| &rest[..close])
        })
        .filter(|tag| !tag.is_empty())
        .unwrap_or(key);
    crc16(hashed.as_bytes()) % SLOTS
}

/// Key `<p>:<what>:{sku<N>}`: every key of one SKU hashes to [`sku_slot`].
pub fn sku_key(prefix: &Prefix, what: &str, sku: u32) -> String {
    prefix.key(what, format!("{{sku{sku}}}"))
}

/// The slot that holds SKU `sku`'s keys.
pub fn sku_slot(sku: u32) -> u16 {
    slot(&format!("{{sku{sku}}}"))
}

/// The slots master `i` (0-based) of lockbench's cluster is given: three even ranges.
fn slot_range(i: usize) -> (u16, u16) {
    let per = SLOTS as usize / MASTERS;
    let lo = i * per;
    let hi = if i + 1 == MASTERS {
        SLOTS as usize - 1
    } else {
        (i + 1) * per - 1
    };
    (lo as u16, hi as u16)
}

/// Node names, masters first; the names local ports are reserved under (a client port and a
/// cluster bus port each: the default bus port, client + 10000, may be taken or out of range).
pub(in crate::cluster) fn port_names() -> Vec<String> {
    (1..=NODES)
        .flat_map(|i| {
            [
                format!("redis-cluster-{i}"),
                format!("redis-cluster-{i} (bus)"),
            ]
        })
        .collect()
}

/// Runs `cmd` on the node at `addr`, bounded by [`QUERY`].
async fn query<T: redis::FromRedisValue>(
    addr: SocketAddr,
    auth: Option<&Auth>,
    cmd: &redis::Cmd,
) -> Result<T, String> {
    match tokio::time::timeout(QUERY, super::redis::query(addr, auth, cmd)).await {
        Ok(r) => r.map_err(|e| format!("{addr}: {e}")),
        Err(_) => Err(format!("{addr}: no answer within {QUERY:?}")),
    }
}

/// `INFO <section>` of the node at `addr` as `key:value` pairs.
async fn info(
    addr: SocketAddr,
    auth: Option<&Auth>,
    section: &str,
) -> Result<Vec<(String, String)>, String> {
    let text: String = query(addr, auth, redis::cmd("INFO").arg(section)).await?;
    Ok(text
        .lines()
        .filter_map(|l| l.trim().split_once(':'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect())
}

fn field<'a>(kv: &'a [(String, String)], key: &str) -> &'a str {
    kv.iter()
        .find(|(k, _)| k == key)
        .map_or("", |(_, v)| v.as_str())
}

/// Ok when the cluster the nodes `addrs` belong to is ready: every node answers with
/// `cluster_state:ok` and all 16384 slots served, and every master's replicas are online and
/// at its replication offset. `masters` asks for at least that many masters, each with a
/// replica (lockbench's own cluster); 0 accepts any shape (servers lockbench does not own).
pub async fn ready(
    addrs: &[SocketAddr],
    auth: Option<&Auth>,
    masters: usize,
) -> Result<(), String> {
    let mut master_count = 0;
    for &a in addrs {
        let c = info(a, auth, "cluster").await?;
        if field(&c, "cluster_enabled") != "1" {
            return Err(format!("{a} is not a cluster node (cluster_enabled:0)"));
        }
        let state: String = query(a, auth, redis::cmd("CLUSTER").arg("INFO")).await?;
        let kv: Vec<(String, String)> = state
            .lines()
            .filter_map(|l| l.trim().split_once(':'))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        if field(&kv, "cluster_state") != "ok" || field(&kv, "cluster_slots_ok") != "16384" {
            return Err(format!(
                "{a}: cluster_state:{}, {} of 16384 slots ok",
                field(&kv, "cluster_state"),
                field(&kv, "cluster_slots_ok")
            ));
        }
        if masters > 0 {
            // Every node also knows every master's replica (gossip may lag the replication).
            let ranges = slot_ranges(a, auth).await?;
            let with_replica = ranges
                .iter()
                .filter(|(_, _, nodes)| nodes.len() > 1)
                .count();
            if with_replica < masters {
                return Err(format!(
                    "{a} sees {with_replica} of {masters} masters with a replica"
                ));
            }
        }
        let r = info(a, auth, "replication").await?;
        if field(&r, "role") != "master" {
            continue;
        }
        master_count += 1;
        replicas_in_sync(a, auth, &r, usize::from(masters > 0)).await?;
    }
    if master_count < masters {
        return Err(format!("{master_count} of {masters} masters"));
    }
    Ok(())
}

/// Ok when the master at `addr` (its `INFO replication`, `r`) has at least `min` replicas,
/// every one online and acknowledging the master's offset. `WAIT` asks them for that ack at
/// once (REPLCONF GETACK): comparing `INFO`'s offsets instead read "not in sync" for 60 s on
/// Nov 25, 2026, because a replica acks once a second and the master's pings every second
/// can keep its last ack one ping (14 bytes) behind.
async fn replicas_in_sync(
    addr: SocketAddr,
    auth: Option<&Auth>,
    r: &[(String, String)],
    min: usize,
) -> Result<(), String> {
    let replicas: Vec<&str> = r
        .iter()
        .filter(|(k, _)| k.starts_with("slave") && k[5..].parse::<u32>().is_ok())
        .map(|(_, v)| v.as_str())
        .collect();
    if replicas.len() < min {
        return Err(format!("master {addr} has {} replicas", replicas.len()));
    }
    if let Some(line) = replicas.iter().find(|l| !l.contains("state=online")) {
        return Err(format!("master {addr}: replica not online: {line}"));
    }
    if replicas.is_empty() {
        return Ok(());
    }
    let acked: usize = query(addr, auth, redis::cmd("WAIT").arg(replicas.len()).arg(500)).await?;
    if acked < replicas.len() {
        return Err(format!(
            "master {addr}: {acked} of {} replicas acknowledged its offset within 500 ms",
            replicas.len()
        ));
    }
    Ok(())
}

/// The master and replicas serving `slot`, as the first node of `addrs` that answers
/// `CLUSTER SHARDS`-style `CLUSTER SLOTS` says.
pub async fn slot_owners(
    addrs: &[SocketAddr],
    auth: Option<&Auth>,
    slot: u16,
) -> Result<(SocketAddr, Vec<SocketAddr>), String> {
    let mut last = String::from("no node to ask");
    for &a in addrs {
        let ranges = match slot_ranges(a, auth).await {
            Ok(r) => r,
            Err(e) => {
                last = e;
                continue;
            }
        };
        for (lo, hi, nodes) in ranges {
            if !(lo..=hi).contains(&slot) {
                continue;
            }
            if let Some((master, replicas)) = nodes.split_first() {
                return Ok((*master, replicas.to_vec()));
            }
        }
        last = format!("{a}: no master serves slot {slot}");
    }
    Err(last)
}

/// `CLUSTER SLOTS` of the node at `addr`: each range with its master, then its replicas.
async fn slot_ranges(
    addr: SocketAddr,
    auth: Option<&Auth>,
) -> Result<Vec<(u16, u16, Vec<SocketAddr>)>, String> {
    let ranges: Vec<redis::Value> = query(addr, auth, redis::cmd("CLUSTER").arg("SLOTS")).await?;
    let num = |v: Option<&redis::Value>| match v {
        Some(redis::Value::Int(n)) => u16::try_from(*n).ok(),
        _ => None,
    };
    Ok(ranges
        .iter()
        .filter_map(|range| {
            let redis::Value::Array(items) = range else {
                return None;
            };
            let (lo, hi) = (num(items.first())?, num(items.get(1))?);
            Some((lo, hi, items[2..].iter().filter_map(node_addr).collect()))
        })
        .collect())
}

/// `[ip, port, id, …]` of a `CLUSTER SLOTS` entry.
fn node_addr(v: &redis::Value) -> Option<SocketAddr> {
    let redis::Value::Array(f) = v else {
        return None;
    };
    let ip = match f.first()? {
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).to_string(),
        redis::Value::SimpleString(s) => s.clone(),
        _ => return None,
    };
    let redis::Value::Int(port) = f.get(1)? else {
        return None;
    };
    format!("{ip}:{port}").parse().ok()
}

/// Whether the node at `addr` answers `ROLE` as a master.
pub async fn is_master(addr: SocketAddr, auth: Option<&Auth>) -> bool {
    let role: Result<Vec<redis::Value>, String> = query(addr, auth, &redis::cmd("ROLE")).await;
    matches!(role.as_deref(), Ok([redis::Value::BulkString(b), ..]) if b == b"master")
}

/// Flags of the cluster nodes: a small node timeout, `nodes.conf` in the node's `--dir`, a
/// bus port of its own when given, an immediate full sync for a new replica, and a master that
/// pings its replicas every second: Redis 7 leaves a replica out of `CLUSTER SLOTS` until its
/// replication offset leaves 0, which on an empty master waits for the first ping (default
/// every 10 s; measured: a new cluster took 11 s to read ready, now ~2 s).
fn cluster_flags(bus_port: Option<u16>) -> Vec<String> {
    let mut f: Vec<String> = [
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
        "--cluster-node-timeout",
        &NODE_TIMEOUT_MS.to_string(),
        "--repl-diskless-sync-delay",
        "0",
        "--repl-ping-replica-period",
        "1",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    if let Some(p) = bus_port {
        f.extend(["--cluster-port".to_string(), p.to_string()]);
    }
    f
}

/// Starts the six nodes with persistence `aof`, forms the cluster (slots, MEET, REPLICATE)
/// and waits until it is ready ([`ready`]).
pub(in crate::cluster) async fn start(
    l: Launcher<'_>,
    aof: Appendfsync,
) -> Result<Vec<Node>, ClusterError> {
    let starts = (1..=NODES).map(|i| async move {
        let name = format!("redis-cluster-{i}");
        let bus = match l {
            Launcher::Local(local) => Some(local.addr(&format!("{name} (bus)")).port()),
            Launcher::Containers(_) => None,
        };
        let role = if i <= MASTERS {
            Role::Master
        } else {
            Role::Replica
        };
        let mut node = super::redis::start(l, &name, role, aof, &cluster_flags(bus), false).await?;
        node.service = Service::RedisCluster;
        Ok::<_, ClusterError>((node, bus))
    });
    let mut nodes = Vec::with_capacity(NODES);
    let mut first_bus = None;
    let mut failed = None;
    for n in futures::future::join_all(starts).await {
        match n {
            Ok((n, bus)) => {
                first_bus = first_bus.or(bus);
                nodes.push(n)
            }
            Err(e) => failed = failed.or(Some(e)),
        }
    }
    if let Some(e) = failed {
        return Err(e);
    }
    form(&nodes, first_bus)
        .await
        .map_err(|detail| ClusterError::Setup {
            node: "redis-cluster".into(),
            what: "form the cluster".into(),
            detail,
        })?;
    let addrs: Vec<SocketAddr> = nodes.iter().map(|n| n.addr).collect();
    let mut watch: Vec<&mut dyn NodeServer> = nodes.iter_mut().map(|n| &mut *n.server).collect();
    wait_ready("redis-cluster", &mut watch, || ready(&addrs, None, MASTERS)).await?;
    Ok(nodes)
}

/// Gives each master its slot range, introduces every node to the first (whose bus port is
/// `bus`, when not the default), and, once every node knows the others, makes node `i + 3` a
/// replica of node `i`.
async fn form(nodes: &[Node], bus: Option<u16>) -> Result<(), String> {
    let mut ids = Vec::with_capacity(nodes.len());
    for n in nodes {
        ids.push(query::<String>(n.addr, None, redis::cmd("CLUSTER").arg("MYID")).await?);
    }
    for (i, n) in nodes.iter().take(MASTERS).enumerate() {
        let (lo, hi) = slot_range(i);
        let add = redis::cmd("CLUSTER")
            .arg("ADDSLOTSRANGE")
            .arg(lo)
            .arg(hi)
            .to_owned();
        query::<()>(n.addr, None, &add).await?;
    }
    let first = nodes[0].addr;
    for n in &nodes[1..] {
        let mut meet = redis::cmd("CLUSTER")
            .arg("MEET")
            .arg(first.ip().to_string())
            .arg(first.port())
            .to_owned();
        if let Some(b) = bus {
            meet.arg(b);
        }
        query::<()>(n.addr, None, &meet).await?;
    }
    // REPLICATE needs the master known to the replica; gossip takes a few heartbeats.
    let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
    for (i, n) in nodes.iter().enumerate().skip(MASTERS) {
        let master = &ids[i - MASTERS];
        let replicate = redis::cmd("CLUSTER")
            .arg("REPLICATE")
            .arg(master)
            .to_owned();
        loop {
            match query::<()>(n.addr, None, &replicate).await {
                Ok(()) => break,
                Err(e) if tokio::time::Instant::now() > deadline => {
                    return Err(format!("{}: CLUSTER REPLICATE: {e}", n.name));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }
    Ok(())
}

/// The Redis Cluster: slots over three masters, each with a replica.
pub(in crate::cluster) struct RedisCluster;

/// Its nodes are Redis servers: Redis's check, build and image.
const ABOUT: About = About {
    service: Service::RedisCluster,
    wanted: |needs| needs.redis_cluster,
    port_names: |_| port_names(),
    ..super::redis::ABOUT
};

#[async_trait]
impl ServiceKind for RedisCluster {
    fn about(&self) -> &'static About {
        &ABOUT
    }

    async fn start(&self, s: Start<'_>) -> Result<Started, ClusterError> {
        let nodes = start(s.launcher, s.opts.redis_appendfsync).await?;
        Ok(Started::listed(nodes, |ep| &mut ep.redis_cluster))
    }

    async fn leader<'n>(&self, q: Asked<'n, '_>) -> Result<Option<&'n Node>, ClusterError> {
        Err(ClusterError::Leader {
            service: q.service,
            detail: "a Redis Cluster has a master per slot range: name a SKU (`sku = N`) \
                     and its slot's master"
                .into(),
        })
    }

    fn has_slots(&self) -> bool {
        true
    }

    async fn slot_owners(
        &self,
        ep: &Endpoints,
        sku: u32,
    ) -> Result<(SocketAddr, Vec<SocketAddr>), String> {
        slot_owners(&ep.redis_cluster, None, sku_slot(sku)).await
    }

    fn work_meter(&self) -> Option<Meter> {
        Some(super::redis::WORK_METER)
    }

    async fn work(&self, ep: &Endpoints) -> Result<Reading, String> {
        super::redis::work(&ep.redis_cluster, ep.redis_auth.as_ref()).await
    }

    async fn durability(&self, n: NodeAt<'_>) -> Option<Durability> {
        Some(super::redis::durability(n.addr, n.ep.redis_auth.as_ref()).await)
    }

    fn copy_from_target(&self, from: FromTarget<'_>, out: &mut Endpoints) -> Result<(), Missing> {
        let (servers, auth) = (&from.target.redis_cluster, &from.target.redis_auth);
        let missing = ("[redis_cluster]", "a Redis Cluster");
        (out.redis_cluster, out.redis_auth) = servers_or(servers, auth, missing)?;
        Ok(())
    }

    async fn claim(&self, ep: &Endpoints) -> Result<(), ClusterError> {
        listed(ep).claim(claim_prefix).await
    }

    async fn release(&self, ep: &Endpoints) -> Vec<String> {
        listed(ep)
            .release("redis_cluster", "delete keys", wipe_prefix)
            .await
    }

    async fn describe(&self, ep: &Endpoints) -> Vec<NodeInfo> {
        let version = |a| bounded("version", super::redis::version(a, ep.redis_auth.as_ref()));
        numbered(
            Service::RedisCluster,
            Role::Member,
            &ep.redis_cluster,
            version,
        )
        .await
    }
}

/// External target: the nodes of `ep`, their login and the run's prefix.
fn listed(ep: &Endpoints) -> Listed<'_> {
    Listed::new(&ep.redis_cluster, &ep.redis_auth, &ep.prefix)
}

/// A claim on a Redis Cluster lockbench does not own: it must be ready as it is (every slot
/// served, every replica in sync; lockbench never reshapes it), and no node may hold keys
/// under the prefix without the owner key, which goes wherever its slot lives.
async fn claim_prefix(l: Listed<'_>) -> Result<(), ClusterError> {
    let (addrs, auth, p) = (l.addrs, l.auth, l.prefix);
    let err = |e| target_err("redis_cluster", e);
    bounded("check the cluster is ready", ready(addrs, auth, 0))
        .await
        .map_err(|e| target_err("redis_cluster", format!("not a ready cluster: {e}")))?;
    let mut found = Vec::new();
    for &addr in addrs {
        let mut con = bounded("connect", connection(addr, auth))
            .await
            .map_err(err)?;
        found.extend(
            bounded("scan keys", prefix_keys(&mut con, p, 100))
                .await
                .map_err(err)?,
        );
    }
    owned_or_empty("redis_cluster", p, &found, &p.owner_key())?;
    // The node that owns the owner key's slot answers; the others redirect.
    let owner_slot = slot(&p.owner_key());
    let (master, _) = bounded(
        "find the owner key's master",
        slot_owners(addrs, auth, owner_slot),
    )
    .await
    .map_err(err)?;
    let set = redis::cmd("SET").arg(p.owner_key()).arg(MARKER).to_owned();
    bounded("mark the prefix", async {
        let mut con = connection(master, auth).await?;
        set.query_async::<()>(&mut con)
            .await
            .map_err(|e| e.to_string())
    })
    .await
    .map_err(err)
}

/// Deletes the prefix's keys from every master of a Redis Cluster, one key at a time (keys of
/// different slots cannot go in one DEL); replicas follow their masters.
async fn wipe_prefix(l: Listed<'_>) -> Result<(), String> {
    let (addrs, auth, p) = (l.addrs, l.auth, l.prefix);
    for &addr in addrs {
        if !is_master(addr, auth).await {
            continue;
        }
        let mut con = connection(addr, auth).await?;
        loop {
            let keys = prefix_keys(&mut con, p, 1000).await?;
            if keys.is_empty() {
                break;
            }
            for k in keys {
                redis::cmd("DEL")
                    .arg(k)
                    .query_async::<()>(&mut con)
                    .await
                    .map_err(|e| e.to_string())?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_matches_the_redis_cluster_test_vector() {
        // The specification's example: CRC16 of "123456789" is 0x31C3.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        // Hash tags: only the text inside the first {...} counts; an empty tag does not.
        assert_eq!(slot("a:{user1000}:following"), slot("user1000"));
        assert_eq!(slot("foo{}{bar}"), crc16(b"foo{}{bar}") % SLOTS);
        // The redis crate's own slot function agrees.
        for key in ["lockbench:lock:{sku0}", "x{}", "plain", "{sku15}"] {
            let theirs = format!("{:?}", redis::cluster_routing::Slot::for_key(key));
            assert_eq!(theirs, format!("Slot({})", slot(key)), "{key}");
        }
    }

    #[test]
    fn a_skus_keys_share_a_slot_and_sixteen_skus_use_every_master() {
        let p = Prefix::default();
        assert_eq!(sku_key(&p, "lock", 3), "lockbench:lock:{sku3}");
        for sku in 0..16 {
            let s = sku_slot(sku);
            for what in ["lock", "stock", "orders"] {
                assert_eq!(slot(&sku_key(&p, what, sku)), s);
            }
        }
        let master = |sku: u32| {
            let s = sku_slot(sku);
            (0..MASTERS)
                .find(|&i| {
                    let (lo, hi) = slot_range(i);
                    (lo..=hi).contains(&s)
                })
                .expect("every slot has a master")
        };
        let per_master: Vec<Vec<u32>> = (0..MASTERS)
            .map(|m| (0..16).filter(|&sku| master(sku) == m).collect())
            .collect();
        // Which SKU lands where (slot ranges 0-5460, 5461-10921, 10922-16383).
        assert_eq!(
            per_master,
            [
                vec![2, 3, 6, 7, 10, 14],
                vec![1, 5, 9, 11, 12, 15],
                vec![0, 4, 8, 13]
            ]
        );
        assert_eq!(slot_range(2), (10922, 16383));
    }
}
