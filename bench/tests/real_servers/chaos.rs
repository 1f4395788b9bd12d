//! Chaos on real servers, through the binary: faults start and heal on schedule, the broken
//! strategies are caught in their trigger scenario, the fenced ones are seen safe, sales resume
//! after every server fault, and nothing stays paused or running when a run is interrupted.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use lockbench::check::{LockVerdict, StoreVerdict};
use lockbench::report::Summary;

mod network;
mod postgres;

use crate::common::{
    START_BOUND, assert_all_gone, assert_faults_went_as_planned, assert_networks_gone,
    assert_rejected, assert_servers_gone, compare_json, consensus_servers_available, descendants,
    interrupt, lockbench, read_summary, require, servers_available, stop,
};

/// `lockbench compare` over `strategies` on workloads/chaos.toml with `chaos`, `sets` as
/// `--set`s: every run must succeed, its faults go as planned, and no server outlive it.
fn compare(dir: &Path, strategies: &str, chaos: &str, sets: &[&str]) -> Vec<Summary> {
    let mut args = vec!["--workload", "workloads/chaos.toml", "--chaos", chaos];
    for s in sets {
        args.extend(["--set", s]);
    }
    let all = compare_json(strategies, &args, dir);
    for s in &all {
        assert_faults_went_as_planned(s);
        assert_servers_gone(s);
    }
    all
}

/// What a failed pause assertion prints: the fault, each phase's attempts, sales and lock
/// timeouts, and what the checker saw (a lock that livelocked under the pile-up on the paused
/// key reads as lock timeouts during the pause, not as a missing fault).
fn pause_evidence(s: &Summary) -> String {
    let phases: Vec<String> = (s.phases.iter())
        .map(|p| {
            format!(
                "{} {:.2}-{:.2}s: {} attempts, {} sold, {} lock timeouts, {} errors",
                p.name, p.from_s, p.to_s, p.attempts, p.sold, p.lock_timeouts, p.errors
            )
        })
        .collect();
    format!(
        "faults {:?}; phases [{}]; double grants {} (incidents {}, within clock uncertainty {}), \
         leases lost {}, lost updates {}, outcomes {:?}",
        s.faults,
        phases.join("; "),
        s.double_grants,
        s.double_grant_incidents,
        s.within_clock_uncertainty,
        s.lease_lost,
        s.audit.lost_updates,
        s.outcomes
    )
}

fn by_id<'a>(all: &'a [Summary], id: &str) -> &'a Summary {
    all.iter().find(|s| s.strategy == id).unwrap()
}

/// Every unfenced lock whose lease expires under a paused holder.
const UNFENCED_EXPIRING: &str =
    "redis-setnx,redis-setnx-watchdog,redis-reentrant,redlock,etcd,zookeeper,mysql-lock-table";
/// Their fenced variants.
const FENCED: &str = "redis-setnx-fenced,mysql-lock-table-fenced,etcd-fenced,zookeeper-fenced";

/// Kleppmann's pause on chaos/pause-holder.toml: a holder stops for 2x the lease between its
/// read of the stock and its write; the checks every run shares.
fn pause_holder(dir: &Path, strategies: &str) -> Vec<Summary> {
    let all = compare(
        dir,
        strategies,
        "chaos/pause-holder.toml",
        &["load.duration=8s", "load.rate=200"],
    );
    for s in &all {
        let id = &s.strategy;
        assert_eq!(s.workers, 4, "{id}: clients ran in worker processes");
        let f = &s.faults[0];
        assert_eq!(f.nodes.len(), 1, "{f:?}");
        assert!(f.nodes[0].starts_with("worker-"), "{f:?}");
        assert_eq!(f.plan["point"], "after-read", "{id}: the default point");
        // The pause really lasted 2x the 2 s ttl (both ends are rounded to the ms); a busy
        // machine may heal late, but not as late as 3x.
        let paused = f.healed_s.unwrap() - f.started_s.unwrap();
        assert!((3.99..5.5).contains(&paused), "{id}: paused {paused}s");
        assert!(s.audit.sold > 0, "{id}");
        // The lease lapsed under the holder: a later grant overlapped it, and the holder
        // found it lost when it released.
        assert!(
            s.double_grant_incidents > 0 && s.lease_lost > 0,
            "{id}: the lease lapsed during the pause, yet incidents {} / leases lost {}: {}",
            s.double_grant_incidents,
            s.lease_lost,
            pause_evidence(s)
        );
        assert!(!s.safe, "{id}: a lock that broke is never `safe`");
    }
    all
}

