//! Port selection: other servers may hold the default ports, so every port is checked.

use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr, TcpListener};

use super::ClusterError;

/// Hands out ports for the nodes of one run.
#[derive(Debug)]
pub struct PortAllocator {
    ip: IpAddr,
    next: Option<u16>,
    given: HashSet<u16>,
}

impl PortAllocator {
    /// `base = None` lets the OS choose free ports; `Some(p)` hands out p, p+1, … in order.
    pub fn new(ip: IpAddr, base: Option<u16>) -> Self {
        Self {
            ip,
            next: base,
            given: HashSet::new(),
        }
    }

    /// Returns a port for `node` that was free when checked.
    ///
    /// A chosen base port that is taken is an error (the user asked for it); an automatic
    /// choice retries, bounded, until it finds one not already given to this run.
    pub fn allocate(&mut self, node: &str) -> Result<SocketAddr, ClusterError> {
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
    fn busy_base_port_is_an_error_naming_the_node() {
        let held = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = held.local_addr().unwrap().port();
        let mut alloc = PortAllocator::new(IpAddr::V4(Ipv4Addr::LOCALHOST), Some(port));
        let err = alloc.allocate("redis-1").unwrap_err().to_string();
        assert!(
            err.contains("already in use") && err.contains("redis-1"),
            "{err}"
        );
    }

    #[test]
    fn automatic_ports_are_distinct() {
        let mut alloc = PortAllocator::new(IpAddr::V4(Ipv4Addr::LOCALHOST), None);
        let a = alloc.allocate("a").unwrap();
        let b = alloc.allocate("b").unwrap();
        assert_ne!(a.port(), b.port());
    }
}
