//! External targets, through the binary, pointed at servers started locally by `lockbench
//! serve`: the same code path as a staging cluster, without leaving this machine. lockbench
//! must measure them as a client only, keep to its prefix, refuse foreign data under it,
//! remove what it created, keep the password out of every result, and reach them in chaos
//! only through the chaos file's commands.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use lockbench::cluster::durability::{Acked, Source};
use lockbench::cluster::{Auth, Provisioner, Service};

use crate::common::{
    Serve, assert_rejected, consensus_servers_available, lockbench, run_json, servers_available,
    succeed, summaries, workload_file,
};

const PREFIX: &str = "lbtest";
const PASSWORD_ENV: &str = "LOCKBENCH_TEST_TARGET_PASSWORD";
const REDIS_PASSWORD_ENV: &str = "LOCKBENCH_TEST_REDIS_PASSWORD";
const ETCD_PASSWORD_ENV: &str = "LOCKBENCH_TEST_ETCD_PASSWORD";
const ZK_PASSWORD_ENV: &str = "LOCKBENCH_TEST_ZK_PASSWORD";
const SENTINEL_PASSWORD_ENV: &str = "LOCKBENCH_TEST_SENTINEL_PASSWORD";

/// Contention on 2 SKUs × 30 units; `none` oversells it, the locks must not.
const WORKLOAD: &str = "[inventory]\nskus = 2\nstock = 30\n\
    [load]\nmode = \"closed\"\nclients = 16\nduration = \"2s\"\n\
    [critical_section]\nhold = \"2ms\"\n[lock]\nttl = \"5s\"\nacquire_timeout = \"3s\"\n";

struct Fixture {
    serve: Serve,
    target: PathBuf,
    password: String,
    redis: SocketAddr,
    redis_pid: u64,
    mysql: serde_json::Value,
    zookeeper: Vec<SocketAddr>,
    etcd: Vec<SocketAddr>,
    /// Logins once [`Fixture::require_logins`] turned them on: (Redis, etcd, ZooKeeper).
    logins: Option<(Auth, Auth, Auth)>,
}

