//! Integration tests against real servers (MariaDB, Redis, a ZooKeeper ensemble and an etcd
//! cluster, all started by the harness).
//!
//! They never skip silently: without the server packages they fail when `CI` is set and print
//! why they skipped otherwise.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lockbench::report::Summary;
use lockbench::run::{RunOptions, run};
use lockbench::workload::Workload;
use tokio_util::sync::CancellationToken;

fn installed(bin: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .any(|d| d.join(bin).is_file())
}

/// True if the servers are installed; panics in CI when they are not.
fn servers_available() -> bool {
    let missing: Vec<&str> = ["redis-server", "mariadbd", "mariadb-install-db"]
        .into_iter()
        .filter(|b| !installed(b))
        .collect();
    if missing.is_empty() {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!("CI is set but {missing:?} are not installed: run scripts/install-deps.sh");
    }
    eprintln!("SKIPPED: {missing:?} not installed (run scripts/install-deps.sh)");
    false
}

/// True if ZooKeeper (its jar and a JDK) and etcd are installed, besides MariaDB and Redis;
/// panics in CI when they are not.
fn consensus_servers_available() -> bool {
    if !servers_available() {
        return false;
    }
    let mut missing: Vec<&str> = ["etcd", "java"]
        .into_iter()
        .filter(|b| !installed(b))
        .collect();
    if !Path::new("/usr/share/java/zookeeper.jar").is_file() {
        missing.push("/usr/share/java/zookeeper.jar");
    }
    if missing.is_empty() {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!("CI is set but {missing:?} are not installed: run scripts/install-deps.sh");
    }
    eprintln!("SKIPPED: {missing:?} not installed (run scripts/install-deps.sh)");
    false
}

/// The contention scenario of the foundation tests: one SKU, 20 units, 32 buyers in a closed
/// loop, 2 ms between read and write. Demand far exceeds supply.
const CONTENTION: &str = r#"
seed = 11
[inventory]
skus = 1
stock = 20
[load]
mode = "closed"
clients = 32
duration = "1500ms"
max_attempts = 20000
timeout = "2s"
[critical_section]
hold = "2ms"
[lock]
ttl = "5s"
acquire_timeout = "3s"
"#;

async fn run_strategy(strategy: &str, workload: &str, dir: &Path) -> Summary {
    let w = Workload::parse("contention.toml", workload, &[]).expect("valid workload");
    let opts = RunOptions {
        strategy: strategy.into(),
        workload: w,
        workload_file: "contention.toml".into(),
        out: dir.join(strategy),
        base_port: None,
        endpoints: None,
        history: true,
        progress: false,
    };
    let s = run(&opts, &CancellationToken::new())
        .await
        .unwrap_or_else(|e| panic!("{strategy}: {e}"));
    assert_servers_gone(&s);
    s
}

/// A process is gone when /proc has no entry for it or it is a zombie nobody reaped yet.
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(") ")
            .map(|(_, rest)| !rest.starts_with('Z'))
            .unwrap_or(false),
        Err(_) => false,
    }
}

fn assert_servers_gone(s: &Summary) {
    assert!(!s.servers.is_empty(), "{}: no servers recorded", s.strategy);
    for n in &s.servers {
        assert!(
            !alive(n.pid),
            "{}: server {} (pid {}) outlived the run",
            s.strategy,
            n.name,
            n.pid
        );
    }
}

fn assert_safe_under_contention(s: &Summary) {
    let id = &s.strategy;
    assert_eq!(s.audit.initial_stock, 20, "{id}");
    assert!(
        s.attempts > 40,
        "{id}: only {} attempts: no real contention",
        s.attempts
    );
    assert!(s.audit.sold > 0, "{id}: sold nothing");
    assert!(
        s.outcomes["sold_out"] > 0,
        "{id}: demand never exceeded supply"
    );
    assert_eq!(s.audit.oversell, 0, "{id}: oversold");
    assert_eq!(s.audit.lost_updates, 0, "{id}: lost updates");
    assert!(s.audit.final_stock >= 0, "{id}: negative stock");
    assert_eq!(
        s.audit.sold as i64 + s.audit.final_stock,
        s.audit.initial_stock as i64,
        "{id}: sold + final != initial"
    );
    assert!(s.safe, "{id}: verdict not safe");
}

