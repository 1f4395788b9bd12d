//! Published failures that are one of lockbench's own chaos files: the same strategies run under
//! it through the real run's pipeline (`run::run`), once per server build, and each build's
//! verdicts are read against what was published.

use std::path::Path;

use tokio_util::sync::CancellationToken;

use crate::chaos::ChaosPlan;
use crate::check::{LockVerdict, StoreVerdict};
use crate::cluster::{RedisBuild, Service};
use crate::report::Summary;
use crate::run::{RunError, RunOptions};
use crate::workload::Workload;

/// Strategies under a chaos file on each Redis build.
pub struct FaultRun {
    /// The strategy that should break, then the one that should not ([`Judge`] says how each
    /// is read).
    pub strategies: [&'static str; 2],
    /// The chaos file's name (as `chaos/<name>.toml`) and text.
    pub chaos: (&'static str, &'static str),
    /// `--set` overrides of `workloads/chaos.toml`.
    pub set: &'static [&'static str],
    /// Redis builds, the first the one the failure was published on (or the oldest here).
    pub builds: &'static [RedisBuild],
    /// How the two runs of a build are read against what was published.
    pub judge: Judge,
}

/// What makes a build's two runs read "reproduced".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judge {
    /// The unfenced lock broke and its store lost an update; the fenced one broke too but
    /// refused every stale write, its store intact.
    Fenced,
    /// The plain lock broke (a key granted twice); the one that waits for a replica did not
    /// (its lock verdict `held`), whatever it sold.
    Replicated,
}

/// Kleppmann's pause between read and write: `chaos/pause-holder.toml` on redis-setnx and
/// redis-setnx-fenced. A short load at a modest rate: one paused holder is the whole finding.
pub const KLEPPMANN: FaultRun = FaultRun {
    strategies: ["redis-setnx", "redis-setnx-fenced"],
    chaos: (
        "chaos/pause-holder.toml",
        include_str!("../../../chaos/pause-holder.toml"),
    ),
    set: &["load.duration=8s", "load.rate=100"],
    builds: &[RedisBuild::Redis70, RedisBuild::Valkey80],
    judge: Judge::Fenced,
};

/// redis.io's failover without WAIT: `chaos/sentinel-lost-lock.toml` on redis-sentinel and
/// redis-sentinel-wait, one SKU, the 6 s lease the file is written for, 8 s at 100/s (the
/// double grant lands 6-7 s in).
pub const SENTINEL: FaultRun = FaultRun {
    strategies: ["redis-sentinel", "redis-sentinel-wait"],
    chaos: (
        "chaos/sentinel-lost-lock.toml",
        include_str!("../../../chaos/sentinel-lost-lock.toml"),
    ),
    set: &[
        "inventory.skus=1",
        "lock.ttl=\"6s\"",
        "load.duration=8s",
        "load.rate=100",
    ],
    builds: &[RedisBuild::Redis70, RedisBuild::Valkey80],
    judge: Judge::Replicated,
};

const WORKLOAD: (&str, &str) = (
    "workloads/chaos.toml",
    include_str!("../../../workloads/chaos.toml"),
);

/// (build, server, verdict, measured) per build of `r`, its runs under `dir/<build>/<strategy>`.
pub async fn run(
    r: &FaultRun,
    dir: &Path,
    cancel: &CancellationToken,
) -> Vec<(String, String, &'static str, String)> {
    let mut out = Vec::new();
    for b in r.builds {
        let mut runs = Vec::new();
        for id in r.strategies {
            match one(r, *b, id, &dir.join(b.to_string()).join(id), cancel).await {
                Ok(s) => runs.push(s),
                Err(e) => {
                    runs.clear();
                    out.push((b.to_string(), String::new(), "error", format!("{id}: {e}")));
                    break;
                }
            }
        }
        if let [plain, other] = runs.as_slice() {
            let (verdict, measured) = judge(r.judge, plain, other);
            out.push((b.to_string(), server(plain), verdict, measured));
        }
    }
    out
}

