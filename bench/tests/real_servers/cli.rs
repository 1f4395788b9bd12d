//! The command line: bad input is refused naming file, field and the expected form, `list`
//! names every strategy, and `gate` fails on a regression (no servers needed); a calm run
//! keeps every library's log off the terminal (real servers); a command's summaries carry the
//! machine it measured once at its start, printed above its table.

use std::path::Path;

use crate::common::{
    assert_rejected, consensus_servers_available, lockbench, servers_available, workload_file,
};

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
            &["w.toml", "inventory.stock = 0", "an integer from 1 to"],
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
            &["--set inventory.stock=0", "an integer from 1 to"],
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
        // The sweep's knobs, checked before its first server.
        (
            &["sweep", "--strategies", "none", "--goal-width", "1"],
            &["--goal-width 1", "ratio above 1"],
        ),
        (
            &["sweep", "--strategies", "none", "--budget", "10s"],
            &["--budget 10s", "step-budget <= budget"],
        ),
        // Flags declared once for run, compare and sweep keep their conflicts in each.
        (
            &[
                "run",
                "--strategy",
                "none",
                "--target",
                "t.toml",
                "--endpoints",
                "e.json",
            ],
            &["--target", "cannot be used with", "--endpoints"],
        ),
        (
            &["sweep", "--endpoints", "e.json", "--base-port", "7000"],
            &["--endpoints", "cannot be used with", "--base-port"],
        ),
        (
            &[
                "compare",
                "--provision",
                "containers",
                "--base-port",
                "7000",
            ],
            &["--provision", "cannot be used with", "--base-port"],
        ),
    ] {
        let mut cmd = lockbench();
        cmd.args(args);
        assert_rejected(cmd, &format!("{args:?}"), needles, dir.path());
    }
}

/// A fault the strategy's lock service cannot take is refused before any server starts, also
/// when the file names no service (the fault then falls to the lock service) — and a fault it
/// can take still passes that check (the run is cut short by a bad workload after it instead).
#[test]
fn faults_the_lock_service_cannot_take_are_refused_before_any_server_starts() {
    let dir = tempfile::tempdir().unwrap();
    let chaos = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let fault = |body: &str| format!("[[fault]]\nat = \"1s\"\nduration = \"1s\"\n{body}\n");
    let cases = [
        // A clock fault on a MariaDB lock: the shim is in Redis nodes only.
        (
            "mysql-for-update",
            fault("kind = \"clock\"\ntarget = \"one\"\njump = \"-1s\""),
            &["clock.toml", "fault[0].kind", "mariadb", "Redis nodes only"][..],
        ),
        // A slot's replica on a single Redis.
        (
            "redis-setnx",
            fault("kind = \"kill\"\ntarget = \"replica\""),
            &["clock.toml", "fault[0].target", "Redis Cluster"][..],
        ),
        // A service the strategy does not run.
        (
            "redis-setnx",
            fault("kind = \"kill\"\ntarget = \"leader\"\nservice = \"etcd\""),
            &["clock.toml", "fault[0].service", "etcd", "redis"][..],
        ),
    ];
    for (strategy, text, needles) in cases {
        let file = chaos("clock.toml", &text);
        let mut cmd = lockbench();
        cmd.args(["run", "--strategy", strategy, "--chaos"])
            .arg(&file);
        assert_rejected(cmd, &format!("{strategy} {text:?}"), needles, dir.path());
    }
    // The same replica fault on a Redis Cluster strategy passes the service check: the run is
    // refused by the plan's next check instead (tcp workers need --workers), still before any
    // server starts.
    let file = chaos("ok.toml", &fault("kind = \"kill\"\ntarget = \"replica\""));
    let mut cmd = lockbench();
    cmd.args([
        "run",
        "--strategy",
        "redis-cluster-setnx",
        "--worker-link",
        "tcp",
        "--chaos",
    ])
    .arg(&file);
    assert_rejected(
        cmd,
        "cluster replica fault",
        &["--worker-link tcp needs --workers"],
        dir.path(),
    );
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
        "pg-atomic",
        "pg-for-update",
        "pg-skip-locked",
        "pg-advisory-xact",
        "pg-advisory",
        "pg-advisory-fenced",
        "pg-none",
        "mysql-atomic-no-limit",
        "mysql-atomic-not-idempotent",
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
    // How a sale's limit and request id are enforced, derived from each entry.
    assert!(line("mysql-atomic").contains("unique key (request) + holdings row"));
    assert!(line("mysql-atomic-no-limit").contains("limit not checked (control)"));
    assert!(line("zookeeper").contains("checked inside the lock"));
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

/// A `tracing` line (`<time> <LEVEL> <target>: ...`), colours stripped.
fn is_log_line(line: &str) -> bool {
    let mut plain = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            // An SGR sequence: ESC [ ... m
            chars.by_ref().find(|&c| c == 'm');
        } else {
            plain.push(c);
        }
    }
    let level = plain.split_whitespace().nth(1);
    matches!(level, Some("TRACE" | "DEBUG" | "INFO" | "WARN" | "ERROR"))
}

