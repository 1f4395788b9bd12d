//! A steady environment (a workload's `[environment]`: every round trip and every fsync made
//! slower for the whole run, by the cluster: `netem::steady_delay`, lazyfs's slow disk) and
//! its probe, the network and disk faults' own, taken once at the start of the load so the
//! summary says what the delays really were.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::cluster::netem::ProbeSamples;
use crate::cluster::{NodeInfo, OwnedCluster, Service};

/// Connects and fdatasyncs of the probe, and their spacing.
const SAMPLES: (usize, Duration) = (9, Duration::from_millis(10));
/// Bound of one connect beyond the delay (a SYN lost is resent after 1 s).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// The environment a run was made in, and what was measured in it (summary.json's
/// `environment`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    /// The delay added to every round trip (`environment.rtt`), ms.
    pub rtt_ms: f64,
    /// The delay added to every fsync (`environment.fsync`), ms.
    pub fsync_ms: f64,
    /// What the probe measured at the start of the load.
    pub probe: EnvironmentProbe,
}

/// Medians of the probe: TCP connects from the first client host to a node of the lock
/// service (the whole round trip, delay included), fdatasyncs of a small write in a node's
/// data directory; `None` where it could not measure.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EnvironmentProbe {
    pub rtt_ms: Option<f64>,
    pub fsync_ms: Option<f64>,
    /// Samples of each.
    pub n: usize,
}

impl Environment {
    /// The one line a run prints about it.
    pub fn note(&self) -> String {
        let ms = |v: Option<f64>| v.map_or("not measured".into(), |v| format!("{v:.2} ms"));
        format!(
            "environment: rtt +{} ms, fsync +{} ms; measured at the start of the load: round \
             trip {}, fdatasync {} (median of {})",
            self.rtt_ms,
            self.fsync_ms,
            ms(self.probe.rtt_ms),
            ms(self.probe.fsync_ms),
            self.probe.n
        )
    }
}

/// Probes the environment `(rtt, fsync)` of `cluster`'s nodes: the round trip to the first
/// node of `service` (else the first node) when `rtt` is set, the fsync of the first node's
/// data directory on lazyfs when `fsync` is.
pub async fn probe(
    cluster: &OwnedCluster,
    nodes: &[NodeInfo],
    service: Service,
    (rtt, fsync): (Duration, Duration),
) -> Environment {
    let (n, gap) = SAMPLES;
    let mut probe = EnvironmentProbe {
        n,
        ..EnvironmentProbe::default()
    };
    let node = (nodes.iter().find(|x| x.service == service)).or(nodes.first());
    if let (false, Some(node)) = (rtt.is_zero(), node) {
        let stop = Arc::new(AtomicBool::new(false));
        let bound = (n, gap, CONNECT_TIMEOUT + rtt * 2);
        if let Ok(h) = cluster.probe(&node.name, Some(0), bound, stop) {
            let joined = tokio::task::spawn_blocking(move || h.join()).await;
            probe.rtt_ms = (joined.ok().and_then(Result::ok).and_then(Result::ok))
                .and_then(|s: ProbeSamples| s.median());
        }
    }
    let dir = nodes.iter().find_map(|x| cluster.disk(&x.name).ok());
    if let (false, Some((dir, _))) = (fsync.is_zero(), dir) {
        let never = AtomicBool::new(false);
        let s = tokio::task::spawn_blocking(move || super::disk::series(&dir, n, gap, &never));
        probe.fsync_ms = s.await.ok().and_then(Result::ok).and_then(|s| s.median());
    }
    probe.fsync_ms = probe.fsync_ms.map(|v| (v * 100.0).round() / 100.0);
    Environment {
        rtt_ms: rtt.as_secs_f64() * 1e3,
        fsync_ms: fsync.as_secs_f64() * 1e3,
        probe,
    }
}
