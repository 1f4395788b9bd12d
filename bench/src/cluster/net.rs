//! A private network for partition faults: a bridge and one network namespace per "host",
//! each with its own address, created by this run and removed when it is dropped.
//!
//! Server nodes of the lock service run in server hosts, client worker processes in client
//! hosts, MariaDB in the root namespace on the bridge's own address; the coordinator reaches
//! everything through the bridge. A partition is a set of iptables DROP rules inside one
//! host's namespace (INPUT from and OUTPUT to the cut addresses), so it cuts server↔server
//! links as well as client↔server links; healing deletes them by their comment (a steady
//! delay's NFQUEUE rules stay). Deleting a namespace deletes its rules; the root namespace's
//! (a steady delay of the coordinator's packets) carry the bridge's name, and go with it, so
//! nothing outlives the network. Needs root (CAP_NET_ADMIN).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Mutex, OnceLock};

use super::binary::find_binary;
use super::error::ClusterError;
use super::owner::Owner;

/// Server hosts (enough for a 6-node Redis Cluster, one node per host).
pub const SERVER_HOSTS: usize = 6;
/// Client hosts (one per worker process).
pub const CLIENT_HOSTS: usize = 8;

/// Addresses inside namespaces of this process's networks, and where their namespace is.
fn registry() -> &'static Mutex<HashMap<IpAddr, PathBuf>> {
    static R: OnceLock<Mutex<HashMap<IpAddr, PathBuf>>> = OnceLock::new();
    R.get_or_init(Default::default)
}

/// The namespace that owns `ip`, if it belongs to a network of this process.
pub fn netns_of(ip: IpAddr) -> Option<PathBuf> {
    registry()
        .lock()
        .expect("netns registry is never poisoned")
        .get(&ip)
        .cloned()
}

/// One host: a namespace and its address.
#[derive(Debug, Clone)]
pub struct Host {
    /// Namespace name (`ip netns` name).
    pub netns: String,
    /// Its address on the bridge.
    pub ip: IpAddr,
}

/// The bridge and the namespaces of one run.
#[derive(Debug)]
pub struct Network {
    bridge: String,
    /// The bridge's own address (root namespace): MariaDB and the coordinator use it.
    pub gateway: IpAddr,
    /// Hosts for server nodes, by index (host 1 = `servers[0]`).
    pub servers: Vec<Host>,
    /// Hosts for client workers.
    pub clients: Vec<Host>,
}

