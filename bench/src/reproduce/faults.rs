//! Published failures that are one of lockbench's own chaos files: the same strategies run under
//! it through the real run's pipeline (`run::run`), once per build (of the servers, or of the
//! library), and each build's verdicts are read against what was published.

use std::path::Path;

use tokio_util::sync::CancellationToken;

use crate::chaos::ChaosPlan;
use crate::check::{LockVerdict, StoreVerdict};
use crate::cluster::Service;
use crate::report::Summary;
use crate::run::{RunError, RunOptions};
use crate::workload::Workload;

/// Two strategies under a chaos file on each of some builds.
pub struct FaultRun {
    /// The chaos file's name (as `chaos/<name>.toml`) and text.
    pub chaos: (&'static str, &'static str),
    /// `--set` overrides of `workloads/chaos.toml`.
    pub set: &'static [&'static str],
    /// The builds, the first the one the failure was published on (or the oldest here).
    pub builds: &'static [Build],
    /// Each of a build's two runs' own name and `--set` overrides, where the two differ by a
    /// setting rather than by their strategy (`("", &[])`: none; the folder is the strategy's).
    pub runs: [(&'static str, &'static [&'static str]); 2],
    /// How the two runs of a build are read against what was published.
    pub judge: Judge,
}

/// Two runs that differ only by their strategy.
const SAME: [(&str, &[&str]); 2] = [("", &[]), ("", &[])];

/// One build of a [`FaultRun`]: a server build, or a library's (whose strategies differ).
pub struct Build {
    /// As its finding names it (`7.0`, `valkey-8.0`, `5.7`).
    pub name: &'static str,
    /// In words, for `reproduce --list` (`Redis 7.0`, `Curator 5.7.1 on ZooKeeper 3.9`).
    pub label: &'static str,
    /// The strategy that should break, then the one that should not ([`Judge`] says how each
    /// is read).
    pub strategies: [&'static str; 2],
    /// `--set` overrides that choose its servers (after the run's own).
    pub set: &'static [&'static str],
}

/// What makes a build's two runs read "reproduced".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judge {
    /// The unfenced lock broke (a key granted twice: two holders) and its store lost an update;
    /// the fenced one broke too but refused every stale write, its store intact.
    Fenced,
    /// The plain lock broke (a key granted twice); the one that waits for a replica did not
    /// (its lock verdict `held`), whatever it sold.
    Replicated,
    /// After a power loss the first run's store lost sales buyers were told succeeded (or
    /// oversold); the second's books balance with every acknowledged sale in them.
    Durable,
}

const SETNX: [&str; 2] = ["redis-setnx", "redis-setnx-fenced"];
const SENTINELS: [&str; 2] = ["redis-sentinel", "redis-sentinel-wait"];

/// Redis 7.0 and Valkey 8.0, each with `strategies`.
const fn redis_builds(strategies: [&'static str; 2]) -> [Build; 2] {
    [
        Build {
            name: "7.0",
            label: "Redis 7.0",
            strategies,
            set: &["servers.redis=\"7.0\""],
        },
        Build {
            name: "valkey-8.0",
            label: "Valkey 8.0",
            strategies,
            set: &["servers.redis=\"valkey-8.0\""],
        },
    ]
}

/// Kleppmann's pause between read and write: `chaos/pause-holder.toml` on redis-setnx and
/// redis-setnx-fenced. A short load at a modest rate: one paused holder is the whole finding.
pub const KLEPPMANN: FaultRun = FaultRun {
    chaos: (
        "chaos/pause-holder.toml",
        include_str!("../../../chaos/pause-holder.toml"),
    ),
    set: &["load.duration=8s", "load.rate=100"],
    builds: &redis_builds(SETNX),
    runs: SAME,
    judge: Judge::Fenced,
};

/// redis.io's failover without WAIT: `chaos/sentinel-lost-lock.toml` on redis-sentinel and
/// redis-sentinel-wait, one SKU, the 6 s lease the file is written for, 8 s at 100/s (the
/// double grant lands 6-7 s in).
pub const SENTINEL: FaultRun = FaultRun {
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
    builds: &redis_builds(SENTINELS),
    runs: SAME,
    judge: Judge::Replicated,
};

/// apache/curator#727 (CURATOR-206): a holder's ZooKeeper session expires under it, a waiter
/// takes the lock, and InterProcessMutex tells the old holder nothing that stops it.
/// `chaos/curator-session-expiry.toml` (the holder's process stops for 3x the session timeout
/// after its read) on Curator 5.4.0 with ZooKeeper 3.8 (Debian bookworm's pair) and 5.7.1 with
/// ZooKeeper 3.9 (trixie's), each plain and with its lock node's czxid as fence; one SKU, 8 s
/// at 30/s (one key's Curator lock sold ~25/s on this 2-core machine, shared).
pub const CURATOR: FaultRun = FaultRun {
    chaos: (
        "chaos/curator-session-expiry.toml",
        include_str!("../../../chaos/curator-session-expiry.toml"),
    ),
    set: &["inventory.skus=1", "load.duration=8s", "load.rate=30"],
    builds: &[
        Build {
            name: "5.4",
            label: "Curator 5.4.0 on ZooKeeper 3.8",
            strategies: ["lib:curator", "lib:curator-fenced"],
            set: &["servers.zookeeper=\"3.8\""],
        },
        Build {
            name: "5.7",
            label: "Curator 5.7.1 on ZooKeeper 3.9",
            strategies: ["lib:curator-5.7", "lib:curator-5.7-fenced"],
            set: &["servers.zookeeper=\"3.9\""],
        },
    ],
    runs: SAME,
    judge: Judge::Fenced,
};

/// redis.io's "you may lose 1 second of data" with `appendfsync everysec`: `redis-lua-decr`
/// (the whole sale one Lua call on Redis, no MariaDB) under `chaos/power-loss.toml` (the
/// master's unsynced writes dropped 1 s in), with everysec and then always. 1,000 arrivals/s
/// over 4 SKUs for 3 s: sales still going at the loss.
pub const EVERYSEC: FaultRun = FaultRun {
    chaos: (
        "chaos/power-loss.toml",
        include_str!("../../../chaos/power-loss.toml"),
    ),
    set: &["load.duration=3s", "load.rate=1000"],
    builds: &redis_builds(["redis-lua-decr", "redis-lua-decr"]),
    runs: [
        ("everysec", &["servers.redis_appendfsync=\"everysec\""]),
        ("always", &["servers.redis_appendfsync=\"always\""]),
    ],
    judge: Judge::Durable,
};

impl FaultRun {
    /// `reproduce --list`'s line: `redis-setnx and redis-setnx-fenced on Redis 7.0 and Valkey
    /// 8.0, under chaos/pause-holder.toml`.
    pub fn describe(&self) -> String {
        let mut groups: Vec<(String, Vec<&str>)> = Vec::new();
        for b in self.builds {
            let named = (b.strategies.iter().zip(self.runs))
                .map(|(id, (run, _))| match run {
                    "" => id.to_string(),
                    run => format!("{id} ({run})"),
                })
                .collect::<Vec<_>>();
            let pair = named.join(" and ");
            match groups.last_mut() {
                Some((p, labels)) if *p == pair => labels.push(b.label),
                _ => groups.push((pair, vec![b.label])),
            }
        }
        let on: Vec<String> = (groups.iter())
            .map(|(pair, labels)| format!("{pair} on {}", labels.join(" and ")))
            .collect();
        format!("{}, under {}", on.join("; "), self.chaos.0)
    }
}

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
        for (id, (run, set)) in b.strategies.into_iter().zip(r.runs) {
            let folder = match run {
                "" => id.to_string(),
                run => format!("{id}-{run}"),
            };
            match one(r, b, (id, set), &dir.join(b.name).join(folder), cancel).await {
                Ok(s) => runs.push(s),
                Err(e) => {
                    runs.clear();
                    out.push((b.name.into(), String::new(), "error", format!("{id}: {e}")));
                    break;
                }
            }
        }
        if let [plain, other] = runs.as_slice() {
            let (verdict, measured) = judge(r.judge, plain, other);
            out.push((b.name.into(), server(plain), verdict, measured));
        }
    }
    out
}

