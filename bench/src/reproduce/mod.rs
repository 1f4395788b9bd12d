//! `lockbench reproduce`: published lock failures, each run on real servers of the builds it
//! names, with what was published beside what lockbench measured and a verdict per build. A
//! failure that no longer shows on a newer build is a result: "not reproduced" on that build,
//! next to "reproduced" on the one it was found on.

mod etcd_lease;
mod faults;
pub mod jepsen_etcd;

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::cluster::{Builds, ClusterOptions, EtcdBuild, Needs, OwnedCluster, Service};

/// One published failure.
pub struct Scenario {
    /// What `lockbench reproduce NAME` calls it.
    pub name: &'static str,
    /// Where it was published.
    pub source: &'static str,
    /// What was published, in one line.
    pub published: &'static str,
    /// How lockbench runs it, or why it does not yet.
    how: How,
}

enum How {
    /// [`etcd_lease`] on each etcd build.
    EtcdLease(&'static [EtcdBuild]),
    /// [`jepsen_etcd`]: trusting and fenced clients under etcd pauses, on each etcd build.
    JepsenLock(&'static [EtcdBuild]),
    /// [`faults`]: strategies under a chaos file, on each build (Redis's, Curator's).
    Faults(&'static faults::FaultRun),
}

/// Every scenario, in the order `reproduce` runs them.
pub const ALL: &[Scenario] = &[
    Scenario {
        name: "etcd-11456",
        source: "etcd-io/etcd#11456 (Jepsen, etcd 3.4.3, Dec 2019)",
        published: "the lock service answers a waiter whose lease expired while it waited as \
                    the holder, and grants the next caller the same lock",
        how: How::EtcdLease(&[EtcdBuild::Etcd34, EtcdBuild::Etcd35]),
    },
    Scenario {
        name: "kleppmann-pause",
        source: "M. Kleppmann, \"How to do distributed locking\" (Feb 2016)",
        published: "a holder paused past its lease writes after a second holder did: the \
                    unfenced store loses an update; a fencing token makes the store refuse \
                    the stale write",
        how: How::Faults(&faults::KLEPPMANN),
    },
    Scenario {
        name: "jepsen-etcd-lock",
        source: "Jepsen, etcd 3.4.3 analysis (Jan 2020), jepsen-io/etcd lock.clj",
        published: "~18% of acknowledged updates lost (analysis §3.2: 2 s lease TTLs, five \
                    concurrent processes, process pauses every 5 s; lock.clj's lock-set: a lock \
                    guarding read, sleep 0-2 s, write of an in-memory set; pause nemesis \
                    SIGSTOPs etcd on the leader or on every node, interval 5 s)",
        how: How::JepsenLock(&[EtcdBuild::Etcd34, EtcdBuild::Etcd35]),
    },
    Scenario {
        name: "curator-727",
        source: "apache/curator#727 (CURATOR-206, Apr 2015)",
        published: "two holders of an InterProcessMutex: a network cut outlasts the session, \
                    the holder's node expires, the holder's thread is not interrupted and still \
                    thinks it holds the lock, and a waiting client acquires it",
        how: How::Faults(&faults::CURATOR),
    },
    Scenario {
        name: "redis-everysec",
        source: "redis.io, \"Redis persistence\": appendfsync everysec",
        published: "\"fsync every second ... you may lose 1 second of data if there is a \
                    disaster\"; appendfsync always loses none",
        how: How::Faults(&faults::EVERYSEC),
    },
    Scenario {
        name: "sentinel-failover",
        source: "redis.io, \"Distributed locks with Redis\": why failover is not enough",
        published: "a lock granted by the master is lost when a replica that lacked it is \
                    promoted; WAIT narrows the window",
        how: How::Faults(&faults::SENTINEL),
    },
];

impl Scenario {
    /// The builds it runs on.
    pub fn runs_on(&self) -> String {
        let names = |v: Vec<String>| v.join(", ");
        match &self.how {
            How::EtcdLease(b) => {
                format!("etcd {}", names(b.iter().map(|b| b.to_string()).collect()))
            }
            How::JepsenLock(b) => format!(
                "etcd {}: {} trusting and {} fenced clients, {} s pauses of every member or the \
                 leader, --rounds × {} s",
                names(b.iter().map(|b| b.to_string()).collect()),
                jepsen_etcd::BUYERS,
                jepsen_etcd::BUYERS,
                jepsen_etcd::INTERVAL.as_secs(),
                jepsen_etcd::ROUND.as_secs()
            ),
            How::Faults(r) => r.describe(),
        }
    }
}

/// What one scenario showed on one build.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub scenario: String,
    pub source: String,
    pub published: String,
    /// The build asked for (`3.4`, `valkey-8.0`, `5.7`).
    pub build: String,
    /// What its servers reported.
    pub server: String,
    /// `reproduced`, `not reproduced` (`: fixed in X`), `undecided` or `error`.
    pub verdict: String,
    /// What lockbench measured, in words with its counts.
    pub measured: String,
}

/// `reproduce`'s options.
pub struct Options {
    /// Scenario names; empty: all.
    pub names: Vec<String>,
    /// Rounds of each direct scenario.
    pub rounds: u32,
    /// Results folder.
    pub out: PathBuf,
}

/// The scenarios `names` asks for, or an error naming the unknown one and the known ones.
pub fn chosen(names: &[String]) -> Result<Vec<&'static Scenario>, String> {
    if names.is_empty() {
        return Ok(ALL.iter().collect());
    }
    names
        .iter()
        .map(|n| {
            ALL.iter().find(|s| s.name == n.as_str()).ok_or_else(|| {
                let known: Vec<&str> = ALL.iter().map(|s| s.name).collect();
                format!(
                    "unknown scenario `{n}`; expected one of {}",
                    known.join(", ")
                )
            })
        })
        .collect()
}

/// Runs the chosen scenarios, printing each finding as it lands and writing them all to
/// `<out>/reproduce.json` after each (so an error later loses none).
pub async fn run(
    opts: &Options,
    out: &mut dyn Write,
    cancel: &CancellationToken,
) -> anyhow::Result<Vec<Finding>> {
    let chosen = chosen(&opts.names).map_err(anyhow::Error::msg)?;
    std::fs::create_dir_all(&opts.out)?;
    let mut all = Vec::new();
    for s in chosen {
        writeln!(
            out,
            "{}  {}\n  published: {}",
            s.name, s.source, s.published
        )?;
        for f in one(s, opts, cancel).await {
            writeln!(out, "  {}", line(&f))?;
            all.push(f);
            save(&opts.out, &all)?;
        }
        if cancel.is_cancelled() {
            anyhow::bail!("interrupted; findings so far in {}", opts.out.display());
        }
    }
    Ok(all)
}

/// A finding as `reproduce` prints it.
pub fn line(f: &Finding) -> String {
    if f.build.is_empty() {
        return format!("{}: {}", f.verdict, f.measured);
    }
    // Only a failure that showed is loud.
    let verdict = match f.verdict.as_str() {
        "reproduced" => "REPRODUCED".to_string(),
        v => v.to_string(),
    };
    format!("{} ({}): {verdict} — {}", f.build, f.server, f.measured)
}

fn save(dir: &Path, all: &[Finding]) -> anyhow::Result<()> {
    let path = dir.join("reproduce.json");
    std::fs::write(&path, serde_json::to_string_pretty(all)?)?;
    Ok(())
}

/// Every finding of `s`.
async fn one(s: &Scenario, opts: &Options, cancel: &CancellationToken) -> Vec<Finding> {
    let finding = |build: String, server: String, verdict: &str, measured: String| Finding {
        scenario: s.name.into(),
        source: s.source.into(),
        published: s.published.into(),
        build,
        server,
        verdict: verdict.into(),
        measured,
    };
    let mut found = match &s.how {
        How::EtcdLease(builds) => {
            let mut v = Vec::new();
            for b in builds.iter() {
                let dir = opts.out.join(format!("{}/{b}", s.name));
                let (server, verdict, measured) = etcd_rounds(*b, opts.rounds, &dir).await;
                v.push(finding(b.to_string(), server, verdict, measured));
            }
            v
        }
        How::JepsenLock(builds) => {
            let mut v = Vec::new();
            for b in builds.iter() {
                let dir = opts.out.join(format!("{}/{b}", s.name));
                let (server, verdict, measured) = jepsen_lock(*b, opts.rounds, &dir, cancel).await;
                v.push(finding(b.to_string(), server, verdict, measured));
            }
            v
        }
        How::Faults(run) => faults::run(run, &opts.out.join(s.name), cancel)
            .await
            .into_iter()
            .map(|(b, server, verdict, measured)| finding(b, server, verdict, measured))
            .collect(),
    };
    fixed_in(&mut found);
    found
}

/// A build that does not reproduce what an earlier build of the list did reads "not
/// reproduced: fixed in <build>".
fn fixed_in(found: &mut [Finding]) {
    let mut seen = false;
    for f in found.iter_mut() {
        seen |= f.verdict == "reproduced";
        if seen && f.verdict == "not reproduced" {
            f.verdict = format!("not reproduced: fixed in {}", f.build);
        }
    }
}

/// A cluster of etcd `build` logging under `dir`, and what its servers reported.
async fn start_etcd(build: EtcdBuild, dir: &Path) -> Result<(OwnedCluster, String), String> {
    let mut o = ClusterOptions::new(dir.join("logs"));
    o.builds = Builds {
        etcd: build,
        ..Builds::default()
    };
    let needs = Needs {
        etcd: true,
        ..Needs::NONE
    };
    let cluster = OwnedCluster::start(needs, &o)
        .await
        .map_err(|e| e.to_string())?;
    let server = reported(
        cluster
            .nodes()
            .iter()
            .map(|n| (n.service, n.version.as_str())),
    );
    Ok((cluster, server))
}

/// `rounds` rounds of etcd#11456 on one etcd build: (server, verdict, measured).
async fn etcd_rounds(build: EtcdBuild, rounds: u32, dir: &Path) -> (String, &'static str, String) {
    let (cluster, server) = match start_etcd(build, dir).await {
        Ok(c) => c,
        Err(e) => return (String::new(), "error", e),
    };
    let mut answers = Vec::new();
    for _ in 0..rounds {
        match etcd_lease::round(cluster.endpoints()).await {
            Ok(a) => answers.push(a),
            Err(e) => return (server, "error", format!("round {}: {e}", answers.len() + 1)),
        }
    }
    let (verdict, measured) = etcd_lease::judge_rounds(&answers);
    (server, verdict, measured)
}

/// Jepsen's lock-set on one etcd build for `rounds` × [`jepsen_etcd::ROUND`]: (server, verdict,
/// measured).
pub async fn jepsen_lock(
    build: EtcdBuild,
    rounds: u32,
    dir: &Path,
    cancel: &CancellationToken,
) -> (String, &'static str, String) {
    match jepsen_lock_outcome(build, rounds, dir, cancel).await {
        Ok((server, o)) => {
            let (verdict, measured) = jepsen_etcd::judge(&o);
            (server, verdict, measured)
        }
        Err((server, e)) => (server, "error", e),
    }
}

/// [`jepsen_lock`]'s counts, for tests that check them: (server, outcome), or (server, error).
pub async fn jepsen_lock_outcome(
    build: EtcdBuild,
    rounds: u32,
    dir: &Path,
    cancel: &CancellationToken,
) -> Result<(String, jepsen_etcd::Outcome), (String, String)> {
    let (mut cluster, server) = start_etcd(build, dir)
        .await
        .map_err(|e| (String::new(), e))?;
    match jepsen_etcd::run(&mut cluster, rounds, cancel).await {
        Ok(o) => Ok((server, o)),
        Err(e) => Err((server, e)),
    }
}

/// What servers reported, e.g. `etcd 3.4.23` (distinct values, sorted, `, `-joined).
fn reported<'a>(nodes: impl Iterator<Item = (Service, &'a str)>) -> String {
    let mut v: Vec<String> = nodes.map(|(s, v)| format!("{s} {v}")).collect();
    v.sort();
    v.dedup();
    v.join(", ")
}