async fn one(
    r: &FaultRun,
    build: RedisBuild,
    id: &str,
    out: &Path,
    cancel: &CancellationToken,
) -> Result<Summary, String> {
    let mut set: Vec<String> = r.set.iter().map(|s| s.to_string()).collect();
    set.push(format!("servers.redis=\"{build}\""));
    let w = Workload::parse(WORKLOAD.0, WORKLOAD.1, &set).map_err(|e| e.to_string())?;
    let chaos = ChaosPlan::parse(r.chaos.0, r.chaos.1, &w).map_err(|e| e.to_string())?;
    let opts = RunOptions::new(id, w, Some(chaos), WORKLOAD.0, out.to_path_buf());
    let plan = opts.plan().map_err(|e| e.to_string())?;
    match crate::run::run(&plan, cancel).await {
        Ok(s) => Ok(s),
        Err(RunError::Interrupted) => Err("interrupted".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// The verdict of one build's two runs, as `how` reads them, and what each measured.
fn judge(how: Judge, plain: &Summary, other: &Summary) -> (&'static str, String) {
    let reproduced = match how {
        Judge::Fenced => {
            plain.store_verdict == StoreVerdict::Corrupted
                && other.lock_verdict == Some(LockVerdict::BrokenFenced)
                && other.store_verdict == StoreVerdict::Intact
        }
        // The published claim is about a second grant: WAIT's lock may still lose a lease to a
        // holder paused near its ttl (seen once on 7.0, its release finding the key gone), which
        // its measured line shows, without a key granted twice.
        Judge::Replicated => {
            plain.lock_verdict == Some(LockVerdict::Broken)
                && plain.double_grant_incidents > 0
                && other.double_grant_incidents == 0
                && other.store_verdict == StoreVerdict::Intact
        }
    };
    let verdict = if reproduced {
        "reproduced"
    } else {
        "not reproduced"
    };
    (
        verdict,
        format!("{}; {}", said(how, plain), said(how, other)),
    )
}

/// `redis-setnx: lock broken, store corrupted (double grants 1, lost updates 1, oversold 0,
/// stale writes refused 0)`; for [`Judge::Replicated`], leases lost and the sales after the
/// first fault in place of the refused writes.
fn said(how: Judge, s: &Summary) -> String {
    let name = |v: serde_json::Value| v.as_str().unwrap_or("?").to_string();
    let lock = s
        .lock_verdict
        .map_or("none".to_string(), |v| name(serde_json::json!(v)));
    let store = name(serde_json::json!(s.store_verdict));
    let last = match how {
        Judge::Fenced => format!("stale writes refused {}", s.stale_rejected),
        Judge::Replicated => format!(
            "leases lost {}, sold after the first fault {} of {}",
            s.lease_lost,
            after_first_fault(s),
            s.audit.sold
        ),
    };
    format!(
        "{}: lock {lock}, store {} (double grants {}, lost updates {}, oversold {}, {last})",
        s.strategy, store, s.double_grant_incidents, s.audit.lost_updates, s.audit.oversell,
    )
}

/// Sales (as buyers were told) that ended after the first fault started: every phase but
/// `before`.
fn after_first_fault(s: &Summary) -> u64 {
    (s.phases.iter())
        .filter(|p| p.name != "before")
        .map(|p| p.sold)
        .sum()
}

/// What the Redis nodes of `s` reported.
fn server(s: &Summary) -> String {
    super::reported(
        s.servers
            .iter()
            .filter(|n| {
                matches!(
                    n.service,
                    Service::Redis | Service::Sentinel | Service::RedisCluster
                )
            })
            .map(|n| (n.service, n.version.as_str())),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(strategy: &str, lock: LockVerdict, incidents: u64, store: StoreVerdict) -> Summary {
        let mut s: Summary =
            serde_json::from_str(include_str!("../../tests/fixtures/summary.json")).unwrap();
        s.strategy = strategy.into();
        s.lock_verdict = Some(lock);
        s.double_grant_incidents = incidents;
        s.store_verdict = store;
        s
    }

    #[test]
    fn a_failover_reproduces_when_only_the_plain_lock_granted_a_key_twice() {
        use LockVerdict::{Broken, Held};
        use StoreVerdict::{Corrupted, Intact};
        let plain = summary("redis-sentinel", Broken, 1, Corrupted);
        let wait = summary("redis-sentinel-wait", Held, 0, Intact);
        let (v, said) = judge(Judge::Replicated, &plain, &wait);
        assert_eq!(v, "reproduced");
        let sold = plain.phases[1].sold + plain.phases[2].sold;
        assert!(
            said.starts_with("redis-sentinel: lock broken, store corrupted (double grants 1,")
                && said.contains(&format!("sold after the first fault {sold} of "))
                && said.contains("redis-sentinel-wait: lock held, store intact (double grants 0"),
            "{said}"
        );
        // The WAIT lock broke too, or the plain one held: not what was published.
        let broken_wait = summary("redis-sentinel-wait", Broken, 1, Intact);
        assert_eq!(
            judge(Judge::Replicated, &plain, &broken_wait).0,
            "not reproduced"
        );
        // A lease the WAIT lock lost with no key granted twice leaves the finding standing.
        let lost_lease = summary("redis-sentinel-wait", Broken, 0, Intact);
        assert_eq!(
            judge(Judge::Replicated, &plain, &lost_lease).0,
            "reproduced"
        );
        let held = summary("redis-sentinel", Held, 0, Intact);
        assert_eq!(judge(Judge::Replicated, &held, &wait).0, "not reproduced");
        // Kleppmann's judge wants a fenced lock refusing the stale write, not a held one.
        assert_eq!(judge(Judge::Fenced, &plain, &wait).0, "not reproduced");
        let fenced = summary("redis-setnx-fenced", LockVerdict::BrokenFenced, 1, Intact);
        let (v, said) = judge(Judge::Fenced, &plain, &fenced);
        assert_eq!(v, "reproduced");
        assert!(said.contains("stale writes refused"), "{said}");
    }
}
