//! Server builds side by side (`scripts/versions.sh`, `lockbench versions DIR`): for each
//! strategy and build, the build its servers reported, its capacity interval, whether that
//! interval overlaps the first build's, and the calm run's p99 with its 95 % interval and
//! sample count. The folder holds one `<key>-<build>/` per build (`redis-valkey-8.0/`), each
//! with `sweep/sweep.json` and `calm/<strategy>/summary.json`.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::Summary;
use super::agreement::{self, agreement};
use super::format::{ms_table, or_dash, rate_exact, ratio, samples};
use super::layout::JobLayout;
use super::sweep::Sweep;
use crate::cluster::{EtcdBuild, MysqlBuild, RedisBuild, Service, ZookeeperBuild};
use crate::record::Pct;

/// One build's results.
pub struct Build {
    /// The `[servers]` key (`redis`, `etcd`).
    pub key: String,
    /// The build's name (`valkey-8.0`).
    pub build: String,
    pub sweep: Sweep,
    /// Its calm runs, by strategy.
    pub calm: Vec<Summary>,
    /// Its runs under each fault (`chaos/<fault>/<strategy>/`), as (fault, run).
    pub faults: Vec<(String, Summary)>,
}

/// Reads every `<key>-<build>/` of `dir`, by key, the builds of a key in the order the
/// `[servers]` names list them (bookworm's first: the one the others are set against).
pub fn load(dir: &Path) -> anyhow::Result<Vec<Build>> {
    let order: Vec<&str> = RedisBuild::NAMES
        .iter()
        .chain(EtcdBuild::NAMES)
        .chain(ZookeeperBuild::NAMES)
        .chain(MysqlBuild::NAMES)
        .copied()
        .collect();
    let mut builds = Vec::new();
    for d in std::fs::read_dir(dir)
        .map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?
        .flatten()
    {
        let name = d.file_name().to_string_lossy().into_owned();
        let Some((key, build)) = name.split_once('-') else {
            continue;
        };
        // Each build's folder is a job folder.
        let job = JobLayout::new(d.path());
        if !job.sweep_json().exists() {
            continue;
        }
        builds.push(Build {
            key: key.to_string(),
            build: build.to_string(),
            sweep: Sweep::read(&job.sweep())?,
            calm: calm_runs(&job.calm())?,
            faults: fault_runs(&job)?,
        });
    }
    let rank = |b: &Build| {
        order
            .iter()
            .position(|o| *o == b.build)
            .unwrap_or(order.len())
    };
    builds.sort_by(|a, b| (&a.key, rank(a), &a.build).cmp(&(&b.key, rank(b), &b.build)));
    if builds.is_empty() {
        anyhow::bail!(
            "{}: no <key>-<build>/sweep/sweep.json inside (scripts/versions.sh writes them)",
            dir.display()
        );
    }
    Ok(builds)
}

fn calm_runs(dir: &Path) -> anyhow::Result<Vec<Summary>> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(out);
    };
    let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    for p in paths {
        let f = p.join("summary.json");
        if let Ok(text) = std::fs::read_to_string(&f) {
            out.push(
                serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", f.display()))?,
            );
        }
    }
    Ok(out)
}

/// The runs of every `chaos/<fault>/<strategy>/` of a job, by fault name.
fn fault_runs(job: &JobLayout) -> anyhow::Result<Vec<(String, Summary)>> {
    let mut out = Vec::new();
    for (name, dir) in job.scenarios() {
        out.extend(calm_runs(&dir)?.into_iter().map(|s| (name.clone(), s)));
    }
    Ok(out)
}

/// One line of the table.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub strategy: String,
    pub key: String,
    pub build: String,
    /// What its servers reported (distinct values, `, `-joined).
    pub reported: String,
    pub interval: [Option<f64>; 2],
    /// Whether every step of its sweep was safe (`false`: some step oversold or lost an update).
    pub safe: bool,
    /// Whether the interval overlaps the key's first build's (`None` on the first).
    pub overlaps_first: Option<bool>,
    /// Its capacity's geometric midpoint over the first build's.
    pub vs_first: Option<f64>,
    /// The calm run: its rate and p99 cell.
    pub calm: Option<(f64, String)>,
    /// Its verdict under each fault run, as (fault, headline).
    pub faults: Vec<(String, &'static str)>,
}