pub(super) fn run(args: &[&str]) -> Result<(), String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`{}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn setup_err(what: &str, detail: String) -> ClusterError {
    ClusterError::Setup {
        node: "network".into(),
        what: what.into(),
        detail,
    }
}

impl Network {
    /// Creates the bridge and the namespaces. The subnet `10.213.K.0/24` is claimed by
    /// creating bridge `lbkK` (creation fails if another run holds it).
    pub fn create() -> Result<Self, ClusterError> {
        if !nix::unistd::geteuid().is_root() {
            return Err(setup_err(
                "partition faults",
                "they need root (CAP_NET_ADMIN) to create network namespaces and iptables \
                 rules; run as root or drop the partition faults"
                    .into(),
            ));
        }
        for tool in ["ip", "iptables"] {
            find_binary(tool, if tool == "ip" { "iproute2" } else { "iptables" })?;
        }
        reap_stale();
        let start = std::process::id() as usize % 250;
        for k in (0..250).map(|i| (start + i) % 250) {
            let bridge = format!("lbk{k}");
            if run(&["ip", "link", "add", &bridge, "type", "bridge"]).is_err() {
                continue; // taken by another run (or a leftover): try the next subnet
            }
            // The owner, for the next run to tell a SIGKILLed run's leftovers (`reap_stale`).
            if let Err(e) = run(&["ip", "link", "set", &bridge, "alias", &owner_alias()]) {
                let _ = run(&["ip", "link", "del", &bridge]);
                return Err(setup_err("mark the bridge", e));
            }
            let mut net = Self {
                bridge,
                gateway: IpAddr::V4(Ipv4Addr::new(10, 213, k as u8, 254)),
                servers: Vec::new(),
                clients: Vec::new(),
            };
            // From here on, Drop removes whatever was made.
            net.build(k as u8)
                .map_err(|e| setup_err("create network namespaces", e))?;
            return Ok(net);
        }
        Err(setup_err(
            "create a bridge",
            "no free lbkN bridge name (remove leftovers with `ip link del lbkN`)".into(),
        ))
    }

    fn build(&mut self, k: u8) -> Result<(), String> {
        let b = self.bridge.clone();
        run(&[
            "ip",
            "addr",
            "add",
            &format!("{}/24", self.gateway),
            "dev",
            &b,
        ])?;
        run(&["ip", "link", "set", &b, "up"])?;
        for i in 1..=(SERVER_HOSTS + CLIENT_HOSTS) {
            let netns = format!("{b}-{i}");
            let ip = IpAddr::V4(Ipv4Addr::new(10, 213, k, i as u8));
            run(&["ip", "netns", "add", &netns])?;
            let host = Host {
                netns: netns.clone(),
                ip,
            };
            if i <= SERVER_HOSTS {
                self.servers.push(host);
            } else {
                self.clients.push(host);
            }
            let veth = format!("{b}v{i}");
            run(&[
                "ip", "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &netns,
            ])?;
            run(&["ip", "link", "set", &veth, "master", &b, "up"])?;
            let inside = |args: &[&str]| {
                let mut all = vec!["ip", "-n", netns.as_str()];
                all.extend_from_slice(args);
                run(&all)
            };
            inside(&["addr", "add", &format!("{ip}/24"), "dev", "eth0"])?;
            inside(&["link", "set", "eth0", "up"])?;
            inside(&["link", "set", "lo", "up"])?;
            registry()
                .lock()
                .expect("netns registry is never poisoned")
                .insert(ip, PathBuf::from(format!("/run/netns/{netns}")));
        }
        Ok(())
    }

    /// The host whose address is `ip`.
    pub fn host(&self, ip: IpAddr) -> Option<&Host> {
        self.servers
            .iter()
            .chain(&self.clients)
            .find(|h| h.ip == ip)
    }

    /// Drops every packet between `host` and each of `others` (rules in `host`'s namespace).
    pub fn cut(&self, host: &Host, others: &[IpAddr]) -> Result<(), String> {
        for o in others {
            let o = o.to_string();
            for (chain, dir) in [("INPUT", "-s"), ("OUTPUT", "-d")] {
                run(&[
                    "ip",
                    "netns",
                    "exec",
                    &host.netns,
                    "iptables",
                    "-w",
                    "-A",
                    chain,
                    dir,
                    &o,
                    "-m",
                    "comment",
                    "--comment",
                    CUT_TAG,
                    "-j",
                    "DROP",
                ])?;
            }
        }
        Ok(())
    }

    /// The comment on this run's iptables rules in the root namespace (a steady delay of the
    /// coordinator's packets), by which [`reap_stale`] finds a dead run's.
    pub fn tag(&self) -> String {
        root_tag(&self.bridge)
    }

    /// An NFQUEUE number for the root namespace no other live run uses: the bridge's index
    /// (`lbkK`) is this run's alone.
    pub fn root_queue(&self) -> u16 {
        let k: u16 = self.bridge[3..].parse().expect("bridges are named lbkK");
        ROOT_QUEUES + k
    }

    /// Removes every rule `cut` added in `host` (by their comment: a steady delay's rules stay).
    pub fn heal(&self, host: &Host) -> Result<(), String> {
        remove_tagged(Some(&host.netns), CUT_TAG)
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        let mut reg = registry().lock().expect("netns registry is never poisoned");
        for h in self.servers.iter().chain(&self.clients) {
            reg.remove(&h.ip);
        }
        remove(&self.bridge, self.servers.len() + self.clients.len(), true);
    }
}

/// The first root-namespace NFQUEUE number of [`Network::root_queue`] (250 of them).
const ROOT_QUEUES: u16 = 30_000;

fn root_tag(bridge: &str) -> String {
    format!("lockbench-{bridge}")
}

/// The comment on a partition's DROP rules, by which its heal deletes them and no other.
const CUT_TAG: &str = "lockbench-cut";

/// Deletes the root namespace's rules that carry `tag` as their comment, warning of failures.
fn remove_root_rules(tag: &str) {
    if let Err(e) = remove_tagged(None, tag) {
        tracing::warn!("{e}");
    }
}

/// Deletes every iptables rule of namespace `netns` (`None`: the root namespace) that carries
/// `tag` as its comment.
fn remove_tagged(netns: Option<&str>, tag: &str) -> Result<(), String> {
    let prefix: Vec<&str> = match netns {
        Some(ns) => vec!["ip", "netns", "exec", ns, "iptables", "-w"],
        None => vec!["iptables", "-w"],
    };
    let out = Command::new(prefix[0])
        .args(&prefix[1..])
        .arg("-S")
        .output()
        .map_err(|e| format!("{} -S: {e}", prefix.join(" ")))?;
    let mut errors = Vec::new();
    for words in tagged_rules(&String::from_utf8_lossy(&out.stdout), tag) {
        let mut args = prefix.clone();
        args.push("-D");
        args.extend(words);
        if let Err(e) = run(&args) {
            errors.push(e);
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

/// The rules of `iptables -S` output that carry the comment `tag`, each as its words after
/// `-A` (chain first).
fn tagged_rules<'a>(listing: &'a str, tag: &str) -> Vec<Vec<&'a str>> {
    (listing.lines())
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|w| w.first() == Some(&"-A") && w.contains(&tag))
        .map(|w| w[1..].to_vec())
        .collect()
}

/// What a run writes into its bridge's alias: `lockbench pid=<owner>`.
fn owner_alias() -> String {
    format!("lockbench {}", Owner::me())
}

/// Removes bridge `bridge`, its hosts `<bridge>-1..=hosts` and their veth pairs; `warn`
/// reports what could not be removed (a leftover may be incomplete, so reaping does not).
fn remove(bridge: &str, hosts: usize, warn: bool) {
    // Rules of the root namespace outlive the namespaces: removed by their comment.
    remove_root_rules(&root_tag(bridge));
    for i in 1..=hosts {
        // The veth pair first: sockets of dead clients that still wait on a peer keep a
        // namespace alive after `ip netns del`, and with it the pair's outer end.
        let _ = run(&["ip", "link", "del", &format!("{bridge}v{i}")]);
        // Deleting the namespace also deletes its iptables rules.
        if let Err(e) = run(&["ip", "netns", "del", &format!("{bridge}-{i}")])
            && warn
        {
            tracing::warn!("{e}");
        }
    }
    if let Err(e) = run(&["ip", "link", "del", bridge])
        && warn
    {
        tracing::warn!("{e}");
    }
}

/// Removes the networks of lockbench runs that died without removing them (SIGKILL): a
/// bridge `lbkK` whose alias names an owner ([`Owner`]) that no longer runs. Bridges without the
/// alias, or of a live owner, are left alone.
pub fn reap_stale() {
    let Ok(dir) = std::fs::read_dir("/sys/class/net") else {
        return;
    };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let is_bridge = name
            .strip_prefix("lbk")
            .is_some_and(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()));
        if !is_bridge {
            continue;
        }
        let alias = std::fs::read_to_string(e.path().join("ifalias")).unwrap_or_default();
        let Some(owner) = alias
            .trim()
            .strip_prefix("lockbench ")
            .and_then(Owner::parse)
        else {
            continue;
        };
        if owner.alive() {
            continue;
        }
        tracing::info!(bridge = %name, %owner, "removing the network of a dead lockbench run");
        remove(&name, SERVER_HOSTS + CLIENT_HOSTS, false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tagged_rules_are_found_by_their_whole_comment_only() {
        let listing = "-P OUTPUT ACCEPT
-A OUTPUT -d 10.213.3.1/32 -m comment --comment lockbench-lbk3 -j NFQUEUE --queue-num 30003
-A OUTPUT -d 10.213.30.1/32 -m comment --comment lockbench-lbk30 -j NFQUEUE --queue-num 30030
-A INPUT -s 10.213.3.2/32 -m comment --comment lockbench-cut -j DROP
";
        let found = tagged_rules(listing, "lockbench-lbk3");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0][..3], ["OUTPUT", "-d", "10.213.3.1/32"]);
        assert_eq!(tagged_rules(listing, "lockbench-cut")[0][0], "INPUT");
        assert!(tagged_rules(listing, "lockbench-lbk4").is_empty());
    }
}
