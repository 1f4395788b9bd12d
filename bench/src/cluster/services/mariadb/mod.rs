//! A private MariaDB: its own datadir (`mariadb-install-db`), socket and port, plus a
//! `lockbench` database and a password user for TCP clients. Locally the harness runs the
//! install and creates the user through the socket; a container does both in its start script
//! (it runs again on a restart, which then skips the install). The flags are the same.

use std::process::Command;
use std::time::Duration;

use sqlx::{ConnectOptions, Connection, Executor, mysql::MySqlConnectOptions, mysql::MySqlSslMode};

use async_trait::async_trait;

use super::{first, rows};
use crate::cluster::backend::wait_ready;
use crate::cluster::binary::find_binary;
use crate::cluster::builds::{Builds, MysqlBuild};
use crate::cluster::containers::{Containers, Image, Spec};
use crate::cluster::counters::{BYTES_IN, BYTES_OUT, FSYNCS, Meter, Reading, TOTAL};
use crate::cluster::durability::{Acked, Durability, queried, setting};
use crate::cluster::error::ClusterError;
use crate::cluster::external::{
    MARKER, Missing, bounded, cleaned, owned_or_empty, target_err, unowned_node,
};
use crate::cluster::kind::{About, FromTarget, NodeAt, ServiceKind, Start, Started};
use crate::cluster::local::Local;
use crate::cluster::model::{Endpoints, MysqlEndpoint, NodeInfo, Role, Service};
use crate::cluster::namespace::Prefix;
use crate::cluster::node::Node;
use crate::cluster::process::ServerProcess;
use crate::cluster::provision::Launcher;

/// MariaDB's password for the user lockbench creates (or a worker's login to it).
pub const PASSWORD_ENV: &str = "LOCKBENCH_MYSQL_PASSWORD";

/// Its image: MariaDB (`mariadb-install-db`, `mariadbd`, `sh`).
pub(in crate::cluster) const IMAGE: Image = Image {
    var: "LOCKBENCH_IMAGE_MARIADB",
    official: "mariadb:10.11",
};

/// Its image: MySQL 9, for `servers.mysql = "mysql-9"` (`mysqld`, `sh`).
pub(in crate::cluster) const MYSQL_IMAGE: Image = Image {
    var: "LOCKBENCH_IMAGE_MYSQL",
    official: "mysql:9",
};

/// The image of the database server `build`.
fn image(build: MysqlBuild) -> Image {
    match build {
        MysqlBuild::Mariadb1011 => IMAGE,
        MysqlBuild::Mysql9 => MYSQL_IMAGE,
    }
}

/// The node's name.
const NAME: &str = "mariadb";
const DATABASE: &str = "lockbench";
const USER: &str = "lockbench";
/// Port inside a container (a local node gets a reserved one).
const PORT: u16 = 3306;

/// `mariadb-install-db` flags after the datadir, wherever it runs.
const INSTALL_FLAGS: [&str; 3] = [
    "--auth-root-authentication-method=normal",
    "--skip-test-db",
    "--innodb-log-file-size=8M",
];

/// How many connections the server accepts ([`MAX_CONNECTIONS_FLAG`]).
pub const MAX_CONNECTIONS: u32 = 2000;
const MAX_CONNECTIONS_FLAG: &str = "--max-connections=2000";

/// `mariadbd` flags after its paths and address, wherever it runs.
const SERVER_FLAGS: [&str; 5] = [
    "--skip-log-bin",
    "--skip-name-resolve",
    "--innodb-buffer-pool-size=128M",
    "--innodb-log-file-size=8M",
    MAX_CONNECTIONS_FLAG,
];

/// The password of the user lockbench creates: LOCKBENCH_MYSQL_PASSWORD when set (workers on
/// other hosts of `lockbench coordinate` read it from there: it never crosses their link), a
/// fresh random one otherwise.
fn password() -> Result<String, ClusterError> {
    let var = PASSWORD_ENV;
    match std::env::var(var) {
        Ok(p)
            if !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') =>
        {
            Ok(p)
        }
        Ok(_) => Err(ClusterError::Setup {
            node: NAME.into(),
            what: format!("password from {var}"),
            detail: "expected letters, digits, `_` or `-` (it goes into a SQL statement)".into(),
        }),
        Err(_) => Ok(uuid::Uuid::new_v4().simple().to_string()),
    }
}

