//! What the areas share: availability checks (skip, or fail in CI), the contention scenario,
//! runs through the library and through the binary, `lockbench serve`, process bookkeeping
//! and the assertions every area makes about a run's results and its cleanup.
//!
//! Waits are bounded generously: CI runs these tests on a busy 2-core machine, so a bound
//! only has to catch a hang, never to measure speed.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use lockbench::cluster::{ClusterOptions, Needs, OwnedCluster};
use lockbench::report::Summary;
use lockbench::run::{RunOptions, run};
use lockbench::workload::Workload;
use nix::sys::signal::Signal;
use tokio_util::sync::CancellationToken;

/// How long anything may take to start: past the slowest readiness bound of lockbench's own
/// (MariaDB: 120 s), so lockbench reports a slow server before a test gives up on it.
pub const START_BOUND: Duration = Duration::from_secs(240);

// ---- Availability: never a silent skip.

/// Whether a test that needs `what` can run: true when `available`. Otherwise the test skips
/// (false, saying what it needs) — or, when `CI` is set, fails: CI must run every test.
pub fn require(what: &str, available: bool) -> bool {
    if available {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!("CI is set, but this test needs {what}");
    }
    eprintln!("SKIPPED: this test needs {what}");
    false
}

fn installed(bin: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .any(|d| d.join(bin).is_file())
}

/// Through [`require`]: every one of `bins` (and `files`) is installed.
fn require_installed(bins: &[&str], files: &[&str]) -> bool {
    let mut missing: Vec<&str> = bins.iter().copied().filter(|b| !installed(b)).collect();
    missing.extend(files.iter().filter(|f| !Path::new(f).is_file()));
    require(
        &format!("{missing:?} installed (run scripts/install-deps.sh)"),
        missing.is_empty(),
    )
}

/// MariaDB and Redis (with Sentinel) are installed; through [`require`].
pub fn servers_available() -> bool {
    require_installed(
        &[
            "redis-server",
            "redis-sentinel",
            "mariadbd",
            "mariadb-install-db",
        ],
        &[],
    )
}

/// ZooKeeper (its jar and a JDK) and etcd are installed, besides MariaDB and Redis; through
/// [`require`].
pub fn consensus_servers_available() -> bool {
    servers_available() && require_installed(&["etcd", "java"], &["/usr/share/java/zookeeper.jar"])
}

/// Debian's PostgreSQL 15 is installed (its programs are off PATH); through [`require`].
pub fn postgres_available() -> bool {
    require_installed(
        &[],
        &[
            "/usr/lib/postgresql/15/bin/initdb",
            "/usr/lib/postgresql/15/bin/postgres",
            "/usr/lib/postgresql/15/bin/pg_basebackup",
        ],
    )
}

// ---- Runs through the library.

/// The contention scenario of the foundation tests: one SKU, 20 units, 32 buyers in a closed
/// loop, 2 ms between read and write. Demand far exceeds supply.
pub const CONTENTION: &str = r#"
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

/// Options of a run of `strategy` on servers of its own, results (with history) in `out`.
pub fn run_options(strategy: &str, workload: &str, out: PathBuf) -> RunOptions {
    let w = Workload::parse("w.toml", workload, &[]).expect("valid workload");
    RunOptions {
        history: true,
        // One idle window more per run; the tests of server work ask for it.
        server_work: false,
        ..RunOptions::new(strategy, w, None, "w.toml", out)
    }
}

/// Runs `strategy` on `workload` with results in `dir/<strategy>`; the run must succeed and
/// leave no server behind.
pub async fn run_strategy(strategy: &str, workload: &str, dir: &Path) -> Summary {
    let opts = run_options(strategy, workload, dir.join(strategy));
    let plan = opts.plan().unwrap_or_else(|e| panic!("{strategy}: {e}"));
    let s = run(&plan, &CancellationToken::new())
        .await
        .unwrap_or_else(|e| panic!("{strategy}: {e}"));
    assert_servers_gone(&s);
    s
}

/// [`run_strategy`] in a folder of its own, for tests that need only the summary.
pub async fn measure(strategy: &str, workload: &str) -> Summary {
    let dir = tempfile::tempdir().unwrap();
    run_strategy(strategy, workload, dir.path()).await
}

/// The servers `needs` names, logs in `dir`.
pub async fn cluster(needs: Needs, dir: &Path) -> OwnedCluster {
    OwnedCluster::start(needs, &ClusterOptions::new(dir))
        .await
        .unwrap_or_else(|e| panic!("{needs:?}: {e}"))
}

