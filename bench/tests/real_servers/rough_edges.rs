//! A newcomer's rough edges, through the binary: the default workload runs from any folder,
//! `--out` refuses a folder that holds an earlier run unless `--force`, and a stale
//! `--endpoints` file fails at once naming the address.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::{Serve, lockbench, servers_available, summaries};

/// The binary, run from `dir` (not the checkout).
fn lockbench_in(dir: &std::path::Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_lockbench"));
    c.current_dir(dir).env_remove("RUST_LOG");
    c
}

#[test]
fn the_default_workload_runs_from_any_folder_and_out_is_not_overwritten() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let run = |extra: &[&str]| {
        lockbench_in(dir.path())
            .args([
                "run",
                "--json",
                "--strategy",
                "redis-lua-decr",
                "--out",
                "out",
            ])
            .args(["--set", "load.duration=1s", "--set", "load.rate=100"])
            .args(extra)
            .output()
            .unwrap()
    };
    let s = summaries(&run(&[]), "a run outside the checkout").remove(0);
    assert_eq!(s.workload_file, "workloads/flash-sale.toml");
    assert!(s.safe && s.audit.sold > 0, "{:?}", s.audit);
    // The same --out again: refused before any server starts, the first run intact.
    let before = std::fs::read(dir.path().join("out/summary.json")).unwrap();
    let again = run(&[]);
    let err = String::from_utf8_lossy(&again.stderr);
    assert_eq!(again.status.code(), Some(2), "{err}");
    assert!(
        err.contains("not empty") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(dir.path().join("out/summary.json")).unwrap(),
        before
    );
    summaries(&run(&["--force"]), "a forced run into the same folder");
}

#[test]
fn a_stale_endpoints_file_fails_in_seconds_naming_the_address() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // MariaDB: its client pool waited 30 s for a server that is gone.
    let serve = Serve::start(&dir.path().join("serve"), "mysql-atomic");
    let stale = dir.path().join("e.json");
    std::fs::copy(&serve.endpoints, &stale).unwrap();
    let first = serve.file()["nodes"][0]["addr"]
        .as_str()
        .unwrap()
        .to_string();
    serve.stop();
    let started = Instant::now();
    let out = lockbench()
        .args(["run", "--strategy", "mysql-atomic", "--endpoints"])
        .arg(&stale)
        .arg("--out")
        .arg(dir.path().join("out"))
        .output()
        .unwrap();
    let took = started.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&first) && err.contains("nothing answers"),
        "{err}"
    );
    // The probe gives up after 1.5 s; the bound only has to tell that from the pool's 30 s
    // wait, with room for a busy 2-core machine (2.09 s was seen beside the chaos tests).
    assert!(took < Duration::from_secs(10), "took {took:?}: {err}");
}
