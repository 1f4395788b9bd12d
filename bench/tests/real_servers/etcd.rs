//! etcd's session per buyer on a real cluster: the lease is reused (about two consensus writes
//! per sale, the granted TTL reported), an acquire cut while queued leaves no waiter key
//! behind, and a buyer whose attempt was cut while holding takes the lock again without its
//! late release freeing the new hold.

use std::time::{Duration, Instant};

use lockbench::record::Outcome;
use lockbench::strategy::{self, Built, LeaseSlot, Purchase};
use lockbench::workload::Workload;

use crate::common::{cluster, consensus_servers_available, measure};

/// 8 buyers on one SKU, closed loop: contention, with far more sales than buyers (each buyer's
/// one lease grant is then a small share of the writes). A 1 s ttl, which etcd raises.
const REUSE: &str = r#"
seed = 3
[inventory]
skus = 1
stock = 100000
[load]
mode = "closed"
clients = 8
duration = "3s"
max_attempts = 20000
timeout = "2s"
[critical_section]
hold = "2ms"
[lock]
ttl = "1s"
acquire_timeout = "3s"
"#;

#[tokio::test(flavor = "multi_thread")]
async fn etcd_reuses_one_session_per_buyer_for_about_two_consensus_writes_per_sale() {
    if !consensus_servers_available() {
        return;
    }
    let s = measure("etcd", REUSE).await;
    assert!(s.safe, "{s:?}");
    assert_eq!(
        (s.double_grants, s.lease_lost, s.errors),
        (0, 0, 0),
        "{s:?}"
    );
    // A lease grant, keep-alive stream and revoke per sale would be ~4 writes per sale; a
    // session per buyer pays the lock key's put and delete (2) plus 8 grants in all.
    assert!(
        s.audit.sold >= 40,
        "too few sales to judge: {}",
        s.audit.sold
    );
    let w = s.consensus_writes.as_ref().expect("measured on etcd");
    let per_sale = w.per_sale.expect("something sold");
    assert!(
        per_sale <= 2.5,
        "{} writes for {} sales: {per_sale} per sale",
        w.writes,
        s.audit.sold
    );
    assert!(w.writes >= 2 * s.audit.sold, "put + delete per sale: {w:?}");
    // etcd's minimum TTL is 1.5 x the 1 s election timeout, in whole seconds.
    assert_eq!(s.lease_ttl_granted_s, Some(2.0));
}

/// Built `etcd` on a cluster of its own, prepared: one SKU, holds of `hold`.
async fn built(dir: &std::path::Path, hold: &str) -> (lockbench::cluster::OwnedCluster, Built) {
    let w = Workload::parse(
        "w.toml",
        &format!(
            "[inventory]\nskus = 1\nstock = 20\n[load]\nclients = 4\ntimeout = \"2s\"\n\
             [critical_section]\nhold = \"{hold}\"\n[lock]\nttl = \"30s\"\nacquire_timeout = \"20s\""
        ),
        &[],
    )
    .unwrap();
    let cluster = cluster(strategy::find("etcd").unwrap().needs, dir).await;
    let built = strategy::build("etcd", cluster.endpoints(), &w)
        .await
        .unwrap();
    built.store.prepare(&[20]).await.unwrap();
    built.strategy.prepare(1).await.unwrap();
    (cluster, built)
}

fn purchase(seq: u64, client: u32, lease: &LeaseSlot) -> Purchase<'_> {
    Purchase {
        ask: lockbench::workload::Ask::anonymous(seq),
        seq,
        client,
        sku: 0,
        read: false,
        lease,
    }
}

/// A waiter cut while queued in `Lock` (its future dropped, as the driver cuts an attempt)
/// leaves no key that would hold the queue after the holder: with a 30 s session lease kept
/// alive, such a key would block every later buyer for the whole run.
#[tokio::test(flavor = "multi_thread")]
async fn an_acquire_cut_while_queued_leaves_no_waiter_key() {
    if !consensus_servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (cluster, built) = built(dir.path(), "2s").await;
    let (s1, s2, s3) = (
        LeaseSlot::default(),
        LeaseSlot::default(),
        LeaseSlot::default(),
    );
    let first = purchase(1, 0, &s1);
    let holder = built.strategy.attempt(&first);
    let cut = async {
        // Queued behind the 2 s hold, then cut.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let p = purchase(2, 1, &s2);
        let r = tokio::time::timeout(Duration::from_millis(500), built.strategy.attempt(&p));
        assert!(r.await.is_err(), "the waiter should still be queued");
    };
    let (first, ()) = tokio::join!(holder, cut);
    assert_eq!(first.outcome, Outcome::Sold);
    assert!(s2.take().is_none(), "the cut waiter never held the lock");
    // The next buyer gets the lock at once (the hold is 2 s; 8 s is far from the 30 s lease
    // a stale key would last), and so does the cut buyer itself.
    for (seq, client) in [(3, 2), (4, 1)] {
        let started = Instant::now();
        let r = tokio::time::timeout(
            Duration::from_secs(8),
            built.strategy.attempt(&purchase(seq, client, &s3)),
        )
        .await
        .unwrap_or_else(|_| panic!("buyer {client}: blocked by a stale waiter key"));
        assert_eq!(r.outcome, Outcome::Sold, "buyer {client}");
        assert!(s3.take().is_some());
        assert!(started.elapsed() < Duration::from_secs(8));
    }
    built.store.close().await;
    drop(built);
    drop(cluster);
}