/// Paused after its read, the holder writes a stock value from before another holder's sale:
/// every unfenced expiring lock loses an update — in every run, not by luck — and its lock
/// reads BROKEN.
#[test]
fn pause_after_read_breaks_every_unfenced_expiring_lock_and_loses_an_update() {
    if !consensus_servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for s in pause_holder(dir.path(), UNFENCED_EXPIRING) {
        let id = &s.strategy;
        assert!(
            s.audit.lost_updates > 0,
            "{id}: the resumed holder's blind write should have lost an update: {:?}",
            s.audit
        );
        assert_eq!(s.lock_verdict, Some(LockVerdict::Broken), "{id}");
        assert_eq!(s.store_verdict, StoreVerdict::Corrupted, "{id}");
        assert_eq!(s.headline(), "UNSAFE", "{id}");
    }
}

/// The same pause against the fenced variants: the resumed holder's write is refused every
/// time, the store stays intact, and the lock reads "broken, fenced" — never `safe`.
#[test]
fn pause_after_read_is_refused_by_every_fenced_store() {
    if !consensus_servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for s in pause_holder(dir.path(), FENCED) {
        let id = &s.strategy;
        assert_eq!(
            (s.audit.oversell, s.audit.lost_updates),
            (0, 0),
            "{id}: the store must refuse the stale holder"
        );
        assert!(
            s.stale_rejected > 0,
            "{id}: the resumed holder's write should have been refused"
        );
        assert_eq!(s.lock_verdict, Some(LockVerdict::BrokenFenced), "{id}");
        assert_eq!(s.store_verdict, StoreVerdict::Intact, "{id}");
        assert_eq!(s.headline(), "fenced", "{id}");
    }
}

/// The same pause against the locks a transaction holds (the row lock; PostgreSQL's
/// transaction-scoped advisory lock): the paused holder's connection stays open, so the server
/// keeps its lock through the pause. The pause really happens (the hook sits where the lock
/// and the read are one call), no later grant overlaps it, the other buyers of that SKU wait
/// and give up at the lock timeout, and the store stays intact: held, and now for a reason.
#[test]
fn a_paused_holder_of_a_transactions_lock_keeps_it_and_the_others_give_up() {
    if !servers_available() || !crate::common::postgres_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let all = compare(
        dir.path(),
        "mysql-for-update,pg-for-update,pg-advisory-xact",
        "chaos/pause-holder.toml",
        &["load.duration=8s", "load.rate=200"],
    );
    for s in &all {
        let id = &s.strategy;
        let f = &s.faults[0];
        assert!(f.nodes[0].starts_with("worker-"), "{id}: {f:?}");
        let paused = f.healed_s.zip(f.started_s).map(|(h, b)| h - b);
        assert!(
            paused.is_some_and(|p| (3.99..5.5).contains(&p)),
            "{id}: the holder was not paused for 2x the ttl: {f:?}"
        );
        assert_eq!(
            (s.double_grant_incidents, s.lease_lost),
            (0, 0),
            "{id}: the server kept the lock through the pause"
        );
        assert_eq!((s.audit.oversell, s.audit.lost_updates), (0, 0), "{id}");
        assert!(
            s.outcomes.get("lock_timeout").copied().unwrap_or(0) > 0,
            "{id}: the paused SKU's other buyers should have waited out the lock timeout: {:?}",
            s.outcomes
        );
        assert_eq!(s.lock_verdict, Some(LockVerdict::Held), "{id}");
        assert_eq!(s.store_verdict, StoreVerdict::Intact, "{id}");
        assert!(s.safe, "{id}");
    }
}

