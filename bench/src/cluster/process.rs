//! A server child process owned by a guard: dropping the guard kills the process group.

use std::ffi::OsString;
use std::fs::File;
use std::net::IpAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use super::error::ClusterError;
use super::node::NodeServer;

/// A running server process. Dropping it sends SIGKILL to its whole process group and reaps it,
/// so no server outlives the harness on success, error, panic or Ctrl-C.
#[derive(Debug)]
pub struct ServerProcess {
    name: String,
    child: Child,
    log: PathBuf,
    /// How it was started, to restart it the same way after a kill fault.
    spec: Spec,
    /// Stopped by SIGSTOP (a pause fault) and not resumed yet.
    paused: bool,
}

/// A command line that can be run again (`Command` is not `Clone`).
#[derive(Debug, Clone)]
struct Spec {
    program: OsString,
    args: Vec<OsString>,
    envs: Vec<(OsString, Option<OsString>)>,
    cwd: Option<PathBuf>,
    /// Network namespace to run in (a host of the run's private network).
    netns: Option<PathBuf>,
    /// The user (uid, gid) it runs as, when not lockbench's own.
    user: Option<(u32, u32)>,
}

impl Spec {
    fn of(cmd: &Command, ip: IpAddr, user: Option<(u32, u32)>) -> Self {
        Self {
            netns: super::net::netns_of(ip),
            user,
            program: cmd.get_program().to_owned(),
            args: cmd.get_args().map(ToOwned::to_owned).collect(),
            envs: cmd
                .get_envs()
                .map(|(k, v)| (k.to_owned(), v.map(ToOwned::to_owned)))
                .collect(),
            cwd: cmd.get_current_dir().map(Path::to_path_buf),
        }
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args);
        for (k, v) in &self.envs {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        if let Some(dir) = &self.cwd {
            cmd.current_dir(dir);
        }
        cmd
    }
}

impl ServerProcess {
    /// Spawns `cmd` in a new process group with stdout and stderr appended to `log`; a node
    /// whose address `ip` belongs to a host of the run's private network runs in that host's
    /// network namespace.
    ///
    /// The child also gets `PR_SET_PDEATHSIG = SIGKILL`, so even a SIGKILL of lockbench itself
    /// (which runs no destructors) does not leave a server behind.
    pub fn spawn(name: &str, ip: IpAddr, cmd: Command, log: &Path) -> Result<Self, ClusterError> {
        Self::spawn_as(name, ip, cmd, log, None)
    }

    /// [`ServerProcess::spawn`], run as `user` (uid, gid) when given, also on a restart: a
    /// server that refuses to run as root (PostgreSQL) while lockbench is root.
    pub fn spawn_as(
        name: &str,
        ip: IpAddr,
        cmd: Command,
        log: &Path,
        user: Option<(u32, u32)>,
    ) -> Result<Self, ClusterError> {
        let spec = Spec::of(&cmd, ip, user);
        // Private: a server's log names its address.
        let out = crate::logging::create_private(log)
            .map_err(|e| ClusterError::io(format!("create {}", log.display()), e))?;
        let child = launch(name, cmd, out, &spec)?;
        Ok(Self {
            name: name.to_string(),
            child,
            log: log.to_path_buf(),
            spec,
            paused: false,
        })
    }

