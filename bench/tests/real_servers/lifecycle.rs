//! The life of the servers around a run, through the binary: Ctrl-C and a dying server stop
//! every server and keep what was measured, `serve` keeps servers across runs, client workers
//! run the coordinator's build, a busy port or a missing server binary is reported before
//! anything starts, and a SIGKILLed run's temp folder goes at the next start.

use std::path::Path;
use std::process::{Command, Stdio};

use nix::sys::signal::Signal;

use crate::common::{
    Serve, alive, assert_all_gone, descendants, interrupt, lockbench, read_summary, run_json,
    servers_available, signal, start_long_run, start_run, succeed, summaries, wait_exit,
    workload_file,
};

#[test]
fn ctrl_c_mid_run_stops_every_server_and_keeps_the_results() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (child, servers) = start_long_run(dir.path(), "redis-setnx", 60);
    interrupt(child);
    assert_all_gone(&servers);
    let summary = read_summary(&dir.path().join("out"));
    assert!(summary.interrupted);
    assert!(summary.attempts > 0 && summary.safe, "{summary:?}");
}

#[test]
fn a_server_dying_mid_run_fails_the_run_and_stops_the_others() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // The load goes on without MariaDB (attempts fail fast); the audit at the end cannot.
    let (child, servers) = start_long_run(dir.path(), "redis-setnx", 8);
    let maria = servers.iter().find(|(_, c)| c == "mariadbd").unwrap().0;
    signal(maria, Signal::SIGKILL);
    let (code, err) = wait_exit(child);
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("run of `redis-setnx` failed"), "{err}");
    assert_all_gone(&servers);
    // What was measured before the failure is on disk.
    assert!(dir.path().join("out/timeline.csv").exists());
}

#[test]
fn serve_keeps_servers_for_runs_and_stops_them_on_ctrl_c() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start(dir.path(), "mysql-atomic,redis-lua-decr");
    let endpoints = serve.endpoints.clone();
    let servers: Vec<_> = descendants(serve.child.id())
        .into_iter()
        .filter(|(_, c)| c == "mariadbd" || c == "redis-server")
        .collect();
    // Two runs on the same servers: each recreates its stock, so both audit cleanly.
    let w = workload_file(
        dir.path(),
        "[inventory]\nstock = 30\n[load]\nduration = \"500ms\"\n",
    );
    for (i, strategy) in ["mysql-atomic", "redis-lua-decr", "mysql-atomic"]
        .iter()
        .enumerate()
    {
        let out = dir.path().join(format!("{i}-{strategy}"));
        let s = run_json(&mut serve.run(strategy, &w, &out));
        assert!(s.safe && s.audit.sold == 30, "{strategy}: {s:?}");
    }
    assert_eq!(servers.len(), 2, "{servers:?}");
    assert!(
        servers.iter().all(|(p, _)| alive(*p)),
        "runs with --endpoints must not stop the servers"
    );
    serve.stop();
    assert_all_gone(&servers);
    assert!(!endpoints.exists(), "endpoints.json left behind");
}

/// Client workers run the coordinator's own build: the binary file removed after the run
/// started (a rebuild or an upgrade does that) does not keep them from starting.
#[test]
fn workers_run_the_coordinators_build_after_its_file_is_gone() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("lockbench");
    std::fs::copy(env!("CARGO_BIN_EXE_lockbench"), &exe).unwrap();
    let child = Command::new(&exe)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap())
        .args(["run", "--json", "-s", "redis-lua-decr", "--workers", "2"])
        .args(["--set", "load.duration=1s", "--out"])
        .arg(dir.path().join("out"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Gone before the workers start: they start once the servers are up, seconds later.
    std::fs::remove_file(&exe).unwrap();
    let out = child.wait_with_output().unwrap();
    let s = summaries(&out, "a run whose binary is gone").remove(0);
    assert_eq!(s.workers, 2, "{}", String::from_utf8_lossy(&out.stderr));
    assert!(s.safe && s.audit.sold > 0, "{:?}", s.audit);
}

#[test]
fn busy_port_is_detected_before_start() {
    if !servers_available() {
        return;
    }
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port().to_string();
    let dir = tempfile::tempdir().unwrap();
    let out = lockbench()
        .args(["run", "--strategy", "redis-lua-decr"])
        .args(["--base-port", &port, "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("127.0.0.1:{port}")) && err.contains("already in use"),
        "{err}"
    );
    assert!(
        !dir.path().join("logs/redis-1.log").exists(),
        "a server was started anyway"
    );
}

#[test]
fn missing_server_binary_names_the_package() {
    let dir = tempfile::tempdir().unwrap();
    // redis-server lives in /usr/bin, which this PATH lacks (/usr/sbin is always searched).
    let out = lockbench()
        .env("PATH", dir.path())
        .args(["run", "--strategy", "redis-lua-decr", "--out"])
        .arg(dir.path().join("out"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("`redis-server` not found") && err.contains("apt-get install redis-server"),
        "{err}"
    );
}

#[test]
fn a_sigkilled_runs_temp_folder_is_removed_by_the_next_start() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    // A live owner's folder (this test's) must outlive every sweep.
    let live = tmp.join("lockbench-run-live");
    std::fs::create_dir(&live).unwrap();
    lockbench::cluster::owner::Owner::mark(&live).unwrap();
    let w = workload_file(dir.path(), "[load]\nduration = \"60s\"\nrate = 200\n");
    let out = dir.path().join("out");
    let mut child = start_run(
        lockbench()
            .env("TMPDIR", &tmp)
            .args(["run", "--strategy", "redis-setnx", "--json", "--workload"])
            .arg(&w)
            .arg("--out")
            .arg(&out),
        &out,
    );
    let runs = |tmp: &Path| -> Vec<std::path::PathBuf> {
        std::fs::read_dir(tmp)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.to_string_lossy().contains("lockbench-run-") && *p != live)
            .collect()
    };
    let folders = runs(&tmp);
    assert_eq!(folders.len(), 1, "{folders:?}");
    let servers = descendants(child.id());
    signal(child.id(), Signal::SIGKILL);
    child.wait().unwrap();
    assert_all_gone(&servers);
    assert!(
        folders[0].exists(),
        "SIGKILL leaves the folder: the test needs it there"
    );
    // Any start sweeps, even one that starts nothing.
    succeed(
        lockbench()
            .env("TMPDIR", &tmp)
            .arg("list")
            .stdout(Stdio::null()),
    );
    assert!(!folders[0].exists(), "the dead run's folder stayed");
    assert!(live.exists(), "a live owner's folder was removed");
}
