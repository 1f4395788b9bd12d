//! After a server comes back, a buyer's next attempt reaches it, at any rate: a connection
//! broken while the server was down is checked and replaced before the buyer's command goes
//! out, as a real client's pool does. And a server that stays down is still reported down.

use std::path::Path;

use lockbench::record::read_history;
use lockbench::report::Summary;

use crate::common::{
    Serve, assert_faults_went_as_planned, assert_servers_gone, compare_json, lockbench,
    servers_available, workload_file,
};

const PASSWORD_ENV: &str = "LOCKBENCH_TEST_RECONNECT_PASSWORD";

/// 8 arrivals/s over 64 buyers: each buyer's connection sits idle ~8 s between its attempts,
/// so before the fix most of them first met the restarted server with a dead connection.
const LOW_RATE: [&str; 5] = [
    "inventory.stock=1000000",
    "lock.ttl=\"2s\"",
    "load.duration=\"8s\"",
    "load.rate=8",
    "load.clients=64",
];

/// (attempts started after the heal, those not served, their error kinds), from the history.
fn after_heal(dir: &Path, s: &Summary) -> (usize, usize, Vec<String>) {
    let healed_us = (s.faults[0].healed_s.unwrap() * 1e6) as u64;
    let path = dir.join(&s.strategy).join("history.jsonl");
    let lines: Vec<_> = read_history(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .map(Result::unwrap)
        .filter(|l| l.start_us > healed_us)
        .collect();
    let failed: Vec<_> = (lines.iter())
        .filter(|l| l.outcome != "sold" && l.outcome != "sold_out")
        .collect();
    let kinds = failed
        .iter()
        .map(|l| format!("{}:{:?}", l.outcome, l.error))
        .collect();
    (lines.len(), failed.len(), kinds)
}

/// Kill the Redis master and MariaDB (chaos/kill-master.toml: SIGKILL at 3 s, restart 2 s
/// later) under 8 arrivals/s: both sell again within 1 s of the heal, and no attempt started
/// after the heal fails.
#[test]
fn a_killed_server_serves_the_next_attempt_after_its_restart_at_a_low_rate() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec![
        "--workload",
        "workloads/flash-sale.toml",
        "--chaos",
        "chaos/kill-master.toml",
        "--history",
    ];
    for s in LOW_RATE {
        args.extend(["--set", s]);
    }
    let all = compare_json("redis-setnx,mysql-lock-table", &args, dir.path());
    for s in &all {
        let id = &s.strategy;
        assert_faults_went_as_planned(s);
        assert_servers_gone(s);
        let f = &s.faults[0];
        let r = f
            .recovery_s
            .unwrap_or_else(|| panic!("{id}: nothing served after the heal: {f:?} {:?}", s.phases));
        // The first arrival after the heal comes 1/8 s later on average; it is served at once.
        assert!(r <= 1.0, "{id}: served again {r} s after the heal: {f:?}");
        let (started, failed, kinds) = after_heal(dir.path(), s);
        // 8/s for the ~2.5 s left after the heal.
        assert!(started >= 5, "{id}: {started} attempts after the heal");
        assert_eq!(failed, 0, "{id}: attempts after the heal failed: {kinds:?}");
        assert!(s.phases[0].sold > 0, "{id}: {:?}", s.phases[0]);
    }
}

/// A Redis that is SIGKILLed and never restarted (the fault's heal command does nothing, as an
/// operator's restart that did not happen): the checks before sending must not hide it. Every
/// attempt after the "heal" fails with a connection error, and the run fails naming the
/// server's reason (its stuck-lock audit cannot reach Redis: no summary claims anything).
#[test]
fn a_server_that_stays_down_is_reported_down_with_its_reason() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // Servers of a `lockbench serve`, reached as a target: chaos on a target is the chaos
    // file's own commands, here a SIGKILL of its Redis at 2 s that nothing undoes at 3 s.
    let serve = Serve::start(&dir.path().join("serve"), "redis-setnx");
    let (target, pid, password) = target_of(&serve, dir.path());
    let w = workload_file(
        dir.path(),
        "[inventory]\nskus = 4\nstock = 100000\n[load]\nmode = \"open\"\nrate = 8\n\
         clients = 64\nduration = \"6s\"\ntimeout = \"1s\"\n[lock]\nttl = \"2s\"\n",
    );
    let chaos = dir.path().join("kill-for-good.toml");
    let fault = format!(
        "[[fault]]\nkind = \"command\"\nat = \"2s\"\nduration = \"1s\"\n\
         run = \"kill -KILL {pid}\"\nheal = \"true\"\n"
    );
    std::fs::write(&chaos, fault).unwrap();
    let out = dir.path().join("out");
    let res = lockbench()
        .env(PASSWORD_ENV, password)
        .args(["run", "--json", "--history", "--strategy", "redis-setnx"])
        .args([&"--target".into(), &target, &"--workload".into(), &w])
        .args([&"--chaos".into(), &chaos, &"--out".into(), &out])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(
        !res.status.success(),
        "a run on a dead Redis succeeded: {err}"
    );
    assert!(err.contains("Connection refused"), "{err}");
    let lines: Vec<_> = read_history(&out.join("history.jsonl"))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(
        lines
            .iter()
            .any(|l| l.outcome == "sold" && l.end_us < 2_000_000)
    );
    // Not one attempt after the heal served, each for the server's reason (refused).
    let after: Vec<_> = lines.iter().filter(|l| l.start_us > 3_000_000).collect();
    assert!(after.len() >= 10, "{} attempts after the heal", after.len());
    for l in after {
        assert_eq!(l.outcome, "error", "{l:?}");
        assert_eq!(l.error.as_deref(), Some("connection"), "{l:?}");
    }
    drop(serve); // its Redis is gone already: the rest is stopped
}

/// A target file naming `serve`'s MariaDB and Redis; the Redis pid, the MariaDB password.
fn target_of(serve: &Serve, dir: &Path) -> (std::path::PathBuf, u64, String) {
    let file = serve.file();
    let ep = &file["endpoints"];
    let redis = (file["nodes"].as_array().unwrap().iter())
        .find(|n| n["service"] == "redis")
        .unwrap_or_else(|| panic!("no Redis node: {file}"));
    let target = dir.join("target.toml");
    let text = format!(
        "prefix = \"lbdown\"\n[mysql]\ndsn = \"mysql://{}@{}/{}\"\n\
         password_env = \"{PASSWORD_ENV}\"\n[redis]\nnodes = [{}]\n",
        ep["mysql"]["user"].as_str().unwrap(),
        ep["mysql"]["addr"].as_str().unwrap(),
        ep["mysql"]["database"].as_str().unwrap(),
        ep["redis"][0],
    );
    std::fs::write(&target, text).unwrap();
    let password = file["mysql_password"].as_str().unwrap().to_string();
    (target, redis["pid"].as_u64().unwrap(), password)
}