/// The lines of `builds`: per key, per strategy of its first build, every build.
pub fn lines(builds: &[Build]) -> Vec<Line> {
    let mut out = Vec::new();
    let mut keys: Vec<&str> = builds.iter().map(|b| b.key.as_str()).collect();
    keys.dedup();
    for key in keys {
        let of_key: Vec<&Build> = builds.iter().filter(|b| b.key == key).collect();
        let sweeps: Vec<Sweep> = of_key.iter().map(|b| b.sweep.clone()).collect();
        // Each build against the first, once per build.
        let pairs: Vec<_> = sweeps
            .iter()
            .map(|s| agreement(&[sweeps[0].clone(), s.clone()]))
            .collect();
        for row in agreement(&sweeps) {
            for (k, b) in of_key.iter().enumerate() {
                let pair = pairs[k].iter().find(|r| r.strategy == row.strategy);
                let calm = b.calm.iter().find(|s| s.strategy == row.strategy);
                out.push(Line {
                    strategy: row.strategy.clone(),
                    key: key.to_string(),
                    build: b.build.clone(),
                    reported: reported(b, &row.strategy),
                    interval: row.intervals[k],
                    safe: b.sweep.entry(&row.strategy).is_none_or(|e| e.safe),
                    overlaps_first: (k > 0).then(|| pair.is_some_and(|p| p.overlap)),
                    vs_first: (k > 0)
                        .then(|| mid_ratio(row.intervals[0], row.intervals[k]))
                        .flatten(),
                    calm: calm.map(|s| (calm_rate(s), p99_cell(s))),
                    faults: b
                        .faults
                        .iter()
                        .filter(|(_, s)| s.strategy == row.strategy)
                        .map(|(f, s)| (f.clone(), s.headline()))
                        .collect(),
                });
            }
        }
    }
    out
}

/// The offered rate of a calm run.
fn calm_rate(s: &Summary) -> f64 {
    s.workload["load"]["rate"].as_f64().unwrap_or(0.0)
}

/// The builds the servers of `b.key`'s service reported in this build's runs of `strategy`.
fn reported(b: &Build, strategy: &str) -> String {
    let ours = |s: Service| match b.key.as_str() {
        "redis" => matches!(
            s,
            Service::Redis | Service::Sentinel | Service::RedisCluster
        ),
        "etcd" => s == Service::Etcd,
        "zookeeper" => s == Service::Zookeeper,
        "mysql" => s == Service::Mariadb,
        _ => true,
    };
    let mut v: Vec<String> = b
        .calm
        .iter()
        .filter(|s| s.strategy == strategy)
        .flat_map(|s| s.servers.iter().filter(|n| ours(n.service)))
        .map(|n| n.version.clone())
        .collect();
    v.sort();
    v.dedup();
    if v.is_empty() {
        "-".into()
    } else {
        v.join(", ")
    }
}

fn mid_ratio(first: [Option<f64>; 2], this: [Option<f64>; 2]) -> Option<f64> {
    let mid = |i: [Option<f64>; 2]| match i {
        [Some(l), Some(u)] => Some((l * u).sqrt()),
        _ => None,
    };
    Some(mid(this)? / mid(first)?)
}

/// `p99 [lo, hi] (n=N)` in ms, or the maximum when the count cannot bound a p99.
fn p99_cell(s: &Summary) -> String {
    let l = &s.latency_us;
    if l.count == 0 {
        return "-".into();
    }
    let supported = l.supports(Pct::P99);
    let ci = l
        .ci95
        .filter(|_| supported)
        .map(|c| format!(" [{}, {}]", ms_table(c.p99.0), or_dash(c.p99.1, ms_table)))
        .unwrap_or_default();
    format!(
        "{}{ci} ({})",
        ms_table(l.shown(Pct::P99)),
        samples(l.count, supported)
    )
}