/// Redlock's clock assumption: the wall clocks of 3 of the 5 nodes jump forward past the ttl,
/// the lock keys on that majority expire under their holder, and a second client acquires a
/// majority while the first is still in its critical section.
#[test]
fn clock_jump_on_a_redlock_majority_double_grants() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // The shipped scenario, three times over: each jump catches the holder of the one SKU
    // inside its 50 ms critical section unless it lands in the few ms between two holders.
    let plan = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../chaos/clock-jump.toml"),
    )
    .unwrap();
    let at = |t: &str| plan.replace("at = \"3s\"", &format!("at = \"{t}\""));
    let three = format!(
        "{}\n{}\n{}",
        at("2s"),
        at("4s")
            .split("[[fault]]")
            .nth(1)
            .map(|f| format!("[[fault]]{f}"))
            .unwrap(),
        at("6s")
            .split("[[fault]]")
            .nth(1)
            .map(|f| format!("[[fault]]{f}"))
            .unwrap(),
    );
    // The plan beside the results folder, not in it: a run refuses a folder that holds files.
    let plans = tempfile::tempdir().unwrap();
    let chaos = plans.path().join("three-jumps.toml");
    std::fs::write(
        &chaos,
        three.replace("duration = \"2s\"", "duration = \"1s\""),
    )
    .unwrap();
    let all = compare(
        dir.path(),
        "redlock",
        chaos.to_str().unwrap(),
        &[
            "load.duration=8s",
            "inventory.skus=1",
            "critical_section.hold=\"50ms\"",
        ],
    );
    let s = &all[0];
    assert_eq!(s.faults.len(), 3, "{:?}", s.faults);
    for f in &s.faults {
        assert_eq!(f.nodes.len(), 3, "a majority of 5: {f:?}");
    }
    assert!(
        s.double_grants > 0,
        "keys expired early on 3 of 5 nodes, three times, yet no double grant: {:?}",
        s.faults
    );
    // After the clocks were set back, sales went on.
    assert!(s.phases[6].sold > 0, "{:?}", s.phases[6]);
}

/// Kill the node that decides (MariaDB, the Redis master, a Redlock node, the ZooKeeper / etcd
/// leader), restart it 2 s later: every strategy sells again and reports its recovery time.
#[test]
fn kill_leader_every_lock_service_recovers() {
    if !consensus_servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let all = compare(
        dir.path(),
        "mysql-for-update,redis-setnx,redis-sentinel,redlock,etcd,zookeeper",
        "chaos/kill-master.toml",
        // Below etcd's saturation, and 6 s after the restart: with leases that outlive the
        // leader's death, etcd took up to 3 s to sell again on a busy machine.
        &["load.duration=11s", "load.rate=100"],
    );
    for s in &all {
        let id = &s.strategy;
        let f = &s.faults[0];
        assert_eq!(f.nodes.len(), 1, "{id}: {f:?}");
        // Reported, not bounded: how long is what the comparison is for (etcd needs seconds
        // when waiters' leases could not be revoked while the leader was down).
        assert!(
            f.recovery_s.is_some(),
            "{id}: never sold again after the restart: {f:?} {:?}",
            s.phases
        );
        let after = &s.phases[2];
        assert!(after.sold > 0, "{id}: {after:?}");
        assert!(s.phases[0].sold > 0, "{id}: {:?}", s.phases[0]);
        if s.claims_safety && id != "redis-setnx" && id != "redis-sentinel" {
            // Locks whose state survives the restart stay exclusive.
            assert_eq!(s.audit.oversell, 0, "{id}");
        }
    }
}

