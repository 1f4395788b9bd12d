//! The PostgreSQL strategies on a real PostgreSQL: the no-lock control on the PostgreSQL store
//! oversells (its audit sees it), every lock and lock-free deduction is safe under contention
//! with nothing lapsed, the advisory lock's fencing tokens increase in grant order, and a
//! holder whose session ended learns at its release that its lease was lost.

use std::time::Duration;

use lockbench::record::Outcome;
use lockbench::strategy::{self, LeaseSlot, Purchase};
use lockbench::workload::Workload;
use sqlx::{ConnectOptions, Connection};

use crate::common::{
    CONTENTION, assert_nothing_lapsed, assert_safe_under_contention, cluster, measure,
    postgres_available, run_strategy, servers_available,
};

/// MariaDB (the shared store, for `pg-advisory`) and PostgreSQL are installed.
fn available() -> bool {
    servers_available() && postgres_available()
}

/// The contention scenario with 5 s to sell out, as the consensus locks and Redlock get: on a
/// starved 2-core machine a lock on another server than the store (two round trips more per
/// sale) may not sell 20 units in 1.5 s.
fn longer() -> String {
    let w = CONTENTION.replace("duration = \"1500ms\"", "duration = \"5s\"");
    assert_ne!(w, CONTENTION, "the contention workload changed");
    w
}

#[tokio::test(flavor = "multi_thread")]
async fn pg_none_oversells_under_contention() {
    if !available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = run_strategy("pg-none", CONTENTION, dir.path()).await;
    assert!(
        s.audit.oversell > 0,
        "the no-lock control on PostgreSQL was not caught: {s:?}"
    );
    assert!(
        s.audit.lost_updates > 0,
        "blind writes must lose updates: {s:?}"
    );
    assert!(!s.safe);
}

/// Safe strategies under real contention: safe, with nothing lapsed.
macro_rules! pg_safe_under_contention {
    ($($name:ident => $id:literal, $workload:expr);* $(;)?) => {$(
        #[tokio::test(flavor = "multi_thread")]
        async fn $name() {
            if !available() {
                return;
            }
            let s = measure($id, &$workload).await;
            assert_safe_under_contention(&s);
            assert_nothing_lapsed(&s);
        }
    )*};
}

pg_safe_under_contention! {
    pg_for_update_is_safe_under_contention => "pg-for-update", CONTENTION;
    pg_atomic_is_safe_under_contention => "pg-atomic", CONTENTION;
    pg_skip_locked_is_safe_under_contention => "pg-skip-locked", CONTENTION;
    pg_advisory_xact_is_safe_under_contention => "pg-advisory-xact", CONTENTION;
    pg_advisory_is_safe_under_contention => "pg-advisory", longer();
    pg_advisory_fenced_is_safe_under_contention => "pg-advisory-fenced", longer();
    // Polling pg_try_advisory_lock (lock.wait = "poll") instead of waiting in the server's queue.
    pg_advisory_polling_is_safe_under_contention => "pg-advisory",
        longer().replace("[lock]", "[lock]\nwait = \"poll\"");
}

/// Two buyers' purchase of SKU 0 (`client` picks the session).
fn buyer(seq: u64, lease: &LeaseSlot) -> Purchase<'_> {
    Purchase {
        ask: lockbench::workload::Ask::anonymous(seq),
        seq,
        client: seq as u32,
        sku: 0,
        read: false,
        lease,
    }
}

/// Four buyers, a lock wait of 300 ms: the advisory lock's mechanics, one call at a time.
const FEW: &str = "[inventory]\nskus = 1\nstock = 10\n[load]\nclients = 4\n\
                   [lock]\nacquire_timeout = \"300ms\"";