/// A calm compare of the strategies whose clients log the most (the ZooKeeper and etcd
/// clients, sqlx, redis) prints no log line on the terminal, neither a library's nor
/// lockbench's; each run's logs/lockbench.log holds that run's lines, and no client session
/// outlives its run into the next run's log.
#[test]
fn a_calm_run_keeps_library_logs_off_the_terminal() {
    if !consensus_servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let strategies = ["zookeeper", "etcd", "mysql-for-update", "redis-setnx"];
    let out = lockbench()
        .args(["compare", "--strategies", &strategies.join(",")])
        .args([
            "--set",
            "load.duration=2s",
            "--set",
            "load.rate=200",
            "--out",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let logged: Vec<&str> = err.lines().filter(|l| is_log_line(l)).collect();
    assert!(
        logged.is_empty(),
        "{} log lines on the terminal of a calm run, e.g.:\n{}",
        logged.len(),
        logged[..logged.len().min(5)].join("\n")
    );
    assert!(err.contains("results: "), "{err}");
    let log = |id: &str| {
        let path = dir.path().join(id).join("logs/lockbench.log");
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    };
    for id in strategies {
        let text = log(id);
        assert!(
            text.contains(&format!("load started strategy=\"{id}\"")),
            "{id}: lockbench's own events belong in its log:\n{text}"
        );
    }
    // zookeeper-client logs every session it opens and closes: in the run that used them.
    let zk = log("zookeeper");
    let zk_lines = |text: &str| {
        text.lines()
            .filter(|l| l.contains("zookeeper_client"))
            .count()
    };
    assert!(zk_lines(&zk) > 0, "{zk}");
    assert!(
        zk.contains("enter state Closed"),
        "sessions closed before the servers stopped:\n{zk}"
    );
    for id in &strategies[1..] {
        assert_eq!(zk_lines(&log(id)), 0, "{id}:\n{}", log(id));
    }
}

/// A comparison measures the machine once, before its first server starts: both runs'
/// summaries carry the same fingerprint, every probe answered with samples, the table and the
/// page name it on their first line.
#[test]
fn a_command_measures_its_machine_once_and_every_summary_carries_it() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = lockbench()
        .args(["compare", "--strategies", "redis-setnx,mysql-atomic"])
        .args([
            "--set",
            "load.duration=1s",
            "--set",
            "load.rate=100",
            "--out",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let read = |id: &str| -> lockbench::report::Summary {
        let path = dir.path().join(id).join("summary.json");
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
    };
    let (one, two) = (read("redis-setnx"), read("mysql-atomic"));
    let m = one.machine.expect("summary.json carries the machine");
    assert_eq!(
        Some(&m),
        two.machine.as_ref(),
        "one fingerprint per command"
    );
    assert!(
        m.cores >= 1 && m.usable_cores >= 1 && !m.cpu_model.is_empty(),
        "{m:?}"
    );
    assert!(
        m.cpu_score.as_ref().is_some_and(|c| c.m_per_s > 1.0),
        "{m:?}"
    );
    let disk = m.fdatasync.as_ref().expect("the temp folder takes writes");
    let l = &disk.latency;
    assert!(l.n >= 10 && l.p50_us > 0.0, "{disk:?}");
    assert!(l.p50_us <= l.p99_us && l.p99_us <= l.max_us, "{disk:?}");
    assert_eq!(disk.path, std::env::temp_dir().display().to_string());
    let lo = m.loopback.as_ref().expect("loopback answers");
    assert!(
        lo.n >= 10 && lo.p50_us > 0.0 && lo.p50_us <= lo.p99_us,
        "{lo:?}"
    );
    // About 2 s of disk, a fraction of a second for the rest; bounded however slow.
    assert!(m.probe_s > 0.0 && m.probe_s < 6.0, "{m:?}");
    let table = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = table.lines().collect();
    let at = lines.iter().position(|l| l.starts_with("machine: "));
    assert!(
        at.is_some_and(|i| lines.get(i + 1).is_some_and(|h| h.starts_with("strategy"))),
        "the machine heads the table: {table}"
    );
    let html = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
    assert!(
        html.contains("id=\"machine\">machine: "),
        "the page names it"
    );
}
