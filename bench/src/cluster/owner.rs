//! Which process owns what a run leaves on the machine (its temp folder, its network's
//! bridge), so the next start can tell a SIGKILLed run's leftovers from a live run's. A pid
//! alone is not enough: the kernel reuses it, so the owner is the pid and its start time.

use std::fmt;
use std::path::Path;

/// The file in a run's temp folder that names its owner.
pub const OWNER_FILE: &str = "lockbench-owner";

/// A process: its pid and its start time (clock ticks after boot, `/proc/<pid>/stat`'s 22nd
/// field). `start` is `None` for an owner recorded by pid alone (a bridge of an older build).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    pub pid: u32,
    pub start: Option<u64>,
}

impl Owner {
    /// This process.
    pub fn me() -> Self {
        let pid = std::process::id();
        Self {
            pid,
            start: start_time(pid),
        }
    }

    /// Whether the process still runs: its pid exists and, when known, started when it did.
    pub fn alive(&self) -> bool {
        match self.start {
            Some(start) => start_time(self.pid) == Some(start),
            None => Path::new(&format!("/proc/{}", self.pid)).exists(),
        }
    }

    /// Reads `pid=N start=T` (or `pid=N`), as [`Display`](fmt::Display) writes it.
    pub fn parse(text: &str) -> Option<Self> {
        let mut words = text.split_whitespace();
        let pid = words.next()?.strip_prefix("pid=")?.parse().ok()?;
        let start = match words.next() {
            Some(w) => Some(w.strip_prefix("start=")?.parse().ok()?),
            None => None,
        };
        Some(Self { pid, start })
    }

    /// Records this process as the owner of folder `dir`.
    pub fn mark(dir: &Path) -> std::io::Result<()> {
        std::fs::write(dir.join(OWNER_FILE), format!("{}\n", Self::me()))
    }

    /// The owner recorded in folder `dir`, if any.
    pub fn of_folder(dir: &Path) -> Option<Self> {
        Self::parse(&std::fs::read_to_string(dir.join(OWNER_FILE)).ok()?)
    }
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pid={}", self.pid)?;
        match self.start {
            Some(s) => write!(f, " start={s}"),
            None => Ok(()),
        }
    }
}

/// The start time of process `pid`, if it runs.
fn start_time(pid: u32) -> Option<u64> {
    super::procfs::stat(pid).map(|s| s.start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_reused_pid_is_not_its_owner() {
        let me = Owner::me();
        assert!(me.start.is_some());
        assert!(me.alive());
        assert_eq!(Owner::parse(&me.to_string()), Some(me));
        let reused = Owner {
            start: me.start.map(|s| s + 1),
            ..me
        };
        assert!(!reused.alive());
        // An old bridge's owner by pid alone.
        let by_pid = Owner::parse("pid=1").unwrap();
        assert_eq!(by_pid.start, None);
        assert!(by_pid.alive());
        assert_eq!(Owner::parse("pid=x"), None);
        assert_eq!(Owner::parse("pid=1 begun=3"), None);
    }

    #[test]
    fn a_dead_process_is_not_alive() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let owner = Owner {
            pid: child.id(),
            start: None,
        };
        child.wait().unwrap();
        assert!(!owner.alive());
    }
}
