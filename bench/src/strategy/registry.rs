//! The one list of strategies. Each entry is a [`StrategyInfo`] declared in its strategy's own
//! file, metadata and constructor together; adding a strategy is that file plus one line in
//! [`ALL`].

use super::StrategyError;
use super::coord::{etcd, zookeeper};
use super::entry::{Built, StrategyInfo};
use super::redis::{
    cluster as redis_cluster, lua_decr as redis_lua_decr, redlock, reentrant as redis_reentrant,
    rwlock as redis_rwlock, setnx as redis_setnx,
};
use super::sql::{
    mysql_lock_table, mysql_strategies, postgres_advisory, postgres_strategies, postgres_units,
};
use crate::cluster::Endpoints;

/// The real lock libraries, run through adapters (`lib:<name>`); not in [`ALL`], which a
/// comparison runs by default (they need `scripts/install-deps.sh --adapters`).
pub use super::adapter::STRATEGIES as LIBRARY_STRATEGIES;
use crate::workload::Workload;

/// Every strategy, in the order the comparison lists them.
pub const ALL: &[StrategyInfo] = &[
    mysql_strategies::NONE,
    mysql_strategies::FOR_UPDATE,
    mysql_strategies::OPTIMISTIC,
    mysql_strategies::ATOMIC,
    mysql_strategies::ATOMIC_NO_LIMIT,
    mysql_strategies::ATOMIC_NOT_IDEMPOTENT,
    mysql_strategies::ATOMIC_BLIND_REAPER,
    mysql_lock_table::LOCK_TABLE,
    mysql_lock_table::LOCK_TABLE_FENCED,
    postgres_strategies::FOR_UPDATE,
    postgres_strategies::ATOMIC,
    postgres_units::SKIP_LOCKED,
    postgres_strategies::ADVISORY_XACT,
    postgres_advisory::ADVISORY,
    postgres_advisory::ADVISORY_FENCED,
    postgres_strategies::NONE,
    redis_setnx::SETNX,
    redis_setnx::WATCHDOG,
    redis_setnx::FENCED,
    redis_reentrant::REENTRANT,
    redis_rwlock::RWLOCK,
    redlock::REDLOCK,
    redis_setnx::SENTINEL,
    redis_setnx::SENTINEL_WAIT,
    redis_cluster::SETNX,
    redis_cluster::SETNX_WAIT,
    redis_cluster::LUA_DECR,
    redis_setnx::GET_DEL,
    redis_setnx::SETNX_EXPIRE,
    redis_rwlock::LEAKY_READ,
    redis_lua_decr::LUA_DECR,
    redis_lua_decr::LUA_DECR_NO_LIMIT,
    zookeeper::ZOOKEEPER,
    etcd::ETCD,
    zookeeper::ZOOKEEPER_FENCED,
    zookeeper::ZOOKEEPER_RWLOCK,
    etcd::ETCD_FENCED,
];

/// Looks a strategy up by id.
pub fn find(id: &str) -> Result<&'static StrategyInfo, StrategyError> {
    ALL.iter()
        .chain(LIBRARY_STRATEGIES)
        .find(|s| s.id == id)
        .ok_or_else(|| StrategyError::Unknown {
            id: id.to_string(),
            known: ALL
                .iter()
                .chain(LIBRARY_STRATEGIES)
                .map(|s| s.id)
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// Looks a strategy up and checks it can run `w`: the one check every entry point makes
/// before any server starts.
pub fn resolve(id: &str, w: &Workload) -> Result<&'static StrategyInfo, StrategyError> {
    let info = find(id)?;
    info.supports(w)?;
    let l = &w.lock;
    let wait_set = l.wait.is_some() || l.poll_interval.is_some() || l.poll_jitter.is_some();
    if wait_set && LIBRARY_STRATEGIES.iter().any(|s| s.id == info.id) {
        return Err(StrategyError::Unsupported {
            id: info.id.into(),
            what: "lock.wait, lock.poll_interval or lock.poll_jitter: a library waits its own \
                   way (its default is in `lockbench list`); leave them unset for lib: rows",
        });
    }
    Ok(info)
}

/// Connects strategy `id` to its servers.
pub async fn build(id: &str, ep: &Endpoints, w: &Workload) -> Result<Built, StrategyError> {
    resolve(id, w)?.connect(ep, w).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_fenced_entries_name_their_token() {
        let every: Vec<&StrategyInfo> = ALL.iter().chain(LIBRARY_STRATEGIES).collect();
        let mut ids: Vec<&str> = every.iter().map(|s| s.id).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), every.len(), "an id is registered twice");
        for s in every {
            assert!(!s.fenced || s.fence_token.is_some(), "{}", s.id);
            assert!(!s.fenced || s.locks, "{}", s.id);
        }
    }

    #[test]
    fn a_wait_the_lock_cannot_do_is_refused_before_any_server_starts() {
        let notify = Workload::parse("w.toml", "[lock]\nwait = \"notify\"", &[]).unwrap();
        let e = resolve("mysql-lock-table", &notify).expect_err("refused");
        assert!(e.to_string().contains("lock.wait = \"notify\""), "{e}");
        // Redis locks can; locks that queue server-side ignore the key.
        assert!(resolve("redis-setnx", &notify).is_ok());
        assert!(resolve("zookeeper", &notify).is_ok());
        let e = resolve("lib:redis-py", &notify).expect_err("a library waits its own way");
        assert!(e.to_string().contains("lock.wait"), "{e}");
        assert!(resolve("lib:redis-py", &Workload::parse("w.toml", "", &[]).unwrap()).is_ok());
        let policy = find("redis-setnx").unwrap().wait_policy(&notify).unwrap();
        assert_eq!(policy.to_string(), "notify");
        let default = Workload::parse("w.toml", "", &[]).unwrap();
        let redlock = find("redlock").unwrap().wait_policy(&default).unwrap();
        assert_eq!(redlock.to_string(), "poll 200ms±100ms");
    }
}
