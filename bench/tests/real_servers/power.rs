//! Disk faults on real servers, their data on lazyfs (root, /dev/fuse): a power loss of Redis
//! with `appendfsync = "everysec"` loses acknowledged sales (the audit's `lost_sales`) or
//! oversells, and with "always" the books balance; so does MariaDB with
//! `innodb_flush_log_at_trx_commit` 2 against 1; etcd and ZooKeeper keep every acknowledged
//! grant; a slow disk under etcd's leader shows its delay in the probe, and its heal takes it
//! away. Each run is short: 3-7 s of load.

use lockbench::report::{FaultSummary, Summary};

use crate::common::{
    assert_faults_went_as_planned, assert_servers_gone, consensus_servers_available, lockbench,
    require, run_json, servers_available,
};

/// Whether lazyfs can mount here; says why not (and fails under CI).
fn fuse() -> bool {
    let why = lockbench::cluster::lazyfs::unavailable();
    require(
        &format!("FUSE as root for lazyfs ({})", why.as_deref().unwrap_or("")),
        why.is_none(),
    )
}

/// `lockbench run --json` of `strategy` on workloads/flash-sale.toml at 1000/s (its stock of
/// 4 × 1000 outlasts the load, so sales go on through the fault) for `seconds`, under the
/// shipped chaos file `chaos`, with `sets` on top; its faults went as planned, its servers
/// are gone and no lazyfs mount is left.
fn disk_run(strategy: &str, chaos: &str, seconds: u32, sets: &[&str]) -> Summary {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = lockbench();
    cmd.args(["run", "--json", "--strategy", strategy])
        .args(["--workload", "workloads/flash-sale.toml"])
        .args(["--set", "load.rate=1000", "--set"])
        .arg(format!("load.duration={seconds}s"))
        .args(["--chaos", chaos])
        .arg("--out")
        .arg(dir.path().join("out"));
    for s in sets {
        cmd.args(["--set", s]);
    }
    let s = run_json(&mut cmd);
    assert_faults_went_as_planned(&s);
    assert_servers_gone(&s);
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let ours = (mounts.lines()).filter(|l| l.contains(lockbench::cluster::lazyfs::FS_NAME));
    // Other tests' runs may mount at the same time: none of this run's folder is left.
    let out = dir.path().display().to_string();
    assert!(
        ours.clone().all(|l| !l.contains(&out)),
        "left mounted: {:?}",
        ours.collect::<Vec<_>>()
    );
    s
}

fn power_loss(s: &Summary) -> &FaultSummary {
    let f = &s.faults[0];
    assert_eq!(f.plan["kind"].as_str(), Some("power-loss"), "{f:?}");
    eprintln!(
        "{}: power loss of {:?}: dropped {:?} bytes in {:?} files; sold {}, lost sales {}, \
         oversell {}, lost updates {}",
        s.strategy,
        f.nodes,
        f.dropped_bytes,
        f.dropped_files,
        s.audit.sold,
        s.audit.lost_sales,
        s.audit.oversell,
        s.audit.lost_updates
    );
    assert!(
        f.dropped_bytes.is_some(),
        "a power loss reports what it dropped: {f:?}"
    );
    f
}

#[test]
fn a_power_loss_costs_redis_everysec_acknowledged_sales_and_always_none() {
    if !servers_available() || !fuse() {
        return;
    }
    let lossy = disk_run(
        "redis-lua-decr",
        "chaos/power-loss.toml",
        3,
        &["servers.redis_appendfsync=everysec"],
    );
    let f = power_loss(&lossy);
    assert!(f.dropped_bytes.unwrap() > 0, "{f:?}");
    // The audit says which: sales acknowledged and gone (with their decrement), or sold twice.
    let a = &lossy.audit;
    assert!(
        a.lost_sales + a.oversell > 0,
        "everysec lost nothing: {a:?}"
    );
    assert!(!a.is_intact(), "{a:?}");

    let safe = disk_run(
        "redis-lua-decr",
        "chaos/power-loss.toml",
        3,
        &["servers.redis_appendfsync=always"],
    );
    power_loss(&safe);
    let a = &safe.audit;
    assert_eq!(
        (a.lost_sales, a.oversell, a.lost_updates),
        (0, 0, 0),
        "{a:?}"
    );
    assert!(a.is_intact() && a.sold > 0, "{a:?}");
}

#[test]
fn a_power_loss_costs_mariadb_commits_with_flush_log_at_trx_commit_2_and_none_with_1() {
    if !servers_available() || !fuse() {
        return;
    }
    let chaos = "chaos/power-loss.toml";
    let lossy = disk_run(
        "mysql-atomic",
        chaos,
        3,
        &["servers.mariadb_flush_log_at_trx_commit=2"],
    );
    let f = power_loss(&lossy);
    assert!(f.dropped_bytes.unwrap() > 0, "{f:?}");
    assert!(
        lossy.audit.lost_sales + lossy.audit.oversell > 0,
        "{:?}",
        lossy.audit
    );
    let safe = disk_run("mysql-atomic", chaos, 3, &[]);
    power_loss(&safe);
    let a = &safe.audit;
    assert_eq!(
        (a.lost_sales, a.oversell, a.lost_updates),
        (0, 0, 0),
        "{a:?}"
    );
    assert!(a.is_intact() && a.sold > 0, "{a:?}");
}

#[test]
fn a_power_loss_of_the_etcd_or_zookeeper_leader_keeps_every_acknowledged_grant() {
    if !consensus_servers_available() || !fuse() {
        return;
    }
    for strategy in ["etcd", "zookeeper"] {
        let s = disk_run(strategy, "chaos/power-loss.toml", 4, &[]);
        let f = power_loss(&s);
        assert!(f.nodes[0].starts_with(&format!("{strategy}-")), "{f:?}");
        let a = &s.audit;
        assert_eq!(
            (s.double_grants, a.lost_updates, a.lost_sales, a.oversell),
            (0, 0, 0, 0),
            "{strategy}: {a:?}"
        );
        assert!(a.sold > 0, "{strategy}: {a:?}");
    }
}

#[test]
fn a_slow_disk_under_the_etcd_leader_shows_in_the_probe_and_heals() {
    if !consensus_servers_available() || !fuse() {
        return;
    }
    // The shipped scenario: 200 ± 50 ms from 2 s to 6 s.
    let s = disk_run("etcd", "chaos/slow-disk.toml", 7, &[]);
    let f = &s.faults[0];
    assert_eq!(
        (f.plan["kind"].as_str(), f.plan["delay"].as_str()),
        (Some("slow-disk"), Some("200ms"))
    );
    let p = f.probe.as_ref().expect("a slow disk records its probe");
    eprintln!(
        "{}: probe {}: before {:?} during {:?} after {:?}",
        s.strategy, p.path, p.before.rtt_ms, p.during.rtt_ms, p.after.rtt_ms
    );
    assert!(p.path.contains("etcd-"), "{p:?}");
    // 150-250 ms added to each fdatasync (a busy machine only adds).
    assert!(p.during.rtt_ms.len() >= 3, "{p:?}");
    let low = p.during.rtt_ms.iter().copied().fold(f64::MAX, f64::min);
    assert!(low >= 140.0, "during: {:?}", p.during);
    let (before, after) = (p.before.median_ms.unwrap(), p.after.median_ms.unwrap());
    assert!(before < 100.0 && after < 100.0, "{p:?}");
    assert_eq!((s.double_grants, s.audit.lost_updates), (0, 0));
}
