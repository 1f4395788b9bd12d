//! How buyers wait for a busy lock (`lock.wait`), on real Redis: a `notify` waiter takes the
//! lock a moment after the release, a `poll` waiter only at its next poll; and every lock that
//! waits client-side stays safe under contention in the mode that is not its default.

use std::sync::Arc;
use std::time::{Duration, Instant};

use lockbench::strategy::{Lock, build};
use lockbench::workload::Workload;

use crate::common::{
    CONTENTION, assert_safe_under_contention, cluster_of, measure, needs, servers_available,
};

/// Holder takes the lock, a waiter starts waiting, the holder releases 300 ms later: how long
/// after the release the waiter had it.
async fn handoff(lock: Arc<dyn Lock>, key: &str) -> Duration {
    let held = lock.acquire(0, key, "holder").await.expect("free lock");
    let waiter = {
        let (lock, key) = (lock.clone(), key.to_string());
        tokio::spawn(async move {
            let lease = lock.acquire(1, &key, "waiter").await;
            (Instant::now(), lease)
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let released = Instant::now();
    assert_eq!(lock.release(0, &held).await, Ok(true));
    let (got, lease) = waiter.await.unwrap();
    let lease = lease.expect("the waiter gets the lock after the release");
    assert_eq!(lock.release(1, &lease).await, Ok(true));
    got.saturating_duration_since(released)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_notify_waiter_acquires_just_after_the_release_a_poller_at_its_next_poll() {
    let Some((_dir, cluster)) = cluster_of(needs!(mariadb, redlock)).await else {
        return;
    };
    let ep = cluster.endpoints();
    for id in ["redis-setnx", "redis-reentrant", "redlock"] {
        let wait = |extra: &str| {
            let w = format!("[lock]\nttl = \"10s\"\nacquire_timeout = \"5s\"\n{extra}");
            Workload::parse("w.toml", &w, &[]).unwrap()
        };
        let notify = build(id, ep, &wait("wait = \"notify\"")).await.unwrap();
        // A 1 s poll: the waiter's polls fall 1 s apart from its first try (at the start), so
        // the release at 300 ms is seen at the poll near 1 s, ~700 ms later.
        let poll = wait("wait = \"poll\"\npoll_interval = \"1s\"\npoll_jitter = \"0s\"");
        let poll = build(id, ep, &poll).await.unwrap();
        let key = ep.prefix.lock_key(7);
        let after_notify = handoff(notify.lock.clone().unwrap(), &key).await;
        let after_poll = handoff(poll.lock.clone().unwrap(), &key).await;
        println!(
            "{id}: notify waiter had the lock {after_notify:?} after the release, poller {after_poll:?}"
        );
        // A few ms: one message and one SET. The margin (200 ms) holds beside CPU hogs; the
        // poller's wait (about 700 ms here) does not fit in it.
        assert!(
            after_notify < Duration::from_millis(200),
            "{id}: notify waiter took {after_notify:?} after the release"
        );
        assert!(
            after_poll > Duration::from_millis(300),
            "{id}: a 1 s poller cannot see the release within {after_poll:?}"
        );
    }
}

/// A notify waiter whose holder dies (no release, no message) retries once the lease's
/// remaining TTL has passed, not only at its acquire timeout.
#[tokio::test(flavor = "multi_thread")]
async fn a_notify_waiter_retries_when_the_lease_expires_without_a_release() {
    let Some((_dir, cluster)) = cluster_of(needs!(mariadb, redis)).await else {
        return;
    };
    let ep = cluster.endpoints();
    let w = "[lock]\nttl = \"600ms\"\nacquire_timeout = \"5s\"\nwait = \"notify\"";
    let w = Workload::parse("w.toml", w, &[]).unwrap();
    let built = build("redis-setnx", ep, &w).await.unwrap();
    let lock = built.lock.unwrap();
    let key = ep.prefix.lock_key(0);
    let started = Instant::now();
    // Taken and never released: it expires after 600 ms.
    let _abandoned = lock.acquire(0, &key, "dead").await.unwrap();
    let lease = lock
        .acquire(1, &key, "waiter")
        .await
        .expect("the lease expires");
    let waited = started.elapsed();
    println!("waited {waited:?} for a 600 ms lease nobody released");
    assert!(
        waited >= Duration::from_millis(550) && waited < Duration::from_millis(2500),
        "waited {waited:?}: should be about the lease's 600 ms, far below the 5 s timeout"
    );
    assert_eq!(lock.release(1, &lease).await, Ok(true));
}

/// Every lock that waits client-side, in the mode that is not its default, is safe under
/// contention (its default mode is covered by contention.rs).
macro_rules! safe_in_other_wait_mode {
    ($($name:ident => ($id:literal, $wait:literal)),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread")]
        async fn $name() {
            if !servers_available() {
                return;
            }
            let w = format!("{CONTENTION}wait = \"{}\"\n", $wait);
            let s = measure($id, &w).await;
            assert!(
                s.lock_wait.as_ref().is_some_and(|l| l.wait.starts_with($wait)),
                "{}: {:?}",
                $id,
                s.lock_wait
            );
            assert_safe_under_contention(&s);
        }
    )*};
}

safe_in_other_wait_mode! {
    redis_setnx_is_safe_waiting_by_notify => ("redis-setnx", "notify"),
    redis_setnx_fenced_is_safe_waiting_by_notify => ("redis-setnx-fenced", "notify"),
    redis_setnx_watchdog_is_safe_waiting_by_poll => ("redis-setnx-watchdog", "poll"),
    redis_reentrant_is_safe_waiting_by_poll => ("redis-reentrant", "poll"),
    redis_rwlock_is_safe_waiting_by_poll => ("redis-rwlock", "poll"),
    redlock_is_safe_waiting_by_notify => ("redlock", "notify"),
    redis_sentinel_is_safe_waiting_by_notify => ("redis-sentinel", "notify"),
}

/// A lock overloaded twice over (arrivals every 25 ms on average, each holding 50 ms) with a
/// 400 ms acquire timeout: waiters give up. Between a release and the next arrival's first
/// try the key lies free, often 25 ms or more; a notify waiter takes it a moment after the
/// release, a poller only at its next poll (250 ms apart), so the poller's give-ups saw the key
/// free for that long (missed wake-ups) and the notify waiter's almost never did. Both wait
/// long: a poller sleeps past a release, a notify waiter queues with every other waiter.
fn overloaded_one_key(wait: &str) -> String {
    format!(
        r#"
seed = 5
[inventory]
skus = 1
stock = 100000
[load]
rate = 40
clients = 32
duration = "3s"
timeout = "1s"
[critical_section]
hold = "50ms"
[lock]
ttl = "5s"
acquire_timeout = "400ms"
wait = "{wait}"
poll_interval = "250ms"
"#
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_poller_misses_wake_ups_that_a_notify_waiter_catches() {
    if !servers_available() {
        return;
    }
    let mut share = Vec::new();
    for wait in ["poll", "notify"] {
        let s = measure("redis-setnx", &overloaded_one_key(wait)).await;
        let c = s
            .contention
            .clone()
            .expect("a lock run measures contention");
        println!("{wait}: {c:?}");
        assert!(c.give_ups >= 10, "{wait}: too few give-ups to judge: {c:?}");
        assert!(c.acquire.count > 0 && c.handoffs_with_waiter > 0, "{c:?}");
        share.push(c.missed_wakeups as f64 / c.give_ups as f64);
    }
    let (poll, notify) = (share[0], share[1]);
    // Measured: poll 0.43, notify 0 (Nov 27, 2026).
    assert!(poll >= 0.2, "the poller's give-ups saw a free key: {poll}");
    assert!(
        notify <= poll / 2.0,
        "notify waiters miss far fewer wake-ups: notify {notify} vs poll {poll}"
    );
}
