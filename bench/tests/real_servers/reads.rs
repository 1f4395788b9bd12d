//! Reads (`load.read_fraction`) on real servers: a plain lock serves them with its exclusive
//! lock, safely, with no torn read; a strategy that takes no lock refuses them before any
//! server starts. (The read–write locks' own tests use the helpers of `common`: `read_heavy`,
//! `assert_reads_safe`, `assert_leaky_reads_caught`, `max_shared_holders`.)

use crate::common::{
    assert_leaky_reads_caught, assert_reads_safe, max_shared_holders, read_heavy, run_options,
    run_strategy, servers_available,
};

/// `redis-setnx-watchdog` (through `Locked`) and `mysql-for-update` (its own row-lock
/// transaction) at 90% reads: reads and writes served, every lease exclusive, no torn read,
/// nothing overlapped, the store intact.
#[tokio::test(flavor = "multi_thread")]
async fn a_plain_lock_serves_reads_exclusively_and_safely() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for id in ["redis-setnx-watchdog", "mysql-for-update"] {
        let s = run_strategy(id, &read_heavy(), dir.path()).await;
        assert_reads_safe(&s);
        assert_eq!(
            max_shared_holders(dir.path(), id),
            0,
            "{id}: a shared lease"
        );
        // About nine reads in ten, from the seed.
        let share = s.reads as f64 / (s.reads + s.audit.sold) as f64;
        assert!(share > 0.75, "{id}: reads {} of {}", s.reads, s.attempts);
    }
}

/// Lock-free strategies and the no-lock control refuse reads in the plan: nothing has started
/// when the error comes.
#[tokio::test(flavor = "multi_thread")]
async fn a_strategy_without_a_lock_refuses_reads_before_any_server_starts() {
    let dir = tempfile::tempdir().unwrap();
    for id in ["mysql-atomic", "mysql-optimistic", "redis-lua-decr", "none"] {
        let opts = run_options(id, &read_heavy(), dir.path().join(id));
        let err = opts.plan().unwrap_err().to_string();
        assert!(
            err.contains(id) && err.contains("read_fraction") && err.contains("takes no lock"),
            "{id}: {err}"
        );
        // A run takes only a plan that holds, so nothing was started: no results folder.
        assert!(!dir.path().join(id).join("summary.json").exists(), "{id}");
    }
}

/// The read–write locks at 90% reads under contention: readers really share a key (more than
/// one holds it at once), no reader ever sees a writer's change, no writer overlaps anyone,
/// the store is intact.
#[tokio::test(flavor = "multi_thread")]
async fn the_read_write_locks_share_reads_and_stay_safe_under_contention() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for id in ["redis-rwlock", "zookeeper-rwlock"] {
        let s = run_strategy(id, &read_heavy(), dir.path()).await;
        assert_reads_safe(&s);
        let shared = max_shared_holders(dir.path(), id);
        assert!(shared > 1, "{id}: readers never shared a key ({shared})");
    }
}

/// The control whose read lock does not exclude writers, in its trigger scenario (reads beside
/// writes on few keys): the checker catches it (torn reads or reader–writer overlaps, lock
/// BROKEN), while the same run's writes alone would have left the store intact.
#[tokio::test(flavor = "multi_thread")]
async fn a_read_lock_that_does_not_exclude_writers_is_caught() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = run_strategy("redis-rwlock-leaky-read", &read_heavy(), dir.path()).await;
    assert_leaky_reads_caught(&s);
}