/// The statements that create the database and the user with `password`. DDL cannot take
/// bind parameters; the values are our own constants and a hex uuid (or a printf `%s`).
fn grants(password: &str) -> [String; 3] {
    [
        format!("CREATE DATABASE IF NOT EXISTS {DATABASE}"),
        format!("CREATE USER IF NOT EXISTS '{USER}'@'%' IDENTIFIED BY '{password}'"),
        format!("GRANT ALL ON {DATABASE}.* TO '{USER}'@'%'"),
    ]
}

/// `--innodb-flush-log-at-trx-commit=N` ([`ClusterOptions::mariadb_flush_log_at_trx_commit`]):
/// 1 fsyncs the redo log at every commit, 2 writes it at commit and fsyncs once a second.
fn flush_flag(n: u8) -> String {
    format!("--innodb-flush-log-at-trx-commit={n}")
}

/// Starts the server (its redo log flushed as `flush` says) and creates the database and user
/// the strategies use.
pub(in crate::cluster) async fn start(
    l: Launcher<'_>,
    flush: u8,
) -> Result<(Node, MysqlEndpoint), ClusterError> {
    match l {
        Launcher::Local(local) => start_local(local, flush).await,
        Launcher::Containers(run) => start_container(run, flush).await,
    }
}

pub(in crate::cluster) fn check_installed() -> Result<(), ClusterError> {
    find_binary("mariadbd", "mariadb-server")?;
    find_binary("mariadb-install-db", "mariadb-server").map(|_| ())
}

fn running_as_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Initialises a datadir, starts `mariadbd` on its reserved address, and creates the database
/// and user through the socket.
async fn start_local(local: &Local, flush: u8) -> Result<(Node, MysqlEndpoint), ClusterError> {
    let addr = local.addr(NAME);
    let dir = &local.dir(NAME)?;
    let install = find_binary("mariadb-install-db", "mariadb-server")?;
    let server = find_binary("mariadbd", "mariadb-server")?;
    let datadir = dir.join("data");
    // A private tmpdir: concurrent bootstraps sharing /tmp collide on their temporary tables
    // ("Unknown table 'mysql.tmp_user_sys'"; 2 of 6 parallel installs failed that way).
    let tmpdir = dir.join("tmp");
    for d in [&datadir, &tmpdir] {
        std::fs::create_dir_all(d)
            .map_err(|e| ClusterError::io(format!("create {}", d.display()), e))?;
    }
    // mariadbd refuses to run as root unless told to; as another user it runs as that user.
    let user_arg = running_as_root().then_some("--user=root");

    let mut flags: Vec<&str> = INSTALL_FLAGS.to_vec();
    flags.extend(user_arg);
    let kept = crate::cluster::datadir_cache::key("mariadb", &[&install, &server], &flags);
    let init = install_datadir(local, addr.ip(), &install, &datadir, &tmpdir, user_arg);
    crate::cluster::datadir_cache::init_or_copy(&kept, &datadir, init).await?;

    let mut cmd = Command::new(server);
    cmd.arg("--no-defaults")
        .arg(format!("--datadir={}", datadir.display()))
        .arg(format!("--tmpdir={}", tmpdir.display()))
        .arg(format!("--port={}", addr.port()))
        .arg(format!("--bind-address={}", addr.ip()))
        .arg(format!("--socket={}", dir.join("mysqld.sock").display()))
        .arg(format!("--pid-file={}", dir.join("mysqld.pid").display()))
        .args(SERVER_FLAGS)
        .arg(flush_flag(flush))
        .args(user_arg);
    let mut process = local.spawn(NAME, cmd)?;

    // root@localhost: through the socket, whatever address TCP clients use.
    let root = MySqlConnectOptions::new()
        .socket(dir.join("mysqld.sock"))
        .username("root")
        .ssl_mode(MySqlSslMode::Disabled);
    let password = password()?;
    let version = wait_ready(NAME, &mut [&mut process], || version(root.clone())).await?;

    create_user(&root, &password).await?;

    let endpoint = MysqlEndpoint {
        addr,
        user: USER.into(),
        password,
        database: DATABASE.into(),
    };
    let node = Node {
        name: NAME.into(),
        service: Service::Mariadb,
        role: Role::Primary,
        addr,
        version,
        server: Box::new(process),
    };
    Ok((node, endpoint))
}

