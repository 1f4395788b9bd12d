//! `calibrate` on real servers, as root: the fit finds the terms a lock pays and not those it
//! does not. With the store untouched, `redis-setnx` (no persistence) pays round trips on its
//! serial path and no fsync; ZooKeeper pays both (its create and delete are synced by a quorum
//! before they are acknowledged). The injected delays are large beside a grant's own time, so
//! a busy machine's noise cannot make one term look like the other.

use std::time::Duration;

use lockbench::run::Source;
use lockbench::run::calibrate::{CalibrateOptions, calibrate_on};
use tokio_util::sync::CancellationToken;

use crate::common::{
    assert_networks_gone, consensus_servers_available, require, servers_available,
};

const WORKLOAD: &str = r#"
seed = 9
[critical_section]
hold = "1ms"
touch_store = false
[lock]
ttl = "5s"
acquire_timeout = "3s"
"#;

#[tokio::test(flavor = "multi_thread")]
async fn calibrate_finds_the_round_trips_and_fsyncs_a_lock_pays_and_not_the_others() {
    let root = require(
        "root (namespaces, NFQUEUE, FUSE)",
        nix::unistd::geteuid().is_root(),
    );
    if !(root && servers_available() && consensus_servers_available()) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("w.toml");
    std::fs::write(&file, WORKLOAD).unwrap();
    let ms = Duration::from_millis;
    let opts = CalibrateOptions {
        strategies: vec!["redis-setnx".into(), "zookeeper".into()],
        workload_file: file,
        overrides: Vec::new(),
        contenders: 4,
        trials: 2,
        trial: ms(500),
        warm_up: ms(300),
        points: vec![
            (ms(0), ms(0)),
            (ms(4), ms(0)),
            (ms(0), ms(8)),
            (ms(4), ms(8)),
        ],
        held_out: Vec::new(),
        budget: Duration::from_secs(300),
        out: dir.path().join("cal"),
        servers: Default::default(),
    };
    let source = Source::of(&opts.servers);
    let mut log = Vec::new();
    let m = calibrate_on(&opts, &source, &CancellationToken::new(), &mut log)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", String::from_utf8_lossy(&log)));
    assert!(m.errors.is_empty(), "{:?}", m.errors);
    assert!(dir.path().join("cal/model.json").exists());
    let fit = |id: &str| {
        (m.fits.iter().find(|f| f.strategy == id))
            .unwrap_or_else(|| panic!("{id} not fitted: {:?}", m.points))
    };
    let redis = fit("redis-setnx");
    eprintln!("redis-setnx: {redis:?}");
    // SET NX and the release script at least: ≥ 2 round trips; an fsync of 8 ms would add 8.
    assert!(redis.per_rtt.value > 1.5, "{:?}", redis.per_rtt);
    assert!(redis.per_fsync.value.abs() < 0.5, "{:?}", redis.per_fsync);
    let zk = fit("zookeeper");
    eprintln!("zookeeper: {zk:?}");
    assert!(zk.per_rtt.value > 1.5, "{:?}", zk.per_rtt);
    assert!(zk.per_fsync.value > 0.8, "{:?}", zk.per_fsync);
    // The probes measured what was injected, and the fit used it.
    let slow = (m.points.iter()).find(|p| p.injected.fsync_ms == 8.0 && p.injected.rtt_ms == 0.0);
    let probed = slow
        .and_then(|p| p.measured_fsync_ms)
        .expect("fsync probed");
    assert!((8.0..20.0).contains(&probed), "fsync probe {probed} ms");
    // Every trial ran in a private network, and none is left.
    let trials = dir
        .path()
        .join("cal/zookeeper/rtt4000us-fsync8000us/zookeeper/n4");
    let summaries: Vec<lockbench::report::Summary> = (1..=2)
        .map(|k| {
            let path = trials.join(format!("trial-{k}/summary.json"));
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
            serde_json::from_str(&text).unwrap()
        })
        .collect();
    assert_networks_gone(&summaries);
}
