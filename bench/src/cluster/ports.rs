//! Port selection: other servers may hold the default ports, so every port is checked.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr, TcpListener};

use super::error::ClusterError;

/// Hands out ports for the nodes of one run.
#[derive(Debug)]
pub struct PortAllocator {
    ip: IpAddr,
    next: Option<u16>,
    given: HashSet<u16>,
    placement: Option<Placement>,
    /// Next port per private host: a fresh namespace has every port free.
    host_ports: HashMap<IpAddr, u16>,
}

/// Where nodes go in a private network ([`super::net`]): replicated services spread over the
/// server hosts by member number (`etcd-2` on host 2; a Redis master, its replicas and the
/// Sentinels pair up as `redis-master` + `sentinel-1` on host 1, ...), anything else (MariaDB)
/// on the gateway address in the root namespace.
#[derive(Debug, Clone)]
pub struct Placement {
    /// The bridge's address (root namespace).
    pub gateway: IpAddr,
    /// Server host addresses, host 1 first.
    pub servers: Vec<IpAddr>,
}

impl Placement {
    /// The address node `node` gets.
    pub fn ip_for(&self, node: &str) -> IpAddr {
        let name = node.split(' ').next().unwrap_or(node);
        let host = if name == "redis-master" {
            Some(1)
        } else if let Some(n) = name.strip_prefix("redis-replica-") {
            n.parse::<usize>().ok().map(|n| n + 1)
        } else if name == "mariadb" {
            None
        } else if name == "postgres" {
            // Its own host, so a partition can cut it (and a holder's session) off; no
            // strategy needs PostgreSQL beside another service's host-1 node.
            Some(1)
        } else if name == "postgres-replica" {
            Some(2)
        } else {
            name.rsplit_once('-')
                .and_then(|(_, n)| n.parse::<usize>().ok())
        };
        host.and_then(|h| self.servers.get(h.wrapping_sub(1)))
            .copied()
            .unwrap_or(self.gateway)
    }
}

impl PortAllocator {
    /// `base = None` lets the OS choose free ports; `Some(p)` hands out p, p+1, … in order.
    pub fn new(ip: IpAddr, base: Option<u16>) -> Self {
        Self {
            ip,
            next: base,
            given: HashSet::new(),
            placement: None,
            host_ports: HashMap::new(),
        }
    }

    /// Places nodes on the hosts of a private network (the gateway replaces `ip`).
    pub fn with_placement(mut self, p: Placement) -> Self {
        self.ip = p.gateway;
        self.placement = Some(p);
        self
    }

    /// Returns a port for `node` that was free when checked.
    ///
    /// A chosen base port that is taken is an error (the user asked for it); an automatic
    /// choice retries, bounded, until it finds one not already given to this run.
    pub fn allocate(&mut self, node: &str) -> Result<SocketAddr, ClusterError> {
        if let Some(p) = &self.placement {
            let ip = p.ip_for(node);
            if ip != p.gateway {
                let port = self.host_ports.entry(ip).or_insert(20_000);
                *port += 1;
                return Ok(SocketAddr::new(ip, *port));
            }
        }
        if let Some(port) = self.next {
            let addr = SocketAddr::new(self.ip, port);
            self.next = port.checked_add(1);
            return match TcpListener::bind(addr) {
                Ok(_) => {
                    self.given.insert(port);
                    Ok(addr)
                }
                Err(_) => Err(ClusterError::PortBusy {
                    addr,
                    node: node.to_string(),
                }),
            };
        }
        for _ in 0..64 {
            let listener = TcpListener::bind(SocketAddr::new(self.ip, 0))
                .map_err(|e| ClusterError::io(format!("bind {}:0 for {node}", self.ip), e))?;
            let addr = listener
                .local_addr()
                .map_err(|e| ClusterError::io("local_addr", e))?;
            if self.given.insert(addr.port()) {
                return Ok(addr);
            }
        }
        Err(ClusterError::Setup {
            node: node.to_string(),
            what: "pick a free port".into(),
            detail: "the OS kept returning ports already given to this run".into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn placement_spreads_members_over_hosts() {
        let h = |i: u8| IpAddr::V4(Ipv4Addr::new(10, 0, 0, i));
        let p = Placement {
            gateway: h(254),
            servers: (1..=5).map(h).collect(),
        };
        for (node, host) in [
            ("redis-master", 1),
            ("redis-replica-2", 3),
            ("sentinel-2", 2),
            ("etcd-3 (peer)", 3),
            ("zookeeper-1 (election)", 1),
            ("redis-5", 5),
            ("mariadb", 254),
            ("postgres", 1),
            ("postgres-replica", 2),
        ] {
            assert_eq!(p.ip_for(node), h(host), "{node}");
        }
    }

    #[test]
    fn busy_base_port_is_an_error_naming_the_node() {
        let held = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = held.local_addr().unwrap().port();
        let mut alloc = PortAllocator::new(IpAddr::V4(Ipv4Addr::LOCALHOST), Some(port));
        let err = alloc.allocate("redis-1").unwrap_err().to_string();
        assert_contains!(err, "already in use", "redis-1");
    }

    #[test]
    fn automatic_ports_are_distinct() {
        let mut alloc = PortAllocator::new(IpAddr::V4(Ipv4Addr::LOCALHOST), None);
        let a = alloc.allocate("a").unwrap();
        let b = alloc.allocate("b").unwrap();
        assert_ne!(a.port(), b.port());
    }
}
