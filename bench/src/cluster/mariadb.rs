//! A private MariaDB: its own datadir (`mariadb-install-db`), socket and port, plus a
//! `lockbench` database and a password user for TCP clients.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use sqlx::{ConnectOptions, Connection, Executor, mysql::MySqlConnectOptions, mysql::MySqlSslMode};

use super::{
    ClusterError, MysqlEndpoint, Node, Role, Server, ServerProcess, Service, find_binary,
    wait_ready,
};

const NAME: &str = "mariadb";
const DATABASE: &str = "lockbench";
const USER: &str = "lockbench";

pub(super) fn check_installed() -> Result<(), ClusterError> {
    find_binary("mariadbd", "mariadb-server")?;
    find_binary("mariadb-install-db", "mariadb-server").map(|_| ())
}

fn running_as_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Initialises a datadir under `dir`, starts `mariadbd` on `addr`, and creates the database
/// and user the strategies use.
pub(super) async fn start(
    addr: SocketAddr,
    dir: &Path,
    log_dir: &Path,
) -> Result<(Node, MysqlEndpoint), ClusterError> {
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

    let install_log = log_dir.join("mariadb-install.log");
    let mut cmd = Command::new(install);
    cmd.arg("--no-defaults")
        .arg(format!("--datadir={}", datadir.display()))
        .arg(format!("--tmpdir={}", tmpdir.display()))
        .args([
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            "--innodb-log-file-size=8M",
        ])
        .args(user_arg);
    let mut init = ServerProcess::spawn("mariadb-install-db", addr.ip(), cmd, &install_log)?;
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

    let mut cmd = Command::new(server);
    cmd.arg("--no-defaults")
        .arg(format!("--datadir={}", datadir.display()))
        .arg(format!("--tmpdir={}", tmpdir.display()))
        .arg(format!("--port={}", addr.port()))
        .arg(format!("--bind-address={}", addr.ip()))
        .arg(format!("--socket={}", dir.join("mysqld.sock").display()))
        .arg(format!("--pid-file={}", dir.join("mysqld.pid").display()))
        .args([
            "--skip-log-bin",
            "--skip-name-resolve",
            "--innodb-buffer-pool-size=128M",
            "--innodb-log-file-size=8M",
            "--max-connections=2000",
        ])
        .args(user_arg);
    let mut process = ServerProcess::spawn(NAME, addr.ip(), cmd, &log_dir.join("mariadb.log"))?;

    // root@localhost: through the socket, whatever address TCP clients use.
    let root = MySqlConnectOptions::new()
        .socket(dir.join("mysqld.sock"))
        .username("root")
        .ssl_mode(MySqlSslMode::Disabled);
    let password = uuid::Uuid::new_v4().simple().to_string();
    let version = wait_ready(NAME, &mut process, || version(root.clone())).await?;

    let setup = |detail: sqlx::Error| ClusterError::Setup {
        node: NAME.into(),
        what: "create database and user".into(),
        detail: detail.to_string(),
    };
    let mut con = root.connect().await.map_err(setup)?;
    // DDL cannot take bind parameters; the values are our own constants and a hex uuid.
    let ddl = format!(
        "CREATE DATABASE IF NOT EXISTS {DATABASE}; \
         CREATE USER IF NOT EXISTS '{USER}'@'%' IDENTIFIED BY '{password}'; \
         GRANT ALL ON {DATABASE}.* TO '{USER}'@'%'"
    );
    con.execute(sqlx::AssertSqlSafe(ddl)).await.map_err(setup)?;
    let _ = con.close().await;

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
        server: Server::Process(process),
    };
    Ok((node, endpoint))
}

/// The version the server reports, asked through a connection made with `opts`.
pub(super) async fn version(opts: MySqlConnectOptions) -> Result<String, String> {
    let mut con = opts.connect().await.map_err(|e| e.to_string())?;
    let v: String = sqlx::query_scalar("SELECT VERSION()")
        .fetch_one(&mut con)
        .await
        .map_err(|e| e.to_string())?;
    let _ = con.close().await;
    Ok(v)
}