/// SIGSTOP of a server: clients time out while it is stopped, and sell again after SIGCONT.
#[test]
fn pause_server_heals_and_sales_resume() {
    if !consensus_servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let all = compare(
        dir.path(),
        "redis-setnx,etcd",
        "chaos/pause-server.toml",
        // As for kill: below saturation, 4.5 s after the heal.
        &["load.duration=9s", "load.rate=100"],
    );
    for s in &all {
        let f = &s.faults[0];
        assert!(f.recovery_s.is_some(), "{}: {f:?}", s.strategy);
        assert!(s.phases[2].sold > 0, "{}: {:?}", s.strategy, s.phases);
    }
    // The paused Redis answered nothing: its phase shows it.
    let redis = by_id(&all, "redis-setnx");
    assert!(
        redis.phases[1].sales_per_s < redis.phases[0].sales_per_s / 2.0,
        "{:?}",
        redis.phases
    );
}

/// A paused ZooKeeper leader, once resumed and before it learns it was deposed, can answer a
/// client's reconnect with "session expired" while the new quorum keeps that session, and its
/// lock nodes, for a whole session timeout. The lock deletes such nodes itself (Curator's
/// guaranteed delete): no waiter gives up behind one after the heal.
#[test]
fn pause_server_leaves_no_zookeeper_waiter_behind_an_orphaned_node() {
    if !consensus_servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let all = compare(
        dir.path(),
        "zookeeper",
        "chaos/pause-server.toml",
        &["load.duration=9s", "load.rate=100"],
    );
    let phases = &all[0].phases;
    assert!(phases[2].sold > 0, "{phases:?}");
    // An orphaned node holds its SKU's lock for a session timeout (lock.ttl, 5 s): one attempt
    // in four more (one SKU of 4) would time out after the heal than before the fault. A busy
    // machine times some out anyway, before the fault as after it (14 of 176 before, 6 of 508
    // after in a full suite, Nov 25, 2026; 53 % before and 23 % after with three tests at once,
    // Nov 27), so the bound is the share before the fault plus 10 points.
    let share = |k: usize| phases[k].lock_timeouts as f64 / phases[k].attempts.max(1) as f64;
    let (before, after) = (share(0), share(2));
    assert!(
        after < before + 0.1,
        "{after:.3} of attempts after the heal timed out, {before:.3} before the fault: {phases:?}"
    );
}

/// Running as root (partition faults need CAP_NET_ADMIN; CI runs the suite as root); through
/// [`require`].
pub(super) fn root() -> bool {
    require(
        "root (partition faults need CAP_NET_ADMIN)",
        nix::unistd::geteuid().is_root(),
    )
}

/// The master's host is cut off from the other Sentinel hosts and from half of the clients:
/// Sentinel promotes a replica, the old master keeps granting locks to the clients that still
/// reach it, and two clients hold one lock. The same partition of the etcd leader sells
/// nothing twice.
#[test]
fn partition_master_splits_the_sentinel_brain_and_etcd_stays_safe() {
    if !consensus_servers_available() || !root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let all = compare(
        dir.path(),
        "redis-sentinel,etcd",
        "chaos/partition-master.toml",
        // A 5 ms poll (not redis-py's 100 ms default) keeps both sides of the split asking for
        // the lock often enough that the old master's grant meets the new one's even beside
        // CPU hogs; etcd queues server-side and ignores it.
        &["load.rate=200", "lock.poll_interval=5ms"],
    );
    for s in &all {
        let f = &s.faults[0];
        assert!(
            f.nodes.contains(&"cut from worker-2".to_string()),
            "{}: {f:?}",
            s.strategy
        );
    }
    let sentinel = by_id(&all, "redis-sentinel");
    assert!(
        sentinel.double_grants > 0 || sentinel.audit.oversell > 0,
        "two masters for 5 s, yet one lock holder at a time: {:?}",
        sentinel.faults
    );
    let etcd = by_id(&all, "etcd");
    assert_eq!(
        (
            etcd.audit.oversell,
            etcd.audit.lost_updates,
            etcd.double_grants
        ),
        (0, 0, 0),
        "a leader without a majority cannot grant"
    );
    assert_networks_gone(&all);
}

/// `S` (sleeping), `R` ... or `T` (stopped) from /proc/PID/stat.
fn state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.chars().next()
}

