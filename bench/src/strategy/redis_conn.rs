//! Redis connections and error classification shared by the Redis strategies.

use std::net::SocketAddr;

use redis::AsyncConnectionConfig;
use redis::aio::MultiplexedConnection;

use super::StrategyError;
use crate::record::ErrorKind;
use crate::workload::Workload;

/// At most this many sockets per Redis server; buyers beyond it share (multiplexed).
const MAX_CONNECTIONS: u32 = 256;

/// One multiplexed connection per buyer (bounded), each with the workload's timeouts.
pub async fn connections(
    addr: SocketAddr,
    w: &Workload,
) -> Result<Vec<MultiplexedConnection>, StrategyError> {
    let client = redis::Client::open(format!("redis://{addr}/"))?;
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(w.load.timeout))
        .set_response_timeout(Some(w.load.timeout));
    let n = w.load.clients.clamp(1, MAX_CONNECTIONS);
    let connect = (0..n).map(|_| client.get_multiplexed_async_connection_with_config(&config));
    Ok(futures::future::try_join_all(connect).await?)
}

/// Classifies a Redis error: an error reply is definite, anything else may not be.
pub fn classify(e: &redis::RedisError) -> ErrorKind {
    if e.is_timeout() {
        ErrorKind::Timeout
    } else if e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() {
        ErrorKind::Connection
    } else {
        ErrorKind::Server
    }
}
