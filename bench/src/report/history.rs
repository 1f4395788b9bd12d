//! `lockbench history`: every run's headline figures below some folders, one CSV row per run
//! and strategy, in the order the runs started, for a trend tool to read (docs/ci-formats.md,
//! "Trends across commits": Apache Otava finds the change points in it).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::Summary;
use super::gate::{GateError, load_results};
use crate::record::Pct;

/// The CSV's header, one name per column.
pub const COLUMNS: [&str; 15] = [
    "time",
    "build",
    "lockbench_version",
    "strategy",
    "workload",
    "seed",
    "sales_per_s",
    "p99_us",
    "p99_n",
    "p99_lower_bound",
    "sold_out_s",
    "safe",
    "verdict",
    "machine_cores",
    "cpu_score",
];

/// Why the history could not be made.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// A folder held no results, or one could not be read.
    #[error(transparent)]
    Results(#[from] GateError),
    /// A strategy asked for has no run below the folders.
    #[error("no run of {strategy} below {dirs} (its runs are of: {found})")]
    NoRuns {
        /// The strategy asked for.
        strategy: String,
        /// The folders given.
        dirs: String,
        /// The strategies that did run.
        found: String,
    },
    /// A summary's start time is not RFC 3339.
    #[error(
        "{}: a summary of {strategy} has started_at = {value:?}: expected an RFC 3339 time such \
         as \"2026-01-01T12:00:00.000Z\"", dir.display()
    )]
    Time {
        /// The folder given.
        dir: PathBuf,
        /// The run's strategy.
        strategy: String,
        /// What it holds.
        value: String,
    },
}

/// One run of one strategy, with when it started.
#[derive(Debug, Clone)]
pub struct Row {
    /// When the load started.
    pub started: SystemTime,
    /// What it measured.
    pub summary: Summary,
}

/// Every run below `dirs` (found as the gate finds its repetitions) of `strategies` (empty:
/// all), oldest first; runs that started at the same instant keep the order they were found in.
pub fn collect(dirs: &[PathBuf], strategies: &[String]) -> Result<Vec<Row>, HistoryError> {
    let mut rows = Vec::new();
    for dir in dirs {
        for summary in load_results(dir)? {
            rows.push(Row {
                started: started(dir, &summary)?,
                summary,
            });
        }
    }
    let ran = |id: &str| rows.iter().any(|r| r.summary.strategy == id);
    if let Some(missing) = strategies.iter().find(|s| !ran(s)) {
        let mut found: Vec<&str> = rows.iter().map(|r| r.summary.strategy.as_str()).collect();
        found.sort_unstable();
        found.dedup();
        let dirs: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        return Err(HistoryError::NoRuns {
            strategy: missing.clone(),
            dirs: dirs.join(", "),
            found: found.join(", "),
        });
    }
    rows.retain(|r| strategies.is_empty() || strategies.contains(&r.summary.strategy));
    rows.sort_by_key(|r| r.started);
    Ok(rows)
}

fn started(dir: &Path, s: &Summary) -> Result<SystemTime, HistoryError> {
    humantime::parse_rfc3339_weak(&s.started_at).map_err(|_| HistoryError::Time {
        dir: dir.to_path_buf(),
        strategy: s.strategy.clone(),
        value: s.started_at.clone(),
    })
}

/// The CSV: [`COLUMNS`], then a line per row. A p99 from too few arrivals to bound it is left
/// empty (as the CI formats leave it out), and so is a sell-out time outside a sale.
pub fn write_csv(out: &mut impl Write, rows: &[Row]) -> std::io::Result<()> {
    writeln!(out, "{}", COLUMNS.join(","))?;
    for r in rows {
        writeln!(out, "{}", line(r).join(","))?;
    }
    Ok(())
}

fn line(r: &Row) -> Vec<String> {
    let s = &r.summary;
    let l = &s.latency_us;
    let p99 = l.supports(Pct::P99);
    let opt = |v: Option<String>| v.unwrap_or_default();
    let cpu = s.machine.as_ref().and_then(|m| m.cpu_score.as_ref());
    vec![
        humantime::format_rfc3339_millis(r.started).to_string(),
        field(&opt(s.origin.build.clone())),
        field(&s.lockbench_version),
        field(&s.strategy),
        field(&s.workload_file),
        s.seed.to_string(),
        s.throughput.sales_per_s.to_string(),
        opt(p99.then(|| l.p99.to_string())),
        l.count.to_string(),
        opt(p99.then(|| s.among_unstarted(Pct::P99.q()).to_string())),
        opt(s.hot_sold_out_s().map(|t| t.to_string())),
        s.verdict().safe().to_string(),
        field(s.headline()),
        opt(s.machine.as_ref().map(|m| m.cores.to_string())),
        opt(cpu.map(|c| c.m_per_s.to_string())),
    ]
}