    /// Kills the process (if still running) and starts it again with the same command line,
    /// appending to the same log: a restart after a crash, on the data it left behind.
    pub fn respawn(&mut self) -> Result<(), ClusterError> {
        self.kill();
        let out = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.log)
            .map_err(|e| ClusterError::io(format!("open {}", self.log.display()), e))?;
        self.child = launch(&self.name, self.spec.command(), out, &self.spec)?;
        self.paused = false;
        Ok(())
    }

    /// SIGSTOP to the whole process group: the server stops answering but keeps its sockets.
    pub fn pause(&mut self) -> std::io::Result<()> {
        killpg(self.pgid(), Signal::SIGSTOP)?;
        self.paused = true;
        Ok(())
    }

    /// SIGCONT after [`ServerProcess::pause`]. Idempotent.
    pub fn resume(&mut self) -> std::io::Result<()> {
        if self.paused {
            killpg(self.pgid(), Signal::SIGCONT)?;
            self.paused = false;
        }
        Ok(())
    }

    fn pgid(&self) -> Pid {
        // The group id equals the child's pid because of `process_group(0)`.
        Pid::from_raw(self.child.id() as i32)
    }

    /// The OS process id (also its process group id).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The file that receives the process's stdout and stderr.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// Returns the exit status if the process has already exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// An error for a process that died during startup, carrying the tail of its log.
    pub fn died(&mut self, status: ExitStatus) -> ClusterError {
        ClusterError::Died {
            node: self.name.clone(),
            status: status.to_string(),
            log: self.log.clone(),
            tail: tail(&self.log, 12),
        }
    }

    /// Kills the process group and reaps the child. Idempotent.
    pub fn kill(&mut self) {
        if self.exited().is_some() {
            return;
        }
        // SIGKILL also ends a stopped (paused) process.
        let _ = killpg(self.pgid(), Signal::SIGKILL);
        // SIGKILL cannot be ignored; reaping takes microseconds, bound it anyway.
        for _ in 0..500 {
            if self.exited().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        tracing::warn!(node = %self.name, pid = self.pid(), "server did not exit after SIGKILL");
    }
}

#[async_trait::async_trait]
impl NodeServer for ServerProcess {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn log(&self) -> &Path {
        &self.log
    }

    async fn check_running(&mut self, _name: &str) -> Result<(), ClusterError> {
        match self.exited() {
            Some(status) => Err(self.died(status)),
            None => Ok(()),
        }
    }

    async fn kill(&mut self) -> Result<(), ClusterError> {
        ServerProcess::kill(self);
        Ok(())
    }

    async fn restart(&mut self) -> Result<bool, ClusterError> {
        self.respawn().map(|()| true)
    }

    async fn pause(&mut self) -> Result<(), ClusterError> {
        ServerProcess::pause(self)
            .map_err(|e| ClusterError::io(format!("SIGSTOP {}", self.name), e))
    }

    async fn resume(&mut self) -> Result<(), ClusterError> {
        ServerProcess::resume(self)
            .map_err(|e| ClusterError::io(format!("SIGCONT {}", self.name), e))
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Spawns `cmd` in its own process group, output to `out`, dying with its parent, in the
/// namespace and as the user of `spec`.
fn launch(name: &str, mut cmd: Command, out: File, spec: &Spec) -> Result<Child, ClusterError> {
    let user = spec.user;
    let ns = (spec.netns.as_deref())
        .map(|p| File::open(p).map_err(|e| ClusterError::io(format!("open {}", p.display()), e)))
        .transpose()?;
    let err = out
        .try_clone()
        .map_err(|e| ClusterError::io("clone log handle", e))?;
    cmd.stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0);
    // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(move || {
            if let Some(ns) = &ns {
                // SAFETY (of the call): setns is a plain syscall on an fd opened before fork.
                nix::sched::setns(ns, nix::sched::CloneFlags::CLONE_NEWNET)?;
            }
            // Here, not with `Command::uid`, which std applies before this closure: `setns`
            // needs root, and a change of user afterwards would clear the death signal.
            if let Some((uid, gid)) = user {
                let gid = nix::unistd::Gid::from_raw(gid);
                nix::unistd::setgroups(&[gid])?;
                nix::unistd::setgid(gid)?;
                nix::unistd::setuid(nix::unistd::Uid::from_raw(uid))?;
            }
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)
        });
    }
    let program = cmd.get_program().to_string_lossy().into_owned();
    let child = cmd.spawn().map_err(|e| ClusterError::Spawn {
        node: name.to_string(),
        program,
        source: e,
    })?;
    Ok(child)
}

/// The last `lines` lines of a log file, for error messages.
pub fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
