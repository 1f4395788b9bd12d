//! The real lock libraries behind their adapters (`lib:<name>`), on real servers: each is safe
//! under calm contention, reports the version it loaded, and a broken adapter fails the run
//! naming it and the offending line while keeping what was measured.

use std::path::Path;

use lockbench::check::{LockVerdict, StoreVerdict};
use lockbench::strategy::adapter::library_of;

use crate::common::{compare_json, libraries_available, lockbench, servers_available};

/// Every library strategy, fenced variants included.
pub const LIBRARIES: &str = "lib:redis-py,lib:redis-semaphore,lib:node-redlock,\
lib:node-redlock-v5,lib:curator,lib:kazoo,lib:aetcd,lib:advisory-lock,lib:example,\
lib:curator-fenced,lib:kazoo-fenced,lib:aetcd-fenced";

/// Calm: no faults, 4 SKUs, 32 buyers at 150 sales/s for 3 s on the chaos workload's 2 s
/// lease. Every library holds its lock and keeps the store intact, and says what it loaded.
#[test]
fn every_library_is_safe_under_calm_contention() {
    if !libraries_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let all = compare_json(
        LIBRARIES,
        &[
            "--workload",
            "workloads/chaos.toml",
            "--set",
            "load.duration=3s",
            "--set",
            "load.rate=150",
        ],
        dir.path(),
    );
    for s in &all {
        let id = &s.strategy;
        // aetcd, the slowest, sells ~80/s here alone; half that beside a CPU hog.
        assert!(s.audit.sold >= 50, "{id}: sold {}", s.audit.sold);
        assert_eq!(
            (s.double_grants, s.audit.oversell, s.audit.lost_updates),
            (0, 0, 0),
            "{id}"
        );
        assert_eq!(s.lock_verdict, Some(LockVerdict::Held), "{id}");
        assert_eq!(s.store_verdict, StoreVerdict::Intact, "{id}");
        assert!(s.safe, "{id}");
        let lib = s
            .library
            .as_ref()
            .unwrap_or_else(|| panic!("{id}: no library"));
        assert_eq!(
            lib.version,
            library_of(id).unwrap().version,
            "{id}: {lib:?}"
        );
        // The adapter's own word on fencing matches what `lockbench list` promises.
        let declared = lockbench::strategy::find(id).unwrap().fence_token.is_some();
        assert_eq!(lib.fencing, declared, "{id}: {lib:?}");
    }
}

/// advisory-lock's lock is its session's, with no lease: a holder stopped (its worker and its
/// adapter) for 2x the 2 s ttl after its read keeps the lock, since its connection stays open.
/// No later grant overlaps it and nothing is lost; the paused key's buyers give up instead
/// (the server's lock_timeout, the acquire timeout, ends their waits).
#[test]
fn a_paused_advisory_lock_holder_keeps_its_session_lock_and_its_key_waits() {
    if !libraries_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let all = compare_json(
        "lib:advisory-lock",
        &[
            "--workload",
            "workloads/chaos.toml",
            "--chaos",
            "chaos/pause-holder.toml",
            "--set",
            "load.duration=8s",
            "--set",
            "load.rate=150",
        ],
        dir.path(),
    );
    let s = &all[0];
    let f = &s.faults[0];
    assert!(f.nodes[0].starts_with("worker-"), "{f:?}");
    let paused = f.healed_s.unwrap() - f.started_s.unwrap();
    assert!(paused >= 3.99, "paused {paused}s: {f:?}");
    assert!(s.audit.sold > 0, "{:?}", s.audit);
    assert_eq!(
        (
            s.double_grants,
            s.audit.oversell,
            s.audit.lost_updates,
            s.lease_lost
        ),
        (0, 0, 0, 0),
        "the paused holder kept its lock: {:?}",
        s.faults
    );
    assert_eq!(s.lock_verdict, Some(LockVerdict::Held));
    assert_eq!(s.store_verdict, StoreVerdict::Intact);
    let gave_up = s.outcomes.get("lock_timeout").copied().unwrap_or(0);
    assert!(
        gave_up > 0,
        "the paused key's buyers waited: {:?}",
        s.outcomes
    );
}