/// Ctrl-C while a server and a client worker are both stopped and the Redis host is cut off:
/// the run heals all three, writes its summary (with the heal times) and leaves no process,
/// namespace or interface behind.
#[test]
fn interrupted_mid_fault_heals_everything() {
    if !servers_available() || !root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let chaos = dir.path().join("both.toml");
    std::fs::write(
        &chaos,
        "[[fault]]\nkind = \"pause\"\ntarget = \"holder\"\nat = \"1s\"\nduration = \"60s\"\n\
         [[fault]]\nkind = \"pause\"\ntarget = \"master\"\nservice = \"mariadb\"\nat = \"1500ms\"\n\
         duration = \"60s\"\n\
         [[fault]]\nkind = \"partition\"\ntarget = \"one\"\nat = \"1s\"\nduration = \"60s\"\n",
    )
    .unwrap();
    let mut child = lockbench()
        .args(["run", "--json", "--strategy", "redis-setnx"])
        .args([
            "--workload",
            "workloads/chaos.toml",
            "--set",
            "load.duration=90s",
        ])
        .arg("--chaos")
        .arg(&chaos)
        .arg("--out")
        .arg(dir.path().join("out"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + START_BOUND;
    let procs = loop {
        let procs = descendants(child.id());
        let stopped: Vec<_> = procs
            .iter()
            .filter(|(p, _)| state(*p) == Some('T'))
            .collect();
        // A worker (lockbench) and MariaDB stopped.
        if stopped.iter().any(|(_, c)| c == "lockbench")
            && stopped.iter().any(|(_, c)| c == "mariadbd")
        {
            break procs;
        }
        if Instant::now() > deadline {
            stop(&mut child);
            panic!("the faults never took effect: {procs:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    interrupt(child);
    assert_all_gone(&procs);
    let summary = read_summary(&dir.path().join("out"));
    assert!(summary.interrupted);
    assert_eq!(summary.faults.len(), 3, "{:?}", summary.faults);
    assert_networks_gone(std::slice::from_ref(&summary));
    for f in &summary.faults {
        let (start, heal) = (f.started_s.unwrap(), f.healed_s.unwrap());
        assert!(
            heal < start + 30.0,
            "healed at the interrupt, not at the planned end: {f:?}"
        );
    }
}

#[test]
fn bad_chaos_input_exits_non_zero_naming_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path().join("c.toml");
    let cases: &[(&str, &[&str], &[&str])] = &[
        (
            "[[fault]]\nkind = \"explode\"\ntarget = \"one\"\nat = \"1s\"\nduration = \"1s\"",
            &[],
            &["c.toml", "fault[0].kind = \"explode\"", "\"kill\""],
        ),
        (
            "[[fault]]\nkind = \"pause\"\ntarget = \"holder\"\nat = \"1s\"\nduration = \"3 ttls\"",
            &[],
            &["c.toml", "fault[0].duration", "3x ttl"],
        ),
        (
            "[[fault]]\nkind = \"kill\"\ntarget = \"one\"\nat = \"1s\"\nduration = \"1s\"",
            &["--endpoints", "endpoints.json"],
            &["--chaos with --endpoints"],
        ),
        (
            "[[fault]]\nkind = \"loss\"\ntarget = \"one\"\nat = \"1s\"\nduration = \"1s\"\n\
             loss = 1.5",
            &[],
            &["c.toml", "fault[0].loss = 1.5", "(0, 1]"],
        ),
        // Refused before any server (or Docker daemon) starts: named file, field, way out.
        (
            "[[fault]]\nkind = \"delay\"\ntarget = \"one\"\nat = \"1s\"\nduration = \"1s\"\n\
             delay = \"100ms\"",
            &["--provision", "containers"],
            &["c.toml", "fault[0].kind = \"delay\"", "--provision local"],
        ),
    ];
    for (text, extra, needles) in cases {
        std::fs::write(&c, text).unwrap();
        let mut cmd = lockbench();
        cmd.args(["run", "--strategy", "redis-setnx", "--chaos"])
            .arg(&c)
            .args(*extra);
        assert_rejected(cmd, text, needles, dir.path());
    }
    let mut cmd = lockbench();
    cmd.args(["run", "--strategy", "none", "--chaos", "no/such.toml"]);
    assert_rejected(
        cmd,
        "missing file",
        &["no/such.toml", "cannot read"],
        dir.path(),
    );
}

/// Every shipped chaos file parses against the workloads it is meant for.
#[test]
fn shipped_chaos_files_are_valid() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let load = |f: &str| lockbench::workload::Workload::load(&root.join(f), &[]).unwrap();
    let (w, pay) = (
        load("workloads/chaos.toml"),
        load("workloads/sale-pay.toml"),
    );
    let mut n = 0;
    for entry in std::fs::read_dir(root.join("chaos")).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|e| e == "toml") {
            // The reapers' pause needs reservations that expire.
            let w = if p.ends_with("pause-reaper.toml") {
                &pay
            } else {
                &w
            };
            let plan = lockbench::chaos::ChaosPlan::load(&p, w)
                .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            assert!(
                !plan.description.is_empty(),
                "{}: say what it shows",
                p.display()
            );
            n += 1;
        }
    }
    assert!(n >= 5, "only {n} chaos files");
}

/// A SIGKILLed run cannot remove its network; the next run that makes one removes it (the
/// bridge's alias names the owner, and that pid is gone). A live owner's network stays.
#[test]
fn the_network_of_a_killed_run_is_removed_by_the_next() {
    if !root() {
        return;
    }
    use lockbench::cluster::net::Network;
    let ip = |args: &[&str]| {
        let ok = std::process::Command::new("ip").args(args).status();
        assert!(ok.unwrap().success(), "ip {args:?}");
    };
    let exists = |path: String| Path::new(&path).exists();
    let dead = {
        let mut c = std::process::Command::new("true").spawn().unwrap();
        c.wait().unwrap();
        c.id()
    };
    // Leftovers as a killed run leaves them: a marked bridge, a namespace, a veth pair.
    let free: Vec<String> = (0..250)
        .rev()
        .map(|k| format!("lbk{k}"))
        .filter(|b| !exists(format!("/sys/class/net/{b}")))
        .take(2)
        .collect();
    let (stale, live) = (&free[0], &free[1]);
    for (b, pid) in [(stale, dead), (live, std::process::id())] {
        ip(&["link", "add", b, "type", "bridge"]);
        ip(&["link", "set", b, "alias", &format!("lockbench pid={pid}")]);
        ip(&["netns", "add", &format!("{b}-1")]);
        ip(&[
            "link",
            "add",
            &format!("{b}v1"),
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            &format!("{b}-1"),
        ]);
    }
    let net = Network::create().unwrap();
    for gone in [
        format!("/sys/class/net/{stale}"),
        format!("/sys/class/net/{stale}v1"),
        format!("/run/netns/{stale}-1"),
    ] {
        assert!(!exists(gone.clone()), "{gone} left behind");
    }
    assert!(
        exists(format!("/run/netns/{live}-1")),
        "a live run's network was removed"
    );
    let own = net.servers[0].netns.clone();
    drop(net);
    assert!(!exists(format!("/run/netns/{own}")));
    ip(&["netns", "del", &format!("{live}-1")]);
    ip(&["link", "del", live]);
}

/// Every library whose lease expires under a stopped holder (its adapter stops with it).
const LIBRARIES_UNFENCED: &str = "lib:redis-py,lib:redis-semaphore,lib:node-redlock,\
lib:node-redlock-v5,lib:curator,lib:kazoo,lib:aetcd,lib:example";
/// The libraries whose grants carry a fencing token, fenced.
const LIBRARIES_FENCED: &str = "lib:curator-fenced,lib:kazoo-fenced,lib:aetcd-fenced";

/// pause-holder on the real libraries: the holder's worker process and its adapter stop
/// together for 3x the lease after the read. Every unfenced library's lock reads BROKEN (a
/// later grant overlapped the stopped holder, whatever the library told it); the fenced ones
/// keep the store intact. Whether a library told its holder (`lease lost`) is the library's own
/// property, reported, not asserted.
#[test]
fn pause_after_read_breaks_every_unfenced_library_and_fenced_ones_keep_the_store() {
    if !crate::common::libraries_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let strategies = format!("{LIBRARIES_UNFENCED},{LIBRARIES_FENCED}");
    // The shipped scenario with a 3x pause from 2 s: in one CI run (eleven runs, JVMs among
    // them, on a busy 2-core machine) Curator saw no other holder within a 2x pause (no sale
    // for 4.3 s, 4 s of it paused), so there was nothing to judge; 3x leaves 4 s after the
    // lease. 8 buyers, not 32: with 32, every buyer of the other workers piles up on the paused
    // key within a second, and Redlock's split votes among them can grant nobody for seconds
    // (node-redlock-v5 once sold nothing on that key for the whole pause in CI; locally 2 of
    // 103 attempts sold there, against 117-133 sold with 8 buyers, beside two CPU hogs).
    let plan = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../chaos/pause-holder.toml"),
    )
    .unwrap();
    for shipped in ["duration = \"2x ttl\"", "at = \"3s\""] {
        assert!(
            plan.contains(shipped),
            "the shipped plan changed: {shipped}"
        );
    }
    let plans = tempfile::tempdir().unwrap();
    let plan_file = plans.path().join("pause-holder-3x.toml");
    let plan = (plan.replace("\"2x ttl\"", "\"3x ttl\"")).replace("at = \"3s\"", "at = \"2s\"");
    std::fs::write(&plan_file, plan).unwrap();
    let all = compare(
        dir.path(),
        &strategies,
        plan_file.to_str().unwrap(),
        &["load.duration=9s", "load.rate=150", "load.clients=8"],
    );
    for s in &all {
        let id = &s.strategy;
        let f = &s.faults[0];
        assert!(f.nodes[0].starts_with("worker-"), "{id}: {f:?}");
        assert!(s.audit.sold > 0, "{id}");
        assert!(
            s.double_grant_incidents > 0,
            "{id}: the holder was stopped for 3x the lease, yet no later grant overlapped it: {}",
            pause_evidence(s)
        );
        if id.ends_with("-fenced") {
            assert_eq!((s.audit.oversell, s.audit.lost_updates), (0, 0), "{id}");
            assert!(s.stale_rejected > 0, "{id}: the stale write was refused");
            assert_eq!(s.lock_verdict, Some(LockVerdict::BrokenFenced), "{id}");
            assert_eq!(s.store_verdict, StoreVerdict::Intact, "{id}");
        } else {
            assert_eq!(s.lock_verdict, Some(LockVerdict::Broken), "{id}");
            assert!(
                s.audit.lost_updates > 0,
                "{id}: the resumed holder's blind write loses an update: {:?}",
                s.audit
            );
        }
        assert!(!s.safe, "{id}");
    }
}

