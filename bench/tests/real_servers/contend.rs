//! `lockbench contend` on real servers: docs/contention.md's short form measures every level
//! it was asked for (grants/s, acquire waits with their count), says when too few levels were
//! measured to fit the law, writes contend.json, the chart and the page, and leaves no server
//! behind; bad levels and lock-free strategies are refused before any server starts.

use std::path::Path;

use lockbench::report::contend::Contend;
use lockbench::report::usl::Usl;

use crate::common::{
    assert_rejected, assert_servers_gone, lockbench, read_summary, servers_available,
};

#[test]
fn contend_measures_each_level_and_leaves_nothing_running() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("contend");
    // docs/contention.md's command, short.
    let res = lockbench()
        .args(["contend", "--strategies", "redis-setnx", "--levels", "1,4"])
        .args([
            "--duration",
            "1s",
            "--trials",
            "2",
            "--warm-up",
            "0s",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(res.status.success(), "contend failed: {err}");
    let table = String::from_utf8_lossy(&res.stdout);
    let c = Contend::read(&out).unwrap();
    assert_eq!(c.entries.len(), 1, "{table}");
    let e = &c.entries[0];
    assert_eq!(e.error, None);
    let counts: Vec<u32> = e.levels.iter().map(|l| l.contenders).collect();
    assert_eq!(counts, [1, 4]);
    for l in &e.levels {
        assert_eq!(l.trials.len(), 2, "N={}", l.contenders);
        assert!(
            l.throughput.mean > 0.0 && l.throughput.ci95.is_some(),
            "{l:?}"
        );
        let grants: u64 = l.trials.iter().map(|t| t.grants).sum();
        // Every grant's wait is in the level's histogram, and the table carries the count.
        assert!(grants > 0 && l.acquire_count == grants, "{l:?}");
        assert!(l.trials.iter().all(|t| t.safe), "{l:?}");
        let row = table
            .lines()
            .find(|r| r.split_whitespace().nth(1) == Some(&l.contenders.to_string()))
            .unwrap_or_else(|| panic!("no row for N={}: {table}", l.contenders));
        assert!(row.contains(&format!("n={grants})")), "{row}");
    }
    // One contender waits for no one: its median wait is below the four contenders' p99;
    // four contenders share the key, and the recorder says how evenly.
    assert!(e.levels[0].acquire_p50_us.mean < e.levels[1].acquire_p99_us.mean);
    assert!(e.levels[1].jain.is_some(), "{:?}", e.levels[1]);
    assert_eq!(
        e.usl,
        Some(Usl::TooFewLevels {
            levels: 2,
            needed: 3
        })
    );
    assert!(
        table.contains("too few levels to fit (2; the fit needs 3)"),
        "{table}"
    );
    for f in [
        "charts/contention.svg",
        "charts/contention.png",
        "report.html",
    ] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(page.contains("The cost of contention") && page.contains("too few levels"));
    let trial = read_summary(&out.join(&e.levels[1].trials[0].dir));
    assert_eq!(
        (
            trial.workload["load"]["mode"].as_str(),
            trial.workload["inventory"]["skus"].as_u64()
        ),
        (Some("closed"), Some(1))
    );
    assert_servers_gone(&trial);
    assert!(!out.join("redis-setnx/endpoints.json").exists());
}

#[test]
fn contend_refuses_bad_levels_and_strategies_without_a_lock() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&[&str], &[&str]); 4] = [
        (
            &["--levels", "0,2"],
            &["--levels", "0 is out of range", "e.g. 1,2,4,8"],
        ),
        (&["--levels", "1,x"], &["--levels", "`x` is not a count"]),
        (
            &["--strategies", "mysql-atomic"],
            &["--strategies mysql-atomic", "takes none"],
        ),
        (
            &["--duration", "10ms"],
            &["--duration", "from 200ms to 10m"],
        ),
    ];
    for (args, needles) in cases {
        let mut cmd = lockbench();
        cmd.arg("contend").args(args);
        assert_rejected(cmd, &format!("{args:?}"), needles, dir.path());
    }
    assert!(!Path::new(&dir.path().join("out/contend.json")).exists());
}
