//! The CI files read by the tools CI systems use (docs/ci-formats.md): junitparser (PyPI)
//! parses the JUnit that `run`/`compare` write, and Apache Otava finds a planted step in
//! `lockbench history`'s CSV. Both tools live in scripts/ci-tools/.venv (`install-deps.sh
//! --for-tests`); the tools only parse, every judgement is here. Without them a test says so
//! and passes, except under CI, where it fails naming the install command.

use std::path::{Path, PathBuf};
use std::process::Command;

use lockbench::check::{LockVerdict, StoreVerdict};
use lockbench::report::{Summary, ci};
use serde_json::Value;

/// The committed fixture as `strategy`.
fn fixture(strategy: &str) -> Summary {
    let mut s: Summary = serde_json::from_str(include_str!("fixtures/summary.json")).unwrap();
    s.strategy = strategy.into();
    s
}

/// A tool of the venv, or `None` (outside CI) when it is not installed.
fn tool(name: &str) -> Option<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../scripts/ci-tools/.venv/bin")
        .join(name);
    if path.is_file() {
        return Some(path);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{} missing: sh scripts/ci-tools/install.sh (or install-deps.sh --for-tests)",
        path.display()
    );
    eprintln!(
        "skipped: {} not installed (sh scripts/ci-tools/install.sh)",
        path.display()
    );
    None
}

/// What junitparser reads from a JUnit file: `tests failures` of the report and its suites,
/// then one line per case, `suite<TAB>class<TAB>name<TAB>failed`.
const READ: &str = r#"
import sys
from junitparser import Failure, JUnitXml
xml = JUnitXml.fromfile(sys.argv[1])
print(xml.tests, xml.failures)
for s in xml:
    print(s.tests, s.failures)
    for c in s:
        failed = any(isinstance(r, Failure) for r in c.result)
        print(f"{s.name}\t{c.classname}\t{c.name}\t{failed}")
"#;

#[test]
fn junitparser_reads_every_case_and_the_failure_where_a_verdict_breaks_its_claim() {
    let Some(python) = tool("python") else {
        return;
    };
    let mut bad = fixture("bad");
    bad.claims_safety = true;
    bad.safe = false;
    bad.lock_verdict = Some(LockVerdict::Broken);
    bad.store_verdict = StoreVerdict::Corrupted;
    let mut good = fixture("good");
    good.claims_safety = true;
    good.safe = true;
    good.lock_verdict = Some(LockVerdict::Held);
    good.store_verdict = StoreVerdict::Intact;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("junit.xml");
    let xml = ci::junit("lockbench compare x", &[good, bad])
        .to_string()
        .unwrap();
    std::fs::write(&file, xml).unwrap();
    let out = Command::new(python)
        .args(["-c", READ])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    let total = lines.next().unwrap();
    assert_eq!(
        lines.next().unwrap(),
        total,
        "one suite: its counts are the report's"
    );
    let cases: Vec<Vec<&str>> = lines.map(|l| l.split('\t').collect()).collect();
    assert_eq!(total, format!("{} 1", cases.len()), "{text}");
    for c in &cases {
        assert_eq!(c[0], "lockbench compare x", "{c:?}");
        // Only the broken strategy's safety case fails.
        assert_eq!(c[3] == "True", c[1] == "bad" && c[2] == "safety", "{c:?}");
    }
    for class in ["good", "bad"] {
        let names: Vec<&str> = cases
            .iter()
            .filter(|c| c[1] == class)
            .map(|c| c[2])
            .collect();
        assert_eq!(names[..2], ["safety", "sales_per_s"], "{class}: {names:?}");
    }
}

/// 30 comparisons a day apart: `stepped` sells 1,000/s and 800/s from run 20 on, `level`
/// 500/s, both with the same ±3 % wiggle.
fn series(dir: &Path) {
    for i in 0..30u32 {
        let wiggle = 1.0 + 0.006 * f64::from((i * 7) % 11) - 0.03;
        let runs: Vec<Summary> = [
            ("stepped", if i < 20 { 1000.0 } else { 800.0 }),
            ("level", 500.0),
        ]
        .into_iter()
        .map(|(strategy, level)| {
            let mut s = fixture(strategy);
            s.started_at = format!("2026-01-{:02}T12:00:00.000Z", i + 1);
            s.throughput.sales_per_s = (level * wiggle * 10.0_f64).round() / 10.0;
            s
        })
        .collect();
        let run = dir.join(format!("{i:02}"));
        std::fs::create_dir_all(&run).unwrap();
        std::fs::write(run.join("compare.json"), serde_json::to_vec(&runs).unwrap()).unwrap();
    }
}

/// docs/ci-formats.md's two commands over one strategy's series: the change points Otava
/// reports, as (metric, index, time, forward change %).
fn change_points(otava: &Path, root: &Path, strategy: &str) -> Vec<(String, u64, i64, f64)> {
    let status = Command::new(env!("CARGO_BIN_EXE_lockbench"))
        .args([
            "history",
            "series",
            "--strategies",
            strategy,
            "--out",
            "results/runs/history.csv",
        ])
        .current_dir(root)
        .status()
        .unwrap();
    assert!(status.success());
    let csv = std::fs::read_to_string(root.join("results/runs/history.csv")).unwrap();
    assert_eq!(csv.lines().count(), 31, "a header and 30 runs");
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/ci-tools/otava.yaml");
    let out = Command::new(otava)
        .arg("analyze")
        .arg("--config-file")
        .arg(config)
        .args(["--output", "json", "lockbench"])
        .current_dir(root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let found: Value = serde_json::from_slice(&out.stdout).unwrap();
    let points = found["lockbench"].as_array().unwrap();
    (points.iter())
        .flat_map(|p| p["changes"].as_array().unwrap())
        .map(|c| {
            let pct = &c["forward_change_percent"];
            (
                c["metric"].as_str().unwrap().to_string(),
                c["index"].as_u64().unwrap(),
                c["time"].as_i64().unwrap(),
                pct.as_f64().or_else(|| pct.as_str()?.parse().ok()).unwrap(),
            )
        })
        .collect()
}

#[test]
fn otava_finds_the_planted_step_at_its_run_and_none_in_a_level_series() {
    let Some(otava) = tool("otava") else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    series(&root.path().join("series"));
    std::fs::create_dir_all(root.path().join("results/runs")).unwrap();
    let step = change_points(&otava, root.path(), "stepped");
    // Run 20 started 2026-01-21 12:00 UTC.
    assert_eq!(step.len(), 1, "{step:?}");
    let (metric, index, time, pct) = &step[0];
    assert_eq!(
        (metric.as_str(), *index, *time),
        ("sales_per_s", 20, 1_768_996_800),
        "{step:?}"
    );
    assert!((-25.0..-15.0).contains(pct), "{step:?}");
    assert_eq!(change_points(&otava, root.path(), "level"), []);
}