/// Kill the master of SKU 0's Redis Cluster slot: its replica is promoted (the promotion time
/// is recorded) and sales resume before the killed node comes back.
#[test]
fn killing_a_cluster_slot_master_promotes_its_replica_and_sales_resume() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let all = compare(
        dir.path(),
        "redis-cluster-setnx",
        "chaos/kill-cluster-master.toml",
        &["load.duration=10s", "load.rate=100"],
    );
    let s = &all[0];
    let f = &s.faults[0];
    assert_eq!(f.nodes.len(), 1, "{f:?}");
    let promoted = f.promotion_s.expect("the replica was never seen promoted");
    // cluster-node-timeout is 1 s; the 5 s kill leaves room for the election.
    assert!(promoted > 0.5 && promoted < 5.0, "{f:?}");
    // Sales resumed during the fault, after the promotion, not only after the restart.
    assert!(s.phases[1].sold > 0, "{:?}", s.phases[1]);
    assert!(s.phases[2].sold > 0, "{:?}", s.phases[2]);
}

/// chaos/cluster-lost-lock.toml: the slot's replica is cut off, a holder stops with the lock,
/// the master dies, and the replica is promoted without the lock. redis-cluster-setnx grants
/// it again while the old holder holds it (caught: BROKEN); with WAIT 1 no lock that a replica
/// lacks is granted (held); redis-cluster-lua-decr loses acknowledged sales whole (store
/// CORRUPTED by `lost_sales`, every SKU consistent). Every fault healed, every network removed.
#[test]
fn a_lock_lost_in_a_cluster_failover_is_caught_and_wait_keeps_it() {
    if !servers_available() || !root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // The scenario needs a buyer to stop holding the lock before the kill at 3 s. On a loaded
    // machine (CI runs tests side by side) no buyer of the armed worker may reach its write
    // until after the promotion (seen once: the holder stopped at 6.0 s, on the new master):
    // then the scenario did not happen, and another seed runs it again (at most 3).
    let mut all = Vec::new();
    for seed in ["7", "8", "9"] {
        let seed = format!("seed={seed}");
        let args = [
            "--workload",
            "workloads/chaos.toml",
            "--chaos",
            "chaos/cluster-lost-lock.toml",
            "--set",
            "inventory.skus=1",
            "--set",
            "lock.ttl=\"6s\"",
            "--set",
            "load.duration=11s",
            "--set",
            &seed,
        ];
        let out = dir.path().join(&seed);
        all = compare_json(
            "redis-cluster-setnx,redis-cluster-setnx-wait,redis-cluster-lua-decr",
            &args,
            &out,
        );
        let f = &by_id(&all, "redis-cluster-setnx").faults;
        let (pause, kill) = (f[1].started_s, f[2].started_s);
        if pause.zip(kill).is_some_and(|(p, k)| p < k) {
            break;
        }
        eprintln!("{seed}: the holder stopped at {pause:?} s, not before the kill at {kill:?} s");
    }
    let f = &by_id(&all, "redis-cluster-setnx").faults;
    assert!(
        f[1].started_s
            .zip(f[2].started_s)
            .is_some_and(|(p, k)| p < k),
        "in 3 seeds no holder stopped before the kill: {f:?}"
    );
    for s in &all {
        assert_servers_gone(s);
        for f in &s.faults {
            // With WAIT no lock is granted from the cut to the end of the load, and the
            // lock-free decrement takes none, so the armed holder pause may find no holder;
            // every server fault started and healed.
            let no_holder = f
                .note
                .as_deref()
                .is_some_and(|n| n.contains("acquired no lock"));
            if f.label == "pause holder" && s.strategy != "redis-cluster-setnx" && no_holder {
                continue;
            }
            assert!(f.note.is_none(), "{}: {f:?}", s.strategy);
            assert!(f.healed_s.is_some(), "{}: {f:?}", s.strategy);
        }
    }
    let plain = by_id(&all, "redis-cluster-setnx");
    assert_eq!(
        plain.lock_verdict,
        Some(LockVerdict::Broken),
        "the lost lock was not caught: {:?}",
        plain.faults
    );
    assert!(plain.double_grants > 0 || plain.lease_lost > 0);
    assert!(plain.faults[2].promotion_s.is_some(), "{:?}", plain.faults);
    let wait = by_id(&all, "redis-cluster-setnx-wait");
    assert_eq!(
        wait.lock_verdict,
        Some(LockVerdict::Held),
        "{:?}",
        wait.faults
    );
    assert_eq!((wait.audit.oversell, wait.audit.lost_updates), (0, 0));
    // The decrements and orders the replica never received are lost together: every SKU still
    // adds up, and only the sales buyers were told of reveal the loss (seen: 592 of 2035).
    let decr = by_id(&all, "redis-cluster-lua-decr");
    assert_eq!(decr.audit.inconsistent_skus, 0, "{:?}", decr.audit);
    assert!(decr.audit.lost_sales > 0, "{:?}", decr.audit);
    assert_eq!(decr.store_verdict, StoreVerdict::Corrupted);
    assert_networks_gone(&all);
}