/// The [`Needs`] of the services named: `needs!(mariadb, redis)`.
macro_rules! needs {
    ($($service:ident),+) => {
        lockbench::cluster::Needs {
            $($service: true,)+
            ..lockbench::cluster::Needs::NONE
        }
    };
}
pub(crate) use needs;

/// A test's own servers, those `needs` names, with the folder of their logs (removed after
/// they stop, as the pair drops in reverse); `None` when they are not installed (through
/// [`require`]: the test skips, or fails in CI).
pub async fn cluster_of(needs: Needs) -> Option<(tempfile::TempDir, OwnedCluster)> {
    if !installed_for(needs) {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster(needs, &dir.path().join("logs")).await;
    Some((dir, cluster))
}

/// Whether every server `needs` starts is installed: ZooKeeper and etcd (besides MariaDB and
/// Redis), PostgreSQL, MariaDB and Redis; through [`require`].
fn installed_for(needs: Needs) -> bool {
    let postgres = Needs {
        postgres: needs.postgres,
        postgres_replica: needs.postgres_replica,
        ..Needs::NONE
    };
    let others = if needs.zookeeper || needs.etcd {
        consensus_servers_available()
    } else {
        needs == postgres || servers_available()
    };
    others && (postgres == Needs::NONE || postgres_available())
}

// ---- Assertions on results.

/// No oversell, no lost update, consistent stock and a safe verdict, under contention that
/// really exceeded supply.
pub fn assert_safe_under_contention(s: &Summary) {
    let id = &s.strategy;
    assert_eq!(s.audit.initial_stock, 20, "{id}");
    // 32 buyers on one SKU are the contention; more attempts than units and a "sold out" prove
    // demand exceeded supply. (A count tied to speed, > 40 in 1.5 s, failed etcd on a busy CI
    // machine: 35 lock cycles.)
    assert!(
        s.attempts > s.audit.initial_stock,
        "{id}: only {} attempts for {} units: no real contention",
        s.attempts,
        s.audit.initial_stock
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
    assert_eq!(
        s.store_verdict,
        lockbench::check::StoreVerdict::Intact,
        "{id}"
    );
    assert!(
        matches!(
            s.lock_verdict,
            None | Some(lockbench::check::LockVerdict::Held)
        ),
        "{id}: {:?}",
        s.lock_verdict
    );
}

/// Nothing lapsed, so nothing to catch: no lease overlap, stale write, stuck lock, failed
/// release or lost lease.
pub fn assert_nothing_lapsed(s: &Summary) {
    let lapses = (
        s.double_grants,
        s.stale_rejected,
        s.stuck_locks,
        s.release_failures,
        s.lease_lost,
    );
    assert_eq!(
        lapses,
        (0, 0, 0, 0, 0),
        "{}: (double grants, stale, stuck, release failures, leases lost)",
        s.strategy
    );
}

/// A run's faults went as planned: each started and healed with nothing to note, the phases
/// are `before` then `during` / `after` each fault in turn, and no client worker failed.
pub fn assert_faults_went_as_planned(s: &Summary) {
    let id = &s.strategy;
    assert!(!s.faults.is_empty(), "{id}");
    for f in &s.faults {
        assert!(f.note.is_none(), "{id}: fault did not go as planned: {f:?}");
        let (start, heal) = (f.started_s.unwrap(), f.healed_s.unwrap());
        assert!(heal > start, "{id}: {f:?}");
    }
    let names: Vec<&str> = s.phases.iter().map(|p| p.name.as_str()).collect();
    let mut want = vec!["before".to_string()];
    for f in &s.faults {
        want.push(format!("during {}", f.id));
        want.push(format!("after {}", f.id));
    }
    assert_eq!(names, want, "{id}");
    assert!(
        s.worker_failures.is_empty(),
        "{id}: {:?}",
        s.worker_failures
    );
}

// ---- Processes.

/// A process is gone when /proc has no entry for it or it is a zombie nobody reaped yet.
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(") ")
            .map(|(_, rest)| !rest.starts_with('Z'))
            .unwrap_or(false),
        Err(_) => false,
    }
}