/// Runs `mariadb-install-db` on `datadir` and waits (up to 2 minutes) for it to succeed.
async fn install_datadir(
    local: &Local,
    ip: std::net::IpAddr,
    install: &std::path::Path,
    datadir: &std::path::Path,
    tmpdir: &std::path::Path,
    user_arg: Option<&str>,
) -> Result<(), ClusterError> {
    let install_log = local.log("mariadb-install");
    let mut cmd = Command::new(install);
    cmd.arg("--no-defaults")
        .arg(format!("--datadir={}", datadir.display()))
        .arg(format!("--tmpdir={}", tmpdir.display()))
        .args(INSTALL_FLAGS)
        .args(user_arg);
    let mut init = ServerProcess::spawn("mariadb-install-db", ip, cmd, &install_log)?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(status) = init.exited() {
            if !status.success() {
                return Err(init.died(status));
            }
            break;
        }
        if tokio::time::Instant::now() > deadline {
            return Err(ClusterError::NotReady {
                node: "mariadb-install-db".into(),
                waited: Duration::from_secs(120),
                last: "still running".into(),
                log: install_log,
            });
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// Creates the database and the benchmark's user, as root through the socket.
async fn create_user(root: &MySqlConnectOptions, password: &str) -> Result<(), ClusterError> {
    let setup = |detail: sqlx::Error| ClusterError::Setup {
        node: NAME.into(),
        what: "create database and user".into(),
        detail: detail.to_string(),
    };
    let mut con = root.connect().await.map_err(setup)?;
    let ddl = grants(password).join("; ");
    con.execute(sqlx::AssertSqlSafe(ddl)).await.map_err(setup)?;
    let _ = con.close().await;
    Ok(())
}

/// MySQL 9's flags after its paths and address: a redo log of 64 MB (16 MB stalled its own
/// initialisation), no file import or export (its default directory is not in the image).
const MYSQL_FLAGS: [&str; 6] = [
    "--secure-file-priv=NULL",
    "--skip-log-bin",
    "--skip-name-resolve",
    "--innodb-buffer-pool-size=128M",
    "--innodb-redo-log-capacity=64M",
    MAX_CONNECTIONS_FLAG,
];

/// The shell script of the database container of `build`: it installs the datadir unless it
/// exists (it survives a kill: same container), writes an init file with the grants and runs
/// the server. The socket goes to /tmp: /run/mysqld need not exist in the image.
fn container_script(build: MysqlBuild, flush: u8) -> String {
    // printf's format: `%` doubled, the password its one argument.
    let init: String = grants("@PASSWORD@")
        .iter()
        .map(|g| format!("{};\\n", g.replace('%', "%%")))
        .collect::<String>()
        .replace("@PASSWORD@", "%s");
    let (install, server, flags) = match build {
        MysqlBuild::Mariadb1011 => (
            format!(
                "mariadb-install-db --no-defaults --user=root --datadir=$D/data {}",
                INSTALL_FLAGS.join(" ")
            ),
            "mariadbd",
            format!("{} {}", SERVER_FLAGS.join(" "), flush_flag(flush)),
        ),
        // root@localhost without a password, as mariadb-install-db leaves it. The image of
        // scripts/container-images.sh carries a datadir initialised so (8 s saved a run).
        MysqlBuild::Mysql9 => (
            "if [ -d /var/lib/lockbench-mysql/mysql ]; then \
               cp -a /var/lib/lockbench-mysql $D/data; \
             else mysqld --no-defaults --initialize-insecure --user=root --datadir=$D/data \
               --innodb-redo-log-capacity=64M; fi"
                .to_string(),
            "mysqld",
            // No X protocol listener: a second port nobody uses.
            format!(
                "{} --mysqlx=OFF {}",
                MYSQL_FLAGS.join(" "),
                flush_flag(flush)
            ),
        ),
    };
    format!(
        "set -e; D=/tmp/lockbench; mkdir -p $D\n\
         if [ ! -d $D/data/mysql ]; then\n\
           {install} > $D/install.log 2>&1 || {{ cat $D/install.log; exit 1; }}\n\
         fi\n\
         printf \"{init}\" \"$LOCKBENCH_PASSWORD\" > $D/init.sql\n\
         exec {server} --no-defaults --user=root --datadir=$D/data --port={PORT} \
           --bind-address=0.0.0.0 --socket=$D/mysqld.sock {flags} --init-file=$D/init.sql"
    )
}

/// One container of the run's database build ([`container_script`]).
async fn start_container(
    run: &Containers,
    flush: u8,
) -> Result<(Node, MysqlEndpoint), ClusterError> {
    let password = password()?;
    let script = container_script(run.mysql, flush);
    // The node is named after the server that runs (its log is `logs/<name>.log`); the service
    // stays `mariadb`, the one chaos files and strategies name.
    let name = match run.mysql {
        MysqlBuild::Mariadb1011 => NAME,
        MysqlBuild::Mysql9 => "mysql",
    };
    let spec = Spec {
        name: name.into(),
        image: run.images.get(image(run.mysql)),
        cmd: vec!["sh".into(), "-c".into(), script],
        env: vec![("LOCKBENCH_PASSWORD", password.clone())],
    };
    let mut c = run.launch_one(spec).await?;
    let endpoint = MysqlEndpoint {
        addr: c.addr(PORT),
        user: USER.into(),
        password,
        database: DATABASE.into(),
    };
    let version = wait_ready(name, &mut [&mut c], || version(endpoint.connect_options())).await?;
    let node = Node {
        name: name.into(),
        service: Service::Mariadb,
        role: Role::Primary,
        addr: endpoint.addr,
        version,
        server: Box::new(c),
    };
    Ok((node, endpoint))
}

/// The version the server reports, asked through a connection made with `opts`.
pub(in crate::cluster) async fn version(opts: MySqlConnectOptions) -> Result<String, String> {
    let (v,) = first(rows(opts, "SELECT VERSION()").await?)?;
    Ok(v)
}

/// The MariaDB server: the stock table of every MariaDB-backed strategy lives there.
pub(in crate::cluster) struct Mariadb;

const ABOUT: About = About {
    service: Service::Mariadb,
    wanted: |needs| needs.mariadb,
    check_installed: |_| check_installed(),
    port_names: |_| vec![NAME.into()],
    build: Some(|b, v| ("mysql", b.mysql.name(), b.mysql.reports(v))),
    images: &[IMAGE, MYSQL_IMAGE],
};

#[async_trait]
impl ServiceKind for Mariadb {
    fn about(&self) -> &'static About {
        &ABOUT
    }

    fn image(&self, builds: Builds) -> Option<Image> {
        Some(image(builds.mysql))
    }

    async fn start(&self, s: Start<'_>) -> Result<Started, ClusterError> {
        let (node, endpoint) = start(s.launcher, s.opts.mariadb_flush_log_at_trx_commit).await?;
        Ok(Started::new(vec![node], move |ep| {
            ep.mysql = Some(endpoint);
        }))
    }

    async fn durability(&self, n: NodeAt<'_>) -> Option<Durability> {
        let Some(m) = &n.ep.mysql else {
            return Some(Durability::unknown("no MariaDB login".into()));
        };
        let read = settings(m.connect_options());
        Some(
            queried(read, |kv| {
                acked(setting(kv, "innodb_flush_log_at_trx_commit"))
            })
            .await,
        )
    }

    fn work_meter(&self) -> Option<Meter> {
        Some(Meter {
            unit: "statements",
            source: "SHOW GLOBAL STATUS: Questions, Bytes_received, Bytes_sent, \
                     Innodb_row_lock_waits, Innodb_row_lock_time (ms), Com_*, \
                     Innodb_data_fsyncs",
        })
    }

    async fn work(&self, ep: &Endpoints) -> Result<Reading, String> {
        let m = ep.mysql.as_ref().ok_or("no MariaDB login")?;
        let mut con = connection(m).await?;
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SHOW GLOBAL STATUS WHERE Variable_name IN ('Questions', 'Bytes_received', \
             'Bytes_sent', 'Innodb_row_lock_waits', 'Innodb_row_lock_time', 'Com_select', \
             'Com_insert', 'Com_update', 'Com_delete', 'Com_commit', 'Com_rollback', \
             'Innodb_data_fsyncs')",
        )
        .fetch_all(&mut con)
        .await
        .map_err(|e| format!("SHOW GLOBAL STATUS: {e}"))?;
        let _ = con.close().await;
        let mut reading = Reading::default();
        reading.add(m.addr, status_counters(&rows));
        Ok(reading)
    }

    fn copy_from_target(&self, from: FromTarget<'_>, out: &mut Endpoints) -> Result<(), Missing> {
        let db = from.target.mysql.clone();
        out.mysql = Some(db.ok_or(("[mysql]", "a MariaDB or MySQL database".into()))?);
        Ok(())
    }

    async fn claim(&self, ep: &Endpoints) -> Result<(), ClusterError> {
        match &ep.mysql {
            Some(m) => claim_prefix(m, &ep.prefix).await,
            None => Ok(()),
        }
    }

    async fn release(&self, ep: &Endpoints) -> Vec<String> {
        let Some(m) = &ep.mysql else {
            return Vec::new();
        };
        cleaned("mysql", "drop tables", drop_tables(m, &ep.prefix)).await
    }

    async fn describe(&self, ep: &Endpoints) -> Vec<NodeInfo> {
        let Some(m) = &ep.mysql else {
            return Vec::new();
        };
        let v = bounded("version", version(m.connect_options())).await;
        let name = "mysql".to_string();
        vec![unowned_node(
            name,
            Service::Mariadb,
            Role::Primary,
            m.addr,
            v,
        )]
    }
}

