//! The danger window on real servers: a holder paused past its lease (chaos/pause-holder.toml:
//! 2x the 2 s ttl, between its read and its write) learns of the loss about a pause past the
//! TTL later, and writes after it; a fence refuses that write. Without a fault, no window.

use lockbench::record::DangerWindow;
use lockbench::report::Summary;

use crate::common::{assert_faults_went_as_planned, compare_json, servers_available};

/// `lockbench compare` of `strategies` on workloads/chaos.toml, short, with `chaos` if any.
fn compare(strategies: &str, chaos: Option<&str>) -> Vec<Summary> {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec![
        "--workload",
        "workloads/chaos.toml",
        "--set",
        "load.duration=8s",
        "--set",
        "load.rate=200",
    ];
    if let Some(c) = chaos {
        args.extend(["--chaos", c]);
    }
    compare_json(strategies, &args, dir.path())
}

fn window(s: &Summary) -> &DangerWindow {
    let id = &s.strategy;
    s.danger_window
        .as_ref()
        .unwrap_or_else(|| panic!("{id}: a lease-based lock reports its danger window"))
}

/// The paused holder's lease ended about a TTL into its 4 s pause (2 s, less up to a renewal
/// period for the watchdog's), and it noticed only once resumed: loss → notice ≈ pause − TTL,
/// 2–2.7 s. Wide margins for a busy 2-core machine: 1.2–4.5 s.
fn assert_noticed_about_the_pause_past_the_ttl(s: &Summary) {
    let (id, d) = (&s.strategy, window(s));
    assert!(d.n >= 1 && d.n == d.lost, "{id}: {d:?}");
    assert_eq!((d.unnoticed, d.no_loss_moment), (0, 0), "{id}: {d:?}");
    assert_eq!(d.source.as_deref(), Some("lease-arithmetic"), "{id}");
    let max = d.loss_to_notice_max_us.unwrap();
    assert!(
        (1_200_000..4_500_000).contains(&max),
        "{id}: loss → notice {max} µs for a 4 s pause of a 2 s lease: {d:?}"
    );
    // The resumed holder wrote the stock it read before the pause: after its lease had ended.
    assert!(d.writes_after_loss >= 1, "{id}: {d:?}");
    assert!(
        d.write_after_loss_max_us.unwrap() >= 1_200_000,
        "{id}: {d:?}"
    );
}

#[test]
fn a_paused_holder_notices_a_pause_past_its_lease_and_a_fence_refuses_its_late_write() {
    if !servers_available() {
        return;
    }
    let all = compare(
        "redis-setnx-watchdog,redis-setnx-fenced",
        Some("chaos/pause-holder.toml"),
    );
    for s in &all {
        assert_faults_went_as_planned(s);
        assert_noticed_about_the_pause_past_the_ttl(s);
        let d = window(s);
        if s.strategy == "redis-setnx-fenced" {
            assert_eq!(d.refused_by_fence, d.writes_after_loss, "{d:?}");
            assert!(s.stale_rejected >= d.refused_by_fence, "{s:?}");
        } else {
            assert_eq!(d.refused_by_fence, 0, "unfenced: nothing refused {d:?}");
        }
    }
}

#[test]
fn without_a_fault_a_lease_based_lock_loses_nothing_and_reports_an_empty_window() {
    if !servers_available() {
        return;
    }
    let all = compare("redis-setnx-watchdog,mysql-for-update", None);
    let watchdog = &all[0];
    let d = window(watchdog);
    assert_eq!((d.n, d.lost, d.writes_after_loss), (0, 0, 0), "{d:?}");
    assert_eq!((d.loss_to_notice_p50_us, d.source.as_deref()), (None, None));
    // A database's lock is no lease: no window at all.
    assert_eq!(all[1].danger_window, None, "{:?}", all[1].strategy);
}
