//! How many connections the servers lockbench starts accept: a run whose buyers each hold one
//! connection beyond that timed out by the thousands (`clients = 5000` on MariaDB's 2,000:
//! 3,646 timeouts and no hint why), so a run is refused before it starts instead.

use super::model::Service;
use super::services::{mariadb, postgres};

/// Each SQL server's `max_connections`, as lockbench starts it.
pub const CONNECTION_LIMITS: [(Service, u32); 2] = [
    (Service::Mariadb, mariadb::MAX_CONNECTIONS),
    (Service::Postgres, postgres::MAX_CONNECTIONS),
];

/// Connections lockbench keeps besides the buyers' (preparation, audit, work counters, a
/// settle), left free under each limit.
pub const RESERVED_CONNECTIONS: u32 = 16;