/// Local servers, and a target file naming them (password only in the environment).
fn fixture(dir: &Path) -> Fixture {
    let serve = Serve::start(&dir.join("serve"), "redis-setnx,zookeeper,etcd");
    let f = serve.file();
    let ep = &f["endpoints"];
    let addrs = |k: &str| -> Vec<SocketAddr> {
        ep[k]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().parse().unwrap())
            .collect()
    };
    let mysql = ep["mysql"].clone();
    let quoted = |v: &[SocketAddr]| {
        v.iter()
            .map(|a| format!("\"{a}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (redis, zookeeper, etcd) = (addrs("redis"), addrs("zookeeper"), addrs("etcd"));
    let text = format!(
        "description = \"servers of a local lockbench serve\"\nprefix = \"{PREFIX}\"\n\
         [mysql]\ndsn = \"mysql://{}@{}/{}\"\npassword_env = \"{PASSWORD_ENV}\"\n\
         [redis]\nnodes = [{}]\n[zookeeper]\nnodes = [{}]\n[etcd]\nnodes = [{}]\n",
        mysql["user"].as_str().unwrap(),
        mysql["addr"].as_str().unwrap(),
        mysql["database"].as_str().unwrap(),
        quoted(&redis),
        quoted(&zookeeper),
        quoted(&etcd),
    );
    let target = dir.join("target.toml");
    std::fs::write(&target, text).unwrap();
    let redis_pid = f["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["service"] == "redis")
        .unwrap()["pid"]
        .as_u64()
        .unwrap();
    Fixture {
        password: f["mysql_password"].as_str().unwrap().to_string(),
        serve,
        target,
        redis: redis[0],
        redis_pid,
        mysql,
        zookeeper,
        etcd,
        logins: None,
    }
}

impl Fixture {
    /// `lockbench <subcommand> --target <file> --workload <workload> <args>`, the passwords in
    /// the environment.
    fn cmd(&self, workload: &Path, args: &[&str]) -> std::process::Command {
        let mut c = lockbench();
        if let Some((r, e, z)) = &self.logins {
            c.env(REDIS_PASSWORD_ENV, &r.password)
                .env(ETCD_PASSWORD_ENV, &e.password)
                .env(ZK_PASSWORD_ENV, &z.password);
        }
        c.env(PASSWORD_ENV, &self.password)
            .arg(args[0])
            .arg("--target")
            .arg(&self.target)
            .arg("--workload")
            .arg(workload)
            .args(&args[1..]);
        c
    }

    fn redis_cmd(&self, args: &[&str]) -> redis::Value {
        let auth = self.logins.as_ref().map(|(r, _, _)| r);
        let client = lockbench::cluster::redis::client(self.redis, auth).unwrap();
        let mut con = client.get_connection().unwrap();
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query(&mut con).unwrap()
    }

    /// Turns logins on: an ACL user `bench` on Redis with the `default` user off, etcd auth
    /// with its `root` user; the target file names the users and the password variables.
    async fn require_logins(&mut self) {
        let redis = Auth {
            username: Some("bench".into()),
            password: uuid::Uuid::new_v4().simple().to_string(),
        };
        let etcd = Auth {
            username: Some("root".into()),
            password: uuid::Uuid::new_v4().simple().to_string(),
        };
        self.redis_cmd(&[
            "ACL",
            "SETUSER",
            "bench",
            "on",
            &format!(">{}", redis.password),
            "~*",
            "&*",
            "+@all",
        ]);
        self.redis_cmd(&["ACL", "SETUSER", "default", "off"]);
        let mut c = etcd_client::Client::connect([format!("http://{}", self.etcd[0])], None)
            .await
            .unwrap();
        c.user_add("root", etcd.password.clone(), None)
            .await
            .unwrap();
        c.user_grant_role("root", "root").await.unwrap();
        c.auth_enable().await.unwrap();
        let zk = Auth {
            username: Some("zk".into()),
            password: uuid::Uuid::new_v4().simple().to_string(),
        };
        // Only the digest user may create under the root from now on.
        let c = zookeeper_client::Client::connector()
            .with_auth("digest", &zk.digest())
            .connect(&self.zookeeper[0].to_string())
            .await
            .unwrap();
        c.set_acl("/", &zookeeper_client::Acls::creator_all(), None)
            .await
            .unwrap();
        let anonymous = zookeeper_client::Client::connector()
            .connect(&self.zookeeper[0].to_string())
            .await
            .unwrap();
        let denied = anonymous
            .create(
                "/anonymous",
                b"",
                &zookeeper_client::CreateMode::Persistent
                    .with_acls(zookeeper_client::Acls::anyone_all()),
            )
            .await;
        assert!(denied.is_err(), "the ACL must keep anonymous clients out");
        let text = std::fs::read_to_string(&self.target).unwrap();
        let text = text
            .replace(
                "[redis]\n",
                &format!(
                    "[redis]\nusername = \"bench\"\npassword_env = \"{REDIS_PASSWORD_ENV}\"\n"
                ),
            )
            .replace(
                "[etcd]\n",
                &format!("[etcd]\nusername = \"root\"\npassword_env = \"{ETCD_PASSWORD_ENV}\"\n"),
            )
            .replace(
                "[zookeeper]\n",
                &format!("[zookeeper]\nusername = \"zk\"\npassword_env = \"{ZK_PASSWORD_ENV}\"\n"),
            );
        std::fs::write(&self.target, text).unwrap();
        self.logins = Some((redis, etcd, zk));
    }

    /// Every name under the prefix on every server, after a run.
    async fn leftovers(&self) -> Vec<String> {
        use sqlx::{ConnectOptions, Connection};
        let mut found = Vec::new();
        if let redis::Value::Array(keys) = self.redis_cmd(&["KEYS", &format!("{PREFIX}:*")]) {
            found.extend(keys.iter().map(|k| format!("redis {k:?}")));
        }
        let addr: SocketAddr = self.mysql["addr"].as_str().unwrap().parse().unwrap();
        let mut con = sqlx::mysql::MySqlConnectOptions::new()
            .host(&addr.ip().to_string())
            .port(addr.port())
            .username(self.mysql["user"].as_str().unwrap())
            .password(&self.password)
            .database(self.mysql["database"].as_str().unwrap())
            .ssl_mode(sqlx::mysql::MySqlSslMode::Disabled)
            .connect()
            .await
            .unwrap();
        let tables: Vec<String> = sqlx::query_scalar(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE()",
        )
        .fetch_all(&mut con)
        .await
        .unwrap();
        found.extend(tables.into_iter().map(|t| format!("mysql table {t}")));
        let _ = con.close().await;
        let mut zk = zookeeper_client::Client::connector();
        if let Some((_, _, z)) = &self.logins {
            zk = zk.with_auth("digest", &z.digest());
        }
        let zk = zk.connect(&self.zookeeper[0].to_string()).await.unwrap();
        if zk
            .check_stat(&format!("/{PREFIX}"))
            .await
            .unwrap()
            .is_some()
        {
            found.push(format!("zookeeper /{PREFIX}"));
        }
        let auth = self.logins.as_ref().map(|(_, e, _)| e);
        let opts = lockbench::cluster::etcd::options(auth);
        let mut etcd =
            etcd_client::Client::connect([format!("http://{}", self.etcd[0])], Some(opts))
                .await
                .unwrap();
        let r = etcd
            .get(
                format!("{PREFIX}:"),
                Some(
                    etcd_client::GetOptions::new()
                        .with_prefix()
                        .with_keys_only(),
                ),
            )
            .await
            .unwrap();
        found.extend(
            r.kvs()
                .iter()
                .map(|kv| format!("etcd {}", String::from_utf8_lossy(kv.key()))),
        );
        found
    }
}

/// Every file below `dir`, as text.
fn all_text(dir: &Path) -> String {
    let mut text = String::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                text.push_str(&String::from_utf8_lossy(&std::fs::read(&p).unwrap()));
            }
        }
    }
    text
}