/// The session advisory lock on one MariaDB + PostgreSQL:
/// - `pg-advisory-fenced`: each grant draws a larger token than the grant before it, and the
///   lease carries it; `pg-advisory` (same lock, unfenced) draws none;
/// - it dies with its session: ended by the server while the holder works, the lock goes to the
///   next buyer at once, and the holder's release finds it no longer held
///   (`pg_advisory_unlock` false on the session it reconnects): a lost lease, as a run reports.
#[tokio::test(flavor = "multi_thread")]
async fn advisory_fences_follow_grants_and_an_ended_session_loses_its_lease() {
    if !available() {
        return;
    }
    let w = Workload::parse("w.toml", FEW, &[]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster(
        strategy::find("pg-advisory-fenced").unwrap().needs,
        dir.path(),
    )
    .await;
    let fenced = strategy::build("pg-advisory-fenced", cluster.endpoints(), &w)
        .await
        .unwrap();
    fenced.strategy.prepare(1).await.unwrap();
    let lock = fenced.lock.clone().unwrap();
    let mut last = 0;
    for client in [0, 1, 2, 1, 0] {
        let lease = lock.acquire(client, "k", "t").await.expect("free lock");
        let fence = lease.fence.expect("the fenced lock draws a token");
        assert!(fence > last, "token {fence} after {last}");
        last = fence;
        assert_eq!(lock.release(client, &lease).await, Ok(true));
    }
    fenced.strategy.close().await;
    let plain = strategy::build("pg-advisory", cluster.endpoints(), &w)
        .await
        .unwrap();
    let lock = plain.lock.clone().unwrap();
    let lease = lock.acquire(0, "k", "t0").await.unwrap();
    assert_eq!(lease.fence, None);
    // Another buyer finds it held (its wait ends at lock_timeout).
    let busy = lock.acquire(1, "k", "t1").await;
    assert!(busy.is_err(), "granted twice: {busy:?}");
    // The server ends the holder's session (as a failover or an idle timeout would).
    let ep = cluster.endpoints().postgres.clone().unwrap();
    let mut admin = ep.connect_options().connect().await.unwrap();
    let ended: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_locks \
         WHERE locktype = 'advisory' AND granted AND pid <> pg_backend_pid()",
    )
    .fetch_all(&mut admin)
    .await
    .unwrap();
    assert_eq!(ended, [true], "one session held an advisory lock");
    let next = tokio::time::timeout(Duration::from_secs(5), lock.acquire(1, "k", "t1"))
        .await
        .expect("bounded")
        .expect("the lock died with its session");
    // Past the idle check, the holder's session is found dead and replaced before the unlock.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(lock.release(0, &lease).await, Ok(false), "a lost lease");
    assert_eq!(lock.release(1, &next).await, Ok(true));
    let _ = admin.close().await;
    plain.strategy.close().await;
}

/// `pg-advisory-xact` and `pg-for-update` free their lock with the transaction: an attempt cut
/// mid-hold (its future dropped, its connection with it) leaves no lock behind, and the next
/// buyer sells at once.
#[tokio::test(flavor = "multi_thread")]
async fn a_cut_transaction_leaves_no_lock_behind() {
    if !available() {
        return;
    }
    let w = Workload::parse(
        "cut.toml",
        "[inventory]\nskus = 1\nstock = 10\n[load]\nclients = 2\n\
         [critical_section]\nhold = \"1500ms\"\n[lock]\nacquire_timeout = \"1s\"",
        &[],
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster(strategy::find("pg-for-update").unwrap().needs, dir.path()).await;
    for id in ["pg-advisory-xact", "pg-for-update"] {
        let built = strategy::build(id, cluster.endpoints(), &w).await.unwrap();
        built.store.prepare(&[10]).await.unwrap();
        let slot = LeaseSlot::default();
        let cut = tokio::time::timeout(
            Duration::from_millis(500),
            built.strategy.attempt(&buyer(0, &slot)),
        )
        .await;
        assert!(cut.is_err(), "{id}: still in its hold");
        let slot = LeaseSlot::default();
        let next = built.strategy.attempt(&buyer(1, &slot)).await;
        assert_eq!(next.outcome, Outcome::Sold, "{id}");
        built.store.close().await;
    }
}
