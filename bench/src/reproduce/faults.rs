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
    /// The unfenced strategy that should lose an update, then the fenced one that should not.
    pub strategies: [&'static str; 2],
    /// The chaos file's name (as `chaos/<name>.toml`) and text.
    pub chaos: (&'static str, &'static str),
    /// `--set` overrides of `workloads/chaos.toml`.
    pub set: &'static [&'static str],
    /// Redis builds, the first the one the failure was published on (or the oldest here).
    pub builds: &'static [RedisBuild],
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
        if let [plain, fenced] = runs.as_slice() {
            let (verdict, measured) = judge(plain, fenced);
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

/// Reproduced when the unfenced lock broke and lost an update while the fenced one broke but
/// refused every stale write, its store intact.
fn judge(plain: &Summary, fenced: &Summary) -> (&'static str, String) {
    let lost = plain.store_verdict == StoreVerdict::Corrupted;
    let refused = fenced.lock_verdict == Some(LockVerdict::BrokenFenced)
        && fenced.store_verdict == StoreVerdict::Intact;
    let verdict = if lost && refused {
        "reproduced"
    } else {
        "not reproduced"
    };
    (verdict, format!("{}; {}", said(plain), said(fenced)))
}

/// `redis-setnx: lock broken, store corrupted (double grants 1, lost updates 1, oversold 0,
/// stale writes refused 0)`.
fn said(s: &Summary) -> String {
    let name = |v: serde_json::Value| v.as_str().unwrap_or("?").to_string();
    let lock = s
        .lock_verdict
        .map_or("none".to_string(), |v| name(serde_json::json!(v)));
    let store = name(serde_json::json!(s.store_verdict));
    format!(
        "{}: lock {lock}, store {} (double grants {}, lost updates {}, oversold {}, stale \
         writes refused {})",
        s.strategy,
        store,
        s.double_grant_incidents,
        s.audit.lost_updates,
        s.audit.oversell,
        s.stale_rejected
    )
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