/// A comparison on the target: results as on local servers (the control caught, the locks
/// safe), server versions recorded, nothing left under the prefix, a neighbour's key under
/// another prefix untouched, and the password nowhere in the results.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_comparison_on_an_external_target_measures_it_and_leaves_it_as_it_was() {
    if !consensus_servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let fx = fixture(dir.path());
    fx.redis_cmd(&["SET", "shop:cart:1", "keep me"]);
    let w = workload_file(dir.path(), WORKLOAD);
    let out = dir.path().join("out");
    let strategies = "none,mysql-atomic,redis-setnx,redis-lua-decr,zookeeper,etcd-fenced";
    let res = fx
        .cmd(&w, &["compare", "--json", "--strategies", strategies])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let all = summaries(&res, strategies);
    assert_eq!(all.len(), 6);
    for s in &all {
        let id = &s.strategy;
        assert_eq!(s.provisioner, Provisioner::Target, "{id}");
        assert_eq!(
            s.target_file.as_deref(),
            Some(fx.target.to_str().unwrap()),
            "{id}"
        );
        assert!(!s.servers.is_empty(), "{id}");
        for n in &s.servers {
            assert!(
                n.version.chars().next().is_some_and(|c| c.is_ascii_digit()),
                "{id}: {n:?}"
            );
            assert_eq!(n.pid, 0, "{id}: not a process of this run: {n:?}");
            // Redis and MariaDB are asked; etcd and ZooKeeper cannot be, so their default is
            // assumed, and said to be.
            let d = n.durability.as_ref().expect("every data server says");
            let source = match n.service {
                Service::Redis | Service::Mariadb => Source::Queried,
                _ => Source::ServerDefault,
            };
            assert_eq!(d.source, source, "{id}: {n:?}");
            assert_ne!(d.acked, Acked::Unknown, "{id}: {n:?}");
        }
        assert!(s.attempts > 20, "{id}: {}", s.attempts);
        if id == "none" {
            assert!(
                s.audit.oversell + s.audit.lost_updates > 0,
                "control not caught: {s:?}"
            );
        } else {
            assert!(s.safe, "{id}: {:?}", s.audit);
            assert_eq!(s.double_grants, 0, "{id}");
            assert!(s.audit.sold > 0, "{id}");
        }
    }
    assert_eq!(fx.leftovers().await, Vec::<String>::new());
    assert_eq!(
        fx.redis_cmd(&["GET", "shop:cart:1"]),
        redis::Value::BulkString(b"keep me".to_vec())
    );
    let text = all_text(&out);
    assert!(
        !text.contains(&fx.password),
        "the password was written into the results"
    );
    fx.serve.stop();
}

