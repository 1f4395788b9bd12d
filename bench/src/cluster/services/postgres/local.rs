//! PostgreSQL as child processes: `initdb` (or `pg_basebackup -R` for a replica) into a
//! private data directory, then `postgres` on the reserved address.
//!
//! PostgreSQL refuses to run as root. When lockbench is root (CI is), initdb, pg_basebackup
//! and the server run as the `postgres` system user the Debian package creates, in a
//! directory that user owns and can reach. The postmaster's children (backends, WAL writer,
//! WAL sender/receiver) each leave its process group (`setsid`), so a kill or a pause of the
//! node reaches them one by one ([`PgServer`]).

use std::net::{IpAddr, SocketAddr};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::{
    DATABASE, HBA, NAME, REPLICA, SUPERUSER, USER, create_user, password, pooler, random_password,
    server_settings, superuser, version,
};
use crate::cluster::backend::wait_ready;
use crate::cluster::builds::PostgresBuild;
use crate::cluster::durability::SynchronousCommit;
use crate::cluster::error::ClusterError;
use crate::cluster::local::Local;
use crate::cluster::model::{ContainerInfo, Pooler, Pooling, PostgresEndpoint, Role, Service};
use crate::cluster::node::{Node, NodeServer};
use crate::cluster::owner::Owner;
use crate::cluster::process::ServerProcess;
use crate::cluster::procfs;

/// The package that creates the system user.
const PACKAGE: &str = "postgresql-15";
/// The system user the package creates, which the servers run as when lockbench is root.
const SYSTEM_USER: &str = "postgres";
/// Bound of `initdb` and of a replica's base backup.
const SETUP_TIMEOUT: Duration = Duration::from_secs(120);

/// `program` of the run's PostgreSQL build, or an error naming how to install it.
fn bin(local: &Local, program: &str) -> Result<PathBuf, ClusterError> {
    local.builds().postgres.program(program)
}

pub(super) fn check_installed(build: PostgresBuild) -> Result<(), ClusterError> {
    for p in ["initdb", "postgres", "pg_basebackup"] {
        build.program(p)?;
    }
    if is_root() {
        system_user()?;
    }
    Ok(())
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// The (uid, gid) of [`SYSTEM_USER`].
fn system_user() -> Result<(u32, u32), ClusterError> {
    match nix::unistd::User::from_name(SYSTEM_USER) {
        Ok(Some(u)) => Ok((u.uid.as_raw(), u.gid.as_raw())),
        _ => Err(ClusterError::Setup {
            node: NAME.into(),
            what: "find the postgres user".into(),
            detail: format!(
                "PostgreSQL refuses to run as root and there is no `{SYSTEM_USER}` user to run \
                 it as: install {PACKAGE} (apt-get install {PACKAGE}), which creates it"
            ),
        }),
    }
}

/// Who the servers run as: `None` for lockbench's own user, the `postgres` user when root.
fn run_as() -> Result<Option<(u32, u32)>, ClusterError> {
    is_root().then(system_user).transpose()
}

/// Whether every directory from `dir` up to `/` lets other users through (`o+x`): the
/// `postgres` user owns only its node directory.
fn traversable(dir: &Path) -> bool {
    dir.ancestors().all(|d| {
        d.metadata()
            .map(|m| m.permissions().mode() & 0o001 != 0)
            .unwrap_or(false)
    })
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> ClusterError {
    move |e| ClusterError::io(what, e)
}

/// The directory of node `name`, owned by `user` when given. It is the run's own node
/// directory when the `postgres` user can reach it: the run directory (0700, made by
/// `tempfile`) is opened to others for traversal only (0711: no listing), and every directory
/// above it must let others through. When one does not (a `TMPDIR` under `/root`), the node
/// gets a directory of its own under `/tmp`, which lets everyone through; it is removed with
/// the node ([`PgServer`]).
fn node_dir(
    local: &Local,
    name: &str,
    user: Option<(u32, u32)>,
) -> Result<(PathBuf, Option<tempfile::TempDir>), ClusterError> {
    let Some((uid, gid)) = user else {
        return Ok((local.dir(name)?, None));
    };
    let root = local.data_root();
    std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o711))
        .map_err(io(format!("chmod {}", root.display())))?;
    let (dir, own) = if traversable(root) {
        (local.dir(name)?, None)
    } else {
        let tmp = tempfile::Builder::new()
            .prefix("lockbench-postgres-")
            .tempdir_in("/tmp")
            .map_err(io("create a directory in /tmp".into()))?;
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o711))
            .map_err(io(format!("chmod {}", tmp.path().display())))?;
        Owner::mark(tmp.path()).map_err(io(format!("mark {}", tmp.path().display())))?;
        let dir = tmp.path().join(name);
        std::fs::create_dir(&dir).map_err(io(format!("create {}", dir.display())))?;
        (dir, Some(tmp))
    };
    std::os::unix::fs::chown(&dir, Some(uid), Some(gid))
        .map_err(io(format!("chown {}", dir.display())))?;
    Ok((dir, own))
}

