//! The regression gate: a current set of results against a committed baseline.
//!
//! Both sides may hold several repetitions of each strategy (every `compare.json`,
//! `summary.json` or `baseline.json` below a folder counts as one repetition). Speed is judged
//! on medians, so one noisy repetition moves nothing; safety is judged on every repetition,
//! because one oversell is one too many. A strategy fails when
//! - it was safe in every baseline repetition (lock held, store intact: the tables' verdict)
//!   and now is not in some repetition — its lock broke (two holders at once, or a lease lost
//!   while held), fenced or not, or its store was corrupted;
//! - it is a control that the baseline caught and the current run does not (the checker, or the
//!   fault that triggers it, went blind);
//! - its median sales/s dropped, or its median p99 rose, beyond the tolerance (a p99 rise
//!   under [`P99_FLOOR_US`] is noise, not a regression);
//! - it is in the baseline but was not run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{SCHEMA, Summary};
use crate::check::Verdict;

/// Schema id of `baseline.json`.
pub const BASELINE_SCHEMA: &str = "lockbench.baseline/2";

/// Errors reading results.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    /// A file could not be read or parsed.
    #[error("{}: {detail}", path.display())]
    Read { path: PathBuf, detail: String },
    /// A folder holds no results at all.
    #[error(
        "{}: no results found (expected compare.json, summary.json or baseline.json in it or in \
         its subfolders)", .0.display()
    )]
    Empty(PathBuf),
}

/// A committed baseline: the summaries of every repetition.
#[derive(Debug, Serialize, Deserialize)]
pub struct Baseline {
    /// Always [`BASELINE_SCHEMA`].
    pub schema: String,
    /// One entry per strategy and repetition.
    pub runs: Vec<Summary>,
}

/// A p99 that rose by less than this never fails, whatever the ratio: below a millisecond,
/// scheduling noise on a shared machine moves p99 by tens of percent.
pub const P99_FLOOR_US: f64 = 1000.0;

/// How much slower is still a pass.
#[derive(Debug, Clone, Copy)]
pub struct Tolerance {
    /// Largest accepted drop of median sales/s, as a fraction (0.15 = 15 %).
    pub max_throughput_drop: f64,
    /// Largest accepted rise of median p99, as a fraction.
    pub max_p99_rise: f64,
}

/// One strategy's comparison.
#[derive(Debug, Clone, Serialize)]
pub struct GateRow {
    /// Strategy id.
    pub strategy: String,
    /// Repetitions in the baseline / current results.
    pub repetitions: (usize, usize),
    /// Median audited sales/s, baseline and current.
    pub sales_per_s: (f64, f64),
    /// Median p99 latency (µs), baseline and current.
    pub p99_us: (u64, u64),
    /// Whether every repetition was safe (lock held, store intact).
    pub safe: (bool, bool),
    /// Why it failed; empty when it passed.
    pub failures: Vec<String>,
    /// Worth a look, but no failure.
    pub notes: Vec<String>,
}

/// The verdict over every strategy.
#[derive(Debug, Clone, Serialize)]
pub struct GateReport {
    /// One row per strategy of either side.
    pub rows: Vec<GateRow>,
}

impl GateReport {
    /// Whether every row passed.
    pub fn passed(&self) -> bool {
        self.rows.iter().all(|r| r.failures.is_empty())
    }
}