async fn one(
    r: &FaultRun,
    build: &Build,
    (id, own): (&str, &[&str]),
    out: &Path,
    cancel: &CancellationToken,
) -> Result<Summary, String> {
    let set: Vec<String> = (r.set.iter().chain(build.set).chain(own))
        .map(|s| s.to_string())
        .collect();
    let w = Workload::parse(WORKLOAD.0, WORKLOAD.1, &set).map_err(|e| e.to_string())?;
    let chaos = ChaosPlan::parse(r.chaos.0, r.chaos.1, &w).map_err(|e| e.to_string())?;
    let opts = RunOptions {
        // A reproduction judges a verdict; the servers' work is not its question.
        server_work: false,
        ..RunOptions::new(id, w, Some(chaos), WORKLOAD.0, out.to_path_buf())
    };
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
            plain.lock_verdict == Some(LockVerdict::Broken)
                && plain.double_grant_incidents > 0
                && plain.store_verdict == StoreVerdict::Corrupted
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
        Judge::Durable => {
            let lost = |s: &Summary| s.audit.lost_sales + s.audit.oversell;
            let dropped = |s: &Summary| s.faults.iter().any(|f| f.dropped_bytes.is_some());
            lost(plain) > 0
                && lost(other) == 0
                && other.store_verdict == StoreVerdict::Intact
                && dropped(plain)
                && dropped(other)
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
        Judge::Durable => return durable_said(s),
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

/// `redis-lua-decr, appendfsync everysec: 388 acknowledged sales lost (0.41 s of the 940
/// sales/s before the loss), oversold 0, 45396 B dropped`.
fn durable_said(s: &Summary) -> String {
    let setting = (s.workload["servers"]["redis_appendfsync"].as_str()).unwrap_or("?");
    let before = s.phases.iter().find(|p| p.name == "before");
    let rate = before.map(|p| p.sales_per_s);
    let seconds = match rate {
        Some(r) if r > 0.0 => format!(
            " ({} s of the {} sales/s before the loss)",
            crate::report::format::decimals(s.audit.lost_sales as f64 / r, 2),
            crate::report::format::decimals(r, 0)
        ),
        _ => String::new(),
    };
    let dropped: u64 = s.faults.iter().filter_map(|f| f.dropped_bytes).sum();
    format!(
        "{}, appendfsync {setting}: {} acknowledged sales lost{seconds}, oversold {}, {dropped} B \
         dropped",
        s.strategy, s.audit.lost_sales, s.audit.oversell
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

/// What the lock's servers of `s` reported (every node but MariaDB's), and the library its
/// adapter loaded: `redis 7.0.15`, `zookeeper 3.9.3, curator 5.7.1`.
fn server(s: &Summary) -> String {
    let nodes = super::reported(
        (s.servers.iter())
            .filter(|n| n.service != Service::Mariadb)
            .map(|n| (n.service, n.version.as_str())),
    );
    match &s.library {
        Some(l) => format!("{nodes}, {} {}", l.library, l.version),
        None => nodes,
    }
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
        assert_contains!(said, "stale writes refused");
    }

    #[test]
    fn a_fenced_finding_needs_two_holders_of_the_plain_lock_not_only_a_corrupted_store() {
        use LockVerdict::{Broken, BrokenFenced};
        use StoreVerdict::{Corrupted, Intact};
        let fenced = summary("lib:curator-fenced", BrokenFenced, 1, Intact);
        let two_holders = summary("lib:curator", Broken, 1, Corrupted);
        assert_eq!(judge(Judge::Fenced, &two_holders, &fenced).0, "reproduced");
        // A store that lost an update with no key granted twice is another failure.
        let one_holder = summary("lib:curator", Broken, 0, Corrupted);
        assert_eq!(
            judge(Judge::Fenced, &one_holder, &fenced).0,
            "not reproduced"
        );
        // Two holders, but the stale write happened to cost nothing: not the published loss.
        let lucky = summary("lib:curator", Broken, 1, Intact);
        assert_eq!(judge(Judge::Fenced, &lucky, &fenced).0, "not reproduced");
    }

    #[test]
    fn a_power_loss_reproduces_when_everysec_lost_acknowledged_sales_and_always_none() {
        let run = |setting: &str, lost: u64, dropped: Option<u64>| {
            let mut s = summary("redis-lua-decr", LockVerdict::Held, 0, StoreVerdict::Intact);
            s.lock_verdict = None;
            s.workload["servers"]["redis_appendfsync"] = setting.into();
            s.audit.lost_sales = lost;
            s.faults[0].dropped_bytes = dropped;
            if lost > 0 {
                s.store_verdict = StoreVerdict::Corrupted;
            }
            s
        };
        let everysec = run("everysec", 388, Some(45_396));
        let always = run("always", 0, Some(0));
        let (v, said) = judge(Judge::Durable, &everysec, &always);
        assert_eq!(v, "reproduced");
        let rate = everysec.phases[0].sales_per_s;
        assert!(
            said.starts_with("redis-lua-decr, appendfsync everysec: 388 acknowledged sales lost (")
                && said.contains(&format!(
                    " s of the {} sales/s before the loss)",
                    rate.round()
                ))
                && said.contains(
                    "45396 B dropped; redis-lua-decr, appendfsync always: 0 acknowledged"
                ),
            "{said}"
        );
        // always losing a sale, everysec losing none, or no power loss at all: not the finding.
        let lossy_always = run("always", 1, Some(10));
        assert_eq!(
            judge(Judge::Durable, &everysec, &lossy_always).0,
            "not reproduced"
        );
        let lucky = run("everysec", 0, Some(0));
        assert_eq!(judge(Judge::Durable, &lucky, &always).0, "not reproduced");
        let no_fault = run("everysec", 388, None);
        assert_eq!(
            judge(Judge::Durable, &no_fault, &always).0,
            "not reproduced"
        );
    }

    #[test]
    fn the_list_names_each_builds_strategies_once_per_run_of_equal_pairs() {
        assert_eq!(
            KLEPPMANN.describe(),
            "redis-setnx and redis-setnx-fenced on Redis 7.0 and Valkey 8.0, under \
             chaos/pause-holder.toml"
        );
        assert_eq!(
            CURATOR.describe(),
            "lib:curator and lib:curator-fenced on Curator 5.4.0 on ZooKeeper 3.8; \
             lib:curator-5.7 and lib:curator-5.7-fenced on Curator 5.7.1 on ZooKeeper 3.9, \
             under chaos/curator-session-expiry.toml"
        );
        assert_eq!(
            EVERYSEC.describe(),
            "redis-lua-decr (everysec) and redis-lua-decr (always) on Redis 7.0 and Valkey 8.0, \
             under chaos/power-loss.toml"
        );
        // Every build's strategies exist, and a Curator build's strategies load that build.
        for r in [&KLEPPMANN, &SENTINEL, &CURATOR, &EVERYSEC] {
            for b in r.builds {
                for id in b.strategies {
                    assert!(crate::strategy::find(id).is_ok(), "{id}");
                }
            }
        }
        for b in CURATOR.builds {
            let lib = crate::strategy::adapter::library_of(b.strategies[0]).unwrap();
            assert!(
                lib.version.starts_with(b.name),
                "{}: {}",
                b.name,
                lib.version
            );
            assert!(b.label.contains(lib.version), "{}", b.label);
        }
    }
}
