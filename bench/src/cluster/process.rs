//! A server child process owned by a guard: dropping the guard kills the process group.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use super::ClusterError;

/// A running server process. Dropping it sends SIGKILL to its whole process group and reaps it,
/// so no server outlives the harness on success, error, panic or Ctrl-C.
#[derive(Debug)]
pub struct ServerProcess {
    name: String,
    child: Child,
    log: PathBuf,
}

impl ServerProcess {
    /// Spawns `cmd` in a new process group with stdout and stderr appended to `log`.
    ///
    /// The child also gets `PR_SET_PDEATHSIG = SIGKILL`, so even a SIGKILL of lockbench itself
    /// (which runs no destructors) does not leave a server behind.
    pub fn spawn(name: &str, mut cmd: Command, log: &Path) -> Result<Self, ClusterError> {
        let out = File::create(log)
            .map_err(|e| ClusterError::io(format!("create {}", log.display()), e))?;
        let err = out
            .try_clone()
            .map_err(|e| ClusterError::io("clone log handle", e))?;
        cmd.stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0);
        // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
        unsafe {
            cmd.pre_exec(|| {
                nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)
            });
        }
        let program = cmd.get_program().to_string_lossy().into_owned();
        let child = cmd.spawn().map_err(|e| ClusterError::Spawn {
            node: name.to_string(),
            program,
            source: e,
        })?;
        Ok(Self {
            name: name.to_string(),
            child,
            log: log.to_path_buf(),
        })
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
        // The group id equals the child's pid because of `process_group(0)`.
        let _ = killpg(Pid::from_raw(self.child.id() as i32), Signal::SIGKILL);
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

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The last `lines` lines of a log file, for error messages.
pub fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
