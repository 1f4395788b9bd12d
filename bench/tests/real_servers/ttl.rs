//! The "ttl without renewal" pitfall, triggered for real: the hold outlives the lease. The
//! broken controls are caught (double grants, oversell, a BROKEN lock), a watchdog keeps the
//! lease alive, and a fenced store turns the overlap into refused writes ("broken, fenced",
//! never `safe`).

use lockbench::check::{LockVerdict, StoreVerdict};

use crate::common::{measure, servers_available};

/// The lease (20 ms) expires while the holder is still in its critical section (60 ms): the
/// trigger of the pitfall. Without a watchdog or fencing, the next buyer takes the lock while
/// the first still works: a double grant, and the blind write oversells.
const HOLD_OVER_TTL: &str = r#"
seed = 5
[inventory]
skus = 1
stock = 20
[load]
mode = "closed"
clients = 16
duration = "1500ms"
max_attempts = 20000
timeout = "2s"
[critical_section]
hold = "60ms"
[lock]
ttl = "20ms"
acquire_timeout = "3s"
"#;

#[tokio::test(flavor = "multi_thread")]
async fn redis_setnx_is_caught_when_the_hold_outlives_the_ttl() {
    if !servers_available() {
        return;
    }
    let s = measure("redis-setnx", HOLD_OVER_TTL).await;
    assert!(
        s.double_grants > 0,
        "expired leases not seen as double grants: {s:?}"
    );
    assert!(s.audit.oversell > 0, "no oversell: {s:?}");
    assert!(s.lease_lost > 0, "releases should find their lease gone");
    assert!(s.double_grant_incidents > 0 && s.double_grant_incidents <= s.double_grants);
    assert_eq!(
        (s.lock_verdict, s.store_verdict, s.safe),
        (Some(LockVerdict::Broken), StoreVerdict::Corrupted, false)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn redis_get_del_is_caught_when_the_hold_outlives_the_ttl() {
    if !servers_available() {
        return;
    }
    let s = measure("redis-get-del", HOLD_OVER_TTL).await;
    assert!(s.double_grants > 0 && s.audit.oversell > 0, "{s:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn redis_setnx_watchdog_stays_safe_when_the_hold_outlives_the_ttl() {
    if !servers_available() {
        return;
    }
    // Same shape (hold = 3 × ttl), but a 250 ms lease: renewed every ttl / 3, it then has
    // 167 ms of slack, so a loaded CI machine's scheduling hiccup cannot fake a lapse; without
    // renewals every hold would still lapse. 3 s of load (5 s per attempt) for a few sales.
    let w = HOLD_OVER_TTL
        .replace("\"20ms\"", "\"250ms\"")
        .replace("\"60ms\"", "\"750ms\"")
        .replace("\"1500ms\"", "\"3s\"")
        .replace("timeout = \"2s\"", "timeout = \"5s\"");
    let s = measure("redis-setnx-watchdog", &w).await;
    assert_eq!(s.double_grants, 0, "the watchdog let a lease expire: {s:?}");
    assert!(s.safe && s.audit.sold > 0, "{s:?}");
    assert_eq!((s.release_failures, s.lease_lost), (0, 0));
}

#[tokio::test(flavor = "multi_thread")]
async fn mysql_lock_table_is_caught_and_its_fenced_variant_is_safe_when_the_hold_outlives_the_ttl()
{
    if !servers_available() {
        return;
    }
    let plain = measure("mysql-lock-table", HOLD_OVER_TTL).await;
    assert!(
        plain.double_grants > 0 && plain.audit.oversell > 0,
        "{plain:?}"
    );
    assert_eq!(plain.lock_verdict, Some(LockVerdict::Broken));
    let fenced = measure("mysql-lock-table-fenced", HOLD_OVER_TTL).await;
    assert!(
        fenced.double_grants > 0 && fenced.stale_rejected > 0,
        "{fenced:?}"
    );
    assert_eq!(
        (fenced.lock_verdict, fenced.store_verdict, fenced.safe),
        (Some(LockVerdict::BrokenFenced), StoreVerdict::Intact, false),
        "the lock broke, fencing kept the store: never `safe`"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn redis_setnx_fenced_refuses_the_stale_writes_when_the_hold_outlives_the_ttl() {
    if !servers_available() {
        return;
    }
    let s = measure("redis-setnx-fenced", HOLD_OVER_TTL).await;
    // The lock still fails (leases overlap), but the store turns that into rejections.
    assert!(s.double_grants > 0, "{s:?}");
    assert!(s.stale_rejected > 0, "{s:?}");
    assert_eq!(s.audit.oversell, 0, "{s:?}");
    // Liveness is another matter: when every lease expires mid-section, a newer holder has
    // nearly always read first, so almost every write is refused (sales may be zero).
    assert_eq!(s.store_verdict, StoreVerdict::Intact, "{s:?}");
    assert_eq!(s.lock_verdict, Some(LockVerdict::BrokenFenced));
    assert!(!s.safe, "a broken lock is never `safe`, fenced or not");
}