/// Servers that ask for logins: a Redis ACL user (the `default` user switched off) and etcd
/// with auth on. The users and password variables are named in the target file; the runs are
/// safe, clean up through the same logins, and no password reaches the results. A wrong
/// password is refused by the server and reported, exit 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logins_come_from_the_environment_and_stay_out_of_the_results() {
    if !consensus_servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut fx = fixture(dir.path());
    fx.require_logins().await;
    let w = workload_file(dir.path(), WORKLOAD);
    let out = dir.path().join("out");
    let strategies = "redis-setnx,redis-lua-decr,etcd,zookeeper";
    // The logins must reach worker processes too.
    let args = [
        "compare",
        "--json",
        "--strategies",
        strategies,
        "--workers",
        "2",
    ];
    let res = fx.cmd(&w, &args).arg("--out").arg(&out).output().unwrap();
    let all = summaries(&res, strategies);
    assert_eq!(all.len(), 4);
    for s in &all {
        assert!(s.safe && s.audit.sold > 0, "{}: {:?}", s.strategy, s.audit);
        // Every service was described through its login: a refused login shows in the version,
        // and each service has a node that answered. (A ZooKeeper member of the starved
        // ensemble once refused connections for a moment beside two CPU hogs: that is
        // reachability, not the login.)
        let login_refused = |n: &&lockbench::cluster::NodeInfo| {
            let v = n.version.to_lowercase();
            v.contains("auth") || v.contains("denied") || v.contains("password")
        };
        assert!(
            !s.servers.iter().any(|n| login_refused(&n)),
            "{}: {:?}",
            s.strategy,
            s.servers
        );
        for service in s.servers.iter().map(|n| n.service) {
            assert!(
                s.servers
                    .iter()
                    .any(|n| n.service == service && !n.version.starts_with("unreachable")),
                "{}: no {service} node answered: {:?}",
                s.strategy,
                s.servers
            );
        }
    }
    assert_eq!(fx.leftovers().await, Vec::<String>::new());
    let text = all_text(&out);
    let (redis, etcd, zk) = fx.logins.clone().unwrap();
    for pw in [&redis.password, &etcd.password, &zk.password, &fx.password] {
        assert!(
            !text.contains(pw.as_str()),
            "a password was written into the results"
        );
    }
    let res = fx
        .cmd(&w, &["run", "-s", "redis-lua-decr"])
        .env(REDIS_PASSWORD_ENV, "wrong")
        .arg("--out")
        .arg(dir.path().join("wrong"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&res.stderr);
    assert_eq!(res.status.code(), Some(2), "{err}");
    let redis_addr = format!("redis {}", fx.redis);
    assert!(
        err.contains(&redis_addr) && err.contains("authentication failed"),
        "{err}"
    );
    fx.serve.stop();
}

