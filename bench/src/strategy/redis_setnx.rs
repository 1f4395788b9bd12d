//! `redis-setnx`: `SET key token NX PX ttl` to acquire, a Lua compare-and-delete to release.

use std::net::SocketAddr;
use std::time::Duration;

use async_trait::async_trait;
use redis::aio::MultiplexedConnection;

use super::redis_conn::{classify, connections};
use super::{AcquireError, Lease, Lock, StrategyError, backoff, within};
use crate::record::ErrorKind;
use crate::workload::Workload;

/// Deletes the key only if it still holds our token: a plain DEL could remove a lock that
/// expired and was taken by someone else.
const UNLOCK: &str = include_str!("lua/unlock.lua");

/// The single-instance Redis lock.
pub struct SetNx {
    cons: Vec<MultiplexedConnection>,
    unlock: redis::Script,
    ttl_ms: u64,
    acquire_timeout: Duration,
    retry_interval: Duration,
    timeout: Duration,
}

impl SetNx {
    /// Connects to the Redis at `addr` (one connection per buyer, up to a bound).
    pub async fn connect(addr: SocketAddr, w: &Workload) -> Result<Self, StrategyError> {
        Ok(Self {
            cons: connections(addr, w).await?,
            unlock: redis::Script::new(UNLOCK),
            ttl_ms: w.lock.ttl.as_millis() as u64,
            acquire_timeout: w.lock.acquire_timeout,
            retry_interval: w.lock.retry_interval,
            timeout: w.load.timeout,
        })
    }

    fn con(&self, client: u32) -> MultiplexedConnection {
        self.cons[client as usize % self.cons.len()].clone()
    }
}

#[async_trait]
impl Lock for SetNx {
    async fn acquire(&self, client: u32, key: &str, token: &str) -> Result<Lease, AcquireError> {
        let mut con = self.con(client);
        let started = tokio::time::Instant::now();
        for retry in 0.. {
            let set = redis::cmd("SET")
                .arg(key)
                .arg(token)
                .arg("NX")
                .arg("PX")
                .arg(self.ttl_ms)
                .to_owned();
            match within(
                self.timeout,
                set.query_async::<Option<String>>(&mut con),
                classify,
            )
            .await
            {
                Ok(Some(_)) => {
                    return Ok(Lease {
                        key: key.into(),
                        token: token.into(),
                        fence: None,
                    });
                }
                Ok(None) => {}
                Err(k) => {
                    // A timed-out SET may still have taken the lock: free it if so (best effort;
                    // the TTL frees it otherwise).
                    if k == ErrorKind::Timeout {
                        let lease = Lease {
                            key: key.into(),
                            token: token.into(),
                            fence: None,
                        };
                        let _ = self.release(client, &lease).await;
                    }
                    return Err(AcquireError::Failed(k));
                }
            }
            let pause = backoff(self.retry_interval, retry);
            if started.elapsed() + pause > self.acquire_timeout {
                break;
            }
            tokio::time::sleep(pause).await;
        }
        Err(AcquireError::Busy)
    }

    async fn release(&self, client: u32, lease: &Lease) -> Result<bool, ErrorKind> {
        let mut con = self.con(client);
        let mut call = self.unlock.key(&lease.key);
        call.arg(&lease.token);
        let deleted: i64 = within(self.timeout, call.invoke_async(&mut con), classify).await?;
        Ok(deleted == 1)
    }
}