/// A buyer's attempt cut while it holds the lock (its release left to the background), then
/// the same buyer at once again, beside another buyer: the late release must not free the
/// new hold, so the two later leases never overlap. On one thread, so the new `Lock` is sent
/// before the background release's delete: the order in which a reused key would be freed.
#[tokio::test]
async fn a_late_release_of_a_cut_attempt_never_frees_the_same_buyers_next_hold() {
    if !consensus_servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (cluster, built) = built(dir.path(), "800ms").await;
    for round in 0..5u64 {
        let cut_slot = LeaseSlot::default();
        let p = purchase(10 * round + 1, 0, &cut_slot);
        let r = tokio::time::timeout(Duration::from_millis(300), built.strategy.attempt(&p));
        assert!(
            r.await.is_err(),
            "round {round}: should still be in its hold"
        );
        assert!(cut_slot.take().is_some(), "round {round}");
        let (a, b) = (LeaseSlot::default(), LeaseSlot::default());
        let (pa, pb) = (
            purchase(10 * round + 2, 0, &a),
            purchase(10 * round + 3, 1, &b),
        );
        let (ra, rb) = tokio::join!(built.strategy.attempt(&pa), built.strategy.attempt(&pb));
        assert_eq!((ra.outcome, rb.outcome), (Outcome::Sold, Outcome::Sold));
        let (a, b) = (a.take().unwrap(), b.take().unwrap());
        // A late release that freed the new hold shows as its key found gone at release, or
        // as the two leases overlapping.
        assert!(
            !a.lost && !b.lost,
            "round {round}: a hold's key was deleted under it"
        );
        assert!(
            a.released <= b.acquired || b.released <= a.acquired,
            "round {round}: two holders at once: {a:?} / {b:?}"
        );
    }
    built.store.close().await;
    drop(built);
    drop(cluster);
}

/// A waiter whose lease expires while it waits (revoked here, as a partition lets it expire)
/// must not be told it holds the lock: etcd 3.4's lock service ends that wait as a grant,
/// although the waiter's key went with its lease. The strategy reads its key after the grant,
/// as Go's Mutex does since 3.5, and takes the lock again on a new session; whatever it
/// returns, the lock it holds is a key that exists.
#[tokio::test(flavor = "multi_thread")]
async fn a_waiter_whose_lease_expired_while_queued_is_never_granted_a_lock_it_lost() {
    if !consensus_servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (cluster, built) = built(dir.path(), "10ms").await;
    let lock = built.lock.clone().expect("etcd is a lock");
    let addrs: Vec<String> = cluster
        .endpoints()
        .etcd
        .iter()
        .map(|a| format!("http://{a}"))
        .collect();
    let mut etcd = etcd_client::Client::connect(addrs, None).await.unwrap();
    let name = "lockbench-test/expired-waiter";
    let prefix = || Some(etcd_client::GetOptions::new().with_prefix());
    let holder = lock.acquire(0, name, "holder").await.unwrap();
    let waiting = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.acquire(1, name, "waiter").await })
    };
    // The waiter's key appears behind the holder's; its lease is the hex after the name.
    let deadline = Instant::now() + Duration::from_secs(10);
    let waiter_lease = loop {
        let keys = etcd.get(format!("{name}/"), prefix()).await.unwrap();
        if keys.count() == 2 {
            let last = keys
                .kvs()
                .iter()
                .max_by_key(|kv| kv.create_revision())
                .unwrap();
            let hex = last.key_str().unwrap().rsplit('/').next().unwrap();
            break i64::from_str_radix(hex, 16).unwrap();
        }
        assert!(Instant::now() < deadline, "the waiter never queued");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    etcd.lease_revoke(waiter_lease).await.unwrap();
    assert!(lock.release(0, &holder).await.unwrap(), "the holder held");
    let granted = tokio::time::timeout(Duration::from_secs(20), waiting)
        .await
        .expect("the waiter's acquire ended")
        .unwrap()
        .expect("granted on a new session: the holder is gone");
    let keys = etcd.get(format!("{name}/"), prefix()).await.unwrap();
    assert_eq!(
        keys.count(),
        1,
        "granted, yet no key holds the lock for it: {:?}",
        keys.kvs()
    );
    let held = keys.kvs()[0].key_str().unwrap().rsplit('/').next().unwrap();
    assert_ne!(
        i64::from_str_radix(held, 16).unwrap(),
        waiter_lease,
        "the lock is held on a new session"
    );
    assert!(lock.release(1, &granted).await.unwrap());
    built.store.close().await;
    drop(built);
    drop(cluster);
}