/// Reads every repetition below `dir`: a folder with `compare.json` or `baseline.json` is
/// read whole (its per-strategy subfolders are the same runs again); else its `summary.json`;
/// else its subfolders.
pub fn load_results(dir: &Path) -> Result<Vec<Summary>, GateError> {
    let mut out = Vec::new();
    collect(dir, &mut out)?;
    if out.is_empty() {
        return Err(GateError::Empty(dir.to_path_buf()));
    }
    Ok(out)
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, GateError> {
    let err = |detail: String| GateError::Read {
        path: path.to_path_buf(),
        detail,
    };
    let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
    serde_json::from_str(&text).map_err(|e| {
        // A result of another schema names itself, so say that rather than which field is off.
        let value: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        let schemas: std::collections::BTreeSet<&str> = [&value]
            .into_iter()
            .chain(value.as_array().into_iter().flatten())
            .chain(value["runs"].as_array().into_iter().flatten())
            .filter_map(|v| v["schema"].as_str())
            .filter(|s| *s != SCHEMA && *s != BASELINE_SCHEMA)
            .collect();
        match schemas.first() {
            Some(old) => err(format!(
                "written in schema {old:?}, this lockbench reads {SCHEMA:?} and \
                 {BASELINE_SCHEMA:?}: re-record it (for a baseline: scripts/ci-gate.sh \
                 --update-baseline)"
            )),
            None => err(format!("not a lockbench result: {e}")),
        }
    })
}

fn collect(dir: &Path, out: &mut Vec<Summary>) -> Result<(), GateError> {
    let baseline = dir.join("baseline.json");
    if baseline.is_file() {
        let b: Baseline = read_json(&baseline)?;
        if b.schema != BASELINE_SCHEMA {
            return Err(GateError::Read {
                path: baseline,
                detail: format!("schema {:?}, expected {BASELINE_SCHEMA:?}", b.schema),
            });
        }
        out.extend(b.runs);
        return Ok(());
    }
    let compare = dir.join("compare.json");
    if compare.is_file() {
        out.extend(read_json::<Vec<Summary>>(&compare)?);
        return Ok(());
    }
    let summary = dir.join("summary.json");
    if summary.is_file() {
        out.push(read_json(&summary)?);
        return Ok(());
    }
    let entries = std::fs::read_dir(dir).map_err(|e| GateError::Read {
        path: dir.to_path_buf(),
        detail: e.to_string(),
    })?;
    let mut dirs: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for d in dirs {
        collect(&d, out)?;
    }
    Ok(())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The tables' verdict (from the lock and store verdicts they print), so the gate and the
/// tables never disagree about a run.
pub fn violated(s: &Summary) -> bool {
    !s.verdict().safe()
}

fn pct(from: f64, to: f64) -> String {
    if from == 0.0 {
        return "n/a".into();
    }
    format!("{:+.1}%", (to - from) / from * 100.0)
}

/// Compares `current` with `baseline`.
pub fn gate(baseline: &[Summary], current: &[Summary], tol: Tolerance) -> GateReport {
    let mut ids: BTreeMap<&str, (Vec<&Summary>, Vec<&Summary>)> = BTreeMap::new();
    for s in baseline {
        ids.entry(&s.strategy).or_default().0.push(s);
    }
    for s in current {
        ids.entry(&s.strategy).or_default().1.push(s);
    }
    let rows = ids
        .into_iter()
        .map(|(id, (base, cur))| {
            let sales =
                |v: &[&Summary]| median(v.iter().map(|s| s.throughput.sales_per_s).collect());
            let p99 = |v: &[&Summary]| {
                median(v.iter().map(|s| s.latency_us.p99 as f64).collect()).round() as u64
            };
            let safe = |v: &[&Summary]| !v.is_empty() && !v.iter().any(|s| violated(s));
            let mut row = GateRow {
                strategy: id.to_string(),
                repetitions: (base.len(), cur.len()),
                sales_per_s: (sales(&base), sales(&cur)),
                p99_us: (p99(&base), p99(&cur)),
                safe: (safe(&base), safe(&cur)),
                failures: Vec::new(),
                notes: Vec::new(),
            };
            if cur.is_empty() {
                row.failures.push("in the baseline but not run".into());
                return row;
            }
            if base.is_empty() {
                row.notes.push("new: not in the baseline".into());
                return row;
            }
            let control = !cur[0].claims_safety;
            let caught = |v: &[&Summary]| v.iter().all(|s| violated(s));
            if row.safe.0 && !row.safe.1 {
                let bad: Vec<&&Summary> = cur.iter().filter(|s| violated(s)).collect();
                let worst = bad.iter().map(|s| s.audit.oversell).max().unwrap_or(0);
                let lost = bad.iter().map(|s| s.audit.lost_updates).max().unwrap_or(0);
                let grants = bad
                    .iter()
                    .map(|s| s.double_grant_incidents)
                    .max()
                    .unwrap_or(0);
                let leases = bad.iter().map(|s| s.lease_lost).max().unwrap_or(0);
                let torn = bad.iter().map(|s| s.torn_reads).max().unwrap_or(0);
                let sales = bad.iter().map(|s| s.audit.lost_sales).max().unwrap_or(0);
                let verdicts: std::collections::BTreeSet<String> = bad
                    .iter()
                    .map(|s| {
                        format!(
                            "lock {}, store {}",
                            Verdict::lock_text(s.lock_verdict),
                            Verdict::store_text(s.store_verdict)
                        )
                    })
                    .collect();
                row.failures.push(format!(
                    "was safe, now not in {} of {} runs ({}; oversell up to {worst}, lost \
                     updates up to {lost}, lost sales up to {sales}, double-grant incidents up to \
                     {grants}, leases lost up to {leases}, torn reads up to {torn})",
                    bad.len(),
                    cur.len(),
                    verdicts.into_iter().collect::<Vec<_>>().join("; ")
                ));
            }
            if caught(&base) && !caught(&cur) {
                let msg = "the baseline caught it in every run, this run did not: the checker or \
                           its trigger went blind";
                if control {
                    row.failures.push(format!("control not caught: {msg}"));
                } else {
                    row.notes.push(format!("no longer unsafe: {msg}?"));
                }
            }
            let (b, c) = row.sales_per_s;
            if b > 0.0 && c < b * (1.0 - tol.max_throughput_drop) {
                row.failures.push(format!(
                    "median sales/s {b:.1} → {c:.1} ({}), beyond -{:.0}%",
                    pct(b, c),
                    tol.max_throughput_drop * 100.0
                ));
            }
            // Reads are the other half of a read–write run's service: held to the same bound.
            let reads =
                |v: &[&Summary]| median(v.iter().map(|s| s.throughput.reads_per_s).collect());
            let (b, c) = (reads(&base), reads(&cur));
            if b > 0.0 && c < b * (1.0 - tol.max_throughput_drop) {
                row.failures.push(format!(
                    "median reads/s {b:.1} → {c:.1} ({}), beyond -{:.0}%",
                    pct(b, c),
                    tol.max_throughput_drop * 100.0
                ));
            }
            let (b, c) = (row.p99_us.0 as f64, row.p99_us.1 as f64);
            if b > 0.0 && c > b * (1.0 + tol.max_p99_rise) && c - b >= P99_FLOOR_US {
                row.failures.push(format!(
                    "median p99 {:.2} ms → {:.2} ms ({}), beyond +{:.0}%",
                    b / 1000.0,
                    c / 1000.0,
                    pct(b, c),
                    tol.max_p99_rise * 100.0
                ));
            }
            row
        })
        .collect();
    GateReport { rows }
}

/// Prints the gate's table and, under it, every failure and note.
pub fn print_gate(out: &mut impl std::io::Write, r: &GateReport) -> std::io::Result<()> {
    writeln!(
        out,
        "{:<24} {:>5}  {:>21}  {:>23}  {:>15}  verdict",
        "strategy", "runs", "sales/s base → now", "p99 ms base → now", "safe base → now"
    )?;
    for row in &r.rows {
        let ran = row.repetitions.1 > 0;
        let yes = |b: bool| match (b, ran) {
            (_, false) => "-",
            (true, _) => "yes",
            (false, _) => "NO",
        };
        writeln!(
            out,
            "{:<24} {:>5}  {:>21}  {:>23}  {:>15}  {}",
            row.strategy,
            format!("{}/{}", row.repetitions.0, row.repetitions.1),
            if ran {
                format!(
                    "{:.1} → {:.1} {}",
                    row.sales_per_s.0,
                    row.sales_per_s.1,
                    pct(row.sales_per_s.0, row.sales_per_s.1)
                )
            } else {
                format!("{:.1} → -", row.sales_per_s.0)
            },
            if ran {
                format!(
                    "{:.2} → {:.2} {}",
                    row.p99_us.0 as f64 / 1000.0,
                    row.p99_us.1 as f64 / 1000.0,
                    pct(row.p99_us.0 as f64, row.p99_us.1 as f64)
                )
            } else {
                format!("{:.2} → -", row.p99_us.0 as f64 / 1000.0)
            },
            format!("{} → {}", yes(row.safe.0), yes(row.safe.1)),
            if row.failures.is_empty() {
                "pass"
            } else {
                "FAIL"
            }
        )?;
    }
    for row in &r.rows {
        for f in &row.failures {
            writeln!(out, "FAIL {}: {f}", row.strategy)?;
        }
        for n in &row.notes {
            writeln!(out, "note {}: {n}", row.strategy)?;
        }
    }
    writeln!(
        out,
        "gate: {}",
        if r.passed() { "passed" } else { "FAILED" }
    )
}

/// Writes `current` as the new baseline in `dir/baseline.json`.
pub fn write_baseline(dir: &Path, current: Vec<Summary>) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join("baseline.json");
    let b = Baseline {
        schema: BASELINE_SCHEMA.into(),
        runs: current,
    };
    std::fs::write(&path, serde_json::to_vec_pretty(&b)?)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real summary (mysql-atomic under kill-master), renamed and edited per case.
    fn run(id: &str, sales: f64, p99_us: u64, oversell: u64, control: bool) -> Summary {
        let mut s: Summary =
            serde_json::from_str(include_str!("../../tests/fixtures/summary.json")).unwrap();
        s.strategy = id.into();
        s.throughput.sales_per_s = sales;
        s.latency_us.p99 = p99_us;
        s.audit.oversell = oversell;
        s.audit.lost_updates = oversell;
        s.double_grants = 0;
        s.claims_safety = !control;
        rejudge(&mut s);
        s
    }

    /// Recomputes the verdict after a test edited the counts it comes from.
    fn rejudge(s: &mut Summary) {
        let v = Verdict::judge(
            s.lock_verdict.is_some(),
            s.strategy.ends_with("-fenced"),
            crate::check::Exclusion {
                double_grant_incidents: s.double_grant_incidents,
                lease_lost: s.lease_lost,
                torn_reads: s.torn_reads,
            },
            &s.audit,
        );
        (s.lock_verdict, s.store_verdict, s.safe) = (v.lock, v.store, v.safe());
    }

    /// A lock strategy's run whose lock broke `incidents` times, the store intact.
    fn broken_lock(id: &str, incidents: u64) -> Summary {
        let mut s = run(id, 1000.0, 3000, 0, false);
        s.lock_verdict = Some(crate::check::LockVerdict::Held);
        s.double_grants = incidents;
        s.double_grant_incidents = incidents;
        rejudge(&mut s);
        s
    }

    #[test]
    fn a_lock_that_broke_fails_even_when_the_store_survived() {
        let base = vec![broken_lock("etcd", 0), broken_lock("etcd-fenced", 0)];
        let cur = vec![broken_lock("etcd", 2), broken_lock("etcd-fenced", 3)];
        let r = gate(&base, &cur, TOL);
        let f = failures(&r, "etcd");
        assert!(
            f.len() == 1 && f[0].contains("lock BROKEN, store intact"),
            "{f:?}"
        );
        let f = failures(&r, "etcd-fenced");
        assert!(
            f.len() == 1 && f[0].contains("lock broken, fenced, store intact"),
            "{f:?}"
        );
    }

    #[test]
    fn torn_reads_and_fewer_reads_fail_a_read_write_run() {
        let reads = |torn: u64, per_s: f64| {
            let mut s = broken_lock("redis-rwlock", 0);
            (s.reads, s.torn_reads, s.throughput.reads_per_s) = (9000, torn, per_s);
            rejudge(&mut s);
            s
        };
        let r = gate(&[reads(0, 900.0)], &[reads(4, 880.0)], TOL);
        let f = failures(&r, "redis-rwlock");
        assert!(
            f.len() == 1 && f[0].contains("lock BROKEN") && f[0].contains("torn reads up to 4"),
            "{f:?}"
        );
        let r = gate(&[reads(0, 900.0)], &[reads(0, 600.0)], TOL);
        let f = failures(&r, "redis-rwlock");
        assert!(
            f.len() == 1 && f[0].contains("median reads/s 900.0 → 600.0"),
            "{f:?}"
        );
    }

    /// Every summary the tests hold: the gate's notion of a violation is the tables' verdict.
    #[test]
    fn the_gate_and_the_tables_agree_on_every_fixture() {
        let mut all: Vec<Summary> = baseline();
        all.push(broken_lock("etcd", 2));
        all.push(broken_lock("etcd-fenced", 3));
        all.push(broken_lock("etcd", 0));
        let committed = concat!(env!("CARGO_MANIFEST_DIR"), "/../results/baseline");
        all.extend(load_results(Path::new(committed)).expect("the committed baseline reads"));
        for s in &all {
            let mut table = Vec::new();
            crate::report::print_table(&mut table, std::slice::from_ref(s)).unwrap();
            let table = String::from_utf8(table).unwrap();
            let row = table.lines().nth(2).unwrap();
            let says_safe = row.ends_with(" safe") || row.ends_with("not caught (control)");
            assert_eq!(violated(s), !says_safe, "{}: {row}", s.strategy);
            assert_eq!(s.safe, s.verdict().safe(), "{}", s.strategy);
        }
    }

    const TOL: Tolerance = Tolerance {
        max_throughput_drop: 0.15,
        max_p99_rise: 0.25,
    };

    fn baseline() -> Vec<Summary> {
        let mut v = Vec::new();
        for (sales, p99) in [(1000.0, 3000), (1040.0, 3100), (980.0, 2900)] {
            v.push(run("mysql-atomic", sales, p99, 0, false));
            v.push(run("none", sales * 2.0, p99 / 2, 400, true));
        }
        v
    }

    fn failures(r: &GateReport, id: &str) -> Vec<String> {
        r.rows
            .iter()
            .find(|r| r.strategy == id)
            .unwrap()
            .failures
            .clone()
    }

    #[test]
    fn same_results_pass_and_noise_within_tolerance_passes() {
        let r = gate(&baseline(), &baseline(), TOL);
        assert!(r.passed(), "{r:?}");
        // 10 % slower, 20 % higher p99, and one wild repetition: medians stay inside.
        let cur = vec![
            run("mysql-atomic", 900.0, 3600, 0, false),
            run("mysql-atomic", 910.0, 3500, 0, false),
            run("mysql-atomic", 50.0, 90_000, 0, false),
            run("none", 1900.0, 1500, 380, true),
        ];
        let r = gate(&baseline(), &cur, TOL);
        assert!(r.passed(), "{r:?}");
        assert_eq!(r.rows[0].repetitions, (3, 3));
    }

    #[test]
    fn planted_regressions_fail_with_the_reason() {
        let slow = vec![
            run("mysql-atomic", 700.0, 3000, 0, false),
            run("none", 2000.0, 1500, 400, true),
        ];
        let f = failures(&gate(&baseline(), &slow, TOL), "mysql-atomic");
        assert!(
            f.len() == 1 && f[0].contains("sales/s 1000.0 → 700.0 (-30.0%)"),
            "{f:?}"
        );

        let tail = vec![
            run("mysql-atomic", 1000.0, 4000, 0, false),
            run("none", 2000.0, 1500, 400, true),
        ];
        let f = failures(&gate(&baseline(), &tail, TOL), "mysql-atomic");
        assert!(
            f.len() == 1 && f[0].contains("p99 3.00 ms → 4.00 ms"),
            "{f:?}"
        );
    }

    #[test]
    fn planted_oversell_and_a_blind_checker_fail() {
        let unsafe_now = vec![
            run("mysql-atomic", 1000.0, 3000, 0, false),
            run("mysql-atomic", 1000.0, 3000, 3, false),
            run("none", 2000.0, 1500, 400, true),
        ];
        let f = failures(&gate(&baseline(), &unsafe_now, TOL), "mysql-atomic");
        assert!(
            f.len() == 1 && f[0].contains("now not in 1 of 2 runs"),
            "{f:?}"
        );

        let blind = run("none", 2000.0, 1500, 0, true);
        let cur = vec![run("mysql-atomic", 1000.0, 3000, 0, false), blind];
        let f = failures(&gate(&baseline(), &cur, TOL), "none");
        assert!(f.len() == 1 && f[0].contains("control not caught"), "{f:?}");

        let missing = vec![run("mysql-atomic", 1000.0, 3000, 0, false)];
        let f = failures(&gate(&baseline(), &missing, TOL), "none");
        assert_eq!(f, ["in the baseline but not run"]);
    }

    #[test]
    fn results_load_from_compare_summary_and_baseline_files_once_each() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        // A comparison (its per-strategy folders repeat it), a single run, a baseline.
        std::fs::create_dir_all(d.join("rep-1/mysql-atomic")).unwrap();
        let two = vec![
            run("mysql-atomic", 1.0, 1, 0, false),
            run("none", 1.0, 1, 9, true),
        ];
        std::fs::write(
            d.join("rep-1/compare.json"),
            serde_json::to_vec(&two).unwrap(),
        )
        .unwrap();
        std::fs::write(
            d.join("rep-1/mysql-atomic/summary.json"),
            serde_json::to_vec(&two[0]).unwrap(),
        )
        .unwrap();
        std::fs::create_dir_all(d.join("rep-2")).unwrap();
        std::fs::write(
            d.join("rep-2/summary.json"),
            serde_json::to_vec(&two[0]).unwrap(),
        )
        .unwrap();
        assert_eq!(load_results(d).unwrap().len(), 3);
        let b = write_baseline(&d.join("base"), two).unwrap();
        assert!(b.ends_with("base/baseline.json"));
        assert_eq!(load_results(&d.join("base")).unwrap().len(), 2);
        let e = load_results(&d.join("base/..").join("nothing-here")).unwrap_err();
        assert!(e.to_string().contains("nothing-here"), "{e}");
        std::fs::create_dir_all(d.join("empty")).unwrap();
        let e = load_results(&d.join("empty")).unwrap_err().to_string();
        assert!(e.contains("no results found"), "{e}");
    }
}