/// The conformance test of the PostgreSQL library, on a PostgreSQL it starts (its password
/// reaches the adapter in PGPASSWORD only): every rule passes.
#[test]
fn advisory_lock_passes_adapter_check() {
    if !libraries_available() {
        return;
    }
    let res = lockbench()
        .args(["adapter-check", "--lib", "advisory-lock"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&res.stdout);
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(res.status.success(), "{out}\n{err}");
    assert!(
        out.contains("advisory-lock 2.0.0 (fencing: false, renews: false)"),
        "{out}"
    );
    assert!(out.contains("all 8 rules passed"), "{out}");
}

/// A folder of adapters in which `lib:example` is the protocol-breaking fixture in `mode`.
fn broken_adapters(mode: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/broken_adapter.py");
    std::fs::create_dir(dir.path().join("example")).unwrap();
    let run = dir.path().join("example/adapter.py");
    std::fs::write(
        &run,
        format!("#!/bin/sh\nexec python3 {} {mode}\n", fixture.display()),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// A `run` of `lib:example` with its adapter broken in `mode`: fails, and returns its stderr.
fn run_broken(mode: &str, out: &Path, extra: &[&str]) -> String {
    run_failing(broken_adapters(mode).path(), mode, out, extra)
}

/// A `run` of `lib:example` with the adapters in `adapters`, which must fail naming the
/// adapter; returns its stderr.
fn run_failing(adapters: &Path, what: &str, out: &Path, extra: &[&str]) -> String {
    let res = lockbench()
        .env("LOCKBENCH_ADAPTERS", adapters)
        .args(["run", "--strategy", "lib:example"])
        .args([
            "--set",
            "load.duration=3s",
            "--set",
            "load.rate=100",
            "--out",
        ])
        .arg(out)
        .args(extra)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&res.stderr).into_owned();
    assert!(!res.status.success(), "{what}: the run succeeded: {stderr}");
    assert!(
        stderr.contains("adapter lib:example"),
        "{what}: the error names the adapter: {stderr}"
    );
    stderr
}

/// Before the load: an adapter that is not there, exits at start, or speaks another protocol
/// version fails the run with its words.
#[test]
fn an_adapter_that_fails_at_start_fails_the_run_naming_it() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let e = run_broken("exit-at-start", &dir.path().join("a"), &[]);
    assert!(e.contains("exited (exit status: 3)"), "{e}");
    assert!(
        e.contains("cannot load the library (on purpose)"),
        "its stderr: {e}"
    );
    let e = run_broken("wrong-protocol", &dir.path().join("b"), &[]);
    assert!(e.contains("speaks protocol version 2"), "{e}");
    // No adapter at all where the adapters folder says.
    let empty = tempfile::tempdir().unwrap();
    let e = run_failing(empty.path(), "missing", &dir.path().join("c"), &[]);
    assert!(e.contains("not found"), "{e}");
}

/// During the load (in worker processes): a malformed line, an answer to no request, a crash
/// or silence fails the run naming the adapter and the line, after the results measured so far
/// were written.
#[test]
fn an_adapter_that_breaks_mid_run_fails_the_run_and_keeps_the_results() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (mode, says) in [
        ("malformed", "wrote a line that is not a message"),
        ("unknown-id", "which no request is waiting for"),
        ("crash-mid-run", "exited (exit status: 1)"),
        ("hang", "hung: "),
    ] {
        let out = dir.path().join(mode);
        let e = run_broken(mode, &out, &["--workers", "2"]);
        assert!(e.contains(says), "{mode}: {e}");
        assert!(e.contains("worker "), "{mode}: names the worker: {e}");
        let summary = crate::common::read_summary(&out);
        assert!(!summary.broken.is_empty(), "{mode}: summary.json says so");
        if mode != "hang" {
            assert!(summary.audit.sold > 0, "{mode}: what sold before is kept");
        }
    }
}

/// The conformance test passes the example adapter and fails each broken one, naming the rule.
#[test]
fn adapter_check_passes_the_example_and_fails_broken_adapters() {
    if !servers_available() {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let check = |cmd: &[&str]| {
        let res = lockbench()
            .args([
                "adapter-check",
                "--servers",
                "redis",
                "--init-timeout",
                "10s",
                "--",
            ])
            .args(cmd)
            .output()
            .unwrap();
        (
            res.status.code(),
            String::from_utf8_lossy(&res.stdout).into_owned(),
        )
    };
    let example = root.join("adapters/example/adapter.py");
    let (code, out) = check(&[example.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("all 8 rules passed"), "{out}");
    let fixture = root.join("bench/tests/fixtures/broken_adapter.py");
    for (mode, rule, says) in [
        ("double-grant", "mutual-exclusion", "two holders at once"),
        ("wall-clock", "mutual-exclusion", "is not CLOCK_MONOTONIC"),
        ("hang", "acquire-release", "hung: "),
        ("exit-at-start", "init", "exited"),
    ] {
        let (code, out) = check(&["python3", fixture.to_str().unwrap(), mode]);
        assert_eq!(code, Some(1), "{mode}: {out}");
        let failed = out
            .lines()
            .find(|l| l.starts_with("FAIL"))
            .unwrap_or_else(|| panic!("{mode}: no rule failed: {out}"));
        assert!(
            failed.contains(rule) && failed.contains(says),
            "{mode}: {out}"
        );
    }
}