/// MariaDB (InnoDB): `innodb_flush_log_at_trx_commit` 1 (and MariaDB's 3) fsync the redo log
/// at every commit, 2 writes it to the OS, 0 leaves it in the log buffer for up to a second.
fn acked(flush_log_at_trx_commit: &str) -> Acked {
    match flush_log_at_trx_commit {
        "1" | "3" => Acked::Disk,
        "2" => Acked::Os,
        "0" => Acked::Memory,
        _ => Acked::Unknown,
    }
}

/// The MariaDB (or MySQL) variables that decide when a commit reaches the disk.
async fn settings(opts: MySqlConnectOptions) -> Result<Vec<(String, String)>, String> {
    let sql = "SHOW GLOBAL VARIABLES WHERE Variable_name IN \
               ('innodb_flush_log_at_trx_commit', 'sync_binlog', 'log_bin')";
    rows(opts, sql).await
}

/// Work counters of `SHOW GLOBAL STATUS` rows: `Questions` is [`TOTAL`] (statements clients
/// sent), the bytes theirs, the rest by their lower-case name (`innodb_row_lock_time` in ms).
fn status_counters(rows: &[(String, String)]) -> std::collections::BTreeMap<String, u64> {
    rows.iter()
        .filter_map(|(k, v)| {
            let key = match k.as_str() {
                "Questions" => TOTAL.to_string(),
                "Bytes_received" => BYTES_IN.to_string(),
                "Bytes_sent" => BYTES_OUT.to_string(),
                // Every fsync InnoDB made, its redo log's included.
                "Innodb_data_fsyncs" => FSYNCS.to_string(),
                other => other.to_ascii_lowercase(),
            };
            Some((key, v.trim().parse().ok()?))
        })
        .collect()
}