/// Every server the run recorded is gone.
pub fn assert_servers_gone(s: &Summary) {
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

/// Every one of `servers` is gone (after its owner exited).
pub fn assert_all_gone(servers: &[(u32, String)]) {
    // SIGKILL delivery and reaping are asynchronous; allow a moment (a server that outlived
    // its owner stays alive for good, so a longer wait cannot hide one).
    let deadline = Instant::now() + Duration::from_secs(15);
    while servers.iter().any(|(p, _)| alive(*p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    for (pid, name) in servers {
        assert!(!alive(*pid), "{name} (pid {pid}) outlived the run");
    }
}

/// Sends `sig` to process `pid`.
pub fn signal(pid: u32, sig: Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), sig)
        .unwrap_or_else(|e| panic!("{sig} to {pid}: {e}"));
}

/// Pids of every descendant of `root`, with their command names.
pub fn descendants(root: u32) -> Vec<(u32, String)> {
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

// ---- The binary.

/// `lockbench`, run from the workspace root (where the default workload file lives).
pub fn lockbench() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_lockbench"));
    c.current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap())
        .env_remove("RUST_LOG");
    c
}

/// Runs `cmd`; a failure fails the test with its stderr.
pub fn succeed(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The summaries a `--json` run or compare printed; it must have succeeded (`what` and its
/// stderr name the failure).
pub fn summaries(out: &Output, what: &str) -> Vec<Summary> {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{what}: {err}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{what}: {e}: {err}"))
}

/// The one summary of a `--json` run of `cmd`, which must succeed.
pub fn run_json(cmd: &mut Command) -> Summary {
    let mut all = summaries(&cmd.output().unwrap(), &format!("{cmd:?}"));
    assert_eq!(all.len(), 1);
    all.remove(0)
}

/// `lockbench compare --json --strategies <strategies> <args> --out <out>`, which must
/// succeed: one summary per strategy.
pub fn compare_json(strategies: &str, args: &[&str], out: &Path) -> Vec<Summary> {
    let res = lockbench()
        .args(["compare", "--json", "--strategies", strategies])
        .args(args)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    let all = summaries(&res, &format!("{strategies} {args:?}"));
    assert_eq!(all.len(), strategies.split(',').count(), "{strategies}");
    all
}

/// The `summary.json` a run wrote in `dir`.
pub fn read_summary(dir: &Path) -> Summary {
    let text = std::fs::read_to_string(dir.join("summary.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Writes `text` as `dir/w.toml`.
pub fn workload_file(dir: &Path, text: &str) -> PathBuf {
    let p = dir.join("w.toml");
    std::fs::write(&p, text).unwrap();
    p
}

/// Runs `cmd` with `--out dir/out`: it must exit 2 with every needle in its stderr, before
/// starting any server.
pub fn assert_rejected(mut cmd: Command, what: &str, needles: &[&str], dir: &Path) {
    let out = cmd.arg("--out").arg(dir.join("out")).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{what}: {err}");
    for n in needles {
        assert!(err.contains(n), "{what}: `{n}` missing from: {err}");
    }
    assert!(
        !dir.join("out/logs").exists(),
        "{what}: servers started despite bad input"
    );
}

/// Spawns the run `cmd` (results in `out`) with its history on, stdout and stderr piped, and
/// returns it once its load has begun: history.jsonl is created as the load starts, after
/// every server is ready. The wait is bounded by [`START_BOUND`]; the test fails if the run
/// exits first or never gets there.
// The child is returned to the caller, which waits for it.
#[allow(clippy::zombie_processes)]
pub fn start_run(cmd: &mut Command, out: &Path) -> Child {
    let mut child = cmd
        .arg("--history")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + START_BOUND;
    while !out.join("history.jsonl").exists() {
        if let Ok(Some(status)) = child.try_wait() {
            let mut err = String::new();
            let _ = std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err);
            panic!("lockbench exited ({status}) before its load started: {cmd:?}\n{err}");
        }
        if Instant::now() > deadline {
            stop(&mut child);
            panic!("the load never started in {START_BOUND:?}: {cmd:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

/// Starts a `duration_s` run of `strategy` (results in `dir/out`) and returns it, with its
/// servers, once its load has run for a second.
pub fn start_long_run(dir: &Path, strategy: &str, duration_s: u32) -> (Child, Vec<(u32, String)>) {
    let w = workload_file(
        dir,
        &format!("[load]\nduration = \"{duration_s}s\"\nrate = 200\n"),
    );
    let out = dir.join("out");
    let mut child = start_run(
        lockbench()
            .args(["run", "--strategy", strategy, "--json", "--workload"])
            .arg(&w)
            .arg("--out")
            .arg(&out),
        &out,
    );
    let procs = descendants(child.id());
    let servers: Vec<_> = procs
        .iter()
        .filter(|(_, c)| c == "mariadbd" || c == "redis-server")
        .cloned()
        .collect();
    if servers.len() != 2 {
        stop(&mut child);
        panic!("expected MariaDB and Redis under the run: {procs:?}");
    }
    std::thread::sleep(Duration::from_secs(1));
    (child, servers)
}

/// Ends a lockbench child on a failed test: Ctrl-C first, so that it removes what it made
/// (a SIGKILL would leave its network and paused processes behind), SIGKILL after 20 s.
pub fn stop(child: &mut Child) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        Signal::SIGINT,
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Waits (bounded) for `child` to exit: its exit code and stderr (which must be piped).
pub fn wait_exit(mut child: Child) -> (i32, String) {
    // Its own teardown is bounded; this only catches a hang.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
            return (status.code().unwrap_or(-1), err);
        }
        if Instant::now() > deadline {
            stop(&mut child);
            panic!("lockbench did not exit");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Ctrl-C to `child`, which must then exit with 130 (interrupted, results kept); its stderr.
pub fn interrupt(child: Child) -> String {
    signal(child.id(), Signal::SIGINT);
    let (code, err) = wait_exit(child);
    assert_eq!(code, 130, "{err}");
    err
}

// ---- `lockbench serve`.

/// A `lockbench serve` child: servers that outlive individual runs (`run --endpoints`).
pub struct Serve {
    pub child: Child,
    pub endpoints: PathBuf,
}

impl Serve {
    /// Starts the servers `strategies` need and waits for endpoints.json.
    pub fn start(dir: &Path, strategies: &str) -> Serve {
        std::fs::create_dir_all(dir).unwrap();
        // Its stderr goes to a file, so a start that fails says why.
        let log = dir.join("serve.stderr");
        let child = lockbench()
            .args(["serve", "--strategies", strategies, "--for", "6m", "--out"])
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mut serve = Serve {
            child,
            endpoints: dir.join("endpoints.json"),
        };
        let deadline = Instant::now() + START_BOUND;
        while !serve.endpoints.exists() && Instant::now() < deadline {
            if let Ok(Some(status)) = serve.child.try_wait() {
                let err = std::fs::read_to_string(&log).unwrap_or_default();
                panic!("lockbench serve exited ({status}) before it came up:\n{err}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        if !serve.endpoints.exists() {
            let err = std::fs::read_to_string(&log).unwrap_or_default();
            panic!("lockbench serve did not come up in {START_BOUND:?}:\n{err}");
        }
        serve
    }

    /// The endpoints file as JSON (nodes with their pids, addresses).
    pub fn file(&self) -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(&self.endpoints).unwrap()).unwrap()
    }

    /// The pid of the node called `name` in the endpoints file.
    pub fn pid(&self, name: &str) -> u32 {
        let file = self.file();
        let node = file["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["name"] == name);
        node.and_then(|n| n["pid"].as_u64())
            .unwrap_or_else(|| panic!("no node {name}: {file}")) as u32
    }

    /// `lockbench run --json --strategy <strategy> --workload <workload>` on these servers,
    /// results in `out`.
    pub fn run(&self, strategy: &str, workload: &Path, out: &Path) -> Command {
        let mut c = lockbench();
        c.args(["run", "--json", "--strategy", strategy, "--workload"])
            .arg(workload)
            .arg("--endpoints")
            .arg(&self.endpoints)
            .arg("--out")
            .arg(out);
        c
    }

    /// Ctrl-C, then a clean exit.
    pub fn stop(mut self) {
        signal(self.child.id(), Signal::SIGINT);
        // Its teardown is bounded; this only catches a hang.
        let deadline = Instant::now() + Duration::from_secs(120);
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "lockbench serve did not stop");
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(status.success(), "{status}");
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        // A failed assertion must not leave the servers running: SIGINT, as `stop` does.
        if let Ok(None) = self.child.try_wait() {
            stop(&mut self.child);
        }
    }
}

/// The servers of every library strategy and every library's adapter are installed; through
/// [`require`] (`scripts/install-deps.sh --adapters` installs the libraries).
pub fn libraries_available() -> bool {
    use lockbench::strategy::adapter::{LIBRARIES, adapters_dir};
    // Every library's lock service: Redis, ZooKeeper, etcd and PostgreSQL (advisory-lock).
    if !consensus_servers_available() || !postgres_available() {
        return false;
    }
    let dir = adapters_dir();
    let missing: Vec<&str> = LIBRARIES
        .iter()
        .filter(|l| !l.installed(&dir))
        .map(|l| l.name)
        .collect();
    require(
        &format!("the lock libraries {missing:?} (run scripts/install-deps.sh --adapters)"),
        missing.is_empty(),
    )
}

// ---- Reads (`load.read_fraction`).

/// [`CONTENTION`] with 90% reads and stock to spare (a read-heavy calm run: the stock must not
/// sell out, so writers keep writing among the readers until the end).
pub fn read_heavy() -> String {
    CONTENTION
        .replace("stock = 20", "stock = 100000")
        .replace("timeout = \"2s\"", "timeout = \"2s\"\nread_fraction = 0.9")
}

/// A run with reads answered them, wrote among them, and no read saw a writer: zero torn reads,
/// zero double grants, the lock held and the store intact.
pub fn assert_reads_safe(s: &Summary) {
    let id = &s.strategy;
    assert!(s.had_reads(), "{id}: no reads asked for");
    assert_eq!(
        s.reads,
        s.outcomes["read"] + s.outcomes["torn_read"],
        "{id}: {:?}",
        s.outcomes
    );
    assert!(s.reads > 20, "{id}: only {} reads answered", s.reads);
    assert!(s.audit.sold > 0, "{id}: no write among the reads");
    assert_eq!(s.torn_reads, 0, "{id}: a read saw a writer's change");
    assert_eq!(s.double_grants, 0, "{id}: {:?}", s.double_grant_examples);
    assert_eq!(
        (
            s.audit.oversell,
            s.audit.lost_updates,
            s.audit.inconsistent_skus
        ),
        (0, 0, 0),
        "{id}"
    );
    assert_eq!(
        s.lock_verdict,
        Some(lockbench::check::LockVerdict::Held),
        "{id}"
    );
    assert!(s.safe, "{id}");
}

/// A read lock that does not exclude writers was caught: reads were answered, and the run saw
/// torn reads or reader–writer double grants, so the lock is BROKEN (the store intact: reads
/// write nothing).
pub fn assert_leaky_reads_caught(s: &Summary) {
    use lockbench::check::Mode;
    let id = &s.strategy;
    assert!(s.reads > 20, "{id}: only {} reads answered", s.reads);
    let reader_writer = s
        .double_grant_examples
        .iter()
        .any(|o| (o.first_mode == Mode::Shared) != (o.second_mode == Mode::Shared));
    assert!(
        s.torn_reads > 0 || reader_writer,
        "{id}: torn reads {}, examples {:?}",
        s.torn_reads,
        s.double_grant_examples
    );
    assert_eq!(
        s.lock_verdict,
        Some(lockbench::check::LockVerdict::Broken),
        "{id}"
    );
    assert_eq!(s.headline(), "caught (control)", "{id}");
}

/// The most readers that held one key at once in `dir`'s run of `strategy` (its history): above
/// 1 for a read–write lock whose readers really shared, 0 for a plain lock.
pub fn max_shared_holders(dir: &Path, strategy: &str) -> u64 {
    let path = dir.join(strategy).join("history.jsonl");
    lockbench::record::max_shared_holders(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The private networks the runs of `summaries` used are gone: no bridge, no namespace, no
/// veth end.
pub fn assert_networks_gone(summaries: &[Summary]) {
    let links = String::from_utf8(
        std::process::Command::new("ip")
            .args(["-o", "link"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let netns = std::fs::read_dir("/run/netns")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    for s in summaries {
        let ip = s.servers[0].addr.ip().to_string();
        let k = ip.split('.').nth(2).unwrap();
        let bridge = format!("lbk{k}");
        assert!(
            ip.starts_with("10.213."),
            "{}: not in a private network: {ip}",
            s.strategy
        );
        assert!(
            !links.contains(&format!(" {bridge}:")) && !links.contains(&format!(" {bridge}v")),
            "{bridge} or its veths left behind:\n{links}"
        );
        assert!(
            !netns.iter().any(|n| n.starts_with(&format!("{bridge}-"))),
            "namespaces left behind: {netns:?}"
        );
    }
}
