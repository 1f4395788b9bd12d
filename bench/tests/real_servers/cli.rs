//! The command line, no servers needed: bad input is refused naming file, field and the
//! expected form, `list` names every strategy, and `gate` fails on a regression.

use std::path::Path;

use crate::common::{assert_rejected, lockbench, workload_file};

#[test]
fn bad_input_exits_non_zero_naming_file_field_and_form() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &[&str], &[&str])] = &[
        ("[load\nrate = 5", &[], &["w.toml", "line 1"]),
        (
            "[load]\nrat = 5",
            &[],
            &["w.toml", "unknown field `rat`", "rate"],
        ),
        (
            "[inventory]\nstock = 0",
            &[],
            &["w.toml", "inventory.stock = 0", "positive integer"],
        ),
        (
            "[inventory]\nstock = -5",
            &[],
            &["w.toml", "inventory.stock = -5"],
        ),
        (
            "[load]\nrate = -1",
            &[],
            &["w.toml", "load.rate = -1", "attempts per second"],
        ),
        (
            "[load]\nduration = \"0s\"",
            &[],
            &["w.toml", "load.duration = \"0s\"", "positive duration"],
        ),
        (
            "",
            &["--set", "load.clients"],
            &["--set load.clients", "section.key=value"],
        ),
        (
            "",
            &["--set", "load.clients=many"],
            &["--set load.clients=many", "clients"],
        ),
        (
            "",
            &["--set", "inventory.stock=0"],
            &["--set inventory.stock=0", "positive integer"],
        ),
        (
            "",
            &["--set", "nope.x=1"],
            &["--set nope.x=1", "unknown field `nope`"],
        ),
    ];
    for (text, extra, needles) in cases {
        let w = workload_file(dir.path(), text);
        let mut cmd = lockbench();
        cmd.args(["run", "--strategy", "none", "--workload"])
            .arg(&w)
            .args(*extra);
        assert_rejected(cmd, &format!("{text:?} {extra:?}"), needles, dir.path());
    }
    for (args, needles) in [
        (
            &["run", "--strategy", "nolock"][..],
            &["unknown strategy `nolock`", "redis-setnx"][..],
        ),
        (
            &["compare", "--strategies", "none,bogus"],
            &["--strategies", "unknown strategy `bogus`"],
        ),
        (
            &["run", "--strategy", "none", "--workload", "no/such.toml"],
            &["no/such.toml", "cannot read"],
        ),
    ] {
        let mut cmd = lockbench();
        cmd.args(args);
        assert_rejected(cmd, &format!("{args:?}"), needles, dir.path());
    }
}

#[test]
fn list_names_every_strategy() {
    let out = lockbench().arg("list").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for id in [
        "none",
        "mysql-for-update",
        "mysql-optimistic",
        "mysql-atomic",
        "redis-setnx",
        "redis-lua-decr",
        "zookeeper",
        "etcd",
        "redlock",
        "redis-sentinel",
        "redis-sentinel-wait",
        "mysql-lock-table",
        "redis-reentrant",
        "redis-setnx-watchdog",
    ] {
        assert!(
            text.lines().any(|l| l.starts_with(id)),
            "{id} missing from:\n{text}"
        );
    }
    let line = |id: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{id} ")))
            .unwrap()
            .to_string()
    };
    assert!(
        line("redis-get-del").contains("control"),
        "broken controls are marked"
    );
    assert!(
        line("etcd-fenced").contains("revision the lock was granted at"),
        "fencing tokens are shown"
    );
    assert!(
        line("redis-setnx").split_whitespace().nth(3) == Some("-"),
        "{}",
        line("redis-setnx")
    );
}

/// The gate through the binary, on a recorded summary: itself passes, a planted 30 % drop
/// fails with exit 1 and says why, `--update-baseline` accepts the new numbers.
#[test]
fn gate_fails_on_a_planted_regression_and_updates_the_baseline_on_request() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/summary.json");
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    let (base, cur) = (dir.path().join("base"), dir.path().join("cur"));
    for (d, factor) in [(&base, 1.0), (&cur, 0.7)] {
        std::fs::create_dir_all(d).unwrap();
        let sales = s["throughput"]["sales_per_s"].as_f64().unwrap();
        let mut v = s.clone();
        v["throughput"]["sales_per_s"] = (sales * factor).into();
        std::fs::write(d.join("summary.json"), v.to_string()).unwrap();
    }
    let gate = |baseline: &Path, extra: &[&str]| {
        lockbench()
            .args(["gate", "--baseline"])
            .arg(baseline)
            .arg("--current")
            .arg(&cur)
            .args(extra)
            .output()
            .unwrap()
    };
    let out = gate(&cur, &[]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let out = gate(&base, &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("FAIL mysql-atomic: median sales/s") && text.contains("-30.0%"),
        "{text}"
    );
    assert!(
        gate(&base, &["--max-throughput-drop", "35%"])
            .status
            .success()
    );
    let out = gate(&base, &["--update-baseline"]);
    assert!(out.status.success(), "{out:?}");
    assert!(base.join("baseline.json").is_file());
    // baseline.json now wins over the old summary.json in that folder.
    assert!(gate(&base, &[]).status.success());
}