async fn connection(m: &MysqlEndpoint) -> Result<sqlx::MySqlConnection, String> {
    m.connect_options()
        .connect()
        .await
        .map_err(|e| e.to_string())
}

/// Tables of the database whose names start with `<prefix>_`.
async fn prefix_tables(con: &mut sqlx::MySqlConnection, p: &Prefix) -> Result<Vec<String>, String> {
    // `_` is a LIKE wildcard: escape it. The prefix is [a-z0-9_] only (validated).
    let like = p.table("").replace('_', "\\_");
    sqlx::query_scalar::<_, String>(
        "SELECT table_name FROM information_schema.tables \
         WHERE table_schema = DATABASE() AND table_name LIKE CONCAT(?, '%')",
    )
    .bind(like)
    .fetch_all(con)
    .await
    .map_err(|e| e.to_string())
}

/// A claim on a MariaDB / MySQL database: tables `<prefix>_*`, marked by `<prefix>_owner`.
async fn claim_prefix(m: &MysqlEndpoint, p: &Prefix) -> Result<(), ClusterError> {
    let err = |e| target_err("mysql", e);
    let mut con = bounded("connect", connection(m)).await.map_err(err)?;
    let tables = bounded("list tables", prefix_tables(&mut con, p))
        .await
        .map_err(err)?;
    let owner = p.table("owner");
    owned_or_empty("mysql", p, &tables, &owner)?;
    let mark = async {
        con.execute(sqlx::AssertSqlSafe(format!(
            "CREATE TABLE IF NOT EXISTS {owner} (note VARCHAR(200) NOT NULL)"
        )))
        .await
        .map_err(|e| e.to_string())?;
        con.execute(sqlx::AssertSqlSafe(format!(
            "INSERT INTO {owner} (note) VALUES ('{MARKER}')"
        )))
        .await
        .map_err(|e| e.to_string())?;
        let _ = con.close().await;
        Ok(())
    };
    bounded("mark the prefix", mark).await.map_err(err)?;
    Ok(())
}

