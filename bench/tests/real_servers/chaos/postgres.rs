//! A holder cut off from PostgreSQL for longer than the server's keep-alive: its session
//! advisory lock ends with the session, unseen by the holder (chaos/cut-postgres-holder.toml).

use lockbench::check::{LockVerdict, StoreVerdict};

use super::{by_id, compare, root};
use crate::common::{assert_networks_gone, postgres_available, servers_available};

/// The server ends the cut holder's session after its keep-alive (11 s) and frees its lock; a
/// buyer on the other side takes it while the holder, 13 s into its critical section, still
/// works: pg-advisory is caught with two holders and a lost update, and pg-advisory-fenced's
/// store refuses the stale write (broken, fenced; intact).
#[test]
fn a_holder_cut_past_the_keep_alive_loses_its_advisory_lock_unseen() {
    if !servers_available() || !postgres_available() || !root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // 16 SKUs: at the cut, some lock is held on the cut side however the holders fell (each
    // SKU's first holder is on either side with even odds). Few arrivals: every holder keeps
    // its buyer 13 s, and the waiters give up after 3 s.
    let all = compare(
        dir.path(),
        "pg-advisory,pg-advisory-fenced",
        "chaos/cut-postgres-holder.toml",
        &[
            "inventory.skus=16",
            "load.rate=16",
            "load.clients=48",
            "load.duration=\"16s\"",
            "load.timeout=\"2s\"",
            "critical_section.hold=\"13s\"",
            "lock.acquire_timeout=\"3s\"",
        ],
    );
    for s in &all {
        eprintln!(
            "{}: sold {}, double grants {}, lost updates {}, stale writes refused {}",
            s.strategy, s.audit.sold, s.double_grants, s.audit.lost_updates, s.stale_rejected
        );
        let f = &s.faults[0];
        assert!(
            f.nodes.contains(&"cut from worker-2".to_string()),
            "{}: {f:?}",
            s.strategy
        );
        assert!(s.audit.sold > 0, "{}", s.strategy);
        assert!(
            s.double_grant_incidents > 0,
            "{}: a cut holder outlived its session, yet no later grant overlapped it: {:?}",
            s.strategy,
            s.faults
        );
    }
    let plain = by_id(&all, "pg-advisory");
    assert_eq!(plain.lock_verdict, Some(LockVerdict::Broken));
    assert!(
        plain.audit.lost_updates > 0 && !plain.safe,
        "the cut holder's write lands after the next holder's read: {:?}",
        plain.audit
    );
    let fenced = by_id(&all, "pg-advisory-fenced");
    assert_eq!(fenced.lock_verdict, Some(LockVerdict::BrokenFenced));
    assert_eq!(fenced.store_verdict, StoreVerdict::Intact);
    assert!(fenced.stale_rejected > 0, "the stale write was refused");
    assert_eq!((fenced.audit.oversell, fenced.audit.lost_updates), (0, 0));
    assert_networks_gone(&all);
}