/// Data under the prefix that lockbench did not create: the run refuses before it touches
/// anything, names what it found, and the data is still there afterwards. A leftover of an
/// earlier lockbench run (the marker is there) is lockbench's own and is cleaned up.
#[test]
fn a_prefix_holding_foreign_data_is_refused_and_the_data_kept() {
    if !consensus_servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let fx = fixture(dir.path());
    let w = workload_file(dir.path(), WORKLOAD);
    let key = format!("{PREFIX}:stock:0");
    fx.redis_cmd(&["SET", &key, "42"]);
    assert_rejected(
        fx.cmd(&w, &["run", "--strategy", "redis-lua-decr"]),
        "foreign data under the prefix",
        &[
            "prefix `lbtest` already holds data lockbench did not create",
            &key,
        ],
        dir.path(),
    );
    assert_eq!(
        fx.redis_cmd(&["GET", &key]),
        redis::Value::BulkString(b"42".to_vec())
    );
    // A strategy on MariaDB and Redis: MariaDB is claimed first, then Redis refuses. The
    // MariaDB mark comes off again, so only the foreign key is left.
    assert_rejected(
        fx.cmd(&w, &["run", "--strategy", "redis-setnx"]),
        "foreign data under the prefix, after a claim",
        &["prefix `lbtest` already holds data lockbench did not create"],
        dir.path(),
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    let left = rt.block_on(fx.leftovers());
    assert!(
        left.len() == 1 && left[0].contains("stock:0"),
        "only the foreign key may remain: {left:?}"
    );
    // With lockbench's marker beside it, the same key is a leftover of ours.
    fx.redis_cmd(&[
        "SET",
        &format!("{PREFIX}:owner"),
        "lockbench: an earlier run",
    ]);
    succeed(
        fx.cmd(&w, &["run", "--strategy", "redis-lua-decr"])
            .args(["--set", "load.duration=1s", "--out"])
            .arg(dir.path().join("second")),
    );
    assert_eq!(fx.redis_cmd(&["EXISTS", &key]), redis::Value::Int(0));
    // Chaos that needs servers lockbench owns is refused before the run, naming the way out.
    let chaos = dir.path().join("kill.toml");
    std::fs::write(
        &chaos,
        "[[fault]]\nkind = \"kill\"\ntarget = \"master\"\nat = \"1s\"\nduration = \"1s\"\n",
    )
    .unwrap();
    let mut cmd = fx.cmd(&w, &["run", "--strategy", "redis-setnx", "--chaos"]);
    cmd.arg(&chaos);
    assert_rejected(
        cmd,
        "kill on a target",
        &[
            "kill.toml: fault[0].kind = \"kill\"",
            "kind = \"command\", run = ",
        ],
        dir.path(),
    );
    // A missing password variable is named, before anything runs.
    let mut cmd = lockbench();
    cmd.env_remove(PASSWORD_ENV)
        .args(["run", "--strategy", "none", "--target"])
        .arg(&fx.target);
    assert_rejected(
        cmd,
        "password variable unset",
        &["mysql.password_env", PASSWORD_ENV],
        dir.path(),
    );
    fx.serve.stop();
}

/// Faults on a target are the chaos file's own commands: here SIGSTOP / SIGCONT of the Redis
/// process, as a `docker pause` or a `kubectl` command would be elsewhere. Sales stall while
/// it is stopped and resume after the heal; a failing and a hanging command are reported, and
/// their heal commands run all the same.
#[test]
fn command_faults_reach_a_target_and_are_always_healed() {
    if !consensus_servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let fx = fixture(dir.path());
    let w = workload_file(
        dir.path(),
        "[inventory]\nskus = 4\nstock = 100000\n[load]\nmode = \"open\"\nrate = 300\n\
         clients = 16\nduration = \"6s\"\ntimeout = \"300ms\"\n[critical_section]\nhold = \"1ms\"\n",
    );
    let marks = dir.path().join("marks");
    let chaos = dir.path().join("pause.toml");
    let pid = fx.redis_pid;
    let m = marks.display();
    std::fs::write(
        &chaos,
        format!(
            "[[fault]]\nkind = \"command\"\nat = \"2s\"\nduration = \"1500ms\"\n\
             run = \"kill -STOP {pid}\"\nheal = \"kill -CONT {pid}\"\n\
             [[fault]]\nkind = \"command\"\nat = \"4s\"\nduration = \"300ms\"\n\
             run = \"echo run $LOCKBENCH_FAULT_ID >> {m}; exit 7\"\n\
             heal = \"echo heal $LOCKBENCH_FAULT_ID >> {m}\"\n\
             [[fault]]\nkind = \"command\"\nat = \"4500ms\"\nduration = \"300ms\"\ntimeout = \"300ms\"\n\
             run = \"sleep 20\"\nheal = \"echo heal $LOCKBENCH_FAULT_ID >> {m}\"\n"
        ),
    )
    .unwrap();
    let s = &run_json(
        fx.cmd(
            &w,
            &["run", "--json", "--strategy", "redis-lua-decr", "--chaos"],
        )
        .arg(&chaos)
        .arg("--out")
        .arg(dir.path().join("out")),
    );
    assert_eq!(s.faults.len(), 3, "{:?}", s.faults);
    let pause = &s.faults[0];
    assert!(pause.note.is_none(), "{pause:?}");
    let rate = |name: &str| {
        s.phases
            .iter()
            .find(|p| p.name == name)
            .unwrap_or_else(|| panic!("no phase {name}: {:?}", s.phases))
            .sales_per_s
    };
    assert!(
        rate("during 1") < rate("before") / 2.0,
        "a stopped Redis still sold: {:?}",
        s.phases
    );
    assert!(
        rate("after 1") > 0.0,
        "no sales after the heal: {:?}",
        s.phases
    );
    assert!(
        s.faults[1]
            .note
            .as_deref()
            .unwrap_or("")
            .contains("exit status: 7"),
        "{:?}",
        s.faults[1]
    );
    assert!(
        s.faults[2]
            .note
            .as_deref()
            .unwrap_or("")
            .contains("did not finish within 300ms"),
        "{:?}",
        s.faults[2]
    );
    let text = std::fs::read_to_string(&marks).unwrap();
    assert_eq!(text, "run 2\nheal 2\nheal 3\n");
    // Redis runs again (not left stopped by the fault).
    assert_eq!(
        fx.redis_cmd(&["PING"]),
        redis::Value::SimpleString("PONG".into())
    );
    fx.serve.stop();
}

/// A Sentinel deployment with passwords everywhere: the data nodes require one (`[redis]`
/// names only the login), the sentinels require one of clients and of each other. A 6 s
/// SIGSTOP of the master makes the sentinels fail over, which they can only do with the
/// master's password; the strategy finds the new master through the sentinels' login and
/// sells again. Neither password reaches the results; a wrong sentinel password is reported.
#[test]
fn sentinel_logins_reach_the_master_through_a_failover() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let serve = Serve::start(&dir.join("serve"), "redis-sentinel");
    let f = serve.file();
    let node = |name: &str| -> (SocketAddr, u64) {
        let n = f["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["name"] == name)
            .unwrap_or_else(|| panic!("no node {name}: {f}"));
        (
            n["addr"].as_str().unwrap().parse().unwrap(),
            n["pid"].as_u64().unwrap(),
        )
    };
    let (master, master_pid) = node("redis-master");
    let data = [master, node("redis-replica-1").0, node("redis-replica-2").0];
    let sentinels: Vec<SocketAddr> = (1..=3).map(|i| node(&format!("sentinel-{i}")).0).collect();
    let (redis_pw, sentinel_pw) = (
        uuid::Uuid::new_v4().simple().to_string(),
        uuid::Uuid::new_v4().simple().to_string(),
    );
    let query = |addr: SocketAddr, pw: Option<&str>, args: &[&str]| {
        let auth = pw.map(|p| Auth {
            username: None,
            password: p.to_string(),
        });
        let client = lockbench::cluster::redis::client(addr, auth.as_ref()).unwrap();
        let mut con = client.get_connection()?;
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query::<redis::Value>(&mut con)
    };
    let master_name = lockbench::cluster::sentinel::MASTER_NAME;
    // Replicas and sentinels learn the password before the data nodes require it.
    for a in data {
        query(a, None, &["CONFIG", "SET", "masterauth", &redis_pw]).unwrap();
    }
    for &s in &sentinels {
        query(
            s,
            None,
            &["SENTINEL", "SET", master_name, "auth-pass", &redis_pw],
        )
        .unwrap();
        query(
            s,
            None,
            &["SENTINEL", "CONFIG", "SET", "sentinel-pass", &sentinel_pw],
        )
        .unwrap();
    }
    for a in data {
        query(a, None, &["CONFIG", "SET", "requirepass", &redis_pw]).unwrap();
    }
    for &s in &sentinels {
        query(
            s,
            None,
            &[
                "ACL",
                "SETUSER",
                "default",
                "on",
                &format!(">{sentinel_pw}"),
            ],
        )
        .unwrap();
    }
    // Connections made before the passwords stay logged in: cut them all (replication,
    // the sentinels' links to the data nodes and to each other) so every one is remade with
    // the password it is configured with.
    for a in data {
        for kind in ["normal", "pubsub", "replica"] {
            query(a, Some(&redis_pw), &["CLIENT", "KILL", "TYPE", kind]).unwrap();
        }
    }
    for &s in &sentinels {
        query(s, Some(&sentinel_pw), &["CLIENT", "KILL", "TYPE", "normal"]).unwrap();
    }
    assert!(
        query(sentinels[0], None, &["PING"]).is_err(),
        "the sentinels must refuse anonymous clients"
    );
    // The links just cut are remade with the passwords over the next seconds (hello messages
    // every 2 s). A pause before they are back finds sentinels that cannot vote or reach the
    // replicas, and a failed election waits 2 × failover-timeout before retrying (CI, Nov 27:
    // no failover within a 4 s pause). Wait until every sentinel sees its peers and both
    // replicas again.
    let linked = |s: SocketAddr| {
        let ask = |what: &str| {
            query(s, Some(&sentinel_pw), &["SENTINEL", what, master_name])
                .ok()
                .and_then(|v| redis::from_redis_value::<Vec<Vec<String>>>(v).ok())
                .unwrap_or_default()
        };
        let flags = |entries: Vec<Vec<String>>, want: &str| {
            entries.len() == 2
                && entries.iter().all(|kv| {
                    kv.chunks(2)
                        .any(|p| p.len() == 2 && p[0] == "flags" && p[1] == want)
                })
        };
        flags(ask("REPLICAS"), "slave") && flags(ask("SENTINELS"), "sentinel")
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !sentinels.iter().all(|&s| linked(s)) {
        assert!(
            std::time::Instant::now() < deadline,
            "the sentinels did not see their peers and replicas again within 30 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let mysql = &f["endpoints"]["mysql"];
    let quoted: Vec<String> = sentinels.iter().map(|a| format!("\"{a}\"")).collect();
    let target = dir.join("sentinel.toml");
    std::fs::write(
        &target,
        format!(
            "prefix = \"{PREFIX}\"\n[mysql]\ndsn = \"mysql://{}@{}/{}\"\npassword_env = \"{PASSWORD_ENV}\"\n\
             [redis]\npassword_env = \"{REDIS_PASSWORD_ENV}\"\n\
             [sentinel]\nnodes = [{}]\nmaster = \"{master_name}\"\npassword_env = \"{SENTINEL_PASSWORD_ENV}\"\n",
            mysql["user"].as_str().unwrap(),
            mysql["addr"].as_str().unwrap(),
            mysql["database"].as_str().unwrap(),
            quoted.join(", "),
        ),
    )
    .unwrap();
    let chaos = dir.join("stop-master.toml");
    std::fs::write(
        &chaos,
        format!(
            "[[fault]]\nkind = \"command\"\nat = \"2s\"\nduration = \"6s\"\n\
             run = \"kill -STOP {master_pid}\"\nheal = \"kill -CONT {master_pid}\"\n"
        ),
    )
    .unwrap();
    let w = workload_file(
        dir,
        "[inventory]\nskus = 4\nstock = 100000\n[load]\nmode = \"open\"\nrate = 100\n\
         clients = 16\nduration = \"10s\"\ntimeout = \"300ms\"\n[critical_section]\nhold = \"1ms\"\n",
    );
    let run = |sentinel_pw: &str, out: &str, chaos: Option<&Path>| {
        let mut c = lockbench();
        c.env(PASSWORD_ENV, f["mysql_password"].as_str().unwrap())
            .env(REDIS_PASSWORD_ENV, &redis_pw)
            .env(SENTINEL_PASSWORD_ENV, sentinel_pw)
            .args(["run", "--json", "--strategy", "redis-sentinel", "--target"])
            .arg(&target)
            .arg("--workload")
            .arg(&w);
        if let Some(chaos) = chaos {
            c.arg("--chaos").arg(chaos);
        }
        c.arg("--out").arg(dir.join(out)).output().unwrap()
    };
    let res = run("wrong", "wrong", None);
    let err = String::from_utf8_lossy(&res.stderr);
    assert_eq!(res.status.code(), Some(2), "{err}");
    assert!(
        err.contains("sentinel") && err.contains("authentication failed"),
        "{err}"
    );
    let res = run(&sentinel_pw, "out", Some(&chaos));
    let s = &summaries(&res, "a run through a failover")[0];
    // The master at the start is recorded with the version it reported through the login.
    let recorded = s.servers.iter().find(|n| n.name == "redis-master");
    assert!(
        recorded.is_some_and(|n| n.addr == master && !n.version.starts_with("unreachable")),
        "{:?}",
        s.servers
    );
    assert!(s.faults[0].note.is_none(), "{:?}", s.faults);
    let after = s.phases.iter().find(|p| p.name == "after 1").unwrap();
    assert!(
        after.sold > 0,
        "no sales after the failover: {:?}",
        s.phases
    );
    // The sentinels moved the master away from the stopped one: they reached the replicas
    // and each other through the passwords.
    let now = query(
        sentinels[0],
        Some(&sentinel_pw),
        &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", master_name],
    )
    .unwrap();
    let (_, port): (String, u16) = redis::from_redis_value(now).unwrap();
    assert_ne!(port, master.port(), "no failover happened");
    let text = all_text(&dir.join("out"));
    for pw in [&redis_pw, &sentinel_pw] {
        assert!(
            !text.contains(pw.as_str()),
            "a password was written into the results"
        );
    }
    serve.stop();
}

/// A target file naming the nodes of a Redis Cluster (here one `lockbench serve` formed): it is
/// checked to be a ready cluster and used as it is; the run is safe, lists the six nodes, and
/// leaves no key under its prefix on any of them.
#[test]
fn a_target_file_naming_a_redis_cluster_is_accepted_and_left_clean() {
    if !servers_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let serve = Serve::start(&dir.path().join("serve"), "redis-cluster-setnx");
    let f = serve.file();
    let (ep, mysql) = (&f["endpoints"], &f["endpoints"]["mysql"]);
    let nodes: Vec<SocketAddr> = (ep["redis_cluster"].as_array().unwrap().iter())
        .map(|a| a.as_str().unwrap().parse().unwrap())
        .collect();
    assert_eq!(nodes.len(), 6, "{ep}");
    let quoted: Vec<String> = nodes.iter().map(|a| format!("\"{a}\"")).collect();
    let text = format!(
        "prefix = \"{PREFIX}\"\n[mysql]\ndsn = \"mysql://{}@{}/{}\"\npassword_env = \"{PASSWORD_ENV}\"\n\
         [redis_cluster]\nnodes = [{}]\n",
        mysql["user"].as_str().unwrap(),
        mysql["addr"].as_str().unwrap(),
        mysql["database"].as_str().unwrap(),
        quoted.join(", "),
    );
    let target = dir.path().join("target.toml");
    std::fs::write(&target, text).unwrap();
    let w = workload_file(dir.path(), WORKLOAD);
    let s = run_json(
        lockbench()
            .env(PASSWORD_ENV, f["mysql_password"].as_str().unwrap())
            .args([
                "run",
                "--json",
                "--strategy",
                "redis-cluster-setnx",
                "--target",
            ])
            .arg(&target)
            .arg("--workload")
            .arg(&w)
            .arg("--out")
            .arg(dir.path().join("out")),
    );
    assert_eq!(s.provisioner, Provisioner::Target);
    assert!(s.safe && s.audit.sold > 0, "{:?}", s.audit);
    let cluster_nodes = s
        .servers
        .iter()
        .filter(|n| n.service == Service::RedisCluster);
    assert_eq!(cluster_nodes.count(), 6, "{:?}", s.servers);
    for a in nodes {
        let client = redis::Client::open(format!("redis://{a}")).unwrap();
        let mut con = client.get_connection().unwrap();
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{PREFIX}:*"))
            .query(&mut con)
            .unwrap();
        assert_eq!(keys, Vec::<String>::new(), "{a} keeps keys of the run");
    }
    serve.stop();
}