/// Drops every table of the prefix.
async fn drop_tables(m: &MysqlEndpoint, p: &Prefix) -> Result<(), String> {
    let mut con = connection(m).await?;
    for t in prefix_tables(&mut con, p).await? {
        con.execute(sqlx::AssertSqlSafe(format!("DROP TABLE IF EXISTS `{t}`")))
            .await
            .map_err(|e| e.to_string())?;
    }
    let _ = con.close().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connection_limit_is_the_one_the_server_starts_with() {
        assert_eq!(
            MAX_CONNECTIONS_FLAG,
            format!("--max-connections={MAX_CONNECTIONS}")
        );
        assert!(SERVER_FLAGS.contains(&MAX_CONNECTIONS_FLAG));
        assert!(MYSQL_FLAGS.contains(&MAX_CONNECTIONS_FLAG));
    }

    #[test]
    fn global_status_rows_become_work_counters() {
        let rows: Vec<(String, String)> = [
            ("Questions", "120"),
            ("Bytes_received", "4000"),
            ("Bytes_sent", "9000"),
            ("Innodb_row_lock_waits", "7"),
            ("Com_select", "x"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let c = status_counters(&rows);
        assert_eq!((c[TOTAL], c[BYTES_IN], c[BYTES_OUT]), (120, 4000, 9000));
        assert_eq!(c["innodb_row_lock_waits"], 7);
        assert!(!c.contains_key("com_select"));
    }

    #[test]
    fn the_flush_setting_says_where_an_acknowledged_write_is() {
        assert_eq!(acked("1"), Acked::Disk);
        assert_eq!(acked("2"), Acked::Os);
        assert_eq!(acked("0"), Acked::Memory);
    }
}