#[tokio::test(flavor = "multi_thread")]
async fn none_oversells_under_contention() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = run_strategy("none", CONTENTION, dir.path()).await;
    assert!(
        s.audit.oversell > 0,
        "the no-lock control was not caught: {s:?}"
    );
    assert!(
        s.audit.lost_updates > 0,
        "blind writes must lose updates: {s:?}"
    );
    assert!(!s.safe);
    // The history has one line per attempt.
    let lines = std::fs::read_to_string(dir.path().join("none/history.jsonl"))
        .unwrap()
        .lines()
        .count();
    assert_eq!(lines as u64, s.attempts);
}

#[tokio::test(flavor = "multi_thread")]
async fn mysql_for_update_is_safe_under_contention() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    assert_safe_under_contention(&run_strategy("mysql-for-update", CONTENTION, dir.path()).await);
}

#[tokio::test(flavor = "multi_thread")]
async fn mysql_optimistic_is_safe_under_contention() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = run_strategy("mysql-optimistic", CONTENTION, dir.path()).await;
    assert_safe_under_contention(&s);
}

#[tokio::test(flavor = "multi_thread")]
async fn mysql_atomic_is_safe_under_contention() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    assert_safe_under_contention(&run_strategy("mysql-atomic", CONTENTION, dir.path()).await);
}

#[tokio::test(flavor = "multi_thread")]
async fn redis_setnx_is_safe_under_contention() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = run_strategy("redis-setnx", CONTENTION, dir.path()).await;
    assert_safe_under_contention(&s);
    // Every lease was released by its owner: the lock never expired under a buyer.
    assert_eq!(s.release_failures, 0);
}

/// Fencing tokens of the run's leases in the order the locks were granted, from its history.
fn fences_in_grant_order(dir: &Path, strategy: &str) -> Vec<u64> {
    let text = std::fs::read_to_string(dir.join(strategy).join("history.jsonl")).unwrap();
    let mut leases: Vec<(u64, u64)> = text
        .lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let lease = v.get("lease")?;
            let fence = lease["fence"]
                .as_u64()
                .unwrap_or_else(|| panic!("{strategy}: lease without a fence: {l}"));
            Some((lease["acquired_us"].as_u64().unwrap(), fence))
        })
        .collect();
    leases.sort();
    leases.into_iter().map(|(_, f)| f).collect()
}