#[cfg(test)]
mod tests {
    use super::etcd_lease::{Answer, judge_rounds};
    use super::*;

    fn found(build: &str, verdict: &str) -> Finding {
        Finding {
            scenario: "s".into(),
            source: String::new(),
            published: String::new(),
            build: build.into(),
            server: String::new(),
            verdict: verdict.into(),
            measured: String::new(),
        }
    }

    #[test]
    fn a_build_that_no_longer_shows_an_earlier_failure_reads_fixed_in_it() {
        let mut f = vec![found("3.4", "reproduced"), found("3.5", "not reproduced")];
        fixed_in(&mut f);
        assert_eq!(f[1].verdict, "not reproduced: fixed in 3.5");
        // Nothing reproduced first: nothing was fixed.
        let mut f = vec![found("3.4", "not reproduced"), found("3.5", "reproduced")];
        fixed_in(&mut f);
        assert_eq!(f[0].verdict, "not reproduced");
    }

    #[test]
    fn etcd_rounds_read_reproduced_only_when_a_stale_waiter_was_granted() {
        let refused = || Answer::Refused("mutex: session is expired".into());
        let stale = Answer::GrantedStale {
            third_granted: true,
        };
        let (v, said) = judge_rounds(&[refused(), stale.clone()]);
        assert_eq!(v, "reproduced");
        assert!(said.contains("1 of 2 rounds answered") && said.contains("in 1 of them"));
        assert_eq!(judge_rounds(&[refused(), refused()]).0, "not reproduced");
        // A waiter still alive when granted tests nothing.
        assert_eq!(
            judge_rounds(&[refused(), Answer::GrantedLive]).0,
            "undecided"
        );
        assert_eq!(judge_rounds(&[]).0, "undecided");
    }

    #[test]
    fn an_unknown_scenario_is_refused_naming_the_known_ones() {
        let e = chosen(&["etcd-1".into()]).err().unwrap();
        assert_contains!(e, "`etcd-1`", "etcd-11456, kleppmann-pause");
        assert_eq!(chosen(&[]).unwrap().len(), ALL.len());
    }
}