/// What the tables say under [`HEADERS`], one cell per column.
pub fn cells(l: &Line) -> [String; 7] {
    let vs = match (l.overlaps_first, l.vs_first) {
        (None, _) => "-".to_string(),
        (Some(o), r) => format!(
            "{} {}",
            or_dash(r, ratio),
            if o { "overlap" } else { "APART" }
        ),
    };
    let (rate, p99) = l.calm.clone().map_or(("-".into(), "-".into()), |(r, c)| {
        (format!("{}/s", rate_exact(r)), c)
    });
    let capacity = format!(
        "{}{}",
        agreement::text(l.interval),
        if l.safe { "" } else { " UNSAFE" }
    );
    let faults: Vec<String> = l.faults.iter().map(|(f, v)| format!("{f} {v}")).collect();
    [
        format!("{}={}", l.key, l.build),
        l.reported.clone(),
        capacity,
        vs,
        rate,
        p99,
        if faults.is_empty() {
            "-".into()
        } else {
            faults.join(" · ")
        },
    ]
}

/// The columns after the strategy's.
pub const HEADERS: [&str; 7] = [
    "build",
    "servers report",
    "capacity (/s)",
    "vs first",
    "calm rate",
    "calm p99, ms [95%]",
    "verdict under each fault",
];

/// What "vs first" means, and how far to trust one APART.
pub const NOTE: &str = "vs first: the capacity's geometric midpoint over the first build's, and \
     whether the two intervals overlap. Two jobs of one build missed each other for 1 strategy in \
     26 (Nov 27, 2026): one APART is a hint, the same APART in a second run is a difference";

/// Prints the table of `builds`.
pub fn print_versions(out: &mut impl Write, builds: &[Build]) -> std::io::Result<()> {
    let lines = lines(builds);
    let w = lines.iter().map(|l| l.strategy.len()).max().unwrap_or(8);
    let rw = lines.iter().map(|l| l.reported.len()).max().unwrap_or(8);
    // Column `i`'s width: its widest cell, at least `least`.
    let width = |i: usize, least: usize| {
        let widest = lines.iter().map(|l| cells(l)[i].len()).max();
        widest.unwrap_or(0).max(least)
    };
    // `mysql=mariadb-10.11` is the longest build cell.
    let (bw, pw) = (width(0, 16), width(5, 18));
    let h = HEADERS;
    writeln!(
        out,
        "{:<w$}  {:<bw$} {:<rw$}  {:>17}  {:>13}  {:>10}  {:<pw$}  {}",
        "strategy", h[0], h[1], h[2], h[3], h[4], h[5], h[6]
    )?;
    for l in &lines {
        let c = cells(l);
        writeln!(
            out,
            "{:<w$}  {:<bw$} {:<rw$}  {:>17}  {:>13}  {:>10}  {:<pw$}  {}",
            l.strategy, c[0], c[1], c[2], c[3], c[4], c[5], c[6]
        )?;
    }
    writeln!(out, "{NOTE}")
}

/// One strategy's calm runs on every build of a key: the rate and the load's length.
#[derive(Debug, Clone, PartialEq)]
pub struct CalmRate {
    pub strategy: String,
    /// Arrivals per second, three significant digits.
    pub rate_per_s: f64,
    /// Seconds of load: about the samples asked for at that rate, 5 to 30.
    pub duration_s: u64,
}