/// The lock strategies backed by a consensus service: safe, every lease released by its
/// owner, and fencing tokens that grow with every new holder of the (single) lock.
async fn assert_consensus_lock_safe(strategy: &str) {
    let dir = tempfile::tempdir().unwrap();
    let s = run_strategy(strategy, CONTENTION, dir.path()).await;
    assert_safe_under_contention(&s);
    assert_eq!(s.release_failures, 0, "{strategy}");
    let fences = fences_in_grant_order(dir.path(), strategy);
    assert!(
        fences.len() as u64 >= s.audit.sold,
        "{strategy}: {fences:?}"
    );
    assert!(
        fences.windows(2).all(|w| w[0] < w[1]),
        "{strategy}: fencing tokens not increasing in grant order: {fences:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn zookeeper_is_safe_under_contention() {
    if !consensus_servers_available() {
        return;
    }
    assert_consensus_lock_safe("zookeeper").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn etcd_is_safe_under_contention() {
    if !consensus_servers_available() {
        return;
    }
    assert_consensus_lock_safe("etcd").await;
}

/// Holds longer than waiters wait: most attempts give up with `lock_timeout`. A waiter that
/// gave up must also take its queue entry (ZooKeeper node, etcd waiter key) away, or the
/// next holder would wait behind it forever and sales would stop after the first.
#[tokio::test(flavor = "multi_thread")]
async fn consensus_locks_give_up_when_busy_and_leave_the_queue() {
    if !consensus_servers_available() {
        return;
    }
    let w = r#"
seed = 5
[inventory]
skus = 1
stock = 1000
[load]
mode = "closed"
clients = 8
duration = "2s"
timeout = "2s"
[critical_section]
hold = "100ms"
[lock]
ttl = "5s"
acquire_timeout = "150ms"
"#;
    let dir = tempfile::tempdir().unwrap();
    for strategy in ["zookeeper", "etcd"] {
        let s = run_strategy(strategy, w, dir.path()).await;
        assert!(s.safe, "{strategy}: {s:?}");
        assert!(
            s.outcomes["lock_timeout"] > 0,
            "{strategy}: {:?}",
            s.outcomes
        );
        assert_eq!(s.errors, 0, "{strategy}: {:?}", s.errors_by_kind);
        // ~2 s / 100 ms holds: well over 5 sales unless abandoned waiters block the queue.
        assert!(s.audit.sold >= 5, "{strategy}: sold only {}", s.audit.sold);
        assert_eq!(s.release_failures, 0, "{strategy}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn leader_names_one_node_of_each_consensus_service() {
    use lockbench::cluster::{ClusterOptions, LocalCluster, Needs, Role, Service};
    if !consensus_servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let needs = Needs {
        zookeeper: true,
        etcd: true,
        ..Needs::NONE
    };
    let cluster = LocalCluster::start(needs, &ClusterOptions::new(dir.path().join("logs")))
        .await
        .expect("cluster starts");
    let pids: Vec<(u32, String)> = cluster
        .info()
        .into_iter()
        .map(|n| (n.pid, n.name))
        .collect();
    assert_eq!(pids.len(), 6, "{pids:?}");
    assert_eq!(cluster.endpoints().zookeeper.len(), 3);
    assert_eq!(cluster.endpoints().etcd.len(), 3);
    for service in [Service::Zookeeper, Service::Etcd] {
        let leader = cluster
            .leader(service)
            .await
            .unwrap_or_else(|e| panic!("{service:?}: {e}"))
            .unwrap_or_else(|| panic!("{service:?}: no leader after start"));
        assert_eq!(leader.service, service);
        assert_eq!(leader.role, Role::Member);
        // The answer is the servers' view, not a guess: asked again, they name the same node.
        let again = cluster.leader(service).await.unwrap().unwrap();
        assert_eq!(leader.name, again.name, "{service:?}");
        assert!(alive(leader.process.pid()), "{service:?}");
    }
    // A service the cluster does not run has no leader to name.
    assert!(cluster.leader(Service::Redis).await.is_err());
    drop(cluster);
    assert_all_gone(&pids);
}

#[tokio::test(flavor = "multi_thread")]
async fn redis_lua_decr_is_safe_under_contention() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    assert_safe_under_contention(&run_strategy("redis-lua-decr", CONTENTION, dir.path()).await);
}

#[tokio::test(flavor = "multi_thread")]
async fn open_loop_measures_from_the_intended_start() {
    if !servers_available() {
        return;
    }
    // 400 attempts/s on one hot SKU with a 20 ms hold: the row lock serialises buyers at under
    // 50/s, so arrivals queue. Latency from the intended start must show the queueing that
    // service time hides, and the unserved demand must be reported.
    let w = r#"
[inventory]
skus = 1
stock = 100000
[load]
mode = "open"
arrival = "constant"
rate = 400
clients = 8
duration = "1s"
[critical_section]
hold = "20ms"
"#;
    let dir = tempfile::tempdir().unwrap();
    let s = run_strategy("mysql-for-update", w, dir.path()).await;
    assert!(
        s.latency_us.p99 > 5 * s.service_time_us.p99,
        "queueing hidden: {:?} vs {:?}",
        s.latency_us,
        s.service_time_us
    );
    assert!(s.not_started > 0, "saturation not reported: {s:?}");
    assert!(
        s.attempts + s.not_started >= 390,
        "{} + {}",
        s.attempts,
        s.not_started
    );
}

// ---- The binary: exit codes, messages, and cleanup when a run is interrupted or fails.

fn lockbench() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_lockbench"));
    // The workspace root, where the default workload file lives.
    c.current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap())
        .env_remove("RUST_LOG");
    c
}

fn workload_file(dir: &Path, text: &str) -> PathBuf {
    let p = dir.join("w.toml");
    std::fs::write(&p, text).unwrap();
    p
}

/// Pids of every descendant of `root`, with their command names.
fn descendants(root: u32) -> Vec<(u32, String)> {
    let mut procs = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some((head, rest)) = stat.rsplit_once(") ") else {
            continue;
        };
        let comm = head
            .split_once(" (")
            .map(|x| x.1.to_string())
            .unwrap_or_default();
        let ppid: u32 = rest
            .split(' ')
            .nth(1)
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        procs.push((pid, ppid, comm));
    }
    let mut out = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for (pid, ppid, comm) in &procs {
            if *ppid == parent {
                out.push((*pid, comm.clone()));
                frontier.push(*pid);
            }
        }
    }
    out
}

