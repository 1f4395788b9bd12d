//! PgBouncer between the buyers and PostgreSQL (`servers.postgres_pooler`, docs/postgres.md):
//! under transaction pooling a session advisory lock follows the server connection, not the
//! buyer, and `pg-advisory` is caught broken; under session pooling it stays safe; a
//! transaction-scoped advisory lock stays held under transaction pooling. PgBouncer goes with
//! the run, also when lockbench is SIGKILLed, and is refused where lockbench cannot start it.

use std::time::Duration;

use lockbench::check::LockVerdict;
use lockbench::cluster::Provisioner;
use lockbench::report::Summary;
use nix::sys::signal::Signal;

use crate::common::{
    assert_all_gone, assert_nothing_lapsed, descendants, lockbench, measure, postgres_available,
    run_options, servers_available, signal, start_run, wait_exit, workload_file,
};

/// MariaDB (`pg-advisory`'s store), PostgreSQL and PgBouncer are installed.
fn available() -> bool {
    servers_available()
        && postgres_available()
        && crate::common::require(
            "pgbouncer (scripts/install-deps.sh)",
            std::path::Path::new("/usr/sbin/pgbouncer").exists(),
        )
}

/// Contention on one SKU by 16 buyers (transaction pooling: 4 server connections for them),
/// each holding the lock 100 ms: two holders of one key overlap by tens of milliseconds, not
/// by a scheduling hiccup, so a double grant shows beside a CPU hog; and no buyer waits on a
/// lock longer than `acquire_timeout` 2 s.
fn workload(pooler: &str) -> String {
    format!(
        "seed = 7\n\
         [inventory]\nskus = 1\nstock = 1000\n\
         [load]\nmode = \"closed\"\nclients = 16\nduration = \"4s\"\ntimeout = \"2s\"\n\
         [critical_section]\nhold = \"100ms\"\n\
         [lock]\nacquire_timeout = \"2s\"\n\
         [servers]\npostgres_pooler = \"{pooler}\"\n"
    )
}

/// The pooler is recorded: in the effective workload and on the primary's durability line.
fn assert_pooler_recorded(s: &Summary, pooler: &str) {
    assert_eq!(s.workload["servers"]["postgres_pooler"], pooler, "{s:?}");
    let pg = (s.servers.iter().find(|n| n.name == "postgres")).expect("the primary");
    let settings = &pg.durability.as_ref().expect("asked").settings;
    assert_eq!(settings.get("pooler").map(String::as_str), Some(pooler));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_advisory_lock_breaks_under_transaction_pooling() {
    if !available() {
        return;
    }
    let s = measure("pg-advisory", &workload("pgbouncer-transaction")).await;
    assert_pooler_recorded(&s, "pgbouncer-transaction");
    // The lock is granted again to whichever buyer's statement runs on the server connection
    // that holds it: overlapping holders.
    assert!(
        s.double_grants > 0,
        "no double grant under transaction pooling: {:?}",
        (s.double_grants, s.lease_lost, s.errors, &s.outcomes)
    );
    assert_eq!(s.lock_verdict, Some(LockVerdict::Broken), "{s:?}");
    assert!(!s.safe);
    let note = s.pooler_note().expect("a note on the pooler");
    assert!(note.contains("follows the server connection"), "{note}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_advisory_lock_stays_safe_under_session_pooling() {
    if !available() {
        return;
    }
    let s = measure("pg-advisory", &workload("pgbouncer-session")).await;
    assert_pooler_recorded(&s, "pgbouncer-session");
    assert!(s.audit.sold > 0, "sold nothing: {:?}", s.outcomes);
    assert!(s.safe, "{s:?}");
    assert_eq!(s.lock_verdict, Some(LockVerdict::Held));
    assert_nothing_lapsed(&s);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_transaction_advisory_lock_stays_held_under_transaction_pooling() {
    if !available() {
        return;
    }
    let s = measure("pg-advisory-xact", &workload("pgbouncer-transaction")).await;
    assert_pooler_recorded(&s, "pgbouncer-transaction");
    assert!(s.audit.sold > 0, "sold nothing: {:?}", s.outcomes);
    assert!(s.safe, "{s:?}");
    assert_eq!(s.lock_verdict, Some(LockVerdict::Held));
    assert_nothing_lapsed(&s);
}

/// PgBouncer is a child of lockbench that dies with it: a SIGKILL of lockbench (no destructor
/// runs) leaves neither it nor PostgreSQL behind.
#[test]
fn pgbouncer_goes_with_a_killed_run() {
    if !available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let text = workload("pgbouncer-transaction").replace("\"4s\"", "\"60s\"");
    let w = workload_file(dir.path(), &text);
    let out = dir.path().join("out");
    let child = start_run(
        lockbench()
            .args(["run", "--strategy", "pg-advisory", "--json", "--workload"])
            .arg(&w)
            .arg("--out")
            .arg(&out),
        &out,
    );
    let procs = descendants(child.id());
    let servers: Vec<_> = (procs.iter())
        .filter(|(_, c)| c == "pgbouncer" || c == "postgres")
        .cloned()
        .collect();
    assert!(
        servers.iter().any(|(_, c)| c == "pgbouncer"),
        "no pgbouncer under the run: {procs:?}"
    );
    std::thread::sleep(Duration::from_millis(500));
    signal(child.id(), Signal::SIGKILL);
    let _ = wait_exit(child);
    assert_all_gone(&servers);
}

/// Why `opts` cannot be planned (it must not be).
fn refusal(opts: &lockbench::run::RunOptions) -> String {
    match opts.plan() {
        Ok(_) => panic!("{} planned with a pooler it cannot have", opts.strategy),
        Err(e) => e.to_string(),
    }
}

/// Refused before anything starts, naming why: containers, and a strategy that does not
/// connect to PostgreSQL.
#[test]
fn a_pooler_is_refused_where_lockbench_cannot_put_one() {
    let dir = tempfile::tempdir().unwrap();
    let text = workload("pgbouncer-transaction");
    let mut opts = run_options("pg-advisory", &text, dir.path().join("a"));
    opts.servers.provision = Provisioner::Containers;
    let e = refusal(&opts);
    assert!(
        e.contains("servers.postgres_pooler = \"pgbouncer-transaction\"")
            && e.contains("--provision containers"),
        "{e}"
    );
    let opts = run_options("redis-setnx", &text, dir.path().join("b"));
    let e = refusal(&opts);
    assert!(e.contains("does not connect to PostgreSQL"), "{e}");
    let opts = run_options("lib:advisory-lock", &text, dir.path().join("c"));
    let e = refusal(&opts);
    assert!(
        e.contains("adapter connects to PostgreSQL on its own"),
        "{e}"
    );
}