/// Runs `cmd` (as `user`) to its end, bounded by [`SETUP_TIMEOUT`], its output in `log`.
async fn run_to_end(
    name: &str,
    ip: IpAddr,
    cmd: Command,
    log: &Path,
    user: Option<(u32, u32)>,
) -> Result<(), ClusterError> {
    let mut p = ServerProcess::spawn_as(name, ip, cmd, log, user)?;
    let deadline = tokio::time::Instant::now() + SETUP_TIMEOUT;
    loop {
        if let Some(status) = p.exited() {
            return if status.success() {
                Ok(())
            } else {
                Err(p.died(status))
            };
        }
        if tokio::time::Instant::now() > deadline {
            return Err(ClusterError::NotReady {
                node: name.into(),
                waited: SETUP_TIMEOUT,
                last: "still running".into(),
                log: log.to_path_buf(),
            });
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A file in `dir` holding `text`, readable by `user` only.
fn private_file(
    dir: &Path,
    name: &str,
    text: &str,
    user: Option<(u32, u32)>,
) -> Result<PathBuf, ClusterError> {
    let path = dir.join(name);
    std::fs::write(&path, text).map_err(io(format!("write {}", path.display())))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
        .map_err(io(format!("chmod {}", path.display())))?;
    if let Some((uid, gid)) = user {
        std::os::unix::fs::chown(&path, Some(uid), Some(gid))
            .map_err(io(format!("chown {}", path.display())))?;
    }
    Ok(path)
}

/// `initdb` of `data` with superuser password `su_password`, then lockbench's `pg_hba.conf`.
async fn init(
    local: &Local,
    dir: &Path,
    su_password: &str,
    user: Option<(u32, u32)>,
) -> Result<(), ClusterError> {
    let pwfile = private_file(dir, "pwfile", su_password, user)?;
    let data = dir.join("data");
    let mut cmd = Command::new(bin(local, "initdb")?);
    cmd.arg("-D")
        .arg(&data)
        .args([
            "-U",
            SUPERUSER,
            "-E",
            "UTF8",
            "--no-locale",
            "--no-instructions",
        ])
        .arg(format!("--pwfile={}", pwfile.display()))
        .args(["--auth=scram-sha-256"])
        // The data directory lives and dies with the run: no fsync of its files.
        .arg("--no-sync")
        .current_dir(dir);
    let log = local.log("postgres-initdb");
    let ran = run_to_end("initdb", local.addr(NAME).ip(), cmd, &log, user).await;
    let _ = std::fs::remove_file(&pwfile);
    ran?;
    // initdb made it (owned by the server's user); rewriting it keeps owner and mode.
    let hba = data.join("pg_hba.conf");
    std::fs::write(&hba, HBA).map_err(io(format!("write {}", hba.display())))
}

/// The `postgres` command of node `name` on its data in `dir`.
fn server(
    local: &Local,
    name: &str,
    dir: &Path,
    sync: SynchronousCommit,
) -> Result<Command, ClusterError> {
    let addr = local.addr(name);
    let mut cmd = Command::new(bin(local, "postgres")?);
    cmd.arg("-D")
        .arg(dir.join("data"))
        .args(server_settings(&addr.ip().to_string(), addr.port(), sync))
        .current_dir(dir);
    Ok(cmd)
}

/// Initialises a data directory, starts the primary on its reserved address and creates the
/// database and user; returns the node, the login, and the superuser's password (the
/// replica's base backup needs it).
/// With `pooling`'s pooler, also starts it in front of the primary ([`start_pooler`]).
pub(super) async fn start_primary(
    local: &Local,
    sync: SynchronousCommit,
    pooling: &Pooling,
) -> Result<(Node, PostgresEndpoint, String), ClusterError> {
    let user = run_as()?;
    let addr = local.addr(NAME);
    if pooling.pooler != Pooler::None {
        pooler::program()?;
    }
    let (dir, own) = node_dir(local, NAME, user)?;
    let su_password = random_password();
    init(local, &dir, &su_password, user).await?;
    let process = local.spawn_as(NAME, server(local, NAME, &dir, sync)?, user)?;
    let mut server = PgServer {
        process,
        pooler: None,
        _dir: own,
    };
    let su = superuser(addr, &su_password);
    let version = wait_ready(NAME, &mut [&mut server], || version(su.clone())).await?;
    let password = password()?;
    create_user(&su, &password).await?;
    let mut endpoint = PostgresEndpoint {
        addr,
        user: USER.into(),
        password,
        database: DATABASE.into(),
        pooler: None,
    };
    if pooling.pooler != Pooler::None {
        let (process, at) = start_pooler(local, &dir, user, &endpoint, pooling).await?;
        server.pooler = Some(process);
        endpoint.pooler = Some(at);
    }
    let node = Node {
        name: NAME.into(),
        service: Service::Postgres,
        role: Role::Primary,
        addr,
        version,
        server: Box::new(server),
    };
    Ok((node, endpoint, su_password))
}

/// Starts PgBouncer on the reserved `postgres (pooler)` address, pooling `ep`'s database, its
/// configuration and userlist in the primary's directory `dir` (readable by `user` only: the
/// userlist holds the password), as `user` when given (PgBouncer refuses to run as root too);
/// waits until a buyer's login through it reaches the server.
async fn start_pooler(
    local: &Local,
    dir: &Path,
    user: Option<(u32, u32)>,
    ep: &PostgresEndpoint,
    pooling: &Pooling,
) -> Result<(ServerProcess, crate::cluster::PoolerEndpoint), ClusterError> {
    let listen = local.addr(pooler::PORT_NAME);
    let auth = private_file(dir, "pgbouncer-users.txt", &pooler::userlist(ep), user)?;
    let ini = pooler::ini((listen, ep.addr), ep, pooling, &auth);
    let ini = private_file(dir, "pgbouncer.ini", &ini, user)?;
    let mut cmd = Command::new(pooler::program()?);
    cmd.arg(&ini).current_dir(dir);
    let log = local.log(pooler::NAME);
    let mut process = ServerProcess::spawn_as(pooler::NAME, listen.ip(), cmd, &log, user)?;
    let at = pooler::endpoint(listen, pooling);
    let behind = PostgresEndpoint {
        pooler: Some(at),
        ..ep.clone()
    };
    wait_ready(pooler::NAME, &mut [&mut process], || {
        pooler::ready(behind.clone())
    })
    .await?;
    Ok((process, at))
}

/// Copies the primary at `primary` (superuser password beside it) with `pg_basebackup -R`,
/// which also writes the replica's `primary_conninfo` and `standby.signal`, and starts the
/// replica on its reserved address.
pub(super) async fn start_replica(
    local: &Local,
    (primary, su_password): (SocketAddr, &str),
    sync: SynchronousCommit,
) -> Result<Node, ClusterError> {
    let user = run_as()?;
    let addr = local.addr(REPLICA);
    let (dir, own) = node_dir(local, REPLICA, user)?;
    let mut cmd = Command::new(bin(local, "pg_basebackup")?);
    cmd.arg("-D")
        .arg(dir.join("data"))
        .args([
            "-h",
            &primary.ip().to_string(),
            "-p",
            &primary.port().to_string(),
        ])
        .args([
            "-U",
            SUPERUSER,
            "-R",
            "-X",
            "stream",
            "-c",
            "fast",
            "--no-sync",
        ])
        .env("PGPASSWORD", su_password)
        .current_dir(&dir);
    let log = local.log("postgres-basebackup");
    run_to_end("pg_basebackup", addr.ip(), cmd, &log, user).await?;
    let process = local.spawn_as(REPLICA, server(local, REPLICA, &dir, sync)?, user)?;
    let mut server = PgServer {
        process,
        pooler: None,
        _dir: own,
    };
    let su = superuser(addr, su_password);
    let version = wait_ready(REPLICA, &mut [&mut server], || version(su.clone())).await?;
    Ok(Node {
        name: REPLICA.into(),
        service: Service::Postgres,
        role: Role::Replica,
        addr,
        version,
        server: Box::new(server),
    })
}

/// A local PostgreSQL node: its postmaster, the pooler in front of a primary (a companion
/// the node's faults leave alone: it reconnects to a restarted server as PgBouncer does), and
/// the directory it was given outside the run's (removed after the processes stop: fields drop
/// in order). Like the server, the pooler dies with lockbench (`PR_SET_PDEATHSIG`).
#[derive(Debug)]
struct PgServer {
    process: ServerProcess,
    pooler: Option<ServerProcess>,
    _dir: Option<tempfile::TempDir>,
}

/// The processes whose parent is `pid` (the postmaster's backends and helpers).
fn children(pid: u32) -> Vec<Pid> {
    (procfs::all().into_iter())
        .filter(|(_, s)| s.ppid == pid)
        .map(|(child, _)| Pid::from_raw(child as i32))
        .collect()
}

/// Whether process `pid` has exited (gone, or a zombie nobody reaped yet).
fn gone(pid: Pid) -> bool {
    procfs::stat(pid.as_raw() as u32).is_none_or(|s| s.state == 'Z')
}

impl PgServer {
    /// SIGKILL to the postmaster's children, then to the postmaster (stopped first, so it
    /// neither forks nor lets its children be reparented while they are listed).
    /// Returns once the children are gone (at most 5 s): they hold the shared memory a
    /// restarted postmaster checks before it starts.
    fn kill_tree(&mut self) {
        let mut killed = Vec::new();
        if self.process.exited().is_none() {
            let _ = kill(Pid::from_raw(self.process.pid() as i32), Signal::SIGSTOP);
            killed = children(self.process.pid());
            for c in &killed {
                let _ = kill(*c, Signal::SIGKILL);
            }
        }
        self.process.kill();
        for _ in 0..500 {
            if killed.iter().all(|c| gone(*c)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        tracing::warn!(node = NAME, "postgres backends did not exit after SIGKILL");
    }

    /// `sig` to every child of the postmaster.
    fn signal_children(&self, sig: Signal) -> std::io::Result<()> {
        for c in children(self.process.pid()) {
            kill(c, sig).map_err(std::io::Error::from)?;
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl NodeServer for PgServer {
    fn pid(&self) -> u32 {
        self.process.pid()
    }

    fn log(&self) -> &Path {
        self.process.log()
    }

    fn container(&self) -> Option<ContainerInfo> {
        None
    }

    async fn check_running(&mut self, name: &str) -> Result<(), ClusterError> {
        self.process.check_running(name).await
    }

    async fn kill(&mut self) -> Result<(), ClusterError> {
        self.kill_tree();
        Ok(())
    }

    async fn restart(&mut self) -> Result<bool, ClusterError> {
        self.kill_tree();
        self.process.respawn().map(|()| true)
    }

    /// The postmaster first (it forks no new backend then), then every child: a backend
    /// already serving a client would go on answering otherwise.
    async fn pause(&mut self) -> Result<(), ClusterError> {
        let err = |e| ClusterError::io(format!("SIGSTOP {NAME}"), e);
        self.process.pause().map_err(err)?;
        self.signal_children(Signal::SIGSTOP).map_err(err)
    }

    async fn resume(&mut self) -> Result<(), ClusterError> {
        let err = |e| ClusterError::io(format!("SIGCONT {NAME}"), e);
        self.signal_children(Signal::SIGCONT).map_err(err)?;
        self.process.resume().map_err(err)
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        self.kill_tree();
    }
}