/// A CSV field, quoted when it holds a comma, a quote or a line break (RFC 4180).
fn field(v: &str) -> String {
    if v.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", v.replace('"', "\"\""))
    } else {
        v.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(strategy: &str, started_at: &str, sales_per_s: f64) -> Summary {
        let mut s: Summary =
            serde_json::from_str(include_str!("../../tests/fixtures/summary.json")).unwrap();
        s.strategy = strategy.into();
        s.started_at = started_at.into();
        s.throughput.sales_per_s = sales_per_s;
        s
    }

    /// Writes `value` as JSON to `dir/name/file`.
    fn write(dir: &Path, name: &str, file: &str, value: &impl serde::Serialize) {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(file), serde_json::to_string(value).unwrap()).unwrap();
    }

    fn csv(dirs: &[PathBuf]) -> String {
        let mut out = Vec::new();
        write_csv(&mut out, &collect(dirs, &[]).unwrap()).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn runs_of_several_folders_come_out_in_the_order_they_started() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        // A comparison of two strategies (one file, two runs) and two single runs, the later
        // one found first.
        let pair = [
            fixture("x", "2026-03-01T10:00:05.000Z", 10.0),
            fixture("y", "2026-03-01T10:00:00.000Z", 20.0),
        ];
        write(a.path(), "cmp", "compare.json", &pair);
        let late = fixture("x", "2026-03-02T00:00:00Z", 30.0);
        write(b.path(), "1", "summary.json", &late);
        let early = fixture("y", "2026-02-28T23:59:59.5Z", 40.0);
        write(b.path(), "2", "summary.json", &early);
        let text = csv(&[b.path().into(), a.path().into()]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], COLUMNS.join(","));
        let got: Vec<(&str, &str, &str)> = lines[1..]
            .iter()
            .map(|l| {
                let f: Vec<&str> = l.split(',').collect();
                (f[0], f[3], f[6])
            })
            .collect();
        assert_eq!(
            got,
            [
                ("2026-02-28T23:59:59.500Z", "y", "40"),
                ("2026-03-01T10:00:00.000Z", "y", "20"),
                ("2026-03-01T10:00:05.000Z", "x", "10"),
                ("2026-03-02T00:00:00.000Z", "x", "30"),
            ]
        );
    }

    #[test]
    fn strategies_filter_the_rows_and_one_that_never_ran_is_an_error() {
        let d = tempfile::tempdir().unwrap();
        let pair = [
            fixture("x", "2026-03-01T10:00:05Z", 10.0),
            fixture("y", "2026-03-01T10:00:00Z", 20.0),
        ];
        write(d.path(), "cmp", "compare.json", &pair);
        let dirs = [d.path().to_path_buf()];
        let rows = collect(&dirs, &["x".into()]).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].summary.strategy, "x");
        let e = collect(&dirs, &["z".into()]).unwrap_err().to_string();
        assert!(e.starts_with("no run of z below "), "{e}");
        assert!(e.ends_with("(its runs are of: x, y)"), "{e}");
    }

    #[test]
    fn a_row_holds_the_headline_figures_and_what_the_summary_does_not_say_stays_empty() {
        let mut s = fixture("redis-setnx", "2026-03-01T10:00:00Z", 123.5);
        s.origin.build = Some("abc1234".into());
        s.machine = Some(crate::record::machine::Machine {
            cpu_model: "Test CPU".into(),
            cores: 2,
            usable_cores: 2,
            cpu_score: Some(crate::record::machine::CpuScore {
                m_per_s: 400.5,
                rounds: 16,
                optimized: true,
            }),
            fdatasync: None,
            loopback: None,
            psi: None,
            unmeasured: Vec::new(),
            probe_s: 0.6,
        });
        let row = line(&Row {
            started: started(Path::new("d"), &s).unwrap(),
            summary: s.clone(),
        });
        let col = |name: &str| row[COLUMNS.iter().position(|c| *c == name).unwrap()].clone();
        assert_eq!(col("build"), "abc1234");
        assert_eq!(col("workload"), "workloads/chaos.toml");
        assert_eq!(col("sales_per_s"), "123.5");
        assert_eq!(col("p99_us"), s.latency_us.p99.to_string());
        assert_eq!(col("p99_n"), s.latency_us.count.to_string());
        assert_eq!(col("sold_out_s"), "", "not a sale");
        assert_eq!(col("safe"), s.verdict().safe().to_string());
        assert_eq!(col("machine_cores"), "2");
        assert_eq!(col("cpu_score"), "400.5");
        // An older summary (no build, no cores) and a run too short to bound its p99.
        s.origin.build = None;
        s.machine = None;
        s.latency_us.count = 3;
        s.attempts = 3;
        let row = line(&Row {
            started: SystemTime::UNIX_EPOCH,
            summary: s,
        });
        let col = |name: &str| row[COLUMNS.iter().position(|c| *c == name).unwrap()].clone();
        for empty in [
            "build",
            "p99_us",
            "p99_lower_bound",
            "machine_cores",
            "cpu_score",
        ] {
            assert_eq!(col(empty), "", "{empty}");
        }
        assert_eq!(col("p99_n"), "3");
    }

    #[test]
    fn an_unsafe_run_says_so_and_a_comma_is_quoted() {
        let mut s = fixture("x", "2026-03-01T10:00:00Z", 1.0);
        s.claims_safety = true;
        s.lock_verdict = Some(crate::check::LockVerdict::Broken);
        s.workload_file = "a,\"b\".toml".into();
        let row = line(&Row {
            started: SystemTime::UNIX_EPOCH,
            summary: s,
        });
        assert_eq!(row[4], "\"a,\"\"b\"\".toml\"");
        assert_eq!(row[11], "false");
        assert_eq!(row[12], "UNSAFE");
    }

    #[test]
    fn a_folder_without_results_and_a_bad_time_are_named() {
        let empty = tempfile::tempdir().unwrap();
        let e = collect(&[empty.path().into()], &[])
            .unwrap_err()
            .to_string();
        assert!(e.starts_with(&empty.path().display().to_string()), "{e}");
        assert_contains!(e, "no results found");
        let bad = tempfile::tempdir().unwrap();
        let s = fixture("x", "yesterday", 1.0);
        write(bad.path(), "r", "summary.json", &s);
        let e = collect(&[bad.path().into()], &[]).unwrap_err().to_string();
        assert_contains!(e, "started_at = \"yesterday\": expected an RFC 3339");
        assert_contains!(e, "a summary of x");
    }
}