/// The rate every build of `key` runs `strategy` at in its calm run, common to the builds so
/// their p99s compare: half the lowest capacity any build showed (a build that passed no rate
/// counts its lowest failing one, and 1/s without either), at least 1/s, to three significant
/// digits; run long enough for about `samples` arrivals, 5 to 30 s. `None` when no build of
/// `key` swept it.
pub fn common_calm_rate(
    builds: &[Build],
    key: &str,
    strategy: &str,
    samples: f64,
) -> Option<CalmRate> {
    let lows = builds
        .iter()
        .filter(|b| b.key == key)
        .filter_map(|b| b.sweep.entry(strategy))
        .map(|e| match (e.capacity_per_s, e.first_failing_per_s) {
            (c, _) if c > 0.0 => c,
            (_, Some(f)) if f > 0.0 => f,
            _ => 1.0,
        });
    let lowest = lows.reduce(f64::min)?;
    let rate = (lowest / 2.0).max(1.0);
    // Three significant digits, as a command line offers it (`1230`, `12.5`).
    let rate: f64 = format!("{rate:.2e}").parse().unwrap_or(rate);
    Some(CalmRate {
        strategy: strategy.to_string(),
        rate_per_s: rate,
        // Rounded as the text would be (half to even), the way the script always rounded it.
        duration_s: format!("{:.0}", (samples / rate).clamp(5.0, 30.0))
            .parse()
            .unwrap_or(30),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(faults: Vec<(String, &'static str)>) -> Line {
        Line {
            strategy: "redis-setnx".into(),
            key: "redis".into(),
            build: "valkey-8.0".into(),
            reported: "valkey 8.0.1".into(),
            interval: [Some(600.0), Some(700.0)],
            safe: true,
            overlaps_first: Some(true),
            vs_first: Some(1.02),
            calm: None,
            faults,
        }
    }

    #[test]
    fn each_faults_verdict_is_named_beside_the_build() {
        let c = cells(&line(vec![
            ("kill-master".into(), "safe"),
            ("pause-holder".into(), "BROKEN"),
        ]));
        assert_eq!(c[0], "redis=valkey-8.0");
        assert_eq!(c[6], "kill-master safe · pause-holder BROKEN");
        // No fault run (FAULTS= or a fault the strategy cannot take): a dash, not "safe".
        assert_eq!(cells(&line(Vec::new()))[6], "-");
    }

    #[test]
    fn fault_runs_are_read_by_fault_and_strategy() {
        let dir = tempfile::tempdir().unwrap();
        let job = JobLayout::new(dir.path());
        let fixture = include_str!("../../tests/fixtures/summary.json");
        for f in ["pause-holder", "kill-master"] {
            let d = job.chaos(f).join("redis-setnx");
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("summary.json"), fixture).unwrap();
        }
        let runs = fault_runs(&job).unwrap();
        let names: Vec<&str> = runs.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(names, ["kill-master", "pause-holder"]);
        let absent = JobLayout::new(dir.path().join("absent"));
        assert!(fault_runs(&absent).unwrap().is_empty());
    }

    #[test]
    fn the_calm_rate_is_half_the_lowest_build_in_three_digits() {
        use crate::report::evidence::fixtures::{entry, sweep};
        use crate::report::sweep::Bound;
        let build = |name: &str, cap: f64, fail: Option<f64>| {
            let mut e = entry("redis-lua-decr", cap, Bound::Found, &[(50.0, true, true)]);
            e.capacity_per_s = cap;
            e.first_failing_per_s = fail;
            Build {
                key: "redis".into(),
                build: name.into(),
                sweep: sweep(vec![e]),
                calm: Vec::new(),
                faults: Vec::new(),
            }
        };
        let builds = [
            build("7.0", 2469.0, None),
            build("valkey-9.1", 3000.0, None),
        ];
        let c = common_calm_rate(&builds, "redis", "redis-lua-decr", 1000.0).unwrap();
        assert_eq!((c.rate_per_s, c.duration_s), (1230.0, 5));
        // No rate passed: half the lowest failing rate; a long load for few arrivals, at most 30 s.
        let builds = [
            build("7.0", 0.0, Some(25.0)),
            build("valkey-9.1", 400.0, None),
        ];
        let c = common_calm_rate(&builds, "redis", "redis-lua-decr", 1000.0).unwrap();
        assert_eq!((c.rate_per_s, c.duration_s), (12.5, 30));
        let c = common_calm_rate(&builds, "redis", "redis-lua-decr", 50.0).unwrap();
        assert_eq!(c.duration_s, 5);
        assert_eq!(
            common_calm_rate(&builds, "etcd", "redis-lua-decr", 50.0),
            None
        );
        assert_eq!(common_calm_rate(&builds, "redis", "etcd", 50.0), None);
    }
}