/// Starts a long run and waits until its servers are up and the load has begun.
// The child is returned to the caller, which waits for it in `wait_exit`.
#[allow(clippy::zombie_processes)]
fn start_long_run(dir: &Path, strategy: &str, duration_s: u32) -> (Child, Vec<(u32, String)>) {
    let w = workload_file(
        dir,
        &format!("[load]\nduration = \"{duration_s}s\"\nrate = 200\n"),
    );
    let mut child = lockbench()
        .args(["run", "--strategy", strategy, "--json", "--workload"])
        .arg(&w)
        .arg("--out")
        .arg(dir.join("out"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let procs = descendants(child.id());
        let servers: Vec<_> = procs
            .iter()
            .filter(|(_, c)| c == "mariadbd" || c == "redis-server")
            .cloned()
            .collect();
        if servers.len() == 2 && dir.join("out/logs/mariadb.log").exists() {
            // Give the server setup and a second of load time to happen.
            std::thread::sleep(Duration::from_secs(4));
            return (child, servers);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("servers never came up: {procs:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn wait_exit(mut child: Child) -> (i32, String) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
            return (status.code().unwrap_or(-1), err);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("lockbench did not exit");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn assert_all_gone(servers: &[(u32, String)]) {
    // SIGKILL delivery and reaping are asynchronous; allow a moment.
    let deadline = Instant::now() + Duration::from_secs(5);
    while servers.iter().any(|(p, _)| alive(*p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    for (pid, name) in servers {
        assert!(!alive(*pid), "{name} (pid {pid}) outlived the run");
    }
}

#[test]
fn ctrl_c_mid_run_stops_every_server_and_keeps_the_results() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (child, servers) = start_long_run(dir.path(), "redis-setnx", 60);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let (code, err) = wait_exit(child);
    assert_eq!(code, 130, "{err}");
    assert_all_gone(&servers);
    let summary: Summary = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("out/summary.json")).unwrap(),
    )
    .unwrap();
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
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(maria as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
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
    let mut serve = lockbench()
        .args(["serve", "--for", "2m", "--out"])
        .arg(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let endpoints = dir.path().join("endpoints.json");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !endpoints.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let servers: Vec<_> = descendants(serve.id())
        .into_iter()
        .filter(|(_, c)| c == "mariadbd" || c == "redis-server")
        .collect();
    // Two runs on the same servers: each recreates its stock, so both audit cleanly.
    let w = workload_file(
        dir.path(),
        "[inventory]\nstock = 30\n[load]\nduration = \"500ms\"\n",
    );
    for strategy in ["mysql-atomic", "redis-lua-decr", "mysql-atomic"] {
        let out = lockbench()
            .args(["run", "--json", "--strategy", strategy, "--workload"])
            .arg(&w)
            .arg("--endpoints")
            .arg(&endpoints)
            .arg("--out")
            .arg(dir.path().join(strategy))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{strategy}: {err}");
        let s: Vec<Summary> = serde_json::from_slice(&out.stdout).unwrap();
        assert!(s[0].safe && s[0].audit.sold == 30, "{strategy}: {:?}", s[0]);
    }
    assert_eq!(servers.len(), 2, "{servers:?}");
    assert!(
        servers.iter().all(|(p, _)| alive(*p)),
        "runs with --endpoints must not stop the servers"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(serve.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let status = serve.wait().unwrap();
    assert!(status.success(), "{status}");
    assert_all_gone(&servers);
    assert!(!endpoints.exists(), "endpoints.json left behind");
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
        .args([
            "run",
            "--strategy",
            "redis-lua-decr",
            "--base-port",
            &port,
            "--out",
        ])
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
        let out = lockbench()
            .args(["run", "--strategy", "none", "--workload"])
            .arg(&w)
            .args(*extra)
            .arg("--out")
            .arg(dir.path().join("out"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text:?} {extra:?}: {err}");
        for n in *needles {
            assert!(
                err.contains(n),
                "{text:?} {extra:?}: `{n}` missing from: {err}"
            );
        }
        assert!(
            !dir.path().join("out/logs").exists(),
            "servers started despite bad input"
        );
    }
    let out = lockbench()
        .args(["run", "--strategy", "nolock"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        err.contains("unknown strategy `nolock`") && err.contains("redis-setnx"),
        "{err}"
    );
    let out = lockbench()
        .args(["compare", "--strategies", "none,bogus"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        err.contains("--strategies") && err.contains("unknown strategy `bogus`"),
        "{err}"
    );
    let out = lockbench()
        .args(["run", "--strategy", "none", "--workload", "no/such.toml"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        err.contains("no/such.toml") && err.contains("cannot read"),
        "{err}"
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
    ] {
        assert!(
            text.lines().any(|l| l.starts_with(id)),
            "{id} missing from:\n{text}"
        );
    }
}
