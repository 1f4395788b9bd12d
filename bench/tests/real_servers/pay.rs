//! Reserve, then pay, on MariaDB (issue 39 part 7): workloads/sale-pay.toml under
//! chaos/pause-reaper.toml, both directions. The reapers stop between their select of expired
//! reservations and their update while payments arrive at the expiry's edge: the blind
//! reaper's control returns units twice and returns paid units (CORRUPTED); the conditional
//! transition (`… WHERE state = 'reserved'`) keeps every unit paid or returned exactly once.

use std::path::Path;

use lockbench::chaos::ChaosPlan;
use lockbench::check::{PayAudit, StoreVerdict};
use lockbench::report::Summary;
use lockbench::run::{RunOptions, run};
use lockbench::workload::Workload;
use tokio_util::sync::CancellationToken;

use crate::common::{assert_servers_gone, servers_available};

/// The repository's root (workloads/, chaos/).
fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

/// `strategy` on workloads/sale-pay.toml under chaos/pause-reaper.toml, in-process.
async fn paused_reapers(strategy: &str, dir: &Path) -> Summary {
    let s = sale_pay(strategy, "chaos/pause-reaper.toml", dir).await;
    let f = &s.faults[0];
    assert_eq!(f.nodes, vec!["reapers".to_string()], "{strategy}: {f:?}");
    // Both ends are rounded to the ms; a busy machine may heal late.
    let paused = f.healed_s.unwrap() - f.started_s.unwrap();
    assert!(
        (0.49..1.5).contains(&paused),
        "{strategy}: paused {paused}s"
    );
    s
}

/// `strategy` on workloads/sale-pay.toml under `chaos`, in-process.
async fn sale_pay(strategy: &str, chaos: &str, dir: &Path) -> Summary {
    let file = root().join("workloads/sale-pay.toml");
    let w = Workload::load(&file, &[]).unwrap();
    let plan = ChaosPlan::load(&root().join(chaos), &w).unwrap();
    let opts = RunOptions {
        server_work: false,
        ..RunOptions::new(strategy, w, Some(plan), "sale-pay.toml", dir.join(strategy))
    };
    let plan = opts.plan().unwrap_or_else(|e| panic!("{strategy}: {e}"));
    let s = run(&plan, &CancellationToken::new())
        .await
        .unwrap_or_else(|e| panic!("{strategy}: {e}"));
    assert_servers_gone(&s);
    assert!(s.faults[0].healed_s.is_some(), "{strategy}: {:?}", s.faults);
    s
}

fn pay(s: &Summary) -> &PayAudit {
    let sale = s.sale.as_ref().expect("a sale");
    sale.pay.as_ref().expect("[pay] audited")
}

/// The reapers had expired reservations to return, and payments came in: the race was on.
fn assert_raced(id: &str, p: &PayAudit) {
    // About 1,000 reservations: a fifth abandoned, the rest paid 0.7-1.3 s after, against a
    // 1 s expiry. Hundreds expire; far more than 20 even on a slow machine.
    assert!(p.reservations > 300, "{id}: {p:?}");
    assert!(p.expired > 20 && p.paid > 100, "{id}: {p:?}");
    assert!(p.counts.abandoned > 20, "{id}: {p:?}");
}

/// The blind reaper is caught: two reapers paused on the same selected rows return them
/// twice, and the payments made during the pause are returned too.
#[tokio::test(flavor = "multi_thread")]
async fn the_blind_reaper_under_a_paused_reap_returns_units_twice_and_is_caught() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = paused_reapers("mysql-atomic-blind-reaper", dir.path()).await;
    let p = pay(&s);
    assert_raced(&s.strategy, p);
    assert!(
        p.returned_twice > 0 || p.paid_and_returned > 0,
        "the paused reapers' blind updates should have returned a unit twice or a paid one: \
         {p:?}"
    );
    assert!(p.violations() > 0 && s.audit.pay_violations > 0, "{p:?}");
    assert_eq!(s.store_verdict, StoreVerdict::Corrupted);
    assert_eq!(s.headline(), "caught (control)");
}

/// The conditional transition keeps every unit paid or returned exactly once under the same
/// pause: the lock-free atomic update and the row lock.
#[tokio::test(flavor = "multi_thread")]
async fn a_conditional_reaper_under_the_same_pause_stays_intact_with_balancing_books() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for id in ["mysql-atomic", "mysql-for-update"] {
        let s = paused_reapers(id, dir.path()).await;
        let p = pay(&s);
        assert_raced(id, p);
        assert_eq!(
            (p.returned_twice, p.paid_and_returned),
            (0, 0),
            "{id}: {p:?}"
        );
        assert_eq!(p.stray_payments, 0, "{id}: {p:?}");
        // Every unit ended paid or returned: the reapers finished before the audit.
        assert_eq!(p.reserved, 0, "{id}: {p:?}");
        assert!(p.books.iter().all(|b| b.balances()), "{id}: {:?}", p.books);
        // Payments after the expiry whose reservation was returned first were refused.
        assert!(p.counts.refused_payments > 0, "{id}: {p:?}");
        assert_eq!(s.store_verdict, StoreVerdict::Intact, "{id}: {:?}", s.audit);
        assert!(s.safe, "{id}");
    }
}

/// The sale's fault (part 6): MariaDB killed 0.5 s into the surge and restarted 2 s later.
/// Payments and reaper rounds fail during the outage and resume after it; the conditional
/// transitions still leave every unit paid or returned exactly once.
#[tokio::test(flavor = "multi_thread")]
async fn a_conditional_reaper_stays_intact_when_mariadb_is_killed_in_the_surge() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let id = "mysql-atomic";
    let s = sale_pay(id, "chaos/kill-master-in-surge.toml", dir.path()).await;
    let p = pay(&s);
    assert!(p.reservations > 50 && p.expired > 0, "{p:?}");
    assert_eq!((p.returned_twice, p.paid_and_returned), (0, 0), "{p:?}");
    assert_eq!((p.stray_payments, p.reserved), (0, 0), "{p:?}");
    assert!(p.books.iter().all(|b| b.balances()), "{:?}", p.books);
    assert_eq!(s.store_verdict, StoreVerdict::Intact, "{:?}", s.audit);
}

/// A workload without `[pay]` refuses the blind reaper, and `[pay]` refuses a lock outside
/// the store (its reaper would restock behind the lock), before any server starts.
#[test]
fn pay_runs_only_where_the_stock_row_serializes_the_reaper() {
    let sale = Workload::load(&root().join("workloads/sale.toml"), &[]).unwrap();
    let o = RunOptions::new("mysql-atomic-blind-reaper", sale, None, "s", "x".into());
    let e = o.plan().unwrap_err().to_string();
    assert!(e.contains("without [pay]"), "{e}");
    let w = Workload::load(&root().join("workloads/sale-pay.toml"), &[]).unwrap();
    let o = RunOptions::new("redis-setnx", w.clone(), None, "s", "x".into());
    let e = o.plan().unwrap_err().to_string();
    assert!(e.contains("[pay]"), "{e}");
    let plain = Workload::load(&root().join("workloads/chaos.toml"), &[]).unwrap();
    let e = ChaosPlan::load(&root().join("chaos/pause-reaper.toml"), &plain).unwrap_err();
    assert!(e.to_string().contains("no [pay]"), "{e}");
    assert!(ChaosPlan::load(&root().join("chaos/pause-reaper.toml"), &w).is_ok());
}
